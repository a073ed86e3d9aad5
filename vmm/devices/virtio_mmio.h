/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio_mmio.h - virtio-mmio transport, virtio 1.x ("modern", Version 2).
 *
 * One transport per device, a 4 KiB MMIO window the guest learns about from
 * the kernel command line (virtio_mmio.device=4K@<base>:<irq>).  The
 * transport owns everything generic: feature negotiation, the status state
 * machine, queue setup, interrupt status and the interrupt line.  A backend
 * (vsock, ...) supplies a struct virtio_backend_ops and does the device's
 * actual work with virtio_mmio_pop/push/signal_used.
 *
 * Transport features: VERSION_1 is always offered and required (a legacy
 * driver never gets FEATURES_OK), and INDIRECT_DESC and EVENT_IDX are offered
 * because the virtqueue code implements them.  The backend adds its own
 * device-specific bits.
 *
 * A guest that corrupts a ring does not crash or wedge the VMM: the queue
 * operation fails, the status gains DEVICE_NEEDS_RESET and a configuration
 * change interrupt tells the driver, and the device stays dead until the
 * driver resets it.
 *
 * Snapshots: struct virtio_mmio_state is everything the driver can observe,
 * queue positions included; virtio_mmio_save/restore copy it.
 *
 * Locking: one mutex guards the transport state; vCPU threads (register
 * access) and backend threads (pop/push/signal) all take it.  Backend
 * callbacks are made without it held, so a backend may call back into the
 * transport from them and may use its own locks in any order.
 */
#ifndef THAW_VMM_DEVICES_VIRTIO_MMIO_H
#define THAW_VMM_DEVICES_VIRTIO_MMIO_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/memory.h"
#include "vmm/devices/virtqueue.h"
#include "vmm/irq.h"
#include "snapshot/state.h"

#define VIRTIO_MMIO_WINDOW_SIZE 0x1000
#define VIRTIO_MMIO_MAX_QUEUES 8

#define VIRTIO_MMIO_MAGIC 0x74726976 /* "virt" */
#define VIRTIO_MMIO_VERSION 2
#define VIRTIO_MMIO_VENDOR_ID 0x57414854 /* "THAW" */

/* Register offsets (virtio 1.2, 4.2.2). */
#define VIRTIO_MMIO_MAGIC_VALUE 0x000
#define VIRTIO_MMIO_VERSION_REG 0x004
#define VIRTIO_MMIO_DEVICE_ID 0x008
#define VIRTIO_MMIO_VENDOR_ID_REG 0x00c
#define VIRTIO_MMIO_DEVICE_FEATURES 0x010
#define VIRTIO_MMIO_DEVICE_FEATURES_SEL 0x014
#define VIRTIO_MMIO_DRIVER_FEATURES 0x020
#define VIRTIO_MMIO_DRIVER_FEATURES_SEL 0x024
#define VIRTIO_MMIO_QUEUE_SEL 0x030
#define VIRTIO_MMIO_QUEUE_NUM_MAX 0x034
#define VIRTIO_MMIO_QUEUE_NUM 0x038
#define VIRTIO_MMIO_QUEUE_READY 0x044
#define VIRTIO_MMIO_QUEUE_NOTIFY 0x050
#define VIRTIO_MMIO_INTERRUPT_STATUS 0x060
#define VIRTIO_MMIO_INTERRUPT_ACK 0x064
#define VIRTIO_MMIO_STATUS 0x070
#define VIRTIO_MMIO_QUEUE_DESC_LOW 0x080
#define VIRTIO_MMIO_QUEUE_DESC_HIGH 0x084
#define VIRTIO_MMIO_QUEUE_DRIVER_LOW 0x090
#define VIRTIO_MMIO_QUEUE_DRIVER_HIGH 0x094
#define VIRTIO_MMIO_QUEUE_DEVICE_LOW 0x0a0
#define VIRTIO_MMIO_QUEUE_DEVICE_HIGH 0x0a4
#define VIRTIO_MMIO_SHM_LEN_LOW 0x0b0
#define VIRTIO_MMIO_SHM_LEN_HIGH 0x0b4
#define VIRTIO_MMIO_CONFIG_GENERATION 0x0fc
#define VIRTIO_MMIO_CONFIG 0x100

#define VIRTIO_MMIO_INT_VRING 0x1
#define VIRTIO_MMIO_INT_CONFIG 0x2

#define VIRTIO_STATUS_ACKNOWLEDGE 0x01
#define VIRTIO_STATUS_DRIVER 0x02
#define VIRTIO_STATUS_DRIVER_OK 0x04
#define VIRTIO_STATUS_FEATURES_OK 0x08
#define VIRTIO_STATUS_DEVICE_NEEDS_RESET 0x40
#define VIRTIO_STATUS_FAILED 0x80

