// SPDX-License-Identifier: Apache-2.0
/*
 * admission.c - see admission.h: the parsers, restore times and the
 * decision, then the daemon's side of it.
 *
 * The reaper thread (pools.c) calls admission_update() on each of its
 * passes (every 100 ms at most); once a second that reads the three PSI
 * files and /proc/meminfo (a few hundred bytes each, outside the daemon's
 * lock), takes each template's restore slowdown under the lock and
 * decides.  PSI's avg10 is itself a 10 s average the kernel updates every
 * 2 s, so reading it more often would see nothing new.  A file that cannot
 * be read (a kernel without CONFIG_PSI, or booted with psi=0) is said once
 * in the log, and its signal left out: the others still count.
 *
 * A transition is logged (a warning with the reason when the daemon stops
 * admitting, info when it admits again); on resuming, the pool workers are
 * woken, since worker_needed() kept them waiting.
 */
#include "pool/daemon/daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

/* How often the host is read. */
#define ADMISSION_PERIOD_MS 1000.0
/* While overloaded, a limit counts for this share of itself. */
#define RESUME_SHARE 0.75
/* Retry-After: its least, its most, and the overload that adds a second. */
#define RETRY_AFTER_MIN_S 1
#define RETRY_AFTER_MAX_S 5
#define RETRY_AFTER_STEP_MS 10000.0

const struct pressure_source pressure_sources[PRESSURE_NR] = {
	/* Runnable tasks waiting for a CPU: "full" is not defined for the
	 * CPU at the host's level. */
	[PRESSURE_CPU] = { "cpu", "some" },
	/* Every task stalled: "some" also counts one task reclaiming page
	 * cache, which a busy host does all the time unharmed. */
	[PRESSURE_MEMORY] = { "memory", "full" },
	[PRESSURE_IO] = { "io", "full" },
};

/* ---- parsers ------------------------------------------------------------ */

/* The line after the one @s is on, or the text's end. */
static const char *next_line(const char *s)
{
	s += strcspn(s, "\n");
	return *s ? s + 1 : s;
}

int psi_parse(const char *text, const char *line, double *avg10)
{
	size_t n = strlen(line);

	for (const char *s = text; *s; s = next_line(s)) {
		const char *end = s + strcspn(s, "\n"), *v;
		char *after;

		if (strncmp(s, line, n) || s[n] != ' ')
			continue;
		v = strstr(s, " avg10=");
		if (!v || v >= end)
			return -EINVAL;
		errno = 0;
		*avg10 = strtod(v + 7, &after);
		if (errno || after == v + 7 ||
		    (*after != ' ' && after != end) || !isfinite(*avg10) ||
		    *avg10 < 0 || *avg10 > 100)
			return -EINVAL;
		return 0;
	}
	return -EINVAL;
}

/* The KiB of meminfo line @key ("MemTotal:"); false when it is not
 * there. */
static bool meminfo_value(const char *text, const char *key, uint64_t *kib)
{
	size_t n = strlen(key);

	for (const char *s = text; *s; s = next_line(s)) {
		char *after;

		if (strncmp(s, key, n))
			continue;
		s += n + strspn(s + n, " ");
		if (*s < '0' || *s > '9')
			return false;
		errno = 0;
		*kib = strtoull(s, &after, 10);
		return !errno && !strncmp(after, " kB", 3);
	}
	return false;
}

int meminfo_parse(const char *text, uint64_t *total_kib,
		  uint64_t *available_kib)
{
	if (!meminfo_value(text, "MemTotal:", total_kib) ||
	    !meminfo_value(text, "MemAvailable:", available_kib) || !*total_kib)
		return -EINVAL;
	return 0;
}

/* ---- restore times ------------------------------------------------------ */

void restore_latency_add(struct restore_latency *l, double ms, double now_ms)
{
	if (l->nr_first < RESTORE_SAMPLES)
		l->first_ms[l->nr_first++] = ms;
	l->last_ms[l->next] = ms;
	l->last_at_ms[l->next] = now_ms;
	l->next = (l->next + 1) % RESTORE_SAMPLES;
	if (l->nr_last < RESTORE_SAMPLES)
		l->nr_last++;
}

