// SPDX-License-Identifier: Apache-2.0
/*
 * listing.c - STAT and LIST: what a path is, and what a directory holds
 * down to a depth (PROTOCOL.md).
 *
 * Both describe a file the same way (put_stat): type, permission bits,
 * size, mtime, owner and group by name (users.c; the id in decimal when
 * the guest has no name for it) and a symlink's target; symlinks are never
 * followed.  LIST walks depth first with one open directory per level
 * (openat with O_NOFOLLOW, so a symlink to a directory is an entry, not a
 * way out of the tree), a directory's entry coming before its contents,
 * and packs entries into ENTRIES frames of up to LIST_FRAME bytes.  The
 * walk is synchronous, so its answer is bounded: past
 * THAW_LIST_MAX_ENTRIES entries or LIST_MAX_BYTES of frames it stops with
 * ERROR E2BIG rather than queue without end.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "guest/agent/agent.h"

#define LIST_FRAME (64u << 10)
#define LIST_MAX_BYTES (32u << 20)
/* Relative paths and symlink targets: PATH_MAX without the NUL. */
#define PATH_LEN 4095

static uint8_t file_type(mode_t m)
{
	switch (m & S_IFMT) {
	case S_IFREG:
		return THAW_FT_REGULAR;
	case S_IFDIR:
		return THAW_FT_DIR;
	case S_IFLNK:
		return THAW_FT_SYMLINK;
	case S_IFCHR:
		return THAW_FT_CHAR;
	case S_IFBLK:
		return THAW_FT_BLOCK;
	case S_IFIFO:
		return THAW_FT_FIFO;
	case S_IFSOCK:
		return THAW_FT_SOCKET;
	}
	return THAW_FT_OTHER;
}

/* Most TLV bytes of put_stat's fields. */
#define STAT_FIELDS \
	(7 * THAW_TLV_HEADER + 1 + 4 + 8 + 8 + 2 * USER_NAME_MAX + PATH_LEN)

