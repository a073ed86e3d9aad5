/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtqueue.h - the device side of a virtio 1.x split virtqueue.
 *
 * Pure functions over guest memory and a struct virtq_state: no locking, no
 * interrupts, no knowledge of the transport.  The virtio-mmio transport wraps
 * them with its lock and turns a malformed ring into DEVICE_NEEDS_RESET;
 * backends use them only through that wrapper.
 *
 * The driver is untrusted.  Popping a chain checks every index against the
 * table it indexes, every buffer against guest memory, and the chain length
 * against the queue size (which also ends descriptor loops); an indirect
 * table is accepted only as the sole descriptor of a chain, as Linux builds
 * them, and may not nest.  A rejected chain is reported with a static string
 * saying what was wrong.
 *
 * Memory ordering follows the spec: avail->idx is loaded with acquire before
 * the ring entries it covers are read; used->idx is stored with release after
 * the used element; and a full fence separates publishing an index from
 * reading the other side's notification-suppression fields (used_event,
 * avail->flags, and avail->idx after writing avail_event), because those are
 * store-then-load orderings that only a full fence gives.
 *
 * The host is x86: guest and host are both little endian, so ring fields are
 * used directly.
 */
#ifndef THAW_VMM_DEVICES_VIRTQUEUE_H
#define THAW_VMM_DEVICES_VIRTQUEUE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "vmm/memory.h"

/* Feature bits this implementation honours. */
#define VIRTIO_F_INDIRECT_DESC 28
#define VIRTIO_F_EVENT_IDX 29

#define VIRTQ_DESC_F_NEXT 1
#define VIRTQ_DESC_F_WRITE 2
#define VIRTQ_DESC_F_INDIRECT 4
#define VIRTQ_AVAIL_F_NO_INTERRUPT 1

/*
 * Largest queue a device may offer.  A valid chain is never longer than its
 * queue, so this also bounds struct virtq_chain.
 */
#define VIRTQ_MAX_SIZE 256

/* Ring layouts as the driver writes them in guest memory. */
struct virtq_desc {
	uint64_t addr;
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct virtq_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[]; /* [size], then used_event */
};

struct virtq_used_elem {
	uint32_t id;
	uint32_t len;
};

struct virtq_used {
	uint16_t flags;
	uint16_t idx;
	struct virtq_used_elem ring[]; /* [size], then avail_event */
};

/* Guest-visible state of one queue: the driver's setup plus the device's
 * positions in the rings. */
struct virtq_state {
	uint16_t size;
	bool ready;
	uint64_t desc_addr;
	uint64_t avail_addr;
	uint64_t used_addr;
	uint16_t next_avail;
	uint16_t next_used;
	/* next_used when the need for an interrupt was last decided. */
	uint16_t signalled_used;
};

/* One buffer of a chain, already translated to a host address. */
struct virtq_segment {
	void *addr;
	uint32_t len;
	bool writable; /* device-writable: the device fills it */
};

struct virtq_chain {
	uint16_t head; /* what virtq_push must return */
	uint16_t count;
	/* Device-readable segments first, then device-writable ones. */
	struct virtq_segment segments[VIRTQ_MAX_SIZE];
};

/*
 * Checks the driver's setup before the queue goes live: size a power of two
 * no larger than @max_size, rings aligned and inside guest memory.  On
 * failure returns false and points @error at the reason.
 */
bool virtq_layout_valid(const struct guest_memory *mem,
			const struct virtq_state *vq, uint16_t max_size,
			const char **error);

/*
 * Takes the next available chain.  Returns 1 and fills @chain, 0 if the
 * queue is empty or not ready, or -1 with @error set if the driver's rings
 * are malformed.  @features are the negotiated ones.
 */
int virtq_pop(const struct guest_memory *mem, struct virtq_state *vq,
	      uint64_t features, struct virtq_chain *chain, const char **error);

/*
 * The driver's avail->idx: how many buffers it has ever made available.
 * Returns 0, or -1 when the queue is not ready or its ring is not RAM.
 */
int virtq_avail_idx(const struct guest_memory *mem,
		    const struct virtq_state *vq, uint16_t *idx);

/*
 * The device-readable (@writable false) or device-writable part of @chain
 * as iovecs into @iov (room for VIRTQ_MAX_SIZE); returns how many, their
 * bytes in @total.
 */
int virtq_chain_iov(const struct virtq_chain *chain, bool writable,
		    struct iovec *iov, uint64_t *total);

/* Hands chain @head back with @len bytes written.  Returns 0, or -1 if the
 * queue is not ready or @head is not a descriptor index. */
int virtq_push(const struct guest_memory *mem, struct virtq_state *vq,
	       uint16_t head, uint32_t len);

/* Whether the driver wants an interrupt for what was pushed since the last
 * call, honouring EVENT_IDX's used_event or else VIRTQ_AVAIL_F_NO_INTERRUPT. */
bool virtq_needs_interrupt(const struct guest_memory *mem,
			   struct virtq_state *vq, uint64_t features);

#endif
