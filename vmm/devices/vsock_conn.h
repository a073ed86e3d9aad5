/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vsock_conn.h - one virtio-vsock stream connection and its host socket.
 *
 * A connection pairs a guest vsock stream (local port on the host CID, peer
 * port on the guest CID) with a Unix stream socket on the host.  Bytes move
 * through two bounded rings so neither side can make the VMM buffer without
 * limit:
 *
 *	guest --RW--> to_host (VSOCK_CONN_BUF_SIZE) --write--> host socket
 *	host socket --read--> to_guest (VSOCK_CONN_STAGE_SIZE) --RW--> guest
 *
 * to_host is exactly the buffer we advertise to the guest as buf_alloc, so a
 * guest that honours our credit can never overflow it, and one that does not
 * is reset.  to_guest only stages reads; when it is full we stop reading the
 * host socket, which is what pushes back on a fast host writer.
 *
 * Credit (virtio 1.2, 5.10.6.3): the guest may have at most buf_alloc -
 * (bytes it sent - our fwd_cnt) bytes in flight to us, and we may send it at
 * most peer_buf_alloc - (tx_cnt - peer_fwd_cnt).  All counters are free-
 * running u32s, so differences are taken modulo 2^32 as the spec intends.
 *
 * This file knows nothing of virtqueues or epoll; vsock.c decides when to
 * call it.  The protocol fields are plain integers so a snapshot could copy
 * them, though host sockets cannot be saved: a restored device drops its
 * connections instead (VIRTIO_VSOCK_EVENT_TRANSPORT_RESET).
 */
#ifndef THAW_VMM_DEVICES_VSOCK_CONN_H
#define THAW_VMM_DEVICES_VSOCK_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Guest-to-host buffering per connection; also our advertised buf_alloc. */
#define VSOCK_CONN_BUF_SIZE (256u * 1024)
/* Host-to-guest staging per connection. */
#define VSOCK_CONN_STAGE_SIZE (64u * 1024)
/* "CONNECT 4294967294\n" is 19 bytes; anything much longer is not one. */
#define VSOCK_HANDSHAKE_MAX 32

#define VIRTIO_VSOCK_SHUTDOWN_RCV 1u
#define VIRTIO_VSOCK_SHUTDOWN_SEND 2u
#define VIRTIO_VSOCK_SHUTDOWN_BOTH 3u

/* Control packets a connection owes the guest. */
#define VSOCK_PENDING_REQUEST 1u
#define VSOCK_PENDING_RESPONSE 2u
#define VSOCK_PENDING_CREDIT_UPDATE 4u

struct vsock_ring {
	uint8_t *data;
	uint32_t size;
	uint32_t start; /* offset of the oldest byte */
	uint32_t used;
};

enum vsock_conn_state {
	VSOCK_CONN_FREE,
	VSOCK_CONN_HANDSHAKE,  /* host client, reading "CONNECT <port>\n" */
	VSOCK_CONN_CONNECTING, /* REQUEST to the guest pending or sent */
	VSOCK_CONN_ESTABLISHED,
	VSOCK_CONN_CLOSING, /* fully shut down, waiting for RST or flush */
};

struct vsock_conn {
	enum vsock_conn_state state;
	uint32_t local_port; /* on the host CID */
	uint32_t peer_port;  /* on the guest CID */
	uint32_t peer_buf_alloc;
	uint32_t peer_fwd_cnt;
	uint32_t tx_cnt;  /* payload bytes sent to the guest */
	uint32_t fwd_cnt; /* guest payload bytes written to the host */
	uint32_t last_fwd_cnt_sent; /* fwd_cnt the guest last heard of */
	uint32_t pending;	    /* VSOCK_PENDING_* */
	uint32_t peer_shutdown;	    /* SHUTDOWN flags the guest sent */
	uint32_t local_shutdown;    /* SHUTDOWN flags we sent */
	uint64_t deadline_ms;	    /* CLOCK_MONOTONIC; 0: none */

	/* Host side. */
	int fd;
	bool host_eof;	   /* read() returned 0 */
	bool host_hup;	   /* both directions of the socket are shut */
	bool host_wr_shut; /* we passed the guest's SEND shutdown on */
	bool registered;   /* fd is in the epoll set with @events */
	uint32_t events;
	uint32_t generation; /* tells stale epoll events from a reused slot */
	char line[VSOCK_HANDSHAKE_MAX];
	uint32_t line_len;
	struct vsock_ring to_host;
	struct vsock_ring to_guest;
};

/* Ring buffer; fill and drain through the iovecs of its two pieces. */
int vsock_ring_alloc(struct vsock_ring *ring, uint32_t size);
void vsock_ring_free(struct vsock_ring *ring);
static inline uint32_t vsock_ring_space(const struct vsock_ring *ring)
{
	return ring->size - ring->used;
}
/* Up to two iovecs covering the queued bytes; returns how many. */
int vsock_ring_data_iov(const struct vsock_ring *ring, struct iovec iov[2]);
/* Up to two iovecs covering the free space; returns how many. */
int vsock_ring_space_iov(const struct vsock_ring *ring, struct iovec iov[2]);
void vsock_ring_consume(struct vsock_ring *ring, uint32_t len);
void vsock_ring_produce(struct vsock_ring *ring, uint32_t len);
void vsock_ring_clear(struct vsock_ring *ring);

/*
 * Takes ownership of @fd (non-blocking) for a free @conn and allocates its
 * rings.  Returns 0, or -1 with a message (and @fd closed) when out of
 * memory.
 */
int vsock_conn_open(struct vsock_conn *conn, int fd,
		    enum vsock_conn_state state);
/* Closes the socket, frees the rings; @conn is FREE with a new generation. */
void vsock_conn_close(struct vsock_conn *conn);

/* How many payload bytes the guest will accept from us right now. */
uint32_t vsock_conn_peer_credit(const struct vsock_conn *conn);

/*
 * Whether the guest should hear our fwd_cnt: its idea of our free space has
 * dropped below a threshold while we actually have more.
 */
bool vsock_conn_needs_credit_update(const struct vsock_conn *conn);

/* Whether host bytes should be read into to_guest now. */
bool vsock_conn_wants_read(const struct vsock_conn *conn);

/*
 * Reads the host socket into to_guest until it would block, the ring is full
 * or EOF (host_eof).  Returns 0, or -1 on a socket error (errno set).
 */
int vsock_conn_read_host(struct vsock_conn *conn);

/*
 * Writes to_host to the host socket until it would block or is empty,
 * counting fwd_cnt.  Returns 0, or -1 on a socket error (errno set).
 */
int vsock_conn_write_host(struct vsock_conn *conn);

/*
 * Parses a complete handshake line without its newline: "CONNECT <port>"
 * with a decimal port below VMADDR_PORT_ANY.  Returns 0 and sets @port, or
 * -1.
 */
int vsock_parse_connect(const char *line, size_t len, uint32_t *port);

#endif
