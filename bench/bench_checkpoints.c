// SPDX-License-Identifier: Apache-2.0
/*
 * bench_checkpoints.c - what an RL trainer's operations cost:
 * a checkpoint of a running sandbox against the megabytes its
 * guest wrote, forks of one checkpoint (time until all are ready, and
 * whether their memory stays shared), rollbacks, and restores from a chain
 * of checkpoints beside a restore from the template.
 *
 * One daemon serves them all, on a template whose pool is kept small:
 * every sandbox here is restored on demand from a snapshot (a checkpoint,
 * or the template's base for the comparison), as a trainer's are.
 *
 * Dirty memory: the guest writes @mib MiB of anonymous memory (busybox dd
 * with one block that large, read from /dev/zero: the kernel faults in and
 * clears every page; iflag=fullblock, as a read from /dev/zero may return
 * early when a signal is pending and dd would take that as its one
 * block), so that many pages of guest memory differ from the
 * last checkpoint; the checkpoint's own dirty_bytes is reported beside, as
 * the guest kernel adds pages of its own.  Each size is measured on a
 * sandbox that was checkpointed once before, so the pages its restore
 * touched are not counted against the first figure.  pause_ms and total_ms
 * are the daemon's (pool/API.md); the round trip is the client's.
 *
 * Forks: POST /sandboxes {"snapshot", "count": N} of one checkpoint, timed
 * from the request to its answer, which comes once every fork's agent
 * answered.  Memory per fork is each fork VMM's PSS and RSS (smaps_rollup):
 * pages the forks share from the checkpoint's files count once in the PSS
 * of all of them together, whole in each RSS.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/clock.h"

/* Three groups: a plot each (report.h). */
#define GROUP "checkpoint"
#define FORK_GROUP "fork"
#define ROLLBACK_GROUP "rollback"
#define TEMPLATE "rollout"
#define CHAIN_DEPTH 4
#define GUEST_WAIT_S 3600 /* a guest writing 128 MiB in an emulator */
#define GOAL_NOTE "the goals on VMX/SVM"

/* `sh -c @script` in @id, waited for; 0 or -1 with @err. */
static int guest_sh(struct thaw_client *c, const char *id, const char *script,
		    char *err, size_t errlen)
{
	const char *const argv[] = { "sh", "-c", script, NULL };

	return thawd_exec(c, id, argv, GUEST_WAIT_S, NULL, err, errlen);
}

/* A sandbox restored on demand from @snapshot into @id; 0 or -1. */
static int sandbox_of(struct thaw_client *c, const char *snapshot,
		      char id[THAW_CLIENT_ID_MAX], char *err, size_t errlen)
{
	struct thaw_sandbox s;

	if (thaw_client_create(
		    c, &(const struct thaw_create){ .snapshot = snapshot }, &s,
		    err, errlen))
		return -1;
	snprintf(id, THAW_CLIENT_ID_MAX, "%s", s.id);
	return 0;
}

static void release(struct thaw_client *c, const char *id)
{
	char err[256];

	if (id[0] && thaw_client_delete(c, id, err, sizeof(err)))
		bench_progress("%s: %s", id, err);
}

/* Releases every sandbox of snapshot @snap: a fork whose answer the client
 * gave up on is made all the same, and would hold the capacity the next
 * figures need. */
static void release_snapshots_sandboxes(struct thaw_client *c, const char *snap)
{
	struct thaw_sandbox *list;
	size_t n;
	char err[256];

	if (thaw_client_list(c, &list, &n, err, sizeof(err))) {
		bench_progress("%s", err);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(list[i].snapshot, snap))
			release(c, list[i].id);
	free(list);
}

/* ---- checkpoint latency against dirty memory ---------------------------- */

struct dirty_figures {
	struct samples pause, total, round_trip, dirty_mib;
};

static void dirty_figures_free(struct dirty_figures *f)
{
	samples_free(&f->pause);
	samples_free(&f->total);
	samples_free(&f->round_trip);
	samples_free(&f->dirty_mib);
}

