/* SPDX-License-Identifier: Apache-2.0 */
/*
 * daemon.h - thawd's state, shared by the daemon's files:
 *
 *	thawd.h		the entry point, `thaw daemon`
 *	daemon.c	options, start (state directory, leftovers, each
 *			template's snapshot, the socket), shutdown; the log's
 *			settings
 *	config.c	the config file and its embedded default (config.h)
 *	pools.c		warm pools and every sandbox's life, below
 *	admission.c	whether to admit new sandboxes, from the host's
 *			pressure, memory and restore times (admission.h)
 *	checkpoints.c	checkpoint, fork, rollback, pause and resume of a
 *			leased sandbox; sandboxes restored on demand from
 *			any snapshot; the snapshots' list and removal
 *	sandbox_ops.c	the service core: the verbs every front end serves
 *			(sandbox_ops.h), and its only door into this state
 *	api*.c		the HTTP API of pool/API.md (api.h; api_internal.h
 *			says which file serves what), a front end of the
 *			core; other front ends (pool/e2b) are wired in by
 *			the program through a table (frontend.h)
 *
 * A sandbox is what the API hands out: struct sandbox, one restored clone
 * of a snapshot ("clone" names the same thing from the snapshot's side:
 * the catalog registers it as the snapshot's live clone).  That snapshot
 * is its template's base when it comes from a warm pool; a checkpoint
 * moves it to the checkpoint, a rollback to the snapshot rolled back to.
 * Its VMM child is a struct vmm_process (pool/host/), running in the
 * sandbox's own cgroup.
 *
 * One mutex (daemon.lock) guards every list and counter here; nothing slow
 * happens under it.  Slow work (restoring a clone, killing one, an exec)
 * runs outside, on a sandbox the caller holds a reference to (refs).
 *
 * A sandbox's life: RESTORING (a pool worker registers it in the catalog,
 * starts its VMM in a fresh cgroup, waits for the agent, makes the guest
 * unique, asks the VMM where the restore's time went) -> READY (in its
 * pool's FIFO) -> LEASED (handed out by pool_handout(), in daemon.leased,
 * with a deadline) -> gone: released (DELETE), expired (the reaper), or its
 * VMM died, whereupon the last reference holder destroys it (VMM killed,
 * cgroup and run directory removed, catalog entry dropped).  A leased
 * sandbox whose VMM died stays listed, marked stopped, until it is
 * released or expires, so its user learns why.  Each step is logged with
 * the sandbox's id (common/log.h).  A leased sandbox may be paused (its
 * VM checkpointed and stopped, its cgroup and network gone, its id, lease
 * and network address kept) and resumed, or rolled back (its VM replaced
 * by a restore of another snapshot under the same id): checkpoints.c.
 *
 * VMMs are forked by threads that live as long as the daemon (a VMM's
 * PR_SET_PDEATHSIG follows the thread that forked it): the pools' workers,
 * and for restores an API request asks for (a fork, a rollback) the
 * restorer threads, which run struct daemon_job's.
 *
 * Errors: the functions here return their own codes (pool_handout() an
 * enum pool_error, with its message in the caller's buffer); only the
 * front ends turn them into HTTP statuses (pool_error_status(),
 * sandbox_ops.h).
 */
#ifndef THAW_POOL_DAEMON_DAEMON_H
#define THAW_POOL_DAEMON_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "pool/host/agent_client.h"
#include "pool/daemon/admission.h"
#include "snapshot/catalog.h"
#include "pool/host/cgroup.h"
#include "pool/daemon/config.h"
#include "pool/daemon/frontend.h"
#include "pool/host/vmm_process.h"

#define SANDBOX_ID_LEN CATALOG_ID_LEN

/* Latency histogram in seconds, Prometheus style (cumulative on output). */
#define HISTOGRAM_BUCKETS 14
extern const double histogram_bounds[HISTOGRAM_BUCKETS];

struct histogram {
	uint64_t count[HISTOGRAM_BUCKETS + 1]; /* the last one: +Inf */
	uint64_t total;
	double sum;
};

void histogram_add(struct histogram *h, double seconds);

enum sandbox_state { SANDBOX_RESTORING, SANDBOX_READY, SANDBOX_LEASED };

