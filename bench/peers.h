/* SPDX-License-Identifier: Apache-2.0 */
/*
 * peers.h - the sandboxes thaw is compared with, timed on the same command.
 *
 * A clone's latency means little alone: the question a reader has is "how
 * does it compare with what I would use otherwise?".  The peers are the two
 * answers most people have: gVisor (a user-space kernel, the other strong
 * isolation boundary) and bubblewrap (Linux namespaces, the cheap one).
 * Each runs `true` in a fresh sandbox per run and is timed from spawn to
 * exit, the same span a thaw figure covers from request to command exit.
 *
 * A peer that cannot run here is reported with its own words (its first
 * lines of output and its exit status), never skipped: a figure with a peer
 * silently missing would read as a comparison it is not.
 */
#ifndef THAW_BENCH_PEERS_H
#define THAW_BENCH_PEERS_H

#include <stddef.h>

#include "bench/stats.h"

/*
 * Runs `true` in a fresh sandbox of @peer ("runsc" = gVisor's `runsc do`,
 * or "bwrap" = bubblewrap with a read-only bind of / and fresh pid, ipc,
 * uts and net namespaces, i.e. a typical sandbox), @runs times, adding each
 * wall time (spawn to exit, ms) to @out.  Returns 0, or -1 with @err holding
 * why the peer cannot run here: not installed, or the peer's own error
 * output (first lines) and exit status.  The first failing run fails the
 * whole measurement.
 */
int peer_measure(const char *peer, int runs, struct samples *out, char *err,
		 size_t errlen);

/* The peers measured, in order, NULL-terminated. */
extern const char *const peer_names[];

#endif
