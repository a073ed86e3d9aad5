/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent.h - thaw-agent's internal interfaces, shared by its parts:
 *   agent_main.c  arguments, the listener, the epoll loop, deferred frees
 *   init.c  PID 1 duties (mounts, hostname, environment, boot id, log,
 *           CLONE)
 *   conn.c  connections: frame input, output queue, flow control, dispatch
 *   exec.c  processes: spawn, pipes, timeouts, kill, reaping
 *   stdin.c an exec's stdin: its queue of STDIN bytes, acknowledged once
 *           written
 *   users.c the guest's users and groups (/etc/passwd, /etc/group)
 *   files.c file requests: write, read (streamed), mkdir, remove, rename
 *   listing.c STAT and LIST (with depth)
 *   watch.c WATCH: a directory's changes through inotify
 *
 * The agent is one thread around one epoll set.  Every registered fd has a
 * struct watch naming its kind and owner.  Objects that die while a batch
 * of epoll events is being handled are only marked dead and freed after
 * the batch (agent_sweep), so a later event in the same batch never points
 * at freed memory.
 */
#ifndef THAW_AGENT_H
#define THAW_AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "guest/protocol.h"

#define THAW_AGENT_VERSION "0.2.0"
/*
 * Output queued for one connection above which the agent stops reading
 * its children's pipes, its file streams and its requests: a slow host
 * costs at most this much guest memory (plus one frame) per connection.
 */
#define AGENT_OUTQ_LIMIT (4u << 20)

enum watch_kind {
	W_LISTENER,
	W_SIGNAL,
	W_CONN,
	W_STDIN,
	W_STDOUT,
	W_STDERR,
	W_TIMER,
	W_INOTIFY,
};

struct watch {
	enum watch_kind kind;
	int fd;		 /* -1 once closed */
	bool registered; /* in the epoll set */
	void *obj;
};

struct outq {
	uint8_t *data;
	size_t head, tail, cap;
};

struct wfile;
struct rfile;
struct fswatch;

struct conn {
	struct watch w;
	struct thaw_reader rd;
	struct outq out;
	uint32_t events; /* what w is registered for */
	bool over;	 /* output above AGENT_OUTQ_LIMIT: producers paused */
	bool dead;
	struct wfile *writes;
	struct rfile *reads;
	struct fswatch *fswatches;
	struct conn *next;
};

/* Bytes for an exec's stdin: EXEC's STDIN (req 0) or one STDIN frame. */
struct stdin_chunk {
	uint32_t req;
	bool close; /* the frame had FINAL: close stdin once written */
	size_t len, off;
	struct stdin_chunk *next;
	uint8_t data[];
};

struct exec {
	struct conn *conn; /* NULL once the connection is gone */
	uint32_t req;
	pid_t pid; /* also the process group id: the child calls setsid */
	struct watch in, out, err, timer;
	struct stdin_chunk *in_head, *in_tail;
	size_t in_queued; /* bytes not yet written */
	bool keep_stdin;  /* EXEC's KEEP_STDIN: open until a FINAL STDIN */
	bool timed_out;
	bool dead;
	struct exec *next;
};

struct agent {
	int epfd;
	struct watch listener;
	struct watch sig;
	bool pid1;
	bool stopping;
	char boot_id[64];
	char sandbox_id[65]; /* of the last CLONE; "" before any */
	struct conn *conns;
	struct exec *execs;
};

extern struct agent agent;

/* agent_main.c */
int watch_set(struct watch *w, uint32_t events);
void watch_close(struct watch *w);

/* init.c */
/* One line to /dev/kmsg (PID 1) or stderr; agent_log adds "thaw-agent: ". */
void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void agent_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_open(bool pid1);
void pid1_setup(void);

/* The commands' cgroup (init.c): its cgroup.procs, open for writing, or -1
 * when there is none (not PID 1, or no cgroup2 in the guest kernel). */
#define COMMANDS_CGROUP "/sys/fs/cgroup/commands"
#define COMMANDS_PIDS_MAX 1024
#define COMMANDS_MEM_RESERVE_MIN (24ull << 20)
extern int commands_cgroup_fd;
void read_boot_id(char *out, size_t len);
void clone_apply(struct conn *c, uint32_t req, const struct thaw_msg *m);

