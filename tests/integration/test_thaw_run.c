// SPDX-License-Identifier: Apache-2.0
/*
 * test_thaw_run.c - `thaw run` as a user sees it: a command's stdout and
 * stderr byte for byte and apart, its exit status, time-outs, and one-line
 * errors.  Each VM test boots thaw's kernel with thaw-agent as init on real
 * KVM (nested-kvm.sh: this host's, or a QEMU-emulated host's).
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <glob.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/skips.h"

#define RUN_TIMEOUT_S 900
#define EXIT_THAW_ERROR 125

/* thaw run [OPTIONS...] -- CMD...: @words is NULL-terminated. */
static void thaw_run(char *const words[], struct run_result *r)
{
	char *argv[32] = { THAW_NESTED_KVM,
			   THAW,
			   "run",
			   "--kernel",
			   THAW_TEST_IMAGES "/vmlinux",
			   "--initrd",
			   THAW_TEST_IMAGES "/agent.cpio" };
	int n = 7;

	while (*words)
		argv[n++] = *words++;
	argv[n] = NULL;
	/* In a nested host thaw needs thaw-vmm beside it. */
	setenv("NESTED_KVM_PROGRAMS", THAW_VMM, 1);
	cr_assert_eq(run_command(argv, RUN_TIMEOUT_S, r), 0);
	cr_assert_not(r->timed_out, "thaw run hung; stderr: %s", r->err);
}

#define WORDS(...) ((char *[]){ __VA_ARGS__, NULL })

Test(thaw_run, echo_prints_exactly_hi, .timeout = RUN_TIMEOUT_S + 60)
{
	struct run_result r;

	thaw_run(WORDS("--", "echo", "hi"), &r);
	cr_expect_eq(r.status, 0, "status %d; stderr: %s", r.status, r.err);
	cr_expect_str_eq(r.out, "hi\n");
	cr_expect_not_null(strstr(r.err, "thaw: vmm setup "), "stderr: %s",
			   r.err);
	cr_expect_not_null(strstr(r.err, " ms, boot to agent ready "),
			   "stderr: %s", r.err);
	run_result_free(&r);
}

Test(thaw_run, exit_code_and_stderr_are_the_commands,
     .timeout = RUN_TIMEOUT_S + 60)
{
	struct run_result r;

	thaw_run(WORDS("--vcpus", "2", "--", "sh", "-c",
		       "printf 'out\\0bin'; echo to-stderr >&2; exit 7"),
		 &r);
	cr_expect_eq(r.status, 7, "status %d; stderr: %s", r.status, r.err);
	cr_expect_eq(r.out_len, 7);
	cr_expect_arr_eq(r.out, "out\0bin", 7);
	cr_expect_not_null(strstr(r.err, "to-stderr\n"), "stderr: %s", r.err);
	cr_expect_null(strstr(r.out, "to-stderr"));
	run_result_free(&r);
}

Test(thaw_run, timeout_kills_the_command_and_its_children,
     .timeout = RUN_TIMEOUT_S + 60)
{
	struct run_result r;

	thaw_run(WORDS("--timeout", "1", "--", "sh", "-c",
		       "sleep 100 & sleep 100; echo not reached"),
		 &r);
	cr_expect_eq(r.status, 128 + 9, "status %d; stderr: %s", r.status,
		     r.err);
	cr_expect_not_null(strstr(r.err, "timed out"), "stderr: %s", r.err);
	cr_expect_null(strstr(r.out, "not reached"));
	run_result_free(&r);
}

Test(thaw_run, missing_command_is_127, .timeout = RUN_TIMEOUT_S + 60)
{
	struct run_result r;

	thaw_run(WORDS("--", "/no/such/program"), &r);
	cr_expect_eq(r.status, 127, "status %d; stderr: %s", r.status, r.err);
	cr_expect_not_null(strstr(r.err, "/no/such/program"), "stderr: %s",
			   r.err);
	run_result_free(&r);
}

