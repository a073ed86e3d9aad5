// SPDX-License-Identifier: Apache-2.0
/*
 * watch.c - WATCH: a directory's changes streamed to the host (envd's
 * WatchDir and its watchers), through inotify.
 *
 * Each WATCH has an inotify instance of its own in the epoll set, with one
 * inotify watch on the directory and, RECURSIVE, on every directory below
 * it (added as they appear, dropped as they go), each remembered with its
 * path relative to the watched one.  Every inotify event becomes one
 * FS_EVENT frame {PATH relative, EVENT} of the WATCH's request, the types
 * fsnotify (envd) gives: IN_CREATE and IN_MOVED_TO are CREATE, IN_MODIFY
 * WRITE, IN_DELETE REMOVE, IN_MOVED_FROM RENAME, IN_ATTRIB CHMOD.
 *
 * Bounded: at most MAX_WATCHES watches per connection (EMFILE) and
 * MAX_DIRS directories per watch (ENOSPC when the tree is larger at the
 * start; a directory created later past the cap is reported as an OVERFLOW
 * event naming it, its contents unwatched).  Events wait in the kernel's
 * inotify queue (fs.inotify.max_queued_events) while the connection's
 * output is over its limit (fswatch_pause, like an exec's pipes); what
 * the kernel then drops it reports as IN_Q_OVERFLOW, sent on as OVERFLOW
 * with an empty PATH.  So nothing is lost without the host being told.
 *
 * A watch ends with END when the host KILLs it (exec.c hands a KILL whose
 * TARGET is no exec to fswatch_stop) or the watched directory itself goes
 * away, and silently with its connection.  A stopped watch is marked dead
 * and freed by fswatch_sweep after the event batch (agent.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"

#define MAX_WATCHES 16
#define MAX_DIRS 8192
#define EVENT_MASK                                                         \
	(IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | \
	 IN_ATTRIB | IN_ONLYDIR | IN_DONT_FOLLOW)
/* inotify reads per epoll event: one busy tree cannot starve the rest. */
#define READS_PER_EVENT 4
#define REL_MAX 4095

struct watched_dir {
	int wd;
	char *rel; /* "" for the watched directory itself */
};

struct fswatch {
	struct watch w; /* the inotify fd */
	struct conn *conn;
	uint32_t req;
	bool recursive;
	bool dead;
	int root_wd;
	struct watched_dir *dirs;
	size_t ndirs, cap;
	char *root;
	struct fswatch *next;
};

struct fswatch *fswatch_find(const struct conn *c, uint32_t req)
{
	for (struct fswatch *f = c->fswatches; f; f = f->next) {
		if (!f->dead && f->req == req)
			return f;
	}
	return NULL;
}

static struct watched_dir *dir_of(struct fswatch *f, int wd)
{
	for (size_t i = 0; i < f->ndirs; i++) {
		if (f->dirs[i].wd == wd)
			return &f->dirs[i];
	}
	return NULL;
}

static void send_event(struct fswatch *f, const char *rel, uint8_t type)
{
	struct thaw_writer w;

	conn_begin(f->conn, &w, 2 * THAW_TLV_HEADER + 1 + strlen(rel), f->req,
		   THAW_FS_EVENT, 0);
	thaw_put_str(&w, THAW_T_PATH, rel);
	thaw_put_u8(&w, THAW_T_EVENT, type);
	conn_commit(f->conn, &w);
}

/*
 * Adds the watch of root/@rel.  0; 1 when it was watched already (under
 * another name: a bind mount, which must not be walked into again);
 * -ENOSPC past MAX_DIRS, or -errno.
 */
static int add_dir(struct fswatch *f, const char *rel)
{
	char path[PATH_MAX];
	struct watched_dir *d;
	int wd;

	if (f->ndirs == MAX_DIRS)
		return -ENOSPC;
	if (snprintf(path, sizeof(path), "%s%s%s", f->root, rel[0] ? "/" : "",
		     rel) >= (int)sizeof(path))
		return -ENAMETOOLONG;
	wd = inotify_add_watch(f->w.fd, path, EVENT_MASK);
	if (wd < 0)
		return -errno;
	d = dir_of(f, wd);
	if (d)
		return 1;
	if (f->ndirs == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 16;
		void *p = realloc(f->dirs, cap * sizeof(*f->dirs));

		if (!p)
			return -ENOMEM;
		f->dirs = p;
		f->cap = cap;
	}
	d = &f->dirs[f->ndirs];
	d->wd = wd;
	d->rel = strdup(rel);
	if (!d->rel) {
		inotify_rm_watch(f->w.fd, wd);
		return -ENOMEM;
	}
	f->ndirs++;
	return 0;
}

