// SPDX-License-Identifier: Apache-2.0
/*
 * cgroup.c - see cgroup.h.
 *
 * Everything goes through the cgroup filesystem's own files (no libcgroup,
 * no systemd): the daemon is root and the files are the kernel's stable
 * interface on both versions.
 *
 * The two versions differ in three ways that shape this file:
 *  - v2 has one directory per cgroup; v1 has one per hierarchy, and a
 *    hierarchy may carry several controllers ("cpu,cpuacct", or even cpu and
 *    memory together).  So every loop over a cgroup's directories skips a
 *    directory an earlier controller already had (same_as_earlier()).
 *  - v2 only offers a controller to children once it is enabled in every
 *    ancestor's cgroup.subtree_control; v1 offers it as soon as the
 *    hierarchy is mounted.
 *  - v2 (5.14+) kills a whole cgroup atomically with cgroup.kill, forks in
 *    flight included; v1 (and older v2, frozen first so nothing forks while
 *    it is read) has to read cgroup.procs and SIGKILL in rounds until a
 *    round finds nobody.
 *
 * A memory limit that swap can get around is no limit, so setting one also
 * caps swap: memory.swap.max = 0 on v2, memory.memsw.limit_in_bytes = the
 * same value on v1 (whose memsw counts memory plus swap); either only where
 * the kernel accounts swap at all.
 *
 * A zombie is no longer a member of its cgroup (the kernel moves it out in
 * exit), so destroying does not wait for the daemon to reap its VMM.
 */
#include "pool/host/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/io.h"

#define CGROUP_FS "/sys/fs/cgroup"
#define NAME_LEN_MAX 63 /* fits config.h's cgroup_parent[64] */
#define NAME_CHARS \
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-"
#define CPU_PERIOD_US 100000
#define DESTROY_TIMEOUT_MS 5000
#define DESTROY_POLL_NS 10000000L

static const char *const controller_name[CGROUP_NR] = { "cpu", "memory",
							"pids" };

const char *cgroup_controller_name(enum cgroup_controller c)
{
	return controller_name[c];
}

/* @dir[@c] is a directory an earlier controller already stands for. */
static bool same_as_earlier(const char (*dir)[PATH_MAX], int c)
{
	for (int k = 0; k < c; k++)
		if (dir[k][0] && strcmp(dir[k], dir[c]) == 0)
			return true;
	return false;
}

static bool make_path(char *out, const char *dir, const char *file)
{
	int n = snprintf(out, PATH_MAX, "%s/%s", dir, file);

	return n >= 0 && n < PATH_MAX;
}

static bool has_file(const char *dir, const char *file)
{
	char path[PATH_MAX];

	return make_path(path, dir, file) && access(path, F_OK) == 0;
}

static int check_name(const char *name, const char *what, char *err,
		      size_t errlen)
{
	size_t len = strlen(name);

	/* "." and ".." would name the parent or leave it. */
	if (len > 0 && len <= NAME_LEN_MAX && strspn(name, NAME_CHARS) == len &&
	    strcmp(name, ".") != 0 && !strstr(name, ".."))
		return 0;
	snprintf(
		err, errlen,
		"cgroup: bad %s name \"%.80s\": want 1 to %d of [A-Za-z0-9_.-], not \".\" and without \"..\"",
		what, name, NAME_LEN_MAX);
	return -EINVAL;
}

static int write_file(const char *dir, const char *file, const char *value,
		      char *err, size_t errlen)
{
	char path[PATH_MAX];
	int fd, r;

	if (!make_path(path, dir, file)) {
		snprintf(err, errlen, "cgroup: path %s/%s is too long", dir,
			 file);
		return -ENAMETOOLONG;
	}
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errlen, "cgroup: cannot open %s: %s", path,
			 strerror(-r));
		return r;
	}
	r = write_full(fd, value, strlen(value));
	close(fd);
	if (r)
		snprintf(err, errlen, "cgroup: cannot write \"%s\" to %s: %s",
			 value, path, strerror(-r));
	return r;
}

