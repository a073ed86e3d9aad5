// SPDX-License-Identifier: Apache-2.0
/*
 * network.c - what a sandbox's network costs: its
 * setup per clone, warm handouts with network = nat beside network = none,
 * guest -> host TCP throughput and round trips, and policy updates.
 *
 * Setup: the daemon times each clone's network (namespace, veth, TAP,
 * addresses, routes, eBPF programs and maps) as restore.network_ms of the
 * create's answer (pool/API.md); it is made before the VMM starts, while
 * the clone is restored for the warm pool, so a warm handout should not
 * pay it.  The handouts say whether it does: the handout scenario's rounds
 * (handout_rounds) on a template with network = nat, then on one with
 * network = none, a daemon each, one after the other at every concurrency,
 * on the run's state directory (the two templates have snapshots of their
 * own: the device is in the snapshot).
 *
 * Traffic: the guest may not reach the host itself, other sandboxes or
 * private ranges (policy.h), so the bench makes a host of its own: a
 * network namespace (SINK_NS) joined to the host by a veth, at 198.18.0.10
 * (RFC 2544's benchmarking range), whose servers are sockets of this
 * process, opened in that namespace.  The sandbox's policy opens that /24
 * alone (allow_out, no internet).  A byte from the guest goes: the guest's
 * virtio-net -> thaw-vmm -> tap0 in the sandbox's namespace (the eBPF
 * policy and 1:1 NAT on its ingress) -> veth0 -> the host's end of it ->
 * the host's forwarding and the daemon's masquerade -> SINK_VETH -> the
 * sink's namespace.  Throughput is an HTTP POST of a file in the guest's
 * memory by busybox wget (which writes it in large writes; nc, a KiB at a
 * time, would measure itself), its body timed by the sink from its first
 * byte to its last; a round trip is one byte the host writes and the
 * guest's nc echoes back (through a fifo from its stdout to its stdin),
 * timed by the host: TCP both ways, and the guest's userspace in each
 * round trip as in any echo.
 *
 * Policy updates: POST /sandboxes/{id}/network on that sandbox, timed by
 * the client, with one CIDR new each time and with both lists (64 CIDRs
 * each, the most a list holds) new each time; the daemon's own time for
 * the map writes is its thaw_network_policy_update_seconds histogram,
 * whose mean over each batch is read from /metrics before and after.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <arpa/inet.h>

#include "bench/bench.h"
#include "common/clock.h"

#define GROUP "network"
#define IP "/usr/sbin/ip"
#define SINK_NS "thawbench-sink"
#define SINK_VETH "thawbench0"
#define SINK_GATEWAY "198.18.0.1" /* the host's end of SINK_VETH */
#define SINK_ADDR "198.18.0.10"
#define SINK_CIDR "198.18.0.0/24"
#define SINK_PORT 5001
#define ECHO_PORT 5002
#define GUEST_WAIT_S 600 /* a guest command, or a connection from one */
#define GOAL_NOTE "the goals on VMX/SVM"
#define LIST_MAX 64 /* CIDRs in a policy's list, at most (pool/API.md) */

/* ---- the sink's namespace ----------------------------------------------- */

/* Runs `ip @args...`; 0, or -1 with its message in @err. */
static int ip(char *err, size_t errlen, const char *const *args)
{
	char *argv[16] = { IP };
	char out[512];
	int n = 1;

	while (args[n - 1] && n < 15) {
		argv[n] = (char *)args[n - 1];
		n++;
	}
	argv[n] = NULL;
	int status = bench_run_capture(argv, 2, out, sizeof(out));
	if (!status)
		return 0;
	out[strcspn(out, "\n")] = '\0';
	snprintf(err, errlen, "ip %s %s: %s", args[0], args[1] ? args[1] : "",
		 status < 0 ? "cannot run " IP : out);
	return -1;
}

/* The sink's veth and namespace gone, also a crashed run's. */
static void sink_remove(void)
{
	char err[256];

	ip(err, sizeof(err),
	   (const char *[]){ "link", "del", SINK_VETH, NULL });
	ip(err, sizeof(err), (const char *[]){ "netns", "del", SINK_NS, NULL });
}

