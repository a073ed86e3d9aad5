// SPDX-License-Identifier: Apache-2.0
/*
 * virtio_mmio.c - virtio-mmio transport; see virtio_mmio.h.
 *
 * A register access is decoded under the lock and may leave one backend call
 * to make (notify, activate, reset); that call happens after unlocking.
 */
#include "vmm/devices/virtio_mmio.h"

#include <stdio.h>
#include <string.h>

#include "vmm/devices/device_state.h"
#include "common/log.h"

#define TRANSPORT_FEATURES                                             \
	((1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_F_EVENT_IDX) | \
	 (1ULL << VIRTIO_F_INDIRECT_DESC))

#define KNOWN_STATUS                                           \
	(VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER |    \
	 VIRTIO_STATUS_DRIVER_OK | VIRTIO_STATUS_FEATURES_OK | \
	 VIRTIO_STATUS_DEVICE_NEEDS_RESET | VIRTIO_STATUS_FAILED)
#define INTERRUPT_REASONS (VIRTIO_MMIO_INT_VRING | VIRTIO_MMIO_INT_CONFIG)

enum backend_call_kind {
	BACKEND_CALL_NONE,
	BACKEND_CALL_NOTIFY,
	BACKEND_CALL_ACTIVATE,
	BACKEND_CALL_RESET,
};

struct backend_call {
	enum backend_call_kind kind;
	uint16_t queue;
	uint64_t features;
};

int virtio_mmio_init(struct virtio_mmio *vm, const char *name,
		     const struct virtio_backend_ops *ops, void *backend,
		     const struct guest_memory *mem, struct irq_line irq)
{
	uint16_t size_max = ops->queue_size_max;
	int err;

	if (!ops->config_access || !ops->queue_notify || !ops->activate ||
	    !ops->reset) {
		log_error("virtio-mmio %s: backend callback missing", name);
		return -1;
	}
	if (ops->num_queues == 0 || ops->num_queues > VIRTIO_MMIO_MAX_QUEUES) {
		log_error("virtio-mmio %s: %u queues, limit is %d", name,
			  ops->num_queues, VIRTIO_MMIO_MAX_QUEUES);
		return -1;
	}
	if (size_max == 0 || size_max > VIRTQ_MAX_SIZE ||
	    (size_max & (size_max - 1))) {
		log_error("virtio-mmio %s: queue size %u is not a power of two "
			  "up to %d",
			  name, size_max, VIRTQ_MAX_SIZE);
		return -1;
	}
	memset(vm, 0, sizeof(*vm));
	err = pthread_mutex_init(&vm->lock, NULL);
	if (err) {
		log_error("virtio-mmio %s: pthread_mutex_init: %s", name,
			  strerror(err));
		return -1;
	}
	vm->name = name;
	vm->ops = ops;
	vm->backend = backend;
	vm->mem = mem;
	vm->irq = irq;
	return 0;
}

void virtio_mmio_destroy(struct virtio_mmio *vm)
{
	pthread_mutex_destroy(&vm->lock);
}

static uint64_t device_features(const struct virtio_mmio *vm)
{
	return vm->ops->features | TRANSPORT_FEATURES;
}

static void update_irq(struct virtio_mmio *vm)
{
	irq_line_set(&vm->irq, vm->state.interrupt_status != 0);
}

static void raise_interrupt(struct virtio_mmio *vm, uint32_t reason)
{
	vm->state.interrupt_status |= reason;
	update_irq(vm);
}

static void device_needs_reset(struct virtio_mmio *vm, uint32_t queue,
			       const char *why)
{
	/* The guest's doing, as often as it resets the device: limited. */
	log_limited(LOG_LEVEL_WARNING,
		    "virtio-mmio %s: queue %u: %s; device needs reset",
		    vm->name, queue, why);
	vm->state.status |= VIRTIO_STATUS_DEVICE_NEEDS_RESET;
	raise_interrupt(vm, VIRTIO_MMIO_INT_CONFIG);
}

