// SPDX-License-Identifier: Apache-2.0
/*
 * watch.c - WATCH: a directory's changes streamed to the host (envd's
 * WatchDir and its watchers), through inotify.
 *
 * Each WATCH has an inotify instance of its own in the epoll set, with one
 * inotify watch on the directory and, RECURSIVE, on every directory below
 * it (added as they appear, dropped as they go), each remembered with its
 * path relative to the watched one.  Every inotify event becomes one
 * FS_EVENT frame {PATH relative, EVENT} of the WATCH's request, the types
 * fsnotify (envd) gives: IN_CREATE and IN_MOVED_TO are CREATE, IN_MODIFY
 * WRITE, IN_DELETE REMOVE, IN_MOVED_FROM RENAME, IN_ATTRIB CHMOD.
 *
 * The walk.  A recursive WATCH of a big tree (envd's WatchDir of "/")
 * means thousands of directories to list and inotify_add_watch, which on
 * an emulated guest takes minutes: done in one go it would hold the one
 * event loop, and every other request to the sandbox (the daemon's health
 * PING too) would wait behind it.  So the directories are walked in slices
 * of WALK_SLICE entries, one slice per turn of the event loop (agent_main.c
 * asks fswatch_walking() whether to poll without waiting, then calls
 * fswatch_walk()), taking the watches with a walk pending in turn.  The
 * walk is breadth-first over the watch's own table of directories: each
 * directory is watched as soon as it is found (so nothing created in it
 * afterwards is missed) and listed later, when its turn comes; dirs[0 ..
 * listed) are listed, dirs[listed] is being listed when @dir is open.  The
 * WATCH is answered (WATCHING) when the first walk ends; until then its
 * inotify fd stays out of the epoll set and its events wait in the kernel.
 * A directory that appears later (created or moved in) joins the same
 * table and is walked the same way.
 *
 * Bounded: at most WATCH_DIRS_MAX directories per watch, AGENT_DIRS_MAX
 * in all the agent's watches and AGENT_WATCHES_MAX watches (inotify
 * instances) in all, MAX_WATCHES of them per connection.  Past a limit
 * while a WATCH is being set up the answer is ERROR naming the limit and
 * the watch is gone whole (its inotify fd closed: no watch of it is left
 * in the kernel); a directory appearing later past a limit is reported as
 * an OVERFLOW event naming it, its contents unwatched.  Mount points of
 * pseudo file systems (proc, sysfs, devtmpfs, cgroup...: PSEUDO_FS_MAGIC)
 * below the watched directory are not entered: their files are no data a
 * tenant writes, inotify does not see most of their changes, and /proc
 * and /sys alone hold tens of thousands of directories.  Watching one of
 * them by its own path is allowed.
 *
 * Confined to the tree.  Everything in the guest may rename, replace and
 * mount while a walk is under way, and the walk lists a directory long
 * after it found it: a path looked up again then could lead anywhere (a
 * watched directory replaced by a symlink to "/": IN_DONT_FOLLOW guards
 * the last component only).  So every directory is opened from the
 * watched one's fd with openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS),
 * watched through that fd (watch_fd), listed only while it is still the
 * directory watched (device and inode), and judged a pseudo file system
 * by what fstatfs says of it, not by where mountinfo said mounts were.
 *
 * Events wait in the kernel's inotify queue (fs.inotify.max_queued_events)
 * while the connection's output is over its limit (fswatch_pause, like an
 * exec's pipes); what the kernel then drops it reports as IN_Q_OVERFLOW,
 * sent on as OVERFLOW with an empty PATH.  So nothing is lost without the
 * host being told.
 *
 * A watch ends with END when the host KILLs it (exec.c hands a KILL whose
 * TARGET is no exec to fswatch_stop; a watch still being set up too) or
 * the watched directory itself goes away, and silently with its
 * connection.  A stopped watch is marked dead and freed by fswatch_sweep
 * after the event batch (agent.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "guest/agent/agent.h"

#define MAX_WATCHES 16
/*
 * The kernel's fs.inotify.max_user_watches defaults to 1% of the RAM
 * divided by what a watch costs (about 1 KiB: it pins an inode), and to
 * at least 8192: exactly 8192 in any guest below about 1 GiB.  Every
 * process of one uid shares that count, and the agent is root, as are the
 * tenant's own programs unless told otherwise (editors, dev servers, their
 * file watchers).  So the agent takes at most three quarters of it,
 * leaving a quarter that no WATCH can take from them; that is also about
 * 6 MiB of kernel memory, a bounded share of a 256 MiB guest.  One WATCH
 * gets two thirds of the agent's share, so it cannot take it all, and
 * still room for a project with its dependencies (a node_modules of a
 * few thousand directories).
 */
