/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm_report.h - the one channel on which thaw-vmm reports to its
 * supervisor (pool/host/vmm_process.h), both ends: the VMM writes records
 * to its --ready-fd pipe, the supervisor reads them back.  Defined once
 * here, so the two ends cannot drift apart; the VMM's log is for people
 * and nobody parses it.
 *
 * A record is one line of at most VMM_REPORT_LINE_MAX bytes, newline
 * included, written with one write(2): a pipe takes that much whole, so a
 * record is never interleaved with another one, nor half written.
 *
 *	KIND KEY=VALUE KEY=VALUE ...\n
 *
 * KIND and KEY are lower-case words ([a-z0-9_], at most VMM_REPORT_KEY_MAX
 * - 1 bytes); a VALUE is its bytes with space, '%', '=', controls and DEL
 * written as %XX, at most VMM_REPORT_VALUE_MAX - 1 bytes decoded.  The
 * records:
 *
 *	ready started_at_us=A [setup_us=S restore_us=R prefetched_pages=P
 *	      prefetch_us=F]
 *		the VM is built and its sockets listen: a connection from now
 *		on reaches the guest.  A is the VMM's start on CLOCK_MONOTONIC,
 *		which a supervisor shares with its child (so it can tell how
 *		long fork and exec took); a restored clone adds where its
 *		restore's time went: S from the VMM's start to its state
 *		restore, F of them spent prefetching P pages, R loading the
 *		state.
 *	stop status=N [setup_us=S kernel_start_us=K init_us=I] reason=TEXT
 *		the VMM ends with exit status N (enum vm_status) because of
 *		TEXT; S is the VMM's setup (to the first vCPU entering the
 *		guest, or a restore's to its state restore), a boot's K and I
 *		from there to the kernel's first output and to /init (each
 *		only once reached).  Also the last word of a VMM that could
 *		not start (the supervisor's child before exec writes one).
 *	stop seccomp_syscall=NR seccomp_name=NAME reason=TEXT
 *		a thread made a forbidden system call: the SIGSYS handler's
 *		record (seccomp_filters.h), after which the VMM dies by
 *		SIGSYS.
 *
 * A reader ignores kinds and keys it does not know, so either end may add
 * some; it keeps the last record of each kind.  Hostile or broken input
 * (a line too long, bad syntax, bytes with no newline when the pipe
 * closes) is dropped and said in the reader's problem, never half used.
 *
 * The writer's functions are async-signal-safe (no allocation, no stdio):
 * a SIGSYS handler and a child between clone and exec use them.
 */
#ifndef THAW_VMM_VMM_REPORT_H
#define THAW_VMM_VMM_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VMM_REPORT_LINE_MAX 1024
#define VMM_REPORT_KEY_MAX 32
#define VMM_REPORT_VALUE_MAX 512

#define VMM_REPORT_READY "ready"
#define VMM_REPORT_STOP "stop"

/* ---- writing (the VMM) ---- */

struct vmm_record {
	char line[VMM_REPORT_LINE_MAX];
	size_t len;
};

/* Starts a record of kind @kind. */
void vmm_record_begin(struct vmm_record *r, const char *kind);

/* Adds KEY=VALUE; a field that does not fit is left out (a text value
 * is cut to what fits), so put the long text last. */
void vmm_record_put_u64(struct vmm_record *r, const char *key, uint64_t value);
void vmm_record_put_text(struct vmm_record *r, const char *key,
			 const char *text);

/* Ends the record and writes it to @fd in one write(2): 0, or -errno. */
int vmm_record_send(struct vmm_record *r, int fd);

/* ---- reading (the supervisor) ---- */

struct vmm_report {
	/* The last complete, well-formed record of each kind, "" before. */
	char ready[VMM_REPORT_LINE_MAX];
	char stop[VMM_REPORT_LINE_MAX];
	/* The first record dropped and why, "" when none was. */
	char problem[160];
	/* The record being received. */
	char partial[VMM_REPORT_LINE_MAX];
	size_t partial_len;
	bool overlong; /* dropping the rest of a line too long */
};

void vmm_report_init(struct vmm_report *r);

/* Takes @len more bytes of the stream. */
void vmm_report_feed(struct vmm_report *r, const char *bytes, size_t len);

/* The stream ended: a record without its newline is truncated. */
void vmm_report_end(struct vmm_report *r);

/*
 * The decoded value of @key in @record (one of the lines above) into
 * @value (@size bytes, NUL-terminated).  0; -ENOENT when the record has no
 * such field (or is ""); -ENOSPC when the value does not fit.
 */
int vmm_report_text(const char *record, const char *key, char *value,
		    size_t size);

/* @key's value as an unsigned decimal number: 0, -ENOENT, or -EINVAL. */
int vmm_report_u64(const char *record, const char *key, uint64_t *value);

#endif
