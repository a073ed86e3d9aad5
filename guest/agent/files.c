// SPDX-License-Identifier: Apache-2.0
/*
 * files.c - the file requests: WRITE_FILE, READ_FILE, MKDIR, REMOVE,
 * RENAME (semantics in PROTOCOL.md; STAT and LIST are listing.c's).
 *
 * A write goes to a temporary file next to its target and is renamed over
 * it on the FINAL frame, so nobody in the guest ever sees half a file and
 * a failed or abandoned write leaves the old file alone.  Once a write has
 * failed, its remaining frames are swallowed up to FINAL, so the host gets
 * exactly one ERROR per failed write.
 *
 * A read is streamed: file_pump adds DATA frames only while the
 * connection's output queue is under its limit, so a large file costs
 * bounded memory and a pending read keeps EPOLLOUT armed (conn_update),
 * which is what calls file_pump again.  Reads of one connection take turns
 * chunk by chunk.  Everything else is one synchronous system call or walk.
 *
 * A file or directory made for a USER (users.c) is made by the agent, as
 * root, and then given to that user and its primary group, as envd does:
 * the user's own rights do not limit where the host may put it.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest/agent/agent.h"

#define READ_CHUNK (256u << 10)
/* Per pump call, so one huge read cannot hold up the event loop. */
#define PUMP_BUDGET (4u << 20)
#define MAX_OPEN_WRITES 64

struct wfile {
	uint32_t req;
	int fd; /* -1 once failed: frames are swallowed up to FINAL */
	mode_t mode;
	bool chown; /* to uid:gid, for a USER */
	uid_t uid;
	gid_t gid;
	char *path;
	char *tmp;
	struct wfile *next;
};

struct rfile {
	uint32_t req;
	int fd;
	uint64_t size;
	struct rfile *next;
};

static uint8_t chunk[READ_CHUNK];

static struct wfile **find_write(struct conn *c, uint32_t req)
{
	struct wfile **pw = &c->writes;

	while (*pw && (*pw)->req != req)
		pw = &(*pw)->next;
	return pw;
}

static void wfile_drop_tmp(struct wfile *w)
{
	if (w->fd >= 0) {
		close(w->fd);
		unlink(w->tmp);
		w->fd = -1;
	}
}

static void wfile_free(struct wfile **pw)
{
	struct wfile *w = *pw;

	*pw = w->next;
	wfile_drop_tmp(w);
	free(w->path);
	free(w->tmp);
	free(w);
}

/* Remembers a failed write so its later frames are swallowed. */
static void add_tombstone(struct conn *c, uint32_t req)
{
	struct wfile *w = calloc(1, sizeof(*w));

	if (!w)
		return;
	w->req = req;
	w->fd = -1;
	w->next = c->writes;
	c->writes = w;
}

static int open_tmp(struct wfile *w)
{
	const char *slash = strrchr(w->path, '/');
	int dirlen = slash ? (int)(slash - w->path) : 1;
	const char *dir = slash ? w->path : ".";

	if (slash == w->path)
		dirlen = 0;
	if (asprintf(&w->tmp, "%.*s/.thaw-write-XXXXXX", dirlen, dir) < 0) {
		w->tmp = NULL;
		return -ENOMEM;
	}
	w->fd = mkostemp(w->tmp, O_CLOEXEC);
	return w->fd < 0 ? -errno : 0;
}

static int count_open_writes(const struct conn *c)
{
	int n = 0;

	for (const struct wfile *w = c->writes; w; w = w->next)
		n += w->fd >= 0;
	return n;
}

