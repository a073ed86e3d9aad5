/* SPDX-License-Identifier: Apache-2.0 */
/*
 * e2b_internal.h - what the files of pool/e2b/ share: the request, the
 * route table, replies in E2B's shapes, the Connect protocol's envelopes
 * and streams, the sandbox an envd request is for.  e2b.h is the daemon's
 * view of it all.
 *
 *	server.c	the TCP listener (the HTTP engine, pool/http),
 *			routing, bodies, the API key, REST replies
 *	envd.c		envd's side of a request: its sandbox (E2b-Sandbox-Id
 *			or the Host header), its access token, its user,
 *			/health
 *	connect.c	the Connect protocol: envelopes, error codes, unary
 *			answers, server streams with keepalives and deadlines
 *	sandboxes.c	the control plane: sandboxes, their timeouts, pause,
 *			resume, connect, fork, snapshots, templates
 *	process.c	envd's process.Process service
 *	processes.c	the processes started through envd, kept per sandbox
 *			beyond the request that started them
 *	filesystem.c	envd's filesystem.Filesystem service, with
 *			watchers.c (its watchers kept between calls),
 *			files.c (GET and POST /files), fspath.c (paths and
 *			users) and entry.c (EntryInfo): filesystem.h
 *
 * Every request runs on its own libmicrohttpd thread, as thaw's own API's
 * (the HTTP engine drives both): a route's handler is called once the
 * body is in (a JSON body is collected up to max_request_bytes, from the
 * daemon's memory budget), or, for a route with body_begin, at the
 * headers, its body then passed on piece by piece (an upload).  Handlers
 * answer through the e2b_reply_*()
 * helpers and return what libmicrohttpd expects.  The service core's
 * verbs (pool/daemon/sandbox_ops.h) do the work, and nothing of thaw's
 * own API is called; errors are mapped to E2B's statuses here, at this
 * edge, as api.c maps them for thaw's API.
 *
 * Control-plane routes need the `X-API-KEY` header to be the daemon's
 * token; envd routes the `X-Access-Token` of their sandbox (handed out by
 * its create or connect), or the daemon's token.
 */
#ifndef THAW_POOL_E2B_E2B_INTERNAL_H
#define THAW_POOL_E2B_E2B_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

#include "pool/daemon/sandbox_args.h"
#include "pool/daemon/sandbox_ops.h"
#include "pool/e2b/e2b.h"
#include "pool/http/http_server.h"

/*
 * The envd version every sandbox reports (create, connect, get).  The SDK
 * turns features on by it: >= 0.3.0 lets a command's stdin be closed
 * (stdin: false), >= 0.4.0 sends no user unless asked (envd's default is
 * then ours, "user"), >= 0.5.2 has CloseStdin.  Below 0.5.7, so that
 * files.write always uploads multipart/form-data (0.5.7 adds
 * application/octet-stream uploads), and below 0.6.2, so that the SDK
 * refuses file metadata and watch entries, which thaw does not keep.
 */
#define E2B_ENVD_VERSION "0.5.2"
/* envd's port: E2b-Sandbox-Port, and the <port>- of a Host header. */
#define E2B_ENVD_PORT 49983
/* E2B's default user, whose uid the guest has (guest/PROTOCOL.md). */
#define E2B_DEFAULT_USER "user"
/* A sandbox's envdAccessToken (e2b_sandbox_token()), a watcher's id
 * (e2b_new_token()): 32 bytes in hex. */
#define E2B_TOKEN_LEN 64
/* A path's {id}: E2B's ids are short; ours are SANDBOX_ID_LEN. */
#define E2B_PATH_ID_MAX 64

/* What E2B keeps with a sandbox (its extension: e2b_record()); never
 * changed once attached. */
struct e2b_sandbox {
	char template_id[CONFIG_NAME_MAX]; /* as asked: "base" stays "base" */
	char access_token[E2B_TOKEN_LEN + 1];
	json_t *metadata; /* an object of strings, never NULL */
	/* allow_internet_access as the create gave it, or null */
	bool internet_given, internet;
};

struct e2b_processes;
struct e2b_watchers;

struct e2b_server {
	struct daemon *d;
	unsigned slot; /* its extension slot in a sandbox (frontend.h) */
	/* What the sandboxes' access tokens derive from: random, the
	 * listener's life long (e2b_sandbox_token()). */
	uint8_t token_key[32];
	struct http_server *http;
	struct e2b_processes *processes;
	struct e2b_watchers *watchers; /* filesystem.h */
};

