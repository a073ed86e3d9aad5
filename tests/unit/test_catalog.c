// SPDX-License-Identifier: Apache-2.0
/*
 * test_catalog.c - the LMDB catalog: records round trip, reference counts,
 * clone entries of dead processes, refusals with their messages, and a
 * writer killed with -9 leaving a catalog that still reads and adds up.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "snapshot/catalog.h"

#define TMPL "7e7e7e7e7e7e7e7e"

static char tmp[64];
static char dir[128];
static struct catalog cat;
static char err[512];

static void setup(void)
{
	strcpy(tmp, "/tmp/thaw-catalog-test-XXXXXX");
	cr_assert_not_null(mkdtemp(tmp));
	/* Two levels that do not exist yet: catalog_open makes both. */
	snprintf(dir, sizeof(dir), "%s/state/catalog", tmp);
	cr_assert_eq(catalog_open(&cat, dir, err, sizeof(err)), 0, "%s", err);
}

static int remove_entry(const char *path, const struct stat *st, int type,
			struct FTW *ftw)
{
	(void)st;
	(void)type;
	(void)ftw;
	return remove(path);
}

static void teardown(void)
{
	catalog_close(&cat);
	nftw(tmp, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

TestSuite(catalog, .init = setup, .fini = teardown);

static void make_records(struct template_record *t, struct snapshot_record *s,
			 const char *id, const char *parent, int64_t created)
{
	memset(t, 0, sizeof(*t));
	t->record_version = CATALOG_RECORD_VERSION;
	t->nr_vcpus = 2;
	t->mem_size = 256 << 20;
	t->created_unix = 1000;
	strcpy(t->id, TMPL);
	strcpy(t->kernel_hash, "0123456789abcdef0123456789abcdef");
	strcpy(t->initrd_hash, "fedcba9876543210fedcba9876543210");

	memset(s, 0, sizeof(*s));
	s->record_version = CATALOG_RECORD_VERSION;
	s->format_version = 1;
	s->nr_vcpus = 2;
	s->mem_size = 256 << 20;
	s->created_unix = created;
	strcpy(s->id, id);
	strcpy(s->template_id, TMPL);
	strcpy(s->parent, parent);
	snprintf(s->dir, sizeof(s->dir), "/var/lib/thaw/snapshots/%s", id);
}

static void add(const char *id, const char *parent, int64_t created)
{
	struct template_record t;
	struct snapshot_record s;

	make_records(&t, &s, id, parent, created);
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)), 0,
		     "%s", err);
}

static struct snapshot_record get(const char *id)
{
	struct snapshot_record s;

	cr_assert_eq(catalog_get_snapshot(&cat, id, &s, err, sizeof(err)), 0,
		     "%s", err);
	return s;
}

static uint32_t clones_of(const char *id)
{
	uint32_t n = 99;

	cr_assert_eq(catalog_count_clones(&cat, id, &n, err, sizeof(err)), 0,
		     "%s", err);
	return n;
}

/* Registers clone @clone_id of @id, owned by @pid; it must succeed. */
static void add_clone(const char *id, const char *clone_id, pid_t pid)
{
	cr_assert_eq(
		catalog_add_clone(&cat, id, clone_id, pid, err, sizeof(err)), 0,
		"%s", err);
}

/* Removes snapshot @id; it must succeed. */
static void remove_snapshot(const char *id)
{
	cr_assert_eq(catalog_remove_snapshot(&cat, id, err, sizeof(err)), 0,
		     "%s", err);
}

static void reopen(void)
{
	catalog_close(&cat);
	cr_assert_eq(catalog_open(&cat, dir, err, sizeof(err)), 0, "%s", err);
}

/* Writes @val under @key straight into @dbi, as another thaw might have. */
static void put_raw(MDB_dbi dbi, const char *key, const void *val, size_t len)
{
	MDB_val k = { .mv_size = strlen(key), .mv_data = (void *)key };
	MDB_val v = { .mv_size = len, .mv_data = (void *)val };
	MDB_txn *txn;

	cr_assert_eq(mdb_txn_begin(cat.env, NULL, 0, &txn), 0);
	cr_assert_eq(mdb_put(txn, dbi, &k, &v, 0), 0);
	cr_assert_eq(mdb_txn_commit(txn), 0);
}

Test(catalog, open_creates_the_directory)
{
	struct stat st;
	char path[192];

	cr_assert_eq(stat(dir, &st), 0);
	cr_assert(S_ISDIR(st.st_mode));
	cr_assert_eq(st.st_mode & 0777, 0700);
	snprintf(path, sizeof(path), "%s/data.mdb", dir);
	cr_assert_eq(stat(path, &st), 0);
	cr_expect_eq(st.st_mode & 0777, 0600, "data.mdb is %o",
		     st.st_mode & 0777);
}

