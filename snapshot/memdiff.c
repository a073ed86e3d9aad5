// SPDX-License-Identifier: Apache-2.0
/*
 * memdiff.c - see memdiff.h.  Every count and offset read from a file is
 * checked against the memory's size before it sizes an allocation or a
 * read, so a hostile memory.diff costs at most a few reads of its header
 * and table.
 */
#include "snapshot/memdiff.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/errbuf.h"
#include "common/io.h"
#include "snapshot/memfile.h"
#include "snapshot/pagemap.h"
#include "snapshot/preopen.h"

_Static_assert(MEMDIFF_PAGE_SIZE == MEMFILE_PAGE_SIZE &&
		       MEMDIFF_PAGE_SIZE == PAGEMAP_PAGE_SIZE,
	       "a diff's pages are the memory file's and the page tables'");

#define PAGE MEMDIFF_PAGE_SIZE
/* Data pages verified per read. */
#define VERIFY_CHUNK_PAGES 256

static uint64_t round_to_page(uint64_t n)
{
	return (n + PAGE - 1) / PAGE * PAGE;
}

/* Where the data of a diff of @nr_extents extents and @nr_pages pages
 * starts: after the header, the table and the hashes. */
static uint64_t data_offset(uint64_t nr_extents, uint64_t nr_pages)
{
	return round_to_page(sizeof(struct memdiff_header) +
			     nr_extents * sizeof(struct memdiff_extent) +
			     nr_pages * sizeof(uint64_t));
}

static const char *read_error(int ret)
{
	return ret == -EIO ? "file ended early" : strerror(-ret);
}

void memdiff_extents_free(struct memdiff_extents *x)
{
	free(x->e);
	memset(x, 0, sizeof(*x));
}

/* Extents being gathered by memdiff_find_written(). */
struct gather {
	struct memdiff_extents *x;
	size_t max;
	char *err;
	size_t errlen;
};

/*
 * pagemap_runs()'s @run: written pages [@first, @first + @n) join the last
 * extent across a gap of up to MEMDIFF_GAP_PAGES, else start one.
 */
static int extents_add(void *arg, uint64_t first, uint64_t n)
{
	struct gather *g = arg;
	struct memdiff_extents *x = g->x;

	if (x->nr) {
		struct memdiff_extent *last = &x->e[x->nr - 1];
		uint64_t end = last->first_page + last->nr_pages;

		if (first - end <= MEMDIFF_GAP_PAGES) {
			x->pages += first + n - end;
			last->nr_pages = first + n - last->first_page;
			return 0;
		}
	}
	if (x->nr == g->max) {
		errbuf_set(g->err, g->errlen,
			   "written pages: more than %zu separate runs",
			   g->max);
		return -E2BIG;
	}
	if (x->nr == x->cap) {
		size_t cap = x->cap ? 2 * x->cap : 64;
		void *e = realloc(x->e, cap * sizeof(*x->e));

		if (!e) {
			errbuf_set(g->err, g->errlen,
				   "written pages: out of memory");
			return -ENOMEM;
		}
		x->e = e;
		x->cap = cap;
	}
	x->e[x->nr++] =
		(struct memdiff_extent){ .first_page = first, .nr_pages = n };
	x->pages += n;
	return 0;
}

int memdiff_find_written(const void *mem, uint64_t size, int pagemap_fd,
			 size_t max_extents, struct memdiff_extents *x,
			 char *err, size_t errlen)
{
	struct gather g = { x, max_extents, err, errlen };

	x->nr = 0;
	x->pages = 0;
	if (size % PAGE || (uintptr_t)mem % PAGE) {
		errbuf_set(err, errlen,
			   "written pages: %" PRIu64 " bytes at %p are not "
			   "whole pages",
			   size, mem);
		return -EINVAL;
	}
	return pagemap_runs(mem, size / PAGE, pagemap_fd, PAGEMAP_WRITTEN,
			    extents_add, &g, "written pages", err, errlen);
}

/* XXH3-64 of @parent_root, the table and the hashes: a layer's root. */
static uint64_t layer_root(uint64_t parent_root, const struct memdiff_extent *e,
			   uint64_t nr_extents, const uint64_t *hashes,
			   uint64_t nr_pages)
{
	XXH3_state_t *s = XXH3_createState();
	uint64_t root;

	/* Out of memory is reported as a root nothing matches. */
	if (!s || XXH3_64bits_reset(s) != XXH_OK) {
		XXH3_freeState(s);
		return 0;
	}
	XXH3_64bits_update(s, &parent_root, sizeof(parent_root));
	XXH3_64bits_update(s, e, nr_extents * sizeof(*e));
	XXH3_64bits_update(s, hashes, nr_pages * sizeof(*hashes));
	root = XXH3_64bits_digest(s);
	XXH3_freeState(s);
	return root;
}

