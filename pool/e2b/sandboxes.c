// SPDX-License-Identifier: Apache-2.0
/*
 * sandboxes.c - E2B's control plane (the OpenAPI the SDK carries, paths
 * under api.e2b.app) on thaw's sandboxes:
 *
 *	POST /sandboxes, /v2/sandboxes		create: 201 Sandbox
 *	GET /sandboxes, /v2/sandboxes		ListedSandbox[] (v2: state and
 *						metadata filters, limit and
 *						the x-next-token header)
 *	GET /sandboxes/{id}			SandboxDetail
 *	DELETE /sandboxes/{id}			kill: 204
 *	POST /sandboxes/{id}/timeout		{timeout}: 204
 *	POST /sandboxes/{id}/refreshes		{duration}: 204
 *	POST /sandboxes/{id}/pause		204; 409 when already paused
 *	POST /sandboxes/{id}/resume		201 Sandbox
 *	POST /(v2/)sandboxes/{id}/connect	200 Sandbox, 201 once resumed
 *	POST /sandboxes/{id}/fork		201 SandboxForkResult[]
 *	POST /sandboxes/{id}/snapshots		201 SnapshotInfo
 *	PUT /sandboxes/{id}/network		204: its network policy
 *	GET /sandboxes/{id}/metrics		200 [] (none kept)
 *	GET /snapshots				SnapshotInfo[]
 *	DELETE /templates/{id}			a snapshot's removal: 204
 *	GET /templates				Template[]
 *
 * E2B's names map to thaw's: a templateID is a [template NAME] of the
 * config ("base", the SDK's default, is the template called base, else
 * the daemon's default template), or a snapshot id (one of
 * POST /sandboxes/{id}/snapshots, restored on demand: checkpoints.c); a
 * timeout is the lease (seconds, at most the template's max_timeout_s);
 * envVars are the sandbox's env, given to every command; metadata is kept
 * with the sandbox (struct e2b_sandbox) and filters lists;
 * allow_internet_access and network.allowOut/denyOut are thaw's network
 * policy (API.md), for a template with a network.  Pause and resume are
 * thaw's (the sandbox's VM checkpointed and stopped, then restored under
 * the same id), fork is thaw's fork, a snapshot thaw's checkpoint.
 *
 * E2B features thaw has no counterpart for are refused when asked for,
 * never silently dropped: autoPause, autoResume, volumeMounts, mcp, iam,
 * an egress proxy or domain rules.  Errors are E2B's {"code", "message"}
 * with the status thaw's API would give (a pool error's: pool_error_status()).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot/catalog.h"
#include "common/clock.h"
#include "pool/e2b/e2b_internal.h"

/* A create's timeout when it gives none: E2B's, v1's and v2's. */
#define CREATE_TIMEOUT_V1_S 15
#define CREATE_TIMEOUT_V2_S 300
/* E2B's page size, default and most. */
#define LIST_LIMIT_MAX 100
/* Metadata kept per sandbox, at most. */
#define METADATA_MAX_KEYS 64
#define METADATA_MAX_BYTES (16u << 10)
/* refreshes' duration, at most (E2B's). */
#define REFRESH_MAX_S 3600
/* E2B's deprecated but required clientID. */
#define CLIENT_ID "thaw"

/* ---- parsing (pure) ------------------------------------------------------ */

/* @field as a whole number of seconds in [1, @max]; absent: @def. */
static bool seconds_field(json_t *body, const char *field, uint32_t max,
			  uint32_t def, uint32_t *out, char *err, size_t errlen)
{
	return args_get_uint(body, field, 1, max, def, out, err, errlen);
}

/* E2B fields thaw has nothing for, refused when they ask for something. */
static bool unsupported_fields(json_t *body, char *err, size_t errlen)
{
	static const char *const fields[] = { "autoResume", "volumeMounts",
					      "mcp", "iam" };
	json_t *pause = json_object_get(body, "autoPause");

	if (json_is_true(pause)) {
		snprintf(err, errlen,
			 "\"autoPause\": thaw kills a sandbox at its "
			 "timeout, it does not pause it");
		return false;
	}
	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		json_t *v = json_object_get(body, fields[i]);

		if (v && !json_is_null(v) && !json_is_false(v) &&
		    !(json_is_array(v) && !json_array_size(v)) &&
		    !(json_is_object(v) && !json_object_size(v))) {
			snprintf(err, errlen, "\"%s\" is not supported by thaw",
				 fields[i]);
			return false;
		}
	}
	return true;
}