Test(catalog, open_failure_names_the_directory)
{
	struct catalog other;
	char file[128], bad[192];
	FILE *f;

	snprintf(file, sizeof(file), "%s/plain-file", tmp);
	f = fopen(file, "w");
	cr_assert_not_null(f);
	fclose(f);
	snprintf(bad, sizeof(bad), "%s/catalog", file);
	cr_assert_lt(catalog_open(&other, bad, err, sizeof(err)), 0);
	cr_assert_not_null(strstr(err, bad), "%s", err);
	cr_assert_null(other.env);
}

Test(catalog, new_ids_are_random_hex)
{
	char a[CATALOG_ID_LEN + 1], b[CATALOG_ID_LEN + 1];

	cr_assert_eq(catalog_new_id(a), 0);
	cr_assert_eq(catalog_new_id(b), 0);
	cr_assert_eq(strlen(a), CATALOG_ID_LEN);
	cr_assert_eq(strspn(a, "0123456789abcdef"), CATALOG_ID_LEN);
	cr_assert_eq(catalog_check_id(a, err, sizeof(err)), 0);
	cr_assert_str_neq(a, b);
}

Test(catalog, records_round_trip)
{
	struct template_record t, gt;
	struct snapshot_record s, gs;

	make_records(&t, &s, "00000000000000a1", "", 1234567890);
	t.nr_vcpus = 3;
	t.mem_size = 0x123456789;
	t.created_unix = -5;
	/* The catalog keeps latest_snapshot: what the caller passes is moot. */
	strcpy(t.latest_snapshot, "ffffffffffffffff");
	s.format_version = 7;
	s.nr_vcpus = 3;
	s.children = 0;
	s.mem_size = 0x123456789;
	s.cpu_signature = 0x1122334455667788;
	s.memory_hash_root = 0x8877665544332211;
	s.state_size = 98765;
	s.memory_disk = 4321 << 12;
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)), 0,
		     "%s", err);

	gs = get("00000000000000a1");
	cr_assert_eq(gs.record_version, CATALOG_RECORD_VERSION);
	cr_assert_eq(gs.format_version, 7);
	cr_assert_eq(gs.nr_vcpus, 3);
	cr_assert_eq(gs.children, 0);
	cr_assert_eq(gs.mem_size, 0x123456789);
	cr_assert_eq(gs.cpu_signature, 0x1122334455667788);
	cr_assert_eq(gs.memory_hash_root, 0x8877665544332211);
	cr_assert_eq(gs.state_size, 98765);
	cr_assert_eq(gs.memory_disk, 4321 << 12);
	cr_assert_eq(gs.created_unix, 1234567890);
	cr_assert_str_eq(gs.id, "00000000000000a1");
	cr_assert_str_eq(gs.template_id, TMPL);
	cr_assert_str_eq(gs.parent, "");
	cr_assert_str_eq(gs.dir, s.dir);

	cr_assert_eq(catalog_get_template(&cat, TMPL, &gt, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(gt.record_version, CATALOG_RECORD_VERSION);
	cr_assert_eq(gt.nr_vcpus, 3);
	cr_assert_eq(gt.mem_size, 0x123456789);
	cr_assert_eq(gt.created_unix, -5);
	cr_assert_str_eq(gt.id, TMPL);
	cr_assert_str_eq(gt.kernel_hash, t.kernel_hash);
	cr_assert_str_eq(gt.initrd_hash, t.initrd_hash);
	cr_assert_str_eq(gt.latest_snapshot, "00000000000000a1");
}

Test(catalog, missing_entries_are_enoent)
{
	struct snapshot_record s;
	struct template_record t;

	cr_assert_eq(catalog_get_snapshot(&cat, "00000000000000a1", &s, err,
					  sizeof(err)),
		     -ENOENT);
	cr_assert_not_null(strstr(err, "no snapshot 00000000000000a1"), "%s",
			   err);
	cr_assert_not_null(strstr(err, dir), "%s", err);
	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, err, sizeof(err)),
		     -ENOENT);
	cr_assert_eq(catalog_remove_snapshot(&cat, "00000000000000a1", err,
					     sizeof(err)),
		     -ENOENT);
	cr_assert_eq(catalog_add_clone(&cat, "00000000000000a1", "c1", getpid(),
				       err, sizeof(err)),
		     -ENOENT);
}

