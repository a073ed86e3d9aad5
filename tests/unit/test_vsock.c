// SPDX-License-Identifier: Apache-2.0
/*
 * test_vsock.c - the virtio-vsock device, with the test as both ends: it
 * drives the device as a Linux guest driver would (registers through
 * virtio_mmio_io, rings and packets built in test guest memory) and plays
 * the host clients over the Unix sockets.
 *
 * The device works on its own thread, so every wait polls for the expected
 * effect with a deadline; only the checks that something does NOT happen
 * wait a fixed short time, and most of those are instead proven by a probe
 * packet whose answer must be the next thing the device sends.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "vmm/devices/vsock.h"
#include "tests/unit/state_file.h"
#include "tests/unit/virtio_guest.h"

#define GUEST_MIB MEMORY_MIN_MIB
#define GUEST_CID 3
#define QSZ VIRTIO_GUEST_QSZ
#define HDR ((uint32_t)sizeof(struct virtio_vsock_hdr))
#define RX_PAYLOAD 4096 /* what Linux posts */
#define RX_BUF_SIZE (HDR + RX_PAYLOAD)
#define TX_PAYLOAD_MAX (16 * 1024)
#define RX_BUF_GPA(i) (0x100000ULL + (uint64_t)(i)*0x2000)
#define TX_BUF_GPA(i) (0x200000ULL + (uint64_t)(i)*0x5000)
#define EVENT_BUF_GPA(i) (0x40000ULL + (uint64_t)(i)*0x10)
#define WAIT_MS 3000
/* The device's REQUEST time-out, shortened so a test can see it pass. */
#define REQUEST_TIMEOUT_MS 2000
#define QUIET_MS 100 /* how long "nothing happens" is watched */
#define GUEST_PORT 1024
#define BUF_ALLOC (256 * 1024)

struct rx_pkt {
	struct virtio_vsock_hdr hdr;
	uint32_t used_len;
	uint8_t data[RX_PAYLOAD];
};

static struct guest_memory mem;
static uint8_t *guest;
static struct vsock dev;
static char dir[64];
static char path[128];
static uint16_t rx_last_used;
static uint16_t tx_next;
static uint32_t guest_buf_alloc = BUF_ALLOC;
static uint32_t guest_fwd_cnt;

static uint64_t now_ms(void)
{
	return monotonic_ns() / NS_PER_MS;
}

static void pause_briefly(void)
{
	struct timespec ts = { .tv_nsec = 50 * 1000 };

	nanosleep(&ts, NULL);
}

/* --- Guest driver ------------------------------------------------------- */

static void make_available(int q, uint16_t head)
{
	ring_add(q, head);
	reg_write(VIRTIO_MMIO_QUEUE_NOTIFY, q);
}

static void post_rx(uint16_t i)
{
	*desc(VSOCK_QUEUE_RX, i) = (struct virtq_desc){
		.addr = RX_BUF_GPA(i),
		.len = RX_BUF_SIZE,
		.flags = VIRTQ_DESC_F_WRITE,
	};
	make_available(VSOCK_QUEUE_RX, i);
}

/* Resets the device and sets it up again with empty queues. */
static void setup_queues(void)
{
	rx_last_used = 0;
	tx_next = 0;
	virtio_guest_bring_up((1ULL << VIRTIO_F_VERSION_1) |
				      (1ULL << VIRTIO_F_EVENT_IDX) |
				      (1ULL << VIRTIO_VSOCK_F_STREAM),
			      VSOCK_QUEUE_SIZE);
}

/* A buffer for one struct virtio_vsock_event, as Linux posts them. */
static void post_event(uint16_t i)
{
	memset(guest + EVENT_BUF_GPA(i), 0xff,
	       sizeof(struct virtio_vsock_event));
	*desc(VSOCK_QUEUE_EVENT, i) = (struct virtq_desc){
		.addr = EVENT_BUF_GPA(i),
		.len = sizeof(struct virtio_vsock_event),
		.flags = VIRTQ_DESC_F_WRITE,
	};
	make_available(VSOCK_QUEUE_EVENT, i);
}

static void bring_up(void)
{
	setup_queues();
	for (uint16_t i = 0; i < QSZ; i++)
		post_rx(i);
}

/* The next RX packet within @timeout_ms, its buffer handed back. */
static bool rx_poll(struct rx_pkt *p, int timeout_ms)
{
	uint64_t deadline = now_ms() + timeout_ms;
	struct virtq_used_elem elem;

	while (used_idx(VSOCK_QUEUE_RX) == rx_last_used) {
		if (now_ms() >= deadline)
			return false;
		pause_briefly();
	}
	elem = used(VSOCK_QUEUE_RX)->ring[rx_last_used % QSZ];
	rx_last_used++;
	cr_assert_lt(elem.id, QSZ);
	cr_assert_geq(elem.len, HDR, "used len %u", elem.len);
	cr_assert_leq(elem.len, RX_BUF_SIZE, "used len %u", elem.len);
	memcpy(&p->hdr, guest + RX_BUF_GPA(elem.id), HDR);
	p->used_len = elem.len;
	memcpy(p->data, guest + RX_BUF_GPA(elem.id) + HDR, elem.len - HDR);
	cr_assert_eq(elem.len, HDR + p->hdr.len, "used len %u, hdr len %u",
		     elem.len, p->hdr.len);
	cr_assert_eq(p->hdr.type, VIRTIO_VSOCK_TYPE_STREAM);
	cr_assert_eq(p->hdr.dst_cid, GUEST_CID);
	post_rx((uint16_t)elem.id);
	return true;
}

