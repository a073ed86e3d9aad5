// SPDX-License-Identifier: Apache-2.0
/*
 * test_api.c - thawd's HTTP API (pool/daemon/api*.c) served for real by
 * api_start() on a Unix socket, with no VM: one leased sandbox whose
 * "VMM's vsock socket" is a fake agent in a thread of this test, which
 * speaks guest/PROTOCOL.md as a hostile guest would.  What is checked is
 * what a client or a guest can make the daemon hold: the memory budget
 * (api_memory_budget_bytes) taken while bodies are parsed and replies sent,
 * and given back to the byte; requests that end however the guest floods.
 * Criterion's .timeout turns a request that never ends into a failure.
 * The network routes are checked here too, on a sandbox without a network,
 * on one whose network is a record only (no maps), and, as root, on one
 * with a network made for real (netns.h), which makes interfaces: run
 * test_api under the VM lock (flock /tmp/thaw-vm.lock).  The connection
 * limits are checked on a TCP listener too (the E2B listener's case),
 * where local clients are told apart by uid (http_peer_uid.c).
 *
 * The E2B listener (pool/e2b/) is served the same way, on a loopback port,
 * the sandbox an E2B one (an access token of its own): envd's processes
 * within their caps however many starts race, answers that tell nothing of
 * a sandbox's existence without credentials, /files URLs found by their
 * signature alone, nothing a client sends hashed under the daemon's lock
 * (this executable's sha256_update sees who calls it), and a body too
 * large answered as its route's protocol has it.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nettle/sha2.h>
#include <netinet/in.h>

#include "pool/daemon/api.h"
#include "common/base64.h"
#include "common/clock.h"
#include "pool/daemon/daemon.h"
#include "pool/e2b/e2b_internal.h"
#include "common/io.h"
#include "pool/http/http_peer_uid.h"
#include "guest/protocol.h"

#define SANDBOX_ID "0123456789abcdef"
#define EXEC_PATH "/sandboxes/" SANDBOX_ID "/exec"
#define FILE_PATH "/sandboxes/" SANDBOX_ID "/files?path=/x"
#define PAD_TAG 999 /* a TLV no schema knows: parsers skip it */
#define FLOOD_CHUNK (60u << 10)
#define SILENCE_S 3 /* GUEST_EXEC_SILENT's; past idle_timeout_s = 1 */

/* What the fake agent does with a request. */
enum guest_mode {
	GUEST_EXEC_OUTPUT,	/* exec: guest_output bytes of stdout, exit 0 */
	GUEST_EXEC_SILENT,	/* exec: nothing for SILENCE_S, then exit 0 */
	GUEST_EXEC_FLOOD,	/* exec: endless stdout, KILL ignored */
	GUEST_EXEC_PADDED,	/* exec: endless empty stdout, padded */
	GUEST_READ_PADDED,	/* READ_FILE: endless empty DATA, padded */
	GUEST_READ_FOREIGN_IDS, /* READ_FILE: endless DATA of another id */
	/* Each connection served on its own thread; exec: started after
	 * HELD_START_MS, then running until the daemon hangs up. */
	GUEST_EXEC_HELD,
	GUEST_READ_FILE, /* READ_FILE: FILE_TEXT, then END */
};
#define HELD_START_MS 300
#define FILE_TEXT "a file of the sandbox's"

static struct daemon d;
static struct pool pool;
static struct template_config tmpl;
static struct sandbox sandbox;
static struct http_server *server;
#define DIR_TEMPLATE "/tmp/test_api.XXXXXX"
static char dir[sizeof(DIR_TEMPLATE)];
static char api_path[108];
static struct sockaddr_storage api_addr; /* connect_api()'s */
static socklen_t api_addr_len;
static int agent_listen = -1;
static pthread_t agent_thread;
static enum guest_mode guest_mode;
static size_t guest_output;
static atomic_bool agent_closed; /* the daemon closed the last connection */

static void send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		p += n;
		len -= (size_t)n;
	}
}

/* Each agent thread its own: GUEST_EXEC_HELD serves connections at once. */
static _Thread_local uint8_t frame[THAW_MAX_FRAME];

/* Sends one frame of @type with @data in a DATA field (NULL: none) and
 * @pad bytes of an unknown field; false once the daemon hung up. */
static bool send_frame(int fd, uint32_t id, uint16_t type, const void *data,
		       size_t len, size_t pad)
{
	static uint8_t junk[FLOOD_CHUNK];
	struct thaw_writer w;

	thaw_writer_init(&w, frame, sizeof(frame), id, type, 0);
	switch (type) {
	case THAW_HELLO:
		thaw_put_u32(&w, THAW_T_VERSION, THAW_PROTOCOL_VERSION);
		thaw_put_str(&w, THAW_T_AGENT_VERSION, "test_api");
		thaw_put_str(&w, THAW_T_BOOT_ID, "boot");
		break;
	case THAW_EXEC_STARTED:
		thaw_put_u32(&w, THAW_T_PID, 42);
		break;
	case THAW_EXIT:
		thaw_put_u32(&w, THAW_T_EXIT_CODE, 0);
		thaw_put_u8(&w, THAW_T_TIMED_OUT, 0);
		break;
	case THAW_END:
		thaw_put_u64(&w, THAW_T_SIZE, len);
		break;
	default:
		thaw_put_bytes(&w, THAW_T_DATA, data, (uint32_t)len);
	}
	if (pad)
		thaw_put_bytes(&w, PAD_TAG, junk, (uint32_t)pad);
	int n = thaw_writer_finish(&w);
	cr_assert_gt(n, 0);
	return send(fd, frame, (size_t)n, MSG_NOSIGNAL) == n;
}

static void serve_exec(int fd, uint32_t id)
{
	static uint8_t out[FLOOD_CHUNK];

	memset(out, 'o', sizeof(out));
	if (guest_mode == GUEST_EXEC_HELD)
		usleep(HELD_START_MS * 1000);
	send_frame(fd, id, THAW_EXEC_STARTED, NULL, 0, 0);
	if (guest_mode == GUEST_EXEC_HELD)
		return;
	if (guest_mode == GUEST_EXEC_SILENT)
		sleep(SILENCE_S);
	if (guest_mode == GUEST_EXEC_FLOOD) {
		while (send_frame(fd, id, THAW_STDOUT, out, sizeof(out), 0))
			;
		return;
	}
	if (guest_mode == GUEST_EXEC_PADDED) {
		while (send_frame(fd, id, THAW_STDOUT, out, 0, FLOOD_CHUNK))
			;
		return;
	}
	for (size_t sent = 0; sent < guest_output;) {
		size_t n = guest_output - sent < sizeof(out)
				   ? guest_output - sent
				   : sizeof(out);
		send_frame(fd, id, THAW_STDOUT, out, n, 0);
		sent += n;
	}
	send_frame(fd, id, THAW_EXIT, NULL, 0, 0);
}

static void serve_read(int fd, uint32_t id)
{
	if (guest_mode == GUEST_READ_FILE) {
		send_frame(fd, id, THAW_DATA, FILE_TEXT, strlen(FILE_TEXT), 0);
		send_frame(fd, id, THAW_END, NULL, strlen(FILE_TEXT), 0);
		return;
	}
	if (guest_mode == GUEST_READ_PADDED)
		while (send_frame(fd, id, THAW_DATA, "", 0, FLOOD_CHUNK))
			;
	while (send_frame(fd, id + 1, THAW_DATA, "x", 1, FLOOD_CHUNK))
		;
}

/* One connection from the daemon: the vsock handshake, HELLO, then the
 * request's answer per guest_mode; returns once the daemon hangs up. */
static void serve(int fd)
{
	char line[32];
	struct thaw_reader rd;
	struct thaw_frame f;
	size_t n = 0;

	while (n < sizeof(line) - 1 && read(fd, line + n, 1) == 1 &&
	       line[n++] != '\n')
		;
	send_all(fd, "OK 1\n", 5);
	send_frame(fd, 0, THAW_HELLO, NULL, 0, 0);
	cr_assert_eq(thaw_reader_init(&rd), 0);
	while (thaw_reader_read(&rd, fd, &f) == THAW_READ_FRAME) {
		if (f.h.type == THAW_EXEC)
			serve_exec(fd, f.h.request_id);
		else if (f.h.type == THAW_READ_FILE)
			serve_read(fd, f.h.request_id);
	}
	thaw_reader_free(&rd);
}

