// SPDX-License-Identifier: Apache-2.0
/*
 * checkpoints.c - what a leased sandbox's VM can be made to do besides
 * run: checkpoint, fork, rollback, pause, resume (pool/API.md); sandboxes
 * restored on demand from any snapshot; the snapshots' list and removal.
 *
 * A checkpoint is a snapshot like any other (snapshot_store.h): its VMM
 * writes it (vmm_process_checkpoint: a diff of the snapshot its memory
 * derives from, or a full one past the chain's maximum depth) into
 * <state>/snapshots/.tmp-<id>-<daemon pid>/, which is fsynced, renamed to
 * <id>/ and only then added to the catalog, the sandbox then registered as
 * its live clone (and no longer as its parent's): so a checkpoint is kept
 * as long as a sandbox's memory derives from it, and a daemon or VMM
 * killed in the middle leaves nothing the catalog names.  The daemon's
 * start removes what such a crash left (snapshots_collect).
 *
 * Rollback and resume replace a sandbox's VM in place, under its id, lease
 * and network address: the sandbox is marked SANDBOX_REPLACING (requests
 * that would use its VM answer 409 meanwhile, and the reaper leaves it
 * be), the requests already using it are waited for (briefly: past
 * DRAIN_MS the operation is refused, 409, and nothing changed), its VM is
 * torn down (the run directory, cgroup and host veth are named after the
 * id, so the new VM cannot start beside the old), and a new one is
 * restored into a scratch struct sandbox by a restorer thread, whose VM,
 * cgroup and network then move into the sandbox under the lock.  The
 * network is made again in the index the sandbox holds, so its host
 * address and policy stay; connections through the old one are gone, as
 * they would be after a guest reboot.  Pause is a checkpoint then the
 * teardown, its registration kept: a paused sandbox pins its checkpoint.
 *
 * A rollback's target may be any snapshot of the sandbox's template, not
 * only one of its own lineage: the template fixes the machine (memory,
 * vCPUs, devices, network device), which is what a restore into this
 * sandbox's place needs, and a trainer rolls one sandbox back to a
 * checkpoint another one took.
 *
 * Each operation takes its sandbox's op (one at a time: another is 409)
 * and returns a pool error that api_snapshots.c maps to a status.
 */
#include "pool/daemon/daemon.h"
#include "pool/daemon/sandbox_ops.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pool/host/checkpoint.h"
#include "common/clock.h"
#include "pool/host/clone.h"
#include "common/log.h"
#include "snapshot/memdiff.h"
#include "pool/host/paths.h"
#include "pool/host/snapshot_store.h"

/* How long a rollback or pause waits for requests using the VM to end. */
#define DRAIN_MS 5000
#define DRAIN_TICK_MS 10

const char *sandbox_state_name(const struct sandbox *c)
{
	if (c->paused)
		return "paused";
	return c->stopped ? "stopped" : "running";
}

/* ---- one operation at a time ---- */

/* What an operation needs of its sandbox's state. */
enum needs { NEEDS_RUNNING, NEEDS_PAUSED, NEEDS_NOT_BUSY };

/*
 * Takes @c for operation @op ("checkpointed") if nothing else is being
 * done to it and it is in the state @needs; POOL_OK, or POOL_CONFLICT
 * (POOL_NOT_FOUND for one just released) after a message.
 */
static enum pool_error op_begin(struct sandbox *c, enum sandbox_op op,
				const char *name, enum needs needs, char *err,
				size_t errlen)
{
	struct daemon *d = c->pool->d;
	enum pool_error e = POOL_CONFLICT;

	pthread_mutex_lock(&d->lock);
	if (c->unleased) {
		snprintf(err, errlen, "no sandbox \"%s\"", c->id);
		e = POOL_NOT_FOUND;
	} else if (c->op != SANDBOX_NO_OP)
		snprintf(err, errlen,
			 "sandbox %s is being %s: try again once "
			 "that is done",
			 c->id, c->op_name);
	else if (needs == NEEDS_PAUSED && !c->paused)
		snprintf(err, errlen, "sandbox %s is not paused", c->id);
	else if (needs == NEEDS_RUNNING && c->paused)
		snprintf(err, errlen,
			 "sandbox %s is paused: resume it first (POST "
			 "/sandboxes/%s/resume)",
			 c->id, c->id);
	else if (needs == NEEDS_RUNNING && c->stopped)
		snprintf(err, errlen, "sandbox %s stopped: %s", c->id,
			 c->stop_reason);
	else {
		c->op = op;
		c->op_name = name;
		e = POOL_OK;
	}
	pthread_mutex_unlock(&d->lock);
	return e;
}

