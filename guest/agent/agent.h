/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent.h - thaw-agent's internal interfaces, shared by its parts:
 *   main.c  arguments, the listener, the epoll loop, deferred frees
 *   init.c  PID 1 duties (mounts, hostname, environment, boot id, log,
 *           CLONE)
 *   conn.c  connections: frame input, output queue, flow control, dispatch
 *   exec.c  processes: spawn, pipes, timeouts, kill, reaping
 *   files.c file requests: write, read (streamed), stat, list, mkdir, remove
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

#include "protocol.h"

#define THAW_AGENT_VERSION "0.1.0"
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

struct conn {
	struct watch w;
	struct thaw_reader rd;
	struct outq out;
	uint32_t events; /* what w is registered for */
	bool over;	 /* output above AGENT_OUTQ_LIMIT: producers paused */
	bool dead;
	struct wfile *writes;
	struct rfile *reads;
	struct conn *next;
};

struct exec {
	struct conn *conn; /* NULL once the connection is gone */
	uint32_t req;
	pid_t pid; /* also the process group id: the child calls setsid */
	struct watch in, out, err, timer;
	uint8_t *stdin_buf;
	size_t stdin_len, stdin_off;
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

/* main.c */
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

/* exec.c */
void exec_start(struct conn *c, uint32_t req, const struct thaw_msg *m);
void exec_kill(struct conn *c, uint32_t req, const struct thaw_msg *m);
void exec_event(struct watch *w, uint32_t events);
void exec_reap(void);
void exec_pause(struct conn *c, bool paused);
void exec_detach(struct conn *c);
void exec_kill_all(void);
void exec_sweep(void);

/* files.c */
void file_write(struct conn *c, uint32_t req, uint16_t flags,
		const struct thaw_msg *m);
void file_write_abort(struct conn *c, uint32_t req, uint16_t flags);
void file_read(struct conn *c, uint32_t req, const struct thaw_msg *m);
void file_pump(struct conn *c);
void file_stat(struct conn *c, uint32_t req, const struct thaw_msg *m);
void file_list(struct conn *c, uint32_t req, const struct thaw_msg *m);
void file_mkdir(struct conn *c, uint32_t req, const struct thaw_msg *m);
void file_remove(struct conn *c, uint32_t req, const struct thaw_msg *m);
void files_release(struct conn *c);

#endif
