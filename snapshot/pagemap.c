// SPDX-License-Identifier: Apache-2.0
/*
 * pagemap.c - see pagemap.h.
 */
#include "snapshot/pagemap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "common/io.h"

#define PAGEMAP_PRESENT (1ULL << 63)
#define PAGEMAP_SWAPPED (1ULL << 62)
#define PAGEMAP_FILE (1ULL << 61) /* a file page, or shared anonymous */
/* Entries per pread: 32 KiB covering 16 MiB. */
#define PAGEMAP_BATCH 4096

static bool picked(uint64_t entry, enum pagemap_select select)
{
	if (entry & PAGEMAP_SWAPPED)
		return true;
	if (!(entry & PAGEMAP_PRESENT))
		return false;
	return select == PAGEMAP_TOUCHED || !(entry & PAGEMAP_FILE);
}

int pagemap_runs(const void *mem, uint64_t nr_pages, int pagemap_fd,
		 enum pagemap_select select,
		 int (*run)(void *arg, uint64_t first, uint64_t n), void *arg,
		 const char *what, char *err, size_t errlen)
{
	const off_t base =
		(uintptr_t)mem / PAGEMAP_PAGE_SIZE * sizeof(uint64_t);
	uint64_t *entries = malloc(PAGEMAP_BATCH * sizeof(*entries));
	uint64_t first = 0, len = 0; /* the run being gathered */
	int fd = pagemap_fd, ret;

	if (!entries) {
		errbuf_set(err, errlen, "%s: out of memory", what);
		return -ENOMEM;
	}
	if (fd < 0)
		fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		errbuf_set(err, errlen,
			   "%s: cannot open /proc/self/pagemap: %s", what,
			   strerror(-ret));
		goto out;
	}
	ret = 0;
	for (uint64_t done = 0, n; done < nr_pages && !ret; done += n) {
		n = nr_pages - done < PAGEMAP_BATCH ? nr_pages - done
						    : PAGEMAP_BATCH;
		ret = pread_full(fd, entries, n * sizeof(*entries),
				 base + done * sizeof(*entries));
		if (ret) {
			errbuf_set(err, errlen,
				   "%s: reading /proc/self/pagemap: %s", what,
				   ret == -EIO ? "short read" : strerror(-ret));
			goto out;
		}
		for (uint64_t i = 0; i < n && !ret; i++) {
			if (picked(entries[i], select)) {
				if (!len)
					first = done + i;
				len++;
			} else if (len) {
				ret = run(arg, first, len);
				len = 0;
			}
		}
	}
	if (!ret && len)
		ret = run(arg, first, len);
out:
	if (fd >= 0 && fd != pagemap_fd)
		close(fd);
	free(entries);
	return ret;
}
