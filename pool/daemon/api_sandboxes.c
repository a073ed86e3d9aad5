// SPDX-License-Identifier: Apache-2.0
/*
 * api_sandboxes.c - the sandbox routes of pool/API.md: create (a handout
 * from a template's pool), list, get, delete, a new timeout, ping; and
 * the templates.
 *
 * Each works on the daemon's state under its lock, briefly: the one slow
 * step, waiting for a clone, is pool_handout()'s, whose pool error
 * api_reply_pool_error() turns into a status.  A sandbox a route looks up is
 * held (sandbox_get) until its answer is built, so a concurrent delete or
 * expiry cannot free it under us; deleting kills its VMM at once even
 * while an exec holds it.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "api_internal.h"
#include "clock.h"

static void format_time(int64_t ms, char *out, size_t len)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char base[32];

	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", gmtime_r(&s, &tm));
	snprintf(out, len, "%s.%03dZ", base, (int)(ms % 1000));
}

/* Milliseconds to two decimals: JSON readers need not see float noise. */
static double hundredths(double ms)
{
	return (double)(int64_t)(ms * 100 + 0.5) / 100;
}

/* The sandbox's "restore" object of API.md: restore_ms in phases. */
static json_t *restore_phases_json(const struct sandbox *c)
{
	const struct vmm_restore_phases *p = &c->restore_phases;

	return json_pack("{s:f,s:f,s:f,s:I,s:f,s:f,s:f,s:f}", "host_ms",
			 hundredths(c->restore_host_ms), "vmm_start_ms",
			 hundredths(p->process_start_ms + p->setup_ms),
			 "page_in_ms", hundredths(p->page_in_ms),
			 "prefetched_pages", (json_int_t)p->prefetched_pages,
			 "state_restore_ms", hundredths(p->state_restore_ms),
			 "guest_ms", hundredths(c->restore_guest_ms),
			 "agent_ms", hundredths(p->agent_ms), "identity_ms",
			 hundredths(c->identity_ms));
}

/* The sandbox object of API.md; call with the daemon locked. */
static json_t *sandbox_json(const struct sandbox *c, bool detail)
{
	char created[40], expires[40];

	format_time(c->created_ms, created, sizeof(created));
	format_time(lease_expires_wall_ms(c->expires_ns, monotonic_ns(),
					  realtime_ms()),
		    expires, sizeof(expires));
	json_t *j = json_pack(
		"{s:s,s:s,s:s,s:s,s:f,s:o,s:f,s:s}", "id", c->id, "template",
		c->pool->t->name, "created", created, "expires", expires,
		"restore_ms", hundredths(c->restore_ms), "restore",
		restore_phases_json(c), "handout_ms", hundredths(c->handout_ms),
		"state", c->stopped ? "stopped" : "running");
	if (j && detail) {
		json_object_set_new(j, "pid", json_integer(c->vmm.pid));
		if (c->stopped)
			json_object_set_new(j, "stop_reason",
					    json_string(c->stop_reason));
	}
	return j;
}

/* Answers with held sandbox @c's object, and lets go of it. */
static enum MHD_Result send_sandbox(struct MHD_Connection *conn,
				    struct request *r, struct sandbox *c,
				    unsigned status, bool detail)
{
	pthread_mutex_lock(&r->d->lock);
	json_t *j = sandbox_json(c, detail);
	pthread_mutex_unlock(&r->d->lock);
	sandbox_put(r->d, c);
	return api_reply_json(conn, r, status, j);
}

enum MHD_Result api_get_templates(struct MHD_Connection *conn,
				  struct request *r, struct daemon *d)
{
	json_t *list = json_array();

	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < d->nr_pools; i++) {
		const struct pool *pl = &d->pools[i];
		const struct template_config *t = pl->t;

		json_array_append_new(
			list,
			json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
				  "name", t->name, "snapshot", pl->snapshot_id,
				  "mem_mib", (int)t->mem_mib, "vcpus",
				  (int)t->vcpus, "min_ready", (int)t->min_ready,
				  "max_total", (int)t->max_total, "ready",
				  (int)pl->ready, "restoring",
				  (int)pl->restoring, "leased",
				  (int)pl->leased));
	}
	pthread_mutex_unlock(&d->lock);
	return api_reply_json(conn, r, 200,
			      json_pack("{s:o}", "templates", list));
}

/* ---- sandboxes --------------------------------------------------------- */

/*
 * A sandbox's env is kept for its whole lease and sent with every exec, in
 * one agent frame (1 MiB) with the command: it is bounded well below that.
 */
#define MAX_ENV_ENTRIES 256
#define MAX_ENV_BYTES (64u << 10)

static bool env_fits(char *const *env, size_t n, char *err, size_t errlen)
{
	size_t bytes = 0;

	for (size_t i = 0; i < n; i++)
		bytes += strlen(env[i]) + 1;
	if (n <= MAX_ENV_ENTRIES && bytes <= MAX_ENV_BYTES)
		return true;
	snprintf(err, errlen,
		 "\"env\" has %zu entries of %zu bytes (as KEY=VALUE): at "
		 "most %d entries and %u bytes",
		 n, bytes, MAX_ENV_ENTRIES, MAX_ENV_BYTES);
	return false;
}

int api_parse_create(json_t *body, const struct daemon_config *cfg,
		     struct create_request *req, char *err, size_t errlen)
{
	static const char *const fields[] = { "template", "timeout_s", "env",
					      NULL };
	json_t *tmpl = json_object_get(body, "template");
	const char *name = "default";

