/* SPDX-License-Identifier: Apache-2.0 */
/*
 * agent_client.h - the host end of the channel to a guest's thaw-agent.
 *
 * The VMM exposes the guest's vsock ports through a Unix socket (hybrid
 * vsock, vmm/devices/vsock.h): connect, send "CONNECT 1024\n", read
 * "OK <port>\n", and the socket is then a stream to the agent, which greets
 * every connection with HELLO.  Frames are guest/PROTOCOL.md's.
 *
 * The guest is not trusted to read or write at any pace: the socket is
 * non-blocking and every read and write waits in one place, agent_wait(),
 * which also ends the wait on a signal (thaw_interrupted, interrupt.h, set
 * by one that landed on another thread: -EINTR), on what the connection's
 * watch (struct agent_watch) names (a client that hung up, a daemon
 * stopping) and on a deadline.  Connecting, each OK/ERROR answer, each
 * frame written and the rest of a frame once its first byte came are
 * bounded by the caller's patience, given to agent_connect(): how fast a
 * guest answers is the host's business (its kernel may run in KVM's
 * instruction emulator, or share two CPUs with dozens of other guests), so
 * no fixed time here decides that a guest is gone.  The next frame is
 * waited for until the watch's deadline (none: as long as the command
 * runs).
 *
 * Errors: 0 or a negative errno; the calls that take @err leave one message
 * there, the others fail only on the transport (a socket error, -EPIPE,
 * -EPROTO) and their errno says it all.
 */
#ifndef THAW_POOL_AGENT_CLIENT_H
#define THAW_POOL_AGENT_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "guest/protocol.h"

/*
 * What ends a wait on the agent besides the agent itself and a signal.
 * agent_connect() leaves it empty; the caller fills it in.
 */
struct agent_watch {
	/* A client whose hang-up (POLLHUP/POLLERR: gone both ways) ends
	 * every wait with -ECONNABORTED, -1 for none.  A client that only
	 * half-closed (shutdown(SHUT_WR)) still waits for its answer. */
	int client_fd;
	/* Asked every slice (<= 250 ms), NULL for never: true ends the wait
	 * with -ESHUTDOWN (the daemon is stopping). */
	bool (*stopping)(void *arg);
	void *arg;
	/* monotonic_ns() past which agent_next_frame() gives up with
	 * -ETIMEDOUT; 0 for none.  The other waits have their own. */
	uint64_t deadline_ns;
};

struct agent_conn {
	int fd; /* non-blocking */
	struct thaw_reader reader;
	char agent_version[64];
	/* The protocol version the agent greeted with
	 * (THAW_PROTOCOL_VERSION_MIN to THAW_PROTOCOL_VERSION); what needs a
	 * later one is -EOPNOTSUPP. */
	uint32_t version;
	uint64_t patience_ms; /* for the greeting and each OK/ERROR answer */
	struct agent_watch watch;
	/* When the frame being read must be complete (0: between frames). */
	uint64_t frame_deadline_ns;
};

/*
 * Waits until @c's socket has @events (POLLIN, POLLOUT), or monotonic_ns()
 * passes @deadline_ns (0: none), whatever comes first of that, a signal and
 * @c's watch.  Returns 0, -ETIMEDOUT, -EINTR, -ECONNABORTED (the client
 * hung up), -ESHUTDOWN (stopping) or poll()'s errno.  The one wait every
 * call here makes; callers may use it to wait for the agent themselves.
 */
int agent_wait(struct agent_conn *c, short events, uint64_t deadline_ns);

/*
 * Connects to the agent behind @vsock_path and waits up to @patience_ms for
 * its HELLO; later OK/ERROR answers on the connection get as long.
 * Returns 0; -EAGAIN when the guest is not listening yet (the socket is
 * missing, or the guest refused: try again) or did not answer within
 * @patience_ms; another negative errno after a message in @err.
 */
int agent_connect(struct agent_conn *c, const char *vsock_path,
		  uint64_t patience_ms, char *err, size_t errlen);

/* How agent_connect_until() waits; times are monotonic_ns()'s. */
struct agent_wait {
	uint64_t deadline_ns;
	/* Between attempts (NULL: never): waiting is pointless, the guest
	 * being gone. */
	bool (*give_up)(void *arg);
	void *arg;
};

/*
 * agent_connect() until the agent greets us, for a guest that is still
 * booting or restoring, or that refuses a connection for a moment when
 * busy with others.  Each attempt has the time left until the deadline as
 * its patience.  Pauses between attempts double from 1 ms to 20 ms: a
 * refusal is usually over at once, and a guest that keeps refusing (one
 * still booting) is better left alone a little than asked a thousand
 * times a second, each time costing it work.  Returns 0; -ETIMEDOUT at the
 * deadline and -ECANCELED when give_up said so, both with the last attempt's
 * reason in @err; -EINTR when thaw_interrupted is set; or agent_connect()'s
 * other errors.
 */
