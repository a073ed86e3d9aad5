// SPDX-License-Identifier: Apache-2.0
/*
 * virtio_vsock.c - libFuzzer harness: the virtio-vsock device as a hostile
 * guest drives it: virtio_mmio.c's registers, virtqueue.c's descriptor
 * chains and rings in guest RAM the input writes, vsock.c's packets, and
 * host clients on its Unix socket, all at once.
 *
 * The input is a program in virtio_vsock.h's operations: register writes
 * and reads, bytes poked into a 64 KiB guest RAM (descriptor tables, rings,
 * packet headers and payloads), queue notifications, host clients that
 * connect and write (a "CONNECT <port>" handshake or not) and hang up.
 * The device's thread is not started: each notification and client event
 * is followed by one pass of its work on this thread (vsock_run_once), so
 * a run is deterministic.  The clients' sockets are non-blocking and
 * drained, and everything is torn down after each input.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "devices/virtqueue.h"
#include "devices/vsock.h"
#include "fuzz_support.h"
#include "virtio_vsock.h"

static uint8_t ram[VSOCK_FUZZ_RAM];

struct input {
	const uint8_t *p;
	size_t left;
};

static bool take(struct input *in, void *out, size_t n)
{
	if (in->left < n)
		return false;
	memcpy(out, in->p, n);
	in->p += n;
	in->left -= n;
	return true;
}

struct run {
	struct vsock dev;
	int clients[VSOCK_FUZZ_CLIENTS];
	int nr_clients;
};

static void mmio(struct run *r, uint64_t offset, uint32_t *value, bool write)
{
	virtio_mmio_io(vsock_transport(&r->dev), offset, (uint8_t *)value, 4,
		       write);
}

static void mmio_write(struct run *r, uint64_t offset, uint32_t value)
{
	mmio(r, offset, &value, true);
}

/* One pass, then whatever the device wrote to the clients read away. */
static void pass(struct run *r)
{
	static uint8_t sink[1 << 16];

	vsock_run_once(&r->dev, 0);
	for (int i = 0; i < r->nr_clients; i++)
		while (read(r->clients[i], sink, sizeof(sink)) > 0)
			;
}

