// SPDX-License-Identifier: Apache-2.0
/*
 * test_thaw_run.c - `thaw run` as a user sees it: a command's stdout and
 * stderr byte for byte and apart, its exit status, time-outs, and one-line
 * errors.  Each VM test boots thaw's kernel with thaw-agent as init on real
 * KVM (nested-kvm.sh: this host's, or a QEMU-emulated host's).
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

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
