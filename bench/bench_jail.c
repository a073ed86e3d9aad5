// SPDX-License-Identifier: Apache-2.0
/*
 * bench_jail.c - what the VMM's jail costs: restores on
 * demand and warm handouts with every VMM jailed, then with jail = false.
 *
 * The jail is built while a VMM starts (its namespaces, a root of its own,
 * capabilities dropped), so it can only show in a restore's host side
 * (restore.host_ms: VMM fork, exec and setup, state restore); a warm
 * handout's clone was restored before the request came, so it should not
 * show there at all.  Each mode gets a daemon of its own, one after the
 * other on the run's state directory, so both restore the same snapshot
 * with the same working set; the daemon has two templates of that guest,
 * one without ready clones (restores on demand) and one keeping one ready
 * (warm handouts), both driven at concurrency 1 for as many handouts as
 * the handout figures' N.  The difference of the two modes' P50s is the
 * figure the issue sets a goal for.
 */
#include <stdio.h>

#include "bench/bench.h"

#define GROUP "jail"
#define SIZE_NOTE "concurrency 1, as many as each handout figure"

/* One mode's daemon and what it measured. */
struct jail_mode {
	const char *label;  /* in the figures' names */
	const char *config; /* in their notes */
	bool no_jail;
	struct restore_samples restores;
	struct samples warm;
	char restores_why[1024], warm_why[1024]; /* what stopped each, or "" */
};

/*
 * Restores on demand, then warm handouts, on a daemon in @m's mode.  The
 * warm pool's first clone is waited for first, so that its restore does
 * not run beside the first one timed on demand.
 */
static void jail_measure(struct bench *b, struct jail_mode *m)
{
	const struct template_spec t[] = {
		{ .name = "demand",
		  .mem_mib = TEMPLATE_MEM_MIB,
		  .min_ready = 0,
		  .max_total = 2 },
		{ .name = "warm",
		  .mem_mib = TEMPLATE_MEM_MIB,
		  .min_ready = 1,
		  .max_total = 2 },
	};
	const struct daemon_spec spec = { .max_sandboxes = 8,
					  .no_jail = m->no_jail };
	int n = b->size->handouts;
	/* Not reported: the handouts on demand are the restore figures'
	 * (whole, in the daemon), and a warm clone's restore ran before its
	 * request, timed by nothing a user waits for. */
	struct samples demand = { 0 };
	struct restore_samples before_request = { 0 };
	struct thaw_client *c;
	struct thawd d;

	bench_progress("jail: %s, %d restores on demand and %d warm handouts",
		       m->label, n, n);
	if (bench_start_daemon(b, &d, t, 2, &spec, m->restores_why,
			       sizeof(m->restores_why))) {
		snprintf(m->warm_why, sizeof(m->warm_why), "%s",
			 m->restores_why);
		return;
	}
	c = thawd_connect(&d, m->restores_why, sizeof(m->restores_why));
	if (c && !thawd_wait_ready(c, "warm", 1, 600, m->restores_why,
				   sizeof(m->restores_why)))
		bench_handout_rounds(&d, "demand", 1, n, 0, UNTIL_PING, &demand,
				     &m->restores, m->restores_why,
				     sizeof(m->restores_why));
	thaw_client_close(c);
	bench_handout_rounds(&d, "warm", 1, n, 1, UNTIL_PING, &m->warm,
			     &before_request, m->warm_why, sizeof(m->warm_why));
	bench_stop_daemon(&d);
	samples_free(&demand);
	bench_restore_samples_free(&before_request);
}

/* @m's restores on demand, whole and split, or why there are none. */
static void jail_report_restores(struct bench *b, const struct jail_mode *m)
{
	char name[96], context[1200];

	snprintf(name, sizeof(name), "restore on demand, %s", m->label);
	if (!m->restores.total.n) {
		bench_fail(b, GROUP, name, m->restores_why);
		return;
	}
	snprintf(context, sizeof(context), "%s; %s%s%s", m->config, SIZE_NOTE,
		 m->restores_why[0] ? "; stopped early: " : "",
		 m->restores_why);
	bench_report_restores(b, GROUP, name, &m->restores, context);
}

/* @m's warm handouts, or why there are none. */
static void jail_report_warm(struct bench *b, const struct jail_mode *m)
{
	char name[96], text[1400];

	snprintf(name, sizeof(name), "warm handout, %s", m->label);
	if (!m->warm.n) {
		bench_fail(b, GROUP, name, m->warm_why);
		return;
	}
	bench_note(b, text, sizeof(text),
		   "create request sent -> agent answered a ping; %s; %s%s%s",
		   m->config, SIZE_NOTE,
		   m->warm_why[0] ? "; stopped early: " : "", m->warm_why);
	report_add_samples(b->report, GROUP, name, "ms", &m->warm, text);
}

/*
 * P50 of @jailed - P50 of @unjailed as figure @name, against the jail's
 * @goal; a failure when either has no samples.
 */
static void jail_difference(struct bench *b, const char *name,
			    const struct samples *jailed,
			    const struct samples *unjailed, const char *goal)
{
	struct summary on, off;
	char text[512];

	if (!jailed->n || !unjailed->n) {
		bench_fail(b, GROUP, name, "needs both modes' figures (above)");
		return;
	}
	samples_summarize(jailed, &on);
	samples_summarize(unjailed, &off);
	bench_note(
		b, text, sizeof(text),
		"P50 jailed %.2f ms - P50 --no-jail %.2f ms; the jail's goal: %s",
		on.p50, off.p50, goal);
	report_add_value(b->report, GROUP, name, "ms", on.p50 - off.p50, text);
}

void bench_jail(struct bench *b)
{
	enum { JAILED, NO_JAIL, MODES };
	struct jail_mode modes[MODES] = {
		[JAILED] = { .label = "jailed",
			     .config = "jail = true (the default)" },
		[NO_JAIL] = { .label = "--no-jail",
			      .config = "jail = false",
			      .no_jail = true },
	};

	for (int i = 0; i < MODES; i++)
		jail_measure(b, &modes[i]);
	for (int i = 0; i < MODES; i++)
		jail_report_restores(b, &modes[i]);
	for (int i = 0; i < MODES; i++)
		jail_report_warm(b, &modes[i]);
	jail_difference(b, "jailed - --no-jail: restore host side (P50)",
			&modes[JAILED].restores.host,
			&modes[NO_JAIL].restores.host, "< 2 ms");
	jail_difference(b, "jailed - --no-jail: warm handout (P50)",
			&modes[JAILED].warm, &modes[NO_JAIL].warm,
			"nothing added");
	for (int i = 0; i < MODES; i++) {
		bench_restore_samples_free(&modes[i].restores);
		samples_free(&modes[i].warm);
	}
}