/* @name in @dirfd (AT_FDCWD: a path) as STAT_RESULT's or ENTRY's fields. */
static void put_stat(struct thaw_writer *w, int dirfd, const char *name,
		     const struct stat *st)
{
	int64_t ns =
		(int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec;
	char target[PATH_LEN + 1];
	ssize_t n;

	thaw_put_u8(w, THAW_T_FILE_TYPE, file_type(st->st_mode));
	thaw_put_u32(w, THAW_T_MODE, st->st_mode & 07777);
	thaw_put_u64(w, THAW_T_SIZE, (uint64_t)st->st_size);
	thaw_put_u64(w, THAW_T_MTIME_NS, (uint64_t)ns);
	thaw_put_str(w, THAW_T_OWNER, user_name(st->st_uid));
	thaw_put_str(w, THAW_T_GROUP, group_name(st->st_gid));
	if (!S_ISLNK(st->st_mode))
		return;
	/* Changed or gone since the lstat: no target then. */
	n = readlinkat(dirfd, name, target, sizeof(target));
	if (n > 0 && (size_t)n < sizeof(target)) {
		target[n] = '\0';
		thaw_put_str(w, THAW_T_SYMLINK_TARGET, target);
	}
}

void file_stat(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	struct thaw_writer w;
	char path[4096];
	struct stat st;

	thaw_get_str(m, THAW_T_PATH, path, sizeof(path));
	if (lstat(path, &st) < 0) {
		conn_error(c, req, errno, "STAT %s: %s", path, strerror(errno));
		return;
	}
	users_forget();
	conn_begin(c, &w, STAT_FIELDS, req, THAW_STAT_RESULT, 0);
	put_stat(&w, AT_FDCWD, path, &st);
	conn_commit(c, &w);
}

struct listing {
	struct conn *c;
	uint32_t req;
	struct thaw_writer w;
	bool open; /* w holds an ENTRIES frame not yet committed */
	uint64_t count;
	size_t bytes;
	char rel[PATH_LEN + 1]; /* the path being listed, from root */
};

/* Adds one entry; -E2BIG past the limits. */
static int put_entry(struct listing *l, int dirfd, const char *name,
		     const struct stat *st, size_t rel_len)
{
	size_t need =
		3 * THAW_TLV_HEADER + strlen(name) + rel_len + STAT_FIELDS;
	size_t mark;

	if (l->count == THAW_LIST_MAX_ENTRIES || l->bytes > LIST_MAX_BYTES)
		return -E2BIG;
	if (l->open && thaw_writer_room(&l->w) < need) {
		l->bytes += l->w.len;
		conn_commit(l->c, &l->w);
		l->open = false;
	}
	if (!l->open) {
		conn_begin(l->c, &l->w, LIST_FRAME, l->req, THAW_ENTRIES, 0);
		l->open = true;
	}
	mark = thaw_put_nested_begin(&l->w, THAW_T_ENTRY);
	thaw_put_str(&l->w, THAW_T_NAME, name);
	put_stat(&l->w, dirfd, name, st);
	thaw_put_str(&l->w, THAW_T_PATH, l->rel);
	thaw_put_nested_end(&l->w, mark);
	l->count++;
	return 0;
}

/*
 * Lists the open directory @dirfd (consumed), whose path from the root is
 * l->rel[0..@rel_len), @depth levels down.  Returns 0 or -errno with
 * l->rel naming where it failed.
 */
static int walk(struct listing *l, int dirfd, size_t rel_len, uint32_t depth)
{
	DIR *d = fdopendir(dirfd);
	struct dirent *de;
	int ret = 0;

	if (!d) {
		ret = -errno;
		close(dirfd);
		return ret;
	}
	while (!ret) {
		size_t len = rel_len;
		struct stat st;

		errno = 0;
		de = readdir(d);
		if (!de) {
			ret = -errno;
			break;
		}
		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		/* Gone since readdir: it is no longer in the directory. */
		if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue;
		len += (size_t)snprintf(l->rel + len, sizeof(l->rel) - len,
					"%s%s", len ? "/" : "", de->d_name);
		if (len >= sizeof(l->rel)) {
			ret = -ENAMETOOLONG;
			break;
		}
		ret = put_entry(l, dirfd, de->d_name, &st, len);
		if (ret || depth <= 1 || !S_ISDIR(st.st_mode))
			continue;
		int sub =
			openat(dirfd, de->d_name,
			       O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0)
			ret = errno == ENOENT ? 0 : -errno;
		else
			ret = walk(l, sub, len, depth - 1);
	}
	if (!ret)
		l->rel[rel_len] = '\0';
	closedir(d);
	return ret;
}

void file_list(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	uint32_t depth = thaw_get_u32(m, THAW_T_DEPTH, 1);
	struct listing l = { .c = c, .req = req };
	char path[4096];
	int fd, ret;

	thaw_get_str(m, THAW_T_PATH, path, sizeof(path));
	if (depth < 1 || depth > THAW_LIST_MAX_DEPTH) {
		conn_error(c, req, EINVAL, "LIST %s: DEPTH %u is not 1..%d",
			   path, depth, THAW_LIST_MAX_DEPTH);
		return;
	}
	fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0) {
		conn_error(c, req, errno, "LIST %s: %s", path, strerror(errno));
		return;
	}
	users_forget();
	ret = walk(&l, fd, 0, depth);
	if (l.open)
		conn_commit(c, &l.w);
	if (ret == -E2BIG) {
		conn_error(c, req, E2BIG,
			   "LIST %s: more than %u entries or %u MiB down to "
			   "depth %u",
			   path, THAW_LIST_MAX_ENTRIES, LIST_MAX_BYTES >> 20,
			   depth);
	} else if (ret) {
		conn_error(c, req, -ret, "LIST %s: %s%s%s", path, l.rel,
			   l.rel[0] ? ": " : "", strerror(-ret));
	} else {
		struct thaw_writer w;

		conn_begin(c, &w, THAW_TLV_HEADER + 8, req, THAW_END, 0);
		thaw_put_u64(&w, THAW_T_SIZE, l.count);
		conn_commit(c, &w);
	}
}
