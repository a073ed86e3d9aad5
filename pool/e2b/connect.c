// SPDX-License-Identifier: Apache-2.0
/*
 * connect.c - the Connect protocol (connectrpc.com/docs/protocol), as
 * envd speaks it to E2B's SDK: the JSON codec over HTTP/1.1.
 *
 * A unary call is a POST of the request message as JSON
 * (application/json); its answer is 200 and the response message, or an
 * error status and {"code": "not_found", "message": ...}.  A server
 * streaming call (process.Process/Start, Connect, filesystem WatchDir) is a
 * POST of one envelope (application/connect+json): a flags byte, a
 * big-endian u32 length, the message; its answer is always 200, a
 * sequence of envelopes, the last one flagged end-of-stream and holding
 * {} or {"error": {...}}.  The envelope is small enough to own: five
 * bytes, parsed here with every length checked against what was received.
 * Compressed envelopes are refused (the SDK never sends them).
 *
 * A stream is written by libmicrohttpd's content reader on the request's
 * thread (thread per connection), which asks the stream's source for its
 * next message with a deadline: the soonest of a keepalive due (the SDK
 * asks for one every Keepalive-Ping-Interval seconds, so that proxies keep
 * an idle stream open; we send one every SERVER_KEEPALIVE_S at least, so
 * that a stream is never silent past idle_timeout_s and a reader that
 * stalled is cut), the call's Connect-Timeout-Ms, and a second, after
 * which it looks whether the client hung up.  A client gone ends the
 * stream and frees its source, nothing else: what the source stands for
 * (a process, a watch) lives on if its owner says so.
 */
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "pool/e2b/e2b_internal.h"

/* Keepalive messages at least this often once a stream started. */
#define SERVER_KEEPALIVE_S 15
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* How often a waiting stream looks whether its client hung up. */
#define CLIENT_CHECK_NS (1000ull * NS_PER_MS)
/* The longest Connect-Timeout-Ms taken: 10 digits. */
#define MAX_TIMEOUT_DIGITS 10

static const struct {
	const char *name;
	unsigned status;
} codes[] = {
	[E2B_OK] = { "ok", 200 },
	[E2B_CANCELED] = { "canceled", 499 },
	[E2B_UNKNOWN] = { "unknown", 500 },
	[E2B_INVALID_ARGUMENT] = { "invalid_argument", 400 },
	[E2B_DEADLINE_EXCEEDED] = { "deadline_exceeded", 504 },
	[E2B_NOT_FOUND] = { "not_found", 404 },
	[E2B_ALREADY_EXISTS] = { "already_exists", 409 },
	[E2B_PERMISSION_DENIED] = { "permission_denied", 403 },
	[E2B_RESOURCE_EXHAUSTED] = { "resource_exhausted", 429 },
	[E2B_FAILED_PRECONDITION] = { "failed_precondition", 400 },
	[E2B_ABORTED] = { "aborted", 409 },
	[E2B_OUT_OF_RANGE] = { "out_of_range", 400 },
	[E2B_UNIMPLEMENTED] = { "unimplemented", 501 },
	[E2B_INTERNAL] = { "internal", 500 },
	[E2B_UNAVAILABLE] = { "unavailable", 503 },
	[E2B_DATA_LOSS] = { "data_loss", 500 },
	[E2B_UNAUTHENTICATED] = { "unauthenticated", 401 },
};

const char *e2b_code_name(enum e2b_code code)
{
	return (size_t)code < ARRAY_SIZE(codes) ? codes[code].name : "unknown";
}

unsigned e2b_code_status(enum e2b_code code)
{
	return (size_t)code < ARRAY_SIZE(codes) ? codes[code].status : 500;
}

enum e2b_code e2b_code_of_errno(int err)
{
	switch (err) {
	case ENOENT:
		return E2B_NOT_FOUND;
	case EEXIST:
	case ENOTEMPTY:
		return E2B_ALREADY_EXISTS;
	case EACCES:
	case EPERM:
	case EROFS:
		return E2B_PERMISSION_DENIED;
	case EINVAL:
	case ENOTDIR:
	case EISDIR:
	case ENAMETOOLONG:
	case ELOOP:
	case E2BIG:
		return E2B_INVALID_ARGUMENT;
	case ENOSPC:
	case EDQUOT:
	case ENOMEM:
	case EMFILE:
		return E2B_RESOURCE_EXHAUSTED;
	default:
		return E2B_INTERNAL;
	}
}

enum e2b_code e2b_code_of_status(unsigned status)
{
	switch (status) {
	case 400:
		return E2B_INVALID_ARGUMENT;
	case 401:
		return E2B_UNAUTHENTICATED;
	case 403:
		return E2B_PERMISSION_DENIED;
	case 404:
		return E2B_NOT_FOUND;
	case 409:
		return E2B_FAILED_PRECONDITION;
	case 413:
	case 429:
		return E2B_RESOURCE_EXHAUSTED;
	case 503:
		return E2B_UNAVAILABLE;
	case 504:
		return E2B_DEADLINE_EXCEEDED;
	default:
		return E2B_INTERNAL;
	}
}