/* SINK_NS with SINK_ADDR, routed back through the host's end of its veth. */
static int sink_make(char *err, size_t errlen)
{
	static const char *const steps[][12] = {
		{ "netns", "add", SINK_NS },
		{ "link", "add", SINK_VETH, "type", "veth", "peer", "name",
		  "eth0", "netns", SINK_NS },
		{ "addr", "add", SINK_GATEWAY "/24", "dev", SINK_VETH },
		{ "link", "set", SINK_VETH, "up" },
		{ "-n", SINK_NS, "addr", "add", SINK_ADDR "/24", "dev",
		  "eth0" },
		{ "-n", SINK_NS, "link", "set", "eth0", "up" },
		{ "-n", SINK_NS, "link", "set", "lo", "up" },
		{ "-n", SINK_NS, "route", "add", "default", "via",
		  SINK_GATEWAY },
	};

	sink_remove();
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
		if (ip(err, errlen, steps[i])) {
			sink_remove();
			return -1;
		}
	return 0;
}

struct listeners {
	int fd[2]; /* SINK_PORT, ECHO_PORT */
	char err[256];
};

/* A thread's: it joins SINK_NS (a thread may), where its sockets stay. */
static void *listen_in_sink(void *arg)
{
	struct listeners *l = arg;
	static const uint16_t ports[2] = { SINK_PORT, ECHO_PORT };
	int ns = open("/run/netns/" SINK_NS, O_RDONLY | O_CLOEXEC);

	if (ns < 0 || setns(ns, CLONE_NEWNET)) {
		snprintf(l->err, sizeof(l->err), "joining %s: %s", SINK_NS,
			 strerror(errno));
		if (ns >= 0)
			close(ns);
		return NULL;
	}
	close(ns);
	for (int i = 0; i < 2; i++) {
		struct sockaddr_in a = { .sin_family = AF_INET,
					 .sin_port = htons(ports[i]) };
		int one = 1;

		inet_pton(AF_INET, SINK_ADDR, &a.sin_addr);
		l->fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (l->fd[i] < 0 ||
		    setsockopt(l->fd[i], SOL_SOCKET, SO_REUSEADDR, &one,
			       sizeof(one)) ||
		    bind(l->fd[i], (struct sockaddr *)&a, sizeof(a)) ||
		    listen(l->fd[i], 4)) {
			snprintf(l->err, sizeof(l->err), "%s:%u: %s", SINK_ADDR,
				 ports[i], strerror(errno));
			return NULL;
		}
	}
	return NULL;
}

/* ---- the host's side of a transfer or of the round trips ---------------- */

struct server {
	int listen_fd;
	atomic_bool give_up; /* the guest's command ended without connecting */
	/* a transfer's: */
	long long want, got;
	double first_ms, last_ms;
	/* the round trips': */
	int round_trips;
	struct samples *rtt;
	char err[256];
};

/* The guest's connection, or -1 once give_up is set or time ran out. */
static int accept_guest(struct server *s)
{
	double until = monotonic_ms() + GUEST_WAIT_S * 1e3;
	struct pollfd p = { .fd = s->listen_fd, .events = POLLIN };
	struct timeval limit = { .tv_sec = 60 };

	while (!atomic_load(&s->give_up) && monotonic_ms() < until)
		if (poll(&p, 1, 100) == 1) {
			int fd =
				accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);

			if (fd >= 0)
				setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit,
					   sizeof(limit));
			return fd;
		}
	snprintf(s->err, sizeof(s->err), "no connection from the guest");
	return -1;
}

/*
 * Takes an HTTP POST of s->want bytes, timing its body from the first
 * byte to the last, then answers it and closes.
 */
