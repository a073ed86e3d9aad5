/* SPDX-License-Identifier: Apache-2.0 */
/*
 * thawd_fixture.h - pool/client's thawd_process.h for criterion tests:
 * a daemon under test started and stopped with the test failing, and
 * saying why (the daemon's log's tail included), when either goes wrong.
 */
#ifndef THAW_TESTS_THAWD_FIXTURE_H
#define THAW_TESTS_THAWD_FIXTURE_H

#include <stdbool.h>

#include "pool/client/thawd_process.h"

/*
 * thawd_process_start(); true when the daemon answers.  @fatal: a failure
 * ends the test (cr_assert), else it is recorded (cr_expect) and false is
 * returned, so that the test can clean up first.
 */
bool thawd_fixture_start(struct thawd_process *p,
			 const struct thawd_process_spec *s, bool fatal);

/* thawd_process_stop(), expecting (cr_expect) that the daemon ended on
 * SIGTERM within @limit_s, with status 0. */
void thawd_fixture_stop(struct thawd_process *p, double limit_s);

#endif
