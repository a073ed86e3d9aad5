// SPDX-License-Identifier: Apache-2.0
/*
 * api.c - thawd's HTTP server (see api.h): libmicrohttpd, the routing
 * table, the token, request bodies, replies, and the one place where
 * errors become HTTP statuses.  The routes themselves are in api_*.c
 * (api_internal.h lists them); their answers are pool/API.md's.
 *
 * libmicrohttpd calls handle() several times per request: first with no
 * body (we allocate the request's context and check what can be checked
 * from the headers alone: route, method, token, declared length), then
 * once per piece of body, then once more with none, when the route's
 * handler answers.  The E2B server (pool/e2b) is served by the same
 * callback: a struct api_protocol says how its requests begin, take their
 * body, end and fail, as thaw_api does for this API's.  JSON bodies are
 * collected up to max_request_bytes; a file upload is passed on to the guest
 * piece by piece as it arrives (the route's put_piece), so its size is bounded
 * by max_file_bytes, not by our memory.
 *
 * A JSON body is held, then parsed, and jansson's values are far larger
 * than their text (an array of empty objects, "[{},{},...]", takes 84
 * bytes per byte of it with jansson 2.14): a body takes from the memory
 * budget (api_agent.c) its length and JSON_PARSE_BYTES_PER_BYTE times
 * that as it arrives (a 503 when that does not fit), and its parse may
 * allocate no more than that (a 400 past it): jansson's allocator counts
 * what a parse takes, per thread.  The budget is given back once the
 * request ends.
 *
 * Connections are accepted by api_conns.c, not libmicrohttpd: it caps
 * them per uid and gives each request head a deadline.
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
#include "common/log.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* What of a body is read after an early answer before it goes anyway:
 * more than a client has in flight when the answer reaches it. */
#define DRAIN_BYTES (1u << 20)

/* ---- replies ----------------------------------------------------------- */

