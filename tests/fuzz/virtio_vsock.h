/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio_vsock.h - the input language of the virtio_vsock harness, shared
 * with vsock_seeds, which writes its seeds in it.
 *
 * An input is a sequence of operations, each an opcode byte (modulo
 * OP_COUNT) and its arguments, little endian; an operation cut short ends
 * the input.  The guest has VSOCK_FUZZ_RAM bytes of RAM from address 0;
 * OP_BRING_UP and OP_DESC/OP_AVAIL use the layout below, which a driver
 * written by the fuzzer is free to ignore.
 */
#ifndef THAW_FUZZ_VIRTIO_VSOCK_H
#define THAW_FUZZ_VIRTIO_VSOCK_H

#define VSOCK_FUZZ_RAM (64 * 1024)
#define VSOCK_FUZZ_QSIZE 64
/* Queue q: descriptors, then the driver (avail) and device (used) rings. */
#define VSOCK_FUZZ_DESC(q) (0x1000u + (q)*0x4000u)
#define VSOCK_FUZZ_AVAIL(q) (VSOCK_FUZZ_DESC(q) + 0x1000u)
#define VSOCK_FUZZ_USED(q) (VSOCK_FUZZ_DESC(q) + 0x2000u)
/* Free for packet buffers: [0xd000, VSOCK_FUZZ_RAM). */
#define VSOCK_FUZZ_BUFFERS 0xd000u
#define VSOCK_FUZZ_CLIENTS 4

enum vsock_fuzz_op {
	OP_MMIO_WRITE,	 /* u8 register (offset / 4), u32 value */
	OP_MMIO_READ,	 /* u8 register */
	OP_POKE,	 /* u16 address, u8 n, n bytes into RAM */
	OP_RUN,		 /* one pass of the device's work */
	OP_NOTIFY,	 /* u8 queue: QueueNotify, then a pass */
	OP_BRING_UP,	 /* u8 bit 0: EVENT_IDX; the driver's set-up */
	OP_DESC,	 /* u8 queue, u8 index, u16 addr, u16 len, u8 flags,
			    u8 next */
	OP_AVAIL,	 /* u8 queue, u8 head: on the avail ring, idx + 1 */
	OP_CLIENT,	 /* u8 n, n bytes: a host client connects (or the
			    last one) and writes them; then a pass */
	OP_CLIENT_CLOSE, /* the oldest host client hangs up; a pass */
	OP_COUNT,
};

#endif