/* metadata: an object of at most METADATA_MAX_KEYS strings. */
static bool parse_metadata(json_t *body, json_t **out, char *err, size_t errlen)
{
	json_t *m = json_object_get(body, "metadata");
	const char *key;
	json_t *v;
	size_t bytes = 0;

	*out = NULL;
	if (!m || json_is_null(m)) {
		*out = json_object();
		return *out != NULL;
	}
	if (!json_is_object(m) || json_object_size(m) > METADATA_MAX_KEYS) {
		snprintf(err, errlen,
			 "\"metadata\" must be an object of at most %d "
			 "string values",
			 METADATA_MAX_KEYS);
		return false;
	}
	json_object_foreach(m, key, v)
	{
		if (!json_is_string(v)) {
			snprintf(err, errlen,
				 "\"metadata\": \"%.100s\" is not a string",
				 key);
			return false;
		}
		bytes += strlen(key) + json_string_length(v);
	}
	if (bytes > METADATA_MAX_BYTES) {
		snprintf(err, errlen,
			 "\"metadata\" holds %zu bytes, more than %u", bytes,
			 METADATA_MAX_BYTES);
		return false;
	}
	*out = json_incref(m);
	return true;
}

/*
 * allow_internet_access and network {allowOut, denyOut} as thaw's
 * "network" object (args_parse_network's), NULL when neither is given;
 * false with a message for what thaw cannot enforce.
 */
static bool network_request(json_t *body, struct e2b_create_request *req,
			    json_t **thaw_net, char *err, size_t errlen)
{
	static const char *const fields[] = { "allowOut", "denyOut",
					      "allowPublicTraffic", NULL };
	json_t *internet = json_object_get(body, "allow_internet_access");
	json_t *net = json_object_get(body, "network");

	*thaw_net = NULL;
	if (internet && !json_is_null(internet) && !json_is_boolean(internet)) {
		snprintf(err, errlen,
			 "\"allow_internet_access\" must be true or false");
		return false;
	}
	if (net && !json_is_null(net) &&
	    (!json_is_object(net) ||
	     !args_known_fields(net, fields, err, errlen))) {
		if (json_is_object(net))
			strncat(err,
				" in \"network\" (thaw filters by CIDR "
				"only: allowOut, denyOut)",
				errlen - strlen(err) - 1);
		else
			snprintf(err, errlen, "\"network\" must be an object");
		return false;
	}
	req->internet_given = internet && json_is_boolean(internet);
	req->internet = json_is_true(internet);
	bool has_net = net && !json_is_null(net) && json_object_size(net);
	if (!req->internet_given && !has_net)
		return true;
	*thaw_net = json_object();
	if (req->internet_given)
		json_object_set_new(*thaw_net, "allow_internet",
				    json_boolean(req->internet));
	json_t *allow = has_net ? json_object_get(net, "allowOut") : NULL;
	json_t *deny = has_net ? json_object_get(net, "denyOut") : NULL;
	if (allow)
		json_object_set(*thaw_net, "allow_out", allow);
	if (deny)
		json_object_set(*thaw_net, "deny_out", deny);
	return true;
}

/* The template E2B's @name stands for, and the name it is listed as. */
static const struct template_config *
template_of(const struct daemon_config *cfg, const char *name)
{
	const struct template_config *t = config_template(cfg, name);

	if (!t && !strcmp(name, "base"))
		t = config_template(cfg, "default");
	return t;
}

/*
 * The rest of a create's checks, once its network request (@net, thaw's
 * "network" object or NULL) is made: envVars, the template or snapshot,
 * the timeout, a network for a template that has one.
 */
static int create_limits(json_t *body, struct e2b_create_request *req,
			 const char *name, json_t *net,
			 uint32_t default_timeout_s, char *err, size_t errlen)
{
	json_t *env = json_object_get(body, "envVars");

	if (env && !json_is_null(env) &&
	    !args_add_env(&req->env, &req->nr_env, env, err, errlen)) {
		snprintf(err, errlen,
			 "\"envVars\" must be an object of string values, "
			 "names without '='");
		return 400;
	}
	if (!args_env_fits(req->env, req->nr_env, err, errlen))
		return 413;
	if (!req->template && catalog_check_id(name, err, errlen) < 0) {
		snprintf(err, errlen,
			 "no template \"%.64s\" (nor a snapshot id)", name);
		return 404;
	}
	uint32_t max = req->template ? req->template->max_timeout_s
				     : UINT32_MAX / 1000;
	uint32_t def = default_timeout_s < max ? default_timeout_s : max;
	if (!seconds_field(body, "timeout", max, def, &req->timeout_s, err,
			   errlen))
		return 400;
	if (net && req->template && !req->template->network &&
	    !(req->internet_given && !req->internet &&
	      json_object_size(net) == 1)) {
		snprintf(err, errlen,
			 "template \"%s\" has no network (network = none): "
			 "no internet access or egress rules to set",
			 req->template->name);
		return 400;
	}
	return 0;
}