/* One HTTP request's state, from its first handler call to its end. */
struct e2b_request {
	struct http_exchange x; /* first: the engine's callback drives it */
	struct daemon *d;
	struct e2b_server *server;
	const struct e2b_route *route;
	char id[E2B_PATH_ID_MAX + 1]; /* the path's {id}, or "" */
	/* envd routes: the sandbox the request is for, held until its end */
	struct sandbox *sandbox;
	/* A streamed body's route keeps its state here; freed at the end by
	 * @state_free, whatever happened. */
	void *state;
	void (*state_free)(struct e2b_request *r);
};

typedef enum MHD_Result e2b_handler(struct MHD_Connection *conn,
				    struct e2b_request *r);

/* ---- server.c: routes ------------------------------------------------- */

/*
 * Who a route answers to: the control plane, or a sandbox's envd, over
 * plain HTTP (/files, /health: errors as E2B's {"code": 404, ...}) or the
 * Connect protocol (its RPCs: errors as Connect's).
 */
enum e2b_route_kind { E2B_API, E2B_ENVD, E2B_RPC };

/*
 * A route: a method and a path, "{id}" standing for one segment (the
 * request's id).  A route with body_begin streams its body: body_begin
 * runs at the headers (answering there ends the request), body_piece per
 * piece, handler once it is all in.
 */
struct e2b_route {
	const char *method, *path;
	enum e2b_route_kind kind;
	e2b_handler *handler;
	e2b_handler *body_begin;
	void (*body_piece)(struct MHD_Connection *conn, struct e2b_request *r,
			   const char *data, size_t len);
};

/*
 * The route of @method and @url (a path, no query), with its {id} in @id;
 * NULL when none matches, *@path_known then telling whether another
 * method would have (a 405).  An id is 1 to E2B_PATH_ID_MAX of
 * [A-Za-z0-9_-]; one trailing slash is allowed.  Pure: no server needed.
 */
const struct e2b_route *e2b_find_route(const char *method, const char *url,
				       char id[E2B_PATH_ID_MAX + 1],
				       bool *path_known);

/* ---- server.c: replies ------------------------------------------------ */

/* Queues @resp (taken over; NULL: MHD_NO) with @status, and counts it. */
enum MHD_Result e2b_reply(struct MHD_Connection *conn, struct e2b_request *r,
			  unsigned status, struct MHD_Response *resp);
/* @json (taken over; NULL: MHD_NO), with @status. */
enum MHD_Result e2b_reply_json(struct MHD_Connection *conn,
			       struct e2b_request *r, unsigned status,
			       json_t *json);
/* The same with the header @name: @value (none when @value is NULL). */
enum MHD_Result e2b_reply_json_header(struct MHD_Connection *conn,
				      struct e2b_request *r, unsigned status,
				      json_t *json, const char *name,
				      const char *value);
/* An answer with no body (204). */
enum MHD_Result e2b_reply_empty(struct MHD_Connection *conn,
				struct e2b_request *r, unsigned status);
/* An error in the shape @r's route's client reads: E2B's error object,
 * {"code": @status, "message": ...}, on the control plane, /files and
 * /health (and with no route); Connect's on an RPC (e2b_code_of_status),
 * in a stream's end message for a streaming call (application/connect+). */
__attribute__((format(printf, 4, 5))) enum MHD_Result
e2b_reply_error(struct MHD_Connection *conn, struct e2b_request *r,
		unsigned status, const char *fmt, ...);
/* A pool error (daemon.h) as E2B's error, with the status thaw's API
 * gives it (pool_error_status). */
enum MHD_Result e2b_reply_pool_error(struct MHD_Connection *conn,
				     struct e2b_request *r, enum pool_error e,
				     const char *message);

/* The collected body as a JSON object ("{}" when empty); NULL after a
 * message in @err. */
json_t *e2b_body_object(const struct e2b_request *r, char *err, size_t errlen);

/* ---- envd.c ------------------------------------------------------------ */

/*
 * The sandbox id and port a Host header names: "<port>-<id>.<domain>",
 * with an optional ":<port>" after it, as E2B's SDK makes it.  False when
 * @host is not of that shape.  Pure.
 */
bool e2b_parse_host(const char *host, unsigned *port,
		    char id[E2B_PATH_ID_MAX + 1]);

/*
 * Finds the sandbox an envd request of @method is for (E2b-Sandbox-Id,
 * else the Host header, else, for /files, the sandbox whose token signed
 * the URL) and checks its X-Access-Token (or, for /files, the URL's
 * signature); sets r->sandbox (held) and returns MHD_YES with r->x.answered
 * false, or answers the error: 502 for no such sandbox to the daemon's
 * token, as E2B's proxy does (which the SDK reads as a sandbox gone, a
 * Connect client as unavailable), and so to the sandbox's own token (or
 * a URL it signed) once it is gone; 401 for other credentials or none,
 * whether the sandbox exists or not; 400 for no sandbox named; Connect's
 * errors on an E2B_RPC route.
 */
