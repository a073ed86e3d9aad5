// SPDX-License-Identifier: Apache-2.0
/*
 * seccomp_filters.c - see seccomp_filters.h.  (Not seccomp.h: that name is
 * libseccomp's, which this file includes.)
 *
 * The lists below were collected with strace -f on real runs of the ASan
 * and the release build (a boot, restores with prefetch and lazy page-in,
 * snapshots and working sets taken through the control socket, exec and
 * file transfer over vsock, pause/resume, guest poweroff, SIGTERM), every
 * call checked against the code that makes it.  Calls made only during
 * setup (open, KVM_CREATE_*, io_uring for the prefetch, clone) happen
 * before any filter is loaded and are in no list.
 *
 * Each role's filter is compiled to BPF once, by the main thread before
 * any other thread exists (libseccomp allocates; a thread loading a
 * prebuilt program only makes the seccomp() call), and kept for the
 * process's life.
 */
#include "vmm/seccomp_filters.h"

#include <errno.h>
#include <linux/filter.h>
#include <linux/if_tun.h>
#include <linux/kvm.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <seccomp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "common/log.h"
#include "vmm/vmm_report.h"

/* Names for the handler's line: every x86-64 system call number is below. */
#define NAME_TABLE_SIZE 512
#define NAME_MAX_LEN 32

/*
 * A number no filter allows and no kernel assigns: the SIGSYS handler's
 * second trap.  Without a filter (a SIGSYS someone sent before this thread
 * loaded one) it fails with ENOSYS and harms nothing.
 */
#define NEVER_ALLOWED_NR 1023

/* One allowed system call, with up to two conditions on its arguments. */
struct rule {
	int nr;
	unsigned int nr_args;
	struct scmp_arg_cmp args[2];
};

/* One line per call, so a list reads as one and diffs stay small. */
/* clang-format off */
#define ALLOW(name) { .nr = SCMP_SYS(name) }
/* @name allowed when (argument @arg & @mask) == @value. */
#define ALLOW_IF(name, arg, mask, value)                                   \
	{ .nr = SCMP_SYS(name), .nr_args = 1,                              \
	  .args = { { (arg), SCMP_CMP_MASKED_EQ, (mask), (value) } } }

/*
 * What every thread does: log lines (write to stderr, the clock when the
 * vDSO cannot answer; lseek when a bounded log file or console log cuts
 * its middle out, capfile.h, whose pwrite and ftruncate are allowed on
 * those two descriptors alone: log_fd_rules()), locks (futex,
 * sched_yield), memory for malloc and,
 * in the ASan build, its shadow and alternate signal stacks (never
 * executable), being kicked or told to stop (signals and their return),
 * kicking others (pthread_kill is getpid + tgkill) and ending (a thread's
 * exit frees its stack with madvise).
 */
static const struct rule every_thread[] = {
	ALLOW(write),
	ALLOW(lseek),
	ALLOW(futex),
	ALLOW(sched_yield),
	ALLOW(clock_gettime),
	ALLOW(brk),
	ALLOW_IF(mmap, 2, PROT_EXEC, 0),
	ALLOW_IF(mprotect, 2, PROT_EXEC, 0),
	ALLOW(munmap),
	ALLOW(mremap),
	ALLOW(madvise),
	ALLOW(sigaltstack),
	ALLOW(rt_sigreturn),
	ALLOW(rt_sigprocmask),
	ALLOW(restart_syscall),
	ALLOW(getpid),
	ALLOW(gettid),
	ALLOW(tgkill),
	ALLOW(exit),
	ALLOW(exit_group),
};

/*
 * The main thread: waits for signals, reads the vCPUs' statistics files,
 * joins the other threads and frees the VM (close, unlink of its sockets,
 * munmap of guest memory).  No ioctl at all, and no clone: every other
 * thread exists before this filter is loaded.
 */
static const struct rule main_thread[] = {
	ALLOW(rt_sigtimedwait),
	ALLOW(pread64),
	ALLOW(close),
	ALLOW(unlink),
};

/*
 * The vsock device thread: epoll, the host side's Unix sockets (accepted
 * clients, and connections to "<path>_<port>" the guest opens, made with
 * exactly the flags vsock.c uses), its eventfd, IRQ lines.
 */
