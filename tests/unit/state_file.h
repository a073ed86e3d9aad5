/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state_file.h - what the snapshot unit tests share: sections sent through
 * a real state file and read back the way a restore reads them, and scratch
 * directories.  Each helper fails the calling test with a criterion
 * assertion instead of returning an error.
 */
#ifndef THAW_TEST_STATE_FILE_H
#define THAW_TEST_STATE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "snapshot/state.h"

/*
 * Saves @w, then frees it, to a state file in a scratch directory and opens
 * that as @r, whose state_get() messages go to state_file_error (emptied
 * first).  The file is gone afterwards, so no test leaves one behind.
 */
extern char state_file_error[512];
void state_file_through(struct state_writer *w, struct state_reader *r);

/*
 * Opens as @r a state file holding only section (@tag, instance 0) with
 * @size bytes of @data: a section crafted for a restore to refuse.
 */
void state_file_one_section(struct state_reader *r, uint32_t tag,
			    const void *data, size_t size);

/* Creates a fresh /tmp/thaw-@name-XXXXXX and puts its path in @dir. */
void scratch_dir_make(char *dir, size_t size, const char *name);
/* Removes @dir and everything in it (symbolic links, not what they name). */
void scratch_dir_remove(const char *dir);

#endif