static void *serve_held(void *arg)
{
	int fd = (int)(intptr_t)arg;

	serve(fd);
	close(fd);
	return NULL;
}

static void *agent_main(void *arg)
{
	(void)arg;
	for (;;) {
		int fd = accept(agent_listen, NULL, NULL);
		pthread_t t;

		if (fd < 0)
			return NULL;
		if (guest_mode == GUEST_EXEC_HELD &&
		    !pthread_create(&t, NULL, serve_held,
				    (void *)(intptr_t)fd)) {
			pthread_detach(t);
			continue;
		}
		atomic_store(&agent_closed, false);
		serve(fd);
		close(fd);
		atomic_store(&agent_closed, true);
	}
}

static int listen_on(const char *path)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	cr_assert_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	cr_assert_eq(listen(fd, 64), 0);
	return fd;
}

/* @text, a numeric IPv4 or IPv6 address, and @port (network order) in
 * @a; its length. */
static socklen_t ip_address(const char *text, in_port_t port,
			    struct sockaddr_storage *a)
{
	struct sockaddr_in *in = (void *)a;
	struct sockaddr_in6 *in6 = (void *)a;

	memset(a, 0, sizeof(*a));
	if (inet_pton(AF_INET, text, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = port;
		return sizeof(*in);
	}
	cr_assert_eq(inet_pton(AF_INET6, text, &in6->sin6_addr), 1, "%s", text);
	in6->sin6_family = AF_INET6;
	in6->sin6_port = port;
	return sizeof(*in6);
}

/* A TCP socket listening on @host at a port of its own (an IPv6 one
 * dual-stack), which connect_api() reaches at @reach; -1 when this host
 * cannot listen there (no IPv6). */
static int listen_tcp(const char *host, const char *reach)
{
	struct sockaddr_storage a, bound;
	socklen_t len = ip_address(host, 0, &a), bound_len = sizeof(bound);
	int fd = socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), off = 0;

	if (fd < 0)
		return -1;
	if (a.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
	if (bind(fd, (struct sockaddr *)&a, len) || listen(fd, 64)) {
		close(fd);
		return -1;
	}
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&bound, &bound_len), 0);
	api_addr_len =
		ip_address(reach,
			   bound.ss_family == AF_INET
				   ? ((struct sockaddr_in *)&bound)->sin_port
				   : ((struct sockaddr_in6 *)&bound)->sin6_port,
			   &api_addr);
	return fd;
}

/*
 * A daemon of @config_keys ([daemon] lines) serving one leased sandbox, its
 * API on a Unix socket, or with @tcp_host on TCP there (a numeric address)
 * reached at @tcp_reach; skips the test when @tcp_host cannot be had.
 */
static void start_on(const char *config_keys, const char *tcp_host,
		     const char *tcp_reach)
{
	char config[128], err[512];
	int fd = -1;

	if (tcp_host) {
		fd = listen_tcp(tcp_host, tcp_reach);
		if (fd < 0)
			cr_skip_test("cannot listen on TCP %s: %s", tcp_host,
				     strerror(errno));
	}

	signal(SIGPIPE, SIG_IGN);
	memset(&d, 0, sizeof(d));
	atomic_store(&agent_closed, false);
	memcpy(dir, DIR_TEMPLATE, sizeof(dir));
	cr_assert_not_null(mkdtemp(dir));
	snprintf(config, sizeof(config), "%s/thawd.ini", dir);
	FILE *f = fopen(config, "w");
	cr_assert_not_null(f);
	fprintf(f, "[daemon]\nrestore_timeout_s = 5\n%s", config_keys);
	fclose(f);
	cr_assert_eq(config_load(&d.cfg, config, err, sizeof(err)), 0, "%s",
		     err);
	/* Error-checking: only its holder may unlock it, which tells the
	 * E2B tests' hashing watch (sha256_update below) who holds it. */
	pthread_mutexattr_t attr;
	pthread_mutexattr_init(&attr);
	pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
	pthread_mutex_init(&d.lock, &attr);
	pthread_mutexattr_destroy(&attr);
	d.started_ns = monotonic_ns();
	pool.d = &d;
	pool.t = &tmpl;
	tmpl.max_timeout_s = 3600;
	sandbox = (struct sandbox){ .id = SANDBOX_ID,
				    .pool = &pool,
				    .state = SANDBOX_LEASED,
				    .refs = 1, /* ours: never destroyed */
				    .agent = { .fd = -1 } };
	snprintf(sandbox.vmm.vsock, sizeof(sandbox.vmm.vsock), "%s/v.sock",
		 dir);
	sandbox.vmm.pid = 1;
	d.leased = &sandbox;
	agent_listen = listen_on(sandbox.vmm.vsock);
	cr_assert_eq(pthread_create(&agent_thread, NULL, agent_main, NULL), 0);
	if (!tcp_host) {
		struct sockaddr_un *un = (void *)&api_addr;

		snprintf(api_path, sizeof(api_path), "%s/api.sock", dir);
		fd = listen_on(api_path);
		memset(&api_addr, 0, sizeof(api_addr));
		un->sun_family = AF_UNIX;
		snprintf(un->sun_path, sizeof(un->sun_path), "%s", api_path);
		api_addr_len = sizeof(*un);
	}
	server = api_start(&d, fd);
	cr_assert_not_null(server);
}

static void start(const char *config_keys)
{
	start_on(config_keys, NULL, NULL);
}

static void stop(void)
{
	http_stop(server);
	shutdown(agent_listen, SHUT_RDWR);
	pthread_join(agent_thread, NULL);
	close(agent_listen);
	config_free(&d.cfg);
	char cmd[64];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}

