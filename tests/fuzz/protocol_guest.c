// SPDX-License-Identifier: Apache-2.0
/*
 * protocol_guest.c - libFuzzer harness: the agent protocol as thaw-agent
 * reads it, from a host that sends anything.
 *
 * guest/agent/conn.c runs as it does in the guest: conn_accept() takes a
 * connection from a listening socket (abstract, nothing on disk), greets
 * it, and conn_event()/conn_update() read the input's frames through
 * protocol.c's reader, reject bad flags, oversized and runt frames, parse
 * each against its schema and dispatch it, queueing the answers, which
 * this harness drains so flow control comes and goes.  What conn.c
 * dispatches to has side effects a fuzzer must not have (exec.c forks
 * commands, stdin.c feeds them, files.c writes, removes and renames any
 * path, listing.c walks any tree, watch.c watches it, init.c's CLONE
 * reseeds the RNG, sets the clock and hostname), so those handlers are replaced
 * here by their parse step only: the fields taken the way the real one
 * takes them (thaw_get_str into its buffer, the strings walked with
 * thaw_next, the byte fields copied), then an answer of the type the real
 * one sends.  No thread: the input is written as the socket takes it.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "guest/agent/agent.h"

struct agent agent = { .boot_id = "6f1c2d0e-5b7a-4c1e-9d3f-2a8b7c6d5e4f" };

/* ---- agent_main.c and init.c: no epoll set, no log --------------------------
 */

int watch_set(struct watch *w, uint32_t events)
{
	w->registered = events != 0;
	return 0;
}

void watch_close(struct watch *w)
{
	if (w->fd >= 0)
		close(w->fd);
	w->fd = -1;
	w->registered = false;
}

void agent_log(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
}

/* ---- the handlers' parse steps ---------------------------------------- */

/* exec.c's strv(): every @tag string, copied and NUL-terminated. */
static void take_strings(const struct thaw_msg *m, uint16_t tag)
{
	const uint8_t *val;
	uint32_t len;
	size_t it = 0;

	while (thaw_next(m, tag, &it, &val, &len)) {
		char *s = strndup((const char *)val, len);

		if (!s)
			abort();
		free(s);
	}
}

static void take_bytes(const struct thaw_msg *m, uint16_t tag)
{
	const struct thaw_field *f = thaw_get(m, tag);
	uint8_t *copy = malloc(f->len + 1);

	if (!copy)
		abort();
	if (f->len) /* an absent field's data is NULL */
		memcpy(copy, f->data, f->len);
	free(copy);
}

static void take_path(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	char path[4096];

	if (thaw_get_str(m, THAW_T_PATH, path, sizeof(path)) < 0)
		conn_error(c, req, ENAMETOOLONG, "path too long");
	else
		conn_ok(c, req);
}

/* exec.c's, files.c's: USER into its buffer, bounded by the schema. */
static void take_user(const struct thaw_msg *m)
{
	char user[USER_NAME_MAX + 1];

	if (thaw_get_str(m, THAW_T_USER, user, sizeof(user)) == -ENAMETOOLONG)
		abort();
}

void exec_start(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	struct thaw_writer w;
	char cwd[4096];

	if (thaw_get_str(m, THAW_T_CWD, cwd, sizeof(cwd)) < 0)
		cwd[0] = '\0';
	take_strings(m, THAW_T_ARGV);
	take_strings(m, THAW_T_ENV);
	take_bytes(m, THAW_T_STDIN);
	thaw_get_u32(m, THAW_T_TIMEOUT_MS, 0);
	thaw_get_u8(m, THAW_T_KEEP_STDIN, 0);
	take_user(m);
	conn_begin(c, &w, 64, req, THAW_EXEC_STARTED, 0);
	thaw_put_u32(&w, THAW_T_PID, 42);
	conn_commit(c, &w);
	conn_begin(c, &w, 64, req, THAW_EXIT, THAW_FLAG_FINAL);
	thaw_put_u32(&w, THAW_T_EXIT_CODE, 0);
	thaw_put_u8(&w, THAW_T_TIMED_OUT, 0);
	conn_commit(c, &w);
}

void exec_kill(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	thaw_get_u32(m, THAW_T_TARGET, 0);
	thaw_get_u32(m, THAW_T_SIGNAL, 9);
	conn_error(c, req, ESRCH, "KILL: no such exec");
}

void exec_pause(struct conn *c, bool paused)
{
	(void)c;
	(void)paused;
}

void exec_detach(struct conn *c)
{
	(void)c;
}

void stdin_message(struct conn *c, uint32_t req, uint16_t flags,
		   const struct thaw_msg *m)
{
	(void)flags;
	thaw_get_u32(m, THAW_T_TARGET, 0);
	take_bytes(m, THAW_T_DATA);
	conn_error(c, req, ESRCH, "STDIN: no such exec");
}

void file_write(struct conn *c, uint32_t req, uint16_t flags,
		const struct thaw_msg *m)
{
	take_bytes(m, THAW_T_DATA);
	take_user(m);
	thaw_get_u32(m, THAW_T_MODE, 0644);
	if (flags & THAW_FLAG_FINAL)
		take_path(c, req, m);
}

