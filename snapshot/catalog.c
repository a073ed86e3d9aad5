// SPDX-License-Identifier: Apache-2.0
/*
 * catalog.c - see catalog.h.
 */
#include "snapshot/catalog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/errbuf.h"
#include "common/log.h"

/*
 * The map is reserved address space, not disk: the file grows only as pages
 * are written.  A snapshot record is ~1.2 KiB, so 64 MiB holds tens of
 * thousands of snapshots, more than the disk under their memory files could;
 * a fixed size spares us resizing the map, which LMDB allows only while no
 * transaction is open anywhere in the process.
 */
#define CATALOG_MAP_SIZE (64UL << 20)
#define CATALOG_MAX_DBS 4

#define HEX_DIGITS "0123456789abcdef"
#define CLONE_ID_CHARS \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-"
/* "<snapshot id>/<clone id>" and its NUL */
#define CLONE_KEY_SIZE (CATALOG_ID_LEN + 1 + CATALOG_CLONE_ID_MAX + 1)

static int lmdb_error(const struct catalog *c, int rc, const char *what,
		      char *err, size_t errlen)
{
	errbuf_set(err, errlen, "catalog %s: %s: %s", c->dir, what,
		   mdb_strerror(rc));
	return -EIO;
}

static int no_entry(const struct catalog *c, const char *what, const char *id,
		    char *err, size_t errlen)
{
	errbuf_set(err, errlen, "catalog %s: no %s %s", c->dir, what, id);
	return -ENOENT;
}

static int check_hex_id(const char *kind, const char *id, char *err,
			size_t errlen)
{
	size_t len = strnlen(id, CATALOG_ID_LEN + 1);

	if (len == CATALOG_ID_LEN && strspn(id, HEX_DIGITS) == len)
		return 0;
	errbuf_set(err, errlen, "'%.*s%s' is not a %s id (%d hex digits)",
		   (int)len, id, len > CATALOG_ID_LEN ? "..." : "", kind,
		   CATALOG_ID_LEN);
	return -EINVAL;
}

int catalog_check_id(const char *id, char *err, size_t errlen)
{
	return check_hex_id("snapshot", id, err, errlen);
}

static int check_clone_id(const char *clone_id, char *err, size_t errlen)
{
	size_t len = strnlen(clone_id, CATALOG_CLONE_ID_MAX + 1);

	if (len && len <= CATALOG_CLONE_ID_MAX &&
	    strspn(clone_id, CLONE_ID_CHARS) == len)
		return 0;
	errbuf_set(err, errlen,
		   "'%.*s%s' is not a clone id (1 to %d of A-Z a-z 0-9 _ -)",
		   (int)len, clone_id, len > CATALOG_CLONE_ID_MAX ? "..." : "",
		   CATALOG_CLONE_ID_MAX);
	return -EINVAL;
}

int catalog_new_id(char id[CATALOG_ID_LEN + 1])
{
	uint8_t bytes[CATALOG_ID_LEN / 2];
	ssize_t n;
	size_t i;

	/* Blocks (interruptibly) only until the kernel's pool is seeded. */
	do
		n = getrandom(bytes, sizeof(bytes), 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (i = 0; i < sizeof(bytes); i++) {
		id[2 * i] = HEX_DIGITS[bytes[i] >> 4];
		id[2 * i + 1] = HEX_DIGITS[bytes[i] & 0xf];
	}
	id[CATALOG_ID_LEN] = '\0';
	return 0;
}

/*
 * The start time of process @pid in clock ticks after boot: a pid alone may
 * name a later process once the first has gone, the pair names one for good.
 * -ESRCH if no such process runs.
 */
static int pid_start_time(pid_t pid, uint64_t *start)
{
	char path[32], buf[4096], *p, *end, state = 0;
	ssize_t n;
	int fd, field, saved;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, buf, sizeof(buf) - 1);
	saved = errno;
	close(fd);
	if (n < 0)
		return -saved;
	buf[n] = '\0';
	/* Field 2, the command name in parentheses, may hold ' ' and ')'. */
	p = strrchr(buf, ')');
	if (!p)
		return -EINVAL;
	for (field = 3; field <= 22; field++) {
		p = strchr(p + 1, ' ');
		if (!p)
			return -EINVAL;
		if (field == 3)
			state = p[1];
	}
	/* A zombie's clone died with it; only the reaping is still to come. */
	if (state == 'Z' || state == 'X')
		return -ESRCH;
	*start = strtoull(p + 1, &end, 10);
	return end == p + 1 ? -EINVAL : 0;
}

