// SPDX-License-Identifier: Apache-2.0
/*
 * test_admission.c - thawd's admission (pool/daemon/admission.h) on made-up
 * text and readings: the PSI and meminfo parsers on what the kernel writes
 * and on what it might not, restore times becoming a slowdown (and ageing
 * out), the decision with its hysteresis and each signal turned off, and
 * the Retry-After a refusal carries.  Nothing here reads /proc.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "pool/daemon/admission.h"

/* As /proc/pressure/cpu reads on a 6.x kernel. */
static const char cpu_psi[] =
	"some avg10=93.10 avg60=40.25 avg300=10.84 total=6234405334\n"
	"full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";

Test(psi, reads_avg10_of_the_asked_line)
{
	double v = -1;

	cr_assert_eq(psi_parse(cpu_psi, "some", &v), 0);
	cr_expect_float_eq(v, 93.10, 1e-9);
	cr_assert_eq(psi_parse(cpu_psi, "full", &v), 0);
	cr_expect_float_eq(v, 0.0, 1e-9);
	cr_assert_eq(psi_parse("some avg10=100.00 avg60=1.00 avg300=0.00 "
			       "total=1",
			       "some", &v),
		     0, "no newline at the end");
	cr_expect_float_eq(v, 100.0, 1e-9);
}

Test(psi, refuses_what_the_kernel_does_not_write)
{
	double v;

	/* Kernels before 5.13 have no "full" line for the CPU. */
	cr_expect_eq(psi_parse("some avg10=1.00 avg60=0.00 avg300=0.00 "
			       "total=5\n",
			       "full", &v),
		     -EINVAL);
	cr_expect_eq(psi_parse("", "some", &v), -EINVAL);
	cr_expect_eq(psi_parse("some avg60=1.00 total=5\n"
			       "full avg10=2.00 total=5\n",
			       "some", &v),
		     -EINVAL, "avg10 of the next line is not this one's");
	cr_expect_eq(psi_parse("some avg10= avg60=0.00\n", "some", &v),
		     -EINVAL);
	cr_expect_eq(psi_parse("some avg10=nan avg60=0.00\n", "some", &v),
		     -EINVAL);
	cr_expect_eq(psi_parse("some avg10=1.5x avg60=0.00\n", "some", &v),
		     -EINVAL);
	cr_expect_eq(psi_parse("some avg10=-1.00 avg60=0.00\n", "some", &v),
		     -EINVAL);
	cr_expect_eq(psi_parse("some avg10=100.01 avg60=0.00\n", "some", &v),
		     -EINVAL);
	cr_expect_eq(psi_parse("something avg10=1.00\n", "some", &v), -EINVAL);
}

static const char meminfo[] = "MemTotal:       24684084 kB\n"
			      "MemFree:        20000000 kB\n"
			      "MemAvailable:   24247404 kB\n"
			      "Buffers:          123456 kB\n";

Test(meminfo, reads_total_and_available)
{
	uint64_t total = 0, available = 0;

	cr_assert_eq(meminfo_parse(meminfo, &total, &available), 0);
	cr_expect_eq(total, 24684084);
	cr_expect_eq(available, 24247404);
}

Test(meminfo, refuses_what_it_cannot_use)
{
	uint64_t total, available;

	/* Before Linux 3.14 there was no MemAvailable. */
	cr_expect_eq(meminfo_parse("MemTotal: 1000 kB\nMemFree: 10 kB\n",
				   &total, &available),
		     -EINVAL);
	cr_expect_eq(meminfo_parse("MemAvailable: 10 kB\n", &total, &available),
		     -EINVAL);
	cr_expect_eq(meminfo_parse("MemTotal: 0 kB\nMemAvailable: 0 kB\n",
				   &total, &available),
		     -EINVAL, "a total of 0 would divide by zero");
	cr_expect_eq(meminfo_parse("MemTotal: many kB\nMemAvailable: 1 kB\n",
				   &total, &available),
		     -EINVAL);
	cr_expect_eq(meminfo_parse("MemTotal: 1000 MB\nMemAvailable: 1 kB\n",
				   &total, &available),
		     -EINVAL, "another unit");
	cr_expect_eq(meminfo_parse("", &total, &available), -EINVAL);
}

/* ---- restore times ---- */

static void add_restores(struct restore_latency *l, int n, double ms,
			 double at_ms)
{
	for (int i = 0; i < n; i++)
		restore_latency_add(l, ms, at_ms);
}

Test(restore_latency, unknown_until_the_first_ones_are_in)
{
	struct restore_latency l = { 0 };
	struct restore_slowdown s;

	add_restores(&l, RESTORE_SAMPLES - 1, 100, 1000);
	restore_latency_slowdown(&l, "default", 1000, &s);
	cr_expect_eq(s.factor, 0);
	cr_expect_str_eq(s.template, "default");
	add_restores(&l, 1, 100, 1000);
	restore_latency_slowdown(&l, "default", 1000, &s);
	cr_expect_float_eq(s.factor, 1.0, 1e-9);
	cr_expect_float_eq(s.first_ms, 100, 1e-9);
}