int e2b_parse_create(json_t *body, const struct daemon_config *cfg,
		     uint32_t default_timeout_s, struct e2b_create_request *req,
		     char *err, size_t errlen)
{
	json_t *tmpl = json_object_get(body, "templateID");
	json_t *net = NULL;
	const char *name = "base";

	*req = (struct e2b_create_request){ 0 };
	if (tmpl && !json_is_null(tmpl) && !json_is_string(tmpl)) {
		snprintf(err, errlen, "\"templateID\" must be a string");
		return 400;
	}
	if (json_is_string(tmpl))
		name = json_string_value(tmpl);
	if (strlen(name) >= sizeof(req->template_id)) {
		snprintf(err, errlen, "no template \"%.64s...\"", name);
		return 404;
	}
	snprintf(req->template_id, sizeof(req->template_id), "%s", name);
	req->template = template_of(cfg, name);
	if (!unsupported_fields(body, err, errlen) ||
	    !parse_metadata(body, &req->metadata, err, errlen) ||
	    !network_request(body, req, &net, err, errlen))
		return 400;
	int status = create_limits(body, req, name, net, default_timeout_s, err,
				   errlen);
	json_decref(net);
	return status;
}

/* One %XX-decoding of @s (and '+' as a space), in place. */
static void url_decode(char *s)
{
	char *out = s;

	for (; *s; s++) {
		if (*s == '+') {
			*out++ = ' ';
		} else if (*s == '%' && isxdigit((unsigned char)s[1]) &&
			   isxdigit((unsigned char)s[2])) {
			char hex[3] = { s[1], s[2], 0 };

			*out++ = (char)strtol(hex, NULL, 16);
			s += 2;
		} else {
			*out++ = *s;
		}
	}
	*out = '\0';
}

/*
 * "k=v&k2=v2" into @q->metadata.  The SDK encodes each key and value with
 * encodeURIComponent, then the pairs with URLSearchParams (a second
 * encoding), and the query once more: libmicrohttpd undoes the last, each
 * part here the two others.
 */
static int parse_metadata_query(const char *text, struct e2b_list_query *q,
				char *err, size_t errlen)
{
	char *copy = strdup(text), *rest = copy, *pair;

	if (!copy)
		return 500;
	while ((pair = strsep(&rest, "&"))) {
		char *value = strchr(pair, '=');

		if (!*pair)
			continue;
		if (!value ||
		    json_object_size(q->metadata) >= METADATA_MAX_KEYS) {
			snprintf(err, errlen,
				 "\"metadata\" must be at most %d key=value "
				 "pairs joined by &",
				 METADATA_MAX_KEYS);
			free(copy);
			return 400;
		}
		*value++ = '\0';
		url_decode(pair);
		url_decode(pair);
		url_decode(value);
		url_decode(value);
		json_object_set_new(q->metadata, pair, json_string(value));
	}
	free(copy);
	return 0;
}

int e2b_parse_list_query(const char *state, const char *metadata,
			 const char *limit, const char *next_token,
			 struct e2b_list_query *q, char *err, size_t errlen)
{
	*q = (struct e2b_list_query){ .limit = LIST_LIMIT_MAX };
	q->metadata = json_object();
	if (!q->metadata)
		return 500;
	if (state) {
		char copy[64], *rest = copy, *s;

		if (strlen(state) >= sizeof(copy)) {
			snprintf(err, errlen,
				 "\"state\" must be running, paused or both");
			return 400;
		}
		snprintf(copy, sizeof(copy), "%s", state);
		while ((s = strsep(&rest, ","))) {
			if (!strcmp(s, "running"))
				q->running = true;
			else if (!strcmp(s, "paused"))
				q->paused = true;
			else {
				snprintf(err, errlen,
					 "\"state\": \"%.20s\" is neither "
					 "running nor paused",
					 s);
				return 400;
			}
		}
	} else {
		q->running = q->paused = true;
	}
	if (limit) {
		size_t n = strspn(limit, "0123456789");
		unsigned long v =
			n && !limit[n] && n < 6 ? strtoul(limit, NULL, 10) : 0;

		if (v < 1 || v > LIST_LIMIT_MAX) {
			snprintf(err, errlen,
				 "\"limit\" must be a whole number from 1 to "
				 "%d",
				 LIST_LIMIT_MAX);
			return 400;
		}
		q->limit = (uint32_t)v;
	}
	if (next_token && *next_token) {
		char why[128];

		if (catalog_check_id(next_token, why, sizeof(why)) < 0) {
			snprintf(err, errlen,
				 "\"nextToken\" is not one this server gave");
			return 400;
		}
		snprintf(q->next_token, sizeof(q->next_token), "%s",
			 next_token);
	}
	return metadata ? parse_metadata_query(metadata, q, err, errlen) : 0;
}

/* ---- answers ------------------------------------------------------------- */

/* What E2B keeps with @v's sandbox, NULL for one it never made or
 * connected to. */
static const struct e2b_sandbox *record_of(const struct e2b_request *r,
					   const struct sandbox_view *v)
{
	return v->ext[r->server->slot];
}

/* The templateID the answers show. */
static const char *template_id_of(const struct sandbox_view *v,
				  const struct e2b_sandbox *e)
{
	return e ? e->template_id : v->template->name;
}

/* The Sandbox object (create, resume, connect, a fork). */
static json_t *new_sandbox_json(const struct e2b_request *r,
				const struct sandbox_view *v)
{
	const struct e2b_sandbox *e = record_of(r, v);

	return json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:n}", "sandboxID", v->id,
			 "templateID", template_id_of(v, e), "alias",
			 v->template->name, "clientID", CLIENT_ID,
			 "envdVersion", E2B_ENVD_VERSION, "envdAccessToken",
			 e ? e->access_token : "", "domain");
}

