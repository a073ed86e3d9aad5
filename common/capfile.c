// SPDX-License-Identifier: Apache-2.0
/*
 * capfile.c - see capfile.h.  Of a bound of M bytes, a mark's room is set
 * aside and the rest split in three: the head, and twice the tail, which
 * is what the file holds just before a cut.
 */
#include "common/capfile.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "common/io.h"

/* "\n[thaw: 18446744073709551615 bytes dropped]\n" and room to spare. */
#define MARK_MAX 64

int capfile_init(struct capfile *f, int fd, uint64_t max, char *err,
		 size_t errlen)
{
	struct stat st;
	off_t at;
	int flags;

	memset(f, 0, sizeof(*f));
	f->fd = fd;
	if (fd < 0)
		return 0;
	if (max < CAPFILE_MIN_MAX || max > CAPFILE_MAX_MAX) {
		errbuf_set(err, errlen,
			   "log bound %" PRIu64 " is outside %llu..%llu bytes",
			   max, CAPFILE_MIN_MAX, CAPFILE_MAX_MAX);
		return -EINVAL;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
		return 0;
	/* With O_APPEND every write would land at the end, the rewritten
	 * tail's too: our own offset keeps appends at the end instead. */
	flags = fcntl(fd, F_GETFL);
	if (flags >= 0 && (flags & O_APPEND) &&
	    (fcntl(fd, F_SETFL, flags & ~O_APPEND) < 0 ||
	     lseek(fd, 0, SEEK_END) < 0))
		flags = -1;
	at = lseek(fd, 0, SEEK_CUR);
	if (flags < 0 || at < 0) {
		int e = errno;

		errbuf_set(err, errlen, "log file descriptor %d: %s", fd,
			   strerror(e));
		return -e;
	}
	f->tail_max = (max - MARK_MAX) / 3;
	f->head_max = max - MARK_MAX - 2 * f->tail_max;
	/* Only touched, so only backed by memory, once the head is full. */
	f->ring = malloc(f->tail_max);
	if (!f->ring) {
		errbuf_set(err, errlen,
			   "log file: no memory for a %" PRIu64 "-byte tail",
			   f->tail_max);
		return -ENOMEM;
	}
	f->capped = true;
	f->base = f->end = (uint64_t)at;
	f->tail_at = f->base + f->head_max;
	return 0;
}

uint64_t capfile_bound(const struct capfile *f)
{
	return f->head_max + MARK_MAX + 2 * f->tail_max;
}

void capfile_destroy(struct capfile *f)
{
	free(f->ring);
	f->ring = NULL;
	f->fd = -1;
}

static int fail(struct capfile *f, int ret)
{
	f->fd = -1;
	return ret;
}

/* The ring keeps the last tail_max bytes written past the head. */
static void ring_put(struct capfile *f, const uint8_t *buf, uint64_t len)
{
	if (len > f->tail_max) {
		buf += len - f->tail_max;
		f->ring_pos += len - f->tail_max;
		len = f->tail_max;
	}
	while (len > 0) {
		uint64_t at = f->ring_pos % f->tail_max;
		uint64_t n = f->tail_max - at < len ? f->tail_max - at : len;

		memcpy(f->ring + at, buf, n);
		f->ring_pos += n;
		buf += n;
		len -= n;
	}
}

/* The tail's last tail_max bytes, after the mark, and nothing after. */
static int cut(struct capfile *f)
{
	uint64_t at = f->base + f->head_max;
	uint64_t oldest = f->ring_pos % f->tail_max;
	char mark[MARK_MAX];
	int ret;

	f->dropped += f->end - f->tail_at - f->tail_max;
	int n = snprintf(mark, sizeof(mark),
			 "\n[thaw: %" PRIu64 " bytes dropped]\n", f->dropped);
	ret = pwrite_full(f->fd, mark, (size_t)n, (off_t)at);
	f->tail_at = at + (uint64_t)n;
	if (ret == 0)
		ret = pwrite_full(f->fd, f->ring + oldest, f->tail_max - oldest,
				  (off_t)f->tail_at);
	if (ret == 0)
		ret = pwrite_full(f->fd, f->ring, oldest,
				  (off_t)(f->tail_at + f->tail_max - oldest));
	f->end = f->tail_at + f->tail_max;
	if (ret == 0 && (ftruncate(f->fd, (off_t)f->end) < 0 ||
			 lseek(f->fd, (off_t)f->end, SEEK_SET) < 0))
		ret = -errno;
	return ret;
}

int capfile_write(struct capfile *f, const void *buf, size_t len)
{
	const uint8_t *p = buf;
	int ret;

	if (f->fd < 0)
		return -EBADF;
	if (!f->capped) {
		ret = write_full(f->fd, buf, len);
		return ret < 0 ? fail(f, ret) : 0;
	}
	while (len > 0) {
		bool in_head = f->end - f->base < f->head_max;
		uint64_t room =
			in_head ? f->head_max - (f->end - f->base)
				: 2 * f->tail_max - (f->end - f->tail_at);

		if (room == 0) {
			ret = cut(f);
			if (ret < 0)
				return fail(f, ret);
			continue;
		}
		size_t n = room < len ? (size_t)room : len;

		ret = write_full(f->fd, p, n);
		if (ret < 0)
			return fail(f, ret);
		if (!in_head)
			ring_put(f, p, n);
		f->end += n;
		p += n;
		len -= n;
	}
	return 0;
}

int capfile_parse_max(const char *text, uint64_t *max, char *err, size_t errlen)
{
	char *end;
	unsigned long long v;
	int shift = 0;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (*end == 'K' || *end == 'M' || *end == 'G') {
		shift = *end == 'K' ? 10 : *end == 'M' ? 20 : 30;
		end++;
	}
	if (errno || end == text || *end || text[0] == '-' ||
	    v > (CAPFILE_MAX_MAX >> shift) || (v << shift) < CAPFILE_MIN_MAX) {
		errbuf_set(err, errlen,
			   "log bound '%s': expected a number of bytes "
			   "(suffix K, M or G) from %llu to %llu",
			   text, CAPFILE_MIN_MAX, CAPFILE_MAX_MAX);
		return -1;
	}
	*max = v << shift;
	return 0;
}
