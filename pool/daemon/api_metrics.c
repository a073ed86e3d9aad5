// SPDX-License-Identifier: Apache-2.0
/*
 * api_metrics.c - GET /metrics (Prometheus text) and GET /health, and the
 * count of answered requests by status that /metrics reports.
 *
 * Both are read under the daemon's lock in one pass, so a scrape sees one
 * consistent state: the pools' gauges and counters, their latency
 * histograms (a count per bucket in daemon.h, cumulative on output), the
 * requests answered so far, and admission (admission.h): whether the
 * daemon admits, why not, and the host readings it decided from - the
 * last ones, taken once a second, not fresh ones per scrape.  Every
 * reply passes through daemon_count_status (the HTTP engine's, so both
 * servers'), so no route can
 * forget to be counted.
 *
 * The exception is each handed-out sandbox's network counters (netns.h),
 * read from its maps after that pass, the sandboxes held meanwhile: a map
 * read per sandbox is a system call, which the daemon's lock is not held
 * across.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "pool/daemon/api_internal.h"
#include "common/clock.h"

enum MHD_Result api_get_health(struct MHD_Connection *conn, struct request *r,
			       struct daemon *d)
{
	pthread_mutex_lock(&d->lock);
	json_t *j = json_pack(
		"{s:s,s:i,s:I,s:b,s:b}", "status",
		d->stopping ? "stopping" : "ok", "sandboxes", (int)d->total,
		"uptime_s",
		(json_int_t)((monotonic_ns() - d->started_ns) / 1000000000),
		"admitting", d->admission.admitting, "jail", d->cfg.jail);
	/* Which limits apply: all three unless require_limits = false (or
	 * no template asks for a CPU quota). */
	json_t *limits = json_object();
	for (int c = 0; c < CGROUP_NR; c++)
		json_object_set_new(limits, cgroup_controller_name(c),
				    json_boolean(d->cgroups.dir[c][0]));
	json_object_set_new(j, "limits", limits);
	if (j && !d->admission.admitting)
		json_object_set_new(j, "overload",
				    json_string(d->admission.reason));
	pthread_mutex_unlock(&d->lock);
	return api_reply_json(conn, r, d->stopping ? 503 : 200, j);
}

/* Prometheus text: appends printf output to @t, growing it. */
static void put(struct http_text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct http_text *t, const char *fmt, ...)
{
	va_list ap;

	for (;;) {
		size_t room = t->cap - t->len;
		va_start(ap, fmt);
		int n = t->buf ? vsnprintf(t->buf + t->len, room, fmt, ap) : -1;
		va_end(ap);
		if (n >= 0 && (size_t)n < room) {
			t->len += n;
			return;
		}
		if (!http_text_reserve(t, t->cap ? t->cap * 2 : 8192))
			return;
	}
}

static void put_histogram(struct http_text *t, const char *name,
			  const char *template, const struct histogram *h)
{
	uint64_t cumulative = 0;

	for (int i = 0; i < HISTOGRAM_BUCKETS; i++) {
		cumulative += h->count[i];
		put(t, "%s_bucket{template=\"%s\",le=\"%g\"} %" PRIu64 "\n",
		    name, template, histogram_bounds[i], cumulative);
	}
	put(t, "%s_bucket{template=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name,
	    template, h->total);
	put(t, "%s_sum{template=\"%s\"} %.6f\n", name, template, h->sum);
	put(t, "%s_count{template=\"%s\"} %" PRIu64 "\n", name, template,
	    h->total);
}

/* The pools' latency histograms: the struct histogram at @field of each. */
static const struct {
	const char *name, *help;
	size_t field;
} pool_histograms[] = {
	{ "thaw_handout_seconds", "Time a create waited for its clone.",
	  offsetof(struct pool, handout_s) },
	{ "thaw_restore_seconds",
	  "VMM start to the agent's first answer and the clone's identity "
	  "pushed.",
	  offsetof(struct pool, restore_s) },
	{ "thaw_restore_host_seconds",
	  "A restore's host side: VMM start, page-in, state restore.",
	  offsetof(struct pool, restore_host_s) },
	{ "thaw_restore_guest_seconds",
	  "A restore's guest side: state restored to the agent's first "
	  "answer, then the clone's identity.",
	  offsetof(struct pool, restore_guest_s) },
	{ "thaw_network_setup_seconds",
	  "A clone's network: namespace, veth, TAP, addresses, routes, eBPF "
	  "policy; made before its VMM starts, in no restore time.",
	  offsetof(struct pool, network_setup_s) },
	{ "thaw_network_policy_update_seconds",
	  "A sandbox's policy written into its eBPF maps: a create's, or "
	  "POST /sandboxes/{id}/network.",
	  offsetof(struct pool, policy_update_s) },
	{ "thaw_checkpoint_pause_seconds",
	  "How long a checkpoint kept its sandbox's vCPUs paused.",
	  offsetof(struct pool, checkpoint_pause_s) },
	{ "thaw_checkpoint_seconds",
	  "A checkpoint's whole time in its VMM, files synced included.",
	  offsetof(struct pool, checkpoint_total_s) },
};

