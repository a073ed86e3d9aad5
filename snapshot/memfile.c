// SPDX-License-Identifier: Apache-2.0
/*
 * memfile.c - see memfile.h.  Files are walked in 1 MiB chunks (256 pages,
 * 2 KiB of hashes), so no operation needs memory in proportion to the guest.
 */
#include "snapshot/memfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/errbuf.h"
#include "snapshot/preopen.h"
#include "common/io.h"

#define CHUNK_PAGES 256
#define CHUNK_BYTES (CHUNK_PAGES * MEMFILE_PAGE_SIZE)
#define HASHES_OFFSET sizeof(struct memfile_hashes_header)

static const uint8_t zero_page[MEMFILE_PAGE_SIZE];

static bool page_is_zero(const uint8_t *page)
{
	return !memcmp(page, zero_page, MEMFILE_PAGE_SIZE);
}

static const char *read_error(int ret)
{
	return ret == -EIO ? "file ended early" : strerror(-ret);
}

/* Pages in the chunk that starts at page @first of @pages. */
static uint64_t chunk_pages(uint64_t first, uint64_t pages)
{
	return pages - first < CHUNK_PAGES ? pages - first : CHUNK_PAGES;
}

/* Writes pages [@first, @end) of @mem to the same place in @fd. */
static int write_run(int fd, const uint8_t *mem, uint64_t first, uint64_t end,
		     const char *path, char *err, size_t errlen)
{
	int ret;

	if (first == end)
		return 0;
	ret = pwrite_full(fd, mem + first * MEMFILE_PAGE_SIZE,
			  (end - first) * MEMFILE_PAGE_SIZE,
			  first * MEMFILE_PAGE_SIZE);
	if (ret) {
		errbuf_set(err, errlen, "memory file %s: cannot write: %s",
			   path, strerror(-ret));
		return ret;
	}
	return 0;
}

/*
 * Writes the non-zero pages of @mem to @fd, one pwrite per run of them, and
 * their hashes behind the header of @hfd; the holes between runs stay
 * unallocated since @fd starts empty.
 */
static int write_pages(const uint8_t *mem, uint64_t pages, int fd, int hfd,
		       uint64_t *root, const char *path,
		       const char *hashes_path, char *err, size_t errlen)
{
	const uint64_t zero_hash = XXH3_64bits(zero_page, MEMFILE_PAGE_SIZE);
	XXH3_state_t *state = XXH3_createState();
	uint64_t hashes[CHUNK_PAGES];
	uint64_t run = 0; /* first page of the pending non-zero run */
	int ret = -ENOMEM;

	if (!state || XXH3_64bits_reset(state) != XXH_OK) {
		errbuf_set(err, errlen, "page hashes %s: cannot set up hashing",
			   hashes_path);
		goto out;
	}
	for (uint64_t first = 0; first < pages; first += CHUNK_PAGES) {
		uint64_t n = chunk_pages(first, pages);

		for (uint64_t i = 0; i < n; i++) {
			uint64_t page = first + i;
			const uint8_t *p = mem + page * MEMFILE_PAGE_SIZE;

			if (!page_is_zero(p)) {
				hashes[i] = XXH3_64bits(p, MEMFILE_PAGE_SIZE);
				continue;
			}
			hashes[i] = zero_hash;
			ret = write_run(fd, mem, run, page, path, err, errlen);
			if (ret)
				goto out;
			run = page + 1;
		}
		ret = pwrite_full(hfd, hashes, n * sizeof(hashes[0]),
				  HASHES_OFFSET + first * sizeof(hashes[0]));
		if (ret) {
			errbuf_set(err, errlen,
				   "page hashes %s: cannot write: %s",
				   hashes_path, strerror(-ret));
			goto out;
		}
		XXH3_64bits_update(state, hashes, n * sizeof(hashes[0]));
	}
	ret = write_run(fd, mem, run, pages, path, err, errlen);
	if (ret)
		goto out;
	*root = XXH3_64bits_digest(state);
out:
	XXH3_freeState(state);
	return ret;
}

/*
 * Readies @err for a message that follows another (@after: then both are
 * worth reading, joined by "; ") or stands alone; errbuf_append() writes it.
 */
static void begin_message(char *err, size_t errlen, bool after)
{
	if (after)
		errbuf_append(err, errlen, "; ");
	else
		errbuf_set(err, errlen, "%s", "");
}

/*
 * fsync and close @fd, reporting either failing; the fd is gone after.  The
 * message follows the one already in @err when @append, so a second file's
 * failure does not hide the first's.
 */
