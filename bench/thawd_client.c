// SPDX-License-Identifier: Apache-2.0
/*
 * thawd_client.c - starting thawd for a bench scenario and calling its API.
 *
 * The daemon is a child of the bench, run by pool/client's thawd_process.h
 * with PR_SET_PDEATHSIG so a bench killed mid-run takes its daemon, and the
 * daemon its clones, along.  HTTP goes through the daemon's client
 * library; times are common/clock.h's monotonic ones.
 */
#include "bench/thawd_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

#define START_LIMIT_S 900 /* a first start builds the template's snapshot */
#define STOP_LIMIT_S 120
#define CALL_TIMEOUT_S 600

/* @spec's config text for @templates into @text (malloc'd), or -ENOMEM. */
static int config_text(const struct thawd *d, const char *kernel,
		       const char *initrd,
		       const struct template_spec *templates, size_t n,
		       const struct daemon_spec *spec, char **text)
{
	size_t size;
	FILE *f = open_memstream(text, &size);

	if (!f)
		return -ENOMEM;
	fprintf(f, "[daemon]\nstate_dir = %s\nsocket = %s\n", d->state_dir,
		d->socket);
	fprintf(f, "max_sandboxes = %u\nrestore_timeout_s = 600\n",
		spec->max_sandboxes);
	if (!spec->admit_on_load)
		fprintf(f,
			"admit_cpu_pressure = 0\nadmit_restore_slowdown = 0\n");
	if (spec->no_jail)
		fprintf(f, "jail = false\n");
	if (spec->e2b_port)
		fprintf(f, "token = %s\ne2b_listen = 127.0.0.1:%d\n", d->token,
			spec->e2b_port);
	for (size_t i = 0; i < n; i++) {
		const struct template_spec *t = &templates[i];

		fprintf(f, "\n[template %s]\nkernel = %s\ninitrd = %s\n",
			t->name, kernel, initrd);
		/* Idle sandboxes must outlive the longest scenario. */
		fprintf(f, "timeout_s = 7200\n");
		if (t->mem_mib)
			fprintf(f, "mem_mib = %u\n", t->mem_mib);
		fprintf(f, "min_ready = %u\n", t->min_ready);
		if (t->max_total)
			fprintf(f, "max_total = %u\n", t->max_total);
		if (t->restore_parallel)
			fprintf(f, "restore_parallel = %u\n",
				t->restore_parallel);
		if (t->page_in)
			fprintf(f, "page_in = %s\n", t->page_in);
		if (t->network)
			fprintf(f, "network = %s\n", t->network);
	}
	return fclose(f) ? -ENOMEM : 0;
}

int thawd_start(struct thawd *d, const char *thaw, const char *state_dir,
		const char *kernel, const char *initrd,
		const struct template_spec *templates, size_t n,
		const struct daemon_spec *spec, char *err, size_t errlen)
{
	char config[PATH_MAX + 16], log[PATH_MAX + 16], banner[PATH_MAX + 64];
	char *text = NULL;

	memset(d, 0, sizeof(*d));
	snprintf(d->state_dir, sizeof(d->state_dir), "%s", state_dir);
	snprintf(d->socket, sizeof(d->socket), "%s/thawd.sock", state_dir);
	snprintf(config, sizeof(config), "%s/bench.ini", state_dir);
	snprintf(log, sizeof(log), "%s/thawd.log", state_dir);
	if (spec->e2b_port)
		snprintf(d->token, sizeof(d->token), "%s", THAWD_E2B_TOKEN);
	if (config_text(d, kernel, initrd, templates, n, spec, &text)) {
		snprintf(err, errlen, "%s: out of memory", config);
		return -1;
	}
	/* One log for the run's daemons, each after its own line: a run
	 * with figures not measured keeps it (thaw-bench.c). */
	snprintf(banner, sizeof(banner),
		 "--- thaw-bench: a daemon starts on %s ---", config);
	const struct thawd_process_spec s = {
		.thaw = thaw,
		.config = config,
		.config_text = text,
		.log = log,
		.banner = banner,
		.socket = d->socket,
		.token = d->token,
		.start_limit_s = START_LIMIT_S,
		.die_with_parent = true,
	};
	int ret = thawd_process_start(&d->proc, &s, err, errlen);
	free(text);
	return ret ? -1 : 0;
}

int thawd_stop(struct thawd *d, char *err, size_t errlen)
{
	return thawd_process_stop(&d->proc, STOP_LIMIT_S, err, errlen) ? -1 : 0;
}

