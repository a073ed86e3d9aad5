// SPDX-License-Identifier: Apache-2.0
/*
 * vsock.c - virtio-vsock device and its Unix socket muxer; see vsock.h.
 *
 * One pass of the device thread: wait in epoll (woken by a socket, a kick
 * from a vCPU, or the nearest connection deadline), stop there while paused,
 * react to socket events, take the guest's TX packets, expire deadlines, send
 * a TRANSPORT_RESET owed since a restore, then fill RX.
 *
 * RX is never fed from a queue of prepared packets.  Instead each pass asks
 * every connection what it owes the guest next (a REQUEST or RESPONSE it
 * has flagged, buffered bytes the guest has credit for, a SHUTDOWN its host
 * socket's state calls for, a CREDIT_UPDATE), round robin so one busy
 * connection cannot starve the others.  What we owe is thus bounded by the
 * connection table however long the guest leaves RX empty; only RSTs for
 * packets with no connection need a separate, bounded, backlog.
 *
 * Every change to a connection ends in pump_conn(), which moves bytes
 * between the rings and the socket as far as they go without blocking and
 * re-arms epoll for what is still wanted.  Readiness is thus derived from
 * state, and a socket whose peer has hung up (where epoll would report
 * EPOLLHUP forever) can leave the epoll set and still be drained.
 */
#include "vmm/devices/vsock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/io.h"
#include "common/log.h"
#include "vmm/seccomp_filters.h"

#define HDR_SIZE sizeof(struct virtio_vsock_hdr)
#define VSOCK_PORT_ANY 0xffffffffu
#define VSOCK_CID_ANY 0xffffffffu

/* epoll tags: the device thread's kick (device_thread.h), the listener,
 * or a connection slot (low half) with the slot's generation (high half). */
#define TAG_LISTEN (DEVICE_THREAD_TAG_KICK + 1)
#define TAG_CONN_BASE 2

/* Walks an iovec array; idx == cnt or off < iov[idx].iov_len. */
struct iov_cursor {
	const struct iovec *iov;
	int cnt;
	int idx;
	size_t off;
};

