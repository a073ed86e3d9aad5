// SPDX-License-Identifier: Apache-2.0
/*
 * pools.c - warm pools of restored clones, one per template, and the life
 * of every sandbox the daemon owns; see daemon.h.
 *
 * Each pool has restore_parallel worker threads.  A worker restores a clone
 * whenever the pool has fewer ready or restoring clones than it should:
 * min_ready, plus one for every request waiting on an empty pool, never
 * past max_total (per template) or max_sandboxes (all templates).  So a
 * handout never restores by itself: it takes a ready clone, or waits for a
 * worker, or - when every clone the limits allow exists and none is
 * unclaimed - fails at once with POOL_FULL (the API's 429 "capacity").
 * Waiting creates queue in arrival order, each on its own condition; a
 * worker leases the clone it restored to the oldest and wakes that one
 * alone, so 50 waiting creates cost nothing while they wait and one
 * wakeup each when served.
 * While the daemon does not admit (admission.h: the host is overloaded)
 * workers start no restore, and a handout that would wait for a new one
 * fails at once with POOL_OVERLOADED (503 "overloaded").
 *
 * Workers fork the VMMs, and they live as long as the daemon: a VMM's
 * PR_SET_PDEATHSIG follows the thread that forked it (vmm_process.h).
 *
 * A restore is timed from the VMM's fork to the clone's identity pushed,
 * and split where the guest starts running: the VMM's status says when
 * it started and how long its setup and state restore took (the host
 * side), the rest until the agent answered is the guest's, and so is
 * pushing the identity.  /metrics keeps a histogram of each side.
 *
 * The reaper thread expires leases, notices VMMs that died and, once a
 * second, has admission.c look at the host.  Every ready or leased
 * sandbox's VMM has its pidfd in one epoll set (one-shot: a pidfd stays
 * readable once its process ended), so the reaper learns of an exit by
 * waiting on that set, REAP_INTERVAL_MS at most, and asks waitpid about
 * those VMMs only: the daemon's cost does not grow with the number of
 * idle sandboxes.  Restoring ones are waited for by their worker.
 * The same set holds each sandbox's idle agent connection, kept from its
 * restore: a guest whose agent or vsock device drops it is noticed at
 * once, and a ready clone that did so is replaced, never handed out.
 */
#include "pool/daemon/daemon.h"
#include "pool/daemon/sandbox_ops.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool/host/agent_client.h"
#include "common/clock.h"
#include "pool/host/clone.h"
#include "common/log.h"
#include "pool/host/paths.h"
#include "pool/daemon/sandbox_args.h"

#define REAP_INTERVAL_MS 100
/* VMM exits taken from the epoll set per wait. */
#define EXITS_PER_WAIT 64
/* After a failed restore: do not spin on a template that cannot restore. */
#define RESTORE_RETRY_MS 1000
/* Failed restores in a row after which waiting requests give up. */
#define RESTORE_FAILURES_FATAL 3
#define CLONE_REQUEST_ID 1
/* Marks a reaper event as the agent connection's, not the pidfd's. */
#define AGENT_EVENT (1ull << 32)

const double histogram_bounds[HISTOGRAM_BUCKETS] = {
	0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
	0.25,  0.5,    1,     2.5,  5,	   10,	 30,
};

void histogram_add(struct histogram *h, double seconds)
{
	int i = 0;

	while (i < HISTOGRAM_BUCKETS && seconds > histogram_bounds[i])
		i++;
	h->count[i]++;
	h->total++;
	h->sum += seconds;
}

/*
 * From now on the reaper hears of @c's VMM ending and of its agent dropping
 * the connection the daemon holds (EOF or reset: an idle connection has
 * nothing else to say).  Both fds leave the set when sandbox_destroy()
 * closes them; the pid, flagged for the agent, is what an event carries.
 */
void sandbox_watch(struct daemon *d, struct sandbox *c)
{
	struct epoll_event exit = { .events = EPOLLIN | EPOLLONESHOT,
				    .data.u64 = (uint64_t)c->vmm.pid };
	struct epoll_event agent = {
		.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT,
		.data.u64 = (uint64_t)c->vmm.pid | AGENT_EVENT
	};

	if (epoll_ctl(d->vmm_exits, EPOLL_CTL_ADD, c->vmm.pidfd, &exit) < 0 ||
	    epoll_ctl(d->vmm_exits, EPOLL_CTL_ADD, c->agent.fd, &agent) < 0)
		log_write(LOG_LEVEL_ERROR, c->id,
			  "cannot watch its VMM (epoll_ctl: %s): its death "
			  "goes unnoticed until its lease ends",
			  strerror(errno));
}