static void op_end(struct sandbox *c)
{
	struct daemon *d = c->pool->d;

	pthread_mutex_lock(&d->lock);
	c->op = SANDBOX_NO_OP;
	c->op_name = NULL;
	pthread_mutex_unlock(&d->lock);
}

/*
 * Waits until nobody but the leased list and the caller holds replacing
 * @c: requests that began before it was marked (an exec, a file) end, the
 * ones after are refused.  POOL_OK, or POOL_CONFLICT after DRAIN_MS.
 */
static enum pool_error drain(struct sandbox *c, char *err, size_t errlen)
{
	struct daemon *d = c->pool->d;
	const struct timespec tick = { 0, DRAIN_TICK_MS * 1000000L };
	int held = 0;

	for (int waited = 0; waited <= DRAIN_MS; waited += DRAIN_TICK_MS) {
		pthread_mutex_lock(&d->lock);
		held = c->refs - (c->unleased ? 1 : 2);
		pthread_mutex_unlock(&d->lock);
		if (held <= 0)
			return POOL_OK;
		nanosleep(&tick, NULL);
	}
	snprintf(err, errlen,
		 "sandbox %s still has %d requests using it (exec, files) "
		 "after %d ms: try again once they end",
		 c->id, held, DRAIN_MS);
	return POOL_CONFLICT;
}

/*
 * After a failed pause: a VMM that died meanwhile, which the reaper left
 * alone (and whose exit it will not hear of again), is marked stopped.
 */
static void notice_death(struct sandbox *c)
{
	struct daemon *d = c->pool->d;

	pthread_mutex_lock(&d->lock);
	if (!c->stopped && vmm_process_reap(&c->vmm)) {
		c->stopped = true;
		vmm_process_reason(&c->vmm, c->stop_reason,
				   sizeof(c->stop_reason));
	}
	pthread_mutex_unlock(&d->lock);
}

/* ---- the catalog ---- */

/* Opens the catalog; the caller holds d->catalog_lock. */
static int open_catalog(struct daemon *d, struct catalog *cat, char *err,
			size_t errlen)
{
	char dir[PATH_MAX + 16];

	snprintf(dir, sizeof(dir), "%s/catalog", d->state_dir);
	return catalog_open(cat, dir, err, errlen);
}

/* The pool serving template @template_id, or NULL. */
static struct pool *pool_of_template(struct daemon *d, const char *template_id)
{
	for (size_t i = 0; i < d->nr_pools; i++)
		if (!strcmp(d->pools[i].template_id, template_id))
			return &d->pools[i];
	return NULL;
}

/* A catalog error as a pool error. */
static enum pool_error catalog_error(int ret)
{
	switch (ret) {
	case -ENOENT:
		return POOL_NOT_FOUND;
	case -EBUSY:
		return POOL_CONFLICT;
	case -EINVAL:
		return POOL_BAD_REQUEST;
	}
	return POOL_FAILED;
}

/*
 * Snapshot @id's record into @snap, and the pool of its template (NULL
 * with POOL_BAD_REQUEST when this daemon serves none).
 */
static enum pool_error find_snapshot(struct daemon *d, const char *id,
				     struct snapshot_record *snap,
				     struct pool **pl, char *err, size_t errlen)
{
	struct catalog cat;
	int ret;

	pthread_mutex_lock(&d->catalog_lock);
	ret = open_catalog(d, &cat, err, errlen);
	if (ret == 0) {
		ret = catalog_get_snapshot(&cat, id, snap, err, errlen);
		catalog_close(&cat);
	}
	pthread_mutex_unlock(&d->catalog_lock);
	if (ret < 0)
		return catalog_error(ret);
	*pl = pool_of_template(d, snap->template_id);
	if (*pl)
		return POOL_OK;
	snprintf(err, errlen,
		 "snapshot %s is of template %s, which this daemon does not "
		 "serve",
		 id, snap->template_id);
	return POOL_BAD_REQUEST;
}

/* Registers @c as a live clone of c->snapshot_id, its dir from the
 * catalog; POOL_OK or the catalog's error after a message. */
