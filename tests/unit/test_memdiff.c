// SPDX-License-Identifier: Apache-2.0
/*
 * Diff snapshots' memory (snapshot/memdiff.h) without KVM: the pages a
 * process wrote in a private file mapping are found from its page tables,
 * written as a diff, and a chain of diffs over a base maps back to the
 * same bytes; damaged diffs are refused with the file and field named.
 *
 * Each test builds, in a scratch directory, snapshot directories as the
 * pool side lays them out: base/ (memory.img, pages.xxh3), then d1/, d2/
 * (memory.diff and a "parent" link to "../base", "../d1").
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "snapshot/memdiff.h"
#include "snapshot/memfile.h"
#include "tests/unit/state_file.h"

#define PAGE 4096UL
#define PAGES 64UL
#define SIZE (PAGES * PAGE)

static char dir[64];
static char err[1024];
static uint64_t base_root;

static void in_dir(char *out, const char *name)
{
	snprintf(out, PATH_MAX, "%s/%s", dir, name);
}

/* A memory whose every page differs from every other. */
static void fill(uint8_t *mem)
{
	for (uint64_t i = 0; i < SIZE / sizeof(uint64_t); i++)
		((uint64_t *)mem)[i] = i * 0x9e3779b97f4a7c15ULL;
}

/* base/: memory.img and pages.xxh3 of fill()'s memory. */
static void setup(void)
{
	char base[PATH_MAX], memory[PATH_MAX + 32], hashes[PATH_MAX + 32];
	uint8_t *mem = malloc(SIZE);

	scratch_dir_make(dir, sizeof(dir), "memdiff");
	in_dir(base, "base");
	cr_assert_eq(mkdir(base, 0700), 0);
	snprintf(memory, sizeof(memory), "%s/memory.img", base);
	snprintf(hashes, sizeof(hashes), "%s/pages.xxh3", base);
	fill(mem);
	cr_assert_eq(memfile_write(mem, SIZE, memory, hashes, &base_root, err,
				   sizeof(err)),
		     0, "%s", err);
	free(mem);
}

static void teardown(void)
{
	scratch_dir_remove(dir);
}

TestSuite(memdiff, .init = setup, .fini = teardown);

