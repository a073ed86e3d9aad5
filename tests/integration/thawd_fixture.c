// SPDX-License-Identifier: Apache-2.0
/*
 * thawd_fixture.c - see thawd_fixture.h.
 */
#include "tests/integration/thawd_fixture.h"

#include <criterion/criterion.h>

bool thawd_fixture_start(struct thawd_process *p,
			 const struct thawd_process_spec *s, bool fatal)
{
	char err[4096];

	if (thawd_process_start(p, s, err, sizeof(err)) == 0)
		return true;
	if (fatal)
		cr_assert_fail("%s", err);
	cr_expect_fail("%s", err);
	return false;
}

void thawd_fixture_stop(struct thawd_process *p, double limit_s)
{
	char err[512];

	if (thawd_process_stop(p, limit_s, err, sizeof(err)))
		cr_expect_fail("%s", err);
}
