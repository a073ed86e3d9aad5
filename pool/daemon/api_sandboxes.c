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
 *
 * A sandbox's network policy (API.md, "network") is checked here
 * (args_parse_network) and written by the service core (sandbox_ops.h):
 * at create, only when the request gives one, and by POST
 * /sandboxes/ID/network.  What a route shows of a sandbox is the core's
 * view of it (struct sandbox_view).
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool/daemon/api_internal.h"
#include "common/clock.h"

double api_hundredths(double ms)
{
	return (double)(int64_t)(ms * 100 + 0.5) / 100;
}

/* The sandbox's "restore" object of API.md: restore_ms in phases. */
static json_t *restore_phases_json(const struct sandbox_view *c)
{
	const struct vmm_restore_phases *p = &c->restore_phases;

	return json_pack("{s:f,s:f,s:f,s:I,s:f,s:f,s:f,s:f,s:f}", "host_ms",
			 api_hundredths(c->restore_host_ms), "vmm_start_ms",
			 api_hundredths(p->process_start_ms + p->setup_ms),
			 "page_in_ms", api_hundredths(p->page_in_ms),
			 "prefetched_pages", (json_int_t)p->prefetched_pages,
			 "state_restore_ms",
			 api_hundredths(p->state_restore_ms), "guest_ms",
			 api_hundredths(c->restore_guest_ms), "agent_ms",
			 api_hundredths(p->agent_ms), "identity_ms",
			 api_hundredths(c->identity_ms), "network_ms",
			 api_hundredths(c->network_ms));
}

/* "A.B.C.D/N" of @c into @out (at least 19 bytes). */
static void format_cidr(const struct net_cidr *c, char *out, size_t len)
{
	struct in_addr in = { .s_addr = htonl(c->addr) };
	char addr[INET_ADDRSTRLEN];

	inet_ntop(AF_INET, &in, addr, sizeof(addr));
	snprintf(out, len, "%s/%u", addr, c->prefix);
}

static json_t *cidrs_json(const struct net_cidr *cidrs, uint32_t n)
{
	json_t *list = json_array();
	char text[24];

	for (uint32_t i = 0; i < n; i++) {
		format_cidr(&cidrs[i], text, sizeof(text));
		json_array_append_new(list, json_string(text));
	}
	return list;
}

/* The sandbox's "network" of API.md: its policy and host address, or null
 * without a network. */
static json_t *network_json(const struct sandbox_view *c)
{
	struct in_addr in;
	char host[INET_ADDRSTRLEN];

	if (!c->net_made)
		return json_null();
	in.s_addr = htonl(c->host_address);
	inet_ntop(AF_INET, &in, host, sizeof(host));
	return json_pack(
		"{s:b,s:o,s:o,s:s}", "allow_internet", c->policy.allow_internet,
		"allow_out", cidrs_json(c->policy.allow_out, c->policy.n_allow),
		"deny_out", cidrs_json(c->policy.deny_out, c->policy.n_deny),
		"host_address", host);
}

json_t *api_sandbox_json(const struct sandbox_view *c, bool detail)
{
	char created[40], expires[40];

	args_format_time(c->created_ms, created, sizeof(created));
	args_format_time(c->expires_ms, expires, sizeof(expires));
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:f,s:o,s:f,s:s}", "id", c->id,
			      "template", c->template->name, "created", created,
			      "expires", expires, "restore_ms",
			      api_hundredths(c->restore_ms), "restore",
			      restore_phases_json(c), "handout_ms",
			      api_hundredths(c->handout_ms), "state", c->state);
	if (j) {
		json_object_set_new(j, "network", network_json(c));
		json_object_set_new(j, "snapshot", json_string(c->snapshot));
	}
	/* A paused sandbox has no VMM. */
	if (j && detail) {
		json_object_set_new(j, "pid",
				    c->pid > 0 ? json_integer(c->pid)
					       : json_null());
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
	struct sandbox_view v;

	sandbox_view(r->d, c, &v);
	sandbox_put(r->d, c);
	return api_reply_json(conn, r, status, api_sandbox_json(&v, detail));
}

