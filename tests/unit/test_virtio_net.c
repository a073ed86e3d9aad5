// SPDX-License-Identifier: Apache-2.0
/*
 * test_virtio_net.c - the virtio-net device, with the test as both the
 * guest's driver (registers through virtio_mmio_io, rings and frames in
 * test guest memory) and the TAP: one end of a SOCK_SEQPACKET socket pair
 * is the device's backend, so each frame is one message, as on a TAP.
 *
 * The virtio_net_tap suite runs the device over a real TAP instead.
 *
 * Most tests run the device without its thread, one pass at a time
 * (net_run_once), so what a pass did is known exactly when it returns;
 * the thread's own test waits with a deadline.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "vmm/devices/virtio_net.h"
#include "common/guest_net.h"
#include "tests/unit/state_file.h"
#include "tests/unit/virtio_guest.h"

#define QSZ VIRTIO_GUEST_QSZ
#define RX_BUF_GPA(i) (0x100000ULL + (uint64_t)(i)*0x1000)
#define TX_BUF_GPA(i) (0x200000ULL + (uint64_t)(i)*0x12000)
#define RX_BUF_SIZE 2048
#define WAIT_MS 3000

static struct guest_memory mem;
static uint8_t *guest;
static struct net_dev dev;
static int peer; /* the "TAP"'s other side: what the host network sees */
static uint16_t rx_last_used, tx_next;
static const uint8_t guest_mac[6] = GUEST_NET_GUEST_MAC;

static const uint64_t all_features =
	(1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_F_EVENT_IDX) |
	(1ULL << VIRTIO_NET_F_MAC) | (1ULL << VIRTIO_NET_F_STATUS) |
	(1ULL << VIRTIO_NET_F_MRG_RXBUF) | (1ULL << VIRTIO_NET_F_CSUM) |
	(1ULL << VIRTIO_NET_F_GUEST_CSUM) | (1ULL << VIRTIO_NET_F_HOST_TSO4) |
	(1ULL << VIRTIO_NET_F_GUEST_TSO4);

/* --- Guest driver ------------------------------------------------------- */