static bool clone_alive(const struct clone_record *rec)
{
	uint64_t start;
	int ret = pid_start_time(rec->pid, &start);

	/*
	 * A process we may not inspect (EACCES under procfs hidepid=1) may
	 * still run: only a proven death drops the entry.
	 */
	if (ret && ret != -ESRCH)
		return true;
	return !ret && start == rec->pid_start_time;
}

/* A string in a record: its NUL is checked on write and on read. */
struct string_field {
	const char *name;
	size_t offset, size;
};

#define STRING_FIELD(type, field)                                         \
	{                                                                 \
#field, offsetof(type, field), sizeof(((type *)0)->field) \
	}

static const struct string_field template_strings[] = {
	STRING_FIELD(struct template_record, id),
	STRING_FIELD(struct template_record, kernel_hash),
	STRING_FIELD(struct template_record, initrd_hash),
	STRING_FIELD(struct template_record, latest_snapshot),
};

static const struct string_field snapshot_strings[] = {
	STRING_FIELD(struct snapshot_record, id),
	STRING_FIELD(struct snapshot_record, template_id),
	STRING_FIELD(struct snapshot_record, parent),
	STRING_FIELD(struct snapshot_record, dir),
};

/*
 * A corrupted record (a bad disk, another program's write) must not hand
 * its callers a string without an end: 0, or -EINVAL naming the field.
 */
static int check_strings(const struct catalog *c, const char *what,
			 const MDB_val *key, const void *rec, char *err,
			 size_t errlen)
{
	const struct string_field *fields = NULL;
	size_t n = 0;

	if (!strcmp(what, "template")) {
		fields = template_strings;
		n = sizeof(template_strings) / sizeof(template_strings[0]);
	} else if (!strcmp(what, "snapshot")) {
		fields = snapshot_strings;
		n = sizeof(snapshot_strings) / sizeof(snapshot_strings[0]);
	}
	for (size_t i = 0; i < n; i++)
		if (!memchr((const char *)rec + fields[i].offset, '\0',
			    fields[i].size)) {
			errbuf_set(err, errlen,
				   "catalog %s: %s %.*s has a record whose %s "
				   "is not a string of at most %zu bytes "
				   "(corrupted)",
				   c->dir, what, (int)key->mv_size,
				   (const char *)key->mv_data, fields[i].name,
				   fields[i].size - 1);
			return -EINVAL;
		}
	return 0;
}

/* Version 1 of a snapshot record: version 2 without what it added. */
#define SNAPSHOT_RECORD_V1_SIZE offsetof(struct snapshot_record, dirty_bytes)
_Static_assert(SNAPSHOT_RECORD_V1_SIZE == 1144,
	       "version 1 snapshot records are 1144 bytes");

/* How many bytes a version 1 record of @what had (this thaw's: @size). */
static size_t v1_size(const char *what, size_t size)
{
	return strcmp(what, "snapshot") ? size : SNAPSHOT_RECORD_V1_SIZE;
}

/*
 * Copies @val into @out if it is a record of this thaw's version, or of
 * version 1 (CATALOG_RECORD_VERSION's comment), whose strings end; LMDB
 * values are not aligned for the struct, hence the copy.
 */
static int read_record(const struct catalog *c, const char *what,
		       const MDB_val *key, const MDB_val *val, void *out,
		       size_t size, char *err, size_t errlen)
{
	uint32_t version = CATALOG_RECORD_VERSION;
	size_t expected = size;

	if (val->mv_size >= sizeof(version)) {
		memcpy(&version, val->mv_data, sizeof(version));
		if (version == 1) {
			expected = v1_size(what, size);
		} else if (version != CATALOG_RECORD_VERSION) {
			errbuf_set(
				err, errlen,
				"catalog %s: %s %.*s has a record of version %u, this thaw reads 1 and %d",
				c->dir, what, (int)key->mv_size,
				(const char *)key->mv_data, version,
				CATALOG_RECORD_VERSION);
			return -EINVAL;
		}
	}
	if (val->mv_size != expected) {
		errbuf_set(
			err, errlen,
			"catalog %s: %s %.*s has a record of %zu bytes, this thaw reads %zu",
			c->dir, what, (int)key->mv_size,
			(const char *)key->mv_data, val->mv_size, expected);
		return -EINVAL;
	}
	memset(out, 0, size);
	memcpy(out, val->mv_data, expected);
	version = CATALOG_RECORD_VERSION;
	memcpy(out, &version, sizeof(version));
	return check_strings(c, what, key, out, err, errlen);
}