static void rx_expect(struct rx_pkt *p, uint16_t op)
{
	cr_assert(rx_poll(p, WAIT_MS), "no packet (wanted op %u)", op);
	cr_assert_eq(p->hdr.op, op, "op %u, wanted %u (ports %u -> %u)",
		     p->hdr.op, op, p->hdr.src_port, p->hdr.dst_port);
}

/* Puts @total raw bytes on TX as one buffer and waits for it to be used. */
static void tx_raw(const void *bytes, uint32_t total)
{
	uint16_t i = tx_next++ % QSZ;
	uint64_t deadline = now_ms() + WAIT_MS;

	cr_assert_leq(total, HDR + TX_PAYLOAD_MAX);
	memcpy(guest + TX_BUF_GPA(i), bytes, total);
	*desc(VSOCK_QUEUE_TX, i) = (struct virtq_desc){
		.addr = TX_BUF_GPA(i),
		.len = total,
	};
	make_available(VSOCK_QUEUE_TX, i);
	while (used_idx(VSOCK_QUEUE_TX) != avail(VSOCK_QUEUE_TX)->idx) {
		cr_assert_lt(now_ms(), deadline, "TX buffer not used");
		pause_briefly();
	}
}

static struct virtio_vsock_hdr pkt(uint16_t op, uint32_t guest_port,
				   uint32_t host_port)
{
	return (struct virtio_vsock_hdr){
		.src_cid = GUEST_CID,
		.dst_cid = VSOCK_HOST_CID,
		.src_port = guest_port,
		.dst_port = host_port,
		.type = VIRTIO_VSOCK_TYPE_STREAM,
		.op = op,
		.buf_alloc = guest_buf_alloc,
		.fwd_cnt = guest_fwd_cnt,
	};
}

static void tx_send(struct virtio_vsock_hdr hdr, const void *data, uint32_t len)
{
	uint8_t buf[HDR + TX_PAYLOAD_MAX];

	cr_assert_leq(len, TX_PAYLOAD_MAX);
	hdr.len = len;
	memcpy(buf, &hdr, HDR);
	if (len)
		memcpy(buf + HDR, data, len);
	tx_raw(buf, HDR + len);
}

static void tx_op(uint16_t op, uint32_t guest_port, uint32_t host_port,
		  uint32_t flags)
{
	struct virtio_vsock_hdr hdr = pkt(op, guest_port, host_port);

	hdr.flags = flags;
	tx_send(hdr, NULL, 0);
}

/*
 * Proves the device sent nothing since the last packet read: a RW for a
 * connection that does not exist must be answered by an RST, and that RST
 * must be the next packet.
 */
static void expect_only_probe_answer(void)
{
	struct rx_pkt p;

	tx_op(VIRTIO_VSOCK_OP_RW, 7777, 7778, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert_eq(p.hdr.src_port, 7778);
	cr_assert_eq(p.hdr.dst_port, 7777);
}

/* --- Host clients ------------------------------------------------------- */

static int unix_connect(const char *where)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	strcpy(addr.sun_path, where);
	cr_assert_eq(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0,
		     "connect %s: %s", where, strerror(errno));
	return fd;
}

static int unix_listen(const char *where)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	strcpy(addr.sun_path, where);
	cr_assert_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	return fd;
}

static void write_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		cr_assert_gt(n, 0, "write: %s", strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

static bool wait_readable(int fd, int timeout_ms)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	return poll(&pfd, 1, timeout_ms) == 1;
}

static void read_exact(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n;

		cr_assert(wait_readable(fd, WAIT_MS), "%zu bytes missing", len);
		n = read(fd, p, len);
		cr_assert_gt(n, 0, "read: %zd (%s)", n, strerror(errno));
		p += n;
		len -= (size_t)n;
	}
}

/* Whether the device closed @fd within the timeout (no data first). */
static bool closed_by_device(int fd)
{
	char c;

	if (!wait_readable(fd, WAIT_MS))
		return false;
	ssize_t n = read(fd, &c, 1);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Like closed_by_device, for a client that has unread data queued. */
static bool drained_and_closed(int fd)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	char buf[4096];
	ssize_t n;

	do {
		if (!wait_readable(fd, WAIT_MS))
			return false;
		n = read(fd, buf, sizeof(buf));
	} while (n > 0 && now_ms() < deadline);
	return n == 0 || (n < 0 && errno == ECONNRESET);
}

static void read_line(int fd, char *line, size_t max)
{
	size_t len = 0;

	for (;;) {
		cr_assert_lt(len, max - 1, "line too long");
		read_exact(fd, &line[len], 1);
		if (line[len] == '\n')
			break;
		len++;
	}
	line[len] = '\0';
}

static int client_handshake(uint32_t guest_port)
{
	int fd = unix_connect(path);
	char line[32];

	snprintf(line, sizeof(line), "CONNECT %u\n", guest_port);
	write_all(fd, line, strlen(line));
	return fd;
}

/* A host-initiated connection, accepted by the guest; returns the client. */
static int open_host_conn(uint32_t guest_port, uint32_t *host_port)
{
	int fd = client_handshake(guest_port);
	struct rx_pkt p;
	char line[32], want[32];

	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	cr_assert_eq(p.hdr.src_cid, VSOCK_HOST_CID);
	cr_assert_eq(p.hdr.dst_port, guest_port);
	cr_assert_geq(p.hdr.src_port, VSOCK_LOCAL_PORT_FIRST);
	cr_assert_eq(p.hdr.buf_alloc, BUF_ALLOC);
	cr_assert_eq(p.hdr.len, 0);
	*host_port = p.hdr.src_port;
	tx_op(VIRTIO_VSOCK_OP_RESPONSE, guest_port, *host_port, 0);
	read_line(fd, line, sizeof(line));
	snprintf(want, sizeof(want), "OK %u", *host_port);
	cr_assert_str_eq(line, want);
	return fd;
}