/* What a checkpoint, fork, rollback, pause or resume is doing to a
 * sandbox: another one is refused (409) meanwhile. */
enum sandbox_op {
	SANDBOX_NO_OP,
	SANDBOX_CHECKPOINTING, /* its VMM writes a checkpoint, and runs on */
	/* Its VMM is being stopped or replaced: nothing else may use it
	 * (exec, files, ping, network: 409), and the reaper leaves it be. */
	SANDBOX_REPLACING,
};

struct pool;

struct sandbox {
	char id[SANDBOX_ID_LEN + 1];
	struct pool *pool;
	enum sandbox_state state;
	struct vmm_process vmm;
	struct cgroup cg;
	bool cgroup_made, registered;
	double restore_ms, handout_ms;
	/* restore_ms split where the guest starts running (API.md): the
	 * host side (VMM start, page-in, state restore), the guest side
	 * (the agent's first answer, then identity_ms pushing its CLONE). */
	struct vmm_restore_phases restore_phases;
	double identity_ms, restore_host_ms, restore_guest_ms;
	/* Its network made (netns.h), before its VMM started: in no
	 * restore_ms, and 0 without one. */
	double network_ms;
	int64_t created_ms;  /* CLOCK_REALTIME: shown, never compared */
	uint64_t expires_ns; /* CLOCK_MONOTONIC: a clock step moves no lease */
	char **env;	     /* KEY=VALUE from the create request */
	int refs;	     /* API calls using it */
	/* Held from its restore on, idle: a guest whose agent or vsock
	 * device dropped it is noticed (pools.c) without asking it. */
	struct agent_conn agent;
	/* Its network (netns.h), when its template has one: made by
	 * restore() before its VMM starts, net_made from then on.  @policy
	 * is what its maps hold: set with them, its template's
	 * (config_net_policy) until a request sets another
	 * (api_sandboxes.c). */
	struct sandbox_net net;
	bool net_made;
	struct net_policy policy;
	bool agent_lost; /* it was dropped */
	bool stopped;	 /* its VMM died */
	char stop_reason[160];
	/*
	 * The snapshot its memory derives from, which the catalog has it as a
	 * live clone of (registered): its pool's at first, then its last
	 * checkpoint or the snapshot it was rolled back to.
	 */
	char snapshot_id[CATALOG_ID_LEN + 1];
	char snapshot_dir[CATALOG_PATH_MAX];
	/* Under the lock: what is being done to it (checkpoints.c), and
	 * whether it is paused (no VMM: its VM is its snapshot). */
	enum sandbox_op op;
	const char *op_name; /* "checkpointed", for the 409 of another */
	bool paused;
	bool unleased; /* taken off the leased list: released or expired */
	/* Its network's index (net.index) is its own: from the restore that
	 * took it to its destroy, across a pause and a rollback, so that its
	 * host address stays. */
	bool net_index_held;
	/* What each front end (frontend.h) keeps with it, by the front
	 * end's slot: E2B's record of a sandbox it made or connected to.
	 * NULL otherwise; set once under the lock (sandbox_ext_attach()),
	 * freed with it by the front end's sandbox_free(). */
	void *ext[FRONTENDS_MAX];
	struct sandbox *next;
};

/*
 * A create waiting on an empty pool.  Waiters queue in arrival order, each
 * on its own condition: the worker that restores a clone leases it to the
 * first waiter and wakes that waiter alone (pools.c).
 */
struct pool_waiter {
	pthread_cond_t wake;
	uint32_t timeout_s; /* the lease's, and its env: the create's */
	char **env;
	double since_ms;     /* monotonic: when the create asked */
	struct sandbox *got; /* leased to this waiter, set by a worker */
	bool queued;	     /* in the pool's queue */
	struct pool_waiter *next;
};