/* -ENOENT without a message: the callers know what absence means. */
static int get_record(struct catalog *c, MDB_txn *txn, MDB_dbi dbi,
		      const char *what, const char *id, void *out, size_t size,
		      char *err, size_t errlen)
{
	MDB_val key = { .mv_size = strlen(id), .mv_data = (void *)id };
	MDB_val val;
	int rc = mdb_get(txn, dbi, &key, &val);

	if (rc == MDB_NOTFOUND)
		return -ENOENT;
	if (rc)
		return lmdb_error(c, rc, what, err, errlen);
	return read_record(c, what, &key, &val, out, size, err, errlen);
}

/* get_record(), with a message naming the missing entry. */
static int find_record(struct catalog *c, MDB_txn *txn, MDB_dbi dbi,
		       const char *what, const char *id, void *out, size_t size,
		       char *err, size_t errlen)
{
	int ret = get_record(c, txn, dbi, what, id, out, size, err, errlen);

	if (ret == -ENOENT)
		no_entry(c, what, id, err, errlen);
	return ret;
}

static int put_record(struct catalog *c, MDB_txn *txn, MDB_dbi dbi,
		      const char *what, const char *id, const void *rec,
		      size_t size, unsigned int flags, char *err, size_t errlen)
{
	MDB_val key = { .mv_size = strlen(id), .mv_data = (void *)id };
	MDB_val val = { .mv_size = size, .mv_data = (void *)rec };
	int rc = mdb_put(txn, dbi, &key, &val, flags);

	if (rc == MDB_KEYEXIST) {
		errbuf_set(err, errlen, "catalog %s: %s %s exists already",
			   c->dir, what, id);
		return -EEXIST;
	}
	return rc ? lmdb_error(c, rc, what, err, errlen) : 0;
}

static int begin(struct catalog *c, unsigned int flags, MDB_txn **txn,
		 char *err, size_t errlen)
{
	int rc = mdb_txn_begin(c->env, NULL, flags, txn);

	return rc ? lmdb_error(c, rc, "begin transaction", err, errlen) : 0;
}

/* Commits @txn if @ret is 0, else aborts it; returns the outcome. */
static int finish(struct catalog *c, MDB_txn *txn, int ret, char *err,
		  size_t errlen)
{
	int rc;

	if (ret) {
		mdb_txn_abort(txn);
		return ret;
	}
	rc = mdb_txn_commit(txn);
	return rc ? lmdb_error(c, rc, "commit", err, errlen) : 0;
}

/*
 * A cursor over the records of one database whose keys begin with a prefix
 * ("" for all of them), in key order.
 */
struct walk {
	MDB_cursor *cur;
	const char *db; /* the database, for messages */
	const char *prefix;
	size_t len;
	MDB_cursor_op op; /* how walk_next() moves */
};

static int walk_start(struct catalog *c, MDB_txn *txn, MDB_dbi dbi,
		      const char *db, const char *prefix, struct walk *w,
		      char *err, size_t errlen)
{
	int rc = mdb_cursor_open(txn, dbi, &w->cur);

	if (rc)
		return lmdb_error(c, rc, db, err, errlen);
	w->db = db;
	w->prefix = prefix;
	w->len = strlen(prefix);
	/* LMDB refuses to seek to an empty key. */
	w->op = w->len ? MDB_SET_RANGE : MDB_FIRST;
	return 0;
}

/*
 * Moves to the next record and reads it into @out as read_record() does:
 * 1, 0 past the last one, or a negative errno after a message.  The cursor
 * stays on the record, so the caller may delete it: after a delete,
 * MDB_NEXT yields the entry that followed.
 */
