// SPDX-License-Identifier: Apache-2.0
/*
 * bench_memory.c - what idle clones cost: memory per clone, and how many fit.
 *
 * Both fill one pool with idle clones and read the host while they sit
 * there.  Memory per clone is read three ways, since none alone is the
 * answer: each clone VMM's PSS and private pages (from smaps_rollup) and the
 * host's used-memory delta divided by the clones up.  Density fills until
 * something gives (the limit, no progress, a failed restore, or the host
 * down to a tenth of its memory) and reports what stopped it and whether
 * the daemon cleaned up after itself: above all the daemon's own
 * admission (pool/API.md), so the figure is the count it stopped at and
 * its reason, not the configured cap.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/clock.h"

/* ---- memory and density ------------------------------------------------- */

/* The clone VMMs running now: thaw-vmm processes restoring a snapshot. */
static int clone_vmms(pid_t *pids, int max)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (proc && (e = readdir(proc))) {
		char path[300], cmd[4096];
		long pid = strtol(e->d_name, NULL, 10);

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		size_t len = fread(cmd, 1, sizeof(cmd) - 1, f);
		fclose(f);
		for (size_t i = 0; i < len; i++)
			cmd[i] = cmd[i] ? cmd[i] : ' ';
		cmd[len] = '\0';
		if (strstr(cmd, "thaw-vmm") && strstr(cmd, "--restore")) {
			if (pids && n < max)
				pids[n] = (pid_t)pid;
			n++;
		}
	}
	if (proc)
		closedir(proc);
	return n;
}

static long used_kib(void)
{
	return bench_kib_field("/proc/meminfo", "MemTotal") -
	       bench_kib_field("/proc/meminfo", "MemAvailable");
}

/*
 * Fills @name's pool towards @want ready clones; stops when it has them,
 * when no clone was added for 60 s (saying the daemon stopped admitting,
 * and why, when /health says so), when the daemon reports a failed
 * restore, or when the host is down to a tenth of its memory.  Returns the
 * count ready, with @why saying what stopped it short.
 */
static long fill_pool(const struct thawd *d, const char *name, long want,
		      char *why, size_t len)
{
	struct thaw_client *c;
	struct thaw_template p = { 0 };
	long last = -1;
	double since = monotonic_ms();
	long total = bench_kib_field("/proc/meminfo", "MemTotal");

	why[0] = '\0';
	if (!(c = thawd_connect(d, why, len)))
		return 0;
	for (;;) {
		char err[512];
		double failures;

		if (thawd_pool(c, name, &p, err, sizeof(err))) {
			snprintf(why, len, "%s", err);
			break;
		}
		if (p.ready >= want)
			break;
		/* A pause in admission is not the end: it is once the
		 * pool has not grown for a while. */
		struct thaw_health health;
		bool admitting =
			thaw_client_health(c, &health, err, sizeof(err)) ||
			health.admitting;
		if (p.ready != last) {
			last = p.ready;
			since = monotonic_ms();
		}
		if (bench_kib_field("/proc/meminfo", "MemAvailable") <
		    total / 10) {
			snprintf(why, len,
				 "host memory low: under a tenth of %ld MiB "
				 "available",
				 total / 1024);
			break;
		}
		if (monotonic_ms() - since > 60e3) {
			if (admitting)
				snprintf(why, len, "no new clone for 60 s");
			else
				snprintf(why, len,
					 "the daemon stopped admitting: %s",
					 health.overload);
			break;
		}
		if (!thaw_client_metric(c, "thaw_restore_failures_total", name,
					&failures, err, sizeof(err)) &&
		    failures > 0) {
			char tail[600];

			thawd_process_log_tail(&d->proc, tail, sizeof(tail));
			snprintf(why, len,
				 "a restore failed; the daemon's log "
				 "ends: %s",
				 tail);
			break;
		}
		struct timespec pause = { 0, 200 * 1000000L };
		nanosleep(&pause, NULL);
	}
	thaw_client_close(c);
	return p.ready;
}

