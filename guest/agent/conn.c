// SPDX-License-Identifier: Apache-2.0
/*
 * conn.c - one host connection: reading frames, queueing answers, flow
 * control, and handing each request to exec.c, stdin.c, files.c,
 * listing.c or watch.c.
 *
 * Input goes through protocol.c's frame reader, which never reads past
 * the current frame, so a bad frame is answered with ERROR and skipped
 * without losing sync (PROTOCOL.md, "Errors").  Output frames are encoded
 * straight into a per-connection byte queue and written as the socket
 * accepts them.  When the queue passes AGENT_OUTQ_LIMIT every producer of
 * this connection stops (its requests, its children's pipes, its file
 * streams, its directory watches) until the host has read enough; other
 * connections go on.
 * A connection ends when the host closes it or a read/write on it fails;
 * its running execs are then killed (exec_detach) and its watches end.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "guest/agent/agent.h"

/* Frames handled per readiness event, so one busy host cannot starve. */
#define FRAMES_PER_EVENT 16
/* An idle connection keeps at most this much queue memory. */
#define OUTQ_KEEP (256u << 10)

size_t conn_queued(const struct conn *c)
{
	return c->out.tail - c->out.head;
}

static void conn_fail(struct conn *c, const char *what, int err)
{
	if (!c->dead)
		agent_log("connection %d: %s: %s", c->w.fd, what,
			  strerror(err));
	c->dead = true;
}

static void send_hello(struct conn *c)
{
	struct thaw_writer w;

	conn_begin(c, &w, 256, 0, THAW_HELLO, 0);
	thaw_put_u32(&w, THAW_T_VERSION, THAW_PROTOCOL_VERSION);
	thaw_put_str(&w, THAW_T_AGENT_VERSION, THAW_AGENT_VERSION);
	thaw_put_str(&w, THAW_T_BOOT_ID, agent.boot_id);
	if (agent.sandbox_id[0])
		thaw_put_str(&w, THAW_T_SANDBOX_ID, agent.sandbox_id);
	conn_commit(c, &w);
}

void conn_accept(void)
{
	for (;;) {
		int fd = accept4(agent.listener.fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EINTR &&
			    errno != ECONNABORTED)
				agent_log("accept: %s", strerror(errno));
			return;
		}
		c = calloc(1, sizeof(*c));
		if (!c || thaw_reader_init(&c->rd) < 0) {
			agent_log("connection %d: out of memory", fd);
			free(c);
			close(fd);
			continue;
		}
		c->w = (struct watch){ .kind = W_CONN, .fd = fd, .obj = c };
		c->events = EPOLLIN;
		if (watch_set(&c->w, c->events) < 0)
			c->dead = true;
		c->next = agent.conns;
		agent.conns = c;
		send_hello(c);
	}
}

static void flush(struct conn *c)
{
	struct outq *q = &c->out;

	while (q->head < q->tail && !c->dead) {
		ssize_t n =
			write(c->w.fd, q->data + q->head, q->tail - q->head);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				conn_fail(c, "write", errno);
			break;
		}
		q->head += (size_t)n;
	}
	if (q->head == q->tail) {
		q->head = q->tail = 0;
		if (q->cap > OUTQ_KEEP) {
			free(q->data);
			q->data = NULL;
			q->cap = 0;
		}
	}
}

void conn_begin(struct conn *c, struct thaw_writer *w, size_t payload,
		uint32_t req, uint16_t type, uint16_t flags)
{
	struct outq *q = &c->out;
	size_t need;

	if (payload > THAW_MAX_PAYLOAD)
		payload = THAW_MAX_PAYLOAD;
	need = THAW_HEADER_SIZE + payload;
	if (q->cap - q->tail < need && q->head) {
		memmove(q->data, q->data + q->head, q->tail - q->head);
		q->tail -= q->head;
		q->head = 0;
	}
	if (q->cap - q->tail < need) {
		size_t cap = q->cap ? q->cap : 64 << 10;
		uint8_t *p;

		while (cap - q->tail < need)
			cap *= 2;
		p = realloc(q->data, cap);
		if (!p) {
			conn_fail(c, "output queue", ENOMEM);
			thaw_writer_init(w, NULL, 0, req, type, flags);
			return;
		}
		q->data = p;
		q->cap = cap;
	}
	thaw_writer_init(w, q->data + q->tail, need, req, type, flags);
}

void conn_commit(struct conn *c, struct thaw_writer *w)
{
	int n = thaw_writer_finish(w);

	if (n < 0) {
		/* Callers size their frames; this is a bug, not the host's. */
		if (!c->dead)
			agent_log("connection %d: dropped an over-long frame",
				  c->w.fd);
		return;
	}
	if (c->dead)
		return;
	c->out.tail += (size_t)n;
	flush(c);
}

void conn_ok(struct conn *c, uint32_t req)
{
	struct thaw_writer w;

	conn_begin(c, &w, 0, req, THAW_OK, 0);
	conn_commit(c, &w);
}

void conn_error(struct conn *c, uint32_t req, int err, const char *fmt, ...)
{
	struct thaw_writer w;
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	conn_begin(c, &w, 2 * THAW_TLV_HEADER + 4 + strlen(msg), req,
		   THAW_ERROR, 0);
	thaw_put_u32(&w, THAW_T_ERRNO, (uint32_t)err);
	thaw_put_str(&w, THAW_T_MESSAGE, msg);
	conn_commit(c, &w);
}