static int walk_next(struct catalog *c, struct walk *w, const char *what,
		     void *out, size_t size, char *err, size_t errlen)
{
	MDB_val key = { .mv_size = w->len, .mv_data = (void *)w->prefix };
	MDB_val val;
	int rc = mdb_cursor_get(w->cur, &key, &val, w->op);

	w->op = MDB_NEXT;
	if (rc == MDB_NOTFOUND)
		return 0;
	if (rc)
		return lmdb_error(c, rc, w->db, err, errlen);
	if (key.mv_size <= w->len || memcmp(key.mv_data, w->prefix, w->len))
		return 0;
	rc = read_record(c, what, &key, &val, out, size, err, errlen);
	return rc ? rc : 1;
}

static int mkdir_p(const char *dir)
{
	char path[PATH_MAX], *p, saved;

	strcpy(path, dir);
	for (p = path + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		saved = *p;
		*p = '\0';
		if (mkdir(path, 0700) && errno != EEXIST)
			return -errno;
		if (!saved)
			return 0;
		*p = saved;
	}
}

static int open_dbs(struct catalog *c, char *err, size_t errlen)
{
	static const char *const names[] = { "templates", "snapshots",
					     "clones" };
	MDB_dbi *dbis[] = { &c->templates, &c->snapshots, &c->clones };
	MDB_txn *txn;
	size_t i;
	int rc, ret;

	ret = begin(c, 0, &txn, err, errlen);
	if (ret)
		return ret;
	for (i = 0; i < 3 && !ret; i++) {
		rc = mdb_dbi_open(txn, names[i], MDB_CREATE, dbis[i]);
		if (rc)
			ret = lmdb_error(c, rc, names[i], err, errlen);
	}
	return finish(c, txn, ret, err, errlen);
}

int catalog_open(struct catalog *c, const char *dir, char *err, size_t errlen)
{
	size_t len = strlen(dir);
	int rc, ret, stale;

	memset(c, 0, sizeof(*c));
	if (!len || len >= sizeof(c->dir)) {
		errbuf_set(err, errlen, "catalog directory '%.64s' is %s", dir,
			   len ? "too long" : "empty");
		return -EINVAL;
	}
	memcpy(c->dir, dir, len + 1);
	ret = mkdir_p(dir);
	if (ret) {
		errbuf_set(err, errlen, "catalog %s: cannot create it: %s", dir,
			   strerror(-ret));
		return ret;
	}
	rc = mdb_env_create(&c->env);
	if (rc)
		return lmdb_error(c, rc, "create environment", err, errlen);
	rc = mdb_env_set_maxdbs(c->env, CATALOG_MAX_DBS);
	if (!rc)
		rc = mdb_env_set_mapsize(c->env, CATALOG_MAP_SIZE);
	/*
	 * MDB_NOTLS ties a read transaction's reader slot to the transaction,
	 * not the thread, as several threads of one process share this env.
	 */
	if (!rc)
		rc = mdb_env_open(c->env, dir, MDB_NOTLS, 0600);
	/*
	 * A reader killed with -9 leaves its slot taken, pinning old pages
	 * (the file would only grow); clear those of dead processes.
	 */
	if (!rc)
		rc = mdb_reader_check(c->env, &stale);
	if (rc) {
		ret = lmdb_error(c, rc, "open", err, errlen);
		catalog_close(c);
		return ret;
	}
	ret = open_dbs(c, err, errlen);
	if (ret)
		catalog_close(c);
	return ret;
}

void catalog_close(struct catalog *c)
{
	mdb_env_close(c->env);
	c->env = NULL;
}

/*
 * Counts @id's clones whose processes still run and deletes the others'
 * entries, in @txn (a write transaction).
 */
static int count_clones_txn(struct catalog *c, MDB_txn *txn, const char *id,
			    uint32_t *count, char *err, size_t errlen)
{
	char prefix[CATALOG_ID_LEN + 2];
	struct clone_record rec;
	struct walk w;
	int rc, ret;

	*count = 0;
	snprintf(prefix, sizeof(prefix), "%s/", id);
	ret = walk_start(c, txn, c->clones, "clones", prefix, &w, err, errlen);
	if (ret)
		return ret;
	while ((ret = walk_next(c, &w, "clone", &rec, sizeof(rec), err,
				errlen)) > 0) {
		if (clone_alive(&rec)) {
			(*count)++;
			continue;
		}
		rc = mdb_cursor_del(w.cur, 0);
		if (rc) {
			ret = lmdb_error(c, rc, "clones", err, errlen);
			break;
		}
	}
	mdb_cursor_close(w.cur);
	return ret;
}

