// SPDX-License-Identifier: Apache-2.0
/*
 * virtio_driver.c - the hostile guest driver of the virtio harnesses; see
 * virtio_driver.h.  It knows the transport and the split virtqueue, not
 * the device: device features are acked as offered, and the host side is
 * the harness's callback.
 */
#include "tests/fuzz/virtio_driver.h"

#include <string.h>

#include "vmm/devices/virtqueue.h"

bool fuzz_take(struct fuzz_input *in, void *out, size_t n)
{
	if (in->left < n)
		return false;
	memcpy(out, in->p, n);
	in->p += n;
	in->left -= n;
	return true;
}

static void mmio(struct fuzz_virtio *v, uint64_t offset, uint32_t *value,
		 bool write)
{
	virtio_mmio_io(v->transport, offset, (uint8_t *)value, 4, write);
}

static void mmio_write(struct fuzz_virtio *v, uint64_t offset, uint32_t value)
{
	mmio(v, offset, &value, true);
}

static void bring_up(struct fuzz_virtio *v, uint8_t flags)
{
	uint32_t driver = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;
	uint32_t offered = 0;

	mmio_write(v, VIRTIO_MMIO_STATUS, driver);
	if (flags & 2) {
		mmio_write(v, VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
		mmio(v, VIRTIO_MMIO_DEVICE_FEATURES, &offered, false);
		offered &= ~(1u << VIRTIO_F_EVENT_IDX);
	}
	mmio_write(v, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	mmio_write(v, VIRTIO_MMIO_DRIVER_FEATURES,
		   offered | (flags & 1 ? 1u << VIRTIO_F_EVENT_IDX : 0));
	mmio_write(v, VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	mmio_write(v, VIRTIO_MMIO_DRIVER_FEATURES,
		   1u << (VIRTIO_F_VERSION_1 - 32));
	mmio_write(v, VIRTIO_MMIO_STATUS, driver | VIRTIO_STATUS_FEATURES_OK);
	for (uint32_t q = 0; q < v->transport->ops->num_queues; q++) {
		mmio_write(v, VIRTIO_MMIO_QUEUE_SEL, q);
		mmio_write(v, VIRTIO_MMIO_QUEUE_NUM, FUZZ_VIRTIO_QSIZE);
		mmio_write(v, VIRTIO_MMIO_QUEUE_DESC_LOW, FUZZ_VIRTIO_DESC(q));
		mmio_write(v, VIRTIO_MMIO_QUEUE_DRIVER_LOW,
			   FUZZ_VIRTIO_AVAIL(q));
		mmio_write(v, VIRTIO_MMIO_QUEUE_DEVICE_LOW,
			   FUZZ_VIRTIO_USED(q));
		mmio_write(v, VIRTIO_MMIO_QUEUE_READY, 1);
	}
	mmio_write(v, VIRTIO_MMIO_STATUS,
		   driver | VIRTIO_STATUS_FEATURES_OK |
			   VIRTIO_STATUS_DRIVER_OK);
}

bool fuzz_virtio_step(struct fuzz_virtio *v, struct fuzz_input *in)
{
	uint16_t queues = v->transport->ops->num_queues;
	uint8_t op, reg, queue, n, index, flags, next, head;
	uint16_t addr, len;
	uint32_t value;

	if (!fuzz_take(in, &op, 1))
		return false;
	switch (op % OP_COUNT) {
	case OP_MMIO_WRITE:
		if (!fuzz_take(in, &reg, 1) || !fuzz_take(in, &value, 4))
			return false;
		mmio(v, reg * 4u % (VIRTIO_MMIO_CONFIG + 8), &value, true);
		return true;
	case OP_MMIO_READ:
		if (!fuzz_take(in, &reg, 1))
			return false;
		mmio(v, reg * 4u % (VIRTIO_MMIO_CONFIG + 8), &value, false);
		return true;
	case OP_POKE:
		if (!fuzz_take(in, &addr, 2) || !fuzz_take(in, &n, 1) ||
		    in->left < n)
			return false;
		memcpy(v->ram + addr, in->p,
		       n < FUZZ_VIRTIO_RAM - addr ? n : FUZZ_VIRTIO_RAM - addr);
		in->p += n;
		in->left -= n;
		return true;
	case OP_RUN:
		v->pass(v->device);
		return true;
	case OP_NOTIFY:
		if (!fuzz_take(in, &queue, 1))
			return false;
		mmio_write(v, VIRTIO_MMIO_QUEUE_NOTIFY, queue);
		v->pass(v->device);
		return true;
	case OP_BRING_UP:
		if (!fuzz_take(in, &flags, 1))
			return false;
		bring_up(v, flags);
		return true;
	case OP_DESC: {
		struct virtq_desc d;

		if (!fuzz_take(in, &queue, 1) || !fuzz_take(in, &index, 1) ||
		    !fuzz_take(in, &addr, 2) || !fuzz_take(in, &len, 2) ||
		    !fuzz_take(in, &flags, 1) || !fuzz_take(in, &next, 1))
			return false;
		d = (struct virtq_desc){
			.addr = addr, .len = len, .flags = flags, .next = next
		};
		memcpy(v->ram + FUZZ_VIRTIO_DESC(queue % queues) +
			       index % FUZZ_VIRTIO_QSIZE * sizeof(d),
		       &d, sizeof(d));
		return true;
	}
	case OP_AVAIL: {
		if (!fuzz_take(in, &queue, 1) || !fuzz_take(in, &head, 1))
			return false;
		struct virtq_avail *avail =
			(void *)(v->ram + FUZZ_VIRTIO_AVAIL(queue % queues));
		uint16_t idx = avail->idx;

		avail->ring[idx % FUZZ_VIRTIO_QSIZE] = head;
		__atomic_store_n(&avail->idx, (uint16_t)(idx + 1),
				 __ATOMIC_RELEASE);
		return true;
	}
	case OP_DEVICE_A:
		if (!fuzz_take(in, &n, 1) || in->left < n)
			return false;
		v->host(v->device, OP_DEVICE_A, in->p, n);
		in->p += n;
		in->left -= n;
		v->pass(v->device);
		return true;
	case OP_DEVICE_B:
		v->host(v->device, OP_DEVICE_B, NULL, 0);
		v->pass(v->device);
		return true;
	}
	return false;
}