struct pool {
	struct daemon *d;
	const struct template_config *t;
	char template_id[CATALOG_ID_LEN + 1]; /* the catalog's */
	char snapshot_id[CATALOG_ID_LEN + 1];
	char snapshot_dir[CATALOG_PATH_MAX];
	struct sandbox *ready_head, *ready_tail;
	uint32_t ready, restoring, leased, waiters;
	/* restores an API request asked for (checkpoints.c): counted in the
	 * template's total, never handed to a waiting create */
	uint32_t on_demand;
	uint64_t restore_failures;
	uint32_t failures_in_a_row;
	char last_error[256];
	uint64_t handouts, rejections, expired;
	/* creates waiting for a clone, oldest first; `waiters` of them */
	struct pool_waiter *waiting_head, *waiting_tail;
	uint64_t overload_rejections; /* creates refused: not admitting */
	struct restore_latency latency;
	struct histogram handout_s, restore_s;
	/* restore_s's two sides, of each clone restore() finished */
	struct histogram restore_host_s, restore_guest_s;
	/* network_ms of each clone restore() made a network for, and each
	 * policy written into a sandbox's maps (a create's, or POST
	 * /sandboxes/{id}/network) */
	struct histogram network_setup_s, policy_update_s;
	/* checkpoints.c's work on this template's sandboxes */
	uint64_t checkpoints, checkpoint_failures, forks, rollbacks, pauses,
		resumes;
	struct histogram checkpoint_pause_s, checkpoint_total_s;
	pthread_t *workers;
	uint32_t nr_workers;
};

/* HTTP status classes counted for thaw_http_requests_total. */
#define HTTP_CODES 13

/*
 * Work for a restorer thread (pools.c): @run(@job), then @done; see
 * daemon_run_jobs().
 */
struct daemon_job {
	void (*run)(struct daemon_job *job);
	bool done;
	struct daemon_job *next;
};

/* Restorer threads: how many sandboxes a fork restores at once. */
#define RESTORERS 8

struct daemon {
	struct daemon_config cfg;
	char state_dir[PATH_MAX];
	char run_dir[PATH_MAX + 8];
	char socket_path[108];
	struct cgroup_root cgroups;
	struct pool *pools;
	size_t nr_pools;

	/*
	 * One lock, and a condition per waiter (this one for the workers,
	 * one per waiting create: struct pool_waiter), so that nobody wakes
	 * for what is not theirs: with one condition every waiting create
	 * woke every other one, which woke them again (a daemon busy on two
	 * cores with 40 creates waiting, the guests starved of the CPU they
	 * needed).  The reaper waits on VMM exits instead (pools.c).
	 */
	pthread_mutex_t lock;
	pthread_cond_t work; /* workers: a restore may be needed */
	int vmm_exits; /* epoll: ready and leased VMMs' pidfds, agent conns */
	struct sandbox *leased;
	uint32_t total; /* sandboxes of every pool, in any state */
	bool stopping;
	uint64_t started_ns; /* CLOCK_MONOTONIC */
	struct admission admission;
	uint64_t http_count[HTTP_CODES];
	uint64_t api_memory_used; /* of cfg.api_memory_budget_bytes */
	pthread_t reaper;
	/* Jobs waiting for a restorer, oldest first; the conditions: one is
	 * queued, one is done. */
	struct daemon_job *jobs_head, *jobs_tail;
	pthread_cond_t job_queued, job_done;
	pthread_t restorers[RESTORERS];
	uint32_t nr_restorers;

	pthread_mutex_t catalog_lock; /* one LMDB environment at a time */

	/* Some template has a network: the host's side is set up.  The
	 * sandboxes' indexes in cfg.net.pool not in use (under lock): a
	 * stack, lowest on top. */
	bool network;
	uint32_t *net_free, net_nfree;

	/* The front ends the program wired in (thaw_daemon()), each's
	 * state once started; a front end's slot is its index. */
	const struct frontend *frontends;
	size_t nr_frontends;
	void *frontend_state[FRONTENDS_MAX];
};

/* pools.c */
int pools_start(struct daemon *d);
/* Refuses new work: waiting creates answer 503, workers and the reaper
 * finish.  pools_stop() then joins them and destroys every sandbox. */
void pools_stopping(struct daemon *d);
void pools_stop(struct daemon *d);
struct pool *pool_find(struct daemon *d, const char *template);
/* Every waiting create looks again (under d->lock): the host overloaded,
 * those that no restore under way serves answer 503. */
void pools_wake_waiters(struct daemon *d);

