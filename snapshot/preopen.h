/* SPDX-License-Identifier: Apache-2.0 */
/*
 * preopen.h - a snapshot's files opened ahead, for a reader that may no
 * longer open them by the time it reads.
 *
 * Snapshot files hold guest memory, secrets included: they are their
 * owner's alone (files 0600 in 0700 directories).  A jailed VMM runs as a
 * uid of its own with no capabilities (vmm/jail.h), which may open none of
 * them; so thaw-vmm opens a snapshot's files before it enters its jail and
 * registers the descriptors here, under the paths the readers (state.h,
 * memdiff.h, memfile.h, workingset.h) will ask for.  Their open goes through
 * snapshot_file_open(), which hands out a registered descriptor once (the
 * reader closes it as any other) and opens any other path itself.
 *
 * Only regular files are opened ahead, never through a link at the last
 * component nor blocking on a FIFO.  The table is process-wide, filled
 * before any thread exists and emptied as the restore reads it.
 */
#ifndef THAW_SNAPSHOT_PREOPEN_H
#define THAW_SNAPSHOT_PREOPEN_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Opens those of @dir's state.bin and memory files that exist, read-only,
 * and registers them: a diff snapshot's memory.diff, then its parent's
 * (@dir/parent/memory.diff, memdiff.h) and so on, at most
 * MEMDIFF_MAX_DEPTH of them, and the base's memory.img, pages.xxh3 and
 * workingset.bin.  A missing one is left for its reader to name, in the
 * order it reads them.  0, or a negative errno with @err naming the file
 * (not a regular one, not readable).
 */
int snapshot_files_preopen(const char *dir, char *err, size_t errlen);

/* open(@path, @flags): the descriptor registered for @path if there is
 * one (taken: a second call opens @path), else a fresh one. */
int snapshot_file_open(const char *path, int flags);

/* Closes and forgets every descriptor not taken yet. */
void snapshot_files_forget(void);

#endif