static bool needs_reset(void)
{
	return reg_read(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_DEVICE_NEEDS_RESET;
}

/* Resets the device and sets it up with @features and empty queues. */
static void bring_up(uint64_t features)
{
	rx_last_used = tx_next = 0;
	virtio_guest_bring_up(features, NET_QUEUE_SIZE);
	cr_assert_eq(net_run_once(&dev, 0), 0);
}

static void post_rx(uint16_t i, uint32_t len)
{
	*desc(NET_QUEUE_RX, i) = (struct virtq_desc){
		.addr = RX_BUF_GPA(i),
		.len = len,
		.flags = VIRTQ_DESC_F_WRITE,
	};
	ring_add(NET_QUEUE_RX, i);
}

/* A frame as the TAP carries it: header, then @len bytes of pattern. */
static size_t make_frame(uint8_t *buf, uint32_t len, uint8_t seed)
{
	struct virtio_net_hdr_v1 hdr = { 0 };

	memcpy(buf, &hdr, NET_HDR_SIZE);
	for (uint32_t i = 0; i < len; i++)
		buf[NET_HDR_SIZE + i] = (uint8_t)(seed + i * 7);
	return NET_HDR_SIZE + len;
}

/* An IPv4 frame of @proto (TCP or UDP header, zeroed, then pattern) behind
 * header @hdr: its length. */
static size_t make_ip_frame(uint8_t *buf, const struct virtio_net_hdr_v1 *hdr,
			    uint8_t proto, uint32_t payload)
{
	uint8_t *eth = buf + NET_HDR_SIZE, *ip = eth + NET_ETH_HLEN;
	uint32_t l4 = proto == IPPROTO_TCP ? 20 : 8;
	size_t len = make_frame(buf, NET_ETH_HLEN + 20 + l4 + payload, 9);

	memcpy(buf, hdr, NET_HDR_SIZE);
	eth[12] = 0x08; /* IPv4 */
	eth[13] = 0x00;
	memset(ip, 0, 20 + l4);
	ip[0] = 0x45;
	ip[2] = (uint8_t)((20 + l4 + payload) >> 8);
	ip[3] = (uint8_t)(20 + l4 + payload);
	ip[8] = 64;
	ip[9] = proto;
	if (proto == IPPROTO_TCP)
		ip[20 + 12] = 5 << 4; /* data offset */
	return len;
}

/* Puts @frame on TX split into @pieces descriptors; notifies. */
static void tx_post(const uint8_t *frame, size_t len, int pieces)
{
	uint16_t first = (uint16_t)(tx_next * 4 % QSZ);
	size_t off = 0, part = len / pieces;

	memcpy(guest + TX_BUF_GPA(tx_next % 4), frame, len);
	for (int i = 0; i < pieces; i++) {
		size_t n = i == pieces - 1 ? len - off : part;

		*desc(NET_QUEUE_TX,
		      (uint16_t)(first + i)) = (struct virtq_desc){
			.addr = TX_BUF_GPA(tx_next % 4) + off,
			.len = (uint32_t)n,
			.flags = i == pieces - 1 ? 0 : VIRTQ_DESC_F_NEXT,
			.next = (uint16_t)(first + i + 1),
		};
		off += n;
	}
	tx_next++;
	ring_add(NET_QUEUE_TX, first);
}

/* The next used RX element, asserted to be there. */
static struct virtq_used_elem rx_used(void)
{
	cr_assert_neq(used_idx(NET_QUEUE_RX), rx_last_used,
		      "no RX buffer used");
	return used(NET_QUEUE_RX)->ring[rx_last_used++ % QSZ];
}

static ssize_t peer_recv(uint8_t *buf, size_t size)
{
	return recv(peer, buf, size, MSG_DONTWAIT);
}

/* --- Fixture ------------------------------------------------------------ */

static void noop_irq(void *ctx, uint32_t gsi, int level)
{
	(void)ctx;
	(void)gsi;
	(void)level;
}

static struct irq_line irq = { .set_level = noop_irq, .gsi = 6 };

/* A fresh device over a fresh socket pair; @peer gets the other end. */
static void make_device(struct net_dev *d)
{
	int sv[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv),
		     0);
	cr_assert_eq(net_init(d, sv[0], guest_mac, &mem, irq), 0);
	peer = sv[1];
}

static void setup(void)
{
	cr_assert_eq(guest_memory_create(&mem, MEMORY_MIN_MIB), 0);
	guest = mem.host;
	make_device(&dev);
	virtio_guest_attach(net_transport(&dev), guest);
	bring_up(all_features);
}

static void teardown(void)
{
	net_stop(&dev);
	close(peer);
	guest_memory_destroy(&mem);
}

TestSuite(virtio_net, .init = setup, .fini = teardown, .timeout = 30);

/* --- Tests -------------------------------------------------------------- */