static void pong(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	const struct thaw_field *data = thaw_get(m, THAW_T_DATA);
	struct thaw_writer w;

	conn_begin(c, &w, THAW_TLV_HEADER + data->len, req, THAW_PONG, 0);
	if (data->count)
		thaw_put_bytes(&w, THAW_T_DATA, data->data, data->len);
	conn_commit(c, &w);
}

static void handle_frame(struct conn *c, const struct thaw_frame *f)
{
	uint32_t req = f->h.request_id;
	struct thaw_msg m;
	char err[256];
	int ret;

	if (f->h.flags & ~THAW_KNOWN_FLAGS) {
		if (f->h.type == THAW_WRITE_FILE)
			file_write_abort(c, req, f->h.flags);
		conn_error(c, req, EINVAL, "%s: unknown flags 0x%x",
			   thaw_type_name(f->h.type),
			   f->h.flags & ~THAW_KNOWN_FLAGS);
		return;
	}
	ret = thaw_parse_type(&m, f->h.type, f->payload, f->payload_len, err,
			      sizeof(err));
	if (ret) {
		if (f->h.type == THAW_WRITE_FILE)
			file_write_abort(c, req, f->h.flags);
		conn_error(c, req, -ret, "%s", err);
		return;
	}
	switch (f->h.type) {
	case THAW_PING:
		pong(c, req, &m);
		break;
	case THAW_EXEC:
		exec_start(c, req, &m);
		break;
	case THAW_KILL:
		exec_kill(c, req, &m);
		break;
	case THAW_WRITE_FILE:
		file_write(c, req, f->h.flags, &m);
		break;
	case THAW_READ_FILE:
		file_read(c, req, &m);
		break;
	case THAW_STAT:
		file_stat(c, req, &m);
		break;
	case THAW_LIST:
		file_list(c, req, &m);
		break;
	case THAW_MKDIR:
		file_mkdir(c, req, &m);
		break;
	case THAW_REMOVE:
		file_remove(c, req, &m);
		break;
	case THAW_CLONE:
		clone_apply(c, req, &m);
		break;
	case THAW_STDIN:
		stdin_message(c, req, f->h.flags, &m);
		break;
	case THAW_RENAME:
		file_rename(c, req, &m);
		break;
	case THAW_WATCH:
		fswatch_start(c, req, &m);
		break;
	default:
		conn_error(c, req, EINVAL, "%s: only the agent sends this type",
			   thaw_type_name(f->h.type));
		break;
	}
}

static void read_frames(struct conn *c)
{
	for (int i = 0; i < FRAMES_PER_EVENT && !c->dead && !c->over; i++) {
		struct thaw_frame f;
		int st = thaw_reader_read(&c->rd, c->w.fd, &f);

		switch (st) {
		case THAW_READ_AGAIN:
			return;
		case THAW_READ_FRAME:
			handle_frame(c, &f);
			break;
		case THAW_READ_OVERSIZED:
			if (f.h.type == THAW_WRITE_FILE)
				file_write_abort(c, f.h.request_id, f.h.flags);
			conn_error(c, f.h.request_id, EMSGSIZE,
				   "%s: payload of %u bytes exceeds the "
				   "%u-byte limit; skipped",
				   thaw_type_name(f.h.type),
				   f.h.length - THAW_HEADER_REST,
				   THAW_MAX_PAYLOAD);
			break;
		case THAW_READ_RUNT:
			conn_error(c, 0, EPROTO,
				   "frame length %u is shorter than the "
				   "%u-byte header; skipped",
				   f.h.length, THAW_HEADER_REST);
			break;
		case THAW_READ_EOF:
			c->dead = true;
			return;
		default:
			conn_fail(c, "read", -st);
			return;
		}
		/* The frame may have filled the queue: stop early then. */
		c->over = conn_queued(c) > AGENT_OUTQ_LIMIT;
	}
}

void conn_event(struct conn *c, uint32_t events)
{
	if (c->dead)
		return;
	if (events & EPOLLOUT)
		flush(c);
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR))
		read_frames(c);
	/*
	 * Paused input is not read, so it cannot see the EOF; a hung-up
	 * peer will never drain the queue either.
	 */
	if (c->over && (events & (EPOLLHUP | EPOLLERR)))
		c->dead = true;
}

void conn_update(struct conn *c)
{
	bool over = conn_queued(c) > AGENT_OUTQ_LIMIT;
	uint32_t events;

	if (!over)
		file_pump(c);
	over = conn_queued(c) > AGENT_OUTQ_LIMIT;
	exec_pause(c, over);
	fswatch_pause(c, over);
	fswatch_sweep(c);
	c->over = over;
	/* A pending read is pumped again when the socket is writable. */
	events = (over ? 0 : EPOLLIN) |
		 (conn_queued(c) || c->reads ? EPOLLOUT : 0);
	if (events != c->events && !c->dead) {
		c->events = events;
		if (watch_set(&c->w, events) < 0)
			c->dead = true;
	}
}

void conn_destroy(struct conn *c)
{
	exec_detach(c);
	files_release(c);
	fswatch_release(c);
	watch_close(&c->w);
	thaw_reader_free(&c->rd);
	free(c->out.data);
	free(c);
}
