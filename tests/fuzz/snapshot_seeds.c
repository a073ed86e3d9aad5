// SPDX-License-Identifier: Apache-2.0
/*
 * snapshot_seeds.c - writes the seed corpus of snapshot_headers: a real
 * working set and real page hashes, written by workingset_record() and
 * memfile_write() for a small memory whose pages 0-2 and 5 were touched,
 * each behind the choice byte snapshot_headers.c reads (reader, root
 * fix-up, memory size).
 *
 *	snapshot_seeds DIR	writes DIR/snapshot_headers/
 *
 * Run by hand when a format changes; the outputs are committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memfile.h"
#include "workingset.h"

#define PAGES 8

/* snapshot_headers.c's choice byte */
enum { PREFETCH, MAP, VERIFY };
#define CHOICE(reader, pages) ((uint8_t)((reader) | (((pages)-1) << 3)))

static void fail(const char *what, const char *err)
{
	fprintf(stderr, "snapshot_seeds: %s: %s\n", what, err);
	exit(1);
}

/* DIR/snapshot_headers/NAME: @choice, then the bytes of @path. */
static void seed(const char *dir, const char *name, uint8_t choice,
		 const char *path)
{
	char out[4096];
	uint8_t buf[65536];
	FILE *in = fopen(path, "rb");
	size_t n = in ? fread(buf, 1, sizeof(buf), in) : 0;
	FILE *f;

	snprintf(out, sizeof(out), "%s/snapshot_headers/%s", dir, name);
	f = fopen(out, "wb");
	if (!in || !f || fputc(choice, f) == EOF || fwrite(buf, 1, n, f) != n ||
	    fclose(f))
		fail(out, "cannot write");
	fclose(in);
}

int main(int argc, char **argv)
{
	char tmp[] = "/tmp/thaw-snapshot-seeds-XXXXXX";
	char ws[64], memory[64], hashes[64], err[512];
	uint64_t size = PAGES * MEMFILE_PAGE_SIZE, pages, root;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	uint8_t *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || !mkdtemp(tmp))
		fail("setup", "no memory or no /tmp");
	for (int p = 0; p < PAGES; p++)
		if (p <= 2 || p == 5)
			memset(mem + p * MEMFILE_PAGE_SIZE, 0x40 + p, 100);
	snprintf(ws, sizeof(ws), "%s/workingset.bin", tmp);
	snprintf(memory, sizeof(memory), "%s/memory.img", tmp);
	snprintf(hashes, sizeof(hashes), "%s/pages.xxh3", tmp);
	if (workingset_record(mem, size, ws, -1, &pages, err, sizeof(err)))
		fail("workingset_record", err);
	if (memfile_write(mem, size, memory, hashes, &root, err, sizeof(err)))
		fail("memfile_write", err);

	seed(argv[1], "workingset", CHOICE(PREFETCH, PAGES), ws);
	seed(argv[1], "hashes-map", CHOICE(MAP, PAGES), hashes);
	seed(argv[1], "hashes-verify", CHOICE(VERIFY, PAGES), hashes);
	unlink(ws);
	unlink(memory);
	unlink(hashes);
	rmdir(tmp);
	return 0;
}