struct thaw_client *thawd_connect(const struct thawd *d, char *err,
				  size_t errlen)
{
	return thaw_client_open(
		&(struct thaw_client_options){ .socket = d->socket,
					       .token = d->token,
					       .timeout_s = CALL_TIMEOUT_S },
		err, errlen);
}

int thawd_pool(struct thaw_client *c, const char *name, struct thaw_template *t,
	       char *err, size_t errlen)
{
	struct thaw_template *list;
	size_t n;
	int ret = -1;

	if (thaw_client_templates(c, &list, &n, err, errlen))
		return -1;
	for (size_t i = 0; i < n && ret; i++)
		if (!strcmp(list[i].name, name)) {
			*t = list[i];
			ret = 0;
		}
	if (ret)
		snprintf(err, errlen, "GET /templates: no template \"%s\"",
			 name);
	free(list);
	return ret;
}

int thawd_wait_ready(struct thaw_client *c, const char *name, long ready,
		     double limit_s, char *err, size_t errlen)
{
	double until = monotonic_ms() + limit_s * 1e3;
	struct thaw_template t = { 0 };

	for (;;) {
		if (thawd_pool(c, name, &t, err, errlen))
			return -1;
		if (t.ready >= ready && !t.restoring)
			return 0;
		if (monotonic_ms() > until) {
			snprintf(err, errlen,
				 "template %s: %ld ready, %ld restoring after "
				 "%.0f s, want %ld ready",
				 name, t.ready, t.restoring, limit_s, ready);
			return -1;
		}
		sleep_ms(20);
	}
}

/* POST /sandboxes as @spec asks into @h (its ms left to the caller). */
static int create_into(struct thaw_client *c, const struct thaw_create *spec,
		       struct handout *h, char *err, size_t errlen)
{
	struct thaw_sandbox s;

	if (thaw_client_create(c, spec, &s, err, errlen))
		return -1;
	snprintf(h->id, sizeof(h->id), "%s", s.id);
	h->restore_ms = s.restore_ms;
	h->restore = s.restore;
	return 0;
}

int thawd_handout(struct thaw_client *c, const char *template,
		  struct handout *h, char *err, size_t errlen)
{
	const struct thaw_create spec = { .template = template };

	return thawd_create_ping(c, &spec, h, err, errlen);
}

int thawd_create_ping(struct thaw_client *c, const struct thaw_create *spec,
		      struct handout *h, char *err, size_t errlen)
{
	double start = monotonic_ms();

	if (create_into(c, spec, h, err, errlen))
		return -1;
	int ret = thaw_client_ping(c, h->id, NULL, err, errlen);
	h->ms = monotonic_ms() - start;
	return ret ? -1 : 0;
}

int thawd_create_exec(struct thaw_client *c, const char *template,
		      struct handout *h, char *err, size_t errlen)
{
	const struct thaw_create spec = { .template = template };
	double start = monotonic_ms(), exec_ms;

	if (create_into(c, &spec, h, err, errlen))
		return -1;
	int ret = thawd_exec_true(c, h->id, &exec_ms, err, errlen);
	h->ms = monotonic_ms() - start;
	return ret;
}

/* Whether the command exited 0, into the bool @arg. */
static int exited_zero(const struct thaw_exec_event *e, void *arg, char *err,
		       size_t errlen)
{
	(void)err;
	(void)errlen;
	if (e->type == THAW_EXEC_EXIT)
		*(bool *)arg = !e->exit_code && !e->signal && !e->timed_out;
	return 0;
}

int thawd_exec_true(struct thaw_client *c, const char *id, double *ms,
		    char *err, size_t errlen)
{
	const char *const argv[] = { "true", NULL };

	return thawd_exec(c, id, argv, 0, ms, err, errlen);
}

int thawd_exec(struct thaw_client *c, const char *id, const char *const argv[],
	       unsigned timeout_s, double *ms, char *err, size_t errlen)
{
	const struct thaw_exec spec = { .argv = argv,
					.buffered = true,
					.timeout_s = timeout_s };
	bool ok = false;
	double start = monotonic_ms();
	int ret = thaw_client_exec(c, id, &spec, exited_zero, &ok, err, errlen);

	if (ms)
		*ms = monotonic_ms() - start;
	if (ret)
		return -1;
	if (!ok) {
		size_t last = 0; /* a script's text says most: sh -c TEXT */

		while (argv[last + 1])
			last++;
		snprintf(err, errlen, "sandbox %s: `%s` did not exit 0", id,
			 argv[last]);
	}
	return ok ? 0 : -1;
}