static void fill_pattern(uint8_t *buf, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)((i + seed) * 2654435761u >> 13);
}

/* --- Fixture ------------------------------------------------------------ */

static void noop_irq(void *ctx, uint32_t gsi, int level)
{
	(void)ctx;
	(void)gsi;
	(void)level;
}

static void make_paths(void)
{
	scratch_dir_make(dir, sizeof(dir), "vsock");
	snprintf(path, sizeof(path), "%s/vsock.sock", dir);
}

static void remove_dir(void)
{
	scratch_dir_remove(dir);
}

static void start_device(void)
{
	struct irq_line irq = { .set_level = noop_irq, .gsi = 5 };

	cr_assert_eq(guest_memory_create(&mem, GUEST_MIB), 0);
	guest = mem.host;
	virtio_guest_attach(vsock_transport(&dev), guest);
	guest_buf_alloc = BUF_ALLOC;
	guest_fwd_cnt = 0;
	cr_assert_eq(vsock_init(&dev, GUEST_CID, path, -1, &mem, irq), 0);
	cr_assert_eq(dev.request_timeout_ms, VSOCK_REQUEST_TIMEOUT_MS);
	dev.request_timeout_ms = REQUEST_TIMEOUT_MS;
	cr_assert_eq(vsock_start(&dev), 0);
}

static void setup(void)
{
	make_paths();
	start_device();
	bring_up();
}

static void teardown(void)
{
	vsock_stop(&dev);
	guest_memory_destroy(&mem);
	remove_dir();
}

TestSuite(vsock, .init = setup, .fini = teardown, .timeout = 30);

/* --- Tests -------------------------------------------------------------- */

