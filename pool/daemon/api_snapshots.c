// SPDX-License-Identifier: Apache-2.0
/*
 * api_snapshots.c - the routes of pool/API.md's *Checkpoints and forks*:
 * POST /sandboxes/ID/checkpoint, /fork, /rollback, /pause, /resume, POST
 * /sandboxes with a "snapshot", and GET and DELETE /snapshots[/ID].
 *
 * The work is checkpoints.c's, which returns pool errors; this file checks
 * the requests (ids, counts, types: every field, as the other routes do),
 * maps the errors to statuses, and builds the answers.  A request that
 * restores several sandboxes answers one entry per sandbox, the sandbox's
 * object or the error object that stopped it, so that a fork of 8 of
 * which one failed still hands out 7.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/daemon/api_internal.h"

/* The snapshot id in @body's @field, checked (16 lowercase hex digits). */
static bool snapshot_field(json_t *body, const char *field, bool required,
			   char id[SANDBOX_ID_LEN + 1], char *err,
			   size_t errlen)
{
	json_t *v = json_object_get(body, field);
	char why[128];

	id[0] = '\0';
	if (!v && !required)
		return true;
	if (!json_is_string(v)) {
		snprintf(err, errlen, "\"%s\" must be a snapshot id (a string)",
			 field);
		return false;
	}
	if (catalog_check_id(json_string_value(v), why, sizeof(why)) < 0) {
		snprintf(err, errlen, "\"%s\": %s", field, why);
		return false;
	}
	memcpy(id, json_string_value(v), SANDBOX_ID_LEN + 1);
	return true;
}

/* The request's body as an object with no fields but @allowed; NULL after
 * a 400 answered. */
static json_t *body_with(struct MHD_Connection *conn, struct request *r,
			 const char *const allowed[], enum MHD_Result *ret)
{
	char err[512];
	json_t *body = api_body_object(r, err, sizeof(err));

	if (body && !args_known_fields(body, allowed, err, sizeof(err))) {
		json_decref(body);
		body = NULL;
	}
	if (!body)
		*ret = api_reply_error(conn, r, 400, "%s", err);
	return body;
}

/* The answer to a checkpoint (API.md). */
static json_t *checkpoint_json(const struct checkpoint_result *ck)
{
	return json_pack("{s:s,s:s,s:I,s:b,s:i,s:f,s:f}", "snapshot",
			 ck->snapshot, "parent", ck->parent, "dirty_bytes",
			 (json_int_t)ck->dirty_bytes, "full", ck->full, "depth",
			 (int)ck->depth, "pause_ms",
			 api_hundredths(ck->pause_ms), "total_ms",
			 api_hundredths(ck->total_ms));
}

/* Held sandbox @c's object (detail), and lets go of it. */
static json_t *sandbox_put_json(struct daemon *d, struct sandbox *c)
{
	struct sandbox_view v;

	sandbox_view(d, c, &v);
	sandbox_put(d, c);
	return api_sandbox_json(&v, true);
}

/* One entry per sandbox of @out (@n): its object or its error; the
 * sandboxes are let go of. */
static json_t *forks_json(struct daemon *d, struct fork_result *out, uint32_t n)
{
	json_t *list = json_array();

	for (uint32_t i = 0; i < n; i++)
		json_array_append_new(
			list, out[i].c ? sandbox_put_json(d, out[i].c)
				       : api_pool_error_json(out[i].error,
							     out[i].message));
	return list;
}

int api_parse_create_from(json_t *body, struct create_from_request *req,
			  char *err, size_t errlen)
{
	static const char *const fields[] = { "snapshot", "timeout_s", "env",
					      "count",	  "network",   NULL };

	req->env = NULL;
	req->nr_env = 0;
	req->network = json_object_get(body, "network");
	req->counted = json_object_get(body, "count") != NULL;
	if (json_object_get(body, "template")) {
		snprintf(err, errlen,
			 "give \"template\" or \"snapshot\", not both: a "
			 "snapshot's template is its own");
		return 400;
	}
	if (!args_known_fields(body, fields, err, errlen) ||
	    !snapshot_field(body, "snapshot", true, req->snapshot, err,
			    errlen) ||
	    !args_get_uint(body, "timeout_s", 1, UINT32_MAX, 0, &req->timeout_s,
			   err, errlen) ||
	    !args_get_uint(body, "count", 1, MAX_FORKS, 1, &req->count, err,
			   errlen) ||
	    !args_add_env(&req->env, &req->nr_env, json_object_get(body, "env"),
			  err, errlen))
		return 400;
	return args_env_fits(req->env, req->nr_env, err, errlen) ? 0 : 413;
}

/*
 * @body's "network" for sandboxes of snapshot @id, against its template's
 * policy: 0 (*@has_network says whether one was given), or 400/404 with a
 * message in @err.  A snapshot of no template served here is left for
 * sandboxes_from_snapshot() to refuse.
 */
