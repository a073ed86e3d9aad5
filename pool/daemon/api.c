// SPDX-License-Identifier: Apache-2.0
/*
 * api.c - thaw's API (see api.h) as a server of the HTTP engine
 * (pool/http): the routing table, the token, the request's life around
 * its route, replies in API.md's shapes, and the one place where errors
 * become HTTP statuses.  The routes themselves are in api_*.c
 * (api_internal.h lists them); their answers are pool/API.md's.
 *
 * The engine drives a request through thaw_api below: request_begin() at
 * the headers decides all that they alone decide (token, route, method)
 * before any body is read; a route with put_piece streams its body (a file
 * upload, passed on to the guest piece by piece, bounded by max_file_bytes,
 * not by our memory), every other body is collected by the engine, up to
 * max_request_bytes, and the route's handler answers once it is in.  The
 * engine's limits, memory budget and count of answers are the daemon's
 * (daemon_http_params(), sandbox_ops.h), shared with the E2B listener's
 * server.
 *
 * Routes are a table, not a switch: a path and a handler per method, so
 * that "which methods does this path take" (405 and its Allow header) is
 * read off the same entry that serves it.
 */
#include "pool/daemon/api.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/daemon/api_internal.h"
#include "common/clock.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- replies ----------------------------------------------------------- */

enum MHD_Result api_reply(struct MHD_Connection *conn, struct request *r,
			  unsigned status, struct MHD_Response *resp)
{
	return http_answer(conn, &r->x, status, resp);
}

/* api_reply_text() whose @budget (taken from the daemon's) is given back
 * when the reply is freed, sent or not. */
static enum MHD_Result reply_text_held(struct MHD_Connection *conn,
				       struct request *r, unsigned status,
				       const char *type, char *text,
				       uint64_t budget)
{
	return api_reply(
		conn, r, status,
		http_held_response(&r->x, text, strlen(text), type, budget));
}

enum MHD_Result api_reply_text(struct MHD_Connection *conn, struct request *r,
			       unsigned status, const char *type, char *text)
{
	return reply_text_held(conn, r, status, type, text, 0);
}

enum MHD_Result api_reply_json_held(struct MHD_Connection *conn,
				    struct request *r, unsigned status,
				    json_t *json, uint64_t budget)
{
	char *text = json ? json_dumps(json, HTTP_JSON_FLAGS) : NULL;

	json_decref(json);
	if (!text) {
		sandbox_budget_give(r->d, budget);
		return MHD_NO;
	}
	/* One line: curl users see the prompt on its own line. */
	size_t n = strlen(text);
	char *line = realloc(text, n + 2);
	if (!line) {
		sandbox_budget_give(r->d, budget);
		free(text);
		return MHD_NO;
	}
	memcpy(line + n, "\n", 2);
	/* Only the text stays: what its making took goes back now. */
	if (budget > n + 2) {
		sandbox_budget_give(r->d, budget - (n + 2));
		budget = n + 2;
	}
	return reply_text_held(conn, r, status, "application/json", line,
			       budget);
}

/* Answers with @json (taken over). */
enum MHD_Result api_reply_json(struct MHD_Connection *conn, struct request *r,
			       unsigned status, json_t *json)
{
	return api_reply_json_held(conn, r, status, json, 0);
}

/* Firecracker-style: the pools say what went wrong, the edge says which
 * status that is. */
/* API.md's error codes, by status. */
static const char *error_code(unsigned status)
{
	switch (status) {
	case 400:
		return "bad_request";
	case 401:
		return "unauthorized";
	case 404:
		return "not_found";
	case 405:
		return "method_not_allowed";
	case 409:
		return "conflict";
	case 411:
		return "length_required";
	case 413:
		return "too_large";
	case 429:
		return "capacity";
	case 503:
		return "unavailable";
	case 504:
		return "timeout";
	default:
		return "internal";
	}
}

json_t *api_pool_error_json(enum pool_error e, const char *message)
{
	return json_pack("{s:{s:s,s:s}}", "error", "code",
			 e == POOL_OVERLOADED
				 ? "overloaded"
				 : error_code(pool_error_status(e)),
			 "message", message);
}

/*
 * The error object of API.md with @code, and the header @header: @value
 * unless @header is NULL (a 405's Allow, an overload's Retry-After).
 */
static enum MHD_Result reply_error_with(struct MHD_Connection *conn,
					struct request *r, unsigned status,
					const char *code, const char *header,
					const char *value, const char *message)
{
	return api_reply(
		conn, r, status,
		http_json_response(json_pack("{s:{s:s,s:s}}", "error", "code",
					     code, "message", message),
				   header, value));
}

