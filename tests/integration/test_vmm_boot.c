// SPDX-License-Identifier: Apache-2.0
/*
 * test_vmm_boot.c - thaw-vmm boots thaw's guest kernel on real KVM and the
 * guest's user space does real work (PVM hosts: through the syscall patch
 * and the emulation fixups; VMX/SVM hosts: natively).  Boots are slow on
 * PVM hosts (minutes), so the suite boots thaw's kernel twice: once for
 * everything that should work, once for a guest that panics; and Debian's
 * stock cloud kernel (a bzImage) once, for the first of those.  Two more
 * "kernels" of a few bytes check the ends a real kernel rarely shows: a
 * triple fault, and a CPU halted for good with interrupts off.
 *
 * thaw-vmm runs through nested-kvm.sh: on this machine's /dev/kvm when it
 * has one, else on the real KVM of a Linux VM emulated by QEMU.  The
 * seccomp tests read the VMM's /proc entries, so they run only on this
 * machine's own /dev/kvm: a VM whose tiny kernel idles with interrupts on,
 * its main, vCPU, vsock and control threads each under a filter of its own,
 * killed by SIGSYS through the test builds' "forbidden-syscall" control
 * command.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "vmm/vmm_report.h"
#include "tests/skips.h"

#define BOOT_TIMEOUT_S 900
#define EXIT_CRASHED 3

static void boot(const char *kernel, const char *initrd, const char *vcpus,
		 struct run_result *r)
{
	char *argv[] = { THAW_NESTED_KVM, THAW_VMM,	 "--kernel",
			 (char *)kernel,  "--initrd",	 (char *)initrd,
			 "--vcpus",	  (char *)vcpus, "--mem",
			 "256",		  NULL };

	cr_assert_eq(run_command(argv, BOOT_TIMEOUT_S, r), 0);
	/* The guest's tty turns "\n" into "\r\n"; compare lines without it. */
	char *to = r->out;
	for (const char *from = r->out; *from; from++)
		if (*from != '\r')
			*to++ = *from;
	*to = '\0';
	cr_assert_not(r->timed_out,
		      "thaw-vmm did not finish in %d s; stdout: %s\nstderr: %s",
		      BOOT_TIMEOUT_S, r->out, r->err);
}

static void expect_line(const struct run_result *r, const char *line)
{
	cr_expect_not_null(strstr(r->out, line),
			   "console lacks '%s'; console was:\n%s", line,
			   r->out);
}

/* Boots @kernel on the boot-test initramfs and checks all it reports. */
static void expect_user_space_works(const char *kernel, const char *vcpus)
{
	struct run_result r;
	char cpus_line[32];

	boot(kernel, THAW_TEST_IMAGES "/boot-test.cpio", vcpus, &r);
	cr_expect_eq(r.status, 0, "exit status %d; stderr: %s", r.status,
		     r.err);
	expect_line(&r, "T: init pid 1\n");
	expect_line(&r, "T: pipeline gamma\n");
	expect_line(&r, "T: forks 20\n");
	expect_line(&r, "T: urandom 32 hex digits\n");
	snprintf(cpus_line, sizeof(cpus_line), "T: cpus %s\n", vcpus);
	expect_line(&r, cpus_line);
	expect_line(&r, "T: tty hello\n");
	expect_line(&r, "thaw-boot-test: hello from kmsg");
	expect_line(&r, "T: done\n");

	const char *proc = strstr(r.out, "T: proc-self entries ");
	cr_assert_not_null(proc);
	cr_expect_gt(atoi(proc + strlen("T: proc-self entries ")), 50);

	cr_expect_not_null(strstr(r.err, "thaw-vmm: timings: vmm setup "),
			   "stderr: %s", r.err);
	cr_expect_null(strstr(r.err, "not reached"), "stderr: %s", r.err);
	run_result_free(&r);
}

Test(boot, user_space_runs_on_two_vcpus_and_powers_off,
     .timeout = BOOT_TIMEOUT_S + 60)
{
	/* docs/hosts.md, Known limits: guest processes there crash now and then
	 * (busybox segfaults reading its TLS), which fails the fork count. */
	if (kvm_is_pvm())
		cr_skip_test(
			"this host's /dev/kvm is KVM-on-PVM, where thaw's "
			"guest loses a process's TLS pointer now and then "
			"(docs/hosts.md, Known limits); runs on VMX/SVM and in "
			"the emulated host");
	expect_user_space_works(THAW_TEST_IMAGES "/vmlinux", "2");
}

/*
 * One vCPU: Debian's cloud kernel finds CPUs only through ACPI (it is built
 * without MP table parsing), and thaw-vmm describes the machine with an MP
 * table alone.
 */
