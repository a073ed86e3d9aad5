// SPDX-License-Identifier: Apache-2.0
/*
 * test_vmm_reason.c - pool/host/vmm_process.c reading a VMM's stop record
 * (vmm/vmm_report.h): the reason the VM stopped (what the daemon's API
 * reports as stop_reason and `thaw run` prints) is the record's, exactly,
 * whatever warnings the VMM logged on the way and whatever its log says;
 * the setup time comes from the same record; a VMM with no record gets
 * its wait status, and one its seccomp filter killed names the call.
 *
 * Each test feeds the report as thaw-vmm, its SIGSYS handler or the child
 * before exec would write it, and writes a vmm.log beside it that must
 * not matter.
 */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* A fresh report holding @records, then its end (the VMM is gone). */
static void report(const char *records)
{
	vmm_report_init(&vmm.report);
	vmm_report_feed(&vmm.report, records, strlen(records));
	vmm_report_end(&vmm.report);
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

Test(reason, the_stop_records_verdict_not_an_earlier_warning)
{
	/* The log's warnings and even its own last line do not count. */
	write_log(T "thaw-vmm: warning: sandbox 5f3a9c1e2b7d4a60: restoring "
		    "without prefetch: no working set\n" T
		    "thaw-vmm: warning: sandbox 5f3a9c1e2b7d4a60: vsock: "
		    "guest reset the connection\n" T
		    "thaw-vmm: sandbox 5f3a9c1e2b7d4a60: timings: vmm setup "
		    "99.0 ms\n");
	report("ready started_at_us=1000\n"
	       "stop status=3 setup_us=12500 kernel_start_us=900000 "
	       "reason=the%20guest%20panicked:%20Kernel%20panic%20-%20not%20"
	       "syncing:%20sandbox%20x:%20y\n");
	vmm.wait_status = 3 << 8;
	expect_reason("the guest panicked: Kernel panic - not syncing: "
		      "sandbox x: y");
	cr_expect_eq(vmm_process_setup_ms(&vmm), 12.5);
}

Test(reason, the_records_text_exactly_and_no_setup_without_one)
{
	/* A reason that starts "sandbox " or has a level word stays whole. */
	write_log("");
	report("stop status=1 reason=sandbox%20dir%20is%20gone:%20killed\n");
	vmm.wait_status = 1 << 8;
	expect_reason("sandbox dir is gone: killed");
	report("stop status=1 reason=error:%20a:%20b\n");
	expect_reason("error: a: b");
	cr_expect_eq(vmm_process_setup_ms(&vmm), -1);
}

Test(reason, the_childs_own_record_stays_whole)
{
	write_log("cannot run /nowhere/thaw-vmm: No such file or directory\n");
	report("stop status=125 reason=cannot%20run%20/nowhere/thaw-vmm:"
	       "%20No%20such%20file%20or%20directory\n");
	vmm.wait_status = 125 << 8;
	expect_reason("cannot run /nowhere/thaw-vmm: No such file or "
		      "directory");
}

Test(reason, a_vmm_with_nothing_to_say_gets_its_wait_status)
{
	/* Its log's last line is no record. */
	write_log(T "thaw-vmm: error: something went wrong\n");
	report("");
	vmm.wait_status = SIGKILL; /* as waitpid() reports a kill -9 */
	expect_reason("killed by signal 9 (Killed)");
	vmm.wait_status = 3 << 8; /* exit(3) */
	expect_reason("exited with status 3, no message");
	/* A record cut short is said, not used. */
	report("stop status=3 reason=half");
	expect_reason("exited with status 3, no message; its report: a "
		      "truncated record: 'stop status=3 reason=half'");
}

Test(reason, a_vmm_its_seccomp_filter_killed_says_which_call)
{
	/* The SIGSYS handler's record, after the VMM's ready one. */
	write_log(T "thaw-vmm: sandbox 5f3a9c1e2b7d4a60: restored\n");
	report("ready started_at_us=1\n"
	       "stop seccomp_syscall=41 seccomp_name=socket "
	       "reason=forbidden%20system%20call%2041%20(socket)\n");
	vmm.wait_status = SIGSYS; /* as waitpid() reports it */
	expect_reason("killed by its seccomp filter: forbidden system call "
		      "41 (socket)");
	report("ready started_at_us=1\n");
	expect_reason("killed by its seccomp filter: SIGSYS, and no record "
		      "says which system call");
	/* Only death by SIGSYS makes the call the verdict. */
	report("stop status=0 reason=guest%20rebooted setup_us=1000\n");
	vmm.wait_status = 0;
	expect_reason("guest rebooted");
}