/* What the run directory's logs looked like while a guest flooded. */
struct log_watch {
	off_t console_max, vmm_max;
	mode_t console_mode;
	bool cut_then_flooded; /* the mark, then the guest's last words */
};

/* The largest size @pattern's file had; its mode, and its bytes in @buf. */
static off_t look_at(const char *pattern, mode_t *mode, char *buf, size_t size,
		     size_t *len)
{
	glob_t g;
	struct stat st;
	off_t n = 0;

	if (glob(pattern, 0, NULL, &g) == 0 && stat(g.gl_pathv[0], &st) == 0) {
		int fd = open(g.gl_pathv[0], O_RDONLY | O_CLOEXEC);
		ssize_t got = fd >= 0 ? read(fd, buf, size) : -1;

		n = st.st_size;
		if (mode)
			*mode = st.st_mode & 07777;
		if (len)
			*len = got > 0 ? (size_t)got : 0;
		if (fd >= 0)
			close(fd);
	}
	globfree(&g);
	return n;
}

/*
 * Watches @runtime's run directory every 20 ms until @stop reads EOF, then
 * writes what it saw to @report.
 */
static void __attribute__((noreturn))
watch_logs(const char *runtime, int stop, int report)
{
	static char buf[1 << 20];
	struct log_watch w = { 0 };
	char console[128], vmm[128];
	struct pollfd p = { .fd = stop, .events = POLLIN };

	snprintf(console, sizeof(console), "%s/thaw-run-*/console.log",
		 runtime);
	snprintf(vmm, sizeof(vmm), "%s/thaw-run-*/vmm.log", runtime);
	while (poll(&p, 1, 20) == 0) {
		size_t len = 0;
		off_t n = look_at(console, &w.console_mode, buf, sizeof(buf),
				  &len);
		const char *mark = memmem(buf, len, "bytes dropped]", 14);

		if (n > w.console_max)
			w.console_max = n;
		if (mark &&
		    memmem(mark, len - (size_t)(mark - buf), "flooded", 7))
			w.cut_then_flooded = true;
		n = look_at(vmm, NULL, buf, sizeof(buf), NULL);
		if (n > w.vmm_max)
			w.vmm_max = n;
	}
	_exit(write(report, &w, sizeof(w)) == sizeof(w) ? 0 : 1);
}

/*
 * A guest writing its console flat out (at ~10 KB/s through the emulated
 * UART on a KVM-on-PVM host: 200 KB, a dozen times the bound, take about
 * 20 s) leaves console.log and vmm.log under --log-max all along, the
 * console's head, a mark and its last words in place; the guest still
 * answers afterwards.
 */
Test(thaw_run, a_console_flood_leaves_the_logs_under_their_bound,
     .timeout = RUN_TIMEOUT_S + 60)
{
	char runtime[] = "/tmp/thaw-run-flood-XXXXXX";
	const off_t bound = 16384;
	struct log_watch w;
	struct run_result r;
	int stop[2], report[2];
	pid_t watcher;

	thaw_skip_unless_kvm(kvm_usable(),
			     "the run directory is in nested-kvm.sh's host");
	cr_assert_not_null(mkdtemp(runtime));
	setenv("XDG_RUNTIME_DIR", runtime, 1);
	cr_assert_eq(pipe2(stop, O_CLOEXEC), 0);
	cr_assert_eq(pipe2(report, O_CLOEXEC), 0);
	watcher = fork();
	cr_assert_geq(watcher, 0);
	if (watcher == 0) {
		close(stop[1]);
		watch_logs(runtime, stop[0], report[1]);
	}
	close(stop[0]);
	close(report[1]);
	thaw_run(WORDS("--log-max", "16K", "--", "sh", "-c",
		       "head -c 200000 /dev/zero > /dev/ttyS0; "
		       "echo flooded > /dev/ttyS0; sleep 2; echo alive"),
		 &r);
	close(stop[1]);
	cr_assert_eq(read(report[0], &w, sizeof(w)), (ssize_t)sizeof(w));
	waitpid(watcher, NULL, 0);
	close(report[0]);

	cr_expect_eq(r.status, 0, "status %d; stderr: %s", r.status, r.err);
	cr_expect_str_eq(r.out, "alive\n");
	cr_expect_gt(w.console_max, 0, "console.log never seen");
	cr_expect_leq(w.console_max, bound, "console.log reached %lld bytes",
		      (long long)w.console_max);
	cr_expect_leq(w.vmm_max, bound, "vmm.log reached %lld bytes",
		      (long long)w.vmm_max);
	cr_expect(w.cut_then_flooded,
		  "console.log never held the mark, then the last words");
	cr_expect_eq(w.console_mode, 0600, "console.log is %o", w.console_mode);
	cr_expect_eq(rmdir(runtime), 0, "%s not empty", runtime);
	run_result_free(&r);
}