/* The whole of a small file as a string: its length or a negative errno. */
static int read_text(const char *dir, const char *file, char *buf, size_t size)
{
	char path[PATH_MAX];
	ssize_t n;
	int fd, r;

	if (!make_path(path, dir, file))
		return -ENAMETOOLONG;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	do
		n = read(fd, buf, size - 1);
	while (n < 0 && errno == EINTR);
	r = n < 0 ? -errno : (int)n;
	close(fd);
	buf[n < 0 ? 0 : n] = '\0';
	return r;
}

static int read_u64(const char *dir, const char *file, uint64_t *v)
{
	char buf[64], *end;
	int r = read_text(dir, file, buf, sizeof(buf));

	if (r < 0)
		return r;
	errno = 0;
	*v = strtoull(buf, &end, 10);
	if (end == buf || errno || (*end && *end != '\n'))
		return -EIO;
	return 0;
}

/*
 * The value of line "@key N" of a flat-keyed file (memory.events,
 * cgroup.events, memory.oom_control); 0 when the kernel has no such line.
 */
static int read_key(const char *dir, const char *file, const char *key,
		    uint64_t *v)
{
	char buf[1024], *line, *save;
	size_t klen = strlen(key);
	int r = read_text(dir, file, buf, sizeof(buf));

	if (r < 0)
		return r;
	*v = 0;
	for (line = strtok_r(buf, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, key, klen) == 0 && line[klen] == ' ') {
			*v = strtoull(line + klen + 1, NULL, 10);
			break;
		}
	return 0;
}

/* Whether space-separated @list (cgroup.controllers) has @word. */
static bool has_word(const char *list, const char *word)
{
	size_t len = strlen(word);

	for (const char *p = list; (p = strstr(p, word)); p += len)
		if ((p == list || p[-1] == ' ') &&
		    (p[len] == '\0' || p[len] == ' ' || p[len] == '\n'))
			return true;
	return false;
}

/* Whether comma-separated mount options @opts have @opt. */
static bool has_opt(const char *opts, const char *opt)
{
	size_t len = strlen(opt);

	for (const char *p = opts; p; p = strchr(p, ',')) {
		if (*p == ',')
			p++;
		if (strncmp(p, opt, len) == 0 &&
		    (p[len] == '\0' || p[len] == ','))
			return true;
	}
	return false;
}

/* @why: the start of the line, which says what is missing. */
static void set_missing(struct cgroup_root *root, int c, const char *why)
{
	snprintf(root->missing[c], sizeof(root->missing[c]), "%s", why);
}

/*
 * @top/@parent and @top/@parent/@owner, made unless they are there: the
 * latter's path goes to @own.  -ENOENT when another daemon removed the
 * shared parent between the two mkdirs (cgroup_init() tries again).
 */
static int make_own_dir(const char *top, const char *parent, const char *owner,
			char *own, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	const char *const dirs[] = { dir, own };
	int r;

	if (!make_path(dir, top, parent) || !make_path(own, dir, owner)) {
		snprintf(err, errlen, "cgroup: path %s/%s/%s is too long", top,
			 parent, owner);
		return -ENAMETOOLONG;
	}
	for (size_t i = 0; i < 2; i++)
		if (mkdir(dirs[i], 0755) && errno != EEXIST) {
			r = -errno;
			snprintf(err, errlen, "cgroup: cannot create %s: %s",
				 dirs[i], strerror(-r));
			return r;
		}
	return 0;
}

