// SPDX-License-Identifier: Apache-2.0
/*
 * virtio_seeds.c - writes the seed corpora of virtio_vsock and virtio_net
 * in their input language (virtio_driver.h): what a Linux guest's driver
 * and the host side do.
 *
 *	virtio_seeds DIR	writes DIR/virtio_vsock/ and DIR/virtio_net/
 *
 * virtio_vsock:
 *   bring-up	the driver's set-up alone
 *   refused	RX buffers posted; the guest connects to a host port
 *		nobody listens on, and gets an RST
 *   session	a host client's CONNECT 1024, the guest's RESPONSE, data
 *		both ways, a credit update, shutdown, and the client gone
 * virtio_net:
 *   bring-up	the driver's set-up with every feature
 *   frames	RX buffers posted, a frame each way
 *   offloads	a TSO frame from the guest, a checksum-offloaded one from
 *		the TAP, with and without the features
 *
 * Run by hand when the language changes; the outputs are committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/devices/virtio_net.h"
#include "vmm/devices/virtqueue.h"
#include "vmm/devices/vsock.h"
#include "tests/fuzz/virtio_driver.h"

#define RX_BUF(i) (FUZZ_VIRTIO_BUFFERS + (i)*0x400u)
#define TX_BUF(i) (FUZZ_VIRTIO_BUFFERS + 0x2000u + (i)*0x100u)

static uint8_t out[4096];
static size_t len;
static uint8_t tx_next;

static void put(const void *p, size_t n)
{
	if (len + n > sizeof(out))
		abort();
	memcpy(out + len, p, n);
	len += n;
}

static void op(uint8_t code)
{
	put(&code, 1);
}

static void u8(uint8_t v)
{
	put(&v, 1);
}

static void u16(uint16_t v)
{
	put(&v, 2);
}

static void desc(uint8_t queue, uint8_t index, uint16_t addr, uint16_t n,
		 uint8_t flags)
{
	op(OP_DESC);
	u8(queue);
	u8(index);
	u16(addr);
	u16(n);
	u8(flags);
	u8(0);
}

static void avail(uint8_t queue, uint8_t head)
{
	op(OP_AVAIL);
	u8(queue);
	u8(head);
}

/* @n buffers of 1 KiB on @queue (both devices' RX), notified. */
static void post_rx(uint8_t queue, int n)
{
	for (int i = 0; i < n; i++) {
		desc(queue, i, RX_BUF(i), 0x400, VIRTQ_DESC_F_WRITE);
		avail(queue, i);
	}
	op(OP_NOTIFY);
	u8(queue);
}

/* A guest packet on TX: header and @data in one descriptor. */
static void send(uint16_t pkt_op, uint32_t src_port, uint32_t dst_port,
		 const char *data, uint32_t flags)
{
	struct virtio_vsock_hdr h = {
		.src_cid = VSOCK_DEFAULT_GUEST_CID,
		.dst_cid = VSOCK_HOST_CID,
		.src_port = src_port,
		.dst_port = dst_port,
		.len = data ? strlen(data) : 0,
		.type = VIRTIO_VSOCK_TYPE_STREAM,
		.op = pkt_op,
		.flags = flags,
		.buf_alloc = 256 * 1024,
	};
	uint8_t i = tx_next++;

	op(OP_POKE);
	u16(TX_BUF(i));
	u8(sizeof(h) + h.len);
	put(&h, sizeof(h));
	if (h.len)
		put(data, h.len);
	desc(VSOCK_QUEUE_TX, i, TX_BUF(i), sizeof(h) + h.len, 0);
	avail(VSOCK_QUEUE_TX, i);
	op(OP_NOTIFY);
	u8(VSOCK_QUEUE_TX);
}

