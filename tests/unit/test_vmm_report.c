// SPDX-License-Identifier: Apache-2.0
/*
 * test_vmm_report.c - vmm/vmm_report.c, the report channel between
 * thaw-vmm and its supervisor, both ends: records written and read back
 * (values with spaces, escapes and controls round trip), a text cut to
 * fit rather than a record lost, and hostile or broken input: records
 * split across reads, lines past the bound, bad syntax and escapes,
 * unknown kinds and keys (ignored), and a record cut by the pipe's end
 * (reported as truncated, never used).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vmm/vmm_report.h"

static struct vmm_report report;

static void feed(const char *bytes)
{
	vmm_report_feed(&report, bytes, strlen(bytes));
}

static void setup(void)
{
	vmm_report_init(&report);
}

TestSuite(report, .init = setup);

/* Writes @r through a pipe and reads it back into report. */
static void round_trip(struct vmm_record *r)
{
	char buf[VMM_REPORT_LINE_MAX + 1];
	int fds[2];

	cr_assert_eq(pipe(fds), 0);
	cr_assert_eq(vmm_record_send(r, fds[1]), 0);
	close(fds[1]);
	ssize_t n = read(fds[0], buf, sizeof(buf));
	close(fds[0]);
	cr_assert_gt(n, 0);
	cr_assert_leq(n, VMM_REPORT_LINE_MAX);
	cr_assert_eq(buf[n - 1], '\n', "one line, ended");
	vmm_report_feed(&report, buf, (size_t)n);
	vmm_report_end(&report);
}

Test(report, a_record_round_trips)
{
	struct vmm_record r;
	char text[128];
	uint64_t v;

	vmm_record_begin(&r, VMM_REPORT_STOP);
	vmm_record_put_u64(&r, "status", 3);
	vmm_record_put_u64(&r, "big", UINT64_MAX);
	vmm_record_put_text(&r, "reason", "a b=c 100%\tend\n\x7f");
	round_trip(&r);
	cr_expect_str_eq(report.problem, "");
	cr_expect_str_eq(report.ready, "");
	cr_expect_str_eq(report.stop, "stop status=3 big=18446744073709551615 "
				      "reason=a%20b%3Dc%20100%25%09end%0A%7F");
	cr_assert_eq(vmm_report_u64(report.stop, "status", &v), 0);
	cr_expect_eq(v, 3);
	cr_assert_eq(vmm_report_u64(report.stop, "big", &v), 0);
	cr_expect_eq(v, UINT64_MAX);
	cr_assert_eq(vmm_report_text(report.stop, "reason", text, sizeof(text)),
		     0);
	cr_expect_str_eq(text, "a b=c 100%\tend\n\x7f");
	cr_expect_eq(
		vmm_report_text(report.stop, "nothing", text, sizeof(text)),
		-ENOENT);
	cr_expect_eq(vmm_report_text(report.stop, "reason", text, 4), -ENOSPC);
	cr_expect_eq(vmm_report_u64(report.stop, "reason", &v), -EINVAL);
	/* A key is whole: "stat" is not "status". */
	cr_expect_eq(vmm_report_u64(report.stop, "stat", &v), -ENOENT);
}

Test(report, a_long_text_is_cut_to_fit_and_the_record_kept)
{
	struct vmm_record r;
	char huge[4 * VMM_REPORT_LINE_MAX], text[VMM_REPORT_VALUE_MAX];
	uint64_t v;

	memset(huge, ' ', sizeof(huge) - 1); /* each one %20 */
	huge[sizeof(huge) - 1] = '\0';
	vmm_record_begin(&r, VMM_REPORT_STOP);
	vmm_record_put_u64(&r, "status", 1);
	vmm_record_put_text(&r, "reason", huge);
	round_trip(&r);
	cr_expect_str_eq(report.problem, "");
	cr_assert_eq(vmm_report_u64(report.stop, "status", &v), 0);
	cr_expect_eq(v, 1);
	cr_assert_eq(vmm_report_text(report.stop, "reason", text, sizeof(text)),
		     0);
	cr_expect_gt(strlen(text), 300);
	cr_expect_eq(strspn(text, " "), strlen(text));
}

Test(report, records_split_across_reads_and_the_last_of_each_kind)
{
	uint64_t v;

	feed("rea");
	feed("dy started_at_us=1");
	cr_expect_str_eq(report.ready, "", "kept before its newline");
	feed("2\nready started_at_us=7\nstop sta");
	feed("tus=0 reason=x\n");
	cr_expect_str_eq(report.ready, "ready started_at_us=7");
	cr_expect_str_eq(report.stop, "stop status=0 reason=x");
	cr_assert_eq(vmm_report_u64(report.ready, "started_at_us", &v), 0);
	cr_expect_eq(v, 7);
	vmm_report_end(&report);
	cr_expect_str_eq(report.problem, "");
}

