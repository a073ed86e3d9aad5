// SPDX-License-Identifier: Apache-2.0
/*
 * clone.c - see clone.h.  The catalog is opened per call and closed again:
 * an LMDB environment must not be carried across the fork that starts the
 * clone's VMM.
 */
#include "pool/host/clone.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "snapshot/host_cpu.h"
#include "pool/host/paths.h"
#include "snapshot/state.h"

/* The catalog in the state directory. */
static int open_catalog(struct catalog *c, char *err, size_t errlen)
{
	char state_dir[PATH_MAX], catalog_dir[PATH_MAX + 16];
	int ret = thaw_state_dir(state_dir, sizeof(state_dir), err, errlen);

	if (ret < 0)
		return ret;
	snprintf(catalog_dir, sizeof(catalog_dir), "%s/catalog", state_dir);
	return catalog_open(c, catalog_dir, err, errlen);
}

int clone_register(const char *id, const char *clone_id,
		   struct snapshot_record *snap, char *err, size_t errlen)
{
	struct catalog c;
	int ret = open_catalog(&c, err, errlen);

	if (ret < 0)
		return ret;
	ret = catalog_get_snapshot(&c, id, snap, err, errlen);
	if (ret == 0 && snap->format_version != STATE_FORMAT_VERSION) {
		snprintf(
			err, errlen,
			"snapshot %s has format version %u; this thaw restores version %u (take a new snapshot)",
			id, snap->format_version, STATE_FORMAT_VERSION);
		ret = -EINVAL;
	}
	if (ret == 0 && snap->cpu_signature != host_cpu_signature()) {
		char cpu[128];

		host_cpu_describe(cpu, sizeof(cpu));
		snprintf(
			err, errlen,
			"snapshot %s was taken on another kind of CPU than this %s",
			id, cpu);
		ret = -EINVAL;
	}
	if (ret == 0)
		ret = catalog_add_clone(&c, id, clone_id, getpid(), err,
					errlen);
	catalog_close(&c);
	return ret;
}

int clone_unregister(const char *id, const char *clone_id, char *err,
		     size_t errlen)
{
	struct catalog c;
	int ret = open_catalog(&c, err, errlen);

	if (ret < 0)
		return ret;
	ret = catalog_remove_clone(&c, id, clone_id, err, errlen);
	catalog_close(&c);
	return ret;
}