static enum pool_error register_clone(struct sandbox *c, char *err,
				      size_t errlen)
{
	struct daemon *d = c->pool->d;
	struct snapshot_record snap;

	pthread_mutex_lock(&d->catalog_lock);
	int ret = clone_register(c->snapshot_id, c->id, &snap, err, errlen);
	pthread_mutex_unlock(&d->catalog_lock);
	if (ret < 0)
		return catalog_error(ret);
	c->registered = true;
	snprintf(c->snapshot_dir, sizeof(c->snapshot_dir), "%s", snap.dir);
	return POOL_OK;
}

/* ---- checkpoints ---- */

/*
 * The checkpoint in @tmp, renamed to @final, into the catalog as @s (a
 * child of @c's snapshot), and @c registered as its live clone instead;
 * 0, or -1 after a message (@final removed: nothing names it).
 */
static int commit_checkpoint(struct sandbox *c, const char *snapshots,
			     const char *tmp, const char *final,
			     struct snapshot_record *s, char *err,
			     size_t errlen)
{
	struct daemon *d = c->pool->d;
	struct template_record t;
	struct catalog cat;
	char why[PATH_MAX + 128];
	bool added = false;
	int ret;

	why[0] = '\0';
	if (snapshot_store_sync_dir(tmp, why, sizeof(why)) < 0 ||
	    rename(tmp, final) < 0 ||
	    snapshot_store_sync_dir(snapshots, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "cannot move %.1024s to %.1024s: %.512s",
			 tmp, final, why[0] ? why : strerror(errno));
		snapshot_store_remove(tmp, NULL, 0);
		snapshot_store_remove(final, NULL, 0);
		return -1;
	}
	pthread_mutex_lock(&d->catalog_lock);
	ret = open_catalog(d, &cat, err, errlen);
	if (ret == 0) {
		ret = catalog_get_template(&cat, s->template_id, &t, err,
					   errlen);
		if (ret == 0)
			ret = catalog_add_snapshot(&cat, &t, s, err, errlen);
		added = ret == 0;
		if (ret == 0)
			ret = catalog_add_clone(&cat, s->id, c->id, getpid(),
						err, errlen);
		/* The snapshot's entry without this sandbox as its clone:
		 * one that nothing pins, removable as any other. */
		if (ret == 0 && c->registered &&
		    catalog_remove_clone(&cat, c->snapshot_id, c->id, why,
					 sizeof(why)) < 0)
			log_write(LOG_LEVEL_WARNING, c->id, "%s", why);
		catalog_close(&cat);
	}
	pthread_mutex_unlock(&d->catalog_lock);
	/* Added but not registered to: a whole snapshot, left listed. */
	if (ret < 0 && !added)
		snapshot_store_remove(final, NULL, 0);
	return ret < 0 ? -1 : 0;
}

/*
 * Has @c's VMM write a checkpoint and commits it (the caller holds @c's
 * op); @ck gets what it was.  POOL_OK or POOL_FAILED after a message.
 */
