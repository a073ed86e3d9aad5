/* SPDX-License-Identifier: Apache-2.0 */
/*
 * virtio_guest.h - the guest driver side the virtio device tests share:
 * register accesses through virtio_mmio_io and split virtqueues laid out
 * in test guest memory as a Linux driver would set them up.  One device
 * at a time, named by virtio_guest_attach(); each helper fails the calling
 * test with a criterion assertion.
 *
 * Queue q's descriptor table is at VIRTIO_GUEST_QUEUE_GPA(q), its avail
 * ring 4 KiB above, its used ring 8 KiB above; queues have
 * VIRTIO_GUEST_QSZ entries.
 */
#ifndef THAW_TEST_VIRTIO_GUEST_H
#define THAW_TEST_VIRTIO_GUEST_H

#include <stdint.h>

#include "vmm/devices/virtio_mmio.h"

#define VIRTIO_GUEST_QSZ 64
#define VIRTIO_GUEST_QUEUE_GPA(q) (0x10000ULL * ((q) + 1))

/* The device @transport, in guest memory @guest, from now on. */
void virtio_guest_attach(struct virtio_mmio *transport, uint8_t *guest);

void reg_write(uint64_t offset, uint32_t value);
uint32_t reg_read(uint64_t offset);

struct virtq_desc *desc(int q, uint16_t i);
struct virtq_avail *avail(int q);
struct virtq_used *used(int q);
uint16_t used_idx(int q);

/* Puts chain @head on queue @q's avail ring (no notification). */
void ring_add(int q, uint16_t head);

/*
 * Resets the device and sets it up as a driver does: @features accepted
 * (asserted), every one of the device's queues empty, of
 * VIRTIO_GUEST_QSZ entries, and ready, the queue size it offers being
 * @queue_size_max; then DRIVER_OK, and no reset needed.
 */
void virtio_guest_bring_up(uint64_t features, uint16_t queue_size_max);

#endif