Test(virtio_net, identity_and_config)
{
	uint8_t config[sizeof(struct virtio_net_config)];
	uint16_t status;

	cr_assert_eq(reg_read(VIRTIO_MMIO_DEVICE_ID), VIRTIO_ID_NET);
	reg_write(VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	cr_assert_eq(reg_read(VIRTIO_MMIO_DEVICE_FEATURES) &
			     (uint32_t)all_features,
		     (uint32_t)all_features);
	for (uint32_t i = 0; i < sizeof(config); i++)
		virtio_mmio_io(net_transport(&dev), VIRTIO_MMIO_CONFIG + i,
			       &config[i], 1, false);
	cr_assert_arr_eq(config, guest_mac, 6);
	memcpy(&status, config + 6, 2);
	cr_assert_eq(status, VIRTIO_NET_S_LINK_UP);
	/* Past the end reads zeros, a write changes nothing. */
	uint32_t beyond = 0xdeadbeef;

	virtio_mmio_io(net_transport(&dev), VIRTIO_MMIO_CONFIG + 0x80,
		       (uint8_t *)&beyond, 4, false);
	cr_assert_eq(beyond, 0);
	virtio_mmio_io(net_transport(&dev), VIRTIO_MMIO_CONFIG,
		       (uint8_t *)&beyond, 4, true);
	virtio_mmio_io(net_transport(&dev), VIRTIO_MMIO_CONFIG, config, 6,
		       false);
	cr_assert_arr_eq(config, guest_mac, 6);
}

Test(virtio_net, tx_frame_reaches_the_tap)
{
	uint8_t frame[NET_HDR_SIZE + 1500], got[sizeof(frame) + 16];
	size_t len = make_frame(frame, 1400, 3);

	tx_post(frame, len, 3);
	cr_assert_eq(net_run_once(&dev, 0), 0);
	cr_assert_eq(used_idx(NET_QUEUE_TX), 1);
	cr_assert_eq(peer_recv(got, sizeof(got)), (ssize_t)len);
	cr_assert_arr_eq(got, frame, len);
	cr_assert_eq(dev.tx_frames, 1);
	cr_assert_eq(peer_recv(got, sizeof(got)), -1, "one frame, one write");
}

Test(virtio_net, rx_frame_into_one_buffer)
{
	uint8_t frame[NET_HDR_SIZE + 100];
	struct virtio_net_hdr_v1 hdr;
	size_t len = make_frame(frame, 100, 9);
	struct virtq_used_elem e;

	post_rx(0, RX_BUF_SIZE);
	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	e = rx_used();
	cr_assert_eq(e.id, 0);
	cr_assert_eq(e.len, len);
	memcpy(&hdr, guest + RX_BUF_GPA(0), NET_HDR_SIZE);
	cr_assert_eq(hdr.num_buffers, 1);
	cr_assert_arr_eq(guest + RX_BUF_GPA(0) + NET_HDR_SIZE,
			 frame + NET_HDR_SIZE, 100);
	cr_assert_eq(dev.rx_frames, 1);
}

Test(virtio_net, rx_mergeable_buffers)
{
	static uint8_t frame[NET_HDR_SIZE + 5000];
	struct virtio_net_hdr_v1 hdr;
	size_t len = make_frame(frame, 5000, 1), off = 0;
	uint16_t n = 0;

	for (uint16_t i = 0; i < 4; i++)
		post_rx(i, RX_BUF_SIZE);
	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert_eq(used_idx(NET_QUEUE_RX), 3, "5012 bytes in 2048s");
	memcpy(&hdr, guest + RX_BUF_GPA(0), NET_HDR_SIZE);
	cr_assert_eq(hdr.num_buffers, 3);
	while (used_idx(NET_QUEUE_RX) != rx_last_used) {
		struct virtq_used_elem e = rx_used();

		cr_assert_eq(e.id, n++, "buffers in order");
		cr_assert_eq(e.len,
			     len - off < RX_BUF_SIZE ? len - off : RX_BUF_SIZE);
		if (off)
			cr_assert_arr_eq(guest + RX_BUF_GPA(e.id), frame + off,
					 e.len);
		off += e.len;
	}
	cr_assert_eq(off, len);
}

Test(virtio_net, no_buffers_means_backpressure)
{
	uint8_t a[NET_HDR_SIZE + 64], b[NET_HDR_SIZE + 64], peek[8];
	size_t len = make_frame(a, 64, 1);

	make_frame(b, 64, 2);
	/* No RX buffer posted. */
	cr_assert_eq(send(peer, a, len, 0), (ssize_t)len);
	cr_assert_eq(send(peer, b, len, 0), (ssize_t)len);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert_eq(used_idx(NET_QUEUE_RX), 0);
	cr_assert(!dev.tap_watched, "the TAP is left alone without buffers");
	/* The second frame is still the backend's: nothing spins on it. */
	cr_assert_gt(
		recv(dev.tap_fd, peek, sizeof(peek), MSG_PEEK | MSG_DONTWAIT),
		0);
	cr_assert_eq(net_run_once(&dev, 50), 0, "a wait with nothing due");
	cr_assert_eq(dev.rx_frames, 0);

	post_rx(0, RX_BUF_SIZE);
	post_rx(1, RX_BUF_SIZE);
	reg_write(VIRTIO_MMIO_QUEUE_NOTIFY, NET_QUEUE_RX);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert_eq(used_idx(NET_QUEUE_RX), 2, "both frames, in order");
	cr_assert_arr_eq(guest + RX_BUF_GPA(0) + NET_HDR_SIZE, a + NET_HDR_SIZE,
			 64);
	cr_assert_arr_eq(guest + RX_BUF_GPA(1) + NET_HDR_SIZE, b + NET_HDR_SIZE,
			 64);
	cr_assert(dev.tap_watched);
	cr_assert_eq(dev.rx_dropped, 0);
}

Test(virtio_net, frame_waits_for_enough_mergeable_buffers)
{
	static uint8_t frame[NET_HDR_SIZE + 5000];
	size_t len = make_frame(frame, 5000, 4);

	post_rx(0, RX_BUF_SIZE);
	post_rx(1, RX_BUF_SIZE);
	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert_eq(used_idx(NET_QUEUE_RX), 0, "two buffers of three");
	post_rx(2, RX_BUF_SIZE);
	reg_write(VIRTIO_MMIO_QUEUE_NOTIFY, NET_QUEUE_RX);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert_eq(used_idx(NET_QUEUE_RX), 3);
	cr_assert_eq(rx_used().id, 0, "the buffers given back come first");
	cr_assert(!needs_reset());
}

Test(virtio_net, without_mrg_rxbuf_a_frame_takes_one_buffer)
{
	static uint8_t frame[NET_HDR_SIZE + 3000];
	size_t len = make_frame(frame, 3000, 5);

	bring_up(all_features & ~(1ULL << VIRTIO_NET_F_MRG_RXBUF));
	post_rx(0, RX_BUF_SIZE);
	post_rx(1, RX_BUF_SIZE);
	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	cr_assert_eq(send(peer, frame, 200, 0), 200);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	/* Too big for a buffer: dropped, and the buffer kept for the next. */
	cr_assert_eq(dev.rx_dropped, 1);
	cr_assert_eq(used_idx(NET_QUEUE_RX), 1);
	cr_assert_eq(rx_used().len, 200);
}

Test(virtio_net, offloads_only_as_negotiated)
{
	uint8_t frame[NET_HDR_SIZE + 100], got[256];
	struct virtio_net_hdr_v1 hdr = { .flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
					 .gso_type = VIRTIO_NET_HDR_GSO_TCPV4,
					 .gso_size = 1448,
					 .csum_start = NET_ETH_HLEN + 20,
					 .csum_offset = 16 };
	size_t len = make_ip_frame(frame, &hdr, IPPROTO_TCP, 32);

	/* TSO negotiated: passes; without the features: dropped. */
	tx_post(frame, len, 1);
	cr_assert_eq(net_run_once(&dev, 0), 0);
	cr_assert_eq(peer_recv(got, sizeof(got)), (ssize_t)len);
	bring_up((1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_NET_F_MAC));
	tx_post(frame, len, 1);
	cr_assert_eq(net_run_once(&dev, 0), 0);
	cr_assert_eq(used_idx(NET_QUEUE_TX), 1, "the buffer is returned");
	cr_assert_eq(peer_recv(got, sizeof(got)), -1);
	cr_assert_eq(dev.tx_dropped, 1);
	/* RX: an offloaded frame for a driver without GUEST_CSUM. */
	post_rx(0, RX_BUF_SIZE);
	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	hdr = (struct virtio_net_hdr_v1){ .flags =
						  VIRTIO_NET_HDR_F_DATA_VALID };
	memcpy(frame, &hdr, NET_HDR_SIZE);
	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert_eq(dev.rx_dropped, 1);
	cr_assert_eq(used_idx(NET_QUEUE_RX), 1);
	memcpy(&hdr, guest + RX_BUF_GPA(0), NET_HDR_SIZE);
	cr_assert_eq(hdr.flags, 0, "flags zero without GUEST_CSUM");
}

/*
 * Checksum offload (NEEDS_CSUM) writes the sum wherever the header says,
 * after the host's policy has judged the frame: only a TCP or UDP
 * checksum field of an IPv4 frame may be named, or the guest would
 * rewrite a port or an address the policy decided on.
 */
Test(virtio_net, checksum_offload_only_at_the_l4_checksum)
{
	uint8_t frame[NET_HDR_SIZE + 200], got[256];
	const uint16_t l4 = NET_ETH_HLEN + 20;
	const struct {
		uint8_t proto;
		uint16_t start, offset;
		bool passes;
	} cases[] = {
		{ IPPROTO_UDP, l4, 6, true },
		{ IPPROTO_TCP, l4, 16, true },
		{ IPPROTO_UDP, l4, 2, false }, /* the destination port */
		{ IPPROTO_TCP, l4, 6, false }, /* not TCP's field */
		{ IPPROTO_UDP, NET_ETH_HLEN, 16, false }, /* the address */
		{ IPPROTO_UDP, 0, 0, false },		  /* the MAC */
		{ IPPROTO_ICMP, l4, 2, false },
	};
	uint64_t dropped = 0;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct virtio_net_hdr_v1 hdr = {
			.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
			.csum_start = cases[i].start,
			.csum_offset = cases[i].offset,
		};
		size_t len = make_ip_frame(frame, &hdr, cases[i].proto, 40);

		tx_post(frame, len, 2);
		cr_assert_eq(net_run_once(&dev, 0), 0);
		dropped += !cases[i].passes;
		cr_expect_eq(dev.tx_dropped, dropped, "case %zu", i);
		cr_expect_eq(peer_recv(got, sizeof(got)),
			     cases[i].passes ? (ssize_t)len : -1, "case %zu",
			     i);
	}
}

