/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clock.h - the one clock thaw measures phases and deadlines with:
 * CLOCK_MONOTONIC, which wall-clock changes do not move.
 */
#ifndef THAW_COMMON_CLOCK_H
#define THAW_COMMON_CLOCK_H

#include <stdint.h>

#define NS_PER_MS 1000000ULL

uint64_t monotonic_ns(void);

#endif