static enum pool_error write_checkpoint(struct sandbox *c,
					struct checkpoint_result *ck, char *err,
					size_t errlen)
{
	struct pool *pl = c->pool;
	struct daemon *d = pl->d;
	struct snapshot_record s = { 0 };
	struct vmm_checkpoint vc;
	char snapshots[PATH_MAX + 16], tmp[PATH_MAX + 64], final[PATH_MAX + 64];
	char why[PATH_MAX + 256];
	int ret;

	snprintf(snapshots, sizeof(snapshots), "%s/snapshots", d->state_dir);
	if (catalog_new_id(s.id) < 0) {
		snprintf(err, errlen, "no randomness for a snapshot id");
		return POOL_FAILED;
	}
	ret = thaw_make_dirs(snapshots, why, sizeof(why));
	if (ret == 0)
		ret = snapshot_store_paths(snapshots, s.id, getpid(), tmp,
					   final, sizeof(tmp), why,
					   sizeof(why));
	/* Guest memory goes in: no one else may look (preopen.h). */
	if (ret == 0 && mkdir(tmp, 0700) < 0) {
		ret = -errno;
		snprintf(why, sizeof(why), "cannot create %s: %s", tmp,
			 strerror(errno));
	}
	if (ret == 0) {
		ret = vmm_process_checkpoint(&c->vmm, tmp, &vc, why,
					     sizeof(why));
		if (ret < 0)
			snapshot_store_remove(tmp, NULL, 0);
	}
	if (ret == 0 && !vc.full)
		ret = snapshot_link_parent(tmp, c->snapshot_id, why,
					   sizeof(why));
	if (ret == 0)
		ret = snapshot_store_describe(tmp, final, &s, why, sizeof(why));
	if (ret < 0) {
		snapshot_store_remove(tmp, NULL, 0);
		snprintf(err, errlen, "no checkpoint written: %s", why);
		goto failed;
	}
	memcpy(s.parent, c->snapshot_id, sizeof(s.parent));
	memcpy(s.template_id, pl->template_id, sizeof(s.template_id));
	s.depth = vc.depth;
	s.dirty_bytes = vc.full ? 0 : vc.dirty_pages * MEMDIFF_PAGE_SIZE;
	if (commit_checkpoint(c, snapshots, tmp, final, &s, why, sizeof(why)) <
	    0) {
		snprintf(err, errlen, "checkpoint %s: %s", s.id, why);
		goto failed;
	}
	*ck = (struct checkpoint_result){
		.dirty_bytes = vc.dirty_pages * MEMDIFF_PAGE_SIZE,
		.full = vc.full,
		.depth = vc.depth,
		.pause_ms = vc.pause_ms,
		.total_ms = vc.total_ms,
	};
	memcpy(ck->snapshot, s.id, sizeof(ck->snapshot));
	memcpy(ck->parent, c->snapshot_id, sizeof(ck->parent));
	pthread_mutex_lock(&d->lock);
	memcpy(c->snapshot_id, s.id, sizeof(c->snapshot_id));
	memcpy(c->snapshot_dir, s.dir, sizeof(c->snapshot_dir));
	c->registered = true;
	pl->checkpoints++;
	histogram_add(&pl->checkpoint_pause_s, vc.pause_ms / 1e3);
	histogram_add(&pl->checkpoint_total_s, vc.total_ms / 1e3);
	pthread_mutex_unlock(&d->lock);
	log_write(LOG_LEVEL_INFO, c->id,
		  "checkpoint %s (parent %s): %llu dirty pages%s, depth %u, "
		  "paused %.1f ms, %.1f ms in all",
		  ck->snapshot, ck->parent, (unsigned long long)vc.dirty_pages,
		  vc.full ? " (full)" : "", vc.depth, vc.pause_ms, vc.total_ms);
	return POOL_OK;
failed:
	pthread_mutex_lock(&d->lock);
	pl->checkpoint_failures++;
	pthread_mutex_unlock(&d->lock);
	/* The log line names the sandbox by itself; the answer says it. */
	log_write(LOG_LEVEL_WARNING, c->id, "%s", err);
	snprintf(why, sizeof(why), "%s", err);
	snprintf(err, errlen, "sandbox %s: %s", c->id, why);
	return POOL_FAILED;
}

enum pool_error sandbox_checkpoint(struct sandbox *c,
				   struct checkpoint_result *ck, char *err,
				   size_t errlen)
{
	enum pool_error e = op_begin(c, SANDBOX_CHECKPOINTING, "checkpointed",
				     NEEDS_RUNNING, err, errlen);

	if (e != POOL_OK)
		return e;
	e = write_checkpoint(c, ck, err, errlen);
	op_end(c);
	return e;
}

/* ---- restores on demand ---- */

struct restore_job {
	struct daemon_job job;
	struct sandbox *c;
	int ret;
};

static void run_restore(struct daemon_job *job)
{
	struct restore_job *r =
		(struct restore_job *)((char *)job -
				       offsetof(struct restore_job, job));

	r->ret = sandbox_restore(r->c);
}

/* sandbox_restore(@c) on a restorer thread; 0 or -1 (logged). */
static int restore_on_restorer(struct sandbox *c)
{
	struct restore_job r = { .job.run = run_restore, .c = c };
	struct daemon_job *jobs[] = { &r.job };

	daemon_run_jobs(c->pool->d, jobs, 1);
	return r.ret;
}

/* A copy of NULL-terminated @env (NULL: none); NULL when out of memory,
 * *@ok false then. */
