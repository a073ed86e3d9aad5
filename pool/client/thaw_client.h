/* SPDX-License-Identifier: Apache-2.0 */
/*
 * thaw_client.h - the C client of thawd's HTTP API (pool/API.md), the one
 * that `thaw sandbox|exec|cp`, thaw-bench and the daemon's tests use, and
 * that a platform can link to (libthaw_client: libcurl, jansson).
 *
 * Design:
 * - A connection (struct thaw_client) is the daemon's Unix socket, the
 *   bearer token and a libcurl handle whose connection is kept open from
 *   one call to the next.  It belongs to one thread: threads open their
 *   own.  Opening does not connect; the first call does.
 * - Every call blocks until the exchange is over.  Bodies are never
 *   buffered where they need not be: an upload streams from a file
 *   descriptor, and a successful answer can stream to a callback as it
 *   arrives, so a command's output shows as it is written and a large file
 *   never sits in memory.  Error answers are always buffered, since they
 *   are the daemon's JSON message.
 * - A call returns 0, or one of the negative THAW_CLIENT_* codes below with
 *   the caller's error buffer saying why in one line: the daemon's status,
 *   code and message ("404 not_found: no sandbox 3f9a..."), or the
 *   transport failure ("cannot reach the daemon at PATH: Connection
 *   refused").  The library never prints and never exits.  The text it
 *   hands out (that message, a sandbox's fields, an exec's error) is
 *   printable (common/printable.h): a daemon's bytes cannot drive the
 *   terminal its caller prints them on.
 * - A flag the caller sets from a signal handler (the cancel option) ends
 *   the call in progress at once, even while the daemon is silent: closing
 *   the connection is what tells the daemon to kill an exec's command.
 * - Typed helpers cover what the CLI, the bench and the tests do: create,
 *   get, list, delete and ping sandboxes, exec with its events streamed to a
 *   callback, file upload and download, a sandbox's network policy, its
 *   checkpoints, forks, rollbacks, pause and resume, the snapshots, the
 *   templates' pool state and a metric's value.  thaw_client_call() is any
 *   request, raw.
 */
#ifndef THAW_POOL_CLIENT_THAW_CLIENT_H
#define THAW_POOL_CLIENT_THAW_CLIENT_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* What a call returns besides 0; the error buffer always says more. */
enum thaw_client_error {
	THAW_CLIENT_STATUS = -1,      /* the daemon answered a non-2xx status */
	THAW_CLIENT_UNREACHABLE = -2, /* no connection to its socket */
	THAW_CLIENT_TRANSPORT = -3,   /* the connection failed or timed out */
	THAW_CLIENT_ANSWER = -4,      /* an answer API.md does not allow */
	/* Out of memory, an unreadable upload, text JSON cannot carry, a
	 * callback's own failure. */
	THAW_CLIENT_LOCAL = -5,
	THAW_CLIENT_CANCELED = -6, /* *cancel was set */
};

struct thaw_client_options {
	const char *socket; /* the daemon's Unix socket (required) */
	const char *token;  /* sent as a bearer token; NULL or "": none */
	unsigned timeout_s; /* a whole exchange's limit; 0: none */
	/* Nonzero (a signal handler's flag) ends a call; NULL: never. */
	volatile sig_atomic_t *cancel;
};

struct thaw_client;

/*
 * A connection with @o (copied).  Returns NULL with @err saying why: the
 * socket path does not fit a sockaddr_un, or out of memory.
 */
struct thaw_client *thaw_client_open(const struct thaw_client_options *o,
				     char *err, size_t errlen);
void thaw_client_close(struct thaw_client *c);

/*
 * Whether @s can be sent: the API's JSON strings are UTF-8.  The helpers
 * refuse other text (THAW_CLIENT_LOCAL); callers that want to name the
 * option at fault check first.
 */
bool thaw_client_is_text(const char *s);

/*
 * Body data as it arrives.  Returns 0 to go on, or a THAW_CLIENT_* code
 * after filling @err (THAW_CLIENT_LOCAL for the callback's own failures),
 * which ends the transfer and is what the call returns.
 */
typedef int (*thaw_client_data_fn)(const void *data, size_t len, void *arg,
				   char *err, size_t errlen);

/* A request body streamed from a file descriptor (read to its end). */
struct thaw_upload {
	int fd;
	const char *name; /* for messages: "cannot read NAME: ..." */
	long long size;	  /* bytes; -1: unknown, sent chunked */
};