int memdiff_write(int fd, const void *mem, uint64_t size,
		  struct memdiff_extents *x, uint64_t parent_root,
		  uint64_t *root, const char *path, char *err, size_t errlen)
{
	struct memdiff_header h = {
		.version = MEMDIFF_VERSION,
		.page_size = PAGE,
		.page_count = size / PAGE,
		.parent_root = parent_root,
		.nr_extents = x->nr,
		.nr_pages = x->pages,
		.data_offset = data_offset(x->nr, x->pages),
	};
	const uint8_t *guest = mem;
	uint64_t *hashes = malloc((x->pages ? x->pages : 1) * sizeof(*hashes));
	uint64_t off = h.data_offset, next = 0;
	int ret;

	if (!hashes) {
		errbuf_set(err, errlen, "memory diff %s: out of memory", path);
		return -ENOMEM;
	}
	memcpy(h.magic, MEMDIFF_MAGIC, sizeof(h.magic));
	for (size_t i = 0; i < x->nr; i++) {
		struct memdiff_extent *e = &x->e[i];
		const uint8_t *from = guest + e->first_page * PAGE;

		e->file_offset = off;
		ret = pwrite_full(fd, from, e->nr_pages * PAGE, off);
		if (ret)
			goto write_failed;
		for (uint64_t p = 0; p < e->nr_pages; p++)
			hashes[next++] = XXH3_64bits(from + p * PAGE, PAGE);
		off += e->nr_pages * PAGE;
	}
	h.root = layer_root(parent_root, x->e, x->nr, hashes, x->pages);
	ret = pwrite_full(fd, &h, sizeof(h), 0);
	if (!ret)
		ret = pwrite_full(fd, x->e, x->nr * sizeof(*x->e), sizeof(h));
	if (!ret)
		ret = pwrite_full(fd, hashes, x->pages * sizeof(*hashes),
				  sizeof(h) + x->nr * sizeof(*x->e));
	/* A diff without pages ends at its (zero) padding. */
	if (!ret && ftruncate(fd, off))
		ret = -errno;
	if (ret)
		goto write_failed;
	free(hashes);
	*root = h.root;
	return 0;

write_failed:
	errbuf_set(err, errlen, "memory diff %s: cannot write: %s", path,
		   strerror(-ret));
	free(hashes);
	return ret;
}

int memdiff_map_extents(int fd, void *mem, const struct memdiff_extent *e,
			size_t nr, const char *path, char *err, size_t errlen)
{
	for (size_t i = 0; i < nr; i++) {
		void *at = (uint8_t *)mem + e[i].first_page * PAGE;
		/* NORESERVE as memfile_map(): commit only what is written. */
		void *p = mmap(at, e[i].nr_pages * PAGE, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, fd,
			       (off_t)e[i].file_offset);

		if (p == MAP_FAILED) {
			errbuf_set(err, errlen,
				   "memory diff %s: cannot map extent %zu "
				   "(pages %" PRIu64 "+%" PRIu64 "): %s",
				   path, i, e[i].first_page, e[i].nr_pages,
				   strerror(errno));
			return -errno;
		}
	}
	return 0;
}

/* -EINVAL after a message naming @d's file and what is wrong. */
__attribute__((format(printf, 4, 5))) static int
malformed(const struct memdiff *d, char *err, size_t errlen, const char *fmt,
	  ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	errbuf_set(err, errlen, "memory diff %s: %s", d->path, what);
	return -EINVAL;
}

