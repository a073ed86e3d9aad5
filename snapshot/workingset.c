// SPDX-License-Identifier: Apache-2.0
/*
 * workingset.c - see workingset.h.
 */
#include "snapshot/workingset.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "snapshot/preopen.h"
#include "common/io.h"
#include "snapshot/pagemap.h"

/* Linux 5.14; older C libraries do not know it. */
#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif

#define WS_PAGE_SIZE 4096

/*
 * Enough reads in flight to keep a disk's queue busy; each at most 512 KiB,
 * so one large range still becomes several parallel reads.
 */
#define RING_DEPTH 64
#define READ_MAX_PAGES 128

_Static_assert(sizeof(struct workingset_header) == 32,
	       "workingset.bin header is 32 bytes");
_Static_assert(sizeof(struct workingset_range) == 16,
	       "workingset.bin ranges are 16 bytes");

/*
 * The prefetch reads only pull pages into the page cache and their data is
 * thrown away, so every read in flight shares this one buffer, whatever it
 * ends up holding.  It is static so that it outlives any read the kernel is
 * still finishing when a ring fails and is torn down under it.
 */
static char scratch[READ_MAX_PAGES * WS_PAGE_SIZE];

struct range_list {
	struct workingset_range *r;
	size_t nr, cap;
	uint64_t pages;
	const char *path; /* for messages */
	char *err;
	size_t errlen;
};

/* pagemap_runs()'s @run: one more range (runs come apart and in order). */
static int range_add(void *arg, uint64_t first, uint64_t n)
{
	struct range_list *l = arg;

	if (l->nr == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 64;
		void *r = realloc(l->r, cap * sizeof(*l->r));

		if (!r) {
			errbuf_set(l->err, l->errlen, "%s: out of memory",
				   l->path);
			return -ENOMEM;
		}
		l->r = r;
		l->cap = cap;
	}
	l->r[l->nr++] =
		(struct workingset_range){ .first_page = first, .nr_pages = n };
	l->pages += n;
	return 0;
}

/* Makes the rename itself durable, not just the file's contents. */
static int fsync_parent(const char *path, char *err, size_t errlen)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int fd, ret = 0;

	if (!slash)
		dir = strdup(".");
	else if (slash == path)
		dir = strdup("/");
	else
		dir = strndup(path, slash - path);
	if (!dir) {
		errbuf_set(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd)) {
		ret = -errno;
		errbuf_set(err, errlen, "%s: cannot sync directory %s: %s",
			   path, dir, strerror(-ret));
	}
	if (fd >= 0)
		close(fd);
	free(dir);
	return ret;
}

static int write_file(const char *path, const struct workingset_header *h,
		      const struct workingset_range *r, char *err,
		      size_t errlen)
{
	char *tmp;
	int fd, ret;

	if (asprintf(&tmp, "%s.tmp.%d", path, (int)getpid()) < 0) {
		errbuf_set(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, errlen, "%s: cannot create: %s", tmp,
			   strerror(-ret));
		free(tmp);
		return ret;
	}
	ret = write_full(fd, h, sizeof(*h));
	if (!ret)
		ret = write_full(fd, r, h->nr_ranges * sizeof(*r));
	if (!ret && fsync(fd))
		ret = -errno;
	if (ret) {
		errbuf_set(err, errlen, "%s: cannot write: %s", tmp,
			   strerror(-ret));
		goto fail;
	}
	if (close(fd)) {
		fd = -1;
		ret = -errno;
		errbuf_set(err, errlen, "%s: cannot write: %s", tmp,
			   strerror(-ret));
		goto fail;
	}
	fd = -1;
	if (rename(tmp, path)) {
		ret = -errno;
		errbuf_set(err, errlen, "%s: cannot rename %s over it: %s",
			   path, tmp, strerror(-ret));
		goto fail;
	}
	free(tmp);
	return fsync_parent(path, err, errlen);
fail:
	if (fd >= 0)
		close(fd);
	unlink(tmp);
	free(tmp);
	return ret;
}

int workingset_record(const void *mem, uint64_t size, const char *path,
		      int pagemap_fd, uint64_t *pages, char *err, size_t errlen)
{
	struct workingset_header h = {
		.version = WORKINGSET_VERSION,
		.page_size = WS_PAGE_SIZE,
		.page_count = size / WS_PAGE_SIZE,
	};
	struct range_list l = { .path = path, .err = err, .errlen = errlen };
	int ret;

	memcpy(h.magic, WORKINGSET_MAGIC, sizeof(h.magic));
	*pages = 0;
	if (size % WS_PAGE_SIZE || (uintptr_t)mem % WS_PAGE_SIZE) {
		errbuf_set(err, errlen,
			   "%s: memory at %p, %" PRIu64
			   " bytes, is not whole %d-byte pages",
			   path, mem, size, WS_PAGE_SIZE);
		return -EINVAL;
	}
	ret = pagemap_runs(mem, h.page_count, pagemap_fd, PAGEMAP_TOUCHED,
			   range_add, &l, path, err, errlen);
	*pages = l.pages;
	if (!ret) {
		h.nr_ranges = l.nr;
		ret = write_file(path, &h, l.r, err, errlen);
	}
	free(l.r);
	return ret;
}

