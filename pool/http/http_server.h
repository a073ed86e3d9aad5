/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_server.h - the HTTP engine both of thawd's servers run on (thaw's
 * API on its Unix socket, pool/daemon/api.c; the E2B listener on TCP,
 * pool/e2b/server.c): libmicrohttpd with a thread per connection, the
 * connections accepted and capped per peer (http_conns.c), request bodies
 * collected from a memory budget, and the one path every answer takes.
 *
 * It knows nothing of sandboxes, routes or E2B: a server is a struct
 * http_protocol (how its requests begin, take their body, end and fail)
 * and a struct http_params (its limits, and the program's memory budget
 * and count of answers, which the engine reaches through callbacks and
 * keeps no copy of: thawd's two servers share the daemon's).  Statuses
 * are the protocol's to choose; the engine picks only those of what it
 * refuses itself: a body past max_request_bytes (413) or the budget (503),
 * answered in the protocol's shape through its fail(), and a connection
 * over its peer's share (429) or past every slot (503), answered before
 * any request of it is read.
 *
 *	http_server.c	the libmicrohttpd callback, bodies and their
 *			budget, answers held while a body is read, JSON
 *			replies and bounded JSON parses
 *	http_conns.c	accepting connections: a cap per uid or address,
 *			a deadline for each request head
 *	http_peer_uid.c	the uid holding a local TCP client's socket
 */
#ifndef THAW_POOL_HTTP_HTTP_SERVER_H
#define THAW_POOL_HTTP_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

/* One line per value; milliseconds print as 41.7, not 41.700000000000003. */
#define HTTP_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(12))

struct http_server;

/*
 * What a server takes from the program that runs it: its limits (the
 * names are thawd's config keys), and the memory budget and the count of
 * answers by status it shares with the program's other servers, each
 * called with @owner.
 */
struct http_params {
	uint32_t max_connections;
	uint32_t max_connections_per_uid;
	uint32_t header_timeout_s; /* a request head's deadline */
	uint32_t idle_timeout_s;   /* silence allowed inside a request */
	uint64_t max_request_bytes;
	void *owner;
	/* Takes @bytes from the budget; false when they do not fit. */
	bool (*budget_take)(void *owner, uint64_t bytes);
	void (*budget_give)(void *owner, uint64_t bytes);
	/* The message of a request refused for the budget (a 503). */
	void (*budget_spent)(void *owner, char *err, size_t errlen);
	void (*count_status)(void *owner, unsigned status);
};

/* A body being collected, and the memory budget it holds. */
struct http_body {
	char *buf;
	size_t len;
	bool too_large;	  /* past max_request_bytes */
	bool over_budget; /* the body's budget was not there */
	uint64_t budget_held;
};

/*
 * What a request in flight has, whatever its server's routes: the first
 * member of each server's request struct, so that one libmicrohttpd
 * callback drives every server, and a pointer to it is one to the request
 * (C11 6.7.2.1).
 */
struct http_exchange {
	struct http_server *server; /* its answers are counted there */
	bool answered;		    /* it has its answer (http_answer()) */
	bool streamed;		    /* its body goes to the server's piece() */
	struct http_body body;	    /* otherwise collected here */
	/* An answer given at the headers while a body is on its way is held
	 * until that body is read (http_server.c says why). */
	bool at_headers;
	bool body_coming;
	uint64_t dropped; /* body bytes read after the answer */
	struct MHD_Response *held;
	unsigned held_status;
};

/*
 * A server's side of that callback.  begin() runs at the headers (the
 * request is zeroed; answering there ends it, setting x->streamed sends
 * its body to piece()), end() once the body is in; fail() answers an error
 * in the server's shape; finish() frees what the request holds besides its
 * body, however it ended.
 */
struct http_protocol {
	const char *what; /* "E2B server", for the log */
	size_t request_size;
	enum MHD_Result (*begin)(struct MHD_Connection *conn,
				 struct http_exchange *x, void *cls,
				 const char *url, const char *method);
	void (*piece)(struct MHD_Connection *conn, struct http_exchange *x,
		      const char *data, size_t len);
	enum MHD_Result (*end)(struct MHD_Connection *conn,
			       struct http_exchange *x, const char *method);
	enum MHD_Result (*fail)(struct MHD_Connection *conn,
				struct http_exchange *x, unsigned status,
				const char *message);
	void (*finish)(struct http_exchange *x);
};

/*
 * Serves the bound, listening socket @fd (taken over, closed on failure
 * too) with libmicrohttpd, a thread per connection, http_conns.c
 * accepting with @params' limits (copied), its requests @p's (begin()
 * gets @cls).  NULL after a log line naming p->what on failure;
 * http_stop() stops it.
 */
struct http_server *http_serve(const struct http_params *params, int fd,
			       const struct http_protocol *p, void *cls);
/* Stops accepting, waits for every connection's thread. */
void http_stop(struct http_server *s);

/* Answers @x with @resp (taken; NULL: MHD_NO) and @status, counted in
 * its server's params: every reply ends here. */
enum MHD_Result http_answer(struct MHD_Connection *conn,
			    struct http_exchange *x, unsigned status,
			    struct MHD_Response *resp);

/* A response of @json (taken over) on one line, with the header @header:
 * @value unless @header is NULL; NULL when out of memory. */
struct MHD_Response *http_json_response(json_t *json, const char *header,
					const char *value);

/* A response of @len bytes of @text (taken over, malloc'd) of content
 * type @type for @x, whose @budget (taken from its server's) goes back
 * when it is freed, sent or not; NULL (@text freed, @budget given back)
 * when out of memory. */
struct MHD_Response *http_held_response(const struct http_exchange *x,
					char *text, size_t len,
					const char *type, uint64_t budget);

/*
 * A response of content type @type whose body @read() produces as the
 * client takes it: up to @max bytes into @buf, returning how many, 0 at
 * the end, or < 0 to cut the body short; @free_arg(@arg) once it is done,
 * sent or not, and also when NULL is returned (out of memory).
 */
struct MHD_Response *
http_stream_response(ssize_t (*read)(void *arg, char *buf, size_t max),
		     void (*free_arg)(void *arg), void *arg, const char *type);

/* A reply's text being built: Prometheus output, an exec's collected
 * output, a directory's listing. */
struct http_text {
	char *buf;
	size_t len, cap;
	bool failed;
};

/* Grows @t's buffer to @cap bytes; false (and t->failed) without memory. */
bool http_text_reserve(struct http_text *t, size_t cap);

/* @conn's socket, -1 when libmicrohttpd does not say: what a wait on a
 * guest watches for the client's hang-up. */
int http_client_fd(struct MHD_Connection *conn);

/*
 * @conn's request now waits on something that may stay silent far longer
 * than @idle_timeout_s (a guest printing nothing, an emulated guest):
 * until the request completes, its connection is closed for silence only
 * past @deadline_ns (monotonic; 0: never) plus @idle_timeout_s.
 */
void http_paced(struct MHD_Connection *conn, unsigned idle_timeout_s,
		uint64_t deadline_ns);

/* @text of @len bytes as a JSON object ("{}" when empty), its parse
 * bounded as a body's (http_server.c); NULL after a message in @err. */
json_t *http_parse_object(const char *text, size_t len, char *err,
			  size_t errlen);

#endif