enum MHD_Result e2b_envd_begin(struct MHD_Connection *conn,
			       struct e2b_request *r, const char *method);

/*
 * Whether @signature is E2B's signature of a file URL (the SDK's
 * getSignature): "v1_" and the unpadded base64 of the SHA-256 of
 * "PATH:OPERATION:USER:TOKEN", ":EXPIRATION" appended when it has one
 * (Unix seconds, not before @now_s).  Pure.
 */
bool e2b_signature_valid(const char *signature, const char *path,
			 const char *operation, const char *user,
			 const char *token, const char *expiration,
			 int64_t now_s);

/*
 * The user a request asks for (envd's "Authorization: Basic
 * base64(user:)", the SDK's `user` option), E2B_DEFAULT_USER without one;
 * false with a message in @err for a malformed one.
 */
bool e2b_request_user(struct MHD_Connection *conn, char *user, size_t len,
		      char *err, size_t errlen);

/* A new random envd access token into @out. */
int e2b_new_token(char out[E2B_TOKEN_LEN + 1]);

/*
 * Sandbox @id's envd access token into @out: the HMAC-SHA256 of @id under
 * @s->token_key, in hex.  Derived, not drawn, so that a request carrying
 * a sandbox's own token is known for one once the sandbox is gone (502,
 * the SDK's "not running") while any other credentials are refused alike
 * whether the sandbox exists or not, with no record of the dead kept.
 */
void e2b_sandbox_token(const struct e2b_server *s, const char *id,
		       char out[E2B_TOKEN_LEN + 1]);

/* @a and @b equal, in a time that tells nothing of where they differ. */
bool e2b_secret_equal(const char *a, const char *b);

/* ---- connect.c: the Connect protocol ------------------------------------ */

/* Connect's error codes (connectrpc.com/docs/protocol#error-codes). */
enum e2b_code {
	E2B_OK,
	E2B_CANCELED,
	E2B_UNKNOWN,
	E2B_INVALID_ARGUMENT,
	E2B_DEADLINE_EXCEEDED,
	E2B_NOT_FOUND,
	E2B_ALREADY_EXISTS,
	E2B_PERMISSION_DENIED,
	E2B_RESOURCE_EXHAUSTED,
	E2B_FAILED_PRECONDITION,
	E2B_ABORTED,
	E2B_OUT_OF_RANGE,
	E2B_UNIMPLEMENTED,
	E2B_INTERNAL,
	E2B_UNAVAILABLE,
	E2B_DATA_LOSS,
	E2B_UNAUTHENTICATED,
};

/* "not_found"; and the HTTP status a unary call's error takes. */
const char *e2b_code_name(enum e2b_code code);
unsigned e2b_code_status(enum e2b_code code);
/* The Connect code of an errno from the guest (ENOENT: not_found...). */
enum e2b_code e2b_code_of_errno(int err);
/* The Connect code of an HTTP status thaw's helpers chose (409...). */
enum e2b_code e2b_code_of_status(unsigned status);

/* An envelope: a flags byte, a big-endian u32 length, the message. */
#define E2B_ENVELOPE_HEADER 5
#define E2B_FLAG_COMPRESSED 0x01
#define E2B_FLAG_END_STREAM 0x02

/*
 * The one message of a streaming call's body (@buf, @len): exactly one
 * uncompressed, non-final envelope and nothing after it.  Sets *@msg and
 * *@msg_len (inside @buf); false with a message in @err.  Pure.
 */
bool e2b_envelope_open(const char *buf, size_t len, const char **msg,
		       size_t *msg_len, char *err, size_t errlen);
/* @json (taken over) as an envelope with @flags, malloc'd, its size in
 * *@len; NULL when out of memory. */
char *e2b_envelope_make(uint8_t flags, json_t *json, size_t *len);

/*
 * The request message of a Connect call: the JSON body of a unary call
 * (application/json), the envelope's of a streaming one
 * (application/connect+json).  NULL with a message in @err.
 */
json_t *e2b_connect_request(const struct e2b_request *r, bool streaming,
			    char *err, size_t errlen);

/* Connect's error object, {"code": "not_found", "message": ...}. */
json_t *e2b_code_json(enum e2b_code code, const char *message);

/* A unary call's answer: @msg (taken over), or an error. */
enum MHD_Result e2b_reply_connect(struct MHD_Connection *conn,
				  struct e2b_request *r, json_t *msg);
__attribute__((format(printf, 4, 5))) enum MHD_Result
e2b_reply_connect_error(struct MHD_Connection *conn, struct e2b_request *r,
			enum e2b_code code, const char *fmt, ...);