/* ListedSandbox, or with @detail SandboxDetail. */
static json_t *sandbox_json(const struct e2b_request *r,
			    const struct sandbox_view *v, bool detail)
{
	char started[40], ends[40];
	const struct template_config *t = v->template;
	const struct e2b_sandbox *e = record_of(r, v);

	args_format_time(v->created_ms, started, sizeof(started));
	args_format_time(v->expires_ms, ends, sizeof(ends));
	json_t *j = json_pack(
		"{s:s,s:s,s:s,s:s,s:i,s:i,s:i,s:s,s:s,s:s,s:s}", "sandboxID",
		v->id, "templateID", template_id_of(v, e), "alias", t->name,
		"clientID", CLIENT_ID, "cpuCount", (int)t->vcpus, "memoryMB",
		(int)t->mem_mib, "diskSizeMB", 0, "envdVersion",
		E2B_ENVD_VERSION, "startedAt", started, "endAt", ends, "state",
		v->paused ? "paused" : "running");
	/* Never changed once made: shared, not copied. */
	if (j)
		json_object_set_new(j, "metadata",
				    e ? json_incref(e->metadata)
				      : json_object());
	if (j && detail) {
		json_object_set_new(j, "domain", json_null());
		if (e)
			json_object_set_new(j, "envdAccessToken",
					    json_string(e->access_token));
		json_object_set_new(j, "allowInternetAccess",
				    e && e->internet_given
					    ? json_boolean(e->internet)
					    : json_null());
	}
	return j;
}

/* Held @c's Sandbox object, and lets go of it. */
static json_t *put_new_sandbox_json(struct e2b_request *r, struct sandbox *c)
{
	struct sandbox_view v;

	sandbox_view(r->d, c, &v);
	json_t *j = new_sandbox_json(r, &v);
	sandbox_put(r->d, c);
	return j;
}

/* Answers held @c's Sandbox object with @status and lets go of it. */
static enum MHD_Result reply_new_sandbox(struct MHD_Connection *conn,
					 struct e2b_request *r,
					 struct sandbox *c, unsigned status)
{
	return e2b_reply_json(conn, r, status, put_new_sandbox_json(r, c));
}

/* ---- what E2B keeps with a sandbox --------------------------------------- */

/*
 * Gives held @c its E2B record unless it has one: @template_id and
 * @metadata (NULL: {}), its access token (e2b_sandbox_token()).  0 or -1
 * (out of memory).
 */
static int give_record(const struct e2b_request *r, struct sandbox *c,
		       const char *template_id, json_t *metadata,
		       bool internet_given, bool internet)
{
	struct e2b_sandbox *e = calloc(1, sizeof(*e));

	if (!e)
		return -1;
	e2b_sandbox_token(r->server, c->id, e->access_token);
	snprintf(e->template_id, sizeof(e->template_id), "%s", template_id);
	e->metadata = metadata ? json_deep_copy(metadata) : json_object();
	e->internet_given = internet_given;
	e->internet = internet;
	if (!e->metadata) {
		free(e);
		return -1;
	}
	if (sandbox_ext_attach(r->d, c, r->server->slot, e) != e)
		e2b_sandbox_free(e);
	return 0;
}

/* ---- create -------------------------------------------------------------- */

/*
 * The network policy @body asks for, what it leaves out from @defaults
 * (its template's; the whole of them when it asks for none and @reset),
 * into @out with *@set; 0, or 400 with a message in @err.  Nothing to set
 * for a sandbox without a network (@defaults NULL): allow_internet_access
 * false holds there.
 */
static int network_of(json_t *body, const struct net_policy *defaults,
		      bool reset, struct net_policy *out, bool *set, char *err,
		      size_t errlen)
{
	struct e2b_create_request req;
	json_t *net;

	*set = false;
	if (!network_request(body, &req, &net, err, errlen))
		return 400;
	if (!net && reset)
		net = json_object();
	if (!net || !defaults) {
		json_decref(net);
		return 0;
	}
	int status = args_parse_network(net, defaults, out, err, errlen);
	json_decref(net);
	*set = !status;
	return status;
}

/* A create's request, for its sandbox_create callbacks. */
struct create_call {
	const struct e2b_request *r;
	json_t *body;
	const struct e2b_create_request *req;
};

static enum pool_error create_policy(void *arg, const struct template_config *t,
				     bool has_network, struct net_policy *out,
				     bool *set, char *err, size_t errlen)
{
	const struct create_call *call = arg;
	struct net_policy defaults;

	if (has_network)
		config_net_policy(t, &defaults);
	return network_of(call->body, has_network ? &defaults : NULL, false,
			  out, set, err, errlen)
		       ? POOL_BAD_REQUEST
		       : POOL_OK;
}

