// SPDX-License-Identifier: Apache-2.0
/*
 * checkpoint.c - see checkpoint.h.
 */
#include "pool/host/checkpoint.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "snapshot/catalog.h"
#include "snapshot/memdiff.h"

static const char *const names[CHECKPOINT_FILES] = {
	"state.bin",
	MEMDIFF_FILE,
	"memory.img",
	"pages.xxh3",
};

/* Removes @dir/@name if it is there; 0 or -errno. */
static int remove_file(const char *dir, const char *name)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	return unlink(path) < 0 && errno != ENOENT ? -errno : 0;
}

/* Closes @fds and removes the first @n files, which we created. */
static void undo(const char *dir, int fds[CHECKPOINT_FILES], int n)
{
	for (int i = 0; i < CHECKPOINT_FILES; i++) {
		if (fds[i] >= 0)
			close(fds[i]);
		fds[i] = -1;
		if (i < n)
			remove_file(dir, names[i]);
	}
}

void checkpoint_files_discard(const char *dir, int fds[CHECKPOINT_FILES])
{
	undo(dir, fds, CHECKPOINT_FILES);
}

int checkpoint_files_create(const char *dir, int fds[CHECKPOINT_FILES],
			    char *err, size_t errlen)
{
	char path[PATH_MAX];

	for (int i = 0; i < CHECKPOINT_FILES; i++)
		fds[i] = -1;
	for (int i = 0; i < CHECKPOINT_FILES; i++) {
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir,
				     names[i]) >= sizeof(path)) {
			snprintf(err, errlen, "checkpoint %s: path too long",
				 dir);
			undo(dir, fds, i);
			return -ENAMETOOLONG;
		}
		/* Guest memory and state, secrets included: ours alone. */
		fds[i] =
			open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fds[i] < 0) {
			int e = errno;

			snprintf(err, errlen,
				 "checkpoint %s: cannot create: %s", path,
				 strerror(e));
			undo(dir, fds, i);
			return -e;
		}
	}
	return 0;
}

int checkpoint_files_finish(const char *dir, int fds[CHECKPOINT_FILES],
			    bool full, char *err, size_t errlen)
{
	/* A full checkpoint wrote memory.img and pages.xxh3, a diff not. */
	const char *unused[] = { full ? MEMDIFF_FILE : "memory.img",
				 full ? NULL : "pages.xxh3" };
	int ret = 0;

	undo(dir, fds, 0);
	for (size_t i = 0; i < 2 && !ret; i++) {
		if (!unused[i])
			continue;
		ret = remove_file(dir, unused[i]);
		if (ret)
			snprintf(err, errlen,
				 "checkpoint %s/%s: cannot remove: %s", dir,
				 unused[i], strerror(-ret));
	}
	return ret;
}

int snapshot_link_parent(const char *dir, const char *parent_id, char *err,
			 size_t errlen)
{
	char link[PATH_MAX], target[CATALOG_ID_LEN + 4];
	int ret = catalog_check_id(parent_id, err, errlen);

	if (ret)
		return ret;
	snprintf(target, sizeof(target), "../%s", parent_id);
	if ((size_t)snprintf(link, sizeof(link), "%s/" MEMDIFF_PARENT_LINK,
			     dir) >= sizeof(link)) {
		snprintf(err, errlen, "snapshot %s: path too long", dir);
		return -ENAMETOOLONG;
	}
	if (symlink(target, link) < 0) {
		ret = -errno;
		snprintf(err, errlen, "snapshot %s: cannot link %s: %s", dir,
			 link, strerror(-ret));
	}
	return ret;
}
