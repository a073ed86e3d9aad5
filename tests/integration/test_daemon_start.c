// SPDX-License-Identifier: Apache-2.0
/*
 * test_daemon_start.c - `thaw daemon` refusing to start, which needs no VM:
 * limits fail closed.  A daemon that cannot limit its sandboxes' memory
 * and processes hands out none: it exits naming the missing controller
 * and the file it looked at, and leaves no cgroup behind, unless the
 * config says require_limits = false, when it warns and goes on (to fail
 * later here, at a template kernel that does not exist).
 *
 * A controller is taken away in a mount namespace of the test's own: on
 * cgroup v1 the pids hierarchy is unmounted; on v2 a tmpfs hides
 * /sys/fs/cgroup, which leaves no hierarchy at all (each missing one is
 * named; memory is checked).  Needs root; skips without it.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define TIMEOUT_S 60

static char state[64], config[128], parent[64];

/* The mount point of the v1 hierarchy with @controller, or false. */
static bool v1_mount(const char *controller, char *out, size_t len)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char line[4096], point[PATH_MAX], type[64], super[1024];
	bool found = false;

	while (f && !found && fgets(line, sizeof(line), f)) {
		char *sep = strstr(line, " - ");

		if (!sep ||
		    sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1 ||
		    sscanf(sep, " - %63s %*s %1023s", type, super) != 2 ||
		    strcmp(type, "cgroup"))
			continue;
		for (char *o = strtok(super, ","); o && !found;
		     o = strtok(NULL, ","))
			found = !strcmp(o, controller);
		if (found)
			snprintf(out, len, "%s", point);
	}
	if (f)
		fclose(f);
	return found;
}

/* Hides a controller from this process and its children; the one that
 * is now missing. */
static const char *hide_a_controller(void)
{
	struct statfs fs;
	char pids[PATH_MAX];

	cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare: %s", strerror(errno));
	cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
	if (statfs("/sys/fs/cgroup", &fs) == 0 &&
	    (unsigned long)fs.f_type == CGROUP2_SUPER_MAGIC) {
		cr_assert_eq(mount("none", "/sys/fs/cgroup", "tmpfs", 0, NULL),
			     0, "%s", strerror(errno));
		return "memory";
	}
	if (!v1_mount("pids", pids, sizeof(pids)))
		cr_skip_test("no pids hierarchy to take away");
	cr_assert_eq(umount2(pids, MNT_DETACH), 0, "umount %s: %s", pids,
		     strerror(errno));
	return "pids";
}

static void setup(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root: the daemon makes cgroups");
	strcpy(state, "/tmp/thaw-daemon-start-XXXXXX");
	cr_assert_not_null(mkdtemp(state));
	snprintf(config, sizeof(config), "%s/thawd.ini", state);
	snprintf(parent, sizeof(parent), "thaw-test-start-%d", (int)getpid());
}

static void teardown(void)
{
	char cmd[256];

	if (!state[0])
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", state);
	(void)!system(cmd);
}

TestSuite(daemon_start, .init = setup, .fini = teardown, .timeout = 120);

static void write_config(const char *daemon_keys)
{
	FILE *f = fopen(config, "w");

	cr_assert_not_null(f);
	fprintf(f,
		"[daemon]\n"
		"cgroup_parent = %s\n"
		"%s"
		"[template default]\n"
		"kernel = /nonexistent/vmlinux\n"
		"initrd = /nonexistent/initrd.cpio\n",
		parent, daemon_keys);
	cr_assert_eq(fclose(f), 0);
}

static void run_daemon(struct run_result *r)
{
	char *argv[] = { THAW,	    "daemon", "--config", config,
			 "--state", state,    NULL };

	cr_assert_eq(run_command(argv, TIMEOUT_S, r), 0);
	cr_assert_not(r->timed_out, "the daemon did not stop: %s", r->err);
}

/* Nothing of ours below any hierarchy that is still there. */
static void expect_no_cgroup_left(void)
{
	static const char *const controllers[] = { "cpu", "memory", "pids" };
	char mnt[PATH_MAX], dir[PATH_MAX * 2];

	for (size_t i = 0; i < 3; i++) {
		if (!v1_mount(controllers[i], mnt, sizeof(mnt)))
			snprintf(mnt, sizeof(mnt), "/sys/fs/cgroup");
		snprintf(dir, sizeof(dir), "%s/%s", mnt, parent);
		cr_expect_neq(access(dir, F_OK), 0, "%s is left", dir);
	}
}

Test(daemon_start, missing_controller_refuses_to_start)
{
	const char *missing = hide_a_controller();
	struct run_result r;
	char want[64];

	write_config("");
	run_daemon(&r);
	cr_expect_neq(r.status, 0, "it started: %s", r.err);
	snprintf(want, sizeof(want), "no %s controller", missing);
	if (!strstr(r.err, want))
		snprintf(want, sizeof(want), "with the %s controller", missing);
	cr_expect_not_null(strstr(r.err, want), "%s not named: %s", missing,
			   r.err);
	cr_expect(strstr(r.err, "/proc/self/mountinfo") ||
			  strstr(r.err, "/sys/fs/cgroup/"),
		  "no file named: %s", r.err);
	cr_expect_not_null(strstr(r.err, "refusing to start"), "%s", r.err);
	cr_expect_null(strstr(r.err, "/nonexistent/vmlinux"),
		       "it went on to the template: %s", r.err);
	expect_no_cgroup_left();
	run_result_free(&r);
}

Test(daemon_start, require_limits_false_warns_and_goes_on)
{
	const char *missing = hide_a_controller();
	struct run_result r;

	write_config("require_limits = false\n");
	run_daemon(&r);
	cr_expect_not_null(strstr(r.err, "require_limits = false"), "%s",
			   r.err);
	cr_expect_not_null(strstr(r.err, missing), "%s", r.err);
	cr_expect_null(strstr(r.err, "refusing to start"), "%s", r.err);
	cr_expect_not_null(strstr(r.err, "/nonexistent/vmlinux"),
			   "it did not go on to the template: %s", r.err);
	expect_no_cgroup_left();
	run_result_free(&r);
}
