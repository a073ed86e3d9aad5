// SPDX-License-Identifier: Apache-2.0
/*
 * handouts.c - sandboxes handed out by thawd: from a warm pool and restored
 * on demand at several concurrencies, and restores sustained for a while.
 *
 * Every handout is a client's create request timed until the agent in the
 * clone answered a ping, exactly what a user waits for.  A round of
 * handouts starts its requests together behind a barrier, so the daemon
 * sees the concurrency asked for; the pool is brought back to its state
 * (ready clones, or idle) between rounds, so each round measures the same
 * thing.  The sustained scenario drops the rounds: a few clients loop on
 * create+ping+delete for a fixed time, and the rate is the figure.
 *
 * A restore on demand is also reported as the daemon timed it, whole and
 * split where the guest starts running: its host side (VMM start, page-in,
 * state restore: what thaw-bench-floor bounds) and its guest side (the
 * agent's first answer and the clone's identity pushed: on an emulated
 * guest kernel, most of the whole).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/clock.h"

/* ---- the daemon's restores ---------------------------------------------- */

void bench_restore_samples_add(struct restore_samples *r,
			       const struct handout *h)
{
	samples_add(&r->total, h->restore_ms);
	samples_add(&r->host, h->restore.host_ms);
	samples_add(&r->guest, h->restore.guest_ms);
	samples_add(&r->prefetched_pages, h->restore.prefetched_pages);
	samples_add(&r->network, h->restore.network_ms);
}

/* Every sample of @from added to @into. */
static void append_samples(struct samples *into, const struct samples *from)
{
	for (size_t k = 0; k < from->n; k++)
		samples_add(into, from->v[k]);
}

static void restore_samples_append(struct restore_samples *into,
				   const struct restore_samples *from)
{
	append_samples(&into->total, &from->total);
	append_samples(&into->host, &from->host);
	append_samples(&into->guest, &from->guest);
	append_samples(&into->prefetched_pages, &from->prefetched_pages);
	append_samples(&into->network, &from->network);
}

void bench_restore_samples_free(struct restore_samples *r)
{
	samples_free(&r->total);
	samples_free(&r->host);
	samples_free(&r->guest);
	samples_free(&r->prefetched_pages);
	samples_free(&r->network);
}

void bench_report_restores(struct bench *b, const char *group,
			   const char *label, const struct restore_samples *r,
			   const char *context)
{
	struct summary pages;
	char name[160], text[1024];

	samples_summarize(&r->prefetched_pages, &pages);
	bench_note(
		b, text, sizeof(text),
		"restore_ms: VMM start -> agent answered, identity pushed; %s",
		context);
	report_add_samples(b->report, group, label, "ms", &r->total, text);
	snprintf(name, sizeof(name), "%s: host side", label);
	bench_note(
		b, text, sizeof(text),
		"restore.host_ms: VMM fork, exec and setup (page-in: P50 %.0f "
		"pages prefetched), state restore; %s",
		pages.p50, context);
	report_add_samples(b->report, group, name, "ms", &r->host, text);
	snprintf(name, sizeof(name), "%s: guest side", label);
	bench_note(
		b, text, sizeof(text),
		"restore.guest_ms: state restored -> the agent's first answer, "
		"then the identity round trip; %s",
		context);
	report_add_samples(b->report, group, name, "ms", &r->guest, text);
}

/* ---- handouts: warm pool and on demand ---------------------------------- */

struct round {
	pthread_barrier_t *go;
	const struct thawd *d;
	const char *template;
	enum handout_until until;
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
	    (r->until == UNTIL_EXEC_TRUE
		     ? thawd_create_exec(c, r->template, &r->got, r->err,
					 sizeof(r->err))
		     : thawd_handout(c, r->template, &r->got, r->err,
				     sizeof(r->err))) &&
	    !r->err[0])
		snprintf(r->err, sizeof(r->err), "handout failed");
	thaw_client_close(c);
	return NULL;
}