static char **copy_env(char *const *env, bool *ok)
{
	size_t n = 0;
	char **copy;

	*ok = true;
	if (!env)
		return NULL;
	while (env[n])
		n++;
	copy = calloc(n + 1, sizeof(*copy));
	for (size_t i = 0; copy && i < n; i++) {
		copy[i] = strdup(env[i]);
		if (!copy[i]) {
			while (i--)
				free(copy[i]);
			free(copy);
			copy = NULL;
		}
	}
	*ok = copy != NULL;
	return copy;
}

/*
 * Room for @n more sandboxes of @pl, taken (counted as restoring); or the
 * pool error that says why not, after a message.
 */
static enum pool_error reserve(struct pool *pl, uint32_t n, char *err,
			       size_t errlen)
{
	struct daemon *d = pl->d;
	enum pool_error e = POOL_OK;

	pthread_mutex_lock(&d->lock);
	uint32_t total = pl->ready + pl->restoring + pl->on_demand + pl->leased;
	if (d->stopping) {
		snprintf(err, errlen, "the daemon is shutting down");
		e = POOL_STOPPING;
	} else if (!d->admission.admitting) {
		snprintf(err, errlen,
			 "the host is overloaded: %s; no sandbox is restored "
			 "until it recovers",
			 d->admission.reason);
		pl->overload_rejections++;
		e = POOL_OVERLOADED;
	} else if (total + n > pl->t->max_total ||
		   d->total + n > d->cfg.max_sandboxes) {
		snprintf(
			err, errlen,
			"%u more sandboxes of template %s do not fit: %u of at "
			"most %u (daemon: %u of %u)",
			n, pl->t->name, total, pl->t->max_total, d->total,
			d->cfg.max_sandboxes);
		pl->rejections++;
		e = POOL_FULL;
	} else {
		pl->on_demand += n;
		d->total += n;
	}
	pthread_mutex_unlock(&d->lock);
	return e;
}

/* Gives back a reserved place whose sandbox was not made. */
static void unreserve(struct pool *pl, bool failed)
{
	struct daemon *d = pl->d;

	pthread_mutex_lock(&d->lock);
	pl->on_demand--;
	d->total--;
	if (failed) {
		pl->restore_failures++;
		pl->failures_in_a_row++;
	}
	pthread_cond_broadcast(&d->work);
	pthread_mutex_unlock(&d->lock);
}

/* Fork @i of a request: registered as a clone of @snapshot_id, or its
 * entry in @out says why not. */
static struct sandbox *new_fork(struct pool *pl, const char *snapshot_id,
				struct fork_result *out)
{
	struct sandbox *c = sandbox_new(pl);

	if (!c) {
		out->error = POOL_FAILED;
		snprintf(out->message, sizeof(out->message), "out of memory");
		return NULL;
	}
	memcpy(c->snapshot_id, snapshot_id, sizeof(c->snapshot_id));
	out->error = register_clone(c, out->message, sizeof(out->message));
	if (out->error == POOL_OK)
		return c;
	sandbox_destroy(pl->d, c);
	return NULL;
}