Test(restore_latency, recent_median_against_the_first_ones)
{
	struct restore_latency l = { 0 };
	struct restore_slowdown s;

	/* The first ones: a median of (100 + 300) / 2, whatever the order. */
	double first[RESTORE_SAMPLES] = {
		500, 100, 300, 50, 100, 300, 900, 60
	};
	for (int i = 0; i < RESTORE_SAMPLES; i++)
		restore_latency_add(&l, first[i], 0);
	add_restores(&l, RESTORE_SAMPLES / 2, 4000, 1000);
	restore_latency_slowdown(&l, "py", 1000, &s);
	cr_expect_float_eq(s.first_ms, 200, 1e-9);
	/* The last 8: 100 300 900 60, then four of 4000. */
	cr_expect_float_eq(s.recent_ms, (900 + 4000) / 2.0, 1e-9);
	add_restores(&l, RESTORE_SAMPLES / 2, 4000, 2000);
	restore_latency_slowdown(&l, "py", 2000, &s);
	cr_expect_float_eq(s.recent_ms, 4000, 1e-9);
	cr_expect_float_eq(s.factor, 20, 1e-9);
	/* The first ones stay the baseline. */
	cr_expect_float_eq(s.first_ms, 200, 1e-9);
}

Test(restore_latency, old_restores_age_out)
{
	struct restore_latency l = { 0 };
	struct restore_slowdown s;

	add_restores(&l, RESTORE_SAMPLES, 100, 0);
	add_restores(&l, RESTORE_SAMPLES, 2000, 10000);
	restore_latency_slowdown(&l, "default", 10000 + RESTORE_RECENT_MS, &s);
	cr_expect_float_eq(s.factor, 20, 1e-9, "still recent");
	restore_latency_slowdown(&l, "default", 10001 + RESTORE_RECENT_MS, &s);
	cr_expect_eq(s.factor, 0, "none recent: not known");

	/* Fewer than half a median's worth of recent ones say nothing. */
	add_restores(&l, RESTORE_SAMPLES / 2 - 1, 3000, 50000);
	restore_latency_slowdown(&l, "default", 50000, &s);
	cr_expect_eq(s.factor, 0);
	add_restores(&l, 1, 3000, 50000);
	restore_latency_slowdown(&l, "default", 50000, &s);
	cr_expect_float_eq(s.factor, 30, 1e-9);
}

/* ---- the decision ---- */

/* The embedded default's limits. */
static const struct admission_limits defaults = {
	.pressure_percent = { [PRESSURE_CPU] = 90,
			      [PRESSURE_MEMORY] = 5,
			      [PRESSURE_IO] = 20 },
	.min_available_percent = 5,
	.restore_slowdown = 10,
};

/* A quiet host of 1000 MiB with @available_mib free, every signal read. */
static struct host_reading host(uint64_t available_mib)
{
	return (struct host_reading){
		.pressure_known = { true, true, true },
		.memory_known = true,
		.mem_total_kib = 1000 << 10,
		.mem_available_kib = available_mib << 10,
	};
}

static char reason[256];

static bool decide(const struct admission_limits *lim,
		   const struct host_reading *h,
		   const struct restore_slowdown *s, bool overloaded)
{
	strcpy(reason, "stale");
	return admission_decide(lim, h, s, overloaded, reason, sizeof(reason));
}

Test(decide, a_quiet_host_is_admitted)
{
	struct host_reading h = host(900);
	struct restore_slowdown s = { "default", 1.5, 150, 100 };

	cr_expect_not(decide(&defaults, &h, &s, false));
	cr_expect_str_empty(reason);
	cr_expect_not(decide(&defaults, &h, NULL, true), "overload ended");
	cr_expect_str_empty(reason);
}

Test(decide, each_pressure_at_its_limit)
{
	for (int i = 0; i < PRESSURE_NR; i++) {
		struct host_reading h = host(900);

		h.pressure[i] = defaults.pressure_percent[i];
		cr_expect(decide(&defaults, &h, NULL, false), "%s",
			  pressure_sources[i].resource);
		cr_expect_not_null(strstr(reason, pressure_sources[i].resource),
				   "%s", reason);
		h.pressure[i] = defaults.pressure_percent[i] - 0.1;
		cr_expect_not(decide(&defaults, &h, NULL, false), "%s", reason);
	}
	struct host_reading h = host(900);
	h.pressure[PRESSURE_CPU] = 93.1;
	cr_expect(decide(&defaults, &h, NULL, false));
	cr_expect_str_eq(reason, "cpu pressure some avg10 93.1 % >= 90 %");
}

Test(decide, leaves_only_below_three_quarters)
{
	struct host_reading h = host(900);

	h.pressure[PRESSURE_CPU] = 80;
	cr_expect_not(decide(&defaults, &h, NULL, false), "not yet at 90");
	cr_expect(decide(&defaults, &h, NULL, true), "overloaded until 67.5");
	cr_expect_not_null(strstr(reason, ">= 67.5 %"), "%s", reason);
	h.pressure[PRESSURE_CPU] = 67.5;
	cr_expect(decide(&defaults, &h, NULL, true));
	h.pressure[PRESSURE_CPU] = 67.4;
	cr_expect_not(decide(&defaults, &h, NULL, true), "%s", reason);
}

