/* SPDX-License-Identifier: Apache-2.0 */
/*
 * seccomp_filters.h - the system calls each thread of thaw-vmm may make.
 *
 * A guest that breaks a device model owns the thread that runs it, so each
 * thread gets an allow-list of its own, as small as its work: a vCPU thread
 * runs KVM_RUN and a few state ioctls on its vCPU and writes the console;
 * the vsock device thread moves bytes between guest memory and Unix
 * sockets; the virtio-net thread moves frames between guest memory and
 * its TAP; the control thread serves its socket and writes snapshots; the
 * main thread waits for signals and tears the VM down.  Anything else kills
 * the whole VMM.  The lists are built with libseccomp; ioctl is allowed
 * only for the request numbers a role uses, socket only for the one kind
 * the vsock thread makes, and no thread may map or protect memory
 * executable.
 *
 * Filters are per thread (no SECCOMP_FILTER_FLAG_TSYNC): every thread loads
 * its own first thing, before its work, with vmm_seccomp_enter().  A filter
 * is inherited by threads created after it, and filters stack, so the main
 * thread, which creates the others, loads its own last: vm_run() starts the
 * device, control and vCPU threads, waits until each has loaded its filter
 * (vmm_seccomp_wait_threads()), loads the main thread's, and only then lets
 * the vCPUs enter KVM_RUN: no guest instruction runs unfiltered.
 *
 * A forbidden call traps (SCMP_ACT_TRAP).  The SIGSYS handler writes one
 * line to stderr for people, "thaw-vmm: seccomp: forbidden system call 41
 * (socket)", and the stop record "stop seccomp_syscall=41
 * seccomp_name=socket reason=..." to the report channel (vmm_report.h),
 * the name from a table resolved before any filter was loaded (the handler
 * only formats and writes, which is async-signal-safe), then makes a call
 * no filter allows: seccomp forces a SIGSYS that is blocked (as it is in
 * its own handler) with the default action, so the VMM dies by SIGSYS and
 * its supervisor can tell why from its record and its wait status
 * (vmm_process_reason(), pool/host).
 *
 * Without vmm_seccomp_prepare() (thaw-vmm --no-seccomp, the unit tests of
 * devices) vmm_seccomp_enter() loads nothing and the start barrier still
 * works, so the threads' start-up order is the same with and without.
 */
#ifndef THAW_VMM_SECCOMP_FILTERS_H
#define THAW_VMM_SECCOMP_FILTERS_H

#include <stdbool.h>
#include <stddef.h>

enum vmm_thread_role {
	VMM_THREAD_MAIN,
	VMM_THREAD_VCPU,
	VMM_THREAD_VSOCK,
	VMM_THREAD_NET,
	VMM_THREAD_CONTROL,
	VMM_THREAD_ROLES,
};

/* "main", "vcpu", "vsock", "net" or "control". */
const char *vmm_thread_role_name(enum vmm_thread_role role);

/*
 * Builds every role's filter and the system call name table, sets
 * PR_SET_NO_NEW_PRIVS (which loading a filter without CAP_SYS_ADMIN needs,
 * and which threads created later inherit), turns core dumps off (a death
 * by SIGSYS would write one) and installs the SIGSYS handler.
 * Call once, on the main thread, before any other thread exists.
 * @console_log_fd is the console log's descriptor (-1: none): with stderr,
 * the only ones a thread may pwrite or ftruncate (capfile.h's cuts).
 * @report_fd is where the SIGSYS handler writes its stop record (-1: none).
 * Returns 0, or -1 with a message in @err.
 */
int vmm_seccomp_prepare(int console_log_fd, int report_fd, char *err,
			size_t errlen);

/* Whether vmm_seccomp_prepare() succeeded: filters are being loaded. */
bool vmm_seccomp_enabled(void);

/*
 * Loads @role's filter on the calling thread (nothing when not prepared)
 * and, for any role but the main thread's, reports to
 * vmm_seccomp_wait_threads() that this thread is filtered or failed.
 * Returns 0, or -1 after a log line naming the role.
 */
int vmm_seccomp_enter(enum vmm_thread_role role);

/*
 * Waits until @threads threads have reported from vmm_seccomp_enter().
 * Returns 0 when every one loaded its filter, -1 when one failed.
 */
int vmm_seccomp_wait_threads(int threads);

#endif