/* A connection to the API, nothing sent; -1 when connect() fails. */
static int connect_api(void)
{
	int fd = socket(api_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || connect(fd, (struct sockaddr *)&api_addr, api_addr_len)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/* Sends a request (Content-Length: @len of @body); returns the socket,
 * the answer not yet read. */
static int request(const char *method, const char *path, const char *body,
		   size_t len)
{
	char head[512];
	int fd = connect_api();

	cr_assert_geq(fd, 0);
	int n = snprintf(head, sizeof(head),
			 "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
			 "Content-Length: %zu\r\n\r\n",
			 method, path, len);
	send_all(fd, head, (size_t)n);
	send_all(fd, body, len);
	return fd;
}

/* The whole answer on @fd (closed), NUL-terminated; its status. */
static unsigned answer(int fd, char **text, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	ssize_t got;
	unsigned status = 0;

	while ((got = read(fd, buf + n, cap - n - 1)) > 0) {
		n += (size_t)got;
		if (cap - n < 2)
			buf = realloc(buf, cap *= 2);
	}
	close(fd);
	buf[n] = '\0';
	sscanf(buf, "HTTP/1.1 %u", &status);
	*text = buf;
	if (len)
		*len = n;
	return status;
}

static unsigned call(const char *method, const char *path, const char *body,
		     size_t len, char **text)
{
	return answer(request(method, path, body, len), text, NULL);
}

static uint64_t budget_used(void)
{
	pthread_mutex_lock(&d.lock);
	uint64_t used = d.api_memory_used;
	pthread_mutex_unlock(&d.lock);
	return used;
}

/* Every request's budget is given back once it ended (after the answer:
 * libmicrohttpd's completion runs then). */
static void expect_budget_all_back(void)
{
	uint64_t until = monotonic_ns() + 5000 * NS_PER_MS;

	while (budget_used() && monotonic_ns() < until)
		usleep(10000);
	cr_expect_eq(budget_used(), 0,
		     "%llu bytes of the budget not given back",
		     (unsigned long long)budget_used());
}

/* {"x":[ITEM,ITEM,...]} of about @len bytes. */
static char *body_of(const char *item, size_t len, size_t *out_len)
{
	char *b = malloc(len + 16);
	size_t n = (size_t)sprintf(b, "{\"x\":[%s", item);

	while (n + strlen(item) + 3 < len)
		n += (size_t)sprintf(b + n, ",%s", item);
	n += (size_t)sprintf(b + n, "]}");
	*out_len = n;
	return b;
}

/* POST /sandboxes with {"x":[ITEM,...]} of about @size bytes is answered
 * @status, with @part in the answer (headers included). */
static void expect_create(const char *item, size_t size, unsigned status,
			  const char *part)
{
	size_t len;
	char *body = body_of(item, size, &len), *text;

	cr_expect_eq(call("POST", "/sandboxes", body, len, &text), status,
		     "%.300s", text);
	cr_expect(strstr(text, part), "no %s in %.300s", part, text);
	free(text);
	free(body);
	expect_budget_all_back();
}

Test(api, a_body_past_the_budget_is_503_unparsed, .timeout = 30)
{
	/* 512K held and parsed: more than an 8M budget allows. */
	start("api_memory_budget_bytes = 8M\nmax_request_bytes = 1M\n");
	expect_create("\"abcdefgh\"", 512 << 10, 503, "Retry-After");
	/* A small one still fits. */
	expect_create("1", 8, 400, "unknown field");
	stop();
}

Test(api, a_body_that_parses_into_much_more_is_refused, .timeout = 30)
{
	start("");
	expect_create("{}", 512 << 10, 400, "bytes of memory per byte");
	/* Short strings, as an argv of words, parse. */
	expect_create("\"ab\"", 512 << 10, 400, "unknown field");
	stop();
}

Test(api, json_bodies_stop_at_max_request_bytes, .timeout = 30)
{
	start("");
	expect_create("\"\"", (2 << 20) + 4096, 413, "too_large");
	stop();
}

/*
 * An answer the headers decide (here a 404) while the body is on its way
 * waits for that body: sent at once, it came before the body, and the
 * daemon's close with the body unread reset the connection, which made
 * the client lose the answer.  So nothing before the body; after it, the
 * whole answer and an orderly end, no reset.
 */
Test(api, an_early_answer_waits_for_the_body_on_its_way, .timeout = 30)
{
	static const char head[] =
		"POST /nowhere HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
		"Content-Length: 10\r\n\r\n";
	char text[2048] = "";
	size_t n = 0;
	ssize_t got;

	start("");
	int fd = connect_api();
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, head, strlen(head)), (ssize_t)strlen(head));
	struct pollfd p = { .fd = fd, .events = POLLIN };
	cr_expect_eq(poll(&p, 1, 1000), 0,
		     "answered before the body it announced was sent");
	cr_assert_eq(write(fd, "0123456789", 10), 10);
	while (n < sizeof(text) - 1 &&
	       (got = read(fd, text + n, sizeof(text) - 1 - n)) > 0)
		n += (size_t)got;
	cr_expect_eq(got, 0, "the connection ended in %s, not an orderly close",
		     strerror(errno));
	cr_expect(!strncmp(text, "HTTP/1.1 404", 12), "%s", text);
	close(fd);
	stop();
}

/* Waits until the daemon closed its connection to the fake agent. */
static void wait_agent_closed(void)
{
	uint64_t until = monotonic_ns() + 10000 * NS_PER_MS;

	while (!atomic_load(&agent_closed) && monotonic_ns() < until)
		usleep(10000);
	cr_assert(atomic_load(&agent_closed), "the agent connection stayed");
}

Test(api, a_collected_exec_holds_its_budget_until_its_reply_is_sent,
     .timeout = 60)
{
	static const char body[] = "{\"argv\":[\"x\"],\"stream\":false}";
	char *text;
	size_t len;

	start("");
	guest_mode = GUEST_EXEC_OUTPUT;
	guest_output = 4 << 20;
	/* The reply (5.3 MB of base64) waits for a client that reads
	 * nothing yet: it must still count. */
	int fd = request("POST", EXEC_PATH, body, sizeof(body) - 1);
	wait_agent_closed();
	usleep(200000);
	cr_expect_geq(budget_used(), guest_output * 4 / 3,
		      "an unsent reply of %zu bytes holds %llu of the budget",
		      guest_output * 4 / 3, (unsigned long long)budget_used());
	cr_expect_eq(answer(fd, &text, &len), 200);
	cr_expect_gt(len, guest_output * 4 / 3);
	free(text);
	expect_budget_all_back();
	stop();
}

/*
 * A command that prints nothing for longer than idle_timeout_s is the
 * guest's to pace, not a stalled client: its exit still comes, streamed or
 * collected (the connection was cut before it, and the client saw a broken
 * transfer).  A client that stalls its own body is still cut.
 */
Test(api, a_silent_exec_outlasts_idle_timeout_s_a_stalled_body_does_not,
     .timeout = 60)
{
	static const char *const bodies[] = {
		"{\"argv\":[\"x\"]}",
		"{\"argv\":[\"x\"],\"stream\":false}",
	};
	char *text;

	start("idle_timeout_s = 1\n");
	guest_mode = GUEST_EXEC_SILENT;
	for (size_t i = 0; i < 2; i++) {
		cr_expect_eq(call("POST", EXEC_PATH, bodies[i],
				  strlen(bodies[i]), &text),
			     200, "%s", text);
		cr_expect(strstr(text, "\"exit_code\":0"), "%s: %s", bodies[i],
			  text);
		free(text);
	}
	/* Ten bytes of a hundred, then nothing: closed unanswered. */
	static const char stalled[] = "POST " EXEC_PATH " HTTP/1.1\r\n"
				      "Host: x\r\nContent-Length: 100\r\n\r\n"
				      "{\"argv\":[";
	int fd = connect_api();
	cr_assert_geq(fd, 0);
	send_all(fd, stalled, sizeof(stalled) - 1);
	cr_expect_eq(answer(fd, &text, NULL), 0, "%s", text);
	free(text);
	expect_budget_all_back();
	stop();
}

/* @method @path (@body, or none) to a guest in @mode, under @config: the
 * request ends, the agent connection is closed, the budget comes back. */
static unsigned stalled_request(const char *config, enum guest_mode mode,
				const char *method, const char *path,
				const char *body, char **text)
{
	start(config);
	guest_mode = mode;
	unsigned status =
		call(method, path, body, body ? strlen(body) : 0, text);
	wait_agent_closed();
	expect_budget_all_back();
	stop();
	return status;
}

/* A download the guest never ends: the request ends all the same, its
 * body cut (a 200's headers went out with the first frame) or refused. */
static void expect_download_ends(enum guest_mode mode)
{
	char *text;
	unsigned status = stalled_request("max_file_bytes = 1M\n", mode, "GET",
					  FILE_PATH, NULL, &text);

	cr_expect(status == 200 || status == 500, "%s", text);
	free(text);
}

Test(api, downloads_of_padded_empty_frames_or_foreign_ones_end, .timeout = 120)
{
	expect_download_ends(GUEST_READ_PADDED);
	expect_download_ends(GUEST_READ_FOREIGN_IDS);
}

/* A collected exec whose guest sends output forever, as data or as
 * padding, is killed and answered. */
static void expect_flood_cut(enum guest_mode mode)
{
	char *text;
	unsigned status = stalled_request(
		"max_exec_output_bytes = 1M\n", mode, "POST", EXEC_PATH,
		"{\"argv\":[\"x\"],\"stream\":false}", &text);

	cr_expect_eq(status, 200, "%.300s", text);
	cr_expect(strstr(text, "\"truncated\":true"), "%.300s", text);
	cr_expect(strstr(text, "\"signal\":9"), "%.300s", text);
	free(text);
}

Test(api, a_collected_exec_past_its_output_limit_is_killed_and_answered,
     .timeout = 120)
{
	expect_flood_cut(GUEST_EXEC_FLOOD);
	expect_flood_cut(GUEST_EXEC_PADDED);
}

/* POST /sandboxes with an env of @n entries of @value_len bytes each: the
 * status.  No template is built here: an env that fits gets a 404 for
 * the template, one that does not a 413 before. */
