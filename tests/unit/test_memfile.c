// SPDX-License-Identifier: Apache-2.0
/*
 * test_memfile.c - memory.img and pages.xxh3 written from a mostly-zero
 * 16 MiB "guest", mapped back and verified, and the damage each check must
 * catch.  The expected hashes are recomputed here page by page, so a wrong
 * hash file format fails even when writer and reader agree with each other.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "snapshot/memfile.h"
#include "snapshot/preopen.h"
#include "tests/unit/state_file.h"

#define PAGE MEMFILE_PAGE_SIZE
#define SIZE (16ULL << 20)
#define PAGES (SIZE / PAGE)
#define RUN_FIRST 100 /* pages RUN_FIRST..RUN_FIRST + 3 are one dirty run */

static char dir[64];
static char mem_path[128];
static char hashes_path[128];
static uint8_t *guest;
/* Where memfile_*() explain a failure. */
static char err[512];

static void setup(void)
{
	scratch_dir_make(dir, sizeof(dir), "test-memfile");
	snprintf(mem_path, sizeof(mem_path), "%s/memory.img", dir);
	snprintf(hashes_path, sizeof(hashes_path), "%s/pages.xxh3", dir);

	/* Dirty: page 0, a four-page run, one byte near the end, the last. */
	guest = mmap(NULL, SIZE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(guest, MAP_FAILED);
	memset(guest, 0x11, PAGE);
	for (size_t i = 0; i < 4 * PAGE; i++)
		guest[RUN_FIRST * PAGE + i] = (uint8_t)(i * 7 + 3);
	guest[(PAGES - 3) * PAGE + 4095] = 0x5a;
	memset(guest + (PAGES - 1) * PAGE, 0xee, PAGE);
}

static void teardown(void)
{
	munmap(guest, SIZE);
	scratch_dir_remove(dir);
}

TestSuite(memfile, .init = setup, .fini = teardown);

static void expect_in(const char *msg, const char *needle)
{
	cr_assert_not_null(strstr(msg, needle), "expected \"%s\" in: %s",
			   needle, msg);
}

/* Writes the files afresh: memfile_write() never replaces existing ones. */
static uint64_t write_guest(void)
{
	uint64_t root = 0;

	unlink(mem_path);
	unlink(hashes_path);
	cr_assert_eq(memfile_write(guest, SIZE, mem_path, hashes_path, &root,
				   err, sizeof(err)),
		     0, "%s", err);
	return root;
}

static uint64_t expected_root(const uint8_t *mem, uint64_t pages)
{
	uint64_t *hashes = malloc(pages * sizeof(*hashes));
	uint64_t root;

	cr_assert_not_null(hashes);
	for (uint64_t i = 0; i < pages; i++)
		hashes[i] = XXH3_64bits(mem + i * PAGE, PAGE);
	root = XXH3_64bits(hashes, pages * sizeof(*hashes));
	free(hashes);
	return root;
}

static void patch_file(const char *path, off_t off, uint8_t xor)
{
	uint8_t byte;
	int fd = open(path, O_RDWR);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, &byte, 1, off), 1);
	byte ^= xor;
	cr_assert_eq(pwrite(fd, &byte, 1, off), 1);
	close(fd);
}

Test(memfile, writes_a_sparse_copy)
{
	struct stat st;
	uint8_t *copy = malloc(SIZE);
	int fd;

	write_guest();
	cr_assert_eq(stat(hashes_path, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0600, "pages.xxh3 is %o",
		     st.st_mode & 07777);
	cr_assert_eq(stat(mem_path, &st), 0);
	/* Guest memory holds the guest's secrets: its owner's alone. */
	cr_expect_eq(st.st_mode & 07777, 0600, "memory.img is %o",
		     st.st_mode & 07777);
	cr_assert_eq((uint64_t)st.st_size, SIZE);
	/* 7 dirty pages; allow the filesystem some metadata and rounding. */
	cr_assert_leq((uint64_t)st.st_blocks * 512, 256 * 1024,
		      "%lld bytes allocated for 7 dirty pages",
		      (long long)st.st_blocks * 512);

	cr_assert_not_null(copy);
	fd = open(mem_path, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, copy, SIZE, 0), (ssize_t)SIZE);
	close(fd);
	cr_assert_eq(memcmp(copy, guest, SIZE), 0);
	free(copy);
}

