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
 *	api*.c		the HTTP API of pool/API.md (api.h; api_internal.h
 *			says which file serves what)
 *
 * A sandbox is what the API hands out: struct sandbox, one restored clone
 * of a template's snapshot ("clone" names the same thing from the
 * snapshot's side: the catalog registers it as the snapshot's live clone).
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
 * the sandbox's id (common/log.h).
 *
 * Errors: the functions here return their own codes (pool_handout() an
 * enum pool_error, with its message in the caller's buffer); only the API
 * (api.c) turns them into HTTP statuses.
 */
#ifndef THAW_POOL_DAEMON_DAEMON_H
#define THAW_POOL_DAEMON_DAEMON_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "agent_client.h"
#include "admission.h"
#include "catalog.h"
#include "cgroup.h"
#include "config.h"
#include "vmm_process.h"

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
	char snapshot_id[CATALOG_ID_LEN + 1];
	char snapshot_dir[CATALOG_PATH_MAX];
	struct sandbox *ready_head, *ready_tail;
	uint32_t ready, restoring, leased, waiters;
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
	pthread_t *workers;
	uint32_t nr_workers;
};

/* HTTP status classes counted for thaw_http_requests_total. */
#define HTTP_CODES 12

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

	pthread_mutex_t catalog_lock; /* one LMDB environment at a time */

	/* Some template has a network: the host's side is set up.  The
	 * sandboxes' indexes in cfg.net.pool not in use (under lock): a
	 * stack, lowest on top. */
	bool network;
	uint32_t *net_free, net_nfree;
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
};

/*
 * Hands out a sandbox of @pl that expires after @timeout_s, with @env (taken
 * over: freed with the sandbox).  Returns POOL_OK with *out held (release it
 * with sandbox_put), or the pool error after a message in @err.
 */
enum pool_error pool_handout(struct pool *pl, uint32_t timeout_s, char **env,
			     struct sandbox **out, char *err, size_t errlen);

/* A leased sandbox by id, held; NULL when there is none. */
struct sandbox *sandbox_get(struct daemon *d, const char *id);
void sandbox_put(struct daemon *d, struct sandbox *c);

/* Releases leased sandbox @id (DELETE); false when there is none. */
bool sandbox_release(struct daemon *d, const char *id);

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