/* ---- envelopes ----------------------------------------------------------- */

bool e2b_envelope_open(const char *buf, size_t len, const char **msg,
		       size_t *msg_len, char *err, size_t errlen)
{
	const unsigned char *p = (const unsigned char *)buf;

	if (len < E2B_ENVELOPE_HEADER) {
		snprintf(err, errlen,
			 "the body is %zu bytes, less than an envelope's "
			 "header (%d): a streaming call's request is one "
			 "Connect envelope",
			 len, E2B_ENVELOPE_HEADER);
		return false;
	}
	uint32_t n = (uint32_t)p[1] << 24 | (uint32_t)p[2] << 16 |
		     (uint32_t)p[3] << 8 | p[4];
	if (p[0] & E2B_FLAG_COMPRESSED) {
		snprintf(err, errlen,
			 "compressed envelopes are not accepted "
			 "(no Connect-Content-Encoding)");
		return false;
	}
	if (p[0] != 0) {
		snprintf(err, errlen,
			 "the request's envelope has flags 0x%02x: a request "
			 "message has none",
			 p[0]);
		return false;
	}
	if (n != len - E2B_ENVELOPE_HEADER) {
		snprintf(err, errlen,
			 "the envelope says %u bytes of message, the body "
			 "holds %zu: exactly one envelope is expected",
			 n, len - E2B_ENVELOPE_HEADER);
		return false;
	}
	*msg = buf + E2B_ENVELOPE_HEADER;
	*msg_len = n;
	return true;
}

char *e2b_envelope_make(uint8_t flags, json_t *json, size_t *len)
{
	char *text = json ? json_dumps(json, HTTP_JSON_FLAGS) : NULL;

	json_decref(json);
	if (!text)
		return NULL;
	size_t n = strlen(text);
	char *out = n <= UINT32_MAX ? malloc(E2B_ENVELOPE_HEADER + n) : NULL;
	if (out) {
		out[0] = (char)flags;
		out[1] = (char)(n >> 24);
		out[2] = (char)(n >> 16);
		out[3] = (char)(n >> 8);
		out[4] = (char)n;
		memcpy(out + E2B_ENVELOPE_HEADER, text, n);
		*len = E2B_ENVELOPE_HEADER + n;
	}
	free(text);
	return out;
}

json_t *e2b_connect_request(const struct e2b_request *r, bool streaming,
			    char *err, size_t errlen)
{
	const char *msg = r->x.body.buf;
	size_t len = r->x.body.len;

	if (streaming && !e2b_envelope_open(r->x.body.buf, r->x.body.len, &msg,
					    &len, err, errlen))
		return NULL;
	return http_parse_object(msg, len, err, errlen);
}

json_t *e2b_code_json(enum e2b_code code, const char *message)
{
	return json_pack("{s:s,s:s}", "code", e2b_code_name(code), "message",
			 message);
}

/* ---- unary answers ------------------------------------------------------- */

enum MHD_Result e2b_reply_connect(struct MHD_Connection *conn,
				  struct e2b_request *r, json_t *msg)
{
	return e2b_reply_json(conn, r, 200, msg);
}

enum MHD_Result e2b_reply_connect_error(struct MHD_Connection *conn,
					struct e2b_request *r,
					enum e2b_code code, const char *fmt,
					...)
{
	char message[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	return e2b_reply_json(conn, r, e2b_code_status(code),
			      e2b_code_json(code, message));
}

/* The end-of-stream message: {} or {"error": ...}. */
static json_t *end_json(const struct e2b_stream_end *end)
{
	if (end->code == E2B_OK)
		return json_object();
	return json_pack("{s:o}", "error",
			 e2b_code_json(end->code, end->message));
}

/* An answer of envelopes, application/connect+json, with status 200. */
static enum MHD_Result reply_envelopes(struct MHD_Connection *conn,
				       struct e2b_request *r,
				       struct MHD_Response *resp)
{
	if (resp)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
					"application/connect+json");
	return e2b_reply(conn, r, 200, resp);
}

enum MHD_Result e2b_reply_stream_error(struct MHD_Connection *conn,
				       struct e2b_request *r,
				       enum e2b_code code, const char *fmt, ...)
{
	struct e2b_stream_end end = { .code = code };
	va_list ap;
	size_t len;

	va_start(ap, fmt);
	vsnprintf(end.message, sizeof(end.message), fmt, ap);
	va_end(ap);
	char *env =
		e2b_envelope_make(E2B_FLAG_END_STREAM, end_json(&end), &len);
	if (!env)
		return MHD_NO;
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		len, env, MHD_RESPMEM_MUST_FREE);
	if (!resp)
		free(env);
	return reply_envelopes(conn, r, resp);
}

/* ---- streams ------------------------------------------------------------- */

