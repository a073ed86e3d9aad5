// SPDX-License-Identifier: Apache-2.0
/*
 * snapshot_state.c - libFuzzer harness: a state file (state.bin) of any
 * content through state_reader_open() and every device's restore, then
 * the restored devices in use.
 *
 * The input is the file.  Its body hash is fixed up first (a fuzzer cannot
 * forge XXH3; the check itself is one comparison), so the framing checks
 * and the sections reach the devices: serial_restore(), i8042_restore(),
 * rtc_restore(), vsock_restore() and net_restore() (each with its virtio-mmio
 * transport), in vm_devices.c's order, each on a freshly initialised
 * device as a restoring VMM has.  Each restored device then serves a pass
 * of register reads and writes, and the vsock device one pass of its
 * thread's work (vsock_run_once) over a small zeroed guest RAM, since a
 * restore that accepts a bad state shows it only in use.  KVM's own state
 * (vCPUs, irqchip, clock) goes back through KVM ioctls, which need a VM:
 * not fuzzed here.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "vmm/devices/i8042.h"
#include "vmm/devices/rtc.h"
#include "vmm/devices/serial.h"
#include "vmm/devices/virtio_net.h"
#include "vmm/devices/vsock.h"
#include "tests/fuzz/fuzz_support.h"
#include "common/guest_net.h"
#include "snapshot/state.h"

#define GUEST_RAM (64 * 1024)

static uint8_t ram[GUEST_RAM];

/* Every register of a @width-byte window read, then written with @value. */
static void use_registers(void *dev,
			  void (*io)(void *, uint64_t, uint8_t *, uint32_t,
				     bool),
			  uint64_t width, uint32_t step)
{
	for (int write = 0; write < 2; write++)
		for (uint64_t off = 0; off < width; off += step) {
			uint32_t value = 0x5a5a5a5a;

			io(dev, off, (uint8_t *)&value, step, write);
		}
}

static void restore_devices(const struct state_reader *r)
{
	struct guest_memory mem;
	struct serial serial;
	struct i8042 i8042;
	struct rtc rtc;
	struct vsock vsock;
	struct net_dev net;

	if (serial_init(&serial, (struct irq_line){ 0 }, fuzz_discard_output,
			NULL))
		abort();
	if (!serial_restore(&serial, r))
		use_registers(&serial, serial_io, 8, 1);
	serial_destroy(&serial);

	if (i8042_init(&i8042, fuzz_ignore_reset, NULL))
		abort();
	if (!i8042_restore(&i8042, r)) {
		use_registers(&i8042, i8042_data_io, 1, 1);
		use_registers(&i8042, i8042_command_io, 1, 1);
	}
	i8042_destroy(&i8042);

	if (rtc_init(&rtc))
		abort();
	if (!rtc_restore(&rtc, r))
		use_registers(&rtc, rtc_io, 2, 1);
	rtc_destroy(&rtc);

	memset(ram, 0, sizeof(ram));
	fuzz_guest_memory(&mem, ram, sizeof(ram));
	if (vsock_init(&vsock, VSOCK_DEFAULT_GUEST_CID, fuzz_path("vsock"),
		       fuzz_vsock_listener(), &mem, (struct irq_line){ 0 }))
		abort();
	if (!vsock_restore(&vsock, r)) {
		vsock_run_once(&vsock, 0);
		use_registers(vsock_transport(&vsock), virtio_mmio_io,
			      VIRTIO_MMIO_CONFIG + 8, 4);
		vsock_run_once(&vsock, 0);
	}
	vsock_stop(&vsock);

	/* The network's, over a socket pair standing in for the TAP. */
	static const uint8_t mac[6] = GUEST_NET_GUEST_MAC;
	int peer;

	if (net_init(&net, fuzz_net_backend(&peer), mac, &mem,
		     (struct irq_line){ 0 }))
		abort();
	if (!net_restore(&net, r)) {
		net_run_once(&net, 0);
		use_registers(net_transport(&net), virtio_mmio_io,
			      VIRTIO_MMIO_CONFIG + 8, 4);
		net_run_once(&net, 0);
	}
	net_stop(&net);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static bool quiet;
	struct state_file_header h;
	struct state_reader r;
	char err[512];

	if (!quiet) {
		fuzz_quiet_log();
		quiet = true;
	}
	uint8_t *file = malloc(size ? size : 1);
	if (!file)
		abort();
	memcpy(file, data, size);
	if (size >= sizeof(h)) {
		memcpy(&h, file, sizeof(h));
		h.body_hash = XXH3_64bits(file + sizeof(h), size - sizeof(h));
		memcpy(file, &h, sizeof(h));
	}
	const char *path = fuzz_path("state.bin");
	fuzz_write_file(path, file, size, size);
	free(file);

	if (state_reader_open(&r, path, err, sizeof(err)))
		return 0;
	restore_devices(&r);
	state_reader_close(&r);
	return 0;
}
