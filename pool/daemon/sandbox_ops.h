/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox_ops.h - thawd's service core: the verbs every front end serves
 * (thaw's own API, pool/daemon/api*.c; E2B's listener, pool/e2b), and the
 * only door they have into the daemon's state.
 *
 *	sandbox_ops.c	create (a handout or a restore of a snapshot, the
 *			front end's network policy and record, undone
 *			whole when one fails), views of sandboxes (get,
 *			list), a lease moved, the network policy, the
 *			front ends' extension slots
 *	sandbox_sessions.c  connections to a sandbox's agent, and the
 *			daemon's memory budget they and every request
 *			take from
 *	sandbox_files.c	a file out of a sandbox, or into it, over its agent
 *	sandbox_args.c	the request fields both front ends read alike
 *			(sandbox_args.h)
 *	pools.c, checkpoints.c  get and delete; checkpoint, fork, rollback,
 *			pause, resume and the snapshots (their verbs are
 *			declared here, the rest of those files in daemon.h)
 *
 * A sandbox's network policy (API.md, "network") is written to its maps
 * by sandbox_net_set_policy (netns.h): at create, only when the request
 * gives one (a clone comes from its pool with its template's), and when a
 * front end sets another.  A lock orders the writes, so that the
 * sandbox's record (sandbox.policy, read under the daemon's lock) always
 * says what its maps hold last, and the daemon's lock is never held
 * across a map write.
 *
 * A front end parses its protocol, calls a verb, and maps what comes back
 * to its statuses: the verbs return the daemon's own errors (enum
 * pool_error, daemon.h) with a message naming the sandbox, field or value
 * in the caller's buffer, as Firecracker's VMM answers its API server.
 * What a front end shows of a sandbox it gets as a view (struct
 * sandbox_view), a copy the core takes under the daemon's lock: no front
 * end reads struct sandbox under that lock itself.  A sandbox a verb takes
 * or returns is held (sandbox_get()/sandbox_put()).
 */
#ifndef THAW_POOL_DAEMON_SANDBOX_OPS_H
#define THAW_POOL_DAEMON_SANDBOX_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pool/daemon/daemon.h"

/* ---- get, delete (pools.c) ----------------------------------------------- */

/* A leased sandbox by id, held; NULL when there is none. */
struct sandbox *sandbox_get(struct daemon *d, const char *id);
void sandbox_put(struct daemon *d, struct sandbox *c);

/* Releases leased sandbox @id (DELETE); false when there is none. */
bool sandbox_release(struct daemon *d, const char *id);

/* ---- checkpoint, fork, rollback, pause, resume; snapshots (checkpoints.c) */

/* At most this many sandboxes restored by one request (a fork's count). */
#define MAX_FORKS 64

/* A checkpoint written (API.md's answer to POST .../checkpoint). */
struct checkpoint_result {
	char snapshot[CATALOG_ID_LEN + 1];
	char parent[CATALOG_ID_LEN + 1];
	uint64_t dirty_bytes;
	bool full; /* its memory is whole, not a diff of its parent's */
	unsigned depth;
	double pause_ms, total_ms;
};

/* One sandbox of a fork: @c (held: sandbox_put() it), or @error and
 * @message. */
struct fork_result {
	struct sandbox *c;
	enum pool_error error;
	char message[512];
};

/*
 * Each returns POOL_OK, or its error after a message in @err.  @c is held
 * by the caller.
 *
 * sandbox_checkpoint(): writes a checkpoint of running @c, whose memory
 * then derives from it.  sandboxes_from_snapshot(): @n sandboxes of
 * snapshot @snapshot_id restored in parallel (leased for @timeout_s, 0:
 * the template's, each with a copy of @env); every one gets its entry in
 * @out, POOL_OK meaning at least one was made.  sandbox_fork(): a
 * checkpoint of @c into @ck, then @n sandboxes of it with @c's env.
 * sandbox_rollback(): @c's VM replaced by a restore of @snapshot_id (of
 * @c's template), under the same id, lease and network address.
 * sandbox_pause(): a checkpoint into @ck, then @c's VM stopped and its
 * cgroup and network freed.  sandbox_resume(): @c restored from its pause
 * checkpoint.
 */