/* Whether @c's held agent connection is still quiet: nothing to read,
 * no hangup.  A poll, no round trip. */
static bool agent_quiet(const struct sandbox *c)
{
	struct pollfd p = { c->agent.fd, POLLIN | POLLRDHUP, 0 };

	return poll(&p, 1, 0) == 0;
}

/* @ns on CLOCK_MONOTONIC, as pthread_cond_timedwait() takes it on a
 * monotonic_cond_init() condition. */
static struct timespec monotonic_timespec(uint64_t ns)
{
	return (struct timespec){ .tv_sec = ns / 1000000000,
				  .tv_nsec = ns % 1000000000 };
}

void monotonic_cond_init(pthread_cond_t *cond)
{
	pthread_condattr_t attr;

	pthread_condattr_init(&attr);
	pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
	pthread_cond_init(cond, &attr);
	pthread_condattr_destroy(&attr);
}

uint64_t lease_deadline_ns(uint64_t now_ns, uint32_t timeout_s)
{
	return now_ns + (uint64_t)timeout_s * 1000 * NS_PER_MS;
}

bool lease_expired(uint64_t expires_ns, uint64_t now_ns)
{
	return now_ns >= expires_ns;
}

int64_t lease_expires_wall_ms(uint64_t expires_ns, uint64_t now_ns,
			      int64_t now_wall_ms)
{
	int64_t left_ms = expires_ns > now_ns
				  ? (int64_t)((expires_ns - now_ns) / NS_PER_MS)
				  : 0;

	return now_wall_ms + left_ms;
}

struct pool *pool_find(struct daemon *d, const char *template)
{
	for (size_t i = 0; i < d->nr_pools; i++)
		if (!strcmp(d->pools[i].t->name, template))
			return &d->pools[i];
	return NULL;
}

static uint32_t pool_total(const struct pool *pl)
{
	return pl->ready + pl->restoring + pl->on_demand + pl->leased;
}

static void net_index_put(struct daemon *d, uint32_t index)
{
	pthread_mutex_lock(&d->lock);
	d->net_free[d->net_nfree++] = index;
	pthread_mutex_unlock(&d->lock);
}

/*
 * vmm_place's net_prepare for a networked template's clone (@arg): its
 * namespace, veth, TAP and policy, with a free index of the pool; or, for
 * a sandbox restored again (rolled back, resumed), with the index and
 * policy it holds, so that its host address and policy stay.
 */
static int sandbox_net_prepare(void *arg, const char *netns_path, uid_t uid,
			       gid_t gid, char *err, size_t errlen)
{
	struct sandbox *c = arg;
	struct daemon *d = c->pool->d;
	uint32_t index = c->net.index;
	bool fresh = !c->net_index_held;
	double started_ms = monotonic_ms();

	pthread_mutex_lock(&d->lock);
	if (fresh && d->net_nfree) {
		index = d->net_free[--d->net_nfree];
		c->net_index_held = true;
	}
	pthread_mutex_unlock(&d->lock);
	/* Never: there are max_sandboxes indexes, if the pool has room. */
	if (!c->net_index_held) {
		snprintf(err, errlen, "no free address in network_cidr");
		return -ENOSPC;
	}
	/* The template's policy; a create replaces it (map writes only). */
	if (fresh)
		config_net_policy(c->pool->t, &c->policy);
	if (sandbox_net_create(&c->net, &d->cfg.net, index, netns_path, uid,
			       gid, &c->policy, err, errlen) < 0) {
		c->net.index =
			index; /* held still: sandbox_destroy() puts it */
		return -EIO;
	}
	c->net_made = true;
	c->network_ms = monotonic_ms() - started_ms;
	log_write(LOG_LEVEL_DEBUG, c->id, "network %s made in %.1f ms",
		  c->net.host_veth, c->network_ms);
	return 0;
}

/* What a sandbox's VM holds, in reverse order of taking it; no lock
 * held. */
void sandbox_teardown(struct daemon *d, struct sandbox *c,
		      bool keep_registration)
{
	char err[512];

	agent_close(&c->agent);
	vmm_process_kill(&c->vmm);
	vmm_process_remove(&c->vmm);
	if (c->net_made && sandbox_net_destroy(&c->net, err, sizeof(err)) < 0)
		log_write(LOG_LEVEL_WARNING, c->id, "%s", err);
	c->net_made = false;
	if (c->cgroup_made && cgroup_destroy(&c->cg, err, sizeof(err)) < 0)
		log_write(LOG_LEVEL_WARNING, c->id, "%s", err);
	c->cgroup_made = false;
	if (c->registered && !keep_registration) {
		pthread_mutex_lock(&d->catalog_lock);
		if (clone_unregister(c->snapshot_id, c->id, err, sizeof(err)) <
		    0)
			log_write(LOG_LEVEL_WARNING, c->id, "%s", err);
		pthread_mutex_unlock(&d->catalog_lock);
		c->registered = false;
	}
}

