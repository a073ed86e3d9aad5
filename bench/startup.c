// SPDX-License-Identifier: Apache-2.0
/*
 * startup.c - one guest's start, measured without a pool's help: a cold
 * boot, the VMM's floor, and the first exec right after a handout.
 *
 * The cold boot (`thaw run`) and the floor (thaw-bench-floor: KVM objects
 * and the snapshot's state, no guest run) bracket a restore: each is
 * reported beside the ratio of the daemon's P50 restore to its own P50 -
 * the whole restore against the boot, its host side against the floor,
 * which has no guest side.
 * Both run as child programs and are read from their output, so thaw-bench
 * itself links neither the VMM nor the CLI.  The first exec is the one
 * figure where the snapshot's memory matters: it is measured for lazy and
 * prefetched page-in, with the page cache dropped and warm.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "bench/bench.h"

/* ---- cold boot ----------------------------------------------------------- */

void bench_boot(struct bench *b, const struct restore_samples *restore)
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
	bench_progress("boot: %d cold boots", b->size->boots);
	for (int i = 0; i < b->size->boots; i++) {
		double setup, boot;
		int status = bench_run_capture(argv, 2, out, sizeof(out));
		const char *line = strstr(out, "thaw: vmm setup ");

		if (status || !line ||
		    sscanf(line,
			   "thaw: vmm setup %lf ms, boot to agent ready "
			   "%lf ms",
			   &setup, &boot) != 2) {
			bench_fail(b, "boot", name,
				   status ? out : "no timing line");
			samples_free(&s);
			return;
		}
		samples_add(&s, setup + boot);
	}
	bench_note(
		b, text, sizeof(text),
		"`thaw run --kernel --initrd -- true`: VMM start -> agent ready");
	report_add_samples(b->report, "boot", name, "ms", &s, text);

	struct summary boots, restores;
	samples_summarize(&s, &boots);
	if (restore && restore->total.n) {
		samples_summarize(&restore->total, &restores);
		bench_note(
			b, text, sizeof(text),
			"P50 restore in the daemon at concurrency 1 (VMM start -> "
			"agent answered, identity pushed) / P50 cold boot (VMM "
			"start -> agent ready)");
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
	const struct daemon_spec spec = { .max_sandboxes = 8 };
	struct thawd d;

	if (b->snapshot[0])
		return 0;
	if (bench_start_daemon(b, &d, &t, 1, &spec, err, errlen))
		return -1;
	bench_stop_daemon(&d);
	if (!b->snapshot[0])
		snprintf(err, errlen, "GET /templates named no snapshot");
	return b->snapshot[0] ? 0 : -1;
}

void bench_floor(struct bench *b, const struct restore_samples *restore)
{
	char dir[PATH_MAX + 96], runs[16], text[512];
	const char *name = "VMM floor: KVM VM + vCPUs + memory + state, no run";
	struct samples s = { 0 };

	if (find_snapshot(b, dir, sizeof(dir))) {
		bench_fail(b, "floor", name, dir);
		return;
	}
	snprintf(dir, sizeof(dir), "%s/snapshots/%s", b->state_dir,
		 b->snapshot);
	snprintf(runs, sizeof(runs), "%d", b->size->floor_runs);
	bench_progress("floor: %d VM setups in one process",
		       b->size->floor_runs);

	/* "floor TOTAL SETUP STATE\n" per run: well under 64 bytes each. */
	size_t outlen = (size_t)b->size->floor_runs * 64 + 1;
	char *out = malloc(outlen), *save;
	char *argv[] = { (char *)b->floor, dir, runs, NULL };
	int status = out ? bench_run_capture(argv, 1, out, outlen) : -1;
	for (char *line = out ? strtok_r(out, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		double total;

		if (sscanf(line, "floor %lf", &total) == 1)
			samples_add(&s, total);
	}
	free(out);
	if (status || !s.n) {
		bench_fail(b, "floor", name,
			   "thaw-bench-floor failed (its stderr is above)");
		samples_free(&s);
		return;
	}
	bench_note(b, text, sizeof(text),
		   "thaw-bench-floor on the template's snapshot");
	report_add_samples(b->report, "floor", name, "ms", &s, text);
	/* The floor is host work only: the guest side has no place here. */
	if (restore && restore->host.n) {
		struct summary fl, host;

		samples_summarize(&s, &fl);
		samples_summarize(&restore->host, &host);
		bench_note(
			b, text, sizeof(text),
			"P50 host side of the daemon's restores at concurrency 1 "
			"(VMM fork, exec and setup with page-in, state restore) / "
			"P50 floor");
		report_add_value(b->report, "floor",
				 "host-side restore / floor (P50)", "x",
				 host.p50 / fl.p50, text);
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

void bench_first_exec(struct bench *b)
{
	static const char *const modes[] = { "lazy", "prefetch" };
	struct template_spec t[2];
	char why[1024], text[512];
	const struct daemon_spec spec = { .max_sandboxes = 16 };
	struct thawd d;

	for (int m = 0; m < 2; m++)
		t[m] = (struct template_spec){ .name = modes[m],
					       .mem_mib = TEMPLATE_MEM_MIB,
					       .min_ready = 1,
					       .max_total = 4,
					       .page_in = modes[m] };
	bench_progress("first exec: %d per page-in mode and page cache state",
		       b->size->first_execs);
	/* The daemon records the snapshot's working set before its pools
	 * fill, so every prefetching restore has it. */
	if (bench_start_daemon(b, &d, t, 2, &spec, why, sizeof(why))) {
		bench_fail(b, "first_exec", "first exec after handout", why);
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
				bench_fail(b, "first_exec", name, why);
			} else {
				bench_note(
					b, text, sizeof(text),
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
	bench_stop_daemon(&d);
}