Test(report, unknown_kinds_and_keys_are_ignored)
{
	uint64_t v;

	feed("hello from_a_later_vmm=1\n"
	     "ready later_key=abc started_at_us=5 other=%41\n");
	cr_expect_str_eq(report.problem, "");
	cr_expect_str_eq(report.stop, "");
	cr_assert_eq(vmm_report_u64(report.ready, "started_at_us", &v), 0);
	cr_expect_eq(v, 5);
}

Test(report, garbled_records_are_dropped_and_said)
{
	static const char *const garbled[] = {
		"Ready started_at_us=1\n",  /* kind not lower case */
		"ready started_at_us\n",    /* no '=' */
		"ready  started_at_us=1\n", /* two spaces */
		"ready started_at_us=1 \n", /* a trailing space */
		"ready =1\n",		    /* no key */
		"ready a=%4\n",		    /* a short escape */
		"ready a=%zz\n",	    /* not hex */
		"ready a=b=c\n",	    /* '=' unescaped */
		"ready a=\x01\n",	    /* a control */
		"\n",			    /* nothing */
		"ready a\xff=1\n",	    /* a key not a word */
	};

	for (size_t i = 0; i < sizeof(garbled) / sizeof(garbled[0]); i++) {
		vmm_report_init(&report);
		feed(garbled[i]);
		cr_expect_str_eq(report.ready, "", "kept: %s", garbled[i]);
		cr_expect_eq(strncmp(report.problem, "a garbled record", 16), 0,
			     "%s: problem '%s'", garbled[i], report.problem);
	}
	/* After a garbled one, good records still count; the first
	 * problem is the one said. */
	feed("ready started_at_us=2\nready x\n");
	cr_expect_str_eq(report.ready, "ready started_at_us=2");
	cr_expect_eq(strncmp(report.problem, "a garbled record: 'ready a'", 27),
		     0, "%s", report.problem);
}

Test(report, keys_and_values_past_their_bounds_are_refused)
{
	char line[VMM_REPORT_LINE_MAX];
	int n = snprintf(line, sizeof(line), "ready ");

	memset(line + n, 'k', VMM_REPORT_KEY_MAX);
	snprintf(line + n + VMM_REPORT_KEY_MAX, sizeof(line) - n - 32, "=1\n");
	feed(line);
	cr_expect_str_eq(report.ready, "");
	cr_expect_neq(report.problem[0], '\0');

	/* A value of VMM_REPORT_VALUE_MAX decoded bytes, as escapes that
	 * fit the line, is one too many. */
	vmm_report_init(&report);
	n = snprintf(line, sizeof(line), "stop reason=");
	memset(line + n, 'v', VMM_REPORT_VALUE_MAX);
	line[n + VMM_REPORT_VALUE_MAX] = '\n';
	vmm_report_feed(&report, line, n + VMM_REPORT_VALUE_MAX + 1);
	cr_expect_str_eq(report.stop, "");
	cr_expect_neq(report.problem[0], '\0');
}

Test(report, an_overlong_line_is_dropped_whole_and_the_next_one_kept)
{
	char flood[3 * VMM_REPORT_LINE_MAX];

	memset(flood, 'a', sizeof(flood));
	memcpy(flood, "ready x=", 8);
	vmm_report_feed(&report, flood, sizeof(flood));
	feed("tail_of_the_long_line=1\nstop status=1 reason=y\n");
	cr_expect_str_eq(report.ready, "", "no part of it kept");
	cr_expect_str_eq(report.stop, "stop status=1 reason=y");
	cr_expect_eq(strncmp(report.problem,
			     "a record longer than the channel's bound: ", 42),
		     0, "%s", report.problem);
}

Test(report, a_record_cut_by_the_end_is_truncated_not_used)
{
	feed("ready started_at_us=1\nstop status=0 reas");
	vmm_report_end(&report);
	cr_expect_str_eq(report.ready, "ready started_at_us=1");
	cr_expect_str_eq(report.stop, "");
	cr_expect_str_eq(report.problem,
			 "a truncated record: 'stop status=0 reas'");
}

Test(report, a_number_must_be_a_decimal_that_fits)
{
	uint64_t v = 42;

	feed("stop a=18446744073709551616 b= c=-1 d=1x e=%31%32\n");
	cr_expect_eq(vmm_report_u64(report.stop, "a", &v), -EINVAL);
	cr_expect_eq(vmm_report_u64(report.stop, "b", &v), -EINVAL);
	cr_expect_eq(vmm_report_u64(report.stop, "c", &v), -EINVAL);
	cr_expect_eq(vmm_report_u64(report.stop, "d", &v), -EINVAL);
	cr_expect_eq(v, 42);
	cr_expect_eq(vmm_report_u64(report.stop, "e", &v), 0);
	cr_expect_eq(v, 12);
}