Test(catalog, duplicate_snapshot_is_eexist_and_changes_nothing)
{
	struct template_record t;
	struct snapshot_record s;

	add("00000000000000a1", "", 1);
	add("00000000000000b1", "00000000000000a1", 2);
	make_records(&t, &s, "00000000000000b1", "00000000000000a1", 3);
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)),
		     -EEXIST);
	cr_assert_not_null(strstr(err, "00000000000000b1"), "%s", err);
	cr_assert_eq(get("00000000000000a1").children, 1);
	cr_assert_eq(get("00000000000000b1").created_unix, 2);
}

Test(catalog, missing_parent_is_enoent_and_adds_nothing)
{
	struct template_record t;
	struct snapshot_record s;

	make_records(&t, &s, "00000000000000b1", "00000000000000a1", 1);
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)),
		     -ENOENT);
	cr_assert_not_null(strstr(err, "00000000000000a1"), "%s", err);
	cr_assert_eq(
		catalog_get_snapshot(&cat, "00000000000000b1", &s, NULL, 0),
		-ENOENT);
	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, NULL, 0), -ENOENT);
}

Test(catalog, children_are_counted)
{
	struct snapshot_record s;

	add("00000000000000a1", "", 1);
	add("00000000000000b1", "00000000000000a1", 2);
	add("00000000000000b2", "00000000000000a1", 3);
	add("00000000000000c1", "00000000000000b1", 4);
	cr_assert_eq(get("00000000000000a1").children, 2);
	cr_assert_eq(get("00000000000000b1").children, 1);

	cr_assert_eq(catalog_remove_snapshot(&cat, "00000000000000a1", err,
					     sizeof(err)),
		     -EBUSY);
	cr_assert_str_eq(
		err,
		"snapshot 00000000000000a1 has 2 child snapshots; remove them first");
	cr_assert_eq(catalog_remove_snapshot(&cat, "00000000000000b1", err,
					     sizeof(err)),
		     -EBUSY);
	cr_assert_str_eq(
		err,
		"snapshot 00000000000000b1 has 1 child snapshot; remove it first");

	remove_snapshot("00000000000000c1");
	cr_assert_eq(get("00000000000000b1").children, 0);
	remove_snapshot("00000000000000b1");
	cr_assert_eq(get("00000000000000a1").children, 1);
	remove_snapshot("00000000000000b2");
	cr_assert_eq(get("00000000000000a1").children, 0);
	remove_snapshot("00000000000000a1");
	cr_assert_eq(catalog_get_snapshot(&cat, "00000000000000a1", &s, err,
					  sizeof(err)),
		     -ENOENT);
}

Test(catalog, template_tracks_its_latest_base)
{
	struct template_record t;

	add("00000000000000a1", "", 1);
	add("00000000000000b1", "00000000000000a1", 2);
	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, err, sizeof(err)), 0);
	cr_assert_str_eq(t.latest_snapshot, "00000000000000a1");
	add("00000000000000a2", "", 3);
	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, err, sizeof(err)), 0);
	cr_assert_str_eq(t.latest_snapshot, "00000000000000a2");
	/* The template record itself is the first one's. */
	cr_assert_eq(t.created_unix, 1000);

	remove_snapshot("00000000000000b1");
	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, err, sizeof(err)), 0);
	cr_assert_str_eq(t.latest_snapshot, "00000000000000a2");
	remove_snapshot("00000000000000a2");
	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, err, sizeof(err)), 0);
	cr_assert_str_eq(t.latest_snapshot, "");
}