static const struct rule vsock_thread[] = {
	ALLOW(epoll_wait),
	ALLOW(epoll_ctl),
	ALLOW(accept4),
	{ .nr = SCMP_SYS(socket), .nr_args = 2,
	  .args = { { 0, SCMP_CMP_EQ, AF_UNIX, 0 },
		    { 1, SCMP_CMP_EQ, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0 } } },
	ALLOW(connect),
	ALLOW(read),
	ALLOW(readv),
	ALLOW(sendto),
	ALLOW(sendmsg),
	ALLOW(shutdown),
	ALLOW(close),
};

/*
 * The virtio-net device thread: epoll, its eventfd and the TAP (frames are
 * one read or writev each), TUNSETOFFLOAD when the driver's features
 * change, IRQ lines.
 */
static const struct rule net_thread[] = {
	ALLOW(epoll_wait),
	ALLOW(epoll_ctl),
	ALLOW(read),
	ALLOW(writev),
};

/*
 * The control thread: its socket's clients, and the snapshot and working
 * set files it writes where its supervisor says (the jail's root bounds
 * where that can be), /proc/self/pagemap for the working set and a
 * checkpoint's written pages; a checkpoint's files come as descriptors
 * with its line (recvmsg) and are mapped over guest memory (mmap, every
 * thread's).
 */
static const struct rule control_thread[] = {
	ALLOW(poll),
	ALLOW(accept4),
	ALLOW(recvmsg),
	ALLOW(sendto),
	ALLOW(close),
	ALLOW(openat),
	ALLOW(pread64),
	ALLOW(pwrite64),
	ALLOW(ftruncate),
	ALLOW(fsync),
	ALLOW(rename),
	ALLOW(unlink),
};
/* clang-format on */

/* clang-format off */
/* KVM requests by role; every other ioctl request number is forbidden. */
static const unsigned long vcpu_ioctls[] = {
	KVM_RUN,
	/* The main thread's parked checks, sampled by the vCPU itself. */
	KVM_GET_MP_STATE,
	KVM_GET_REGS,
	/* KVM-on-PVM: a native guest's interrupt flag (x86/pvm_mode.c). */
	KVM_GET_MSRS,
	/* KVM-on-PVM: instructions emulated in the VMM (x86/pvm.c). */
	KVM_SET_REGS,
	KVM_GET_SREGS,
	KVM_GET_FPU,
	KVM_SET_FPU,
	KVM_GET_VCPU_EVENTS,
	KVM_SET_VCPU_EVENTS,
	/* Device exits that raise the UART's or virtio's interrupt. */
	KVM_IRQ_LINE,
};

static const unsigned long vsock_ioctls[] = {
	KVM_IRQ_LINE,
};

static const unsigned long net_ioctls[] = {
	KVM_IRQ_LINE,
	TUNSETOFFLOAD,
};

/* A snapshot reads every vCPU's and the VM's state (x86/kvm_state.c). */
static const unsigned long control_ioctls[] = {
	KVM_CHECK_EXTENSION,
	KVM_GET_MSR_INDEX_LIST,
	KVM_GET_CPUID2,
	KVM_GET_TSC_KHZ,
	KVM_GET_MSRS,
	KVM_GET_MP_STATE,
	KVM_GET_REGS,
	KVM_GET_SREGS,
	KVM_GET_XSAVE,
	KVM_GET_XSAVE2,
	KVM_GET_XCRS,
	KVM_GET_DEBUGREGS,
	KVM_GET_LAPIC,
	KVM_GET_VCPU_EVENTS,
	KVM_GET_IRQCHIP,
	KVM_GET_PIT2,
	KVM_GET_CLOCK,
};
/* clang-format on */

struct role_list {
	const char *name;
	const struct rule *rules;
	size_t nr_rules;
	const unsigned long *ioctls;
	size_t nr_ioctls;
};

#define LIST(a) a, sizeof(a) / sizeof(a[0])