enum pool_error sandbox_checkpoint(struct sandbox *c,
				   struct checkpoint_result *ck, char *err,
				   size_t errlen);
enum pool_error sandboxes_from_snapshot(struct daemon *d,
					const char *snapshot_id, uint32_t n,
					uint32_t timeout_s, char *const *env,
					struct fork_result *out, char *err,
					size_t errlen);
enum pool_error sandbox_fork(struct sandbox *c, uint32_t n,
			     struct checkpoint_result *ck,
			     struct fork_result *out, char *err, size_t errlen);
enum pool_error sandbox_rollback(struct sandbox *c, const char *snapshot_id,
				 char *err, size_t errlen);
enum pool_error sandbox_pause(struct sandbox *c, struct checkpoint_result *ck,
			      char *err, size_t errlen);
enum pool_error sandbox_resume(struct sandbox *c, char *err, size_t errlen);

/* A snapshot as GET /snapshots shows it. */
struct snapshot_info {
	struct snapshot_record rec;
	uint32_t live_users;  /* live clones: sandboxes, paused ones too */
	const char *template; /* the pool serving its template, or NULL */
	bool base;	      /* a pool's base snapshot */
};

/* Every snapshot of the catalog into *@out (malloc'd) of *@n; or one,
 * @id, when it is not NULL (POOL_NOT_FOUND when there is none). */
enum pool_error snapshots_list(struct daemon *d, const char *id,
			       struct snapshot_info **out, size_t *n, char *err,
			       size_t errlen);
/* Removes snapshot @id, entry then files; POOL_CONFLICT while it has
 * children or live clones, or is a pool's base. */
enum pool_error snapshot_remove(struct daemon *d, const char *id, char *err,
				size_t errlen);

/* ---- create -------------------------------------------------------------- */

/*
 * What a create asks for.  The network policy and the front end's record
 * come from callbacks run on each sandbox once it is handed out (a
 * snapshot's template is known only then), before anyone else sees it; a
 * failure of either undoes that sandbox's create.
 */
struct sandbox_create {
	const struct template_config *template; /* a pool's; NULL: @snapshot */
	const char *snapshot;			/* restored on demand */
	uint32_t count;	    /* from a snapshot: 1 to MAX_FORKS; else 1 */
	uint32_t timeout_s; /* of the lease; 0 from a snapshot: its own */
	char **env;	    /* KEY=VALUE, taken over (freed in every case) */
	/*
	 * The policy for a sandbox of @t (@has_network: it has a network)
	 * into @out with *@set, or *@set false to keep its template's; a
	 * pool error (POOL_BAD_REQUEST for what the request asked) after a
	 * message in @err.  NULL: the template's.
	 */
	enum pool_error (*policy)(void *arg, const struct template_config *t,
				  bool has_network, struct net_policy *out,
				  bool *set, char *err, size_t errlen);
	/* Then the front end's record of @c attached (sandbox_ext_attach());
	 * a pool error after a message.  NULL: none. */
	enum pool_error (*attach)(void *arg, struct sandbox *c, char *err,
				  size_t errlen);
	void *arg;
};

/*
 * Creates @req->count sandboxes: handed out from @req->template's pool, or
 * restored from @req->snapshot (sandboxes_from_snapshot()), each with its
 * policy written (a policy for one restored without its network is an
 * error) and its record attached.  POOL_OK with an entry per sandbox in
 * @out (its sandbox, held, or its error: some made, some not, as a fork's),
 * or the pool error when none was after a message in @err.
 */
enum pool_error sandbox_create(struct daemon *d, struct sandbox_create *req,
			       struct fork_result *out, char *err,
			       size_t errlen);

/* ---- a held sandbox ------------------------------------------------------ */

/* Its template: the config's, the same for its whole life. */
const struct template_config *sandbox_template(const struct sandbox *c);
/* Its env (KEY=VALUE, its create's; NULL for none): the same for its whole
 * lease. */
char *const *sandbox_env(const struct sandbox *c);
/* Its lease now ends @timeout_s from now, or (@extend_only) at least
 * then. */
void sandbox_set_lease(struct daemon *d, struct sandbox *c, uint32_t timeout_s,
		       bool extend_only);
/* Whether its VM cannot be used now: it is paused, or being replaced
 * (rolled back, paused, resumed); the message (a 409's) in @err then. */
