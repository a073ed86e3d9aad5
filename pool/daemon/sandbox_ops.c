// SPDX-License-Identifier: Apache-2.0
/*
 * sandbox_ops.c - the service core's verbs on sandboxes (sandbox_ops.h):
 * what thaw's API and E2B's listener both do, written once.
 *
 * Every verb takes the daemon's lock only to copy or set a few fields, as
 * the rest of the daemon does (daemon.h); the slow steps (a handout, a
 * restore, a policy written to a sandbox's maps) run outside it on a held
 * sandbox.
 */
#include "pool/daemon/sandbox_ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "pool/daemon/sandbox_args.h"

/* ---- create -------------------------------------------------------------- */

/* Held, just handed out @c made what @req asks; POOL_OK or its error. */
static enum pool_error finish_create(struct daemon *d,
				     const struct sandbox_create *req,
				     struct sandbox *c, char *err,
				     size_t errlen)
{
	struct net_policy policy;
	bool set = false;
	enum pool_error e = POOL_OK;

	if (req->policy)
		e = req->policy(req->arg, c->pool->t, c->net_made, &policy,
				&set, err, errlen);
	/* A clone restored without its network cannot be handed out with a
	 * policy it would not enforce. */
	if (e == POOL_OK && set && !c->net_made) {
		snprintf(err, errlen, "sandbox %s has no network", c->id);
		e = POOL_FAILED;
	}
	if (e == POOL_OK && set)
		e = sandbox_set_policy(d, c, &policy, err, errlen);
	if (e == POOL_OK && req->attach)
		e = req->attach(req->arg, c, err, errlen);
	return e;
}

enum pool_error sandbox_create(struct daemon *d, struct sandbox_create *req,
			       struct fork_result *out, char *err,
			       size_t errlen)
{
	enum pool_error e;
	uint32_t n = req->template ? 1 : req->count;

	if (req->template) {
		out[0] = (struct fork_result){ .error = POOL_OK };
		e = pool_handout(pool_find(d, req->template->name),
				 req->timeout_s, req->env, &out[0].c, err,
				 errlen);
	} else {
		e = sandboxes_from_snapshot(d, req->snapshot, n, req->timeout_s,
					    req->env, out, err, errlen);
		env_free(req->env);
	}
	req->env = NULL;
	if (e != POOL_OK)
		return e;
	for (uint32_t i = 0; i < n; i++) {
		struct sandbox *c = out[i].c;
		/* One made alone answers with its error; one of a list in
		 * its entry. */
		char *why = req->template ? err : out[i].message;
		size_t whylen = req->template ? errlen : sizeof(out[i].message);

		if (!c)
			continue;
		out[i].error = finish_create(d, req, c, why, whylen);
		if (out[i].error == POOL_OK)
			continue;
		sandbox_release(d, c->id);
		sandbox_put(d, c);
		out[i].c = NULL;
	}
	return req->template ? out[0].error : POOL_OK;
}

/* ---- a held sandbox ------------------------------------------------------ */

const struct template_config *sandbox_template(const struct sandbox *c)
{
	return c->pool->t;
}

char *const *sandbox_env(const struct sandbox *c)
{
	return c->env;
}

void sandbox_set_lease(struct daemon *d, struct sandbox *c, uint32_t timeout_s,
		       bool extend_only)
{
	uint64_t ends = lease_deadline_ns(monotonic_ns(), timeout_s);

	pthread_mutex_lock(&d->lock);
	if (!extend_only || ends > c->expires_ns)
		c->expires_ns = ends;
	pthread_mutex_unlock(&d->lock);
}

bool sandbox_busy(struct sandbox *c, char *err, size_t errlen)
{
	struct daemon *d = c->pool->d;
	bool busy;

	pthread_mutex_lock(&d->lock);
	busy = c->paused || c->op == SANDBOX_REPLACING;
	if (c->paused && c->op != SANDBOX_REPLACING)
		snprintf(err, errlen,
			 "sandbox %s is paused: resume it first (POST "
			 "/sandboxes/%s/resume)",
			 c->id, c->id);
	else if (busy)
		snprintf(err, errlen,
			 "sandbox %s is being %s: try again once that is done",
			 c->id, c->op_name);
	pthread_mutex_unlock(&d->lock);
	return busy;
}

bool sandbox_network_defaults(struct sandbox *c, struct net_policy *defaults,
			      char *err, size_t errlen)
{
	if (!c->net_made) {
		snprintf(err, errlen,
			 "sandbox %s has no network (template \"%s\": network "
			 "= none)",
			 c->id, c->pool->t->name);
		return false;
	}
	config_net_policy(c->pool->t, defaults);
	return true;
}

/* Orders policy writes: see sandbox_ops.h. */
static pthread_mutex_t policy_lock = PTHREAD_MUTEX_INITIALIZER;

enum pool_error sandbox_set_policy(struct daemon *d, struct sandbox *c,
				   const struct net_policy *policy, char *err,
				   size_t errlen)
{
	char why[256];
	int ret;

	pthread_mutex_lock(&policy_lock);
	double started_ms = monotonic_ms();
	ret = sandbox_net_set_policy(&c->net, policy, why, sizeof(why));
	if (ret == 0) {
		double took_ms = monotonic_ms() - started_ms;

		pthread_mutex_lock(&d->lock);
		c->policy = *policy;
		histogram_add(&c->pool->policy_update_s, took_ms / 1e3);
		pthread_mutex_unlock(&d->lock);
	}
	pthread_mutex_unlock(&policy_lock);
	if (ret < 0) {
		snprintf(err, errlen,
			 "sandbox %s: cannot set its network "
			 "policy: %s",
			 c->id, why);
		return POOL_FAILED;
	}
	return POOL_OK;
}

