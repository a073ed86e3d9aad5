/* SPDX-License-Identifier: Apache-2.0 */
/*
 * catalog.h - the LMDB catalog of templates, snapshots and live clones.
 *
 * One LMDB environment (<state dir>/catalog/) with three named databases:
 *
 *	templates	template id -> struct template_record
 *	snapshots	snapshot id -> struct snapshot_record
 *	clones		"<snapshot id>/<clone id>" -> struct clone_record
 *
 * Records are fixed-size structs that begin with a record version, so a
 * catalog written by another thaw version is refused with a message rather
 * than misread (but for the older versions CATALOG_RECORD_VERSION's comment
 * names, which are read).  Every change is one LMDB write transaction: a
 *process killed at any point leaves either the old or the new catalog, never a
 *mixture. The snapshot files are written, fsynced and renamed into place by
 *their writer *before* catalog_add_snapshot(), so no entry ever names a
 * half-written snapshot; files without an entry are garbage a later
 * `thaw snapshot` command may remove.
 *
 * Reference counts: a snapshot's child snapshots (snapshots taken of its
 * clones) are counted in its record, updated in the same transaction that
 * adds or removes a child.  Live clones are one entry each, holding the
 * clone's owner PID and that process's start time; an entry whose process
 * is gone (killed with -9, say) is dropped by the next transaction that
 * counts clones, so a crash never pins a snapshot forever.  A snapshot with
 * live clones or children cannot be removed.
 *
 * Errors: functions return 0 or a negative errno (-ENOENT: no such entry,
 * -EEXIST, -EBUSY: in use, -EINVAL: bad id or record, -EIO: LMDB failed)
 * after writing one message into the caller's err buffer (err may be NULL).
 */
#ifndef THAW_SNAPSHOT_CATALOG_H
#define THAW_SNAPSHOT_CATALOG_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <lmdb.h>

/*
 * 2 added a snapshot's memory kind (depth, dirty_bytes) at the end of its
 * record; a version 1 record is read as version 2 with those zero (a full
 * memory.img, as every version 1 snapshot's was), and written back as
 * version 2 when the catalog next changes it.  Templates and clones did
 * not change.
 */
#define CATALOG_RECORD_VERSION 2
/* Ids are lowercase hex: 16 digits (64 random or hashed bits). */
#define CATALOG_ID_LEN 16
#define CATALOG_HASH_LEN 32 /* XXH3-128 of a file, hex */
#define CATALOG_CLONE_ID_MAX 64
#define CATALOG_PATH_MAX 1024

struct template_record {
	uint32_t record_version;
	uint32_t nr_vcpus;
	uint64_t mem_size;
	int64_t created_unix;
	char id[CATALOG_ID_LEN + 1];
	char kernel_hash[CATALOG_HASH_LEN + 1];
	char initrd_hash[CATALOG_HASH_LEN + 1];
	char latest_snapshot[CATALOG_ID_LEN + 1];
};

struct snapshot_record {
	uint32_t record_version;
	uint32_t format_version; /* snapshot/state.h STATE_FORMAT_VERSION */
	uint32_t nr_vcpus;
	uint32_t children; /* snapshots whose parent this is */
	uint64_t mem_size;
	uint64_t cpu_signature;
	uint64_t memory_hash_root;
	uint64_t state_size;  /* bytes of state.bin */
	uint64_t memory_disk; /* bytes memory.img occupies (sparse) */
	int64_t created_unix;
	char id[CATALOG_ID_LEN + 1];
	char template_id[CATALOG_ID_LEN + 1];
	char parent[CATALOG_ID_LEN + 1]; /* "" for a template's base */
	char dir[CATALOG_PATH_MAX];	 /* state.bin, memory.img, ... */
	/* Version 2.  Memory is memory.img (depth 0) or memory.diff over
	 * its parent's, @depth diff layers over a base (memdiff.h). */
	uint64_t dirty_bytes; /* the diff's page data; 0 when full */
	uint32_t depth;
	uint32_t reserved; /* zero */
};

struct clone_record {
	uint32_t record_version;
	int32_t pid;
	uint64_t pid_start_time; /* /proc/<pid>/stat field 22 */
	int64_t created_unix;
};

struct catalog {
	MDB_env *env;
	MDB_dbi templates;
	MDB_dbi snapshots;
	MDB_dbi clones;
	char dir[PATH_MAX];
};

/* Opens (creating @dir and the databases if needed) the catalog in @dir. */
int catalog_open(struct catalog *c, const char *dir, char *err, size_t errlen);
void catalog_close(struct catalog *c);

/* A fresh random snapshot/clone id: CATALOG_ID_LEN hex digits + NUL. */
int catalog_new_id(char id[CATALOG_ID_LEN + 1]);
/* 0 if @id is CATALOG_ID_LEN lowercase hex digits, else -EINVAL + message. */
int catalog_check_id(const char *id, char *err, size_t errlen);

/*
 * Records @tmpl if its id is new (an existing template keeps its record)
 * and @snap, which must be new; when @snap->parent is set, that snapshot must
 * exist and its children count goes up.  The catalog keeps latest_snapshot
 * (@tmpl's is ignored): a base snapshot (no parent) becomes its template's
 * latest.  One transaction.
 */
int catalog_add_snapshot(struct catalog *c, const struct template_record *tmpl,
			 const struct snapshot_record *snap, char *err,
			 size_t errlen);

/*
 * Snapshots written before guest memory was kept private have
 * 0755 directories and 0644 files, and so may the catalog: takes the
 * group's and others' bits off the catalog directory and its files, and
 * off each recorded snapshot's directory and the regular files in it
 * (symbolic links and absent directories are left alone), logging each
 * change (log_info).  Idempotent: what it changed once it finds right
 * after.  The number of modes changed, or a negative errno after a
 * message.
 */
int catalog_tighten_modes(struct catalog *c, char *err, size_t errlen);

/* Looks up @id; -ENOENT with a message naming it and the catalog if absent. */
int catalog_get_snapshot(struct catalog *c, const char *id,
			 struct snapshot_record *out, char *err, size_t errlen);
int catalog_get_template(struct catalog *c, const char *id,
			 struct template_record *out, char *err, size_t errlen);

/*
 * All snapshots, oldest first, in a malloc'd array (*out, *count); the
 * caller frees it.  @clones, if not NULL, gets a malloc'd parallel array of
 * live clone counts.
 */
int catalog_list_snapshots(struct catalog *c, struct snapshot_record **out,
			   uint32_t **clones, size_t *count, char *err,
			   size_t errlen);

/* Live clones of @id, dropping entries of dead processes on the way. */
int catalog_count_clones(struct catalog *c, const char *id, uint32_t *count,
			 char *err, size_t errlen);

/*
 * Removes @id's entry (not its files) unless it has live clones or
 * children (-EBUSY, the message says how many); decrements its parent's
 * children count and clears its template's latest_snapshot if it was @id.
 */
int catalog_remove_snapshot(struct catalog *c, const char *id, char *err,
			    size_t errlen);

/* Registers clone @clone_id of snapshot @id, owned by process @pid. */
int catalog_add_clone(struct catalog *c, const char *id, const char *clone_id,
		      pid_t pid, char *err, size_t errlen);
/* Unregisters it; -ENOENT if it was not registered. */
int catalog_remove_clone(struct catalog *c, const char *id,
			 const char *clone_id, char *err, size_t errlen);

#endif