static unsigned create_with_env(size_t n, size_t value_len)
{
	size_t cap = n * (value_len + 32) + 64, len;
	char *body = malloc(cap), *text;

	len = (size_t)sprintf(body, "{\"template\":\"none\",\"env\":{");
	for (size_t i = 0; i < n; i++) {
		len += (size_t)sprintf(body + len, "%s\"K%zu\":\"",
				       i ? "," : "", i);
		memset(body + len, 'v', value_len);
		len += value_len;
		body[len++] = '"';
	}
	len += (size_t)sprintf(body + len, "}}");
	unsigned status = call("POST", "/sandboxes", body, len, &text);
	free(text);
	free(body);
	return status;
}

Test(api, a_sandboxs_env_is_bounded_at_create, .timeout = 30)
{
	start("");
	cr_expect_eq(create_with_env(256, 200), 404);
	cr_expect_eq(create_with_env(257, 1), 413);
	cr_expect_eq(create_with_env(2, 40 << 10), 413);
	expect_budget_all_back();
	stop();
}

/* @method @path with @body answers @status with @part in it. */
static void expect_call(const char *method, const char *path, const char *body,
			unsigned status, const char *part)
{
	char *text;

	cr_expect_eq(call(method, path, body, strlen(body), &text), status,
		     "%s %s: %.400s", method, path, text);
	cr_expect(strstr(text, part), "%s %s: no %s in %.400s", method, path,
		  part, text);
	free(text);
}

#define SANDBOX_PATH "/sandboxes/" SANDBOX_ID
#define NETWORK_PATH SANDBOX_PATH "/network"

/* A sandbox without a network (network = none): null, and nothing to set. */
Test(api, a_sandbox_without_a_network, .timeout = 30)
{
	start("");
	expect_call("GET", SANDBOX_PATH, "", 200, "\"network\":null");
	expect_call("POST", NETWORK_PATH, "{\"allow_internet\":false}", 409,
		    "has no network");
	expect_call("POST", "/sandboxes/fedcba9876543210/network", "{}", 404,
		    "not_found");
	expect_call("GET", "/metrics", "", 200,
		    "# TYPE thaw_sandbox_network_packets_total counter\n"
		    "# HELP thaw_sandbox_network_bytes_total");
	expect_budget_all_back();
	stop();
}

/* A sandbox's network as GET shows it; a bad policy is refused before
 * any map is written (the maps here are not real: the policy is never
 * set, nor are counters read). */
Test(api, a_sandboxs_network_is_shown_and_checked, .timeout = 30)
{
	start("");
	sandbox.net = (struct sandbox_net){ .host_address = 0x0ac80006 };
	sandbox.net_made = true;
	sandbox.policy = (struct net_policy){
		.allow_internet = false,
		.n_allow = 2,
		.allow_out = { { 0x0a000000, 8 }, { 0xc0a80107, 32 } },
		.n_deny = 1,
		.deny_out = { { 0, 0 } },
	};
	expect_call("GET", SANDBOX_PATH, "", 200,
		    "\"network\":{\"allow_internet\":false,"
		    "\"allow_out\":[\"10.0.0.0/8\",\"192.168.1.7/32\"],"
		    "\"deny_out\":[\"0.0.0.0/0\"],"
		    "\"host_address\":\"10.200.0.6\"}");
	expect_call("POST", NETWORK_PATH, "{\"allow_out\":[\"10.0.0.1/8\"]}",
		    400, "'10.0.0.1/8' is not a CIDR");
	expect_call("POST", NETWORK_PATH, "{\"allow_internet\":\"no\"}", 400,
		    "must be true or false");
	expect_call("POST", NETWORK_PATH, "[]", 400, "bad_request");
	expect_call("GET", NETWORK_PATH, "", 405, "method_not_allowed");
	sandbox.net_made = false;
	expect_budget_all_back();
	stop();
}

/*
 * A running sandbox's policy replaced for real: its network made with
 * netns.h in a pool (10.253.0.0/16) and under names (this run's directory's)
 * no thaw uses, its maps written by POST .../network, its counters read by
 * /metrics.  Root only, like test_netns: run under the VM lock.
 */
Test(api, a_sandboxs_policy_is_replaced_in_its_maps, .timeout = 60)
{
	char pin[PATH_MAX], err[512] = "";
	struct net_config *net = &d.cfg.net;
	struct net_host_found found;

	if (geteuid() != 0)
		cr_skip_test("network namespaces need root");
	start("network_cidr = 10.253.0.0/16\n");
	tmpl.network = tmpl.allow_internet = true;
	snprintf(net->ifname_prefix, sizeof(net->ifname_prefix), "ta%s",
		 dir + strlen(dir) - 5);
	snprintf(net->nft_table, sizeof(net->nft_table), "thaw_testapi_%s",
		 dir + strlen(dir) - 6);
	cr_assert_eq(net_host_setup(net, dir, &found, err, sizeof(err)), 0,
		     "%s", err);
	snprintf(pin, sizeof(pin), "%s/%s", dir, NET_PIN_NAME);
	config_net_policy(&tmpl, &sandbox.policy);
	cr_assert_eq(sandbox_net_create(&sandbox.net, net, 1, pin, 1879114733u,
					1879114734u, &sandbox.policy, err,
					sizeof(err)),
		     0, "%s", err);
	sandbox.net_made = true;

	expect_call("GET", SANDBOX_PATH, "", 200,
		    "\"network\":{\"allow_internet\":true,\"allow_out\":[],"
		    "\"deny_out\":[],\"host_address\":\"10.253.0.6\"}");
	expect_call("POST", NETWORK_PATH,
		    "{\"allow_internet\":false,\"allow_out\":[\"10.9.0.0/16\"],"
		    "\"deny_out\":[\"10.9.8.0/24\"]}",
		    200,
		    "\"network\":{\"allow_internet\":false,"
		    "\"allow_out\":[\"10.9.0.0/16\"],"
		    "\"deny_out\":[\"10.9.8.0/24\"],"
		    "\"host_address\":\"10.253.0.6\"}");
	/* Refused whole: what the maps hold stays. */
	expect_call("POST", NETWORK_PATH,
		    "{\"allow_out\":[\"1.1.1.1\",\"10.0.0.0/4\"]}", 400,
		    "'10.0.0.0/4' is not a CIDR");
	expect_call("GET", SANDBOX_PATH, "", 200,
		    "\"allow_internet\":false,\"allow_out\":[\"10.9.0.0/16\"]");
	/* A field left out is the template's again. */
	expect_call("POST", NETWORK_PATH, "{\"deny_out\":[]}", 200,
		    "\"network\":{\"allow_internet\":true,\"allow_out\":[],"
		    "\"deny_out\":[]");
	expect_call("GET", "/metrics", "", 200,
		    "thaw_sandbox_network_packets_total{sandbox=\"" SANDBOX_ID
		    "\",verdict=\"drop_no_internet\"} ");
	expect_call("GET", "/metrics", "", 200,
		    "thaw_sandbox_network_bytes_total{sandbox=\"" SANDBOX_ID
		    "\",verdict=\"pass_internet\"} ");

	sandbox.net_made = false;
	cr_expect_eq(sandbox_net_destroy(&sandbox.net, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(net_host_teardown(net, err, sizeof(err)), 0, "%s", err);
	tmpl.network = tmpl.allow_internet = false;
	expect_budget_all_back();
	stop();
}

/* ---- connections: a cap per uid, a deadline per request head ---------- */

/* The status of GET /health on a fresh connection of this process. */
static unsigned health(void)
{
	char *text;
	unsigned status = call("GET", "/health", "", 0, &text);

	free(text);
	return status;
}

/* GET /health answered 200 to a child as uid and gid 65534 ("nobody"):
 * another uid than ours (root). */
static bool served_as_another_uid(void)
{
	static const char req[] =
		"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	pid_t pid = fork();
	int status;

	cr_assert_geq(pid, 0);
	if (!pid) {
		char buf[64] = "";
		unsigned code = 0;
		int fd;

		if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(2);
		fd = connect_api();
		if (fd < 0)
			_exit(3);
		if (write(fd, req, sizeof(req) - 1) != sizeof(req) - 1 ||
		    read(fd, buf, sizeof(buf) - 1) <= 0)
			_exit(4);
		sscanf(buf, "HTTP/1.1 %u", &code);
		_exit(code == 200 ? 0 : 5);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status), "the child died");
	cr_expect_eq(WEXITSTATUS(status), 0,
		     "the other uid's request failed at step %d",
		     WEXITSTATUS(status));
	return WIFEXITED(status) && !WEXITSTATUS(status);
}

/* A new connection is answered @status, with @part in the answer, at
 * once (5 s at most), without sending anything. */
static void expect_refused(unsigned status, const char *part)
{
	struct timeval patience = { .tv_sec = 5 };
	int fd = connect_api();
	char *text;

	cr_assert_geq(fd, 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
	cr_expect_eq(answer(fd, &text, NULL), status, "no answer in 5 s: %s",
		     text);
	cr_expect_not_null(strstr(text, part), "%s", text);
	free(text);
}

Test(api, one_uid_holds_at_most_max_connections_per_uid, .timeout = 60)
{
	int held[3];

	if (geteuid())
		cr_skip_test(
			"needs root: a second uid connects through setresuid");
	start("max_connections = 8\nmax_connections_per_uid = 3\n");
	/* nobody may reach the socket: the test's directory is 0700. */
	cr_assert_eq(chmod(dir, 0711), 0);
	cr_assert_eq(chmod(api_path, 0666), 0);
	for (int i = 0; i < 3; i++) {
		held[i] = connect_api();
		cr_assert_geq(held[i], 0);
	}
	/* The fourth of root's is answered 429 and closed, at once: it
	 * costs no thread, and needs no request. */
	expect_refused(429, "max_connections_per_uid");
	cr_expect_eq(health(), 429, "still the limit");
	/* Another uid is served meanwhile. */
	served_as_another_uid();
	/* A slot given back is root's again (once libmicrohttpd closed it). */
	close(held[0]);
	unsigned status = 0;
	for (int i = 0; i < 100 && (status = health()) != 200; i++)
		usleep(50 * 1000);
	cr_expect_eq(status, 200);
	close(held[1]);
	close(held[2]);
	stop();
}

/*
 * A connection to the TCP API from a socket bound to the device lo and to
 * the source address 127.0.0.@host: the kernel's exact socket lookup
 * (http_peer_uid.c) does not find a socket bound to a device.  -1 on failure.
 */
static int connect_api_bound_to_lo(int host)
{
	struct sockaddr_in from = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(0x7f000000u |
							     (unsigned)host) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, "lo", sizeof("lo")) ||
	    bind(fd, (struct sockaddr *)&from, sizeof(from)) ||
	    connect(fd, (struct sockaddr *)&api_addr, api_addr_len)) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	return fd;
}

