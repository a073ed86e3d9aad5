// SPDX-License-Identifier: Apache-2.0
/*
 * preopen.c - see preopen.h.
 */
#include "snapshot/preopen.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "snapshot/memdiff.h"

/*
 * state.bin, a memory.diff per diff layer, then the base's memory.img,
 * pages.xxh3 and workingset.bin.
 */
#define NR_FILES (1 + MEMDIFF_MAX_DEPTH + 3)

static struct {
	char path[PATH_MAX];
	int fd; /* -1: taken, or never opened */
} opened[NR_FILES];
static size_t nr_opened;

void snapshot_files_forget(void)
{
	for (size_t i = 0; i < NR_FILES; i++) {
		if (opened[i].path[0] && opened[i].fd >= 0)
			close(opened[i].fd);
		opened[i].path[0] = '\0';
		opened[i].fd = -1;
	}
	nr_opened = 0;
}

/* @path, read-only, if it is a regular file: the fd, or a negative errno. */
static int open_regular(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	struct stat st;

	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return -EINVAL;
	}
	/* The readers' reads and io_uring's block as usual. */
	if (fcntl(fd, F_SETFL, 0) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/*
 * Opens @dir/@name and registers it: 1 when it was there, 0 when it does
 * not exist (its reader says so, in its turn: state.bin's first), or a
 * negative errno after a message.
 */
static int preopen_one(const char *dir, const char *name, char *err,
		       size_t errlen)
{
	char *path = opened[nr_opened].path;
	int fd;

	if ((size_t)snprintf(path, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX) {
		errbuf_set(err, errlen, "snapshot %s: path too long", dir);
		path[0] = '\0';
		return -ENAMETOOLONG;
	}
	fd = open_regular(path);
	if (fd == -ENOENT) {
		path[0] = '\0';
		return 0;
	}
	if (fd < 0) {
		errbuf_set(err, errlen, "snapshot %s: %s", path,
			   fd == -EINVAL ? "not a regular file"
					 : strerror(-fd));
		path[0] = '\0';
		return fd;
	}
	opened[nr_opened++].fd = fd;
	return 1;
}

/* Registers a chain's files (memdiff.h): @dir's, then its parents'. */
static int preopen_chain(const char *dir, char *err, size_t errlen)
{
	static const char *const base_files[] = { "memory.img", "pages.xxh3",
						  "workingset.bin" };
	char layer[PATH_MAX];
	int ret = preopen_one(dir, "state.bin", err, errlen);

	snprintf(layer, sizeof(layer), "%s", dir);
	for (int depth = 0; ret >= 0 && depth < MEMDIFF_MAX_DEPTH; depth++) {
		ret = preopen_one(layer, MEMDIFF_FILE, err, errlen);
		if (ret <= 0)
			break;
		if (strlen(layer) + sizeof("/" MEMDIFF_PARENT_LINK) >
		    sizeof(layer)) {
			errbuf_set(err, errlen, "snapshot %s: path too long",
				   dir);
			return -ENAMETOOLONG;
		}
		strcat(layer, "/" MEMDIFF_PARENT_LINK);
	}
	/* After MEMDIFF_MAX_DEPTH diffs, the reader refuses a ninth (one
	 * it cannot open in its jail leaves a base whose root is not the
	 * last layer's parent's). */
	for (size_t i = 0; ret >= 0 && i < 3; i++)
		ret = preopen_one(layer, base_files[i], err, errlen);
	return ret < 0 ? ret : 0;
}

int snapshot_files_preopen(const char *dir, char *err, size_t errlen)
{
	snapshot_files_forget();
	int ret = preopen_chain(dir, err, errlen);

	if (ret < 0)
		snapshot_files_forget();
	return ret;
}

int snapshot_file_open(const char *path, int flags)
{
	for (size_t i = 0; i < NR_FILES; i++)
		if (opened[i].path[0] && opened[i].fd >= 0 &&
		    !strcmp(opened[i].path, path)) {
			int fd = opened[i].fd;

			opened[i].fd = -1;
			return fd;
		}
	return open(path, flags);
}