static double median(double *v, uint32_t n)
{
	for (uint32_t i = 1; i < n; i++)
		for (uint32_t j = i; j > 0 && v[j - 1] > v[j]; j--) {
			double t = v[j];

			v[j] = v[j - 1];
			v[j - 1] = t;
		}
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void restore_latency_slowdown(const struct restore_latency *l,
			      const char *template, double now_ms,
			      struct restore_slowdown *out)
{
	double first[RESTORE_SAMPLES], recent[RESTORE_SAMPLES];
	uint32_t nr_recent = 0;

	*out = (struct restore_slowdown){ .template = template };
	for (uint32_t i = 0; i < l->nr_last; i++)
		if (now_ms - l->last_at_ms[i] <= RESTORE_RECENT_MS)
			recent[nr_recent++] = l->last_ms[i];
	if (l->nr_first < RESTORE_SAMPLES || nr_recent < RESTORE_SAMPLES / 2)
		return;
	memcpy(first, l->first_ms, sizeof(first));
	out->first_ms = median(first, RESTORE_SAMPLES);
	out->recent_ms = median(recent, nr_recent);
	if (out->first_ms > 0)
		out->factor = out->recent_ms / out->first_ms;
}

/* ---- the decision ------------------------------------------------------- */

bool admission_decide(const struct admission_limits *lim,
		      const struct host_reading *host,
		      const struct restore_slowdown *slowdown, bool overloaded,
		      char *reason, size_t len)
{
	double share = overloaded ? RESUME_SHARE : 1;
	const char *holding = overloaded ? ", 3/4 of the limit, under which "
					   "admission resumes"
					 : "";

	for (int i = 0; i < PRESSURE_NR; i++) {
		double limit = lim->pressure_percent[i] * share;

		if (!lim->pressure_percent[i] || !host->pressure_known[i] ||
		    host->pressure[i] < limit)
			continue;
		snprintf(reason, len, "%s pressure %s avg10 %.1f %% >= %g %%%s",
			 pressure_sources[i].resource, pressure_sources[i].line,
			 host->pressure[i], limit, holding);
		return true;
	}
	if (lim->min_available_percent && host->memory_known) {
		double total_mib = host->mem_total_kib / 1024.0;
		/* Resuming wants 4/3 of the floor, but never more than
		 * halfway from it to all of memory: a floor of 75 % would
		 * otherwise never be left. */
		double percent = lim->min_available_percent;
		double resume = percent / share;
		if (resume > percent + (100 - percent) / 2)
			resume = percent + (100 - percent) / 2;
		double floor_mib = total_mib * resume / 100;

		if (host->mem_available_kib / 1024.0 < floor_mib) {
			snprintf(
				reason, len,
				"memory available %.0f MiB < %.0f MiB (%.3g %% "
				"of %.0f MiB%s)",
				host->mem_available_kib / 1024.0, floor_mib,
				resume, total_mib,
				overloaded ? ", above which admission resumes"
					   : "");
			return true;
		}
	}
	if (lim->restore_slowdown && slowdown && slowdown->factor &&
	    slowdown->factor >= lim->restore_slowdown * share) {
		snprintf(
			reason, len,
			"template %s: restores take %.1fx as long as its first "
			"ones (median %.0f ms, against %.0f ms) >= %gx%s",
			slowdown->template, slowdown->factor,
			slowdown->recent_ms, slowdown->first_ms,
			lim->restore_slowdown * share, holding);
		return true;
	}
	if (len)
		reason[0] = '\0';
	return false;
}

uint32_t admission_retry_after_s(double overloaded_ms)
{
	double s = RETRY_AFTER_MIN_S + overloaded_ms / RETRY_AFTER_STEP_MS;

	if (!(s >= RETRY_AFTER_MIN_S)) /* a negative or NaN duration too */
		return RETRY_AFTER_MIN_S;
	return s < RETRY_AFTER_MAX_S ? (uint32_t)s : RETRY_AFTER_MAX_S;
}

/* ---- the daemon's side -------------------------------------------------- */

/* The start of @path, NUL-terminated, in @buf; 0 or -errno. */
static int read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, len - 1);
	while (n < 0 && errno == EINTR);
	int err = errno;
	close(fd);
	if (n < 0)
		return -err;
	buf[n] = '\0';
	return 0;
}

/* What reading or parsing @path failed with, for the log. */
static const char *read_failure(int ret)
{
	return ret == -EINVAL ? "not in the expected format" : strerror(-ret);
}

