// SPDX-License-Identifier: Apache-2.0
/*
 * test_daemon_confinement.c - what a sandbox of thawd cannot do, on real KVM:
 * guest memory and fork bombs held by the cgroup limits (limits), every VMM
 * jailed alone and a forbidden system call ending only its own sandbox (jail).
 *
 * daemon_suite.h says how daemon-in-vm.sh runs it and what it shares with
 * the other test_daemon_* suites.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/integration/daemon_suite.h"
#include "tests/integration/harness.h"

DAEMON_SUITE_HOOKS();

TestSuite(limits, .init = connect_daemon);
TestSuite(jail, .init = connect_daemon);

/* ---- limits ---- */

struct bomb {
	char id[SB_ID_MAX];
	const char *cmd;
	int timeout_s;
	struct reply r; /* the exec's answer */
};

static void *bomb_thread(void *arg)
{
	struct bomb *b = arg;

	exec_json(&b->r, b->id,
		  json_pack("{s:s, s:b, s:i}", "cmd", b->cmd, "stream", 0,
			    "timeout_s", b->timeout_s),
		  b->timeout_s + scaled_s(RESTORE_TIMEOUT_S + BOMB_GRACE_S));
	return NULL;
}

/* The memory controller's files (v2 name, v1 name). */
#define MEMORY_MAX (hier.v2 ? "memory.max" : "memory.limit_in_bytes")
#define MEMORY_PEAK (hier.v2 ? "memory.peak" : "memory.max_usage_in_bytes")
#define MEMORY_NOW (hier.v2 ? "memory.current" : "memory.usage_in_bytes")
/* 0 on v2, the memory limit on v1 (where it counts memory plus swap). */
#define SWAP_MAX (hier.v2 ? "memory.swap.max" : "memory.memsw.limit_in_bytes")

struct bomb_watch {
	struct cg_dirs cgroup;
	const char *memory, *pids; /* the two directories of cgroup */
	uint64_t memory_max, memory_peak, pids_max, pids_peak, swap_max;
	bool swap_known; /* the kernel accounts swap: swap_max was read */
	double worst_health_s;
};

/*
 * Runs @cmd in a fresh "bomb" sandbox while sampling its VMM's cgroup and
 * the daemon's /health; afterwards another sandbox must still exec and
 * the bombed one be removable.
 */