/* One request for thaw_client_call(); method and path are required. */
struct thaw_call {
	const char *method;
	const char *path; /* after the host, percent-encoded */
	const void *body; /* @len bytes (JSON, or a file's); NULL: none */
	size_t len;
	const struct thaw_upload *upload; /* instead of @body */
	/*
	 * Send the body only after the daemon's go-ahead (Expect:
	 * 100-continue), so that a refusal (413) is read rather than written
	 * into a closed connection.  thawd sends none: a body it accepts
	 * waits a second (libcurl's default wait).
	 */
	bool expect_continue;
	unsigned timeout_s; /* 0: the connection's */
	/* A 2xx answer's body goes here as it arrives; NULL: into the reply. */
	thaw_client_data_fn sink;
	void *sink_arg;
};

/* What came back; thaw_reply_free() releases it. */
struct thaw_reply {
	long status; /* 0: no answer */
	char *body;  /* NUL-terminated: buffered, or an error answer */
	size_t len;
	char *headers; /* the answer's header lines, for thaw_reply_header() */
	size_t headers_len;
	double seconds; /* the whole exchange */
};

/*
 * Sends @q and takes in its answer into @r (which needs no setup; free it
 * with thaw_reply_free() whatever the outcome).  Returns 0 on a 2xx status,
 * THAW_CLIENT_STATUS with the daemon's "<status> <code>: <message>" in
 * @err, or another code.  Buffered answers are at most 16 MiB.
 */
int thaw_client_call(struct thaw_client *c, const struct thaw_call *q,
		     struct thaw_reply *r, char *err, size_t errlen);
void thaw_reply_free(struct thaw_reply *r);

/* Header @name's value (case-insensitive name) into @out; false if none. */
bool thaw_reply_header(const struct thaw_reply *r, const char *name, char *out,
		       size_t len);

/* ---- typed helpers: 0 or a THAW_CLIENT_* code, as thaw_client_call() ---- */

#define THAW_CLIENT_ID_MAX 64	/* ids are 16 hex digits */
#define THAW_CLIENT_NAME_MAX 64 /* template names: at most 63 bytes */

/*
 * A sandbox's restore_ms split where its guest starts running (API.md's
 * "restore"): host_ms = vmm_start_ms (page_in_ms in it) + state_restore_ms,
 * guest_ms = agent_ms + identity_ms; and network_ms, its network made
 * before its VMM started (in neither side; 0 without a network).
 */
struct thaw_restore_phases {
	double host_ms, vmm_start_ms, page_in_ms, state_restore_ms;
	double guest_ms, agent_ms, identity_ms;
	double prefetched_pages;
	double network_ms;
};

/* A sandbox as the API describes it; absent strings are "", numbers 0. */
struct thaw_sandbox {
	char id[THAW_CLIENT_ID_MAX];
	char template[THAW_CLIENT_NAME_MAX];
	char created[40], expires[40];	   /* RFC 3339 */
	char state[16];			   /* "running", "stopped", "paused" */
	char snapshot[THAW_CLIENT_ID_MAX]; /* what its memory derives from */
	char stop_reason[256];
	double restore_ms, handout_ms;
	struct thaw_restore_phases restore;
	long pid;	       /* GET /sandboxes/{id} only */
	char host_address[16]; /* "A.B.C.D"; "": no network */
};

/*
 * A network policy to send (API.md's "network"): what is left unset is the
 * template's.  CIDRs are "A.B.C.D/N" text, checked by the daemon.
 */
struct thaw_network {
	int allow_internet; /* -1: the template's; 0 or 1 */
	const char *const
		*allow_out;	     /* NULL-terminated; NULL: the template's */
	const char *const *deny_out; /* NULL-terminated; NULL: the template's */
};

struct thaw_create {
	const char *template;	/* NULL: the daemon's default */
	const char *snapshot;	/* instead of a template: restored from it */
	unsigned timeout_s;	/* 0: the template's */
	const char *const *env; /* "KEY=VALUE"s, NULL-terminated; or NULL */
	const struct thaw_network *network; /* NULL: the template's policy */
};

/* POST /sandboxes; @s gets the answer (an id, or THAW_CLIENT_ANSWER). */
int thaw_client_create(struct thaw_client *c, const struct thaw_create *spec,
		       struct thaw_sandbox *s, char *err, size_t errlen);

