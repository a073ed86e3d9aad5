/* SPDX-License-Identifier: Apache-2.0 */
/*
 * i8042.h - the PS/2 controller, kept for one job: letting the guest ask
 * for a reset.  Linux with reboot=k (and a panic with panic=-1) writes
 * command 0xfe, "pulse the reset line", to port 0x64; the VMM treats that as
 * "the guest is done" and gets the callback given to i8042_init.  Linux
 * retries the write up to ten times while it waits to die, so the callback
 * must tolerate being called again before the VMM has stopped the vCPUs.
 *
 * Besides that it answers just enough of the controller protocol for
 * Linux's i8042 driver to probe without hitting its polling time-outs:
 * command byte read/write, controller and keyboard-interface self-tests,
 * keyboard/AUX enable and disable.  There is no keyboard behind it and no
 * AUX (mouse) port: the AUX loopback and interface tests fail immediately,
 * so the driver gives up on the AUX port without a 250 ms IRQ test.  Bytes
 * sent to the keyboard are dropped.  The controller has no interrupt wire:
 * every reply is polled by the driver through the status register.
 *
 * The data and command ports are not adjacent (0x61 belongs to the PIT's
 * speaker gate), so each has its own access function and bus range.
 */
#ifndef THAW_VMM_DEVICES_I8042_H
#define THAW_VMM_DEVICES_I8042_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "snapshot/state.h"

#define I8042_DATA_PORT 0x60
#define I8042_COMMAND_PORT 0x64

typedef void (*i8042_reset_fn)(void *ctx);

struct i8042_state {
	uint8_t command_byte;
	uint8_t output;
	bool output_full;
	bool output_from_aux;
	/* Command awaiting its parameter byte on the data port, or 0. */
	uint8_t pending_command;
	/* Status bit 3 tells which port was written last. */
	bool last_write_was_command;
};

struct i8042 {
	struct i8042_state state;
	pthread_mutex_t lock;
	i8042_reset_fn reset;
	void *reset_ctx;
};

/* Returns 0, or -1 with a message. */
int i8042_init(struct i8042 *i8042, i8042_reset_fn reset, void *reset_ctx);

void i8042_destroy(struct i8042 *i8042);

/* bus_access_fn for the 1-byte range at I8042_DATA_PORT. */
void i8042_data_io(void *device, uint64_t offset, uint8_t *data, uint32_t len,
		   bool is_write);

/* bus_access_fn for the 1-byte range at I8042_COMMAND_PORT. */
void i8042_command_io(void *device, uint64_t offset, uint8_t *data,
		      uint32_t len, bool is_write);

/* Adds struct i8042_state as section STATE_DEV_I8042, instance 0. */
void i8042_save(struct i8042 *i8042, struct state_writer *w);

/* Checks and installs the saved state; returns 0, or -1 after a message
 * with the device untouched. */
int i8042_restore(struct i8042 *i8042, const struct state_reader *r);

#endif
