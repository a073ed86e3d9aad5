/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pvm_abi.h - the numbers a PVM guest and thaw-vmm agree on, as plain
 * #defines so that a guest's assembly can include this file as well as C.
 *
 * The ELF note: a guest image that carries a note named "thaw" of type
 * THAW_NOTE_PVM_GUEST, whose 4-byte descriptor is the host ABI revision it
 * speaks, asks thaw-vmm to start it in PVM mode on a KVM-on-PVM host
 * (pvm_mode.h).  Without the note, or on any other host, thaw-vmm boots the
 * image as it always has.
 *
 * The host ABI (revision 1) is the one the kvm_pvm module of thaw's
 * development hosts implements, measured on them (guest/kernel/PVM.md,
 * "The host's native mode"); it is not the virt-pvm ABI of
 * Documentation/virt/kvm/x86/pvm-spec.rst, whose MSRs (0x4b564df0..,
 * 0x4b564d20..) and synthetic CPUID leaves that module does not have.
 *
 * A vCPU starts in the module's emulated mode: every instruction at the
 * guest's CPL 0 goes through KVM's instruction emulator.  A guest wrmsr of
 * a page-aligned guest-physical address to PVM_MSR_NATIVE_PAGE switches
 * the vCPU to native mode: from the next instruction the guest kernel runs
 * on the CPU at hardware CPL 3 (its "mov %cs" reads the host's user
 * selector 0x33), and its privileged instructions, port I/O and events go
 * to the host, which delivers interrupts and exceptions through the
 * guest's own IDT, SYSCALL at MSR_LSTAR, and emulates IRETQ and SYSRETQ.
 * Once native, the MSR reads back as the address | PVM_NATIVE_PAGE_ON; the
 * VMM may set that value too (KVM_SET_MSRS refuses the address without the
 * bit), and the vCPU then starts native: how thaw-vmm starts a PVM guest's
 * boot vCPU, and restores a snapshot of a native one (KVM_GET_MSR_INDEX_LIST
 * does not name this MSR).  The reset value, PVM_NATIVE_PAGE_ON alone, is
 * emulated mode.  In native mode:
 *   - byte PVM_NATIVE_PAGE_IF of that page is the guest's interrupt flag
 *     (STI does not set it: a HLT after STI waits forever);
 *   - the guest's page table entries must have the user bit at every
 *     level, kernel mappings too: a supervisor-only mapping faults for
 *     ever at the next instruction fetch.
 * A guest started native tells from "mov %cs"; one that is not can read
 * PVM_SIGNATURE from PVM_MSR_SIGNATURE on such a host (a #GP on VMX/SVM)
 * before it switches itself.
 *
 * Also measured (PVM.md section 3), from the host kernel's own guest side:
 *   - a hypercall is "int $PVM_HC_VECTOR" in native supervisor mode, with
 *     the number in %rax, arguments in %rbx, %rcx, %rdx, and the result
 *     (0, or a negative errno: -ENOSYS for an unknown number) in %rax;
 *     "int $PVM_CPUID_VECTOR" is CPUID (leaf in %eax, subleaf in %ecx);
 *   - byte PVM_NATIVE_PAGE_PENDING of the page is set by the host when an
 *     interrupt waits because byte PVM_NATIVE_PAGE_IF is 0; a guest that
 *     sets the flag and sees it pending rings the doorbell (an "out" to
 *     PVM_DOORBELL_PORT) to take it at once;
 *   - with PVM_NATIVE_PAGE_CR2_CELL in the MSR's low bits, the host writes
 *     the faulting address of each #PF it delivers to the u64 at
 *     PVM_NATIVE_PAGE_CR2, so the handler need not trap on "mov %cr2";
 *   - with PVM_NATIVE_PAGE_DIRECT in them too, and CR3 on the first of two
 *     top-level tables 0x1000 apart (Linux PTI's pair: kernel, user), a
 *     user SYSCALL enters MSR_LSTAR and "int $PVM_ERETU_VECTOR" (RCX =
 *     user RIP, R11 = user RFLAGS, RSP = the user stack) returns to user
 *     mode, both without a VM exit; without the pv_eretu bits that "int"
 *     is a #GP.  (In that mode any event from user mode, a #PF or a
 *     timer interrupt, stopped the gate guest with a triple fault: not
 *     understood yet.)
 */
#ifndef THAW_VMM_X86_PVM_ABI_H
#define THAW_VMM_X86_PVM_ABI_H

#define THAW_NOTE_NAME "thaw"
#define THAW_NOTE_PVM_GUEST 0x50564d01
#define THAW_PVM_GUEST_ABI 1

/* A guest write of a page's address goes native. */
#define PVM_MSR_NATIVE_PAGE 0x4b564d10
#define PVM_NATIVE_PAGE_ON 0x400
/* The MSR's bits below the page address. */
#define PVM_NATIVE_PAGE_FLAGS 0xfffULL
#define PVM_NATIVE_PAGE_IF 0
#define PVM_NATIVE_PAGE_PENDING 1
#define PVM_NATIVE_PAGE_CR2 8
/* The MSR's low bits the guest may set with the address (0x4b564d12). */
#define PVM_NATIVE_PAGE_CR2_CELL 0x10
/* pv_kpti (bit 0) and the bits of pv_kentry (1, 2, 5) and pv_eretu (2, 3,
 * 6): the host's direct switch. */
#define PVM_NATIVE_PAGE_DIRECT 0x6f
#define PVM_ERETU_VECTOR 0x19
#define PVM_DOORBELL_PORT 0x80

#define PVM_HC_VECTOR 0x1b
#define PVM_CPUID_VECTOR 0x1a
#define PVM_HC_SET_CR3 0x1001
#define PVM_HC_WRMSR 0x1003
#define PVM_HC_FLUSH_TLB 0x1007
#define PVM_HC_FLUSH_TLB_ONE 0x1008
#define PVM_HC_HALT 0x1009
#define PVM_MSR_SIGNATURE 0x4b564d11
#define PVM_SIGNATURE 0x4d5650 /* "PVM" */

#endif