static void bomb(const char *cmd, int timeout_s, struct bomb_watch *w)
{
	struct bomb b = { .cmd = cmd, .timeout_s = timeout_s };
	char other[SB_ID_MAX], run[PATH_MAX], console[PATH_MAX + 16];
	char sock[64], tail[2100];
	struct exec_result x;
	struct reply r;
	pthread_t thread;
	uint64_t v;

	memset(w, 0, sizeof(*w));
	create("{}", other);
	create("{\"template\":\"bomb\"}", b.id);
	pid_t vmm = sandbox_vmm(b.id);
	vmm_cgroup(vmm, &w->cgroup);
	w->memory = w->cgroup.dir[CG_MEMORY];
	w->pids = w->cgroup.dir[CG_PIDS];
	cr_assert(vmm_run_dir(vmm, run, sizeof(run), sock, sizeof(sock)),
		  "VMM %d has no --control", (int)vmm);
	snprintf(console, sizeof(console), "%s/console.log", run);
	cr_assert(cgroup_value(w->memory, MEMORY_MAX, &w->memory_max),
		  "no %s in the memory cgroup '%s'", MEMORY_MAX, w->memory);
	cr_assert(cgroup_value(w->pids, "pids.max", &w->pids_max),
		  "no pids.max in the pids cgroup '%s'", w->pids);
	w->swap_known = cgroup_value(w->memory, SWAP_MAX, &w->swap_max);

	double start = now_s();
	cr_assert_eq(pthread_create(&thread, NULL, bomb_thread, &b), 0);
	while (pthread_tryjoin_np(thread, NULL) == EBUSY) {
		struct reply h;

		if ((cgroup_value(w->memory, MEMORY_PEAK, &v) ||
		     cgroup_value(w->memory, MEMORY_NOW, &v)) &&
		    v > w->memory_peak)
			w->memory_peak = v;
		if (cgroup_value(w->pids, "pids.current", &v) &&
		    v > w->pids_peak)
			w->pids_peak = v;
		request(&(struct call){ .method = "GET",
					.path = "/health",
					.limit_s = scaled_s(HEALTH_LIMIT_S) },
			&h);
		cr_expect_eq(h.status, 200, "health during the bomb: %s",
			     h.body);
		if (h.seconds > w->worst_health_s)
			w->worst_health_s = h.seconds;
		reply_free(&h);
		sleep_s(0.2);
	}
	parse_exec(&b.r, false, &x);
	tail_of(console, 0, tail, sizeof(tail));
	fprintf(stderr, "test_daemon: the bombed guest's console ends:\n%s\n",
		tail);
	api(&r, "GET", NULL, "/sandboxes/%s", b.id);
	fprintf(stderr, "test_daemon: bombed VMM %s; GET %s: %ld %s",
		vmm_alive(vmm) ? "alive" : "gone", b.id, r.status, r.body);
	reply_free(&r);
	print_log_lines(b.id);
	fprintf(stderr,
		"test_daemon: '%s' for %.1f s: %s exit %d signal %d "
		"timed_out %d; cgroup memory peak %.1f MiB of %.1f, pids peak "
		"%" PRIu64 " of %" PRIu64 "; slowest /health %.3f s\n",
		cmd, now_s() - start, x.problem[0] ? x.problem : "answered",
		x.exit_code, x.signal, x.timed_out, w->memory_peak / 1048576.0,
		w->memory_max / 1048576.0, w->pids_peak, w->pids_max,
		w->worst_health_s);
	/* Contained is either: the guest ended the command, or the VMM died
	 * (500).  Never a hung request or a sick daemon. */
	cr_expect(b.r.status == 200 || b.r.status == 500,
		  "exec answered %ld: %s", b.r.status, b.r.body);
	exec_result_free(&x);
	reply_free(&b.r);

	cr_expect_eq(api(&r, "GET", NULL, "/health"), 200);
	cr_expect_str_eq(jstr(r.json, "status"), "ok", "%s", r.body);
	reply_free(&r);
	expect_echo(other, "unharmed");
	long status = api(&r, "DELETE", NULL, "/sandboxes/%s", b.id);
	cr_expect(status == 204 || status == 404, "DELETE bombed: %ld %s",
		  status, r.body);
	reply_free(&r);
	cr_expect(wait_gone(vmm, scaled_s(10)),
		  "bombed VMM %d survives its DELETE", (int)vmm);
	delete_sandbox(other);
}

Test(limits, memory_bomb_is_contained, .timeout = 900)
{
	struct bomb_watch w;

	bomb("x=a; while :; do x=$x$x; done", 60, &w);
	cr_expect_eq(w.memory_max, (uint64_t)BOMB_MEMORY_MIB << 20, "%s of %s",
		     MEMORY_MAX, w.memory);
	if (w.swap_known)
		cr_expect_eq(w.swap_max, hier.v2 ? 0 : w.memory_max,
			     "%s of %s: swap gets around the limit", SWAP_MAX,
			     w.memory);
	cr_expect_gt(w.memory_peak, 0, "memory of %s never read", w.memory);
	cr_expect_leq(w.memory_peak, w.memory_max, "peak over the limit");
}

Test(limits, fork_bomb_is_contained, .timeout = 900)
{
	struct bomb_watch w;

	bomb("b() { b | b & }; b; sleep 60", 5, &w);
	cr_expect_eq(w.pids_max, BOMB_PIDS, "pids.max of %s", w.pids);
	cr_expect_gt(w.pids_peak, 0, "pids of %s never read", w.pids);
	cr_expect_leq(w.pids_peak, w.pids_max, "pids over the limit");
}

