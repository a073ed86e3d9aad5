// SPDX-License-Identifier: Apache-2.0
/*
 * rtc.c - CMOS clock showing host UTC time; see rtc.h.
 *
 * Linux reads seconds first and the other fields right after, without an
 * update-in-progress bit to warn it of a rollover in between.  Computing each
 * field from the clock at the moment it is read could therefore pair 59
 * seconds with the next minute.  Instead a read of the seconds register
 * latches the host time, and the other fields come from that latch while it
 * is less than a second old.
 */
#include "vmm/devices/rtc.h"

#include <stdio.h>
#include <string.h>

#include "vmm/devices/device_state.h"
#include "common/log.h"

#define REG_SECONDS 0x00
#define REG_MINUTES 0x02
#define REG_HOURS 0x04
#define REG_DAY_OF_WEEK 0x06
#define REG_DAY_OF_MONTH 0x07
#define REG_MONTH 0x08
#define REG_YEAR 0x09
#define REG_A 0x0a
#define REG_B 0x0b
#define REG_C 0x0c
#define REG_D 0x0d
#define REG_CENTURY 0x32

/* 32.768 kHz time base, 1024 Hz periodic rate: the PC power-on value. */
#define REG_A_DEFAULT 0x26
#define REG_A_UPDATE_IN_PROGRESS 0x80
#define REG_B_24_HOUR 0x02
#define REG_B_BINARY 0x04
#define REG_D_VALID_RAM_AND_TIME 0x80
#define HOUR_PM 0x80
#define INDEX_MASK 0x7f /* bit 7 of the index port masks NMIs */

#define INDEX_PORT 0
#define DATA_PORT 1

int rtc_init(struct rtc *rtc)
{
	int err;

	memset(rtc, 0, sizeof(*rtc));
	err = pthread_mutex_init(&rtc->lock, NULL);
	if (err) {
		log_error("rtc: pthread_mutex_init: %s", strerror(err));
		return -1;
	}
	rtc->state.cmos[REG_A] = REG_A_DEFAULT;
	rtc->state.cmos[REG_B] = REG_B_24_HOUR;
	return 0;
}

void rtc_destroy(struct rtc *rtc)
{
	pthread_mutex_destroy(&rtc->lock);
}

static bool is_clock_register(uint8_t index)
{
	switch (index) {
	case REG_SECONDS:
	case REG_MINUTES:
	case REG_HOURS:
	case REG_DAY_OF_WEEK:
	case REG_DAY_OF_MONTH:
	case REG_MONTH:
	case REG_YEAR:
	case REG_CENTURY:
		return true;
	default:
		return false;
	}
}

static int64_t nanoseconds_between(const struct timespec *from,
				   const struct timespec *to)
{
	return (int64_t)(to->tv_sec - from->tv_sec) * 1000000000 +
	       (to->tv_nsec - from->tv_nsec);
}

static void latch_time_if_needed(struct rtc *rtc, uint8_t index)
{
	struct timespec now, monotonic;

	clock_gettime(CLOCK_MONOTONIC, &monotonic);
	if (index != REG_SECONDS && rtc->time_latched &&
	    nanoseconds_between(&rtc->latched_at, &monotonic) < 1000000000)
		return;
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &rtc->latched);
	rtc->latched_at = monotonic;
	rtc->time_latched = true;
}

static uint8_t encode(const struct rtc_state *s, int value)
{
	if (s->cmos[REG_B] & REG_B_BINARY)
		return (uint8_t)value;
	return (uint8_t)((value / 10) << 4 | value % 10);
}

static uint8_t encode_hours(const struct rtc_state *s, int hour)
{
	int hour12;

	if (s->cmos[REG_B] & REG_B_24_HOUR)
		return encode(s, hour);
	hour12 = hour % 12 ? hour % 12 : 12;
	return encode(s, hour12) | (hour >= 12 ? HOUR_PM : 0);
}

static uint8_t read_clock_register(struct rtc *rtc, uint8_t index)
{
	const struct rtc_state *s = &rtc->state;
	const struct tm *t = &rtc->latched;

	latch_time_if_needed(rtc, index);
	switch (index) {
	case REG_SECONDS:
		/* A leap second (tm_sec 60) is not a valid RTC value. */
		return encode(s, t->tm_sec > 59 ? 59 : t->tm_sec);
	case REG_MINUTES:
		return encode(s, t->tm_min);
	case REG_HOURS:
		return encode_hours(s, t->tm_hour);
	case REG_DAY_OF_WEEK:
		return encode(s, t->tm_wday + 1);
	case REG_DAY_OF_MONTH:
		return encode(s, t->tm_mday);
	case REG_MONTH:
		return encode(s, t->tm_mon + 1);
	case REG_YEAR:
		return encode(s, t->tm_year % 100);
	default: /* REG_CENTURY */
		return encode(s, (t->tm_year + 1900) / 100);
	}
}

static uint8_t read_data(struct rtc *rtc)
{
	const struct rtc_state *s = &rtc->state;
	uint8_t index = s->index;

	if (is_clock_register(index))
		return read_clock_register(rtc, index);
	switch (index) {
	case REG_A:
		return s->cmos[REG_A] & ~REG_A_UPDATE_IN_PROGRESS;
	case REG_C:
		/* No interrupt flags: this RTC never interrupts. */
		return 0;
	case REG_D:
		return REG_D_VALID_RAM_AND_TIME;
	default:
		return s->cmos[index];
	}
}

static void write_data(struct rtc_state *s, uint8_t value)
{
	if (is_clock_register(s->index))
		return;
	switch (s->index) {
	case REG_A:
		s->cmos[REG_A] = value & ~REG_A_UPDATE_IN_PROGRESS;
		break;
	case REG_C:
	case REG_D:
		break; /* read-only */
	default:
		s->cmos[s->index] = value;
		break;
	}
}

void rtc_io(void *device, uint64_t offset, uint8_t *data, uint32_t len,
	    bool is_write)
{
	struct rtc *rtc = device;

	pthread_mutex_lock(&rtc->lock);
	for (uint32_t i = 0; i < len; i++) {
		switch (offset + i) {
		case INDEX_PORT:
			if (is_write)
				rtc->state.index = data[i] & INDEX_MASK;
			else
				data[i] = 0xff; /* write-only */
			break;
		case DATA_PORT:
			if (is_write)
				write_data(&rtc->state, data[i]);
			else
				data[i] = read_data(rtc);
			break;
		default:
			if (!is_write)
				data[i] = 0xff;
			break;
		}
	}
	pthread_mutex_unlock(&rtc->lock);
}

void rtc_save(struct rtc *rtc, struct state_writer *w)
{
	pthread_mutex_lock(&rtc->lock);
	state_put(w, STATE_DEV_RTC, 0, &rtc->state, sizeof(rtc->state));
	pthread_mutex_unlock(&rtc->lock);
}

int rtc_restore(struct rtc *rtc, const struct state_reader *r)
{
	struct rtc_state s;

	/* No bools: the section can be read into the struct directly. */
	if (state_get(r, STATE_DEV_RTC, 0, &s, sizeof(s)) ||
	    !state_bits_valid(s.index, INDEX_MASK, "rtc", "index") ||
	    !state_bits_valid(s.cmos[REG_A], (uint8_t)~REG_A_UPDATE_IN_PROGRESS,
			      "rtc", "register A"))
		return -1;
	pthread_mutex_lock(&rtc->lock);
	rtc->state = s;
	pthread_mutex_unlock(&rtc->lock);
	return 0;
}
