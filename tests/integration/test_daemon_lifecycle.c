// SPDX-License-Identifier: Apache-2.0
/*
 * test_daemon_lifecycle.c - thawd killed with -9 and restarted on real KVM: its
 * VMMs, jails, cgroups and run directories gone with it, the restarted daemon
 * serving (logging JSON lines), and SIGTERM stopping everything.
 *
 * daemon_suite.h says how daemon-in-vm.sh runs it and what it shares with
 * the other test_daemon_* suites.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/daemon_suite.h"
#include "tests/integration/harness.h"

DAEMON_SUITE_HOOKS();

TestSuite(lifecycle, .init = connect_daemon);

/* ---- lifecycle ---- */

#define LEASED 3
#define MAX_VMMS 256

/* Waits for every template's pool to settle; the clones it holds. */
static int settle_all(void)
{
	struct pool_counts c;
	int total = 0;

	for (size_t i = 0; i < sizeof(templates) / sizeof(templates[0]); i++) {
		cr_assert_geq(wait_settled(templates[i], &c), 0,
			      "%s never settled: ready %.0f restoring %.0f",
			      templates[i], c.ready, c.restoring);
		total += (int)(c.ready + c.leased);
	}
	return total;
}

/*
 * kill -9 with sandboxes leased: the VMMs die with the daemon, a restart
 * cleans up what they left and serves; SIGTERM then leaves nothing.
 */
/*
 * Every line the daemon wrote to its log from @from on is one JSON object
 * with the fields pool/API.md promises, and the sandboxes it restored are
 * named in theirs.
 */
static void expect_json_log(off_t from)
{
	char *log = slurp(files.log, NULL), *save;
	int lines = 0, about_sandboxes = 0;

	cr_assert_not_null(log);
	for (char *line = strtok_r(log + from, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save), lines++) {
		json_error_t e;
		json_t *o = json_loads(line, 0, &e);

		cr_expect_not_null(o, "not JSON (%s): %s", e.text, line);
		if (!o)
			continue;
		cr_expect_str_eq(jstr(o, "program"), "thawd", "%s", line);
		cr_expect_str_neq(jstr(o, "time"), "", "%s", line);
		cr_expect_str_neq(jstr(o, "level"), "", "%s", line);
		cr_expect_str_neq(jstr(o, "msg"), "", "%s", line);
		about_sandboxes += json_object_get(o, "sandbox") != NULL;
		json_decref(o);
	}
	free(log);
	cr_expect_gt(lines, 2, "%d log lines in JSON", lines);
	cr_expect_gt(about_sandboxes, 0, "no JSON line names a sandbox");
}

/*
 * What a dead daemon's jails may leave: processes running as one of the
 * suite's jail ids, ids still held in the lock file, jail mounts in our
 * namespace (they belong in the VMMs' own).  A description into @out, ""
 * when there are none.
 */
static void jail_leftovers(char *out, size_t len)
{
	struct flock held = {
		.l_type = F_WRLCK,
		.l_whence = SEEK_SET,
		.l_start = JAIL_FIRST_ID,
		.l_len = JAIL_LAST_ID - JAIL_FIRST_ID + 1,
	};
	DIR *d = opendir("/proc");
	struct dirent *e;
	size_t n = 0;

	out[0] = '\0';
	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		long pid = strtol(e->d_name, NULL, 10);
		unsigned long long uid;

		/* A zombie runs nothing: killed VMMs wait for whoever
		 * inherited them to reap them (a subreaper may not). */
		if (pid > 0 && status_field(pid, "Uid", &uid, 10) &&
		    uid >= JAIL_FIRST_ID && uid <= JAIL_LAST_ID && !zombie(pid))
			n += snprintf(out + n, len - n,
				      "process %ld runs as jail uid %llu; ",
				      pid, uid);
	}
	closedir(d);
	int fd = open(JAIL_IDS_LOCK_FILE, O_RDWR | O_CLOEXEC);
	if (fd >= 0 && fcntl(fd, F_OFD_GETLK, &held) == 0 &&
	    held.l_type != F_UNLCK)
		n += snprintf(out + n, len - n, "jail id %lld still held; ",
			      (long long)held.l_start);
	if (fd >= 0)
		close(fd);
	char *mounts = slurp("/proc/self/mountinfo", NULL);
	if (mounts && strstr(mounts, " thaw-jail "))
		snprintf(out + n, len - n, "a jail's tmpfs is mounted here");
	free(mounts);
}