Test(catalog, live_clone_blocks_removal)
{
	add("00000000000000a1", "", 1);
	add_clone("00000000000000a1", "web-1", getpid());
	cr_assert_eq(catalog_add_clone(&cat, "00000000000000a1", "web-1",
				       getpid(), err, sizeof(err)),
		     -EEXIST);
	cr_assert_eq(clones_of("00000000000000a1"), 1);

	cr_assert_eq(catalog_remove_snapshot(&cat, "00000000000000a1", err,
					     sizeof(err)),
		     -EBUSY);
	cr_assert_str_eq(err, "snapshot 00000000000000a1 has 1 live clone");
	add_clone("00000000000000a1", "web_2", getpid());
	cr_assert_eq(catalog_remove_snapshot(&cat, "00000000000000a1", err,
					     sizeof(err)),
		     -EBUSY);
	cr_assert_str_eq(err, "snapshot 00000000000000a1 has 2 live clones");

	cr_assert_eq(catalog_remove_clone(&cat, "00000000000000a1", "web-1",
					  err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(catalog_remove_clone(&cat, "00000000000000a1", "web-1",
					  err, sizeof(err)),
		     -ENOENT);
	cr_assert_not_null(strstr(err, "no clone web-1"), "%s", err);
	cr_assert_eq(catalog_remove_clone(&cat, "00000000000000a1", "web_2",
					  err, sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(clones_of("00000000000000a1"), 0);
	remove_snapshot("00000000000000a1");
}

/* A child dies with the test, should an assertion end it first. */
static pid_t fork_child(void)
{
	pid_t parent = getpid(), pid = fork();

	cr_assert_geq(pid, 0);
	if (!pid && (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() != parent))
		_exit(1);
	return pid;
}

/*
 * A child that runs until a byte arrives on *@release (closing it would not
 * do: children forked later hold copies of the write end).
 */
static pid_t spawn_waiting(int *release)
{
	int p[2];
	pid_t pid;
	char b;

	cr_assert_eq(pipe(p), 0);
	pid = fork_child();
	if (!pid)
		_exit(read(p[0], &b, 1) == 1 ? 0 : 1);
	close(p[0]);
	*release = p[1];
	return pid;
}

static void release(int fd)
{
	cr_assert_eq(write(fd, "x", 1), 1);
	close(fd);
}

Test(catalog, clones_of_dead_processes_are_dropped)
{
	int reaped_fd, zombie_fd, status;
	siginfo_t info;
	pid_t reaped, zombie;

	add("00000000000000a1", "", 1);
	/* Neighbours in key order must keep their entries. */
	add("00000000000000a0", "", 1);
	add("00000000000000a2", "", 1);
	add_clone("00000000000000a0", "z", getpid());
	add_clone("00000000000000a2", "a", getpid());

	reaped = spawn_waiting(&reaped_fd);
	zombie = spawn_waiting(&zombie_fd);
	add_clone("00000000000000a1", "reaped", reaped);
	add_clone("00000000000000a1", "zombie", zombie);
	add_clone("00000000000000a1", "me", getpid());
	cr_assert_eq(clones_of("00000000000000a1"), 3);

	release(reaped_fd);
	cr_assert_eq(waitpid(reaped, &status, 0), reaped);
	cr_assert_eq(clones_of("00000000000000a1"), 2);
	cr_assert_eq(catalog_remove_clone(&cat, "00000000000000a1", "reaped",
					  err, sizeof(err)),
		     -ENOENT, "the dead clone's entry is still there");

	/* Exited but not yet reaped: its VM is gone all the same. */
	release(zombie_fd);
	cr_assert_eq(waitid(P_PID, zombie, &info, WEXITED | WNOWAIT), 0);
	cr_assert_eq(clones_of("00000000000000a1"), 1);
	cr_assert_eq(waitpid(zombie, &status, 0), zombie);

	cr_assert_eq(clones_of("00000000000000a0"), 1);
	cr_assert_eq(clones_of("00000000000000a2"), 1);
	cr_assert_eq(catalog_add_clone(&cat, "00000000000000a1", "late", reaped,
				       err, sizeof(err)),
		     -ESRCH);
	cr_assert_not_null(strstr(err, "late"), "%s", err);
}

Test(catalog, reused_pid_is_not_the_clone)
{
	const char *key = "00000000000000a1/c1";
	MDB_val k = { .mv_size = strlen(key), .mv_data = (void *)key };
	struct clone_record rec;
	MDB_val v;
	MDB_txn *txn;

	add("00000000000000a1", "", 1);
	add_clone("00000000000000a1", "c1", getpid());
	cr_assert_eq(mdb_txn_begin(cat.env, NULL, MDB_RDONLY, &txn), 0);
	cr_assert_eq(mdb_get(txn, cat.clones, &k, &v), 0);
	cr_assert_eq(v.mv_size, sizeof(rec));
	memcpy(&rec, v.mv_data, sizeof(rec));
	mdb_txn_abort(txn);
	cr_assert_eq(rec.pid, getpid());
	cr_assert_gt(rec.pid_start_time, 0);

	/* Same pid, other start time: the registering process is gone. */
	rec.pid_start_time++;
	put_raw(cat.clones, key, &rec, sizeof(rec));
	cr_assert_eq(clones_of("00000000000000a1"), 0);
	cr_assert_eq(catalog_remove_clone(&cat, "00000000000000a1", "c1", err,
					  sizeof(err)),
		     -ENOENT);
}

Test(catalog, list_is_sorted_with_clone_counts)
{
	static const char *const order[] = { "00000000000000b1",
					     "00000000000000a2",
					     "00000000000000a3",
					     "00000000000000a1" };
	struct snapshot_record *list;
	uint32_t *clones;
	size_t n, i;

	add("00000000000000a1", "", 30);
	add("00000000000000a3", "", 20);
	add("00000000000000b1", "", 10);
	add("00000000000000a2", "", 20);
	add_clone("00000000000000a3", "x", getpid());
	add_clone("00000000000000a3", "y", getpid());
	add_clone("00000000000000b1", "x", getpid());

	cr_assert_eq(catalog_list_snapshots(&cat, &list, &clones, &n, err,
					    sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(n, 4);
	for (i = 0; i < n; i++)
		cr_assert_str_eq(list[i].id, order[i], "entry %zu", i);
	cr_assert_eq(clones[0], 1);
	cr_assert_eq(clones[1], 0);
	cr_assert_eq(clones[2], 2);
	cr_assert_eq(clones[3], 0);
	free(list);
	free(clones);

	cr_assert_eq(
		catalog_list_snapshots(&cat, &list, NULL, &n, err, sizeof(err)),
		0, "%s", err);
	cr_assert_eq(n, 4);
	cr_assert_str_eq(list[3].id, "00000000000000a1");
	free(list);
}

Test(catalog, empty_list)
{
	struct snapshot_record *list;
	uint32_t *clones;
	size_t n = 99;

	cr_assert_eq(catalog_list_snapshots(&cat, &list, &clones, &n, err,
					    sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(n, 0);
	free(list);
	free(clones);
}

Test(catalog, bad_ids_are_einval_with_a_message)
{
	static const char *const bad[] = { "xyz",
					   "",
					   "0123456789ABCDEF",
					   "0123456789abcde",
					   "0123456789abcdef0",
					   "0123456789abcdeg",
					   "01234567 9abcdef" };
	char long_clone[CATALOG_CLONE_ID_MAX + 2];
	struct template_record t;
	struct snapshot_record s;
	uint32_t n;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(catalog_check_id(bad[i], err, sizeof(err)),
			     -EINVAL, "'%s'", bad[i]);
		cr_assert_not_null(strstr(err, "is not a snapshot id"), "%s",
				   err);
	}
	cr_assert_eq(catalog_check_id(bad[0], NULL, 0), -EINVAL);

	cr_assert_eq(catalog_get_snapshot(&cat, "xyz", &s, err, sizeof(err)),
		     -EINVAL);
	cr_assert_str_eq(err, "'xyz' is not a snapshot id (16 hex digits)");
	err[0] = '\0';
	cr_assert_eq(catalog_remove_snapshot(&cat, "xyz", err, sizeof(err)),
		     -EINVAL);
	cr_assert_str_eq(err, "'xyz' is not a snapshot id (16 hex digits)");
	err[0] = '\0';
	cr_assert_eq(catalog_count_clones(&cat, "xyz", &n, err, sizeof(err)),
		     -EINVAL);
	cr_assert_str_eq(err, "'xyz' is not a snapshot id (16 hex digits)");
	err[0] = '\0';
	cr_assert_eq(catalog_add_clone(&cat, "xyz", "c1", getpid(), err,
				       sizeof(err)),
		     -EINVAL);
	cr_assert_str_eq(err, "'xyz' is not a snapshot id (16 hex digits)");
	err[0] = '\0';
	cr_assert_eq(catalog_remove_clone(&cat, "xyz", "c1", err, sizeof(err)),
		     -EINVAL);
	cr_assert_str_eq(err, "'xyz' is not a snapshot id (16 hex digits)");
	cr_assert_eq(catalog_get_template(&cat, "xyz", &t, err, sizeof(err)),
		     -EINVAL);
	cr_assert_str_eq(err, "'xyz' is not a template id (16 hex digits)");

	add("00000000000000a1", "", 1);
	memset(long_clone, 'c', sizeof(long_clone) - 1);
	long_clone[sizeof(long_clone) - 1] = '\0';
	cr_assert_eq(catalog_add_clone(&cat, "00000000000000a1", "", getpid(),
				       err, sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, "is not a clone id"), "%s", err);
	cr_assert_eq(catalog_add_clone(&cat, "00000000000000a1", "a/b",
				       getpid(), err, sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, "'a/b' is not a clone id"), "%s", err);
	cr_assert_eq(catalog_add_clone(&cat, "00000000000000a1", long_clone,
				       getpid(), err, sizeof(err)),
		     -EINVAL);
	long_clone[CATALOG_CLONE_ID_MAX] = '\0';
	add_clone("00000000000000a1", long_clone, getpid());
	cr_assert_eq(catalog_add_clone(&cat, "00000000000000a1", "c1", 0, err,
				       sizeof(err)),
		     -EINVAL);
}

Test(catalog, bad_records_are_refused)
{
	struct template_record t;
	struct snapshot_record s;

	make_records(&t, &s, "00000000000000a1", "", 1);
	s.record_version = 0;
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, "record_version"), "%s", err);

	make_records(&t, &s, "00000000000000a1", "", 1);
	s.dir[0] = '\0';
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, "dir"), "%s", err);

	make_records(&t, &s, "00000000000000a1", "", 1);
	memset(s.dir, 'd', sizeof(s.dir));
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)),
		     -EINVAL);

	make_records(&t, &s, "00000000000000a1", "", 1);
	memset(t.kernel_hash, 'f', sizeof(t.kernel_hash));
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)),
		     -EINVAL);

	make_records(&t, &s, "00000000000000a1", "", 1);
	strcpy(s.template_id, "00000000000000ee");
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, "belongs to template"), "%s", err);

	make_records(&t, &s, "00000000000000a1", "NOPE", 1);
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)),
		     -EINVAL);
	cr_assert_str_eq(err, "'NOPE' is not a snapshot id (16 hex digits)");

	make_records(&t, &s, "00000000000000A1", "", 1);
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, NULL, 0), -EINVAL);

	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, NULL, 0), -ENOENT);
}

