// SPDX-License-Identifier: Apache-2.0
/*
 * Working-set files: recording from page tables, prefetching into a fresh
 * mapping through the page cache, and rejecting malformed files.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/unit/state_file.h"
#include "snapshot/workingset.h"

#define PAGE 4096UL
#define PM_PRESENT (1ULL << 63)
#define PM_FILE (1ULL << 61)
/* Covers the largest fault-around window (one page table). */
#define MAP_ALIGN (2UL << 20)

static char dir[64];
/* Where workingset_*() explain a failure. */
static char err[512];

static void setup(void)
{
	scratch_dir_make(dir, sizeof(dir), "ws");
}

static void teardown(void)
{
	scratch_dir_remove(dir);
}

TestSuite(workingset, .init = setup, .fini = teardown);

static void in_dir(char *buf, const char *name)
{
	snprintf(buf, PATH_MAX, "%s/%s", dir, name);
}

static uint64_t pagemap_entry(const void *p)
{
	uint64_t e;
	int fd = open("/proc/self/pagemap", O_RDONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, &e, sizeof(e), (uintptr_t)p / PAGE * sizeof(e)),
		     (ssize_t)sizeof(e));
	close(fd);
	return e;
}

static uint64_t pattern(uint64_t page, size_t word)
{
	return page * 0x9e3779b97f4a7c15ULL ^ word;
}

static void make_memfile(const char *path, uint64_t nr_pages)
{
	uint64_t buf[PAGE / sizeof(uint64_t)];
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert_geq(fd, 0);
	for (uint64_t p = 0; p < nr_pages; p++) {
		for (size_t w = 0; w < PAGE / sizeof(uint64_t); w++)
			buf[w] = pattern(p, w);
		cr_assert_eq(write(fd, buf, PAGE), (ssize_t)PAGE);
	}
	cr_assert_eq(fsync(fd), 0);
	close(fd);
}

/*
 * Fault-around maps the cached neighbours of a faulting page within an
 * aligned window of the virtual address space; aligning the mapping makes
 * page-aligned 16-page blocks of the file fill whole windows, so what gets
 * mapped is exactly what a test touched.  No huge pages for the same
 * reason.
 */