static int snapshot_network(struct daemon *d, json_t *body, const char *id,
			    bool *has_network, struct net_policy *out,
			    char *err, size_t errlen)
{
	struct snapshot_info *info;
	size_t n;
	enum pool_error e = snapshots_list(d, id, &info, &n, err, errlen);

	*has_network = false;
	if (e != POOL_OK)
		return e == POOL_NOT_FOUND ? 404 : 500;
	const struct template_config *t =
		info[0].template ? config_template(&d->cfg, info[0].template)
				 : NULL;
	free(info);
	return t ? api_parse_create_network(body, t, has_network, out, err,
					    errlen)
		 : 0;
}

enum MHD_Result api_create_from_snapshot(struct MHD_Connection *conn,
					 struct request *r, struct daemon *d,
					 json_t *body)
{
	struct create_from_request req;
	struct fork_result out[MAX_FORKS];
	char err[512];
	int status = api_parse_create_from(body, &req, err, sizeof(err));

	if (status) {
		env_free(req.env);
		return api_reply_error(conn, r, status, "%s", err);
	}
	bool has_network = false;
	struct net_policy policy;
	if (req.network)
		status = snapshot_network(d, body, req.snapshot, &has_network,
					  &policy, err, sizeof(err));
	if (status) {
		env_free(req.env);
		return api_reply_error(conn, r, status, "%s", err);
	}
	struct sandbox_create create = {
		.snapshot = req.snapshot,
		.count = req.count,
		.timeout_s = req.timeout_s,
		.env = req.env,
		.policy = has_network ? api_given_policy : NULL,
		.arg = &policy,
	};
	enum pool_error e = sandbox_create(d, &create, out, err, sizeof(err));
	if (e != POOL_OK)
		return api_reply_pool_error(conn, r, e, err);
	if (!req.counted && !out[0].c)
		return api_reply_pool_error(conn, r, out[0].error,
					    out[0].message);
	json_t *list = forks_json(d, out, req.count);
	if (!req.counted) {
		json_t *one = json_incref(json_array_get(list, 0));

		json_decref(list);
		return api_reply_json(conn, r, 201, one);
	}
	return api_reply_json(conn, r, 201,
			      json_pack("{s:o}", "sandboxes", list));
}

/*
 * The request's sandbox, held, once its body is an object of @allowed
 * fields (into *@body when not NULL, else freed); NULL after a 400 or 404
 * answered, in *@ret.
 */
static struct sandbox *sandbox_with_body(struct MHD_Connection *conn,
					 struct request *r, struct daemon *d,
					 const char *const allowed[],
					 json_t **body, enum MHD_Result *ret)
{
	json_t *j = body_with(conn, r, allowed, ret);
	struct sandbox *c = j ? sandbox_get(d, r->id) : NULL;

	if (j && !c)
		*ret = api_no_sandbox(conn, r);
	if (c && body)
		*body = j;
	else
		json_decref(j);
	return c;
}

/* Answers @e, or when POOL_OK held @c's object (@extra added under its
 * @key unless NULL) with @status; lets go of @c. */
static enum MHD_Result reply_sandbox(struct MHD_Connection *conn,
				     struct request *r, struct sandbox *c,
				     enum pool_error e, const char *err,
				     const char *key, json_t *extra)
{
	if (e != POOL_OK) {
		sandbox_put(r->d, c);
		json_decref(extra);
		return api_reply_pool_error(conn, r, e, err);
	}
	json_t *answer = sandbox_put_json(r->d, c);
	if (key)
		json_object_set_new(answer, key, extra);
	return api_reply_json(conn, r, 200, answer);
}

static const char *const no_fields[] = { NULL };

/*
 * POST /sandboxes/ID/checkpoint (201, the checkpoint) and /pause (200, the
 * sandbox with its checkpoint): both write one.
 */
static enum MHD_Result checkpoint_route(struct MHD_Connection *conn,
					struct request *r, struct daemon *d,
					bool pause)
{
	struct checkpoint_result ck;
	enum MHD_Result ret;
	char err[1024];
	struct sandbox *c =
		sandbox_with_body(conn, r, d, no_fields, NULL, &ret);

	if (!c)
		return ret;
	enum pool_error e = (pause ? sandbox_pause : sandbox_checkpoint)(
		c, &ck, err, sizeof(err));
	if (pause)
		return reply_sandbox(conn, r, c, e, err, "checkpoint",
				     e == POOL_OK ? checkpoint_json(&ck)
						  : NULL);
	sandbox_put(d, c);
	if (e != POOL_OK)
		return api_reply_pool_error(conn, r, e, err);
	return api_reply_json(conn, r, 201, checkpoint_json(&ck));
}

enum MHD_Result api_checkpoint(struct MHD_Connection *conn, struct request *r,
			       struct daemon *d)
{
	return checkpoint_route(conn, r, d, false);
}

