// SPDX-License-Identifier: Apache-2.0
/*
 * virtio_guest.c - the device tests' guest driver; see virtio_guest.h.
 */
#include "tests/unit/virtio_guest.h"

#include <criterion/criterion.h>
#include <string.h>

static struct virtio_mmio *transport;
static uint8_t *guest;

void virtio_guest_attach(struct virtio_mmio *t, uint8_t *g)
{
	transport = t;
	guest = g;
}

void reg_write(uint64_t offset, uint32_t value)
{
	virtio_mmio_io(transport, offset, (uint8_t *)&value, 4, true);
}

uint32_t reg_read(uint64_t offset)
{
	uint32_t value;

	virtio_mmio_io(transport, offset, (uint8_t *)&value, 4, false);
	return value;
}

struct virtq_desc *desc(int q, uint16_t i)
{
	return (struct virtq_desc *)(guest + VIRTIO_GUEST_QUEUE_GPA(q)) + i;
}

struct virtq_avail *avail(int q)
{
	return (struct virtq_avail *)(guest + VIRTIO_GUEST_QUEUE_GPA(q) +
				      0x1000);
}

struct virtq_used *used(int q)
{
	return (struct virtq_used *)(guest + VIRTIO_GUEST_QUEUE_GPA(q) +
				     0x2000);
}

uint16_t used_idx(int q)
{
	return __atomic_load_n(&used(q)->idx, __ATOMIC_ACQUIRE);
}

void ring_add(int q, uint16_t head)
{
	uint16_t idx = avail(q)->idx;

	avail(q)->ring[idx % VIRTIO_GUEST_QSZ] = head;
	__atomic_store_n(&avail(q)->idx, (uint16_t)(idx + 1), __ATOMIC_RELEASE);
}

void virtio_guest_bring_up(uint64_t features, uint16_t queue_size_max)
{
	uint32_t status = VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER;
	uint16_t queues = transport->ops->num_queues;

	reg_write(VIRTIO_MMIO_STATUS, 0);
	memset(guest + VIRTIO_GUEST_QUEUE_GPA(0), 0,
	       queues * VIRTIO_GUEST_QUEUE_GPA(0));
	reg_write(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
	reg_write(VIRTIO_MMIO_STATUS, status);
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)features);
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(features >> 32));
	status |= VIRTIO_STATUS_FEATURES_OK;
	reg_write(VIRTIO_MMIO_STATUS, status);
	cr_assert(reg_read(VIRTIO_MMIO_STATUS) & VIRTIO_STATUS_FEATURES_OK);
	for (int q = 0; q < queues; q++) {
		uint64_t base = VIRTIO_GUEST_QUEUE_GPA(q);

		reg_write(VIRTIO_MMIO_QUEUE_SEL, q);
		cr_assert_eq(reg_read(VIRTIO_MMIO_QUEUE_NUM_MAX),
			     queue_size_max);
		reg_write(VIRTIO_MMIO_QUEUE_NUM, VIRTIO_GUEST_QSZ);
		reg_write(VIRTIO_MMIO_QUEUE_DESC_LOW, base);
		reg_write(VIRTIO_MMIO_QUEUE_DRIVER_LOW, base + 0x1000);
		reg_write(VIRTIO_MMIO_QUEUE_DEVICE_LOW, base + 0x2000);
		reg_write(VIRTIO_MMIO_QUEUE_READY, 1);
	}
	reg_write(VIRTIO_MMIO_STATUS, status | VIRTIO_STATUS_DRIVER_OK);
	cr_assert_eq(reg_read(VIRTIO_MMIO_STATUS) &
			     VIRTIO_STATUS_DEVICE_NEEDS_RESET,
		     0);
}