/* The first frame of a write: validate and create the temporary file. */
static struct wfile *start_write(struct conn *c, uint32_t req, bool final,
				 const struct thaw_msg *m)
{
	const struct thaw_field *path = thaw_get(m, THAW_T_PATH);
	uint32_t mode = thaw_get_u32(m, THAW_T_MODE, 0644);
	char user[USER_NAME_MAX + 1] = "", err[256];
	struct user_id owner = { 0 };
	struct wfile *w;
	int ret;

	if (!path->count || !path->len) {
		conn_error(c, req, EINVAL,
			   "WRITE_FILE: field PATH missing or empty on the "
			   "first frame of request %u",
			   req);
		goto fail;
	}
	if (mode > 07777) {
		conn_error(c, req, EINVAL,
			   "WRITE_FILE: MODE 0%o has bits beyond 07777", mode);
		goto fail;
	}
	/* The schema bounds USER to fit. */
	if (thaw_get_str(m, THAW_T_USER, user, sizeof(user)) == 0 &&
	    user_resolve(user, &owner, err, sizeof(err)) < 0) {
		conn_error(c, req, EINVAL, "WRITE_FILE: %s", err);
		goto fail;
	}
	if (count_open_writes(c) >= MAX_OPEN_WRITES) {
		conn_error(c, req, EMFILE,
			   "WRITE_FILE: %d writes already open on this "
			   "connection",
			   MAX_OPEN_WRITES);
		goto fail;
	}
	w = calloc(1, sizeof(*w));
	if (!w || !(w->path = strndup((const char *)path->data, path->len))) {
		free(w);
		conn_error(c, req, ENOMEM, "WRITE_FILE: out of memory");
		goto fail;
	}
	w->req = req;
	w->mode = mode;
	w->chown = user[0];
	w->uid = owner.uid;
	w->gid = owner.gid;
	w->fd = -1;
	w->next = c->writes;
	c->writes = w;
	ret = open_tmp(w);
	if (ret < 0) {
		conn_error(c, req, -ret, "WRITE_FILE %s: create %s: %s",
			   w->path, w->tmp ? w->tmp : "temporary file",
			   strerror(-ret));
		if (final)
			wfile_free(&c->writes);
		return NULL;
	}
	return w;
fail:
	if (!final)
		add_tombstone(c, req);
	return NULL;
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);

		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int commit_write(struct wfile *w, const char **step)
{
	int fd = w->fd;

	w->fd = -1;
	*step = "chown";
	if (w->chown && fchown(fd, w->uid, w->gid) < 0)
		goto fail;
	*step = "chmod";
	/* Explicitly, so the umask does not change what the host asked; and
	 * after chown, which clears set-id bits. */
	if (fchmod(fd, w->mode) < 0)
		goto fail;
	*step = "close";
	if (close(fd) < 0) {
		fd = -1;
		goto fail;
	}
	fd = -1;
	*step = "rename";
	if (rename(w->tmp, w->path) < 0)
		goto fail;
	return 0;
fail:;
	int err = errno;

	if (fd >= 0)
		close(fd);
	unlink(w->tmp);
	return -err;
}

void file_write(struct conn *c, uint32_t req, uint16_t flags,
		const struct thaw_msg *m)
{
	const struct thaw_field *data = thaw_get(m, THAW_T_DATA);
	bool final = flags & THAW_FLAG_FINAL;
	struct wfile **pw = find_write(c, req);
	const char *step = "write";
	int ret;

	if (!*pw) {
		if (!start_write(c, req, final, m))
			return;
		pw = find_write(c, req);
	} else if ((*pw)->fd < 0) {
		if (final)
			wfile_free(pw);
		return;
	}
	ret = write_all((*pw)->fd, data->data, data->len);
	if (!ret && final)
		ret = commit_write(*pw, &step);
	if (ret) {
		conn_error(c, req, -ret, "WRITE_FILE %s: %s: %s", (*pw)->path,
			   step, strerror(-ret));
		wfile_drop_tmp(*pw);
	} else if (final) {
		conn_ok(c, req);
	}
	if (final)
		wfile_free(pw);
}

void file_write_abort(struct conn *c, uint32_t req, uint16_t flags)
{
	struct wfile **pw = find_write(c, req);
	bool final = flags & THAW_FLAG_FINAL;

	if (!*pw) {
		if (!final)
			add_tombstone(c, req);
		return;
	}
	wfile_drop_tmp(*pw);
	if (final)
		wfile_free(pw);
}