void bench_memory(struct bench *b)
{
	for (int i = 0; i < 3 && b->size->idle_clones[i]; i++) {
		long want = b->size->idle_clones[i];
		struct template_spec t = { .name = "idle",
					   .mem_mib = TEMPLATE_MEM_MIB,
					   .min_ready = (unsigned)want,
					   .max_total = (unsigned)want };
		char name[96], why[1024], text[512];
		const struct daemon_spec spec = { .max_sandboxes =
							  (unsigned)want + 8,
						  .admit_on_load = true };
		struct thawd d;

		snprintf(name, sizeof(name), "%ld idle clones", want);
		bench_progress("memory: %s", name);
		long before = used_kib();
		if (bench_start_daemon(b, &d, &t, 1, &spec, why, sizeof(why))) {
			bench_fail(b, "memory", name, why);
			continue;
		}
		long got = fill_pool(&d, "idle", want, why, sizeof(why));
		/* Let lazily touched pages settle before reading them. */
		sleep(2);
		pid_t *pids = calloc((size_t)want, sizeof(*pids));
		int n = pids ? clone_vmms(pids, (int)want) : 0;
		struct samples pss = { 0 }, priv = { 0 };
		for (int k = 0; k < n && k < want; k++) {
			char path[64];

			snprintf(path, sizeof(path), "/proc/%d/smaps_rollup",
				 (int)pids[k]);
			long p = bench_kib_field(path, "Pss");
			long clean = bench_kib_field(path, "Private_Clean");
			long dirty = bench_kib_field(path, "Private_Dirty");
			if (p >= 0)
				samples_add(&pss, p / 1024.0);
			if (clean >= 0 && dirty >= 0)
				samples_add(&priv, (clean + dirty) / 1024.0);
		}
		long delta = used_kib() - before;
		free(pids);
		bench_stop_daemon(&d);
		if (!got) {
			bench_fail(b, "memory", name,
				   why[0] ? why : "no clone");
			continue;
		}
		char label[128];
		bench_note(b, text, sizeof(text), "%ld of %ld clones up%s%s",
			   got, want, why[0] ? ": " : "", why);
		snprintf(label, sizeof(label), "%s: VMM PSS", name);
		report_add_samples(b->report, "memory", label, "MiB", &pss,
				   text);
		snprintf(label, sizeof(label), "%s: VMM private pages", name);
		report_add_samples(b->report, "memory", label, "MiB", &priv,
				   text);
		snprintf(label, sizeof(label),
			 "%s: host used-memory delta / clone", name);
		report_add_value(b->report, "memory", label, "MiB",
				 delta / 1024.0 / (double)got, text);
		samples_free(&pss);
		samples_free(&priv);
	}
}

void bench_density(struct bench *b)
{
	long want = b->size->density_max;
	struct template_spec t = { .name = "dense",
				   .mem_mib = TEMPLATE_MEM_MIB,
				   .min_ready = (unsigned)want,
				   .max_total = (unsigned)want,
				   .restore_parallel = 8 };
	char why[1024], text[1024];
	const char *name = "idle 256 MiB clones started";
	const struct daemon_spec spec = { .max_sandboxes = (unsigned)want,
					  .admit_on_load = true };
	struct thawd d;

	bench_progress("density: up to %ld idle clones", want);
	if (bench_start_daemon(b, &d, &t, 1, &spec, why, sizeof(why))) {
		bench_fail(b, "density", name, why);
		return;
	}
	long got = fill_pool(&d, "dense", want, why, sizeof(why));
	char err[256];
	int stopped = thawd_stop(&d, err, sizeof(err));
	int left = clone_vmms(NULL, 0);
	bench_note(b, text, sizeof(text),
		   "stopped by: %s; cleanup: %s, %d VMMs left",
		   why[0] ? why : "reached the limit", stopped ? err : "clean",
		   left);
	report_add_value(b->report, "density", name, "clones", (double)got,
			 text);
}
