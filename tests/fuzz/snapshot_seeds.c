// SPDX-License-Identifier: Apache-2.0
/*
 * snapshot_seeds.c - writes the seed corpora of snapshot_headers and
 * snapshot_state with the snapshot code's own writers.
 *
 * snapshot_headers: a working set and page hashes, written by
 * workingset_record() and memfile_write() for a small memory whose pages
 * 0-2 and 5 were touched, and a memory diff (memdiff_write()) of pages 1,
 * 2 and 6 written later in a private mapping of that memory, each behind
 * the choice byte snapshot_headers.c reads (reader, root fix-up, memory
 * size).  snapshot_state: state files
 * of the devices' own saves, fresh and after a guest driver set them up
 * (the serial line, a keyboard command, the vsock transport live with its
 * three queues in a 64 KiB RAM, as snapshot_state.c gives it).
 *
 *	snapshot_seeds DIR	writes DIR/snapshot_headers/ and
 *				DIR/snapshot_state/
 *
 * Run by hand when a format changes; the outputs are committed.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "vmm/devices/i8042.h"
#include "vmm/devices/rtc.h"
#include "vmm/devices/serial.h"
#include "vmm/devices/virtio_net.h"
#include "vmm/devices/vsock.h"
#include "tests/fuzz/fuzz_support.h"
#include "common/guest_net.h"
#include "snapshot/memdiff.h"
#include "snapshot/memfile.h"
#include "snapshot/state.h"
#include "snapshot/workingset.h"

#define PAGES 8

/* snapshot_headers.c's choice byte */
enum { PREFETCH, MAP, VERIFY, DIFF };
#define CHOICE(reader, pages) ((uint8_t)((reader) | (((pages)-1) << 3)))

static void fail(const char *what, const char *err)
{
	fprintf(stderr, "snapshot_seeds: %s: %s\n", what, err);
	exit(1);
}

/* DIR/snapshot_headers/NAME: @choice, then the bytes of @path. */
static void seed(const char *dir, const char *name, uint8_t choice,
		 const char *path)
{
	char out[4096];
	uint8_t buf[65536];
	FILE *in = fopen(path, "rb");
	size_t n = in ? fread(buf, 1, sizeof(buf), in) : 0;
	FILE *f;

	snprintf(out, sizeof(out), "%s/snapshot_headers/%s", dir, name);
	f = fopen(out, "wb");
	if (!in || !f || fputc(choice, f) == EOF || fwrite(buf, 1, n, f) != n ||
	    fclose(f))
		fail(out, "cannot write");
	fclose(in);
}

/* Pages 1, 2 and 6 of @memory written in a private mapping, as a diff. */
static void write_diff(const char *memory, const char *path, uint64_t size,
		       uint64_t root)
{
	struct memdiff_extents x = { 0 };
	char err[512];
	int fd = open(memory, O_RDONLY);
	uint8_t *mem =
		mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	int out = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);

	if (fd < 0 || mem == MAP_FAILED || out < 0)
		fail(path, "cannot map the memory or create the diff");
	mem[1 * MEMFILE_PAGE_SIZE] = mem[2 * MEMFILE_PAGE_SIZE] = 0x77;
	mem[6 * MEMFILE_PAGE_SIZE] = 0x66;
	if (memdiff_find_written(mem, size, -1, MEMDIFF_MAX_EXTENTS, &x, err,
				 sizeof(err)) ||
	    memdiff_write(out, mem, size, &x, root, &root, path, err,
			  sizeof(err)))
		fail("memdiff", err);
	memdiff_extents_free(&x);
	munmap(mem, size);
	close(fd);
	close(out);
}

static uint8_t ram[64 * 1024];

static void mmio_write(struct virtio_mmio *v, uint64_t offset, uint32_t value)
{
	virtio_mmio_io(v, offset, (uint8_t *)&value, 4, true);
}

