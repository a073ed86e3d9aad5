/* SPDX-License-Identifier: Apache-2.0 */
/*
 * checkpoint.h - the pool side of a checkpoint's directory: the files a
 * running VMM writes a checkpoint into, and the link that makes a diff
 * snapshot's chain (snapshot/memdiff.h).
 *
 * A sandbox's VMM is jailed with no writable directory, and a running jail
 * cannot be given a new path: so the supervisor creates the checkpoint's
 * files itself, empty and its own (0600, in a 0700 directory), and passes
 * them to the VMM as descriptors with the control socket's "checkpoint"
 * line (vmm_process_checkpoint(), vmm_process.h).  The VMM writes either a
 * diff (memory.diff) or all of memory (memory.img, pages.xxh3), and state.bin;
 * the answer says which, and checkpoint_files_finish() removes the others.
 * The VMM never learns where its parent lives: the supervisor, which knows
 * which snapshot the VM's memory derives from, links it.
 *
 * Errors: 0 or a negative errno with one message in the caller's @err.
 */
#ifndef THAW_POOL_HOST_CHECKPOINT_H
#define THAW_POOL_HOST_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>

/* state.bin, memory.diff, memory.img, pages.xxh3: control.h's order. */
#define CHECKPOINT_FILES 4

/*
 * Creates the four files in @dir (which must hold none of them) for
 * reading and writing; @fds gets their descriptors, in control.h's order.
 * On failure none is left open or created.
 */
int checkpoint_files_create(const char *dir, int fds[CHECKPOINT_FILES],
			    char *err, size_t errlen);

/*
 * Closes @fds and removes the memory files a checkpoint of kind @full did
 * not write (a diff's memory.img and pages.xxh3, a full one's memory.diff).
 */
int checkpoint_files_finish(const char *dir, int fds[CHECKPOINT_FILES],
			    bool full, char *err, size_t errlen);

/* Closes @fds and removes all four files (a failed checkpoint). */
void checkpoint_files_discard(const char *dir, int fds[CHECKPOINT_FILES]);

/*
 * Makes @dir/parent a symbolic link to "../@parent_id": a diff snapshot in
 * the snapshots' directory names its parent there, relatively, so the
 * directory can move.  @parent_id must be a catalog id.
 */
int snapshot_link_parent(const char *dir, const char *parent_id, char *err,
			 size_t errlen);

#endif