Test(virtio_net, garbage_from_the_guest)
{
	uint8_t frame[NET_HDR_SIZE + 100], got[256];
	size_t len = make_frame(frame, 100, 7);

	/* Runts and oversized frames are dropped, their buffers returned. */
	tx_post(frame, NET_HDR_SIZE + 4, 1);
	*desc(NET_QUEUE_TX, 0) =
		(struct virtq_desc){ .addr = TX_BUF_GPA(0),
				     .len = NET_FRAME_MAX + 1 };
	ring_add(NET_QUEUE_TX, 0);
	cr_assert_eq(net_run_once(&dev, 0), 0);
	cr_assert_eq(used_idx(NET_QUEUE_TX), 2);
	cr_assert_eq(dev.tx_dropped, 2);
	cr_assert_eq(peer_recv(got, sizeof(got)), -1);

	/* An RX buffer without room for the header drops the frame. */
	post_rx(0, 8);
	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert_eq(rx_used().len, 0);
	cr_assert_eq(dev.rx_dropped, 1);
	cr_assert(!needs_reset());

	/* A descriptor loop: the device needs a reset, the host is fine. */
	*desc(NET_QUEUE_TX, 5) =
		(struct virtq_desc){ .addr = TX_BUF_GPA(0),
				     .len = 64,
				     .flags = VIRTQ_DESC_F_NEXT,
				     .next = 5 };
	ring_add(NET_QUEUE_TX, 5);
	cr_assert_eq(net_run_once(&dev, 0), 0);
	cr_assert(needs_reset());
	/* A buffer outside guest memory, after a reset. */
	bring_up(all_features);
	*desc(NET_QUEUE_RX, 0) = (struct virtq_desc){
		.addr = mem.size - 16, .len = 4096, .flags = VIRTQ_DESC_F_WRITE
	};
	ring_add(NET_QUEUE_RX, 0);
	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert(needs_reset());

	/* And after the next reset it works again. */
	bring_up(all_features);
	tx_post(frame, len, 2);
	cr_assert_eq(net_run_once(&dev, 0), 0);
	cr_assert_eq(peer_recv(got, sizeof(got)), (ssize_t)len);
}

