/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report_internal.h - what report.c, plots.c and machine.c share, and
 * nothing thaw-bench itself should reach (report.h is its interface).
 *
 * The plots read the report's figures directly, as the markdown and JSON
 * writers do, rather than through accessors: the three are one library,
 * split by concern, not separate layers.  report.c keeps the file
 * helpers (paths, creating and closing output files, copy_text) all of
 * them use; plots.c keeps what names and finds a group's plot, which
 * results.md and results.json cite.
 */
#ifndef THAW_BENCH_REPORT_INTERNAL_H
#define THAW_BENCH_REPORT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>

#include "bench/report.h"

#define PLOT_NAME_MAX 64 /* of a group's file name, without extension */

enum figure_kind { FIGURE_SAMPLES, FIGURE_VALUE, FIGURE_FAILED };

struct figure {
	enum figure_kind kind;
	char *group, *name;
	char *unit;	/* NULL for a failure */
	char *note;	/* NULL when none */
	char *why;	/* a failure's reason, else NULL */
	double *values; /* summary.n of them, as measured */
	struct summary summary;
};

struct report {
	bool has_machine;
	struct machine machine;
	time_t date;
	struct figure *figures;
	size_t n, cap;
};

/* What became of the plots, for results.md and results.json. */
struct plots {
	bool wanted; /* some group has samples */
	bool made;
	char why_not[512];
};

/* report.c's helpers, for plots.c and machine.c (documented there). */
void copy_text(char *dst, size_t size, const char *src);
bool join_path(char *path, const char *dir, const char *name);
FILE *create_file(const char *dir, const char *name, char *path, char *err,
		  size_t errlen);
int close_file(FILE *f, const char *path, char *err, size_t errlen);
bool first_of_group(const struct report *r, size_t i);

/*
 * plots.c's names of groups' plots, for results.md and results.json:
 * whether the group of figure @i has a plot, and its file name without
 * extension, into @out (PLOT_NAME_MAX + 24).
 */
bool group_has_samples(const struct report *r, size_t i);
void plot_name(const struct report *r, size_t i, char *out);

/*
 * Writes the data files and plots.gp of every group with samples into
 * @dir and runs gnuplot there; fills @plots.  -1 with @err only when a
 * file cannot be written: gnuplot missing or failing is in @plots.
 */
int make_plots(const struct report *r, const char *dir, struct plots *plots,
	       char *err, size_t errlen);

#endif