static int init_v2(struct cgroup_root *root, const char *parent,
		   const char *owner, char *err, size_t errlen)
{
	char avail[512], own[PATH_MAX], why[PATH_MAX + 128];
	bool have[CGROUP_NR], any = false;
	int r;

	r = read_text(CGROUP_FS, "cgroup.controllers", avail, sizeof(avail));
	if (r < 0) {
		snprintf(err, errlen, "cgroup: cannot read %s: %s",
			 CGROUP_FS "/cgroup.controllers", strerror(-r));
		return r;
	}
	for (int c = 0; c < CGROUP_NR; c++) {
		have[c] = has_word(avail, controller_name[c]);
		if (!have[c]) {
			snprintf(why, sizeof(why),
				 "cgroup: no %s controller in %s",
				 controller_name[c],
				 CGROUP_FS "/cgroup.controllers");
			set_missing(root, c, why);
		}
		any |= have[c];
	}
	if (!any)
		return 0;
	r = make_own_dir(CGROUP_FS, parent, owner, own, err, errlen);
	if (r)
		return r;
	/*
	 * Each level offers a controller to the one below: the root to the
	 * parent, the parent to this daemon's group, which offers it to its
	 * sandboxes.  Enabling fails for one controller alone (say, EBUSY
	 * when someone put processes into the parent): that one is then
	 * missing.
	 */
	for (int c = 0; c < CGROUP_NR; c++) {
		char plus[16], dir[PATH_MAX];
		const char *levels[] = { CGROUP_FS, dir, own };

		if (!have[c])
			continue;
		snprintf(plus, sizeof(plus), "+%s", controller_name[c]);
		make_path(dir, CGROUP_FS, parent);
		r = 0;
		for (size_t i = 0; i < 3 && !r; i++)
			r = write_file(levels[i], "cgroup.subtree_control",
				       plus, why, sizeof(why));
		if (r == -ENOENT) {
			snprintf(err, errlen, "%s", why);
			return r;
		}
		if (r) {
			set_missing(root, c, why);
			continue;
		}
		strcpy(root->dir[c], own);
	}
	return 0;
}

/* Undoes the octal escapes (\040 for a space...) of a mountinfo field. */
static bool unescape(char *out, size_t size, const char *in)
{
	size_t n = 0;

	for (; *in; n++) {
		if (n + 1 >= size)
			return false;
		if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' &&
		    in[2] >= '0' && in[2] <= '7' && in[3] >= '0' &&
		    in[3] <= '7') {
			out[n] = (char)((in[1] - '0') << 6 |
					(in[2] - '0') << 3 | (in[3] - '0'));
			in += 4;
		} else {
			out[n] = *in++;
		}
	}
	out[n] = '\0';
	return true;
}

/* Each controller's first v1 mount point from /proc/self/mountinfo. */
static int find_v1_mounts(char (*mnt)[PATH_MAX], char *err, size_t errlen)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t cap = 0;
	int r;

	if (!f) {
		r = -errno;
		snprintf(err, errlen, "cgroup: cannot read %s: %s",
			 "/proc/self/mountinfo", strerror(-r));
		return r;
	}
	/* id parent maj:min root mountpoint opts [tags...] - type src super */
	while (getline(&line, &cap, f) > 0) {
		char *sep = strstr(line, " - "), *save, *point, *type, *super;

		if (!sep)
			continue;
		*sep = '\0';
		strtok_r(line, " ", &save);
		for (int i = 0; i < 3; i++)
			strtok_r(NULL, " ", &save);
		point = strtok_r(NULL, " ", &save);
		type = strtok_r(sep + 3, " ", &save);
		strtok_r(NULL, " ", &save);
		super = strtok_r(NULL, " \n", &save);
		if (!point || !type || !super || strcmp(type, "cgroup") != 0)
			continue;
		for (int c = 0; c < CGROUP_NR; c++)
			if (!mnt[c][0] && has_opt(super, controller_name[c]) &&
			    !unescape(mnt[c], PATH_MAX, point))
				mnt[c][0] = '\0';
	}
	free(line);
	fclose(f);
	return 0;
}

