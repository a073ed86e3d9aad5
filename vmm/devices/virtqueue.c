// SPDX-License-Identifier: Apache-2.0
/*
 * virtqueue.c - split virtqueue, device side; see virtqueue.h.
 *
 * Descriptors are copied out of guest memory with memcpy: an indirect table
 * may sit at any address, and the guest may rewrite a descriptor while we
 * look at it, so each is read exactly once and checked on the copy.
 */
#include "vmm/devices/virtqueue.h"

#include <stddef.h>
#include <string.h>

static inline bool has_feature(uint64_t features, unsigned int bit)
{
	return features & (1ULL << bit);
}

static uint8_t *desc_table(const struct guest_memory *mem,
			   const struct virtq_state *vq)
{
	return guest_memory_ptr(mem, vq->desc_addr,
				(uint64_t)vq->size * sizeof(struct virtq_desc));
}

static struct virtq_avail *avail_ring(const struct guest_memory *mem,
				      const struct virtq_state *vq)
{
	return guest_memory_ptr(mem, vq->avail_addr,
				sizeof(struct virtq_avail) +
					((uint64_t)vq->size + 1) *
						sizeof(uint16_t));
}

static struct virtq_used *used_ring(const struct guest_memory *mem,
				    const struct virtq_state *vq)
{
	return guest_memory_ptr(mem, vq->used_addr,
				sizeof(struct virtq_used) +
					(uint64_t)vq->size *
						sizeof(struct virtq_used_elem) +
					sizeof(uint16_t));
}

bool virtq_layout_valid(const struct guest_memory *mem,
			const struct virtq_state *vq, uint16_t max_size,
			const char **error)
{
	if (vq->size == 0 || vq->size > max_size ||
	    (vq->size & (vq->size - 1))) {
		*error = "queue size is not a power of two up to the maximum";
		return false;
	}
	if (vq->desc_addr % 16 || vq->avail_addr % 2 || vq->used_addr % 4) {
		*error = "ring address is misaligned";
		return false;
	}
	if (!desc_table(mem, vq) || !avail_ring(mem, vq) ||
	    !used_ring(mem, vq)) {
		*error = "ring lies outside guest memory";
		return false;
	}
	return true;
}

static int reject(const char **error, const char *reason)
{
	*error = reason;
	return -1;
}

static int walk_chain(const struct guest_memory *mem,
		      const struct virtq_state *vq, uint64_t features,
		      uint16_t head, struct virtq_chain *chain,
		      const char **error)
{
	const uint8_t *table = desc_table(mem, vq);
	uint32_t table_size = vq->size;
	bool in_indirect_table = false;
	bool seen_writable = false;
	uint32_t index = head;

	chain->head = head;
	chain->count = 0;
	for (;;) {
		struct virtq_desc desc;
		bool writable;
		void *buffer;

		if (index >= table_size)
			return reject(error, "descriptor index out of range");
		if (chain->count == vq->size)
			return reject(error,
				      "descriptor chain longer than the queue");
		memcpy(&desc, table + (size_t)index * sizeof(desc),
		       sizeof(desc));

		if (desc.flags & VIRTQ_DESC_F_INDIRECT) {
			if (!has_feature(features, VIRTIO_F_INDIRECT_DESC))
				return reject(error, "indirect descriptor "
						     "without the feature");
			if (in_indirect_table || chain->count ||
			    (desc.flags & VIRTQ_DESC_F_NEXT))
				return reject(error, "indirect descriptor not "
						     "alone in its chain");
			if (desc.len == 0 || desc.len % sizeof(desc))
				return reject(error, "indirect table length "
						     "not a multiple of 16");
			table = guest_memory_ptr(mem, desc.addr, desc.len);
			if (!table)
				return reject(error, "indirect table outside "
						     "guest memory");
			table_size = desc.len / sizeof(desc);
			in_indirect_table = true;
			index = 0;
			continue;
		}

		buffer = guest_memory_ptr(mem, desc.addr, desc.len);
		if (!buffer)
			return reject(error, "buffer outside guest memory");
		writable = desc.flags & VIRTQ_DESC_F_WRITE;
		if (seen_writable && !writable)
			return reject(error, "device-readable buffer after a "
					     "device-writable one");
		seen_writable = writable;
		chain->segments[chain->count++] = (struct virtq_segment){
			.addr = buffer,
			.len = desc.len,
			.writable = writable,
		};
		if (!(desc.flags & VIRTQ_DESC_F_NEXT))
			return 0;
		index = desc.next;
	}
}

