// SPDX-License-Identifier: Apache-2.0
/*
 * vsock_seeds.c - writes the seed corpus of virtio_vsock in its input
 * language (virtio_vsock.h): what a Linux guest's driver and a host client
 * do.
 *
 *	vsock_seeds DIR		writes DIR/virtio_vsock/
 *
 *   bring-up	the driver's set-up alone
 *   refused	RX buffers posted; the guest connects to a host port
 *		nobody listens on, and gets an RST
 *   session	a host client's CONNECT 1024, the guest's RESPONSE, data
 *		both ways, a credit update, shutdown, and the client gone
 *
 * Run by hand when the language changes; the outputs are committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/virtqueue.h"
#include "devices/vsock.h"
#include "virtio_vsock.h"

#define RX_BUF(i) (VSOCK_FUZZ_BUFFERS + (i)*0x400u)
#define TX_BUF(i) (VSOCK_FUZZ_BUFFERS + 0x2000u + (i)*0x100u)

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

static void post_rx(int n)
{
	for (int i = 0; i < n; i++) {
		desc(VSOCK_QUEUE_RX, i, RX_BUF(i), 0x400, VIRTQ_DESC_F_WRITE);
		avail(VSOCK_QUEUE_RX, i);
	}
	op(OP_NOTIFY);
	u8(VSOCK_QUEUE_RX);
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

static void client(const char *data)
{
	op(OP_CLIENT);
	u8(strlen(data));
	put(data, strlen(data));
}

static void save(const char *dir, const char *name)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/virtio_vsock/%s", dir, name);
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
	save(argv[1], "bring-up");

	op(OP_BRING_UP);
	u8(0);
	post_rx(4);
	send(VIRTIO_VSOCK_OP_REQUEST, 50000, 1025, NULL, 0);
	op(OP_RUN);
	save(argv[1], "refused");

	op(OP_BRING_UP);
	u8(1);
	post_rx(8);
	client("CONNECT 1024\n");
	send(VIRTIO_VSOCK_OP_RESPONSE, 1024, VSOCK_LOCAL_PORT_FIRST, NULL, 0);
	client("hello guest\n");
	send(VIRTIO_VSOCK_OP_RW, 1024, VSOCK_LOCAL_PORT_FIRST, "hello host\n",
	     0);
	send(VIRTIO_VSOCK_OP_CREDIT_UPDATE, 1024, VSOCK_LOCAL_PORT_FIRST, NULL,
	     0);
	send(VIRTIO_VSOCK_OP_SHUTDOWN, 1024, VSOCK_LOCAL_PORT_FIRST, NULL, 3);
	op(OP_CLIENT_CLOSE);
	save(argv[1], "session");
	return 0;
}