static bool device_live(const struct virtio_mmio_state *s)
{
	return (s->status & VIRTIO_STATUS_DRIVER_OK) &&
	       !(s->status & VIRTIO_STATUS_DEVICE_NEEDS_RESET);
}

static struct virtq_state *selected_queue(struct virtio_mmio *vm)
{
	uint32_t sel = vm->state.queue_sel;

	return sel < vm->ops->num_queues ? &vm->state.queues[sel] : NULL;
}

/* Queue setup registers are frozen while the queue is live. */
static struct virtq_state *configurable_queue(struct virtio_mmio *vm)
{
	struct virtq_state *vq = selected_queue(vm);

	return vq && !vq->ready ? vq : NULL;
}

static void set_low(uint64_t *field, uint32_t value)
{
	*field = (*field & 0xffffffff00000000ULL) | value;
}

static void set_high(uint64_t *field, uint32_t value)
{
	*field = (*field & 0xffffffffULL) | (uint64_t)value << 32;
}

static void write_queue_address(struct virtio_mmio *vm, uint64_t offset,
				uint32_t value)
{
	struct virtq_state *vq = configurable_queue(vm);
	uint64_t *field;

	if (!vq)
		return;
	if (offset < VIRTIO_MMIO_QUEUE_DRIVER_LOW)
		field = &vq->desc_addr;
	else if (offset < VIRTIO_MMIO_QUEUE_DEVICE_LOW)
		field = &vq->avail_addr;
	else
		field = &vq->used_addr;
	/* Each LOW register sits at a multiple of 8, its HIGH right after. */
	if (offset % 8 == 0)
		set_low(field, value);
	else
		set_high(field, value);
}

static void write_queue_ready(struct virtio_mmio *vm, uint32_t value)
{
	struct virtq_state *vq = selected_queue(vm);
	const char *error;

	if (!vq)
		return;
	if (!value) {
		vq->ready = false;
		return;
	}
	if (vq->ready)
		return;
	if (!virtq_layout_valid(vm->mem, vq, vm->ops->queue_size_max, &error)) {
		device_needs_reset(vm, vm->state.queue_sel, error);
		return;
	}
	vq->next_avail = 0;
	vq->next_used = 0;
	vq->signalled_used = 0;
	vq->ready = true;
}

static bool features_acceptable(const struct virtio_mmio *vm, uint64_t driver)
{
	return !(driver & ~device_features(vm)) &&
	       (driver & (1ULL << VIRTIO_F_VERSION_1));
}

static struct backend_call write_status(struct virtio_mmio *vm, uint32_t value)
{
	struct virtio_mmio_state *s = &vm->state;
	uint32_t old = s->status;

	if (value == 0) {
		memset(s, 0, sizeof(*s));
		update_irq(vm);
		return (struct backend_call){ .kind = BACKEND_CALL_RESET };
	}
	/* NEEDS_RESET is the device's to set and only a reset clears it.
	 * Bits the spec does not define do not stick, so a restore can
	 * reject a status holding them. */
	value = (value & KNOWN_STATUS & ~VIRTIO_STATUS_DEVICE_NEEDS_RESET) |
		(old & VIRTIO_STATUS_DEVICE_NEEDS_RESET);
	/* Refusing a feature set means not letting FEATURES_OK stick: the
	 * driver reads the status back to find out. */
	if ((value & VIRTIO_STATUS_FEATURES_OK) &&
	    !(old & VIRTIO_STATUS_FEATURES_OK) &&
	    !features_acceptable(vm, s->driver_features))
		value &= ~VIRTIO_STATUS_FEATURES_OK;
	s->status = value;

	if ((value & VIRTIO_STATUS_DRIVER_OK) &&
	    !(old & VIRTIO_STATUS_DRIVER_OK) &&
	    (value & VIRTIO_STATUS_FEATURES_OK) && device_live(s))
		return (struct backend_call){
			.kind = BACKEND_CALL_ACTIVATE,
			.features = s->driver_features,
		};
	return (struct backend_call){ .kind = BACKEND_CALL_NONE };
}