/* ---- errors at the HTTP edge --------------------------------------------- */

unsigned pool_error_status(enum pool_error e)
{
	switch (e) {
	case POOL_OK:
		return 0;
	case POOL_FULL:
		return 429;
	case POOL_STOPPING:
	case POOL_OVERLOADED:
	case POOL_NO_MEMORY:
		return 503;
	case POOL_TIMED_OUT:
		return 504;
	case POOL_BAD_REQUEST:
		return 400;
	case POOL_NOT_FOUND:
		return 404;
	case POOL_CONFLICT:
		return 409;
	case POOL_TOO_LARGE:
		return 413;
	case POOL_GUEST_ERROR: /* a front end maps its errno, not this */
	case POOL_RESTORE_FAILED:
	case POOL_FAILED:
		break;
	}
	return 500;
}

/* ---- views --------------------------------------------------------------- */

/* @c's view into @v; under the lock. */
static void view_locked(struct sandbox *c, struct sandbox_view *v)
{
	*v = (struct sandbox_view){
		.c = c,
		.template = c->pool->t,
		.created_ms = c->created_ms,
		.expires_ms = lease_expires_wall_ms(
			c->expires_ns, monotonic_ns(), realtime_ms()),
		.state = sandbox_state_name(c),
		.paused = c->paused,
		.stopped = c->stopped,
		.pid = c->vmm.pid > 0 ? c->vmm.pid : 0,
		.restore_ms = c->restore_ms,
		.handout_ms = c->handout_ms,
		.identity_ms = c->identity_ms,
		.restore_host_ms = c->restore_host_ms,
		.restore_guest_ms = c->restore_guest_ms,
		.network_ms = c->network_ms,
		.restore_phases = c->restore_phases,
		.net_made = c->net_made,
		.host_address = c->net.host_address,
		.policy = c->policy,
	};
	memcpy(v->id, c->id, sizeof(v->id));
	memcpy(v->snapshot, c->snapshot_id, sizeof(v->snapshot));
	memcpy(v->stop_reason, c->stop_reason, sizeof(v->stop_reason));
	memcpy(v->ext, c->ext, sizeof(v->ext));
}

void sandbox_view(struct daemon *d, struct sandbox *c, struct sandbox_view *v)
{
	pthread_mutex_lock(&d->lock);
	view_locked(c, v);
	pthread_mutex_unlock(&d->lock);
}

int sandboxes_view(struct daemon *d, struct sandbox_view **views, size_t *n)
{
	size_t count = 0;

	*views = NULL;
	*n = 0;
	pthread_mutex_lock(&d->lock);
	for (const struct sandbox *c = d->leased; c; c = c->next)
		count++;
	struct sandbox_view *v = count ? malloc(count * sizeof(*v)) : NULL;
	if (count && !v) {
		pthread_mutex_unlock(&d->lock);
		return -ENOMEM;
	}
	for (struct sandbox *c = d->leased; c; c = c->next) {
		c->refs++;
		view_locked(c, &v[(*n)++]);
	}
	pthread_mutex_unlock(&d->lock);
	*views = v;
	return 0;
}

void sandbox_views_put(struct daemon *d, struct sandbox_view *views, size_t n)
{
	for (size_t i = 0; i < n; i++)
		sandbox_put(d, views[i].c);
	free(views);
}

int pools_view(struct daemon *d, struct pool_view **views, size_t *n)
{
	struct pool_view *v = calloc(d->nr_pools ? d->nr_pools : 1, sizeof(*v));

	*views = v;
	*n = 0;
	if (!v)
		return -ENOMEM;
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < d->nr_pools; i++) {
		const struct pool *pl = &d->pools[i];

		v[i] = (struct pool_view){
			.template = pl->t,
			.ready = pl->ready,
			.restoring = pl->restoring + pl->on_demand,
			.leased = pl->leased,
			.handouts = pl->handouts,
		};
		memcpy(v[i].snapshot, pl->snapshot_id, sizeof(v[i].snapshot));
	}
	*n = d->nr_pools;
	pthread_mutex_unlock(&d->lock);
	return 0;
}

/* ---- extension slots ----------------------------------------------------- */

void *sandbox_ext(struct daemon *d, struct sandbox *c, unsigned slot)
{
	pthread_mutex_lock(&d->lock);
	void *ext = c->ext[slot];
	pthread_mutex_unlock(&d->lock);
	return ext;
}

void *sandbox_ext_attach(struct daemon *d, struct sandbox *c, unsigned slot,
			 void *ext)
{
	pthread_mutex_lock(&d->lock);
	if (!c->ext[slot])
		c->ext[slot] = ext;
	void *has = c->ext[slot];
	pthread_mutex_unlock(&d->lock);
	return has;
}

size_t sandboxes_with_ext(struct daemon *d, unsigned slot, sandbox_id **ids)
{
	size_t nr_ids = 0, n = 0;

	pthread_mutex_lock(&d->lock);
	for (const struct sandbox *c = d->leased; c; c = c->next)
		nr_ids += c->ext[slot] != NULL;
	*ids = nr_ids ? malloc(nr_ids * sizeof(**ids)) : NULL;
	for (const struct sandbox *c = *ids ? d->leased : NULL; c; c = c->next)
		if (c->ext[slot])
			memcpy((*ids)[n++], c->id, sizeof(**ids));
	pthread_mutex_unlock(&d->lock);
	return n;
}