enum MHD_Result api_answer(struct MHD_Connection *conn, struct api_exchange *x,
			   struct daemon *d, unsigned status,
			   struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	x->answered = true;
	api_count_status(d, status);
	if (x->at_headers && x->body_coming) {
		x->held = resp;
		x->held_status = status;
		return MHD_YES;
	}
	enum MHD_Result ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

enum MHD_Result api_reply(struct MHD_Connection *conn, struct request *r,
			  unsigned status, struct MHD_Response *resp)
{
	return api_answer(conn, &r->x, r->d, status, resp);
}

/* A reply's text, and the budget it holds until libmicrohttpd is done
 * with it. */
struct held_text {
	struct daemon *d;
	char *text;
	uint64_t budget;
};

static void free_held_text(void *cls)
{
	struct held_text *h = cls;

	sandbox_budget_give(h->d, h->budget);
	free(h->text);
	free(h);
}

struct MHD_Response *api_held_response(struct daemon *d, char *text, size_t len,
				       const char *type, uint64_t budget)
{
	struct held_text *h = malloc(sizeof(*h));
	struct MHD_Response *resp =
		h ? MHD_create_response_from_buffer_with_free_callback_cls(
			    len, text, free_held_text, h)
		  : NULL;

	if (!resp) {
		sandbox_budget_give(d, budget);
		free(text);
		free(h);
		return NULL;
	}
	*h = (struct held_text){ .d = d, .text = text, .budget = budget };
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return resp;
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
		api_held_response(r->d, text, strlen(text), type, budget));
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
	char *text = json ? json_dumps(json, JSON_FLAGS) : NULL;

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

struct MHD_Response *api_json_response(json_t *json, const char *header,
				       const char *value)
{
	char *text = json ? json_dumps(json, JSON_FLAGS) : NULL;
	char *line = text ? malloc(strlen(text) + 2) : NULL;

	json_decref(json);
	if (line)
		sprintf(line, "%s\n", text);
	free(text);
	if (!line)
		return NULL;
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		strlen(line), line, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(line);
		return NULL;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"application/json");
	if (header)
		MHD_add_response_header(resp, header, value);
	return resp;
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
		api_json_response(json_pack("{s:{s:s,s:s}}", "error", "code",
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

/*
 * What a body's parse may allocate, per byte of the body: strings of a
 * few characters (an argv of short words, "[\"ab\",...]") take about 18,
 * so real requests fit; what takes more is refused, not parsed.
 */
#define JSON_PARSE_BYTES_PER_BYTE 32
/* ... and beyond that, what any parse may take (a small object's table). */
#define JSON_PARSE_FLOOR (16u << 10)
/* What malloc adds to each block it hands out (glibc: a size word, and
 * blocks of 16 bytes). */
#define MALLOC_BLOCK_OVERHEAD 16

/* The parse under way on this thread: what it may still allocate. */
static _Thread_local struct {
	bool counting;
	bool exceeded;
	size_t left;
} json_parse;

/* jansson's allocator: malloc, counted while this thread parses a body. */
static void *json_parse_malloc(size_t n)
{
	if (json_parse.counting) {
		size_t cost = n + MALLOC_BLOCK_OVERHEAD;

		if (cost > json_parse.left) {
			json_parse.exceeded = true;
			return NULL;
		}
		json_parse.left -= cost;
	}
	return malloc(n);
}

/* What parsing a body of @len bytes may allocate. */
static size_t parse_allowance(size_t len)
{
	return len * JSON_PARSE_BYTES_PER_BYTE + JSON_PARSE_FLOOR;
}

/* The budget a body of @len bytes holds while it is kept and parsed. */
static uint64_t body_budget(size_t len)
{
	return len ? len + parse_allowance(len) : 0;
}

json_t *api_parse_object(const char *text, size_t len, char *err, size_t errlen)
{
	json_error_t e;
	json_t *j;

	if (!len)
		return json_object();
	json_parse.counting = true;
	json_parse.exceeded = false;
	json_parse.left = parse_allowance(len);
	j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
	json_parse.counting = false;
	if (!j && json_parse.exceeded) {
		snprintf(err, errlen,
			 "the body's JSON takes more than %d bytes of memory "
			 "per byte to parse (too many small values)",
			 JSON_PARSE_BYTES_PER_BYTE);
		return NULL;
	}
	if (!j) {
		snprintf(err, errlen, "malformed JSON at line %d column %d: %s",
			 e.line, e.column, e.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		snprintf(err, errlen, "the body must be a JSON object");
		json_decref(j);
		return NULL;
	}
	return j;
}

json_t *api_body_object(const struct request *r, char *err, size_t errlen)
{
	return api_parse_object(r->x.body.buf, r->x.body.len, err, errlen);
}

/* ---- text buffers ------------------------------------------------------ */

bool api_text_reserve(struct text *t, size_t cap)
{
	char *grown = realloc(t->buf, cap);

	if (!grown) {
		t->failed = true;
		return false;
	}
	t->buf = grown;
	t->cap = cap;
	return true;
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
 * thaw's API as api_serve() drives it: the first call of a request decides
 * all that the headers alone decide (token, route, method).
 */
static enum MHD_Result request_begin(struct MHD_Connection *conn,
				     struct api_exchange *x, void *cls,
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

static void request_piece(struct MHD_Connection *conn, struct api_exchange *x,
			  const char *data, size_t len)
{
	struct request *r = (struct request *)x;

	r->route->put_piece(conn, r, r->d, data, len);
}

static enum MHD_Result request_end(struct MHD_Connection *conn,
				   struct api_exchange *x, const char *method)
{
	struct request *r = (struct request *)x;

	return handler_of(r->route, method)(conn, r, r->d);
}

static enum MHD_Result request_fail(struct MHD_Connection *conn,
				    struct api_exchange *x, unsigned status,
				    const char *message)
{
	return api_reply_error(conn, (struct request *)x, status, "%s",
			       message);
}

static void request_finish(struct api_exchange *x)
{
	struct request *r = (struct request *)x;

	/* An upload cut short: closing the connection makes the agent drop
	 * the half-written file (PROTOCOL.md). */
	sandbox_agent_close(r->d, &r->agent);
	if (r->sandbox)
		sandbox_put(r->d, r->sandbox);
}

static const struct api_protocol thaw_api = {
	.what = "HTTP server",
	.request_size = sizeof(struct request),
	.begin = request_begin,
	.piece = request_piece,
	.end = request_end,
	.fail = request_fail,
	.finish = request_finish,
};

void api_body_take(struct daemon *d, struct api_body *b, const char *data,
		   size_t len)
{
	if (b->too_large || b->over_budget)
		return;
	if (b->len + len > d->cfg.max_request_bytes) {
		b->too_large = true;
		return;
	}
	uint64_t more = body_budget(b->len + len) - body_budget(b->len);

	if (!sandbox_budget_take(d, more)) {
		b->over_budget = true;
		return;
	}
	b->budget_held += more;
	char *grown = realloc(b->buf, b->len + len);
	if (!grown) {
		b->too_large = true;
		return;
	}
	memcpy(grown + b->len, data, len);
	b->buf = grown;
	b->len += len;
}

void api_body_free(struct daemon *d, struct api_body *b)
{
	sandbox_budget_give(d, b->budget_held);
	free(b->buf);
	*b = (struct api_body){ 0 };
}

/*
 * libmicrohttpd's own errors, whole: the logger keeps a message that spans
 * lines on one.  Its messages end in a newline, ours add one.
 */
static void log_mhd(void *cls, const char *fmt, va_list ap)
{
	/* A connection handed over by MHD_add_connection() is of a type
	 * libmicrohttpd does not know, so it tries TCP options on it and
	 * says so each time; a Unix socket has neither Nagle nor corking. */
	static const char *const not_tcp[] = {
		"Setting TCP_NODELAY option",
		"Setting TCP_CORK option",
		"Failed to push the data from buffers",
	};
	char msg[4096];
	size_t len;

	(void)cls;
	vsnprintf(msg, sizeof(msg), fmt, ap);
	for (size_t i = 0; i < ARRAY_SIZE(not_tcp); i++)
		if (!strncmp(msg, not_tcp[i], strlen(not_tcp[i])))
			return;
	len = strlen(msg);
	while (len > 0 && msg[len - 1] == '\n')
		msg[--len] = '\0';
	log_warning("http: %s", msg);
}

struct api_server {
	struct MHD_Daemon *mhd;
	struct api_conns *conns;
	struct daemon *d;
	const struct api_protocol *protocol;
	void *cls; /* the protocol's begin() gets it */
};

static enum MHD_Result too_large(struct MHD_Connection *conn,
				 const struct api_server *s,
				 struct api_exchange *x)
{
	char msg[128];

	snprintf(msg, sizeof(msg),
		 "the body is larger than max_request_bytes (%" PRIu64 ")",
		 s->d->cfg.max_request_bytes);
	return s->protocol->fail(conn, x, 413, msg);
}

/*
 * Whether the headers (@length: their Content-Length, or NULL) announce a
 * body the client sends without waiting to be told to (Expect:
 * 100-continue), and no larger than what an early answer waits for (a
 * larger one is answered at once: its client is to see the answer before
 * it is done sending).
 */
static bool body_coming(struct MHD_Connection *conn, const char *length)
{
	const char *encoding = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
	const char *expect = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);

	if (expect && !strcasecmp(expect, "100-continue"))
		return false;
	if (length) {
		unsigned long long n = strtoull(length, NULL, 10);

		return n > 0 && n <= DRAIN_BYTES;
	}
	return encoding && strcasestr(encoding, "chunked");
}

/*
 * First call of a request: the protocol's begin(), then the length the
 * headers declare for a body to be collected.  An answer given here while
 * the body is on its way (an error: a wrong token, a route that is not)
 * is held until the body is read, up to DRAIN_BYTES of it: libmicrohttpd
 * would send it and close at once, and closing a socket with unread data
 * resets the connection, which makes the client drop the answer (a
 * client writing its body sees EPIPE, not the 401).
 */
static enum MHD_Result begin(struct MHD_Connection *conn,
			     const struct api_server *s, struct api_exchange *x,
			     const char *url, const char *method)
{
	const char *length = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

	x->body_coming = body_coming(conn, length);
	x->at_headers = true;
	enum MHD_Result ret = s->protocol->begin(conn, x, s->cls, url, method);
	if (ret == MHD_YES && !x->answered && !x->streamed && length &&
	    strtoull(length, NULL, 10) > s->d->cfg.max_request_bytes)
		ret = too_large(conn, s, x);
	x->at_headers = false;
	return ret;
}

/* Queues the answer begin() held. */
static enum MHD_Result answer_held(struct MHD_Connection *conn,
				   struct api_exchange *x)
{
	enum MHD_Result ret = MHD_queue_response(conn, x->held_status, x->held);

	MHD_destroy_response(x->held);
	x->held = NULL;
	return ret;
}

/*
 * libmicrohttpd's callback for both servers: once at the headers (begin()),
 * once per piece of body, once more at its end, when the protocol's end()
 * answers.
 */
static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct api_server *s = cls;
	struct api_exchange *x = *con_cls;

	(void)version;
	if (!x) {
		x = calloc(1, s->protocol->request_size);
		if (!x)
			return MHD_NO;
		*con_cls = x;
		api_conn_head_in(conn);
		return begin(conn, s, x, url, method);
	}
	if (x->answered) {
		/* Answered early (an error): the rest of the body is
		 * dropped, and a held answer goes once it is in. */
		x->dropped += *upload_data_size;
		bool in = !*upload_data_size || x->dropped > DRAIN_BYTES;
		*upload_data_size = 0;
		return x->held && in ? answer_held(conn, x) : MHD_YES;
	}
	if (*upload_data_size) {
		if (x->streamed)
			s->protocol->piece(conn, x, upload_data,
					   *upload_data_size);
		else
			api_body_take(s->d, &x->body, upload_data,
				      *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (x->body.too_large)
		return too_large(conn, s, x);
	if (x->body.over_budget) {
		char err[256];

		sandbox_budget_spent(s->d, err, sizeof(err));
		return s->protocol->fail(conn, x, 503, err);
	}
	return s->protocol->end(conn, x, method);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		      enum MHD_RequestTerminationCode why)
{
	struct api_server *s = cls;
	struct api_exchange *x = *con_cls;

	(void)why;
	api_conn_replied(conn);
	if (!x)
		return;
	if (x->held)
		MHD_destroy_response(x->held);
	s->protocol->finish(x);
	api_body_free(s->d, &x->body);
	free(x);
	*con_cls = NULL;
}

/* A libmicrohttpd server of s->d's limits, s->conns accepting for it;
 * started accepting.  NULL on failure. */
static struct MHD_Daemon *mhd_start(struct api_server *s)
{
	const struct daemon_config *cfg = &s->d->cfg;

	/* Both allocators pair with free(): a thread using jansson while
	 * this changes is unaffected. */
	json_set_alloc_funcs(json_parse_malloc, free);
	/* api_conns.c accepts (it knows the peer's uid) and enforces
	 * max_connections; libmicrohttpd's limit is only a backstop, above
	 * it (api_conns.c says why). */
	struct MHD_Daemon *mhd = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION |
			MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC |
			MHD_USE_ERROR_LOG,
		0, NULL, NULL, handle, s, MHD_OPTION_EXTERNAL_LOGGER, log_mhd,
		NULL, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)cfg->max_connections * 2,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->idle_timeout_s,
		MHD_OPTION_NOTIFY_COMPLETED, completed, s,
		MHD_OPTION_NOTIFY_CONNECTION, api_conns_notify, s->conns,
		MHD_OPTION_END);

	if (mhd && api_conns_start(s->conns, mhd) < 0) {
		MHD_stop_daemon(mhd);
		mhd = NULL;
	}
	return mhd;
}

struct api_server *api_serve(struct daemon *d, int fd,
			     const struct api_protocol *p, void *cls)
{
	struct api_server *s = calloc(1, sizeof(*s));

	if (s)
		s->conns = api_conns_new(&d->cfg, fd);
	if (!s || !s->conns) {
		log_error("cannot start the %s: out of memory", p->what);
		free(s);
		close(fd);
		return NULL;
	}
	s->d = d;
	s->protocol = p;
	s->cls = cls;
	s->mhd = mhd_start(s);
	if (!s->mhd) {
		log_error("cannot start the %s", p->what);
		api_conns_free(s->conns);
		free(s);
		return NULL;
	}
	return s;
}

struct api_server *api_start(struct daemon *d, int fd)
{
	return api_serve(d, fd, &thaw_api, d);
}

void api_stop(struct api_server *s)
{
	if (!s)
		return;
	api_conns_stop(s->conns);
	MHD_stop_daemon(s->mhd);
	api_conns_free(s->conns);
	free(s);
}