int agent_connect_until(struct agent_conn *c, const char *vsock_path,
			const struct agent_wait *w, char *err, size_t errlen);

/* An EXEC request (PROTOCOL.md); NULL/0 fields are left out. */
struct agent_exec_request {
	char *const *argv; /* NULL-terminated, not empty */
	char *const *env;  /* NULL-terminated KEY=VALUE, or NULL */
	const char *cwd;   /* NULL: "/" */
	const void *stdin_data;
	size_t stdin_len;
	uint32_t timeout_ms;
	/* NULL: root.  A user name of the guest's /etc/passwd or a uid in
	 * decimal: the command runs with its uid, gid and groups, and HOME,
	 * USER and LOGNAME unless @env sets them. */
	const char *user;
	/* stdin stays open after @stdin_data for agent_send_stdin(). */
	bool keep_stdin;
};

/*
 * Starts @r as request @id.  Returns 0, -E2BIG when it does not fit in one
 * frame, -EOPNOTSUPP for @user or @keep_stdin to a version-1 agent, or
 * another negative errno.  Like every frame sent here, it must leave within
 * the patience (a guest that stops reading: -ETIMEDOUT).
 */
int agent_exec(struct agent_conn *c, uint32_t id,
	       const struct agent_exec_request *r);

/* Sends KILL @signal to the process group of EXEC @target; the answer
 * (OK/ERROR) arrives on the connection like any other. */
int agent_kill(struct agent_conn *c, uint32_t id, uint32_t target,
	       uint32_t signal);

/* Largest DATA one STDIN frame carries. */
#define AGENT_STDIN_CHUNK (512u * 1024)

/*
 * STDIN request @id: @len (<= AGENT_STDIN_CHUNK) bytes for the stdin of
 * the running EXEC @target (started with keep_stdin); @close then closes
 * it (@len may be 0 for a close alone).  The answer arrives among the
 * exec's frames: OK once the bytes are in the command's stdin pipe, or
 * ERROR: ESRCH (@target not running), EPIPE (its stdin is closed),
 * ENOBUFS (the agent holds more than PROTOCOL.md's limit of earlier
 * STDIN bytes the command has not read yet: nothing of this one was
 * taken; send it again after an earlier one's OK).
 */
int agent_send_stdin(struct agent_conn *c, uint32_t id, uint32_t target,
		     const void *data, size_t len, bool close);

/* Largest DATA one WRITE_FILE frame carries. */
#define AGENT_WRITE_CHUNK (512u * 1024)

/*
 * One WRITE_FILE frame of request @id: the first names @path and @mode,
 * every one carries up to AGENT_WRITE_CHUNK bytes of @data, the @final one
 * commits the file.  Then agent_wait_answer() gets OK or ERROR.
 */
int agent_write_file(struct agent_conn *c, uint32_t id, bool first,
		     const char *path, uint32_t mode, const void *data,
		     size_t len, bool final);
/* The same, the file owned by @user (NULL: root; a name or a uid, as
 * agent_exec_request's) and its primary group; -EOPNOTSUPP for a @user
 * to a version-1 agent. */
int agent_write_file_as(struct agent_conn *c, uint32_t id, bool first,
			const char *path, uint32_t mode, const char *user,
			const void *data, size_t len, bool final);

/* Asks for @path: DATA frames, then END or ERROR (agent_next_frame). */
int agent_read_file(struct agent_conn *c, uint32_t id, const char *path);

/* What STAT answers of a path and LIST of each entry (symlinks not
 * followed). */
struct agent_file_info {
	uint8_t type;  /* enum thaw_file_type */
	uint32_t mode; /* permission bits, <= 07777 */
	uint64_t size;
	int64_t mtime_ns; /* since the epoch */
	char name[256];	  /* LIST: the entry's name; STAT: "" */
	char path[4096];  /* LIST: relative to the listed directory */
	/* The guest's user and group names, or the ids in decimal when it
	 * has none; "" from a version-1 agent. */
	char owner[65];
	char group[65];
	char symlink_target[4096]; /* "" unless a symlink */
};

/*
 * The commands below each send a request and wait (bounded, like
 * agent_wait_answer) for its answer on a connection with nothing else
 * running.  Each returns 0, the agent's ERROR as -errno with its message in
 * @err (ENOENT, EACCES, ENOTDIR, EEXIST, ...), -EOPNOTSUPP for what a
 * version-1 agent lacks, or a transport error.
 */