static uint64_t now_ms(void)
{
	return monotonic_ns() / NS_PER_MS;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

static void cursor_advance(struct iov_cursor *c, size_t len)
{
	c->off += len;
	while (c->idx < c->cnt && c->off >= c->iov[c->idx].iov_len) {
		c->off -= c->iov[c->idx].iov_len;
		c->idx++;
	}
}

static void cursor_init(struct iov_cursor *c, const struct iovec *iov, int cnt,
			size_t skip)
{
	*c = (struct iov_cursor){ .iov = iov, .cnt = cnt };
	cursor_advance(c, skip);
}

static size_t iov_copy(struct iov_cursor *dst, struct iov_cursor *src,
		       size_t len)
{
	size_t done = 0;

	while (done < len && dst->idx < dst->cnt && src->idx < src->cnt) {
		const struct iovec *d = &dst->iov[dst->idx];
		const struct iovec *s = &src->iov[src->idx];
		size_t n = min_u64(len - done, min_u64(d->iov_len - dst->off,
						       s->iov_len - src->off));

		memcpy((uint8_t *)d->iov_base + dst->off,
		       (const uint8_t *)s->iov_base + src->off, n);
		cursor_advance(dst, n);
		cursor_advance(src, n);
		done += n;
	}
	return done;
}

static void count_dropped(struct vsock *v)
{
	atomic_fetch_add_explicit(&v->dropped, 1, memory_order_relaxed);
}

static void kick(struct vsock *v)
{
	device_thread_kick(&v->thread);
}

/* --- Connection table --------------------------------------------------- */

static uint64_t conn_tag(const struct vsock *v, const struct vsock_conn *c)
{
	return (uint64_t)c->generation << 32 |
	       (uint64_t)(TAG_CONN_BASE + (c - v->conns));
}

/* Connections the guest can address: past the handshake. */
static bool conn_addressable(const struct vsock_conn *c)
{
	return c->state != VSOCK_CONN_FREE && c->state != VSOCK_CONN_HANDSHAKE;
}

/* Whether the guest has heard of @c, so that dropping it needs an RST. */
static bool guest_knows(const struct vsock_conn *c)
{
	return conn_addressable(c) && !(c->state == VSOCK_CONN_CONNECTING &&
					(c->pending & VSOCK_PENDING_REQUEST));
}

static struct vsock_conn *find_conn(struct vsock *v, uint32_t local_port,
				    uint32_t peer_port)
{
	for (int i = 0; i < VSOCK_MAX_CONNECTIONS; i++) {
		struct vsock_conn *c = &v->conns[i];

		if (conn_addressable(c) && c->local_port == local_port &&
		    c->peer_port == peer_port)
			return c;
	}
	return NULL;
}

static struct vsock_conn *free_conn(struct vsock *v)
{
	for (int i = 0; i < VSOCK_MAX_CONNECTIONS; i++)
		if (v->conns[i].state == VSOCK_CONN_FREE)
			return &v->conns[i];
	return NULL;
}

static bool local_port_in_use(const struct vsock *v, uint32_t port)
{
	for (int i = 0; i < VSOCK_MAX_CONNECTIONS; i++)
		if (conn_addressable(&v->conns[i]) &&
		    v->conns[i].local_port == port)
			return true;
	return false;
}

/* Ends after at most VSOCK_MAX_CONNECTIONS + 1 tries: that many ports at
 * most are taken. */
static uint32_t alloc_local_port(struct vsock *v)
{
	for (;;) {
		uint32_t port = v->state.next_local_port++;

		if (v->state.next_local_port == VSOCK_PORT_ANY)
			v->state.next_local_port = VSOCK_LOCAL_PORT_FIRST;
		if (!local_port_in_use(v, port))
			return port;
	}
}

static void queue_rst(struct vsock *v, uint64_t src_cid, uint32_t src_port,
		      uint32_t dst_port)
{
	if (v->rst_count == VSOCK_RST_BACKLOG)
		return; /* the guest's connect or send times out instead */
	v->rst_backlog[(v->rst_head + v->rst_count) % VSOCK_RST_BACKLOG] =
		(struct vsock_rst){
			.src_cid = src_cid,
			.src_port = src_port,
			.dst_port = dst_port,
		};
	v->rst_count++;
}

/* Answers a guest packet that has no connection; never an RST to an RST. */
static void refuse(struct vsock *v, const struct virtio_vsock_hdr *hdr)
{
	if (hdr->op != VIRTIO_VSOCK_OP_RST)
		queue_rst(v, hdr->dst_cid, hdr->dst_port, hdr->src_port);
}

static void kill_conn(struct vsock *v, struct vsock_conn *c, bool rst)
{
	if (rst && guest_knows(c))
		queue_rst(v, VSOCK_HOST_CID, c->local_port, c->peer_port);
	vsock_conn_close(c);
}

static void set_deadline(struct vsock_conn *c, uint64_t timeout_ms)
{
	c->deadline_ms = now_ms() + timeout_ms;
}

/* Keeps epoll interest in line with what the connection can use now. */
static void watch_conn(struct vsock *v, struct vsock_conn *c)
{
	struct epoll_event ev = { .data.u64 = conn_tag(v, c) };
	int op = c->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;

	if (c->host_hup) {
		/* epoll would report the hangup forever; pump_conn drains
		 * what is left as the guest makes room for it. */
		if (c->registered)
			epoll_ctl(v->thread.epoll_fd, EPOLL_CTL_DEL, c->fd,
				  NULL);
		c->registered = false;
		return;
	}
	if (c->state == VSOCK_CONN_HANDSHAKE)
		ev.events = EPOLLIN;
	if (vsock_conn_wants_read(c))
		ev.events |= EPOLLIN;
	if (c->to_host.used)
		ev.events |= EPOLLOUT;
	/* CONNECTING keeps an empty mask: hangups are still reported. */
	if (c->registered && c->events == ev.events)
		return;
	if (epoll_ctl(v->thread.epoll_fd, op, c->fd, &ev) < 0) {
		log_limited(LOG_LEVEL_WARNING,
			    "vsock %s: epoll_ctl for host port %u: %s",
			    v->uds_path, c->local_port, strerror(errno));
		kill_conn(v, c, true);
		return;
	}
	c->registered = true;
	c->events = ev.events;
}

/*
 * Moves bytes between the rings and the socket, carries out the guest's
 * shutdowns once its data is out, and re-arms epoll.  May free @c.
 */
static void pump_conn(struct vsock *v, struct vsock_conn *c)
{
	if (c->state == VSOCK_CONN_ESTABLISHED ||
	    c->state == VSOCK_CONN_CLOSING) {
		if (vsock_conn_write_host(c) < 0 ||
		    vsock_conn_read_host(c) < 0) {
			kill_conn(v, c, true);
			return;
		}
		if (!c->to_host.used &&
		    (c->peer_shutdown & VIRTIO_VSOCK_SHUTDOWN_SEND)) {
			/* Full shutdown from the guest: it waits for our RST.
			 */
			if (c->peer_shutdown == VIRTIO_VSOCK_SHUTDOWN_BOTH) {
				kill_conn(v, c, true);
				return;
			}
			if (!c->host_wr_shut)
				shutdown(c->fd, SHUT_WR);
			c->host_wr_shut = true;
		}
		if (vsock_conn_needs_credit_update(c))
			c->pending |= VSOCK_PENDING_CREDIT_UPDATE;
	}
	watch_conn(v, c);
}

/* --- Host side ---------------------------------------------------------- */

static void accept_clients(struct vsock *v)
{
	for (;;) {
		struct vsock_conn *c;
		int fd = accept4(v->listen_fd, NULL, NULL,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_limited(LOG_LEVEL_WARNING,
					    "vsock %s: accept: %s", v->uds_path,
					    strerror(errno));
			return;
		}
		c = free_conn(v);
		if (!c) {
			close(fd); /* at the connection limit */
			continue;
		}
		if (vsock_conn_open(c, fd, VSOCK_CONN_HANDSHAKE))
			continue;
		set_deadline(c, VSOCK_HANDSHAKE_TIMEOUT_MS);
		watch_conn(v, c);
	}
}

/*
 * Reads the handshake a byte at a time: whatever the client sends after the
 * newline is stream data for the guest and must stay in the socket.
 */
static void read_handshake(struct vsock *v, struct vsock_conn *c)
{
	uint32_t port;
	ssize_t n;
	char ch;

	for (;;) {
		n = read(c->fd, &ch, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		if (n <= 0) {
			kill_conn(v, c, false);
			return;
		}
		if (ch == '\n')
			break;
		if (c->line_len == sizeof(c->line))
			break;
		c->line[c->line_len++] = ch;
	}
	if (ch != '\n' || vsock_parse_connect(c->line, c->line_len, &port)) {
		log_limited(LOG_LEVEL_WARNING,
			    "vsock %s: host client sent no \"CONNECT <port>\" "
			    "line in %u bytes; closing it",
			    v->uds_path, c->line_len);
		kill_conn(v, c, false);
		return;
	}
	c->peer_port = port;
	c->local_port = alloc_local_port(v);
	c->state = VSOCK_CONN_CONNECTING;
	c->pending = VSOCK_PENDING_REQUEST;
	set_deadline(c, v->request_timeout_ms);
	watch_conn(v, c);
}

static void conn_event(struct vsock *v, struct vsock_conn *c, uint32_t events)
{
	if (c->state == VSOCK_CONN_HANDSHAKE) {
		read_handshake(v, c);
		return;
	}
	if ((events & EPOLLERR) ||
	    ((events & EPOLLHUP) && c->state == VSOCK_CONN_CONNECTING)) {
		kill_conn(v, c, true);
		return;
	}
	if (events & EPOLLHUP)
		c->host_hup = true;
	pump_conn(v, c);
}

static void dispatch(struct vsock *v, const struct epoll_event *ev)
{
	uint64_t tag = ev->data.u64;
	uint32_t slot = (uint32_t)tag - TAG_CONN_BASE;
	struct vsock_conn *c;

	if (tag == TAG_LISTEN) {
		accept_clients(v);
		return;
	}
	if (slot >= VSOCK_MAX_CONNECTIONS)
		return;
	c = &v->conns[slot];
	/* An earlier event in this batch may have freed or reused the slot. */
	if (c->state == VSOCK_CONN_FREE || c->generation != tag >> 32)
		return;
	conn_event(v, c, ev->events);
}

/* --- TX: packets from the guest ----------------------------------------- */

/* A guest REQUEST to host port P: connect to "<uds_path>_<P>". */
static void connect_host(struct vsock *v, const struct virtio_vsock_hdr *hdr)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct vsock_conn *c = free_conn(v);
	int len, fd;

	len = snprintf(addr.sun_path, sizeof(addr.sun_path), "%s_%u",
		       v->uds_path, hdr->dst_port);
	if (!c || len < 0 || (size_t)len >= sizeof(addr.sun_path)) {
		refuse(v, hdr);
		return;
	}
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		log_limited(LOG_LEVEL_WARNING,
			    "vsock %s: socket for host port %u: %s",
			    v->uds_path, hdr->dst_port, strerror(errno));
		refuse(v, hdr);
		return;
	}
	/* A Unix connect completes at once; nobody listening is normal. */
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(fd);
		refuse(v, hdr);
		return;
	}
	if (vsock_conn_open(c, fd, VSOCK_CONN_ESTABLISHED)) {
		refuse(v, hdr);
		return;
	}
	c->local_port = hdr->dst_port;
	c->peer_port = hdr->src_port;
	c->peer_buf_alloc = hdr->buf_alloc;
	c->peer_fwd_cnt = hdr->fwd_cnt;
	c->pending = VSOCK_PENDING_RESPONSE;
	pump_conn(v, c);
}

