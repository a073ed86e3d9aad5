// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_support.c - the harnesses' scratch files, quiet log and small guest
 * RAM (fuzz_support.h).  A harness aborts when its own setup fails: that
 * is the machine's fault, not an input's.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_support.h"
#include "log.h"

#define MAX_FILES 8

/* tmpfs when there is one: each input writes its files, and on a disk's
 * file system the open(O_TRUNC)/ftruncate/close of those took a third of
 * snapshot_headers' and snapshot_state's time. */
static char dir[sizeof("/dev/shm/thaw-fuzz-XXXXXX")];
static char paths[MAX_FILES][sizeof(dir) + 33];
static int nr_paths;

static void remove_dir(void)
{
	for (int i = 0; i < nr_paths; i++)
		unlink(paths[i]);
	rmdir(dir);
}

const char *fuzz_path(const char *name)
{
	for (int i = 0; i < nr_paths; i++)
		if (!strcmp(strrchr(paths[i], '/') + 1, name))
			return paths[i];
	if (!nr_paths) {
		strcpy(dir, "/dev/shm/thaw-fuzz-XXXXXX");
		if (!mkdtemp(dir)) {
			strcpy(dir, "/tmp/thaw-fuzz-XXXXXX");
			if (!mkdtemp(dir))
				abort();
		}
		atexit(remove_dir);
	}
	if (nr_paths == MAX_FILES || strlen(name) > 32)
		abort();
	snprintf(paths[nr_paths], sizeof(paths[0]), "%s/%s", dir, name);
	return paths[nr_paths++];
}

void fuzz_write_file(const char *path, const void *data, size_t size,
		     uint64_t length)
{
	FILE *f = fopen(path, "we");

	if (!f || (size && fwrite(data, 1, size, f) != size) ||
	    ftruncate(fileno(f), (off_t)length) || fclose(f))
		abort();
}

void fuzz_quiet_log(void)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		abort();
	log_set_fd(fd);
}

void fuzz_discard_output(void *ctx, const uint8_t *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
}

void fuzz_ignore_reset(void *ctx)
{
	(void)ctx;
}

void fuzz_guest_memory(struct guest_memory *mem, uint8_t *host, uint64_t size)
{
	*mem = (struct guest_memory){
		.host = host,
		.size = size,
		.regions = { { .guest_addr = 0, .size = size } },
		.nr_regions = 1,
	};
}