static int check_new_records(const struct template_record *tmpl,
			     const struct snapshot_record *snap, char *err,
			     size_t errlen)
{
	int ret;

	if (tmpl->record_version != CATALOG_RECORD_VERSION ||
	    snap->record_version != CATALOG_RECORD_VERSION) {
		errbuf_set(err, errlen, "new records need record_version %d",
			   CATALOG_RECORD_VERSION);
		return -EINVAL;
	}
	ret = check_hex_id("template", tmpl->id, err, errlen);
	if (!ret)
		ret = check_hex_id("snapshot", snap->id, err, errlen);
	if (!ret)
		ret = check_hex_id("template", snap->template_id, err, errlen);
	if (!ret && snap->parent[0])
		ret = check_hex_id("snapshot", snap->parent, err, errlen);
	if (ret)
		return ret;
	if (strcmp(snap->template_id, tmpl->id)) {
		errbuf_set(err, errlen,
			   "snapshot %s belongs to template %s, not %s",
			   snap->id, snap->template_id, tmpl->id);
		return -EINVAL;
	}
	if (!memchr(tmpl->kernel_hash, '\0', sizeof(tmpl->kernel_hash)) ||
	    !memchr(tmpl->initrd_hash, '\0', sizeof(tmpl->initrd_hash))) {
		errbuf_set(err, errlen, "template %s: a hash is not a string",
			   tmpl->id);
		return -EINVAL;
	}
	if (!snap->dir[0] || !memchr(snap->dir, '\0', sizeof(snap->dir))) {
		errbuf_set(err, errlen, "snapshot %s: dir is empty or too long",
			   snap->id);
		return -EINVAL;
	}
	return 0;
}

/*
 * Counts one child snapshot more (@delta 1) or fewer (-1) for snapshot @id;
 * -ENOENT without a message, as get_record().
 */
static int count_child(struct catalog *c, MDB_txn *txn, const char *id,
		       int delta, char *err, size_t errlen)
{
	struct snapshot_record snap;
	int ret = get_record(c, txn, c->snapshots, "snapshot", id, &snap,
			     sizeof(snap), err, errlen);

	if (ret)
		return ret;
	snap.children += delta;
	return put_record(c, txn, c->snapshots, "snapshot", snap.id, &snap,
			  sizeof(snap), 0, err, errlen);
}

static int add_snapshot_txn(struct catalog *c, MDB_txn *txn,
			    const struct template_record *tmpl,
			    const struct snapshot_record *snap, char *err,
			    size_t errlen)
{
	struct template_record t;
	bool base = !snap->parent[0];
	int ret;

	ret = put_record(c, txn, c->snapshots, "snapshot", snap->id, snap,
			 sizeof(*snap), MDB_NOOVERWRITE, err, errlen);
	if (ret)
		return ret;
	if (!base) {
		ret = count_child(c, txn, snap->parent, 1, err, errlen);
		if (ret == -ENOENT)
			errbuf_set(
				err, errlen,
				"catalog %s: no snapshot %s (the parent of %s)",
				c->dir, snap->parent, snap->id);
		if (ret)
			return ret;
	}
	ret = get_record(c, txn, c->templates, "template", tmpl->id, &t,
			 sizeof(t), err, errlen);
	/* An existing template changes only for a new base snapshot. */
	if (ret == -ENOENT) {
		t = *tmpl;
		memset(t.latest_snapshot, 0, sizeof(t.latest_snapshot));
	} else if (ret || !base) {
		return ret;
	}
	if (base)
		memcpy(t.latest_snapshot, snap->id, sizeof(t.latest_snapshot));
	return put_record(c, txn, c->templates, "template", t.id, &t, sizeof(t),
			  0, err, errlen);
}

int catalog_add_snapshot(struct catalog *c, const struct template_record *tmpl,
			 const struct snapshot_record *snap, char *err,
			 size_t errlen)
{
	MDB_txn *txn;
	int ret;

	ret = check_new_records(tmpl, snap, err, errlen);
	if (!ret)
		ret = begin(c, 0, &txn, err, errlen);
	if (ret)
		return ret;
	ret = add_snapshot_txn(c, txn, tmpl, snap, err, errlen);
	return finish(c, txn, ret, err, errlen);
}