static int check_header(const struct memdiff *d, uint64_t size,
			uint64_t file_size, char *err, size_t errlen)
{
	const struct memdiff_header *h = &d->h;
	uint64_t pages = size / PAGE;

	if (memcmp(h->magic, MEMDIFF_MAGIC, sizeof(h->magic)))
		return malformed(d, err, errlen,
				 "bad magic (not a thaw memory diff)");
	if (h->version != MEMDIFF_VERSION)
		return malformed(d, err, errlen,
				 "version %u, this thaw reads %u", h->version,
				 MEMDIFF_VERSION);
	if (h->page_size != PAGE)
		return malformed(d, err, errlen, "page_size %u, expected %u",
				 h->page_size, PAGE);
	if (h->page_count != pages)
		return malformed(d, err, errlen,
				 "page_count %" PRIu64 ", but the snapshot "
				 "has %" PRIu64 " pages",
				 h->page_count, pages);
	if (h->nr_extents > MEMDIFF_MAX_EXTENTS || h->nr_extents > pages)
		return malformed(d, err, errlen,
				 "nr_extents %" PRIu64 ", at most %" PRIu64,
				 h->nr_extents,
				 pages < MEMDIFF_MAX_EXTENTS
					 ? pages
					 : (uint64_t)MEMDIFF_MAX_EXTENTS);
	if (h->nr_pages > pages || h->nr_pages < h->nr_extents)
		return malformed(d, err, errlen,
				 "nr_pages %" PRIu64 " for %" PRIu64
				 " extents of a %" PRIu64 "-page memory",
				 h->nr_pages, h->nr_extents, pages);
	if (h->data_offset != data_offset(h->nr_extents, h->nr_pages))
		return malformed(d, err, errlen,
				 "data_offset %" PRIu64 ", expected %" PRIu64,
				 h->data_offset,
				 data_offset(h->nr_extents, h->nr_pages));
	if (file_size != h->data_offset + h->nr_pages * PAGE)
		return malformed(d, err, errlen,
				 "%" PRIu64 " bytes, expected %" PRIu64
				 " for %" PRIu64 " pages of data (truncated?)",
				 file_size, h->data_offset + h->nr_pages * PAGE,
				 h->nr_pages);
	return 0;
}

/* Sorted, disjoint, inside the memory, data back to back. */
static int check_extents(const struct memdiff *d, char *err, size_t errlen)
{
	const struct memdiff_header *h = &d->h;
	uint64_t end = 0, pages = 0, off = h->data_offset;

	for (uint64_t i = 0; i < h->nr_extents; i++) {
		const struct memdiff_extent *e = &d->extents[i];

		if (!e->nr_pages || e->first_page < end ||
		    e->first_page >= h->page_count ||
		    e->nr_pages > h->page_count - e->first_page)
			return malformed(
				d, err, errlen,
				"extent %" PRIu64 " (pages %" PRIu64 "+%" PRIu64
				") is empty, out of order, overlapping or "
				"outside the %" PRIu64 "-page memory",
				i, e->first_page, e->nr_pages, h->page_count);
		if (e->file_offset != off)
			return malformed(d, err, errlen,
					 "extent %" PRIu64
					 ": file_offset %" PRIu64
					 ", expected %" PRIu64,
					 i, e->file_offset, off);
		end = e->first_page + e->nr_pages;
		pages += e->nr_pages;
		off += e->nr_pages * PAGE;
		if (pages > h->nr_pages)
			break;
	}
	if (pages != h->nr_pages)
		return malformed(d, err, errlen,
				 "the extents hold %s%" PRIu64
				 " pages, the header says %" PRIu64,
				 pages > h->nr_pages ? "more than " : "", pages,
				 h->nr_pages);
	return 0;
}

/* Reads the table and the hashes after the header; 0 or -errno. */
static int read_tables(struct memdiff *d, uint64_t **hashes, char *err,
		       size_t errlen)
{
	const struct memdiff_header *h = &d->h;
	size_t table = h->nr_extents * sizeof(*d->extents);
	int ret;

	d->extents = malloc(table ? table : 1);
	*hashes = malloc(h->nr_pages ? h->nr_pages * sizeof(**hashes) : 1);
	if (!d->extents || !*hashes) {
		errbuf_set(err, errlen, "memory diff %s: out of memory",
			   d->path);
		return -ENOMEM;
	}
	ret = pread_full(d->fd, d->extents, table, sizeof(*h));
	if (!ret)
		ret = pread_full(d->fd, *hashes, h->nr_pages * sizeof(**hashes),
				 sizeof(*h) + table);
	if (ret)
		errbuf_set(err, errlen, "memory diff %s: cannot read: %s",
			   d->path, read_error(ret));
	return ret;
}