/* A checkpoint written (API.md: POST /sandboxes/{id}/checkpoint). */
struct thaw_checkpoint {
	char snapshot[THAW_CLIENT_ID_MAX], parent[THAW_CLIENT_ID_MAX];
	double dirty_bytes, pause_ms, total_ms;
	long depth;
	bool full;
};

/* POST /sandboxes/@id/checkpoint. */
int thaw_client_checkpoint(struct thaw_client *c, const char *id,
			   struct thaw_checkpoint *ck, char *err,
			   size_t errlen);

/* One sandbox of a fork: its id, or why it was not made. */
struct thaw_fork_entry {
	char id[THAW_CLIENT_ID_MAX]; /* "" when it failed */
	char error[512];	     /* "<code>: <message>" when it failed */
};

/*
 * POST /sandboxes/@id/fork with @count: the checkpoint into @ck, and
 * *@list (malloc'd, the caller frees it) of *@n entries, one per fork.
 */
int thaw_client_fork(struct thaw_client *c, const char *id, unsigned count,
		     struct thaw_checkpoint *ck, struct thaw_fork_entry **list,
		     size_t *n, char *err, size_t errlen);

/*
 * POST /sandboxes of @spec with "count": @count (a snapshot's sandboxes,
 * restored together): *@list (malloc'd, the caller frees it) of *@n
 * entries, one per sandbox, as a fork's.
 */
int thaw_client_create_many(struct thaw_client *c,
			    const struct thaw_create *spec, unsigned count,
			    struct thaw_fork_entry **list, size_t *n, char *err,
			    size_t errlen);

/* POST /sandboxes/@id/rollback to @snapshot; @s (or NULL) gets it. */
int thaw_client_rollback(struct thaw_client *c, const char *id,
			 const char *snapshot, struct thaw_sandbox *s,
			 char *err, size_t errlen);

/* POST /sandboxes/@id/pause; @ck (or NULL) gets its checkpoint. */
int thaw_client_pause(struct thaw_client *c, const char *id,
		      struct thaw_checkpoint *ck, char *err, size_t errlen);

/* POST /sandboxes/@id/resume; @s (or NULL) gets it. */
int thaw_client_resume(struct thaw_client *c, const char *id,
		       struct thaw_sandbox *s, char *err, size_t errlen);

/* A snapshot as GET /snapshots describes it; "" for a null string. */
struct thaw_snapshot {
	char id[THAW_CLIENT_ID_MAX], parent[THAW_CLIENT_ID_MAX];
	char template[THAW_CLIENT_NAME_MAX], created[40];
	double size, dirty_bytes;
	long depth, live_users, children;
	bool base;
};

/* GET /snapshots: *@list (malloc'd, the caller frees it) of *@n. */
int thaw_client_snapshots(struct thaw_client *c, struct thaw_snapshot **list,
			  size_t *n, char *err, size_t errlen);

/* DELETE /snapshots/@id. */
int thaw_client_delete_snapshot(struct thaw_client *c, const char *id,
				char *err, size_t errlen);

/* GET /sandboxes: *@list (malloc'd, the caller frees it) of *@n. */
int thaw_client_list(struct thaw_client *c, struct thaw_sandbox **list,
		     size_t *n, char *err, size_t errlen);

/* GET /sandboxes/@id: @s gets it, with its VMM's pid and, once it
 * stopped, why. */
int thaw_client_get(struct thaw_client *c, const char *id,
		    struct thaw_sandbox *s, char *err, size_t errlen);

/* A sandbox's network as GET /sandboxes/{id} describes it. */
#define THAW_CLIENT_CIDRS_MAX 1280 /* 64 CIDRs of up to 18 bytes, spaced */
struct thaw_sandbox_network {
	bool present; /* false: a template with network = none */
	bool allow_internet;
	char host_address[16];		       /* "A.B.C.D" */
	char allow_out[THAW_CLIENT_CIDRS_MAX]; /* "A.B.C.D/N ...", or "" */
	char deny_out[THAW_CLIENT_CIDRS_MAX];
};

/* GET /sandboxes/@id's "network" into @n. */
int thaw_client_get_network(struct thaw_client *c, const char *id,
			    struct thaw_sandbox_network *n, char *err,
			    size_t errlen);