static int finish(int fd, const char *what, const char *path, bool append,
		  char *err, size_t errlen)
{
	int e = fsync(fd) ? errno : 0;

	if (close(fd) && !e)
		e = errno;
	if (!e)
		return 0;
	begin_message(err, errlen, append);
	errbuf_append(err, errlen, "%s %s: cannot write: %s", what, path,
		      strerror(e));
	return -e;
}

int memfile_write_fd(const void *mem, uint64_t size, int fd, int hfd,
		     const char *path, const char *hashes_path, uint64_t *root,
		     char *err, size_t errlen)
{
	struct memfile_hashes_header h = {
		.version = MEMFILE_HASHES_VERSION,
		.page_size = MEMFILE_PAGE_SIZE,
		.page_count = size / MEMFILE_PAGE_SIZE,
	};
	int ret;

	if (size % MEMFILE_PAGE_SIZE) {
		errbuf_set(err, errlen,
			   "memory file %s: size %" PRIu64
			   " is not a multiple of "
			   "the %u-byte page",
			   path, size, MEMFILE_PAGE_SIZE);
		return -EINVAL;
	}
	memcpy(h.magic, MEMFILE_HASHES_MAGIC, sizeof(h.magic));
	ret = write_pages(mem, h.page_count, fd, hfd, &h.root, path,
			  hashes_path, err, errlen);
	if (ret)
		return ret;
	/* Trailing zero pages were never written: extend over them. */
	if (ftruncate(fd, size)) {
		ret = -errno;
		errbuf_set(err, errlen,
			   "memory file %s: cannot extend to %" PRIu64
			   " bytes: %s",
			   path, size, strerror(-ret));
		return ret;
	}
	ret = pwrite_full(hfd, &h, sizeof(h), 0);
	if (ret) {
		errbuf_set(err, errlen, "page hashes %s: cannot write: %s",
			   hashes_path, strerror(-ret));
		return ret;
	}
	*root = h.root;
	return 0;
}

int memfile_write(const void *mem, uint64_t size, const char *path,
		  const char *hashes_path, uint64_t *root, char *err,
		  size_t errlen)
{
	const int flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC;
	uint64_t written;
	int fd, hfd, ret;

	/* Guest memory, its secrets included: the owner's alone. */
	fd = open(path, flags, 0600);
	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, errlen, "memory file %s: cannot create: %s",
			   path, strerror(-ret));
		return ret;
	}
	hfd = open(hashes_path, flags, 0600);
	if (hfd < 0) {
		ret = -errno;
		errbuf_set(err, errlen, "page hashes %s: cannot create: %s",
			   hashes_path, strerror(-ret));
		close(fd);
		return ret;
	}
	ret = memfile_write_fd(mem, size, fd, hfd, path, hashes_path, &written,
			       err, errlen);
	if (ret) {
		close(fd);
		close(hfd);
		return ret;
	}
	/* Both, even when the first fails: each closes its descriptor. */
	ret = finish(fd, "memory file", path, false, err, errlen);
	int hret =
		finish(hfd, "page hashes", hashes_path, ret != 0, err, errlen);

	if (ret || hret)
		return ret ? ret : hret;
	*root = written;
	return 0;
}

/*
 * Opens @path, a @what, to read and stats it: the fd, or a negative errno
 * after a message.
 */
static int open_stat(const char *what, const char *path, struct stat *st,
		     char *err, size_t errlen)
{
	int fd = snapshot_file_open(path, O_RDONLY | O_CLOEXEC);
	int e;

	if (fd < 0) {
		e = errno;
		errbuf_set(err, errlen, "%s %s: cannot open: %s", what, path,
			   strerror(e));
		return -e;
	}
	if (fstat(fd, st)) {
		e = errno;
		errbuf_set(err, errlen, "%s %s: cannot stat: %s", what, path,
			   strerror(e));
		close(fd);
		return -e;
	}
	return fd;
}

/*
 * Opens @path and checks its header and size against a memory file of
 * @size bytes whose root is @root.  Returns the descriptor with the header
 * in *h; or, after a message, -EINVAL when it does not match, another
 * negative errno when it cannot be read (memfile_verify() tells the two
 * apart).
 */