static enum pool_error create_record(void *arg, struct sandbox *c, char *err,
				     size_t errlen)
{
	const struct create_call *call = arg;
	const struct e2b_create_request *req = call->req;

	if (give_record(call->r, c, req->template_id, req->metadata,
			req->internet_given, req->internet) < 0) {
		snprintf(err, errlen, "out of memory");
		return POOL_FAILED;
	}
	return POOL_OK;
}

enum MHD_Result e2b_create_sandbox(struct MHD_Connection *conn,
				   struct e2b_request *r)
{
	struct e2b_create_request req = { 0 };
	struct daemon *d = r->d;
	struct fork_result one;
	char err[1024];
	json_t *body = e2b_body_object(r, err, sizeof(err));
	uint32_t def = strncmp(r->route->path, "/v2/", 4) ? CREATE_TIMEOUT_V1_S
							  : CREATE_TIMEOUT_V2_S;
	int status = body ? e2b_parse_create(body, &d->cfg, def, &req, err,
					     sizeof(err))
			  : 400;

	if (status) {
		json_decref(body);
		env_free(req.env);
		json_decref(req.metadata);
		return e2b_reply_error(conn, r, status, "%s", err);
	}
	/* Its templateID is a template's, or a snapshot's
	 * (POST /sandboxes/{id}/snapshots made it). */
	struct create_call call = { .r = r, .body = body, .req = &req };
	struct sandbox_create create = {
		.template = req.template,
		.snapshot = req.template_id,
		.count = 1,
		.timeout_s = req.timeout_s,
		.env = req.env,
		.policy = create_policy,
		.attach = create_record,
		.arg = &call,
	};
	enum pool_error e = sandbox_create(d, &create, &one, err, sizeof(err));
	if (e == POOL_OK && !one.c) {
		e = one.error;
		snprintf(err, sizeof(err), "%s", one.message);
	}
	json_decref(body);
	json_decref(req.metadata);
	if (e != POOL_OK)
		return e2b_reply_pool_error(conn, r, e, err);
	return reply_new_sandbox(conn, r, one.c, 201);
}

/* ---- lists --------------------------------------------------------------- */

/* Whether record @e has every key -> value of @metadata. */
static bool metadata_matches(const struct e2b_sandbox *e, json_t *metadata)
{
	const char *key;
	json_t *want;

	json_object_foreach(metadata, key, want)
	{
		json_t *have = e ? json_object_get(e->metadata, key) : NULL;

		if (!have || !json_equal(have, want))
			return false;
	}
	return true;
}

static int by_sandbox_id(const void *a, const void *b)
{
	const char *x = json_string_value(
		json_object_get(*(json_t *const *)a, "sandboxID"));
	const char *y = json_string_value(
		json_object_get(*(json_t *const *)b, "sandboxID"));

	return strcmp(x ? x : "", y ? y : "");
}

/*
 * The sandboxes @q selects, in id order, after its next_token and at most
 * its limit (0: all); *@more set when some were left out.
 */
static json_t *select_sandboxes(const struct e2b_request *r,
				const struct e2b_list_query *q, bool *more)
{
	json_t **found = NULL;
	size_t n = 0, cap = 0, nr_views = 0;
	struct sandbox_view *views = NULL;

	*more = false;
	sandboxes_view(r->d, &views, &nr_views);
	for (size_t i = 0; i < nr_views; i++) {
		const struct sandbox_view *v = &views[i];

		if ((v->paused ? !q->paused : !q->running) ||
		    strcmp(v->id, q->next_token) <= 0 ||
		    !metadata_matches(record_of(r, v), q->metadata))
			continue;
		if (n == cap) {
			size_t grown_cap = cap ? 2 * cap : 16;
			json_t **grown =
				realloc(found, grown_cap * sizeof(*found));
			if (!grown)
				break;
			found = grown;
			cap = grown_cap;
		}
		found[n++] = sandbox_json(r, v, false);
	}
	sandbox_views_put(r->d, views, nr_views);
	if (n) /* found is NULL when nothing was */
		qsort(found, n, sizeof(*found), by_sandbox_id);
	json_t *list = json_array();
	for (size_t i = 0; i < n; i++) {
		bool kept = !q->limit || i < q->limit;

		*more |= !kept;
		if (kept)
			json_array_append_new(list, found[i]);
		else
			json_decref(found[i]);
	}
	free(found);
	return list;
}

/* A query argument, NULL when absent. */
static const char *query(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
}

static enum MHD_Result list_sandboxes(struct MHD_Connection *conn,
				      struct e2b_request *r, bool paged)
{
	struct e2b_list_query q;
	char err[512];
	bool more;
	int status = e2b_parse_list_query(
		paged ? query(conn, "state") : NULL, query(conn, "metadata"),
		paged ? query(conn, "limit") : NULL,
		paged ? query(conn, "nextToken") : NULL, &q, err, sizeof(err));

	if (status) {
		json_decref(q.metadata);
		return e2b_reply_error(conn, r, status, "%s", err);
	}
	if (!paged)
		q.limit = 0;
	json_t *list = select_sandboxes(r, &q, &more);
	const char *last = json_string_value(json_object_get(
		json_array_get(list, json_array_size(list) - 1), "sandboxID"));
	char next[SANDBOX_ID_LEN + 1] = "";