Test(vsock, identity_and_config)
{
	uint32_t lo, hi;
	uint8_t byte;

	cr_assert_eq(reg_read(VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_VSOCK);
	reg_write(VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	cr_assert(reg_read(VIRTIO_MMIO_DEVICE_FEATURES) &
		  (1u << VIRTIO_VSOCK_F_STREAM));
	virtio_mmio_io(vsock_transport(&dev), VIRTIO_MMIO_CONFIG,
		       (uint8_t *)&lo, 4, false);
	virtio_mmio_io(vsock_transport(&dev), VIRTIO_MMIO_CONFIG + 4,
		       (uint8_t *)&hi, 4, false);
	cr_assert_eq(lo, GUEST_CID);
	cr_assert_eq(hi, 0);
	lo = 99;
	virtio_mmio_io(vsock_transport(&dev), VIRTIO_MMIO_CONFIG,
		       (uint8_t *)&lo, 4, true);
	virtio_mmio_io(vsock_transport(&dev), VIRTIO_MMIO_CONFIG, &byte, 1,
		       false);
	cr_assert_eq(byte, GUEST_CID, "guest_cid is read-only");
	virtio_mmio_io(vsock_transport(&dev), VIRTIO_MMIO_CONFIG + 12,
		       (uint8_t *)&lo, 4, false);
	cr_assert_eq(lo, 0, "beyond the config space reads as zero");
}

Test(vsock_lifecycle, init_rejects_bad_arguments, .init = make_paths,
     .fini = remove_dir)
{
	struct vsock other;
	char long_path[200];

	cr_assert_eq(guest_memory_create(&mem, GUEST_MIB), 0);
	cr_assert_eq(
		vsock_init(&other, 2, path, -1, &mem, (struct irq_line){ 0 }),
		-1);
	cr_assert_eq(vsock_init(&other, 0xffffffffULL, path, -1, &mem,
				(struct irq_line){ 0 }),
		     -1);
	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[sizeof(long_path) - 1] = '\0';
	cr_assert_eq(vsock_init(&other, 3, long_path, -1, &mem,
				(struct irq_line){ 0 }),
		     -1);
	cr_assert_eq(vsock_init(&other, 3, "/nonexistent/dir/sock", -1, &mem,
				(struct irq_line){ 0 }),
		     -1);
	guest_memory_destroy(&mem);
}

Test(vsock, host_connect_relays_both_ways)
{
	uint32_t host_port;
	int fd = open_host_conn(GUEST_PORT, &host_port);
	struct rx_pkt p;
	char buf[16];

	write_all(fd, "hello", 5);
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert_eq(p.hdr.len, 5);
	cr_assert_eq(p.hdr.src_port, host_port);
	cr_assert_eq(p.hdr.dst_port, GUEST_PORT);
	cr_assert_eq(memcmp(p.data, "hello", 5), 0);

	tx_send(pkt(VIRTIO_VSOCK_OP_RW, GUEST_PORT, host_port), "world!", 6);
	read_exact(fd, buf, 6);
	cr_assert_eq(memcmp(buf, "world!", 6), 0);
	close(fd);
}

Test(vsock, data_after_connect_line_is_stream_data)
{
	int fd = unix_connect(path);
	struct rx_pkt p;
	char line[32];

	write_all(fd, "CONNECT 1024\nearly", 18);
	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	tx_op(VIRTIO_VSOCK_OP_RESPONSE, GUEST_PORT, p.hdr.src_port, 0);
	read_line(fd, line, sizeof(line));
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert_eq(p.hdr.len, 5);
	cr_assert_eq(memcmp(p.data, "early", 5), 0);
	close(fd);
}

Test(vsock, client_data_arrives_in_rw_packets_of_right_length)
{
	static uint8_t sent[10000], got[10000];
	uint32_t host_port, total = 0;
	int fd = open_host_conn(GUEST_PORT, &host_port);
	struct rx_pkt p;

	fill_pattern(sent, sizeof(sent), 1);
	write_all(fd, sent, sizeof(sent));
	while (total < sizeof(sent)) {
		rx_expect(&p, VIRTIO_VSOCK_OP_RW);
		cr_assert_gt(p.hdr.len, 0);
		cr_assert_leq(p.hdr.len, RX_PAYLOAD);
		cr_assert_leq(total + p.hdr.len, sizeof(sent));
		memcpy(got + total, p.data, p.hdr.len);
		total += p.hdr.len;
	}
	cr_assert_eq(memcmp(sent, got, sizeof(sent)), 0);
	close(fd);
}

/*
 * 1 MiB guest -> client from a guest that honours the device's credit and a
 * client that reads only when the guest is stalled: the transfer can only
 * finish if the device hands out credit as its buffer drains.
 */
Test(vsock, guest_to_client_1mib_within_credit)
{
	enum { TOTAL = 1024 * 1024 };
	uint8_t *sent = malloc(TOTAL), *got = malloc(TOTAL);
	uint32_t host_port, peer_alloc = BUF_ALLOC, peer_fwd = 0;
	uint32_t tx = 0, rx = 0, stalls = 0;
	uint64_t deadline = now_ms() + 20000;
	int fd = open_host_conn(GUEST_PORT, &host_port);
	struct rx_pkt p;

	fill_pattern(sent, TOTAL, 7);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while (rx < TOTAL) {
		uint32_t credit = peer_alloc - (tx - peer_fwd);

		cr_assert_lt(now_ms(), deadline, "stuck at %u sent, %u read",
			     tx, rx);
		cr_assert_leq(tx - peer_fwd, peer_alloc);
		if (credit && tx < TOTAL) {
			uint32_t n = credit < TX_PAYLOAD_MAX ? credit
							     : TX_PAYLOAD_MAX;

			if (n > TOTAL - tx)
				n = TOTAL - tx;
			tx_send(pkt(VIRTIO_VSOCK_OP_RW, GUEST_PORT, host_port),
				sent + tx, n);
			tx += n;
			continue;
		}
		stalls++;
		ssize_t n = read(fd, got + rx,
				 8192 < TOTAL - rx ? 8192 : TOTAL - rx);
		if (n > 0)
			rx += (uint32_t)n;
		else
			cr_assert(n < 0 && errno == EAGAIN, "client read %zd",
				  n);
		while (rx_poll(&p, n > 0 ? 0 : 1)) {
			cr_assert_eq(p.hdr.op, VIRTIO_VSOCK_OP_CREDIT_UPDATE,
				     "op %u", p.hdr.op);
			cr_assert_eq(p.hdr.buf_alloc, BUF_ALLOC);
			peer_alloc = p.hdr.buf_alloc;
			peer_fwd = p.hdr.fwd_cnt;
		}
	}
	cr_assert_gt(stalls, 0, "the guest never ran out of credit");
	cr_assert_eq(memcmp(sent, got, TOTAL), 0);
	free(sent);
	free(got);
	close(fd);
}

/*
 * 1 MiB client -> guest into a guest with a 32 KiB receive buffer that
 * grants credit only as it "consumes": the device must never send more than
 * the credit allows, and must resume when credit is granted.
 */
Test(vsock, client_to_guest_1mib_gradual_credit)
{
	enum { TOTAL = 1024 * 1024, WINDOW = 32 * 1024 };
	uint8_t *sent = malloc(TOTAL), *got = malloc(TOTAL);
	uint32_t host_port, written = 0, rx = 0;
	uint64_t deadline = now_ms() + 20000;
	bool checked_stall = false;
	struct rx_pkt p;
	int fd;

	guest_buf_alloc = WINDOW;
	fd = open_host_conn(GUEST_PORT, &host_port);
	fill_pattern(sent, TOTAL, 3);
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while (rx < TOTAL) {
		cr_assert_lt(now_ms(), deadline, "stuck at %u received", rx);
		if (written < TOTAL) {
			ssize_t n = write(fd, sent + written, TOTAL - written);

			if (n > 0)
				written += (uint32_t)n;
		}
		if (rx_poll(&p, 1)) {
			cr_assert_eq(p.hdr.op, VIRTIO_VSOCK_OP_RW, "op %u",
				     p.hdr.op);
			memcpy(got + rx, p.data, p.hdr.len);
			rx += p.hdr.len;
			cr_assert_leq(rx - guest_fwd_cnt, WINDOW,
				      "device overran the guest's credit");
		}
		if (rx - guest_fwd_cnt == WINDOW) {
			if (!checked_stall) {
				/* Out of credit: the device must hold off. */
				cr_assert_not(rx_poll(&p, QUIET_MS));
				checked_stall = true;
			}
			/* A slow reader: half the window at a time. */
			guest_fwd_cnt += WINDOW / 2;
			tx_op(VIRTIO_VSOCK_OP_CREDIT_UPDATE, GUEST_PORT,
			      host_port, 0);
		}
	}
	cr_assert(checked_stall);
	cr_assert_eq(memcmp(sent, got, TOTAL), 0);
	free(sent);
	free(got);
	close(fd);
}

Test(vsock, credit_request_is_answered)
{
	uint32_t host_port;
	int fd = open_host_conn(GUEST_PORT, &host_port);
	struct rx_pkt p;

	tx_op(VIRTIO_VSOCK_OP_CREDIT_REQUEST, GUEST_PORT, host_port, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_CREDIT_UPDATE);
	cr_assert_eq(p.hdr.buf_alloc, BUF_ALLOC);
	cr_assert_eq(p.hdr.fwd_cnt, 0);
	close(fd);
}

Test(vsock, guest_rst_closes_client)
{
	int fd = client_handshake(1025);
	struct rx_pkt p;

	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	cr_assert_eq(p.hdr.dst_port, 1025);
	tx_op(VIRTIO_VSOCK_OP_RST, 1025, p.hdr.src_port, 0);
	cr_assert(closed_by_device(fd));
	close(fd);
	expect_only_probe_answer(); /* no RST answers an RST */
}

Test(vsock, unanswered_request_times_out)
{
	int fd = client_handshake(1026);
	uint64_t start = now_ms();
	struct rx_pkt p;

	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	cr_assert(wait_readable(fd, REQUEST_TIMEOUT_MS + WAIT_MS));
	cr_assert(closed_by_device(fd));
	cr_assert_geq(now_ms() - start, REQUEST_TIMEOUT_MS - 100);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST); /* the guest heard the REQUEST */
	cr_assert_eq(p.hdr.dst_port, 1026);
	close(fd);
}

Test(vsock, bad_handshakes_close_only_that_client)
{
	static const char *const bad[] = {
		"HELLO 1024\n",
		"CONNECT abc\n",
		"CONNECT \n",
		"CONNECT 4294967296\n",
		"CONNECT 1024 \n",
		"CONNECT 4294967295\n",
		"CONNECT 1024123412341234123412341234123412341234\n",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	};
	int waiting = client_handshake(GUEST_PORT);
	struct rx_pkt p;
	int fd;

	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		fd = unix_connect(path);
		write_all(fd, bad[i], strlen(bad[i]));
		cr_assert(closed_by_device(fd), "kept \"%s\"", bad[i]);
		close(fd);
	}
	/* The good client is still there and can complete. */
	tx_op(VIRTIO_VSOCK_OP_RESPONSE, GUEST_PORT, p.hdr.src_port, 0);
	char line[32];
	read_line(waiting, line, sizeof(line));
	cr_assert_eq(strncmp(line, "OK ", 3), 0);
	close(waiting);
}