#define AGENT_DIRS_MAX 6144
#define WATCH_DIRS_MAX 4096
/*
 * Half of fs.inotify.max_user_instances' default (128), shared with the
 * tenant's programs likewise.
 */
#define AGENT_WATCHES_MAX 64
/*
 * Directory entries a walk handles per turn of the event loop (each may
 * cost an inotify_add_watch, its later listing an opendir): small enough
 * that a turn stays short even where syscalls are emulated, large enough
 * that a native walk of thousands of directories is not all loop
 * overhead.
 */
#define WALK_SLICE 64
#define EVENT_MASK                                                         \
	(IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | \
	 IN_ATTRIB)
/* inotify reads per epoll event: one busy tree cannot starve the rest. */
#define READS_PER_EVENT 4
#define REL_MAX 4095

/* The kernel's own, missing from linux/magic.h. */
#define CONFIGFS_MAGIC 0x62656570
#define FUSECTL_SUPER_MAGIC 0x65735543
#define MQUEUE_MAGIC 0x19800202
#define RPC_PIPEFS_MAGIC 0x67596969
/*
 * File systems (fstatfs's f_type) whose mount points a recursive walk
 * does not enter; devtmpfs, a tmpfs to fstatfs, is told by its device
 * (devtmpfs_dev).
 */
static const unsigned long PSEUDO_FS_MAGIC[] = {
	AUTOFS_SUPER_MAGIC,  BINFMTFS_MAGIC,	  BPF_FS_MAGIC,
	CGROUP_SUPER_MAGIC,  CGROUP2_SUPER_MAGIC, CONFIGFS_MAGIC,
	DEBUGFS_MAGIC,	     DEVPTS_SUPER_MAGIC,  EFIVARFS_MAGIC,
	FUSECTL_SUPER_MAGIC, HUGETLBFS_MAGIC,	  MQUEUE_MAGIC,
	NSFS_MAGIC,	     PROC_SUPER_MAGIC,	  PSTOREFS_MAGIC,
	RPC_PIPEFS_MAGIC,    SECURITYFS_MAGIC,	  SELINUX_MAGIC,
	SYSFS_MAGIC,	     TRACEFS_MAGIC,
};

/* Which limit a watch ran into. */
enum watch_limit {
	LIMIT_NONE,
	LIMIT_WATCH,  /* WATCH_DIRS_MAX */
	LIMIT_AGENT,  /* AGENT_DIRS_MAX */
	LIMIT_KERNEL, /* fs.inotify.max_user_watches */
};

struct watched_dir {
	int wd;
	dev_t dev; /* what was watched, which is what the walk lists */
	ino_t ino;
	char *rel; /* "" for the watched directory itself */
};

struct fswatch {
	struct watch w; /* the inotify fd */
	struct conn *conn;
	uint32_t req;
	bool recursive;
	bool dead;
	bool answered; /* WATCHING sent: the first walk is over */
	bool queued;   /* in the walk queue */
	enum watch_limit limit;
	int root_wd;
	int root_fd;	/* every directory is opened beneath it */
	dev_t root_dev; /* its file system is entered, pseudo or not */
	struct watched_dir *dirs;
	size_t ndirs, cap;
	size_t listed; /* dirs[0 .. listed) have been listed */
	DIR *dir;      /* dirs[listed], being listed; NULL between */
	char *root;
	struct fswatch *next;
	struct fswatch *walk_next;
};

/* What all watches hold, against AGENT_DIRS_MAX and AGENT_WATCHES_MAX. */
static size_t agent_dirs;
static size_t agent_watches;
/* The watches with directories to list, each walked a slice in turn. */
static struct fswatch *walk_head, *walk_tail;
/* devtmpfs's device (one file system however often mounted), 0 unknown. */
static dev_t devtmpfs_dev;
/* The agent's working directory, back after each watch_fd. */
static int agent_cwd = -1;

