// SPDX-License-Identifier: Apache-2.0
/*
 * test_vmm_status.c - pool/host/vmm_process.c reading what a VMM says
 * with numbers: a control answer's fields (vmm/control.h; a checkpoint's),
 * where a field is a whole KEY=VALUE word, never the tail of a longer key;
 * and a restored clone's ready record (vmm/vmm_report.h), the one parser
 * `thaw run` and the daemon share, which either yields every phase of its
 * restore or an error that quotes the record and names the missing field.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "pool/host/vmm_process.h"

Test(status, a_field_is_a_whole_word)
{
	double v = -1;

	cr_expect_eq(vmm_control_number("ok running pre_setup_us=9 setup_us=12",
					"setup_us=", &v),
		     0);
	cr_expect_eq(v, 12);
	cr_expect_eq(vmm_control_number("setup_us=7 x=1", "setup_us=", &v), 0);
	cr_expect_eq(v, 7);
	cr_expect_eq(vmm_control_number("ok running pre_setup_us=9",
					"setup_us=", &v),
		     -ENOENT);
	cr_expect_eq(vmm_control_number("ok running", "setup_us=", &v),
		     -ENOENT);
}

Test(status, a_value_must_be_a_number)
{
	double v;

	cr_expect_eq(vmm_control_number("ok setup_us=abc", "setup_us=", &v),
		     -EINVAL);
	cr_expect_eq(vmm_control_number("ok setup_us=12x y=1", "setup_us=", &v),
		     -EINVAL);
	cr_expect_eq(vmm_control_number("ok setup_us=", "setup_us=", &v),
		     -EINVAL);
	cr_expect_eq(vmm_control_number("ok setup_us= 3", "setup_us=", &v),
		     -EINVAL);
}

#define RESTORED                                     \
	"ready started_at_us=1000000 setup_us=2000 " \
	"restore_us=500 prefetched_pages=0 prefetch_us=0"

Test(status, the_phases_add_up_to_the_whole_restore)
{
	struct vmm_restore_phases p;
	char err[256];

	/* Forked at 999.5 ms, agent first answered at 1100 ms. */
	cr_assert_eq(vmm_restore_phases_parse(RESTORED, 999.5, 1100, &p, err,
					      sizeof(err)),
		     0, "%s", err);
	cr_expect_float_eq(p.process_start_ms, 0.5, 1e-9);
	cr_expect_float_eq(p.setup_ms, 2, 1e-9);
	cr_expect_float_eq(p.state_restore_ms, 0.5, 1e-9);
	cr_expect_eq(p.page_in_ms, 0);
	cr_expect_eq(p.prefetched_pages, 0);
	cr_expect_float_eq(p.agent_ms, 97.5, 1e-9);
	cr_expect_float_eq(vmm_restore_host_ms(&p) + p.agent_ms, 1100 - 999.5,
			   1e-9);
}

Test(status, a_ready_record_without_the_restore_fields_is_refused)
{
	struct vmm_restore_phases p;
	char err[512];

	/* No record at all (a VMM that never said ready), a booted VM's,
	 * one without a field, one with a bad value. */
	cr_expect_eq(vmm_restore_phases_parse("", 0, 1, &p, err, sizeof(err)),
		     -EPROTO);
	cr_expect_str_eq(err, "the VMM's ready record '' has no "
			      "started_at_us field");
	cr_expect_eq(vmm_restore_phases_parse("ready started_at_us=4", 0, 1, &p,
					      err, sizeof(err)),
		     -EPROTO);
	cr_expect_str_eq(err, "the VMM's ready record 'ready started_at_us=4' "
			      "has no setup_us field");
	cr_expect_eq(vmm_restore_phases_parse("ready setup_us=1 restore_us=2 "
					      "prefetched_pages=0 "
					      "started_at_us=4",
					      0, 1, &p, err, sizeof(err)),
		     -EPROTO);
	cr_expect_not_null(strstr(err, "has no prefetch_us field"), "%s", err);
	cr_expect_eq(vmm_restore_phases_parse(
			     "ready setup_us=1 restore_us=x "
			     "prefetched_pages=0 prefetch_us=0 started_at_us=4",
			     0, 1, &p, err, sizeof(err)),
		     -EPROTO);
	cr_expect_not_null(strstr(err, "has a bad restore_us field"), "%s",
			   err);
}