static int init_v1(struct cgroup_root *root, const char *parent,
		   const char *owner, char *err, size_t errlen)
{
	char mnt[CGROUP_NR][PATH_MAX] = { { 0 } }, why[128];
	int r = find_v1_mounts(mnt, err, errlen);

	if (r)
		return r;
	for (int c = 0; c < CGROUP_NR; c++) {
		if (!mnt[c][0]) {
			snprintf(
				why, sizeof(why),
				"cgroup: no cgroup v1 hierarchy with the %s controller in /proc/self/mountinfo",
				controller_name[c]);
			set_missing(root, c, why);
			continue;
		}
		r = make_own_dir(mnt[c], parent, owner, root->dir[c], err,
				 errlen);
		if (r)
			return r;
	}
	return 0;
}

/* FNV-1a, 64 bits: documented in cgroup.h, so tests can find the group. */
uint64_t cgroup_owner_hash(const char *owner)
{
	uint64_t h = 0xcbf29ce484222325ULL;

	for (const unsigned char *p = (const unsigned char *)owner; *p; p++)
		h = (h ^ *p) * 0x100000001b3ULL;
	return h;
}

/* Tries so often when another daemon keeps removing the shared parent
 * under us (it removes it when it stops and finds it empty). */
#define INIT_TRIES 5

int cgroup_init(struct cgroup_root *root, const char *parent, const char *owner,
		char *err, size_t errlen)
{
	char own[32];
	struct statfs s;
	int r;

	memset(root, 0, sizeof(*root));
	r = check_name(parent, "parent cgroup", err, errlen);
	if (r)
		return r;
	snprintf(own, sizeof(own), "state-%016" PRIx64,
		 cgroup_owner_hash(owner));
	root->v2 = statfs(CGROUP_FS, &s) == 0 &&
		   (unsigned long)s.f_type == CGROUP2_SUPER_MAGIC;
	for (int i = 0; i < INIT_TRIES; i++) {
		memset(root->dir, 0, sizeof(root->dir));
		memset(root->missing, 0, sizeof(root->missing));
		r = root->v2 ? init_v2(root, parent, own, err, errlen)
			     : init_v1(root, parent, own, err, errlen);
		if (r != -ENOENT)
			break;
	}
	if (r)
		memset(root->dir, 0, sizeof(root->dir));
	return r;
}

int cgroup_require(const struct cgroup_root *root, unsigned required, char *err,
		   size_t errlen)
{
	for (int c = 0; c < CGROUP_NR; c++)
		if ((required & CGROUP_BIT(c)) && !root->dir[c][0]) {
			snprintf(err, errlen, "%s", root->missing[c]);
			return -ENOTSUP;
		}
	return 0;
}

void cgroup_release(const struct cgroup_root *root)
{
	char parent[PATH_MAX];

	for (int c = 0; c < CGROUP_NR; c++) {
		char *slash;

		if (!root->dir[c][0] || same_as_earlier(root->dir, c))
			continue;
		rmdir(root->dir[c]);
		snprintf(parent, sizeof(parent), "%s", root->dir[c]);
		slash = strrchr(parent, '/');
		if (slash) {
			*slash = '\0';
			rmdir(parent); /* EBUSY: another daemon's group */
		}
	}
}

static int apply_limits(const struct cgroup *cg, const struct cgroup_limits *l,
			char *err, size_t errlen)
{
	const char *mem = cg->dir[CGROUP_MEMORY], *pids = cg->dir[CGROUP_PIDS];
	const char *cpu = cg->dir[CGROUP_CPU];
	char v[64];
	int r;

	if (l->memory_max && mem[0]) {
		const char *swap = cg->v2 ? "memory.swap.max"
					  : "memory.memsw.limit_in_bytes";

		snprintf(v, sizeof(v), "%" PRIu64, l->memory_max);
		/* v1 refuses a memsw limit below the memory limit: memory
		 * first. */
		r = write_file(mem,
			       cg->v2 ? "memory.max" : "memory.limit_in_bytes",
			       v, err, errlen);
		if (!r && has_file(mem, swap))
			r = write_file(mem, swap, cg->v2 ? "0" : v, err,
				       errlen);
		if (r)
			return r;
	}
	if (l->pids_max && pids[0]) {
		snprintf(v, sizeof(v), "%" PRIu32, l->pids_max);
		r = write_file(pids, "pids.max", v, err, errlen);
		if (r)
			return r;
	}
	if (l->cpu_percent && cpu[0]) {
		uint64_t quota = (uint64_t)l->cpu_percent * CPU_PERIOD_US / 100;

		if (cg->v2) {
			snprintf(v, sizeof(v), "%" PRIu64 " %d", quota,
				 CPU_PERIOD_US);
			return write_file(cpu, "cpu.max", v, err, errlen);
		}
		snprintf(v, sizeof(v), "%d", CPU_PERIOD_US);
		r = write_file(cpu, "cpu.cfs_period_us", v, err, errlen);
		if (r)
			return r;
		snprintf(v, sizeof(v), "%" PRIu64, quota);
		return write_file(cpu, "cpu.cfs_quota_us", v, err, errlen);
	}
	return 0;
}