Test(memfile, hash_file_layout_and_root)
{
	struct memfile_hashes_header h;
	uint64_t root = write_guest();
	uint64_t hash;
	struct stat st;
	int fd = open(hashes_path, O_RDONLY);

	cr_assert_eq(root, expected_root(guest, PAGES));
	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, sizeof(h) + PAGES * 8);
	cr_assert_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	cr_assert_eq(memcmp(h.magic, MEMFILE_HASHES_MAGIC, 8), 0);
	cr_assert_eq(h.version, MEMFILE_HASHES_VERSION);
	cr_assert_eq(h.page_size, PAGE);
	cr_assert_eq(h.page_count, PAGES);
	cr_assert_eq(h.root, root);
	/* A dirty page and a hole, at their places in the array. */
	cr_assert_eq(pread(fd, &hash, 8, sizeof(h) + (RUN_FIRST + 2) * 8), 8);
	cr_assert_eq(hash, XXH3_64bits(guest + (RUN_FIRST + 2) * PAGE, PAGE));
	cr_assert_eq(pread(fd, &hash, 8, sizeof(h) + 50 * 8), 8);
	cr_assert_eq(hash, XXH3_64bits(guest + 50 * PAGE, PAGE));
	close(fd);
}

Test(memfile, root_is_stable_and_follows_content)
{
	uint64_t first = write_guest();
	uint64_t second = write_guest();

	cr_assert_eq(first, second);
	guest[RUN_FIRST * PAGE + 9] ^= 1;
	cr_assert_neq(write_guest(), first);
}

/* Clones may map an existing memory.img: overwriting it would break them. */
Test(memfile, never_replaces_existing_files)
{
	uint64_t root, first = write_guest();
	const char *msg;

	cr_assert_eq(memfile_write(guest, SIZE, mem_path, hashes_path, &root,
				   err, sizeof(err)),
		     -EEXIST);
	msg = err;
	expect_in(msg, "File exists");
	cr_assert_eq(memfile_verify(mem_path, hashes_path, SIZE, first, err,
				    sizeof(err)),
		     0, "%s", err);
}

Test(memfile, refuses_a_partial_page)
{
	uint64_t root;
	const char *msg;

	cr_assert_eq(memfile_write(guest, SIZE - 100, mem_path, hashes_path,
				   &root, err, sizeof(err)),
		     -EINVAL);
	msg = err;
	expect_in(msg, mem_path);
	expect_in(msg, "not a multiple");
}

Test(memfile, map_is_private_and_equals_the_guest)
{
	uint64_t root = write_guest();
	uint8_t byte;
	int fd = -1;
	uint8_t *mem = memfile_map(mem_path, hashes_path, SIZE, root, &fd, err,
				   sizeof(err));

	cr_assert_not_null(mem, "%s", err);
	cr_assert_geq(fd, 0);
	cr_assert_eq(memcmp(mem, guest, SIZE), 0);

	mem[RUN_FIRST * PAGE] ^= 0xff;
	mem[50 * PAGE] = 0x77;
	cr_assert_eq(pread(fd, &byte, 1, RUN_FIRST * PAGE), 1);
	cr_assert_eq(byte, guest[RUN_FIRST * PAGE]);
	cr_assert_eq(pread(fd, &byte, 1, 50 * PAGE), 1);
	cr_assert_eq(byte, 0);
	cr_assert_eq(munmap(mem, SIZE), 0);
	close(fd);
	cr_assert_eq(memfile_verify(mem_path, hashes_path, SIZE, root, err,
				    sizeof(err)),
		     0, "%s", err);
}

static void expect_map_fails(uint64_t size, uint64_t root, const char *path,
			     const char *needle)
{
	int fd = -1;
	void *mem;
	const char *msg;

	mem = memfile_map(mem_path, hashes_path, size, root, &fd, err,
			  sizeof(err));
	msg = err;
	cr_assert_null(mem);
	cr_assert_eq(fd, -1);
	expect_in(msg, path);
	expect_in(msg, needle);
}

Test(memfile, map_refuses_truncated_memory_file)
{
	uint64_t root = write_guest();

	cr_assert_eq(truncate(mem_path, SIZE - PAGE), 0);
	expect_map_fails(SIZE, root, mem_path, "16773120 bytes");
}

Test(memfile, map_refuses_wrong_root)
{
	uint64_t root = write_guest();

	expect_map_fails(SIZE, root ^ 1, hashes_path, "root");
}

Test(memfile, map_refuses_wrong_size)
{
	uint64_t root = write_guest();

	cr_assert_eq(truncate(mem_path, SIZE * 2), 0);
	expect_map_fails(SIZE * 2, root, hashes_path, "page_count 4096");
}

Test(memfile, map_refuses_truncated_hash_file)
{
	uint64_t root = write_guest();

	cr_assert_eq(truncate(hashes_path, 32 + PAGES * 8 - 8), 0);
	expect_map_fails(SIZE, root, hashes_path, "truncated");
	cr_assert_eq(truncate(hashes_path, 20), 0);
	expect_map_fails(SIZE, root, hashes_path, "shorter than");
}