/* Everything a sandbox holds; no lock held. */
void sandbox_destroy(struct daemon *d, struct sandbox *c)
{
	sandbox_teardown(d, c, false);
	if (c->net_index_held)
		net_index_put(d, c->net.index);
	env_free(c->env);
	for (size_t i = 0; i < d->nr_frontends; i++)
		if (c->ext[i])
			d->frontends[i].sandbox_free(c->ext[i]);
	free(c);
}

struct sandbox *sandbox_new(struct pool *pl)
{
	struct sandbox *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->agent.fd = -1;
	c->pool = pl;
	if (catalog_new_id(c->id) < 0) {
		free(c);
		return NULL;
	}
	return c;
}

/* Enough of a console to see where a boot stopped, not so much that a
 * guest printing in a loop floods the daemon's log at every retry. */
#define CONSOLE_TAIL_LINES 20

/* A guest that never answered: the last lines its console printed, a log
 * line each, since a log line is one line. */
static void log_console_tail(const struct sandbox *c)
{
	char console[4096], *start, *next;
	int lines = 0;

	if (vmm_process_console_tail(&c->vmm, console, sizeof(console)) == 0)
		return;
	for (start = console + strlen(console); start > console; start--)
		if (start[-1] == '\n' && start[0] &&
		    ++lines == CONSOLE_TAIL_LINES)
			break;
	log_write(LOG_LEVEL_ERROR, c->id, "last guest console output:");
	for (char *line = strtok_r(start, "\n", &next); line;
	     line = strtok_r(NULL, "\n", &next))
		log_write(LOG_LEVEL_ERROR, c->id, "  %s", line);
}

/* The slow part of a restore; @c is ours alone until it is READY. */
int sandbox_restore(struct sandbox *c)
{
	struct pool *pl = c->pool;
	struct daemon *d = pl->d;
	const struct template_config *t = pl->t;
	struct cgroup_limits limits = {
		.memory_max = (uint64_t)t->memory_limit_mib << 20,
		.pids_max = t->pids_limit,
		.cpu_percent = t->cpu_percent,
	};
	const char *vmm_args[] = {
		thaw_tool_path("THAW_VMM", THAW_VMM_PATH),
		"--restore",
		c->snapshot_dir,
		"--page-in",
		t->page_in_lazy ? "lazy" : "prefetch",
		"--sandbox-id", /* on each line of its log */
		c->id,
		"--log-level",
		log_level_setting(),
		NULL,
	};
	struct agent_conn agent = { .fd = -1 };
	struct snapshot_record snap;
	char run_dir[PATH_MAX + 32], err[512];
	int ret;

	if (!c->registered) {
		pthread_mutex_lock(&d->catalog_lock);
		ret = clone_register(c->snapshot_id, c->id, &snap, err,
				     sizeof(err));
		pthread_mutex_unlock(&d->catalog_lock);
		if (ret < 0) {
			log_write(LOG_LEVEL_ERROR, c->id, "%s", err);
			return -1;
		}
		c->registered = true;
		snprintf(c->snapshot_dir, sizeof(c->snapshot_dir), "%s",
			 snap.dir);
	}
	if (cgroup_create(&d->cgroups, c->id, &limits, &c->cg, err,
			  sizeof(err)) < 0) {
		log_write(LOG_LEVEL_ERROR, c->id, "%s", err);
		return -1;
	}
	c->cgroup_made = true;
	snprintf(run_dir, sizeof(run_dir), "%s/%s", d->run_dir, c->id);
	/* thaw-vmm takes --log-max's syntax; plain bytes are that too. */
	char log_max[24];
	snprintf(log_max, sizeof(log_max), "%" PRIu64, d->cfg.log_max);
	struct vmm_place place = {
		.run_dir = run_dir,
		.cgroup = &c->cg,
		.no_jail = !d->cfg.jail,
		.jail_ids = &d->cfg.jail_ids,
		.net_prepare = t->network ? sandbox_net_prepare : NULL,
		.net_arg = c,
		.log_max = log_max,
	};
	ret = vmm_process_start(&c->vmm, vmm_args, &place, err, sizeof(err));
	if (ret == 0)
		ret = vmm_process_wait_agent(&c->vmm, &agent,
					     (int)d->cfg.restore_timeout_s, err,
					     sizeof(err));
	if (ret < 0) {
		if (ret == -ETIMEDOUT)
			log_console_tail(c);
		if (ret != -EINTR)
			log_write(LOG_LEVEL_ERROR, c->id, "%s", err);
		return -1;
	}
	double agent_ready_ms = monotonic_ms();
	/* The hostname is the id too: it is how a user tells clones apart. */
	ret = agent_clone(&agent, CLONE_REQUEST_ID, c->id, c->id, err,
			  sizeof(err));
	if (ret < 0) {
		agent_close(&agent);
		log_write(LOG_LEVEL_ERROR, c->id, "making the clone unique: %s",
			  err);
		return -1;
	}
	/* Closed by sandbox_destroy() from here on; never read again, so it
	 * keeps no frame buffer (a MiB) for the sandbox's life. */
	thaw_reader_free(&agent.reader);
	c->agent = agent;
	double unique_ms = monotonic_ms();
	c->restore_ms = unique_ms - c->vmm.started_ms;
	c->identity_ms = unique_ms - agent_ready_ms;
	/* From the VMM's ready record, read before its agent answered: no
	 * round trip.  A VMM that reports no restore is no clone to hand
	 * out. */
	ret = vmm_process_restore_phases(&c->vmm, agent_ready_ms,
					 &c->restore_phases, err, sizeof(err));
	if (ret < 0) {
		log_write(LOG_LEVEL_ERROR, c->id, "its restore's phases: %s",
			  err);
		return -1;
	}
	c->restore_host_ms = vmm_restore_host_ms(&c->restore_phases);
	c->restore_guest_ms = c->restore_phases.agent_ms + c->identity_ms;
	log_write(LOG_LEVEL_DEBUG, c->id,
		  "restored from snapshot %s of template %s in %.1f ms: host "
		  "side %.1f ms, guest side %.1f ms",
		  c->snapshot_id, t->name, c->restore_ms, c->restore_host_ms,
		  c->restore_guest_ms);
	return 0;
}

