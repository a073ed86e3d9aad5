// SPDX-License-Identifier: Apache-2.0
/*
 * http_server.c - the engine's libmicrohttpd server (http_server.h): the
 * one callback that drives every server's requests, their bodies and the
 * budget those hold, answers held while a body is read, and the one path
 * every answer takes.
 *
 * libmicrohttpd calls handle() several times per request: first with no
 * body (we allocate the request's context and let the protocol's begin()
 * check what can be checked from the headers alone, then check the
 * declared length), then once per piece of body, then once more with
 * none, when the protocol's end() answers.  A body is collected up to
 * max_request_bytes, unless begin() streams it: then each piece goes to
 * the protocol's piece() as it arrives (a file upload, passed on to a
 * guest), bounded by the protocol, not by our memory.
 *
 * A JSON body is held, then parsed, and jansson's values are far larger
 * than their text (an array of empty objects, "[{},{},...]", takes 84
 * bytes per byte of it with jansson 2.14): a body takes from the memory
 * budget its length and JSON_PARSE_BYTES_PER_BYTE times that as it
 * arrives (a 503 when that does not fit), and its parse may allocate no
 * more than that (a 400 past it): jansson's allocator counts what a parse
 * takes, per thread.  The budget is given back once the request ends.
 *
 * Connections are accepted by http_conns.c, not libmicrohttpd: it caps
 * them per peer and gives each request head a deadline.
 */
#include "pool/http/http_server.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/http/http_conns.h"
#include "common/clock.h"
#include "common/log.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
/* What of a body is read after an early answer before it goes anyway:
 * more than a client has in flight when the answer reaches it. */
#define DRAIN_BYTES (1u << 20)

struct http_server {
	struct MHD_Daemon *mhd;
	struct http_conns *conns;
	struct http_params params;
	const struct http_protocol *protocol;
	void *cls; /* the protocol's begin() gets it */
};

/* ---- replies ----------------------------------------------------------- */

enum MHD_Result http_answer(struct MHD_Connection *conn,
			    struct http_exchange *x, unsigned status,
			    struct MHD_Response *resp)
{
	const struct http_params *params = &x->server->params;

