/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench.h - what thaw-bench's scenarios share: the run's settings, how a
 * figure is noted or failed, a daemon's lifetime, running a program.
 *
 * thaw-bench.c reads the command line and calls the scenarios in a fixed
 * order; each scenario lives with its kin (handouts.c, startup.c, bench_jail.c,
 * network.c, bench_checkpoints.c, bench_memory.c, peers.c), gets the struct
 * bench of the run, and adds its figures to b->report itself.  A scenario never
 * stops the run: what it cannot measure it reports through bench_fail(), with
 * the reason, and returns.
 */
#ifndef THAW_BENCH_BENCH_H
#define THAW_BENCH_BENCH_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "bench/report.h"
#include "bench/stats.h"
#include "bench/thawd_client.h"

#define TEMPLATE_MEM_MIB 256

/* How much of each scenario to run. */
struct sizes {
	int concurrency[3];
	int handouts;
	int boots;
	int floor_runs;
	int first_execs;
	int idle_clones[3];
	int density_max;
	int sustained_s;
	int peer_runs;
	int transfers;	   /* guest -> host TCP transfers */
	int transfer_mib;  /* each; the guest holds it twice */
	int round_trips;   /* TCP echo round trips */
	int policy_writes; /* POST /sandboxes/{id}/network, each kind */
	int dirty_mib[3];  /* written by the guest before a checkpoint */
	int checkpoints;   /* per dirty size */
	int forks[3];	   /* sandboxes per fork of one checkpoint */
	int fork_rounds;   /* per fork size */
	int rollbacks;
	int chain_restores; /* per level of a chain of checkpoints */
	int e2b_creates;    /* per concurrency, through each API */
};

/* One run: the programs and guest it drives, its sizes, its report. */
struct bench {
	const char *thaw;
	const char *floor;
	const char *kernel;
	const char *initrd;
	const char *e2b_dir; /* the e2b SDK installed, and e2b_create.mjs */
	char state_dir[PATH_MAX];
	const struct sizes *size;
	const char *scaled; /* why sizes are small, or "" */
	struct report *report;
	int failures;	   /* figures not measured */
	char snapshot[64]; /* the template's, once a daemon built it */
};

/* A figure's note: @fmt's text, then the size's reason when scaled. */
void bench_note(const struct bench *b, char *out, size_t len, const char *fmt,
		...) __attribute__((format(printf, 4, 5)));

/* "thaw-bench: " and @fmt's text on stderr: what the run is doing. */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A figure not measured: said on stderr and written in the report. */
void bench_fail(struct bench *b, const char *group, const char *name,
		const char *why);

/*
 * thawd on the run's guest with templates @t[@n] and @spec's settings (see
 * thawd_start()); the first daemon started also learns the template's
 * snapshot id into b->snapshot.  0, or -1 with @err saying why.
 */
int bench_start_daemon(struct bench *b, struct thawd *d,
		       const struct template_spec *t, size_t n,
		       const struct daemon_spec *spec, char *err,
		       size_t errlen);

/* Stops @d; a failure to stop is only said, the figures stand. */
void bench_stop_daemon(struct thawd *d);

/*
 * Runs @argv with its descriptor @fd (1 or 2) read into @out (NUL-terminated;
 * what does not fit is read and dropped), the other one inherited.  Returns
 * its exit status (128 + the signal that killed it), or -1 when it could not
 * be run.
 */
int bench_run_capture(char *const argv[], int fd, char *out, size_t outlen);

/* A "Key:   123 kB" field of @path (/proc/meminfo, smaps_rollup), in KiB;
 * -1 when missing. */
long bench_kib_field(const char *path, const char *key);

/*
 * The daemon's restores of handed-out clones: each one's restore_ms, and
 * the same split where its guest starts running (pool/API.md's "restore").
 * Zero-initialise; bench_restore_samples_free() empties it.
 */
struct restore_samples {
	struct samples total; /* VMM start -> agent answered, identity pushed */
	struct samples host;  /* VMM start (page-in in it), state restore */
	struct samples guest; /* state restored -> agent answered, identity */
	struct samples prefetched_pages;
	struct samples network; /* its network, before the VMM (0: none) */
};

void bench_restore_samples_add(struct restore_samples *r,
			       const struct handout *h);
void bench_restore_samples_free(struct restore_samples *r);

/*
 * @r as three figures of @group: @label (the whole restore), then its host
 * side and its guest side, each note saying what it covers, then @context.
 */
void bench_report_restores(struct bench *b, const char *group,
			   const char *label, const struct restore_samples *r,
			   const char *context);

/* What a handout waits for once its sandbox is handed out. */
enum handout_until {
	UNTIL_PING,	 /* its agent answered a ping (thawd_handout()) */
	UNTIL_EXEC_TRUE, /* `true` ran in it (thawd_create_exec()) */
};

/*
 * @handouts handouts of @template, @concurrency at a time: each round waits
 * for @warm clones ready (0: for the pool to be idle), then starts its
 * requests together, then releases what it got.  @s gets each handout's
 * time, up to @until, @restores the daemon's restore of each clone handed
 * out.  The first failure ends the figure, with its reason.
 */
int bench_handout_rounds(const struct thawd *d, const char *template,
			 int concurrency, int handouts, long warm,
			 enum handout_until until, struct samples *s,
			 struct restore_samples *restores, char *err,
			 size_t errlen);

/*
 * The scenarios, each adding its figures (or failures) to b->report.  A
 * @restores of bench_handouts() on demand gets the daemon's restores at
 * concurrency 1, which bench_boot() (their totals) and bench_floor() (their
 * host sides) compare with.
 */
void bench_handouts(struct bench *b, bool warm,
		    struct restore_samples *restores);
void bench_sustained(struct bench *b);
void bench_boot(struct bench *b, const struct restore_samples *restore);
void bench_floor(struct bench *b, const struct restore_samples *restore);
void bench_jail(struct bench *b);
void bench_network(struct bench *b);
void bench_checkpoints(struct bench *b);
void bench_first_exec(struct bench *b);
void bench_memory(struct bench *b);
void bench_density(struct bench *b);
void bench_peers(struct bench *b);
void bench_e2b(struct bench *b);

#endif