static struct backend_call write_register(struct virtio_mmio *vm,
					  uint64_t offset, uint32_t value)
{
	struct virtio_mmio_state *s = &vm->state;
	struct virtq_state *vq;

	switch (offset) {
	case VIRTIO_MMIO_DEVICE_FEATURES_SEL:
		s->device_features_sel = value;
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES:
		if (s->status & VIRTIO_STATUS_FEATURES_OK)
			break; /* negotiation is over */
		if (s->driver_features_sel == 0)
			set_low(&s->driver_features, value);
		else if (s->driver_features_sel == 1)
			set_high(&s->driver_features, value);
		break;
	case VIRTIO_MMIO_DRIVER_FEATURES_SEL:
		s->driver_features_sel = value;
		break;
	case VIRTIO_MMIO_QUEUE_SEL:
		s->queue_sel = value;
		break;
	case VIRTIO_MMIO_QUEUE_NUM:
		vq = configurable_queue(vm);
		/* Too large to store is invalid: layout check rejects 0. */
		if (vq)
			vq->size = value <= VIRTQ_MAX_SIZE ? value : 0;
		break;
	case VIRTIO_MMIO_QUEUE_READY:
		write_queue_ready(vm, value);
		break;
	case VIRTIO_MMIO_QUEUE_NOTIFY:
		if (value < vm->ops->num_queues && s->queues[value].ready &&
		    device_live(s))
			return (struct backend_call){
				.kind = BACKEND_CALL_NOTIFY,
				.queue = (uint16_t)value,
			};
		break;
	case VIRTIO_MMIO_INTERRUPT_ACK:
		s->interrupt_status &= ~value;
		update_irq(vm);
		break;
	case VIRTIO_MMIO_STATUS:
		return write_status(vm, value);
	case VIRTIO_MMIO_QUEUE_DESC_LOW:
	case VIRTIO_MMIO_QUEUE_DESC_HIGH:
	case VIRTIO_MMIO_QUEUE_DRIVER_LOW:
	case VIRTIO_MMIO_QUEUE_DRIVER_HIGH:
	case VIRTIO_MMIO_QUEUE_DEVICE_LOW:
	case VIRTIO_MMIO_QUEUE_DEVICE_HIGH:
		write_queue_address(vm, offset, value);
		break;
	default:
		break; /* read-only or unknown */
	}
	return (struct backend_call){ .kind = BACKEND_CALL_NONE };
}

static uint32_t read_register(struct virtio_mmio *vm, uint64_t offset)
{
	const struct virtio_mmio_state *s = &vm->state;
	const struct virtq_state *vq = selected_queue(vm);
	uint64_t features = device_features(vm);

	switch (offset) {
	case VIRTIO_MMIO_MAGIC_VALUE:
		return VIRTIO_MMIO_MAGIC;
	case VIRTIO_MMIO_VERSION_REG:
		return VIRTIO_MMIO_VERSION;
	case VIRTIO_MMIO_DEVICE_ID:
		return vm->ops->device_id;
	case VIRTIO_MMIO_VENDOR_ID_REG:
		return VIRTIO_MMIO_VENDOR_ID;
	case VIRTIO_MMIO_DEVICE_FEATURES:
		if (s->device_features_sel == 0)
			return (uint32_t)features;
		if (s->device_features_sel == 1)
			return (uint32_t)(features >> 32);
		return 0;
	case VIRTIO_MMIO_QUEUE_NUM_MAX:
		return vq ? vm->ops->queue_size_max : 0;
	case VIRTIO_MMIO_QUEUE_READY:
		return vq ? vq->ready : 0;
	case VIRTIO_MMIO_INTERRUPT_STATUS:
		return s->interrupt_status;
	case VIRTIO_MMIO_STATUS:
		return s->status;
	case VIRTIO_MMIO_SHM_LEN_LOW:
	case VIRTIO_MMIO_SHM_LEN_HIGH:
		return 0xffffffff; /* no shared memory regions */
	case VIRTIO_MMIO_CONFIG_GENERATION:
		return s->config_generation;
	default:
		return 0;
	}
}

