// SPDX-License-Identifier: Apache-2.0
/*
 * virtio_vsock.c - libFuzzer harness: the virtio-vsock device as a hostile
 * guest drives it: virtio_mmio.c's registers, virtqueue.c's descriptor
 * chains and rings in guest RAM the input writes, vsock.c's packets, and
 * host clients on its Unix socket, all at once.
 *
 * The input is a program in virtio_driver.h's operations: register writes
 * and reads, bytes poked into a 64 KiB guest RAM (descriptor tables, rings,
 * packet headers and payloads), queue notifications, host clients that
 * connect and write (a "CONNECT <port>" handshake or not) and hang up.
 * The device's thread is not started: each notification and client event
 * is followed by one pass of its work on this thread (vsock_run_once), so
 * a run is deterministic.  The clients' sockets are non-blocking and
 * drained, and everything is torn down after each input.
 */
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "vmm/devices/vsock.h"
#include "tests/fuzz/fuzz_support.h"
#include "tests/fuzz/virtio_driver.h"

#define VSOCK_FUZZ_CLIENTS 4

static uint8_t ram[FUZZ_VIRTIO_RAM];

struct run {
	struct vsock dev;
	int clients[VSOCK_FUZZ_CLIENTS];
	int nr_clients;
};

/* One pass, then whatever the device wrote to the clients read away: one
 * poll() finds the clients with something to read (most passes write to
 * none), rather than a read() of each until EAGAIN. */
static void pass(void *device)
{
	static uint8_t sink[1 << 16];
	struct run *r = device;
	struct pollfd ready[VSOCK_FUZZ_CLIENTS];

	vsock_run_once(&r->dev, 0);
	for (int i = 0; i < r->nr_clients; i++)
		ready[i] = (struct pollfd){ .fd = r->clients[i],
					    .events = POLLIN };
	if (!r->nr_clients || poll(ready, (nfds_t)r->nr_clients, 0) <= 0)
		return;
	for (int i = 0; i < r->nr_clients; i++)
		if (ready[i].revents)
			while (read(r->clients[i], sink, sizeof(sink)) > 0)
				;
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

/* OP_CLIENT and OP_CLIENT_CLOSE. */
static void host(void *device, enum virtio_fuzz_op op, const uint8_t *data,
		 size_t n)
{
	struct run *r = device;

	if (op == OP_CLIENT) {
		client_write(r, data, n);
	} else if (r->nr_clients) {
		close(r->clients[0]);
		memmove(r->clients, r->clients + 1,
			--r->nr_clients * sizeof(r->clients[0]));
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;
	struct fuzz_input in = { data, size };
	struct guest_memory mem;
	struct run r = { .nr_clients = 0 };
	struct fuzz_virtio v = { .transport = vsock_transport(&r.dev),
				 .ram = ram,
				 .device = &r,
				 .pass = pass,
				 .host = host };

	if (!quiet) {
		fuzz_quiet_log();
		quiet = true;
	}
	memset(ram, 0, sizeof(ram));
	fuzz_guest_memory(&mem, ram, sizeof(ram));
	if (vsock_init(&r.dev, VSOCK_DEFAULT_GUEST_CID, fuzz_path("vsock"),
		       fuzz_vsock_listener(), &mem, (struct irq_line){ 0 }))
		abort();
	while (fuzz_virtio_step(&v, &in))
		;
	while (r.nr_clients)
		close(r.clients[--r.nr_clients]);
	pass(&r);
	vsock_stop(&r.dev);
	return 0;
}