/* Each family of pool_histograms, a histogram per template. */
static void put_pool_histograms(struct http_text *t, const struct daemon *d)
{
	for (size_t h = 0;
	     h < sizeof(pool_histograms) / sizeof(pool_histograms[0]); h++) {
		const char *name = pool_histograms[h].name;

		put(t, "# HELP %s %s\n# TYPE %s histogram\n", name,
		    pool_histograms[h].help, name);
		for (size_t i = 0; i < d->nr_pools; i++) {
			const char *pool = (const char *)&d->pools[i];

			put_histogram(t, name, d->pools[i].t->name,
				      (const void *)(pool +
						     pool_histograms[h].field));
		}
	}
}

/* One metric family per template field: name, type, help, value. */
#define POOL_METRIC(out, dm, metric, kind, help, expr)                         \
	do {                                                                   \
		put(out, "# HELP " metric " " help "\n# TYPE " metric " " kind \
			 "\n");                                                \
		for (size_t i = 0; i < (dm)->nr_pools; i++) {                  \
			const struct pool *pl = &(dm)->pools[i];               \
			put(out, metric "{template=\"%s\"} %" PRIu64 "\n",     \
			    pl->t->name, (uint64_t)(expr));                    \
		}                                                              \
	} while (0)

/* Admission's state and what it read; call locked. */
static void put_admission(struct http_text *t, const struct daemon *d)
{
	const struct host_reading *h = &d->admission.host;
	double now_ms = monotonic_ms();

	put(t,
	    "# HELP thaw_admitting 1 while the daemon admits new sandboxes, "
	    "0 while the host is overloaded.\n"
	    "# TYPE thaw_admitting gauge\n"
	    "thaw_admitting %d\n",
	    d->admission.admitting);
	put(t, "# HELP thaw_host_pressure_avg10_percent PSI avg10 of each "
	       "watched line.\n"
	       "# TYPE thaw_host_pressure_avg10_percent gauge\n");
	for (int i = 0; i < PRESSURE_NR; i++)
		if (h->pressure_known[i])
			put(t,
			    "thaw_host_pressure_avg10_percent{resource=\"%s\","
			    "line=\"%s\"} %.2f\n",
			    pressure_sources[i].resource,
			    pressure_sources[i].line, h->pressure[i]);
	put(t, "# HELP thaw_host_memory_available_bytes MemAvailable.\n"
	       "# TYPE thaw_host_memory_available_bytes gauge\n");
	if (h->memory_known)
		put(t, "thaw_host_memory_available_bytes %" PRIu64 "\n",
		    h->mem_available_kib * 1024);
	put(t, "# HELP thaw_restore_slowdown Recent restores' median over the "
	       "first ones' (0: not known yet).\n"
	       "# TYPE thaw_restore_slowdown gauge\n");
	for (size_t i = 0; i < d->nr_pools; i++) {
		struct restore_slowdown s;

		restore_latency_slowdown(&d->pools[i].latency,
					 d->pools[i].t->name, now_ms, &s);
		put(t, "thaw_restore_slowdown{template=\"%s\"} %.2f\n",
		    s.template, s.factor);
	}
}

/* enum net_verdict's names in the metrics' "verdict" label. */
static const char *const verdict_names[] = {
	[NET_PASS_ALLOW_OUT] = "pass_allow_out",
	[NET_PASS_INTERNET] = "pass_internet",
	[NET_PASS_REPLY] = "pass_reply",
	[NET_PASS_DNS] = "pass_dns",
	[NET_PASS_INBOUND] = "pass_inbound",
	[NET_DROP_ALWAYS] = "drop_always",
	[NET_DROP_DENY_OUT] = "drop_deny_out",
	[NET_DROP_PRIVATE] = "drop_private",
	[NET_DROP_NO_INTERNET] = "drop_no_internet",
	[NET_DROP_MALFORMED] = "drop_malformed",
};
_Static_assert(sizeof(verdict_names) / sizeof(verdict_names[0]) == NET_VERDICTS,
	       "a name per verdict");

/* One network counter of every sandbox in @held whose read worked. */
static void put_net_family(struct http_text *t, const char *name,
			   const char *help, struct sandbox *const *held,
			   const struct net_counters *counts, const bool *ok,
			   size_t n, size_t field)
{
	put(t, "# HELP %s %s\n# TYPE %s counter\n", name, help, name);
	for (size_t i = 0; i < n; i++) {
		const uint64_t *v =
			(const void *)((const char *)&counts[i] + field);

		for (int k = 0; ok[i] && k < NET_VERDICTS; k++)
			put(t,
			    "%s{sandbox=\"%s\",verdict=\"%s\"} %" PRIu64 "\n",
			    name, held[i]->id, verdict_names[k], v[k]);
	}
}