bool sandbox_busy(struct sandbox *c, char *err, size_t errlen);
/* Its template's policy into @defaults when it has a network; false with
 * a message naming the template in @err when it has none. */
bool sandbox_network_defaults(struct sandbox *c, struct net_policy *defaults,
			      char *err, size_t errlen);
/* @policy written to its maps and its record, the write's time to its
 * template's policy_update_s; POOL_OK, or POOL_FAILED after a message. */
enum pool_error sandbox_set_policy(struct daemon *d, struct sandbox *c,
				   const struct net_policy *policy, char *err,
				   size_t errlen);

/* ---- sessions with its agent (sandbox_sessions.c) ------------------------ */

/* How long the daemon waits on a guest: as long as a restore may take,
 * its one measure of a guest's pace. */
uint64_t sandbox_guest_patience_ns(const struct daemon *d);

/* Now plus that patience: when one step of a guest (a file copied, a
 * ping, a frame) is due. */
uint64_t sandbox_guest_deadline_ns(const struct daemon *d);

/*
 * The most one agent connection of a request holds: its frame reader's
 * buffer, a frame on its way to the guest, and an event or a piece of a
 * file on its way to the client.
 */
#define SANDBOX_AGENT_CONN_BYTES (3ull * THAW_MAX_FRAME)

/*
 * What the frames carrying @data bytes of a guest's data (a file, an
 * exec's output) may take, whole, if an honest agent puts at least
 * @min_frame_data bytes in each but the last: a guest that pads its frames
 * or sends empty ones reaches the data's limit as one sending data does.
 */
uint64_t sandbox_frames_allowance(uint64_t data, uint32_t min_frame_data);

/* Takes @bytes from the daemon's memory budget (api_memory_budget_bytes);
 * false when they do not fit.  sandbox_budget_give() returns them. */
bool sandbox_budget_take(struct daemon *d, uint64_t bytes);
void sandbox_budget_give(struct daemon *d, uint64_t bytes);
/* The message of a request refused for the budget (POOL_NO_MEMORY). */
void sandbox_budget_spent(const struct daemon *d, char *err, size_t errlen);

/*
 * Connects @agent to held @c's agent, retrying while the guest is busy,
 * its waits ending when @client_fd (-1: none) hangs up or the daemon
 * stops; SANDBOX_AGENT_CONN_BYTES of the budget are held until
 * sandbox_agent_close().  POOL_OK, or after a message in @err:
 * POOL_NO_MEMORY (the budget is spent), POOL_CONFLICT (paused, or being
 * replaced), POOL_FAILED (its VMM stopped, its agent does not answer).
 */
enum pool_error sandbox_agent_open(struct sandbox *c, struct agent_conn *agent,
				   int client_fd, char *err, size_t errlen);
/* Closes @agent (if open) and gives its budget back. */
void sandbox_agent_close(struct daemon *d, struct agent_conn *agent);

/* ---- files, over its agent (sandbox_files.c) ----------------------------- */

/*
 * @len bytes of WRITE_FILE @id to @agent, begun (its PATH, MODE and USER
 * sent) unless *@open, in AGENT_WRITE_CHUNK frames; *@open set once it
 * is.  0 or agent_write_file_as()'s error.
 */
int sandbox_file_write(struct agent_conn *agent, uint32_t id, bool *open,
		       const char *path, uint32_t mode, const char *user,
		       const char *data, size_t len);

struct sandbox_download;

/*
 * A download of @path out of held @c (taken over, also on error): its
 * agent connected (@client_fd watched), READ_FILE asked, the first answer
 * read.  POOL_OK with *@out; or after a message in @err:
 * sandbox_agent_open()'s errors, POOL_TOO_LARGE (the guest sent more
 * than max_file_bytes), POOL_FAILED, or POOL_GUEST_ERROR with the
 * agent's errno (ENOENT, EISDIR...) or a failed wait's (ETIMEDOUT,
 * ESHUTDOWN...) in *@guest_errno.
 */
enum pool_error sandbox_download_open(struct sandbox *c, const char *path,
				      int client_fd,
				      struct sandbox_download **out,
				      int *guest_errno, char *err,
				      size_t errlen);
