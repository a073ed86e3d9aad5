/* SPDX-License-Identifier: Apache-2.0 */
/*
 * capfile.h - a log file its writer cannot grow past a bound: the guest's
 * console log, which a guest fills at will (`cat /dev/zero > /dev/ttyS0`),
 * and the VMM's own log, which guest-triggered device errors lengthen.
 *
 * A capped file keeps its first bytes (a boot's messages, a VMM's start)
 * and its latest ones (a guest's last words, the VMM's reason for
 * stopping, which its supervisor reads from the end), with one line in
 * between saying how much went:
 *
 *	HEAD\n[thaw: 123456 bytes dropped]\nTAIL
 *
 * The file stays a plain log, readable from either end at any moment.
 * Past the head, bytes are appended until the tail holds twice its share;
 * then the last share, kept in memory as it was written, is written again
 * after the head with the new count, and the file is cut after it.  Each
 * byte is thus written at most twice, never synced: a guest writing
 * flat out costs the VMM no more than twice the plain copy.
 *
 * Appends use write(2), so the descriptor's offset stays at the file's
 * end, where whoever else writes to it (the SIGSYS handler's last line,
 * seccomp_filters.h) adds after the latest bytes; rewriting the tail uses
 * pwrite(2), ftruncate(2) and lseek(2).  Another descriptor (a pipe, a
 * terminal) has no size to bound and is written through unchanged.
 *
 * Not thread-safe: one writer at a time (the caller's lock).
 */
#ifndef THAW_COMMON_CAPFILE_H
#define THAW_COMMON_CAPFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* thaw-vmm --log-max's default: a 1 MiB head, then 1 to 2 MiB of tail. */
#define CAPFILE_DEFAULT_MAX (3ULL << 20)
/* The least bound accepted: room for the mark and some of each end. */
#define CAPFILE_MIN_MAX 1024ULL
/* The most: a bound beyond a terabyte is no bound. */
#define CAPFILE_MAX_MAX (1ULL << 40)

struct capfile {
	int fd;		   /* -1: nothing is written */
	bool capped;	   /* a regular file: bounded */
	uint64_t base;	   /* the offset its writer found it at */
	uint64_t head_max; /* bytes kept from the start */
	uint64_t tail_max; /* the latest bytes kept at a cut */
	uint64_t end;	   /* the file's end, as we wrote it */
	uint64_t tail_at;  /* where the tail's bytes start (after a mark) */
	uint64_t dropped;  /* bytes cut out so far */
	uint8_t *ring;	   /* the last tail_max bytes written past the head */
	uint64_t ring_pos; /* bytes ever put in the ring */
};

/*
 * Takes @fd (not owned: capfile_destroy() leaves it open; -1: write
 * nothing) to write at most about @max bytes into, CAPFILE_MIN_MAX ..
 * CAPFILE_MAX_MAX, counted from its current offset.  0, or a negative
 * errno with @err naming the problem.
 */
int capfile_init(struct capfile *f, int fd, uint64_t max, char *err,
		 size_t errlen);

/*
 * Appends @len bytes, cutting the middle out when the bound would be
 * passed.  0, or a negative errno: then @f writes nothing more (a full
 * disk or a closed reader must not stop the guest, nor be retried at
 * every byte).
 */
int capfile_write(struct capfile *f, const void *buf, size_t len);

/* The most bytes the file takes from its base on: head, mark, tail. */
uint64_t capfile_bound(const struct capfile *f);

void capfile_destroy(struct capfile *f);

/*
 * Parses a --log-max value, a number of bytes with an optional K, M or G
 * (KiB, MiB, GiB) suffix within CAPFILE_MIN_MAX .. CAPFILE_MAX_MAX.  0, or
 * -1 with @err quoting @text and saying what is accepted.
 */
int capfile_parse_max(const char *text, uint64_t *max, char *err,
		      size_t errlen);

#endif