/* Puts @c on the leased list for @timeout_s with @env, held for the
 * caller (under the lock). */
static void lease_to(struct sandbox *c, uint32_t timeout_s, char **env)
{
	struct daemon *d = c->pool->d;

	c->state = SANDBOX_LEASED;
	c->env = env;
	c->created_ms = realtime_ms();
	c->expires_ns = lease_deadline_ns(monotonic_ns(), timeout_s);
	c->refs = 2; /* the leased list's and the caller's */
	c->next = d->leased;
	d->leased = c;
	c->pool->leased++;
}

/*
 * Leases @c to the create that waited as @w (under the lock): from here on
 * the reaper watches it among the leased, so no VMM exit falls between a
 * worker's handover and the waiter waking.
 */
static void lease(struct pool *pl, struct sandbox *c, struct pool_waiter *w)
{
	struct daemon *d = pl->d;

	lease_to(c, w->timeout_s, w->env);
	w->env = NULL;
	c->handout_ms = monotonic_ms() - w->since_ms;
	pl->handouts++;
	histogram_add(&pl->handout_s, c->handout_ms / 1e3);
	w->got = c;
	/* The workers refill what was taken. */
	pthread_cond_broadcast(&d->work);
}

static void dequeue_waiter(struct pool *pl, struct pool_waiter *w)
{
	struct pool_waiter **p = &pl->waiting_head, *prev = NULL;

	while (*p != w) {
		prev = *p;
		p = &(*p)->next;
	}
	*p = w->next;
	if (pl->waiting_tail == w)
		pl->waiting_tail = prev;
	w->next = NULL;
	w->queued = false;
	pl->waiters--;
}

/* A restored clone: to the oldest waiting create, else into the pool. */
static void ready(struct pool *pl, struct sandbox *c)
{
	struct pool_waiter *w = pl->waiting_head;

	if (w) {
		dequeue_waiter(pl, w);
		lease(pl, c, w);
		pthread_cond_signal(&w->wake);
		return;
	}
	c->state = SANDBOX_READY;
	if (pl->ready_tail)
		pl->ready_tail->next = c;
	else
		pl->ready_head = c;
	pl->ready_tail = c;
	pl->ready++;
}

/* Every waiter of @pl looks again: a failure, the daemon stopping or the
 * host overloaded. */
static void wake_waiters(struct pool *pl)
{
	for (struct pool_waiter *w = pl->waiting_head; w; w = w->next)
		pthread_cond_signal(&w->wake);
}

void pools_wake_waiters(struct daemon *d)
{
	for (size_t i = 0; i < d->nr_pools; i++)
		wake_waiters(&d->pools[i]);
}

/* How many waiters are served before @w: all of them if it is not queued
 * yet. */
static uint32_t queue_position(const struct pool *pl,
			       const struct pool_waiter *w)
{
	uint32_t ahead = 0;

	if (!w->queued)
		return pl->waiters;
	for (const struct pool_waiter *o = pl->waiting_head; o != w;
	     o = o->next)
		ahead++;
	return ahead;
}