enum MHD_Result api_get_templates(struct MHD_Connection *conn,
				  struct request *r, struct daemon *d)
{
	struct pool_view *pools;
	size_t n;

	if (pools_view(d, &pools, &n) < 0)
		return api_reply_error(conn, r, 500, "out of memory");
	json_t *list = json_array();
	for (size_t i = 0; i < n; i++) {
		const struct pool_view *pl = &pools[i];
		const struct template_config *t = pl->template;

		json_array_append_new(
			list,
			json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:s,"
				  "s:b}",
				  "name", t->name, "snapshot", pl->snapshot,
				  "mem_mib", (int)t->mem_mib, "vcpus",
				  (int)t->vcpus, "min_ready", (int)t->min_ready,
				  "max_total", (int)t->max_total, "ready",
				  (int)pl->ready, "restoring",
				  (int)pl->restoring, "leased", (int)pl->leased,
				  "network", t->network ? "nat" : "none",
				  "allow_internet", t->allow_internet));
	}
	free(pools);
	return api_reply_json(conn, r, 200,
			      json_pack("{s:o}", "templates", list));
}

/* ---- sandboxes --------------------------------------------------------- */

int api_parse_create_network(json_t *body, const struct template_config *t,
			     bool *has_network, struct net_policy *out,
			     char *err, size_t errlen)
{
	json_t *net = json_object_get(body, "network");
	struct net_policy defaults;

	*has_network = false;
	if (!net || json_is_null(net))
		return 0;
	if (!t->network) {
		snprintf(err, errlen,
			 "template \"%s\" has no network (network = none): "
			 "no \"network\" to set",
			 t->name);
		return 400;
	}
	config_net_policy(t, &defaults);
	*has_network = true;
	return args_parse_network(net, &defaults, out, err, errlen);
}

int api_parse_create(json_t *body, const struct daemon_config *cfg,
		     struct create_request *req, char *err, size_t errlen)
{
	static const char *const fields[] = { "template", "timeout_s", "env",
					      "network", NULL };
	json_t *tmpl = json_object_get(body, "template");
	const char *name = "default";

	req->env = NULL;
	req->has_network = false;
	if (tmpl && !json_is_string(tmpl)) {
		snprintf(err, errlen, "\"template\" must be a string");
		return 400;
	}
	if (tmpl)
		name = json_string_value(tmpl);
	req->template = config_template(cfg, name);
	if (!args_known_fields(body, fields, err, errlen) ||
	    (req->template &&
	     !args_get_uint(body, "timeout_s", 1, req->template->max_timeout_s,
			    req->template->timeout_s, &req->timeout_s, err,
			    errlen)) ||
	    !args_add_env(&req->env, &req->nr_env, json_object_get(body, "env"),
			  err, errlen))
		return 400;
	if (!args_env_fits(req->env, req->nr_env, err, errlen))
		return 413;
	if (!req->template) {
		snprintf(err, errlen, "no template \"%.200s\"", name);
		return 404;
	}
	return api_parse_create_network(body, req->template, &req->has_network,
					&req->network, err, errlen);
}

enum pool_error api_given_policy(void *arg, const struct template_config *t,
				 bool has_network, struct net_policy *out,
				 bool *set, char *err, size_t errlen)
{
	const struct net_policy *given = arg;

	(void)t, (void)has_network, (void)err, (void)errlen;
	*out = *given;
	*set = true;
	return POOL_OK;
}

enum MHD_Result api_create_sandbox(struct MHD_Connection *conn,
				   struct request *r, struct daemon *d)
{
	struct create_request req = { 0 };
	char err[512];
	json_t *body = api_body_object(r, err, sizeof(err));

