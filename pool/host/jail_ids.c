// SPDX-License-Identifier: Apache-2.0
/*
 * jail_ids.c - see jail_ids.h.  Claims start where the last one of this process
 * left off, so a freed id is not handed out again at once and a busy range
 * costs one lock attempt per claim, not a scan from its start.
 */
#include "pool/host/jail_ids.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool/host/paths.h"

static _Atomic uint32_t next_offset;

static int parse_id(const char *s, char **end, uint32_t *out)
{
	unsigned long long v;

	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, end, 10);
	if (errno || v < 1 || v >= UINT32_MAX)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int jail_ids_parse(const char *text, struct jail_ids *ids, char *err,
		   size_t errlen)
{
	char *end;

	if (parse_id(text, &end, &ids->first) < 0 || *end != '-' ||
	    parse_id(end + 1, &end, &ids->last) < 0 || *end ||
	    ids->last < ids->first) {
		snprintf(err, errlen,
			 "jail ids '%s': want FIRST-LAST, two ids from 1 to "
			 "%u with FIRST <= LAST (default " JAIL_IDS_DEFAULT ")",
			 text, UINT32_MAX - 1);
		return -EINVAL;
	}
	return 0;
}

int jail_ids_from_env(struct jail_ids *ids, char *err, size_t errlen)
{
	const char *env = getenv(JAIL_IDS_ENV);
	int ret =
		jail_ids_parse(env ? env : JAIL_IDS_DEFAULT, ids, err, errlen);

	if (ret < 0 && env) {
		size_t n = strlen(err);

		snprintf(err + n, errlen - n, " (from $" JAIL_IDS_ENV ")");
	}
	return ret;
}

static int open_lock_file(char *err, size_t errlen)
{
	char dir[] = JAIL_IDS_LOCK_FILE;
	int fd;

	*strrchr(dir, '/') = '\0';
	fd = thaw_make_dirs(dir, err, errlen);
	if (fd < 0)
		return fd;
	fd = open(JAIL_IDS_LOCK_FILE, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		int e = errno;

		snprintf(err, errlen, "%s: %s", JAIL_IDS_LOCK_FILE,
			 strerror(e));
		return -e;
	}
	return fd;
}

static bool is_netns(const char *path)
{
	struct statfs fs;

	return statfs(path, &fs) == 0 && fs.f_type == NSFS_MAGIC;
}

/* Mounts a new, empty network namespace on JAIL_NETNS_FILE. */
static int make_empty_netns(char *err, size_t errlen)
{
	int fd = open(JAIL_NETNS_FILE, O_RDONLY | O_CREAT | O_CLOEXEC, 0444);
	int status;
	pid_t pid;

	if (fd < 0) {
		status = errno;
		snprintf(err, errlen, "%s: %s", JAIL_NETNS_FILE,
			 strerror(status));
		return -status;
	}
	close(fd);
	/* A child's: ours stays the host's. */
	pid = fork();
	if (pid == 0) {
		if (unshare(CLONE_NEWNET) < 0 ||
		    mount("/proc/self/ns/net", JAIL_NETNS_FILE, NULL, MS_BIND,
			  NULL) < 0)
			_exit(errno);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid) {
		status = errno;
		snprintf(err, errlen, "making %s: %s", JAIL_NETNS_FILE,
			 strerror(status));
		return -status;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		int e = WIFEXITED(status) ? WEXITSTATUS(status) : EINTR;

		snprintf(err, errlen, "making %s: %s", JAIL_NETNS_FILE,
			 strerror(e));
		return -e;
	}
	return 0;
}

int jail_empty_netns(char *err, size_t errlen)
{
	int lock, ret = 0;

	if (is_netns(JAIL_NETNS_FILE))
		return 0;
	/* flock, not the ids' byte locks: the two kinds never meet. */
	lock = open_lock_file(err, errlen);
	if (lock < 0)
		return lock;
	if (flock(lock, LOCK_EX) < 0) {
		ret = -errno;
		snprintf(err, errlen, "%s: flock: %s", JAIL_IDS_LOCK_FILE,
			 strerror(-ret));
	} else if (!is_netns(JAIL_NETNS_FILE)) {
		ret = make_empty_netns(err, errlen);
	}
	close(lock);
	return ret;
}

int jail_id_claim(const struct jail_ids *ids, struct jail_id *out, char *err,
		  size_t errlen)
{
	struct jail_ids from_env;
	uint64_t count, start;
	int ret;

	out->lock_fd = -1;
	if (!ids) {
		ret = jail_ids_from_env(&from_env, err, errlen);
		if (ret < 0)
			return ret;
		ids = &from_env;
	}
	count = (uint64_t)ids->last - ids->first + 1;
	start = atomic_fetch_add(&next_offset, 1);
	for (uint64_t i = 0; i < count; i++) {
		uint32_t id = ids->first + (uint32_t)((start + i) % count);
		struct flock lock = {
			.l_type = F_WRLCK,
			.l_whence = SEEK_SET,
			.l_start = id,
			.l_len = 1,
		};
		/* One open file description per id: its lock is its own. */
		int fd = open_lock_file(err, errlen);

		if (fd < 0)
			return fd;
		if (fcntl(fd, F_OFD_SETLK, &lock) == 0) {
			atomic_store(&next_offset,
				     (uint32_t)((start + i + 1) % count));
			out->id = id;
			out->lock_fd = fd;
			return 0;
		}
		ret = errno;
		close(fd);
		if (ret != EAGAIN && ret != EACCES) {
			snprintf(err, errlen, "%s: locking id %u: %s",
				 JAIL_IDS_LOCK_FILE, id, strerror(ret));
			return -ret;
		}
	}
	snprintf(err, errlen,
		 "every jail id of %u-%u is taken: %llu VMMs run (a larger "
		 "range: jail_ids in the daemon's config, or $" JAIL_IDS_ENV
		 ")",
		 ids->first, ids->last, (unsigned long long)count);
	return -EAGAIN;
}

void jail_id_release(struct jail_id *id)
{
	if (id->lock_fd >= 0)
		close(id->lock_fd);
	id->lock_fd = -1;
}

/* One entry of a reclaimed directory: kept and made ours, or removed. */
static int reclaim_entry(int dfd, const char *name)
{
	struct stat st;
	int fd, ret = 0;

	if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_nlink != 1) {
		if (unlinkat(dfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0))
			return -errno;
		return 0;
	}
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* Guest memory and state: the owner's alone. */
	if (fchown(fd, getuid(), getgid()) < 0 || fchmod(fd, 0600) < 0)
		ret = -errno;
	close(fd);
	return ret;
}

int jail_reclaim(const char *dir, char *err, size_t errlen)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
	struct dirent *e;
	DIR *d;
	int ret = 0;

	if (dfd < 0 || fchown(dfd, getuid(), getgid()) < 0 ||
	    fchmod(dfd, 0700) < 0 || !(d = fdopendir(dfd))) {
		ret = -errno;
		snprintf(err, errlen, "taking back %s: %s", dir,
			 strerror(-ret));
		if (dfd >= 0)
			close(dfd);
		return ret;
	}
	while ((e = readdir(d))) {
		int r;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		r = reclaim_entry(dfd, e->d_name);
		if (r < 0 && !ret) {
			ret = r;
			snprintf(err, errlen, "taking back %s/%s: %s", dir,
				 e->d_name, strerror(-ret));
		}
	}
	closedir(d);
	return ret;
}