static const struct role_list roles[VMM_THREAD_ROLES] = {
	[VMM_THREAD_MAIN] = { "main", LIST(main_thread), NULL, 0 },
	/* A vCPU thread needs nothing beyond every thread's list and its
	 * ioctls: its exits' devices write the console and kick the vsock
	 * thread's eventfd (write), and raise IRQ lines (ioctl). */
	[VMM_THREAD_VCPU] = { "vcpu", NULL, 0, LIST(vcpu_ioctls) },
	[VMM_THREAD_VSOCK] = { "vsock", LIST(vsock_thread),
			       LIST(vsock_ioctls) },
	[VMM_THREAD_NET] = { "net", LIST(net_thread), LIST(net_ioctls) },
	[VMM_THREAD_CONTROL] = { "control", LIST(control_thread),
				 LIST(control_ioctls) },
};

static struct {
	bool prepared;
	int console_log_fd; /* pwrite64 and ftruncate: here and on stderr */
	int report_fd;	    /* the SIGSYS handler's stop record, or -1 */
	struct sock_fprog progs[VMM_THREAD_ROLES];
	/* The start barrier: threads that reported, and whether one failed. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int reported;
	bool failed;
} sc = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.cond = PTHREAD_COND_INITIALIZER,
	.report_fd = -1,
};

static char syscall_names[NAME_TABLE_SIZE][NAME_MAX_LEN];

const char *vmm_thread_role_name(enum vmm_thread_role role)
{
	return roles[role].name;
}

bool vmm_seccomp_enabled(void)
{
	return sc.prepared;
}

static int add_rules(scmp_filter_ctx ctx, const struct rule *rules, size_t n,
		     const char *role, char *err, size_t errlen)
{
	for (size_t i = 0; i < n; i++) {
		int ret =
			seccomp_rule_add_array(ctx, SCMP_ACT_ALLOW, rules[i].nr,
					       rules[i].nr_args, rules[i].args);

		if (ret < 0) {
			char *name = seccomp_syscall_resolve_num_arch(
				SCMP_ARCH_NATIVE, rules[i].nr);

			errbuf_set(err, errlen,
				   "seccomp: %s thread: cannot allow %s: %s",
				   role, name ? name : "?", strerror(-ret));
			free(name);
			return -1;
		}
	}
	return 0;
}

/*
 * pwrite64 and ftruncate on the bounded logs alone, stderr and the console
 * log (sc.console_log_fd, -1: none), but for the control thread, which
 * writes snapshots: a vCPU or device thread taken over by a guest must not
 * rewrite or truncate anything else it can write, a snapshot among them.  Fills
 * @rules (room for 4), returns how many.
 */
static size_t log_fd_rules(struct rule rules[4])
{
	const int fds[] = { STDERR_FILENO, sc.console_log_fd };
	size_t n = 0;

	for (size_t i = 0; i < 2; i++) {
		if (fds[i] < 0)
			continue;
		const struct scmp_arg_cmp is_fd = { 0, SCMP_CMP_EQ,
						    (scmp_datum_t)fds[i], 0 };

		rules[n++] = (struct rule){ .nr = SCMP_SYS(pwrite64),
					    .nr_args = 1,
					    .args = { is_fd } };
		rules[n++] = (struct rule){ .nr = SCMP_SYS(ftruncate),
					    .nr_args = 1,
					    .args = { is_fd } };
	}
	return n;
}

/* @role's allow-list as a libseccomp context, the default action a trap. */
static scmp_filter_ctx build_filter(const struct role_list *role, char *err,
				    size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);
	int ret;

	if (!ctx) {
		errbuf_set(err, errlen,
			   "seccomp: %s thread: seccomp_init "
			   "failed",
			   role->name);
		return NULL;
	}
	/* Another ABI's calls (int 0x80, x32) have other numbers: no name
	 * for a line, so no handler either. */
	ret = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
			       SCMP_ACT_KILL_PROCESS);
	if (ret < 0) {
		errbuf_set(err, errlen,
			   "seccomp: %s thread: bad-arch action: %s",
			   role->name, strerror(-ret));
		goto fail;
	}
	struct rule log_rules[4];
	size_t nr_log_rules = log_fd_rules(log_rules);

	if (add_rules(ctx, every_thread,
		      sizeof(every_thread) / sizeof(every_thread[0]),
		      role->name, err, errlen) < 0 ||
	    add_rules(ctx, log_rules, nr_log_rules, role->name, err, errlen) <
		    0 ||
	    add_rules(ctx, role->rules, role->nr_rules, role->name, err,
		      errlen) < 0)
		goto fail;
	for (size_t i = 0; i < role->nr_ioctls; i++) {
		/* The kernel reads the request as 32 bits. */
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(ioctl), 1,
				       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu,
					       role->ioctls[i]));
		if (ret < 0) {
			errbuf_set(err, errlen,
				   "seccomp: %s thread: cannot allow ioctl "
				   "0x%lx: %s",
				   role->name, role->ioctls[i], strerror(-ret));
			goto fail;
		}
	}
	return ctx;
