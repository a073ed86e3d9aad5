/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rtc.h - MC146818 CMOS real-time clock at ports 0x70 (index) / 0x71 (data).
 *
 * Without kvmclock (thaw boots PVM guests with "nopv") Linux takes the wall
 * clock from this chip at boot; with nothing at these ports it would read
 * 0xff everywhere and get garbage.  The clock registers always show the
 * host's current UTC time, in BCD or binary and 12- or 24-hour format as
 * register B selects.  Nothing is simulated: the update-in-progress bit is
 * always clear (so the kernel never waits for an update cycle), register D
 * always reports valid RAM and time, and no periodic, alarm or update
 * interrupts are ever raised.  Writes to the clock registers are ignored:
 * the guest agent sets the guest's clock through the kernel, not here.  The
 * other CMOS bytes are plain RAM.
 *
 * Guest-visible state (index, control registers, RAM) is in struct
 * rtc_state, which a snapshot saves; the latched time in struct rtc is a
 * host-side cache, and a restored clock shows the restoring host's time.
 */
#ifndef THAW_VMM_DEVICES_RTC_H
#define THAW_VMM_DEVICES_RTC_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "snapshot/state.h"

#define RTC_BASE 0x70
#define RTC_PORT_COUNT 2
#define RTC_CMOS_SIZE 128

struct rtc_state {
	uint8_t index;
	/* Register A/B values and alarm bytes live here too, at their
	 * CMOS offsets. */
	uint8_t cmos[RTC_CMOS_SIZE];
};

struct rtc {
	struct rtc_state state;
	pthread_mutex_t lock;
	/* Host time latched when the guest reads the seconds register. */
	struct tm latched;
	struct timespec latched_at; /* CLOCK_MONOTONIC */
	bool time_latched;
};

/* Returns 0, or -1 with a message. */
int rtc_init(struct rtc *rtc);

void rtc_destroy(struct rtc *rtc);

/* bus_access_fn for the RTC_PORT_COUNT ports at RTC_BASE. */
void rtc_io(void *device, uint64_t offset, uint8_t *data, uint32_t len,
	    bool is_write);

/* Adds struct rtc_state as section STATE_DEV_RTC, instance 0. */
void rtc_save(struct rtc *rtc, struct state_writer *w);

/* Checks and installs the saved state; returns 0, or -1 after a message
 * with the device untouched. */
int rtc_restore(struct rtc *rtc, const struct state_reader *r);

#endif
