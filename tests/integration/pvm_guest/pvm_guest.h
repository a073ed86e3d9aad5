/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pvm_guest.h - the PVM gate guest's layout, shared by its assembly and C:
 * GDT selectors (Linux's, so SYSCALL/SYSRET find the segments they expect),
 * the user program's addresses and system call numbers, and the host ABI
 * the guest speaks (vmm/x86/pvm_abi.h).
 */
#ifndef THAW_TESTS_PVM_GUEST_H
#define THAW_TESTS_PVM_GUEST_H

#include "vmm/x86/pvm_abi.h"

#define GUEST_KERNEL_CS 0x10
#define GUEST_KERNEL_DS 0x18
#define GUEST_USER32_CS 0x23
#define GUEST_USER_DS 0x2b
#define GUEST_USER_CS 0x33
#define GUEST_TSS_SEL 0x40

/* IF and the always-one bit 1. */
#define GUEST_USER_RFLAGS 0x202

/* The first GiB is identity-mapped; this is the first page above it. */
#define GUEST_FAULT_ADDR 0x40000000

#define GUEST_SYSCALL_HELLO 42
#define GUEST_SYSCALL_REPORT 43
/* The direct-switch step: null calls, then the one that reports them. */
#define GUEST_SYSCALL_NULL 44
#define GUEST_SYSCALL_DIRECT_DONE 45
#define GUEST_DIRECT_CALLS 100
/* What the user program passes with its first call: "user". */
#define GUEST_USER_MAGIC 0x72657375
/* What the page the fault maps holds, for the user program to read. */
#define GUEST_FAULT_PATTERN 0x5a17c0de5a17c0deULL

/*
 * With this word on its command line the guest does not stop after its
 * steps: it ticks GUEST_IDLE_TICKS times more, one line a tick, for a
 * snapshot to be taken and restored meanwhile, and stops after the last.
 */
#define GUEST_IDLE_WORD "pvm_gate_idle"
#define GUEST_IDLE_TICKS 5

#endif