/* The guest accepted a host client's connection. */
static void establish(struct vsock *v, struct vsock_conn *c)
{
	char reply[24];
	int len = snprintf(reply, sizeof(reply), "OK %u\n", c->local_port);

	/* The client has not been sent anything yet, so its socket buffer
	 * has room for this line. */
	if (send(c->fd, reply, (size_t)len, MSG_NOSIGNAL) != len) {
		kill_conn(v, c, true);
		return;
	}
	c->state = VSOCK_CONN_ESTABLISHED;
	c->deadline_ms = 0;
}

static void peer_shutdown(struct vsock_conn *c, uint32_t flags)
{
	flags &= VIRTIO_VSOCK_SHUTDOWN_BOTH;
	c->peer_shutdown |= flags;
	if (flags & VIRTIO_VSOCK_SHUTDOWN_RCV) {
		vsock_ring_clear(&c->to_guest);
		shutdown(c->fd, SHUT_RD);
	}
	if (c->peer_shutdown == VIRTIO_VSOCK_SHUTDOWN_BOTH &&
	    c->state != VSOCK_CONN_CLOSING) {
		/* pump_conn answers with RST once our buffer is flushed;
		 * the deadline covers a host that never reads it. */
		c->state = VSOCK_CONN_CLOSING;
		set_deadline(c, VSOCK_CLOSE_TIMEOUT_MS);
	}
}