void file_read(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	struct rfile *r, **tail;
	char path[4096];
	struct stat st;
	int fd;

	thaw_get_str(m, THAW_T_PATH, path, sizeof(path));
	/* O_NONBLOCK: opening a FIFO must not hang the agent. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		conn_error(c, req, errno, "READ_FILE %s: %s", path,
			   strerror(errno));
		return;
	}
	if (fstat(fd, &st) < 0) {
		conn_error(c, req, errno, "READ_FILE %s: fstat: %s", path,
			   strerror(errno));
		close(fd);
		return;
	}
	if (!S_ISREG(st.st_mode)) {
		conn_error(c, req, S_ISDIR(st.st_mode) ? EISDIR : EINVAL,
			   "READ_FILE %s: not a regular file", path);
		close(fd);
		return;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		conn_error(c, req, ENOMEM, "READ_FILE %s: out of memory", path);
		close(fd);
		return;
	}
	r->req = req;
	r->fd = fd;
	for (tail = &c->reads; *tail; tail = &(*tail)->next)
		;
	*tail = r;
}

void file_pump(struct conn *c)
{
	size_t budget = PUMP_BUDGET;

	while (c->reads && !c->dead && budget &&
	       conn_queued(c) <= AGENT_OUTQ_LIMIT) {
		struct rfile *r = c->reads, **tail;
		struct thaw_writer w;
		ssize_t n;

		c->reads = r->next;
		r->next = NULL;
		do {
			n = read(r->fd, chunk, sizeof(chunk));
		} while (n < 0 && errno == EINTR);
		if (n < 0) {
			conn_error(c, r->req, errno, "READ_FILE: read: %s",
				   strerror(errno));
		} else if (n == 0) {
			conn_begin(c, &w, THAW_TLV_HEADER + 8, r->req, THAW_END,
				   0);
			thaw_put_u64(&w, THAW_T_SIZE, r->size);
			conn_commit(c, &w);
		} else {
			conn_begin(c, &w, THAW_TLV_HEADER + (size_t)n, r->req,
				   THAW_DATA, 0);
			thaw_put_bytes(&w, THAW_T_DATA, chunk, (size_t)n);
			conn_commit(c, &w);
			r->size += (uint64_t)n;
			budget -= (size_t)n < budget ? (size_t)n : budget;
			for (tail = &c->reads; *tail; tail = &(*tail)->next)
				;
			*tail = r;
			continue;
		}
		close(r->fd);
		free(r);
	}
}

static bool is_dir(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* mkdir @path, then chown it to @owner (NULL: leave it root's); EEXIST is
 * left to the caller. */
static int make_dir(const char *path, mode_t mode, const struct user_id *owner,
		    const char **step)
{
	*step = "mkdir";
	if (mkdir(path, mode) < 0)
		return -errno;
	*step = "chown";
	if (owner && chown(path, owner->uid, owner->gid) < 0)
		return -errno;
	return 0;
}

void file_mkdir(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	uint32_t mode = thaw_get_u32(m, THAW_T_MODE, 0755);
	bool parents = thaw_get_u8(m, THAW_T_PARENTS, 0);
	char path[4096], user[USER_NAME_MAX + 1] = "", err[256];
	struct user_id owner;
	const char *step;
	int ret;

	thaw_get_str(m, THAW_T_PATH, path, sizeof(path));
	if (mode > 07777) {
		conn_error(c, req, EINVAL,
			   "MKDIR: MODE 0%o has bits beyond 07777", mode);
		return;
	}
	/* The schema bounds USER to fit. */
	if (thaw_get_str(m, THAW_T_USER, user, sizeof(user)) == 0 &&
	    user_resolve(user, &owner, err, sizeof(err)) < 0) {
		conn_error(c, req, EINVAL, "MKDIR %s: %s", path, err);
		return;
	}
	if (parents) {
		/* Like mkdir -p: missing ancestors get 0755 (umask applies). */
		for (char *p = strchr(path + 1, '/'); p;
		     p = strchr(p + 1, '/')) {
			*p = '\0';
			ret = make_dir(path, 0755, user[0] ? &owner : NULL,
				       &step);
			if (ret < 0 &&
			    (ret != -EEXIST || strcmp(step, "mkdir"))) {
				conn_error(c, req, -ret, "MKDIR %s: %s: %s",
					   path, step, strerror(-ret));
				return;
			}
			*p = '/';
		}
	}
	ret = make_dir(path, (mode_t)mode, user[0] ? &owner : NULL, &step);
	if (ret == -EEXIST && !strcmp(step, "mkdir") && parents &&
	    is_dir(path)) {
		conn_ok(c, req);
		return;
	}
	if (ret < 0) {
		conn_error(c, req, -ret, "MKDIR %s: %s: %s", path, step,
			   strerror(-ret));
		return;
	}
	/* Explicitly: the umask must not change what the host asked, and
	 * chown clears set-id bits. */
	if (chmod(path, (mode_t)mode) < 0) {
		conn_error(c, req, errno, "MKDIR %s: chmod 0%o: %s", path, mode,
			   strerror(errno));
		return;
	}
	conn_ok(c, req);
}

void file_rename(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	char from[4096], to[4096];

	thaw_get_str(m, THAW_T_PATH, from, sizeof(from));
	thaw_get_str(m, THAW_T_NEW_PATH, to, sizeof(to));
	if (rename(from, to) < 0) {
		conn_error(c, req, errno, "RENAME %s to %s: %s", from, to,
			   strerror(errno));
		return;
	}
	conn_ok(c, req);
}

/* nftw has no context argument; the agent is single-threaded. */
static int rm_err;
static char rm_path[4096];

static int rm_one(const char *path, const struct stat *st, int flag,
		  struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) < 0) {
		rm_err = errno;
		snprintf(rm_path, sizeof(rm_path), "%s", path);
		return 1;
	}
	return 0;
}

void file_remove(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	bool recursive = thaw_get_u8(m, THAW_T_RECURSIVE, 0);
	char path[4096];
	struct stat st;

	thaw_get_str(m, THAW_T_PATH, path, sizeof(path));
	if (lstat(path, &st) < 0) {
		conn_error(c, req, errno, "REMOVE %s: %s", path,
			   strerror(errno));
		return;
	}
	if (S_ISDIR(st.st_mode) && recursive) {
		rm_err = 0;
		snprintf(rm_path, sizeof(rm_path), "%s", path);
		/* FTW_PHYS: remove symlinks, never what they point to. */
		if (nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS) != 0) {
			int err = rm_err ? rm_err : errno;

			conn_error(c, req, err, "REMOVE %s: %s", rm_path,
				   strerror(err));
			return;
		}
	} else if (remove(path) < 0) {
		conn_error(c, req, errno, "REMOVE %s: %s", path,
			   strerror(errno));
		return;
	}
	conn_ok(c, req);
}

void files_release(struct conn *c)
{
	while (c->writes)
		wfile_free(&c->writes);
	while (c->reads) {
		struct rfile *r = c->reads;

		c->reads = r->next;
		close(r->fd);
		free(r);
	}
}