static int open_layer(struct memdiff *d, const char *path, uint64_t size,
		      uint64_t **hashes, char *err, size_t errlen)
{
	struct stat st;
	int ret;

	memset(d, 0, sizeof(*d));
	d->fd = -1;
	*hashes = NULL;
	if ((size_t)snprintf(d->path, sizeof(d->path), "%s", path) >=
	    sizeof(d->path)) {
		errbuf_set(err, errlen, "memory diff %.64s...: path too long",
			   path);
		return -ENAMETOOLONG;
	}
	d->fd = snapshot_file_open(path, O_RDONLY | O_CLOEXEC);
	if (d->fd < 0 || fstat(d->fd, &st)) {
		ret = -errno;
		errbuf_set(err, errlen, "memory diff %s: cannot open: %s", path,
			   strerror(-ret));
		return ret;
	}
	if ((uint64_t)st.st_size < sizeof(d->h))
		return malformed(d, err, errlen,
				 "%lld bytes, shorter than the %zu-byte header "
				 "(truncated)",
				 (long long)st.st_size, sizeof(d->h));
	ret = pread_full(d->fd, &d->h, sizeof(d->h), 0);
	if (ret) {
		errbuf_set(err, errlen, "memory diff %s: cannot read: %s", path,
			   read_error(ret));
		return ret;
	}
	ret = check_header(d, size, st.st_size, err, errlen);
	if (!ret)
		ret = read_tables(d, hashes, err, errlen);
	if (!ret)
		ret = check_extents(d, err, errlen);
	if (ret)
		return ret;
	uint64_t root = layer_root(d->h.parent_root, d->extents,
				   d->h.nr_extents, *hashes, d->h.nr_pages);
	if (root != d->h.root)
		return malformed(
			d, err, errlen,
			"extent table and page hashes hash to %#" PRIx64
			", not its root %#" PRIx64 " (file corrupted)",
			root, d->h.root);
	return 0;
}

int memdiff_open(struct memdiff *d, const char *path, uint64_t size, char *err,
		 size_t errlen)
{
	uint64_t *hashes;
	int ret = open_layer(d, path, size, &hashes, err, errlen);

	free(hashes);
	if (ret)
		memdiff_close(d);
	return ret;
}

void memdiff_close(struct memdiff *d)
{
	if (d->fd >= 0)
		close(d->fd);
	d->fd = -1;
	free(d->extents);
	d->extents = NULL;
}

void memdiff_chain_close(struct memdiff_chain *c)
{
	for (unsigned i = 0; i < c->depth; i++)
		memdiff_close(&c->layers[i]);
	c->depth = 0;
}

/* "@dir/@name" into @out (PATH_MAX); -ENAMETOOLONG after a message. */
static int join(char *out, const char *dir, const char *name, char *err,
		size_t errlen)
{
	if ((size_t)snprintf(out, PATH_MAX, "%s/%s", dir, name) < PATH_MAX)
		return 0;
	errbuf_set(err, errlen, "snapshot %.64s...: path too long", dir);
	return -ENAMETOOLONG;
}

/*
 * The walk memdiff_chain_open() and memdiff_chain_verify() share: layer
 * @k's hashes go to @hashes[k] when @hashes is not NULL.
 */
static int chain_open(struct memdiff_chain *c, const char *dir, uint64_t size,
		      uint64_t root, uint64_t **hashes, char *err,
		      size_t errlen)
{
	char layer_dir[PATH_MAX], path[PATH_MAX];
	uint64_t expected = root;
	int ret;

	memset(c, 0, sizeof(*c));
	if ((size_t)snprintf(layer_dir, sizeof(layer_dir), "%s", dir) >=
	    sizeof(layer_dir)) {
		errbuf_set(err, errlen, "snapshot %.64s...: path too long",
			   dir);
		return -ENAMETOOLONG;
	}
	for (;;) {
		struct memdiff *d;
		uint64_t *h;

		ret = join(path, layer_dir, MEMDIFF_FILE, err, errlen);
		if (ret)
			goto fail;
		if (c->depth == MEMDIFF_MAX_DEPTH) {
			/* A base ends the chain: nothing may be here. */
			int fd = snapshot_file_open(path, O_RDONLY | O_CLOEXEC);

			if (fd < 0 && errno == ENOENT)
				break;
			if (fd >= 0)
				close(fd);
			errbuf_set(err, errlen,
				   "snapshot %s: more than %d diff layers "
				   "(a loop of parent links?)",
				   dir, MEMDIFF_MAX_DEPTH);
			ret = -ELOOP;
			goto fail;
		}
		d = &c->layers[c->depth];
		ret = open_layer(d, path, size, &h, err, errlen);
		if (ret == -ENOENT && d->fd < 0) {
			free(h);
			break; /* the base */
		}
		if (!ret && d->h.root != expected)
			ret = malformed(d, err, errlen,
					"root %#" PRIx64 ", but %s expects "
					"%#" PRIx64 " (not this chain's layer)",
					d->h.root,
					c->depth ? "the layer above"
						 : "the state file",
					expected);
		if (ret) {
			free(h);
			memdiff_close(d);
			goto fail;
		}
		if (hashes)
			hashes[c->depth] = h;
		else
			free(h);
		expected = d->h.parent_root;
		c->depth++;
		memcpy(layer_dir, path, sizeof(layer_dir));
		/* ".../memory.diff" -> ".../parent", never longer. */
		strcpy(strrchr(layer_dir, '/') + 1, MEMDIFF_PARENT_LINK);
	}
	memcpy(c->base_dir, layer_dir, sizeof(c->base_dir));
	c->base_root = expected;
	return 0;

fail:
	memdiff_chain_close(c);
	return ret;
}