	json_decref(q.metadata);
	if (more && last)
		snprintf(next, sizeof(next), "%s", last);
	return e2b_reply_json_header(conn, r, 200, list, "X-Next-Token",
				     next[0] ? next : NULL);
}

enum MHD_Result e2b_list_sandboxes(struct MHD_Connection *conn,
				   struct e2b_request *r)
{
	return list_sandboxes(conn, r, false);
}

enum MHD_Result e2b_list_sandboxes_v2(struct MHD_Connection *conn,
				      struct e2b_request *r)
{
	return list_sandboxes(conn, r, true);
}

/* ---- one sandbox --------------------------------------------------------- */

/* The path's sandbox, held; NULL after a 404 answered. */
static struct sandbox *path_sandbox(struct MHD_Connection *conn,
				    struct e2b_request *r, enum MHD_Result *ret)
{
	struct sandbox *c = sandbox_get(r->d, r->id);

	if (!c)
		*ret = e2b_reply_error(conn, r, 404, "sandbox \"%s\" not found",
				       r->id);
	return c;
}

/*
 * The path's sandbox, held, and its body (an object, into *@body unless
 * NULL); NULL after a 400 or 404 answered.
 */
static struct sandbox *path_sandbox_body(struct MHD_Connection *conn,
					 struct e2b_request *r, json_t **body,
					 enum MHD_Result *ret)
{
	char err[512];
	json_t *j = e2b_body_object(r, err, sizeof(err));

	if (!j) {
		*ret = e2b_reply_error(conn, r, 400, "%s", err);
		return NULL;
	}
	struct sandbox *c = path_sandbox(conn, r, ret);
	if (c && body)
		*body = j;
	else
		json_decref(j);
	return c;
}

enum MHD_Result e2b_get_sandbox(struct MHD_Connection *conn,
				struct e2b_request *r)
{
	enum MHD_Result ret;
	struct sandbox *c = path_sandbox(conn, r, &ret);

	if (!c)
		return ret;
	struct sandbox_view v;

	sandbox_view(r->d, c, &v);
	json_t *j = sandbox_json(r, &v, true);
	sandbox_put(r->d, c);
	return e2b_reply_json(conn, r, 200, j);
}

enum MHD_Result e2b_kill_sandbox(struct MHD_Connection *conn,
				 struct e2b_request *r)
{
	if (!sandbox_release(r->d, r->id))
		return e2b_reply_error(conn, r, 404, "sandbox \"%s\" not found",
				       r->id);
	return e2b_reply_empty(conn, r, 204);
}

/* POST .../timeout {timeout} and .../refreshes {duration}. */
static enum MHD_Result lease_route(struct MHD_Connection *conn,
				   struct e2b_request *r, const char *field,
				   bool refresh)
{
	enum MHD_Result ret;
	char err[512];
	json_t *body = NULL;
	uint32_t seconds;
	struct sandbox *c = path_sandbox_body(conn, r, &body, &ret);

	if (!c)
		return ret;
	uint32_t max =
		refresh ? REFRESH_MAX_S : sandbox_template(c)->max_timeout_s;
	bool ok = seconds_field(body, field, max, refresh ? 60 : 0, &seconds,
				err, sizeof(err));
	json_decref(body);
	if (ok && !seconds) {
		snprintf(err, sizeof(err), "\"%s\" is required", field);
		ok = false;
	}
	if (ok)
		sandbox_set_lease(r->d, c, seconds, refresh);
	sandbox_put(r->d, c);
	if (!ok)
		return e2b_reply_error(conn, r, 400, "%s", err);
	return e2b_reply_empty(conn, r, 204);
}

enum MHD_Result e2b_set_timeout(struct MHD_Connection *conn,
				struct e2b_request *r)
{
	return lease_route(conn, r, "timeout", false);
}

enum MHD_Result e2b_refresh(struct MHD_Connection *conn, struct e2b_request *r)
{
	return lease_route(conn, r, "duration", true);
}

/* POST .../pause (204) and .../snapshots (201, the checkpoint's id): both
 * write a checkpoint, a pause then stops the VM. */
static enum MHD_Result checkpoint_route(struct MHD_Connection *conn,
					struct e2b_request *r, bool pause)
{
	struct checkpoint_result ck;
	enum MHD_Result ret;
	char err[1024];
	struct sandbox *c = path_sandbox_body(conn, r, NULL, &ret);

	if (!c)
		return ret;
	enum pool_error e = (pause ? sandbox_pause : sandbox_checkpoint)(
		c, &ck, err, sizeof(err));
	sandbox_put(r->d, c);
	if (e != POOL_OK)
		return e2b_reply_pool_error(conn, r, e, err);
	if (pause)
		return e2b_reply_empty(conn, r, 204);
	return e2b_reply_json(
		conn, r, 201,
		json_pack("{s:s,s:[]}", "snapshotID", ck.snapshot, "names"));
}