static int open_hashes(const char *path, uint64_t size, uint64_t root,
		       struct memfile_hashes_header *h, char *err,
		       size_t errlen)
{
	uint64_t pages = size / MEMFILE_PAGE_SIZE;
	struct stat st;
	int fd = open_stat("page hashes", path, &st, err, errlen);
	int ret;

	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size < sizeof(*h)) {
		errbuf_set(
			err, errlen,
			"page hashes %s: %lld bytes, shorter than the %zu-byte "
			"header (truncated)",
			path, (long long)st.st_size, sizeof(*h));
		goto mismatch;
	}
	ret = pread_full(fd, h, sizeof(*h), 0);
	if (ret) {
		errbuf_set(err, errlen, "page hashes %s: cannot read: %s", path,
			   read_error(ret));
		close(fd);
		return ret;
	}
	if (memcmp(h->magic, MEMFILE_HASHES_MAGIC, sizeof(h->magic))) {
		errbuf_set(err, errlen,
			   "page hashes %s: bad magic (not a thaw page hash "
			   "file)",
			   path);
		goto mismatch;
	}
	if (h->version != MEMFILE_HASHES_VERSION) {
		errbuf_set(err, errlen,
			   "page hashes %s: version %u, this thaw reads %u",
			   path, h->version, MEMFILE_HASHES_VERSION);
		goto mismatch;
	}
	if (h->page_size != MEMFILE_PAGE_SIZE) {
		errbuf_set(err, errlen,
			   "page hashes %s: page_size %u, expected %u", path,
			   h->page_size, MEMFILE_PAGE_SIZE);
		goto mismatch;
	}
	if (h->page_count != pages) {
		errbuf_set(err, errlen,
			   "page hashes %s: page_count %" PRIu64 ", but the "
			   "snapshot has %" PRIu64 " pages",
			   path, h->page_count, pages);
		goto mismatch;
	}
	if ((uint64_t)st.st_size != sizeof(*h) + pages * sizeof(uint64_t)) {
		errbuf_set(
			err, errlen,
			"page hashes %s: %lld bytes, expected %zu for %" PRIu64
			" pages (truncated?)",
			path, (long long)st.st_size,
			sizeof(*h) + pages * sizeof(uint64_t), pages);
		goto mismatch;
	}
	if (h->root != root) {
		errbuf_set(err, errlen,
			   "page hashes %s: root %#" PRIx64 ", the snapshot "
			   "records %#" PRIx64 "",
			   path, h->root, root);
		goto mismatch;
	}
	return fd;

mismatch:
	close(fd);
	return -EINVAL;
}

static void report_root(const char *path, uint64_t recorded, uint64_t actual,
			char *err, size_t errlen)
{
	errbuf_set(err, errlen,
		   "page hashes %s: hash array hashes to %#" PRIx64 ", not its "
		   "root %#" PRIx64 " (file corrupted)",
		   path, actual, recorded);
}

/*
 * Reads the hashes of pages [@first, @first + @n) from @hfd into @hashes
 * and adds them to the root being computed in @root; 0, or a negative
 * errno after a message.
 */
static int read_hashes(int hfd, const char *path, uint64_t first, uint64_t n,
		       uint64_t *hashes, XXH3_state_t *root, char *err,
		       size_t errlen)
{
	int ret = pread_full(hfd, hashes, n * sizeof(*hashes),
			     HASHES_OFFSET + first * sizeof(*hashes));

	if (ret) {
		errbuf_set(err, errlen, "page hashes %s: cannot read: %s", path,
			   read_error(ret));
		return ret;
	}
	XXH3_64bits_update(root, hashes, n * sizeof(*hashes));
	return 0;
}

/*
 * Recomputes the root of the hashes in @hfd; 0, or a negative errno after a
 * message (-EINVAL: it is not the header's root).
 */
static int check_root(int hfd, const char *path,
		      const struct memfile_hashes_header *h, char *err,
		      size_t errlen)
{
	XXH3_state_t *state = XXH3_createState();
	uint64_t hashes[CHUNK_PAGES];
	int ret = -ENOMEM;

	if (!state || XXH3_64bits_reset(state) != XXH_OK) {
		errbuf_set(err, errlen, "page hashes %s: cannot set up hashing",
			   path);
		goto out;
	}
	for (uint64_t first = 0; first < h->page_count; first += CHUNK_PAGES) {
		ret = read_hashes(hfd, path, first,
				  chunk_pages(first, h->page_count), hashes,
				  state, err, errlen);
		if (ret)
			goto out;
	}
	uint64_t actual = XXH3_64bits_digest(state);

	ret = 0;
	if (actual != h->root) {
		report_root(path, h->root, actual, err, errlen);
		ret = -EINVAL;
	}
out:
	XXH3_freeState(state);
	return ret;
}

/* Opens @path and checks it is @size bytes; fd or -errno as open_hashes(). */
static int open_memory(const char *path, uint64_t size, char *err,
		       size_t errlen)
{
	struct stat st;
	int fd = open_stat("memory file", path, &st, err, errlen);

	if (fd < 0)
		return fd;
	if ((uint64_t)st.st_size != size || size % MEMFILE_PAGE_SIZE) {
		errbuf_set(
			err, errlen,
			"memory file %s: %lld bytes, the snapshot says %" PRIu64
			" (whole %u-byte pages)",
			path, (long long)st.st_size, size, MEMFILE_PAGE_SIZE);
		close(fd);
		return -EINVAL;
	}
	return fd;
}

