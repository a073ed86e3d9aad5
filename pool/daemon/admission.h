/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admission.h - whether thawd admits new sandboxes: it stops starting
 * restores, and refuses a create that would need one, while its host is
 * overloaded, before the sandboxes already running suffer (measured: with
 * min_ready = 2000 on two cores, 959 clones drove the load average to 1338,
 * guests printed RCU stalls and restores timed out).
 *
 * Three signals, each with a [daemon] admit_* limit (0 turns it off):
 *
 *	pressure	the kernel's PSI (/proc/pressure/): the share of the
 *			last 10 s (avg10) in which tasks waited for the CPU
 *			("some"), or in which every task waited for memory or
 *			for I/O ("full")
 *	memory		MemAvailable (/proc/meminfo) under a share of MemTotal
 *	restore times	a template's recent restores (the median of its last
 *			RESTORE_SAMPLES, within RESTORE_RECENT_MS) this many
 *			times slower than its first RESTORE_SAMPLES since the
 *			daemon started: what guests feel, where PSI says what
 *			the host feels
 *
 * Hysteresis: the daemon stops admitting when a signal reaches its limit,
 * and admits again only once every signal is back below 3/4 of its limit
 * (memory: above 4/3 of its floor), so admission does not flap every time
 * a reading crosses a line.  Restore times age out: a refusing daemon
 * starts no restores, so its slow samples would otherwise hold it forever.
 *
 * The parts are pure functions, so a test feeds them text and readings:
 * psi_parse() and meminfo_parse() over a file's text, restore_latency_*()
 * over samples, admission_decide() over readings, the previous verdict and
 * the limits.  admission.c also wires them to /proc and to the daemon
 * (daemon.h: admission_start(), admission_update()).
 *
 * Errors: the parsers return 0 or -EINVAL (errbuf.h's contract).
 */
#ifndef THAW_POOL_DAEMON_ADMISSION_H
#define THAW_POOL_DAEMON_ADMISSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum pressure_resource {
	PRESSURE_CPU,
	PRESSURE_MEMORY,
	PRESSURE_IO,
	PRESSURE_NR,
};

/* The PSI file and line watched for each resource. */
struct pressure_source {
	const char *resource; /* /proc/pressure/<resource> */
	const char *line;     /* "some" or "full" */
};
extern const struct pressure_source pressure_sources[PRESSURE_NR];

/* avg10 of the @line ("some" or "full") of a /proc/pressure file's @text,
 * in percent; 0 or -EINVAL. */
int psi_parse(const char *text, const char *line, double *avg10);

/* MemTotal and MemAvailable of /proc/meminfo's @text, in KiB; 0 or
 * -EINVAL. */
int meminfo_parse(const char *text, uint64_t *total_kib,
		  uint64_t *available_kib);

/* The limits, [daemon]'s admit_* keys; 0 turns a signal off. */
struct admission_limits {
	uint32_t pressure_percent[PRESSURE_NR];
	uint32_t min_available_percent; /* of MemTotal */
	uint32_t restore_slowdown;	/* times the first restores' median */
};

/* One look at the host; what could not be read is not known. */
struct host_reading {
	bool pressure_known[PRESSURE_NR];
	double pressure[PRESSURE_NR]; /* avg10, percent */
	bool memory_known;
	uint64_t mem_total_kib, mem_available_kib;
};

/* How many restores make a median, and how long one counts as recent. */
#define RESTORE_SAMPLES 8
#define RESTORE_RECENT_MS 30000.0

/* A template's restore times: its first ones, and a ring of its last. */
struct restore_latency {
	double first_ms[RESTORE_SAMPLES];
	uint32_t nr_first;
	double last_ms[RESTORE_SAMPLES];
	double last_at_ms[RESTORE_SAMPLES]; /* when each ended, monotonic */
	uint32_t nr_last, next;		    /* next: the ring's oldest */
};

/* A template's recent restores against its first ones. */
struct restore_slowdown {
	const char *template;
	double factor; /* recent_ms / first_ms; 0: not known */
	double recent_ms, first_ms;
};

/* Records a restore of @ms that ended at @now_ms (monotonic). */
void restore_latency_add(struct restore_latency *l, double ms, double now_ms);

/*
 * @l's slowdown at @now_ms: known once it has RESTORE_SAMPLES first
 * restores and, of its last ones, at least half as many within
 * RESTORE_RECENT_MS (fewer say little).  @template is copied into @out.
 */
void restore_latency_slowdown(const struct restore_latency *l,
			      const char *template, double now_ms,
			      struct restore_slowdown *out);

/*
 * Whether the host is overloaded, from @host and the slowest template's
 * @slowdown (NULL: none), against @lim; @overloaded is the previous
 * verdict, which lowers the limits to 3/4 (raises the memory floor to
 * 4/3).  When overloaded, @reason says which signal and how far (the first
 * found of pressure, memory, restore times); else it is "".
 */
bool admission_decide(const struct admission_limits *lim,
		      const struct host_reading *host,
		      const struct restore_slowdown *slowdown, bool overloaded,
		      char *reason, size_t len);

/*
 * The Retry-After of a refusal, in seconds, after @overloaded_ms of
 * overload: 1 at first, a second more per 10 s it lasts, at most 5 - a
 * short spell tends to pass soon, and clients of a long one need not
 * poll every second.
 */
uint32_t admission_retry_after_s(double overloaded_ms);

/* The daemon's admission state, under daemon.lock unless said. */
struct admission {
	struct admission_limits limits; /* constant once started */
	bool admitting;
	char reason[256];	  /* while not admitting: why */
	double since_ms;	  /* monotonic: when it stopped admitting */
	struct host_reading host; /* the last reading */
	/* the reaper's alone: */
	double read_ms; /* monotonic: the last reading's */
	bool pressure_unwatched, memory_unwatched; /* said so in the log */
};

#endif