struct fswatch *fswatch_find(const struct conn *c, uint32_t req)
{
	for (struct fswatch *f = c->fswatches; f; f = f->next) {
		if (!f->dead && f->req == req)
			return f;
	}
	return NULL;
}

static struct watched_dir *dir_of(struct fswatch *f, int wd)
{
	for (size_t i = 0; i < f->ndirs; i++) {
		if (f->dirs[i].wd == wd)
			return &f->dirs[i];
	}
	return NULL;
}

static void send_event(struct fswatch *f, const char *rel, uint8_t type)
{
	struct thaw_writer w;

	conn_begin(f->conn, &w, 2 * THAW_TLV_HEADER + 1 + strlen(rel), f->req,
		   THAW_FS_EVENT, 0);
	thaw_put_str(&w, THAW_T_PATH, rel);
	thaw_put_u8(&w, THAW_T_EVENT, type);
	conn_commit(f->conn, &w);
}

static void walk_enqueue(struct fswatch *f)
{
	if (f->queued)
		return;
	f->queued = true;
	f->walk_next = NULL;
	if (walk_tail)
		walk_tail->walk_next = f;
	else
		walk_head = f;
	walk_tail = f;
}

static void walk_dequeue(struct fswatch *f)
{
	struct fswatch *prev = NULL;

	if (!f->queued)
		return;
	for (struct fswatch *p = walk_head; p != f; p = p->walk_next)
		prev = p;
	if (prev)
		prev->walk_next = f->walk_next;
	else
		walk_head = f->walk_next;
	if (walk_tail == f)
		walk_tail = prev;
	f->queued = false;
}

/* "rel" or "rel/name" below the watched directory into @out (REL_MAX + 1
 * bytes); -ENAMETOOLONG when it does not fit. */
static int join_rel(char *out, const char *rel, const char *name)
{
	int n = snprintf(out, REL_MAX + 1, "%s%s%s", rel,
			 rel[0] && name[0] ? "/" : "", name);

	return n > REL_MAX ? -ENAMETOOLONG : 0;
}

/*
 * Reads devtmpfs's device from /proc/self/mountinfo ("id parent
 * major:minor root mountpoint ... - type source options"; a path's spaces
 * are escaped, so the first " - " ends the optional fields).  Without a
 * readable mountinfo it stays unknown, and a /dev below a watched
 * directory is walked like any tmpfs, within the limits.
 */
static void find_devtmpfs(void)
{
	FILE *mi = fopen("/proc/self/mountinfo", "re");
	char *line = NULL;
	size_t line_cap = 0;

	devtmpfs_dev = 0;
	if (!mi)
		return;
	while (getline(&line, &line_cap, mi) > 0) {
		const char *type = strstr(line, " - ");
		unsigned int major, minor;

		if (type && !strncmp(type + 3, "devtmpfs ", 9) &&
		    sscanf(line, "%*s %*s %u:%u", &major, &minor) == 2) {
			devtmpfs_dev = makedev(major, minor);
			break;
		}
	}
	free(line);
	fclose(mi);
}

/*
 * Whether the directory @fd (@st), below the watched one, is on a pseudo
 * file system other than the watched directory's own: 1, 0, or -errno.
 * On the watched directory's file system, as most are, fstatfs is spared.
 */
static int pseudo_mount(const struct fswatch *f, int fd, const struct stat *st)
{
	struct statfs sfs;

	if (st->st_dev == f->root_dev)
		return 0;
	if (devtmpfs_dev && st->st_dev == devtmpfs_dev)
		return 1;
	if (fstatfs(fd, &sfs) < 0)
		return -errno;
	for (size_t i = 0;
	     i < sizeof(PSEUDO_FS_MAGIC) / sizeof(PSEUDO_FS_MAGIC[0]); i++) {
		if ((unsigned long)sfs.f_type == PSEUDO_FS_MAGIC[i])
			return 1;
	}
	return 0;
}

/*
 * Opens root/@rel, resolved beneath the watched directory and through no
 * symlink (nor a mount's magic link): a fd, or -errno, -ENOTDIR when a
 * symlink is on the way (no directory of the tree is there).
 */
