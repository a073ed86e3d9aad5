// SPDX-License-Identifier: Apache-2.0
/*
 * i8042.c - PS/2 controller without devices; see i8042.h.
 *
 * Commands complete the moment they are written, so the input buffer is
 * never busy (status IBF stays clear) and a reply is in the output buffer
 * before the driver's first status poll.
 */
#include "vmm/devices/i8042.h"

#include <stdio.h>
#include <string.h>

#include "vmm/devices/device_state.h"
#include "common/log.h"

#define STATUS_OUTPUT_FULL 0x01
#define STATUS_SYSTEM_FLAG 0x04
#define STATUS_LAST_WRITE_COMMAND 0x08
#define STATUS_KEYBOARD_UNLOCKED 0x10
#define STATUS_OUTPUT_FROM_AUX 0x20

#define COMMAND_BYTE_KBD_INTERRUPT 0x01
#define COMMAND_BYTE_SYSTEM_FLAG 0x04
#define COMMAND_BYTE_KBD_DISABLED 0x10
#define COMMAND_BYTE_AUX_DISABLED 0x20
#define COMMAND_BYTE_TRANSLATE 0x40

#define CMD_READ_COMMAND_BYTE 0x20
#define CMD_WRITE_COMMAND_BYTE 0x60
#define CMD_AUX_DISABLE 0xa7
#define CMD_AUX_ENABLE 0xa8
#define CMD_AUX_TEST 0xa9
#define CMD_SELF_TEST 0xaa
#define CMD_KBD_TEST 0xab
#define CMD_KBD_DISABLE 0xad
#define CMD_KBD_ENABLE 0xae
#define CMD_AUX_LOOP 0xd3
#define CMD_PULSE_RESET 0xfe

#define SELF_TEST_PASSED 0x55
#define INTERFACE_TEST_PASSED 0x00
#define INTERFACE_TEST_CLOCK_STUCK_HIGH 0x02

int i8042_init(struct i8042 *i8042, i8042_reset_fn reset, void *reset_ctx)
{
	int err;

	if (!reset) {
		log_error("i8042: no reset callback given");
		return -1;
	}
	memset(i8042, 0, sizeof(*i8042));
	err = pthread_mutex_init(&i8042->lock, NULL);
	if (err) {
		log_error("i8042: pthread_mutex_init: %s", strerror(err));
		return -1;
	}
	/* What a PC BIOS leaves behind: POST passed, keyboard interrupt on,
	 * scancode translation on.  Linux keeps translation as it finds it. */
	i8042->state.command_byte = COMMAND_BYTE_KBD_INTERRUPT |
				    COMMAND_BYTE_SYSTEM_FLAG |
				    COMMAND_BYTE_TRANSLATE;
	i8042->reset = reset;
	i8042->reset_ctx = reset_ctx;
	return 0;
}

void i8042_destroy(struct i8042 *i8042)
{
	pthread_mutex_destroy(&i8042->lock);
}

static void reply(struct i8042_state *s, uint8_t byte, bool from_aux)
{
	s->output = byte;
	s->output_full = true;
	s->output_from_aux = from_aux;
}

static uint8_t read_status(const struct i8042_state *s)
{
	uint8_t status = STATUS_KEYBOARD_UNLOCKED;

	if (s->output_full)
		status |= STATUS_OUTPUT_FULL;
	if (s->output_from_aux)
		status |= STATUS_OUTPUT_FROM_AUX;
	if (s->command_byte & COMMAND_BYTE_SYSTEM_FLAG)
		status |= STATUS_SYSTEM_FLAG;
	if (s->last_write_was_command)
		status |= STATUS_LAST_WRITE_COMMAND;
	return status;
}

