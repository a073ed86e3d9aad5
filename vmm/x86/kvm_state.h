/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvm_state.h - the machine state KVM keeps for a paused x86 VM, saved into
 * and restored from a snapshot state file (snapshot/state.h).
 *
 * Per vCPU, saved in this order and restored in the order KVM needs:
 * CPUID first (it decides which MSRs and XSAVE components exist), the TSC
 * frequency, MP state, general and special registers, XSAVE (FPU/SSE/AVX;
 * KVM_GET_XSAVE2 when the host has more than the legacy 4 KiB area), XCRs,
 * debug registers, the local APIC, then every MSR of KVM_GET_MSR_INDEX_LIST
 * that the vCPU can read, in ascending index order so the TSC (0x10) is set
 * before the TSC deadline (0x6e0) that is relative to it, and the pending
 * exception/NMI/interrupt events last, because setting registers and MSRs
 * may clear them.
 *
 * Per VM: both PICs and the IOAPIC, the PIT, and kvmclock.  The clock is
 * set back to the value it had at the snapshot, not the host's time, so the
 * guest's monotonic time continues without a jump; the agent fixes the wall
 * clock after restore.  KVMCLOCK_CTRL then tells the guest it was paused, so
 * its watchdogs do not report the gap as a lockup.
 */
#ifndef THAW_VMM_X86_KVM_STATE_H
#define THAW_VMM_X86_KVM_STATE_H

#include <linux/kvm.h>
#include <stdint.h>

#include "snapshot/state.h"

/* The MSRs KVM can save and restore; fetched once per VM, freed by caller. */
struct kvm_msr_list *x86_msr_index_list(int kvm_fd);

/* Saves vCPU @index (paused, outside KVM_RUN).  0, or -1 + message. */
int x86_save_vcpu(int kvm_fd, int vcpu_fd, uint32_t index,
		  const struct kvm_msr_list *msrs, struct state_writer *w);

/* Restores vCPU @index on a vCPU that has never run.  0, or -1 + message. */
int x86_restore_vcpu(int kvm_fd, int vcpu_fd, uint32_t index,
		     const struct state_reader *r);

/* Tells a restored guest it was paused (ignored if it has no kvmclock). */
void x86_notify_paused(int vcpu_fd);

int x86_save_vm(int vm_fd, struct state_writer *w);
/* After the vCPUs are restored and before devices drive their lines. */
int x86_restore_vm(int vm_fd, const struct state_reader *r);

#endif
