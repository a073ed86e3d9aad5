// SPDX-License-Identifier: Apache-2.0
/*
 * test_seccomp.c - vmm/seccomp_filters.c: each thread role's allow-list
 * lets through what that thread must do and nothing it must not, and a
 * forbidden call kills the whole process by SIGSYS after one line on
 * stderr naming the call and the stop record saying it on the report
 * channel (vmm/vmm_report.h).
 *
 * Every case runs in a forked child that loads one role's filter for real
 * (filters cannot be unloaded) and then makes its calls; the parent reads
 * the child's stderr and how it ended.  Allowed calls are made with bad
 * file descriptors where a real one would have effects: the filter looks
 * at the number and arguments, the kernel then answers EBADF.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vmm/seccomp_filters.h"
#include "vmm/vmm_report.h"

/* The console log's descriptor the filters are told of (none is open). */
#define LOG_FD 42

struct outcome {
	int status;		  /* waitpid's */
	char err[1024];		  /* the child's stderr */
	struct vmm_report report; /* what it wrote on its report channel */
};

/* Everything @fd gives until EOF into @buf (NUL-terminated), closed. */
static size_t read_all(int fd, char *buf, size_t size)
{
	size_t len = 0;
	ssize_t n;

	while ((n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	buf[len] = '\0';
	close(fd);
	return len;
}

/*
 * Runs @calls in a child filtered as @role.  The child exits 0 when every
 * call came back (allowed), or 1 when one did but failed other than the
 * filter can make it (the test then reads which from stderr).
 */
static struct outcome *run_filtered(enum vmm_thread_role role,
				    void (*calls)(void))
{
	static struct outcome o;
	char report[VMM_REPORT_LINE_MAX * 2];
	int pipefd[2], reportfd[2];

	memset(&o, 0, sizeof(o));
	cr_assert_eq(pipe(pipefd), 0);
	cr_assert_eq(pipe(reportfd), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		char err[256];

		dup2(pipefd[1], STDERR_FILENO);
		close(pipefd[0]);
		close(reportfd[0]);
		if (vmm_seccomp_prepare(LOG_FD, reportfd[1], err, sizeof(err)) <
		    0) {
			fprintf(stderr, "prepare: %s\n", err);
			_exit(2);
		}
		if (vmm_seccomp_enter(role) < 0)
			_exit(3);
		calls();
		_exit(0);
	}
	close(pipefd[1]);
	close(reportfd[1]);
	read_all(pipefd[0], o.err, sizeof(o.err));
	size_t len = read_all(reportfd[0], report, sizeof(report));
	vmm_report_init(&o.report);
	vmm_report_feed(&o.report, report, len);
	vmm_report_end(&o.report);
	cr_assert_eq(waitpid(pid, &o.status, 0), pid);
	return &o;
}

static void expect_allowed(enum vmm_thread_role role, void (*calls)(void))
{
	struct outcome *o = run_filtered(role, calls);

	cr_expect(WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0,
		  "%s thread: allowed calls: status 0x%x, stderr: %s",
		  vmm_thread_role_name(role), o->status, o->err);
	cr_expect_str_eq(o->report.stop, "", "%s thread: a stop record",
			 vmm_thread_role_name(role));
}

static void expect_killed(enum vmm_thread_role role, void (*calls)(void),
			  const char *line)
{
	struct outcome *o = run_filtered(role, calls);
	const char *prefix = "thaw-vmm: seccomp: ";
	char reason[256], name[VMM_REPORT_KEY_MAX], want[320];
	uint64_t nr;

	cr_expect(WIFSIGNALED(o->status) && WTERMSIG(o->status) == SIGSYS,
		  "%s thread: expected death by SIGSYS, status 0x%x, stderr: "
		  "%s",
		  vmm_thread_role_name(role), o->status, o->err);
	cr_expect_str_eq(o->err, line, "%s thread: stderr",
			 vmm_thread_role_name(role));
	/* The record says what the line says: its reason, the call's
	 * number and name. */
	cr_assert_str_eq(o->report.problem, "");
	cr_assert_eq(vmm_report_text(o->report.stop, "reason", reason,
				     sizeof(reason)),
		     0, "%s thread: record '%s'", vmm_thread_role_name(role),
		     o->report.stop);
	cr_assert_eq(vmm_report_u64(o->report.stop, "seccomp_syscall", &nr), 0);
	cr_assert_eq(vmm_report_text(o->report.stop, "seccomp_name", name,
				     sizeof(name)),
		     0);
	snprintf(want, sizeof(want), "%sforbidden system call %llu (%s)\n",
		 prefix, (unsigned long long)nr, name);
	cr_expect_str_eq(want, line, "%s thread: record '%s'",
			 vmm_thread_role_name(role), o->report.stop);
	snprintf(want, sizeof(want), "%s%s\n", prefix, reason);
	cr_expect_str_eq(want, line);
}

/* An allowed call must come back; with -1 and @errno_want if given. */
static void came_back(const char *what, long ret, int errno_want)
{
	if (errno_want && (ret != -1 || errno != errno_want)) {
		fprintf(stderr, "%s: returned %ld, errno %d\n", what, ret,
			errno);
		_exit(1);
	}
}

TestSuite(seccomp);

/* --- vCPU threads ---------------------------------------------------- */

static void vcpu_work(void)
{
	came_back("KVM_RUN", ioctl(-1, KVM_RUN, 0), EBADF);
	came_back("KVM_GET_REGS", ioctl(-1, KVM_GET_REGS, NULL), EBADF);
	came_back("KVM_SET_VCPU_EVENTS", ioctl(-1, KVM_SET_VCPU_EVENTS, NULL),
		  EBADF);
	came_back("KVM_IRQ_LINE", ioctl(-1, KVM_IRQ_LINE, NULL), EBADF);
	came_back("write", write(-1, "x", 1), EBADF);
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	came_back("mmap", p == MAP_FAILED ? -1 : 0, 0);
	if (p != MAP_FAILED)
		munmap(p, 4096);
}

Test(seccomp, vcpu_allows_kvm_run_and_its_state_ioctls)
{
	expect_allowed(VMM_THREAD_VCPU, vcpu_work);
}

static void create_vm(void)
{
	ioctl(-1, KVM_CREATE_VM, 0);
}

Test(seccomp, vcpu_forbids_kvm_create_vm)
{
	expect_killed(VMM_THREAD_VCPU, create_vm,
		      "thaw-vmm: seccomp: forbidden system call 16 (ioctl)\n");
}

static void open_file(void)
{
	open("/etc/hostname", O_RDONLY);
}

static void unix_socket(void)
{
	socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static void exec_shell(void)
{
	char *argv[] = { "/bin/sh", NULL };

	execve("/bin/sh", argv, NULL);
}

static void map_executable(void)
{
	mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1,
	     0);
}

Test(seccomp, vcpu_forbids_open_socket_execve_and_executable_memory)
{
	expect_killed(VMM_THREAD_VCPU, open_file,
		      "thaw-vmm: seccomp: forbidden system call 257 "
		      "(openat)\n");
	expect_killed(VMM_THREAD_VCPU, unix_socket,
		      "thaw-vmm: seccomp: forbidden system call 41 (socket)\n");
	expect_killed(VMM_THREAD_VCPU, exec_shell,
		      "thaw-vmm: seccomp: forbidden system call 59 (execve)\n");
	expect_killed(VMM_THREAD_VCPU, map_executable,
		      "thaw-vmm: seccomp: forbidden system call 9 (mmap)\n");
}

/* --- The vsock device thread ----------------------------------------- */

static void vsock_work(void)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	came_back("socket(AF_UNIX)", fd < 0 ? -1 : 0, 0);
	close(fd);
	came_back("accept4", accept4(-1, NULL, NULL, SOCK_CLOEXEC), EBADF);
	came_back("epoll_wait", syscall(SYS_epoll_wait, -1, NULL, 1, 0), EBADF);
	came_back("KVM_IRQ_LINE", ioctl(-1, KVM_IRQ_LINE, NULL), EBADF);
}

Test(seccomp, vsock_allows_its_unix_sockets_and_irq_lines)
{
	expect_allowed(VMM_THREAD_VSOCK, vsock_work);
}

static void inet_socket(void)
{
	socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static void datagram_socket(void)
{
	socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

static void kvm_run(void)
{
	ioctl(-1, KVM_RUN, 0);
}

Test(seccomp, vsock_forbids_other_sockets_kvm_run_and_open)
{
	expect_killed(VMM_THREAD_VSOCK, inet_socket,
		      "thaw-vmm: seccomp: forbidden system call 41 (socket)\n");
	expect_killed(VMM_THREAD_VSOCK, datagram_socket,
		      "thaw-vmm: seccomp: forbidden system call 41 (socket)\n");
	expect_killed(VMM_THREAD_VSOCK, kvm_run,
		      "thaw-vmm: seccomp: forbidden system call 16 (ioctl)\n");
	expect_killed(VMM_THREAD_VSOCK, open_file,
		      "thaw-vmm: seccomp: forbidden system call 257 "
		      "(openat)\n");
}

/* --- The control thread ---------------------------------------------- */

static int compare_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return (x > y) - (x < y);
}

static void control_work(void)
{
	char path[] = "/tmp/thaw-test-seccomp-XXXXXX";
	int fd = open(path, O_RDONLY); /* openat; ENOENT is fine */

	came_back("open", fd < 0 && errno != ENOENT ? -1 : 0, 0);
	came_back("pwrite", pwrite(-1, "x", 1, 0), EBADF);
	came_back("ftruncate", ftruncate(-1, 0), EBADF);
	came_back("fsync", fsync(-1), EBADF);
	came_back("KVM_GET_REGS", ioctl(-1, KVM_GET_REGS, NULL), EBADF);
	came_back("KVM_GET_IRQCHIP", ioctl(-1, KVM_GET_IRQCHIP, NULL), EBADF);
	came_back("accept4", accept4(-1, NULL, NULL, SOCK_CLOEXEC), EBADF);
	/* A snapshot's section check sorts more than 1 KiB: glibc's qsort
	 * then asks sysinfo() once, which no thread may call. */
	static uint32_t keys[512];
	for (size_t i = 0; i < 512; i++)
		keys[i] = 512 - i;
	qsort(keys, 512, sizeof(keys[0]), compare_u32);
	came_back("qsort", keys[0] == 1 ? 0 : -1, 0);
}

Test(seccomp, control_allows_snapshot_files_and_state_reads)
{
	expect_allowed(VMM_THREAD_CONTROL, control_work);
}

static void set_regs(void)
{
	ioctl(-1, KVM_SET_REGS, NULL);
}

Test(seccomp, control_forbids_kvm_run_state_writes_and_sockets)
{
	expect_killed(VMM_THREAD_CONTROL, kvm_run,
		      "thaw-vmm: seccomp: forbidden system call 16 (ioctl)\n");
	expect_killed(VMM_THREAD_CONTROL, set_regs,
		      "thaw-vmm: seccomp: forbidden system call 16 (ioctl)\n");
	expect_killed(VMM_THREAD_CONTROL, inet_socket,
		      "thaw-vmm: seccomp: forbidden system call 41 (socket)\n");
}

/* --- The main thread ------------------------------------------------- */

static void main_work(void)
{
	sigset_t none;
	struct timespec zero = { 0, 0 };

	sigemptyset(&none);
	came_back("sigtimedwait", sigtimedwait(&none, NULL, &zero), EAGAIN);
	came_back("close", close(-1), EBADF);
	came_back("unlink", unlink(""), ENOENT);
}

Test(seccomp, main_allows_waiting_and_teardown)
{
	expect_allowed(VMM_THREAD_MAIN, main_work);
}

static void start_process(void)
{
	fork();
}

Test(seccomp, main_forbids_ioctl_and_new_threads_or_processes)
{
	expect_killed(VMM_THREAD_MAIN, kvm_run,
		      "thaw-vmm: seccomp: forbidden system call 16 (ioctl)\n");
	expect_killed(VMM_THREAD_MAIN, start_process,
		      "thaw-vmm: seccomp: forbidden system call 56 (clone)\n");
}

/* --- What preparing sets for the whole process ------------------------- */

/* --- every thread: the bounded logs' cuts ---------------------------- */

static void cut_logs(void)
{
	came_back("pwrite64 stderr", pwrite(STDERR_FILENO, "", 0, 0), ESPIPE);
	came_back("ftruncate stderr", ftruncate(STDERR_FILENO, 0), EINVAL);
	came_back("pwrite64 log", pwrite(LOG_FD, "", 0, 0), EBADF);
	came_back("ftruncate log", ftruncate(LOG_FD, 0), EBADF);
}

static void pwrite_other(void)
{
	pwrite(LOG_FD + 1, "", 0, 0);
}

static void ftruncate_other(void)
{
	ftruncate(LOG_FD - 1, 0);
}

/* The control thread writes snapshots: any descriptor (control_work). */
Test(seccomp, every_thread_cuts_the_logs_and_only_the_control_thread_more)
{
	for (int role = 0; role < VMM_THREAD_ROLES; role++) {
		expect_allowed(role, cut_logs);
		if (role == VMM_THREAD_CONTROL)
			continue;
		expect_killed(role, pwrite_other,
			      "thaw-vmm: seccomp: forbidden system call 18 "
			      "(pwrite64)\n");
		expect_killed(role, ftruncate_other,
			      "thaw-vmm: seccomp: forbidden system call 77 "
			      "(ftruncate)\n");
	}
}

Test(seccomp, prepare_sets_no_new_privs_and_no_core_dumps)
{
	pid_t pid = fork();
	int status;

	cr_assert_geq(pid, 0);
	if (pid == 0) {
		struct rlimit core;
		char err[256];

		if (vmm_seccomp_prepare(LOG_FD, -1, err, sizeof(err)) < 0 ||
		    !vmm_seccomp_enabled())
			_exit(2);
		if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
			_exit(3);
		if (getrlimit(RLIMIT_CORE, &core) < 0 || core.rlim_cur ||
		    core.rlim_max)
			_exit(4);
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "status 0x%x (2 prepare, 3 no_new_privs, 4 RLIMIT_CORE)",
		  status);
}
