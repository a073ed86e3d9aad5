/* SPDX-License-Identifier: Apache-2.0 */
/*
 * report.h - the figures one thaw-bench run measured, and the files that
 * keep them: results.json for programs, results.md for people, and one PNG
 * plot per group of figures.
 *
 * A figure that could not be measured (no /dev/kvm, a peer that is not
 * installed, a run that failed) is still a row, with the reason, so a
 * report never silently has fewer figures than the run was asked for.
 *
 * Every report starts with the machine it ran on: the numbers mean little
 * without the cores, the memory and above all the kind of virtualisation
 * underneath (hardware VMX/SVM, PVM, or nested in an emulator).
 */
#ifndef THAW_BENCH_REPORT_H
#define THAW_BENCH_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "bench/stats.h"

struct machine {
	int cores;		    /* online CPUs */
	unsigned long long mem_mib; /* MemTotal */
	char cpu_model[128];	    /* /proc/cpuinfo "model name" */
	char kernel[128];	    /* uname -r */
	/*
	 * "PVM" (/sys/module/kvm_pvm exists), "VMX" or "SVM" (the cpuinfo
	 * flag), "KVM" (neither flag, e.g. another architecture), all with
	 * /dev/kvm openable; "none (no /dev/kvm)" or "none (/dev/kvm: why)";
	 * with THAW_EMULATED_HOST set in the environment: "SVM, nested in a
	 * QEMU-TCG-emulated host".
	 */
	char kvm_kind[96];
	char hostname[64];
	/* How the measured programs were built; "" when not said. */
	char build[96];
};

/* Fills @m from /proc, /sys, uname and /dev/kvm; "unknown" where unread. */
void machine_describe(struct machine *m);

struct report;

/* An empty report dated now; NULL on ENOMEM. */
struct report *report_new(void);
void report_free(struct report *r);
void report_set_machine(struct report *r, const struct machine *m);

/*
 * @group: short key for plots and sections ("handout", "restore", "boot",
 * "floor", "jail", "network", "first_exec", "memory", "density",
 * "sustained", "checkpoint", "fork", "rollback", "peers");
 * @name: human label ("warm pool, concurrency 10"); @unit: "ms", "MiB",
 * "clones", "restores/s", "x"; none of the three NULL.  @note may be NULL.
 * Everything is copied.
 * Figures keep the order they were added in, within their group.
 * 0 or -ENOMEM; report_add_value() also -EINVAL for a value not finite.
 */
int report_add_samples(struct report *r, const char *group, const char *name,
		       const char *unit, const struct samples *s,
		       const char *note);
int report_add_value(struct report *r, const char *group, const char *name,
		     const char *unit, double value, const char *note);
/* A figure that could not be measured, with the reason (@why). */
int report_add_failure(struct report *r, const char *group, const char *name,
		       const char *why);

/*
 * A line describing the machine and the date, then per group (in the order
 * groups first appeared) a heading and a table
 * | figure | N | P50 | P95 | P99 | max | unit | note |
 * where a single value shows in the P50 column with N = 1 and a failure
 * shows "not measured: why" as its note.
 */
void report_print_markdown(const struct report *r, FILE *out);

/*
 * Creates @dir (mkdir -p) and writes into it results.json (the machine, the
 * date in ISO-8601 UTC, every figure with its summary and raw samples),
 * results.md (the markdown above and the plots), and for each group with
 * samples GROUP.png, a CDF of each of its figures, drawn by gnuplot from
 * GROUP.dat with the script plots.gp (both kept, to redraw by hand).
 * GROUP is the group with characters other than [A-Za-z0-9_-] replaced.
 *
 * gnuplot missing or failing is not an error: results.json and results.md
 * then say that the plots were not made and why (gnuplot's own message is
 * kept in gnuplot.log).  Returns 0, or -1 with a message naming the path
 * in @err.
 */
int report_write(const struct report *r, const char *dir, char *err,
		 size_t errlen);

#endif