enum pool_error sandboxes_from_snapshot(struct daemon *d,
					const char *snapshot_id, uint32_t n,
					uint32_t timeout_s, char *const *env,
					struct fork_result *out, char *err,
					size_t errlen)
{
	struct restore_job jobs[MAX_FORKS];
	struct daemon_job *queued[MAX_FORKS];
	struct snapshot_record snap;
	struct pool *pl;
	double started_ms = monotonic_ms();
	size_t nr_queued = 0;
	bool made = false;
	enum pool_error e;

	if (n < 1 || n > MAX_FORKS) {
		snprintf(err, errlen, "a count of %u: from 1 to %d", n,
			 MAX_FORKS);
		return POOL_BAD_REQUEST;
	}
	e = find_snapshot(d, snapshot_id, &snap, &pl, err, errlen);
	if (e == POOL_OK && timeout_s > pl->t->max_timeout_s) {
		snprintf(err, errlen,
			 "\"timeout_s\" must be a whole number from 1 to %u",
			 pl->t->max_timeout_s);
		e = POOL_BAD_REQUEST;
	}
	if (e == POOL_OK)
		e = reserve(pl, n, err, errlen);
	if (e != POOL_OK) {
		for (uint32_t i = 0; i < n; i++) {
			out[i] = (struct fork_result){ .error = e };
			snprintf(out[i].message, sizeof(out[i].message), "%s",
				 err);
		}
		return e;
	}
	for (uint32_t i = 0; i < n; i++) {
		out[i] = (struct fork_result){ .error = POOL_OK };
		jobs[i] = (struct restore_job){
			.job.run = run_restore,
			.c = new_fork(pl, snapshot_id, &out[i]),
		};
		if (jobs[i].c)
			queued[nr_queued++] = &jobs[i].job;
		else
			unreserve(pl, false);
	}
	daemon_run_jobs(d, queued, nr_queued);
	for (uint32_t i = 0; i < n; i++) {
		struct sandbox *c = jobs[i].c;
		bool ok = true;
		char **copy = c && jobs[i].ret == 0 ? copy_env(env, &ok) : NULL;

		if (!c)
			continue;
		if (jobs[i].ret < 0 || !ok) {
			out[i].error = POOL_FAILED;
			snprintf(out[i].message, sizeof(out[i].message),
				 "restoring a sandbox of snapshot %s failed "
				 "(the daemon's log says why)",
				 snapshot_id);
			unreserve(pl, true);
			sandbox_destroy(d, c);
			continue;
		}
		c->handout_ms = monotonic_ms() - started_ms;
		sandbox_lease_new(c, timeout_s ? timeout_s : pl->t->timeout_s,
				  copy);
		log_write(LOG_LEVEL_INFO, c->id,
			  "restored from snapshot %s in %.1f ms", snapshot_id,
			  c->restore_ms);
		out[i].c = c;
		made = true;
	}
	if (!made) {
		snprintf(err, errlen, "%s", out[0].message);
		return out[0].error;
	}
	return POOL_OK;
}

enum pool_error sandbox_fork(struct sandbox *c, uint32_t n,
			     struct checkpoint_result *ck,
			     struct fork_result *out, char *err, size_t errlen)
{
	struct daemon *d = c->pool->d;
	enum pool_error e;

	if (n < 1 || n > MAX_FORKS) {
		snprintf(err, errlen,
			 "\"count\" must be a whole number from 1 "
			 "to %d",
			 MAX_FORKS);
		return POOL_BAD_REQUEST;
	}
	e = sandbox_checkpoint(c, ck, err, errlen);
	if (e != POOL_OK)
		return e;
	e = sandboxes_from_snapshot(d, ck->snapshot, n, 0, c->env, out, err,
				    errlen);
	pthread_mutex_lock(&d->lock);
	c->pool->forks += n;
	pthread_mutex_unlock(&d->lock);
	return e;
}

/* ---- a sandbox's VM replaced ---- */

/*
 * A scratch sandbox for a new VM of @c from @snapshot_id: @c's id, pool,
 * network index and policy; NULL when out of memory.
 */
static struct sandbox *scratch_of(const struct sandbox *c,
				  const char *snapshot_id)
{
	struct sandbox *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->agent.fd = -1;
	s->pool = c->pool;
	memcpy(s->id, c->id, sizeof(s->id));
	memcpy(s->snapshot_id, snapshot_id, sizeof(s->snapshot_id));
	s->net.index = c->net.index;
	s->net_index_held = c->net_index_held;
	s->policy = c->policy;
	return s;
}

/* @s's VM, cgroup, network and restore into @c (under the lock). */
static void adopt(struct sandbox *c, struct sandbox *s)
{
	c->vmm = s->vmm;
	c->cg = s->cg;
	c->cgroup_made = s->cgroup_made;
	c->agent = s->agent;
	c->net = s->net;
	c->net_made = s->net_made;
	c->net_index_held = s->net_index_held;
	c->registered = s->registered;
	memcpy(c->snapshot_id, s->snapshot_id, sizeof(c->snapshot_id));
	memcpy(c->snapshot_dir, s->snapshot_dir, sizeof(c->snapshot_dir));
	c->restore_ms = s->restore_ms;
	c->restore_phases = s->restore_phases;
	c->identity_ms = s->identity_ms;
	c->restore_host_ms = s->restore_host_ms;
	c->restore_guest_ms = s->restore_guest_ms;
	c->paused = c->stopped = c->agent_lost = false;
	c->stop_reason[0] = '\0';
}

/*
 * Replaces the VM of @c (held, SANDBOX_REPLACING, its requests drained)
 * with a restore of @snapshot_id, or of its own snapshot when that is
 * NULL (resume).  A restore that fails leaves @c stopped, saying why.
 */