/* conn.c */
void conn_accept(void);
void conn_event(struct conn *c, uint32_t events);
void conn_update(struct conn *c);
void conn_destroy(struct conn *c);
size_t conn_queued(const struct conn *c);
/*
 * Opens a frame with room for @payload bytes at the end of @c's output
 * queue; conn_commit queues it.  On allocation failure the writer is in
 * overflow, nothing is queued and the connection is closed.
 */
void conn_begin(struct conn *c, struct thaw_writer *w, size_t payload,
		uint32_t req, uint16_t type, uint16_t flags);
void conn_commit(struct conn *c, struct thaw_writer *w);
void conn_ok(struct conn *c, uint32_t req);
void conn_error(struct conn *c, uint32_t req, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* users.c */
#define USER_NAME_MAX 64
#define USER_MAX_GROUPS 64
struct user_id {
	uid_t uid;
	gid_t gid;
	gid_t groups[USER_MAX_GROUPS]; /* the primary group first */
	int ngroups;
	char name[USER_NAME_MAX + 1];
	char home[4096];
};
/* A user by name or uid; -EINVAL with a message for an unknown name. */
int user_resolve(const char *spec, struct user_id *u, char *err, size_t errlen);
/* @USER_NAME_MAX bytes at most: the name, or the id in decimal.  Valid
 * until the next call. */
const char *user_name(uid_t uid);
const char *group_name(gid_t gid);
void users_forget(void);
/*
 * @env (NULL-terminated, may be NULL) with HOME, USER and LOGNAME of @u:
 * added where missing, or, with @replace, in place of @env's.  One
 * allocation pointing into @env's strings; NULL when out of memory.
 */
char **user_environ(char *const *env, bool replace, const struct user_id *u);

/* exec.c */
struct exec *exec_find(const struct conn *c, uint32_t req);
void exec_start(struct conn *c, uint32_t req, const struct thaw_msg *m);
void exec_kill(struct conn *c, uint32_t req, const struct thaw_msg *m);
void exec_event(struct watch *w, uint32_t events);
void exec_reap(void);
void exec_pause(struct conn *c, bool paused);
void exec_detach(struct conn *c);
void exec_kill_all(void);
void exec_sweep(void);

/* stdin.c */
#define STDIN_QUEUE_MAX (4u << 20)
int stdin_init(struct exec *e, const struct thaw_field *data, bool keep);
void stdin_start(struct exec *e);
void stdin_message(struct conn *c, uint32_t req, uint16_t flags,
		   const struct thaw_msg *m);
void stdin_write(struct exec *e);
/* Closes the pipe; pending STDIN frames get ERROR @err if still connected. */
void stdin_release(struct exec *e, int err);

/* watch.c */
void fswatch_start(struct conn *c, uint32_t req, const struct thaw_msg *m);
struct fswatch *fswatch_find(const struct conn *c, uint32_t req);
/* Ends watch @req with END; false when there is no such watch. */
bool fswatch_stop(struct conn *c, uint32_t req);
void fswatch_event(struct watch *w);
/* Whether a recursive watch has directories left to walk; fswatch_walk
 * walks one slice of one of them (agent_main.c, between batches of events). */
bool fswatch_walking(void);
void fswatch_walk(void);
void fswatch_pause(struct conn *c, bool paused);
void fswatch_sweep(struct conn *c);
void fswatch_release(struct conn *c);

/* listing.c */
void file_stat(struct conn *c, uint32_t req, const struct thaw_msg *m);
void file_list(struct conn *c, uint32_t req, const struct thaw_msg *m);

/* files.c */
void file_write(struct conn *c, uint32_t req, uint16_t flags,
		const struct thaw_msg *m);
void file_write_abort(struct conn *c, uint32_t req, uint16_t flags);
void file_read(struct conn *c, uint32_t req, const struct thaw_msg *m);
void file_pump(struct conn *c);
void file_mkdir(struct conn *c, uint32_t req, const struct thaw_msg *m);
void file_remove(struct conn *c, uint32_t req, const struct thaw_msg *m);
void file_rename(struct conn *c, uint32_t req, const struct thaw_msg *m);
void files_release(struct conn *c);

#endif
