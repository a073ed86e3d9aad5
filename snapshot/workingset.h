/* SPDX-License-Identifier: Apache-2.0 */
/*
 * workingset.h - which memory pages a fresh clone needs, recorded once and
 * prefetched with io_uring on later restores.
 *
 * A clone maps memory.img MAP_PRIVATE and the guest faults pages in as it
 * touches them: one synchronous read per miss when the page cache is cold.
 * The first restores of a snapshot record the pages the guest touched until
 * its agent answered the first exec (/proc/self/pagemap: present or swapped
 * in this process's page tables), coalesced into ranges, in workingset.bin.
 * Later restores read exactly those ranges with io_uring, many reads in
 * flight at once, so they land in the page cache in one batch, then map them
 * into the guest mapping with MADV_POPULATE_READ (read-only: a guest write
 * still copies just that page, so clean pages stay shared).
 *
 * workingset.bin: struct workingset_header, then nr_ranges
 * struct workingset_range, sorted, non-overlapping, inside page_count;
 * written to a temporary name, fsynced and renamed, so readers see a whole
 * file or none.
 *
 * Errors (common/errbuf.h): functions return 0 or a negative errno and
 * write one message naming the file into the caller's err buffer (may be
 * NULL); nothing here prints.
 */
#ifndef THAW_SNAPSHOT_WORKINGSET_H
#define THAW_SNAPSHOT_WORKINGSET_H

#include <stddef.h>
#include <stdint.h>

#define WORKINGSET_MAGIC "THAWWSET" /* 8 bytes, no NUL in the file */
#define WORKINGSET_VERSION 1

struct workingset_header {
	char magic[8];
	uint32_t version;
	uint32_t page_size;
	uint64_t page_count; /* pages in the memory file */
	uint64_t nr_ranges;
};

struct workingset_range {
	uint64_t first_page;
	uint64_t nr_pages;
};

/*
 * Records the pages of [@mem, @mem + @size) that are mapped in this
 * process and writes them to @path.  @pagemap_fd is this process's
 * /proc/self/pagemap, opened before a jail hid /proc (-1: open it now).
 * *pages gets their number.  -EINVAL when @mem and @size are not whole
 * pages.
 */
int workingset_record(const void *mem, uint64_t size, const char *path,
		      int pagemap_fd, uint64_t *pages, char *err,
		      size_t errlen);

/*
 * Reads @path (it must describe a memory file of @size bytes), reads those
 * pages of @fd (the memory file @mem maps) into the page cache with
 * io_uring, and populates @mem's page tables for them.  *pages gets their
 * number.  Returns 0; -ENOENT when @path does not exist: no working set
 * was recorded yet, which is no error, so @err is left as it was; -EINVAL
 * when it is malformed; another negative errno when reading it, the
 * prefetch reads or populating the mapping fail.
 */
int workingset_prefetch(int fd, void *mem, uint64_t size, const char *path,
			uint64_t *pages, char *err, size_t errlen);

#endif
