/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device_state.h - what the devices share for restoring their snapshot
 * sections (snapshot/state.h frames them; each device owns its own).
 *
 * A section is bytes from a file, so a device reads it into a byte buffer
 * first: reading a bool member that holds anything but 0 or 1 is undefined
 * behaviour, so those bytes are checked in the buffer before it is copied
 * into the device's state struct.  The other checks run on that copy, and the
 * device changes only once all of them passed.  Every failed check logs
 * one error line (log.h) naming the device and the field.
 */
#ifndef THAW_VMM_DEVICES_DEVICE_STATE_H
#define THAW_VMM_DEVICES_DEVICE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vmm/irq.h"
#include "common/log.h"
#include "snapshot/state.h"

/* Whether byte @offset of section @raw is a bool (0 or 1). */
static inline bool state_bool_valid(const void *raw, size_t offset,
				    const char *device, const char *field)
{
	uint8_t byte = ((const uint8_t *)raw)[offset];

	if (byte <= 1)
		return true;
	log_error("snapshot state: %s %s is %u, not a boolean", device, field,
		  byte);
	return false;
}

#define STATE_BOOL_VALID(raw, type, member, device) \
	state_bool_valid(raw, offsetof(type, member), device, #member)

/* Whether @value has only bits of @mask, the ones the device can set. */
static inline bool state_bits_valid(uint32_t value, uint32_t mask,
				    const char *device, const char *field)
{
	if (!(value & ~mask))
		return true;
	log_error("snapshot state: %s %s %#x has bits outside %#x that the "
		  "device never sets",
		  device, field, value, mask);
	return false;
}

/*
 * The VMM restores KVM's irqchip before the devices, and a line driven from
 * user space must then be driven again to the level the device's restored
 * registers imply.  Forgetting the level last sent makes the next
 * irq_line_set() send it, whatever it is.
 */
static inline void irq_line_forget(struct irq_line *line)
{
	line->level = -1;
}

#endif