/* A 60-byte Ethernet frame (broadcast ARP-sized) behind a header. */
static void net_frame(uint8_t flags, uint8_t gso_type)
{
	struct virtio_net_hdr_v1 h = { .flags = flags,
				       .gso_type = gso_type,
				       .gso_size = gso_type ? 1448 : 0,
				       .csum_start = flags ? 34 : 0,
				       .csum_offset = flags ? 16 : 0 };
	uint8_t eth[60];

	memset(eth, 0xff, 6);
	memset(eth + 6, 0x06, 6);
	eth[12] = 0x08;
	eth[13] = 0x00;
	for (size_t i = 14; i < sizeof(eth); i++)
		eth[i] = (uint8_t)i;
	put(&h, sizeof(h));
	put(eth, sizeof(eth));
}

static void net_tx(uint8_t flags, uint8_t gso_type)
{
	uint8_t i = tx_next++;

	op(OP_POKE);
	u16(TX_BUF(i));
	u8(NET_HDR_SIZE + 60);
	net_frame(flags, gso_type);
	desc(NET_QUEUE_TX, i, TX_BUF(i), NET_HDR_SIZE + 60, 0);
	avail(NET_QUEUE_TX, i);
	op(OP_NOTIFY);
	u8(NET_QUEUE_TX);
}

static void net_tap_frame(uint8_t flags, uint8_t gso_type)
{
	op(OP_TAP_FRAME);
	u8(NET_HDR_SIZE + 60);
	net_frame(flags, gso_type);
}

static void client(const char *data)
{
	op(OP_CLIENT);
	u8(strlen(data));
	put(data, strlen(data));
}

static void save(const char *dir, const char *harness, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, harness, name);
	f = fopen(path, "wb");
	if (!f || fwrite(out, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
	len = 0;
	tx_next = 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	op(OP_BRING_UP);
	u8(1);
	save(argv[1], "virtio_vsock", "bring-up");

	op(OP_BRING_UP);
	u8(0);
	post_rx(VSOCK_QUEUE_RX, 4);
	send(VIRTIO_VSOCK_OP_REQUEST, 50000, 1025, NULL, 0);
	op(OP_RUN);
	save(argv[1], "virtio_vsock", "refused");

	op(OP_BRING_UP);
	u8(1);
	post_rx(VSOCK_QUEUE_RX, 8);
	client("CONNECT 1024\n");
	send(VIRTIO_VSOCK_OP_RESPONSE, 1024, VSOCK_LOCAL_PORT_FIRST, NULL, 0);
	client("hello guest\n");
	send(VIRTIO_VSOCK_OP_RW, 1024, VSOCK_LOCAL_PORT_FIRST, "hello host\n",
	     0);
	send(VIRTIO_VSOCK_OP_CREDIT_UPDATE, 1024, VSOCK_LOCAL_PORT_FIRST, NULL,
	     0);
	send(VIRTIO_VSOCK_OP_SHUTDOWN, 1024, VSOCK_LOCAL_PORT_FIRST, NULL, 3);
	op(OP_CLIENT_CLOSE);
	save(argv[1], "virtio_vsock", "session");

	op(OP_BRING_UP);
	u8(3);
	save(argv[1], "virtio_net", "bring-up");

	op(OP_BRING_UP);
	u8(3);
	post_rx(NET_QUEUE_RX, 4);
	net_tx(0, 0);
	op(OP_TAP_DRAIN);
	net_tap_frame(0, 0);
	op(OP_RUN);
	save(argv[1], "virtio_net", "frames");

	op(OP_BRING_UP);
	u8(2);
	post_rx(NET_QUEUE_RX, 2);
	net_tx(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4);
	net_tap_frame(VIRTIO_NET_HDR_F_NEEDS_CSUM, 0);
	op(OP_BRING_UP);
	u8(0);
	post_rx(NET_QUEUE_RX, 2);
	net_tx(VIRTIO_NET_HDR_F_NEEDS_CSUM, VIRTIO_NET_HDR_GSO_TCPV4);
	net_tap_frame(VIRTIO_NET_HDR_F_DATA_VALID, 0);
	save(argv[1], "virtio_net", "offloads");
	return 0;
}