/* rmdir of each directory, ENOENT counting as done; -EBUSY while one still
 * has members. */
static int remove_dirs(const struct cgroup *cg, char *err, size_t errlen)
{
	int ret = 0;

	for (int c = 0; c < CGROUP_NR; c++) {
		if (!cg->dir[c][0] || same_as_earlier(cg->dir, c) ||
		    rmdir(cg->dir[c]) == 0 || errno == ENOENT)
			continue;
		if (errno != EBUSY) {
			ret = -errno;
			snprintf(err, errlen, "cgroup: cannot remove %s: %s",
				 cg->dir[c], strerror(-ret));
			return ret;
		}
		ret = -EBUSY;
	}
	return ret;
}

int cgroup_create(const struct cgroup_root *root, const char *name,
		  const struct cgroup_limits *limits, struct cgroup *cg,
		  char *err, size_t errlen)
{
	int c, r = check_name(name, "cgroup", err, errlen);

	memset(cg, 0, sizeof(*cg));
	if (r)
		return r;
	cg->v2 = root->v2;
	for (c = 0; c < CGROUP_NR; c++) {
		if (!root->dir[c][0])
			continue;
		if (!make_path(cg->dir[c], root->dir[c], name)) {
			snprintf(err, errlen, "cgroup: path %s/%s is too long",
				 root->dir[c], name);
			r = -ENAMETOOLONG;
			goto fail;
		}
		if (same_as_earlier(root->dir, c))
			continue;
		if (mkdir(cg->dir[c], 0755)) {
			r = -errno;
			snprintf(err, errlen, "cgroup: cannot create %s: %s",
				 cg->dir[c], strerror(-r));
			goto fail;
		}
	}
	r = apply_limits(cg, limits, err, errlen);
	if (!r)
		return 0;
fail:
	/*
	 * Only the directories this call made go, not the one that failed
	 * (EEXIST: somebody's cgroup of the same name).  Nothing has entered
	 * them yet, so there is nothing to kill.
	 */
	while (--c >= 0)
		if (cg->dir[c][0] && !same_as_earlier(root->dir, c))
			rmdir(cg->dir[c]);
	memset(cg->dir, 0, sizeof(cg->dir));
	return r;
}

int cgroup_enter(const struct cgroup *cg)
{
	static const char procs[] = "/cgroup.procs";
	char path[PATH_MAX];

	/* No snprintf: it is not async-signal-safe; these are. */
	for (int c = 0; c < CGROUP_NR; c++) {
		size_t len = strlen(cg->dir[c]);
		ssize_t n;
		int fd, r;

		if (!len || same_as_earlier(cg->dir, c))
			continue;
		if (len + sizeof(procs) > sizeof(path))
			return -ENAMETOOLONG;
		memcpy(path, cg->dir[c], len);
		memcpy(path + len, procs, sizeof(procs));
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		/* "0": whoever writes; on v1 its whole thread group. */
		do
			n = write(fd, "0", 1);
		while (n < 0 && errno == EINTR);
		r = n == 1 ? 0 : n < 0 ? -errno : -EIO;
		close(fd);
		if (r)
			return r;
	}
	return 0;
}