/*
 * Watches root/@rel and every directory below it.  A directory gone
 * meanwhile is skipped; other failures are returned, with @rel then
 * naming where (@rel has room for REL_MAX bytes).
 */
static int add_tree(struct fswatch *f, char *rel)
{
	size_t len = strlen(rel);
	char path[PATH_MAX];
	struct dirent *de;
	int ret = add_dir(f, rel);
	DIR *d;

	if (ret == 1 || ret == -ENOENT || ret == -ENOTDIR)
		return 0;
	if (ret < 0 || !f->recursive)
		return ret;
	snprintf(path, sizeof(path), "%s%s%s", f->root, len ? "/" : "", rel);
	d = opendir(path);
	if (!d)
		return errno == ENOENT || errno == ENOTDIR ? 0 : -errno;
	while (!ret && (de = readdir(d))) {
		/* DT_UNKNOWN: add_dir's IN_ONLYDIR tells. */
		if ((de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) ||
		    !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (len + 1 + strlen(de->d_name) > REL_MAX) {
			ret = -ENAMETOOLONG;
			break;
		}
		sprintf(rel + len, "%s%s", len ? "/" : "", de->d_name);
		ret = add_tree(f, rel);
		if (!ret)
			rel[len] = '\0';
	}
	closedir(d);
	return ret;
}

/* Forgets @rel and what is below it: it moved away or is gone. */
static void drop_tree(struct fswatch *f, const char *rel)
{
	size_t len = strlen(rel);

	for (size_t i = 0; i < f->ndirs;) {
		struct watched_dir *d = &f->dirs[i];

		if (strncmp(d->rel, rel, len) != 0 ||
		    (d->rel[len] != '\0' && d->rel[len] != '/')) {
			i++;
			continue;
		}
		/* Its IN_IGNORED then finds no directory: nothing to do. */
		inotify_rm_watch(f->w.fd, d->wd);
		free(d->rel);
		*d = f->dirs[--f->ndirs];
	}
}

static void watch_end(struct fswatch *f, bool send_end)
{
	if (send_end && f->conn) {
		struct thaw_writer w;

		conn_begin(f->conn, &w, 0, f->req, THAW_END, 0);
		conn_commit(f->conn, &w);
	}
	watch_close(&f->w);
	f->dead = true;
}

void fswatch_start(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	char path[PATH_MAX], rel[REL_MAX + 1] = "";
	struct fswatch *f;
	struct thaw_writer w;
	int n = 0, ret;

	thaw_get_str(m, THAW_T_PATH, path, sizeof(path));
	if (fswatch_find(c, req) || exec_find(c, req)) {
		conn_error(c, req, EEXIST,
			   "WATCH: request id %u already names a running "
			   "request",
			   req);
		return;
	}
	for (f = c->fswatches; f; f = f->next)
		n += !f->dead;
	if (n >= MAX_WATCHES) {
		conn_error(c, req, EMFILE,
			   "WATCH %s: %d watches already on this connection",
			   path, MAX_WATCHES);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		conn_error(c, req, ENOMEM, "WATCH %s: out of memory", path);
		return;
	}
	/* Resolved: a symlink to the directory is watched as the directory,
	 * while every one below it is left alone (IN_DONT_FOLLOW). */
	f->root = realpath(path, NULL);
	if (!f->root) {
		conn_error(c, req, errno, "WATCH %s: %s", path,
			   strerror(errno));
		free(f);
		return;
	}
	f->conn = c;
	f->req = req;
	f->recursive = thaw_get_u8(m, THAW_T_RECURSIVE, 0);
	f->w = (struct watch){ .kind = W_INOTIFY, .obj = f };
	f->next = c->fswatches;
	c->fswatches = f;
	f->w.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	ret = f->w.fd < 0 ? -errno : add_tree(f, rel);
	/* add_tree skips what is not a directory, but the root must be one. */
	if (!ret && !f->ndirs)
		ret = -ENOTDIR;
	if (!ret)
		f->root_wd = f->dirs[0].wd;
	if (!ret && !c->over)
		ret = watch_set(&f->w, EPOLLIN);
	if (ret == -ENOSPC && f->ndirs == MAX_DIRS) {
		conn_error(c, req, ENOSPC,
			   "WATCH %s: more than %d directories to watch", path,
			   MAX_DIRS);
	} else if (ret) {
		conn_error(c, req, -ret, "WATCH %s%s%s: %s", path,
			   rel[0] ? "/" : "", rel, strerror(-ret));
	}
	if (ret) {
		watch_end(f, false);
		return;
	}
	conn_begin(c, &w, 0, req, THAW_WATCHING, 0);
	conn_commit(c, &w);
}

static uint8_t event_type(uint32_t mask)
{
	if (mask & (IN_CREATE | IN_MOVED_TO))
		return THAW_EV_CREATE;
	if (mask & IN_MODIFY)
		return THAW_EV_WRITE;
	if (mask & IN_DELETE)
		return THAW_EV_REMOVE;
	if (mask & IN_MOVED_FROM)
		return THAW_EV_RENAME;
	if (mask & IN_ATTRIB)
		return THAW_EV_CHMOD;
	return 0;
}

static void handle(struct fswatch *f, const struct inotify_event *ev)
{
	struct watched_dir *d = dir_of(f, ev->wd);
	char rel[REL_MAX + 1];
	uint8_t type = event_type(ev->mask);

	if (ev->mask & IN_Q_OVERFLOW) {
		send_event(f, "", THAW_EV_OVERFLOW);
		return;
	}
	if ((ev->mask & IN_IGNORED) && ev->wd == f->root_wd) {
		watch_end(f, true);
		return;
	}
	if (!d || !type)
		return;
	if (snprintf(rel, sizeof(rel), "%s%s%s", d->rel,
		     d->rel[0] && ev->len ? "/" : "",
		     ev->len ? ev->name : "") >= (int)sizeof(rel)) {
		/* Deeper than a path can name: say that events were lost. */
		send_event(f, d->rel, THAW_EV_OVERFLOW);
		return;
	}
	send_event(f, rel, type);
	if (!(ev->mask & IN_ISDIR) || !f->recursive)
		return;
	if (ev->mask & (IN_MOVED_FROM | IN_DELETE))
		drop_tree(f, rel);
	/* Its contents may predate the watch: they are not reported. */
	else if ((ev->mask & (IN_CREATE | IN_MOVED_TO)) && add_tree(f, rel) < 0)
		send_event(f, rel, THAW_EV_OVERFLOW);
}

void fswatch_event(struct watch *w)
{
	struct fswatch *f = w->obj;
	/* Aligned for struct inotify_event; room for the longest name. */
	char buf[16 * (sizeof(struct inotify_event) + NAME_MAX + 1)]
		__attribute__((aligned(__alignof__(struct inotify_event))));

	for (int i = 0; i < READS_PER_EVENT && !f->dead && !f->conn->over &&
			!f->conn->dead;
	     i++) {
		ssize_t n = read(f->w.fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		for (ssize_t off = 0; off < n && !f->dead;) {
			const struct inotify_event *ev =
				(const struct inotify_event *)(buf + off);

			handle(f, ev);
			off += (ssize_t)(sizeof(*ev) + ev->len);
		}
		f->conn->over = conn_queued(f->conn) > AGENT_OUTQ_LIMIT;
	}
}

bool fswatch_stop(struct conn *c, uint32_t req)
{
	struct fswatch *f = fswatch_find(c, req);

	if (!f)
		return false;
	watch_end(f, true);
	return true;
}

void fswatch_pause(struct conn *c, bool paused)
{
	for (struct fswatch *f = c->fswatches; f; f = f->next) {
		if (f->dead || f->w.fd < 0 || f->w.registered == !paused)
			continue;
		if (paused) {
			epoll_ctl(agent.epfd, EPOLL_CTL_DEL, f->w.fd, NULL);
			f->w.registered = false;
		} else if (watch_set(&f->w, EPOLLIN) < 0) {
			send_event(f, "", THAW_EV_OVERFLOW);
		}
	}
}

static void fswatch_free(struct fswatch *f)
{
	watch_close(&f->w);
	for (size_t i = 0; i < f->ndirs; i++)
		free(f->dirs[i].rel);
	free(f->dirs);
	free(f->root);
	free(f);
}

void fswatch_sweep(struct conn *c)
{
	struct fswatch **pf = &c->fswatches;

	while (*pf) {
		struct fswatch *f = *pf;

		if (f->dead) {
			*pf = f->next;
			fswatch_free(f);
		} else {
			pf = &f->next;
		}
	}
}

void fswatch_release(struct conn *c)
{
	while (c->fswatches) {
		struct fswatch *f = c->fswatches;

		c->fswatches = f->next;
		fswatch_free(f);
	}
}