/* A streaming call that fails before its first message: status 200 and
 * an end-of-stream envelope holding the error, as the protocol has it. */
__attribute__((format(printf, 4, 5))) enum MHD_Result
e2b_reply_stream_error(struct MHD_Connection *conn, struct e2b_request *r,
		       enum e2b_code code, const char *fmt, ...);

/* What a stream's source says when asked for its next message. */
enum e2b_step {
	E2B_STEP_MESSAGE, /* *msg holds one */
	E2B_STEP_IDLE,	  /* none before the time given: ask again */
	E2B_STEP_END,	  /* the stream ends, with @end */
};

struct e2b_stream_end {
	enum e2b_code code; /* E2B_OK: a clean end */
	char message[512];
};

/*
 * A server stream's source (a process's events, a directory's): next()
 * waits until @until_ns (monotonic) at most for a message; keepalive()
 * makes the message sent when the client asked for pings
 * (Keepalive-Ping-Interval) and nothing came for that long, NULL for none
 * yet; free() runs once the stream is over, sent or not.
 */
struct e2b_stream_ops {
	enum e2b_step (*next)(void *src, uint64_t until_ns, json_t **msg,
			      struct e2b_stream_end *end);
	json_t *(*keepalive)(void *src);
	void (*free)(void *src);
};

/*
 * Answers a streaming call with @src's messages, each in an envelope, and
 * the end-of-stream envelope after the last: until @src ends, the client
 * goes away, or the call's Connect-Timeout-Ms passes (deadline_exceeded).
 * @src is @ops->free()d whatever happens.
 */
enum MHD_Result e2b_reply_stream(struct MHD_Connection *conn,
				 struct e2b_request *r,
				 const struct e2b_stream_ops *ops, void *src);

/* ---- the routes --------------------------------------------------------- */

/* sandboxes.c */
e2b_handler e2b_create_sandbox, e2b_list_sandboxes, e2b_list_sandboxes_v2,
	e2b_get_sandbox, e2b_kill_sandbox, e2b_set_timeout, e2b_refresh,
	e2b_pause, e2b_resume, e2b_connect, e2b_fork, e2b_snapshot,
	e2b_update_network, e2b_sandbox_metrics, e2b_list_snapshots,
	e2b_delete_snapshot, e2b_list_templates;
/* envd.c */
e2b_handler e2b_health;
/* process.c */
e2b_handler e2b_process_start, e2b_process_connect, e2b_process_list,
	e2b_process_send_input, e2b_process_close_stdin,
	e2b_process_send_signal, e2b_process_update, e2b_process_stream_input;

/* ---- sandboxes.c: the control plane's request parsing (pure) ------------ */

/* A POST /sandboxes or /v2/sandboxes body. */
struct e2b_create_request {
	const struct template_config *template; /* served for templateID */
	char template_id[CONFIG_NAME_MAX];	/* as asked */
	uint32_t timeout_s;
	char **env; /* envVars as KEY=VALUE: the caller frees it
		     * (env_free), also on error */
	size_t nr_env;
	json_t *metadata; /* a new reference, never NULL once parsed */
	bool internet_given, internet;
};

/*
 * @body of a create against @cfg's templates: templateID (default "base",
 * served by the template of that name, else "default"), timeout (seconds,
 * at most the template's max_timeout_s; absent: @default_timeout_s, E2B's
 * default for the route, within that bound), envVars, metadata (strings),
 * allow_internet_access; E2B's fields thaw has nothing for (autoPause,
 * mcp, volumeMounts...) refused when set.  0, or an HTTP status and a
 * message in @err.
 */
int e2b_parse_create(json_t *body, const struct daemon_config *cfg,
		     uint32_t default_timeout_s, struct e2b_create_request *req,
		     char *err, size_t errlen);

/* GET /v2/sandboxes' query: state and metadata filters, pagination. */
struct e2b_list_query {
	bool running, paused; /* the states asked for (none given: both) */
	json_t *metadata;     /* key -> value the sandboxes must have */
	uint32_t limit;	      /* 0: all */
	char next_token[SANDBOX_ID_LEN + 1]; /* start after this id */
};

/*
 * Reads @state ("running,paused"), @metadata ("k=v&k2=v2", each part
 * URL-encoded), @limit and @next_token (each NULL when absent) into @q;
 * 0 or 400 with a message in @err.  q->metadata is the caller's to
 * json_decref(), also on error.  Pure.
 */
int e2b_parse_list_query(const char *state, const char *metadata,
			 const char *limit, const char *next_token,
			 struct e2b_list_query *q, char *err, size_t errlen);

#endif
