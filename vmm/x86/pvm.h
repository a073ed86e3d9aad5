/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pvm.h - everything thaw-vmm does differently on "KVM on PVM" hosts.
 *
 * PVM (module kvm_pvm) is how the development and CI machines expose
 * /dev/kvm.  It runs guest user code natively but the guest kernel through
 * KVM's instruction emulator, which lacks some instructions and CPU features
 * (facts in PVM-NOTES.md).  The VMM compensates in two ways, both only when
 * pvm_host_detected() says so, so VMX/SVM hosts never see any of it:
 *
 *   - extra guest kernel command line that keeps the kernel away from what
 *     the emulator cannot do (pvm_kernel_cmdline);
 *   - emulating, in the VMM, the few instructions the kernel still executes
 *     and the emulator rejects (pvm_handle_emulation_failure).
 */
#ifndef THAW_VMM_X86_PVM_H
#define THAW_VMM_X86_PVM_H

#include <stdbool.h>

#include <linux/kvm.h>

#include "vmm/memory.h"

/* True when the host's KVM is PVM (/sys/module/kvm_pvm exists). */
bool pvm_host_detected(void);

/*
 * Words to append to the guest kernel command line on PVM hosts, separated
 * by spaces, without leading or trailing space.  Static storage.
 */
const char *pvm_kernel_cmdline(void);

/*
 * Handles a KVM_EXIT_INTERNAL_ERROR exit with suberror
 * KVM_INTERNAL_ERROR_EMULATION on @vcpu_fd (whose mapped run structure is
 * @run) by emulating the instruction at RIP: int3, fwait, ldmxcsr, stmxcsr,
 * clac, stac.  Returns 0 when the vCPU state now reflects the instruction
 * (re-enter KVM_RUN), or -1 after error lines (log.h): for an instruction it
 * cannot emulate, one line with RIP and all instruction bytes; otherwise the
 * failing ioctl or the guest address that does not translate.  On -1 the VM
 * must be stopped.
 */
int pvm_handle_emulation_failure(int vcpu_fd, const struct guest_memory *mem,
				 const struct kvm_run *run);

#endif