/* SIGKILL to everyone in @dir's cgroup.procs: how many were there (0 when
 * the cgroup is gone), or a negative errno. */
static int kill_members(const char *dir, char *err, size_t errlen)
{
	char path[PATH_MAX];
	int pid, n = 0;
	FILE *f;

	if (!make_path(path, dir, "cgroup.procs")) {
		snprintf(err, errlen,
			 "cgroup: path %s/cgroup.procs is too long", dir);
		return -ENAMETOOLONG;
	}
	f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return 0;
		n = -errno;
		snprintf(err, errlen, "cgroup: cannot read %s: %s", path,
			 strerror(-n));
		return n;
	}
	/* ESRCH from kill: it died on its own meanwhile. */
	while (fscanf(f, "%d", &pid) == 1) {
		if (pid > 0)
			kill(pid, SIGKILL);
		n++;
	}
	fclose(f);
	return n;
}

/* One round: whether anybody is still in @cg (1) or not (0), or a
 * negative errno.  @kill_each: read and kill members one by one. */
static int kill_round(const struct cgroup *cg, const char *dir, bool kill_each,
		      char *err, size_t errlen)
{
	uint64_t populated;
	int r, n = 0;

	if (!cg->v2) {
		for (int c = 0; c < CGROUP_NR; c++) {
			if (!cg->dir[c][0] || same_as_earlier(cg->dir, c))
				continue;
			r = kill_members(cg->dir[c], err, errlen);
			if (r < 0)
				return r;
			n += r;
		}
		return n > 0;
	}
	if (kill_each) {
		r = kill_members(dir, err, errlen);
		if (r < 0)
			return r;
	}
	/* populated also covers cgroups below, which cgroup.procs omits. */
	r = read_key(dir, "cgroup.events", "populated", &populated);
	if (r == -ENOENT)
		return 0;
	if (r < 0) {
		snprintf(err, errlen,
			 "cgroup: cannot read %s/cgroup.events: %s", dir,
			 strerror(-r));
		return r;
	}
	return populated != 0;
}

int cgroup_destroy(const struct cgroup *cg, char *err, size_t errlen)
{
	uint64_t deadline = monotonic_ns() + DESTROY_TIMEOUT_MS * NS_PER_MS;
	const struct timespec poll = { 0, DESTROY_POLL_NS };
	const char *dir = NULL;
	bool kill_each = !cg->v2;
	int r;

	for (int c = 0; c < CGROUP_NR && !dir; c++)
		if (cg->dir[c][0])
			dir = cg->dir[c];
	if (!dir)
		return 0;
	if (cg->v2 && has_file(dir, "cgroup.kill")) {
		r = write_file(dir, "cgroup.kill", "1", err, errlen);
		if (r && r != -ENOENT)
			return r;
	} else if (cg->v2) {
		/* Frozen, nothing forks between reading cgroup.procs and the
		 * kills; v2 delivers SIGKILL to frozen processes. */
		kill_each = true;
		if (has_file(dir, "cgroup.freeze")) {
			r = write_file(dir, "cgroup.freeze", "1", err, errlen);
			if (r && r != -ENOENT)
				return r;
		}
	}
	for (;;) {
		r = kill_round(cg, dir, kill_each, err, errlen);
		if (r < 0)
			return r;
		/* rmdir can still say EBUSY just after the last one left. */
		if (r == 0) {
			r = remove_dirs(cg, err, errlen);
			if (r != -EBUSY)
				return r;
		}
		if (monotonic_ns() >= deadline) {
			snprintf(
				err, errlen,
				"cgroup: %s still busy (processes or cgroups inside) after %d ms of SIGKILL",
				dir, DESTROY_TIMEOUT_MS);
			return -EBUSY;
		}
		nanosleep(&poll, NULL);
	}
}