enum MHD_Result api_fork(struct MHD_Connection *conn, struct request *r,
			 struct daemon *d)
{
	static const char *const fields[] = { "count", NULL };
	struct fork_result out[MAX_FORKS];
	struct checkpoint_result ck = { .snapshot = "" };
	enum MHD_Result ret;
	uint32_t count;
	char err[1024];
	json_t *body;
	struct sandbox *c = sandbox_with_body(conn, r, d, fields, &body, &ret);

	if (!c)
		return ret;
	bool ok = args_get_uint(body, "count", 1, MAX_FORKS, 1, &count, err,
				sizeof(err));
	json_decref(body);
	enum pool_error e =
		ok ? sandbox_fork(c, count, &ck, out, err, sizeof(err))
		   : POOL_BAD_REQUEST;
	sandbox_put(d, c);
	/* Once checkpointed, every fork has its entry, made or not. */
	if (e != POOL_OK && !ck.snapshot[0])
		return api_reply_pool_error(conn, r, e, err);
	json_t *answer = checkpoint_json(&ck);
	json_object_set_new(answer, "sandboxes", forks_json(d, out, count));
	return api_reply_json(conn, r, 201, answer);
}

enum MHD_Result api_rollback(struct MHD_Connection *conn, struct request *r,
			     struct daemon *d)
{
	static const char *const fields[] = { "snapshot", NULL };
	char snapshot[SANDBOX_ID_LEN + 1], err[1024];
	enum MHD_Result ret;
	json_t *body;
	struct sandbox *c = sandbox_with_body(conn, r, d, fields, &body, &ret);

	if (!c)
		return ret;
	bool ok = snapshot_field(body, "snapshot", true, snapshot, err,
				 sizeof(err));
	json_decref(body);
	enum pool_error e = ok ? sandbox_rollback(c, snapshot, err, sizeof(err))
			       : POOL_BAD_REQUEST;
	return reply_sandbox(conn, r, c, e, err, NULL, NULL);
}

enum MHD_Result api_pause(struct MHD_Connection *conn, struct request *r,
			  struct daemon *d)
{
	return checkpoint_route(conn, r, d, true);
}

enum MHD_Result api_resume(struct MHD_Connection *conn, struct request *r,
			   struct daemon *d)
{
	enum MHD_Result ret;
	char err[1024];
	struct sandbox *c =
		sandbox_with_body(conn, r, d, no_fields, NULL, &ret);

	if (!c)
		return ret;
	enum pool_error e = sandbox_resume(c, err, sizeof(err));
	return reply_sandbox(conn, r, c, e, err, NULL, NULL);
}

/* ---- /snapshots ---- */

/* A snapshot object of API.md. */
static json_t *snapshot_json(const struct snapshot_info *s)
{
	char created[40];

	args_format_time(s->rec.created_unix * 1000, created, sizeof(created));
	return json_pack("{s:s,s:o,s:o,s:s,s:b,s:s,s:I,s:I,s:i,s:i,s:i}", "id",
			 s->rec.id, "parent",
			 s->rec.parent[0] ? json_string(s->rec.parent)
					  : json_null(),
			 "template",
			 s->template ? json_string(s->template) : json_null(),
			 "template_id", s->rec.template_id, "base", s->base,
			 "created", created, "size",
			 (json_int_t)(s->rec.state_size + s->rec.memory_disk),
			 "dirty_bytes", (json_int_t)s->rec.dirty_bytes, "depth",
			 (int)s->rec.depth, "live_users", (int)s->live_users,
			 "children", (int)s->rec.children);
}

enum MHD_Result api_list_snapshots(struct MHD_Connection *conn,
				   struct request *r, struct daemon *d)
{
	struct snapshot_info *list;
	char err[512];
	size_t n;
	enum pool_error e =
		snapshots_list(d, NULL, &list, &n, err, sizeof(err));

	if (e != POOL_OK)
		return api_reply_pool_error(conn, r, e, err);
	json_t *array = json_array();
	for (size_t i = 0; i < n; i++)
		json_array_append_new(array, snapshot_json(&list[i]));
	free(list);
	return api_reply_json(conn, r, 200,
			      json_pack("{s:o}", "snapshots", array));
}

enum MHD_Result api_get_snapshot(struct MHD_Connection *conn, struct request *r,
				 struct daemon *d)
{
	struct snapshot_info *list;
	char err[512];
	size_t n;
	enum pool_error e =
		snapshots_list(d, r->id, &list, &n, err, sizeof(err));

	if (e != POOL_OK)
		return api_reply_pool_error(conn, r, e, err);
	json_t *j = snapshot_json(&list[0]);
	free(list);
	return api_reply_json(conn, r, 200, j);
}

enum MHD_Result api_delete_snapshot(struct MHD_Connection *conn,
				    struct request *r, struct daemon *d)
{
	char err[512];
	enum pool_error e = snapshot_remove(d, r->id, err, sizeof(err));

	if (e != POOL_OK)
		return api_reply_pool_error(conn, r, e, err);
	return api_reply(
		conn, r, 204,
		MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT));
}