/* POST /sandboxes/@id/network: replaces its policy with @policy (what it
 * leaves unset: the template's); @n (or NULL) gets the result. */
int thaw_client_set_network(struct thaw_client *c, const char *id,
			    const struct thaw_network *policy,
			    struct thaw_sandbox_network *n, char *err,
			    size_t errlen);

/* DELETE /sandboxes/@id. */
int thaw_client_delete(struct thaw_client *c, const char *id, char *err,
		       size_t errlen);

/* GET /health: whether the daemon admits new sandboxes, and when it does
 * not, why (API.md, *Admission*). */
struct thaw_health {
	bool admitting;
	char overload[256]; /* "" while admitting */
};
int thaw_client_health(struct thaw_client *c, struct thaw_health *h, char *err,
		       size_t errlen);

/* POST /sandboxes/@id/ping; @agent_ms (or NULL) the daemon's round trip. */
int thaw_client_ping(struct thaw_client *c, const char *id, double *agent_ms,
		     char *err, size_t errlen);

struct thaw_exec {
	const char *const *argv; /* NULL-terminated, at least one */
	const char *const *env;	 /* "KEY=VALUE"s, NULL-terminated; or NULL */
	const char *cwd;	 /* NULL: the guest's default */
	const void *input;	 /* sent as stdin when not NULL */
	size_t input_len;
	unsigned timeout_s; /* 0: no limit */
	/*
	 * "stream": false: the daemon answers once the command ended and
	 * the events come then, its output first.
	 */
	bool buffered;
};

enum thaw_exec_event_type {
	THAW_EXEC_STARTED,
	THAW_EXEC_STDOUT,
	THAW_EXEC_STDERR,
	THAW_EXEC_EXIT,	 /* the last event, or THAW_EXEC_ERROR */
	THAW_EXEC_ERROR, /* the sandbox failed under the command */
};

struct thaw_exec_event {
	enum thaw_exec_event_type type;
	long pid;	  /* STARTED (streamed only) */
	const void *data; /* STDOUT, STDERR: decoded bytes */
	size_t len;
	int exit_code;	     /* EXIT: when @signal is 0 */
	int signal;	     /* EXIT: the signal that killed it, or 0 */
	bool timed_out;	     /* EXIT: its timeout_s passed */
	bool truncated;	     /* EXIT, buffered: output past the daemon's cap */
	const char *message; /* ERROR */
};

/* Returns 0 to go on, or a code after filling @err, as thaw_client_data_fn. */
typedef int (*thaw_exec_fn)(const struct thaw_exec_event *e, void *arg,
			    char *err, size_t errlen);

/*
 * POST /sandboxes/@id/exec: @fn gets every event as it comes.  An answer
 * that ends before an EXIT or ERROR event is THAW_CLIENT_ANSWER.
 */
int thaw_client_exec(struct thaw_client *c, const char *id,
		     const struct thaw_exec *spec, thaw_exec_fn fn, void *arg,
		     char *err, size_t errlen);

/*
 * PUT /sandboxes/@id/files?path=@path[&mode=@mode] from @up; @mode -1
 * leaves the daemon's default.
 */
int thaw_client_upload(struct thaw_client *c, const char *id, const char *path,
		       int mode, const struct thaw_upload *up, char *err,
		       size_t errlen);

/* GET /sandboxes/@id/files?path=@path, its bytes to @fn as they come. */
int thaw_client_download(struct thaw_client *c, const char *id,
			 const char *path, thaw_client_data_fn fn, void *arg,
			 char *err, size_t errlen);

/* A template's warm pool, as GET /templates reports it. */
struct thaw_template {
	char name[THAW_CLIENT_NAME_MAX];
	char snapshot[THAW_CLIENT_ID_MAX]; /* "": not built yet */
	long mem_mib, vcpus, min_ready, max_total;
	long ready, restoring, leased;
};

/* GET /templates: *@list (malloc'd, the caller frees it) of *@n. */
int thaw_client_templates(struct thaw_client *c, struct thaw_template **list,
			  size_t *n, char *err, size_t errlen);

/*
 * The value of @metric{template="@template"} in GET /metrics into *@value;
 * THAW_CLIENT_ANSWER when the daemon reports no such series.
 */
int thaw_client_metric(struct thaw_client *c, const char *metric,
		       const char *template, double *value, char *err,
		       size_t errlen);

#endif