static void make_backend_call(struct virtio_mmio *vm, struct backend_call call)
{
	switch (call.kind) {
	case BACKEND_CALL_NOTIFY:
		vm->ops->queue_notify(vm->backend, call.queue);
		break;
	case BACKEND_CALL_ACTIVATE:
		vm->ops->activate(vm->backend, call.features);
		break;
	case BACKEND_CALL_RESET:
		vm->ops->reset(vm->backend);
		break;
	case BACKEND_CALL_NONE:
		break;
	}
}

void virtio_mmio_io(void *device, uint64_t offset, uint8_t *data, uint32_t len,
		    bool is_write)
{
	struct virtio_mmio *vm = device;
	struct backend_call call = { .kind = BACKEND_CALL_NONE };
	uint32_t value;

	if (offset >= VIRTIO_MMIO_CONFIG) {
		vm->ops->config_access(vm->backend, offset - VIRTIO_MMIO_CONFIG,
				       data, len, is_write);
		return;
	}
	/* The spec allows only aligned 32-bit register accesses. */
	if (len != 4 || offset % 4) {
		if (!is_write)
			memset(data, 0, len);
		return;
	}

	pthread_mutex_lock(&vm->lock);
	if (is_write) {
		memcpy(&value, data, sizeof(value));
		call = write_register(vm, offset, value);
	} else {
		value = read_register(vm, offset);
		memcpy(data, &value, sizeof(value));
	}
	pthread_mutex_unlock(&vm->lock);

	make_backend_call(vm, call);
}

int virtio_mmio_pop(struct virtio_mmio *vm, uint16_t queue,
		    struct virtq_chain *chain)
{
	struct virtio_mmio_state *s = &vm->state;
	const char *error;
	int ret = 0;

	pthread_mutex_lock(&vm->lock);
	if (queue < vm->ops->num_queues && device_live(s)) {
		ret = virtq_pop(vm->mem, &s->queues[queue], s->driver_features,
				chain, &error);
		if (ret < 0)
			device_needs_reset(vm, queue, error);
	}
	pthread_mutex_unlock(&vm->lock);
	return ret;
}

int virtio_mmio_avail_idx(struct virtio_mmio *vm, uint16_t queue, uint16_t *idx)
{
	struct virtio_mmio_state *s = &vm->state;
	int ret = -1;

	pthread_mutex_lock(&vm->lock);
	if (queue < vm->ops->num_queues && device_live(s))
		ret = virtq_avail_idx(vm->mem, &s->queues[queue], idx);
	pthread_mutex_unlock(&vm->lock);
	return ret;
}

void virtio_mmio_unpop(struct virtio_mmio *vm, uint16_t queue, uint16_t count)
{
	struct virtio_mmio_state *s = &vm->state;

	pthread_mutex_lock(&vm->lock);
	/* A reset in between zeroed the queue: nothing to give back.  A
	 * reset and a new set-up in between move next_avail behind where the
	 * new driver starts: the queue then reads stale ring entries, checked
	 * like any others, and only that guest's own queue suffers. */
	if (queue < vm->ops->num_queues && device_live(s) &&
	    s->queues[queue].ready)
		s->queues[queue].next_avail -= count;
	pthread_mutex_unlock(&vm->lock);
}

int virtio_mmio_push(struct virtio_mmio *vm, uint16_t queue, uint16_t head,
		     uint32_t len)
{
	struct virtio_mmio_state *s = &vm->state;
	int ret = -1;

	pthread_mutex_lock(&vm->lock);
	if (queue < vm->ops->num_queues && device_live(s)) {
		ret = virtq_push(vm->mem, &s->queues[queue], head, len);
		if (ret < 0 && s->queues[queue].ready)
			log_limited(
				LOG_LEVEL_ERROR,
				"virtio-mmio %s: queue %u: backend returned "
				"descriptor %u, not a head index",
				vm->name, queue, head);
	}
	pthread_mutex_unlock(&vm->lock);
	return ret;
}