/* Why a handout failed; the API maps each to its HTTP status. */
enum pool_error {
	POOL_OK,
	POOL_FULL,	     /* max_total or max_sandboxes reached */
	POOL_STOPPING,	     /* the daemon is shutting down */
	POOL_TIMED_OUT,	     /* no clone ready within restore_timeout_s */
	POOL_RESTORE_FAILED, /* restores fail in a row: waiting will not help */
	POOL_OVERLOADED,     /* not admitting, and no clone is ready */
	/* checkpoints.c: */
	POOL_BAD_REQUEST, /* a snapshot of no template this daemon serves */
	POOL_NOT_FOUND,	  /* no such snapshot */
	POOL_CONFLICT,	  /* in use, paused, busy with another operation */
	POOL_FAILED,	  /* a checkpoint or a restore failed */
	/* sandbox_ops.h: */
	POOL_NO_MEMORY,	  /* the daemon's memory for requests is in use */
	POOL_TOO_LARGE,	  /* a guest sent more than a limit allows */
	POOL_GUEST_ERROR, /* the guest's errno: the front end maps it */
};

/*
 * Hands out a sandbox of @pl that expires after @timeout_s, with @env (taken
 * over: freed with the sandbox).  Returns POOL_OK with *out held (release it
 * with sandbox_put), or the pool error after a message in @err.
 */
enum pool_error pool_handout(struct pool *pl, uint32_t timeout_s, char **env,
			     struct sandbox **out, char *err, size_t errlen);

/*
 * Runs @jobs[0..@n) on the restorer threads, in parallel, and returns once
 * each is done.  No lock held.
 */
void daemon_run_jobs(struct daemon *d, struct daemon_job *const jobs[],
		     size_t n);

/*
 * For checkpoints.c.  sandbox_new(): a sandbox of @pl with a fresh id, not
 * counted anywhere yet, or NULL.  sandbox_restore(): restores it from
 * c->snapshot_id (registering it as that snapshot's clone unless it is
 * already), as a pool worker restores a warm clone; 0 or -1 after a log
 * line; call it from a restorer or a worker.  sandbox_lease_new(): leases
 * restored @c (counted in its pool's restoring and the daemon's total by
 * the caller) for @timeout_s with @env (taken over), held for the caller
 * as pool_handout()'s are.  sandbox_teardown(): stops @c's VMM and frees
 * its cgroup and network (not its network's index, held), unregistering
 * it unless @keep_registration; the caller has it to itself
 * (SANDBOX_REPLACING).  sandbox_destroy() frees what it still holds, and
 * it.  sandbox_watch(): the reaper now watches @c's VMM; under the lock.
 */
struct sandbox *sandbox_new(struct pool *pl);
int sandbox_restore(struct sandbox *c);
void sandbox_lease_new(struct sandbox *c, uint32_t timeout_s, char **env);
void sandbox_teardown(struct daemon *d, struct sandbox *c,
		      bool keep_registration);
void sandbox_destroy(struct daemon *d, struct sandbox *c);
void sandbox_watch(struct daemon *d, struct sandbox *c);
/* Its "state" (API.md): running, stopped or paused; under the lock. */
const char *sandbox_state_name(const struct sandbox *c);

/* ---- checkpoints.c (its verbs: sandbox_ops.h) ---- */

/* The daemon's start: what killed checkpoints left is removed. */
void snapshots_collect(struct daemon *d);

/*
 * Leases end on CLOCK_MONOTONIC, which a step of the wall clock (NTP, an
 * admin's date) does not move; the wall clock is only for what the API
 * shows.  A lease of @timeout_s taken at @now_ns ends at the first;
 * lease_expired() says whether it has at @now_ns; the third is its end as
 * a wall time, the wall clock's now (@now_wall_ms) plus what is left.
 */
uint64_t lease_deadline_ns(uint64_t now_ns, uint32_t timeout_s);
bool lease_expired(uint64_t expires_ns, uint64_t now_ns);
int64_t lease_expires_wall_ms(uint64_t expires_ns, uint64_t now_ns,
			      int64_t now_wall_ms);

/* @cond's timed waits take CLOCK_MONOTONIC deadlines, as all of ours are. */
void monotonic_cond_init(pthread_cond_t *cond);

/* admission.c: the first reading, before the pool workers start; then
 * one a second at most, from the reaper (no lock held for either). */
void admission_start(struct daemon *d);
void admission_update(struct daemon *d);

#endif