struct stream {
	const struct e2b_stream_ops *ops;
	void *src;
	int client_fd;
	uint64_t keepalive_ns;	/* 0: none asked for */
	uint64_t keepalive_due; /* monotonic */
	uint64_t deadline_ns;	/* the call's, 0: none */
	char *pending;		/* an envelope on its way out */
	size_t pending_len, pending_off;
	bool ended; /* the end-of-stream envelope is pending or out */
};

/* A header of digits as a number, 0 when absent or not digits alone. */
static uint64_t header_number(struct MHD_Connection *conn, const char *name)
{
	const char *v =
		MHD_lookup_connection_value(conn, MHD_HEADER_KIND, name);
	size_t n = v ? strspn(v, "0123456789") : 0;

	if (!n || v[n] || n > MAX_TIMEOUT_DIGITS)
		return 0;
	return strtoull(v, NULL, 10);
}

/* A TCP client's close() is a FIN: POLLRDHUP here, never POLLHUP until a
 * write meets its reset. */
static bool client_gone(int fd)
{
	struct pollfd p = { fd, POLLRDHUP, 0 };

	return fd >= 0 && poll(&p, 1, 0) > 0 &&
	       (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static uint64_t soonest(uint64_t a, uint64_t b)
{
	return !a ? b : !b ? a : a < b ? a : b;
}

/* Sets the stream's next envelope; false when the client went away or
 * no memory was left (the stream ends with an error). */
static bool stream_fill(struct stream *st)
{
	struct e2b_stream_end end = { .code = E2B_OK };
	json_t *msg = NULL;
	enum e2b_step step;
	uint64_t now = monotonic_ns();

	if (st->deadline_ns && now >= st->deadline_ns) {
		end.code = E2B_DEADLINE_EXCEEDED;
		snprintf(end.message, sizeof(end.message),
			 "the call's Connect-Timeout-Ms passed");
		step = E2B_STEP_END;
	} else {
		uint64_t until = soonest(
			now + CLIENT_CHECK_NS,
			soonest(st->keepalive_ns ? st->keepalive_due : 0,
				st->deadline_ns));

		step = st->ops->next(st->src, until, &msg, &end);
	}
	free(st->pending);
	st->pending = NULL;
	st->pending_len = st->pending_off = 0;
	switch (step) {
	case E2B_STEP_MESSAGE:
		st->pending = e2b_envelope_make(0, msg, &st->pending_len);
		break;
	case E2B_STEP_IDLE:
		if (client_gone(st->client_fd))
			return false;
		if (!st->keepalive_ns || monotonic_ns() < st->keepalive_due)
			return true;
		json_t *ping = st->ops->keepalive(st->src);
		if (!ping)
			return true;
		st->pending = e2b_envelope_make(0, ping, &st->pending_len);
		break;
	case E2B_STEP_END:
		st->ended = true;
		st->pending = e2b_envelope_make(
			E2B_FLAG_END_STREAM, end_json(&end), &st->pending_len);
		break;
	}
	st->keepalive_due = monotonic_ns() + st->keepalive_ns;
	return st->pending != NULL;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *st = cls;

	(void)pos;
	while (st->pending_off == st->pending_len) {
		if (st->ended)
			return MHD_CONTENT_READER_END_OF_STREAM;
		if (!stream_fill(st))
			return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	size_t n = st->pending_len - st->pending_off;
	if (n > max)
		n = max;
	memcpy(buf, st->pending + st->pending_off, n);
	st->pending_off += n;
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct stream *st = cls;

	st->ops->free(st->src);
	free(st->pending);
	free(st);
}

enum MHD_Result e2b_reply_stream(struct MHD_Connection *conn,
				 struct e2b_request *r,
				 const struct e2b_stream_ops *ops, void *src)
{
	struct stream *st = calloc(1, sizeof(*st));

	if (!st) {
		ops->free(src);
		return MHD_NO;
	}
	uint64_t now = monotonic_ns();
	uint64_t timeout_ms = header_number(conn, "Connect-Timeout-Ms");
	uint64_t ping_s = header_number(conn, "Keepalive-Ping-Interval");

	/* Ours when the client asks for none or rarer ones: a silent process
	 * still writes to the connection, so a client that stopped reading
	 * is cut after idle_timeout_s of no progress, and one that vanished
	 * is found by the write's reset. */
	if (!ping_s || ping_s > SERVER_KEEPALIVE_S)
		ping_s = SERVER_KEEPALIVE_S;
	*st = (struct stream){
		.ops = ops,
		.src = src,
		.client_fd = http_client_fd(conn),
		.keepalive_ns = ping_s * 1000 * NS_PER_MS,
		.keepalive_due = now + ping_s * 1000 * NS_PER_MS,
		.deadline_ns = timeout_ms ? now + timeout_ms * NS_PER_MS : 0,
	};
	struct MHD_Response *resp = MHD_create_response_from_callback(
		MHD_SIZE_UNKNOWN, 64 * 1024, stream_read, st, stream_free);
	if (!resp) {
		stream_free(st);
		return MHD_NO;
	}
	return reply_envelopes(conn, r, resp);
}