	if (!resp)
		return MHD_NO;
	x->answered = true;
	params->count_status(params->owner, status);
	if (x->at_headers && x->body_coming) {
		x->held = resp;
		x->held_status = status;
		return MHD_YES;
	}
	enum MHD_Result ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

struct MHD_Response *http_json_response(json_t *json, const char *header,
					const char *value)
{
	char *text = json ? json_dumps(json, HTTP_JSON_FLAGS) : NULL;
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

/* A reply's text, and the budget it holds until libmicrohttpd is done
 * with it. */
struct held_text {
	const struct http_params *params;
	char *text;
	uint64_t budget;
};

static void free_held_text(void *cls)
{
	struct held_text *h = cls;

	h->params->budget_give(h->params->owner, h->budget);
	free(h->text);
	free(h);
}

struct MHD_Response *http_held_response(const struct http_exchange *x,
					char *text, size_t len,
					const char *type, uint64_t budget)
{
	const struct http_params *params = &x->server->params;
	struct held_text *h = malloc(sizeof(*h));
	struct MHD_Response *resp =
		h ? MHD_create_response_from_buffer_with_free_callback_cls(
			    len, text, free_held_text, h)
		  : NULL;

	if (!resp) {
		params->budget_give(params->owner, budget);
		free(text);
		free(h);
		return NULL;
	}
	*h = (struct held_text){ .params = params,
				 .text = text,
				 .budget = budget };
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return resp;
}

/* What a streamed response reads from, and frees. */
struct stream_source {
	ssize_t (*read)(void *arg, char *buf, size_t max);
	void (*free)(void *arg);
	void *arg;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream_source *src = cls;
	ssize_t n = src->read(src->arg, buf, max);

	(void)pos;
	if (n < 0)
		return MHD_CONTENT_READER_END_WITH_ERROR;
	return n ? n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void stream_free(void *cls)
{
	struct stream_source *src = cls;

	src->free(src->arg);
	free(src);
}

struct MHD_Response *
http_stream_response(ssize_t (*read)(void *arg, char *buf, size_t max),
		     void (*free_arg)(void *arg), void *arg, const char *type)
{
	struct stream_source *src = malloc(sizeof(*src));
	struct MHD_Response *resp = src ? MHD_create_response_from_callback(
						  MHD_SIZE_UNKNOWN, 256 * 1024,
						  stream_read, src, stream_free)
					: NULL;

	if (!resp) {
		free(src);
		free_arg(arg);
		return NULL;
	}
	*src = (struct stream_source){ read, free_arg, arg };
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return resp;
}

bool http_text_reserve(struct http_text *t, size_t cap)
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

int http_client_fd(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return info ? info->connect_fd : -1;
}

void http_paced(struct MHD_Connection *conn, unsigned idle_timeout_s,
		uint64_t deadline_ns)
{
	uint64_t now = monotonic_ns();
	unsigned limit_s = 0; /* none */

	if (deadline_ns) {
		uint64_t left_s = deadline_ns > now ? (deadline_ns - now) /
							      NS_PER_MS / 1000
						    : 0;

		limit_s = (unsigned)(left_s + idle_timeout_s);
	}
	MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, limit_s);
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

json_t *http_parse_object(const char *text, size_t len, char *err,
			  size_t errlen)
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

/* Appends a piece of a body, up to max_request_bytes (b->too_large past
 * it) and what the budget gives (b->over_budget when it does not). */
static void body_take(const struct http_params *params, struct http_body *b,
		      const char *data, size_t len)
{
	if (b->too_large || b->over_budget)
		return;
	if (b->len + len > params->max_request_bytes) {
		b->too_large = true;
		return;
	}
	uint64_t more = body_budget(b->len + len) - body_budget(b->len);

	if (!params->budget_take(params->owner, more)) {
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

/* Frees @b's text and gives its budget back. */
static void body_free(const struct http_params *params, struct http_body *b)
{
	params->budget_give(params->owner, b->budget_held);
	free(b->buf);
	*b = (struct http_body){ 0 };
}

/* ---- the callback ------------------------------------------------------ */

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

static enum MHD_Result too_large(struct MHD_Connection *conn,
				 const struct http_server *s,
				 struct http_exchange *x)
{
	char msg[128];

	snprintf(msg, sizeof(msg),
		 "the body is larger than max_request_bytes (%" PRIu64 ")",
		 s->params.max_request_bytes);
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
			     const struct http_server *s,
			     struct http_exchange *x, const char *url,
			     const char *method)
{
	const char *length = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

	x->body_coming = body_coming(conn, length);
	x->at_headers = true;
	enum MHD_Result ret = s->protocol->begin(conn, x, s->cls, url, method);
	if (ret == MHD_YES && !x->answered && !x->streamed && length &&
	    strtoull(length, NULL, 10) > s->params.max_request_bytes)
		ret = too_large(conn, s, x);
	x->at_headers = false;
	return ret;
}

/* Queues the answer begin() held. */
static enum MHD_Result answer_held(struct MHD_Connection *conn,
				   struct http_exchange *x)
{
	enum MHD_Result ret = MHD_queue_response(conn, x->held_status, x->held);

	MHD_destroy_response(x->held);
	x->held = NULL;
	return ret;
}

/*
 * libmicrohttpd's callback for every server: once at the headers
 * (begin()), once per piece of body, once more at its end, when the
 * protocol's end() answers.
 */
static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct http_server *s = cls;
	struct http_exchange *x = *con_cls;

	(void)version;
	if (!x) {
		x = calloc(1, s->protocol->request_size);
		if (!x)
			return MHD_NO;
		x->server = s;
		*con_cls = x;
		http_conn_head_in(conn);
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
			body_take(&s->params, &x->body, upload_data,
				  *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (x->body.too_large)
		return too_large(conn, s, x);
	if (x->body.over_budget) {
		char err[256];

		s->params.budget_spent(s->params.owner, err, sizeof(err));
		return s->protocol->fail(conn, x, 503, err);
	}
	return s->protocol->end(conn, x, method);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		      enum MHD_RequestTerminationCode why)
{
	struct http_server *s = cls;
	struct http_exchange *x = *con_cls;

	(void)why;
	http_conn_replied(conn);
	if (!x)
		return;
	if (x->held)
		MHD_destroy_response(x->held);
	s->protocol->finish(x);
	body_free(&s->params, &x->body);
	free(x);
	*con_cls = NULL;
}

/* ---- the server -------------------------------------------------------- */

/* A libmicrohttpd server of s->params' limits, s->conns accepting for it;
 * started accepting.  NULL on failure. */
static struct MHD_Daemon *mhd_start(struct http_server *s)
{
	const struct http_params *params = &s->params;

	/* Both allocators pair with free(): a thread using jansson while
	 * this changes is unaffected. */
	json_set_alloc_funcs(json_parse_malloc, free);
	/* http_conns.c accepts (it knows the peer's uid) and enforces
	 * max_connections; libmicrohttpd's limit is only a backstop, above
	 * it (http_conns.c says why). */
	struct MHD_Daemon *mhd = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION |
			MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC |
			MHD_USE_ERROR_LOG,
		0, NULL, NULL, handle, s, MHD_OPTION_EXTERNAL_LOGGER, log_mhd,
		NULL, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)params->max_connections * 2,
		MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)params->idle_timeout_s,
		MHD_OPTION_NOTIFY_COMPLETED, completed, s,
		MHD_OPTION_NOTIFY_CONNECTION, http_conns_notify, s->conns,
		MHD_OPTION_END);

	if (mhd && http_conns_start(s->conns, mhd) < 0) {
		MHD_stop_daemon(mhd);
		mhd = NULL;
	}
	return mhd;
}

struct http_server *http_serve(const struct http_params *params, int fd,
			       const struct http_protocol *p, void *cls)
{
	struct http_server *s = calloc(1, sizeof(*s));

	if (s) {
		s->params = *params;
		s->conns = http_conns_new(&s->params, fd);
	}
	if (!s || !s->conns) {
		log_error("cannot start the %s: out of memory", p->what);
		free(s);
		close(fd);
		return NULL;
	}
	s->protocol = p;
	s->cls = cls;
	s->mhd = mhd_start(s);
	if (!s->mhd) {
		log_error("cannot start the %s", p->what);
		http_conns_free(s->conns);
		free(s);
		return NULL;
	}
	return s;
}

void http_stop(struct http_server *s)
{
	if (!s)
		return;
	http_conns_stop(s->conns);
	MHD_stop_daemon(s->mhd);
	http_conns_free(s->conns);
	free(s);
}