Test(vsock, client_hangup_during_handshake_is_harmless)
{
	int fd = unix_connect(path);

	write_all(fd, "CONN", 4);
	close(fd);
	fd = client_handshake(GUEST_PORT);
	struct rx_pkt p;
	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	close(fd);
	/* Gone before the guest answered: the guest is told. */
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
}

Test(vsock, guest_connects_to_host_listener)
{
	char where[160], buf[8];
	struct rx_pkt p;
	int listener, fd;

	snprintf(where, sizeof(where), "%s_5000", path);
	listener = unix_listen(where);
	tx_op(VIRTIO_VSOCK_OP_REQUEST, 40000, 5000, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RESPONSE);
	cr_assert_eq(p.hdr.src_port, 5000);
	cr_assert_eq(p.hdr.dst_port, 40000);
	cr_assert_eq(p.hdr.buf_alloc, BUF_ALLOC);
	cr_assert(wait_readable(listener, WAIT_MS));
	fd = accept(listener, NULL, NULL);
	cr_assert_geq(fd, 0);

	tx_send(pkt(VIRTIO_VSOCK_OP_RW, 40000, 5000), "ping", 4);
	read_exact(fd, buf, 4);
	cr_assert_eq(memcmp(buf, "ping", 4), 0);
	write_all(fd, "pong", 4);
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert_eq(p.hdr.len, 4);
	cr_assert_eq(memcmp(p.data, "pong", 4), 0);

	/* The guest closes: full SHUTDOWN is answered by RST and EOF. */
	tx_op(VIRTIO_VSOCK_OP_SHUTDOWN, 40000, 5000,
	      VIRTIO_VSOCK_SHUTDOWN_BOTH);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert_eq(p.hdr.src_port, 5000);
	cr_assert(closed_by_device(fd));
	close(fd);
	close(listener);
}