static char *map_aligned(int fd, size_t size)
{
	char *res, *p;
	size_t head;

	res = mmap(NULL, size + MAP_ALIGN, PROT_NONE,
		   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	cr_assert_neq(res, MAP_FAILED);
	p = (char *)(((uintptr_t)res + MAP_ALIGN - 1) & ~(MAP_ALIGN - 1));
	cr_assert_eq(mmap(p, size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_FIXED, fd, 0),
		     p);
	head = p - res;
	if (head)
		munmap(res, head);
	if (MAP_ALIGN - head)
		munmap(p + size, MAP_ALIGN - head);
	cr_assert_eq(madvise(p, size, MADV_NOHUGEPAGE), 0);
	return p;
}

static void *read_file(const char *path, size_t *len)
{
	char *buf = malloc(1 << 20);
	int fd = open(path, O_RDONLY);
	ssize_t n;

	cr_assert_not_null(buf);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	n = read(fd, buf, 1 << 20);
	cr_assert_geq(n, 0);
	close(fd);
	*len = n;
	return buf;
}

static void write_raw(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static void write_ws(const char *path, uint64_t page_count,
		     const struct workingset_range *r, size_t nr)
{
	struct workingset_header h = {
		.version = WORKINGSET_VERSION,
		.page_size = PAGE,
		.page_count = page_count,
		.nr_ranges = nr,
	};
	size_t len = sizeof(h) + nr * sizeof(*r);
	char *buf = malloc(len);

	cr_assert_not_null(buf);
	memcpy(h.magic, WORKINGSET_MAGIC, sizeof(h.magic));
	memcpy(buf, &h, sizeof(h));
	if (nr)
		memcpy(buf + sizeof(h), r, nr * sizeof(*r));
	write_raw(path, buf, len);
	free(buf);
}

/* Runs workingset_prefetch() with its message, if any, in *@msg. */
static int prefetch_capture(int fd, void *mem, uint64_t size, const char *path,
			    uint64_t *pages, const char **msg)
{
	err[0] = '\0';
	*msg = err;
	return workingset_prefetch(fd, mem, size, path, pages, err,
				   sizeof(err));
}

static void check_ws_file(const char *path, uint64_t page_count,
			  const struct workingset_range *want, size_t nr)
{
	const struct workingset_header *h;
	const struct workingset_range *r;
	size_t len;
	char *buf = read_file(path, &len);

	cr_assert_eq(len, sizeof(*h) + nr * sizeof(*r));
	h = (const void *)buf;
	r = (const void *)(buf + sizeof(*h));
	cr_assert_eq(memcmp(h->magic, WORKINGSET_MAGIC, 8), 0);
	cr_assert_eq(h->version, WORKINGSET_VERSION);
	cr_assert_eq(h->page_size, PAGE);
	cr_assert_eq(h->page_count, page_count);
	cr_assert_eq(h->nr_ranges, nr);
	for (size_t i = 0; i < nr; i++) {
		cr_assert_eq(r[i].first_page, want[i].first_page,
			     "range %zu starts at %llu", i,
			     (unsigned long long)r[i].first_page);
		cr_assert_eq(r[i].nr_pages, want[i].nr_pages,
			     "range %zu has %llu pages", i,
			     (unsigned long long)r[i].nr_pages);
	}
	free(buf);
}

static int dir_entries(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			n++;
	closedir(d);
	return n;
}

Test(workingset, record_coalesces_present_pages)
{
	static const struct workingset_range want[] = { { 0, 3 },
							{ 10, 1 },
							{ 200, 1 } };
	static const int touched[] = { 0, 1, 2, 10, 200 };
	size_t size = 1 << 20;
	char path[PATH_MAX];
	uint64_t pages;
	char *mem;

	mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(mem, MAP_FAILED);
	cr_assert_eq(madvise(mem, size, MADV_NOHUGEPAGE), 0);
	for (size_t i = 0; i < sizeof(touched) / sizeof(touched[0]); i++)
		mem[touched[i] * PAGE] = 1;
	cr_assert_eq(pagemap_entry(mem + 3 * PAGE) & PM_PRESENT, 0);
	cr_assert_eq(pagemap_entry(mem + 199 * PAGE) & PM_PRESENT, 0);

	in_dir(path, "workingset.bin");
	write_raw(path, "stale", 5);
	cr_assert_eq(workingset_record(mem, size, path, -1, &pages, err,
				       sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(pages, 5);
	check_ws_file(path, size / PAGE, want, 3);
	struct stat st;

	cr_assert_eq(stat(path, &st), 0);
	cr_expect_eq(st.st_mode & 07777, 0600, "workingset.bin is %o",
		     st.st_mode & 07777);
	cr_assert_eq(dir_entries(), 1, "temporary file left behind");
	munmap(mem, size);
}

Test(workingset, record_untouched_memory_is_empty)
{
	size_t size = 64 * PAGE;
	char path[PATH_MAX];
	uint64_t pages = 1;
	char *mem;

	mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(mem, MAP_FAILED);
	in_dir(path, "workingset.bin");
	cr_assert_eq(workingset_record(mem, size, path, -1, &pages, err,
				       sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(pages, 0);
	check_ws_file(path, 64, NULL, 0);
	munmap(mem, size);
}

Test(workingset, record_rejects_partial_pages)
{
	char path[PATH_MAX];
	uint64_t pages;
	char *mem;

	mem = mmap(NULL, 2 * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(mem, MAP_FAILED);
	in_dir(path, "workingset.bin");
	cr_assert_eq(workingset_record(mem, PAGE + 1, path, -1, &pages, err,
				       sizeof(err)),
		     -EINVAL);
	cr_assert_eq(dir_entries(), 0);
	munmap(mem, 2 * PAGE);
}

/* A restore: record what one mapping touched, prefetch into the next. */
Test(workingset, prefetch_maps_exactly_the_recorded_pages)
{
	/* Whole 16-page blocks; see map_aligned(). */
	static const struct workingset_range want[] = {
		{ 0, 16 }, { 48, 32 }, { 128, 320 }, { 1008, 16 }
	};
	const uint64_t nr_pages = 1024, size = nr_pages * PAGE;
	char mem_path[PATH_MAX], ws_path[PATH_MAX];
	uint64_t pages, total = 0;
	bool in_ws[1024] = { 0 };
	char *mem;
	int fd;

	in_dir(mem_path, "memory.img");
	in_dir(ws_path, "workingset.bin");
	make_memfile(mem_path, nr_pages);
	fd = open(mem_path, O_RDONLY);
	cr_assert_geq(fd, 0);
	for (size_t i = 0; i < 4; i++) {
		for (uint64_t p = 0; p < want[i].nr_pages; p++)
			in_ws[want[i].first_page + p] = true;
		total += want[i].nr_pages;
	}

	mem = map_aligned(fd, size);
	for (uint64_t p = 0; p < nr_pages; p++)
		if (in_ws[p])
			(void)*(volatile char *)(mem + p * PAGE);
	cr_assert_eq(workingset_record(mem, size, ws_path, -1, &pages, err,
				       sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(pages, total);
	check_ws_file(ws_path, nr_pages, want, 4);
	munmap(mem, size);

	mem = map_aligned(fd, size);
	for (uint64_t p = 0; p < nr_pages; p++)
		cr_assert_eq(pagemap_entry(mem + p * PAGE) & PM_PRESENT, 0);
	cr_assert_eq(workingset_prefetch(fd, mem, size, ws_path, &pages, err,
					 sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(pages, total);
	for (uint64_t p = 0; p < nr_pages; p++) {
		uint64_t e = pagemap_entry(mem + p * PAGE);

		cr_assert_eq(!!(e & PM_PRESENT), in_ws[p],
			     "page %llu present: %d", (unsigned long long)p,
			     !!(e & PM_PRESENT));
		/* The page-cache page itself, not a private copy. */
		if (in_ws[p])
			cr_assert(e & PM_FILE, "page %llu was copied",
				  (unsigned long long)p);
	}
	for (uint64_t p = 0; p < nr_pages; p++) {
		const uint64_t *w = (const uint64_t *)(mem + p * PAGE);

		for (size_t i = 0; i < PAGE / sizeof(*w); i++)
			cr_assert_eq(w[i], pattern(p, i),
				     "page %llu word %zu differs",
				     (unsigned long long)p, i);
	}
	/* The check above can tell: a written page is a private copy. */
	mem[0] = 1;
	cr_assert_eq(pagemap_entry(mem) & PM_FILE, 0);
	munmap(mem, size);
	close(fd);
}

/*
 * The io_uring reads on their own: the memory is anonymous, so only the
 * reads of @fd can bring the file's pages into the page cache.  More
 * ranges than the ring holds, and ranges longer than one read.
 */
Test(workingset, prefetch_reads_the_ranges_into_the_page_cache)
{
	const uint64_t nr_pages = 4096, size = nr_pages * PAGE;
	char mem_path[PATH_MAX], ws_path[PATH_MAX];
	struct workingset_range r[300];
	unsigned char vec[4096];
	bool in_ws[4096] = { 0 };
	uint64_t pages, total = 0;
	size_t nr = 0;
	char *mem, *map;
	int fd;

	for (uint64_t p = 0; p < 768; p += 3)
		r[nr++] = (struct workingset_range){ p, 1 };
	r[nr++] = (struct workingset_range){ 1000, 700 };
	r[nr++] = (struct workingset_range){ 4095, 1 };
	for (size_t i = 0; i < nr; i++) {
		for (uint64_t p = 0; p < r[i].nr_pages; p++)
			in_ws[r[i].first_page + p] = true;
		total += r[i].nr_pages;
	}
	in_dir(mem_path, "memory.img");
	in_dir(ws_path, "workingset.bin");
	make_memfile(mem_path, nr_pages);
	write_ws(ws_path, nr_pages, r, nr);

	fd = open(mem_path, O_RDONLY);
	cr_assert_geq(fd, 0);
	/* Exactly the pages asked for: no readahead around them. */
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM), 0);
	cr_assert_eq(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
	map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
	cr_assert_neq(map, MAP_FAILED);
	cr_assert_eq(mincore(map, size, vec), 0);
	for (uint64_t p = 0; p < nr_pages; p++)
		if (vec[p] & 1) {
			cr_log_warn("%s: cannot evict it from the page cache; "
				    "skipping",
				    mem_path);
			goto out;
		}

	mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(mem, MAP_FAILED);
	cr_assert_eq(workingset_prefetch(fd, mem, size, ws_path, &pages, err,
					 sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(pages, total);
	cr_assert_eq(mincore(map, size, vec), 0);
	for (uint64_t p = 0; p < nr_pages; p++)
		cr_assert_eq(vec[p] & 1, in_ws[p], "page %llu cached: %d",
			     (unsigned long long)p, vec[p] & 1);
	munmap(mem, size);
out:
	munmap(map, size);
	close(fd);
}

Test(workingset, prefetch_reports_failed_reads)
{
	static const struct workingset_range r[] = { { 2, 3 } };
	char mem_path[PATH_MAX], ws_path[PATH_MAX];
	const char *msg;
	uint64_t pages;
	char *mem;
	int fd;

	in_dir(mem_path, "memory.img");
	in_dir(ws_path, "workingset.bin");
	make_memfile(mem_path, 16);
	write_ws(ws_path, 16, r, 1);
	fd = open(mem_path, O_WRONLY);
	cr_assert_geq(fd, 0);
	mem = mmap(NULL, 16 * PAGE, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(mem, MAP_FAILED);
	cr_assert_eq(
		prefetch_capture(fd, mem, 16 * PAGE, ws_path, &pages, &msg),
		-EBADF);
	cr_assert_not_null(strstr(msg, ws_path), "message: %s", msg);
	cr_assert_not_null(strstr(msg, strerror(EBADF)), "message: %s", msg);
	cr_assert_not_null(strstr(msg, "offset 8192"), "message: %s", msg);
	munmap(mem, 16 * PAGE);
	close(fd);
}

Test(workingset, prefetch_missing_file_is_enoent)
{
	char path[PATH_MAX];
	const char *msg;
	uint64_t pages = 1;

	in_dir(path, "workingset.bin");
	cr_assert_eq(prefetch_capture(-1, NULL, 16 * PAGE, path, &pages, &msg),
		     -ENOENT);
	cr_assert_str_empty(msg);
}

Test(workingset, prefetch_empty_working_set)
{
	char path[PATH_MAX];
	const char *msg;
	uint64_t pages = 1;

	in_dir(path, "workingset.bin");
	write_ws(path, 16, NULL, 0);
	cr_assert_eq(prefetch_capture(-1, NULL, 16 * PAGE, path, &pages, &msg),
		     0);
	cr_assert_eq(pages, 0);
	cr_assert_str_empty(msg);
}

/*
 * Each file is refused before the memory file or the mapping is used
 * (neither exists here), with a message naming the file and @problem.
 */
static void expect_malformed(const void *buf, size_t len, const char *problem)
{
	char path[PATH_MAX];
	const char *msg;
	uint64_t pages;

	in_dir(path, "workingset.bin");
	write_raw(path, buf, len);
	cr_assert_eq(
		prefetch_capture(-1, NULL, 1024 * PAGE, path, &pages, &msg),
		-EINVAL);
	cr_assert_not_null(strstr(msg, path), "message: %s", msg);
	cr_assert_not_null(strstr(msg, problem), "message: %s", msg);
}

struct bad_file {
	struct workingset_header h;
	struct workingset_range r[3];
};

static struct bad_file good_file(void)
{
	struct bad_file f = {
		.h = { .version = WORKINGSET_VERSION,
		       .page_size = PAGE,
		       .page_count = 1024,
		       .nr_ranges = 3 },
		.r = { { 0, 4 }, { 10, 1 }, { 1000, 24 } },
	};

	memcpy(f.h.magic, WORKINGSET_MAGIC, sizeof(f.h.magic));
	return f;
}

Test(workingset, malformed_header)
{
	struct bad_file f;

	f = good_file();
	memcpy(f.h.magic, "THAWPGHS", 8);
	expect_malformed(&f, sizeof(f), "bad magic");
	f = good_file();
	f.h.version = 2;
	expect_malformed(&f, sizeof(f), "version 2");
	f = good_file();
	f.h.page_size = 8192;
	expect_malformed(&f, sizeof(f), "page size 8192");
	f = good_file();
	f.h.page_count = 1023;
	expect_malformed(&f, sizeof(f), "describes 1023 pages");
}

Test(workingset, malformed_length)
{
	struct bad_file f = good_file();
	char longer[sizeof(f) + 8] = { 0 };

	expect_malformed(&f, 10, "truncated");
	expect_malformed(&f, sizeof(f) - sizeof(f.r[0]), "lists 3 ranges");
	expect_malformed(&f, sizeof(f) - 1, "lists 3 ranges");
	memcpy(longer, &f, sizeof(f));
	expect_malformed(longer, sizeof(longer), "lists 3 ranges");
}

Test(workingset, malformed_ranges)
{
	struct bad_file f;

	f = good_file();
	f.r[1] = (struct workingset_range){ 3, 2 };
	expect_malformed(&f, sizeof(f), "range 1 (page 3) overlaps");
	f = good_file();
	f.r[2] = (struct workingset_range){ 5, 1 };
	expect_malformed(&f, sizeof(f), "range 2 (page 5) overlaps");
	f = good_file();
	f.r[1].nr_pages = 0;
	expect_malformed(&f, sizeof(f), "range 1 is empty");
	f = good_file();
	f.r[2].nr_pages = 25;
	expect_malformed(&f, sizeof(f), "range 2 (25 pages from page 1000)");
	f = good_file();
	f.r[2] = (struct workingset_range){ UINT64_MAX, 2 };
	expect_malformed(&f, sizeof(f), "ends beyond");
}
