// SPDX-License-Identifier: Apache-2.0
/*
 * test_pvm_gate.c - the PVM feasibility gate, kept as a regression test:
 * thaw-vmm starts a PVM guest (integration/pvm_guest/, a few hundred lines
 * built with this test) on a KVM-on-PVM host, and the guest's kernel runs
 * natively there instead of in KVM's instruction emulator, and takes every
 * kind of event a kernel lives on.
 *
 * The guest prints one "PVM: " line per step (guest.c says how each is
 * proven) and stops through the i8042 reset port.  Each test below boots
 * it once (tens of milliseconds) and checks one step, so a failure names
 * the step the host or thaw-vmm broke.  One more snapshots the guest while
 * it idles and checks that the restored clone still runs natively.  Other hosts
 * skip: the guest speaks the host ABI of kvm_pvm's native mode
 * (vmm/x86/pvm_abi.h), which a VMX/SVM host does not have and a KVM-on-PVM host
 * without pvm_native does not offer.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/pvm_guest/pvm_guest.h"
#include "vmm/x86/layout.h"

#define PVM_NATIVE_PARAM "/sys/module/kvm_pvm/parameters/pvm_native"
/* The guest's whole run is tens of milliseconds; this only ends a hang. */
#define GUEST_TIMEOUT_S 60

static bool host_has_pvm_native_mode(void)
{
	char value = 0;
	int fd = open(PVM_NATIVE_PARAM, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (read(fd, &value, 1) != 1)
		value = 0;
	close(fd);
	return value == 'Y' && kvm_usable();
}

/* thaw-vmm wants an initrd; the guest never looks at it. */
static void write_unused_initrd(char *path, size_t size)
{
	snprintf(path, size, "/tmp/thaw-pvm-gate-initrd-%d", (int)getpid());
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "%s", path);
	cr_assert_eq(fputs("unused\n", f) >= 0 && fclose(f) == 0, true);
}

static void skip_unless_pvm_native(void)
{
	if (!host_has_pvm_native_mode())
		cr_skip_test(
			"not a KVM-on-PVM host with native mode (" PVM_NATIVE_PARAM
			" is not Y, or no usable "
			"/dev/kvm): the gate checks that host's native "
			"path, which VMX/SVM hosts do not have");
}

static void run_guest(struct run_result *r)
{
	char initrd[64];

	skip_unless_pvm_native();
	write_unused_initrd(initrd, sizeof(initrd));
	char *argv[] = { THAW_VMM, "--kernel", PVM_GUEST, "--initrd",
			 initrd,   "--mem",    "64",	  NULL };
	cr_assert_eq(run_command(argv, GUEST_TIMEOUT_S, r), 0);
	unlink(initrd);
	cr_assert_not(r->timed_out,
		      "thaw-vmm still ran after %d s (a guest step that never "
		      "happens hangs it); console:\n%s\nstderr:\n%s",
		      GUEST_TIMEOUT_S, r->out, r->err);
	cr_expect_null(strstr(r->out, "PVM: FAIL"), "console:\n%s", r->out);
}

/* Boots the guest and checks that its console has @line. */
static void expect_step(const char *line)
{
	struct run_result r;

	run_guest(&r);
	cr_expect_not_null(strstr(r.out, line),
			   "the guest's console lacks '%s'; console:\n%s\n"
			   "stderr:\n%s",
			   line, r.out, r.err);
	run_result_free(&r);
}

Test(pvm_gate, thaw_vmm_starts_the_image_as_a_pvm_guest)
{
	struct run_result r;

	run_guest(&r);
	cr_expect_not_null(strstr(r.err,
				  "kernel is a PVM guest (host ABI "
				  "revision 1): it starts in native mode"),
			   "stderr:\n%s", r.err);
	run_result_free(&r);
}

Test(pvm_gate, the_kernel_runs_natively_from_its_first_instruction)
{
	char line[128];

	snprintf(line, sizeof(line),
		 "PVM: supervisor (native from the first instruction: mov %%cs "
		 "reads 0x33; native page %#x)\n",
		 BOOT_PVM_NATIVE_PAGE_ADDR);
	expect_step(line);
}

Test(pvm_gate, a_timer_interrupt_arrives_in_supervisor_mode)
{
	expect_step("PVM: timer (vector 0x20, interrupted cs 0x10)\n");
}

Test(pvm_gate, a_pending_interrupt_waits_for_the_flag_and_the_doorbell)
{
	expect_step("PVM: pending interrupt not taken with the flag off, "
		    "taken at the doorbell\n");
}

Test(pvm_gate, a_hypercall_reaches_the_host)
{
	expect_step("PVM: hypercall FLUSH_TLB ok, WRMSR ok, unknown number "
		    "-ENOSYS\n");
}

Test(pvm_gate, iretq_enters_user_mode)
{
	expect_step("PVM: user (the user program called with rsp 0x");
}

Test(pvm_gate, a_user_syscall_reaches_the_kernel)
{
	expect_step("PVM: syscall 42\n");
}

Test(pvm_gate, a_user_page_fault_reaches_the_kernel_with_cr2)
{
	expect_step("PVM: page fault at 0x40000000 error 0x4 from user rip ");
}

Test(pvm_gate, the_cr2_cell_holds_the_fault_address)
{
	expect_step("PVM: cr2 cell 0x40000000\n");
}

Test(pvm_gate, the_faulting_read_is_retried_after_the_kernel_maps_it)
{
	expect_step("PVM: user read 0x5a17c0de5a17c0de at 0x40000000 after "
		    "the fault\n");
}