static int lookup(struct catalog *c, MDB_dbi dbi, const char *what,
		  const char *id, void *out, size_t size, char *err,
		  size_t errlen)
{
	MDB_txn *txn;
	int ret;

	ret = check_hex_id(what, id, err, errlen);
	if (!ret)
		ret = begin(c, MDB_RDONLY, &txn, err, errlen);
	if (ret)
		return ret;
	ret = find_record(c, txn, dbi, what, id, out, size, err, errlen);
	return finish(c, txn, ret, err, errlen);
}

int catalog_get_snapshot(struct catalog *c, const char *id,
			 struct snapshot_record *out, char *err, size_t errlen)
{
	return lookup(c, c->snapshots, "snapshot", id, out, sizeof(*out), err,
		      errlen);
}

int catalog_get_template(struct catalog *c, const char *id,
			 struct template_record *out, char *err, size_t errlen)
{
	return lookup(c, c->templates, "template", id, out, sizeof(*out), err,
		      errlen);
}

static int cmp_snapshots(const void *a, const void *b)
{
	const struct snapshot_record *x = a, *y = b;

	if (x->created_unix != y->created_unix)
		return x->created_unix < y->created_unix ? -1 : 1;
	return strcmp(x->id, y->id);
}

/* Reads every snapshot into *@out, sorted; *@out is the caller's to free. */
static int read_snapshots(struct catalog *c, MDB_txn *txn,
			  struct snapshot_record **out, size_t *count,
			  char *err, size_t errlen)
{
	struct walk w;
	MDB_stat st;
	size_t n = 0;
	int rc, ret;

	rc = mdb_stat(txn, c->snapshots, &st);
	if (rc)
		return lmdb_error(c, rc, "snapshots", err, errlen);
	*out = calloc(st.ms_entries, sizeof(**out));
	if (!*out && st.ms_entries) {
		errbuf_set(err, errlen, "catalog %s: out of memory", c->dir);
		return -ENOMEM;
	}
	ret = walk_start(c, txn, c->snapshots, "snapshots", "", &w, err,
			 errlen);
	if (ret)
		return ret;
	while ((ret = walk_next(c, &w, "snapshot", &(*out)[n], sizeof(**out),
				err, errlen)) > 0)
		n++;
	mdb_cursor_close(w.cur);
	if (ret)
		return ret;
	if (n > 1)
		qsort(*out, n, sizeof(**out), cmp_snapshots);
	*count = n;
	return 0;
}

static int count_all_clones(struct catalog *c, MDB_txn *txn,
			    const struct snapshot_record *recs, size_t n,
			    uint32_t **out, char *err, size_t errlen)
{
	size_t i;
	int ret = 0;

	*out = calloc(n, sizeof(**out));
	if (!*out && n) {
		errbuf_set(err, errlen, "catalog %s: out of memory", c->dir);
		return -ENOMEM;
	}
	for (i = 0; i < n && !ret; i++)
		ret = count_clones_txn(c, txn, recs[i].id, &(*out)[i], err,
				       errlen);
	return ret;
}

int catalog_list_snapshots(struct catalog *c, struct snapshot_record **out,
			   uint32_t **clones, size_t *count, char *err,
			   size_t errlen)
{
	struct snapshot_record *recs = NULL;
	uint32_t *counts = NULL;
	size_t n = 0;
	MDB_txn *txn;
	int ret;

	/* Only counting clones writes (it drops dead ones). */
	ret = begin(c, clones ? 0 : MDB_RDONLY, &txn, err, errlen);
	if (ret)
		return ret;
	ret = read_snapshots(c, txn, &recs, &n, err, errlen);
	if (!ret && clones)
		ret = count_all_clones(c, txn, recs, n, &counts, err, errlen);
	ret = finish(c, txn, ret, err, errlen);
	if (ret) {
		free(recs);
		free(counts);
		return ret;
	}
	*out = recs;
	if (clones)
		*clones = counts;
	*count = n;
	return 0;
}