void *memfile_map(const char *path, const char *hashes_path, uint64_t size,
		  uint64_t root, int *fd, char *err, size_t errlen)
{
	struct memfile_hashes_header h;
	int mfd, hfd;

	mfd = open_memory(path, size, err, errlen);
	if (mfd < 0)
		return NULL;
	hfd = open_hashes(hashes_path, size, root, &h, err, errlen);
	if (hfd < 0)
		goto fail;
	int ret = check_root(hfd, hashes_path, &h, err, errlen);

	close(hfd);
	if (ret)
		goto fail;
	/*
	 * NORESERVE: a clone commits memory only for the pages its guest
	 * writes, not for the whole file up front.
	 */
	void *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_NORESERVE, mfd, 0);

	if (mem == MAP_FAILED) {
		errbuf_set(err, errlen,
			   "memory file %s: cannot map %" PRIu64 " bytes: %s",
			   path, size, strerror(errno));
		goto fail;
	}
	*fd = mfd;
	return mem;

fail:
	close(mfd);
	return NULL;
}

struct verify_result {
	uint64_t bad_pages;
	uint64_t first_bad;
	XXH3_state_t *state; /* root of the hashes read so far */
};

/* Compares pages [first, first + n) of @mfd with their hashes in @hfd. */
static int verify_chunk(int mfd, int hfd, uint64_t first, uint64_t n,
			uint8_t *buf, struct verify_result *res,
			const char *path, const char *hashes_path, char *err,
			size_t errlen)
{
	uint64_t hashes[CHUNK_PAGES];
	int ret;

	ret = pread_full(mfd, buf, n * MEMFILE_PAGE_SIZE,
			 first * MEMFILE_PAGE_SIZE);
	if (ret) {
		errbuf_set(err, errlen, "memory file %s: cannot read: %s", path,
			   read_error(ret));
		return ret;
	}
	ret = read_hashes(hfd, hashes_path, first, n, hashes, res->state, err,
			  errlen);
	if (ret)
		return ret;
	for (uint64_t i = 0; i < n; i++) {
		if (XXH3_64bits(buf + i * MEMFILE_PAGE_SIZE,
				MEMFILE_PAGE_SIZE) == hashes[i])
			continue;
		if (!res->bad_pages++)
			res->first_bad = first + i;
	}
	return 0;
}

int memfile_verify(const char *path, const char *hashes_path, uint64_t size,
		   uint64_t root, char *err, size_t errlen)
{
	struct verify_result res = { 0 };
	struct memfile_hashes_header h;
	uint8_t *buf = NULL;
	int mfd, hfd = -1, ret = -ENOMEM;

	/* -EINVAL from these: the files do not match, an answer (1). */
	mfd = open_memory(path, size, err, errlen);
	if (mfd < 0)
		return mfd == -EINVAL ? 1 : mfd;
	hfd = open_hashes(hashes_path, size, root, &h, err, errlen);
	if (hfd < 0) {
		ret = hfd == -EINVAL ? 1 : hfd;
		goto out;
	}
	buf = malloc(CHUNK_BYTES);
	res.state = XXH3_createState();
	if (!buf || !res.state || XXH3_64bits_reset(res.state) != XXH_OK) {
		errbuf_set(err, errlen, "memory file %s: out of memory", path);
		goto out;
	}
	for (uint64_t first = 0; first < h.page_count; first += CHUNK_PAGES) {
		uint64_t n = chunk_pages(first, h.page_count);

		ret = verify_chunk(mfd, hfd, first, n, buf, &res, path,
				   hashes_path, err, errlen);
		if (ret)
			goto out;
	}
	ret = 0;
	uint64_t actual = XXH3_64bits_digest(res.state);

	if (actual != h.root) {
		report_root(hashes_path, h.root, actual, err, errlen);
		ret = 1;
	}
	if (res.bad_pages) {
		uint64_t off = res.first_bad * MEMFILE_PAGE_SIZE;

		/* After the root's message, if any. */
		begin_message(err, errlen, ret);
		errbuf_append(err, errlen,
			      "memory file %s: %" PRIu64 " of %" PRIu64
			      " pages do "
			      "not match %s; the first is page %" PRIu64
			      " (file offset %#" PRIx64 ")",
			      path, res.bad_pages, h.page_count, hashes_path,
			      res.first_bad, off);
		ret = 1;
	}
out:
	XXH3_freeState(res.state);
	free(buf);
	if (hfd >= 0)
		close(hfd);
	close(mfd);
	return ret;
}
