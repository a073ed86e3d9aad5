// SPDX-License-Identifier: Apache-2.0
/*
 * cpu.c - see cpu.h.  The values follow what the boot protocol and Linux's
 * early code assume of a freshly reset CPU that a loader already put in
 * long mode; Firecracker's x86 vCPU setup documents the same choices.
 */
#include "vmm/x86/cpu.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "common/log.h"
#include "vmm/x86/layout.h"

#define CPUID_MAX_ENTRIES 256

#define CPUID_1_ECX_HYPERVISOR (1U << 31)
#define CPUID_1_EDX_HTT (1U << 28)

#define MSR_IA32_SYSENTER_CS 0x174
#define MSR_IA32_SYSENTER_ESP 0x175
#define MSR_IA32_SYSENTER_EIP 0x176
#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_CSTAR 0xc0000083
#define MSR_SYSCALL_MASK 0xc0000084
#define MSR_KERNEL_GS_BASE 0xc0000102
#define MSR_IA32_TSC 0x10
#define MSR_IA32_MISC_ENABLE 0x1a0
#define MISC_ENABLE_FAST_STRING 1ULL
#define MSR_MTRR_DEF_TYPE 0x2ff
#define MTRR_ENABLE (1ULL << 11)
#define MTRR_TYPE_WRBACK 6ULL

#define APIC_LVT_LINT0 0x350
#define APIC_LVT_LINT1 0x360
#define APIC_MODE_NMI 0x4
#define APIC_MODE_EXTINT 0x7

#define X86_CR0_PE 0x1ULL
#define X86_CR0_ET 0x10ULL
#define X86_CR0_NE 0x20ULL
#define X86_CR0_PG 0x80000000ULL
#define X86_CR4_PAE 0x20ULL
#define EFER_LME 0x100ULL
#define EFER_LMA 0x400ULL
#define BOOT_CS 0x10
#define BOOT_DS 0x18

struct kvm_cpuid2 *x86_supported_cpuid(int kvm_fd)
{
	struct kvm_cpuid2 *cpuid = calloc(
		1, sizeof(*cpuid) +
			   CPUID_MAX_ENTRIES * sizeof(struct kvm_cpuid_entry2));

	if (!cpuid) {
		log_error("cpuid: out of memory");
		return NULL;
	}
	cpuid->nent = CPUID_MAX_ENTRIES;
	if (ioctl(kvm_fd, KVM_GET_SUPPORTED_CPUID, cpuid) < 0) {
		log_error("KVM_GET_SUPPORTED_CPUID: %s", strerror(errno));
		free(cpuid);
		return NULL;
	}
	return cpuid;
}

static int bits_for(int n)
{
	int bits = 0;

	while ((1 << bits) < n)
		bits++;
	return bits;
}

/*
 * One core per vCPU, one thread per core, APIC ID = vCPU index: the
 * topology Linux derives from leaves 1, 4, 0xb/0x1f (Intel) and
 * 0x80000008/0x8000001e (AMD) must agree with the MP table, or it parks CPUs it
 * cannot place.
 */
static void set_topology(struct kvm_cpuid_entry2 *e, int vcpu_id, int nr_vcpus)
{
	switch (e->function) {
	case 1:
		e->ebx = (e->ebx & 0xffff) | (uint32_t)vcpu_id << 24 |
			 (uint32_t)nr_vcpus << 16;
		e->ecx |= CPUID_1_ECX_HYPERVISOR;
		if (nr_vcpus > 1)
			e->edx |= CPUID_1_EDX_HTT;
		break;
	case 4:
		e->eax = (e->eax & 0x3ff) | (uint32_t)(nr_vcpus - 1) << 26;
		break;
	case 0xb:
	case 0x1f:
		e->edx = vcpu_id;
		if (e->index == 0) {
			e->eax = 0;
			e->ebx = 1;
			e->ecx = 1 << 8;
		} else if (e->index == 1) {
			e->eax = bits_for(nr_vcpus);
			e->ebx = nr_vcpus;
			e->ecx = 2 << 8 | 1;
		} else {
			e->eax = 0;
			e->ebx = 0;
			e->ecx = e->index;
		}
		break;
	case 0x80000008:
		e->ecx = (e->ecx & ~0xf0ffU) |
			 (uint32_t)bits_for(nr_vcpus) << 12 |
			 (uint32_t)(nr_vcpus - 1);
		break;
	case 0x8000001e:
		e->eax = vcpu_id;
		e->ebx = vcpu_id & 0xff; /* core ID; one thread per core */
		e->ecx = 0;		 /* one node */
		break;
	}
}