Test(decide, memory_floor_and_its_hysteresis)
{
	/* 5 % of 1000 MiB: 50 MiB; resuming above 4/3 of it, 66.7. */
	struct host_reading h = host(49);

	cr_expect(decide(&defaults, &h, NULL, false));
	cr_expect_str_eq(reason,
			 "memory available 49 MiB < 50 MiB (5 % of 1000 MiB)");
	h = host(60);
	cr_expect_not(decide(&defaults, &h, NULL, false));
	cr_expect(decide(&defaults, &h, NULL, true));
	cr_expect_not_null(strstr(reason, "(6.67 % of 1000 MiB"), "%s", reason);
	h = host(67);
	cr_expect_not(decide(&defaults, &h, NULL, true), "%s", reason);
}

/* What test_daemon sets to have a daemon that never admits. */
Test(decide, a_floor_of_all_memory_is_never_met)
{
	struct admission_limits lim = { .min_available_percent = 100 };
	struct host_reading h = host(999);

	cr_expect(decide(&lim, &h, NULL, false));
	cr_expect(decide(&lim, &h, NULL, true));
}

/* A high floor is still left: resuming wants at most halfway from it to
 * all of memory (75 %: 87.5 %, not 4/3 of it, 100 %). */
Test(decide, a_high_floor_can_be_left)
{
	struct admission_limits lim = { .min_available_percent = 75 };
	struct host_reading h = host(700);

	cr_expect(decide(&lim, &h, NULL, false));
	h = host(880);
	cr_expect_not(decide(&lim, &h, NULL, true), "%s", reason);
	h = host(870);
	cr_expect(decide(&lim, &h, NULL, true));
	cr_expect_not_null(strstr(reason, "(87.5 % of 1000 MiB"), "%s", reason);
}

Test(decide, restore_slowdown_and_its_hysteresis)
{
	struct host_reading h = host(900);
	struct restore_slowdown s = { "py", 12.3, 1230, 100 };

	cr_expect(decide(&defaults, &h, &s, false));
	cr_expect_str_eq(
		reason, "template py: restores take 12.3x as long as its first "
			"ones (median 1230 ms, against 100 ms) >= 10x");
	s.factor = 8;
	cr_expect_not(decide(&defaults, &h, &s, false));
	cr_expect(decide(&defaults, &h, &s, true), "overloaded until 7.5x");
	s.factor = 7;
	cr_expect_not(decide(&defaults, &h, &s, true), "%s", reason);
	s.factor = 0; /* not known */
	cr_expect_not(decide(&defaults, &h, &s, true));
}

Test(decide, zero_turns_a_signal_off)
{
	struct admission_limits off = { 0 };
	struct host_reading h = host(0);
	struct restore_slowdown s = { "default", 1000, 100000, 100 };

	for (int i = 0; i < PRESSURE_NR; i++)
		h.pressure[i] = 100;
	cr_expect_not(decide(&off, &h, &s, false), "%s", reason);
	cr_expect_not(decide(&off, &h, &s, true), "%s", reason);
}

/* A host without PSI, or whose meminfo could not be read: those signals
 * say nothing, the others still count. */
Test(decide, what_was_not_read_does_not_count)
{
	struct host_reading h = host(0);
	struct restore_slowdown s = { "default", 11, 1100, 100 };

	for (int i = 0; i < PRESSURE_NR; i++) {
		h.pressure[i] = 100;
		h.pressure_known[i] = false;
	}
	h.memory_known = false;
	cr_expect_not(decide(&defaults, &h, NULL, false), "%s", reason);
	cr_expect(decide(&defaults, &h, &s, false));
	cr_expect_not_null(strstr(reason, "template default"), "%s", reason);
}

Test(decide, pressure_is_named_before_memory_and_restores)
{
	struct host_reading h = host(0);
	struct restore_slowdown s = { "default", 50, 5000, 100 };

	h.pressure[PRESSURE_IO] = 50;
	cr_expect(decide(&defaults, &h, &s, false));
	cr_expect_eq(strncmp(reason, "io pressure full avg10 50.0 %", 29), 0,
		     "%s", reason);
}

Test(retry_after, grows_with_the_overload_up_to_five_seconds)
{
	cr_expect_eq(admission_retry_after_s(0), 1);
	cr_expect_eq(admission_retry_after_s(9999), 1);
	cr_expect_eq(admission_retry_after_s(10000), 2);
	cr_expect_eq(admission_retry_after_s(35000), 4);
	cr_expect_eq(admission_retry_after_s(40000), 5);
	cr_expect_eq(admission_retry_after_s(3600e3), 5);
	cr_expect_eq(admission_retry_after_s(-5), 1, "a clock oddity");
}