static int count_clones_of(struct catalog *c, MDB_txn *txn, const char *id,
			   uint32_t *count, char *err, size_t errlen)
{
	struct snapshot_record snap;
	int ret;

	ret = find_record(c, txn, c->snapshots, "snapshot", id, &snap,
			  sizeof(snap), err, errlen);
	return ret ? ret : count_clones_txn(c, txn, id, count, err, errlen);
}

int catalog_count_clones(struct catalog *c, const char *id, uint32_t *count,
			 char *err, size_t errlen)
{
	MDB_txn *txn;
	int ret;

	ret = catalog_check_id(id, err, errlen);
	if (!ret)
		ret = begin(c, 0, &txn, err, errlen);
	if (ret)
		return ret;
	ret = count_clones_of(c, txn, id, count, err, errlen);
	return finish(c, txn, ret, err, errlen);
}

static int remove_snapshot_txn(struct catalog *c, MDB_txn *txn, const char *id,
			       char *err, size_t errlen)
{
	MDB_val key = { .mv_size = strlen(id), .mv_data = (void *)id };
	struct snapshot_record snap;
	struct template_record t;
	uint32_t clones;
	int rc, ret;

	ret = find_record(c, txn, c->snapshots, "snapshot", id, &snap,
			  sizeof(snap), err, errlen);
	if (!ret)
		ret = count_clones_txn(c, txn, id, &clones, err, errlen);
	if (ret)
		return ret;
	if (clones) {
		errbuf_set(err, errlen, "snapshot %s has %u live clone%s", id,
			   clones, clones == 1 ? "" : "s");
		return -EBUSY;
	}
	if (snap.children) {
		errbuf_set(
			err, errlen,
			"snapshot %s has %u child snapshot%s; remove %s first",
			id, snap.children, snap.children == 1 ? "" : "s",
			snap.children == 1 ? "it" : "them");
		return -EBUSY;
	}
	rc = mdb_del(txn, c->snapshots, &key, NULL);
	if (rc)
		return lmdb_error(c, rc, "snapshot", err, errlen);
	if (snap.parent[0]) {
		ret = count_child(c, txn, snap.parent, -1, err, errlen);
		if (ret && ret != -ENOENT)
			return ret;
	}
	ret = get_record(c, txn, c->templates, "template", snap.template_id, &t,
			 sizeof(t), err, errlen);
	if (ret == -ENOENT)
		return 0;
	if (ret || strncmp(t.latest_snapshot, id, sizeof(t.latest_snapshot)))
		return ret;
	memset(t.latest_snapshot, 0, sizeof(t.latest_snapshot));
	return put_record(c, txn, c->templates, "template", t.id, &t, sizeof(t),
			  0, err, errlen);
}

int catalog_remove_snapshot(struct catalog *c, const char *id, char *err,
			    size_t errlen)
{
	MDB_txn *txn;
	int ret;

	ret = catalog_check_id(id, err, errlen);
	if (!ret)
		ret = begin(c, 0, &txn, err, errlen);
	if (ret)
		return ret;
	ret = remove_snapshot_txn(c, txn, id, err, errlen);
	return finish(c, txn, ret, err, errlen);
}

static int add_clone_txn(struct catalog *c, MDB_txn *txn, const char *id,
			 const char *key, const struct clone_record *rec,
			 char *err, size_t errlen)
{
	struct snapshot_record snap;
	int ret;

	ret = find_record(c, txn, c->snapshots, "snapshot", id, &snap,
			  sizeof(snap), err, errlen);
	return ret ? ret
		   : put_record(c, txn, c->clones, "clone", key, rec,
				sizeof(*rec), MDB_NOOVERWRITE, err, errlen);
}

int catalog_add_clone(struct catalog *c, const char *id, const char *clone_id,
		      pid_t pid, char *err, size_t errlen)
{
	struct clone_record rec = {
		.record_version = CATALOG_RECORD_VERSION,
		.pid = pid,
		.created_unix = time(NULL),
	};
	char key[CLONE_KEY_SIZE];
	MDB_txn *txn;
	int ret;

	ret = catalog_check_id(id, err, errlen);
	if (!ret)
		ret = check_clone_id(clone_id, err, errlen);
	if (ret)
		return ret;
	if (pid <= 0) {
		errbuf_set(err, errlen, "clone %s: %d is not a process id",
			   clone_id, (int)pid);
		return -EINVAL;
	}
	ret = pid_start_time(pid, &rec.pid_start_time);
	if (ret) {
		errbuf_set(err, errlen, "clone %s: process %d: %s", clone_id,
			   (int)pid, strerror(-ret));
		return ret;
	}
	snprintf(key, sizeof(key), "%s/%s", id, clone_id);
	ret = begin(c, 0, &txn, err, errlen);
	if (ret)
		return ret;
	ret = add_clone_txn(c, txn, id, key, &rec, err, errlen);
	return finish(c, txn, ret, err, errlen);
}

