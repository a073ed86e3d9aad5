// SPDX-License-Identifier: Apache-2.0
/*
 * test_cgroup.c - pool/host/cgroup.c against the real cgroup filesystem of
 * the machine it runs on: v1 on a host with one hierarchy per controller, v2
 * inside tests/integration/nested-kvm.sh's L1 host.  Limits are read back
 * from the kernel's files and then enforced on forked children (the OOM
 * killer, fork's EAGAIN); destroy and reap are checked by the children's
 * deaths and the directories' absence.
 *
 * Each test runs in its own criterion worker and works below its own parent
 * "thaw-test-<worker pid>", in the group of a made-up state directory
 * (OWNER), which the fixture removes.  The worker is a
 * child subreaper, so the grandchildren a destroy kills can be reaped and
 * their deaths checked too.  Needs root and a cgroup filesystem; skips
 * without either.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool/host/cgroup.h"

#define MIB (1024ULL * 1024)
#define OWNER "/var/lib/thaw-test/state"

static struct cgroup_root root;
static char parent[64], err[2 * PATH_MAX];

static bool have_cgroup_fs(void)
{
	struct statfs s;
	char line[1024];
	bool found = false;
	FILE *f;

	if (statfs("/sys/fs/cgroup", &s) == 0 &&
	    (unsigned long)s.f_type == CGROUP2_SUPER_MAGIC)
		return true;
	f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, " - cgroup ") != NULL;
	fclose(f);
	return found;
}

static void setup(void)
{
	if (geteuid() != 0)
		cr_skip_test(
			"needs root: it creates cgroups below /sys/fs/cgroup");
	if (!have_cgroup_fs())
		cr_skip_test(
			"no cgroup filesystem: neither cgroup2 at /sys/fs/cgroup nor a v1 hierarchy in /proc/self/mountinfo");
	snprintf(parent, sizeof(parent), "thaw-test-%d", (int)getpid());
	cr_assert_eq(cgroup_init(&root, parent, OWNER, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
	cr_log_info("cgroup %s: cpu %s, memory %s, pids %s",
		    root.v2 ? "v2" : "v1", root.dir[CGROUP_CPU],
		    root.dir[CGROUP_MEMORY], root.dir[CGROUP_PIDS]);
	for (int c = 0; c < CGROUP_NR; c++)
		if (root.missing[c][0])
			cr_log_info("%s", root.missing[c]);
}

static void teardown(void)
{
	if (!parent[0])
		return;
	cgroup_reap_stale(&root, err, sizeof(err));
	cgroup_release(&root);
}

TestSuite(cgroup, .init = setup, .fini = teardown);

/*
 * Where cgroup.h says a state directory's group is, below the hierarchy's
 * root: /parent/state-<its FNV-1a 64>.
 */
static const char *own_group(const char *owner)
{
	static char path[128];
	uint64_t h = 0xcbf29ce484222325ULL;

	for (const char *p = owner; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	snprintf(path, sizeof(path), "/%s/state-%016llx", parent,
		 (unsigned long long)h);
	return path;
}

static const char *const controller[CGROUP_NR] = { "cpu", "memory", "pids" };

static void need_all_controllers(void)
{
	for (int c = 0; c < CGROUP_NR; c++)
		cr_assert(root.dir[c][0], "no %s controller below %s: %s",
			  controller[c], parent, root.missing[c]);
}

static char *read_file(const char *dir, const char *file)
{
	static char buf[4096];
	char path[PATH_MAX * 2];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
	n = read(fd, buf, sizeof(buf) - 1);
	cr_assert_geq(n, 0, "read %s: %s", path, strerror(errno));
	close(fd);
	/* Without the final newline, the one-value files compare as
	 * strings. */
	buf[n > 0 && buf[n - 1] == '\n' ? n - 1 : n] = '\0';
	return buf;
}

static bool exists(const char *dir, const char *file)
{
	char path[PATH_MAX * 2];

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	return access(path, F_OK) == 0;
}

static void expect_file(const char *dir, const char *file, const char *want)
{
	cr_expect_str_eq(read_file(dir, file), want, "%s/%s", dir, file);
}

static bool procs_has(const char *dir, pid_t pid)
{
	char path[PATH_MAX * 2];
	bool found = false;
	FILE *f;
	int p;

	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	f = fopen(path, "re");
	cr_assert(f, "open %s: %s", path, strerror(errno));
	while (!found && fscanf(f, "%d", &p) == 1)
		found = p == pid;
	fclose(f);
	return found;
}

/*
 * Where the children wait for cgroup_destroy(): not forever, so a destroy
 * that kills nobody fails the test (SIGALRM is not SIGKILL) instead of
 * hanging it and leaving them behind.
 */
static void linger(void)
{
	alarm(60);
	for (;;)
		pause();
}

static void make(const char *name, uint64_t memory_max, uint32_t pids_max,
		 uint32_t cpu_percent, struct cgroup *cg)
{
	const struct cgroup_limits l = { .memory_max = memory_max,
					 .pids_max = pids_max,
					 .cpu_percent = cpu_percent };

	cr_assert_eq(cgroup_create(&root, name, &l, cg, err, sizeof(err)), 0,
		     "%s", err);
}

/*
 * A child that enters @cg, runs @body with the write end of a pipe and then
 * waits to be killed; the read end goes to *@rfd.  A failed enter arrives
 * there as a negative int.
 */
static pid_t spawn_in(const struct cgroup *cg, void (*body)(int wfd), int *rfd)
{
	int p[2], r;
	pid_t pid;

	cr_assert_eq(pipe(p), 0);
	pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(p[0]);
		r = cgroup_enter(cg);
		if (r) {
			(void)!write(p[1], &r, sizeof(r));
			_exit(100);
		}
		body(p[1]);
		linger();
	}
	close(p[1]);
	*rfd = p[0];
	return pid;
}

