/* SPDX-License-Identifier: Apache-2.0 */
/*
 * layout.h - where thaw-vmm puts things in an x86 guest's physical memory.
 *
 * Everything the 64-bit Linux boot protocol needs sits in the first MiB,
 * below the kernel, in pages Linux reserves or copies early:
 *
 *	0x000500  GDT (code64, data) for the boot CPU
 *	0x000520  empty IDT
 *	0x006000  a PVM guest's native page (pvm_mode.h), in the first 64 KiB
 *		  Linux reserves
 *	0x007000  boot_params ("zero page")
 *	0x008ff0  initial stack (grows down)
 *	0x009000  PML4, 0x00a000 PDPT, 0x00b000.. 4 page directories:
 *		  identity map of the first 4 GiB with 2 MiB pages
 *	0x020000  kernel command line
 *	0x09fc00  MP floating pointer + MP table (last KiB of base memory,
 *		  one of the places Linux scans)
 *	1 MiB+    kernel (ELF: its own physical addresses, bzImage: preferred
 *		  load address), initrd at the top of low RAM
 *
 * Devices live in the 32-bit hole above MEMORY_HOLE_START (memory.h).
 */
#ifndef THAW_VMM_X86_LAYOUT_H
#define THAW_VMM_X86_LAYOUT_H

#define BOOT_GDT_ADDR 0x500
#define BOOT_IDT_ADDR 0x520
#define BOOT_PVM_NATIVE_PAGE_ADDR 0x6000
#define BOOT_PARAMS_ADDR 0x7000
#define BOOT_STACK_ADDR 0x8ff0
#define BOOT_PML4_ADDR 0x9000
#define BOOT_PDPT_ADDR 0xa000
#define BOOT_PD_ADDR 0xb000
#define BOOT_IDENTITY_MAP_GIB 4
#define BOOT_CMDLINE_ADDR 0x20000
/* x86 COMMAND_LINE_SIZE, including the terminating NUL. */
#define BOOT_CMDLINE_MAX 2048
#define EBDA_START 0x9fc00
#define MPTABLE_ADDR EBDA_START
#define HIGH_MEMORY_START 0x100000

/* Used by KVM on Intel for real-mode emulation; must not overlap RAM. */
#define KVM_TSS_ADDR 0xfffbd000
#define KVM_IDENTITY_MAP_ADDR 0xfffbc000

#define IOAPIC_ADDR 0xfec00000
#define LAPIC_ADDR 0xfee00000
#define IOAPIC_PINS 24

/* virtio-mmio windows: 4 KiB each, in the hole, one IRQ each from 5 up. */
#define VIRTIO_MMIO_BASE 0xd0000000
#define VIRTIO_MMIO_SIZE 0x1000
#define VIRTIO_MMIO_FIRST_IRQ 5
/* The network's window and IRQ: the second, whether vsock is there or not
 * (literals: the guest's command line spells them). */
#define VIRTIO_MMIO_NET_BASE 0xd0001000
#define VIRTIO_MMIO_NET_IRQ 6
_Static_assert(VIRTIO_MMIO_NET_BASE == VIRTIO_MMIO_BASE + VIRTIO_MMIO_SIZE &&
		       VIRTIO_MMIO_NET_IRQ == VIRTIO_MMIO_FIRST_IRQ + 1,
	       "the network has the second virtio-mmio window");

#endif