/* Returns whether @c survived; a protocol violation resets it. */
static bool conn_packet(struct vsock *v, struct vsock_conn *c,
			const struct virtio_vsock_hdr *hdr,
			struct iov_cursor *payload)
{
	struct iovec space[2];
	struct iov_cursor dst;

	c->peer_buf_alloc = hdr->buf_alloc;
	c->peer_fwd_cnt = hdr->fwd_cnt;
	switch (hdr->op) {
	case VIRTIO_VSOCK_OP_RST:
		kill_conn(v, c, false);
		return false;
	case VIRTIO_VSOCK_OP_RESPONSE:
		if (c->state != VSOCK_CONN_CONNECTING ||
		    (c->pending & VSOCK_PENDING_REQUEST))
			break;
		establish(v, c);
		return c->state != VSOCK_CONN_FREE;
	case VIRTIO_VSOCK_OP_RW:
		if (c->state == VSOCK_CONN_CLOSING)
			return true; /* in flight when we shut down */
		if (c->state != VSOCK_CONN_ESTABLISHED ||
		    (c->peer_shutdown & VIRTIO_VSOCK_SHUTDOWN_SEND) ||
		    hdr->len > vsock_ring_space(&c->to_host))
			break; /* the last: the guest ignored our credit */
		cursor_init(&dst, space,
			    vsock_ring_space_iov(&c->to_host, space), 0);
		vsock_ring_produce(&c->to_host,
				   (uint32_t)iov_copy(&dst, payload, hdr->len));
		return true;
	case VIRTIO_VSOCK_OP_CREDIT_UPDATE:
		return true;
	case VIRTIO_VSOCK_OP_CREDIT_REQUEST:
		c->pending |= VSOCK_PENDING_CREDIT_UPDATE;
		return true;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		if (c->state != VSOCK_CONN_ESTABLISHED &&
		    c->state != VSOCK_CONN_CLOSING)
			break;
		peer_shutdown(c, hdr->flags);
		return true;
	default: /* REQUEST on a live connection, unknown ops */
		break;
	}
	kill_conn(v, c, true);
	return false;
}

static void tx_chain(struct vsock *v, const struct virtq_chain *chain)
{
	struct iovec iov[VIRTQ_MAX_SIZE];
	struct iovec hdr_iov;
	struct iov_cursor src, dst;
	struct virtio_vsock_hdr hdr;
	struct vsock_conn *c = NULL;
	uint64_t total;
	int cnt = virtq_chain_iov(chain, false, iov, &total);

	if (total < HDR_SIZE) {
		count_dropped(v); /* no addresses to answer */
		return;
	}
	hdr_iov = (struct iovec){ .iov_base = &hdr, .iov_len = HDR_SIZE };
	cursor_init(&dst, &hdr_iov, 1, 0);
	cursor_init(&src, iov, cnt, 0);
	iov_copy(&dst, &src, HDR_SIZE);

	if (hdr.src_cid != v->state.guest_cid) {
		count_dropped(v); /* answering would go to a forged address */
		return;
	}
	if (hdr.dst_cid == VSOCK_HOST_CID)
		c = find_conn(v, hdr.dst_port, hdr.src_port);
	if (hdr.type != VIRTIO_VSOCK_TYPE_STREAM ||
	    hdr.len > total - HDR_SIZE) {
		count_dropped(v);
		if (c)
			kill_conn(v, c, true);
		else
			refuse(v, &hdr);
		return;
	}
	if (!c) {
		if (hdr.op == VIRTIO_VSOCK_OP_REQUEST &&
		    hdr.dst_cid == VSOCK_HOST_CID)
			connect_host(v, &hdr);
		else
			refuse(v, &hdr);
		return;
	}
	if (conn_packet(v, c, &hdr, &src))
		pump_conn(v, c);
}

static void process_tx(struct vsock *v)
{
	struct virtq_chain chain;
	bool used = false;
	int n;

	for (n = 0; n < VSOCK_QUEUE_SIZE; n++) {
		if (virtio_mmio_pop(&v->transport, VSOCK_QUEUE_TX, &chain) <= 0)
			break;
		tx_chain(v, &chain);
		virtio_mmio_push(&v->transport, VSOCK_QUEUE_TX, chain.head, 0);
		used = true;
	}
	if (n == VSOCK_QUEUE_SIZE)
		v->more_work = true;
	if (used)
		virtio_mmio_signal_used(&v->transport, VSOCK_QUEUE_TX);
}

/* --- RX: packets to the guest ------------------------------------------- */

