// SPDX-License-Identifier: Apache-2.0
/*
 * thaw-bench.c - thaw's numbers, measured the way users meet them.
 *
 * `thaw-bench all` (or one scenario by name) starts thawd on the guest it is
 * given and drives it over its API like a client: handouts from a warm pool
 * and restores on demand at several concurrencies, the first exec after a
 * handout with lazy and prefetched memory and a dropped or warm page cache,
 * memory per idle clone, density until something gives, sustained restores.
 * Beside those: cold boots of the same guest (`thaw run`), the VMM's floor
 * (thaw-bench-floor: KVM objects and state without running the guest), and
 * peers (gVisor, bubblewrap) running the same `true`.  Every figure keeps its
 * raw samples; bench/report.c turns them into results.json, a markdown table
 * and plots.  A scenario that fails is a row saying why, never a silent gap,
 * and never a failed build: the bench exits 0 once it wrote its report.
 *
 * Sizes: the (500 handouts per concurrency, up to 1000 idle clones,
 * density to 2000) on a real KVM host; --quick, and nested-kvm.sh's emulated
 * host (THAW_EMULATED_HOST), scale them down, and the report says so.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "peers.h"
#include "report.h"
#include "stats.h"
#include "thawd_client.h"

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
};

static const struct sizes full = {
	.concurrency = { 1, 10, 50 },
	.handouts = 500,
	.boots = 5,
	.floor_runs = 100,
	.first_execs = 20,
	.idle_clones = { 10, 100, 1000 },
	.density_max = 2000,
	.sustained_s = 60,
	.peer_runs = 50,
};

/*
 * --quick, and nested-kvm.sh's emulated host, whose own kernel crashed
 * with ~40 guests (see test_daemon) and whose timings are an emulator's.
 */
static const struct sizes small = {
	.concurrency = { 1, 4, 8 },
	.handouts = 40,
	.boots = 3,
	.floor_runs = 20,
	.first_execs = 5,
	.idle_clones = { 10, 0, 0 },
	.density_max = 24,
	.sustained_s = 20,
	.peer_runs = 10,
};

struct bench {
	const char *thaw;
	const char *floor;
	const char *kernel;
	const char *initrd;
	char state_dir[PATH_MAX];
	const struct sizes *size;
	const char *scaled; /* why sizes are small, or "" */
	struct report *report;
	char snapshot[64]; /* the template's, once a daemon built it */
};

static void note(const struct bench *b, char *out, size_t len, const char *fmt,
		 ...) __attribute__((format(printf, 4, 5)));

/* A figure's note: @fmt's text, then the size's reason when scaled. */
static void note(const struct bench *b, char *out, size_t len, const char *fmt,
		 ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < len && b->scaled[0])
		snprintf(out + n, len - (size_t)n, "%s%s", n ? "; " : "",
			 b->scaled);
}