/* ---- jail ---- */

/* The entries of directory @path, sorted, space-separated, into @out. */
static void list_dir(const char *path, char *out, size_t len)
{
	struct dirent **names;
	int n = scandir(path, &names, NULL, alphasort);
	size_t at = 0;

	out[0] = '\0';
	for (int i = 0; i < n; i++) {
		if (strcmp(names[i]->d_name, ".") &&
		    strcmp(names[i]->d_name, ".."))
			at += snprintf(out + at, len - at, "%s%s",
				       at ? " " : "", names[i]->d_name);
		free(names[i]);
	}
	if (n < 0)
		snprintf(out, len, "(%s: %s)", path, strerror(errno));
	free(names);
}

static bool same_namespace(pid_t a, pid_t b, const char *ns)
{
	char pa[64], pb[64], la[64] = "", lb[64] = "";

	snprintf(pa, sizeof(pa), "/proc/%d/ns/%s", (int)a, ns);
	snprintf(pb, sizeof(pb), "/proc/%d/ns/%s", (int)b, ns);
	cr_assert_gt(readlink(pa, la, sizeof(la) - 1), 0, "%s: %s", pa,
		     strerror(errno));
	cr_assert_gt(readlink(pb, lb, sizeof(lb) - 1), 0, "%s: %s", pb,
		     strerror(errno));
	return !strcmp(la, lb);
}

/* /dev/net/tun, the misc device 10:200 (Documentation/admin-guide/devices.txt).
 */
#define TUN_MAJOR 10
#define TUN_MINOR 200

/* The fd @vmm was told to report on (its --ready-fd), or -1. */
static int report_fd(pid_t vmm)
{
	char path[64];
	size_t len;
	int fd = -1;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)vmm);
	char *args = slurp(path, &len);
	for (size_t i = 0; args && i < len; i += strlen(args + i) + 1)
		if (!strcmp(args + i, "--ready-fd") &&
		    i + strlen(args + i) + 1 < len)
			fd = atoi(args + i + strlen(args + i) + 1);
	free(args);
	return fd;
}

/*
 * A jailed VMM holds only what it opened for itself (KVM's objects, its
 * sockets, eventfds, its TAP, its snapshot's files, /proc/self/pagemap),
 * its two logs and the pipe it reports on to its supervisor (its
 * --ready-fd, a pipe and nothing else), and has no environment (but
 * sanitizer options): nothing else its supervisor or the supervisor's
 * caller had open or set.
 */
static void expect_nothing_inherited(pid_t vmm)
{
	static const char *const own[] = { "/dev/null", "/dev/kvm",
					   "anon_inode:", "socket:[",
					   "/snapshot/" };
	char path[PATH_MAX], link[PATH_MAX], run[PATH_MAX], sock[64];
	char pagemap[64];
	struct dirent *e;
	struct stat st;
	size_t len;
	int report = report_fd(vmm);

	cr_assert(vmm_run_dir(vmm, run, sizeof(run), sock, sizeof(sock)));
	snprintf(pagemap, sizeof(pagemap), "/proc/%d/pagemap", (int)vmm);
	snprintf(path, sizeof(path), "/proc/%d/fd", (int)vmm);
	DIR *d = opendir(path);
	cr_assert_not_null(d, "%s: %s", path, strerror(errno));
	while ((e = readdir(d))) {
		ssize_t n;
		bool known = false;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fd/%s", (int)vmm,
			 e->d_name);
		n = readlink(path, link, sizeof(link) - 1);
		if (n < 0) /* closed meanwhile */
			continue;
		link[n] = '\0';
		for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
			known |= !strncmp(link, own[i], strlen(own[i]));
		len = strlen(run);
		known |= !strncmp(link, run, len) &&
			 (!strcmp(link + len, "/vmm.log") ||
			  !strcmp(link + len, "/console.log"));
		known |= !strcmp(link, pagemap);
		known |= atoi(e->d_name) == report &&
			 !strncmp(link, "pipe:[", 6);
		/* The sandbox's TAP, opened in its namespace before the jail's
		 * mounts: named by the device, whose path the host may not
		 * see (devtmpfs shows "/net/tun"). */
		known |= stat(path, &st) == 0 && S_ISCHR(st.st_mode) &&
			 st.st_rdev == makedev(TUN_MAJOR, TUN_MINOR);
		cr_expect(known, "VMM %d holds fd %s -> %s", vmm, e->d_name,
			  link);
	}
	closedir(d);

	snprintf(path, sizeof(path), "/proc/%d/environ", (int)vmm);
	char *env = slurp(path, &len);
	for (size_t i = 0; env && i < len; i += strlen(env + i) + 1)
		cr_expect(!strncmp(env + i, "ASAN_OPTIONS=", 13) ||
				  !strncmp(env + i, "UBSAN_OPTIONS=", 14) ||
				  !strncmp(env + i, "LSAN_OPTIONS=", 13),
			  "VMM %d inherited %.40s", vmm, env + i);
	free(env);
}

