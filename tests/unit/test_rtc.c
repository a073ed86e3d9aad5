// SPDX-License-Identifier: Apache-2.0
/*
 * test_rtc.c - reads the CMOS clock through port 0x70/0x71 accesses the
 * way Linux's mc146818_get_time() does and compares with the host clock.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmm/devices/rtc.h"
#include "tests/unit/state_file.h"

static struct rtc clock_chip;

static void setup(void)
{
	cr_assert_eq(rtc_init(&clock_chip), 0);
}

static void teardown(void)
{
	rtc_destroy(&clock_chip);
}

static uint8_t cmos_read(uint8_t index)
{
	uint8_t value;

	rtc_io(&clock_chip, 0, &index, 1, true);
	rtc_io(&clock_chip, 1, &value, 1, false);
	return value;
}

static void cmos_write(uint8_t index, uint8_t value)
{
	rtc_io(&clock_chip, 0, &index, 1, true);
	rtc_io(&clock_chip, 1, &value, 1, true);
}

static int from_bcd(uint8_t value)
{
	cr_assert_leq(value & 0x0f, 9, "not BCD: %#x", value);
	cr_assert_leq(value >> 4, 9, "not BCD: %#x", value);
	return (value >> 4) * 10 + (value & 0x0f);
}

static time_t read_bcd_time(void)
{
	struct tm t = { 0 };

	t.tm_sec = from_bcd(cmos_read(0x00));
	t.tm_min = from_bcd(cmos_read(0x02));
	t.tm_hour = from_bcd(cmos_read(0x04));
	t.tm_mday = from_bcd(cmos_read(0x07));
	t.tm_mon = from_bcd(cmos_read(0x08)) - 1;
	t.tm_year = from_bcd(cmos_read(0x32)) * 100 +
		    from_bcd(cmos_read(0x09)) - 1900;
	return timegm(&t);
}

TestSuite(rtc, .init = setup, .fini = teardown);

Test(rtc, bcd_time_matches_host)
{
	time_t before = time(NULL);
	time_t read = read_bcd_time();
	time_t after = time(NULL);

	cr_assert_geq(read, before - 1);
	cr_assert_leq(read, after + 1);
}

Test(rtc, day_of_week_matches_host)
{
	time_t now = time(NULL);
	struct tm t;
	int wday = from_bcd(cmos_read(0x06));

	gmtime_r(&now, &t);
	/* Tolerate a midnight rollover between the two reads. */
	cr_assert(wday == t.tm_wday + 1 || wday == (t.tm_wday + 1) % 7 + 1);
}

Test(rtc, binary_mode)
{
	time_t now = time(NULL);
	struct tm t;
	uint8_t year;

	cmos_write(0x0b, 0x02 | 0x04);
	cr_assert_eq(cmos_read(0x0b), 0x06);
	year = cmos_read(0x09);
	gmtime_r(&now, &t);
	cr_assert_eq(year, t.tm_year % 100);
	cr_assert_lt(cmos_read(0x00), 60);
}

Test(rtc, twelve_hour_mode)
{
	time_t now;
	struct tm t;
	uint8_t hour;

	cmos_write(0x0b, 0x04); /* binary, 12-hour */
	now = time(NULL);
	hour = cmos_read(0x04);
	gmtime_r(&now, &t);
	cr_assert_eq(!!(hour & 0x80), t.tm_hour >= 12);
	cr_assert_geq(hour & 0x7f, 1);
	cr_assert_leq(hour & 0x7f, 12);
}

Test(rtc, update_in_progress_never_set)
{
	for (int i = 0; i < 1000; i++)
		cr_assert_eq(cmos_read(0x0a) & 0x80, 0);
	cr_assert_eq(cmos_read(0x0a), 0x26);
	cmos_write(0x0a, 0xa6);
	cr_assert_eq(cmos_read(0x0a), 0x26);
}

Test(rtc, status_registers)
{
	cr_assert_eq(cmos_read(0x0b), 0x02, "24-hour BCD by default");
	cr_assert_eq(cmos_read(0x0c), 0x00);
	cr_assert_eq(cmos_read(0x0d), 0x80, "valid RAM and time");
	cmos_write(0x0d, 0x00);
	cr_assert_eq(cmos_read(0x0d), 0x80);
}

Test(rtc, time_writes_are_ignored)
{
	time_t before = time(NULL);

	cmos_write(0x09, 0x99);
	cmos_write(0x32, 0x19);
	cr_assert_geq(read_bcd_time(), before - 1);
}

Test(rtc, cmos_ram_and_nmi_bit)
{
	cmos_write(0x40, 0xab);
	cmos_write(0x80 | 0x41, 0xcd); /* NMI-disable bit is not address */
	cr_assert_eq(cmos_read(0x40), 0xab);
	cr_assert_eq(cmos_read(0x41), 0xcd);
	cmos_write(0x7f, 0x11);
	cr_assert_eq(cmos_read(0x7f), 0x11);
}

/* --- Snapshot state ----------------------------------------------------- */

/* Restoring @s into a fresh chip must fail and leave it as it was. */
static void expect_rejected(const struct rtc_state *s, size_t size)
{
	struct state_reader r;
	struct rtc fresh;
	struct rtc_state before;

	state_file_one_section(&r, STATE_DEV_RTC, s, size);
	cr_assert_eq(rtc_init(&fresh), 0);
	memcpy(&before, &fresh.state, sizeof(before));
	cr_assert_eq(rtc_restore(&fresh, &r), -1);
	cr_assert_eq(memcmp(&fresh.state, &before, sizeof(before)), 0);
	rtc_destroy(&fresh);
	state_reader_close(&r);
}

Test(rtc, state_round_trip)
{
	struct state_writer w;
	struct state_reader r;
	uint8_t value;
	time_t now;
	struct tm t;

	cmos_write(0x0b, 0x02 | 0x04); /* binary */
	cmos_write(0x40, 0xab);
	cmos_write(0x41, 0xcd); /* and the index stays at 0x41 */

	state_writer_init(&w);
	rtc_save(&clock_chip, &w);
	state_file_through(&w, &r);
	rtc_destroy(&clock_chip);
	cr_assert_eq(rtc_init(&clock_chip), 0);
	cr_assert_eq(rtc_restore(&clock_chip, &r), 0);
	state_reader_close(&r);

	rtc_io(&clock_chip, 1, &value, 1, false);
	cr_assert_eq(value, 0xcd, "the index register was lost");
	cr_assert_eq(cmos_read(0x40), 0xab);
	cr_assert_eq(cmos_read(0x0b), 0x06);
	now = time(NULL);
	gmtime_r(&now, &t);
	cr_assert_eq(cmos_read(0x09), t.tm_year % 100, "not binary");
}

Test(rtc, restore_rejects_impossible_state)
{
	struct rtc_state s = clock_chip.state;

	s.index = 0x80;
	expect_rejected(&s, sizeof(s));
	s = clock_chip.state;
	s.cmos[0x0a] = 0xa6; /* update in progress */
	expect_rejected(&s, sizeof(s));
	expect_rejected(&s, sizeof(s) - 1);
}

Test(rtc, restore_needs_its_section)
{
	struct state_reader r;

	state_file_one_section(&r, STATE_DEV_SERIAL, &clock_chip.state,
			       sizeof(clock_chip.state));
	cr_assert_eq(rtc_restore(&clock_chip, &r), -1);
	state_reader_close(&r);
}