static enum pool_error replace_vm(struct sandbox *c, const char *snapshot_id,
				  const char *what, char *err, size_t errlen)
{
	struct daemon *d = c->pool->d;
	bool same = !snapshot_id || !strcmp(snapshot_id, c->snapshot_id);
	struct sandbox *s = scratch_of(c, same ? c->snapshot_id : snapshot_id);
	enum pool_error e = POOL_OK;

	if (!s) {
		snprintf(err, errlen, "out of memory");
		return POOL_FAILED;
	}
	/* Registered first: an unknown or unrestorable snapshot costs the
	 * sandbox nothing; its own stays registered. */
	if (same && c->registered) {
		s->registered = true;
		memcpy(s->snapshot_dir, c->snapshot_dir,
		       sizeof(s->snapshot_dir));
	} else if ((e = register_clone(s, err, errlen)) != POOL_OK) {
		free(s);
		return e;
	}
	sandbox_teardown(d, c, same);
	int ret = restore_on_restorer(s);
	pthread_mutex_lock(&d->lock);
	if (ret == 0) {
		adopt(c, s);
		if (!c->unleased)
			sandbox_watch(d, c);
	} else {
		/* The index stays @c's, for a rollback that works. */
		s->net_index_held = false;
		c->registered = false;
		c->stopped = true;
		snprintf(c->stop_reason, sizeof(c->stop_reason),
			 "%s from snapshot %s failed (the daemon's log says "
			 "why)",
			 what, s->snapshot_id);
	}
	pthread_mutex_unlock(&d->lock);
	if (ret < 0) {
		snprintf(err, errlen, "sandbox %s: %s", c->id, c->stop_reason);
		log_write(LOG_LEVEL_ERROR, c->id, "%s", c->stop_reason);
		sandbox_destroy(d, s);
		return POOL_FAILED;
	}
	free(s);
	return POOL_OK;
}

enum pool_error sandbox_rollback(struct sandbox *c, const char *snapshot_id,
				 char *err, size_t errlen)
{
	struct daemon *d = c->pool->d;
	struct snapshot_record snap;
	struct pool *pl;
	enum pool_error e =
		find_snapshot(d, snapshot_id, &snap, &pl, err, errlen);

	if (e == POOL_OK && pl != c->pool) {
		snprintf(err, errlen,
			 "snapshot %s is of template %s, sandbox %s of %s: a "
			 "rollback stays in its template",
			 snapshot_id, pl->t->name, c->id, c->pool->t->name);
		e = POOL_BAD_REQUEST;
	}
	if (e == POOL_OK)
		e = op_begin(c, SANDBOX_REPLACING, "rolled back",
			     NEEDS_NOT_BUSY, err, errlen);
	if (e != POOL_OK)
		return e;
	e = drain(c, err, errlen);
	if (e == POOL_OK)
		e = replace_vm(c, snapshot_id, "rollback", err, errlen);
	if (e == POOL_OK) {
		pthread_mutex_lock(&d->lock);
		c->pool->rollbacks++;
		pthread_mutex_unlock(&d->lock);
		log_write(LOG_LEVEL_INFO, c->id,
			  "rolled back to snapshot %s in %.1f ms", snapshot_id,
			  c->restore_ms);
	}
	op_end(c);
	return e;
}

enum pool_error sandbox_pause(struct sandbox *c, struct checkpoint_result *ck,
			      char *err, size_t errlen)
{
	struct daemon *d = c->pool->d;
	enum pool_error e = op_begin(c, SANDBOX_REPLACING, "paused",
				     NEEDS_RUNNING, err, errlen);

	if (e != POOL_OK)
		return e;
	e = drain(c, err, errlen);
	if (e == POOL_OK)
		e = write_checkpoint(c, ck, err, errlen);
	if (e == POOL_OK) {
		/* Its checkpoint stays registered: pinned while paused. */
		sandbox_teardown(d, c, true);
		pthread_mutex_lock(&d->lock);
		c->paused = true;
		c->pool->pauses++;
		pthread_mutex_unlock(&d->lock);
		log_write(LOG_LEVEL_INFO, c->id, "paused at checkpoint %s",
			  ck->snapshot);
	} else
		notice_death(c);
	op_end(c);
	return e;
}

enum pool_error sandbox_resume(struct sandbox *c, char *err, size_t errlen)
{
	struct daemon *d = c->pool->d;
	enum pool_error e = op_begin(c, SANDBOX_REPLACING, "resumed",
				     NEEDS_PAUSED, err, errlen);