	req->env = NULL;
	if (tmpl && !json_is_string(tmpl)) {
		snprintf(err, errlen, "\"template\" must be a string");
		return 400;
	}
	if (tmpl)
		name = json_string_value(tmpl);
	req->template = config_template(cfg, name);
	if (!api_known_fields(body, fields, err, errlen) ||
	    (req->template &&
	     !api_get_uint(body, "timeout_s", 1, req->template->max_timeout_s,
			   req->template->timeout_s, &req->timeout_s, err,
			   errlen)) ||
	    !api_add_env(&req->env, &req->nr_env, json_object_get(body, "env"),
			 err, errlen))
		return 400;
	if (!env_fits(req->env, req->nr_env, err, errlen))
		return 413;
	if (!req->template) {
		snprintf(err, errlen, "no template \"%.200s\"", name);
		return 404;
	}
	return 0;
}

enum MHD_Result api_create_sandbox(struct MHD_Connection *conn,
				   struct request *r, struct daemon *d)
{
	struct create_request req = { 0 };
	char err[512];
	json_t *body = api_body_object(r, err, sizeof(err));

	if (!body)
		return api_reply_error(conn, r, 400, "%s", err);
	int status = api_parse_create(body, &d->cfg, &req, err, sizeof(err));
	json_decref(body);
	if (status) {
		api_free_strv(req.env);
		return api_reply_error(conn, r, status, "%s", err);
	}

	struct pool *pl = pool_find(d, req.template->name);
	struct sandbox *c;
	enum pool_error e =
		pool_handout(pl, req.timeout_s, req.env, &c, err, sizeof(err));
	if (e != POOL_OK)
		return api_reply_pool_error(conn, r, e, err);
	return send_sandbox(conn, r, c, 201, false);
}

enum MHD_Result api_list_sandboxes(struct MHD_Connection *conn,
				   struct request *r, struct daemon *d)
{
	json_t *list = json_array();

	pthread_mutex_lock(&d->lock);
	for (const struct sandbox *c = d->leased; c; c = c->next)
		json_array_append_new(list, sandbox_json(c, false));
	pthread_mutex_unlock(&d->lock);
	return api_reply_json(conn, r, 200,
			      json_pack("{s:o}", "sandboxes", list));
}

enum MHD_Result api_delete_sandbox(struct MHD_Connection *conn,
				   struct request *r, struct daemon *d)
{
	if (!sandbox_release(d, r->id))
		return api_no_sandbox(conn, r);
	return api_reply(
		conn, r, 204,
		MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT));
}

enum MHD_Result api_get_sandbox(struct MHD_Connection *conn, struct request *r,
				struct daemon *d)
{
	struct sandbox *c = sandbox_get(d, r->id);

	if (!c)
		return api_no_sandbox(conn, r);
	return send_sandbox(conn, r, c, 200, true);
}

bool api_parse_timeout(json_t *body, uint32_t max_timeout_s,
		       uint32_t *timeout_s, char *err, size_t errlen)
{
	static const char *const fields[] = { "timeout_s", NULL };

	if (!api_known_fields(body, fields, err, errlen) ||
	    !api_get_uint(body, "timeout_s", 1, max_timeout_s, 0, timeout_s,
			  err, errlen))
		return false;
	if (!*timeout_s) {
		snprintf(err, errlen, "\"timeout_s\" is required");
		return false;
	}
	return true;
}

enum MHD_Result api_set_timeout(struct MHD_Connection *conn, struct request *r,
				struct daemon *d)
{
	char err[512];
	uint32_t timeout_s;
	struct sandbox *c = sandbox_get(d, r->id);

	if (!c)
		return api_no_sandbox(conn, r);
	json_t *body = api_body_object(r, err, sizeof(err));
	bool ok = body && api_parse_timeout(body, c->pool->t->max_timeout_s,
					    &timeout_s, err, sizeof(err));
	json_decref(body);
	if (!ok) {
		sandbox_put(d, c);
		return api_reply_error(conn, r, 400, "%s", err);
	}
	pthread_mutex_lock(&d->lock);
	c->expires_ns = lease_deadline_ns(monotonic_ns(), timeout_s);
	pthread_mutex_unlock(&d->lock);
	return send_sandbox(conn, r, c, 200, true);
}

/*
 * A round trip to the sandbox's agent on a fresh connection, as an exec's
 * would start: proof that the guest runs and answers, and what that costs.
 */
enum MHD_Result api_ping_sandbox(struct MHD_Connection *conn, struct request *r,
				 struct daemon *d)
{
	struct sandbox *c = sandbox_get(d, r->id);
	struct agent_conn agent;
	char err[512];

	if (!c)
		return api_no_sandbox(conn, r);
	uint64_t start = monotonic_ns();
	int status = api_connect_agent(c, &agent, api_client_fd(conn), err,
				       sizeof(err));
	if (!status) {
		char why[256];

		if (agent_ping(&agent, 1, why, sizeof(why)) < 0) {
			snprintf(err, sizeof(err),
				 "sandbox %s: its agent does not answer a "
				 "ping: %s",
				 c->id, why);
			status = 500;
		}
		api_close_agent(d, &agent);
	}
	double agent_ms = (double)(monotonic_ns() - start) / 1e6;
	sandbox_put(d, c);
	if (status)
		return api_reply_error(conn, r, status, "%s", err);
	return api_reply_json(conn, r, 200,
			      json_pack("{s:s,s:f}", "id", r->id, "agent_ms",
					hundredths(agent_ms)));
}