int x86_setup_cpuid(int vcpu_fd, const struct kvm_cpuid2 *supported,
		    int vcpu_id, int nr_vcpus)
{
	size_t size = sizeof(*supported) +
		      supported->nent * sizeof(struct kvm_cpuid_entry2);
	struct kvm_cpuid2 *cpuid = malloc(size);

	if (!cpuid) {
		log_error("vcpu %d: cpuid: out of memory", vcpu_id);
		return -1;
	}
	memcpy(cpuid, supported, size);
	for (uint32_t i = 0; i < cpuid->nent; i++)
		set_topology(&cpuid->entries[i], vcpu_id, nr_vcpus);
	int ret = ioctl(vcpu_fd, KVM_SET_CPUID2, cpuid);
	if (ret < 0)
		log_error("vcpu %d: KVM_SET_CPUID2: %s", vcpu_id,
			  strerror(errno));
	free(cpuid);
	return ret < 0 ? -1 : 0;
}

int x86_setup_msrs(int vcpu_fd, int vcpu_id)
{
	static const struct kvm_msr_entry boot_msrs[] = {
		{ .index = MSR_IA32_SYSENTER_CS },
		{ .index = MSR_IA32_SYSENTER_ESP },
		{ .index = MSR_IA32_SYSENTER_EIP },
		{ .index = MSR_STAR },
		{ .index = MSR_CSTAR },
		{ .index = MSR_KERNEL_GS_BASE },
		{ .index = MSR_SYSCALL_MASK },
		{ .index = MSR_LSTAR },
		{ .index = MSR_IA32_TSC },
		{ .index = MSR_IA32_MISC_ENABLE,
		  .data = MISC_ENABLE_FAST_STRING },
		/* Without it all memory would be uncached until Linux sets
		 * up MTRRs itself, which it does not in a VM. */
		{ .index = MSR_MTRR_DEF_TYPE,
		  .data = MTRR_ENABLE | MTRR_TYPE_WRBACK },
	};
	const int n = sizeof(boot_msrs) / sizeof(boot_msrs[0]);
	/* struct kvm_msrs ends in a flexible array: room for its entries
	 * through a union (C11 allows no such struct inside another). */
	union {
		struct kvm_msrs msrs;
		uint8_t bytes[sizeof(struct kvm_msrs) + sizeof(boot_msrs)];
	} set_msrs = { .msrs.nmsrs = n };

	memcpy(set_msrs.msrs.entries, boot_msrs, sizeof(boot_msrs));
	int set = ioctl(vcpu_fd, KVM_SET_MSRS, &set_msrs);
	if (set < 0) {
		log_error("vcpu %d: KVM_SET_MSRS: %s", vcpu_id,
			  strerror(errno));
		return -1;
	}
	if (set < n) {
		/* KVM stops at the first MSR it refuses. */
		log_error("vcpu %d: KVM_SET_MSRS refused MSR 0x%x", vcpu_id,
			  boot_msrs[set].index);
		return -1;
	}
	return 0;
}