/* The watched signals of the host, each read at once (PSI and meminfo
 * are a few hundred bytes); no lock held. */
static void read_host(struct admission *a, struct host_reading *h)
{
	/* /proc/meminfo's two lines come first; 4 KiB holds them. */
	char text[4096], path[64];
	int ret;

	memset(h, 0, sizeof(*h));
	for (int i = 0; i < PRESSURE_NR; i++) {
		if (!a->limits.pressure_percent[i])
			continue;
		snprintf(path, sizeof(path), "/proc/pressure/%s",
			 pressure_sources[i].resource);
		ret = read_text(path, text, sizeof(text));
		if (!ret)
			ret = psi_parse(text, pressure_sources[i].line,
					&h->pressure[i]);
		h->pressure_known[i] = !ret;
		if (ret && !a->pressure_unwatched) {
			a->pressure_unwatched = true;
			log_warning(
				"host pressure is not watched: %s: %s (a kernel "
				"without CONFIG_PSI, or booted with psi=0); "
				"admission relies on memory and restore times",
				path, read_failure(ret));
		}
	}
	if (!a->limits.min_available_percent)
		return;
	ret = read_text("/proc/meminfo", text, sizeof(text));
	if (!ret)
		ret = meminfo_parse(text, &h->mem_total_kib,
				    &h->mem_available_kib);
	h->memory_known = !ret;
	if (ret && !a->memory_unwatched) {
		a->memory_unwatched = true;
		log_warning("available memory is not watched: /proc/meminfo: "
			    "%s",
			    read_failure(ret));
	}
}

/* The template whose restores slowed down most; call locked. */
static void slowest_template(const struct daemon *d, double now_ms,
			     struct restore_slowdown *slowest)
{
	*slowest = (struct restore_slowdown){ 0 };
	for (size_t i = 0; i < d->nr_pools; i++) {
		struct restore_slowdown s;

		restore_latency_slowdown(&d->pools[i].latency,
					 d->pools[i].t->name, now_ms, &s);
		if (s.factor > slowest->factor)
			*slowest = s;
	}
}

static void evaluate(struct daemon *d, double now_ms)
{
	struct admission *a = &d->admission;
	struct restore_slowdown slowest;
	struct host_reading host;
	char reason[sizeof(a->reason)];

	a->read_ms = now_ms;
	read_host(a, &host);
	pthread_mutex_lock(&d->lock);
	slowest_template(d, now_ms, &slowest);
	bool was_overloaded = !a->admitting;
	bool overloaded =
		admission_decide(&a->limits, &host, &slowest, was_overloaded,
				 reason, sizeof(reason));
	a->host = host;
	if (overloaded) {
		memcpy(a->reason, reason, sizeof(a->reason));
		if (!was_overloaded) {
			a->admitting = false;
			a->since_ms = now_ms;
			log_warning("not admitting new sandboxes: the host is "
				    "overloaded: %s",
				    reason);
			pools_wake_waiters(d);
		}
	} else if (was_overloaded) {
		a->admitting = true;
		a->reason[0] = '\0';
		log_info("admitting new sandboxes again, after %.1f s "
			 "overloaded",
			 (now_ms - a->since_ms) / 1e3);
		/* worker_needed() held them back. */
		pthread_cond_broadcast(&d->work);
	}
	pthread_mutex_unlock(&d->lock);
}

void admission_start(struct daemon *d)
{
	const struct daemon_config *c = &d->cfg;
	struct admission *a = &d->admission;

	a->limits = (struct admission_limits){
		.pressure_percent = { [PRESSURE_CPU] = c->admit_cpu_pressure,
				      [PRESSURE_MEMORY] =
					      c->admit_memory_pressure,
				      [PRESSURE_IO] = c->admit_io_pressure },
		.min_available_percent = c->admit_min_available_percent,
		.restore_slowdown = c->admit_restore_slowdown,
	};
	a->admitting = true;
	/* Before any worker runs: an overloaded host gets no first fill. */
	evaluate(d, monotonic_ms());
}

void admission_update(struct daemon *d)
{
	double now_ms = monotonic_ms();

	if (now_ms - d->admission.read_ms >= ADMISSION_PERIOD_MS)
		evaluate(d, now_ms);
}