static int open_beneath(const struct fswatch *f, const char *rel)
{
	struct open_how how = {
		.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC,
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
			   RESOLVE_NO_MAGICLINKS,
	};
	long fd = syscall(SYS_openat2, f->root_fd, rel[0] ? rel : ".", &how,
			  sizeof(how));

	if (fd >= 0)
		return (int)fd;
	return errno == ELOOP || errno == EXDEV ? -ENOTDIR : -errno;
}

/*
 * The inotify watch of the directory open as @fd.  inotify_add_watch has
 * no *at() form, and a path names whatever is there when it is looked up;
 * the agent's working directory, @fd for the call, names that directory
 * and no other.  (Not /proc/self/fd/N: the guest's root can mount
 * anything on /proc.)  The agent is single-threaded: its working
 * directory is back before anything else runs.
 */
static int watch_fd(struct fswatch *f, int fd)
{
	int wd, err;

	if (agent_cwd < 0) {
		agent_cwd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
		if (agent_cwd < 0)
			return -errno;
	}
	if (fchdir(fd) < 0)
		return -errno;
	wd = inotify_add_watch(f->w.fd, ".", EVENT_MASK);
	err = errno;
	if (fchdir(agent_cwd) < 0)
		agent_log("watch: back to the working directory: %s",
			  strerror(errno));
	return wd < 0 ? -err : wd;
}

/*
 * Adds the watch of root/@rel.  0; 1 when it is not to be walked: a
 * pseudo file system's mount point, or watched already under another
 * name (a bind mount, which must not be walked into again); -ENOSPC past
 * a limit (f->limit says which), or -errno.
 */
static int add_dir(struct fswatch *f, const char *rel)
{
	struct watched_dir *d;
	struct stat st;
	int fd, wd, ret = 0;

	if (f->ndirs == WATCH_DIRS_MAX || agent_dirs == AGENT_DIRS_MAX) {
		f->limit =
			f->ndirs == WATCH_DIRS_MAX ? LIMIT_WATCH : LIMIT_AGENT;
		return -ENOSPC;
	}
	fd = open_beneath(f, rel);
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		goto out;
	}
	/* The watched directory itself is watched, pseudo or not. */
	ret = rel[0] ? pseudo_mount(f, fd, &st) : 0;
	if (ret)
		goto out;
	wd = watch_fd(f, fd);
	if (wd < 0) {
		if (wd == -ENOSPC)
			f->limit = LIMIT_KERNEL;
		ret = wd;
		goto out;
	}
	if (dir_of(f, wd)) {
		ret = 1;
		goto out;
	}
	if (f->ndirs == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 16;
		void *p = realloc(f->dirs, cap * sizeof(*f->dirs));

		if (!p) {
			inotify_rm_watch(f->w.fd, wd);
			ret = -ENOMEM;
			goto out;
		}
		f->dirs = p;
		f->cap = cap;
	}
	d = &f->dirs[f->ndirs];
	*d = (struct watched_dir){
		.wd = wd, .dev = st.st_dev, .ino = st.st_ino, .rel = strdup(rel)
	};
	if (!d->rel) {
		inotify_rm_watch(f->w.fd, wd);
		ret = -ENOMEM;
		goto out;
	}
	f->ndirs++;
	agent_dirs++;
	if (f->recursive)
		walk_enqueue(f);
out:
	close(fd);
	return ret;
}

static void close_listing(struct fswatch *f)
{
	if (f->dir) {
		closedir(f->dir);
		f->dir = NULL;
	}
}

/*
 * Opens dirs[listed] to list it, if it is still the directory watched.
 * Gone or replaced meanwhile (removed, moved over, mounted over, a
 * symlink now), it is skipped: what is there now comes as events of its
 * own, or is no directory of the tree.
 */
static int open_listing(struct fswatch *f)
{
	const struct watched_dir *d = &f->dirs[f->listed];
	struct stat st;
	int fd = open_beneath(f, d->rel), ret;

	if (fd == -ENOENT || fd == -ENOTDIR) {
		f->listed++;
		return 0;
	}
	if (fd < 0)
		return fd;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	if (st.st_dev != d->dev || st.st_ino != d->ino) {
		close(fd);
		f->listed++;
		return 0;
	}
	f->dir = fdopendir(fd);
	if (!f->dir) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return 0;
}