fail:
	seccomp_release(ctx);
	return NULL;
}

/* @ctx as a BPF program (libseccomp 2.5 exports to a file descriptor). */
static int export_program(scmp_filter_ctx ctx, const char *role,
			  struct sock_fprog *prog, char *err, size_t errlen)
{
	int fd = memfd_create("thaw-seccomp", MFD_CLOEXEC);
	struct stat st;
	void *buf = NULL;
	int ret;

	if (fd < 0) {
		errbuf_set(err, errlen, "seccomp: %s thread: memfd_create: %s",
			   role, strerror(errno));
		return -1;
	}
	ret = seccomp_export_bpf(ctx, fd);
	if (ret < 0) {
		errbuf_set(err, errlen, "seccomp: %s thread: export: %s", role,
			   strerror(-ret));
		goto out;
	}
	ret = -1;
	if (fstat(fd, &st) < 0 || st.st_size <= 0 ||
	    st.st_size % sizeof(struct sock_filter) ||
	    st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		errbuf_set(err, errlen,
			   "seccomp: %s thread: exported a program of %lld "
			   "bytes",
			   role, (long long)st.st_size);
		goto out;
	}
	buf = malloc(st.st_size);
	if (!buf || pread(fd, buf, st.st_size, 0) != st.st_size) {
		errbuf_set(err, errlen,
			   "seccomp: %s thread: reading back "
			   "its program failed",
			   role);
		free(buf);
		goto out;
	}
	prog->filter = buf;
	prog->len = st.st_size / sizeof(struct sock_filter);
	ret = 0;
out:
	close(fd);
	return ret;
}

static int compare_bytes(const void *a, const void *b)
{
	return *(const unsigned char *)a - *(const unsigned char *)b;
}

static void fill_name_table(void)
{
	for (int nr = 0; nr < NAME_TABLE_SIZE; nr++) {
		char *name =
			seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr);

		snprintf(syscall_names[nr], NAME_MAX_LEN, "%s",
			 name ? name : "unknown");
		free(name);
	}
}

/* Appends @s at *@p, up to @end. */
static void put_str(char **p, const char *end, const char *s)
{
	while (*s && *p < end)
		*(*p)++ = *s++;
}

static void put_number(char **p, const char *end, long v)
{
	char digits[24];
	int n = 0;
	unsigned long u = v < 0 ? 0 - (unsigned long)v : (unsigned long)v;

	do
		digits[n++] = (char)('0' + u % 10);
	while ((u /= 10) && n < (int)sizeof(digits));
	if (v < 0 && *p < end)
		*(*p)++ = '-';
	while (n && *p < end)
		*(*p)++ = digits[--n];
}

/*
 * Async-signal-safe: formats into the stack, writes the line to stderr and
 * the stop record (vmm_report.h) to the report descriptor, once each.
 */