Test(boot, stock_debian_bzimage_boots_too, .timeout = BOOT_TIMEOUT_S + 60)
{
	/* PVM-NOTES.md section 1: in KVM-on-PVM's instruction emulator the
	 * stock kernel never reaches /init (18 min tried); it lacks thaw's
	 * kernel's syscall patch and minimal config. */
	if (kvm_is_pvm())
		cr_skip_test(
			"this host's /dev/kvm is KVM-on-PVM, where Debian's "
			"stock kernel never reaches user space (no "
			"thaw_pvm_syscall patch); runs on VMX/SVM and in "
			"the emulated host");
	expect_user_space_works(THAW_TEST_IMAGES "/stock-vmlinuz", "1");
}

Test(boot, kernel_panic_ends_the_vmm_with_an_error,
     .timeout = BOOT_TIMEOUT_S + 60)
{
	struct run_result r;

	boot(THAW_TEST_IMAGES "/vmlinux", THAW_TEST_IMAGES "/panic-test.cpio",
	     "1", &r);
	cr_expect_eq(r.status, EXIT_CRASHED, "exit status %d; stderr: %s",
		     r.status, r.err);
	expect_line(&r, "T: about to exit");
	cr_expect_not_null(strstr(r.err, "Kernel panic - not syncing"),
			   "stderr: %s", r.err);
	run_result_free(&r);
}

static const char *tiny_kernel(const char *name, const uint8_t *code,
			       size_t len)
{
	static char path[256];

	snprintf(path, sizeof(path), "%s/%s", THAW_TEST_IMAGES, name);
	cr_assert_eq(write_tiny_kernel(path, code, len, 4096), 0);
	return path;
}

Test(boot, triple_fault_ends_the_vmm_with_an_error,
     .timeout = BOOT_TIMEOUT_S + 60)
{
	static const uint8_t ud2[] = { 0x0f, 0x0b };
	struct run_result r;

	boot(tiny_kernel("ud2-kernel", ud2, sizeof(ud2)),
	     THAW_TEST_IMAGES "/panic-test.cpio", "1", &r);
	cr_expect_eq(r.status, EXIT_CRASHED, "exit status %d; stderr: %s",
		     r.status, r.err);
	cr_expect_not_null(strstr(r.err, "triple fault"), "stderr: %s", r.err);
	run_result_free(&r);
}

Test(boot, cpu_halted_with_interrupts_off_ends_the_vm,
     .timeout = BOOT_TIMEOUT_S + 60)
{
	static const uint8_t cli_hlt[] = { 0xfa, 0xf4, 0xeb, 0xfd };
	struct run_result r;

	boot(tiny_kernel("halt-kernel", cli_hlt, sizeof(cli_hlt)),
	     THAW_TEST_IMAGES "/panic-test.cpio", "2", &r);
	cr_expect_eq(r.status, 0, "exit status %d; stderr: %s", r.status,
		     r.err);
	cr_expect_not_null(strstr(r.err, "guest halted"), "stderr: %s", r.err);
	run_result_free(&r);
}

/* --- seccomp -------------------------------------------------------------- */

/*
 * main, 2 vCPUs, the vsock device's and the control socket's threads; KVM's
 * own workers (kvm-nx-lpage-recovery, ...) are listed too but make no
 * system calls, so they do not count.
 */
#define IDLE_VM_THREADS 5

struct idle_vm {
	pid_t pid;
	int report; /* our end of its --ready-fd pipe */
	char dir[64];
	char control[96];
	char log[96];
};

/*
 * Starts thaw-vmm on a kernel that idles (sti; hlt; jmp back) with
 * interrupts on, which the VMM never takes for a stopped guest, with a
 * vsock device and a control socket; @extra is one more flag or NULL.
 * Returns once the VMM says its sockets listen.
 */
static void start_idle_vm(struct idle_vm *vm, const char *extra)
{
	static const uint8_t idle[] = { 0xfb, 0xf4, 0xeb, 0xfd };
	const char *kernel = tiny_kernel("idle-kernel", idle, sizeof(idle));
	char vsock[96], ready_fd[16];
	int ready[2];

	snprintf(vm->dir, sizeof(vm->dir), "/tmp/thaw-seccomp-XXXXXX");
	cr_assert_not_null(mkdtemp(vm->dir));
	snprintf(vm->control, sizeof(vm->control), "%s/control", vm->dir);
	snprintf(vsock, sizeof(vsock), "%s/vsock", vm->dir);
	snprintf(vm->log, sizeof(vm->log), "%s/vmm.log", vm->dir);
	cr_assert_eq(pipe(ready), 0);
	snprintf(ready_fd, sizeof(ready_fd), "%d", ready[1]);
	vm->pid = fork();
	cr_assert_geq(vm->pid, 0);
	if (vm->pid == 0) {
		char *argv[] = { THAW_VMM,
				 "--kernel",
				 (char *)kernel,
				 "--initrd",
				 THAW_TEST_IMAGES "/panic-test.cpio",
				 "--vcpus",
				 "2",
				 "--mem",
				 "64",
				 "--vsock",
				 vsock,
				 "--control",
				 vm->control,
				 "--ready-fd",
				 ready_fd,
				 (char *)extra,
				 NULL };
		int log = open(vm->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);

		close(ready[0]);
		dup2(log, STDERR_FILENO);
		dup2(log, STDOUT_FILENO);
		/* Nothing of ours goes along but the ready pipe: every
		 * other descriptor the VMM holds is its own. */
		close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
		fcntl(ready[1], F_SETFD, 0);
		execv(THAW_VMM, argv);
		_exit(125);
	}
	close(ready[1]);
	char line[8] = "";
	cr_assert_gt(read(ready[0], line, sizeof(line)), 0,
		     "thaw-vmm never said ready (log %s)", vm->log);
	vm->report = ready[0];
}