static void *sink(void *arg)
{
	static const char
		end_of_head[] = "\r\n\r\n",
		answer[] = "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n";
	struct server *s = arg;
	static char buf[1 << 18];
	int fd = accept_guest(s);
	size_t matched = 0; /* of end_of_head, so far */

	while (fd >= 0 && s->got < s->want) {
		ssize_t n = read(fd, buf, sizeof(buf)), at = 0;

		if (n <= 0) {
			snprintf(s->err, sizeof(s->err),
				 "the guest's request ended after %lld of %lld "
				 "bytes of its body%s%s",
				 s->got, s->want, n ? ": " : "",
				 n ? strerror(errno) : "");
			break;
		}
		/* The request's head is not timed: its body starts after
		 * its empty line. */
		while (matched < 4 && at < n) {
			char ch = buf[at++];

			matched = ch == end_of_head[matched] ? matched + 1
							     : ch == '\r';
		}
		if (at == n)
			continue;
		s->last_ms = monotonic_ms();
		if (!s->got)
			s->first_ms = s->last_ms;
		s->got += n - at;
	}
	if (fd >= 0 && s->got >= s->want &&
	    write(fd, answer, sizeof(answer) - 1) < 0)
		snprintf(s->err, sizeof(s->err), "answering the guest: %s",
			 strerror(errno));
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* Writes a byte, times its echo, s->round_trips times, then closes. */
static void *echo_timer(void *arg)
{
	struct server *s = arg;
	int fd = accept_guest(s), one = 1;

	if (fd >= 0)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	for (int i = 0; fd >= 0 && i < s->round_trips; i++) {
		char byte = (char)('a' + i % 26), back;
		double start = monotonic_ms();

		if (write(fd, &byte, 1) != 1 || read(fd, &back, 1) != 1 ||
		    back != byte) {
			snprintf(s->err, sizeof(s->err),
				 "round trip %d: no echo from the guest", i);
			break;
		}
		samples_add(s->rtt, monotonic_ms() - start);
	}
	if (fd >= 0)
		close(fd);
	return NULL;
}

/* ---- the guest's side ---------------------------------------------------- */

struct guest_result {
	bool exited_zero;
	char output[512]; /* its stderr's first bytes, to say what failed */
	size_t len;
};

static int take_result(const struct thaw_exec_event *e, void *arg, char *err,
		       size_t errlen)
{
	struct guest_result *g = arg;

	(void)err;
	(void)errlen;
	if (e->type == THAW_EXEC_STDERR || e->type == THAW_EXEC_STDOUT) {
		size_t room = sizeof(g->output) - 1 - g->len;
		size_t n = e->len < room ? e->len : room;

		memcpy(g->output + g->len, e->data, n);
		g->len += n;
		g->output[g->len] = '\0';
	}
	if (e->type == THAW_EXEC_EXIT)
		g->exited_zero = !e->exit_code && !e->signal && !e->timed_out;
	return 0;
}

/*
 * `sh -c @script` in sandbox @id while @serve(@s) takes the host's side in
 * a thread; 0, or -1 with @err from whichever side failed first.
 */
static int guest_and_host(struct thaw_client *c, const char *id,
			  const char *script, void *(*serve)(void *),
			  struct server *s, char *err, size_t errlen)
{
	const char *const argv[] = { "sh", "-c", script, NULL };
	const struct thaw_exec spec = { .argv = argv,
					.buffered = true,
					.timeout_s = GUEST_WAIT_S };
	struct guest_result g = { 0 };
	pthread_t host;

	atomic_store(&s->give_up, false);
	s->err[0] = '\0';
	pthread_create(&host, NULL, serve, s);
	int ret = thaw_client_exec(c, id, &spec, take_result, &g, err, errlen);
	atomic_store(&s->give_up, true);
	pthread_join(host, NULL);
	if (ret)
		return -1;
	if (s->err[0]) {
		snprintf(err, errlen, "%s; the guest's `%s`: %s%s", s->err,
			 script,
			 g.exited_zero ? "exit 0; " : "failed: ", g.output);
		return -1;
	}
	return 0;
}

/* ---- traffic and policy updates on one sandbox -------------------------- */

/* @n transfers of @mib MiB from the guest, each one's Mbit/s into @s. */
static int measure_throughput(struct thaw_client *c, const char *id,
			      int listen_fd, int n, int mib, struct samples *s,
			      char *err, size_t errlen)
{
	char script[320];

	/* wget sends a --post-file from memory, in large writes (nc would
	 * write a KiB at a time); it reads the file as a string, so no
	 * zeros.  The file is made once, before the first transfer's
	 * timing starts. */
	snprintf(script, sizeof(script),
		 "[ -s /tmp/blob ] || dd if=/dev/zero bs=64k count=%d "
		 "2>/dev/null | tr '\\000' x >/tmp/blob && "
		 "wget -q -O /dev/null --post-file /tmp/blob http://%s:%d/",
		 mib * 16, SINK_ADDR, SINK_PORT);
	for (int i = 0; i < n; i++) {
		struct server srv = { .listen_fd = listen_fd,
				      .want = (long long)mib << 20 };

		if (guest_and_host(c, id, script, sink, &srv, err, errlen))
			return -1;
		double seconds = (srv.last_ms - srv.first_ms) / 1e3;
		if (seconds > 0)
			samples_add(s, (double)srv.got * 8 / seconds / 1e6);
	}
	return 0;
}

/* @n TCP round trips between the host and the guest's echo into @s. */
static int measure_round_trips(struct thaw_client *c, const char *id,
			       int listen_fd, int n, struct samples *s,
			       char *err, size_t errlen)
{
	struct server srv = { .listen_fd = listen_fd,
			      .round_trips = n,
			      .rtt = s };
	char script[160];

	/* The fifo opened read-write first, so neither open waits. */
	snprintf(script, sizeof(script),
		 "rm -f /tmp/echo && mkfifo /tmp/echo && "
		 "nc %s %d <>/tmp/echo >/tmp/echo",
		 SINK_ADDR, ECHO_PORT);
	return guest_and_host(c, id, script, echo_timer, &srv, err, errlen);
}

/* The daemon's policy_update histogram of template @name: sum and count. */
static int policy_histogram(struct thaw_client *c, const char *name,
			    double *sum, double *count, char *err,
			    size_t errlen)
{
	const struct thaw_call q = { .method = "GET", .path = "/metrics" };
	struct thaw_reply r = { 0 };
	char key[2][128];
	double *into[2] = { sum, count };
	int found = 0;

	snprintf(key[0], sizeof(key[0]),
		 "thaw_network_policy_update_seconds_sum{template=\"%s\"} ",
		 name);
	snprintf(key[1], sizeof(key[1]),
		 "thaw_network_policy_update_seconds_count{template=\"%s\"} ",
		 name);
	if (thaw_client_call(c, &q, &r, err, errlen) || r.status != 200) {
		if (r.status)
			snprintf(err, errlen, "GET /metrics: status %ld",
				 r.status);
		thaw_reply_free(&r);
		return -1;
	}
	for (int i = 0; i < 2; i++) {
		const char *at = strstr(r.body, key[i]);

		if (at) {
			*into[i] = strtod(at + strlen(key[i]), NULL);
			found++;
		}
	}
	thaw_reply_free(&r);
	if (found < 2)
		snprintf(err, errlen,
			 "GET /metrics has no "
			 "thaw_network_policy_update_seconds for template %s",
			 name);
	return found < 2 ? -1 : 0;
}

/* One kind of policy write and what it measured. */
struct policy_writes {
	const char *label, *what;
	bool whole_lists; /* else one CIDR new each time */
	struct samples client;
	double daemon_mean_ms; /* < 0: not known */
	char why[1024];	       /* what stopped it, or "" */
};

/*
 * Policy @k of @w's kind into @allow and @deny (NULL-terminated, their
 * text in @text): the sink's /24 and one CIDR new each time, or both lists
 * full with every CIDR new each time.  The maps keep two generations and
 * write what differs from the idle one, so "new" is against policy @k - 2.
 */
static void policy_for(const struct policy_writes *w, int k,
		       char text[2][LIST_MAX][24], const char *allow[],
		       const char *deny[])
{
	int n = w->whole_lists ? LIST_MAX : 1;

	for (int i = 0; i < n; i++) {
		snprintf(text[0][i], sizeof(text[0][i]), "10.%d.%d.0/24",
			 k % 200, i);
		snprintf(text[1][i], sizeof(text[1][i]), "11.%d.%d.0/24",
			 k % 200, i);
		allow[i] = text[0][i];
		deny[i] = text[1][i];
	}
	if (w->whole_lists) {
		allow[n] = deny[n] = NULL;
	} else {
		allow[1] = SINK_CIDR;
		allow[2] = deny[0] = NULL;
	}
}

static void measure_policy_writes(struct thaw_client *c, const char *template,
				  const char *id, int n,
				  struct policy_writes *w)
{
	char text[2][LIST_MAX][24];
	const char *allow[LIST_MAX + 1], *deny[LIST_MAX + 1];
	double sum[2], count[2];
	char why[256];

	w->daemon_mean_ms = -1;
	if (policy_histogram(c, template, &sum[0], &count[0], w->why,
			     sizeof(w->why)))
		return;
	for (int k = 0; k < n; k++) {
		policy_for(w, k, text, allow, deny);
		const struct thaw_network policy = { .allow_internet = 0,
						     .allow_out = allow,
						     .deny_out = deny };
		double start = monotonic_ms();

		if (thaw_client_set_network(c, id, &policy, NULL, w->why,
					    sizeof(w->why)))
			break;
		samples_add(&w->client, monotonic_ms() - start);
	}
	if (!policy_histogram(c, template, &sum[1], &count[1], why,
			      sizeof(why)) &&
	    count[1] > count[0])
		w->daemon_mean_ms =
			(sum[1] - sum[0]) / (count[1] - count[0]) * 1e3;
	else if (!w->why[0])
		snprintf(w->why, sizeof(w->why), "%s", why);
}

static void report_policy_writes(struct bench *b, struct policy_writes *w)
{
	char name[128], text[1400];

	snprintf(name, sizeof(name), "policy update, %s: round trip", w->label);
	if (!w->client.n) {
		bench_fail(b, GROUP, name, w->why);
	} else {
		bench_note(
			b, text, sizeof(text),
			"POST /sandboxes/{id}/network sent -> answered, by the "
			"client; %s; %s: < 1 ms%s%s",
			w->what, GOAL_NOTE,
			w->why[0] ? "; stopped early: " : "", w->why);
		report_add_samples(b->report, GROUP, name, "ms", &w->client,
				   text);
	}
	snprintf(name, sizeof(name), "policy update, %s: map writes (mean)",
		 w->label);
	if (w->daemon_mean_ms < 0) {
		bench_fail(b, GROUP, name,
			   w->why[0] ? w->why : "no update was counted");
		return;
	}
	bench_note(
		b, text, sizeof(text),
		"the daemon's thaw_network_policy_update_seconds over the %zu "
		"updates above (its mean: a histogram has no samples); %s",
		w->client.n, w->what);
	report_add_value(b->report, GROUP, name, "ms", w->daemon_mean_ms, text);
}

/*
 * A daemon with one networked template, a sandbox of it whose policy
 * opens SINK_CIDR alone: throughput, round trips, then policy writes.
 */
static void network_traffic(struct bench *b)
{
	static const char *const sink_only[] = { SINK_CIDR, NULL };
	const struct thaw_network policy = { .allow_internet = 0,
					     .allow_out = sink_only };
	const struct template_spec t = { .name = "traffic",
					 .mem_mib = TEMPLATE_MEM_MIB,
					 .min_ready = 0,
					 .max_total = 1,
					 .network = "nat" };
	const struct daemon_spec spec = { .max_sandboxes = 4 };
	const char *tput = "guest -> host TCP throughput",
		   *rtt = "guest <-> host TCP round trip";
	struct policy_writes writes[2] = {
		{ .label = "one CIDR changed",
		  .what = "allow_out: the sink's /24 and one /24 new each "
			  "time" },
		{ .label = "whole lists",
		  .what = "allow_out and deny_out of 64 CIDRs each (a "
			  "list's most), every one new each time",
		  .whole_lists = true },
	};
	struct listeners l = { .fd = { -1, -1 } };
	struct samples mbits = { 0 }, rtts = { 0 };
	char why[1024] = "", rtt_why[1024] = "", text[1600];
	struct thaw_client *c = NULL;
	struct thaw_sandbox s = { 0 };
	struct thawd d = { 0 };
	pthread_t opener;

	bench_progress(
		"network: %d transfers of %d MiB, %d round trips, %d policy "
		"updates of each kind",
		b->size->transfers, b->size->transfer_mib, b->size->round_trips,
		b->size->policy_writes);
	if (sink_make(why, sizeof(why)))
		goto report;
	pthread_create(&opener, NULL, listen_in_sink, &l);
	pthread_join(opener, NULL);
	if (l.err[0]) {
		snprintf(why, sizeof(why), "%s", l.err);
		goto report;
	}
	if (bench_start_daemon(b, &d, &t, 1, &spec, why, sizeof(why)))
		goto report;
	if (!(c = thawd_connect(&d, why, sizeof(why))) ||
	    thaw_client_create(c,
			       &(const struct thaw_create){
				       .template = t.name, .network = &policy },
			       &s, why, sizeof(why)))
		goto report;
	measure_throughput(c, s.id, l.fd[0], b->size->transfers,
			   b->size->transfer_mib, &mbits, why, sizeof(why));
	measure_round_trips(c, s.id, l.fd[1], b->size->round_trips, &rtts,
			    rtt_why, sizeof(rtt_why));
	for (int i = 0; i < 2; i++)
		measure_policy_writes(c, t.name, s.id, b->size->policy_writes,
				      &writes[i]);
report:
	if (!rtt_why[0] && !rtts.n)
		snprintf(rtt_why, sizeof(rtt_why), "%s", why);
	for (int i = 0; i < 2; i++)
		if (!writes[i].why[0] && !writes[i].client.n)
			snprintf(writes[i].why, sizeof(writes[i].why), "%s",
				 why);
	if (mbits.n) {
		bench_note(
			b, text, sizeof(text),
			"an HTTP POST of %d MiB from the guest's memory (busybox "
			"wget) to a socket in a namespace of the bench's (%s), "
			"its body timed there from the first byte to the last: "
			"virtio-net, tap0 and its eBPF policy, veth, the host's "
			"forwarding and masquerade; %s: >= 5 Gbit/s%s%s",
			b->size->transfer_mib, SINK_ADDR, GOAL_NOTE,
			why[0] ? "; stopped early: " : "", why);
		report_add_samples(b->report, GROUP, tput, "Mbit/s", &mbits,
				   text);
	} else {
		bench_fail(b, GROUP, tput, why);
	}
	if (rtts.n) {
		bench_note(
			b, text, sizeof(text),
			"one byte written by the host (%s) -> echoed by the "
			"guest's nc through a fifo -> read, timed by the host; "
			"the same path as the throughput's, both ways%s%s",
			SINK_ADDR, rtt_why[0] ? "; stopped early: " : "",
			rtt_why);
		report_add_samples(b->report, GROUP, rtt, "ms", &rtts, text);
	} else {
		bench_fail(b, GROUP, rtt, rtt_why);
	}
	for (int i = 0; i < 2; i++) {
		report_policy_writes(b, &writes[i]);
		samples_free(&writes[i].client);
	}
	if (c && s.id[0])
		thaw_client_delete(c, s.id, why, sizeof(why));
	thaw_client_close(c);
	if (d.proc.pid > 0)
		bench_stop_daemon(&d);
	for (int i = 0; i < 2; i++)
		if (l.fd[i] >= 0)
			close(l.fd[i]);
	sink_remove();
	samples_free(&mbits);
	samples_free(&rtts);
}

/* ---- setup, and warm handouts with and without a network ---------------- */

/*
 * Warm handouts of a template with @network ("nat" or "none") at
 * concurrency @n, as the handout scenario's, into @s; the daemon's
 * restores of the clones handed out into @restores.  "" in @why, or what
 * stopped them.
 */
static void handouts_with(struct bench *b, const char *network, int n,
			  struct samples *s, struct restore_samples *restores,
			  char *why, size_t whylen)
{
	const struct template_spec t = { .name = network,
					 .mem_mib = TEMPLATE_MEM_MIB,
					 .min_ready = (unsigned)n,
					 .max_total = (unsigned)n * 2,
					 .network = network };
	const struct daemon_spec spec = { .max_sandboxes =
						  (unsigned)n * 2 + 8 };
	struct thawd d;

	why[0] = '\0';
	bench_progress("network: warm pool, network = %s, concurrency %d, %d "
		       "handouts",
		       network, n, b->size->handouts);
	if (bench_start_daemon(b, &d, &t, 1, &spec, why, whylen))
		return;
	bench_handout_rounds(&d, network, n, b->size->handouts, n, UNTIL_PING,
			     s, restores, why, whylen);
	bench_stop_daemon(&d);
}

static void report_handouts(struct bench *b, const char *network, int n,
			    const struct samples *s, const char *why)
{
	char name[96], text[1400];

	snprintf(name, sizeof(name), "warm pool, network = %s, concurrency %d",
		 network, n);
	if (!s->n) {
		bench_fail(b, GROUP, name, why);
		return;
	}
	bench_note(b, text, sizeof(text),
		   "create request sent -> agent answered a ping%s%s",
		   why[0] ? "; stopped early: " : "", why);
	report_add_samples(b->report, GROUP, name, "ms", s, text);
}

static void network_handouts(struct bench *b)
{
	enum { NAT, NONE, MODES };
	static const char *const modes[MODES] = { "nat", "none" };

	for (int i = 0; i < 3; i++) {
		int n = b->size->concurrency[i];
		struct samples s[MODES];
		struct restore_samples restores[MODES];
		char why[MODES][1024], name[96], text[1400];

		memset(s, 0, sizeof(s));
		memset(restores, 0, sizeof(restores));

		for (int m = 0; m < MODES; m++)
			handouts_with(b, modes[m], n, &s[m], &restores[m],
				      why[m], sizeof(why[m]));
		if (!i) { /* the refills came one at a time */
			if (restores[NAT].network.n) {
				bench_note(
					b, text, sizeof(text),
					"restore.network_ms of the clones handed "
					"out at concurrency 1 below: namespace, "
					"veth, TAP, addresses, routes, eBPF "
					"programs attached and maps filled, "
					"before the VMM starts, while the clone "
					"is restored for the warm pool (the "
					"masquerade is the daemon's, made once)");
				report_add_samples(b->report, GROUP,
						   "network setup per clone",
						   "ms", &restores[NAT].network,
						   text);
			} else {
				bench_fail(b, GROUP, "network setup per clone",
					   why[NAT]);
			}
		}
		for (int m = 0; m < MODES; m++)
			report_handouts(b, modes[m], n, &s[m], why[m]);
		snprintf(name, sizeof(name),
			 "nat - none: warm handout, concurrency %d (P50)", n);
		if (s[NAT].n && s[NONE].n) {
			struct summary nat, none;

			samples_summarize(&s[NAT], &nat);
			samples_summarize(&s[NONE], &none);
			bench_note(
				b, text, sizeof(text),
				"P50 network = nat %.2f ms - P50 network = none "
				"%.2f ms; %s: nothing added",
				nat.p50, none.p50, GOAL_NOTE);
			report_add_value(b->report, GROUP, name, "ms",
					 nat.p50 - none.p50, text);
		} else {
			bench_fail(b, GROUP, name,
				   "needs both templates' figures (above)");
		}
		for (int m = 0; m < MODES; m++) {
			samples_free(&s[m]);
			bench_restore_samples_free(&restores[m]);
		}
	}
}

void bench_network(struct bench *b)
{
	network_traffic(b);
	network_handouts(b);
}