static int check_ranges(const char *path, const struct workingset_range *r,
			uint64_t nr, uint64_t page_count, char *err,
			size_t errlen)
{
	uint64_t i, end = 0;

	for (i = 0; i < nr; i++) {
		if (!r[i].nr_pages) {
			errbuf_set(err, errlen,
				   "%s: range %" PRIu64 " is empty", path, i);
			return -EINVAL;
		}
		if (r[i].first_page < end) {
			errbuf_set(err, errlen,
				   "%s: range %" PRIu64 " (page %" PRIu64
				   ") overlaps or precedes the range before it",
				   path, i, r[i].first_page);
			return -EINVAL;
		}
		if (r[i].first_page > page_count ||
		    r[i].nr_pages > page_count - r[i].first_page) {
			errbuf_set(err, errlen,
				   "%s: range %" PRIu64 " (%" PRIu64
				   " pages from page %" PRIu64
				   ") ends beyond the memory file's %" PRIu64
				   " pages",
				   path, i, r[i].nr_pages, r[i].first_page,
				   page_count);
			return -EINVAL;
		}
		end = r[i].first_page + r[i].nr_pages;
	}
	return 0;
}

/*
 * Reads and checks @path; *r gets the ranges (NULL when there are none)
 * and *nr their number.  Returns as workingset_prefetch().
 */
static int load(const char *path, uint64_t size, struct workingset_range **r,
		uint64_t *nr, char *err, size_t errlen)
{
	struct workingset_header h;
	struct stat st;
	uint64_t body;
	int fd, ret = -EINVAL;

	*r = NULL;
	*nr = 0;
	/* Whoever planted something else there gets an error, not a hang
	 * on a FIFO or a read through a link. */
	fd = snapshot_file_open(path,
				O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
	if (fd < 0 && errno == ENOENT)
		return -ENOENT;
	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, errlen, "%s: cannot open: %s", path,
			   strerror(-ret));
		return ret;
	}
	if (fstat(fd, &st)) {
		ret = -errno;
		errbuf_set(err, errlen, "%s: cannot stat: %s", path,
			   strerror(-ret));
		goto fail;
	}
	if (!S_ISREG(st.st_mode)) {
		errbuf_set(err, errlen, "%s: not a regular file", path);
		goto fail;
	}
	if (st.st_size < (off_t)sizeof(h)) {
		errbuf_set(err, errlen,
			   "%s: truncated: %lld bytes, header is %zu", path,
			   (long long)st.st_size, sizeof(h));
		goto fail;
	}
	ret = pread_full(fd, &h, sizeof(h), 0);
	if (ret) {
		errbuf_set(err, errlen, "%s: cannot read: %s", path,
			   ret == -EIO ? "file shrank" : strerror(-ret));
		goto fail;
	}
	ret = -EINVAL;
	if (memcmp(h.magic, WORKINGSET_MAGIC, sizeof(h.magic))) {
		errbuf_set(err, errlen,
			   "%s: not a working set file (bad magic)", path);
		goto fail;
	}
	if (h.version != WORKINGSET_VERSION) {
		errbuf_set(err, errlen, "%s: version %" PRIu32 ", expected %d",
			   path, h.version, WORKINGSET_VERSION);
		goto fail;
	}
	if (h.page_size != WS_PAGE_SIZE) {
		errbuf_set(err, errlen,
			   "%s: page size %" PRIu32 ", expected %d", path,
			   h.page_size, WS_PAGE_SIZE);
		goto fail;
	}
	if (size % WS_PAGE_SIZE || h.page_count != size / WS_PAGE_SIZE) {
		errbuf_set(err, errlen,
			   "%s: describes %" PRIu64
			   " pages, the memory file is %" PRIu64 " bytes",
			   path, h.page_count, size);
		goto fail;
	}
	/* Disjoint ranges of at least a page each: more cannot be valid,
	 * and a huge file must not cost a huge allocation first. */
	if (h.nr_ranges > h.page_count) {
		errbuf_set(err, errlen,
			   "%s: %" PRIu64 " ranges for %" PRIu64 " pages", path,
			   h.nr_ranges, h.page_count);
		goto fail;
	}
	/* Divided rather than multiplied: nr_ranges is untrusted. */
	body = st.st_size - sizeof(h);
	if (body % sizeof(**r) || body / sizeof(**r) != h.nr_ranges) {
		errbuf_set(err, errlen,
			   "%s: %lld bytes, but the header lists %" PRIu64
			   " ranges",
			   path, (long long)st.st_size, h.nr_ranges);
		goto fail;
	}
	if (body) {
		*r = malloc(body);
		if (!*r) {
			ret = -ENOMEM;
			errbuf_set(err, errlen, "%s: out of memory", path);
			goto fail;
		}
		ret = pread_full(fd, *r, body, sizeof(h));
		if (ret) {
			errbuf_set(
				err, errlen, "%s: cannot read ranges: %s", path,
				ret == -EIO ? "file shrank" : strerror(-ret));
			goto fail;
		}
	}
	ret = check_ranges(path, *r, h.nr_ranges, h.page_count, err, errlen);
	if (ret)
		goto fail;
	close(fd);
	*nr = h.nr_ranges;
	return 0;
