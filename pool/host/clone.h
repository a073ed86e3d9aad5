/* SPDX-License-Identifier: Apache-2.0 */
/*
 * clone.h - the catalog side of a clone: the snapshot it is restored from
 * must exist and be restorable on this host (same format version and CPU
 * signature), and the clone is registered as live (catalog.h) for as long
 * as it runs, so the snapshot cannot be removed under it.  Registration
 * records our PID: if we die without unregistering, the catalog drops the
 * entry by itself.
 *
 * Errors: 0 or a negative errno (the catalog's, or -EINVAL for a snapshot
 * this host cannot restore), with one message in the caller's @err.
 */
#ifndef THAW_POOL_CLONE_H
#define THAW_POOL_CLONE_H

#include "snapshot/catalog.h"

/*
 * Checks snapshot @id and registers @clone_id as its live clone; @snap gets
 * the snapshot's record.
 */
int clone_register(const char *id, const char *clone_id,
		   struct snapshot_record *snap, char *err, size_t errlen);

/* Unregisters it. */
int clone_unregister(const char *id, const char *clone_id, char *err,
		     size_t errlen);

#endif
