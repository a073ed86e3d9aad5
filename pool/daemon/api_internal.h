/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api_internal.h - what the files of thawd's HTTP API share: pool/daemon/
 * api*.c, and pool/e2b/, the E2B-compatible listener, which serves its own
 * routes on the same HTTP engine (pool/http) with the same limits, memory
 * budget (daemon_http_params()) and agent connections.
 *
 * The API is split the way kvmtool splits a VMM, one file per concern:
 *
 *	api.c		the engine's protocol for thaw's API: the routing
 *			table, the token, request bodies, replies and the
 *			mapping of errors to HTTP statuses
 *	api_sandboxes.c	create, list, get, delete, timeout, ping; templates
 *	api_snapshots.c	checkpoint, fork, rollback, pause, resume; creates
 *			from a snapshot; the snapshots' list, get, delete
 *	api_exec.c	running a command in a sandbox, streamed or collected
 *	api_files.c	copying a file into or out of a sandbox
 *	api_metrics.c	/metrics, /health and the requests counted by status
 *
 * Every route is an api_handler, called once the request's body (if any)
 * is in: it answers through api_reply*() and returns what libmicrohttpd
 * expects.  Statuses are chosen here, at the edge, and only here: the
 * daemon's other parts return their own errors (pool_handout() a pool
 * error), which api_reply_pool_error() maps, as Firecracker's API server
 * maps its VMM's errors.
 */
#ifndef THAW_POOL_DAEMON_API_INTERNAL_H
#define THAW_POOL_DAEMON_API_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <microhttpd.h>

#include "pool/host/agent_client.h"
#include "pool/daemon/daemon.h"
#include "pool/daemon/sandbox_args.h"
#include "pool/daemon/sandbox_ops.h"
#include "pool/http/http_server.h"

/* One HTTP request's state, from its first handler call to its end. */
struct request {
	struct http_exchange x; /* first: the engine's callback drives it */
	struct daemon *d;
	const struct api_route *route;
	char id[SANDBOX_ID_LEN + 1];
	/* PUT files: the upload goes straight on to the agent */
	struct sandbox *sandbox;
	struct agent_conn agent;
	uint64_t uploaded;
	bool write_open;
	int upload_status; /* an error to answer at the end, or 0 */
	char upload_err[512];
};

typedef enum MHD_Result api_handler(struct MHD_Connection *conn,
				    struct request *r, struct daemon *d);

/* ---- api.c: routes ---------------------------------------------------- */

/* Where a route's path is: after the root, /sandboxes/ID or /snapshots/ID. */
enum route_kind { ROUTE_PLAIN, ROUTE_SANDBOX, ROUTE_SNAPSHOT };

/*
 * A route: a path, or a sub-path of /sandboxes/ID or /snapshots/ID, and a
 * handler per method it takes.  A PUT with put_begin streams its body:
 * put_begin runs at the headers, put_piece per piece, put once the body
 * is in; every other body is collected first.
 */
struct api_route {
	const char *path;
	enum route_kind kind;
	api_handler *get, *post, *put, *del;
	api_handler *put_begin;
	void (*put_piece)(struct MHD_Connection *conn, struct request *r,
			  struct daemon *d, const char *data, size_t len);
};

/*
 * The route @url (an unescaped path, as libmicrohttpd passes it) names, and
 * for a sandbox's or a snapshot's route its ID in @id; NULL (a 404) for
 * anything else.  ID is a whole path segment of 1 to SANDBOX_ID_LEN
 * lowercase hex digits; one trailing slash is allowed.  A pure function:
 * no server, no daemon needed.
 */
const struct api_route *api_parse_route(const char *url,
					char id[SANDBOX_ID_LEN + 1]);

/* ---- api.c: replies ---------------------------------------------------- */

/* Queues @resp (taken over; NULL: MHD_NO) with @status, and counts it. */
enum MHD_Result api_reply(struct MHD_Connection *conn, struct request *r,
			  unsigned status, struct MHD_Response *resp);
/* Answers with @text (taken over, malloc'd) of content type @type. */
enum MHD_Result api_reply_text(struct MHD_Connection *conn, struct request *r,
			       unsigned status, const char *type, char *text);
/* Answers with @json (taken over) on one line. */
enum MHD_Result api_reply_json(struct MHD_Connection *conn, struct request *r,
			       unsigned status, json_t *json);
/* api_reply_json() of a reply that took @budget from the daemon's memory
 * budget to make: all but its text's length goes back once it is made,
 * that much once libmicrohttpd frees it (sent, or the client gone). */
enum MHD_Result api_reply_json_held(struct MHD_Connection *conn,
				    struct request *r, unsigned status,
				    json_t *json, uint64_t budget);