	if (e != POOL_OK)
		return e;
	e = replace_vm(c, NULL, "resume", err, errlen);
	if (e == POOL_OK) {
		pthread_mutex_lock(&d->lock);
		c->pool->resumes++;
		pthread_mutex_unlock(&d->lock);
		log_write(LOG_LEVEL_INFO, c->id,
			  "resumed from checkpoint %s in %.1f ms",
			  c->snapshot_id, c->restore_ms);
	}
	op_end(c);
	return e;
}

/* ---- the snapshots ---- */

/* The pool whose base snapshot @id is, or NULL. */
static const struct pool *pool_of_base(const struct daemon *d, const char *id)
{
	for (size_t i = 0; i < d->nr_pools; i++)
		if (!strcmp(d->pools[i].snapshot_id, id))
			return &d->pools[i];
	return NULL;
}

enum pool_error snapshots_list(struct daemon *d, const char *id,
			       struct snapshot_info **out, size_t *n, char *err,
			       size_t errlen)
{
	struct snapshot_record *recs = NULL;
	uint32_t *clones = NULL;
	struct catalog cat;
	size_t count = 0, kept = 0;
	int ret;

	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&d->catalog_lock);
	ret = open_catalog(d, &cat, err, errlen);
	if (ret == 0) {
		ret = catalog_list_snapshots(&cat, &recs, &clones, &count, err,
					     errlen);
		catalog_close(&cat);
	}
	pthread_mutex_unlock(&d->catalog_lock);
	if (ret < 0)
		return POOL_FAILED;
	struct snapshot_info *list = calloc(count ? count : 1, sizeof(*list));
	if (!list) {
		free(recs);
		free(clones);
		snprintf(err, errlen, "out of memory");
		return POOL_FAILED;
	}
	for (size_t i = 0; i < count; i++) {
		const struct pool *pl =
			pool_of_template(d, recs[i].template_id);

		if (id && strcmp(recs[i].id, id))
			continue;
		list[kept++] = (struct snapshot_info){
			.rec = recs[i],
			.live_users = clones[i],
			.template = pl ? pl->t->name : NULL,
			.base = pool_of_base(d, recs[i].id) != NULL,
		};
	}
	free(recs);
	free(clones);
	if (id && !kept) {
		free(list);
		snprintf(err, errlen, "no snapshot \"%s\"", id);
		return POOL_NOT_FOUND;
	}
	*out = list;
	*n = kept;
	return POOL_OK;
}

enum pool_error snapshot_remove(struct daemon *d, const char *id, char *err,
				size_t errlen)
{
	const struct pool *base = pool_of_base(d, id);
	struct snapshot_record snap;
	struct catalog cat;
	char why[PATH_MAX + 64];
	int ret;

	if (base) {
		snprintf(err, errlen,
			 "snapshot %s is template %s's base, which this daemon "
			 "restores its pool from",
			 id, base->t->name);
		return POOL_CONFLICT;
	}
	pthread_mutex_lock(&d->catalog_lock);
	ret = open_catalog(d, &cat, err, errlen);
	if (ret == 0) {
		ret = catalog_get_snapshot(&cat, id, &snap, err, errlen);
		if (ret == 0)
			ret = catalog_remove_snapshot(&cat, id, err, errlen);
		catalog_close(&cat);
	}
	pthread_mutex_unlock(&d->catalog_lock);
	if (ret < 0)
		return catalog_error(ret);
	if (snapshot_store_remove(snap.dir, why, sizeof(why)) < 0)
		log_warning("snapshot %s removed from the catalog, but: %s", id,
			    why);
	log_info("snapshot %s removed", id);
	return POOL_OK;
}

void snapshots_collect(struct daemon *d)
{
	char snapshots[PATH_MAX + 16], err[PATH_MAX + 64];
	struct catalog cat;

	snprintf(snapshots, sizeof(snapshots), "%s/snapshots", d->state_dir);
	pthread_mutex_lock(&d->catalog_lock);
	if (open_catalog(d, &cat, err, sizeof(err)) == 0) {
		snapshot_store_collect(snapshots, &cat);
		catalog_close(&cat);
	} else {
		log_warning("%s", err);
	}
	pthread_mutex_unlock(&d->catalog_lock);
}
