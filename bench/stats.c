// SPDX-License-Identifier: Apache-2.0
/*
 * stats.c - see stats.h.
 *
 * The rank of percentile p among n samples is ceil(p * n / 100), computed
 * on integers: p / 100 has no exact binary fraction, and a product rounded
 * up by one ulp (0.07 * 100 is 7.000000000000001) would have its ceiling
 * land on the next sample.
 */
#include "bench/stats.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define SAMPLES_FIRST_CAP 64

int samples_add(struct samples *s, double v)
{
	if (!isfinite(v))
		return -EINVAL;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : SAMPLES_FIRST_CAP;
		double *grown;

		if (cap > SIZE_MAX / sizeof(*grown))
			return -ENOMEM;
		grown = realloc(s->v, cap * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		s->v = grown;
		s->cap = cap;
	}
	s->v[s->n++] = v;
	return 0;
}

void samples_free(struct samples *s)
{
	free(s->v);
	s->v = NULL;
	s->n = 0;
	s->cap = 0;
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double *sorted_copy(const double *v, size_t n)
{
	double *sorted = malloc((n ? n : 1) * sizeof(*sorted));

	if (sorted) {
		memcpy(sorted, v, n * sizeof(*sorted));
		qsort(sorted, n, sizeof(*sorted), compare_doubles);
	}
	return sorted;
}

/* Nearest-rank percentile @percent of the @n ascending values @sorted. */
static double percentile(const double *sorted, size_t n, unsigned percent)
{
	size_t rank = (n * percent + 99) / 100;

	return sorted[rank ? rank - 1 : 0];
}

int samples_summarize(const struct samples *s, struct summary *out)
{
	double *sorted, sum = 0;

	memset(out, 0, sizeof(*out));
	if (s->n == 0)
		return 0;
	sorted = sorted_copy(s->v, s->n);
	if (!sorted)
		return -ENOMEM;
	/* Smallest first, so the small values are not lost against a large
	 * running sum. */
	for (size_t i = 0; i < s->n; i++)
		sum += sorted[i];
	out->n = s->n;
	out->min = sorted[0];
	out->max = sorted[s->n - 1];
	out->mean = sum / (double)s->n;
	out->p50 = percentile(sorted, s->n, 50);
	out->p95 = percentile(sorted, s->n, 95);
	out->p99 = percentile(sorted, s->n, 99);
	free(sorted);
	return 0;
}
