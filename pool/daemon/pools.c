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
 * While the daemon does not admit (admission.h: the host is overloaded)
 * workers start no restore, and a handout that would wait for a new one
 * fails at once with POOL_OVERLOADED (503 "overloaded").
 *
 * Workers fork the VMMs, and they live as long as the daemon: a VMM's
 * PR_SET_PDEATHSIG follows the thread that forked it (vmm_process.h).
 *
 * The reaper thread expires leases, notices VMMs that died and, once a
 * second, has admission.c look at the host.  Every ready or leased
 * sandbox's VMM has its pidfd in one epoll set (one-shot: a pidfd stays
 * readable once its process ended), so the reaper learns of an exit by
 * waiting on that set, REAP_INTERVAL_MS at most, and asks waitpid about
 * those VMMs only: the daemon's cost does not grow with the number of idle
 * sandboxes.  Restoring ones are waited for by their worker.
 */
#include "daemon.h"

#include <errno.h>
#include <signal.h>
#include <sys/epoll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent_client.h"
#include "clock.h"
#include "clone.h"
#include "log.h"
#include "paths.h"

#define REAP_INTERVAL_MS 100
/* VMM exits taken from the epoll set per wait. */
#define EXITS_PER_WAIT 64
/* After a failed restore: do not spin on a template that cannot restore. */
#define RESTORE_RETRY_MS 1000
/* Failed restores in a row after which waiting requests give up. */
#define RESTORE_FAILURES_FATAL 3
#define CLONE_REQUEST_ID 1

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
 * From now on the reaper hears of @c's VMM ending.  Its pidfd leaves the
 * set when sandbox_destroy() closes it; the pid is what the event carries.
 */
static void watch_vmm(struct daemon *d, struct sandbox *c)
{
	struct epoll_event e = { .events = EPOLLIN | EPOLLONESHOT,
				 .data.u64 = (uint64_t)c->vmm.pid };

	if (epoll_ctl(d->vmm_exits, EPOLL_CTL_ADD, c->vmm.pidfd, &e) < 0)
		log_write(LOG_LEVEL_ERROR, c->id,
			  "cannot watch its VMM (epoll_ctl: %s): its death "
			  "goes unnoticed until its lease ends",
			  strerror(errno));
}

static struct timespec realtime_after_ms(int64_t ms)
{
	int64_t at = realtime_ms() + ms;

	return (struct timespec){ .tv_sec = at / 1000,
				  .tv_nsec = (at % 1000) * 1000000 };
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
	return pl->ready + pl->restoring + pl->leased;
}