/* Usage errors never start a VM: no nested host needed. */
static void expect_usage_error(char *const words[], const char *needle)
{
	char *argv[16] = { THAW };
	struct run_result r;
	int n = 1;

	while (*words)
		argv[n++] = *words++;
	argv[n] = NULL;
	cr_assert_eq(run_command(argv, 30, &r), 0);
	cr_expect_eq(r.status, EXIT_THAW_ERROR, "status %d; stderr: %s",
		     r.status, r.err);
	cr_expect_eq(count_lines(r.err), 1, "stderr: %s", r.err);
	cr_expect_not_null(strstr(r.err, needle), "stderr: %s", r.err);
	cr_expect_eq(r.out_len, 0);
	run_result_free(&r);
}

Test(thaw_run, bad_flags_are_one_line_errors)
{
	expect_usage_error(WORDS("run", "--frobnicate", "--", "true"),
			   "unknown option '--frobnicate'");
	expect_usage_error(WORDS("run", "--timeout", "soon", "--", "true"),
			   "--timeout 'soon' is not a number of seconds");
	expect_usage_error(WORDS("run"), "no command given");
	expect_usage_error(WORDS("run", "--from", "0123456789abcdef", "--mem",
				 "64", "--", "true"),
			   "--from takes the machine from the snapshot");
	expect_usage_error(WORDS("run", "--from", "0123456789abcdef",
				 "--page-in", "eager", "--", "true"),
			   "--page-in takes prefetch or lazy, not 'eager'");
	/* Only a fixed warm-up records a working set, never a command. */
	expect_usage_error(WORDS("run", "--from", "0123456789abcdef",
				 "--record-working-set", "--", "true"),
			   "--record-working-set takes --from SNAPSHOT and no "
			   "command");
	expect_usage_error(WORDS("run", "--record-working-set"),
			   "--record-working-set takes --from SNAPSHOT");
}

Test(thaw_run, missing_kernel_is_one_line_and_leaves_nothing)
{
	char runtime[] = "/tmp/thaw-run-test-XXXXXX";
	char *argv[] = { THAW,	     "run",
			 "--kernel", "/nonexistent/vmlinux",
			 "--initrd", "/etc/hostname",
			 "--",	     "true",
			 NULL };
	struct run_result r;

	cr_assert_not_null(mkdtemp(runtime));
	setenv("XDG_RUNTIME_DIR", runtime, 1);
	cr_assert_eq(run_command(argv, 60, &r), 0);
	cr_expect_eq(r.status, EXIT_THAW_ERROR, "status %d; stderr: %s",
		     r.status, r.err);
	cr_expect_eq(count_lines(r.err), 1, "stderr: %s", r.err);
	cr_expect_not_null(
		strstr(r.err,
		       "kernel /nonexistent/vmlinux: No such file or directory"),
		"stderr: %s", r.err);
	/* The run directory, its sockets and logs are gone. */
	cr_expect_eq(rmdir(runtime), 0, "%s not empty", runtime);
	run_result_free(&r);
}
