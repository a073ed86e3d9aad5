/* SPDX-License-Identifier: Apache-2.0 */
/*
 * skips.h - the skips that must not happen where the suite is meant to run
 * everything: a test skipped for want of KVM, or of node and the E2B SDK,
 * is a failure under THAW_REQUIRE_KVM=1, resp. THAW_REQUIRE_E2B=1 (.ci/run
 * sets them where /dev/kvm opens, resp. where node >= 20.18 and npm are).
 * Every such skip goes through these; skips for other reasons stay plain
 * cr_skip_test().  skips.c also gives every criterion test its main(),
 * which tells ctest about skips (its design comment says how).
 */
#ifndef THAW_TESTS_SKIPS_H
#define THAW_TESTS_SKIPS_H

#include <stdbool.h>

/* Nothing when @have; else skips the running test saying @why, or fails
 * it under THAW_REQUIRE_KVM=1. */
void thaw_skip_unless_kvm(bool have, const char *why);

/* The same for node, npm and the E2B SDK, under THAW_REQUIRE_E2B=1. */
void thaw_skip_unless_node(bool have, const char *why);

#endif