int agent_stat(struct agent_conn *c, uint32_t id, const char *path,
	       struct agent_file_info *info, char *err, size_t errlen);
/*
 * Calls @each for every entry below @path down to @depth levels (1: the
 * directory's own entries; at most THAW_LIST_MAX_DEPTH), parents before
 * their children.  A non-zero return of @each is returned once the
 * answer has been read to its end, @each not called again.  -E2BIG past
 * THAW_LIST_MAX_ENTRIES entries (those before it were passed to @each).
 */
int agent_list(struct agent_conn *c, uint32_t id, const char *path,
	       uint32_t depth,
	       int (*each)(const struct agent_file_info *info, void *arg),
	       void *arg, char *err, size_t errlen);
/* MKDIR, owned by @user (NULL: root) with the ancestors it creates. */
int agent_mkdir(struct agent_conn *c, uint32_t id, const char *path,
		uint32_t mode, bool parents, const char *user, char *err,
		size_t errlen);
int agent_remove(struct agent_conn *c, uint32_t id, const char *path,
		 bool recursive, char *err, size_t errlen);
/* rename(2) in the guest: replaces a file at @to; EXDEV across mounts. */
int agent_rename(struct agent_conn *c, uint32_t id, const char *from,
		 const char *to, char *err, size_t errlen);

/*
 * Watches the directory @path (and, @recursive, every directory below it)
 * as request @id: returns 0 once the agent has its watches in place
 * (WATCHING), or an error as the commands above.  Then the watch's
 * frames come through agent_next_frame(), each read by
 * agent_fs_event_of(), until agent_unwatch() or the connection's end.
 */
int agent_watch(struct agent_conn *c, uint32_t id, const char *path,
		bool recursive, char *err, size_t errlen);

/* One change below a watched directory. */
struct agent_fs_event {
	uint8_t type; /* enum thaw_event_type */
	/* Relative to the watched directory; "" for the directory itself,
	 * and for an OVERFLOW that lost events anywhere. */
	char name[4096];
};

/*
 * Reads a frame of watch @watch_id: 1 with @ev filled for an event, 0 when
 * the watch has ended (END: unwatched, or the directory itself went away),
 * or the watch's ERROR as -errno with its message in @err; -EPROTO for any
 * other frame.
 */
int agent_fs_event_of(const struct thaw_frame *f, uint32_t watch_id,
		      struct agent_fs_event *ev, char *err, size_t errlen);

/* Ends watch @watch_id as request @id (a KILL): its OK, and the watch's
 * END, arrive through agent_next_frame(). */
int agent_unwatch(struct agent_conn *c, uint32_t id, uint32_t watch_id);

/*
 * Waits (bounded) for request @id's OK or ERROR.  Returns 0, the ERROR's
 * -errno with its message in @err, or a transport error.
 */
int agent_wait_answer(struct agent_conn *c, uint32_t id, char *err,
		      size_t errlen);

/*
 * An ERROR frame's errno (positive, EPROTO when implausible) and message
 * into @msg, cut to @len and made printable (common/printable.h): the
 * guest's words end up in logs and JSON answers.  Returns the errno.
 */
int agent_error_of(const struct thaw_msg *m, char *msg, size_t len);

/*
 * Makes a freshly restored guest unique (PROTOCOL.md, CLONE): reseeds its
 * RNG with 64 bytes from getrandom, sets its clock to ours, and gives it
 * @hostname and @sandbox_id.  Call it right after agent_connect, before any
 * other request, since it consumes the next frame as its answer.  Returns 0
 * or a negative errno after a message in @err: the agent's ERROR (its errno
 * and message; EPERM from an agent that is not a guest's init), -EINVAL for
 * arguments the protocol does not allow, or a transport error.
 */
int agent_clone(struct agent_conn *c, uint32_t id, const char *hostname,
		const char *sandbox_id, char *err, size_t errlen);

/*
 * PING as request @id, then waits (bounded) for its PONG: the agent's main
 * loop is alive and answering.  Returns 0 or a negative errno after a
 * message in @err.
 */
int agent_ping(struct agent_conn *c, uint32_t id, char *err, size_t errlen);

/*
 * Waits for the next frame, until the watch's deadline; once a frame has
 * begun, its rest comes within the patience or the frame is -ETIMEDOUT.
 * Returns 0 with @f filled (payload valid until the next call) or a
 * negative errno: agent_wait()'s, -EPIPE (the agent went away), -EPROTO.
 */
int agent_next_frame(struct agent_conn *c, struct thaw_frame *f);

void agent_close(struct agent_conn *c);

#endif