/*
 * The child's side of the per-uid TCP tests: as uid 65534, holds
 * max_connections_per_uid (3) connections, sees a 4th answered 429 naming
 * @who, writes to @ready, and keeps them until @done reads an end of
 * file.  With @bound_to_lo each connection is bound to lo and comes from
 * an address of its own.  0, or the step that failed.
 */
static int hold_connections_as_nobody(bool bound_to_lo, const char *who,
				      int ready, int done)
{
	struct timeval patience = { .tv_sec = 5 };
	char text[1024] = "", c;
	size_t n = 0;
	ssize_t got;
	int held[3], fd, failed;

	if (setgroups(0, NULL) || setresgid(65534, 65534, 65534) ||
	    setresuid(65534, 65534, 65534))
		return 2;
	for (int i = 0; i < 3; i++)
		if ((held[i] = bound_to_lo ? connect_api_bound_to_lo(10 + i)
					   : connect_api()) < 0)
			return 3;
	fd = bound_to_lo ? connect_api_bound_to_lo(20) : connect_api();
	if (fd < 0)
		return 4;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &patience, sizeof(patience));
	while (n < sizeof(text) - 1 &&
	       (got = read(fd, text + n, sizeof(text) - 1 - n)) > 0)
		n += (size_t)got;
	failed = strncmp(text, "HTTP/1.1 429", 12) ? 5
		 : !strstr(text, who)		   ? 6
						   : 0;
	if (write(ready, "x", 1) != 1 || read(done, &c, 1) != 0)
		return 7;
	return failed;
}

/*
 * On a TCP listener (@host, reached at @reach, 127.0.0.1 or a v4-mapped
 * address of it), local clients are told apart by uid, not all one
 * address: while uid 65534 holds its max_connections_per_uid (its
 * connections bound to lo with @bound_to_lo, counted together as a local
 * client of unknown uid, the 429 naming @who), root is served.
 */
