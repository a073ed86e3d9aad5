/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pagemap.h - which pages of a mapping this process's page tables hold,
 * from /proc/self/pagemap: 8 bytes a page, read in batches (32 KiB a read
 * covers 16 MiB), handed out as runs of consecutive pages.  The working
 * set (workingset.h) wants the pages a clone touched, a diff snapshot
 * (memdiff.h) the pages it wrote.
 *
 * Errors (common/errbuf.h): 0 or a negative errno, with one message
 * naming @what into the caller's err buffer; nothing here prints.
 */
#ifndef THAW_SNAPSHOT_PAGEMAP_H
#define THAW_SNAPSHOT_PAGEMAP_H

#include <stddef.h>
#include <stdint.h>

#define PAGEMAP_PAGE_SIZE 4096

enum pagemap_select {
	/* Present or swapped out: touched since mapped. */
	PAGEMAP_TOUCHED,
	/*
	 * In a MAP_PRIVATE file mapping, a page this process wrote is an
	 * anonymous copy: present and not a file page, or swapped out (a
	 * file page is dropped, never swapped).
	 */
	PAGEMAP_WRITTEN,
};

/*
 * Calls @run(@arg, first page, page count) for each run of consecutive
 * pages of the @nr_pages at @mem (page-aligned) that @select picks, in
 * order.  @pagemap_fd is /proc/self/pagemap, opened before a jail hid
 * /proc (-1: open it now).  A nonzero return of @run ends the scan and is
 * returned (it wrote its own message).
 */
int pagemap_runs(const void *mem, uint64_t nr_pages, int pagemap_fd,
		 enum pagemap_select select,
		 int (*run)(void *arg, uint64_t first, uint64_t n), void *arg,
		 const char *what, char *err, size_t errlen);

#endif