/* What the jail promises of every VMM, read from the host. */
static void expect_jailed(pid_t vmm, unsigned long long *uid_out)
{
	static const char *const caps[] = { "CapInh", "CapPrm", "CapEff",
					    "CapBnd", "CapAmb" };
	static const char *const namespaces[] = { "mnt", "pid",	   "ipc",
						  "uts", "cgroup", "net" };
	unsigned long long uid, gid, v;
	char path[PATH_MAX], list[512];
	struct stat st;

	cr_assert(status_field(vmm, "Uid", &uid, 10), "VMM %d gone", vmm);
	cr_assert(status_field(vmm, "Gid", &gid, 10));
	cr_expect(uid >= JAIL_FIRST_ID && uid <= JAIL_LAST_ID,
		  "VMM %d runs as uid %llu, not one of jail_ids", vmm, uid);
	cr_expect_eq(gid, uid, "VMM %d: gid %llu, uid %llu", vmm, gid, uid);
	for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
		cr_assert(status_field(vmm, caps[i], &v, 16));
		cr_expect_eq(v, 0, "VMM %d: %s %llx", vmm, caps[i], v);
	}
	cr_expect(status_field(vmm, "NoNewPrivs", &v, 10) && v == 1,
		  "VMM %d: NoNewPrivs not 1", vmm);
	cr_expect(status_field(vmm, "Seccomp", &v, 10) && v == 2,
		  "VMM %d: Seccomp not 2 (a filter)", vmm);
	for (size_t i = 0; i < sizeof(namespaces) / sizeof(namespaces[0]); i++)
		cr_expect(!same_namespace(vmm, getpid(), namespaces[i]),
			  "VMM %d shares our %s namespace", vmm, namespaces[i]);

	/* Its root: dev/kvm alone, nothing of the host's (its snapshot's files
	 * were opened before it entered the jail, see snapshot/preopen.h). */
	snprintf(path, sizeof(path), "/proc/%d/root", (int)vmm);
	list_dir(path, list, sizeof(list));
	cr_expect_str_eq(list, "dev", "VMM %d's root holds: %s", vmm, list);
	snprintf(path, sizeof(path), "/proc/%d/root/dev", (int)vmm);
	list_dir(path, list, sizeof(list));
	cr_expect_str_eq(list, "kvm", "VMM %d's /dev holds: %s", vmm, list);
	snprintf(path, sizeof(path), "/proc/%d/root/dev/kvm", (int)vmm);
	cr_assert_eq(stat(path, &st), 0, "%s: %s", path, strerror(errno));
	cr_expect(S_ISCHR(st.st_mode) && (st.st_mode & 07777) == 0600 &&
			  st.st_uid == uid,
		  "%s: mode %o owner %u", path, st.st_mode, st.st_uid);
	/* Read-only for it, and for root looking in. */
	snprintf(path, sizeof(path), "/proc/%d/root/planted", (int)vmm);
	cr_expect_lt(open(path, O_WRONLY | O_CREAT, 0600), 0,
		     "%s could be created", path);
	cr_expect_eq(errno, EROFS, "%s: %s", path, strerror(errno));
	expect_nothing_inherited(vmm);
	*uid_out = uid;
}