/* A route's 503 is passing (the memory budget spent, a daemon restarting):
 * clients are told when to try again. */
#define BUSY_RETRY_AFTER_S "1"

enum MHD_Result api_reply_error(struct MHD_Connection *conn, struct request *r,
				unsigned status, const char *fmt, ...)
{
	char message[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	return reply_error_with(conn, r, status, error_code(status),
				status == 503 ? MHD_HTTP_HEADER_RETRY_AFTER
					      : NULL,
				BUSY_RETRY_AFTER_S, message);
}

/*
 * A pool error: its status, and for an overload its own code and a
 * Retry-After (admission.h), so a client tells "try again soon" from the
 * daemon shutting down, the other 503.
 */
enum MHD_Result api_reply_pool_error(struct MHD_Connection *conn,
				     struct request *r, enum pool_error e,
				     const char *message)
{
	unsigned status = pool_error_status(e);
	char retry_after[16];

	if (e != POOL_OVERLOADED)
		return reply_error_with(conn, r, status, error_code(status),
					NULL, NULL, message);
	pthread_mutex_lock(&r->d->lock);
	double overloaded_ms = monotonic_ms() - r->d->admission.since_ms;
	pthread_mutex_unlock(&r->d->lock);
	snprintf(retry_after, sizeof(retry_after), "%u",
		 admission_retry_after_s(overloaded_ms));
	return reply_error_with(conn, r, status, "overloaded",
				MHD_HTTP_HEADER_RETRY_AFTER, retry_after,
				message);
}

enum MHD_Result api_no_sandbox(struct MHD_Connection *conn, struct request *r)
{
	return api_reply_error(conn, r, 404, "no sandbox \"%s\"", r->id);
}

/* ---- request bodies ---------------------------------------------------- */

json_t *api_body_object(const struct request *r, char *err, size_t errlen)
{
	return http_parse_object(r->x.body.buf, r->x.body.len, err, errlen);
}

/* ---- routing ----------------------------------------------------------- */

static const struct api_route routes[] = {
	{ "/sandboxes", ROUTE_PLAIN, .get = api_list_sandboxes,
	  .post = api_create_sandbox },
	{ "/templates", ROUTE_PLAIN, .get = api_get_templates },
	{ "/snapshots", ROUTE_PLAIN, .get = api_list_snapshots },
	{ "/health", ROUTE_PLAIN, .get = api_get_health },
	{ "/metrics", ROUTE_PLAIN, .get = api_get_metrics },
	{ "", ROUTE_SANDBOX, .get = api_get_sandbox,
	  .del = api_delete_sandbox },
	{ "/exec", ROUTE_SANDBOX, .post = api_exec },
	{ "/timeout", ROUTE_SANDBOX, .post = api_set_timeout },
	{ "/network", ROUTE_SANDBOX, .post = api_set_network },
	{ "/ping", ROUTE_SANDBOX, .post = api_ping_sandbox },
	{ "/files", ROUTE_SANDBOX, .get = api_get_file, .put = api_put_file_end,
	  .put_begin = api_put_file_begin, .put_piece = api_put_file_piece },
	{ "/checkpoint", ROUTE_SANDBOX, .post = api_checkpoint },
	{ "/fork", ROUTE_SANDBOX, .post = api_fork },
	{ "/rollback", ROUTE_SANDBOX, .post = api_rollback },
	{ "/pause", ROUTE_SANDBOX, .post = api_pause },
	{ "/resume", ROUTE_SANDBOX, .post = api_resume },
	{ "", ROUTE_SNAPSHOT, .get = api_get_snapshot,
	  .del = api_delete_snapshot },
};

/* Methods in the order a 405's Allow header lists them. */
static const char *const methods[] = { "GET", "POST", "PUT", "DELETE" };

static api_handler *handler_of(const struct api_route *rt, const char *method)
{
	api_handler *const by_method[] = { rt->get, rt->post, rt->put,
					   rt->del };

	for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
		if (!strcmp(method, methods[i]))
			return by_method[i];
	return NULL;
}

/* "GET, POST": the methods @rt takes. */
static void allowed_methods(const struct api_route *rt, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (size_t i = 0; i < ARRAY_SIZE(methods); i++)
		if (handler_of(rt, methods[i]) && n < len)
			n += snprintf(out + n, len - n, "%s%s", n ? ", " : "",
				      methods[i]);
}

#define ID_CHARS "0123456789abcdef"

/* The paths whose second segment is an id, by their route kind. */
static const char *const id_prefixes[] = {
	[ROUTE_SANDBOX] = "/sandboxes/",
	[ROUTE_SNAPSHOT] = "/snapshots/",
};

/*
 * No byte past @url's end is read, whatever it holds: the fuzz harness
 * calls this on arbitrary strings.  An id is the whole segment or nothing,
 * never a prefix of it: a copy cut to the id's length made
 * "/sandboxes/<id>junk/exec" act on <id>.
 */
const struct api_route *api_parse_route(const char *url,
					char id[SANDBOX_ID_LEN + 1])
{
	size_t len = strlen(url), n;
	enum route_kind kind = ROUTE_PLAIN;
	const char *sub = url;

	id[0] = '\0';
	/* One trailing slash names the same route: "/health/". */
	if (len > 1 && url[len - 1] == '/')
		len--;
	for (size_t k = ROUTE_SANDBOX; k < ARRAY_SIZE(id_prefixes); k++) {
		const size_t prefix = strlen(id_prefixes[k]);

		if (len <= prefix || strncmp(url, id_prefixes[k], prefix))
			continue;
		n = strcspn(url + prefix, "/");
		if (n > len - prefix)
			n = len - prefix;
		if (!n || n > SANDBOX_ID_LEN ||
		    strspn(url + prefix, ID_CHARS) < n)
			return NULL;
		memcpy(id, url + prefix, n);
		id[n] = '\0';
		kind = (enum route_kind)k;
		sub = url + prefix + n;
		len -= prefix + n;
		break;
	}
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++)
		if (routes[i].kind == kind && strlen(routes[i].path) == len &&
		    !memcmp(routes[i].path, sub, len))
			return &routes[i];
	id[0] = '\0';
	return NULL;
}