int memdiff_chain_open(struct memdiff_chain *c, const char *dir, uint64_t size,
		       uint64_t root, char *err, size_t errlen)
{
	return chain_open(c, dir, size, root, NULL, err, errlen);
}

int memdiff_chain_map(const struct memdiff_chain *c, void *mem, char *err,
		      size_t errlen)
{
	for (unsigned i = c->depth; i-- > 0;) {
		const struct memdiff *d = &c->layers[i];
		int ret = memdiff_map_extents(d->fd, mem, d->extents,
					      d->h.nr_extents, d->path, err,
					      errlen);

		if (ret)
			return ret;
	}
	return 0;
}

/* Compares every data page of @d with @hashes: 0, 1, or -errno. */
static int verify_layer(const struct memdiff *d, const uint64_t *hashes,
			uint8_t *buf, char *err, size_t errlen)
{
	uint64_t bad = 0, first_bad = 0, next = 0;

	for (uint64_t i = 0; i < d->h.nr_extents; i++) {
		const struct memdiff_extent *e = &d->extents[i];

		for (uint64_t p = 0; p < e->nr_pages; p += VERIFY_CHUNK_PAGES) {
			uint64_t n = e->nr_pages - p < VERIFY_CHUNK_PAGES
					     ? e->nr_pages - p
					     : VERIFY_CHUNK_PAGES;
			int ret = pread_full(d->fd, buf, n * PAGE,
					     e->file_offset + p * PAGE);

			if (ret) {
				errbuf_set(err, errlen,
					   "memory diff %s: cannot read: %s",
					   d->path, read_error(ret));
				return ret;
			}
			for (uint64_t j = 0; j < n; j++, next++) {
				if (XXH3_64bits(buf + j * PAGE, PAGE) ==
				    hashes[next])
					continue;
				if (!bad++)
					first_bad = e->first_page + p + j;
			}
		}
	}
	if (!bad)
		return 0;
	errbuf_set(err, errlen,
		   "memory diff %s: %" PRIu64 " of %" PRIu64 " pages do not "
		   "match their hashes; the first is guest page %" PRIu64,
		   d->path, bad, d->h.nr_pages, first_bad);
	return 1;
}

int memdiff_chain_verify(const char *dir, uint64_t size, uint64_t root,
			 char *err, size_t errlen)
{
	uint64_t *hashes[MEMDIFF_MAX_DEPTH] = { 0 };
	char memory[PATH_MAX], page_hashes[PATH_MAX];
	struct memdiff_chain c;
	uint8_t *buf = malloc(VERIFY_CHUNK_PAGES * PAGE);
	int ret = -ENOMEM;

	if (!buf) {
		errbuf_set(err, errlen, "snapshot %s: out of memory", dir);
		return ret;
	}
	ret = chain_open(&c, dir, size, root, hashes, err, errlen);
	if (ret) {
		free(buf);
		/* A malformed layer is an answer; an unreadable one not. */
		return ret == -EINVAL || ret == -ELOOP ? 1 : ret;
	}
	for (unsigned i = 0; i < c.depth && !ret; i++)
		ret = verify_layer(&c.layers[i], hashes[i], buf, err, errlen);
	if (!ret)
		ret = join(memory, c.base_dir, "memory.img", err, errlen);
	if (!ret)
		ret = join(page_hashes, c.base_dir, "pages.xxh3", err, errlen);
	if (!ret)
		ret = memfile_verify(memory, page_hashes, size, c.base_root,
				     err, errlen);
	for (unsigned i = 0; i < c.depth; i++)
		free(hashes[i]);
	memdiff_chain_close(&c);
	free(buf);
	return ret;
}
