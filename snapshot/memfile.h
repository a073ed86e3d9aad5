/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memfile.h - a snapshot's guest memory: memory.img and pages.xxh3.
 *
 * memory.img is guest RAM byte for byte (the VMM's single host mapping: low
 * RAM, then high RAM; vmm/memory.h), written as a sparse file: all-zero 4 KiB
 * pages are left as holes, so a 256 MiB guest that used 40 MiB costs ~40 MiB
 * of disk and page cache.  A clone maps it MAP_PRIVATE: clean pages are
 * shared through the page cache by every clone of the snapshot, and a guest
 * write copies one page into that clone alone.
 *
 * pages.xxh3 holds the XXH3-64 hash of every page (holes included), behind a
 * struct memfile_hashes_header.  Its root, XXH3-64 over the hash array, is
 * recorded in the state file and the catalog.  Restoring checks only sizes
 * and the root (reading 2 KiB of hashes per MiB of RAM); memfile_verify()
 * re-reads every page, for `thaw snapshot verify`.
 *
 * Errors (common/errbuf.h): functions return 0 or a negative errno (the
 * failing call's, or -EINVAL for a file that is malformed or does not match
 * the snapshot; memfile_map() returns the mapping or NULL) and write one
 * message naming the file and what does not match into the caller's err
 * buffer (may be NULL); nothing here prints.  memfile_verify() also has a
 * third answer, 1: the files were read and do not match, which is what it
 * is asked, not a failure to ask it.
 */
#ifndef THAW_SNAPSHOT_MEMFILE_H
#define THAW_SNAPSHOT_MEMFILE_H

#include <stddef.h>
#include <stdint.h>

#define MEMFILE_PAGE_SIZE 4096
#define MEMFILE_HASHES_MAGIC "THAWPGHS" /* 8 bytes, no NUL in the file */
#define MEMFILE_HASHES_VERSION 1

struct memfile_hashes_header {
	char magic[8];
	uint32_t version;
	uint32_t page_size;
	uint64_t page_count;
	uint64_t root; /* XXH3-64 of the uint64_t hashes that follow */
};
_Static_assert(sizeof(struct memfile_hashes_header) == 32,
	       "pages.xxh3 header is 32 bytes");

/*
 * Writes the @size bytes at @mem (a multiple of MEMFILE_PAGE_SIZE) to
 * @path as a sparse file and their page hashes to @hashes_path; both are
 * created (never replaced: clones may have an existing memory.img mapped),
 * written and fsynced.  *root receives the hash root.
 */
int memfile_write(const void *mem, uint64_t size, const char *path,
		  const char *hashes_path, uint64_t *root, char *err,
		  size_t errlen);

/*
 * memfile_write() into @fd and @hfd, empty files opened for writing
 * (@path and @hashes_path name them in messages), without fsync: a
 * checkpoint (vmm/vm_snapshot.c) writes into files its supervisor created
 * and syncs them once its guest runs again.
 */
int memfile_write_fd(const void *mem, uint64_t size, int fd, int hfd,
		     const char *path, const char *hashes_path, uint64_t *root,
		     char *err, size_t errlen);

/*
 * Opens @path for a clone: checks that it is exactly @size bytes and that
 * @hashes_path is a well-formed hash file for @size bytes whose root is
 * @root, then maps it MAP_PRIVATE, readable and writable.  Returns the
 * mapping with the open file in *fd (the io_uring loader reads through it;
 * the caller closes it and munmaps @size bytes), or NULL.
 */
void *memfile_map(const char *path, const char *hashes_path, uint64_t size,
		  uint64_t root, int *fd, char *err, size_t errlen);

/*
 * Re-reads every page of @path and compares it with @hashes_path (whose
 * root must be @root).  Returns 0 when everything matches; 1 when pages
 * differ or sizes or the root do not match, with a message saying which
 * (the first bad page, how many); a negative errno when a file cannot be
 * read.
 */
int memfile_verify(const char *path, const char *hashes_path, uint64_t size,
		   uint64_t root, char *err, size_t errlen);

#endif