/* What Linux's virtio-mmio driver does: features, then each queue. */
static void bring_up(struct virtio_mmio *v)
{
	mmio_write(v, VIRTIO_MMIO_STATUS,
		   VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER);
	mmio_write(v, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	mmio_write(v, VIRTIO_MMIO_DRIVER_FEATURES, 1); /* VERSION_1 */
	mmio_write(v, VIRTIO_MMIO_STATUS,
		   VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
			   VIRTIO_STATUS_FEATURES_OK);
	for (uint32_t q = 0; q < v->ops->num_queues; q++) {
		uint32_t base = 0x1000 + q * 0x4000;

		mmio_write(v, VIRTIO_MMIO_QUEUE_SEL, q);
		mmio_write(v, VIRTIO_MMIO_QUEUE_NUM, 64);
		mmio_write(v, VIRTIO_MMIO_QUEUE_DESC_LOW, base);
		mmio_write(v, VIRTIO_MMIO_QUEUE_DRIVER_LOW, base + 0x1000);
		mmio_write(v, VIRTIO_MMIO_QUEUE_DEVICE_LOW, base + 0x2000);
		mmio_write(v, VIRTIO_MMIO_QUEUE_READY, 1);
	}
	mmio_write(v, VIRTIO_MMIO_STATUS,
		   VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |
			   VIRTIO_STATUS_FEATURES_OK | VIRTIO_STATUS_DRIVER_OK);
}

static void io_byte(void (*io)(void *, uint64_t, uint8_t *, uint32_t, bool),
		    void *dev, uint64_t offset, uint8_t value)
{
	io(dev, offset, &value, 1, true);
}

/* DIR/snapshot_state/NAME: every device's state, @live after a driver
 * set them up. */
static void state_seed(const char *dir, const char *name, bool live)
{
	struct state_file_header header = {
		.mem_size = sizeof(ram),
		.nr_vcpus = 1,
	};
	struct state_writer w;
	struct guest_memory mem;
	struct serial serial;
	struct i8042 i8042;
	struct rtc rtc;
	struct vsock vsock;
	struct net_dev net;
	static const uint8_t mac[6] = GUEST_NET_GUEST_MAC;
	char path[4096], err[512];
	int sv[2];

	fuzz_guest_memory(&mem, ram, sizeof(ram));
	if (serial_init(&serial, (struct irq_line){ 0 }, fuzz_discard_output,
			NULL) ||
	    i8042_init(&i8042, fuzz_ignore_reset, NULL) || rtc_init(&rtc) ||
	    vsock_init(&vsock, VSOCK_DEFAULT_GUEST_CID, fuzz_path("vsock"), -1,
		       &mem, (struct irq_line){ 0 }) ||
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) ||
	    net_init(&net, sv[0], mac, &mem, (struct irq_line){ 0 }))
		fail(name, "cannot set up the devices");
	if (live) {
		io_byte(serial_io, &serial, 3, 0x03);	    /* LCR: 8N1 */
		io_byte(serial_io, &serial, 1, 0x01);	    /* IER: RX data */
		io_byte(i8042_command_io, &i8042, 0, 0xae); /* enable kbd */
		io_byte(rtc_io, &rtc, 0, 0x0b);		    /* select reg B */
		io_byte(rtc_io, &rtc, 1, 0x02);		    /* 24-hour */
		bring_up(vsock_transport(&vsock));
		bring_up(net_transport(&net));
	}
	state_writer_init(&w);
	serial_save(&serial, &w);
	i8042_save(&i8042, &w);
	rtc_save(&rtc, &w);
	vsock_save(&vsock, &w);
	net_save(&net, &w);
	snprintf(path, sizeof(path), "%s/snapshot_state/%s", dir, name);
	unlink(path);
	if (state_writer_save(&w, &header, path, err, sizeof(err)))
		fail(path, err);
	state_writer_free(&w);
	net_stop(&net);
	close(sv[1]);
	vsock_stop(&vsock);
	rtc_destroy(&rtc);
	i8042_destroy(&i8042);
	serial_destroy(&serial);
}

int main(int argc, char **argv)
{
	char tmp[] = "/tmp/thaw-snapshot-seeds-XXXXXX";
	char ws[64], memory[64], hashes[64], diff[64], err[512];
	uint64_t size = PAGES * MEMFILE_PAGE_SIZE, pages, root;

	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	uint8_t *mem = mmap(NULL, size, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED || !mkdtemp(tmp))
		fail("setup", "no memory or no /tmp");
	for (int p = 0; p < PAGES; p++)
		if (p <= 2 || p == 5)
			memset(mem + p * MEMFILE_PAGE_SIZE, 0x40 + p, 100);
	snprintf(ws, sizeof(ws), "%s/workingset.bin", tmp);
	snprintf(memory, sizeof(memory), "%s/memory.img", tmp);
	snprintf(hashes, sizeof(hashes), "%s/pages.xxh3", tmp);
	snprintf(diff, sizeof(diff), "%s/memory.diff", tmp);
	if (workingset_record(mem, size, ws, -1, &pages, err, sizeof(err)))
		fail("workingset_record", err);
	if (memfile_write(mem, size, memory, hashes, &root, err, sizeof(err)))
		fail("memfile_write", err);

	write_diff(memory, diff, size, root);
	seed(argv[1], "diff", CHOICE(DIFF, PAGES), diff);
	seed(argv[1], "workingset", CHOICE(PREFETCH, PAGES), ws);
	seed(argv[1], "hashes-map", CHOICE(MAP, PAGES), hashes);
	seed(argv[1], "hashes-verify", CHOICE(VERIFY, PAGES), hashes);
	unlink(ws);
	unlink(memory);
	unlink(hashes);
	unlink(diff);
	rmdir(tmp);

	state_seed(argv[1], "fresh", false);
	state_seed(argv[1], "live", true);
	return 0;
}