/*
 * Opens the next directory to list, or handles one entry of the one being
 * listed: 0, or -errno with @rel naming where (REL_MAX + 1 bytes).
 */
static int walk_step(struct fswatch *f, char *rel)
{
	const char *parent = f->dirs[f->listed].rel;
	struct dirent *de;
	int ret;

	if (!f->dir) {
		snprintf(rel, REL_MAX + 1, "%s", parent);
		return open_listing(f);
	}
	errno = 0;
	de = readdir(f->dir);
	if (!de) {
		snprintf(rel, REL_MAX + 1, "%s", parent);
		if (errno)
			return -errno;
		close_listing(f);
		f->listed++;
		return 0;
	}
	/* DT_UNKNOWN: open_beneath's O_DIRECTORY tells. */
	if ((de->d_type != DT_DIR && de->d_type != DT_UNKNOWN) ||
	    !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
		return 0;
	ret = join_rel(rel, parent, de->d_name);
	if (ret < 0) {
		snprintf(rel, REL_MAX + 1, "%s", parent);
		return ret;
	}
	ret = add_dir(f, rel); /* may move f->dirs: parent is stale now */
	return ret == -ENOENT || ret == -ENOTDIR || ret == 1 ? 0 : ret;
}

static void watch_end(struct fswatch *f, bool send_end)
{
	if (send_end && f->conn) {
		struct thaw_writer w;

		conn_begin(f->conn, &w, 0, f->req, THAW_END, 0);
		conn_commit(f->conn, &w);
	}
	close_listing(f);
	/* Closing the inotify fd drops every watch of it in the kernel. */
	watch_close(&f->w);
	if (f->root_fd >= 0) {
		close(f->root_fd);
		f->root_fd = -1;
	}
	if (!f->dead)
		agent_watches--;
	agent_dirs -= f->ndirs;
	for (size_t i = 0; i < f->ndirs; i++)
		free(f->dirs[i].rel);
	f->ndirs = f->listed = 0;
	walk_dequeue(f);
	f->dead = true;
}

/*
 * Ends a WATCH whose setup failed with @ret at @rel, then answers ERROR:
 * when the host reads it, no watch of it is left.
 */
static void setup_failed(struct fswatch *f, int ret, const char *rel)
{
	char why[160];

	watch_end(f, false);
	if (ret == -ENOSPC && f->limit == LIMIT_WATCH)
		snprintf(why, sizeof(why),
			 "more than %d directories to watch, the limit of "
			 "one WATCH: watch a smaller tree",
			 WATCH_DIRS_MAX);
	else if (ret == -ENOSPC && f->limit == LIMIT_AGENT)
		snprintf(why, sizeof(why),
			 "the agent's watches would pass %d directories in "
			 "all, its limit: end other watches first",
			 AGENT_DIRS_MAX);
	else if (ret == -ENOSPC && f->limit == LIMIT_KERNEL)
		snprintf(why, sizeof(why),
			 "the guest kernel's limit of inotify watches "
			 "(fs.inotify.max_user_watches) is reached");
	else
		snprintf(why, sizeof(why), "%s", strerror(-ret));
	/* The agent's own limits are the whole tree's, not @rel's. */
	if (f->limit == LIMIT_WATCH || f->limit == LIMIT_AGENT)
		rel = "";
	conn_error(f->conn, f->req, -ret, "WATCH %s%s%s: %s", f->root,
		   rel[0] ? "/" : "", rel, why);
}

/* The first walk is over: the watches are in place. */
static void setup_done(struct fswatch *f)
{
	struct thaw_writer w;

	f->answered = true;
	conn_begin(f->conn, &w, 0, f->req, THAW_WATCHING, 0);
	conn_commit(f->conn, &w);
	/* Else fswatch_pause registers it once the output has drained. */
	if (!f->conn->over && watch_set(&f->w, EPOLLIN) < 0)
		send_event(f, "", THAW_EV_OVERFLOW);
}

/*
 * Lists on for up to WALK_SLICE entries.  A failure while the WATCH is
 * being set up fails it; later, the directory being listed is reported
 * as an OVERFLOW (what is below it may be unwatched) and the walk goes on.
 */
static void walk_slice(struct fswatch *f)
{
	char rel[REL_MAX + 1];

	for (int i = 0; i < WALK_SLICE && f->listed < f->ndirs; i++) {
		int ret = walk_step(f, rel);

		if (!ret)
			continue;
		if (!f->answered) {
			setup_failed(f, ret, rel);
			return;
		}
		send_event(f, f->dirs[f->listed].rel, THAW_EV_OVERFLOW);
		close_listing(f);
		f->listed++;
	}
	if (f->listed == f->ndirs && !f->answered)
		setup_done(f);
}

bool fswatch_walking(void)
{
	return walk_head != NULL;
}

void fswatch_walk(void)
{
	struct fswatch *f = walk_head;

	if (!f)
		return;
	walk_dequeue(f);
	if (f->dead || f->conn->dead)
		return;
	walk_slice(f);
	if (!f->dead && f->listed < f->ndirs)
		walk_enqueue(f);
}

void fswatch_start(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	char path[PATH_MAX];
	struct fswatch *f;
	int n = 0, ret;

	thaw_get_str(m, THAW_T_PATH, path, sizeof(path));
	if (fswatch_find(c, req) || exec_find(c, req)) {
		conn_error(c, req, EEXIST,
			   "WATCH: request id %u already names a running "
			   "request",
			   req);
		return;
	}
	for (f = c->fswatches; f; f = f->next)
		n += !f->dead;
	if (n >= MAX_WATCHES) {
		conn_error(c, req, EMFILE,
			   "WATCH %s: %d watches already on this connection",
			   path, MAX_WATCHES);
		return;
	}
	if (agent_watches >= AGENT_WATCHES_MAX) {
		conn_error(c, req, EMFILE,
			   "WATCH %s: %d watches already in the agent, its "
			   "limit: end other watches first",
			   path, AGENT_WATCHES_MAX);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		conn_error(c, req, ENOMEM, "WATCH %s: out of memory", path);
		return;
	}
	/* Resolved: a symlink to the directory is watched as the directory,
	 * while every one below it is left alone (open_beneath). */
	f->root = realpath(path, NULL);
	if (!f->root) {
		conn_error(c, req, errno, "WATCH %s: %s", path,
			   strerror(errno));
		free(f);
		return;
	}
	f->conn = c;
	f->req = req;
	f->root_fd = -1;
	f->recursive = thaw_get_u8(m, THAW_T_RECURSIVE, 0);
	f->w = (struct watch){ .kind = W_INOTIFY, .obj = f };
	f->next = c->fswatches;
	c->fswatches = f;
	agent_watches++;
	f->w.fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	ret = f->w.fd < 0 ? -errno : 0;
	if (!ret) {
		f->root_fd = open(f->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ret = f->root_fd < 0 ? -errno : 0;
	}
	if (!ret)
		ret = add_dir(f, "");
	if (ret) {
		setup_failed(f, ret, "");
		return;
	}
	if (f->recursive)
		find_devtmpfs();
	f->root_wd = f->dirs[0].wd;
	f->root_dev = f->dirs[0].dev;
	/* Recursive: answered once fswatch_walk has listed the tree. */
	if (!f->recursive)
		setup_done(f);
}

static uint8_t event_type(uint32_t mask)
{
	if (mask & (IN_CREATE | IN_MOVED_TO))
		return THAW_EV_CREATE;
	if (mask & IN_MODIFY)
		return THAW_EV_WRITE;
	if (mask & IN_DELETE)
		return THAW_EV_REMOVE;
	if (mask & IN_MOVED_FROM)
		return THAW_EV_RENAME;
	if (mask & IN_ATTRIB)
		return THAW_EV_CHMOD;
	return 0;
}

/* Forgets @rel and what is below it: it moved away or is gone.  The
 * table keeps its order, which the walk goes by. */
static void drop_tree(struct fswatch *f, const char *rel)
{
	size_t len = strlen(rel), kept = 0, listed = f->listed;

	for (size_t i = 0; i < f->ndirs; i++) {
		struct watched_dir *d = &f->dirs[i];

		if (strncmp(d->rel, rel, len) != 0 ||
		    (d->rel[len] != '\0' && d->rel[len] != '/')) {
			f->dirs[kept++] = *d;
			continue;
		}
		/* Its IN_IGNORED then finds no directory: nothing to do. */
		inotify_rm_watch(f->w.fd, d->wd);
		free(d->rel);
		if (i < f->listed)
			listed--;
		else if (i == f->listed)
			close_listing(f);
	}
	agent_dirs -= f->ndirs - kept;
	f->ndirs = kept;
	f->listed = listed;
}

static void handle(struct fswatch *f, const struct inotify_event *ev)
{
	struct watched_dir *d = dir_of(f, ev->wd);
	char rel[REL_MAX + 1];
	uint8_t type = event_type(ev->mask);

	if (ev->mask & IN_Q_OVERFLOW) {
		send_event(f, "", THAW_EV_OVERFLOW);
		return;
	}
	if ((ev->mask & IN_IGNORED) && ev->wd == f->root_wd) {
		watch_end(f, true);
		return;
	}
	if (!d || !type)
		return;
	if (join_rel(rel, d->rel, ev->len ? ev->name : "") < 0) {
		/* Deeper than a path can name: say that events were lost. */
		send_event(f, d->rel, THAW_EV_OVERFLOW);
		return;
	}
	if ((ev->mask & IN_ISDIR) && f->recursive &&
	    (ev->mask & (IN_MOVED_FROM | IN_DELETE)))
		drop_tree(f, rel);
	/* Watched at once, listed by the walk; its contents may predate the
	 * watch: they are not reported. */
	if ((ev->mask & IN_ISDIR) && f->recursive &&
	    (ev->mask & (IN_CREATE | IN_MOVED_TO))) {
		int ret = add_dir(f, rel);

		send_event(f, rel, type);
		if (ret < 0 && ret != -ENOENT && ret != -ENOTDIR)
			send_event(f, rel, THAW_EV_OVERFLOW);
		return;
	}
	send_event(f, rel, type);
}

void fswatch_event(struct watch *w)
{
	struct fswatch *f = w->obj;
	/* Aligned for struct inotify_event; room for the longest name. */
	char buf[16 * (sizeof(struct inotify_event) + NAME_MAX + 1)]
		__attribute__((aligned(__alignof__(struct inotify_event))));

	for (int i = 0; i < READS_PER_EVENT && !f->dead && !f->conn->over &&
			!f->conn->dead;
	     i++) {
		ssize_t n = read(f->w.fd, buf, sizeof(buf));

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		for (ssize_t off = 0; off < n && !f->dead;) {
			const struct inotify_event *ev =
				(const struct inotify_event *)(buf + off);

			handle(f, ev);
			off += (ssize_t)(sizeof(*ev) + ev->len);
		}
		f->conn->over = conn_queued(f->conn) > AGENT_OUTQ_LIMIT;
	}
}

bool fswatch_stop(struct conn *c, uint32_t req)
{
	struct fswatch *f = fswatch_find(c, req);

	if (!f)
		return false;
	watch_end(f, true);
	return true;
}

void fswatch_pause(struct conn *c, bool paused)
{
	for (struct fswatch *f = c->fswatches; f; f = f->next) {
		if (f->dead || !f->answered || f->w.fd < 0 ||
		    f->w.registered == !paused)
			continue;
		if (paused) {
			epoll_ctl(agent.epfd, EPOLL_CTL_DEL, f->w.fd, NULL);
			f->w.registered = false;
		} else if (watch_set(&f->w, EPOLLIN) < 0) {
			send_event(f, "", THAW_EV_OVERFLOW);
		}
	}
}

static void fswatch_free(struct fswatch *f)
{
	if (!f->dead)
		watch_end(f, false);
	free(f->dirs);
	free(f->root);
	free(f);
}

void fswatch_sweep(struct conn *c)
{
	struct fswatch **pf = &c->fswatches;

	while (*pf) {
		struct fswatch *f = *pf;

		if (f->dead) {
			*pf = f->next;
			fswatch_free(f);
		} else {
			pf = &f->next;
		}
	}
}

void fswatch_release(struct conn *c)
{
	while (c->fswatches) {
		struct fswatch *f = c->fswatches;

		c->fswatches = f->next;
		fswatch_free(f);
	}
}
