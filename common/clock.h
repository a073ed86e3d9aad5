/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - the one clock thaw measures phases and deadlines with:
 * CLOCK_MONOTONIC, which wall-clock changes do not move; and the wall
 * clock, only for what is shown to people or compared across processes
 * (a sandbox's creation and expiry times in the API).
 */
#ifndef THAW_COMMON_CLOCK_H
#define THAW_COMMON_CLOCK_H

#include <stdint.h>

#define NS_PER_MS 1000000ULL

uint64_t monotonic_ns(void);

/* The same clock in milliseconds, for phase timings. */
double monotonic_ms(void);

/* Sleeps @ms milliseconds (nothing for 0 or less), whatever signals
 * arrive meanwhile. */
void sleep_ms(double ms);

/* Milliseconds since the epoch on CLOCK_REALTIME. */
int64_t realtime_ms(void);

#endif
