// SPDX-License-Identifier: Apache-2.0
/*
 * vsock_conn.c - connection buffers, credit and host socket I/O; see
 * vsock_conn.h.
 *
 * Socket writes use sendmsg(MSG_NOSIGNAL): a host client that went away must
 * become an EPIPE on this connection, not a SIGPIPE for the whole VMM.
 */
#include "vmm/devices/vsock_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"

/*
 * Tell the guest about freed space once its view of our buffer is down to
 * this: one maximal Linux packet (64 KiB), so a sender never stalls waiting
 * for space we already have.
 */
#define VSOCK_CREDIT_UPDATE_THRESHOLD (64u * 1024)

/* VMADDR_PORT_ANY is a bind wildcard, never a destination. */
#define VSOCK_PORT_ANY 0xffffffffu

int vsock_ring_alloc(struct vsock_ring *ring, uint32_t size)
{
	ring->data = malloc(size);
	if (!ring->data)
		return -1;
	ring->size = size;
	ring->start = 0;
	ring->used = 0;
	return 0;
}

void vsock_ring_free(struct vsock_ring *ring)
{
	free(ring->data);
	memset(ring, 0, sizeof(*ring));
}

int vsock_ring_data_iov(const struct vsock_ring *ring, struct iovec iov[2])
{
	uint32_t first = ring->size - ring->start;

	if (!ring->used)
		return 0;
	iov[0].iov_base = ring->data + ring->start;
	if (ring->used <= first) {
		iov[0].iov_len = ring->used;
		return 1;
	}
	iov[0].iov_len = first;
	iov[1].iov_base = ring->data;
	iov[1].iov_len = ring->used - first;
	return 2;
}

int vsock_ring_space_iov(const struct vsock_ring *ring, struct iovec iov[2])
{
	uint32_t end = (ring->start + ring->used) % ring->size;
	uint32_t space = vsock_ring_space(ring);
	uint32_t first = ring->size - end;

	if (!space)
		return 0;
	iov[0].iov_base = ring->data + end;
	if (space <= first) {
		iov[0].iov_len = space;
		return 1;
	}
	iov[0].iov_len = first;
	iov[1].iov_base = ring->data;
	iov[1].iov_len = space - first;
	return 2;
}

void vsock_ring_consume(struct vsock_ring *ring, uint32_t len)
{
	ring->start = (ring->start + len) % ring->size;
	ring->used -= len;
}

void vsock_ring_produce(struct vsock_ring *ring, uint32_t len)
{
	ring->used += len;
}

void vsock_ring_clear(struct vsock_ring *ring)
{
	ring->start = 0;
	ring->used = 0;
}

int vsock_conn_open(struct vsock_conn *conn, int fd,
		    enum vsock_conn_state state)
{
	uint32_t generation = conn->generation;

	memset(conn, 0, sizeof(*conn));
	conn->generation = generation;
	conn->fd = fd;
	if (vsock_ring_alloc(&conn->to_host, VSOCK_CONN_BUF_SIZE) ||
	    vsock_ring_alloc(&conn->to_guest, VSOCK_CONN_STAGE_SIZE)) {
		log_error("vsock: no memory for %u+%u bytes of buffers",
			  VSOCK_CONN_BUF_SIZE, VSOCK_CONN_STAGE_SIZE);
		vsock_conn_close(conn);
		return -1;
	}
	conn->state = state;
	return 0;
}

void vsock_conn_close(struct vsock_conn *conn)
{
	uint32_t generation = conn->generation + 1;

	if (conn->fd >= 0)
		close(conn->fd);
	vsock_ring_free(&conn->to_host);
	vsock_ring_free(&conn->to_guest);
	memset(conn, 0, sizeof(*conn));
	conn->fd = -1;
	conn->state = VSOCK_CONN_FREE;
	conn->generation = generation;
}

uint32_t vsock_conn_peer_credit(const struct vsock_conn *conn)
{
	uint32_t in_flight = conn->tx_cnt - conn->peer_fwd_cnt;

	/* A guest claiming to have consumed more than we sent only gets
	 * what it advertised, never a wrapped-around windfall. */
	if (in_flight > conn->peer_buf_alloc)
		return 0;
	return conn->peer_buf_alloc - in_flight;
}

bool vsock_conn_needs_credit_update(const struct vsock_conn *conn)
{
	uint32_t unannounced = conn->fwd_cnt - conn->last_fwd_cnt_sent;
	uint32_t seen_free;

	if (!unannounced)
		return false;
	seen_free = VSOCK_CONN_BUF_SIZE - conn->to_host.used - unannounced;
	return seen_free < VSOCK_CREDIT_UPDATE_THRESHOLD;
}

bool vsock_conn_wants_read(const struct vsock_conn *conn)
{
	return conn->state == VSOCK_CONN_ESTABLISHED && !conn->host_eof &&
	       !(conn->peer_shutdown & VIRTIO_VSOCK_SHUTDOWN_RCV) &&
	       vsock_ring_space(&conn->to_guest);
}

int vsock_conn_read_host(struct vsock_conn *conn)
{
	struct iovec iov[2];
	ssize_t n;

	while (vsock_conn_wants_read(conn)) {
		n = readv(conn->fd, iov,
			  vsock_ring_space_iov(&conn->to_guest, iov));
		if (n > 0) {
			vsock_ring_produce(&conn->to_guest, (uint32_t)n);
		} else if (n == 0) {
			conn->host_eof = true;
		} else if (errno == EAGAIN || errno == EWOULDBLOCK) {
			return 0;
		} else if (errno != EINTR) {
			return -1;
		}
	}
	return 0;
}

int vsock_conn_write_host(struct vsock_conn *conn)
{
	struct iovec iov[2];
	struct msghdr msg = { .msg_iov = iov };
	ssize_t n;

	while (conn->to_host.used) {
		msg.msg_iovlen = vsock_ring_data_iov(&conn->to_host, iov);
		n = sendmsg(conn->fd, &msg, MSG_NOSIGNAL);
		if (n > 0) {
			vsock_ring_consume(&conn->to_host, (uint32_t)n);
			conn->fwd_cnt += (uint32_t)n;
		} else if (n == 0 || errno == EAGAIN || errno == EWOULDBLOCK) {
			return 0;
		} else if (errno != EINTR) {
			return -1;
		}
	}
	return 0;
}

int vsock_parse_connect(const char *line, size_t len, uint32_t *port)
{
	static const char prefix[] = "CONNECT ";
	size_t prefix_len = sizeof(prefix) - 1;
	uint64_t value = 0;

	if (len <= prefix_len || memcmp(line, prefix, prefix_len))
		return -1;
	for (size_t i = prefix_len; i < len; i++) {
		if (line[i] < '0' || line[i] > '9')
			return -1;
		value = value * 10 + (uint64_t)(line[i] - '0');
		if (value >= VSOCK_PORT_ANY)
			return -1;
	}
	*port = (uint32_t)value;
	return 0;
}
