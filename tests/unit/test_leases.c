// SPDX-License-Identifier: Apache-2.0
/*
 * test_leases.c - a sandbox's lease ends on CLOCK_MONOTONIC (pools.c):
 * stepping the wall clock, by a day or back to 1970, expires no lease and
 * keeps none alive; the expiry the API shows is the wall clock's now plus
 * what is left; the longest lifetime a config allows does not overflow.
 * The clocks are made-up numbers: the functions take them as arguments.
 */
#include <criterion/criterion.h>
#include <stdint.h>

#include "common/clock.h"
#include "pool/daemon/daemon.h"

#define S_NS (1000 * NS_PER_MS)
#define DAY_MS (86400LL * 1000)

/* A lease of 600 s taken 1000 s after boot, at 2026-12-02T09:00:00Z. */
static const uint64_t taken_ns = 1000 * S_NS;
static const int64_t taken_wall_ms = 1796202000000LL;

Test(leases, a_wall_clock_step_expires_nothing)
{
	uint64_t expires = lease_deadline_ns(taken_ns, 600);
	uint64_t later = taken_ns + 60 * S_NS;

	/* A minute later the wall clock jumps a day ahead, or back to 0:
	 * the monotonic clock, all the lease looks at, moved a minute. */
	cr_expect_not(lease_expired(expires, later));
	cr_expect_eq(lease_expires_wall_ms(expires, later,
					   taken_wall_ms + 60000 + DAY_MS),
		     taken_wall_ms + 600000 + DAY_MS);
	cr_expect_eq(lease_expires_wall_ms(expires, later, 0), 540000);
	cr_expect_not(lease_expired(expires, expires - 1));
	cr_expect(lease_expired(expires, expires));
	cr_expect(lease_expired(expires, expires + 600 * S_NS));
}

Test(leases, shown_expiry_is_now_plus_what_is_left)
{
	uint64_t expires = lease_deadline_ns(taken_ns, 600);

	cr_expect_eq(lease_expires_wall_ms(expires, taken_ns, taken_wall_ms),
		     taken_wall_ms + 600000);
	cr_expect_eq(lease_expires_wall_ms(expires, taken_ns + 599 * S_NS,
					   taken_wall_ms + 599000),
		     taken_wall_ms + 600000);
	/* Past its end (the reaper not there yet): now, not the past. */
	cr_expect_eq(lease_expires_wall_ms(expires, taken_ns + 700 * S_NS,
					   taken_wall_ms + 700000),
		     taken_wall_ms + 700000);
}

Test(leases, a_year_long_lease_does_not_overflow)
{
	const uint32_t year_s = 365 * 86400;
	uint64_t expires = lease_deadline_ns(taken_ns, year_s);

	cr_expect_eq(expires - taken_ns, (uint64_t)year_s * S_NS);
	cr_expect_not(lease_expired(expires, taken_ns + (year_s - 1) * S_NS));
	cr_expect_eq(lease_expires_wall_ms(expires, taken_ns, taken_wall_ms),
		     taken_wall_ms + (int64_t)year_s * 1000);
}
