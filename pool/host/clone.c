// SPDX-License-Identifier: Apache-2.0
/*
 * clone.c - see clone.h.  The catalog is opened per call and closed again:
 * an LMDB environment must not be carried across the fork that starts the
 * clone's VMM.
 */
#include "clone.h"

#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "host_cpu.h"
#include "paths.h"
#include "state.h"

int clone_register(const char *who, const char *id, const char *clone_id,
		   struct snapshot_record *snap)
{
	char state_dir[PATH_MAX], catalog_dir[PATH_MAX + 16], err[512];
	struct catalog c;

	if (thaw_state_dir(state_dir, sizeof(state_dir), err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return -1;
	}
	snprintf(catalog_dir, sizeof(catalog_dir), "%s/catalog", state_dir);
	if (catalog_open(&c, catalog_dir, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return -1;
	}
	int ret = catalog_get_snapshot(&c, id, snap, err, sizeof(err));
	if (ret == 0 && snap->format_version != STATE_FORMAT_VERSION) {
		snprintf(
			err, sizeof(err),
			"snapshot %s has format version %u; this thaw restores version %u (take a new snapshot)",
			id, snap->format_version, STATE_FORMAT_VERSION);
		ret = -1;
	}
	if (ret == 0 && snap->cpu_signature != host_cpu_signature()) {
		char cpu[128];

		host_cpu_describe(cpu, sizeof(cpu));
		snprintf(
			err, sizeof(err),
			"snapshot %s was taken on another kind of CPU than this %s",
			id, cpu);
		ret = -1;
	}
	if (ret == 0)
		ret = catalog_add_clone(&c, id, clone_id, getpid(), err,
					sizeof(err));
	if (ret < 0)
		fprintf(stderr, "%s: %s\n", who, err);
	catalog_close(&c);
	return ret < 0 ? -1 : 0;
}

void clone_unregister(const char *who, const char *id, const char *clone_id)
{
	char state_dir[PATH_MAX], catalog_dir[PATH_MAX + 16], err[512];
	struct catalog c;

	if (thaw_state_dir(state_dir, sizeof(state_dir), err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return;
	}
	snprintf(catalog_dir, sizeof(catalog_dir), "%s/catalog", state_dir);
	if (catalog_open(&c, catalog_dir, err, sizeof(err)) < 0 ||
	    catalog_remove_clone(&c, id, clone_id, err, sizeof(err)) < 0)
		fprintf(stderr, "%s: %s\n", who, err);
	catalog_close(&c);
}
