// SPDX-License-Identifier: Apache-2.0
/*
 * state_file.c - see state_file.h.
 */
#include "tests/unit/state_file.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

char state_file_error[512];

void state_file_through(struct state_writer *w, struct state_reader *r)
{
	struct state_file_header header = { 0 };
	char dir[64], path[128];

	scratch_dir_make(dir, sizeof(dir), "state");
	snprintf(path, sizeof(path), "%s/state.bin", dir);
	cr_assert_eq(state_writer_save(w, &header, path, state_file_error,
				       sizeof(state_file_error)),
		     0, "%s", state_file_error);
	state_writer_free(w);
	cr_assert_eq(state_reader_open(r, path, state_file_error,
				       sizeof(state_file_error)),
		     0, "%s", state_file_error);
	state_file_error[0] = '\0';
	unlink(path);
	rmdir(dir);
}

void state_file_one_section(struct state_reader *r, uint32_t tag,
			    const void *data, size_t size)
{
	struct state_writer w;

	state_writer_init(&w);
	state_put(&w, tag, 0, data, size);
	state_file_through(&w, r);
}

void scratch_dir_make(char *dir, size_t size, const char *name)
{
	cr_assert_lt((size_t)snprintf(dir, size, "/tmp/thaw-%s-XXXXXX", name),
		     size);
	cr_assert_not_null(mkdtemp(dir), "mkdtemp %s: %s", dir,
			   strerror(errno));
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	return remove(path);
}

void scratch_dir_remove(const char *dir)
{
	/* Depth first, links not followed: a test's tree, not their targets. */
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