Test(virtio_net, reset_drops_the_held_frame)
{
	uint8_t frame[NET_HDR_SIZE + 64];
	size_t len = make_frame(frame, 64, 8);

	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert_eq(dev.rx_len, len, "held for want of buffers");
	reg_write(VIRTIO_MMIO_STATUS, 0);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert_eq(dev.rx_len, 0);
	cr_assert(!dev.tap_watched, "no driver, no reading");
}

/* Saves the device, replaces it with a fresh one over a new backend (a
 * clone's TAP) and restores it there. */
static void snapshot_and_restore(void)
{
	struct state_writer w;
	struct state_reader r;

	state_writer_init(&w);
	net_pause(&dev);
	net_save(&dev, &w);
	state_file_through(&w, &r);
	net_stop(&dev);
	close(peer);
	make_device(&dev);
	cr_assert_eq(net_restore(&dev, &r), 0);
	state_reader_close(&r);
}

Test(virtio_net, save_restore_round_trip)
{
	uint8_t frame[NET_HDR_SIZE + 300], got[512];
	size_t len = make_frame(frame, 300, 9);

	tx_post(frame, len, 1);
	post_rx(0, RX_BUF_SIZE);
	post_rx(1, RX_BUF_SIZE);
	cr_assert_eq(net_run_once(&dev, 0), 0);
	cr_assert_eq(peer_recv(got, sizeof(got)), (ssize_t)len);

	snapshot_and_restore();
	cr_assert(reg_read(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_DRIVER_OK);
	cr_assert(dev.live);
	/* Queue positions carried over: the next TX is the second. */
	tx_post(frame, len, 2);
	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	cr_assert_eq(net_run_once(&dev, 100), 0);
	cr_assert_eq(used_idx(NET_QUEUE_TX), 2);
	cr_assert_eq(peer_recv(got, sizeof(got)), (ssize_t)len,
		     "TX on the new backend");
	cr_assert_eq(rx_used().len, len, "RX from the new backend");
}

Test(virtio_net, restore_rejects_bad_state)
{
	struct net_state bad = dev.state;
	struct state_writer w;
	struct state_reader r;
	struct net_dev other;
	int keep = peer;

	bad.mac[0] |= 1; /* multicast */
	state_writer_init(&w);
	net_save(&dev, &w);
	state_file_through(&w, &r);
	state_reader_close(&r);

	state_file_one_section(&r, STATE_DEV_NET, &bad, sizeof(bad));
	make_device(&other);
	cr_assert_eq(net_restore(&other, &r), -1);
	cr_assert_eq(other.transport.state.status, 0);
	state_reader_close(&r);
	bad = dev.state;
	bad.status = 0x80;
	state_file_one_section(&r, STATE_DEV_NET, &bad, sizeof(bad));
	cr_assert_eq(net_restore(&other, &r), -1);
	state_reader_close(&r);
	/* A good section without its transport. */
	state_file_one_section(&r, STATE_DEV_NET, &dev.state,
			       sizeof(dev.state));
	cr_assert_eq(net_restore(&other, &r), -1);
	state_reader_close(&r);
	net_stop(&other);
	close(peer);
	peer = keep;
}

Test(virtio_net, thread_moves_frames_and_pauses)
{
	uint8_t frame[NET_HDR_SIZE + 64], got[256];
	size_t len = make_frame(frame, 64, 10);
	uint64_t deadline = monotonic_ns() / NS_PER_MS + WAIT_MS;

	cr_assert_eq(net_start(&dev), 0);
	net_pause(&dev);
	tx_post(frame, len, 1);
	reg_write(VIRTIO_MMIO_QUEUE_NOTIFY, NET_QUEUE_TX);
	usleep(50 * 1000);
	cr_assert_eq(used_idx(NET_QUEUE_TX), 0, "paused: no work");
	net_resume(&dev);
	while (used_idx(NET_QUEUE_TX) == 0)
		cr_assert_lt(monotonic_ns() / NS_PER_MS, deadline);
	cr_assert_eq(peer_recv(got, sizeof(got)), (ssize_t)len);
	post_rx(0, RX_BUF_SIZE);
	reg_write(VIRTIO_MMIO_QUEUE_NOTIFY, NET_QUEUE_RX);
	cr_assert_eq(send(peer, frame, len, 0), (ssize_t)len);
	while (used_idx(NET_QUEUE_RX) == 0)
		cr_assert_lt(monotonic_ns() / NS_PER_MS, deadline);
}

/* --- A real TAP ---------------------------------------------------------- */

/*
 * The device over a real TAP (net_tap_open) in a network namespace of the
 * test's own (criterion runs each test in a process of its own), with a
 * packet socket on the TAP as the host's network: frames cross with the
 * 12-byte vnet header on the device's side and none on the wire.  Root
 * only; it makes an interface, so it runs under the VM lock.
 */
static int wire = -1;

static void make_tap(const char *name)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0, "/dev/net/tun: %s", strerror(errno));
	strcpy(ifr.ifr_name, name);
	cr_assert_eq(ioctl(fd, TUNSETIFF, &ifr), 0);
	cr_assert_eq(ioctl(fd, TUNSETPERSIST, 1), 0);
	close(fd);
	cr_assert_eq(ioctl(sock, SIOCGIFFLAGS, &ifr), 0);
	ifr.ifr_flags |= IFF_UP;
	cr_assert_eq(ioctl(sock, SIOCSIFFLAGS, &ifr), 0);
	close(sock);
}