/* What @c owes the guest next, or OP_INVALID; @flags for a SHUTDOWN. */
static uint16_t conn_next_op(const struct vsock_conn *c, uint32_t *flags)
{
	uint32_t due = 0;

	if (c->state == VSOCK_CONN_CONNECTING)
		return (c->pending & VSOCK_PENDING_REQUEST)
			       ? VIRTIO_VSOCK_OP_REQUEST
			       : VIRTIO_VSOCK_OP_INVALID;
	if (c->state != VSOCK_CONN_ESTABLISHED &&
	    c->state != VSOCK_CONN_CLOSING)
		return VIRTIO_VSOCK_OP_INVALID;
	if (c->pending & VSOCK_PENDING_RESPONSE)
		return VIRTIO_VSOCK_OP_RESPONSE;
	if (c->to_guest.used && vsock_conn_peer_credit(c))
		return VIRTIO_VSOCK_OP_RW;
	if (c->host_eof && !c->to_guest.used)
		due |= VIRTIO_VSOCK_SHUTDOWN_SEND;
	if (c->host_hup)
		due |= VIRTIO_VSOCK_SHUTDOWN_RCV;
	if (due & ~c->local_shutdown) {
		*flags = due | c->local_shutdown;
		return VIRTIO_VSOCK_OP_SHUTDOWN;
	}
	if (c->pending & VSOCK_PENDING_CREDIT_UPDATE)
		return VIRTIO_VSOCK_OP_CREDIT_UPDATE;
	return VIRTIO_VSOCK_OP_INVALID;
}

/*
 * Picks the next packet round robin: slot VSOCK_MAX_CONNECTIONS stands for
 * the RST backlog.  Returns false if nothing is owed.
 */
static bool pick_packet(struct vsock *v, uint32_t *slot, uint16_t *op,
			uint32_t *flags)
{
	for (uint32_t i = 0; i <= VSOCK_MAX_CONNECTIONS; i++) {
		uint32_t s = (v->rx_cursor + i) % (VSOCK_MAX_CONNECTIONS + 1);

		*flags = 0;
		if (s == VSOCK_MAX_CONNECTIONS)
			*op = v->rst_count ? VIRTIO_VSOCK_OP_RST
					   : VIRTIO_VSOCK_OP_INVALID;
		else
			*op = conn_next_op(&v->conns[s], flags);
		if (*op != VIRTIO_VSOCK_OP_INVALID) {
			*slot = s;
			return true;
		}
	}
	return false;
}

/* Fills in @hdr and the payload for a packet of @c; returns payload bytes. */
static uint32_t conn_packet_out(struct vsock_conn *c, uint16_t op,
				uint32_t flags, struct virtio_vsock_hdr *hdr,
				struct iov_cursor *payload, uint64_t room)
{
	struct iovec data[2];
	struct iov_cursor src;
	uint32_t len = 0;

	hdr->src_cid = VSOCK_HOST_CID;
	hdr->src_port = c->local_port;
	hdr->dst_port = c->peer_port;
	hdr->flags = flags;
	hdr->buf_alloc = VSOCK_CONN_BUF_SIZE;
	hdr->fwd_cnt = c->fwd_cnt;
	c->last_fwd_cnt_sent = c->fwd_cnt;
	c->pending &= ~VSOCK_PENDING_CREDIT_UPDATE;

	switch (op) {
	case VIRTIO_VSOCK_OP_REQUEST:
		c->pending &= ~VSOCK_PENDING_REQUEST;
		break;
	case VIRTIO_VSOCK_OP_RESPONSE:
		c->pending &= ~VSOCK_PENDING_RESPONSE;
		break;
	case VIRTIO_VSOCK_OP_RW:
		len = (uint32_t)min_u64(
			min_u64(c->to_guest.used, vsock_conn_peer_credit(c)),
			min_u64(room, VSOCK_MAX_PKT_PAYLOAD));
		cursor_init(&src, data, vsock_ring_data_iov(&c->to_guest, data),
			    0);
		iov_copy(payload, &src, len);
		vsock_ring_consume(&c->to_guest, len);
		c->tx_cnt += len;
		break;
	case VIRTIO_VSOCK_OP_SHUTDOWN:
		c->local_shutdown = flags;
		if (flags == VIRTIO_VSOCK_SHUTDOWN_BOTH &&
		    c->state != VSOCK_CONN_CLOSING) {
			c->state = VSOCK_CONN_CLOSING;
			set_deadline(c, VSOCK_CLOSE_TIMEOUT_MS);
		}
		break;
	}
	return len;
}

/* Writes the packet into @chain; returns the bytes written, 0 if the
 * buffer cannot hold it (and the packet stays owed). */