/* The handed-out sandboxes' network counters; see the top of the file. */
static void put_network(struct http_text *t, struct daemon *d)
{
	struct sandbox **held = NULL;
	struct net_counters *counts = NULL;
	bool *ok = NULL;
	size_t n = 0, max = 0;

	pthread_mutex_lock(&d->lock);
	for (struct sandbox *c = d->leased; c; c = c->next)
		max += c->net_made;
	if (max) {
		held = calloc(max, sizeof(*held));
		counts = calloc(max, sizeof(*counts));
		ok = calloc(max, sizeof(*ok));
	}
	for (struct sandbox *c = d->leased; c && held && counts && ok;
	     c = c->next) {
		if (c->net_made) {
			c->refs++;
			held[n++] = c;
		}
	}
	pthread_mutex_unlock(&d->lock);
	if (max && n < max)
		t->failed = true; /* out of memory */
	for (size_t i = 0; i < n; i++) {
		char err[256];

		ok[i] = sandbox_net_counters(&held[i]->net, &counts[i], err,
					     sizeof(err)) == 0;
	}
	put_net_family(t, "thaw_sandbox_network_packets_total",
		       "Packets of a handed-out sandbox by the policy's "
		       "verdict.",
		       held, counts, ok, n,
		       offsetof(struct net_counters, packets));
	put_net_family(t, "thaw_sandbox_network_bytes_total",
		       "Bytes of a handed-out sandbox by the policy's verdict.",
		       held, counts, ok, n,
		       offsetof(struct net_counters, bytes));
	for (size_t i = 0; i < n; i++)
		sandbox_put(d, held[i]);
	free(held);
	free(counts);
	free(ok);
}

enum MHD_Result api_get_metrics(struct MHD_Connection *conn, struct request *r,
				struct daemon *d)
{
	struct http_text t = { 0 };

	pthread_mutex_lock(&d->lock);
	POOL_METRIC(&t, d, "thaw_pool_ready", "gauge",
		    "Restored clones waiting in the pool.", pl->ready);
	POOL_METRIC(&t, d, "thaw_pool_restoring", "gauge",
		    "Clones being restored.", pl->restoring + pl->on_demand);
	POOL_METRIC(&t, d, "thaw_sandboxes_leased", "gauge",
		    "Sandboxes handed out.", pl->leased);
	POOL_METRIC(&t, d, "thaw_handouts_total", "counter",
		    "Sandboxes handed out since start.", pl->handouts);
	POOL_METRIC(&t, d, "thaw_restore_failures_total", "counter",
		    "Restores that failed.", pl->restore_failures);
	POOL_METRIC(&t, d, "thaw_capacity_rejections_total", "counter",
		    "Creates refused at max_total or max_sandboxes.",
		    pl->rejections);
	POOL_METRIC(&t, d, "thaw_sandboxes_expired_total", "counter",
		    "Sandboxes killed when their timeout passed.", pl->expired);
	POOL_METRIC(&t, d, "thaw_overload_rejections_total", "counter",
		    "Creates refused while the host was overloaded.",
		    pl->overload_rejections);
	POOL_METRIC(&t, d, "thaw_checkpoints_total", "counter",
		    "Checkpoints written (by checkpoint, fork and pause).",
		    pl->checkpoints);
	POOL_METRIC(&t, d, "thaw_checkpoint_failures_total", "counter",
		    "Checkpoints that failed.", pl->checkpoint_failures);
	POOL_METRIC(&t, d, "thaw_forks_total", "counter",
		    "Sandboxes asked for by forks.", pl->forks);
	POOL_METRIC(&t, d, "thaw_rollbacks_total", "counter",
		    "Sandboxes rolled back.", pl->rollbacks);
	POOL_METRIC(&t, d, "thaw_pauses_total", "counter", "Sandboxes paused.",
		    pl->pauses);
	POOL_METRIC(&t, d, "thaw_resumes_total", "counter",
		    "Sandboxes resumed.", pl->resumes);
	put_admission(&t, d);
	put_pool_histograms(&t, d);
	put(&t, "# HELP thaw_http_requests_total Answered requests by status.\n"
		"# TYPE thaw_http_requests_total counter\n");
	for (int i = 0; i < HTTP_CODES; i++)
		put(&t, "thaw_http_requests_total{code=\"%u\"} %" PRIu64 "\n",
		    daemon_counted_codes[i], d->http_count[i]);
	put(&t,
	    "# HELP thaw_api_memory_bytes Memory requests hold, of "
	    "api_memory_budget_bytes.\n"
	    "# TYPE thaw_api_memory_bytes gauge\n"
	    "thaw_api_memory_bytes %" PRIu64 "\n"
	    "# HELP thaw_api_memory_budget_bytes api_memory_budget_bytes.\n"
	    "# TYPE thaw_api_memory_budget_bytes gauge\n"
	    "thaw_api_memory_budget_bytes %" PRIu64 "\n",
	    d->api_memory_used, d->cfg.api_memory_budget_bytes);
	pthread_mutex_unlock(&d->lock);
	put_network(&t, d);
	if (t.failed) {
		free(t.buf);
		return MHD_NO;
	}
	return api_reply_text(conn, r, 200, "text/plain; version=0.0.4", t.buf);
}