struct names {
	char (*v)[NAME_MAX + 1];
	size_t n, cap;
};

/* Adds the child cgroups of @dir that @names does not have yet. */
static int list_children(const char *dir, struct names *names, char *err,
			 size_t errlen)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int r = 0;

	if (!d) {
		r = -errno;
		snprintf(err, errlen, "cgroup: cannot list %s: %s", dir,
			 strerror(-r));
		return r;
	}
	/* cgroupfs fills in d_type: the directories are the cgroups. */
	while ((e = readdir(d))) {
		size_t i;

		if (e->d_type != DT_DIR || strcmp(e->d_name, ".") == 0 ||
		    strcmp(e->d_name, "..") == 0)
			continue;
		for (i = 0; i < names->n; i++)
			if (strcmp(names->v[i], e->d_name) == 0)
				break;
		if (i < names->n)
			continue;
		if (names->n == names->cap) {
			size_t cap = names->cap ? 2 * names->cap : 16;
			void *v = realloc(names->v, cap * sizeof(*names->v));

			if (!v) {
				snprintf(err, errlen,
					 "cgroup: out of memory listing %s",
					 dir);
				r = -ENOMEM;
				break;
			}
			names->v = v;
			names->cap = cap;
		}
		strcpy(names->v[names->n++], e->d_name);
	}
	closedir(d);
	return r;
}

int cgroup_reap_stale(const struct cgroup_root *root, char *err, size_t errlen)
{
	struct names names = { 0 };
	char one_err[2 * PATH_MAX];
	int r = 0, removed = 0;

	/* Names first, from every hierarchy: a v1 leftover can be in only
	 * some of them (a daemon that died halfway through creating it). */
	for (int c = 0; c < CGROUP_NR && !r; c++)
		if (root->dir[c][0] && !same_as_earlier(root->dir, c))
			r = list_children(root->dir[c], &names, err, errlen);
	if (r) {
		free(names.v);
		return r;
	}
	/* One that cannot go does not keep the others. */
	for (size_t i = 0; i < names.n; i++) {
		struct cgroup cg = { .v2 = root->v2 };
		int one = 0;

		for (int c = 0; c < CGROUP_NR && !one; c++)
			if (root->dir[c][0] &&
			    !make_path(cg.dir[c], root->dir[c], names.v[i])) {
				snprintf(one_err, sizeof(one_err),
					 "cgroup: path %s/%s is too long",
					 root->dir[c], names.v[i]);
				one = -ENAMETOOLONG;
			}
		if (!one)
			one = cgroup_destroy(&cg, one_err, sizeof(one_err));
		if (!one) {
			removed++;
		} else if (!r) {
			r = one;
			snprintf(err, errlen, "%s", one_err);
		}
	}
	free(names.v);
	return r ? r : removed;
}

int cgroup_read_stat(const struct cgroup *cg, struct cgroup_stat *st)
{
	const char *mem = cg->dir[CGROUP_MEMORY], *pids = cg->dir[CGROUP_PIDS];
	uint64_t n;
	int r;

	memset(st, 0, sizeof(*st));
	if (mem[0]) {
		r = read_u64(mem,
			     cg->v2 ? "memory.current"
				    : "memory.usage_in_bytes",
			     &st->memory_current);
		if (r)
			return r;
		/* memory.peak is 5.19+; v1 always had its max_usage. */
		r = read_u64(mem,
			     cg->v2 ? "memory.peak"
				    : "memory.max_usage_in_bytes",
			     &st->memory_peak);
		if (r && !(cg->v2 && r == -ENOENT))
			return r;
		/* The oom_kill line is 4.13+ on both. */
		r = read_key(mem,
			     cg->v2 ? "memory.events" : "memory.oom_control",
			     "oom_kill", &st->oom_kills);
		if (r)
			return r;
	}
	if (pids[0]) {
		r = read_u64(pids, "pids.current", &n);
		if (r)
			return r;
		st->pids_current = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
	}
	return 0;
}