static uint32_t write_packet(struct vsock *v, const struct virtq_chain *chain,
			     uint32_t slot, uint16_t op, uint32_t flags)
{
	struct iovec iov[VIRTQ_MAX_SIZE];
	struct iovec hdr_iov;
	struct iov_cursor dst, src;
	struct virtio_vsock_hdr hdr = {
		.dst_cid = v->state.guest_cid,
		.type = VIRTIO_VSOCK_TYPE_STREAM,
		.op = op,
	};
	uint64_t room;
	int cnt = virtq_chain_iov(chain, true, iov, &room);
	struct vsock_rst *rst;

	if (room < HDR_SIZE || (op == VIRTIO_VSOCK_OP_RW && room == HDR_SIZE)) {
		count_dropped(v);
		return 0;
	}
	if (slot == VSOCK_MAX_CONNECTIONS) {
		rst = &v->rst_backlog[v->rst_head];
		hdr.src_cid = rst->src_cid;
		hdr.src_port = rst->src_port;
		hdr.dst_port = rst->dst_port;
		v->rst_head = (v->rst_head + 1) % VSOCK_RST_BACKLOG;
		v->rst_count--;
	} else {
		cursor_init(&dst, iov, cnt, HDR_SIZE);
		hdr.len = conn_packet_out(&v->conns[slot], op, flags, &hdr,
					  &dst, room - HDR_SIZE);
	}
	hdr_iov = (struct iovec){ .iov_base = &hdr, .iov_len = HDR_SIZE };
	cursor_init(&dst, iov, cnt, 0);
	cursor_init(&src, &hdr_iov, 1, 0);
	iov_copy(&dst, &src, HDR_SIZE);
	return HDR_SIZE + hdr.len;
}

static void fill_rx(struct vsock *v)
{
	struct virtq_chain chain;
	bool used = false;
	uint32_t slot, flags, len;
	uint16_t op;
	int n;

	for (n = 0; n < VSOCK_QUEUE_SIZE; n++) {
		if (!pick_packet(v, &slot, &op, &flags) ||
		    virtio_mmio_pop(&v->transport, VSOCK_QUEUE_RX, &chain) <= 0)
			break;
		len = write_packet(v, &chain, slot, op, flags);
		virtio_mmio_push(&v->transport, VSOCK_QUEUE_RX, chain.head,
				 len);
		used = true;
		if (!len)
			continue;
		v->rx_cursor = (slot + 1) % (VSOCK_MAX_CONNECTIONS + 1);
		/* Staging space was freed: read more of the host's bytes. */
		if (op == VIRTIO_VSOCK_OP_RW)
			pump_conn(v, &v->conns[slot]);
	}
	if (n == VSOCK_QUEUE_SIZE)
		v->more_work = true;
	if (used)
		virtio_mmio_signal_used(&v->transport, VSOCK_QUEUE_RX);
}

/* --- Device thread ------------------------------------------------------ */

static void expire_conns(struct vsock *v)
{
	uint64_t now = now_ms();

	for (int i = 0; i < VSOCK_MAX_CONNECTIONS; i++) {
		struct vsock_conn *c = &v->conns[i];

		if (c->state != VSOCK_CONN_FREE && c->deadline_ms &&
		    now >= c->deadline_ms)
			kill_conn(v, c, true);
	}
}

/* How often to look for the driver's acknowledgement of a reset event. */
#define RESET_EVENT_POLL_MS 2

static int next_timeout(void *device)
{
	const struct vsock *v = device;
	uint64_t now = now_ms();
	uint64_t nearest = UINT64_MAX;

	if (v->more_work)
		return 0;
	if (v->reset_event == RESET_EVENT_SENT)
		return RESET_EVENT_POLL_MS;
	for (int i = 0; i < VSOCK_MAX_CONNECTIONS; i++) {
		const struct vsock_conn *c = &v->conns[i];

		if (c->state != VSOCK_CONN_FREE && c->deadline_ms)
			nearest = min_u64(nearest, c->deadline_ms);
	}
	if (nearest == UINT64_MAX)
		return -1;
	return nearest <= now ? 0 : (int)min_u64(nearest - now, 60000);
}

/*
 * The driver reset the device: connections the guest knew are gone with its
 * queues, and a TRANSPORT_RESET still owed would tell the new driver nothing.
 * Host clients still in the handshake, or whose REQUEST has not gone out,
 * simply wait for the new driver (Linux resets the device while probing it,
 * so an early client lands here at every boot).
 */
static void reset_conns(struct vsock *v)
{
	for (int i = 0; i < VSOCK_MAX_CONNECTIONS; i++)
		if (guest_knows(&v->conns[i]))
			vsock_conn_close(&v->conns[i]);
	v->rst_count = 0;
	v->reset_event = RESET_EVENT_NONE;
}

/*
 * Sends the TRANSPORT_RESET a restore left due, if any, and returns whether
 * the guest is done with it, so RX may carry new connections.
 *
 * Done means handled, not just delivered: Linux handles each virtqueue's
 * buffers in a work item of its own, RX first when one interrupt covers
 * both, so a REQUEST that lands together with the event would be accepted
 * and then reset with the old connections, and nobody would tell the host.
 * The driver re-posts the event buffer once it has handled the event, which
 * moves the EVENT queue's avail index: that is the acknowledgement.  Until
 * then the thread polls (next_timeout), since the driver need not notify.
 * Without an event buffer (or with the device not live) the event stays due.
 */
