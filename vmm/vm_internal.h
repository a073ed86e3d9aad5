/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vm_internal.h - what vm.c (the machine) and vm_snapshot.c (its snapshots)
 * share and nobody else calls.
 *
 * A boot and a restore build the same KVM objects; they differ in where
 * guest memory comes from (a fresh allocation with a kernel loaded into it,
 * or a snapshot's memory file) and in how the vCPUs get their state (boot
 * registers, or the saved state).  vm.c builds the objects once memory is
 * in place (vm_create_kvm(), for its vm_boot() and vm_snapshot.c's
 * vm_restore(), which fills a restored machine's memory first and its
 * state after).  Neither entry point calls the other: the builder
 * (builder.h) chooses between them.
 */
#ifndef THAW_VMM_VM_INTERNAL_H
#define THAW_VMM_VM_INTERNAL_H

#include "vmm/vm.h"

/*
 * With guest memory in vm->mem and vm->nr_vcpus set: opens /dev/kvm, creates
 * the VM with its memory slots and irqchip, @cfg's devices, and the vCPUs
 * with no state set yet.  Returns 0, or -1 after a message (log.h).
 */
int vm_create_kvm(struct vm *vm, const struct vm_config *cfg);

#endif