enum MHD_Result e2b_pause(struct MHD_Connection *conn, struct e2b_request *r)
{
	return checkpoint_route(conn, r, true);
}

/*
 * Resume (E2B: 201, 409 when running) and connect (200 when running, 201
 * once resumed; its timeout only ever extends the lease): the sandbox's
 * Sandbox object, with an access token even for one made through thaw's
 * own API.
 */
static enum MHD_Result resume_route(struct MHD_Connection *conn,
				    struct e2b_request *r, bool connect)
{
	enum MHD_Result ret;
	char err[1024];
	json_t *body = NULL;
	uint32_t timeout_s;
	struct sandbox *c = path_sandbox_body(conn, r, &body, &ret);

	if (!c)
		return ret;
	bool ok = seconds_field(body, "timeout",
				sandbox_template(c)->max_timeout_s, 0,
				&timeout_s, err, sizeof(err));
	json_decref(body);
	if (!ok) {
		sandbox_put(r->d, c);
		return e2b_reply_error(conn, r, 400, "%s", err);
	}
	struct sandbox_view v;
	sandbox_view(r->d, c, &v);
	bool paused = v.paused;
	enum pool_error e = POOL_OK;
	if (paused || !connect)
		e = sandbox_resume(c, err, sizeof(err));
	if (e == POOL_OK &&
	    give_record(r, c, v.template->name, NULL, false, false) < 0) {
		snprintf(err, sizeof(err), "out of memory");
		e = POOL_FAILED;
	}
	if (e != POOL_OK) {
		sandbox_put(r->d, c);
		return e2b_reply_pool_error(conn, r, e, err);
	}
	if (timeout_s)
		sandbox_set_lease(r->d, c, timeout_s, connect);
	return reply_new_sandbox(conn, r, c, connect && !paused ? 200 : 201);
}

enum MHD_Result e2b_resume(struct MHD_Connection *conn, struct e2b_request *r)
{
	return resume_route(conn, r, false);
}

enum MHD_Result e2b_connect(struct MHD_Connection *conn, struct e2b_request *r)
{
	return resume_route(conn, r, true);
}

enum MHD_Result e2b_fork(struct MHD_Connection *conn, struct e2b_request *r)
{
	struct fork_result out[MAX_FORKS];
	struct checkpoint_result ck = { .snapshot = "" };
	enum MHD_Result ret;
	char err[1024];
	json_t *body = NULL;
	uint32_t count, timeout_s;
	struct sandbox *c = path_sandbox_body(conn, r, &body, &ret);

	if (!c)
		return ret;
	bool ok = args_get_uint(body, "count", 1, MAX_FORKS, 1, &count, err,
				sizeof(err)) &&
		  seconds_field(body, "timeout",
				sandbox_template(c)->max_timeout_s, 0,
				&timeout_s, err, sizeof(err));
	json_decref(body);
	if (!ok) {
		sandbox_put(r->d, c);
		return e2b_reply_error(conn, r, 400, "%s", err);
	}
	struct sandbox_view v;
	sandbox_view(r->d, c, &v);
	const struct e2b_sandbox *record = record_of(r, &v);
	char template_id[CONFIG_NAME_MAX];
	snprintf(template_id, sizeof(template_id), "%s",
		 template_id_of(&v, record));
	json_t *metadata = record ? json_deep_copy(record->metadata) : NULL;
	enum pool_error e = sandbox_fork(c, count, &ck, out, err, sizeof(err));
	sandbox_put(r->d, c);
	/* Once checkpointed, every fork has its entry, made or not. */
	if (e != POOL_OK && !ck.snapshot[0]) {
		json_decref(metadata);
		return e2b_reply_pool_error(conn, r, e, err);
	}
	json_t *list = json_array();
	for (uint32_t i = 0; i < count; i++) {
		struct sandbox *f = out[i].c;

		if (f && give_record(r, f, template_id, metadata, false,
				     false) < 0) {
			sandbox_release(r->d, f->id);
			sandbox_put(r->d, f);
			f = NULL;
			out[i].error = POOL_FAILED;
			snprintf(out[i].message, sizeof(out[i].message),
				 "out of memory");
		}
		if (!f) {
			json_array_append_new(
				list,
				json_pack("{s:{s:i,s:s}}", "error", "code",
					  (int)pool_error_status(out[i].error),
					  "message", out[i].message));
			continue;
		}
		if (timeout_s)
			sandbox_set_lease(r->d, f, timeout_s, false);
		json_array_append_new(list,
				      json_pack("{s:o}", "sandbox",
						put_new_sandbox_json(r, f)));
	}
	json_decref(metadata);
	return e2b_reply_json(conn, r, 201, list);
}

enum MHD_Result e2b_snapshot(struct MHD_Connection *conn, struct e2b_request *r)
{
	return checkpoint_route(conn, r, false);
}

/*
 * PUT /sandboxes/{id}/network {allow_internet_access, allowOut, denyOut}:
 * the whole policy replaced, what the body leaves out the template's, as
 * E2B clears what an update omits.
 */
