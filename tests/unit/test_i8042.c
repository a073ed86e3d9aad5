// SPDX-License-Identifier: Apache-2.0
/*
 * test_i8042.c - the controller as Linux's i8042 driver and reboot path
 * use it, through the two port access functions.
 */
#include <criterion/criterion.h>
#include <stddef.h>
#include <string.h>

#include "vmm/devices/i8042.h"
#include "tests/unit/state_file.h"

#define STATUS_OBF 0x01
#define STATUS_IBF 0x02
#define STATUS_SYSTEM 0x04
#define STATUS_COMMAND 0x08
#define STATUS_UNLOCKED 0x10
#define STATUS_AUXDATA 0x20

static struct i8042 controller;
static int resets;

static void count_reset(void *ctx)
{
	cr_assert_eq(ctx, &resets);
	resets++;
}

static void setup(void)
{
	resets = 0;
	cr_assert_eq(i8042_init(&controller, count_reset, &resets), 0);
}

static void teardown(void)
{
	i8042_destroy(&controller);
}

static uint8_t status(void)
{
	uint8_t value;

	i8042_command_io(&controller, 0, &value, 1, false);
	return value;
}

static void command(uint8_t value)
{
	i8042_command_io(&controller, 0, &value, 1, true);
}

static uint8_t read_data(void)
{
	uint8_t value;

	i8042_data_io(&controller, 0, &value, 1, false);
	return value;
}

static void write_data(uint8_t value)
{
	i8042_data_io(&controller, 0, &value, 1, true);
}

/* The driver's __i8042_command: poll, then read the reply. */
static uint8_t reply(void)
{
	cr_assert(status() & STATUS_OBF, "reply expected");
	return read_data();
}

TestSuite(i8042, .init = setup, .fini = teardown);

Test(i8042, init_rejects_missing_callback)
{
	struct i8042 other;

	cr_assert_eq(i8042_init(&other, NULL, NULL), -1);
}

Test(i8042, pulse_reset_calls_callback_once)
{
	command(0xfe);
	cr_assert_eq(resets, 1);
	command(0x20);
	read_data();
	cr_assert_eq(resets, 1);
	command(0xfe);
	cr_assert_eq(resets, 2);
}

Test(i8042, data_byte_0xfe_is_not_a_reset)
{
	write_data(0xfe);
	command(0x60);
	write_data(0xfe);
	cr_assert_eq(resets, 0);
}

Test(i8042, idle_status)
{
	uint8_t value = status();

	cr_assert_eq(value & (STATUS_OBF | STATUS_IBF), 0,
		     "i8042_flush must find nothing to drain");
	cr_assert(value & STATUS_UNLOCKED, "else Linux warns: keylock");
	cr_assert(value & STATUS_SYSTEM);
}

Test(i8042, self_tests_answer)
{
	command(0xaa);
	cr_assert_eq(status() & (STATUS_OBF | STATUS_AUXDATA), STATUS_OBF);
	cr_assert_eq(read_data(), 0x55);
	cr_assert_eq(status() & STATUS_OBF, 0);

	command(0xab);
	cr_assert_eq(reply(), 0x00);
}

Test(i8042, command_byte_round_trip)
{
	uint8_t ctr;

	command(0x20);
	ctr = reply();
	cr_assert_eq(ctr, 0x45);

	command(0x60);
	cr_assert(status() & STATUS_COMMAND);
	write_data(0x70);
	cr_assert_eq(status() & STATUS_COMMAND, 0);
	cr_assert_eq(status() & STATUS_OBF, 0, "WCTR has no reply");
	command(0x20);
	cr_assert_eq(reply(), 0x70);
	cr_assert_eq(status() & STATUS_SYSTEM, 0, "status mirrors CTR bit 2");
}

Test(i8042, enable_disable_toggle_command_byte)
{
	command(0xad);
	command(0x20);
	cr_assert(reply() & 0x10);
	command(0xae);
	command(0x20);
	cr_assert_eq(reply() & 0x10, 0);

	command(0xa7);
	command(0x20);
	cr_assert(reply() & 0x20);
	command(0xa8);
	command(0x20);
	cr_assert_eq(reply() & 0x20, 0);
}

/* i8042_check_aux: no AUX port, and the driver must learn it at once. */
Test(i8042, aux_probe_fails_fast)
{
	command(0xd3);
	write_data(0x5a);
	cr_assert(status() & STATUS_OBF, "loop must answer, not time out");
	cr_assert_eq(status() & STATUS_AUXDATA, 0);

	command(0xa9);
	cr_assert_eq(reply(), 0x02);
}

Test(i8042, bytes_for_the_keyboard_are_dropped)
{
	write_data(0xf2);
	cr_assert_eq(status() & STATUS_OBF, 0);
}

/* --- Snapshot state ----------------------------------------------------- */

/* Restoring @raw into a fresh controller must fail and leave it as it was. */
static void expect_rejected(const void *raw, size_t size)
{
	struct state_reader r;
	struct i8042 fresh;
	struct i8042_state before;

	state_file_one_section(&r, STATE_DEV_I8042, raw, size);
	cr_assert_eq(i8042_init(&fresh, count_reset, &resets), 0);
	memcpy(&before, &fresh.state, sizeof(before));
	cr_assert_eq(i8042_restore(&fresh, &r), -1);
	cr_assert_eq(memcmp(&fresh.state, &before, sizeof(before)), 0);
	i8042_destroy(&fresh);
	state_reader_close(&r);
}

Test(i8042, state_round_trip)
{
	struct state_writer w;
	struct state_reader r;

	command(0x60);
	write_data(0x61); /* no system flag */
	command(0xaa);	  /* reply left unread */
	command(0xd3);	  /* waiting for the byte to echo */

	state_writer_init(&w);
	i8042_save(&controller, &w);
	state_file_through(&w, &r);
	i8042_destroy(&controller);
	cr_assert_eq(i8042_init(&controller, count_reset, &resets), 0);
	cr_assert_eq(i8042_restore(&controller, &r), 0);
	state_reader_close(&r);

	cr_assert_eq(status(), STATUS_OBF | STATUS_COMMAND | STATUS_UNLOCKED);
	cr_assert_eq(read_data(), 0x55);
	write_data(0x5a);
	cr_assert_eq(reply(), 0x5a, "the pending AUX loop was lost");
	command(0x20);
	cr_assert_eq(reply(), 0x61);
	cr_assert_eq(resets, 0);
}

Test(i8042, restore_rejects_impossible_state)
{
	struct i8042_state s = controller.state;
	uint8_t raw[sizeof(s)];

	s.pending_command = 0x20;
	expect_rejected(&s, sizeof(s));

	memcpy(raw, &controller.state, sizeof(raw));
	raw[offsetof(struct i8042_state, output_full)] = 2;
	expect_rejected(raw, sizeof(raw));
	memcpy(raw, &controller.state, sizeof(raw));
	raw[offsetof(struct i8042_state, last_write_was_command)] = 0x80;
	expect_rejected(raw, sizeof(raw));
}

Test(i8042, restore_needs_its_section)
{
	struct state_reader r;

	state_file_one_section(&r, STATE_DEV_SERIAL, &controller.state,
			       sizeof(controller.state));
	cr_assert_eq(i8042_restore(&controller, &r), -1);
	state_reader_close(&r);
}