/* @n checkpoints of sandbox @id, each after the guest wrote @mib MiB. */
static int checkpoints_after_writes(struct thaw_client *c, const char *id,
				    int mib, int n, struct dirty_figures *f,
				    char *err, size_t errlen)
{
	char script[128];

	snprintf(
		script, sizeof(script),
		"dd if=/dev/zero of=/dev/null bs=%dM count=1 iflag=fullblock 2>/dev/null",
		mib);
	for (int i = 0; i < n; i++) {
		struct thaw_checkpoint ck;

		if (guest_sh(c, id, script, err, errlen))
			return -1;
		double start = monotonic_ms();
		if (thaw_client_checkpoint(c, id, &ck, err, errlen))
			return -1;
		samples_add(&f->round_trip, monotonic_ms() - start);
		samples_add(&f->pause, ck.pause_ms);
		samples_add(&f->total, ck.total_ms);
		samples_add(&f->dirty_mib, ck.dirty_bytes / (1024.0 * 1024));
	}
	return 0;
}

static void dirty_memory(struct bench *b, struct thaw_client *c,
			 const char *base)
{
	for (int k = 0; k < 3 && b->size->dirty_mib[k]; k++) {
		int mib = b->size->dirty_mib[k];
		struct dirty_figures f = { 0 };
		char id[THAW_CLIENT_ID_MAX] = "", why[1024] = "", name[96],
		     text[1400];
		struct thaw_checkpoint first;

		bench_progress("checkpoint: %d after %d MiB written",
			       b->size->checkpoints, mib);
		if (!sandbox_of(c, base, id, why, sizeof(why)) &&
		    !thaw_client_checkpoint(c, id, &first, why, sizeof(why)))
			checkpoints_after_writes(c, id, mib,
						 b->size->checkpoints, &f, why,
						 sizeof(why));
		release(c, id);
		const struct {
			const char *what, *unit;
			struct samples *s;
		} rows[] = {
			{ "pause", "ms", &f.pause },
			{ "total", "ms", &f.total },
			{ "round trip", "ms", &f.round_trip },
			{ "dirty_bytes written", "MiB", &f.dirty_mib },
		};
		for (size_t r = 0; r < sizeof(rows) / sizeof(*rows); r++) {
			snprintf(name, sizeof(name),
				 "checkpoint after %d MiB written: %s", mib,
				 rows[r].what);
			if (!rows[r].s->n) {
				bench_fail(b, GROUP, name, why);
				continue;
			}
			bench_note(
				b, text, sizeof(text),
				"the guest wrote %d MiB of anonymous memory (dd) "
				"since the sandbox's last checkpoint; pause and "
				"total are the daemon's, the round trip the "
				"client's; %s: pause <= 20 ms + dirty pages at "
				"disk speed%s%s",
				mib, GOAL_NOTE,
				why[0] ? "; stopped early: " : "", why);
			report_add_samples(b->report, GROUP, name, rows[r].unit,
					   rows[r].s, text);
		}
		dirty_figures_free(&f);
	}
}

/* ---- forks of one checkpoint -------------------------------------------- */

/* Each fork VMM's PSS and RSS, in MiB, into @pss and @rss. */
static void fork_memory(struct thaw_client *c,
			const struct thaw_fork_entry *forks, size_t n,
			struct samples *pss, struct samples *rss)
{
	for (size_t i = 0; i < n; i++) {
		struct thaw_sandbox s;
		char path[64], err[256];

		if (!forks[i].id[0] ||
		    thaw_client_get(c, forks[i].id, &s, err, sizeof(err)) ||
		    s.pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/smaps_rollup", s.pid);
		long p = bench_kib_field(path, "Pss"),
		     r = bench_kib_field(path, "Rss");
		if (p >= 0)
			samples_add(pss, p / 1024.0);
		if (r >= 0)
			samples_add(rss, r / 1024.0);
	}
}

/* One fork of @n from checkpoint @snap, timed into @ready; every fork is
 * released again.  0, or -1 with @err (the first fork's error). */
static int fork_once(struct thaw_client *c, const char *snap, unsigned n,
		     struct samples *ready, struct samples *pss,
		     struct samples *rss, char *err, size_t errlen)
{
	struct thaw_fork_entry *forks = NULL;
	size_t got = 0;
	double start = monotonic_ms();
	int ret = thaw_client_create_many(
		c, &(const struct thaw_create){ .snapshot = snap }, n, &forks,
		&got, err, errlen);
	double ms = monotonic_ms() - start;

