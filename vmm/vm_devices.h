/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vm_devices.h - the VM's device table: which devices a machine has and how
 * vm.c and vm_snapshot.c create, save, restore, start, pause and tear each
 * one down.
 *
 * Each device's own code, ports and snapshot section live in devices/ (as
 * in Firecracker and kvmtool, a device saves and restores its own state);
 * vm_devices.c holds one table entry per device that wires it into a
 * struct vm (its ports, its IRQ line, the reset line) and names its snapshot
 * section.  vm.c and vm_snapshot.c walk the table through the functions
 * below, so adding a device is one entry, not edits in creation, save,
 * restore, pausing and teardown.  What they still know of particular
 * devices is the machine's shape: the kernel command line announcing the
 * virtio-mmio windows and the console UART flushed when the VM stops (vm.c),
 * and the saved configuration's device bits (vm_snapshot.c).
 *
 * A device is identified by its snapshot section's tag (state.h), which
 * state_tag_name() turns into the name messages use.  Devices are created,
 * saved and restored in table order and torn down in reverse; only the
 * created ones are saved, restored, started, paused or destroyed.
 */
#ifndef THAW_VMM_VM_DEVICES_H
#define THAW_VMM_VM_DEVICES_H

#include <stdbool.h>
#include <stdint.h>

#include "snapshot/state.h"
#include "vmm/vm.h"

/*
 * Creates the devices @cfg asks for and registers their ports on vm->pio
 * and vm->mmio, which must be initialised.  Returns 0, or -1 after a
 * message; vm_devices_destroy() then releases what was created.
 */
int vm_devices_create(struct vm *vm, const struct vm_config *cfg);

/* Whether the device whose section is @tag was created. */
bool vm_has_device(const struct vm *vm, uint32_t tag);

/* Adds every device's sections; the vCPUs and device threads are paused. */
void vm_devices_save(struct vm *vm, struct state_writer *w);

/*
 * Installs every device's saved state, after KVM's irqchip (devices re-drive
 * their IRQ lines) and before vm_devices_start().  Returns 0, or -1 after a
 * message.
 */
int vm_devices_restore(struct vm *vm, const struct state_reader *r);

/*
 * Starts device threads; a failure stops the VM (vm_stop) with the reason.
 * Returns how many started (each loads its seccomp filter, seccomp_filters.h).
 */
int vm_devices_start(struct vm *vm);

/* Device threads stop and resume touching guest memory (snapshots). */
void vm_devices_pause(struct vm *vm);
void vm_devices_resume(struct vm *vm);

/* Once no vCPU runs: stops device threads and releases every device. */
void vm_devices_destroy(struct vm *vm);

/* The i8042's reset line, also a vCPU's reset exit: ends the VM. */
void vm_guest_requested_reset(void *vm);

#endif