enum MHD_Result e2b_update_network(struct MHD_Connection *conn,
				   struct e2b_request *r)
{
	enum MHD_Result ret;
	char err[1024];
	json_t *body = NULL;
	struct sandbox *c = path_sandbox_body(conn, r, &body, &ret);

	if (!c)
		return ret;
	json_t *internet = json_object_get(body, "allow_internet_access");
	json_t *net = json_deep_copy(body);
	json_object_del(net, "allow_internet_access");
	json_t *create = json_pack("{s:o}", "network", net);
	if (create && internet)
		json_object_set(create, "allow_internet_access", internet);
	struct net_policy defaults, policy;
	bool set;
	int status = 409;
	if (sandbox_network_defaults(c, &defaults, err, sizeof(err)) &&
	    !sandbox_busy(c, err, sizeof(err)))
		status = network_of(create, &defaults, true, &policy, &set, err,
				    sizeof(err));
	if (!status && set &&
	    sandbox_set_policy(r->d, c, &policy, err, sizeof(err)) != POOL_OK)
		status = 500;
	json_decref(create);
	json_decref(body);
	sandbox_put(r->d, c);
	if (status)
		return e2b_reply_error(conn, r, status, "%s", err);
	return e2b_reply_empty(conn, r, 204);
}

/* GET /sandboxes/{id}/metrics: none kept, the list is empty (thaw's
 * /metrics has the daemon's). */
enum MHD_Result e2b_sandbox_metrics(struct MHD_Connection *conn,
				    struct e2b_request *r)
{
	enum MHD_Result ret;
	struct sandbox *c = path_sandbox(conn, r, &ret);

	if (!c)
		return ret;
	sandbox_put(r->d, c);
	return e2b_reply_json(conn, r, 200, json_array());
}

/* ---- snapshots and templates --------------------------------------------- */

enum MHD_Result e2b_list_snapshots(struct MHD_Connection *conn,
				   struct e2b_request *r)
{
	struct snapshot_info *all;
	char err[512];
	size_t n;
	enum pool_error e =
		snapshots_list(r->d, NULL, &all, &n, err, sizeof(err));

	if (e != POOL_OK)
		return e2b_reply_pool_error(conn, r, e, err);
	json_t *list = json_array();
	/* A template's base snapshot is its template's, not a user's. */
	for (size_t i = 0; i < n; i++)
		if (!all[i].base)
			json_array_append_new(
				list, json_pack("{s:s,s:[]}", "snapshotID",
						all[i].rec.id, "names"));
	free(all);
	return e2b_reply_json(conn, r, 200, list);
}

/* DELETE /templates/{id}, the SDK's deleteSnapshot: a snapshot's removal
 * (a template of the config is not the API's to delete). */
enum MHD_Result e2b_delete_snapshot(struct MHD_Connection *conn,
				    struct e2b_request *r)
{
	char err[512];

	if (template_of(&r->d->cfg, r->id))
		return e2b_reply_error(conn, r, 400,
				       "template \"%s\" is the daemon's "
				       "config's: it is not deleted through "
				       "the API",
				       r->id);
	if (catalog_check_id(r->id, err, sizeof(err)) < 0)
		return e2b_reply_error(conn, r, 404, "no snapshot \"%s\"",
				       r->id);
	enum pool_error e = snapshot_remove(r->d, r->id, err, sizeof(err));
	if (e != POOL_OK)
		return e2b_reply_pool_error(conn, r, e, err);
	return e2b_reply_empty(conn, r, 204);
}

enum MHD_Result e2b_list_templates(struct MHD_Connection *conn,
				   struct e2b_request *r)
{
	struct daemon *d = r->d;
	struct pool_view *pools;
	size_t n;
	char started[40];

	if (pools_view(d, &pools, &n) < 0)
		return e2b_reply_error(conn, r, 500, "out of memory");
	args_format_time(
		realtime_ms() -
			(int64_t)((monotonic_ns() - d->started_ns) / NS_PER_MS),
		started, sizeof(started));
	json_t *list = json_array();
	for (size_t i = 0; i < n; i++) {
		const struct pool_view *pl = &pools[i];
		const struct template_config *t = pl->template;

		json_array_append_new(
			list,
			json_pack("{s:s,s:s,s:[s],s:[s],s:i,s:i,s:i,s:s,s:s,"
				  "s:b,s:I,s:i,s:s,s:s,s:n,s:n}",
				  "templateID", t->name, "buildID",
				  pl->snapshot, "aliases", t->name, "names",
				  t->name, "cpuCount", (int)t->vcpus,
				  "memoryMB", (int)t->mem_mib, "diskSizeMB", 0,
				  "envdVersion", E2B_ENVD_VERSION,
				  "buildStatus", "ready", "public", 0,
				  "spawnCount", (json_int_t)pl->handouts,
				  "buildCount", 1, "createdAt", started,
				  "updatedAt", started, "createdBy",
				  "lastSpawnedAt"));
	}
	free(pools);
	return e2b_reply_json(conn, r, 200, list);
}