static bool authorized(struct MHD_Connection *conn, const struct daemon *d)
{
	const char *token = d->cfg.token;
	const char *given = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	unsigned char diff = 0;

	if (!token[0])
		return true;
	if (!given || strncmp(given, "Bearer ", 7))
		return false;
	given += 7;
	size_t n = strlen(token);
	if (strlen(given) != n)
		return false;
	/* Constant time: the token is a secret. */
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(given[i] ^ token[i]);
	return diff == 0;
}

/*
 * thaw's API as the engine drives it: the first call of a request decides
 * all that the headers alone decide (token, route, method).
 */
static enum MHD_Result request_begin(struct MHD_Connection *conn,
				     struct http_exchange *x, void *cls,
				     const char *url, const char *method)
{
	struct request *r = (struct request *)x;
	struct daemon *d = cls;

	r->d = d;
	r->agent.fd = -1;
	r->route = api_parse_route(url, r->id);
	if (!authorized(conn, d))
		return api_reply_error(
			conn, r, 401,
			"missing or wrong \"Authorization: Bearer\" token");
	if (!r->route)
		return api_reply_error(conn, r, 404, "no such route: %s %s",
				       method, url);
	if (!handler_of(r->route, method)) {
		char allow[64], msg[128];

		allowed_methods(r->route, allow, sizeof(allow));
		snprintf(msg, sizeof(msg), "%s takes %s, not %s", url, allow,
			 method);
		return reply_error_with(conn, r, 405, error_code(405),
					MHD_HTTP_HEADER_ALLOW, allow, msg);
	}
	if (r->route->put_begin && !strcmp(method, "PUT")) {
		r->x.streamed = true;
		return r->route->put_begin(conn, r, d);
	}
	return MHD_YES;
}

static void request_piece(struct MHD_Connection *conn, struct http_exchange *x,
			  const char *data, size_t len)
{
	struct request *r = (struct request *)x;

	r->route->put_piece(conn, r, r->d, data, len);
}

static enum MHD_Result request_end(struct MHD_Connection *conn,
				   struct http_exchange *x, const char *method)
{
	struct request *r = (struct request *)x;

	return handler_of(r->route, method)(conn, r, r->d);
}

static enum MHD_Result request_fail(struct MHD_Connection *conn,
				    struct http_exchange *x, unsigned status,
				    const char *message)
{
	return api_reply_error(conn, (struct request *)x, status, "%s",
			       message);
}

static void request_finish(struct http_exchange *x)
{
	struct request *r = (struct request *)x;

	/* An upload cut short: closing the connection makes the agent drop
	 * the half-written file (PROTOCOL.md). */
	sandbox_agent_close(r->d, &r->agent);
	if (r->sandbox)
		sandbox_put(r->d, r->sandbox);
}

static const struct http_protocol thaw_api = {
	.what = "HTTP server",
	.request_size = sizeof(struct request),
	.begin = request_begin,
	.piece = request_piece,
	.end = request_end,
	.fail = request_fail,
	.finish = request_finish,
};

struct http_server *api_start(struct daemon *d, int fd)
{
	struct http_params params;

	daemon_http_params(d, &params);
	return http_serve(&params, fd, &thaw_api, d);
}
