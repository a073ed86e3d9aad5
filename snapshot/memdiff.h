/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memdiff.h - a diff snapshot's guest memory: memory.diff, the pages a clone
 * wrote since the snapshot its memory derives from (its parent), over that
 * parent's memory.
 *
 * Finding them costs no scan of guest memory: a clone maps its parent's
 * memory MAP_PRIVATE, so a page its guest wrote is an anonymous copy in
 * that mapping, which /proc/self/pagemap shows as present and not a file
 * page (bit 61 clear), or as swapped out (bit 62); a page it only read is
 * the file's page-cache page, one it never touched is absent.  The entries
 * are read 8 bytes a page in large preads and coalesced into extents.
 *
 * memory.diff, little endian:
 *
 *	struct memdiff_header				64 bytes
 *	struct memdiff_extent[nr_extents]		sorted, disjoint
 *	uint64_t hashes[nr_pages]			XXH3-64 of each page,
 *							in extent order
 *	zeros up to data_offset				a page boundary
 *	page data					extent after extent
 *
 * Each extent's data starts at a page boundary (file_offset), so it can be
 * mapped straight from the file.  A clone of a chain maps the base's
 * memory.img MAP_PRIVATE, then each layer's extents MAP_PRIVATE|MAP_FIXED
 * over it, oldest first, so later layers win; every clone of one checkpoint
 * shares its pages through the page cache, as clones of a base share
 * memory.img's.
 *
 * Roots.  A layer's root is XXH3-64 over its parent's root, its extent
 * table and its page hashes: it names the parent's memory plus these pages
 * without reading either, as memfile.h's root names a whole memory.img.
 * state.bin's header carries the top layer's root; each header carries its
 * parent's, which a restore checks against the layer below, so layers from
 * different lineages cannot be stacked.  Opening a layer reads the header,
 * table and hashes (8 bytes a page of data) and checks them; verifying it
 * re-reads every data page.
 *
 * Chains.  A diff snapshot's directory holds state.bin, memory.diff and a
 * symbolic link "parent" -> "../<parent id>" (relative, so the snapshots'
 * directory can move), made by the pool side (pool/host/checkpoint.h); the
 * chain is followed through DIR/parent/parent/... until a directory with
 * memory.img and no memory.diff, at most MEMDIFF_MAX_DEPTH diff layers (a
 * loop of links ends there too).
 *
 * Errors (common/errbuf.h): 0 or a negative errno (-EINVAL: malformed or
 * not matching; -E2BIG: more written extents than a layer may hold), with
 * one message naming the file and the field into the caller's err buffer
 * (may be NULL); nothing here prints.  memdiff_chain_verify() also answers
 * 1: read fine, does not match (as memfile_verify()).
 */
#ifndef THAW_SNAPSHOT_MEMDIFF_H
#define THAW_SNAPSHOT_MEMDIFF_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MEMDIFF_MAGIC "THAWMDIF" /* 8 bytes, no NUL in the file */
#define MEMDIFF_VERSION 1
#define MEMDIFF_PAGE_SIZE 4096
#define MEMDIFF_FILE "memory.diff"
#define MEMDIFF_PARENT_LINK "parent"

/*
 * Diff layers over a base memory.img.  Each layer costs a restore one
 * header read and a table check plus an mmap per extent (and a VMA or two
 * each, against vm.max_map_count); flattening costs one write of the whole
 * memory.  At 8, a restore of the deepest chain still maps at most
 * 8 * MEMDIFF_MAX_EXTENTS extents (~32 Ki VMAs, half the default limit) in
 * a few ms, and an RL loop checkpointing every step rewrites the whole
 * memory only every ninth checkpoint.
 */
#define MEMDIFF_MAX_DEPTH 8
/*
 * Extents one layer may hold.  A guest that wrote more scattered runs is
 * better served by a full memory.img (the checkpoint writes one instead).
 */
#define MEMDIFF_MAX_EXTENTS 2048
/*
 * Clean pages between two written runs that are written anyway to make
 * them one extent: a few KiB more data for one mapping fewer.
 */
#define MEMDIFF_GAP_PAGES 4