static void bring_up(struct run *r, bool event_idx)
{
	uint32_t driver = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;

	mmio_write(r, VIRTIO_MMIO_STATUS, driver);
	mmio_write(r, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	mmio_write(r, VIRTIO_MMIO_DRIVER_FEATURES,
		   event_idx ? 1u << VIRTIO_F_EVENT_IDX : 0);
	mmio_write(r, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	mmio_write(r, VIRTIO_MMIO_DRIVER_FEATURES,
		   1u << (VIRTIO_F_VERSION_1 - 32));
	mmio_write(r, VIRTIO_MMIO_STATUS, driver | VIRTIO_STATUS_FEATURES_OK);
	for (uint32_t q = 0; q < VSOCK_NUM_QUEUES; q++) {
		mmio_write(r, VIRTIO_MMIO_QUEUE_SEL, q);
		mmio_write(r, VIRTIO_MMIO_QUEUE_NUM, VSOCK_FUZZ_QSIZE);
		mmio_write(r, VIRTIO_MMIO_QUEUE_DESC_LOW, VSOCK_FUZZ_DESC(q));
		mmio_write(r, VIRTIO_MMIO_QUEUE_DRIVER_LOW,
			   VSOCK_FUZZ_AVAIL(q));
		mmio_write(r, VIRTIO_MMIO_QUEUE_DEVICE_LOW, VSOCK_FUZZ_USED(q));
		mmio_write(r, VIRTIO_MMIO_QUEUE_READY, 1);
	}
	mmio_write(r, VIRTIO_MMIO_STATUS,
		   driver | VIRTIO_STATUS_FEATURES_OK |
			   VIRTIO_STATUS_DRIVER_OK);
}

static void client_write(struct run *r, const uint8_t *data, size_t n)
{
	if (r->nr_clients < VSOCK_FUZZ_CLIENTS) {
		struct sockaddr_un addr = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX,
				SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

		strcpy(addr.sun_path, r->dev.uds_path);
		if (fd < 0 ||
		    connect(fd, (struct sockaddr *)&addr, sizeof(addr)))
			abort();
		r->clients[r->nr_clients++] = fd;
	}
	/* The device may have closed it: an EPIPE then, not a SIGPIPE. */
	if (n)
		send(r->clients[r->nr_clients - 1], data, n,
		     MSG_NOSIGNAL | MSG_DONTWAIT);
}

static bool step(struct run *r, struct input *in)
{
	uint8_t op, reg, queue, n, index, flags, next, head;
	uint16_t addr, len;
	uint32_t value;

	if (!take(in, &op, 1))
		return false;
	switch (op % OP_COUNT) {
	case OP_MMIO_WRITE:
		if (!take(in, &reg, 1) || !take(in, &value, 4))
			return false;
		mmio(r, reg * 4u % (VIRTIO_MMIO_CONFIG + 8), &value, true);
		return true;
	case OP_MMIO_READ:
		if (!take(in, &reg, 1))
			return false;
		mmio(r, reg * 4u % (VIRTIO_MMIO_CONFIG + 8), &value, false);
		return true;
	case OP_POKE:
		if (!take(in, &addr, 2) || !take(in, &n, 1) || in->left < n)
			return false;
		memcpy(ram + addr, in->p,
		       n < VSOCK_FUZZ_RAM - addr ? n : VSOCK_FUZZ_RAM - addr);
		in->p += n;
		in->left -= n;
		return true;
	case OP_RUN:
		pass(r);
		return true;
	case OP_NOTIFY:
		if (!take(in, &queue, 1))
			return false;
		mmio_write(r, VIRTIO_MMIO_QUEUE_NOTIFY, queue);
		pass(r);
		return true;
	case OP_BRING_UP:
		if (!take(in, &flags, 1))
			return false;
		bring_up(r, flags & 1);
		return true;
	case OP_DESC: {
		struct virtq_desc d;

		if (!take(in, &queue, 1) || !take(in, &index, 1) ||
		    !take(in, &addr, 2) || !take(in, &len, 2) ||
		    !take(in, &flags, 1) || !take(in, &next, 1))
			return false;
		d = (struct virtq_desc){
			.addr = addr, .len = len, .flags = flags, .next = next
		};
		memcpy(ram + VSOCK_FUZZ_DESC(queue % VSOCK_NUM_QUEUES) +
			       index % VSOCK_FUZZ_QSIZE * sizeof(d),
		       &d, sizeof(d));
		return true;
	}
	case OP_AVAIL: {
		if (!take(in, &queue, 1) || !take(in, &head, 1))
			return false;
		struct virtq_avail *avail =
			(void *)(ram +
				 VSOCK_FUZZ_AVAIL(queue % VSOCK_NUM_QUEUES));
		uint16_t idx = avail->idx;

		avail->ring[idx % VSOCK_FUZZ_QSIZE] = head;
		__atomic_store_n(&avail->idx, (uint16_t)(idx + 1),
				 __ATOMIC_RELEASE);
		return true;
	}
	case OP_CLIENT:
		if (!take(in, &n, 1) || in->left < n)
			return false;
		client_write(r, in->p, n);
		in->p += n;
		in->left -= n;
		pass(r);
		return true;
	case OP_CLIENT_CLOSE:
		if (r->nr_clients) {
			close(r->clients[0]);
			memmove(r->clients, r->clients + 1,
				--r->nr_clients * sizeof(r->clients[0]));
		}
		pass(r);
		return true;
	}
	return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;
	struct input in = { data, size };
	struct guest_memory mem;
	struct run r = { .nr_clients = 0 };

	if (!quiet) {
		fuzz_quiet_log();
		quiet = true;
	}
	memset(ram, 0, sizeof(ram));
	fuzz_guest_memory(&mem, ram, sizeof(ram));
	if (vsock_init(&r.dev, VSOCK_DEFAULT_GUEST_CID, fuzz_path("vsock"), -1,
		       &mem, (struct irq_line){ 0 }))
		abort();
	while (step(&r, &in))
		;
	while (r.nr_clients)
		close(r.clients[--r.nr_clients]);
	pass(&r);
	vsock_stop(&r.dev);
	return 0;
}