static void on_sigsys(int sig, siginfo_t *info, void *context)
{
	char line[128], *p = line;
	const char *end = line + sizeof(line) - 1;
	const char *prefix = "thaw-vmm: seccomp: ";
	int nr = info->si_syscall;
	const char *name =
		nr >= 0 && nr < NAME_TABLE_SIZE ? syscall_names[nr] : "unknown";
	struct vmm_record record;

	(void)sig;
	(void)context;
	put_str(&p, end, prefix);
	put_str(&p, end, "forbidden system call ");
	put_number(&p, end, nr);
	put_str(&p, end, " (");
	put_str(&p, end, name);
	put_str(&p, end, ")");
	*p = '\0';
	if (sc.report_fd >= 0) {
		vmm_record_begin(&record, VMM_REPORT_STOP);
		vmm_record_put_u64(&record, "seccomp_syscall",
				   nr < 0 ? 0 : (uint64_t)nr);
		vmm_record_put_text(&record, "seccomp_name", name);
		vmm_record_put_text(&record, "reason", line + strlen(prefix));
		(void)vmm_record_send(&record, sc.report_fd);
	}
	*p++ = '\n';
	(void)!write(STDERR_FILENO, line, (size_t)(p - line));
	/* SIGSYS is blocked in its handler: this trap kills the process. */
	syscall(NEVER_ALLOWED_NR);
	/* Only a SIGSYS sent by someone (no filter here yet) gets this far. */
	_exit(128 + SIGSYS);
}

int vmm_seccomp_prepare(int console_log_fd, int report_fd, char *err,
			size_t errlen)
{
	struct sigaction sa = { .sa_sigaction = on_sigsys,
				.sa_flags = SA_SIGINFO | SA_RESETHAND };

	sc.console_log_fd = console_log_fd;
	sc.report_fd = report_fd;

	for (int i = 0; i < VMM_THREAD_ROLES; i++) {
		scmp_filter_ctx ctx = build_filter(&roles[i], err, errlen);

		if (!ctx)
			return -1;
		int ret = export_program(ctx, roles[i].name, &sc.progs[i], err,
					 errlen);
		seccomp_release(ctx);
		if (ret < 0)
			return -1;
	}
	fill_name_table();
	/* The logger's strftime() calls tzset(), whose first call opens
	 * /etc/localtime: open it now, while open is allowed. */
	tzset();
	/* glibc's qsort of 1 KiB or more asks sysconf(_SC_PHYS_PAGES), that
	 * is sysinfo(), once and keeps the answer: ask it now.  A snapshot's
	 * section check sorts that much once a machine has enough devices. */
	char sample[1024] = { 0 };
	qsort(sample, sizeof(sample), 1, compare_bytes);
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGSYS, &sa, NULL) < 0) {
		errbuf_set(err, errlen, "seccomp: SIGSYS handler: %s",
			   strerror(errno));
		return -1;
	}
	/* SIGSYS's default action dumps core: not guest memory, anywhere. */
	if (setrlimit(RLIMIT_CORE, &(struct rlimit){ 0, 0 }) < 0) {
		errbuf_set(err, errlen, "seccomp: RLIMIT_CORE: %s",
			   strerror(errno));
		return -1;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		errbuf_set(err, errlen, "seccomp: PR_SET_NO_NEW_PRIVS: %s",
			   strerror(errno));
		return -1;
	}
	sc.prepared = true;
	return 0;
}

static void report(bool ok)
{
	pthread_mutex_lock(&sc.lock);
	sc.reported++;
	sc.failed = sc.failed || !ok;
	pthread_cond_broadcast(&sc.cond);
	pthread_mutex_unlock(&sc.lock);
}

int vmm_seccomp_enter(enum vmm_thread_role role)
{
	sigset_t sigsys;
	int ret = 0;

	if (sc.prepared) {
		/* Device and control threads block every signal; a trap's
		 * SIGSYS must reach the handler, not the default action. */
		sigemptyset(&sigsys);
		sigaddset(&sigsys, SIGSYS);
		pthread_sigmask(SIG_UNBLOCK, &sigsys, NULL);
		ret = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0,
				   &sc.progs[role]);
		if (ret < 0)
			log_error("seccomp: cannot load the %s thread's "
				  "filter: %s",
				  roles[role].name, strerror(errno));
	}
	if (role != VMM_THREAD_MAIN)
		report(ret == 0);
	return ret < 0 ? -1 : 0;
}

int vmm_seccomp_wait_threads(int threads)
{
	pthread_mutex_lock(&sc.lock);
	while (sc.reported < threads)
		pthread_cond_wait(&sc.cond, &sc.lock);
	bool failed = sc.failed;
	pthread_mutex_unlock(&sc.lock);
	return failed ? -1 : 0;
}