static void progress(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

static void progress(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "thaw-bench: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void fail(struct bench *b, const char *group, const char *name,
		 const char *why)
{
	progress("%s, %s: not measured: %s", group, name, why);
	report_add_failure(b->report, group, name, why);
}

static int start_daemon(struct bench *b, struct thawd *d,
			const struct template_spec *t, size_t n,
			unsigned max_sandboxes, char *err, size_t errlen)
{
	if (thawd_start(d, b->thaw, b->state_dir, b->kernel, b->initrd, t, n,
			max_sandboxes, err, errlen))
		return -1;
	if (!b->snapshot[0]) {
		struct thaw_client *c = thawd_connect(d, err, errlen);
		struct thaw_template p;

		if (c && !thawd_pool(c, t[0].name, &p, err, errlen))
			snprintf(b->snapshot, sizeof(b->snapshot), "%s",
				 p.snapshot);
		thaw_client_close(c);
	}
	return 0;
}

static void stop_daemon(struct thawd *d)
{
	char err[256];

	if (thawd_stop(d, err, sizeof(err)))
		progress("%s", err);
}

/* ---- handouts: warm pool and on demand ---------------------------------- */

struct round {
	pthread_barrier_t *go;
	const struct thawd *d;
	const char *template;
	struct handout got;
	char err[512];
};

static void *handout_once(void *arg)
{
	struct round *r = arg;
	struct thaw_client *c;

	r->got.id[0] = r->err[0] = '\0';
	c = thawd_connect(r->d, r->err, sizeof(r->err));
	pthread_barrier_wait(r->go);
	if (c &&
	    thawd_handout(c, r->template, &r->got, r->err, sizeof(r->err)) &&
	    !r->err[0])
		snprintf(r->err, sizeof(r->err), "handout failed");
	thaw_client_close(c);
	return NULL;
}

/*
 * @handouts handouts of @template, @concurrency at a time: each round waits
 * for @warm clones ready (0: for the pool to be idle), then starts its
 * requests together, then releases what it got.  @s gets each handout's
 * time, @restores the daemon's restore time of each clone handed out.  The
 * first failure ends the figure, with its reason.
 */
static int handout_rounds(const struct thawd *d, const char *template,
			  int concurrency, int handouts, long warm,
			  struct samples *s, struct samples *restores,
			  char *err, size_t errlen)
{
	struct round *r = calloc((size_t)concurrency, sizeof(*r));
	pthread_t *threads = calloc((size_t)concurrency, sizeof(*threads));
	pthread_barrier_t go;
	struct thaw_client *c;
	int ret = 0;

	if (!r || !threads) {
		free(r);
		free(threads);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!(c = thawd_connect(d, err, errlen)))
		ret = -1;
	pthread_barrier_init(&go, NULL, (unsigned)concurrency);
	for (int done = 0; done < handouts && !ret; done += concurrency) {
		if (thawd_wait_ready(c, template, warm, 600, err, errlen)) {
			ret = -1;
			break;
		}
		for (int i = 0; i < concurrency; i++) {
			r[i] = (struct round){ .go = &go,
					       .d = d,
					       .template = template };
			pthread_create(&threads[i], NULL, handout_once, &r[i]);
		}
		for (int i = 0; i < concurrency; i++)
			pthread_join(threads[i], NULL);
		for (int i = 0; i < concurrency; i++) {
			if (r[i].err[0] && !ret) {
				snprintf(err, errlen, "after %zu handouts: %s",
					 s->n, r[i].err);
				ret = -1;
			} else if (!r[i].err[0]) {
				samples_add(s, r[i].got.ms);
				samples_add(restores, r[i].got.restore_ms);
			}
			if (r[i].got.id[0])
				thaw_client_delete(c, r[i].got.id, r[i].err,
						   sizeof(r[i].err));
		}
	}
	pthread_barrier_destroy(&go);
	thaw_client_close(c);
	free(r);
	free(threads);
	return ret;
}

/*
 * Handouts from a warm pool (@warm), or restored on demand; for the latter
 * @restores gets the daemon's restore times at concurrency 1, which the
 * cold boot and the floor are compared with.
 */
static void bench_handouts(struct bench *b, bool warm, struct samples *restores)
{
	const char *group = warm ? "handout" : "restore";

	for (int i = 0; i < 3; i++) {
		int n = b->size->concurrency[i];
		struct template_spec t = {
			.name = "bench",
			.mem_mib = TEMPLATE_MEM_MIB,
			.min_ready = warm ? (unsigned)n : 0,
			.max_total = (unsigned)n * 2,
		};
		char name[96], why[1024], text[1024];
		struct samples s = { 0 }, daemon_restores = { 0 };
		struct thawd d;

		snprintf(name, sizeof(name), "%s, concurrency %d",
			 warm ? "warm pool" : "on demand (pool empty)", n);
		progress("%s: %s, %d handouts", group, name, b->size->handouts);
		if (start_daemon(b, &d, &t, 1, (unsigned)n * 2 + 8, why,
				 sizeof(why))) {
			fail(b, group, name, why);
			continue;
		}
		int ret = handout_rounds(&d, "bench", n, b->size->handouts,
					 warm ? n : 0, &s, &daemon_restores,
					 why, sizeof(why));
		stop_daemon(&d);
		if (ret && !s.n) {
			fail(b, group, name, why);
		} else {
			note(b, text, sizeof(text),
			     "create request sent -> agent answered a ping%s%s",
			     ret ? "; stopped early: " : "", ret ? why : "");
			report_add_samples(b->report, group, name, "ms", &s,
					   text);
		}
		if (!warm && daemon_restores.n) {
			char label[128];

			snprintf(label, sizeof(label),
				 "restore in the daemon, concurrency %d", n);
			note(b, text, sizeof(text),
			     "restore_ms of the handouts above: VMM start -> "
			     "agent answered");
			report_add_samples(b->report, group, label, "ms",
					   &daemon_restores, text);
		}
		for (size_t k = 0; !warm && !i && k < daemon_restores.n; k++)
			samples_add(restores, daemon_restores.v[k]);
		samples_free(&s);
		samples_free(&daemon_restores);
	}
}

/* ---- cold boot ----------------------------------------------------------- */

/*
 * Runs @argv with its descriptor @fd (1 or 2) read into @out (NUL-terminated;
 * what does not fit is read and dropped), the other one inherited.  Returns
 * its exit status (128 + the signal that killed it), or -1 when it could not
 * be run.
 */
static int run_capture(char *const argv[], int fd, char *out, size_t outlen)
{
	int pipefd[2];

	out[0] = '\0';
	if (pipe(pipefd))
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -1;
	}
	if (!pid) {
		dup2(pipefd[1], fd);
		close(pipefd[0]);
		execv(argv[0], argv);
		fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	size_t len = 0;
	ssize_t got;
	char sink[4096];
	while ((got = read(pipefd[0], len + 1 < outlen ? out + len : sink,
			   len + 1 < outlen ? outlen - len - 1
					    : sizeof(sink))) > 0)
		if (len + 1 < outlen)
			len += (size_t)got;
	out[len] = '\0';
	close(pipefd[0]);
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void bench_boot(struct bench *b, const struct samples *restore)
{
	char mem[16], out[8192], text[512];
	struct samples s = { 0 };
	const char *name = "cold boot to agent ready";

	snprintf(mem, sizeof(mem), "%d", TEMPLATE_MEM_MIB);
	char *argv[] = { (char *)b->thaw,
			 "run",
			 "--kernel",
			 (char *)b->kernel,
			 "--initrd",
			 (char *)b->initrd,
			 "--mem",
			 mem,
			 "--",
			 "true",
			 NULL };
	progress("boot: %d cold boots", b->size->boots);
	for (int i = 0; i < b->size->boots; i++) {
		double setup, boot;
		int status = run_capture(argv, 2, out, sizeof(out));
		const char *line = strstr(out, "thaw: vmm setup ");

		if (status || !line ||
		    sscanf(line,
			   "thaw: vmm setup %lf ms, boot to agent ready "
			   "%lf ms",
			   &setup, &boot) != 2) {
			fail(b, "boot", name, status ? out : "no timing line");
			samples_free(&s);
			return;
		}
		samples_add(&s, setup + boot);
	}
	note(b, text, sizeof(text),
	     "`thaw run --kernel --initrd -- true`: VMM start -> agent ready");
	report_add_samples(b->report, "boot", name, "ms", &s, text);

	struct summary boots, restores;
	samples_summarize(&s, &boots);
	if (restore && restore->n) {
		samples_summarize(restore, &restores);
		note(b, text, sizeof(text),
		     "P50 restore in the daemon at concurrency 1 / P50 cold "
		     "boot, both VMM start -> agent answered");
		report_add_value(b->report, "boot", "restore / cold boot (P50)",
				 "x", restores.p50 / boots.p50, text);
	}
	samples_free(&s);
}

/* ---- the VMM floor ------------------------------------------------------- */

/*
 * The template's snapshot id, learnt from the first daemon started; a
 * scenario run on its own starts one to build or find it.
 */
static int find_snapshot(struct bench *b, char *err, size_t errlen)
{
	struct template_spec t = { .name = "bench",
				   .mem_mib = TEMPLATE_MEM_MIB };
	struct thawd d;

	if (b->snapshot[0])
		return 0;
	if (start_daemon(b, &d, &t, 1, 8, err, errlen))
		return -1;
	stop_daemon(&d);
	if (!b->snapshot[0])
		snprintf(err, errlen, "GET /templates named no snapshot");
	return b->snapshot[0] ? 0 : -1;
}

static void bench_floor(struct bench *b, const struct samples *restore)
{
	char dir[PATH_MAX + 96], runs[16], text[512];
	const char *name = "VMM floor: KVM VM + vCPUs + memory + state, no run";
	struct samples s = { 0 };

	if (find_snapshot(b, dir, sizeof(dir))) {
		fail(b, "floor", name, dir);
		return;
	}
	snprintf(dir, sizeof(dir), "%s/snapshots/%s", b->state_dir,
		 b->snapshot);
	snprintf(runs, sizeof(runs), "%d", b->size->floor_runs);
	progress("floor: %d VM setups in one process", b->size->floor_runs);

	/* "floor TOTAL SETUP STATE\n" per run: well under 64 bytes each. */
	size_t outlen = (size_t)b->size->floor_runs * 64 + 1;
	char *out = malloc(outlen), *save;
	char *argv[] = { (char *)b->floor, dir, runs, NULL };
	int status = out ? run_capture(argv, 1, out, outlen) : -1;
	for (char *line = out ? strtok_r(out, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		double total;

		if (sscanf(line, "floor %lf", &total) == 1)
			samples_add(&s, total);
	}
	free(out);
	if (status || !s.n) {
		fail(b, "floor", name,
		     "thaw-bench-floor failed (its stderr is above)");
		samples_free(&s);
		return;
	}
	note(b, text, sizeof(text),
	     "thaw-bench-floor on the template's snapshot");
	report_add_samples(b->report, "floor", name, "ms", &s, text);
	if (restore && restore->n) {
		struct summary fl, re;

		samples_summarize(&s, &fl);
		samples_summarize(restore, &re);
		note(b, text, sizeof(text),
		     "P50 restore in the daemon at concurrency 1 / P50 floor");
		report_add_value(b->report, "floor", "restore / floor (P50)",
				 "x", re.p50 / fl.p50, text);
	}
	samples_free(&s);
}

/* ---- first exec after a handout ---------------------------------------- */

/* Snapshot files in RAM (tmpfs, or an initramfs's rootfs) stay cached. */
static bool state_in_ram(const struct bench *b)
{
	struct statfs fs;

	return !statfs(b->state_dir, &fs) &&
	       (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC);
}

static int drop_caches(char *err, size_t errlen)
{
	FILE *f = fopen("/proc/sys/vm/drop_caches", "w");

	sync();
	if (!f || fputs("3\n", f) == EOF || fclose(f)) {
		snprintf(err, errlen, "/proc/sys/vm/drop_caches: %s",
			 strerror(errno));
		return -1;
	}
	return 0;
}

/* The snapshot's working set comes from a first clone's run. */
static int record_working_set(struct bench *b, char *err, size_t errlen)
{
	char *argv[] = { (char *)b->thaw, "run", "--from", b->snapshot, "--",
			 "true",	  NULL };

	setenv("THAW_STATE_DIR", b->state_dir, 1);
	if (run_capture(argv, 2, err, errlen)) {
		return -1;
	}
	return 0;
}

static void bench_first_exec(struct bench *b)
{
	static const char *const modes[] = { "lazy", "prefetch" };
	struct template_spec t[2];
	char why[1024], text[512];
	struct thawd d;

	for (int m = 0; m < 2; m++)
		t[m] = (struct template_spec){ .name = modes[m],
					       .mem_mib = TEMPLATE_MEM_MIB,
					       .min_ready = 1,
					       .max_total = 4,
					       .page_in = modes[m] };
	progress("first exec: %d per page-in mode and page cache state",
		 b->size->first_execs);
	/* Before the pools fill, so every prefetching restore has it. */
	if (find_snapshot(b, why, sizeof(why)) ||
	    record_working_set(b, why, sizeof(why)) ||
	    start_daemon(b, &d, t, 2, 16, why, sizeof(why))) {
		fail(b, "first_exec", "first exec after handout", why);
		return;
	}
	struct thaw_client *c = thawd_connect(&d, why, sizeof(why));
	for (int m = 0; m < 2; m++)
		for (int dropped = 1; dropped >= 0; dropped--) {
			char name[96];
			struct samples s = { 0 };
			int ret = c ? 0 : -1;

			snprintf(name, sizeof(name), "%s, page cache %s",
				 modes[m], dropped ? "dropped" : "warm");
			for (int i = 0; i < b->size->first_execs && !ret; i++) {
				struct handout h;
				double ms;

				ret = thawd_wait_ready(c, modes[m], 1, 600, why,
						       sizeof(why));
				if (!ret && dropped)
					ret = drop_caches(why, sizeof(why));
				if (!ret)
					ret = thawd_handout(c, modes[m], &h,
							    why, sizeof(why));
				if (!ret) {
					ret = thawd_exec_true(c, h.id, &ms, why,
							      sizeof(why));
					thaw_client_delete(c, h.id, text,
							   sizeof(text));
				}
				if (!ret)
					samples_add(&s, ms);
			}
			if (ret) {
				fail(b, "first_exec", name, why);
			} else {
				note(b, text, sizeof(text),
				     "`true` via POST exec right after a warm "
				     "handout%s",
				     dropped && state_in_ram(b)
					     ? "; the snapshot is in RAM here: "
					       "dropping caches cannot evict it"
					     : "");
				report_add_samples(b->report, "first_exec",
						   name, "ms", &s, text);
			}
			samples_free(&s);
		}
	thaw_client_close(c);
	stop_daemon(&d);
}

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

/* A "Key:   123 kB" field of @path, in KiB; -1 when missing. */
static long kib_field(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	char line[256];
	long v = -1;
	size_t n = strlen(key);

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return v;
}

static long used_kib(void)
{
	return kib_field("/proc/meminfo", "MemTotal") -
	       kib_field("/proc/meminfo", "MemAvailable");
}

/*
 * Fills @name's pool towards @want ready clones; stops when it has them,
 * when no clone was added for 60 s, when the daemon reports a failed
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
	long total = kib_field("/proc/meminfo", "MemTotal");

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
		if (p.ready != last) {
			last = p.ready;
			since = monotonic_ms();
		}
		if (kib_field("/proc/meminfo", "MemAvailable") < total / 10) {
			snprintf(why, len,
				 "host memory low: under a tenth of %ld MiB "
				 "available",
				 total / 1024);
			break;
		}
		if (monotonic_ms() - since > 60e3) {
			snprintf(why, len, "no new clone for 60 s");
			break;
		}
		if (!thaw_client_metric(c, "thaw_restore_failures_total", name,
					&failures, err, sizeof(err)) &&
		    failures > 0) {
			char tail[600];

			thawd_log_tail(d, tail, sizeof(tail));
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

static void bench_memory(struct bench *b)
{
	for (int i = 0; i < 3 && b->size->idle_clones[i]; i++) {
		long want = b->size->idle_clones[i];
		struct template_spec t = { .name = "idle",
					   .mem_mib = TEMPLATE_MEM_MIB,
					   .min_ready = (unsigned)want,
					   .max_total = (unsigned)want };
		char name[96], why[1024], text[512];
		struct thawd d;

		snprintf(name, sizeof(name), "%ld idle clones", want);
		progress("memory: %s", name);
		long before = used_kib();
		if (start_daemon(b, &d, &t, 1, (unsigned)want + 8, why,
				 sizeof(why))) {
			fail(b, "memory", name, why);
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
			long p = kib_field(path, "Pss");
			long clean = kib_field(path, "Private_Clean");
			long dirty = kib_field(path, "Private_Dirty");
			if (p >= 0)
				samples_add(&pss, p / 1024.0);
			if (clean >= 0 && dirty >= 0)
				samples_add(&priv, (clean + dirty) / 1024.0);
		}
		long delta = used_kib() - before;
		free(pids);
		stop_daemon(&d);
		if (!got) {
			fail(b, "memory", name, why[0] ? why : "no clone");
			continue;
		}
		char label[128];
		note(b, text, sizeof(text), "%ld of %ld clones up%s%s", got,
		     want, why[0] ? ": " : "", why);
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

static void bench_density(struct bench *b)
{
	long want = b->size->density_max;
	struct template_spec t = { .name = "dense",
				   .mem_mib = TEMPLATE_MEM_MIB,
				   .min_ready = (unsigned)want,
				   .max_total = (unsigned)want,
				   .restore_parallel = 8 };
	char why[1024], text[1024];
	const char *name = "idle 256 MiB clones started";
	struct thawd d;

	progress("density: up to %ld idle clones", want);
	if (start_daemon(b, &d, &t, 1, (unsigned)want, why, sizeof(why))) {
		fail(b, "density", name, why);
		return;
	}
	long got = fill_pool(&d, "dense", want, why, sizeof(why));
	char err[256];
	int stopped = thawd_stop(&d, err, sizeof(err));
	int left = clone_vmms(NULL, 0);
	note(b, text, sizeof(text), "stopped by: %s; cleanup: %s, %d VMMs left",
	     why[0] ? why : "reached the limit", stopped ? err : "clean", left);
	report_add_value(b->report, "density", name, "clones", (double)got,
			 text);
}

/* ---- sustained restores ------------------------------------------------- */

struct churn {
	const struct thawd *d;
	double until;
	struct samples s;
	char err[512];
};

static void *churn(void *arg)
{
	struct churn *w = arg;
	struct thaw_client *c = thawd_connect(w->d, w->err, sizeof(w->err));

	while (c && monotonic_ms() < w->until && !w->err[0]) {
		struct handout h;

		if (thawd_handout(c, "churn", &h, w->err, sizeof(w->err)))
			break;
		samples_add(&w->s, h.ms);
		thaw_client_delete(c, h.id, w->err, sizeof(w->err));
	}
	thaw_client_close(c);
	return NULL;
}

static void bench_sustained(struct bench *b)
{
	enum { WORKERS = 4 };
	struct template_spec t = { .name = "churn",
				   .mem_mib = TEMPLATE_MEM_MIB,
				   .min_ready = 0,
				   .max_total = WORKERS * 2,
				   .restore_parallel = WORKERS };
	const char *name = "restores on demand per second";
	struct churn w[WORKERS];
	pthread_t threads[WORKERS];
	char why[1024], text[512];
	struct thawd d;

	progress("sustained: %d s of create+ping+delete, %d at a time",
		 b->size->sustained_s, WORKERS);
	if (start_daemon(b, &d, &t, 1, WORKERS * 2 + 4, why, sizeof(why))) {
		fail(b, "sustained", name, why);
		return;
	}
	double start = monotonic_ms();
	for (int i = 0; i < WORKERS; i++) {
		w[i] = (struct churn){
			.d = &d, .until = start + b->size->sustained_s * 1e3
		};
		pthread_create(&threads[i], NULL, churn, &w[i]);
	}
	struct samples all = { 0 };
	why[0] = '\0';
	for (int i = 0; i < WORKERS; i++) {
		pthread_join(threads[i], NULL);
		for (size_t k = 0; k < w[i].s.n; k++)
			samples_add(&all, w[i].s.v[k]);
		if (w[i].err[0] && !why[0])
			snprintf(why, sizeof(why), "%s", w[i].err);
		samples_free(&w[i].s);
	}
	double seconds = (monotonic_ms() - start) / 1e3;
	stop_daemon(&d);
	note(b, text, sizeof(text),
	     "%zu handouts, each restored on demand, in %.1f s by %d clients; "
	     "%d CPUs%s%s",
	     all.n, seconds, WORKERS, (int)sysconf(_SC_NPROCESSORS_ONLN),
	     why[0] ? "; a failure: " : "", why);
	report_add_value(b->report, "sustained", name, "restores/s",
			 (double)all.n / seconds, text);
	report_add_samples(b->report, "sustained",
			   "handout latency while sustained", "ms", &all, text);
	samples_free(&all);
}

/* ---- peers ----------------------------------------------------------------
 */

static void bench_peers(struct bench *b)
{
	struct template_spec t = { .name = "peer",
				   .mem_mib = TEMPLATE_MEM_MIB,
				   .min_ready = 1,
				   .max_total = 4 };
	const char *name = "thaw: handout + `true` + release";
	char why[1024], text[512];
	struct samples s = { 0 };
	struct thawd d;

	progress("peers: `true` in a fresh sandbox, %d runs each",
		 b->size->peer_runs);
	if (start_daemon(b, &d, &t, 1, 8, why, sizeof(why))) {
		fail(b, "peers", name, why);
	} else {
		struct thaw_client *c = thawd_connect(&d, why, sizeof(why));
		int ret = c ? 0 : -1;

		for (int i = 0; i < b->size->peer_runs && !ret; i++) {
			struct handout h;
			double exec;

			ret = thawd_wait_ready(c, "peer", 1, 600, why,
					       sizeof(why));
			double start = monotonic_ms();
			if (!ret)
				ret = thawd_handout(c, "peer", &h, why,
						    sizeof(why));
			if (!ret) {
				ret = thawd_exec_true(c, h.id, &exec, why,
						      sizeof(why));
				if (thaw_client_delete(c, h.id, why,
						       sizeof(why)))
					ret = -1;
			}
			if (!ret)
				samples_add(&s, monotonic_ms() - start);
		}
		thaw_client_close(c);
		stop_daemon(&d);
		if (ret) {
			fail(b, "peers", name, why);
		} else {
			note(b, text, sizeof(text), "from the warm pool");
			report_add_samples(b->report, "peers", name, "ms", &s,
					   text);
		}
	}
	samples_free(&s);

	for (int i = 0; peer_names[i]; i++) {
		char label[96];
		struct samples p = { 0 };

		snprintf(label, sizeof(label), "%s: `true` in a fresh sandbox",
			 peer_names[i]);
		if (peer_measure(peer_names[i], b->size->peer_runs, &p, why,
				 sizeof(why))) {
			fail(b, "peers", label, why);
		} else {
			note(b, text, sizeof(text), "same host, same command");
			report_add_samples(b->report, "peers", label, "ms", &p,
					   text);
		}
		samples_free(&p);
	}
}

/* ---- main ---------------------------------------------------------------- */

static const char usage[] =
	"usage: thaw-bench [OPTIONS] all|SCENARIO...\n"
	"\n"
	"Measures thaw on this host and writes OUT/results.json, OUT/results.md\n"
	"and PNG plots, then prints the table.  Scenarios: handout (warm\n"
	"pool), restore (on demand), boot (cold, and the ratio to a handout),\n"
	"floor (VMM setup without running), first-exec, memory, density,\n"
	"sustained, peers.  Needs /dev/kvm and root (drop_caches, cgroups).\n"
	"\n"
	"  --kernel FILE   guest kernel (required)\n"
	"  --initrd FILE   initramfs with thaw-agent (required)\n"
	"  --out DIR       where results go (default bench/results/DATE)\n"
	"  --quick         small sizes, for a first look\n"
	"  --thaw FILE     the thaw program (default: the one built with this)\n"
	"  --floor FILE    thaw-bench-floor (default: the one built with this)\n";

static bool wanted(char **names, int n, const char *scenario)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], "all") || !strcmp(names[i], scenario))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	static const char *const scenarios[] = {
		"all",	      "handout", "restore", "boot",	 "floor",
		"first-exec", "memory",	 "density", "sustained", "peers",
	};
	static const struct option options[] = {
		{ "kernel", required_argument, NULL, 'k' },
		{ "initrd", required_argument, NULL, 'i' },
		{ "out", required_argument, NULL, 'o' },
		{ "quick", no_argument, NULL, 'q' },
		{ "thaw", required_argument, NULL, 't' },
		{ "floor", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct bench b = { .thaw = THAW, .floor = THAW_BENCH_FLOOR };
	char out[PATH_MAX] = "", err[1024];
	bool quick = false;
	int opt;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'k':
			b.kernel = optarg;
			break;
		case 'i':
			b.initrd = optarg;
			break;
		case 'o':
			snprintf(out, sizeof(out), "%s", optarg);
			break;
		case 'q':
			quick = true;
			break;
		case 't':
			b.thaw = optarg;
			break;
		case 'f':
			b.floor = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (optind == argc || !b.kernel || !b.initrd) {
		fprintf(stderr, "thaw-bench: %s\n%s",
			optind == argc ? "name a scenario, or all"
				       : "--kernel and --initrd are required",
			usage);
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		bool known = false;

		for (size_t k = 0; k < sizeof(scenarios) / sizeof(*scenarios);
		     k++)
			known |= !strcmp(argv[i], scenarios[k]);
		if (!known) {
			fprintf(stderr, "thaw-bench: no scenario \"%s\"\n%s",
				argv[i], usage);
			return 2;
		}
	}
	for (const char *f = b.kernel; f; f = f == b.kernel ? b.initrd : NULL)
		if (access(f, R_OK)) {
			fprintf(stderr, "thaw-bench: %s: %s\n", f,
				strerror(errno));
			return 2;
		}
	if (!out[0]) {
		time_t now = time(NULL);
		char day[32];

		strftime(day, sizeof(day), "%Y-%m-%d", gmtime(&now));
		snprintf(out, sizeof(out), "bench/results/%s", day);
	}
	b.size = &full;
	b.scaled = "";
	if (quick) {
		b.size = &small;
		b.scaled = "--quick: scaled down";
	} else if (getenv("THAW_EMULATED_HOST")) {
		b.size = &small;
		b.scaled = "emulated host: scaled down, emulator timings";
	}
	snprintf(b.state_dir, sizeof(b.state_dir), "/tmp/thaw-bench-XXXXXX");
	if (!mkdtemp(b.state_dir)) {
		fprintf(stderr, "thaw-bench: %s: %s\n", b.state_dir,
			strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	b.report = report_new();
	struct machine m;
	machine_describe(&m);
	snprintf(m.build, sizeof(m.build), "%s", THAW_BENCH_BUILD);
	report_set_machine(b.report, &m);
	if (b.scaled[0])
		progress("%s", b.scaled);

	char **names = argv + optind;
	int n = argc - optind;
	struct samples restores = { 0 };
	if (wanted(names, n, "handout"))
		bench_handouts(&b, true, NULL);
	if (wanted(names, n, "restore"))
		bench_handouts(&b, false, &restores);
	if (wanted(names, n, "boot"))
		bench_boot(&b, &restores);
	if (wanted(names, n, "floor"))
		bench_floor(&b, &restores);
	if (wanted(names, n, "first-exec"))
		bench_first_exec(&b);
	if (wanted(names, n, "memory"))
		bench_memory(&b);
	if (wanted(names, n, "density"))
		bench_density(&b);
	if (wanted(names, n, "sustained"))
		bench_sustained(&b);
	if (wanted(names, n, "peers"))
		bench_peers(&b);

	int status = 0;
	if (report_write(b.report, out, err, sizeof(err))) {
		fprintf(stderr, "thaw-bench: %s\n", err);
		status = 1;
	}
	report_print_markdown(b.report, stdout);
	if (!status)
		progress("results in %s", out);
	report_free(b.report);
	samples_free(&restores);
	char *rm[] = { "/bin/rm", "-rf", b.state_dir, NULL };
	run_capture(rm, 2, err, sizeof(err));
	return status;
}
