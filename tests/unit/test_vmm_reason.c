// SPDX-License-Identifier: Apache-2.0
/*
 * test_vmm_reason.c - pool/host/vmm_process.c reading a VMM's log: the
 * reason the VM stopped (what the daemon's API reports as stop_reason and
 * `thaw run` prints) is thaw-vmm's last word before its "timings:" line,
 * not a warning it logged on the way, with the logger's prefix taken off
 * exactly; the setup time comes from the timings line.
 *
 * Each test writes a vmm.log as thaw-vmm and the child before exec would.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "pool/host/vmm_process.h"

static struct vmm_process vmm;

static void write_log(const char *text)
{
	FILE *f;

	snprintf(vmm.vmm_log, sizeof(vmm.vmm_log), "/tmp/thaw-reason-%d.log",
		 (int)getpid());
	f = fopen(vmm.vmm_log, "w");
	cr_assert_not_null(f);
	fputs(text, f);
	fclose(f);
}

static void teardown(void)
{
	unlink(vmm.vmm_log);
}

TestSuite(reason, .fini = teardown);

static void expect_reason(const char *want)
{
	char reason[512];

	vmm_process_reason(&vmm, reason, sizeof(reason));
	cr_expect_str_eq(reason, want);
}

#define T "2026-12-01T03:35:18.123Z "

Test(reason, the_verdict_before_timings_not_an_earlier_warning)
{
	write_log(T "thaw-vmm: warning: sandbox 5f3a9c1e2b7d4a60: restoring "
		    "without prefetch: no working set\n" T
		    "thaw-vmm: warning: sandbox 5f3a9c1e2b7d4a60: vsock: "
		    "guest reset the connection\n" T
		    "thaw-vmm: error: sandbox 5f3a9c1e2b7d4a60: the guest "
		    "panicked: Kernel panic - not syncing: sandbox x: y\n" T
		    "thaw-vmm: sandbox 5f3a9c1e2b7d4a60: timings: vmm setup "
		    "12.5 ms, guest 900.0 ms\n");
	expect_reason("the guest panicked: Kernel panic - not syncing: "
		      "sandbox x: y");
	cr_expect_eq(vmm_process_setup_ms(&vmm), 12.5);
}

Test(reason, without_timings_the_last_line_and_prefixes_exactly)
{
	/* No sandbox id: a message that starts "sandbox " stays whole. */
	write_log(T "thaw-vmm: warning: a first warning\n" T
		    "thaw-vmm: error: sandbox dir is gone: killed\n");
	expect_reason("sandbox dir is gone: killed");
	write_log(T "thaw-vmm: info without a level word: a: b\n");
	expect_reason("info without a level word: a: b");
	cr_expect_eq(vmm_process_setup_ms(&vmm), -1);
}

Test(reason, the_childs_own_lines_stay_whole)
{
	write_log("cannot run /nowhere/thaw-vmm: No such file or directory\n");
	expect_reason("cannot run /nowhere/thaw-vmm: No such file or "
		      "directory");
}

Test(reason, a_vmm_with_nothing_to_say_gets_its_wait_status)
{
	write_log("");
	vmm.wait_status = SIGKILL; /* as waitpid() reports a kill -9 */
	expect_reason("killed by signal 9 (Killed)");
	vmm.wait_status = 3 << 8; /* exit(3) */
	expect_reason("exited with status 3, no message");
}

Test(reason, a_vmm_its_seccomp_filter_killed_says_which_call)
{
	/* The SIGSYS handler's line has no logger prefix; lines after it
	 * (none are written, but a supervisor's could be) do not hide it. */
	write_log(T "thaw-vmm: sandbox 5f3a9c1e2b7d4a60: restored\n"
		    "thaw-vmm: seccomp: forbidden system call 41 (socket)\n");
	vmm.wait_status = SIGSYS; /* as waitpid() reports it */
	expect_reason("killed by its seccomp filter: forbidden system call "
		      "41 (socket)");
	write_log(T "thaw-vmm: sandbox 5f3a9c1e2b7d4a60: restored\n");
	expect_reason("killed by its seccomp filter: SIGSYS, and no line "
		      "says which system call");
	/* Only death by SIGSYS makes the line the verdict. */
	write_log("thaw-vmm: seccomp: forbidden system call 41 (socket)\n" T
		  "thaw-vmm: guest rebooted\n" T
		  "thaw-vmm: timings: vmm setup 1.0 ms\n");
	vmm.wait_status = 0;
	expect_reason("guest rebooted");
}