/* Up to @max bytes of the file into @buf: how many, 0 at its end, -1 when
 * it fails (logged: a front end's answer is under way by then).  @dl is a
 * struct sandbox_download, untyped to be a stream's source as it is
 * (http_stream_response()). */
ssize_t sandbox_download_read(void *dl, char *buf, size_t max);
/* Lets go of download @dl, its connection and its sandbox. */
void sandbox_download_close(void *dl);

/* ---- the HTTP edge's share ----------------------------------------------- */

struct http_params;

/* The HTTP engine's params (pool/http) for a front end's server: the
 * config's limits, the daemon's memory budget, its answers counted in the
 * daemon's metrics (daemon_count_status()). */
void daemon_http_params(struct daemon *d, struct http_params *params);
/* Counts an answer of @status in thaw_http_requests_total, by
 * daemon_counted_codes[]. */
void daemon_count_status(struct daemon *d, unsigned status);
extern const unsigned daemon_counted_codes[HTTP_CODES];

/*
 * The HTTP status both HTTP front ends give error @e (0 for POOL_OK): one
 * table, so that E2B's listener answers with thaw's statuses; the core
 * itself never uses it.
 */
unsigned pool_error_status(enum pool_error e);

/* ---- views: what a front end shows of a sandbox -------------------------- */

/* A sandbox as it was when the view was taken, under the daemon's lock. */
struct sandbox_view {
	struct sandbox
		*c; /* held by the caller (a list's views: by the view) */
	char id[SANDBOX_ID_LEN + 1];
	const struct template_config *template; /* the config's: never freed */
	char snapshot[CATALOG_ID_LEN + 1];	/* its memory's (daemon.h) */
	int64_t created_ms, expires_ms;		/* CLOCK_REALTIME */
	const char *state;			/* sandbox_state_name() */
	bool paused, stopped;
	char stop_reason[160];
	pid_t pid; /* its VMM's, 0 without one (paused) */
	double restore_ms, handout_ms, identity_ms, restore_host_ms,
		restore_guest_ms, network_ms;
	struct vmm_restore_phases restore_phases;
	bool net_made; /* it has a network: @host_address, @policy */
	uint32_t host_address;
	struct net_policy policy;
	void *ext[FRONTENDS_MAX]; /* the front ends' (sandbox_ext()) */
};

/* Held @c's view into @v. */
void sandbox_view(struct daemon *d, struct sandbox *c, struct sandbox_view *v);
/*
 * Every leased sandbox's view, in the daemon's order, into *@views
 * (malloc'd; NULL when there are none) of *@n, each holding its sandbox
 * (sandbox_views_put()); 0 or -ENOMEM.
 */
int sandboxes_view(struct daemon *d, struct sandbox_view **views, size_t *n);
/* Lets go of @views' sandboxes, and frees @views. */
void sandbox_views_put(struct daemon *d, struct sandbox_view *views, size_t n);

/* A template's pool as it was when the view was taken. */
struct pool_view {
	const struct template_config *template; /* the config's */
	char snapshot[CATALOG_ID_LEN + 1];	/* its base */
	uint32_t ready, restoring, leased;	/* restoring: on demand too */
	uint64_t handouts;
};

/* Every pool's view, in the config's order, into *@views (malloc'd) of
 * *@n; 0 or -ENOMEM. */
int pools_view(struct daemon *d, struct pool_view **views, size_t *n);

/* ---- a front end's extension slot (frontend.h) --------------------------- */

/* What front end @slot keeps with held @c, NULL for none: it stays while
 * @c is held (freed only with it), and never changes once attached. */
void *sandbox_ext(struct daemon *d, struct sandbox *c, unsigned slot);
/* Attaches @ext to held @c in @slot unless it has one there: returns the
 * one it has after, @ext or the earlier one (the caller then frees its
 * own). */
void *sandbox_ext_attach(struct daemon *d, struct sandbox *c, unsigned slot,
			 void *ext);

typedef char sandbox_id[SANDBOX_ID_LEN + 1];

/* The ids of the leased sandboxes with an extension in @slot, into *@ids
 * (malloc'd, NULL when none or out of memory); how many. */
size_t sandboxes_with_ext(struct daemon *d, unsigned slot, sandbox_id **ids);

#endif