static void tap_setup(void)
{
	struct sockaddr_ll ll = { .sll_family = AF_PACKET,
				  .sll_protocol = htons(ETH_P_ALL) };
	int fd;

	if (geteuid() != 0)
		cr_skip_test("needs root (a TAP in a namespace of its own)");
	cr_assert_eq(unshare(CLONE_NEWNET), 0, "unshare: %s", strerror(errno));
	cr_assert_eq(guest_memory_create(&mem, MEMORY_MIN_MIB), 0);
	guest = mem.host;
	/* No IPv6 on tap0, as in a sandbox: the kernel's own router
	 * solicitations would otherwise take the RX buffer of the frame the
	 * test sends. */
	fd = open("/proc/sys/net/ipv6/conf/default/disable_ipv6",
		  O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		cr_assert_eq(write(fd, "1", 1), 1);
		close(fd);
	}
	make_tap(GUEST_NET_TAP_NAME);
	cr_assert_eq(net_tap_open("thaw-none0"), -1, "no such TAP");
	fd = net_tap_open(GUEST_NET_TAP_NAME);
	cr_assert_geq(fd, 0);
	cr_assert_eq(net_init(&dev, fd, guest_mac, &mem, irq), 0);
	cr_assert(dev.tap_is_tap);
	peer = -1;
	virtio_guest_attach(net_transport(&dev), guest);
	bring_up(all_features);
	wire = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
	cr_assert_geq(wire, 0);
	ll.sll_ifindex = (int)if_nametoindex(GUEST_NET_TAP_NAME);
	cr_assert_eq(bind(wire, (struct sockaddr *)&ll, sizeof(ll)), 0);
}

