// SPDX-License-Identifier: Apache-2.0
/*
 * snapshot_store.c - see snapshot_store.h.  A .tmp- directory's writer is
 * known by the pid in its name: one whose process is gone left garbage;
 * one whose process lives (another `thaw snapshot create`, a daemon
 * checkpointing) is left alone.
 */
#include "pool/host/snapshot_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "snapshot/memdiff.h"
#include "snapshot/state.h"

/* An orphan younger than this may be a writer between rename and commit. */
#define ORPHAN_GRACE_S 600

int snapshot_store_paths(const char *snapshots, const char *id, pid_t pid,
			 char *tmp, char *final, size_t len, char *err,
			 size_t errlen)
{
	int n = snprintf(tmp, len, "%s/" SNAPSHOT_TMP_PREFIX "%s-%d", snapshots,
			 id, (int)pid);

	snprintf(final, len, "%s/%s", snapshots, id);
	/* The catalog records the directory in a fixed-size field. */
	if (n < 0 || (size_t)n >= len || (size_t)n >= CATALOG_PATH_MAX) {
		snprintf(err, errlen, "%s: path too long", snapshots);
		return -ENAMETOOLONG;
	}
	return 0;
}

int snapshot_store_remove(const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX + 300];
	DIR *d = opendir(dir);
	struct dirent *e;

	/* Everything in it: a killed VMM may have left a temporary file, a
	 * checkpoint its parent link. */
	while (d && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	if (d)
		closedir(d);
	if (rmdir(dir) < 0 && errno != ENOENT) {
		int ret = -errno;

		snprintf(err, errlen, "cannot remove %s: %s", dir,
			 strerror(errno));
		return ret;
	}
	return 0;
}

/* ".tmp-<id>-<pid>": true when that writer process is gone. */
static bool writer_gone(const char *name)
{
	const char *dash = strrchr(name, '-');
	char *end;
	long pid = dash ? strtol(dash + 1, &end, 10) : 0;

	if (!dash || *end || pid <= 0)
		return true;
	return kill(pid, 0) < 0 && errno == ESRCH;
}

void snapshot_store_collect(const char *snapshots, struct catalog *c)
{
	DIR *d = opendir(snapshots);
	struct dirent *e;
	char path[PATH_MAX * 2];
	struct snapshot_record rec;
	struct stat st;

	if (!d)
		return;
	while ((e = readdir(d))) {
		bool tmp = !strncmp(e->d_name, SNAPSHOT_TMP_PREFIX,
				    strlen(SNAPSHOT_TMP_PREFIX));
		bool orphan;

		if (e->d_name[0] == '.' && !tmp)
			continue;
		snprintf(path, sizeof(path), "%s/%s", snapshots, e->d_name);
		if (tmp)
			orphan = writer_gone(e->d_name);
		else
			orphan = catalog_check_id(e->d_name, NULL, 0) == 0 &&
				 catalog_get_snapshot(c, e->d_name, &rec, NULL,
						      0) == -ENOENT &&
				 stat(path, &st) == 0 &&
				 time(NULL) - st.st_mtime > ORPHAN_GRACE_S;
		if (orphan)
			snapshot_store_remove(path, NULL, 0);
	}
	closedir(d);
}

int snapshot_store_sync_dir(const char *dir, char *err, size_t errlen)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int ret = fd < 0 || fsync(fd) < 0 ? -errno : 0;

	if (fd >= 0)
		close(fd);
	if (ret < 0)
		snprintf(err, errlen, "cannot sync %s: %s", dir,
			 strerror(-ret));
	return ret;
}

int snapshot_store_describe(const char *tmp, const char *final,
			    struct snapshot_record *s, char *err, size_t errlen)
{
	char path[PATH_MAX * 2 + 32];
	struct state_reader r;
	struct stat memory;
	int ret;

	snprintf(path, sizeof(path), "%s/state.bin", tmp);
	ret = state_reader_open(&r, path, err, errlen);
	if (ret < 0)
		return ret;
	s->record_version = CATALOG_RECORD_VERSION;
	s->format_version = r.header.format_version;
	s->nr_vcpus = r.header.nr_vcpus;
	s->mem_size = r.header.mem_size;
	s->cpu_signature = r.header.cpu_signature;
	s->memory_hash_root = r.header.memory_hash_root;
	s->state_size = sizeof(r.header) + r.body_size;
	state_reader_close(&r);
	/* A diff's memory, else a whole image. */
	snprintf(path, sizeof(path), "%s/" MEMDIFF_FILE, tmp);
	if (stat(path, &memory) < 0) {
		snprintf(path, sizeof(path), "%s/memory.img", tmp);
		if (stat(path, &memory) < 0) {
			ret = -errno;
			snprintf(err, errlen, "%s: %s", path, strerror(errno));
			return ret;
		}
	}
	s->memory_disk = (uint64_t)memory.st_blocks * 512;
	s->created_unix = time(NULL);
	snprintf(s->dir, sizeof(s->dir), "%s", final);
	return 0;
}