/* What the VMM reported after its ready record, once it ended. */
static void read_stop_record(struct idle_vm *vm, struct vmm_report *report)
{
	char buf[VMM_REPORT_LINE_MAX];
	ssize_t n;

	vmm_report_init(report);
	while ((n = read(vm->report, buf, sizeof(buf))) > 0)
		vmm_report_feed(report, buf, (size_t)n);
	vmm_report_end(report);
}

/* The value of "Seccomp:" (the mode) or "Seccomp_filters:" in @status. */
static int status_field(const char *status, const char *key)
{
	FILE *f = fopen(status, "r");
	char line[256];
	int value = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, key, strlen(key)))
			value = atoi(line + strlen(key));
	fclose(f);
	return value;
}

static bool kvm_worker(const struct idle_vm *vm, const char *tid)
{
	char path[320], comm[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%s/comm", (int)vm->pid,
		 tid);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(comm, sizeof(comm), f))
			comm[0] = '\0';
		fclose(f);
	}
	return !strncmp(comm, "kvm-", 4);
}

/*
 * Waits (up to 10 s) until the VMM has IDLE_VM_THREADS threads and each
 * shows Seccomp mode @mode with @filters filters; fails saying which not.
 */
static void expect_every_thread(const struct idle_vm *vm, int mode, int filters)
{
	char path[320], why[384] = "";
	time_t deadline = time(NULL) + 10;

	for (;;) {
		int threads = 0;
		DIR *d;
		struct dirent *e;

		snprintf(path, sizeof(path), "/proc/%d/task", (int)vm->pid);
		cr_assert_not_null(d = opendir(path));
		why[0] = '\0';
		while ((e = readdir(d))) {
			if (e->d_name[0] == '.' || kvm_worker(vm, e->d_name))
				continue;
			threads++;
			snprintf(path, sizeof(path), "/proc/%d/task/%s/status",
				 (int)vm->pid, e->d_name);
			int m = status_field(path, "Seccomp:");
			int n = status_field(path, "Seccomp_filters:");
			if (m != mode || n != filters)
				snprintf(why, sizeof(why),
					 "thread %s: Seccomp %d, "
					 "Seccomp_filters %d",
					 e->d_name, m, n);
		}
		closedir(d);
		if (threads != IDLE_VM_THREADS && !why[0])
			snprintf(why, sizeof(why), "%d threads, not %d",
				 threads, IDLE_VM_THREADS);
		if (!why[0] || time(NULL) > deadline)
			break;
		usleep(50000);
	}
	cr_expect_str_eq(why, "",
			 "want Seccomp %d with %d filter(s) on each "
			 "thread: %s",
			 mode, filters, why);
	snprintf(path, sizeof(path), "/proc/%d/status", (int)vm->pid);
	cr_expect_eq(status_field(path, "Seccomp:"), mode);
}

/*
 * Every descriptor the VMM opened itself (all past stdio: it inherited no
 * other) is close-on-exec: a program it ran would get none.
 */
static void expect_all_close_on_exec(const struct idle_vm *vm)
{
	char path[320], line[128];
	struct dirent *e;
	int fds = 0;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/fdinfo", (int)vm->pid);
	cr_assert_not_null(d = opendir(path));
	while ((e = readdir(d))) {
		unsigned int flags = 0;
		FILE *f;

		if (e->d_name[0] == '.' || atoi(e->d_name) <= 2)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/fdinfo/%s", (int)vm->pid,
			 e->d_name);
		if (!(f = fopen(path, "r")))
			continue; /* closed meanwhile */
		while (fgets(line, sizeof(line), f))
			sscanf(line, "flags: %o", &flags);
		fclose(f);
		fds++;
		cr_expect(flags & O_CLOEXEC, "fd %s lacks O_CLOEXEC (flags %o)",
			  e->d_name, flags);
	}
	closedir(d);
	cr_expect_gt(fds, 5, "only %d descriptors past stdio", fds);
}

