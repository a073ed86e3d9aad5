/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cgroup.h - one cgroup per sandbox, below a group of the daemon's own,
 * below one parent cgroup that daemons share (default "thaw"), with cpu,
 * memory and pids limits.
 *
 * The parent is directly below the hierarchy's root (/sys/fs/cgroup/thaw on
 * v2).  Each daemon, that is each state directory (one daemon per state
 * directory, by its lock), has a group of its own below it,
 * "state-<FNV-1a 64 of the state directory's real path, 16 hex digits>",
 * and puts its sandboxes only there: cleaning up after a dead daemon of
 * one state directory (cgroup_reap_stale()) can never kill a live daemon's
 * sandboxes of another.
 *
 * cgroup v2 when /sys/fs/cgroup is a cgroup2 mount with the controllers;
 * otherwise v1, where each controller has its own hierarchy (found in
 * /proc/self/mountinfo) and a sandbox is one directory in each.  A
 * controller that is missing is found once by cgroup_init(), which says why
 * in the root for the caller; cgroup_require() is how a caller refuses to
 * go on without one (the daemon does for memory and pids: limits that do
 * not apply are no limits).
 *
 * A sandbox's VMM enters its cgroup in the forked child, before exec
 * (cgroup_enter), so not one instruction of it runs outside.  cgroup_destroy()
 * kills whatever is inside, waits for it to be empty and removes the
 * directories; cgroup_reap_stale() does that to every cgroup of the
 * daemon's group, which is how a restarted daemon cleans up after a dead
 * one.
 *
 * Errors: 0 or a negative errno, after one message naming the file and value
 * in @err.
 */
#ifndef THAW_POOL_CGROUP_H
#define THAW_POOL_CGROUP_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum cgroup_controller { CGROUP_CPU, CGROUP_MEMORY, CGROUP_PIDS, CGROUP_NR };

/* The daemon's group: where each controller's sandboxes go. */
struct cgroup_root {
	bool v2;
	/* v2: every entry is the same directory.  "" when the controller is
	 * not available. */
	char dir[CGROUP_NR][PATH_MAX];
	/* Why a controller is not available, naming the file looked at: one
	 * line; "" when it is available. */
	char missing[CGROUP_NR][PATH_MAX + 160];
};

/* The hash the daemon's group is named after (FNV-1a 64 of @owner); the
 * daemon's network names the same owner with it too. */
uint64_t cgroup_owner_hash(const char *owner);

/* "cpu", "memory", "pids": the kernel's name of controller @c. */
const char *cgroup_controller_name(enum cgroup_controller c);

/* Bits of cgroup_require()'s @required. */
#define CGROUP_BIT(c) (1u << (c))

struct cgroup_limits {
	uint64_t memory_max;  /* bytes; 0: no limit */
	uint32_t pids_max;    /* 0: no limit */
	uint32_t cpu_percent; /* of one CPU; 0: no limit */
};

struct cgroup {
	bool v2;
	char dir[CGROUP_NR][PATH_MAX]; /* "" where not available */
};

struct cgroup_stat {
	uint64_t memory_current, memory_peak; /* bytes */
	uint64_t oom_kills;		      /* processes the limit killed */
	uint32_t pids_current;
};

/*
 * Finds the hierarchy (v2, else v1) and creates @parent (one directory
 * name such as "thaw", directly below the hierarchy's root) and below it
 * the group of @owner (any string, the daemon's state directory: see the
 * top of this file) if they are not there yet, enabling the controllers
 * for their children on v2.  A controller it cannot offer has its reason
 * in root->missing; with none at all it still succeeds, and the cgroups
 * made from @root are then empty shells that create, enter and destroy do
 * nothing for.
 *
 * Names, @parent here and @name below: 1 to 63 of [A-Za-z0-9_.-], not "."
 * and without "..".
 */
int cgroup_init(struct cgroup_root *root, const char *parent, const char *owner,
		char *err, size_t errlen);

/*
 * 0 when each controller of @required (CGROUP_BIT()s) is available in
 * @root; else -ENOTSUP after a message naming the first one missing and
 * why.
 */
int cgroup_require(const struct cgroup_root *root, unsigned required, char *err,
		   size_t errlen);

/*
 * Removes the daemon's group, and the parent when no other daemon has a
 * group there; what is busy stays.  After cgroup_reap_stale().
 */
void cgroup_release(const struct cgroup_root *root);

/*
 * Creates child @name of @root with @limits; a limit of a missing
 * controller is skipped.  -EEXIST when @name is there already (the caller
 * reaps leftovers first); on any error nothing this call made remains.
 */
int cgroup_create(const struct cgroup_root *root, const char *name,
		  const struct cgroup_limits *limits, struct cgroup *cg,
		  char *err, size_t errlen);

/*
 * Moves the calling process (all its threads) into @cg.  Async-signal-safe
 * (open, write, close): call it in a forked child before exec.  0 or a
 * negative errno; no message, as there is nowhere safe to format one.
 */
int cgroup_enter(const struct cgroup *cg);

/*
 * Kills everything in @cg, waits (at most 5 s) until it is empty, removes
 * it.  Idempotent: a cgroup already gone is success, so a failed call
 * (-EBUSY: a process stuck in the kernel) can simply be repeated with the
 * same, untouched @cg.
 */
int cgroup_destroy(const struct cgroup *cg, char *err, size_t errlen);

/*
 * cgroup_destroy() for every child of @root (the daemon's group, never
 * another daemon's), in each v1 hierarchy; the number removed, or the
 * first error after trying them all.
 */
int cgroup_reap_stale(const struct cgroup_root *root, char *err, size_t errlen);

/*
 * Current usage; fields of a missing controller, and a peak or oom_kills
 * the kernel does not report, are 0.  A negative errno (-ENOENT: the
 * cgroup is gone) and no message: the daemon polls this.
 */
int cgroup_read_stat(const struct cgroup *cg, struct cgroup_stat *st);

#endif