/* Returns true when the guest asked for a reset. */
static bool run_command(struct i8042_state *s, uint8_t command)
{
	switch (command) {
	case CMD_READ_COMMAND_BYTE:
		reply(s, s->command_byte, false);
		break;
	case CMD_WRITE_COMMAND_BYTE:
	case CMD_AUX_LOOP:
		s->pending_command = command;
		break;
	case CMD_AUX_DISABLE:
		s->command_byte |= COMMAND_BYTE_AUX_DISABLED;
		break;
	case CMD_AUX_ENABLE:
		s->command_byte &= ~COMMAND_BYTE_AUX_DISABLED;
		break;
	case CMD_AUX_TEST:
		/* No AUX port: report a dead clock line, which Linux takes
		 * as "no AUX port" without further probing. */
		reply(s, INTERFACE_TEST_CLOCK_STUCK_HIGH, false);
		break;
	case CMD_SELF_TEST:
		reply(s, SELF_TEST_PASSED, false);
		break;
	case CMD_KBD_TEST:
		reply(s, INTERFACE_TEST_PASSED, false);
		break;
	case CMD_KBD_DISABLE:
		s->command_byte |= COMMAND_BYTE_KBD_DISABLED;
		break;
	case CMD_KBD_ENABLE:
		s->command_byte &= ~COMMAND_BYTE_KBD_DISABLED;
		break;
	case CMD_PULSE_RESET:
		return true;
	default:
		/* Unknown commands are ignored, as a real 8042 does. */
		break;
	}
	return false;
}

static void write_data(struct i8042_state *s, uint8_t byte)
{
	switch (s->pending_command) {
	case CMD_WRITE_COMMAND_BYTE:
		s->command_byte = byte;
		break;
	case CMD_AUX_LOOP:
		/* The echo comes back marked as keyboard data, i.e. not from
		 * the (absent) AUX port: Linux's loop test fails at once
		 * instead of waiting for a byte that never arrives. */
		reply(s, byte, false);
		break;
	default:
		/* A byte for the keyboard; there is none. */
		break;
	}
	s->pending_command = 0;
}

void i8042_data_io(void *device, uint64_t offset, uint8_t *data, uint32_t len,
		   bool is_write)
{
	struct i8042 *i8042 = device;
	struct i8042_state *s = &i8042->state;

	(void)offset;
	pthread_mutex_lock(&i8042->lock);
	if (is_write) {
		write_data(s, data[0]);
		s->last_write_was_command = false;
	} else {
		/* Reading an empty buffer returns the stale byte, as on
		 * hardware. */
		memset(data, s->output, len);
		s->output_full = false;
		s->output_from_aux = false;
	}
	pthread_mutex_unlock(&i8042->lock);
}

void i8042_command_io(void *device, uint64_t offset, uint8_t *data,
		      uint32_t len, bool is_write)
{
	struct i8042 *i8042 = device;
	struct i8042_state *s = &i8042->state;
	bool reset_requested = false;

	(void)offset;
	pthread_mutex_lock(&i8042->lock);
	if (is_write) {
		s->pending_command = 0;
		s->last_write_was_command = true;
		reset_requested = run_command(s, data[0]);
	} else {
		memset(data, read_status(s), len);
	}
	pthread_mutex_unlock(&i8042->lock);

	/* Outside the lock: the VMM may stop vCPUs from the callback. */
	if (reset_requested)
		i8042->reset(i8042->reset_ctx);
}

void i8042_save(struct i8042 *i8042, struct state_writer *w)
{
	pthread_mutex_lock(&i8042->lock);
	state_put(w, STATE_DEV_I8042, 0, &i8042->state, sizeof(i8042->state));
	pthread_mutex_unlock(&i8042->lock);
}

/* Copies section @raw into @s if it is a state the controller can be in. */
static bool load_state(const uint8_t *raw, struct i8042_state *s)
{
	if (!STATE_BOOL_VALID(raw, struct i8042_state, output_full, "i8042") ||
	    !STATE_BOOL_VALID(raw, struct i8042_state, output_from_aux,
			      "i8042") ||
	    !STATE_BOOL_VALID(raw, struct i8042_state, last_write_was_command,
			      "i8042"))
		return false;
	memcpy(s, raw, sizeof(*s));
	switch (s->pending_command) {
	case 0:
	case CMD_WRITE_COMMAND_BYTE:
	case CMD_AUX_LOOP:
		return true;
	default:
		log_error(
			"snapshot state: i8042 pending_command %#x is not one "
			"that takes a parameter",
			s->pending_command);
		return false;
	}
}

int i8042_restore(struct i8042 *i8042, const struct state_reader *r)
{
	uint8_t raw[sizeof(struct i8042_state)];
	struct i8042_state s;

	if (state_get(r, STATE_DEV_I8042, 0, raw, sizeof(raw)) ||
	    !load_state(raw, &s))
		return -1;
	pthread_mutex_lock(&i8042->lock);
	i8042->state = s;
	pthread_mutex_unlock(&i8042->lock);
	return 0;
}
