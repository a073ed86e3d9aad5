// SPDX-License-Identifier: Apache-2.0
/*
 * clock.c - see clock.h.
 */
#include "common/clock.h"

#include <errno.h>
#include <time.h>

uint64_t monotonic_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

double monotonic_ms(void)
{
	return monotonic_ns() / 1e6;
}

void sleep_ms(double ms)
{
	struct timespec t = { (time_t)(ms / 1e3),
			      (long)((ms - (time_t)(ms / 1e3) * 1e3) * 1e6) };

	while (ms > 0 && nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

int64_t realtime_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