fail:
	close(fd);
	free(*r);
	*r = NULL;
	return ret;
}

/*
 * Keeps up to RING_DEPTH reads in flight until every range has been read.
 * A short read is not retried: past the end of the file there is nothing
 * to cache, and anything else left unread is faulted in later as it would
 * have been without a prefetch.
 */
static int read_ranges(int fd, const struct workingset_range *r, uint64_t nr,
		       const char *path, char *err, size_t errlen)
{
	uint64_t i = 0, done = 0, n, off;
	unsigned int inflight = 0;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	int failed = 0; /* the first failure's negative errno */
	int ret;

	ret = io_uring_queue_init(RING_DEPTH, &ring, 0);
	if (ret < 0) {
		errbuf_set(err, errlen, "%s: io_uring_queue_init: %s", path,
			   strerror(-ret));
		return ret;
	}
	for (;;) {
		/*
		 * An SQE the kernel did not take stays queued and goes with
		 * the next submit, so counting it as in flight is safe, and
		 * inflight < RING_DEPTH leaves a free SQE.
		 */
		while (!failed && i < nr && inflight < RING_DEPTH) {
			n = r[i].nr_pages - done;
			if (n > READ_MAX_PAGES)
				n = READ_MAX_PAGES;
			off = (r[i].first_page + done) * WS_PAGE_SIZE;
			sqe = io_uring_get_sqe(&ring);
			io_uring_prep_read(sqe, fd, scratch, n * WS_PAGE_SIZE,
					   off);
			io_uring_sqe_set_data64(sqe, off);
			inflight++;
			done += n;
			if (done == r[i].nr_pages) {
				i++;
				done = 0;
			}
		}
		if (!inflight)
			break;
		ret = io_uring_submit_and_wait(&ring, 1);
		if (ret == -EINTR)
			continue;
		if (ret < 0) {
			errbuf_set(err, errlen, "%s: io_uring_submit: %s", path,
				   strerror(-ret));
			failed = ret;
			break;
		}
		while (!io_uring_peek_cqe(&ring, &cqe)) {
			/* Reported once: later failures are the same one. */
			if (cqe->res < 0 && !failed) {
				errbuf_set(
					err, errlen,
					"%s: prefetching memory file offset %llu: %s",
					path,
					(unsigned long long)
						io_uring_cqe_get_data64(cqe),
					strerror(-cqe->res));
				failed = cqe->res;
			}
			io_uring_cqe_seen(&ring, cqe);
			inflight--;
		}
	}
	io_uring_queue_exit(&ring);
	return failed;
}

/*
 * Read faults on the MAP_PRIVATE mapping map the page-cache pages
 * themselves, read-only, so every clone shares them until it writes one.
 * Reading the file into the mapping instead would write, and so copy,
 * every page into this clone alone.
 */
static int populate(void *mem, const struct workingset_range *r, uint64_t nr,
		    const char *path, char *err, size_t errlen)
{
	bool touch = false;
	size_t len, off;
	uint64_t i;
	char *p;
	int ret;

	for (i = 0; i < nr; i++) {
		p = (char *)mem + r[i].first_page * WS_PAGE_SIZE;
		len = r[i].nr_pages * WS_PAGE_SIZE;
		if (!touch) {
			if (!madvise(p, len, MADV_POPULATE_READ))
				continue;
			if (errno != EINVAL) {
				ret = -errno;
				errbuf_set(err, errlen,
					   "%s: MADV_POPULATE_READ of %" PRIu64
					   " pages from page %" PRIu64 ": %s",
					   path, r[i].nr_pages, r[i].first_page,
					   strerror(-ret));
				return ret;
			}
			/* Before Linux 5.14: a read fault per page. */
			touch = true;
		}
		for (off = 0; off < len; off += WS_PAGE_SIZE)
			(void)*(volatile const char *)(p + off);
	}
	return 0;
}

int workingset_prefetch(int fd, void *mem, uint64_t size, const char *path,
			uint64_t *pages, char *err, size_t errlen)
{
	struct workingset_range *r;
	uint64_t nr, i;
	int ret;

	*pages = 0;
	ret = load(path, size, &r, &nr, err, errlen);
	if (ret)
		return ret;
	/*
	 * All reads first, then the page tables: the reads run in parallel,
	 * while faults on a cold page cache would wait for one page at a
	 * time.
	 */
	ret = read_ranges(fd, r, nr, path, err, errlen);
	if (!ret)
		ret = populate(mem, r, nr, path, err, errlen);
	if (!ret)
		for (i = 0; i < nr; i++)
			*pages += r[i].nr_pages;
	free(r);
	return ret;
}