	if (!body)
		return api_reply_error(conn, r, 400, "%s", err);
	if (json_object_get(body, "snapshot")) {
		enum MHD_Result ret =
			api_create_from_snapshot(conn, r, d, body);

		json_decref(body);
		return ret;
	}
	int status = api_parse_create(body, &d->cfg, &req, err, sizeof(err));
	json_decref(body);
	if (status) {
		env_free(req.env);
		return api_reply_error(conn, r, status, "%s", err);
	}

	struct fork_result one;
	struct sandbox_create create = {
		.template = req.template,
		.timeout_s = req.timeout_s,
		.env = req.env,
		.policy = req.has_network ? api_given_policy : NULL,
		.arg = &req.network,
	};
	enum pool_error e = sandbox_create(d, &create, &one, err, sizeof(err));
	if (e != POOL_OK)
		return api_reply_pool_error(conn, r, e, err);
	return send_sandbox(conn, r, one.c, 201, false);
}

enum MHD_Result api_list_sandboxes(struct MHD_Connection *conn,
				   struct request *r, struct daemon *d)
{
	json_t *list = json_array();
	struct sandbox_view *views;
	size_t n;

	if (sandboxes_view(d, &views, &n) < 0) {
		json_decref(list);
		return api_reply_error(conn, r, 500, "out of memory");
	}
	for (size_t i = 0; i < n; i++)
		json_array_append_new(list, api_sandbox_json(&views[i], false));
	sandbox_views_put(d, views, n);
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

	if (!args_known_fields(body, fields, err, errlen) ||
	    !args_get_uint(body, "timeout_s", 1, max_timeout_s, 0, timeout_s,
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
	bool ok = body &&
		  api_parse_timeout(body, sandbox_template(c)->max_timeout_s,
				    &timeout_s, err, sizeof(err));
	json_decref(body);
	if (!ok) {
		sandbox_put(d, c);
		return api_reply_error(conn, r, 400, "%s", err);
	}
	sandbox_set_lease(d, c, timeout_s, false);
	return send_sandbox(conn, r, c, 200, true);
}

/* POST /sandboxes/ID/network: the whole policy replaced, what the body
 * leaves out taken from the template, as at create. */
enum MHD_Result api_set_network(struct MHD_Connection *conn, struct request *r,
				struct daemon *d)
{
	struct net_policy defaults, policy;
	char err[512];
	struct sandbox *c = sandbox_get(d, r->id);

	if (!c)
		return api_no_sandbox(conn, r);
	if (sandbox_busy(c, err, sizeof(err)) ||
	    !sandbox_network_defaults(c, &defaults, err, sizeof(err))) {
		sandbox_put(d, c);
		return api_reply_error(conn, r, 409, "%s", err);
	}
	json_t *body = api_body_object(r, err, sizeof(err));
	int status = body ? args_parse_network(body, &defaults, &policy, err,
					       sizeof(err))
			  : 400;
	json_decref(body);
	if (!status &&
	    sandbox_set_policy(d, c, &policy, err, sizeof(err)) != POOL_OK)
		status = 500;
	if (status) {
		sandbox_put(d, c);
		return api_reply_error(conn, r, status, "%s", err);
	}
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
	int status = pool_error_status(sandbox_agent_open(
		c, &agent, http_client_fd(conn), err, sizeof(err)));
	if (!status) {
		char why[256];

		http_paced(conn, d->cfg.idle_timeout_s,
			   sandbox_guest_deadline_ns(d));
		if (agent_ping(&agent, 1, why, sizeof(why)) < 0) {
			snprintf(err, sizeof(err),
				 "sandbox %s: its agent does not answer a "
				 "ping: %s",
				 c->id, why);
			status = 500;
		}
		sandbox_agent_close(d, &agent);
	}
	double agent_ms = (double)(monotonic_ns() - start) / 1e6;
	sandbox_put(d, c);
	if (status)
		return api_reply_error(conn, r, status, "%s", err);
	return api_reply_json(conn, r, 200,
			      json_pack("{s:s,s:f}", "id", r->id, "agent_ms",
					api_hundredths(agent_ms)));
}