/* @name's memory mapped as a restore maps it: base, then its diffs. */
static uint8_t *map_chain(const char *name, uint64_t root, unsigned depth)
{
	char path[PATH_MAX], memory[PATH_MAX + 32], hashes[PATH_MAX + 32];
	struct memdiff_chain c;
	int fd;

	in_dir(path, name);
	cr_assert_eq(memdiff_chain_open(&c, path, SIZE, root, err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(c.depth, depth);
	snprintf(memory, sizeof(memory), "%s/memory.img", c.base_dir);
	snprintf(hashes, sizeof(hashes), "%s/pages.xxh3", c.base_dir);
	uint8_t *mem = memfile_map(memory, hashes, SIZE, c.base_root, &fd, err,
				   sizeof(err));
	cr_assert_not_null(mem, "%s", err);
	close(fd);
	cr_assert_eq(memdiff_chain_map(&c, mem, err, sizeof(err)), 0, "%s",
		     err);
	memdiff_chain_close(&c);
	return mem;
}

static void find_written(const uint8_t *mem, struct memdiff_extents *x)
{
	cr_assert_eq(memdiff_find_written(mem, SIZE, -1, MEMDIFF_MAX_EXTENTS, x,
					  err, sizeof(err)),
		     0, "%s", err);
}

/* Writes @mem's written pages as @name/memory.diff over @parent. */
static uint64_t write_diff(const uint8_t *mem, const char *name,
			   const char *parent, uint64_t parent_root)
{
	char path[PATH_MAX + 32], link[PATH_MAX + 64];
	struct memdiff_extents x = { 0 };
	uint64_t root;

	in_dir(path, name);
	cr_assert_eq(mkdir(path, 0700), 0);
	snprintf(link, sizeof(link), "%s/" MEMDIFF_PARENT_LINK, path);
	snprintf(path + strlen(path), sizeof(path) - strlen(path),
		 "/" MEMDIFF_FILE);
	char target[PATH_MAX];
	snprintf(target, sizeof(target), "../%s", parent);
	cr_assert_eq(symlink(target, link), 0);
	find_written(mem, &x);
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(memdiff_write(fd, mem, SIZE, &x, parent_root, &root, path,
				   err, sizeof(err)),
		     0, "%s", err);
	close(fd);
	memdiff_extents_free(&x);
	return root;
}

/* Touches every page for reading, writes a byte into @pages. */
static void scribble(uint8_t *mem, const uint64_t *pages, size_t n,
		     uint8_t value)
{
	volatile uint8_t sum = 0;

	for (uint64_t p = 0; p < PAGES; p++)
		sum += mem[p * PAGE];
	(void)sum;
	for (size_t i = 0; i < n; i++)
		mem[pages[i] * PAGE + 100] = value;
}

Test(memdiff, written_pages_become_extents_with_small_gaps_closed)
{
	uint8_t *mem = map_chain("base", base_root, 0);
	/* 20 and 22: one clean page between, so one extent. */
	const uint64_t pages[] = { 3, 10, 11, 12, 20, 22, 40, 41, 42, 45 };
	struct memdiff_extents x = { 0 };

	scribble(mem, pages, sizeof(pages) / sizeof(pages[0]), 0xaa);
	find_written(mem, &x);
	cr_assert_eq(x.nr, 4);
	const uint64_t want[][2] = {
		{ 3, 1 }, { 10, 3 }, { 20, 3 }, { 40, 6 }
	};
	for (size_t i = 0; i < 4; i++) {
		cr_expect_eq(x.e[i].first_page, want[i][0], "extent %zu", i);
		cr_expect_eq(x.e[i].nr_pages, want[i][1], "extent %zu", i);
	}
	cr_expect_eq(x.pages, 13);
	cr_expect_eq(
		memdiff_find_written(mem, SIZE, -1, 3, &x, err, sizeof(err)),
		-E2BIG);
	cr_expect_not_null(strstr(err, "more than 3"), "%s", err);
	memdiff_extents_free(&x);
	munmap(mem, SIZE);
}

Test(memdiff, chain_of_two_maps_back_to_the_same_bytes)
{
	const uint64_t first[] = { 0, 5, 6, 63 }, second[] = { 6, 30 };
	uint8_t *want = malloc(SIZE);
	uint8_t *mem = map_chain("base", base_root, 0);

	scribble(mem, first, 4, 0x11);
	uint64_t root1 = write_diff(mem, "d1", "base", base_root);
	memcpy(want, mem, SIZE);
	munmap(mem, SIZE);
	mem = map_chain("d1", root1, 1);
	cr_assert_eq(memcmp(mem, want, SIZE), 0);

	/* Pages mapped from d1 are no longer written: only the new ones. */
	struct memdiff_extents x = { 0 };
	scribble(mem, second, 2, 0x22);
	find_written(mem, &x);
	cr_assert_eq(x.pages, 2);
	memdiff_extents_free(&x);
	uint64_t root2 = write_diff(mem, "d2", "d1", root1);
	memcpy(want, mem, SIZE);
	munmap(mem, SIZE);

	mem = map_chain("d2", root2, 2);
	cr_expect_eq(memcmp(mem, want, SIZE), 0);
	cr_expect_eq(mem[6 * PAGE + 100], 0x22, "the later layer wins");
	munmap(mem, SIZE);

	char d2[PATH_MAX];
	in_dir(d2, "d2");
	cr_expect_eq(memdiff_chain_verify(d2, SIZE, root2, err, sizeof(err)), 0,
		     "%s", err);
	free(want);
}

/* A diff of pages {1, 2, 9} in d1; its root in *root. */
static void one_diff(uint64_t *root, char *path)
{
	const uint64_t pages[] = { 1, 2, 9 };
	uint8_t *mem = map_chain("base", base_root, 0);

	scribble(mem, pages, 3, 0x33);
	*root = write_diff(mem, "d1", "base", base_root);
	munmap(mem, SIZE);
	in_dir(path, "d1/" MEMDIFF_FILE);
}

static void poke(const char *path, off_t offset, const void *bytes, size_t n)
{
	int fd = open(path, O_WRONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pwrite(fd, bytes, n, offset), (ssize_t)n);
	close(fd);
}

static void expect_refused(const char *path, const char *needle)
{
	struct memdiff d;

	cr_expect_eq(memdiff_open(&d, path, SIZE, err, sizeof(err)), -EINVAL,
		     "%s", err);
	cr_expect_not_null(strstr(err, needle), "wanted '%s' in: %s", needle,
			   err);
	cr_expect_not_null(strstr(err, path), "no file named in: %s", err);
}

#define FIELD(f) offsetof(struct memdiff_header, f)

Test(memdiff, damaged_headers_are_refused_naming_the_field)
{
	char path[PATH_MAX];
	uint64_t root, big = UINT64_MAX / 2;
	uint32_t v = MEMDIFF_VERSION + 1;

	one_diff(&root, path);
	struct {
		off_t offset;
		const void *bytes;
		size_t n;
		const char *needle;
	} cases[] = {
		{ 0, "XXXX", 4, "magic" },
		{ FIELD(version), &v, 4, "version" },
		{ FIELD(page_size), &v, 4, "page_size" },
		{ FIELD(page_count), &big, 8, "page_count" },
		{ FIELD(nr_extents), &big, 8, "nr_extents" },
		{ FIELD(nr_pages), &big, 8, "nr_pages" },
		{ FIELD(data_offset), &big, 8, "data_offset" },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct memdiff_header saved;
		int fd = open(path, O_RDONLY);

		cr_assert_eq(pread(fd, &saved, sizeof(saved), 0),
			     (ssize_t)sizeof(saved));
		close(fd);
		poke(path, cases[i].offset, cases[i].bytes, cases[i].n);
		expect_refused(path, cases[i].needle);
		poke(path, 0, &saved, sizeof(saved));
	}
	struct memdiff d;
	cr_assert_eq(memdiff_open(&d, path, SIZE, err, sizeof(err)), 0, "%s",
		     err);
	memdiff_close(&d);
	cr_assert_eq(truncate(path, 100), 0);
	expect_refused(path, "truncated");
	cr_assert_eq(truncate(path, 10), 0);
	expect_refused(path, "header");
}

Test(memdiff, damaged_tables_and_hashes_are_refused)
{
	char path[PATH_MAX];
	uint64_t root, value;
	const off_t table = sizeof(struct memdiff_header);

	one_diff(&root, path);
	/* Extent 0 is pages 1+2, extent 1 page 9. */
	value = 2;
	poke(path, table + 24, &value, 8); /* extent 1 starts inside 0 */
	expect_refused(path, "overlapping");
	value = PAGES;
	poke(path, table + 24, &value, 8); /* past the memory */
	expect_refused(path, "outside");
	value = 9;
	poke(path, table + 24, &value, 8);
	value = 0;
	poke(path, table + 24 + 16, &value, 8); /* its data elsewhere */
	expect_refused(path, "file_offset");
}

Test(memdiff, flipped_hash_and_page_are_caught)
{
	char path[PATH_MAX], d1[PATH_MAX];
	struct memdiff_header h;
	uint64_t root;
	uint8_t byte = 0x5a;

	one_diff(&root, path);
	in_dir(d1, "d1");
	int fd = open(path, O_RDONLY);
	cr_assert_eq(pread(fd, &h, sizeof(h), 0), (ssize_t)sizeof(h));
	close(fd);

	/* A data page: the cheap checks pass, verify does not. */
	poke(path, h.data_offset + PAGE + 7, &byte, 1);
	struct memdiff d;
	cr_expect_eq(memdiff_open(&d, path, SIZE, err, sizeof(err)), 0, "%s",
		     err);
	memdiff_close(&d);
	cr_expect_eq(memdiff_chain_verify(d1, SIZE, root, err, sizeof(err)), 1);
	cr_expect_not_null(strstr(err, "guest page 2"), "%s", err);

	/* A hash: the root no longer matches. */
	poke(path, sizeof(h) + h.nr_extents * 24 + 8, &byte, 1);
	expect_refused(path, "root");
}

Test(memdiff, layers_of_another_lineage_are_refused)
{
	char path[PATH_MAX], d1[PATH_MAX];
	struct memdiff_chain c;
	uint64_t root;

	one_diff(&root, path);
	in_dir(d1, "d1");
	/* The state file expects another top. */
	cr_expect_eq(
		memdiff_chain_open(&c, d1, SIZE, root + 1, err, sizeof(err)),
		-EINVAL);
	cr_expect_not_null(strstr(err, "state file"), "%s", err);

	/* A parent link to itself: its root is not its parent's. */
	char link[PATH_MAX];
	in_dir(link, "d1/" MEMDIFF_PARENT_LINK);
	cr_assert_eq(unlink(link), 0);
	cr_assert_eq(symlink(".", link), 0);
	cr_expect_eq(memdiff_chain_open(&c, d1, SIZE, root, err, sizeof(err)),
		     -EINVAL);
	cr_expect_not_null(strstr(err, "layer above"), "%s", err);

	/* A base of another memory: memory.img's hashes have another root. */
	cr_assert_eq(unlink(link), 0);
	cr_assert_eq(symlink("../base", link), 0);
	cr_expect_eq(memdiff_chain_open(&c, d1, SIZE, root, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(c.base_root, base_root);
	memdiff_chain_close(&c);
}
