/* SPDX-License-Identifier: Apache-2.0 */
/*
 * state_file.h - what the snapshot unit tests share: sections sent through
 * a real state file and read back the way a restore reads them, scratch
 * directories, and stderr captured so a test can check the message a
 * refusal prints.  Each helper fails the calling test with a criterion
 * assertion instead of returning an error.
 */
#ifndef THAW_TEST_STATE_FILE_H
#define THAW_TEST_STATE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "state.h"

/*
 * Saves @w, then frees it, to a state file in a scratch directory and opens
 * that as @r.  The file is gone afterwards, so no test leaves one behind.
 */
void state_file_through(struct state_writer *w, struct state_reader *r);

/*
 * Opens as @r a state file holding only section (@tag, instance 0) with
 * @size bytes of @data: a section crafted for a restore to refuse.
 */
void state_file_one_section(struct state_reader *r, uint32_t tag,
			    const void *data, size_t size);

/* Creates a fresh /tmp/thaw-@name-XXXXXX and puts its path in @dir. */
void scratch_dir_make(char *dir, size_t size, const char *name);
/* Removes @dir and the files in it; it holds no subdirectories. */
void scratch_dir_remove(const char *dir);

/*
 * stderr goes to a scratch file between these two; capture_end() returns
 * what was written, valid until the next capture.
 */
void capture_begin(void);
const char *capture_end(void);

#endif
