/* SPDX-License-Identifier: Apache-2.0 */
/*
 * stats.h - the latencies (or sizes, or rates) one benchmark figure
 * collects, and their summary.
 *
 * Percentiles are nearest-rank: p is the smallest sample that at least p%
 * of the samples do not exceed.  Every percentile is then a value that was
 * actually measured, never an interpolation between two, and the p99 of a
 * hundred samples is the second largest rather than a blend of the two
 * largest; with few samples the tail is reported as it was, not smoothed.
 */
#ifndef THAW_BENCH_STATS_H
#define THAW_BENCH_STATS_H

#include <stddef.h>

/* A growing array; zero-initialise it, free it with samples_free(). */
struct samples {
	double *v;
	size_t n, cap;
};

/*
 * Appends @v.  0, -ENOMEM, or -EINVAL when @v is not finite (a NaN would
 * have no place in the order percentiles are read from).
 */
int samples_add(struct samples *s, double v);

/* Frees the array and leaves @s empty, ready for reuse. */
void samples_free(struct samples *s);

struct summary {
	size_t n;
	double min, mean, p50, p95, p99, max;
};

/*
 * Nearest-rank percentiles over a sorted copy; n == 0 gives all zeros.
 * Does not modify @s.  0 or -ENOMEM (the copy).
 */
int samples_summarize(const struct samples *s, struct summary *out);

/* A copy of the @n values @v in ascending order, to free(); NULL on ENOMEM. */
double *sorted_copy(const double *v, size_t n);

#endif
