// SPDX-License-Identifier: Apache-2.0
/*
 * test_snapshot_store.c - what a writer killed mid-snapshot leaves, and
 * what snapshot_store_collect() (pool/host/snapshot_store.h) makes of it:
 * the state a daemon or `thaw snapshot create` killed during a checkpoint
 * leaves on disk, laid out by hand, then collected as the daemon's start
 * does.  Garbage goes (a dead writer's .tmp- directory, a renamed one the
 * catalog never got, once past its grace); a live writer's work and every
 * snapshot the catalog names stay.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "snapshot/catalog.h"
#include "pool/host/snapshot_store.h"
#include "tests/unit/state_file.h"

#define TEMPLATE_ID "00000000000000aa"

static char scratch[128], snapshots[PATH_MAX], err[512];
static struct catalog cat;

static void setup(void)
{
	char dir[PATH_MAX + 16];

	scratch_dir_make(scratch, sizeof(scratch), "store");
	snprintf(snapshots, sizeof(snapshots), "%s/snapshots", scratch);
	cr_assert_eq(mkdir(snapshots, 0700), 0);
	snprintf(dir, sizeof(dir), "%s/catalog", scratch);
	cr_assert_eq(catalog_open(&cat, dir, err, sizeof(err)), 0, "%s", err);
}

static void teardown(void)
{
	catalog_close(&cat);
	scratch_dir_remove(scratch);
}

TestSuite(snapshot_store, .init = setup, .fini = teardown);

/* snapshots/@name with a file in it, last changed @age_s ago. */
static void snapshot_dir(const char *name, long age_s)
{
	char dir[PATH_MAX * 2], file[PATH_MAX * 2 + 16];
	struct timeval then[2];

	snprintf(dir, sizeof(dir), "%s/%s", snapshots, name);
	cr_assert_eq(mkdir(dir, 0700), 0, "%s", dir);
	snprintf(file, sizeof(file), "%s/memory.diff", dir);
	FILE *f = fopen(file, "w");
	cr_assert_not_null(f, "%s", file);
	fputs("half written", f);
	fclose(f);
	gettimeofday(&then[0], NULL);
	then[0].tv_sec -= age_s;
	then[1] = then[0];
	cr_assert_eq(utimes(dir, then), 0, "%s", dir);
}

static bool present(const char *name)
{
	char path[PATH_MAX * 2];

	snprintf(path, sizeof(path), "%s/%s", snapshots, name);
	return access(path, F_OK) == 0;
}

/* Snapshot @id in the catalog, at snapshots/@id. */
static void catalogued(const char *id)
{
	struct template_record t = { .record_version = CATALOG_RECORD_VERSION,
				     .nr_vcpus = 1,
				     .mem_size = 256 << 20,
				     .id = TEMPLATE_ID };
	struct snapshot_record s = { .record_version = CATALOG_RECORD_VERSION,
				     .format_version = 1,
				     .nr_vcpus = 1,
				     .mem_size = 256 << 20,
				     .template_id = TEMPLATE_ID };

	snprintf(s.id, sizeof(s.id), "%s", id);
	cr_assert_lt((size_t)snprintf(s.dir, sizeof(s.dir), "%.900s/%s",
				      snapshots, id),
		     sizeof(s.dir));
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)), 0,
		     "%s", err);
}

Test(snapshot_store, a_killed_writers_leftovers_go_and_nothing_else)
{
	char dead_writer[64], live_writer[64];
	pid_t dead = fork();

	cr_assert_geq(dead, 0);
	if (!dead)
		_exit(0);
	cr_assert_eq(waitpid(dead, NULL, 0), dead);
	snprintf(dead_writer, sizeof(dead_writer),
		 SNAPSHOT_TMP_PREFIX "1111111111111111-%d", (int)dead);
	snprintf(live_writer, sizeof(live_writer),
		 SNAPSHOT_TMP_PREFIX "2222222222222222-%d", (int)getpid());
	/* Killed while writing its files. */
	snapshot_dir(dead_writer, 0);
	/* Still writing. */
	snapshot_dir(live_writer, 0);
	/* Killed between the rename and the catalog's entry, an hour ago. */
	snapshot_dir("3333333333333333", 3600);
	/* Renamed a moment ago: its writer may add the entry yet. */
	snapshot_dir("4444444444444444", 0);
	/* Whole and catalogued, however old. */
	snapshot_dir("5555555555555555", 3600);
	catalogued("5555555555555555");

	snapshot_store_collect(snapshots, &cat);

	cr_expect_not(present(dead_writer));
	cr_expect(present(live_writer));
	cr_expect_not(present("3333333333333333"));
	cr_expect(present("4444444444444444"));
	cr_expect(present("5555555555555555"));
	struct snapshot_record rec;
	cr_expect_eq(catalog_get_snapshot(&cat, "5555555555555555", &rec, err,
					  sizeof(err)),
		     0, "%s", err);
}