int catalog_remove_clone(struct catalog *c, const char *id,
			 const char *clone_id, char *err, size_t errlen)
{
	char name[CLONE_KEY_SIZE];
	MDB_val key = { .mv_data = name };
	MDB_txn *txn;
	int rc, ret;

	ret = catalog_check_id(id, err, errlen);
	if (!ret)
		ret = check_clone_id(clone_id, err, errlen);
	if (!ret)
		ret = begin(c, 0, &txn, err, errlen);
	if (ret)
		return ret;
	key.mv_size = snprintf(name, sizeof(name), "%s/%s", id, clone_id);
	rc = mdb_del(txn, c->clones, &key, NULL);
	if (rc == MDB_NOTFOUND) {
		errbuf_set(err, errlen,
			   "catalog %s: snapshot %s has no clone %s", c->dir,
			   id, clone_id);
		ret = -ENOENT;
	} else if (rc) {
		ret = lmdb_error(c, rc, "clone", err, errlen);
	}
	return finish(c, txn, ret, err, errlen);
}

/* @fd's mode without group and other bits; 1 when it changed, 0 when
 * already so, -errno. */
static int tighten_fd(int fd, const char *path, const char *name)
{
	struct stat st;

	if (fstat(fd, &st) < 0)
		return -errno;
	if (!(st.st_mode & 077))
		return 0;
	if (fchmod(fd, st.st_mode & 0700) < 0)
		return -errno;
	log_info("%s%s%s was mode %04o, now %04o: snapshots and the catalog "
		 "are their owner's alone",
		 path, name ? "/" : "", name ? name : "",
		 (unsigned)(st.st_mode & 07777), (unsigned)(st.st_mode & 0700));
	return 1;
}

/* @dir and the regular files directly in it. */
static int tighten_dir(const char *dir, char *err, size_t errlen)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int changed = 0, ret;
	struct dirent *e;
	DIR *d;

	if (dfd < 0) {
		if (errno == ENOENT || errno == ELOOP || errno == ENOTDIR)
			return 0;
		errbuf_set(err, errlen, "%s: %s", dir, strerror(errno));
		return -errno;
	}
	ret = tighten_fd(dfd, dir, NULL);
	if (ret < 0 || !(d = fdopendir(dfd))) {
		ret = ret < 0 ? ret : -errno;
		errbuf_set(err, errlen, "%s: %s", dir, strerror(-ret));
		close(dfd);
		return ret;
	}
	changed = ret;
	while ((e = readdir(d))) {
		int fd = openat(dirfd(d), e->d_name,
				O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;

		if (fd < 0)
			continue; /* a symbolic link, or gone */
		ret = fstat(fd, &st) < 0    ? -errno
		      : S_ISREG(st.st_mode) ? tighten_fd(fd, dir, e->d_name)
					    : 0;
		close(fd);
		if (ret < 0) {
			errbuf_set(err, errlen, "%s/%s: %s", dir, e->d_name,
				   strerror(-ret));
			closedir(d);
			return ret;
		}
		changed += ret;
	}
	closedir(d);
	return changed;
}

int catalog_tighten_modes(struct catalog *c, char *err, size_t errlen)
{
	struct snapshot_record *snaps;
	size_t n;
	int changed, ret;

	changed = tighten_dir(c->dir, err, errlen);
	if (changed < 0)
		return changed;
	ret = catalog_list_snapshots(c, &snaps, NULL, &n, err, errlen);
	if (ret)
		return ret;
	for (size_t i = 0; i < n && ret >= 0; i++) {
		ret = tighten_dir(snaps[i].dir, err, errlen);
		changed += ret > 0 ? ret : 0;
	}
	free(snaps);
	return ret < 0 ? ret : changed;
}