static bool send_reset_event(struct vsock *v)
{
	struct virtio_vsock_event event = {
		.id = VIRTIO_VSOCK_EVENT_TRANSPORT_RESET,
	};
	struct iovec event_iov = { .iov_base = &event,
				   .iov_len = sizeof(event) };
	struct iovec iov[VIRTQ_MAX_SIZE];
	struct iov_cursor dst, src;
	struct virtq_chain chain;
	uint16_t avail;
	uint64_t room;
	size_t len;

	switch (v->reset_event) {
	case RESET_EVENT_NONE:
		return true;
	case RESET_EVENT_SENT:
		if (virtio_mmio_avail_idx(&v->transport, VSOCK_QUEUE_EVENT,
					  &avail) == 0 &&
		    avail == v->reset_event_avail)
			return false;
		v->reset_event = RESET_EVENT_NONE;
		return true;
	case RESET_EVENT_DUE:
		break;
	}
	if (virtio_mmio_avail_idx(&v->transport, VSOCK_QUEUE_EVENT, &avail) <
		    0 ||
	    virtio_mmio_pop(&v->transport, VSOCK_QUEUE_EVENT, &chain) <= 0)
		return false;
	cursor_init(&dst, iov, virtq_chain_iov(&chain, true, iov, &room), 0);
	cursor_init(&src, &event_iov, 1, 0);
	/* A buffer too small gets what fits; Linux ignores such an event. */
	len = iov_copy(&dst, &src, sizeof(event));
	virtio_mmio_push(&v->transport, VSOCK_QUEUE_EVENT, chain.head,
			 (uint32_t)len);
	virtio_mmio_signal_used(&v->transport, VSOCK_QUEUE_EVENT);
	v->reset_event = RESET_EVENT_SENT;
	v->reset_event_avail = avail;
	return false;
}

/* One pass over what epoll reported (@n @events), the queues and the
 * time-outs. */
static void work(void *device, const struct epoll_event *events, int n)
{
	struct vsock *v = device;

	v->more_work = false;
	for (int i = 0; i < n; i++)
		dispatch(v, &events[i]);
	if (atomic_exchange(&v->reset_requested, false))
		reset_conns(v);
	process_tx(v);
	expire_conns(v);
	/* The guest resets every connection when it gets the event,
	 * so packets of new ones must not overtake it. */
	if (send_reset_event(v))
		fill_rx(v);
}

int vsock_run_once(struct vsock *v, int timeout_ms)
{
	return device_thread_run_once(&v->thread, timeout_ms);
}

/* --- Transport callbacks (vCPU threads) --------------------------------- */

static void vsock_config_access(void *backend, uint64_t offset, uint8_t *data,
				uint32_t len, bool is_write)
{
	struct vsock *v = backend;
	uint64_t cid = v->state.guest_cid;

	if (is_write)
		return; /* guest_cid is read-only */
	memset(data, 0, len);
	if (offset < sizeof(cid))
		memcpy(data, (uint8_t *)&cid + offset,
		       min_u64(len, sizeof(cid) - offset));
}

static void vsock_queue_notify(void *backend, uint16_t queue)
{
	(void)queue; /* each pass looks at both RX and TX */
	kick(backend);
}

static void vsock_activate(void *backend, uint64_t features)
{
	(void)features; /* stream is the only socket type offered */
	kick(backend);
}

static void vsock_reset(void *backend)
{
	struct vsock *v = backend;

	atomic_store(&v->reset_requested, true);
	kick(v);
}

static const struct virtio_backend_ops vsock_ops = {
	.device_id = VIRTIO_ID_VSOCK,
	.features = 1ULL << VIRTIO_VSOCK_F_STREAM,
	.num_queues = VSOCK_NUM_QUEUES,
	.queue_size_max = VSOCK_QUEUE_SIZE,
	.config_access = vsock_config_access,
	.queue_notify = vsock_queue_notify,
	.activate = vsock_activate,
	.reset = vsock_reset,
};

/* --- Setup -------------------------------------------------------------- */

/* 0-2 are reserved, and Linux CIDs are 32 bits with -1 for "any". */
static bool guest_cid_valid(uint64_t cid)
{
	return cid > VSOCK_HOST_CID && cid < VSOCK_CID_ANY;
}

/*
 * Binds uds_path, or adopts @listen_fd already listening there (a jailed
 * VMM's: then uds_path is someone else's to remove, and owns_path false).
 */