Test(lifecycle, kill_restart_and_terminate, .timeout = 2400)
{
	char ids[LEASED][SB_ID_MAX], list[3 * PATH_MAX];
	struct cg_dirs cgroups[LEASED];
	char run[LEASED][PATH_MAX], base[PATH_MAX], sock[64], err[4096];
	pid_t vmms[MAX_VMMS];
	struct reply r;
	int status;

	for (int i = 0; i < LEASED; i++) {
		pid_t vmm;

		create("{}", ids[i]);
		vmm = sandbox_vmm(ids[i]);
		vmm_cgroup(vmm, &cgroups[i]);
		cr_assert(vmm_run_dir(vmm, run[i], sizeof(run[i]), sock,
				      sizeof(sock)),
			  "VMM %d has no --control", (int)vmm);
	}
	snprintf(base, sizeof(base), "%s", run[0]);
	*strrchr(base, '/') = '\0';

	pid_t old = daemon_pid();
	cr_assert_eq(kill(old, SIGKILL), 0);
	cr_assert_geq(wait_exit(old, scaled_s(10), &status), 0);
	double took = wait_no_vmms(scaled_s(10));
	fprintf(stderr, "test_daemon: VMMs gone %.1f s after kill -9\n", took);
	cr_expect_eq(live_vmms(NULL, 0), 0, "VMMs outlived kill -9");
	jail_leftovers(err, sizeof(err));
	cr_expect_str_empty(err, "after kill -9: %s", err);

	/* The restarted daemon logs JSON lines, as a platform's collector
	 * would take them. */
	struct stat st;
	off_t json_from = stat(files.log, &st) == 0 ? st.st_size : 0;

	log_json = true;
	pid_t pid = daemon_start(true, err, sizeof(err));
	log_json = false;
	cr_assert_gt(pid, 0, "restart: %s", err);
	for (int i = 0; i < LEASED; i++) {
		cr_expect_eq(api(&r, "GET", NULL, "/sandboxes/%s", ids[i]), 404,
			     "%s after the restart: %s", ids[i], r.body);
		reply_free(&r);
	}
	int pooled = settle_all();
	int n = live_vmms(vmms, MAX_VMMS), all = 0;
	cr_expect_eq(n, pooled, "%d VMMs run, the pools hold %d", n, pooled);
	cr_expect_eq(empty_cgroups(&all), 0, "stale cgroups below %s",
		     cg_list(&parent, list, sizeof(list)));
	for (int i = 0; i < LEASED; i++) {
		for (int c = 0; c < CG_NR; c++)
			cr_expect(!cgroups[i].dir[c][0] ||
					  access(cgroups[i].dir[c], F_OK) != 0,
				  "%s is left", cgroups[i].dir[c]);
		cr_expect_neq(access(run[i], F_OK), 0, "%s is left", run[i]);
	}
	cr_expect_eq(run_dirs(base, sock), n, "%d run dirs in %s for %d VMMs",
		     run_dirs(base, sock), base, n);
	fprintf(stderr,
		"test_daemon: after the restart %d VMMs, %d cgroups, %d run "
		"dirs\n",
		n, all, run_dirs(base, sock));

	cr_assert_eq(kill(pid, SIGTERM), 0);
	cr_assert_eq(wait_exit(pid, scaled_s(120), &status), 1,
		     "SIGTERM ignored");
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "SIGTERM: status %#x", status);
	unlink(files.pid);
	/* They go with it, not long after. */
	int after = scaled_s(3);
	cr_expect_lt(wait_no_vmms(after), after,
		     "VMMs outlived the daemon by %d s", after);
	all = 0;
	empty_cgroups(&all);
	cr_expect_eq(all, 0, "%d cgroups left below %s", all,
		     cg_list(&parent, list, sizeof(list)));
	cr_expect_neq(access(files.socket, F_OK), 0, "the socket is left");
	cr_expect_eq(run_dirs(base, sock), 0, "run dirs left in %s", base);
	jail_leftovers(err, sizeof(err));
	cr_expect_str_empty(err, "after SIGTERM: %s", err);
	expect_json_log(json_from);

	/* The tests after this one need a daemon. */
	cr_assert_gt(daemon_start(false, err, sizeof(err)), 0, "%s", err);
}