int virtq_pop(const struct guest_memory *mem, struct virtq_state *vq,
	      uint64_t features, struct virtq_chain *chain, const char **error)
{
	struct virtq_avail *avail;
	struct virtq_used *used;
	uint16_t avail_idx;
	uint16_t head;

	if (!vq->ready)
		return 0;
	avail = avail_ring(mem, vq);
	used = used_ring(mem, vq);
	if (!avail || !used)
		return reject(error, "ring lies outside guest memory");

	avail_idx = __atomic_load_n(&avail->idx, __ATOMIC_ACQUIRE);
	if (avail_idx == vq->next_avail &&
	    has_feature(features, VIRTIO_F_EVENT_IDX)) {
		/* Ask for a notification at the next buffer, then look once
		 * more: a buffer added before the driver could see our
		 * avail_event would otherwise sit unnoticed. */
		__atomic_store_n((uint16_t *)&used->ring[vq->size],
				 vq->next_avail, __ATOMIC_RELAXED);
		__atomic_thread_fence(__ATOMIC_SEQ_CST);
		avail_idx = __atomic_load_n(&avail->idx, __ATOMIC_ACQUIRE);
	}
	if (avail_idx == vq->next_avail)
		return 0;
	if ((uint16_t)(avail_idx - vq->next_avail) > vq->size)
		return reject(error, "available index ran ahead of the queue");

	head = __atomic_load_n(&avail->ring[vq->next_avail % vq->size],
			       __ATOMIC_RELAXED);
	if (walk_chain(mem, vq, features, head, chain, error))
		return -1;
	vq->next_avail++;
	return 1;
}

int virtq_avail_idx(const struct guest_memory *mem,
		    const struct virtq_state *vq, uint16_t *idx)
{
	struct virtq_avail *avail = vq->ready ? avail_ring(mem, vq) : NULL;

	if (!avail)
		return -1;
	*idx = __atomic_load_n(&avail->idx, __ATOMIC_ACQUIRE);
	return 0;
}

int virtq_chain_iov(const struct virtq_chain *chain, bool writable,
		    struct iovec *iov, uint64_t *total)
{
	int cnt = 0;

	*total = 0;
	for (uint16_t i = 0; i < chain->count; i++) {
		const struct virtq_segment *s = &chain->segments[i];

		if (s->writable != writable)
			continue;
		iov[cnt].iov_base = s->addr;
		iov[cnt].iov_len = s->len;
		cnt++;
		*total += s->len;
	}
	return cnt;
}

int virtq_push(const struct guest_memory *mem, struct virtq_state *vq,
	       uint16_t head, uint32_t len)
{
	struct virtq_used *used;
	struct virtq_used_elem *elem;

	if (!vq->ready || head >= vq->size)
		return -1;
	used = used_ring(mem, vq);
	if (!used)
		return -1;
	elem = &used->ring[vq->next_used % vq->size];
	elem->id = head;
	elem->len = len;
	vq->next_used++;
	__atomic_store_n(&used->idx, vq->next_used, __ATOMIC_RELEASE);
	return 0;
}

bool virtq_needs_interrupt(const struct guest_memory *mem,
			   struct virtq_state *vq, uint64_t features)
{
	uint16_t old_used = vq->signalled_used;
	uint16_t new_used = vq->next_used;
	struct virtq_avail *avail;
	uint16_t used_event;

	if (!vq->ready || old_used == new_used)
		return false;
	avail = avail_ring(mem, vq);
	if (!avail)
		return false;
	vq->signalled_used = new_used;

	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	if (has_feature(features, VIRTIO_F_EVENT_IDX)) {
		used_event = __atomic_load_n(&avail->ring[vq->size],
					     __ATOMIC_RELAXED);
		/* vring_need_event(): did used_event fall in
		 * [old_used, new_used)? */
		return (uint16_t)(new_used - used_event - 1) <
		       (uint16_t)(new_used - old_used);
	}
	return !(__atomic_load_n(&avail->flags, __ATOMIC_RELAXED) &
		 VIRTQ_AVAIL_F_NO_INTERRUPT);
}