Test(jail, every_vmm_is_jailed_alone, .timeout = 900)
{
	char ids[2][SB_ID_MAX];
	unsigned long long uids[2];
	pid_t vmms[2];

	for (int i = 0; i < 2; i++) {
		create("{}", ids[i]);
		vmms[i] = sandbox_vmm(ids[i]);
		expect_jailed(vmms[i], &uids[i]);
	}
	cr_expect_neq(uids[0], uids[1], "two sandboxes share uid %llu",
		      uids[0]);
	cr_expect(!same_namespace(vmms[0], vmms[1], "mnt") &&
			  !same_namespace(vmms[0], vmms[1], "pid"),
		  "two VMMs share a mount or PID namespace");
	/* Jailed, they still do their work. */
	for (int i = 0; i < 2; i++) {
		expect_echo(ids[i], "jailed");
		delete_sandbox(ids[i]);
	}
}

/*
 * Sends @line to VMM @vmm's control socket (test builds have the
 * forbidden-syscall command); its answer, if any, into @reply.
 */
static void control_line(pid_t vmm, const char *line, char *reply, size_t len)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	char dir[PATH_MAX], sock[64];
	ssize_t n;

	cr_assert(vmm_run_dir(vmm, dir, sizeof(dir), sock, sizeof(sock)));
	cr_assert_lt(strlen(dir) + strlen(sock) + 1, sizeof(a.sun_path));
	memcpy(a.sun_path, dir, strlen(dir));
	a.sun_path[strlen(dir)] = '/';
	memcpy(a.sun_path + strlen(dir) + 1, sock, strlen(sock));
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0,
		  "%s: %s", a.sun_path, strerror(errno));
	cr_assert_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line));
	n = read(fd, reply, len - 1);
	reply[n > 0 ? n : 0] = '\0';
	close(fd);
}

/*
 * A VMM that makes a system call outside its filter dies by
 * SIGSYS; the daemon says which call and fails that sandbox alone.
 */
Test(jail, a_forbidden_system_call_fails_only_its_sandbox, .timeout = 900)
{
	char victim[SB_ID_MAX], bystander[SB_ID_MAX], reply[256];
	const char *reason = "";
	double start;
	struct reply r;

	create("{}", victim);
	create("{}", bystander);
	control_line(sandbox_vmm(victim), "forbidden-syscall\n", reply,
		     sizeof(reply));
	cr_expect_str_empty(reply, "the VMM answered: %s", reply);

	start = now_s();
	for (;;) {
		cr_assert_eq(api(&r, "GET", NULL, "/sandboxes/%s", victim), 200,
			     "%s", r.body);
		if (!strcmp(jstr(r.json, "state"), "stopped"))
			break;
		reply_free(&r);
		cr_assert_lt(now_s() - start, scaled_s(60),
			     "%s still running after its forbidden call",
			     victim);
		sleep_s(0.2);
	}
	reason = jstr(r.json, "stop_reason");
	cr_expect_not_null(strstr(reason,
				  "killed by its seccomp filter: forbidden "
				  "system call 41 (socket)"),
			   "stop_reason: %s", reason);
	reply_free(&r);

	char *log = slurp(files.log, NULL);
	char *line = log ? strstr(log, victim) : NULL;
	while (line && !strstr(line, "forbidden system call"))
		line = strstr(line + 1, victim);
	cr_expect_not_null(line,
			   "the daemon's log names no forbidden call "
			   "for %s",
			   victim);
	free(log);

	expect_echo(bystander, "unharmed");
	delete_sandbox(victim);
	delete_sandbox(bystander);
}