#define VIRTIO_F_VERSION_1 32

/*
 * What a device type provides.  Callbacks are made without the transport
 * lock and may call virtio_mmio_pop/push/signal_used/config_changed.
 */
struct virtio_backend_ops {
	uint32_t device_id;
	uint64_t features;	 /* device-specific bits */
	uint16_t num_queues;	 /* 1 .. VIRTIO_MMIO_MAX_QUEUES */
	uint16_t queue_size_max; /* power of two, <= VIRTQ_MAX_SIZE */
	/* Device configuration space, @offset from its start; the guest
	 * picks @offset and @len, so the backend checks them. */
	void (*config_access)(void *backend, uint64_t offset, uint8_t *data,
			      uint32_t len, bool is_write);
	/* The driver made buffers available on @queue. */
	void (*queue_notify)(void *backend, uint16_t queue);
	/* DRIVER_OK: the queues are set up, @features negotiated. */
	void (*activate)(void *backend, uint64_t features);
	/* The driver reset the device; drop all queue work. */
	void (*reset)(void *backend);
};

struct virtio_mmio_state {
	uint32_t status;
	uint32_t device_features_sel;
	uint32_t driver_features_sel;
	uint64_t driver_features;
	uint32_t queue_sel;
	uint32_t interrupt_status;
	uint32_t config_generation;
	struct virtq_state queues[VIRTIO_MMIO_MAX_QUEUES];
};

struct virtio_mmio {
	struct virtio_mmio_state state;
	pthread_mutex_t lock;
	const char *name;
	const struct virtio_backend_ops *ops;
	void *backend;
	const struct guest_memory *mem;
	struct irq_line irq;
};

/* Returns 0, or -1 with a message naming the device if @ops is unusable. */
int virtio_mmio_init(struct virtio_mmio *vm, const char *name,
		     const struct virtio_backend_ops *ops, void *backend,
		     const struct guest_memory *mem, struct irq_line irq);

void virtio_mmio_destroy(struct virtio_mmio *vm);

/* bus_access_fn for the VIRTIO_MMIO_WINDOW_SIZE window. */
void virtio_mmio_io(void *device, uint64_t offset, uint8_t *data, uint32_t len,
		    bool is_write);

/*
 * Takes the next available chain from @queue: 1 and @chain filled, 0 if
 * there is none (or the device is not live), -1 if the ring was malformed,
 * in which case the device now needs a reset.
 */
int virtio_mmio_pop(struct virtio_mmio *vm, uint16_t queue,
		    struct virtq_chain *chain);

/* The driver's avail index of @queue (virtq_avail_idx); 0, or -1 when the
 * device is not live. */
int virtio_mmio_avail_idx(struct virtio_mmio *vm, uint16_t queue,
			  uint16_t *idx);

/*
 * Gives back the last @count chains popped from @queue and not pushed: the
 * driver's buffers are available again, to be popped anew (what a backend
 * does when a frame needs more buffers than the driver has made
 * available).  Nothing when the device is not live.
 */
void virtio_mmio_unpop(struct virtio_mmio *vm, uint16_t queue, uint16_t count);

/* Returns chain @head to the driver with @len bytes written into it.
 * Returns 0, or -1 if the queue was reset meanwhile or @head is bogus. */
int virtio_mmio_push(struct virtio_mmio *vm, uint16_t queue, uint16_t head,
		     uint32_t len);

/*
 * Interrupts the driver for the chains pushed on @queue since the last call,
 * unless it asked not to be (EVENT_IDX or VIRTQ_AVAIL_F_NO_INTERRUPT).
 * Returns whether it did.
 */
bool virtio_mmio_signal_used(struct virtio_mmio *vm, uint16_t queue);

/* The backend changed its configuration space: new generation, interrupt. */
void virtio_mmio_config_changed(struct virtio_mmio *vm);

/* Adds struct virtio_mmio_state as section STATE_DEV_VIRTIO_MMIO, @instance
 * (the transport's index).  The backend must not be using the queues. */
void virtio_mmio_save(struct virtio_mmio *vm, uint32_t instance,
		      struct state_writer *w);

/*
 * Checks and installs a saved state, queues included, and re-drives the IRQ
 * line.  Calls no backend callback: the backend's own restore decides what
 * the restored status means for it.  Returns 0, or -1 after a message with
 * the transport untouched.
 */
int virtio_mmio_restore(struct virtio_mmio *vm, uint32_t instance,
			const struct state_reader *r);

#endif
