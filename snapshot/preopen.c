// SPDX-License-Identifier: Apache-2.0
/*
 * preopen.c - see preopen.h.
 */
#include "preopen.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errbuf.h"

static const char *const snapshot_files[] = {
	"state.bin",
	"memory.img",
	"pages.xxh3",
	"workingset.bin",
};

#define NR_FILES (sizeof(snapshot_files) / sizeof(snapshot_files[0]))

static struct {
	char path[PATH_MAX];
	int fd; /* -1: taken, or never opened */
} opened[NR_FILES];

void snapshot_files_forget(void)
{
	for (size_t i = 0; i < NR_FILES; i++) {
		if (opened[i].path[0] && opened[i].fd >= 0)
			close(opened[i].fd);
		opened[i].path[0] = '\0';
		opened[i].fd = -1;
	}
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

int snapshot_files_preopen(const char *dir, char *err, size_t errlen)
{
	snapshot_files_forget();
	for (size_t i = 0; i < NR_FILES; i++) {
		char *path = opened[i].path;
		int fd;

		if ((size_t)snprintf(path, PATH_MAX, "%s/%s", dir,
				     snapshot_files[i]) >= PATH_MAX) {
			errbuf_set(err, errlen, "snapshot %s: path too long",
				   dir);
			snapshot_files_forget();
			return -ENAMETOOLONG;
		}
		fd = open_regular(path);
		/* Its reader says so, in its turn (state.bin's first). */
		if (fd == -ENOENT) {
			path[0] = '\0';
			continue;
		}
		if (fd < 0) {
			errbuf_set(err, errlen, "snapshot %s: %s", path,
				   fd == -EINVAL ? "not a regular file"
						 : strerror(-fd));
			snapshot_files_forget();
			return fd;
		}
		opened[i].fd = fd;
	}
	return 0;
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