int x86_setup_fpu(int vcpu_fd, int vcpu_id)
{
	struct kvm_fpu fpu = {
		.fcw = 0x37f,	 /* x87 reset value: all exceptions masked */
		.mxcsr = 0x1f80, /* SSE reset value */
	};

	if (ioctl(vcpu_fd, KVM_SET_FPU, &fpu) < 0) {
		log_error("vcpu %d: KVM_SET_FPU: %s", vcpu_id, strerror(errno));
		return -1;
	}
	return 0;
}

static void set_lvt_mode(struct kvm_lapic_state *lapic, int reg, int mode)
{
	uint32_t v;

	memcpy(&v, &lapic->regs[reg], sizeof(v));
	v = (v & ~0x700U) | (uint32_t)mode << 8;
	memcpy(&lapic->regs[reg], &v, sizeof(v));
}

int x86_setup_lapic(int vcpu_fd, int vcpu_id)
{
	struct kvm_lapic_state lapic;

	if (ioctl(vcpu_fd, KVM_GET_LAPIC, &lapic) < 0) {
		log_error("vcpu %d: KVM_GET_LAPIC: %s", vcpu_id,
			  strerror(errno));
		return -1;
	}
	/* As the MP table's local interrupt entries say (mptable.c). */
	set_lvt_mode(&lapic, APIC_LVT_LINT0, APIC_MODE_EXTINT);
	set_lvt_mode(&lapic, APIC_LVT_LINT1, APIC_MODE_NMI);
	if (ioctl(vcpu_fd, KVM_SET_LAPIC, &lapic) < 0) {
		log_error("vcpu %d: KVM_SET_LAPIC: %s", vcpu_id,
			  strerror(errno));
		return -1;
	}
	return 0;
}

static struct kvm_segment flat_segment(uint16_t selector, uint8_t type,
				       int code64)
{
	return (struct kvm_segment){
		.base = 0,
		.limit = 0xfffff,
		.selector = selector,
		.type = type,
		.present = 1,
		.dpl = 0,
		.db = !code64,
		.s = 1,
		.l = code64,
		.g = 1,
	};
}

int x86_setup_boot_registers(int vcpu_fd, uint64_t entry)
{
	struct kvm_sregs sregs;
	struct kvm_regs regs = {
		.rflags = 0x2, /* bit 1 is reserved and always set */
		.rip = entry,
		.rsp = BOOT_STACK_ADDR,
		.rbp = BOOT_STACK_ADDR,
		.rsi = BOOT_PARAMS_ADDR,
	};

	if (ioctl(vcpu_fd, KVM_GET_SREGS, &sregs) < 0) {
		log_error("vcpu 0: KVM_GET_SREGS: %s", strerror(errno));
		return -1;
	}
	sregs.gdt.base = BOOT_GDT_ADDR;
	sregs.gdt.limit = 4 * 8 - 1;
	sregs.idt.base = BOOT_IDT_ADDR;
	sregs.idt.limit = 0;
	sregs.cs = flat_segment(BOOT_CS, 0xb, 1); /* execute/read, accessed */
	sregs.ds = flat_segment(BOOT_DS, 0x3, 0); /* read/write, accessed */
	sregs.es = sregs.fs = sregs.gs = sregs.ss = sregs.ds;
	sregs.cr3 = BOOT_PML4_ADDR;
	sregs.cr4 |= X86_CR4_PAE;
	sregs.cr0 |= X86_CR0_PE | X86_CR0_PG | X86_CR0_ET | X86_CR0_NE;
	sregs.efer |= EFER_LME | EFER_LMA;

	if (ioctl(vcpu_fd, KVM_SET_SREGS, &sregs) < 0) {
		log_error("vcpu 0: KVM_SET_SREGS: %s", strerror(errno));
		return -1;
	}
	if (ioctl(vcpu_fd, KVM_SET_REGS, &regs) < 0) {
		log_error("vcpu 0: KVM_SET_REGS: %s", strerror(errno));
		return -1;
	}
	return 0;
}