static int open_listener(struct vsock *v, int listen_fd)
{
	if (listen_fd >= 0) {
		if (fcntl(listen_fd, F_SETFL, O_NONBLOCK) < 0) {
			log_error("vsock %s: fcntl: %s", v->uds_path,
				  strerror(errno));
			return -1;
		}
		v->listen_fd = listen_fd;
		return 0;
	}
	v->listen_fd = unix_listen(v->uds_path, SOMAXCONN, SOCK_NONBLOCK);
	if (v->listen_fd < 0) {
		log_error("vsock %s: %s", v->uds_path, strerror(-v->listen_fd));
		v->listen_fd = -1;
		return -1;
	}
	v->owns_path = true;
	return 0;
}

static void close_host_side(struct vsock *v)
{
	for (int i = 0; i < VSOCK_MAX_CONNECTIONS; i++)
		if (v->conns[i].state != VSOCK_CONN_FREE)
			vsock_conn_close(&v->conns[i]);
	if (v->listen_fd >= 0) {
		close(v->listen_fd);
		if (v->owns_path)
			unlink(v->uds_path);
	}
	v->listen_fd = -1;
}

int vsock_init(struct vsock *v, uint64_t guest_cid, const char *uds_path,
	       int listen_fd, const struct guest_memory *mem,
	       struct irq_line irq)
{
	memset(v, 0, sizeof(*v));
	v->listen_fd = -1;
	for (int i = 0; i < VSOCK_MAX_CONNECTIONS; i++)
		v->conns[i].fd = -1;
	if (!guest_cid_valid(guest_cid)) {
		log_error("vsock: guest CID %llu is not in 3..%u",
			  (unsigned long long)guest_cid, VSOCK_CID_ANY - 1);
		return -1;
	}
	/* Leave room for the "_<port>" of guest-initiated connections. */
	if (strlen(uds_path) + sizeof("_4294967295") > sizeof(v->uds_path)) {
		log_error("vsock: socket path %s is longer than %zu", uds_path,
			  sizeof(v->uds_path) - sizeof("_4294967295"));
		return -1;
	}
	strcpy(v->uds_path, uds_path);
	v->state.guest_cid = guest_cid;
	v->state.next_local_port = VSOCK_LOCAL_PORT_FIRST;
	v->request_timeout_ms = VSOCK_REQUEST_TIMEOUT_MS;
	atomic_init(&v->reset_requested, false);
	atomic_init(&v->dropped, 0);

	snprintf(v->thread_name, sizeof(v->thread_name), "vsock %s", uds_path);
	if (open_listener(v, listen_fd) < 0)
		goto fail;
	if (device_thread_init(&v->thread, v->thread_name, VMM_THREAD_VSOCK, v,
			       work, next_timeout) < 0)
		goto fail;
	/* The listener is edge-triggered: accept_clients() runs until EAGAIN,
	 * and if accept fails for want of fds the pending client waits for
	 * the next one instead of spinning this thread. */
	if (device_thread_watch(&v->thread, EPOLL_CTL_ADD, v->listen_fd,
				EPOLLIN | EPOLLET, TAG_LISTEN) < 0 ||
	    virtio_mmio_init(&v->transport, "vsock", &vsock_ops, v, mem, irq)) {
		device_thread_destroy(&v->thread);
		goto fail;
	}
	return 0;
fail:
	close_host_side(v);
	return -1;
}

int vsock_start(struct vsock *v)
{
	return device_thread_start(&v->thread);
}

void vsock_stop(struct vsock *v)
{
	device_thread_destroy(&v->thread);
	close_host_side(v);
	virtio_mmio_destroy(&v->transport);
}

void vsock_pause(struct vsock *v)
{
	device_thread_pause(&v->thread);
}

void vsock_resume(struct vsock *v)
{
	device_thread_resume(&v->thread);
}

void vsock_save(struct vsock *v, struct state_writer *w)
{
	virtio_mmio_save(&v->transport, 0, w);
	state_put(w, STATE_DEV_VSOCK, 0, &v->state, sizeof(v->state));
}

int vsock_restore(struct vsock *v, const struct state_reader *r)
{
	struct vsock_state s;

	if (state_get(r, STATE_DEV_VSOCK, 0, &s, sizeof(s)))
		return -1;
	if (s.next_local_port < VSOCK_LOCAL_PORT_FIRST ||
	    s.next_local_port == VSOCK_PORT_ANY) {
		log_error(
			"snapshot state: vsock next_local_port %u is not a host "
			"port thaw hands out",
			s.next_local_port);
		return -1;
	}
	if (!guest_cid_valid(s.guest_cid)) {
		log_error("snapshot state: vsock guest_cid %llu is not in "
			  "3..%u",
			  (unsigned long long)s.guest_cid, VSOCK_CID_ANY - 1);
		return -1;
	}
	if (virtio_mmio_restore(&v->transport, 0, r))
		return -1;
	v->state = s;
	/* A live driver had connections to the host that took the snapshot;
	 * the transport's state alone makes the device live again. */
	v->reset_event = v->transport.state.status & VIRTIO_STATUS_DRIVER_OK
				 ? RESET_EVENT_DUE
				 : RESET_EVENT_NONE;
	/* The guest's notifications went to the old device: look at the
	 * queues once the thread starts. */
	kick(v);
	return 0;
}