Test(catalog, data_persists_across_reopen)
{
	struct template_record t;
	uint32_t n;

	add("00000000000000a1", "", 1);
	add("00000000000000b1", "00000000000000a1", 2);
	add_clone("00000000000000b1", "c", getpid());
	reopen();
	cr_assert_eq(get("00000000000000a1").children, 1);
	cr_assert_str_eq(get("00000000000000b1").parent, "00000000000000a1");
	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, err, sizeof(err)), 0);
	cr_assert_str_eq(t.latest_snapshot, "00000000000000a1");
	cr_assert_eq(catalog_count_clones(&cat, "00000000000000b1", &n, err,
					  sizeof(err)),
		     0);
	cr_assert_eq(n, 1);
}

Test(catalog, foreign_record_versions_are_refused)
{
	struct snapshot_record s, *list;
	struct template_record t;
	struct clone_record c;
	uint32_t n;
	size_t count;

	add("00000000000000a1", "", 1);
	make_records(&t, &s, "00000000000000ff", "", 1);
	s.record_version = 99;
	put_raw(cat.snapshots, s.id, &s, sizeof(s));
	cr_assert_eq(catalog_get_snapshot(&cat, "00000000000000ff", &s, err,
					  sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(
		strstr(err,
		       "snapshot 00000000000000ff has a record of version 99, this thaw reads 1 and 2"),
		"%s", err);
	cr_assert_not_null(strstr(err, dir), "%s", err);
	cr_assert_eq(catalog_list_snapshots(&cat, &list, NULL, &count, err,
					    sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, "version 99"), "%s", err);

	/* The right version but not this thaw's layout. */
	s.record_version = CATALOG_RECORD_VERSION;
	put_raw(cat.snapshots, "00000000000000ff", &s, sizeof(s) - 8);
	cr_assert_eq(catalog_get_snapshot(&cat, "00000000000000ff", &s, err,
					  sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, "bytes"), "%s", err);

	t.record_version = 4;
	put_raw(cat.templates, TMPL, &t, sizeof(t));
	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, err, sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(
		strstr(err, "template " TMPL " has a record of version 4"),
		"%s", err);

	memset(&c, 0, sizeof(c));
	c.record_version = 3;
	c.pid = getpid();
	put_raw(cat.clones, "00000000000000a1/old", &c, sizeof(c));
	cr_assert_eq(catalog_count_clones(&cat, "00000000000000a1", &n, err,
					  sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(
		strstr(err,
		       "clone 00000000000000a1/old has a record of version 3"),
		"%s", err);
}

/*
 * A catalog of the thaw before diff snapshots: version 1 snapshot records
 * are read (a full memory), and written back as version 2 when changed.
 */
Test(catalog, version_1_snapshot_records_are_read_as_full_memory)
{
	struct snapshot_record s, got;
	struct template_record t;

	add("00000000000000a1", "", 1);
	make_records(&t, &s, "00000000000000ee", "", 1);
	s.record_version = 1;
	s.dirty_bytes = 0xdead; /* not in a version 1 record */
	put_raw(cat.snapshots, s.id, &s,
		offsetof(struct snapshot_record, dirty_bytes));
	cr_assert_eq(catalog_get_snapshot(&cat, s.id, &got, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(got.record_version, CATALOG_RECORD_VERSION);
	cr_expect_eq(got.dirty_bytes, 0);
	cr_expect_eq(got.depth, 0);
	cr_expect_str_eq(got.dir, s.dir);

	/* A child's record and its parent's, changed: version 2 now. */
	add("00000000000000e1", "00000000000000ee", 1);
	cr_assert_eq(catalog_get_snapshot(&cat, s.id, &got, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(got.children, 1);
	cr_assert_eq(catalog_remove_snapshot(&cat, "00000000000000e1", err,
					     sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(catalog_remove_snapshot(&cat, s.id, err, sizeof(err)), 0,
		     "%s", err);
}

/* Stores @s raw; reading it back must fail with @needle in the message. */
static void expect_raw_snapshot_refused(struct snapshot_record *s,
					const char *needle)
{
	struct snapshot_record got;

	put_raw(cat.snapshots, s->id, s, sizeof(*s));
	cr_assert_eq(catalog_get_snapshot(&cat, s->id, &got, err, sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, needle), "%s", err);
}

/* A record whose strings have no end (a bad disk, another program's
 * write) is refused by name, on every way of reading it. */
Test(catalog, records_with_unterminated_strings_are_refused)
{
	struct snapshot_record s, *list;
	struct template_record t;
	size_t count;

	make_records(&t, &s, "00000000000000ee", "", 1);
	memset(s.dir, 'x', sizeof(s.dir));
	expect_raw_snapshot_refused(&s, "snapshot 00000000000000ee has a "
					"record whose dir is not a string");
	cr_assert_eq(catalog_list_snapshots(&cat, &list, NULL, &count, err,
					    sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, "whose dir"), "%s", err);

	make_records(&t, &s, "00000000000000ee", "", 1);
	memset(s.template_id, '7', sizeof(s.template_id));
	expect_raw_snapshot_refused(&s, "whose template_id");

	memset(t.kernel_hash, 'a', sizeof(t.kernel_hash));
	put_raw(cat.templates, TMPL, &t, sizeof(t));
	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, err, sizeof(err)),
		     -EINVAL);
	cr_assert_not_null(strstr(err, "template " TMPL " has a record whose "
				       "kernel_hash is not a string"),
			   "%s", err);
}

/*
 * Adds, removes and registers clones in a loop, one transaction each, until
 * killed; writes a byte to @ready after its first commit.
 */
static void __attribute__((noreturn)) writer(int ready)
{
	char last[CATALOG_ID_LEN + 1] = "";
	struct template_record t;
	struct snapshot_record s;
	char id[CATALOG_ID_LEN + 1];
	struct catalog c;
	unsigned int i;

	if (catalog_open(&c, dir, NULL, 0))
		_exit(1);
	for (i = 0;; i++) {
		if (catalog_new_id(id))
			_exit(2);
		make_records(&t, &s, id, i % 5 ? last : "", i);
		if (catalog_add_snapshot(&c, &t, &s, NULL, 0))
			_exit(3);
		if (!i && write(ready, "x", 1) != 1)
			_exit(4);
		if (i % 3 == 2) {
			if (catalog_remove_snapshot(&c, id, NULL, 0))
				_exit(5);
			continue;
		}
		strcpy(last, id);
		if (catalog_add_clone(&c, id, "c", getpid(), NULL, 0))
			_exit(6);
		if (i % 2 && catalog_remove_clone(&c, id, "c", NULL, 0))
			_exit(7);
	}
}

static size_t children_in(const struct snapshot_record *list, size_t n,
			  const char *id)
{
	size_t i, children = 0;

	for (i = 0; i < n; i++)
		children += !strcmp(list[i].parent, id);
	return children;
}

static bool listed(const struct snapshot_record *list, size_t n, const char *id)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(list[i].id, id))
			return true;
	return false;
}

Test(catalog, writer_killed_with_9_leaves_a_consistent_catalog, .timeout = 60)
{
	struct snapshot_record *list, s;
	struct template_record t;
	char expect_dir[CATALOG_PATH_MAX];
	size_t n, i, removed;
	uint32_t *clones;
	int round, p[2], status;
	pid_t pid;
	char b;

	/* LMDB wants an env used only by the process that opened it. */
	catalog_close(&cat);
	for (round = 0; round < 5; round++) {
		cr_assert_eq(pipe(p), 0);
		pid = fork_child();
		if (!pid) {
			close(p[0]);
			writer(p[1]);
		}
		close(p[1]);
		cr_assert_eq(read(p[0], &b, 1), 1, "writer failed early");
		close(p[0]);
		usleep(1000 + round * 7000);
		cr_assert_eq(kill(pid, SIGKILL), 0);
		cr_assert_eq(waitpid(pid, &status, 0), pid);
		cr_assert(WIFSIGNALED(status), "writer failed: status %d",
			  status);
	}
	cr_assert_eq(catalog_open(&cat, dir, err, sizeof(err)), 0, "%s", err);

	cr_assert_eq(catalog_list_snapshots(&cat, &list, &clones, &n, err,
					    sizeof(err)),
		     0, "%s", err);
	cr_assert_gt(n, 0);
	for (i = 0; i < n; i++) {
		cr_assert_eq(list[i].record_version, CATALOG_RECORD_VERSION);
		cr_assert_eq(catalog_check_id(list[i].id, err, sizeof(err)), 0,
			     "%s", err);
		cr_assert_str_eq(list[i].template_id, TMPL);
		snprintf(expect_dir, sizeof(expect_dir),
			 "/var/lib/thaw/snapshots/%s", list[i].id);
		cr_assert_str_eq(list[i].dir, expect_dir);
		cr_assert(!list[i].parent[0] || listed(list, n, list[i].parent),
			  "%s has a missing parent", list[i].id);
		cr_assert_eq(list[i].children, children_in(list, n, list[i].id),
			     "%s", list[i].id);
		/* Every clone's owner is dead. */
		cr_assert_eq(clones[i], 0, "%s", list[i].id);
		s = get(list[i].id);
		cr_assert_eq(memcmp(&s, &list[i], sizeof(s)), 0);
		if (i)
			cr_assert_leq(list[i - 1].created_unix,
				      list[i].created_unix);
	}
	cr_assert_eq(catalog_get_template(&cat, TMPL, &t, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert(!t.latest_snapshot[0] || listed(list, n, t.latest_snapshot));

	/* Still writable, and the counts let it be emptied leaf first. */
	add("00000000000000a1", list[n - 1].id, 1);
	remove_snapshot("00000000000000a1");
	for (removed = 0; removed < n;) {
		size_t before = removed;

		for (i = 0; i < n; i++) {
			if (!list[i].id[0] || get(list[i].id).children)
				continue;
			remove_snapshot(list[i].id);
			list[i].id[0] = '\0';
			removed++;
		}
		cr_assert_gt(removed, before, "no removable snapshot left");
	}
	free(list);
	free(clones);
}

static mode_t mode_of(const char *path)
{
	struct stat st;

	cr_assert_eq(lstat(path, &st), 0, "%s: %s", path, strerror(errno));
	return st.st_mode & 07777;
}

static void make_file(const char *path, mode_t mode)
{
	FILE *f = fopen(path, "w");

	cr_assert_not_null(f, "%s", path);
	fclose(f);
	cr_assert_eq(chmod(path, mode), 0);
}

Test(catalog, modes_from_before_private_snapshots_are_tightened_once)
{
	struct template_record t;
	struct snapshot_record s;
	char snap[256], file[320], other[320], link[320], data[256];

	/* A snapshot as thaw wrote it before memory was kept private: 0755 and
	 * 0644, the catalog too; and a symbolic link, which must stay as it is,
	 * to a file outside. */
	snprintf(snap, sizeof(snap), "%s/state/snapshots/aaaa", tmp);
	snprintf(file, sizeof(file), "%s/memory.img", snap);
	snprintf(other, sizeof(other), "%s/elsewhere", tmp);
	snprintf(link, sizeof(link), "%s/link", snap);
	snprintf(data, sizeof(data), "%s/data.mdb", dir);
	snprintf(file, sizeof(file), "%s/state/snapshots", tmp);
	cr_assert_eq(mkdir(file, 0755), 0);
	cr_assert_eq(mkdir(snap, 0755), 0);
	cr_assert_eq(chmod(snap, 0755), 0);
	snprintf(file, sizeof(file), "%s/memory.img", snap);
	make_file(file, 0644);
	make_file(other, 0644);
	cr_assert_eq(symlink(other, link), 0);
	cr_assert_eq(chmod(dir, 0755), 0);
	cr_assert_eq(chmod(data, 0644), 0);
	make_records(&t, &s, "aaaaaaaaaaaaaaaa", "", 1);
	snprintf(s.dir, sizeof(s.dir), "%s", snap);
	cr_assert_eq(catalog_add_snapshot(&cat, &t, &s, err, sizeof(err)), 0,
		     "%s", err);
	/* One whose directory is gone is no error. */
	add("bbbbbbbbbbbbbbbb", "", 2);

	cr_expect_eq(catalog_tighten_modes(&cat, err, sizeof(err)), 4, "%s",
		     err);
	cr_expect_eq(mode_of(dir), 0700);
	cr_expect_eq(mode_of(data), 0600);
	cr_expect_eq(mode_of(snap), 0700);
	cr_expect_eq(mode_of(file), 0600);
	cr_expect_eq(mode_of(other), 0644, "followed a symbolic link");
	cr_expect_eq(catalog_tighten_modes(&cat, err, sizeof(err)), 0,
		     "changed again: %s", err);
}