bool virtio_mmio_signal_used(struct virtio_mmio *vm, uint16_t queue)
{
	struct virtio_mmio_state *s = &vm->state;
	bool needed = false;

	pthread_mutex_lock(&vm->lock);
	if (queue < vm->ops->num_queues && device_live(s))
		needed = virtq_needs_interrupt(vm->mem, &s->queues[queue],
					       s->driver_features);
	if (needed)
		raise_interrupt(vm, VIRTIO_MMIO_INT_VRING);
	pthread_mutex_unlock(&vm->lock);
	return needed;
}

void virtio_mmio_config_changed(struct virtio_mmio *vm)
{
	pthread_mutex_lock(&vm->lock);
	vm->state.config_generation++;
	raise_interrupt(vm, VIRTIO_MMIO_INT_CONFIG);
	pthread_mutex_unlock(&vm->lock);
}

void virtio_mmio_save(struct virtio_mmio *vm, uint32_t instance,
		      struct state_writer *w)
{
	pthread_mutex_lock(&vm->lock);
	state_put(w, STATE_DEV_VIRTIO_MMIO, instance, &vm->state,
		  sizeof(vm->state));
	pthread_mutex_unlock(&vm->lock);
}

/*
 * Accepts what the register interface can produce: defined status and
 * interrupt bits only, accepted features only as a passed negotiation leaves
 * them, and ready queues only within the backend's count and with a layout
 * virtq_layout_valid() passed.  The selectors, and queues that are not ready,
 * may hold whatever a driver wrote: they are checked when used.
 */
static bool state_valid(const struct virtio_mmio *vm,
			const struct virtio_mmio_state *s, const char *device)
{
	const char *error;

	if (!state_bits_valid(s->status, KNOWN_STATUS, device, "status") ||
	    !state_bits_valid(s->interrupt_status, INTERRUPT_REASONS, device,
			      "interrupt_status"))
		return false;
	if ((s->status & VIRTIO_STATUS_FEATURES_OK) &&
	    !features_acceptable(vm, s->driver_features)) {
		log_error("snapshot state: %s driver_features %#llx were "
			  "accepted, but offered were %#llx and VERSION_1 is "
			  "required",
			  device, (unsigned long long)s->driver_features,
			  (unsigned long long)device_features(vm));
		return false;
	}
	for (uint32_t i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++) {
		if (!s->queues[i].ready)
			continue;
		if (i >= vm->ops->num_queues) {
			log_error(
				"snapshot state: %s queue %u is ready, but the "
				"device has %u queues",
				device, i, vm->ops->num_queues);
			return false;
		}
		if (!virtq_layout_valid(vm->mem, &s->queues[i],
					vm->ops->queue_size_max, &error)) {
			log_error("snapshot state: %s queue %u: %s", device, i,
				  error);
			return false;
		}
	}
	return true;
}

/* Where queue @i's ready flag sits in a raw section. */
static size_t queue_ready_offset(uint32_t i)
{
	return offsetof(struct virtio_mmio_state, queues) +
	       i * sizeof(struct virtq_state) +
	       offsetof(struct virtq_state, ready);
}

int virtio_mmio_restore(struct virtio_mmio *vm, uint32_t instance,
			const struct state_reader *r)
{
	uint8_t raw[sizeof(struct virtio_mmio_state)];
	struct virtio_mmio_state s;
	char device[64];
	char field[32];

	snprintf(device, sizeof(device), "virtio-mmio %s", vm->name);
	if (state_get(r, STATE_DEV_VIRTIO_MMIO, instance, raw, sizeof(raw)))
		return -1;
	for (uint32_t i = 0; i < VIRTIO_MMIO_MAX_QUEUES; i++) {
		snprintf(field, sizeof(field), "queue %u ready", i);
		if (!state_bool_valid(raw, queue_ready_offset(i), device,
				      field))
			return -1;
	}
	memcpy(&s, raw, sizeof(s));
	if (!state_valid(vm, &s, device))
		return -1;
	pthread_mutex_lock(&vm->lock);
	vm->state = s;
	irq_line_forget(&vm->irq);
	update_irq(vm);
	pthread_mutex_unlock(&vm->lock);
	return 0;
}