/* Sends @command on the control socket; the answer, "" when it hung up. */
static void control(const struct idle_vm *vm, const char *command, char *answer,
		    size_t size)
{
	cr_assert_eq(control_command(vm->control, command, answer, size), 0,
		     "%s: %s", vm->control, strerror(errno));
}

static char *read_log(const struct idle_vm *vm)
{
	static char text[16384];
	int fd = open(vm->log, O_RDONLY);
	ssize_t n = fd < 0 ? -1 : read(fd, text, sizeof(text) - 1);

	text[n > 0 ? n : 0] = '\0';
	if (fd >= 0)
		close(fd);
	return text;
}

static void remove_idle_vm(struct idle_vm *vm)
{
	char path[128];

	close(vm->report);
	snprintf(path, sizeof(path), "rm -rf %s", vm->dir);
	cr_expect_eq(system(path), 0);
}

/* An idle VM whose /proc entries we read: this machine's /dev/kvm only. */
static void start_watched_vm(struct idle_vm *vm, const char *flag)
{
	thaw_skip_unless_kvm(kvm_usable(),
			     "reads the VMM's /proc entries: needs this "
			     "machine's own /dev/kvm");
	start_idle_vm(vm, flag);
}

Test(boot, seccomp_filters_every_thread_and_a_forbidden_call_kills_by_sigsys,
     .timeout = BOOT_TIMEOUT_S + 60)
{
	struct idle_vm vm;
	char answer[256];
	int status;

	start_watched_vm(&vm, NULL);
	/* One filter each: none inherited the main thread's (it loads
	 * last), none runs unfiltered. */
	expect_every_thread(&vm, 2, 1);
	control(&vm, "ping\n", answer, sizeof(answer));
	cr_expect_str_eq(answer, "ok pong\n");
	control(&vm, "forbidden-syscall\n", answer, sizeof(answer));
	cr_expect_str_eq(answer, "", "the VMM answered: %s", answer);
	cr_assert_eq(waitpid(vm.pid, &status, 0), vm.pid);
	cr_expect(WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS,
		  "want death by SIGSYS, status 0x%x; log: %s", status,
		  read_log(&vm));
	cr_expect_not_null(strstr(read_log(&vm),
				  "thaw-vmm: seccomp: forbidden system call "
				  "41 (socket)\n"),
			   "log: %s", read_log(&vm));
	/* And the same on the report channel, for its supervisor. */
	struct vmm_report report;
	read_stop_record(&vm, &report);
	cr_expect_str_eq(report.stop,
			 "stop seccomp_syscall=41 seccomp_name=socket "
			 "reason=forbidden%20system%20call%2041%20(socket)",
			 "problem: %s", report.problem);
	remove_idle_vm(&vm);
}

Test(boot, every_descriptor_of_the_vmm_is_close_on_exec,
     .timeout = BOOT_TIMEOUT_S + 60)
{
	struct idle_vm vm;

	start_watched_vm(&vm, NULL);
	expect_all_close_on_exec(&vm);
	kill(vm.pid, SIGKILL);
	waitpid(vm.pid, NULL, 0);
	remove_idle_vm(&vm);
}

Test(boot, no_seccomp_filters_nothing_and_says_so,
     .timeout = BOOT_TIMEOUT_S + 60)
{
	struct idle_vm vm;
	char answer[256];
	int status;

	start_watched_vm(&vm, "--no-seccomp");
	expect_every_thread(&vm, 0, 0);
	control(&vm, "forbidden-syscall\n", answer, sizeof(answer));
	cr_expect_str_eq(answer, "error socket(AF_INET) was allowed: no "
				 "seccomp filter\n");
	control(&vm, "stop\n", answer, sizeof(answer));
	cr_assert_eq(waitpid(vm.pid, &status, 0), vm.pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "status 0x%x; log: %s", status, read_log(&vm));
	struct vmm_report report;
	char reason[128];
	uint64_t stopped = 1, setup_us = 0;
	read_stop_record(&vm, &report);
	cr_expect_eq(vmm_report_u64(report.stop, "status", &stopped), 0,
		     "record '%s', problem: %s", report.stop, report.problem);
	cr_expect_eq(stopped, 0);
	cr_expect_eq(vmm_report_u64(report.stop, "setup_us", &setup_us), 0);
	cr_expect_gt(setup_us, 0);
	cr_expect_eq(
		vmm_report_text(report.stop, "reason", reason, sizeof(reason)),
		0);
	cr_expect_str_eq(reason, "stopped through the control socket");
	cr_expect_not_null(strstr(read_log(&vm), "--no-seccomp: NO SYSTEM "
						 "CALL FILTERS"),
			   "log: %s", read_log(&vm));
	remove_idle_vm(&vm);
}