static void tap_teardown(void)
{
	if (wire >= 0)
		close(wire);
	teardown();
}

Test(virtio_net_tap, frames_cross_a_real_tap, .init = tap_setup,
     .fini = tap_teardown, .timeout = 30)
{
	uint8_t frame[NET_HDR_SIZE + 100], got[256];
	size_t len = make_frame(frame, 100, 11);
	uint64_t deadline = monotonic_ns() / NS_PER_MS + WAIT_MS;
	ssize_t n;

	/* A broadcast frame from the guest reaches the wire, header off. */
	memset(frame + NET_HDR_SIZE, 0xff, 6);
	tx_post(frame, len, 2);
	cr_assert_eq(net_run_once(&dev, 0), 0);
	cr_assert_eq(dev.tx_frames, 1);
	/* The wire also shows the kernel's own frames on tap0 (IPv6's as
	 * it comes up): wait for ours. */
	do
		n = recv(wire, got, sizeof(got), MSG_DONTWAIT);
	while ((n != 100 || memcmp(got, frame + NET_HDR_SIZE, 100)) &&
	       monotonic_ns() / NS_PER_MS < deadline);
	cr_assert_eq(n, 100);
	cr_assert_arr_eq(got, frame + NET_HDR_SIZE, 100);

	/* One from the wire reaches the guest, header on. */
	post_rx(0, RX_BUF_SIZE);
	cr_assert_eq(send(wire, frame + NET_HDR_SIZE, 100, 0), 100);
	while (used_idx(NET_QUEUE_RX) == 0) {
		cr_assert_lt(monotonic_ns() / NS_PER_MS, deadline);
		net_run_once(&dev, 10);
	}
	cr_assert_eq(rx_used().len, len);
	cr_assert_arr_eq(guest + RX_BUF_GPA(0) + NET_HDR_SIZE,
			 frame + NET_HDR_SIZE, 100);
}