static void local_tcp_clients_are_told_apart(const char *host,
					     const char *reach,
					     bool bound_to_lo, const char *who)
{
	int ready[2], done[2], status;
	char c = 0;

	if (geteuid())
		cr_skip_test(
			"needs root: a second uid connects through setresuid");
	start_on("max_connections = 8\nmax_connections_per_uid = 3\n", host,
		 reach);
	cr_assert_eq(pipe(ready), 0);
	cr_assert_eq(pipe(done), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (!pid) {
		close(ready[0]);
		close(done[1]);
		_exit(hold_connections_as_nobody(bound_to_lo, who, ready[1],
						 done[0]));
	}
	close(ready[1]);
	close(done[0]);
	cr_expect_eq(read(ready[0], &c, 1), 1, "the child died early");
	cr_expect_eq(health(), 200,
		     "root locked out of TCP by uid 65534's connections");
	close(done[1]);
	close(ready[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status), "the child died");
	cr_expect_eq(WEXITSTATUS(status), 0,
		     "uid 65534's connections failed at step %d",
		     WEXITSTATUS(status));
	stop();
}

Test(api, local_tcp_clients_are_told_apart_by_uid, .timeout = 60)
{
	local_tcp_clients_are_told_apart("127.0.0.1", "127.0.0.1", false,
					 "uid 65534 (TCP ");
}

/* A dual-stack listener sees them as ::ffff:127.0.0.1. */
Test(api, local_tcp_clients_of_a_dual_stack_listener_by_uid, .timeout = 60)
{
	local_tcp_clients_are_told_apart("::", "127.0.0.1", false,
					 "uid 65534 (TCP ");
}

/* Sockets bound to a device escape the uid lookup, and each comes from
 * another of 127.0.0.0/8's addresses: still one peer, not one each. */
Test(api, local_tcp_clients_of_unknown_uid_are_one_peer, .timeout = 60)
{
	local_tcp_clients_are_told_apart("0.0.0.0", "127.0.0.1", true,
					 "a local client of unknown uid");
}

/*
 * http_peer_uid_tcp() answers only for the very client socket of a connection:
 * an address and port where no client is, but a listening socket is (the
 * kernel's lookup falls back to listeners), is no one's, as a remote
 * peer's is.  Over IPv6 too, when this host has it.
 */
static void peer_uid_is_a_client_sockets_only(const char *host)
{
	struct sockaddr_storage peer;
	socklen_t len = sizeof(peer);
	int listener = listen_tcp(host, host), client, accepted;
	uid_t uid = 12345;

	if (listener < 0)
		cr_skip_test("cannot listen on TCP %s", host);
	client = connect_api();
	cr_assert_geq(client, 0);
	accepted = accept(listener, (struct sockaddr *)&peer, &len);
	cr_assert_geq(accepted, 0);
	cr_expect_eq(http_peer_uid_tcp(accepted, &peer, &uid), 0);
	cr_expect_eq(uid, geteuid());
	/* The "peer" at the listener's own address and port. */
	cr_expect_eq(http_peer_uid_tcp(accepted, &api_addr, &uid), -ENOENT);
	/* Closed: what is left of it (orphaned, FIN_WAIT2) is no one's. */
	close(client);
	cr_expect_eq(http_peer_uid_tcp(accepted, &peer, &uid), -ENOENT);
	close(accepted);
	close(listener);
}

Test(api, peer_uid_is_a_client_sockets_only_ipv4)
{
	peer_uid_is_a_client_sockets_only("127.0.0.1");
}

Test(api, peer_uid_is_a_client_sockets_only_ipv6)
{
	peer_uid_is_a_client_sockets_only("::1");
}

Test(api, past_max_connections_the_next_is_503_at_once, .timeout = 60)
{
	int held[2];

	start("max_connections = 2\nmax_connections_per_uid = 2\n");
	for (int i = 0; i < 2; i++) {
		held[i] = connect_api();
		cr_assert_geq(held[i], 0);
	}
	expect_refused(503, "Retry-After: 1");
	close(held[0]);
	close(held[1]);
	stop();
}

/* True once the daemon closed @fd (end of file or reset). */
static bool closed_by_peer(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	if (poll(&p, 1, 0) <= 0)
		return false;
	return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

Test(api, a_request_head_trickled_in_is_cut_at_header_timeout_s, .timeout = 60)
{
	static const char head[] =
		"GET /health HTTP/1.1\r\nHost: x\r\n"
		"X-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
	start("header_timeout_s = 3\n");
	int fd = connect_api();
	cr_assert_geq(fd, 0);
	uint64_t t0 = monotonic_ns();
	size_t sent = 0;

	/* A byte a second: libmicrohttpd's idle timeout (120 s) never
	 * fires; the head's deadline does. */
	bool closed = false;
	while (sent < 15 && !(closed = closed_by_peer(fd))) {
		if (send(fd, head + sent, 1, MSG_NOSIGNAL) != 1) {
			closed = true;
			break;
		}
		sent++;
		usleep(1000 * 1000);
	}
	double s = (double)(monotonic_ns() - t0) / 1e9;
	cr_expect(closed, "still open after %zu bytes in %.1f s", sent, s);
	cr_expect_geq(s, 2.5, "closed after %.1f s, before the deadline", s);
	cr_expect_lt(s, 10, "closed after %.1f s", s);
	close(fd);
	/* A head sent at once is served, and the deadline starts over after
	 * its reply: the connection is then closed the same way. */
	fd = connect_api();
	cr_assert_geq(fd, 0);
	static const char keep[] = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
	cr_assert_eq(send(fd, keep, sizeof(keep) - 1, MSG_NOSIGNAL),
		     (ssize_t)sizeof(keep) - 1);
	char buf[512] = "";
	cr_assert_gt(read(fd, buf, sizeof(buf) - 1), 0);
	cr_expect_eq(strncmp(buf, "HTTP/1.1 200", 12), 0, "%s", buf);
	t0 = monotonic_ns();
	while (!closed_by_peer(fd) && monotonic_ns() - t0 < 10000 * NS_PER_MS)
		usleep(100 * 1000);
	s = (double)(monotonic_ns() - t0) / 1e9;
	cr_expect(s >= 2.5 && s < 10,
		  "an idle kept-alive connection closed after %.1f s", s);
	close(fd);
	stop();
}

/* ---- the E2B listener -----------------------------------------------------
 */

#define DAEMON_TOKEN "test-api-daemon-token"
#define UNKNOWN_ID "fedcba9876543210" /* as long as SANDBOX_ID */
#define START_PATH "/process.Process/Start"

/* The E2B listener's extension slot in a sandbox (frontend.h). */
#define E2B_TEST_SLOT 0
static struct e2b_server *e2b;
static int e2b_port;
static struct e2b_sandbox e2b_of_sandbox;
/* Another E2B sandbox, listed before ours; stopped: no agent answers. */
static struct e2b_sandbox e2b_of_other;
static struct sandbox other;

/* start() with the E2B listener on a free loopback port and @config_keys;
 * the sandbox is an E2B one, listed after another. */
static void start_e2b(const char *config_keys)
{
	char keys[512];

	e2b_port = loopback_free_port();
	cr_assert_gt(e2b_port, 0);
	snprintf(keys, sizeof(keys),
		 "token = " DAEMON_TOKEN "\ne2b_listen = 127.0.0.1:%d\n%s",
		 e2b_port, config_keys);
	start(keys);
	sandbox.ext[E2B_TEST_SLOT] = &e2b_of_sandbox;
	other = (struct sandbox){ .id = "00000000000000ff",
				  .pool = &pool,
				  .state = SANDBOX_LEASED,
				  .refs = 1,
				  .agent = { .fd = -1 },
				  .ext = { [E2B_TEST_SLOT] = &e2b_of_other },
				  .stopped = true,
				  .next = &sandbox };
	snprintf(other.vmm.vsock, sizeof(other.vmm.vsock), "%s/none.sock", dir);
	d.leased = &other;
	void *server;
	cr_assert_eq(e2b_start(&d, E2B_TEST_SLOT, &server), 0);
	e2b = server;
	cr_assert_not_null(e2b);
	/* As a create gives them. */
	e2b_sandbox_token(e2b, sandbox.id, e2b_of_sandbox.access_token);
	e2b_sandbox_token(e2b, other.id, e2b_of_other.access_token);
}

/* The daemon's stop flag ends the processes' waits on their guest. */
static void stop_e2b(void)
{
	pthread_mutex_lock(&d.lock);
	d.stopping = true;
	pthread_mutex_unlock(&d.lock);
	e2b_stop(e2b);
	expect_budget_all_back();
	stop();
}

/* Sends a request to the E2B listener, @headers (whole lines, a
 * Content-Length among them) after its Host, and no body; returns the
 * socket, the answer not yet read. */
static int e2b_request_head(const char *method, const char *path,
			    const char *headers)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_port = htons((uint16_t)e2b_port),
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char *head;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0,
		     "%s", strerror(errno));
	int n = asprintf(&head,
			 "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
			 "Connection: close\r\n%s\r\n",
			 method, path, e2b_port, headers);
	cr_assert_gt(n, 0);
	send_all(fd, head, (size_t)n);
	free(head);
	return fd;
}

/* The same with a body (@len bytes of @body). */
static int e2b_request(const char *method, const char *path,
		       const char *headers, const void *body, size_t len)
{
	char *all;

	cr_assert_gt(asprintf(&all, "%sContent-Length: %zu\r\n", headers, len),
		     0);
	int fd = e2b_request_head(method, path, all);
	free(all);
	send_all(fd, body, len);
	return fd;
}

/* The body of answer @text. */
static const char *body_of_answer(const char *text)
{
	const char *end = strstr(text, "\r\n\r\n");

	return end ? end + 4 : "";
}

/* ---- processes: their caps hold however many starts race ---------------- */

/* What a Start of a held command came to. */
enum started { STARTED, EXHAUSTED, OTHER };

struct start_result {
	enum started how;
	char text[1024]; /* what was read of the answer */
};

static void *start_one(void *arg)
{
	static const char msg[] =
		"{\"process\":{\"cmd\":\"/bin/sleep\",\"args\":[\"1000\"]}}";
	struct start_result *res = arg;
	char body[5 + sizeof(msg)];
	size_t n = 0;

	body[0] = 0;
	uint32_t len = htonl(sizeof(msg) - 1);
	memcpy(body + 1, &len, 4);
	memcpy(body + 5, msg, sizeof(msg) - 1);
	int fd = e2b_request("POST", START_PATH,
			     "Content-Type: application/connect+json\r\n"
			     "E2b-Sandbox-Id: " SANDBOX_ID "\r\n"
			     "X-Access-Token: " DAEMON_TOKEN "\r\n",
			     body, 5 + sizeof(msg) - 1);
	res->how = OTHER;
	/* The stream stays open while the command runs: read until its
	 * start event, or its end with an error. */
	while (n < sizeof(res->text) - 1) {
		ssize_t got =
			read(fd, res->text + n, sizeof(res->text) - 1 - n);

		if (got <= 0)
			break;
		n += (size_t)got;
		if (memmem(res->text, n, "\"start\"", 7)) {
			res->how = STARTED;
			break;
		}
		if (memmem(res->text, n, "resource_exhausted", 18)) {
			/* its message follows in the same envelope */
			usleep(100 * 1000);
			got = recv(fd, res->text + n, sizeof(res->text) - 1 - n,
				   MSG_DONTWAIT);
			n += got > 0 ? (size_t)got : 0;
			res->how = EXHAUSTED;
			break;
		}
	}
	/* Envelopes start with binary bytes: text to search. */
	for (size_t i = 0; i < n; i++)
		res->text[i] = res->text[i] < ' ' ? '.' : res->text[i];
	res->text[n] = '\0';
	/* The client goes, the process stays: it was started. */
	close(fd);
	return NULL;
}