static void read_report(int fd, void *buf, size_t len)
{
	ssize_t n = read(fd, buf, len);

	cr_assert_eq(n, (ssize_t)len, "the child reported %zd bytes: %s", n,
		     n == sizeof(int) ? strerror(-*(int *)buf) : "-");
}

static void expect_killed(pid_t pid)
{
	int status;

	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
		  "pid %d: status %#x, not killed by SIGKILL", (int)pid,
		  status);
}

static void expect_gone(const struct cgroup *cg)
{
	struct stat st;

	for (int c = 0; c < CGROUP_NR; c++)
		if (cg->dir[c][0])
			cr_expect(stat(cg->dir[c], &st) < 0 && errno == ENOENT,
				  "%s still exists", cg->dir[c]);
}

Test(cgroup, limits_are_written)
{
	struct cgroup cg, none;
	const char *mem, *pids, *cpu;

	need_all_controllers();
	make("sb-limits", 64 * MIB, 16, 150, &cg);
	mem = cg.dir[CGROUP_MEMORY];
	pids = cg.dir[CGROUP_PIDS];
	cpu = cg.dir[CGROUP_CPU];
	expect_file(pids, "pids.max", "16");
	if (cg.v2) {
		expect_file(mem, "memory.max", "67108864");
		if (exists(mem, "memory.swap.max"))
			expect_file(mem, "memory.swap.max", "0");
		expect_file(cpu, "cpu.max", "150000 100000");
	} else {
		expect_file(mem, "memory.limit_in_bytes", "67108864");
		if (exists(mem, "memory.memsw.limit_in_bytes"))
			expect_file(mem, "memory.memsw.limit_in_bytes",
				    "67108864");
		expect_file(cpu, "cpu.cfs_period_us", "100000");
		expect_file(cpu, "cpu.cfs_quota_us", "150000");
	}

	/* 0: the kernel's defaults stay, i.e. no limit. */
	make("sb-none", 0, 0, 0, &none);
	expect_file(none.dir[CGROUP_PIDS], "pids.max", "max");
	if (none.v2) {
		expect_file(none.dir[CGROUP_MEMORY], "memory.max", "max");
		expect_file(none.dir[CGROUP_CPU], "cpu.max", "max 100000");
	} else {
		char unlimited[64];

		snprintf(unlimited, sizeof(unlimited), "%s",
			 read_file(root.dir[CGROUP_MEMORY],
				   "memory.limit_in_bytes"));
		expect_file(none.dir[CGROUP_MEMORY], "memory.limit_in_bytes",
			    unlimited);
		expect_file(none.dir[CGROUP_CPU], "cpu.cfs_quota_us", "-1");
	}
	cr_assert_eq(cgroup_destroy(&cg, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(cgroup_destroy(&none, err, sizeof(err)), 0, "%s", err);
	expect_gone(&cg);
	expect_gone(&none);
}

static void fork_sleeper(int wfd)
{
	pid_t pid = fork();

	if (pid == 0)
		linger();
	(void)!write(wfd, &pid, sizeof(pid));
}

Test(cgroup, enter_then_destroy_kills_and_removes)
{
	char want[256], proc[64];
	struct cgroup_stat st;
	struct cgroup cg;
	pid_t child, grandchild;
	int fd;

	make("sb-enter", 0, 0, 0, &cg);
	child = spawn_in(&cg, fork_sleeper, &fd);
	read_report(fd, &grandchild, sizeof(grandchild));
	close(fd);
	cr_assert_gt(grandchild, 0);
	for (int c = 0; c < CGROUP_NR; c++) {
		if (!cg.dir[c][0])
			continue;
		cr_expect(procs_has(cg.dir[c], child), "%d not in %s",
			  (int)child, cg.dir[c]);
		cr_expect(procs_has(cg.dir[c], grandchild), "%d not in %s",
			  (int)grandchild, cg.dir[c]);
	}
	snprintf(want, sizeof(want), "%s/sb-enter", own_group(OWNER));
	snprintf(proc, sizeof(proc), "/proc/%d", (int)child);
	cr_expect(strstr(read_file(proc, "cgroup"), want),
		  "%s/cgroup does not name %s", proc, want);

	cr_assert_eq(cgroup_read_stat(&cg, &st), 0);
	if (cg.dir[CGROUP_PIDS][0])
		cr_expect_eq(st.pids_current, 2);
	if (cg.dir[CGROUP_MEMORY][0])
		cr_expect_gt(st.memory_current, 0);

	/* Before reaping: zombies must not keep the cgroup busy. */
	cr_assert_eq(cgroup_destroy(&cg, err, sizeof(err)), 0, "%s", err);
	expect_killed(child);
	expect_killed(grandchild);
	expect_gone(&cg);
	cr_expect_eq(cgroup_destroy(&cg, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(cgroup_read_stat(&cg, &st), -ENOENT);
}

static void eat_memory(int wfd)
{
	size_t len = 256 * MIB;
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		_exit(101);
	for (size_t i = 0; i < len; i += 4096)
		p[i] = 1;
	(void)wfd;
	_exit(0);
}

Test(cgroup, memory_limit_ends_in_oom_kill)
{
	const uint64_t limit = 32 * MIB;
	struct cgroup_stat st;
	struct cgroup cg;
	pid_t child;
	int fd;

	need_all_controllers();
	make("sb-oom", limit, 0, 0, &cg);
	child = spawn_in(&cg, eat_memory, &fd);
	expect_killed(child);
	close(fd);
	cr_assert_eq(cgroup_read_stat(&cg, &st), 0);
	/* Only kernels before 4.13 lack the oom_kill line. */
	if (strstr(read_file(cg.dir[CGROUP_MEMORY],
			     cg.v2 ? "memory.events" : "memory.oom_control"),
		   "oom_kill"))
		cr_expect_geq(st.oom_kills, 1);
	cr_expect_leq(st.memory_current, limit);
	cr_expect_leq(st.memory_peak, limit);
	cr_assert_eq(cgroup_destroy(&cg, err, sizeof(err)), 0, "%s", err);
}

struct fork_report {
	int forked, err;
};

static void fork_until_refused(int wfd)
{
	struct fork_report rep = { 0, 0 };

	for (int i = 0; i < 16 && !rep.err; i++) {
		pid_t pid = fork();

		if (pid == 0)
			linger();
		if (pid < 0)
			rep.err = errno;
		else
			rep.forked++;
	}
	(void)!write(wfd, &rep, sizeof(rep));
}

Test(cgroup, pids_limit_makes_fork_fail)
{
	struct fork_report rep;
	struct cgroup_stat st;
	struct cgroup cg;
	pid_t child;
	int fd;

	need_all_controllers();
	make("sb-pids", 0, 4, 0, &cg);
	child = spawn_in(&cg, fork_until_refused, &fd);
	read_report(fd, &rep, sizeof(rep));
	close(fd);
	cr_expect_eq(rep.err, EAGAIN, "fork failed with %s", strerror(rep.err));
	/* The child itself is the 4th. */
	cr_expect_eq(rep.forked, 3);
	cr_assert_eq(cgroup_read_stat(&cg, &st), 0);
	cr_expect_eq(st.pids_current, 4);
	cr_assert_eq(cgroup_destroy(&cg, err, sizeof(err)), 0, "%s", err);
	expect_killed(child);
	expect_gone(&cg);
}

/* cgroup_init() prints nothing: the daemon logs what is missing. */
Test(cgroup, each_controller_is_there_or_says_why)
{
	for (int c = 0; c < CGROUP_NR; c++) {
		if (root.dir[c][0])
			cr_expect_str_empty(root.missing[c], "%s",
					    controller[c]);
		else
			cr_expect(strstr(root.missing[c], controller[c]) &&
					  strstr(root.missing[c], "/"),
				  "%s: '%s' names neither it nor a file",
				  controller[c], root.missing[c]);
	}
}

Test(cgroup, missing_controller_skips_only_its_limit)
{
	struct cgroup_root partial;
	const struct cgroup_limits l = { .memory_max = 32 * MIB,
					 .pids_max = 8 };
	struct cgroup cg;
	const char *mem;

	need_all_controllers();
	partial = root;
	partial.dir[CGROUP_PIDS][0] = '\0';
	cr_assert_eq(
		cgroup_create(&partial, "sb-nopids", &l, &cg, err, sizeof(err)),
		0, "%s", err);
	cr_expect_str_empty(cg.dir[CGROUP_PIDS]);
	mem = cg.dir[CGROUP_MEMORY];
	expect_file(mem, cg.v2 ? "memory.max" : "memory.limit_in_bytes",
		    "33554432");
	if (cg.v2)
		expect_file(mem, "pids.max", "max");
	else
		cr_expect(!exists(root.dir[CGROUP_PIDS], "sb-nopids"));
	cr_assert_eq(cgroup_destroy(&cg, err, sizeof(err)), 0, "%s", err);
	expect_gone(&cg);
}

static void nothing(int wfd)
{
	(void)!write(wfd, "", 1);
}

Test(cgroup, reap_stale_removes_leftovers)
{
	struct cgroup a, b, c;
	char half[PATH_MAX * 2], ok;
	pid_t child;
	int fd;

	need_all_controllers();
	make("stale-a", 0, 0, 0, &a);
	make("stale-b", 16 * MIB, 8, 10, &b);
	make("stale-c", 0, 0, 0, &c);
	child = spawn_in(&b, nothing, &fd);
	read_report(fd, &ok, 1);
	close(fd);
	/* A daemon that died halfway through a v1 create. */
	snprintf(half, sizeof(half), "%s/stale-half", root.dir[CGROUP_MEMORY]);
	cr_assert_eq(mkdir(half, 0755), 0);

	cr_assert_eq(cgroup_reap_stale(&root, err, sizeof(err)), 4, "%s", err);
	expect_killed(child);
	expect_gone(&a);
	expect_gone(&b);
	expect_gone(&c);
	cr_expect(access(half, F_OK) < 0 && errno == ENOENT);
	cr_expect_eq(cgroup_reap_stale(&root, err, sizeof(err)), 0, "%s", err);
}

Test(cgroup, bad_names_are_rejected)
{
	const char *bad[] = {
		"",
		".",
		"..",
		"a/b",
		"../x",
		"a..b",
		"sp ace",
		"x;y",
		"\xc3\xa9",
		"a\nb",
		"0123456789012345678901234567890123456789012345678901234567890123"
	};
	const struct cgroup_limits l = { 0 };
	struct cgroup_root r2;
	struct cgroup cg;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		cr_expect_eq(
			cgroup_create(&root, bad[i], &l, &cg, err, sizeof(err)),
			-EINVAL, "\"%s\" accepted", bad[i]);
		cr_expect(strstr(err, "bad cgroup name"), "%s", err);
	}
	cr_expect_eq(cgroup_init(&r2, "../etc", OWNER, err, sizeof(err)),
		     -EINVAL);
	cr_expect(strstr(err, "\"../etc\""), "%s", err);

	/* The longest good name, of every allowed kind of character. */
	make("Az09_.-45678901234567890123456789012345678901234567890123456789",
	     0, 0, 0, &cg);
	cr_assert_eq(cgroup_destroy(&cg, err, sizeof(err)), 0, "%s", err);
}

Test(cgroup, existing_name_is_refused_and_kept)
{
	const struct cgroup_limits l = { 0 };
	struct cgroup first, second;

	make("sb-dup", 0, 0, 0, &first);
	cr_expect_eq(
		cgroup_create(&root, "sb-dup", &l, &second, err, sizeof(err)),
		-EEXIST);
	cr_expect(strstr(err, "sb-dup"), "%s", err);
	for (int c = 0; c < CGROUP_NR; c++)
		if (first.dir[c][0])
			cr_expect(access(first.dir[c], F_OK) == 0,
				  "%s was removed", first.dir[c]);
	cr_assert_eq(cgroup_destroy(&first, err, sizeof(err)), 0, "%s", err);
}

/* Checks that @r's directories end in own_group(@owner). */
static void expect_group_of(const struct cgroup_root *r, const char *owner)
{
	const char *want = own_group(owner), *at;

	for (int c = 0; c < CGROUP_NR; c++)
		if (r->dir[c][0])
			cr_expect((at = strstr(r->dir[c], want)) &&
					  !strcmp(at, want),
				  "%s is not ...%s", r->dir[c], want);
}

/*
 * Two daemons of two state directories share the parent: one reaping its
 * leftovers (as a restarted daemon does) kills nothing of the other's.
 */
Test(cgroup, reaping_one_state_dir_leaves_another_alone)
{
	struct cgroup_root other;
	struct cgroup mine, theirs;
	pid_t mine_pid, their_pid;
	char ok;
	int fd;

	need_all_controllers();
	cr_assert_eq(cgroup_init(&other, parent, OWNER "-2", err, sizeof(err)),
		     0, "%s", err);
	expect_group_of(&root, OWNER);
	expect_group_of(&other, OWNER "-2");
	make("sb-mine", 0, 0, 0, &mine);
	cr_assert_eq(cgroup_create(&other, "sb-theirs",
				   &(struct cgroup_limits){ 0 }, &theirs, err,
				   sizeof(err)),
		     0, "%s", err);
	mine_pid = spawn_in(&mine, nothing, &fd);
	read_report(fd, &ok, 1);
	close(fd);
	their_pid = spawn_in(&theirs, nothing, &fd);
	read_report(fd, &ok, 1);
	close(fd);

	cr_expect_eq(cgroup_reap_stale(&root, err, sizeof(err)), 1, "%s", err);
	expect_killed(mine_pid);
	expect_gone(&mine);
	cr_expect_eq(kill(their_pid, 0), 0, "the other daemon's VMM died");
	for (int c = 0; c < CGROUP_NR; c++)
		if (theirs.dir[c][0])
			cr_expect(procs_has(theirs.dir[c], their_pid),
				  "%d left %s", (int)their_pid, theirs.dir[c]);

	/* Releasing ours keeps the parent while theirs is in it. */
	cgroup_release(&root);
	for (int c = 0; c < CGROUP_NR; c++)
		if (other.dir[c][0])
			cr_expect_eq(access(other.dir[c], F_OK), 0, "%s",
				     other.dir[c]);
	cr_expect_eq(cgroup_reap_stale(&other, err, sizeof(err)), 1, "%s", err);
	expect_killed(their_pid);
	cgroup_release(&other);
	/* The fixture's teardown finds nothing left: its init again. */
	cr_assert_eq(cgroup_init(&root, parent, OWNER, err, sizeof(err)), 0,
		     "%s", err);
}

/* cgroup_require() names the controller missing and the file it read. */
Test(cgroup, required_controller_missing_is_named)
{
	struct cgroup_root partial = root;

	need_all_controllers();
	cr_expect_eq(cgroup_require(&root,
				    CGROUP_BIT(CGROUP_MEMORY) |
					    CGROUP_BIT(CGROUP_PIDS) |
					    CGROUP_BIT(CGROUP_CPU),
				    err, sizeof(err)),
		     0, "%s", err);
	partial.dir[CGROUP_PIDS][0] = '\0';
	snprintf(partial.missing[CGROUP_PIDS], sizeof(partial.missing[0]),
		 "cgroup: no pids controller in /sys/fs/cgroup/x");
	cr_expect_eq(cgroup_require(&partial, CGROUP_BIT(CGROUP_MEMORY), err,
				    sizeof(err)),
		     0, "%s", err);
	err[0] = '\0';
	cr_expect_eq(cgroup_require(&partial,
				    CGROUP_BIT(CGROUP_MEMORY) |
					    CGROUP_BIT(CGROUP_PIDS),
				    err, sizeof(err)),
		     -ENOTSUP);
	cr_expect_str_eq(err, "cgroup: no pids controller in /sys/fs/cgroup/x");
}
