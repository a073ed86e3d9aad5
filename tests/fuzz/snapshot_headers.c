// SPDX-License-Identifier: Apache-2.0
/*
 * snapshot_headers.c - libFuzzer harness: a snapshot's working set
 * (workingset.bin), page hashes (pages.xxh3) and memory diff (memory.diff)
 * as a restore and `thaw snapshot verify` read them, whatever the files
 * hold.
 *
 * Input: one byte of choices, then the file's bytes.  The choice byte's
 * low two bits pick the reader (workingset_prefetch(), memfile_map(),
 * memfile_verify(), or memdiff_open() and mapping the diff's extents over
 * the memory as a restore does), bit 2 whether the hash root is fixed up
 * to match the hashes (and for a diff the extent table) that follow (a
 * fuzzer cannot forge XXH3, and without it nothing past the root check
 * would run), the high bits the memory file's size (1 to 32 pages, sparse:
 * it reads as zeros).  Both files live in the
 * harness's scratch directory (fuzz_support.h): workingset.c opens with
 * O_NOFOLLOW, so a memfd's /proc/self/fd link would not do.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "tests/fuzz/fuzz_support.h"
#include "snapshot/memdiff.h"
#include "snapshot/memfile.h"
#include "snapshot/workingset.h"

enum reader { PREFETCH, MAP, VERIFY, DIFF, NR_READERS };
#define FIX_ROOT 0x4

/*
 * A memory.diff's root made to match what follows its header, when the
 * header's counts fit in @size bytes (memdiff.h: over the parent root,
 * the extent table and the page hashes).
 */
static void fix_diff_root(uint8_t *file, size_t size)
{
	struct memdiff_header h;

	if (size < sizeof(h))
		return;
	memcpy(&h, file, sizeof(h));
	size_t left = size - sizeof(h);
	if (h.nr_extents > left / sizeof(struct memdiff_extent))
		return;
	size_t table = h.nr_extents * sizeof(struct memdiff_extent);
	if (h.nr_pages > (left - table) / sizeof(uint64_t))
		return;
	XXH3_state_t *s = XXH3_createState();
	if (!s || XXH3_64bits_reset(s) != XXH_OK)
		abort();
	XXH3_64bits_update(s, &h.parent_root, sizeof(h.parent_root));
	XXH3_64bits_update(s, file + sizeof(h),
			   table + h.nr_pages * sizeof(uint64_t));
	h.root = XXH3_64bits_digest(s);
	XXH3_freeState(s);
	memcpy(file, &h, sizeof(h));
}

/* Opens @path as a diff and maps its extents over a private @mem_size
 * mapping of @memory_path, as a restore maps a chain. */
static void read_diff(const char *memory_path, const char *path,
		      uint64_t mem_size)
{
	struct memdiff d;
	char err[512];

	if (memdiff_open(&d, path, mem_size, err, sizeof(err)))
		return;
	int fd = open(memory_path, O_RDONLY | O_CLOEXEC);
	uint8_t *mem = mmap(NULL, mem_size, PROT_READ | PROT_WRITE, MAP_PRIVATE,
			    fd, 0);
	if (fd < 0 || mem == MAP_FAILED)
		abort();
	if (!memdiff_map_extents(d.fd, mem, d.extents, d.h.nr_extents, d.path,
				 err, sizeof(err))) {
		volatile uint8_t sum = 0;

		for (uint64_t i = 0; i < mem_size; i += MEMDIFF_PAGE_SIZE)
			sum += mem[i];
		(void)sum;
	}
	munmap(mem, mem_size);
	close(fd);
	memdiff_close(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct memfile_hashes_header h;
	char err[512];
	int fd;

	if (!size)
		return -1;
	const char *memory_path = fuzz_path("memory.img");
	const char *input_path = fuzz_path("input");
	uint8_t choice = data[0];
	uint64_t mem_size = ((choice >> 3) + 1ull) * MEMFILE_PAGE_SIZE;
	uint8_t *file = malloc(size);

	if (!file)
		abort();
	memcpy(file, data + 1, size - 1);
	size--;
	if ((choice & 3) == DIFF) {
		if (choice & FIX_ROOT)
			fix_diff_root(file, size);
		h.root = 0;
	} else if ((choice & FIX_ROOT) && size >= sizeof(h)) {
		memcpy(&h, file, sizeof(h));
		h.root = XXH3_64bits(file + sizeof(h), size - sizeof(h));
		memcpy(file, &h, sizeof(h));
	} else if (size >= sizeof(h)) {
		memcpy(&h, file, sizeof(h));
	} else {
		h.root = 0;
	}
	fuzz_write_file(memory_path, NULL, 0, mem_size);
	fuzz_write_file(input_path, file, size, size);
	free(file);

	switch ((choice & 3) % NR_READERS) {
	case PREFETCH: {
		uint64_t pages;
		fd = open(memory_path, O_RDONLY | O_CLOEXEC);
		void *mem = mmap(NULL, mem_size, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE, fd, 0);
		if (fd < 0 || mem == MAP_FAILED)
			abort();
		workingset_prefetch(fd, mem, mem_size, input_path, &pages, err,
				    sizeof(err));
		munmap(mem, mem_size);
		close(fd);
		break;
	}
	case MAP: {
		void *mem = memfile_map(memory_path, input_path, mem_size,
					h.root, &fd, err, sizeof(err));
		if (mem) {
			munmap(mem, mem_size);
			close(fd);
		}
		break;
	}
	case VERIFY:
		memfile_verify(memory_path, input_path, mem_size, h.root, err,
			       sizeof(err));
		break;
	case DIFF:
		read_diff(memory_path, input_path, mem_size);
		break;
	}
	return 0;
}