/* Starts @n held commands at once: the number started, each refused
 * start's answer holding @why. */
static int start_at_once(int n, const char *why)
{
	pthread_t threads[80];
	struct start_result results[80];
	int started = 0;

	cr_assert_leq(n, 80);
	for (int i = 0; i < n; i++)
		cr_assert_eq(pthread_create(&threads[i], NULL, start_one,
					    &results[i]),
			     0);
	for (int i = 0; i < n; i++) {
		pthread_join(threads[i], NULL);
		cr_expect_neq(results[i].how, OTHER, "start %d: %s", i,
			      results[i].text);
		if (results[i].how == EXHAUSTED)
			cr_expect(strstr(results[i].text, why),
				  "start %d, refused without \"%s\": %s", i,
				  why, results[i].text);
		started += results[i].how == STARTED;
	}
	return started;
}

Test(e2b, the_daemons_processes_stop_at_e2b_max_processes, .timeout = 60)
{
	start_e2b("e2b_max_processes = 4\n");
	guest_mode = GUEST_EXEC_HELD;
	/* Each start's guest answers HELD_START_MS later: the ten all ask
	 * before the first is running. */
	cr_expect_eq(start_at_once(10, "(e2b_max_processes = 4 in its config)"),
		     4);
	/* Four hold their share of the budget, no more (once the starts'
	 * requests ended, their bodies given back). */
	uint64_t until = monotonic_ns() + 5000 * NS_PER_MS;
	while (budget_used() != 4 * CONFIG_E2B_PROCESS_BYTES &&
	       monotonic_ns() < until)
		usleep(10000);
	cr_expect_eq(budget_used(), 4 * CONFIG_E2B_PROCESS_BYTES,
		     "%llu bytes held", (unsigned long long)budget_used());
	stop_e2b();
}

Test(e2b, a_sandboxs_processes_stop_at_64_however_many_race, .timeout = 60)
{
	start_e2b("e2b_max_processes = 100\n");
	guest_mode = GUEST_EXEC_HELD;
	cr_expect_eq(start_at_once(70, "the most a sandbox may (64)"), 64);
	stop_e2b();
}

Test(e2b, processes_take_at_most_half_the_budget_by_default, .timeout = 30)
{
	start_e2b("api_memory_budget_bytes = 16M\n");
	cr_expect_eq(d.cfg.e2b_max_processes, 2, "auto: 8M of 16M, 4M each");
	stop_e2b();
}

/* ---- envd: no existence oracle --------------------------------------------
 */

/* The status and body of @method @path for sandbox @id with @token (NULL:
 * none), @id written SANDBOX_ID in the body. */
static unsigned envd_answer(const char *method, const char *path,
			    const char *id, const char *token, char **body)
{
	char *headers, *text;

	cr_assert_gt(asprintf(&headers,
			      "Content-Type: application/json\r\n"
			      "E2b-Sandbox-Id: %s\r\n%s%s%s",
			      id, token ? "X-Access-Token: " : "",
			      token ? token : "", token ? "\r\n" : ""),
		     0);
	unsigned status = answer(e2b_request(method, path, headers, "{}", 2),
				 &text, NULL);
	free(headers);
	*body = strdup(body_of_answer(text));
	free(text);
	for (char *at = *body; (at = strstr(at, id)); at += strlen(id))
		memcpy(at, SANDBOX_ID, strlen(id));
	return status;
}

static void expect_alike(const char *method, const char *path,
			 const char *token)
{
	char *known, *unknown;
	unsigned k = envd_answer(method, path, SANDBOX_ID, token, &known);
	unsigned u = envd_answer(method, path, UNKNOWN_ID, token, &unknown);

	cr_expect_eq(k, 401, "%s %s, token %s: %u %s", method, path,
		     token ? token : "none", k, known);
	cr_expect_eq(u, k, "%s %s, token %s: %u %s for an unknown sandbox",
		     method, path, token ? token : "none", u, unknown);
	cr_expect_str_eq(unknown, known);
	free(known);
	free(unknown);
}

/* @method @path for sandbox @id with @token (NULL: none) answers
 * @status. */
static void expect_envd(const char *method, const char *path, const char *id,
			const char *token, unsigned status)
{
	char *body;

	cr_expect_eq(envd_answer(method, path, id, token, &body), status,
		     "%s %s for %s: %s", method, path, id, body);
	free(body);
}

Test(e2b, without_credentials_an_unknown_sandbox_answers_as_a_known_one,
     .timeout = 30)
{
	static const char *const tokens[] = {
		NULL, "wrong", "",
		"0a1b2c3d4e5f60718293a4b5c6d7e8f9"
		"0a1b2c3d4e5f60718293a4b5c6d7e8f8"
	};

	start_e2b("");
	for (size_t i = 0; i < sizeof(tokens) / sizeof(*tokens); i++) {
		expect_alike("POST", "/process.Process/List", tokens[i]);
		expect_alike("GET", "/files?path=/x", tokens[i]);
		expect_alike("GET", "/health", tokens[i]);
	}
	/* A sandbox's own token opens it, and opens no other. */
	expect_envd("POST", "/process.Process/List", SANDBOX_ID,
		    e2b_of_sandbox.access_token, 200);
	expect_envd("POST", "/process.Process/List", "00000000000000ff",
		    e2b_of_sandbox.access_token, 401);
	/* The daemon's token learns that a sandbox is gone, as E2B's proxy
	 * tells its API key holders; so does the sandbox's own token once it
	 * is gone (the SDK's isRunning() then says false), and only it. */
	expect_envd("POST", "/process.Process/List", UNKNOWN_ID, DAEMON_TOKEN,
		    502);
	pthread_mutex_lock(&d.lock);
	d.leased = &sandbox; /* the other one is gone */
	pthread_mutex_unlock(&d.lock);
	expect_envd("GET", "/health", other.id, e2b_of_other.access_token, 502);
	expect_envd("GET", "/health", other.id, e2b_of_sandbox.access_token,
		    401);
	stop_e2b();
}

/* ---- signed /files URLs without the sandbox's header -------------------- */

/* The SDK's signature of @path for @operation by user "user" with @token,
 * expiring at @expiration, URL-encoded into @out. */