Test(vsock, guest_connect_without_listener_is_reset)
{
	struct rx_pkt p;

	tx_op(VIRTIO_VSOCK_OP_REQUEST, 40001, 5001, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert_eq(p.hdr.src_port, 5001);
	cr_assert_eq(p.hdr.dst_port, 40001);
}

Test(vsock, guest_send_shutdown_gives_client_eof)
{
	uint32_t host_port;
	int fd = open_host_conn(GUEST_PORT, &host_port);
	struct rx_pkt p;

	tx_send(pkt(VIRTIO_VSOCK_OP_RW, GUEST_PORT, host_port), "bye", 3);
	tx_op(VIRTIO_VSOCK_OP_SHUTDOWN, GUEST_PORT, host_port,
	      VIRTIO_VSOCK_SHUTDOWN_SEND);
	char buf[3];
	read_exact(fd, buf, 3);
	cr_assert(closed_by_device(fd), "no EOF after SHUTDOWN(SEND)");
	/* Half closed: the client can still talk to the guest. */
	write_all(fd, "more", 4);
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert_eq(p.hdr.len, 4);
	close(fd);
}

Test(vsock, client_close_sends_full_shutdown)
{
	uint32_t host_port;
	int fd = open_host_conn(GUEST_PORT, &host_port);
	struct rx_pkt p;

	write_all(fd, "last", 4);
	close(fd);
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert_eq(p.hdr.len, 4);
	do
		rx_expect(&p, VIRTIO_VSOCK_OP_SHUTDOWN);
	while (p.hdr.flags != VIRTIO_VSOCK_SHUTDOWN_BOTH);
	tx_op(VIRTIO_VSOCK_OP_RST, GUEST_PORT, host_port, 0);
	expect_only_probe_answer();
}

Test(vsock, driver_reset_drops_connections)
{
	uint32_t host_port;
	int fd = open_host_conn(GUEST_PORT, &host_port);

	reg_write(VIRTIO_MMIO_STATUS, 0);
	cr_assert(closed_by_device(fd));
	close(fd);
	/* The device works again for the next driver. */
	bring_up();
	fd = open_host_conn(GUEST_PORT, &host_port);
	close(fd);
}

Test(vsock, garbage_from_the_guest)
{
	uint8_t raw[HDR + 64];
	struct virtio_vsock_hdr hdr;
	uint32_t host_port;
	int fd = open_host_conn(GUEST_PORT, &host_port);
	struct rx_pkt p;
	uint64_t dropped = atomic_load(&dev.dropped);

	/* Shorter than a header: nothing to answer. */
	memset(raw, 0xab, sizeof(raw));
	tx_raw(raw, 20);
	/* Forged source CID: not answered either. */
	hdr = pkt(VIRTIO_VSOCK_OP_REQUEST, 40002, 5002);
	hdr.src_cid = 42;
	tx_send(hdr, NULL, 0);
	/* An RST for nothing is not answered. */
	tx_op(VIRTIO_VSOCK_OP_RST, 40003, 5003, 0);
	expect_only_probe_answer();
	cr_assert_geq(atomic_load(&dev.dropped), dropped + 2);

	/* Unknown op, unknown type, and another CID, with no connection. */
	tx_op(99, 40004, 5004, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert_eq(p.hdr.dst_port, 40004);
	hdr = pkt(VIRTIO_VSOCK_OP_REQUEST, 40005, 5005);
	hdr.type = 2; /* SEQPACKET, not offered */
	tx_send(hdr, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert_eq(p.hdr.dst_port, 40005);
	hdr = pkt(VIRTIO_VSOCK_OP_REQUEST, 40006, 5006);
	hdr.dst_cid = 7;
	tx_send(hdr, NULL, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert_eq(p.hdr.src_cid, 7);

	/* len beyond the buffer on a live connection resets it. */
	hdr = pkt(VIRTIO_VSOCK_OP_RW, GUEST_PORT, host_port);
	hdr.len = 1000;
	memcpy(raw, &hdr, HDR);
	tx_raw(raw, HDR + 10);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert_eq(p.hdr.src_port, host_port);
	cr_assert(closed_by_device(fd));
	close(fd);

	/* An unknown op on a live connection resets it too. */
	fd = open_host_conn(GUEST_PORT, &host_port);
	tx_op(0, GUEST_PORT, host_port, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert(closed_by_device(fd));
	close(fd);

	/* A duplicate RESPONSE (not CONNECTING any more) as well. */
	fd = open_host_conn(GUEST_PORT, &host_port);
	tx_op(VIRTIO_VSOCK_OP_RESPONSE, GUEST_PORT, host_port, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RST);
	cr_assert(closed_by_device(fd));
	close(fd);

	/* A TX buffer the device may only write to carries no packet. */
	*desc(VSOCK_QUEUE_TX, 0) = (struct virtq_desc){
		.addr = TX_BUF_GPA(0),
		.len = 64,
		.flags = VIRTQ_DESC_F_WRITE,
	};
	tx_next = 1;
	make_available(VSOCK_QUEUE_TX, 0);
	expect_only_probe_answer();
	cr_assert_eq(reg_read(VIRTIO_MMIO_STATUS) &
			     VIRTIO_STATUS_DEVICE_NEEDS_RESET,
		     0);
}

Test(vsock, guest_exceeding_credit_is_reset)
{
	static uint8_t chunk[TX_PAYLOAD_MAX];
	uint32_t host_port;
	int fd = open_host_conn(GUEST_PORT, &host_port);
	struct rx_pkt p;
	bool reset = false;

	/* The client never reads; the guest sends past 256 KiB anyway. */
	for (uint32_t sent = 0; !reset && sent <= 4 * BUF_ALLOC;
	     sent += sizeof(chunk)) {
		tx_send(pkt(VIRTIO_VSOCK_OP_RW, GUEST_PORT, host_port), chunk,
			sizeof(chunk));
		while (!reset && rx_poll(&p, 0)) {
			cr_assert_eq(p.hdr.src_port, host_port);
			reset = p.hdr.op == VIRTIO_VSOCK_OP_RST;
			if (!reset)
				cr_assert_eq(p.hdr.op,
					     VIRTIO_VSOCK_OP_CREDIT_UPDATE);
		}
	}
	while (!reset) {
		cr_assert(rx_poll(&p, WAIT_MS), "never reset");
		reset = p.hdr.op == VIRTIO_VSOCK_OP_RST;
	}
	cr_assert(drained_and_closed(fd));
	close(fd);
}

Test(vsock, tiny_rx_buffer_does_not_lose_the_packet)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct rx_pkt p;
	int fd;

	/* A new driver whose only RX buffer cannot hold a header. */
	setup_queues();
	*desc(VSOCK_QUEUE_RX, 0) = (struct virtq_desc){
		.addr = RX_BUF_GPA(0),
		.len = HDR - 1,
		.flags = VIRTQ_DESC_F_WRITE,
	};
	make_available(VSOCK_QUEUE_RX, 0);
	fd = client_handshake(GUEST_PORT);
	while (used_idx(VSOCK_QUEUE_RX) == 0) {
		cr_assert_lt(now_ms(), deadline, "tiny buffer not returned");
		pause_briefly();
	}
	cr_assert_eq(used(VSOCK_QUEUE_RX)->ring[0].len, 0);
	rx_last_used = 1;
	/* The REQUEST is still owed and goes into the next proper buffer. */
	post_rx(1);
	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	cr_assert_eq(p.hdr.dst_port, GUEST_PORT);
	close(fd);
}

Test(vsock, connection_limit)
{
	int fds[VSOCK_MAX_CONNECTIONS];
	int extra;

	for (int i = 0; i < VSOCK_MAX_CONNECTIONS; i++)
		fds[i] = unix_connect(path);
	extra = unix_connect(path);
	cr_assert(closed_by_device(extra), "connection over the limit kept");
	close(extra);
	for (int i = 0; i < VSOCK_MAX_CONNECTIONS; i++)
		close(fds[i]);
}

/* --- Lifecycle ---------------------------------------------------------- */

static int count_entries(const char *where)
{
	DIR *d = opendir(where);
	int n = 0;

	cr_assert_not_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

Test(vsock_lifecycle, stop_leaves_no_fds_or_threads, .init = make_paths,
     .fini = remove_dir, .timeout = 30)
{
	int fds_before = count_entries("/proc/self/fd");
	int threads_before = count_entries("/proc/self/task");
	char where[160];
	uint32_t host_port;
	struct stat st;
	int c1, c2, c3, listener, guest_side;
	struct rx_pkt p;

	start_device();
	bring_up();
	cr_assert_eq(count_entries("/proc/self/task"), threads_before + 1);
	c1 = open_host_conn(GUEST_PORT, &host_port);
	c2 = unix_connect(path); /* stays in the handshake */
	c3 = client_handshake(2000);
	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	snprintf(where, sizeof(where), "%s_6000", path);
	listener = unix_listen(where);
	tx_op(VIRTIO_VSOCK_OP_REQUEST, 40010, 6000, 0);
	rx_expect(&p, VIRTIO_VSOCK_OP_RESPONSE);
	guest_side = accept(listener, NULL, NULL);
	cr_assert_geq(guest_side, 0);

	vsock_stop(&dev);
	cr_assert(closed_by_device(c1));
	cr_assert(closed_by_device(c2));
	cr_assert(closed_by_device(c3));
	cr_assert(closed_by_device(guest_side));
	cr_assert_neq(stat(path, &st), 0, "socket not unlinked");
	close(c1);
	close(c2);
	close(c3);
	close(guest_side);
	close(listener);
	guest_memory_destroy(&mem);
	cr_assert_eq(count_entries("/proc/self/fd"), fds_before);
	cr_assert_eq(count_entries("/proc/self/task"), threads_before);
}

Test(vsock_lifecycle, stop_without_start, .init = make_paths,
     .fini = remove_dir)
{
	int fds_before = count_entries("/proc/self/fd");
	struct stat st;

	cr_assert_eq(guest_memory_create(&mem, GUEST_MIB), 0);
	cr_assert_eq(vsock_init(&dev, GUEST_CID, path, -1, &mem,
				(struct irq_line){ 0 }),
		     0);
	cr_assert_eq(vsock_init(&(struct vsock){ 0 }, GUEST_CID, path, -1, &mem,
				(struct irq_line){ 0 }),
		     -1, "a second device on the same path");
	vsock_stop(&dev);
	cr_assert_neq(stat(path, &st), 0);
	guest_memory_destroy(&mem);
	cr_assert_eq(count_entries("/proc/self/fd"), fds_before);
}

/* --- Pause and snapshot state ------------------------------------------- */

Test(vsock, pause_holds_host_data_until_resume)
{
	uint32_t host_port;
	int fd = open_host_conn(GUEST_PORT, &host_port);
	struct rx_pkt p;

	vsock_pause(&dev);
	write_all(fd, "hello", 5);
	cr_assert_not(rx_poll(&p, QUIET_MS), "a paused device filled RX");
	vsock_resume(&dev);
	rx_expect(&p, VIRTIO_VSOCK_OP_RW);
	cr_assert_eq(p.hdr.len, 5);
	cr_assert_arr_eq(p.data, "hello", 5);
	close(fd);
}

/* Stopping a paused device must still join its thread (teardown). */
Test(vsock, stop_while_paused)
{
	vsock_pause(&dev);
	vsock_pause(&dev);
}

/*
 * Snapshots the running device and replaces it with a fresh one, set up with
 * another CID, restored from the snapshot and started: what a VMM restoring
 * a clone does, on the same guest memory.
 */
static void snapshot_and_restore(void)
{
	struct irq_line irq = { .set_level = noop_irq, .gsi = 5 };
	struct state_writer w;
	struct state_reader r;
	uint8_t cid;

	state_writer_init(&w);
	vsock_pause(&dev);
	vsock_save(&dev, &w);
	state_file_through(&w, &r);
	vsock_stop(&dev);
	cr_assert_eq(vsock_init(&dev, GUEST_CID + 4, path, -1, &mem, irq), 0);
	cr_assert_eq(vsock_restore(&dev, &r), 0);
	state_reader_close(&r);
	cr_assert_eq(vsock_start(&dev), 0);
	virtio_mmio_io(vsock_transport(&dev), VIRTIO_MMIO_CONFIG, &cid, 1,
		       false);
	cr_assert_eq(cid, GUEST_CID, "the guest's CID changed");
}

static void expect_transport_reset(uint16_t buffer)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct virtq_used_elem elem;
	uint32_t id;

	while (used_idx(VSOCK_QUEUE_EVENT) == 0) {
		cr_assert_lt(now_ms(), deadline, "no event");
		pause_briefly();
	}
	cr_assert_eq(used_idx(VSOCK_QUEUE_EVENT), 1);
	elem = used(VSOCK_QUEUE_EVENT)->ring[0];
	cr_assert_eq(elem.id, buffer);
	cr_assert_eq(elem.len, sizeof(struct virtio_vsock_event));
	memcpy(&id, guest + EVENT_BUF_GPA(buffer), sizeof(id));
	cr_assert_eq(id, VIRTIO_VSOCK_EVENT_TRANSPORT_RESET);
}

Test(vsock, restore_resets_the_transport)
{
	uint32_t host_port, old_port;
	int old, fresh;

	post_event(0);
	post_event(1);
	old = open_host_conn(GUEST_PORT, &old_port);
	snapshot_and_restore();
	cr_assert(closed_by_device(old));
	expect_transport_reset(0);
	/* As Linux does once it has handled the event. */
	post_event(0);

	/* The guest's listener is still there for new clients. */
	fresh = open_host_conn(GUEST_PORT, &host_port);
	/* The guest may not have dropped the old one yet: never reuse it. */
	cr_expect_neq(host_port, old_port);
	write_all(fresh, "after", 5);
	close(old);
	close(fresh);
	cr_assert_eq(used_idx(VSOCK_QUEUE_EVENT), 1, "one event only");
}

Test(vsock, reset_event_waits_for_a_buffer)
{
	struct rx_pkt p;
	int fd;

	snapshot_and_restore();
	fd = client_handshake(GUEST_PORT);
	/* The REQUEST must not overtake the reset, which would kill it. */
	cr_assert_not(rx_poll(&p, QUIET_MS), "packet before the reset");
	post_event(0);
	expect_transport_reset(0);
	/* Delivered is not handled: Linux may still take RX first. */
	cr_assert_not(rx_poll(&p, QUIET_MS), "packet before the driver "
					     "handled the reset");
	post_event(0); /* the driver re-posts the buffer: handled */
	rx_expect(&p, VIRTIO_VSOCK_OP_REQUEST);
	cr_assert_eq(p.hdr.dst_port, GUEST_PORT);
	close(fd);
}

Test(vsock, restore_without_driver_sends_no_event)
{
	reg_write(VIRTIO_MMIO_STATUS, 0);
	snapshot_and_restore();
	setup_queues();
	post_event(0);
	for (uint16_t i = 0; i < QSZ; i++)
		post_rx(i);
	expect_only_probe_answer();
	cr_assert_eq(used_idx(VSOCK_QUEUE_EVENT), 0);
}

/* Restoring sections @vsock and @transport (either may be NULL) into a
 * device that is not started must fail and leave it as it was. */
static void expect_rejected(const struct vsock_state *vsock,
			    const struct virtio_mmio_state *transport)
{
	struct irq_line irq = { .set_level = noop_irq, .gsi = 5 };
	struct virtio_mmio_state before;
	struct state_writer w;
	struct state_reader r;
	char other_path[sizeof(dir) + 16];
	struct vsock other;

	state_writer_init(&w);
	if (vsock)
		state_put(&w, STATE_DEV_VSOCK, 0, vsock, sizeof(*vsock));
	if (transport)
		state_put(&w, STATE_DEV_VIRTIO_MMIO, 0, transport,
			  sizeof(*transport));
	state_file_through(&w, &r);
	snprintf(other_path, sizeof(other_path), "%s/other.sock", dir);
	cr_assert_eq(
		vsock_init(&other, GUEST_CID + 4, other_path, -1, &mem, irq),
		0);
	memcpy(&before, &other.transport.state, sizeof(before));
	cr_assert_eq(vsock_restore(&other, &r), -1);
	cr_assert_eq(memcmp(&other.transport.state, &before, sizeof(before)),
		     0);
	cr_assert_eq(other.state.guest_cid, GUEST_CID + 4);
	vsock_stop(&other);
	state_reader_close(&r);
}

Test(vsock, restore_rejects_bad_state)
{
	struct vsock_state good = dev.state, bad_cid = good, bad_port = good;
	struct virtio_mmio_state transport, bad_queue;

	bad_cid.guest_cid = 2;
	bad_port.next_local_port = 1024; /* below the host range */

	vsock_pause(&dev);
	memcpy(&transport, &dev.transport.state, sizeof(transport));
	bad_queue = transport;
	bad_queue.queues[VSOCK_QUEUE_EVENT].size = 3;
	expect_rejected(&bad_cid, &transport);
	bad_cid.guest_cid = 0xffffffff;
	expect_rejected(&bad_cid, &transport);
	expect_rejected(&bad_port, &transport);
	expect_rejected(&good, &bad_queue);
	expect_rejected(&good, NULL);
	expect_rejected(NULL, &transport);
	vsock_resume(&dev);
}

Test(vsock_lifecycle, pause_and_save_without_thread, .init = make_paths,
     .fini = remove_dir)
{
	struct state_writer w;

	cr_assert_eq(guest_memory_create(&mem, GUEST_MIB), 0);
	cr_assert_eq(vsock_init(&dev, GUEST_CID, path, -1, &mem,
				(struct irq_line){ 0 }),
		     0);
	vsock_pause(&dev);
	state_writer_init(&w);
	vsock_save(&dev, &w);
	cr_assert_eq(w.error, 0);
	cr_assert_gt(w.len, sizeof(struct vsock_state));
	state_writer_free(&w);
	vsock_resume(&dev);
	vsock_stop(&dev);
	guest_memory_destroy(&mem);
}