struct memdiff_header {
	char magic[8];
	uint32_t version;
	uint32_t page_size;
	uint64_t page_count;  /* guest pages: the memory's size */
	uint64_t parent_root; /* the root of the memory this is a diff of */
	uint64_t root;	      /* this layer's (see the top of this file) */
	uint64_t nr_extents;
	uint64_t nr_pages;    /* pages of data: the extents' sum */
	uint64_t data_offset; /* the first extent's data, page-aligned */
};
_Static_assert(sizeof(struct memdiff_header) == 64,
	       "memory.diff header is 64 bytes");

struct memdiff_extent {
	uint64_t first_page; /* guest page */
	uint64_t nr_pages;
	uint64_t file_offset; /* its data in memory.diff */
};
_Static_assert(sizeof(struct memdiff_extent) == 24,
	       "memory.diff extents are 24 bytes");

/* A growing list of extents (file_offset unset until written). */
struct memdiff_extents {
	struct memdiff_extent *e;
	size_t nr, cap;
	uint64_t pages;
};

void memdiff_extents_free(struct memdiff_extents *x);

/*
 * The pages of [@mem, @mem + @size) this process wrote in its private file
 * mapping (see the top of this file), coalesced with gaps of up to
 * MEMDIFF_GAP_PAGES, into @x (emptied first).  @pagemap_fd is
 * /proc/self/pagemap, opened before a jail hid /proc (-1: open it now).
 * -E2BIG when they would take more than @max_extents extents.
 */
int memdiff_find_written(const void *mem, uint64_t size, int pagemap_fd,
			 size_t max_extents, struct memdiff_extents *x,
			 char *err, size_t errlen);

/*
 * Writes the pages @x lists of the @size bytes at @mem into @fd (an empty
 * file, @path for messages) as memory.diff over a parent whose root is
 * @parent_root; sets each extent's file_offset and *root.  No fsync: the
 * caller syncs when it likes (a checkpoint does after resuming the guest).
 */
int memdiff_write(int fd, const void *mem, uint64_t size,
		  struct memdiff_extents *x, uint64_t parent_root,
		  uint64_t *root, const char *path, char *err, size_t errlen);

/*
 * Maps the @nr extents @e of memory.diff @fd over @mem, MAP_PRIVATE |
 * MAP_FIXED, readable and writable: the pages come from the file from now
 * on, and a later write copies them again.
 */
int memdiff_map_extents(int fd, void *mem, const struct memdiff_extent *e,
			size_t nr, const char *path, char *err, size_t errlen);

/* One opened and checked layer. */
struct memdiff {
	char path[PATH_MAX];
	int fd;
	struct memdiff_header h;
	struct memdiff_extent *extents;
};

/*
 * Opens @path (through snapshot_file_open(), preopen.h) and checks it as a
 * diff of a memory of @size bytes: header fields, an extent table sorted,
 * disjoint, inside the memory and laid out back to back from data_offset, a
 * file exactly as long as its data, and a root that matches the table and
 * hashes.  -ENOENT (with a message) when @path does not exist.
 */
int memdiff_open(struct memdiff *d, const char *path, uint64_t size, char *err,
		 size_t errlen);
void memdiff_close(struct memdiff *d);

/*
 * A snapshot's memory as layers: layers[0] is the directory's own
 * memory.diff, layers[depth - 1] the oldest, over base_dir's memory.img,
 * whose page hashes must have base_root.  depth 0: the directory holds a
 * memory.img itself.
 */
struct memdiff_chain {
	unsigned depth;
	struct memdiff layers[MEMDIFF_MAX_DEPTH];
	char base_dir[PATH_MAX];
	uint64_t base_root;
};

/*
 * Follows @dir's chain (see the top of this file), opening each layer and
 * checking that the top's root is @root (state.bin's) and each layer's
 * parent root is the root of the one below.
 */
int memdiff_chain_open(struct memdiff_chain *c, const char *dir, uint64_t size,
		       uint64_t root, char *err, size_t errlen);
/* Maps every layer over @mem (the base, mapped), oldest first. */
int memdiff_chain_map(const struct memdiff_chain *c, void *mem, char *err,
		      size_t errlen);
void memdiff_chain_close(struct memdiff_chain *c);

/*
 * `thaw snapshot verify` of a diff: opens @dir's chain as
 * memdiff_chain_open() and re-reads every data page of every layer against
 * its hash, then the base memory.img (memfile_verify()).  0 all match, 1
 * something does not (the message says what and where), a negative errno
 * when a file cannot be read.
 */
int memdiff_chain_verify(const char *dir, uint64_t size, uint64_t root,
			 char *err, size_t errlen);

#endif
