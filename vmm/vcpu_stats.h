/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vcpu_stats.h - whether a vCPU has sat in one wait since the last look,
 * learnt from KVM's statistics without disturbing it, and when such a vCPU
 * is worth the kick that asks what kind of wait it is.
 *
 * vm.c must notice a guest that halted with interrupts off (vm.h), which
 * only KVM_GET_MP_STATE and KVM_GET_REGS tell, and those need the vCPU out
 * of KVM_RUN: a kick (a signal, a KVM exit and re-entry).  Kicking every
 * vCPU of every idle clone a few times a second is most of what an idle
 * clone costs, so the kick is saved for vCPUs that may be parked.
 *
 * KVM_GET_STATS_FD (Linux 5.14; Documentation/virt/kvm/api.rst) gives each
 * vCPU a file of named counters: a header, descriptors (name, type, where
 * the value is), then the values, which pread() returns as they are now
 * without touching the vCPU.  The descriptors are read once, at open; a
 * look reads three values:
 *
 *	blocking	1 while KVM waits for an event to resume the vCPU: a
 *			halt, or an AP waiting for its start IPI (5.16)
 *	halt_exits	HLT instructions the guest has executed (x86)
 *	halt_wakeup	waits that an event ended (not a signal: a kick)
 *
 * A vCPU that is not blocking, or executed HLT or woke since the last look, is
 * not in the wait the last sample saw: it is not parked until sampled again.
 * One blocking in the same wait as at the last look may be parked (halted with
 * interrupts off, or an AP never started), which only the kick's sample tells.
 * A halt with interrupts on does not change while it lasts (the guest runs
 * again only once an event ends it), so the gap before sampling it again
 * doubles from the base period up to a cap; anything new starts over.  A vCPU
 * last sampled parked is sampled every base period, so a guest that stops
 * itself is seen in two samples a period apart.  A look costs three pread()s
 * and no exit.  A kicked vCPU is briefly not blocking, which a look may take
 * for a run: that costs a period, never a wrong stop.  Both counters, as each
 * misses a way from one wait to the next: a halt that an interrupt ends while
 * KVM still polls counts no wakeup, and an INIT turns a halt into a wait for
 * the start IPI without a HLT.
 */
#ifndef THAW_VMM_VCPU_STATS_H
#define THAW_VMM_VCPU_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The statistics a look reads, by the names KVM gives them. */
#define VCPU_STAT_BLOCKING "blocking"
#define VCPU_STAT_HALTS "halt_exits"
#define VCPU_STAT_WAKEUPS "halt_wakeup"

struct vcpu_stats {
	int fd;		   /* the vCPU's statistics file, -1: none */
	off_t blocking_at; /* where the values are in it */
	off_t halts_at;
	off_t wakeups_at;
};

/* What a look saw. */
struct vcpu_activity {
	bool blocking;
	uint64_t halts;
	uint64_t wakeups;
};

/*
 * Opens the statistics of the vCPU @vcpu_fd, finds the values in them
 * and reads them into @first.  Before the vCPU runs: KVM_GET_STATS_FD
 * waits for a KVM_RUN in progress to return.  Returns 0, or a negative
 * errno with a message in @err: -ENOTTY or -EINVAL when KVM lacks
 * KVM_GET_STATS_FD, -ENOENT when a value is not among its statistics,
 * -EINVAL for a malformed file.  @s->fd is -1 after a failure.
 */
int vcpu_stats_open(struct vcpu_stats *s, int vcpu_fd,
		    struct vcpu_activity *first, char *err, size_t errlen);

/* The same for an open statistics file, which @s owns from then on. */
int vcpu_stats_adopt(struct vcpu_stats *s, int stats_fd,
		     struct vcpu_activity *first, char *err, size_t errlen);

/* Returns 0, or a negative errno (the file read failed or came up short). */
int vcpu_stats_read(const struct vcpu_stats *s, struct vcpu_activity *a);

void vcpu_stats_close(struct vcpu_stats *s);

/*
 * One vCPU's watch for "parked", kept by whoever looks (vm.c's main
 * thread).  Times are CLOCK_MONOTONIC nanoseconds.
 */
struct vcpu_watch {
	uint64_t base_ns;     /* the period between looks */
	uint64_t cap_ns;      /* the longest gap between samples of a halt */
	uint64_t halts;	      /* halt_exits at the last look */
	uint64_t wakeups;     /* halt_wakeup at the last look */
	uint64_t gap_ns;      /* from the last sample to the next */
	uint64_t next_sample; /* when the halt it is in is sampled again */
};

enum vcpu_look {
	VCPU_RAN,    /* it ran since the last look: not parked, no kick */
	VCPU_WAIT,   /* the same halt, sampled recently enough: no kick */
	VCPU_SAMPLE, /* kick it and sample its state */
};

/* Starts a watch from @first, a look taken before the vCPU may have run. */
void vcpu_watch_start(struct vcpu_watch *w, const struct vcpu_activity *first,
		      uint64_t base_ns, uint64_t cap_ns);

/*
 * One look at @now: @seen is what the statistics say, @parked what the
 * last sample said.  A VCPU_SAMPLE answer counts as the sample being taken
 * at @now.
 */
enum vcpu_look vcpu_watch_look(struct vcpu_watch *w,
			       const struct vcpu_activity *seen, bool parked,
			       uint64_t now);

#endif
