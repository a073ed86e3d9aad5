// SPDX-License-Identifier: Apache-2.0
/*
 * stdin.c - an exec's stdin: EXEC's STDIN bytes, then, for an exec started
 * with KEEP_STDIN, the bytes of STDIN frames as the host sends them (envd's
 * SendInput and CloseStdin).
 *
 * Every piece waits in the exec's queue until the command reads it: the
 * non-blocking pipe is written when epoll says it has room, so a command
 * that does not read never blocks the agent, and the connection keeps
 * being read (a KILL behind a STDIN must get through).  The backpressure
 * is the host's to keep: a STDIN frame is answered OK only once its bytes
 * are all in the pipe, and one that would take the queue past
 * STDIN_QUEUE_MAX is refused whole with ENOBUFS, so the host knows exactly
 * which bytes the command got and resends after an earlier OK.  Every
 * STDIN frame has one answer: OK, or ERROR (EPIPE) when the pipe breaks,
 * is closed or the command ends first; those come before the EXEC's EXIT.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "guest/agent/agent.h"

static int push(struct exec *e, uint32_t req, const uint8_t *data, size_t len,
		bool close)
{
	struct stdin_chunk *k = malloc(sizeof(*k) + len);

	if (!k)
		return -ENOMEM;
	*k = (struct stdin_chunk){ .req = req, .close = close, .len = len };
	if (len)
		memcpy(k->data, data, len);
	if (e->in_tail)
		e->in_tail->next = k;
	else
		e->in_head = k;
	e->in_tail = k;
	e->in_queued += len;
	return 0;
}

/* Takes the head chunk off the queue and answers its frame with @err. */
static void pop(struct exec *e, int err)
{
	struct stdin_chunk *k = e->in_head;

	e->in_head = k->next;
	if (!e->in_head)
		e->in_tail = NULL;
	e->in_queued -= k->len - k->off;
	if (k->req && e->conn && !err)
		conn_ok(e->conn, k->req);
	else if (k->req && e->conn)
		conn_error(e->conn, k->req, err,
			   "STDIN of exec %u: stdin is closed (%s)", e->req,
			   strerror(err));
	free(k);
}

int stdin_init(struct exec *e, const struct thaw_field *data, bool keep)
{
	e->keep_stdin = keep;
	if (!data->len)
		return 0;
	return push(e, 0, data->data, data->len, !keep);
}

/* Only while there is something to write: an empty pipe is always
 * writable, and a registered one would wake the loop for nothing. */
static void want_room(struct exec *e, bool want)
{
	if (e->in.fd < 0 || e->in.registered == want)
		return;
	if (want) {
		if (watch_set(&e->in, EPOLLOUT) < 0)
			stdin_release(e, EIO);
	} else {
		epoll_ctl(agent.epfd, EPOLL_CTL_DEL, e->in.fd, NULL);
		e->in.registered = false;
	}
}

void stdin_start(struct exec *e)
{
	if (!e->in_head && !e->keep_stdin)
		stdin_release(e, EPIPE);
	else
		want_room(e, e->in_head != NULL);
}

void stdin_release(struct exec *e, int err)
{
	watch_close(&e->in);
	while (e->in_head)
		pop(e, err);
}

void stdin_write(struct exec *e)
{
	while (e->in_head && e->in.fd >= 0) {
		struct stdin_chunk *k = e->in_head;
		ssize_t n = k->off < k->len ? write(e->in.fd, k->data + k->off,
						    k->len - k->off)
					    : 0;

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno == EAGAIN)
			return;
		if (n < 0) {
			/* EPIPE: the command closed its stdin. */
			stdin_release(e, errno);
			return;
		}
		k->off += (size_t)n;
		e->in_queued -= (size_t)n;
		if (k->off < k->len)
			continue;
		bool close = k->close;

		pop(e, 0);
		if (close) {
			stdin_release(e, EPIPE);
			return;
		}
	}
	want_room(e, false);
}

void stdin_message(struct conn *c, uint32_t req, uint16_t flags,
		   const struct thaw_msg *m)
{
	uint32_t target = thaw_get_u32(m, THAW_T_TARGET, 0);
	const struct thaw_field *data = thaw_get(m, THAW_T_DATA);
	struct exec *e = exec_find(c, target);

	if (!e) {
		conn_error(c, req, ESRCH,
			   "STDIN: TARGET %u is not a running exec on this "
			   "connection",
			   target);
		return;
	}
	/* A close already queued counts as closed: nothing may follow it. */
	if (e->in.fd < 0 || (e->in_tail && e->in_tail->close)) {
		conn_error(c, req, EPIPE, "STDIN: exec %u's stdin is closed",
			   target);
		return;
	}
	if (e->in_queued + data->len > STDIN_QUEUE_MAX) {
		conn_error(c, req, ENOBUFS,
			   "STDIN: exec %u has %zu bytes of stdin not read "
			   "yet; %u more would pass the %u-byte limit",
			   target, e->in_queued, data->len, STDIN_QUEUE_MAX);
		return;
	}
	if (push(e, req, data->data, data->len, flags & THAW_FLAG_FINAL) < 0) {
		conn_error(c, req, ENOMEM, "STDIN: out of memory");
		return;
	}
	stdin_write(e);
	want_room(e, e->in_head != NULL);
}