void file_write_abort(struct conn *c, uint32_t req, uint16_t flags)
{
	(void)c;
	(void)req;
	(void)flags;
}

void file_read(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	take_path(c, req, m);
}

void file_pump(struct conn *c)
{
	(void)c;
}

void file_stat(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	take_path(c, req, m);
}

void file_list(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	thaw_get_u32(m, THAW_T_DEPTH, 1);
	take_path(c, req, m);
}

void file_mkdir(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	thaw_get_u32(m, THAW_T_MODE, 0755);
	thaw_get_u8(m, THAW_T_PARENTS, 0);
	take_user(m);
	take_path(c, req, m);
}

void file_rename(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	char to[4096];

	if (thaw_get_str(m, THAW_T_NEW_PATH, to, sizeof(to)) < 0)
		abort(); /* required, and bounded by the schema */
	take_path(c, req, m);
}

/* watch.c: WATCHING, one event, then END, as a watch of an empty
 * directory that goes away would answer. */
void fswatch_start(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	struct thaw_writer w;
	char path[4096];

	thaw_get_u8(m, THAW_T_RECURSIVE, 0);
	if (thaw_get_str(m, THAW_T_PATH, path, sizeof(path)) < 0)
		abort();
	conn_begin(c, &w, 0, req, THAW_WATCHING, 0);
	conn_commit(c, &w);
	conn_begin(c, &w, 64, req, THAW_FS_EVENT, 0);
	thaw_put_str(&w, THAW_T_PATH, "");
	thaw_put_u8(&w, THAW_T_EVENT, THAW_EV_REMOVE);
	conn_commit(c, &w);
	conn_begin(c, &w, 0, req, THAW_END, 0);
	conn_commit(c, &w);
}

void fswatch_pause(struct conn *c, bool paused)
{
	(void)c;
	(void)paused;
}

void fswatch_sweep(struct conn *c)
{
	(void)c;
}

void fswatch_release(struct conn *c)
{
	(void)c;
}

void file_remove(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	thaw_get_u8(m, THAW_T_RECURSIVE, 0);
	take_path(c, req, m);
}

void files_release(struct conn *c)
{
	(void)c;
}

void clone_apply(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	const struct thaw_field *host = thaw_get(m, THAW_T_HOSTNAME);
	char hostname[HOST_NAME_MAX + 1];

	take_bytes(m, THAW_T_ENTROPY);
	thaw_get_u64(m, THAW_T_REALTIME_NS, 0);
	snprintf(hostname, sizeof(hostname), "%.*s", (int)host->len,
		 (const char *)host->data);
	/* The schema bounds SANDBOX_ID to fit. */
	if (thaw_get_str(m, THAW_T_SANDBOX_ID, agent.sandbox_id,
			 sizeof(agent.sandbox_id)) < 0)
		abort();
	conn_ok(c, req);
}

/* ---- the connection ----------------------------------------------------- */

static struct sockaddr_un listen_addr = { .sun_family = AF_UNIX };
static socklen_t listen_len;

static void listen_once(void)
{
	/* Non-blocking, as agent_main.c's: conn_accept() takes all until
	 * EAGAIN. */
	agent.listener.fd =
		socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (agent.listener.fd < 0)
		abort();
	/* Abstract: the first byte of sun_path stays 0. */
	int n = snprintf(listen_addr.sun_path + 1,
			 sizeof(listen_addr.sun_path) - 1,
			 "thaw-fuzz-protocol-guest-%d", getpid());
	listen_len = offsetof(struct sockaddr_un, sun_path) + 1 + n;
	if (bind(agent.listener.fd, (struct sockaddr *)&listen_addr,
		 listen_len) ||
	    listen(agent.listener.fd, 1))
		abort();
	agent.listener.kind = W_LISTENER;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t sink[1 << 16];
	size_t sent = 0;
	int host;

	if (!listen_len)
		listen_once();
	agent.sandbox_id[0] = '\0';
	host = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (host < 0 ||
	    connect(host, (struct sockaddr *)&listen_addr, listen_len))
		abort();
	conn_accept();
	struct conn *c = agent.conns;
	if (!c || c->next)
		abort();

	/* Each round moves at least one byte or one frame; a connection
	 * that neither reads nor ends is a hang. */
	for (size_t round = 0; !c->dead; round++) {
		if (round > 4 * size + 64)
			abort();
		if (sent < size) {
			ssize_t n = write(host, data + sent, size - sent);

			if (n > 0)
				sent += (size_t)n;
			if (sent == size && shutdown(host, SHUT_WR))
				abort();
		} else if (!size && shutdown(host, SHUT_WR)) {
			abort();
		}
		conn_event(c, EPOLLIN | EPOLLOUT);
		conn_update(c);
		while (read(host, sink, sizeof(sink)) > 0)
			;
	}
	agent.conns = NULL;
	conn_destroy(c);
	close(host);
	return 0;
}