static void sign(const char *path, const char *operation, const char *token,
		 long long expiration, char *out, size_t len)
{
	char raw[512];
	uint8_t digest[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;

	snprintf(raw, sizeof(raw), "%s:%s:user:%s:%lld", path, operation, token,
		 expiration);
	sha256_init(&ctx);
	sha256_update(&ctx, strlen(raw), (const uint8_t *)raw);
	sha256_digest(&ctx, sizeof(digest), digest);
	char *b64 = base64_encode(digest, sizeof(digest));
	size_t n = (size_t)snprintf(out, len, "v1_");
	for (const char *c = b64; *c && *c != '='; c++)
		n += (size_t)snprintf(out + n, len - n,
				      *c == '+'	  ? "%%2B"
				      : *c == '/' ? "%%2F"
						  : "%c",
				      *c);
	free(b64);
}

/* GET /files?path=/x signed with @token, naming no sandbox: its status,
 * its body in @text. */
static unsigned signed_download(const char *token, long long expiration,
				bool tamper, char **text)
{
	char signature[128], path[512];

	sign("/x", "read", token, expiration, signature, sizeof(signature));
	if (tamper)
		signature[5] = signature[5] == 'A' ? 'B' : 'A';
	snprintf(path, sizeof(path),
		 "/files?path=%%2Fx&username=user&signature=%s"
		 "&signature_expiration=%lld",
		 signature, expiration);
	unsigned status =
		answer(e2b_request("GET", path, "", "", 0), text, NULL);
	return status;
}

Test(e2b, a_signed_file_url_finds_its_sandbox_by_its_signature, .timeout = 30)
{
	long long later = (long long)time(NULL) + 600;
	char *text;

	start_e2b("");
	guest_mode = GUEST_READ_FILE;
	cr_expect_eq(signed_download(e2b_of_sandbox.access_token, later, false,
				     &text),
		     200, "%s", text);
	cr_expect(strstr(body_of_answer(text), FILE_TEXT), "%s", text);
	free(text);
	/* Expired, tampered with, or signed by no sandbox's token: 401. */
	cr_expect_eq(signed_download(e2b_of_sandbox.access_token,
				     (long long)time(NULL) - 1, false, &text),
		     401, "%s", text);
	free(text);
	cr_expect_eq(signed_download(e2b_of_sandbox.access_token, later, true,
				     &text),
		     401, "%s", text);
	free(text);
	cr_expect_eq(signed_download(DAEMON_TOKEN, later, false, &text), 401,
		     "%s", text);
	free(text);
	/* The other sandbox's signature is the other sandbox's (whose agent
	 * is not there): never ours. */
	cr_expect_neq(
		signed_download(e2b_of_other.access_token, later, false, &text),
		200, "%s", text);
	cr_expect_null(strstr(text, FILE_TEXT), "%s", text);
	free(text);
	stop_e2b();
}

/* ---- the daemon's lock: what a client sends is hashed outside it -------- */

typedef void sha256_update_fn(struct sha256_ctx *ctx, size_t length,
			      const uint8_t *data);
static sha256_update_fn *real_sha256_update;
static pthread_once_t real_sha256_update_once = PTHREAD_ONCE_INIT;
static atomic_bool watch_hashing, hashed_under_lock;
static atomic_size_t longest_hashed;

static void find_real_sha256_update(void)
{
	*(void **)&real_sha256_update =
		dlsym(RTLD_NEXT, "nettle_sha256_update");
}

/*
 * libnettle's sha256_update as the daemon's code calls it in this
 * executable, whose definition takes precedence over the library's (then
 * called): while watch_hashing, it notes whether the calling thread holds
 * the daemon's lock (d.lock is error-checking: only its holder may unlock
 * it), and the longest input hashed.
 */
void sha256_update(struct sha256_ctx *ctx, size_t length, const uint8_t *data)
{
	pthread_once(&real_sha256_update_once, find_real_sha256_update);
	if (atomic_load(&watch_hashing)) {
		if (pthread_mutex_unlock(&d.lock) == 0) {
			atomic_store(&hashed_under_lock, true);
			pthread_mutex_lock(&d.lock);
		}
		size_t was = atomic_load(&longest_hashed);
		while (length > was && !atomic_compare_exchange_weak(
					       &longest_hashed, &was, length))
			;
	}
	real_sha256_update(ctx, length, data);
}

#define LONG_INPUT 8000 /* bytes: far more than any token */

/* Watches what is hashed from now on. */
static void watch_hashing_start(void)
{
	atomic_store(&hashed_under_lock, false);
	atomic_store(&longest_hashed, 0);
	atomic_store(&watch_hashing, true);
}

Test(e2b, what_a_client_sends_is_hashed_outside_the_daemons_lock, .timeout = 30)
{
	long long later = (long long)time(NULL) + 600;
	char *long_token = malloc(LONG_INPUT + 1), *text;
	char *long_path;

	memset(long_token, 'a', LONG_INPUT);
	long_token[LONG_INPUT] = '\0';
	char signature[128];
	/* (signed over its start: a signature of the right shape, hashed) */
	sign(long_token, "read", DAEMON_TOKEN, later, signature,
	     sizeof(signature));
	cr_assert_gt(asprintf(&long_path,
			      "/files?path=%s&username=user&signature=%s"
			      "&signature_expiration=%lld",
			      long_token, signature, later),
		     0);
	start_e2b("");
	guest_mode = GUEST_READ_FILE;
	watch_hashing_start();
	/* A token longer than any thaw gives (or takes) is refused as a
	 * wrong one, known sandbox or not, without being hashed at all. */
	expect_alike("POST", "/process.Process/List", long_token);
	expect_alike("GET", "/health", long_token);
	cr_expect_lt(atomic_load(&longest_hashed), LONG_INPUT,
		     "a %d-byte X-Access-Token was hashed", LONG_INPUT);
	cr_expect_not(atomic_load(&hashed_under_lock),
		      "a long X-Access-Token hashed under the daemon's lock");
	/* Tokens of a sandbox, the daemon's, wrong ones. */
	watch_hashing_start();
	expect_envd("POST", "/process.Process/List", SANDBOX_ID,
		    e2b_of_sandbox.access_token, 200);
	expect_envd("POST", "/process.Process/List", UNKNOWN_ID, DAEMON_TOKEN,
		    502);
	expect_alike("POST", "/process.Process/List", "wrong");
	cr_expect_not(atomic_load(&hashed_under_lock),
		      "an X-Access-Token hashed under the daemon's lock");
	/* A long path, signed, for a sandbox it names. */
	watch_hashing_start();
	expect_alike("GET", long_path, NULL);
	cr_expect_geq(atomic_load(&longest_hashed), LONG_INPUT,
		      "the path's signature was not checked");
	cr_expect_not(atomic_load(&hashed_under_lock),
		      "a /files URL hashed under the daemon's lock");
	/* A URL naming no sandbox: its signature against every sandbox's
	 * token. */
	watch_hashing_start();
	cr_expect_eq(signed_download(e2b_of_sandbox.access_token, later, false,
				     &text),
		     200, "%s", text);
	free(text);
	cr_expect_eq(signed_download(DAEMON_TOKEN, later, false, &text), 401,
		     "%s", text);
	free(text);
	cr_expect_not(atomic_load(&hashed_under_lock),
		      "the sandboxes' signatures tried under the daemon's "
		      "lock");
	atomic_store(&watch_hashing, false);
	free(long_path);
	free(long_token);
	stop_e2b();
}

/* ---- a body too large, in the shape the route's client reads ------------ */

/* The answer to @path with @type, the daemon's token for our sandbox and a
 * body of a terabyte declared, none sent. */
static unsigned answer_to_a_terabyte(const char *path, const char *type,
				     char **text, size_t *len)
{
	char *headers;

	cr_assert_gt(asprintf(&headers,
			      "Content-Type: %s\r\n"
			      "E2b-Sandbox-Id: " SANDBOX_ID "\r\n"
			      "X-Access-Token: " DAEMON_TOKEN "\r\n"
			      "X-API-KEY: " DAEMON_TOKEN "\r\n"
			      "Content-Length: 1000000000000\r\n",
			      type),
		     0);
	unsigned status =
		answer(e2b_request_head("POST", path, headers), text, len);
	free(headers);
	return status;
}

Test(e2b, a_body_too_large_is_refused_as_the_routes_protocol_has_it,
     .timeout = 30)
{
	char *text;
	size_t len;

	start_e2b("");
	/* A unary Connect call: Connect's error, resource_exhausted's
	 * status. */
	cr_expect_eq(answer_to_a_terabyte("/process.Process/List",
					  "application/json", &text, &len),
		     429, "%s", text);
	json_t *error = json_loads(body_of_answer(text), 0, NULL);
	cr_expect_str_eq(json_string_value(json_object_get(error, "code")),
			 "resource_exhausted", "%s", text);
	cr_expect(strstr(json_string_value(json_object_get(error, "message")),
			 "max_request_bytes"),
		  "%s", text);
	json_decref(error);
	free(text);
	/* A streaming one: 200 and the error in the end-of-stream
	 * envelope. */
	cr_expect_eq(answer_to_a_terabyte("/process.Process/List",
					  "application/connect+json", &text,
					  &len),
		     200, "%s", text);
	const char *envelope = body_of_answer(text);
	size_t size = len - (size_t)(envelope - text);
	cr_assert_gt(size, 5, "%s", text);
	cr_expect_eq(envelope[0], 0x02, "the end-of-stream flag");
	error = json_loadb(envelope + 5, size - 5, 0, NULL);
	json_t *code = json_object_get(json_object_get(error, "error"), "code");
	cr_expect_str_eq(json_string_value(code), "resource_exhausted", "%s",
			 envelope + 5);
	json_decref(error);
	free(text);
	/* The control plane's REST: E2B's error. */
	cr_expect_eq(answer_to_a_terabyte("/sandboxes", "application/json",
					  &text, &len),
		     413, "%s", text);
	error = json_loads(body_of_answer(text), 0, NULL);
	cr_expect_eq(json_integer_value(json_object_get(error, "code")), 413,
		     "%s", text);
	json_decref(error);
	free(text);
	stop_e2b();
}