	for (size_t i = 0; !ret && i < got; i++)
		if (!forks[i].id[0]) {
			snprintf(err, errlen, "fork %zu of %u: %s", i + 1, n,
				 forks[i].error);
			ret = -1;
		}
	if (!ret) {
		samples_add(ready, ms);
		fork_memory(c, forks, got, pss, rss);
	}
	for (size_t i = 0; i < got; i++)
		release(c, forks[i].id);
	free(forks);
	if (ret && !got)
		release_snapshots_sandboxes(c, snap);
	return ret;
}

static void forks(struct bench *b, struct thaw_client *c, const char *base)
{
	char id[THAW_CLIENT_ID_MAX] = "", why[1024] = "", name[96], text[1400];
	struct thaw_checkpoint ck = { 0 };

	/* The checkpoint holds what the sandbox wrote: a fork shares those
	 * pages from its diff file as the template's from memory.img. */
	if (sandbox_of(c, base, id, why, sizeof(why)) ||
	    guest_sh(
		    c, id,
		    "dd if=/dev/zero of=/dev/null bs=1M count=1 iflag=fullblock 2>/dev/null",
		    why, sizeof(why)) ||
	    thaw_client_checkpoint(c, id, &ck, why, sizeof(why)))
		ck.snapshot[0] = '\0';
	release(c, id);
	for (int k = 0; k < 3 && b->size->forks[k]; k++) {
		unsigned n = (unsigned)b->size->forks[k];
		struct samples ready = { 0 }, pss = { 0 }, rss = { 0 };
		char err[1024] = "";

		bench_progress("checkpoint: %d forks of %u",
			       b->size->fork_rounds, n);
		for (int i = 0; ck.snapshot[0] && i < b->size->fork_rounds; i++)
			if (fork_once(c, ck.snapshot, n, &ready, &pss, &rss,
				      err, sizeof(err)))
				break;
		const char *reason = why[0] ? why : err;
		snprintf(name, sizeof(name), "fork of %u: all ready", n);
		if (ready.n) {
			bench_note(
				b, text, sizeof(text),
				"POST /sandboxes {snapshot, count: %u} of one "
				"checkpoint, sent -> answered (every fork's agent "
				"answered); %s: 32 in <= 1 s%s%s",
				n, GOAL_NOTE,
				reason[0] ? "; stopped early: " : "", reason);
			report_add_samples(b->report, FORK_GROUP, name, "ms",
					   &ready, text);
		} else {
			bench_fail(b, FORK_GROUP, name, reason);
		}
		const struct {
			const char *what;
			struct samples *s;
		} mem[] = { { "PSS", &pss }, { "RSS", &rss } };
		for (size_t m = 0; m < 2; m++) {
			snprintf(name, sizeof(name),
				 "fork of %u: VMM %s per fork", n, mem[m].what);
			if (!mem[m].s->n) {
				bench_fail(b, FORK_GROUP, name,
					   reason[0] ? reason : "no fork");
				continue;
			}
			bench_note(
				b, text, sizeof(text),
				"each fork VMM's smaps_rollup once all were ready: "
				"pages shared from the checkpoint count whole in "
				"each RSS, divided among the forks in PSS");
			report_add_samples(b->report, FORK_GROUP, name, "MiB",
					   mem[m].s, text);
		}
		samples_free(&ready);
		samples_free(&pss);
		samples_free(&rss);
	}
}

/* ---- rollbacks, and restores from a chain ------------------------------- */

static void rollbacks(struct bench *b, struct thaw_client *c, const char *base)
{
	char id[THAW_CLIENT_ID_MAX] = "", why[1024] = "", text[1024];
	const char *name = "rollback to a checkpoint";
	struct thaw_checkpoint ck;
	struct samples s = { 0 };

	bench_progress("checkpoint: %d rollbacks", b->size->rollbacks);
	if (!sandbox_of(c, base, id, why, sizeof(why)) &&
	    !thaw_client_checkpoint(c, id, &ck, why, sizeof(why)))
		for (int i = 0; i < b->size->rollbacks; i++) {
			if (guest_sh(c, id, "echo changed > /tmp/rollback", why,
				     sizeof(why)))
				break;
			double start = monotonic_ms();
			if (thaw_client_rollback(c, id, ck.snapshot, NULL, why,
						 sizeof(why)))
				break;
			samples_add(&s, monotonic_ms() - start);
		}
	release(c, id);
	if (s.n) {
		bench_note(
			b, text, sizeof(text),
			"POST /sandboxes/{id}/rollback sent -> answered (its VM "
			"replaced by a restore of the checkpoint, the agent "
			"answered), after the guest wrote a file; compare the "
			"restores below; %s: <= 2x a restore%s%s",
			GOAL_NOTE, why[0] ? "; stopped early: " : "", why);
		report_add_samples(b->report, ROLLBACK_GROUP, name, "ms", &s,
				   text);
	} else {
		bench_fail(b, ROLLBACK_GROUP, name, why);
	}
	samples_free(&s);
}

/* @n restores on demand from @snap, create -> ping, into @r and @s. */
static int restores_of(struct thaw_client *c, const char *snap, int n,
		       struct samples *s, struct restore_samples *r, char *err,
		       size_t errlen)
{
	for (int i = 0; i < n; i++) {
		struct handout h = { .id = "" };
		int ret = thawd_create_ping(
			c, &(const struct thaw_create){ .snapshot = snap }, &h,
			err, errlen);

		release(c, h.id);
		if (ret)
			return -1;
		samples_add(s, h.ms);
		bench_restore_samples_add(r, &h);
	}
	return 0;
}

static void chain(struct bench *b, struct thaw_client *c, const char *base)
{
	char id[THAW_CLIENT_ID_MAX] = "", why[1024] = "", text[1024];
	char snaps[CHAIN_DEPTH][THAW_CLIENT_ID_MAX] = { "" };
	int depth = 0;

	bench_progress("checkpoint: a chain of %d, %d restores from each level",
		       CHAIN_DEPTH, b->size->chain_restores);
	if (!sandbox_of(c, base, id, why, sizeof(why)))
		for (; depth < CHAIN_DEPTH; depth++) {
			struct thaw_checkpoint ck;
			char script[64];

			snprintf(script, sizeof(script), "echo %d > /tmp/level",
				 depth + 1);
			if (guest_sh(c, id, script, why, sizeof(why)) ||
			    thaw_client_checkpoint(c, id, &ck, why,
						   sizeof(why)))
				break;
			snprintf(snaps[depth], sizeof(snaps[depth]), "%s",
				 ck.snapshot);
		}
	release(c, id);
	const struct {
		const char *label, *snap;
	} from[] = {
		{ "restore from the template's snapshot", base },
		{ "restore from a depth-1 checkpoint", snaps[0] },
		{ "restore from a depth-4 checkpoint", snaps[CHAIN_DEPTH - 1] },
	};
	for (size_t k = 0; k < sizeof(from) / sizeof(*from); k++) {
		struct samples s = { 0 };
		struct restore_samples r = { 0 };
		char err[1024] = "";

		if (from[k].snap[0])
			restores_of(c, from[k].snap, b->size->chain_restores,
				    &s, &r, err, sizeof(err));
		else
			snprintf(err, sizeof(err), "no such checkpoint: %s",
				 why[0] ? why : "the chain was not made");
		if (s.n) {
			char label[128];

			bench_note(b, text, sizeof(text),
				   "POST /sandboxes {snapshot} sent -> the new "
				   "sandbox's ping answered, one at a time%s%s",
				   err[0] ? "; stopped early: " : "", err);
			snprintf(label, sizeof(label), "%s: create -> ping",
				 from[k].label);
			report_add_samples(b->report, ROLLBACK_GROUP, label,
					   "ms", &s, text);
			bench_report_restores(
				b, ROLLBACK_GROUP, from[k].label, &r,
				"the create -> ping figure's restores; "
				"a checkpoint's restore prefetches its "
				"template's working set (it records "
				"none of its own)");
		} else {
			bench_fail(b, ROLLBACK_GROUP, from[k].label, err);
		}
		samples_free(&s);
		bench_restore_samples_free(&r);
	}
}

void bench_checkpoints(struct bench *b)
{
	unsigned most = 1;
	for (int k = 0; k < 3; k++)
		if ((unsigned)b->size->forks[k] > most)
			most = (unsigned)b->size->forks[k];
	const struct template_spec t = { .name = TEMPLATE,
					 .mem_mib = TEMPLATE_MEM_MIB,
					 .min_ready = 1,
					 .max_total = most + 2 };
	const struct daemon_spec spec = { .max_sandboxes = most + 4 };
	struct thaw_client *c = NULL;
	struct thaw_template pool;
	struct thawd d = { 0 };
	char why[1024];

	if (bench_start_daemon(b, &d, &t, 1, &spec, why, sizeof(why)) ||
	    !(c = thawd_connect(&d, why, sizeof(why))) ||
	    thawd_pool(c, TEMPLATE, &pool, why, sizeof(why))) {
		bench_fail(b, GROUP, "checkpoints, forks, rollbacks, chains",
			   why);
	} else {
		dirty_memory(b, c, pool.snapshot);
		forks(b, c, pool.snapshot);
		rollbacks(b, c, pool.snapshot);
		chain(b, c, pool.snapshot);
	}
	thaw_client_close(c);
	if (d.proc.pid > 0)
		bench_stop_daemon(&d);
}
