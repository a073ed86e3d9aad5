// SPDX-License-Identifier: Apache-2.0
/*
 * test_i8042.c - the controller as Linux's i8042 driver and reboot path
 * use it, through the two port access functions.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "devices/i8042.h"

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
