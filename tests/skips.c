// SPDX-License-Identifier: Apache-2.0
/*
 * skips.c - see skips.h; and main() of every criterion test, so that ctest
 * reports a skip as one (SKIP_RETURN_CODE 77, tests/CMakeLists.txt).
 *
 * ctest gives one verdict per test program, criterion one per test, so
 * the rule: a failure is a failure (exit 1); a run whose every test was
 * skipped tested nothing and exits 77, shown as skipped; a run where only
 * some were skipped did test the others and exits 0, after one line
 * naming the skipped tests and why, so that no skip hides in a pass.
 * Stats come from a POST_ALL report hook (in the runner process, after
 * every test), registered by hand under a name of its own: criterion's
 * ReportHook() names its functions by line number, which would clash
 * with a test file's hook on the same line.
 */
#include "tests/skips.h"

#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SKIPPED_EXIT 77

static size_t ran, skipped;
static char skipped_names[4096];

static void record_stats(struct criterion_global_stats *stats)
{
	ran = stats->nb_tests;
	skipped = stats->tests_skipped;
	for (struct criterion_suite_stats *s = stats->suites; s; s = s->next)
		for (struct criterion_test_stats *t = s->tests; t; t = t->next)
			if (t->test_status == CR_STATUS_SKIPPED) {
				size_t n = strlen(skipped_names);

				snprintf(skipped_names + n,
					 sizeof(skipped_names) - n,
					 "%s%s/%s%s%s%s", n ? "; " : "",
					 t->test->category, t->test->name,
					 t->message ? " (" : "",
					 t->message ? t->message : "",
					 t->message ? ")" : "");
			}
}

CR_SECTION_("cr_poa")
f_report_hook thaw_skips_stats_hook =
	(f_report_hook)record_stats CR_SECTION_SUFFIX_;

int main(int argc, char *argv[])
{
	struct criterion_test_set *tests = criterion_initialize();
	int status = 0;

	if (criterion_handle_args(argc, argv, true))
		status = !criterion_run_all_tests(tests);
	criterion_finalize(tests);
	if (status || !ran || !skipped)
		return status;
	if (skipped == ran) {
		fprintf(stderr, "skips: all %zu tests skipped: %s\n", ran,
			skipped_names);
		return SKIPPED_EXIT;
	}
	fprintf(stderr, "skips: %zu of %zu tests skipped: %s\n", skipped, ran,
		skipped_names);
	return 0;
}

static void skip_unless(bool have, const char *why, const char *require)
{
	const char *v = getenv(require);

	if (have)
		return;
	if (v && !strcmp(v, "1"))
		cr_assert_fail("%s; not skipped: %s=1 says this host has it",
			       why, require);
	cr_skip_test("%s", why);
}

void thaw_skip_unless_kvm(bool have, const char *why)
{
	skip_unless(have, why, "THAW_REQUIRE_KVM");
}

void thaw_skip_unless_node(bool have, const char *why)
{
	skip_unless(have, why, "THAW_REQUIRE_E2B");
}