Test(memfile, map_refuses_corrupted_hash_array)
{
	uint64_t root = write_guest();

	patch_file(hashes_path, 32 + 1000 * 8 + 3, 0x40);
	expect_map_fails(SIZE, root, hashes_path, "file corrupted");
}

/*
 * Runs memfile_verify() on the test's files, with @root, and checks it
 * returns @want; returns its message.
 */
static const char *expect_verify(uint64_t root, int want)
{
	int ret;

	ret = memfile_verify(mem_path, hashes_path, SIZE, root, err,
			     sizeof(err));
	cr_assert_eq(ret, want, "memfile_verify returned %d: %s", ret, err);
	return err;
}

Test(memfile, verify_accepts_intact_files)
{
	uint64_t root = write_guest();

	cr_assert_eq(memfile_verify(mem_path, hashes_path, SIZE, root, err,
				    sizeof(err)),
		     0, "%s", err);
}

Test(memfile, verify_finds_a_flipped_byte)
{
	uint64_t root = write_guest();
	const char *msg;

	patch_file(mem_path, (RUN_FIRST + 1) * PAGE + 17, 0x08);
	msg = expect_verify(root, 1);
	expect_in(msg, mem_path);
	expect_in(msg, "1 of 4096 pages");
	expect_in(msg, "page 101 ");
	expect_in(msg, "file offset 0x65000");
}

Test(memfile, verify_finds_damage_in_holes)
{
	uint64_t root = write_guest();
	const char *msg;

	patch_file(mem_path, 2000 * PAGE, 0x01);
	patch_file(mem_path, 3000 * PAGE + 5, 0x01);
	msg = expect_verify(root, 1);
	expect_in(msg, "2 of 4096 pages");
	expect_in(msg, "page 2000 ");
}

Test(memfile, verify_reports_bad_root_and_sizes)
{
	uint64_t root = write_guest();
	const char *msg;

	msg = expect_verify(root + 1, 1);
	expect_in(msg, "root");

	patch_file(hashes_path, 32 + 7 * 8, 0x01);
	msg = expect_verify(root, 1);
	expect_in(msg, "file corrupted");
	expect_in(msg, "page 7 ");

	cr_assert_eq(truncate(mem_path, SIZE - PAGE), 0);
	msg = expect_verify(root, 1);
	expect_in(msg, mem_path);
}

Test(memfile, verify_cannot_read_missing_files)
{
	uint64_t root = write_guest();
	const char *msg;

	cr_assert_eq(unlink(hashes_path), 0);
	msg = expect_verify(root, -ENOENT);
	expect_in(msg, hashes_path);

	cr_assert_eq(unlink(mem_path), 0);
	msg = expect_verify(root, -ENOENT);
	expect_in(msg, mem_path);
	expect_in(msg, "cannot open");
}

/* The lowest free descriptor: the one the next open() gets. */
static int lowest_free_fd(void)
{
	int fd = dup(0);

	cr_assert_geq(fd, 0);
	close(fd);
	return fd;
}

/*
 * A jailed VMM may not open its snapshot's files (0600, another uid's):
 * they are opened ahead and read through those descriptors, once; a
 * missing one is left for its reader to name, a FIFO is refused.
 */
Test(memfile, preopened_files_are_read_through_their_descriptors)
{
	uint64_t root = write_guest();
	char moved[160], ws[160], state[160];
	/* state.bin, opened first, gets it. */
	int fd = -1, state_fd = lowest_free_fd();

	snprintf(state, sizeof(state), "%s/state.bin", dir);
	close(open(state, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
	snprintf(ws, sizeof(ws), "%s/workingset.bin", dir);
	cr_assert_eq(mkfifo(ws, 0600), 0);
	cr_assert_eq(snapshot_files_preopen(dir, err, sizeof(err)), -EINVAL);
	expect_in(err, "workingset.bin: not a regular file");
	unlink(ws);
	cr_assert_eq(snapshot_files_preopen(dir, err, sizeof(err)), 0, "%s",
		     err);
	/* Out of reach by path now, as in the jail. */
	snprintf(moved, sizeof(moved), "%s/elsewhere", dir);
	cr_assert_eq(rename(mem_path, moved), 0);
	uint8_t *mem = memfile_map(mem_path, hashes_path, SIZE, root, &fd, err,
				   sizeof(err));

	cr_assert_not_null(mem, "%s", err);
	cr_expect_eq(memcmp(mem, guest, SIZE), 0);
	munmap(mem, SIZE);
	close(fd);
	/* Taken: the next open is by path again. */
	cr_expect_null(memfile_map(mem_path, hashes_path, SIZE, root, &fd, err,
				   sizeof(err)));
	expect_in(err, "cannot open");
	/* What no reader took (state.bin) is closed, not kept. */
	snapshot_files_forget();
	cr_expect_eq(lowest_free_fd(), state_fd);
}