Test(pvm_gate, system_calls_go_through_the_hosts_direct_switch)
{
	/* The guest itself fails if the fastest round trip is an exit's. */
	expect_step("PVM: direct switch: a null system call round trip in ");
}

Test(pvm_gate, the_guest_stops_through_the_reset_port)
{
	struct run_result r;

	run_guest(&r);
	cr_expect_not_null(strstr(r.out, "PVM: done\n"), "console:\n%s", r.out);
	cr_expect_eq(r.status, 0, "exit status %d; stderr:\n%s", r.status,
		     r.err);
	cr_expect_not_null(strstr(r.err, "guest rebooted"), "stderr:\n%s",
			   r.err);
	run_result_free(&r);
}

/*
 * KVM's RFLAGS.IF of a native guest is clear whatever the guest's own flag
 * says (pvm_abi.h): a VMM reading it would stop the guest at its first idle
 * halt as powered off ("guest halted").
 */
Test(pvm_gate, a_native_guest_idling_with_interrupts_on_keeps_running)
{
	struct run_result r;
	char initrd[64], last_tick[64];

	skip_unless_pvm_native();
	write_unused_initrd(initrd, sizeof(initrd));
	char *argv[] = { THAW_VMM,	  "--kernel", PVM_GUEST, "--initrd",
			 initrd,	  "--mem",    "64",	 "--cmdline",
			 GUEST_IDLE_WORD, NULL };
	cr_assert_eq(run_command(argv, GUEST_TIMEOUT_S, &r), 0);
	unlink(initrd);
	snprintf(last_tick, sizeof(last_tick),
		 "PVM: tick %#x, mov %%cs reads 0x33\n", GUEST_IDLE_TICKS);
	cr_expect_not_null(strstr(r.out, last_tick),
			   "the guest lacks '%s'; console:\n%s\nstderr:\n%s",
			   last_tick, r.out, r.err);
	cr_expect_null(strstr(r.err, "guest halted"), "stderr:\n%s", r.err);
	run_result_free(&r);
}

/* Waits until thaw-vmm's output in @log has @text; false after @timeout_s. */
static bool wait_for_output(const char *log, const char *text, int timeout_s)
{
	static char buf[65536];
	struct timespec pause = { 0, 20 * 1000 * 1000 };

	for (int waited_ms = 0; waited_ms < timeout_s * 1000; waited_ms += 20) {
		FILE *f = fopen(log, "r");
		size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

		if (f)
			fclose(f);
		buf[n] = '\0';
		if (strstr(buf, text))
			return true;
		nanosleep(&pause, NULL);
	}
	return false;
}

/*
 * The native-mode switch lives in an MSR KVM does not list for saving: a
 * snapshot without it restores a clone that the host emulates again, for
 * good (pvm_abi.h).  The guest idles on a periodic timer, saying each tick
 * how it runs; the snapshot is taken at its first tick and the VMM
 * stopped, and the clone must tick on to the last one natively.
 */
Test(pvm_gate, a_restored_clone_still_runs_natively)
{
	char dir[] = "/tmp/thaw-pvm-gate-XXXXXX", initrd[64], log[96],
	     control[96], snapshot[96], cmd[160], answer[256];

	skip_unless_pvm_native();
	cr_assert_not_null(mkdtemp(dir));
	write_unused_initrd(initrd, sizeof(initrd));
	snprintf(log, sizeof(log), "%s/vmm.log", dir);
	snprintf(control, sizeof(control), "%s/control", dir);
	snprintf(snapshot, sizeof(snapshot), "%s/snapshot", dir);
	cr_assert_eq(mkdir(snapshot, 0700), 0);

	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char *argv[] = { THAW_VMM,    "--kernel",  PVM_GUEST,
				 "--initrd",  initrd,	   "--mem",
				 "64",	      "--cmdline", GUEST_IDLE_WORD,
				 "--control", control,	   NULL };
		int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);

		dup2(fd, STDOUT_FILENO);
		dup2(fd, STDERR_FILENO);
		execv(THAW_VMM, argv);
		_exit(125);
	}
	bool idling = wait_for_output(log, "PVM: tick 0x1,", GUEST_TIMEOUT_S);
	if (idling) {
		snprintf(cmd, sizeof(cmd), "snapshot %s\n", snapshot);
		cr_expect_eq(
			control_command(control, cmd, answer, sizeof(answer)),
			0, "%s: %s", control, strerror(errno));
		cr_expect_eq(strncmp(answer, "ok", 2), 0, "snapshot: %s",
			     answer);
		control_command(control, "stop\n", answer, sizeof(answer));
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	cr_assert(idling,
		  "the guest never idled (its console and thaw-vmm's "
		  "log are in %s)",
		  log);

	struct run_result r;
	char *argv[] = { THAW_VMM, "--restore", snapshot, NULL };
	char last_tick[64];
	cr_assert_eq(run_command(argv, GUEST_TIMEOUT_S, &r), 0);
	snprintf(last_tick, sizeof(last_tick),
		 "PVM: tick %#x, mov %%cs reads 0x33\n", GUEST_IDLE_TICKS);
	cr_expect_not_null(strstr(r.out, last_tick),
			   "the clone lacks '%s' (its last tick, natively); "
			   "console:\n%s\nstderr:\n%s",
			   last_tick, r.out, r.err);
	cr_expect_null(strstr(r.out, "reads 0x10"),
		       "the clone ran emulated; console:\n%s", r.out);
	cr_expect_eq(r.status, 0, "exit status %d; stderr:\n%s", r.status,
		     r.err);
	run_result_free(&r);
	unlink(initrd);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	cr_expect_eq(system(cmd), 0);
}