int bench_handout_rounds(const struct thawd *d, const char *template,
			 int concurrency, int handouts, long warm,
			 enum handout_until until, struct samples *s,
			 struct restore_samples *restores, char *err,
			 size_t errlen)
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
					       .template = template,
					       .until = until };
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
				bench_restore_samples_add(restores, &r[i].got);
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
 * @restores gets the daemon's restores at concurrency 1, which the cold
 * boot and the floor are compared with.
 */
void bench_handouts(struct bench *b, bool warm,
		    struct restore_samples *restores)
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
		struct samples s = { 0 };
		struct restore_samples daemon_restores = { 0 };
		const struct daemon_spec spec = { .max_sandboxes =
							  (unsigned)n * 2 + 8 };
		struct thawd d;

		snprintf(name, sizeof(name), "%s, concurrency %d",
			 warm ? "warm pool" : "on demand (pool empty)", n);
		bench_progress("%s: %s, %d handouts", group, name,
			       b->size->handouts);
		if (bench_start_daemon(b, &d, &t, 1, &spec, why, sizeof(why))) {
			bench_fail(b, group, name, why);
			continue;
		}
		int ret = bench_handout_rounds(
			&d, "bench", n, b->size->handouts, warm ? n : 0,
			UNTIL_PING, &s, &daemon_restores, why, sizeof(why));
		bench_stop_daemon(&d);
		if (ret && !s.n) {
			bench_fail(b, group, name, why);
		} else {
			bench_note(
				b, text, sizeof(text),
				"create request sent -> agent answered a ping%s%s",
				ret ? "; stopped early: " : "", ret ? why : "");
			report_add_samples(b->report, group, name, "ms", &s,
					   text);
		}
		if (!warm && daemon_restores.total.n) {
			char label[128];

			snprintf(label, sizeof(label),
				 "restore in the daemon, concurrency %d", n);
			bench_report_restores(b, group, label, &daemon_restores,
					      "the handouts above");
		}
		if (!warm && !i) /* the caller's, to compare with */
			*restores = daemon_restores;
		else
			bench_restore_samples_free(&daemon_restores);
		samples_free(&s);
	}
}

/* ---- sustained restores ------------------------------------------------- */

struct churn {
	const struct thawd *d;
	double until;
	struct samples s;
	struct restore_samples restores;
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
		bench_restore_samples_add(&w->restores, &h);
		thaw_client_delete(c, h.id, w->err, sizeof(w->err));
	}
	thaw_client_close(c);
	return NULL;
}

void bench_sustained(struct bench *b)
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
	const struct daemon_spec spec = { .max_sandboxes = WORKERS * 2 + 4 };
	struct thawd d;

	bench_progress("sustained: %d s of create+ping+delete, %d at a time",
		       b->size->sustained_s, WORKERS);
	if (bench_start_daemon(b, &d, &t, 1, &spec, why, sizeof(why))) {
		bench_fail(b, "sustained", name, why);
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
	struct restore_samples restores = { 0 };
	why[0] = '\0';
	for (int i = 0; i < WORKERS; i++) {
		pthread_join(threads[i], NULL);
		append_samples(&all, &w[i].s);
		restore_samples_append(&restores, &w[i].restores);
		if (w[i].err[0] && !why[0])
			snprintf(why, sizeof(why), "%s", w[i].err);
		samples_free(&w[i].s);
		bench_restore_samples_free(&w[i].restores);
	}
	double seconds = (monotonic_ms() - start) / 1e3;
	bench_stop_daemon(&d);
	bench_note(
		b, text, sizeof(text),
		"%zu handouts, each restored on demand, in %.1f s by %d clients; "
		"%d CPUs%s%s",
		all.n, seconds, WORKERS, (int)sysconf(_SC_NPROCESSORS_ONLN),
		why[0] ? "; a failure: " : "", why);
	report_add_value(b->report, "sustained", name, "restores/s",
			 (double)all.n / seconds, text);
	report_add_samples(b->report, "sustained",
			   "handout latency while sustained", "ms", &all, text);
	if (restores.total.n)
		bench_report_restores(b, "sustained",
				      "restore in the daemon while "
				      "sustained",
				      &restores,
				      "the sustained handouts above");
	samples_free(&all);
	bench_restore_samples_free(&restores);
}
