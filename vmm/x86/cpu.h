/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cpu.h - x86 vCPU configuration: CPUID, boot MSRs, LAPIC wiring and the
 * long-mode register state the 64-bit boot protocol starts in.
 *
 * Every vCPU gets CPUID, MSRs, FPU and LAPIC set up; only the boot CPU gets
 * registers, because KVM holds the others in wait-for-SIPI until the guest
 * starts them.
 */
#ifndef THAW_VMM_X86_CPU_H
#define THAW_VMM_X86_CPU_H

#include <linux/kvm.h>
#include <stdint.h>

/* Host CPUID as KVM can offer it; fetched once per VM. */
struct kvm_cpuid2 *x86_supported_cpuid(int kvm_fd);

/*
 * Applies the per-vCPU view (APIC ID, topology for @nr_vcpus CPUs,
 * hypervisor bit) to a copy of @supported and sets it on the vCPU.
 */
int x86_setup_cpuid(int vcpu_fd, const struct kvm_cpuid2 *supported,
		    int vcpu_id, int nr_vcpus);

int x86_setup_msrs(int vcpu_fd, int vcpu_id);
int x86_setup_fpu(int vcpu_fd, int vcpu_id);
int x86_setup_lapic(int vcpu_fd, int vcpu_id);

/* Long mode, paging on the boot page tables, %rip = @entry. */
int x86_setup_boot_registers(int vcpu_fd, uint64_t entry);

#endif