/* The error object of API.md. */
__attribute__((format(printf, 4, 5))) enum MHD_Result
api_reply_error(struct MHD_Connection *conn, struct request *r, unsigned status,
		const char *fmt, ...);
/* 404 for the request's sandbox id. */
enum MHD_Result api_no_sandbox(struct MHD_Connection *conn, struct request *r);

/* Answers pool error @e with its status and @message; an overload with a
 * Retry-After. */
enum MHD_Result api_reply_pool_error(struct MHD_Connection *conn,
				     struct request *r, enum pool_error e,
				     const char *message);

/* ---- api.c: request bodies --------------------------------------------- */

/* The collected body as a JSON object ("{}" when empty); NULL after a
 * message in @err. */
json_t *api_body_object(const struct request *r, char *err, size_t errlen);

/* ---- the routes' request parsing (pure: for the fuzz harness too) ------ */

/* A POST /sandboxes body: its template (config's), lease, env and
 * network policy. */
struct create_request {
	const struct template_config *template;
	uint32_t timeout_s;
	char **env; /* the caller frees it (env_free), also on error */
	size_t nr_env;
	bool has_network; /* "network" given: @network, else the pool's */
	struct net_policy network;
};

/* api_sandboxes.c: @body's "network" for a create of template @t into
 * @out (*@has_network: one given, not null; else the pool's policy
 * stays); 0, or 400 with a message in @err. */
int api_parse_create_network(json_t *body, const struct template_config *t,
			     bool *has_network, struct net_policy *out,
			     char *err, size_t errlen);
/* api_sandboxes.c: a create's sandbox_create.policy (sandbox_ops.h) giving
 * the policy @arg points to, parsed from the request. */
enum pool_error api_given_policy(void *arg, const struct template_config *t,
				 bool has_network, struct net_policy *out,
				 bool *set, char *err, size_t errlen);
/* api_sandboxes.c: @body of POST /sandboxes against @cfg's templates; 0,
 * or 400/404 with a message in @err.  One with a "snapshot" is
 * api_parse_create_from()'s. */
int api_parse_create(json_t *body, const struct daemon_config *cfg,
		     struct create_request *req, char *err, size_t errlen);
/* A POST /sandboxes body with a "snapshot": its lease, env and count. */
struct create_from_request {
	char snapshot[SANDBOX_ID_LEN + 1];
	uint32_t timeout_s; /* 0: the snapshot's template's */
	uint32_t count;
	bool counted; /* "count" given: the answer is a list */
	char **env;   /* the caller frees it (env_free), also on error */
	size_t nr_env;
	json_t *network; /* "network", borrowed from the body; NULL: none */
};

/* api_snapshots.c: @body of POST /sandboxes with a "snapshot"; 0, or 400
 * (413 for its env) with a message in @err. */
int api_parse_create_from(json_t *body, struct create_from_request *req,
			  char *err, size_t errlen);
/* api_snapshots.c: POST /sandboxes with a "snapshot" in @body (the
 * caller's still). */
enum MHD_Result api_create_from_snapshot(struct MHD_Connection *conn,
					 struct request *r, struct daemon *d,
					 json_t *body);
/* api_sandboxes.c: the sandbox object of API.md, of a view. */
json_t *api_sandbox_json(const struct sandbox_view *c, bool detail);
/* api_sandboxes.c: milliseconds to two decimals: JSON readers need not
 * see float noise. */
double api_hundredths(double ms);
/* api.c: the error object of API.md for pool error @e, as one entry of a
 * fork's answer holds it. */
json_t *api_pool_error_json(enum pool_error e, const char *message);

/* api_sandboxes.c: @body of POST /sandboxes/ID/timeout; false with a
 * message in @err. */
bool api_parse_timeout(json_t *body, uint32_t max_timeout_s,
		       uint32_t *timeout_s, char *err, size_t errlen);
/* api_files.c: ?path= (absolute, bounded; NULL: absent) and ?mode= (octal,
 * NULL: 0644); 0, or 400 with a message in @err. */
int api_file_args(const char *path, const char *mode_arg, uint32_t *mode,
		  char *err, size_t errlen);

/* ---- the routes -------------------------------------------------------- */

api_handler api_create_sandbox, api_list_sandboxes, api_get_sandbox,
	api_delete_sandbox, api_set_timeout, api_set_network, api_ping_sandbox,
	api_get_templates;
api_handler api_exec;
api_handler api_checkpoint, api_fork, api_rollback, api_pause, api_resume,
	api_list_snapshots, api_get_snapshot, api_delete_snapshot;
api_handler api_get_file, api_put_file_begin, api_put_file_end;
api_handler api_get_health, api_get_metrics;

/* A piece of a PUT file's body, on its way to the guest. */
void api_put_file_piece(struct MHD_Connection *conn, struct request *r,
			struct daemon *d, const char *data, size_t len);

#endif
