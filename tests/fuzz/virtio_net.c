// SPDX-License-Identifier: Apache-2.0
/*
 * virtio_net.c - libFuzzer harness: the virtio-net device as a hostile
 * guest drives it (virtio_mmio.c's registers, virtqueue.c's chains and
 * rings, virtio_net.c's frames: headers with any flags and GSO, runts,
 * oversized chains, RX buffers of any size or none) while frames of any
 * length and header arrive on its "TAP".
 *
 * The input is a program in virtio_driver.h's operations; the host side's
 * are OP_TAP_FRAME (a frame of the input's bytes arrives on the backend)
 * and OP_TAP_DRAIN (the backend's side reads what the guest sent, so TX
 * can go on).  The backend is a SOCK_SEQPACKET socket pair, a frame per
 * message as on a TAP (fuzz_net_backend()).  No thread: one pass
 * (net_run_once) after each notification and host event, so a run is
 * deterministic.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "vmm/devices/virtio_net.h"
#include "tests/fuzz/fuzz_support.h"
#include "common/guest_net.h"
#include "tests/fuzz/virtio_driver.h"

static uint8_t ram[FUZZ_VIRTIO_RAM];

struct run {
	struct net_dev dev;
	int peer; /* the host network's side of the backend */
};

static void drain(struct run *r)
{
	static uint8_t sink[NET_FRAME_MAX];

	while (recv(r->peer, sink, sizeof(sink), MSG_DONTWAIT) > 0)
		;
}

static void pass(void *device)
{
	net_run_once(&((struct run *)device)->dev, 0);
}

static void host(void *device, enum virtio_fuzz_op op, const uint8_t *data,
		 size_t n)
{
	struct run *r = device;

	if (op == OP_TAP_FRAME)
		send(r->peer, data, n, MSG_DONTWAIT | MSG_NOSIGNAL);
	else
		drain(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const uint8_t mac[6] = GUEST_NET_GUEST_MAC;
	static bool quiet;
	struct fuzz_input in = { data, size };
	struct guest_memory mem;
	struct run r;
	struct fuzz_virtio v = { .transport = net_transport(&r.dev),
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
	if (net_init(&r.dev, fuzz_net_backend(&r.peer), mac, &mem,
		     (struct irq_line){ 0 }))
		abort();
	while (fuzz_virtio_step(&v, &in))
		;
	pass(&r);
	net_stop(&r.dev);
	return 0;
}
