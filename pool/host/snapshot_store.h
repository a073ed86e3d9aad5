/* SPDX-License-Identifier: Apache-2.0 */
/*
 * snapshot_store.h - the snapshots' directories under the state directory,
 * as `thaw snapshot` and the daemon's checkpoints write them:
 *
 *	<state>/snapshots/<id>/			a snapshot the catalog has
 *	<state>/snapshots/.tmp-<id>-<pid>/	one being written by <pid>
 *
 * A writer fills the .tmp- directory, fsyncs it, renames it to <id>/,
 * fsyncs the snapshots directory, and only then adds the catalog's entry:
 * a writer killed at any point leaves nothing the catalog names half
 * written.  What it left (a .tmp- directory of a dead process, a
 * directory the catalog never heard of, older than a grace period that
 * covers a writer between rename and commit) is garbage that
 * snapshot_store_collect() removes: `thaw snapshot create` and rm, and the
 * daemon at its start, call it.
 *
 * Errors: 0 or a negative errno, with one message in the caller's @err.
 */
#ifndef THAW_POOL_HOST_SNAPSHOT_STORE_H
#define THAW_POOL_HOST_SNAPSHOT_STORE_H

#include <stddef.h>
#include <sys/types.h>

#include "snapshot/catalog.h"

/* A writer's directory: SNAPSHOT_TMP_PREFIX "<id>-<pid>". */
#define SNAPSHOT_TMP_PREFIX ".tmp-"

/*
 * The .tmp- directory of snapshot @id written by @pid in @snapshots, and
 * its final name, both checked to fit a catalog record's dir.
 */
int snapshot_store_paths(const char *snapshots, const char *id, pid_t pid,
			 char *tmp, char *final, size_t len, char *err,
			 size_t errlen);

/* Removes snapshot directory @dir and every file in it. */
int snapshot_store_remove(const char *dir, char *err, size_t errlen);

/* Removes what killed writers left in @snapshots (see above), @c saying
 * which directories are snapshots. */
void snapshot_store_collect(const char *snapshots, struct catalog *c);

/* fsync() of directory @dir. */
int snapshot_store_sync_dir(const char *dir, char *err, size_t errlen);

/*
 * Fills @s from the files a VMM wrote into @tmp (state.bin's header, the
 * memory file's size on disk: memory.diff's, else memory.img's), its dir
 * being @final (its name once renamed); id, parent, template, depth and
 * dirty bytes are the caller's.
 */
int snapshot_store_describe(const char *tmp, const char *final,
			    struct snapshot_record *s, char *err,
			    size_t errlen);

#endif