static bool worker_needed(const struct pool *pl)
{
	const struct daemon *d = pl->d;

	return pl->ready + pl->restoring < pl->t->min_ready + pl->waiters &&
	       pool_total(pl) < pl->t->max_total &&
	       d->total < d->cfg.max_sandboxes && d->admission.admitting;
}

/* A restore that worked, in @pl's metrics and admission's latencies
 * (under the lock). */
static void count_restore(struct pool *pl, const struct sandbox *c)
{
	pl->failures_in_a_row = 0;
	histogram_add(&pl->restore_s, c->restore_ms / 1e3);
	histogram_add(&pl->restore_host_s, c->restore_host_ms / 1e3);
	histogram_add(&pl->restore_guest_s, c->restore_guest_ms / 1e3);
	if (c->net_made)
		histogram_add(&pl->network_setup_s, c->network_ms / 1e3);
	restore_latency_add(&pl->latency, c->restore_ms, monotonic_ms());
}

static void *pool_worker(void *arg)
{
	struct pool *pl = arg;
	struct daemon *d = pl->d;

	pthread_mutex_lock(&d->lock);
	while (!d->stopping) {
		if (!worker_needed(pl)) {
			pthread_cond_wait(&d->work, &d->lock);
			continue;
		}
		pl->restoring++;
		d->total++;
		pthread_mutex_unlock(&d->lock);

		struct sandbox *c = sandbox_new(pl);
		bool ok = c != NULL;
		if (ok) {
			memcpy(c->snapshot_id, pl->snapshot_id,
			       sizeof(c->snapshot_id));
			ok = sandbox_restore(c) == 0;
		}

		pthread_mutex_lock(&d->lock);
		pl->restoring--;
		if (ok && !d->stopping) {
			count_restore(pl, c);
			sandbox_watch(d, c);
			ready(pl, c);
			continue;
		}
		d->total--;
		if (!ok) {
			pl->restore_failures++;
			pl->failures_in_a_row++;
			snprintf(
				pl->last_error, sizeof(pl->last_error),
				"restoring a clone of template %s failed (the daemon's log says why)",
				pl->t->name);
		}
		/* Waiters see the failure (rare: all of them may look); a
		 * freed place may be another pool's to fill. */
		wake_waiters(pl);
		pthread_cond_broadcast(&d->work);
		pthread_mutex_unlock(&d->lock);
		if (c)
			sandbox_destroy(d, c);
		pthread_mutex_lock(&d->lock);
		if (!ok && !d->stopping) {
			struct timespec retry = monotonic_timespec(
				monotonic_ns() + RESTORE_RETRY_MS * NS_PER_MS);

			pthread_cond_timedwait(&d->work, &d->lock, &retry);
		}
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

void sandbox_lease_new(struct sandbox *c, uint32_t timeout_s, char **env)
{
	struct pool *pl = c->pool;

	pthread_mutex_lock(&pl->d->lock);
	pl->on_demand--;
	count_restore(pl, c);
	lease_to(c, timeout_s, env);
	pl->handouts++;
	sandbox_watch(pl->d, c);
	pthread_mutex_unlock(&pl->d->lock);
}

static struct sandbox *pop_ready(struct pool *pl)
{
	struct sandbox *c = pl->ready_head;

	pl->ready_head = c->next;
	if (!pl->ready_head)
		pl->ready_tail = NULL;
	c->next = NULL;
	pl->ready--;
	return c;
}

/* Destroys @list (linked by next), outside the lock. */
static void destroy_all(struct daemon *d, struct sandbox *list)
{
	while (list) {
		struct sandbox *c = list;

		list = c->next;
		sandbox_destroy(d, c);
	}
}

/*
 * The oldest ready clone whose agent connection is still quiet, or NULL.
 * One that is not (its guest dropped the connection since the reaper last
 * looked) is never handed out: it goes to @dropped, and a worker replaces
 * it.
 */
static struct sandbox *pop_quiet(struct pool *pl, struct sandbox **dropped)
{
	while (pl->ready) {
		struct sandbox *c = pop_ready(pl);

		if (agent_quiet(c))
			return c;
		log_write(LOG_LEVEL_WARNING, c->id,
			  "not handed out: its agent dropped the daemon's "
			  "connection in the pool");
		pl->d->total--;
		pthread_cond_broadcast(&pl->d->work);
		c->next = *dropped;
		*dropped = c;
	}
	return NULL;
}

enum pool_error pool_handout(struct pool *pl, uint32_t timeout_s, char **env,
			     struct sandbox **out, char *err, size_t errlen)
{
	struct daemon *d = pl->d;
	struct pool_waiter w = { .timeout_s = timeout_s,
				 .env = env,
				 .since_ms = monotonic_ms() };
	struct timespec deadline = monotonic_timespec(
		monotonic_ns() +
		(uint64_t)d->cfg.restore_timeout_s * 1000 * NS_PER_MS);
	enum pool_error error = POOL_OK;
	struct sandbox *dropped = NULL;

	monotonic_cond_init(&w.wake);
	pthread_mutex_lock(&d->lock);
	uint64_t failures = pl->restore_failures;
	while (!w.got) {
		if (d->stopping) {
			snprintf(err, errlen, "the daemon is shutting down");
			error = POOL_STOPPING;
			break;
		}
		/* Once queued, a clone comes to us through w.got, in turn. */
		struct sandbox *c = w.queued ? NULL : pop_quiet(pl, &dropped);
		if (c) {
			lease(pl, c, &w);
			break;
		}
		/* One failed restore is retried; a run of them means the
		 * template cannot be restored, and waiting will not help. */
		if (pl->restore_failures != failures &&
		    pl->failures_in_a_row >= RESTORE_FAILURES_FATAL) {
			snprintf(err, errlen, "%s", pl->last_error);
			error = POOL_RESTORE_FAILED;
			break;
		}
		/* Restores in flight that no other waiter counts on. */
		bool unclaimed = pl->restoring > pl->waiters - w.queued;
		if (!unclaimed && (pool_total(pl) >= pl->t->max_total ||
				   d->total >= d->cfg.max_sandboxes)) {
			snprintf(
				err, errlen,
				"template %s is at capacity: %u sandboxes of at most %u (daemon: %u of %u)",
				pl->t->name, pool_total(pl), pl->t->max_total,
				d->total, d->cfg.max_sandboxes);
			pl->rejections++;
			error = POOL_FULL;
			break;
		}
		/* Overloaded: served only by a restore already under way
		 * for us, restores going to waiters in turn. */
		if (!d->admission.admitting &&
		    pl->restoring <= queue_position(pl, &w)) {
			snprintf(
				err, errlen,
				"the host is overloaded: %s; no clone of template %s is ready, and none is restored until the host recovers",
				d->admission.reason, pl->t->name);
			pl->overload_rejections++;
			error = POOL_OVERLOADED;
			break;
		}
		if (!w.queued) { /* one more clone wanted: a worker's job */
			w.queued = true;
			if (pl->waiting_tail)
				pl->waiting_tail->next = &w;
			else
				pl->waiting_head = &w;
			pl->waiting_tail = &w;
			pl->waiters++;
			/* Every pool's workers share the condition. */
			pthread_cond_broadcast(&d->work);
		}
		if (pthread_cond_timedwait(&w.wake, &d->lock, &deadline) ==
			    ETIMEDOUT &&
		    !w.got) {
			snprintf(
				err, errlen,
				"no clone of template %s was ready within %u s",
				pl->t->name, d->cfg.restore_timeout_s);
			error = POOL_TIMED_OUT;
			break;
		}
	}
	if (w.queued)
		dequeue_waiter(pl, &w);
	pthread_mutex_unlock(&d->lock);
	destroy_all(d, dropped);
	pthread_cond_destroy(&w.wake);
	env_free(w.env); /* when no sandbox took it */
	if (w.got)
		log_write(LOG_LEVEL_INFO, w.got->id,
			  "handout template %s in %.2f ms (restore %.1f ms)",
			  pl->t->name, w.got->handout_ms, w.got->restore_ms);
	*out = w.got;
	return w.got ? POOL_OK : error;
}

struct sandbox *sandbox_get(struct daemon *d, const char *id)
{
	struct sandbox *c;

	pthread_mutex_lock(&d->lock);
	for (c = d->leased; c && strcmp(c->id, id); c = c->next)
		;
	if (c)
		c->refs++;
	pthread_mutex_unlock(&d->lock);
	return c;
}

void sandbox_put(struct daemon *d, struct sandbox *c)
{
	pthread_mutex_lock(&d->lock);
	bool last = --c->refs == 0;
	pthread_mutex_unlock(&d->lock);
	if (last)
		sandbox_destroy(d, c);
}

/*
 * Takes leased @c off the list and kills its VMM at once, even if an exec
 * still holds it (whose agent connection then fails); the caller then
 * drops the list's reference.
 */
static void unlease(struct daemon *d, struct sandbox *c)
{
	struct sandbox **p = &d->leased;

	while (*p != c)
		p = &(*p)->next;
	*p = c->next;
	c->next = NULL;
	c->unleased = true;
	/* One being replaced is its operation's to stop (checkpoints.c). */
	if (c->vmm.pid > 0 && c->op != SANDBOX_REPLACING)
		kill(c->vmm.pid, SIGKILL);
	c->pool->leased--;
	d->total--;
	pthread_cond_broadcast(&d->work);
}

bool sandbox_release(struct daemon *d, const char *id)
{
	struct sandbox *c;

	pthread_mutex_lock(&d->lock);
	for (c = d->leased; c && strcmp(c->id, id); c = c->next)
		;
	if (c)
		unlease(d, c);
	pthread_mutex_unlock(&d->lock);
	if (!c)
		return false;
	log_write(LOG_LEVEL_DEBUG, c->id, "released");
	sandbox_put(d, c);
	return true;
}

/* What the reaper's epoll set said in one wait: the pids whose VMM ended
 * and those whose agent connection spoke up. */
struct reaper_events {
	pid_t exited[EXITS_PER_WAIT], agent_lost[EXITS_PER_WAIT];
	int nr_exited, nr_agent_lost;
};

static bool has_pid(const pid_t *pids, int n, pid_t pid)
{
	for (int i = 0; i < n; i++)
		if (pids[i] == pid)
			return true;
	return false;
}

/* A VMM that ended on its own (its pidfd said so): reaped here, its
 * reason kept. */
static bool vmm_died(struct sandbox *c, const struct reaper_events *ev)
{
	if (!has_pid(ev->exited, ev->nr_exited, c->vmm.pid) ||
	    !vmm_process_reap(&c->vmm))
		return false;
	vmm_process_reason(&c->vmm, c->stop_reason, sizeof(c->stop_reason));
	return true;
}

static bool agent_lost(struct sandbox *c, const struct reaper_events *ev)
{
	if (c->agent_lost ||
	    !has_pid(ev->agent_lost, ev->nr_agent_lost, c->vmm.pid))
		return false;
	c->agent_lost = true;
	return true;
}

/*
 * One reaper pass under the lock, after @ev; what is to be destroyed goes
 * to @dead.
 */
static void reap(struct daemon *d, const struct reaper_events *ev,
		 struct sandbox **dead)
{
	uint64_t now = monotonic_ns();

	for (struct sandbox *c = d->leased, *next; c; c = next) {
		next = c->next;
		/* Its VMM is its operation's (checkpoints.c) meanwhile; it
		 * expires once that ends. */
		if (c->op == SANDBOX_REPLACING)
			continue;
		if (!c->stopped && vmm_died(c, ev)) {
			c->stopped = true;
			log_write(LOG_LEVEL_WARNING, c->id,
				  "the VM stopped: %s", c->stop_reason);
		}
		/* Its user's requests open their own connections and
		 * report what they find: only said here. */
		if (!c->stopped && agent_lost(c, ev))
			log_write(LOG_LEVEL_WARNING, c->id,
				  "its agent dropped the daemon's connection");
		if (!lease_expired(c->expires_ns, now))
			continue;
		log_write(LOG_LEVEL_INFO, c->id, "expired");
		c->pool->expired++;
		unlease(d, c);
		if (--c->refs == 0) {
			c->next = *dead;
			*dead = c;
		}
	}
	for (size_t i = 0; i < d->nr_pools; i++) {
		struct pool *pl = &d->pools[i];
		struct sandbox **p = &pl->ready_head, *last = NULL;

		while (*p) {
			struct sandbox *c = *p;

			if (vmm_died(c, ev)) {
				log_write(LOG_LEVEL_WARNING, c->id,
					  "the VM stopped in the pool: %s",
					  c->stop_reason);
			} else if (agent_lost(c, ev)) {
				log_write(LOG_LEVEL_WARNING, c->id,
					  "its agent dropped the daemon's "
					  "connection in the pool: replaced");
			} else {
				last = c;
				p = &c->next;
				continue;
			}
			*p = c->next;
			pl->ready--;
			d->total--;
			c->next = *dead;
			*dead = c;
		}
		pl->ready_tail = last;
	}
	/* Workers refill what died; expired leases freed capacity. */
	if (*dead)
		pthread_cond_broadcast(&d->work);
}

static void *reaper(void *arg)
{
	struct daemon *d = arg;
	struct epoll_event events[EXITS_PER_WAIT];

	pthread_mutex_lock(&d->lock);
	while (!d->stopping) {
		struct reaper_events ev = { .nr_exited = 0 };
		struct sandbox *dead = NULL;

		pthread_mutex_unlock(&d->lock);
		/* The pid, not the sandbox: it may be gone by now. */
		int n = epoll_wait(d->vmm_exits, events, EXITS_PER_WAIT,
				   REAP_INTERVAL_MS);
		for (int i = 0; i < n; i++) {
			uint64_t tag = events[i].data.u64;

			if (tag & AGENT_EVENT)
				ev.agent_lost[ev.nr_agent_lost++] = (pid_t)tag;
			else
				ev.exited[ev.nr_exited++] = (pid_t)tag;
		}
		pthread_mutex_lock(&d->lock);
		if (d->stopping) /* pools_stop() destroys what is left */
			break;
		reap(d, &ev, &dead);
		pthread_mutex_unlock(&d->lock);
		destroy_all(d, dead);
		admission_update(d);
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

/*
 * A restorer: runs the jobs an API request queues (daemon_run_jobs), until
 * the daemon stops with none left.  Forks made here outlive the request
 * that asked for them, as they must (daemon.h).
 */
static void *restorer(void *arg)
{
	struct daemon *d = arg;

	pthread_mutex_lock(&d->lock);
	for (;;) {
		struct daemon_job *job = d->jobs_head;

		if (!job) {
			if (d->stopping)
				break;
			pthread_cond_wait(&d->job_queued, &d->lock);
			continue;
		}
		d->jobs_head = job->next;
		if (!d->jobs_head)
			d->jobs_tail = NULL;
		pthread_mutex_unlock(&d->lock);
		job->run(job);
		pthread_mutex_lock(&d->lock);
		job->done = true;
		pthread_cond_broadcast(&d->job_done);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

void daemon_run_jobs(struct daemon *d, struct daemon_job *const jobs[],
		     size_t n)
{
	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < n; i++) {
		jobs[i]->done = false;
		jobs[i]->next = NULL;
		if (d->jobs_tail)
			d->jobs_tail->next = jobs[i];
		else
			d->jobs_head = jobs[i];
		d->jobs_tail = jobs[i];
	}
	pthread_cond_broadcast(&d->job_queued);
	for (size_t i = 0; i < n; i++)
		while (!jobs[i]->done)
			pthread_cond_wait(&d->job_done, &d->lock);
	pthread_mutex_unlock(&d->lock);
}

int pools_start(struct daemon *d)
{
	int err;

	d->vmm_exits = epoll_create1(EPOLL_CLOEXEC);
	if (d->vmm_exits < 0)
		return -errno;
	pthread_cond_init(&d->job_queued, NULL);
	pthread_cond_init(&d->job_done, NULL);
	for (; d->nr_restorers < RESTORERS; d->nr_restorers++) {
		err = pthread_create(&d->restorers[d->nr_restorers], NULL,
				     restorer, d);
		if (err)
			return -err;
	}
	admission_start(d);
	for (size_t i = 0; i < d->nr_pools; i++) {
		struct pool *pl = &d->pools[i];

		pl->workers =
			calloc(pl->t->restore_parallel, sizeof(*pl->workers));
		if (!pl->workers)
			return -ENOMEM;
		for (; pl->nr_workers < pl->t->restore_parallel;
		     pl->nr_workers++) {
			err = pthread_create(&pl->workers[pl->nr_workers], NULL,
					     pool_worker, pl);
			if (err)
				return -err;
		}
	}
	err = pthread_create(&d->reaper, NULL, reaper, d);
	return -err;
}

void pools_stopping(struct daemon *d)
{
	pthread_mutex_lock(&d->lock);
	d->stopping = true;
	pthread_cond_broadcast(&d->work);
	pthread_cond_broadcast(&d->job_queued);
	pools_wake_waiters(d);
	pthread_mutex_unlock(&d->lock);
}

void pools_stop(struct daemon *d)
{
	pools_stopping(d);
	/* Nobody but us touches the lists once the threads are gone. */
	for (size_t i = 0; i < d->nr_pools; i++) {
		struct pool *pl = &d->pools[i];

		for (uint32_t w = 0; w < pl->nr_workers; w++)
			pthread_join(pl->workers[w], NULL);
		free(pl->workers);
		pl->workers = NULL;
		pl->nr_workers = 0;
	}
	if (d->reaper) {
		pthread_join(d->reaper, NULL);
		d->reaper = 0;
	}
	/* After the API: no request queues a job any more. */
	for (uint32_t i = 0; i < d->nr_restorers; i++)
		pthread_join(d->restorers[i], NULL);
	d->nr_restorers = 0;
	for (size_t i = 0; i < d->nr_pools; i++)
		while (d->pools[i].ready)
			sandbox_destroy(d, pop_ready(&d->pools[i]));
	/* The API has stopped: nobody holds a leased sandbox any more. */
	while (d->leased) {
		struct sandbox *c = d->leased;

		d->leased = c->next;
		sandbox_destroy(d, c);
	}
	if (d->vmm_exits >= 0)
		close(d->vmm_exits);
	d->vmm_exits = -1;
}