static void free_env(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/* Everything a sandbox holds, in reverse order of taking it; no lock
 * held. */
static void sandbox_destroy(struct daemon *d, struct sandbox *c)
{
	char err[512];

	vmm_process_kill(&c->vmm);
	vmm_process_remove(&c->vmm);
	if (c->cgroup_made && cgroup_destroy(&c->cg, err, sizeof(err)) < 0)
		log_write(LOG_LEVEL_WARNING, c->id, "%s", err);
	if (c->registered) {
		pthread_mutex_lock(&d->catalog_lock);
		if (clone_unregister(c->pool->snapshot_id, c->id, err,
				     sizeof(err)) < 0)
			log_write(LOG_LEVEL_WARNING, c->id, "%s", err);
		pthread_mutex_unlock(&d->catalog_lock);
	}
	free_env(c->env);
	free(c);
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
static int restore(struct pool *pl, struct sandbox *c)
{
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
		pl->snapshot_dir,
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

	pthread_mutex_lock(&d->catalog_lock);
	ret = clone_register(pl->snapshot_id, c->id, &snap, err, sizeof(err));
	pthread_mutex_unlock(&d->catalog_lock);
	if (ret < 0) {
		log_write(LOG_LEVEL_ERROR, c->id, "%s", err);
		return -1;
	}
	c->registered = true;
	if (cgroup_create(&d->cgroups, c->id, &limits, &c->cg, err,
			  sizeof(err)) < 0) {
		log_write(LOG_LEVEL_ERROR, c->id, "%s", err);
		return -1;
	}
	c->cgroup_made = true;
	snprintf(run_dir, sizeof(run_dir), "%s/%s", d->run_dir, c->id);
	struct vmm_place place = { .run_dir = run_dir, .cgroup = &c->cg };
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
	/* The hostname is the id too: it is how a user tells clones apart. */
	ret = agent_clone(&agent, CLONE_REQUEST_ID, c->id, c->id, err,
			  sizeof(err));
	agent_close(&agent);
	if (ret < 0) {
		log_write(LOG_LEVEL_ERROR, c->id, "making the clone unique: %s",
			  err);
		return -1;
	}
	c->restore_ms = monotonic_ms() - c->vmm.started_ms;
	log_write(LOG_LEVEL_DEBUG, c->id,
		  "restored from template %s in %.1f ms", t->name,
		  c->restore_ms);
	return 0;
}

static bool worker_needed(const struct pool *pl)
{
	const struct daemon *d = pl->d;

	return pl->ready + pl->restoring < pl->t->min_ready + pl->waiters &&
	       pool_total(pl) < pl->t->max_total &&
	       d->total < d->cfg.max_sandboxes && d->admission.admitting;
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

		struct sandbox *c = calloc(1, sizeof(*c));
		bool ok = c && catalog_new_id(c->id) == 0;
		if (ok) {
			c->pool = pl;
			ok = restore(pl, c) == 0;
		}

		pthread_mutex_lock(&d->lock);
		pl->restoring--;
		if (ok && !d->stopping) {
			pl->failures_in_a_row = 0;
			c->state = SANDBOX_READY;
			watch_vmm(d, c);
			if (pl->ready_tail)
				pl->ready_tail->next = c;
			else
				pl->ready_head = c;
			pl->ready_tail = c;
			pl->ready++;
			histogram_add(&pl->restore_s, c->restore_ms / 1e3);
			restore_latency_add(&pl->latency, c->restore_ms,
					    monotonic_ms());
			pthread_cond_broadcast(&pl->ready_cond);
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
		/* Waiters see the failure; a freed place may be another
		 * pool's to fill. */
		pthread_cond_broadcast(&pl->ready_cond);
		pthread_cond_broadcast(&d->work);
		pthread_mutex_unlock(&d->lock);
		if (c)
			sandbox_destroy(d, c);
		pthread_mutex_lock(&d->lock);
		if (!ok && !d->stopping) {
			struct timespec retry =
				realtime_after_ms(RESTORE_RETRY_MS);

			pthread_cond_timedwait(&d->work, &d->lock, &retry);
		}
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
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

enum pool_error pool_handout(struct pool *pl, uint32_t timeout_s, char **env,
			     struct sandbox **out, char *err, size_t errlen)
{
	struct daemon *d = pl->d;
	double start = monotonic_ms();
	struct timespec deadline =
		realtime_after_ms((int64_t)d->cfg.restore_timeout_s * 1000);
	struct sandbox *c = NULL;
	enum pool_error error = POOL_OK;

	bool waiting = false; /* counted in pl->waiters */

	pthread_mutex_lock(&d->lock);
	uint64_t failures = pl->restore_failures;
	while (!c) {
		if (d->stopping) {
			snprintf(err, errlen, "the daemon is shutting down");
			error = POOL_STOPPING;
			break;
		}
		if (pl->ready) {
			c = pop_ready(pl);
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
		bool unclaimed = pl->restoring > pl->waiters - waiting;
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
		if (!waiting && !unclaimed && !d->admission.admitting) {
			snprintf(
				err, errlen,
				"the host is overloaded: %s; no clone of template %s is ready, and none is restored until the host recovers",
				d->admission.reason, pl->t->name);
			pl->overload_rejections++;
			error = POOL_OVERLOADED;
			break;
		}
		if (!waiting) { /* one more clone wanted: a worker's job */
			waiting = true;
			pl->waiters++;
			pthread_cond_broadcast(&d->work);
		}
		int waited = pthread_cond_timedwait(&pl->ready_cond, &d->lock,
						    &deadline);
		if (waited == ETIMEDOUT && !pl->ready) {
			snprintf(
				err, errlen,
				"no clone of template %s was ready within %u s",
				pl->t->name, d->cfg.restore_timeout_s);
			error = POOL_TIMED_OUT;
			break;
		}
	}
	if (waiting)
		pl->waiters--;
	if (c) {
		int64_t now = realtime_ms();

		c->state = SANDBOX_LEASED;
		c->env = env;
		env = NULL;
		c->created_ms = now;
		c->expires_ms = now + (int64_t)timeout_s * 1000;
		c->handout_ms = monotonic_ms() - start;
		c->refs = 2; /* the leased list's and the caller's */
		c->next = d->leased;
		d->leased = c;
		pl->leased++;
		pl->handouts++;
		histogram_add(&pl->handout_s, c->handout_ms / 1e3);
		/* The workers refill what we took. */
		pthread_cond_broadcast(&d->work);
	}
	pthread_mutex_unlock(&d->lock);
	free_env(env);
	if (c)
		log_write(LOG_LEVEL_INFO, c->id,
			  "handout template %s in %.2f ms (restore %.1f ms)",
			  pl->t->name, c->handout_ms, c->restore_ms);
	*out = c;
	return error;
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
	if (c->vmm.pid > 0)
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

/* A VMM that ended on its own (its pidfd said so): reaped here, its
 * reason kept. */
static bool vmm_died(struct sandbox *c, const pid_t *exited, int n)
{
	for (int i = 0; i < n; i++)
		if (exited[i] == c->vmm.pid && vmm_process_reap(&c->vmm)) {
			vmm_process_reason(&c->vmm, c->stop_reason,
					   sizeof(c->stop_reason));
			return true;
		}
	return false;
}

/*
 * One reaper pass under the lock, after the VMMs @exited (@n of them,
 * from their pidfds) ended; what is to be destroyed goes to @dead.
 */
static void reap(struct daemon *d, const pid_t *exited, int n,
		 struct sandbox **dead)
{
	int64_t now = realtime_ms();

	for (struct sandbox *c = d->leased, *next; c; c = next) {
		next = c->next;
		if (!c->stopped && vmm_died(c, exited, n)) {
			c->stopped = true;
			log_write(LOG_LEVEL_WARNING, c->id,
				  "the VM stopped: %s", c->stop_reason);
		}
		if (c->expires_ms > now)
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

			if (!vmm_died(c, exited, n)) {
				last = c;
				p = &c->next;
				continue;
			}
			log_write(LOG_LEVEL_WARNING, c->id,
				  "the VM stopped in the pool: %s",
				  c->stop_reason);
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
	pid_t exited[EXITS_PER_WAIT];

	pthread_mutex_lock(&d->lock);
	while (!d->stopping) {
		struct sandbox *dead = NULL;

		pthread_mutex_unlock(&d->lock);
		/* The pid, not the sandbox: it may be gone by now. */
		int n = epoll_wait(d->vmm_exits, events, EXITS_PER_WAIT,
				   REAP_INTERVAL_MS);
		for (int i = 0; i < n; i++)
			exited[i] = (pid_t)events[i].data.u64;
		pthread_mutex_lock(&d->lock);
		if (d->stopping) /* pools_stop() destroys what is left */
			break;
		reap(d, exited, n > 0 ? n : 0, &dead);
		pthread_mutex_unlock(&d->lock);
		while (dead) {
			struct sandbox *c = dead;

			dead = c->next;
			sandbox_destroy(d, c);
		}
		admission_update(d);
		pthread_mutex_lock(&d->lock);
	}
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

int pools_start(struct daemon *d)
{
	int err;

	d->vmm_exits = epoll_create1(EPOLL_CLOEXEC);
	if (d->vmm_exits < 0)
		return -errno;
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
	for (size_t i = 0; i < d->nr_pools; i++)
		pthread_cond_broadcast(&d->pools[i].ready_cond);
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
