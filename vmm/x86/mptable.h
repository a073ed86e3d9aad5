/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mptable.h - Intel MultiProcessor Specification 1.4 tables.
 *
 * Without ACPI, this is how Linux learns how many CPUs there are, where the
 * IOAPIC is and how ISA interrupts reach it.  thaw's guest kernel is built
 * without ACPI (its interpreter is slow to start under emulation), so the
 * MP table is the one description of the machine.  Every IOAPIC pin gets an
 * identity-mapped ISA interrupt entry, matching KVM's default GSI routing,
 * so the UART (IRQ 4, edge) and virtio-mmio devices (IRQ 5 and up, level)
 * just work.
 */
#ifndef THAW_VMM_X86_MPTABLE_H
#define THAW_VMM_X86_MPTABLE_H

#include "vmm/memory.h"

#define MPTABLE_MAX_CPUS 8

/* Writes the floating pointer and table at MPTABLE_ADDR. */
int mptable_write(struct guest_memory *mem, int nr_cpus);

#endif
