/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio_driver.h - the input language of the virtio device harnesses
 * (virtio_vsock, virtio_net), shared with virtio_seeds, which writes their
 * seeds in it, and the guest driver that speaks it (virtio_driver.c).
 *
 * An input is a sequence of operations, each an opcode byte (modulo
 * OP_COUNT) and its arguments, little endian; an operation cut short ends
 * the input.  The guest has FUZZ_VIRTIO_RAM bytes of RAM from address 0;
 * OP_BRING_UP and OP_DESC/OP_AVAIL use the layout below, which a driver
 * written by the fuzzer is free to ignore.  The first operations are the
 * guest driver's, the same for every device; OP_DEVICE_A and OP_DEVICE_B
 * are the host side's, each harness's own.
 */
#ifndef THAW_FUZZ_VIRTIO_DRIVER_H
#define THAW_FUZZ_VIRTIO_DRIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vmm/devices/virtio_mmio.h"

#define FUZZ_VIRTIO_RAM (64 * 1024)
#define FUZZ_VIRTIO_QSIZE 64
#define FUZZ_VIRTIO_QUEUES 3 /* room for this many queues' rings */
/* Queue q: descriptors, then the driver (avail) and device (used) rings. */
#define FUZZ_VIRTIO_DESC(q) (0x1000u + (q)*0x4000u)
#define FUZZ_VIRTIO_AVAIL(q) (FUZZ_VIRTIO_DESC(q) + 0x1000u)
#define FUZZ_VIRTIO_USED(q) (FUZZ_VIRTIO_DESC(q) + 0x2000u)
/* Free for packet buffers: [0xd000, FUZZ_VIRTIO_RAM). */
#define FUZZ_VIRTIO_BUFFERS 0xd000u

enum virtio_fuzz_op {
	OP_MMIO_WRITE, /* u8 register (offset / 4), u32 value */
	OP_MMIO_READ,  /* u8 register */
	OP_POKE,       /* u16 address, u8 n, n bytes into RAM */
	OP_RUN,	       /* one pass of the device's work */
	OP_NOTIFY,     /* u8 queue: QueueNotify, then a pass */
	OP_BRING_UP,   /* u8 bit 0: EVENT_IDX, bit 1: every device feature
			  offered; the driver's set-up */
	OP_DESC,       /* u8 queue, u8 index, u16 addr, u16 len, u8 flags,
			  u8 next */
	OP_AVAIL,      /* u8 queue, u8 head: on the avail ring, idx + 1 */
	OP_DEVICE_A,   /* u8 n, n bytes: the harness's host side; a pass */
	OP_DEVICE_B,   /* the harness's host side, no argument; a pass */
	OP_COUNT,
};

/* virtio_vsock's host side: a client connects (or the last one) and
 * writes; the oldest client hangs up. */
#define OP_CLIENT OP_DEVICE_A
#define OP_CLIENT_CLOSE OP_DEVICE_B
/* virtio_net's: a frame arrives on the TAP; the TAP's side drains. */
#define OP_TAP_FRAME OP_DEVICE_A
#define OP_TAP_DRAIN OP_DEVICE_B

struct fuzz_input {
	const uint8_t *p;
	size_t left;
};

/* The next @n bytes into @out; false (nothing taken) when fewer are left. */
bool fuzz_take(struct fuzz_input *in, void *out, size_t n);

struct fuzz_virtio {
	struct virtio_mmio *transport;
	uint8_t *ram; /* FUZZ_VIRTIO_RAM bytes */
	void *device;
	/* One pass of the device's work, and what the host side got read
	 * away. */
	void (*pass)(void *device);
	/* OP_DEVICE_A with its @n bytes (@data), or OP_DEVICE_B (NULL, 0). */
	void (*host)(void *device, enum virtio_fuzz_op op, const uint8_t *data,
		     size_t n);
};

/* Runs the next operation of @in; false when the input is used up. */
bool fuzz_virtio_step(struct fuzz_virtio *v, struct fuzz_input *in);

#endif
