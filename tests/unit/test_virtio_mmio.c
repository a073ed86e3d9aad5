// SPDX-License-Identifier: Apache-2.0
/*
 * test_virtio_mmio.c - the transport and split virtqueue, driven like a
 * Linux virtio-mmio driver would: registers through virtio_mmio_io, rings
 * built by hand in a buffer standing in for guest RAM.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/devices/virtio_mmio.h"
#include "common/log.h"
#include "tests/unit/state_file.h"

#define GUEST_MEM_MIB MEMORY_MIN_MIB
#define GUEST_MEM_SIZE (GUEST_MEM_MIB * MIB)
#define QUEUE_SIZE 16
#define DESC_GPA 0x1000
#define AVAIL_GPA 0x2000
#define USED_GPA 0x3000
#define BUFFER_GPA 0x10000
#define TEST_DEVICE_ID 19
#define TEST_DEVICE_FEATURE 0 /* device-specific bit 0 */
#define STATUS_BEFORE_FEATURES_OK \
	(VIRTIO_STATUS_ACKNOWLEDGE | VIRTIO_STATUS_DRIVER)

struct test_backend {
	uint8_t config[8];
	int notifies;
	uint16_t last_notified;
	int activations;
	uint64_t activated_features;
	int resets;
};

static uint8_t *guest;
static struct guest_memory mem;
static struct test_backend backend;
static struct virtio_mmio dev;
static int irq_level;

static void record_irq(void *ctx, uint32_t gsi, int level)
{
	int *recorded = ctx;

	cr_assert_eq(gsi, 5);
	*recorded = level;
}

static void config_access(void *opaque, uint64_t offset, uint8_t *data,
			  uint32_t len, bool is_write)
{
	struct test_backend *b = opaque;

	cr_assert_leq(offset + len, sizeof(b->config));
	if (is_write)
		memcpy(b->config + offset, data, len);
	else
		memcpy(data, b->config + offset, len);
}

static void queue_notify(void *opaque, uint16_t queue)
{
	struct test_backend *b = opaque;

	b->notifies++;
	b->last_notified = queue;
}

static void activate(void *opaque, uint64_t features)
{
	struct test_backend *b = opaque;

	b->activations++;
	b->activated_features = features;
}

static void reset(void *opaque)
{
	struct test_backend *b = opaque;

	b->resets++;
}

static const struct virtio_backend_ops test_ops = {
	.device_id = TEST_DEVICE_ID,
	.features = 1ULL << TEST_DEVICE_FEATURE,
	.num_queues = 2,
	.queue_size_max = QUEUE_SIZE,
	.config_access = config_access,
	.queue_notify = queue_notify,
	.activate = activate,
	.reset = reset,
};

static void setup(void)
{
	struct irq_line line = {
		.set_level = record_irq,
		.ctx = &irq_level,
		.gsi = 5,
	};

	cr_assert_eq(guest_memory_create(&mem, GUEST_MEM_MIB), 0);
	guest = mem.host;
	memset(&backend, 0, sizeof(backend));
	irq_level = 0;
	cr_assert_eq(
		virtio_mmio_init(&dev, "test", &test_ops, &backend, &mem, line),
		0);
}

static void teardown(void)
{
	virtio_mmio_destroy(&dev);
	guest_memory_destroy(&mem);
}

static uint32_t reg_read(uint64_t offset)
{
	uint32_t value;

	virtio_mmio_io(&dev, offset, (uint8_t *)&value, 4, false);
	return value;
}

static void reg_write(uint64_t offset, uint32_t value)
{
	virtio_mmio_io(&dev, offset, (uint8_t *)&value, 4, true);
}

static uint32_t negotiate(uint64_t features)
{
	reg_write(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE);
	reg_write(VIRTIO_MMIO_STATUS, STATUS_BEFORE_FEATURES_OK);
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)features);
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES_SEL, 1);
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES, (uint32_t)(features >> 32));
	reg_write(VIRTIO_MMIO_STATUS,
		  STATUS_BEFORE_FEATURES_OK | VIRTIO_STATUS_FEATURES_OK);
	return reg_read(VIRTIO_MMIO_STATUS);
}

static void program_queue(uint32_t queue, uint32_t size)
{
	reg_write(VIRTIO_MMIO_QUEUE_SEL, queue);
	reg_write(VIRTIO_MMIO_QUEUE_NUM, size);
	reg_write(VIRTIO_MMIO_QUEUE_DESC_LOW, DESC_GPA);
	reg_write(VIRTIO_MMIO_QUEUE_DESC_HIGH, 0);
	reg_write(VIRTIO_MMIO_QUEUE_DRIVER_LOW, AVAIL_GPA);
	reg_write(VIRTIO_MMIO_QUEUE_DRIVER_HIGH, 0);
	reg_write(VIRTIO_MMIO_QUEUE_DEVICE_LOW, USED_GPA);
	reg_write(VIRTIO_MMIO_QUEUE_DEVICE_HIGH, 0);
	reg_write(VIRTIO_MMIO_QUEUE_READY, 1);
}

/* Brings the device to DRIVER_OK with queue 0 live. */
static void bring_up(uint64_t features)
{
	uint32_t status = negotiate(features);

	cr_assert(status & VIRTIO_STATUS_FEATURES_OK);
	program_queue(0, QUEUE_SIZE);
	reg_write(VIRTIO_MMIO_STATUS, status | VIRTIO_STATUS_DRIVER_OK);
}

static const uint64_t VERSION_1 = 1ULL << VIRTIO_F_VERSION_1;

static struct virtq_desc *desc(uint16_t index)
{
	return (struct virtq_desc *)(guest + DESC_GPA) + index;
}

static struct virtq_avail *avail(void)
{
	return (struct virtq_avail *)(guest + AVAIL_GPA);
}

static struct virtq_used *used(void)
{
	return (struct virtq_used *)(guest + USED_GPA);
}

static void set_desc(uint16_t index, uint64_t addr, uint32_t len,
		     uint16_t flags, uint16_t next)
{
	*desc(index) = (struct virtq_desc){
		.addr = addr,
		.len = len,
		.flags = flags,
		.next = next,
	};
}

static void make_available(uint16_t head)
{
	avail()->ring[avail()->idx % QUEUE_SIZE] = head;
	avail()->idx++;
}

/* Makes heads 0..@n-1 available, each one writable 0x100-byte buffer. */
static void post_buffers(uint16_t n)
{
	for (uint16_t i = 0; i < n; i++) {
		set_desc(i, BUFFER_GPA + i * 0x100, 0x100, VIRTQ_DESC_F_WRITE,
			 0);
		make_available(i);
	}
}

static void assert_needs_reset(int pop_result)
{
	struct virtq_chain chain;

	cr_assert_eq(pop_result, -1);
	cr_assert(reg_read(VIRTIO_MMIO_STATUS) &
		  VIRTIO_STATUS_DEVICE_NEEDS_RESET);
	cr_assert(reg_read(VIRTIO_MMIO_INTERRUPT_STATUS) &
		  VIRTIO_MMIO_INT_CONFIG);
	cr_assert_eq(irq_level, 1);
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 0,
		     "a broken device stays quiet until reset");
}

TestSuite(virtio_mmio, .init = setup, .fini = teardown);

Test(virtio_mmio, identity_registers)
{
	cr_assert_eq(reg_read(VIRTIO_MMIO_MAGIC_VALUE), 0x74726976);
	cr_assert_eq(reg_read(VIRTIO_MMIO_VERSION_REG), 2);
	cr_assert_eq(reg_read(VIRTIO_MMIO_DEVICE_ID), TEST_DEVICE_ID);
	cr_assert_eq(reg_read(VIRTIO_MMIO_VENDOR_ID_REG), 0x57414854);
	reg_write(VIRTIO_MMIO_QUEUE_SEL, 1);
	cr_assert_eq(reg_read(VIRTIO_MMIO_QUEUE_NUM_MAX), QUEUE_SIZE);
	reg_write(VIRTIO_MMIO_QUEUE_SEL, 2);
	cr_assert_eq(reg_read(VIRTIO_MMIO_QUEUE_NUM_MAX), 0);
	cr_assert_eq(reg_read(VIRTIO_MMIO_SHM_LEN_LOW), 0xffffffff);
}

Test(virtio_mmio, init_rejects_bad_backends)
{
	struct virtio_backend_ops ops = test_ops;
	struct virtio_mmio other;

	ops.queue_size_max = 24;
	cr_assert_eq(virtio_mmio_init(&other, "bad", &ops, NULL, &mem,
				      (struct irq_line){ 0 }),
		     -1);
	ops = test_ops;
	ops.num_queues = VIRTIO_MMIO_MAX_QUEUES + 1;
	cr_assert_eq(virtio_mmio_init(&other, "bad", &ops, NULL, &mem,
				      (struct irq_line){ 0 }),
		     -1);
	ops = test_ops;
	ops.reset = NULL;
	cr_assert_eq(virtio_mmio_init(&other, "bad", &ops, NULL, &mem,
				      (struct irq_line){ 0 }),
		     -1);
}

Test(virtio_mmio, narrow_register_access_is_ignored)
{
	uint16_t half = 0x1234;

	virtio_mmio_io(&dev, VIRTIO_MMIO_MAGIC_VALUE, (uint8_t *)&half, 2,
		       false);
	cr_assert_eq(half, 0);
	half = VIRTIO_STATUS_ACKNOWLEDGE;
	virtio_mmio_io(&dev, VIRTIO_MMIO_STATUS, (uint8_t *)&half, 2, true);
	cr_assert_eq(reg_read(VIRTIO_MMIO_STATUS), 0);
}

Test(virtio_mmio, device_features)
{
	uint32_t low, high;

	reg_write(VIRTIO_MMIO_DEVICE_FEATURES_SEL, 0);
	low = reg_read(VIRTIO_MMIO_DEVICE_FEATURES);
	reg_write(VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);
	high = reg_read(VIRTIO_MMIO_DEVICE_FEATURES);
	cr_assert_eq(low, (1u << TEST_DEVICE_FEATURE) |
				  (1u << VIRTIO_F_INDIRECT_DESC) |
				  (1u << VIRTIO_F_EVENT_IDX));
	cr_assert_eq(high, 1u << (VIRTIO_F_VERSION_1 - 32));
	reg_write(VIRTIO_MMIO_DEVICE_FEATURES_SEL, 2);
	cr_assert_eq(reg_read(VIRTIO_MMIO_DEVICE_FEATURES), 0);
}

Test(virtio_mmio, features_ok_needs_version_1)
{
	uint32_t status = negotiate(1ULL << TEST_DEVICE_FEATURE);

	cr_assert_eq(status, STATUS_BEFORE_FEATURES_OK);
}

Test(virtio_mmio, features_ok_refuses_unoffered_bits)
{
	cr_assert_eq(negotiate(VERSION_1 | (1ULL << 40)),
		     STATUS_BEFORE_FEATURES_OK);
}

Test(virtio_mmio, features_ok_accepts_subset)
{
	uint64_t features = VERSION_1 | (1ULL << TEST_DEVICE_FEATURE);

	cr_assert_eq(negotiate(features),
		     STATUS_BEFORE_FEATURES_OK | VIRTIO_STATUS_FEATURES_OK);
	/* Negotiation is closed: later feature writes do not count. */
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES_SEL, 0);
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES, 0xffffffff);
	program_queue(0, QUEUE_SIZE);
	reg_write(VIRTIO_MMIO_STATUS, STATUS_BEFORE_FEATURES_OK |
					      VIRTIO_STATUS_FEATURES_OK |
					      VIRTIO_STATUS_DRIVER_OK);
	cr_assert_eq(backend.activations, 1);
	cr_assert_eq(backend.activated_features, features);
}

Test(virtio_mmio, queue_setup_and_ready)
{
	negotiate(VERSION_1);
	reg_write(VIRTIO_MMIO_QUEUE_SEL, 0);
	cr_assert_eq(reg_read(VIRTIO_MMIO_QUEUE_READY), 0);
	program_queue(0, QUEUE_SIZE);
	cr_assert_eq(reg_read(VIRTIO_MMIO_QUEUE_READY), 1);
	cr_assert_eq(dev.state.queues[0].desc_addr, DESC_GPA);
	cr_assert_eq(dev.state.queues[0].avail_addr, AVAIL_GPA);
	cr_assert_eq(dev.state.queues[0].used_addr, USED_GPA);
	cr_assert_eq(dev.state.queues[0].size, QUEUE_SIZE);

	/* Live queues ignore setup writes. */
	reg_write(VIRTIO_MMIO_QUEUE_NUM, 4);
	cr_assert_eq(dev.state.queues[0].size, QUEUE_SIZE);
	reg_write(VIRTIO_MMIO_QUEUE_READY, 0);
	cr_assert_eq(reg_read(VIRTIO_MMIO_QUEUE_READY), 0);
	cr_assert_eq(reg_read(VIRTIO_MMIO_STATUS) &
			     VIRTIO_STATUS_DEVICE_NEEDS_RESET,
		     0);
}

Test(virtio_mmio, queue_size_must_be_power_of_two)
{
	negotiate(VERSION_1);
	program_queue(0, 12);
	cr_assert_eq(reg_read(VIRTIO_MMIO_QUEUE_READY), 0);
	cr_assert(reg_read(VIRTIO_MMIO_STATUS) &
		  VIRTIO_STATUS_DEVICE_NEEDS_RESET);
}

/* A guest that breaks its queue and resets the device over and over does
 * not get a line of the VMM's log each time. */
Test(virtio_mmio, a_guest_repeating_an_error_is_not_logged_each_time)
{
	const int tries = 20 * LOG_LIMIT_BURST;
	char log[65536];
	int p[2], lines = 0;

	cr_assert_eq(pipe2(p, O_NONBLOCK | O_CLOEXEC), 0);
	log_set_fd(p[1]);
	for (int i = 0; i < tries; i++) {
		reg_write(VIRTIO_MMIO_STATUS, 0); /* reset */
		negotiate(VERSION_1);
		program_queue(0, 12);
		cr_assert(reg_read(VIRTIO_MMIO_STATUS) &
			  VIRTIO_STATUS_DEVICE_NEEDS_RESET);
	}
	log_set_fd(2);
	ssize_t n = read(p[0], log, sizeof(log) - 1);

	cr_assert_gt(n, 0);
	log[n] = '\0';
	for (char *c = log; *c; c++)
		lines += *c == '\n';
	cr_expect(strstr(log, "device needs reset\n"), "%s", log);
	/* The burst, and one a second: far fewer than the guest's tries. */
	cr_expect_geq(lines, LOG_LIMIT_BURST);
	cr_expect_lt(lines, tries / 2, "%d lines for %d tries", lines, tries);
	close(p[0]);
	close(p[1]);
}

Test(virtio_mmio, ring_outside_memory_is_refused)
{
	negotiate(VERSION_1);
	reg_write(VIRTIO_MMIO_QUEUE_SEL, 0);
	reg_write(VIRTIO_MMIO_QUEUE_NUM, QUEUE_SIZE);
	reg_write(VIRTIO_MMIO_QUEUE_DESC_LOW, DESC_GPA);
	reg_write(VIRTIO_MMIO_QUEUE_DRIVER_LOW, AVAIL_GPA);
	reg_write(VIRTIO_MMIO_QUEUE_DEVICE_LOW, 0);
	reg_write(VIRTIO_MMIO_QUEUE_DEVICE_HIGH, 1); /* 4 GiB */
	reg_write(VIRTIO_MMIO_QUEUE_READY, 1);
	cr_assert_eq(reg_read(VIRTIO_MMIO_QUEUE_READY), 0);
	cr_assert(reg_read(VIRTIO_MMIO_STATUS) &
		  VIRTIO_STATUS_DEVICE_NEEDS_RESET);
}

Test(virtio_mmio, notify_reaches_backend_only_when_live)
{
	negotiate(VERSION_1);
	program_queue(0, QUEUE_SIZE);
	reg_write(VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	cr_assert_eq(backend.notifies, 0);
	reg_write(VIRTIO_MMIO_STATUS, STATUS_BEFORE_FEATURES_OK |
					      VIRTIO_STATUS_FEATURES_OK |
					      VIRTIO_STATUS_DRIVER_OK);
	reg_write(VIRTIO_MMIO_QUEUE_NOTIFY, 0);
	cr_assert_eq(backend.notifies, 1);
	cr_assert_eq(backend.last_notified, 0);
	reg_write(VIRTIO_MMIO_QUEUE_NOTIFY, 1); /* not set up */
	reg_write(VIRTIO_MMIO_QUEUE_NOTIFY, 7); /* does not exist */
	cr_assert_eq(backend.notifies, 1);
}

Test(virtio_mmio, pop_returns_validated_segments)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 0);

	set_desc(3, BUFFER_GPA, 100, VIRTQ_DESC_F_NEXT, 7);
	set_desc(7, BUFFER_GPA + 0x1000, 200,
		 VIRTQ_DESC_F_NEXT | VIRTQ_DESC_F_WRITE, 1);
	set_desc(1, BUFFER_GPA + 0x2000, 300, VIRTQ_DESC_F_WRITE, 0);
	make_available(3);

	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 1);
	cr_assert_eq(chain.head, 3);
	cr_assert_eq(chain.count, 3);
	cr_assert_eq(chain.segments[0].addr, guest + BUFFER_GPA);
	cr_assert_eq(chain.segments[0].len, 100);
	cr_assert_not(chain.segments[0].writable);
	cr_assert_eq(chain.segments[1].addr, guest + BUFFER_GPA + 0x1000);
	cr_assert_eq(chain.segments[1].len, 200);
	cr_assert(chain.segments[1].writable);
	cr_assert_eq(chain.segments[2].addr, guest + BUFFER_GPA + 0x2000);
	cr_assert_eq(chain.segments[2].len, 300);
	cr_assert(chain.segments[2].writable);
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 0);
}

Test(virtio_mmio, indirect_table_is_followed)
{
	struct virtq_desc *table = (struct virtq_desc *)(guest + 0x8000);
	struct virtq_chain chain;

	bring_up(VERSION_1 | (1ULL << VIRTIO_F_INDIRECT_DESC));
	table[0] = (struct virtq_desc){ BUFFER_GPA, 16, VIRTQ_DESC_F_NEXT, 1 };
	table[1] = (struct virtq_desc){ BUFFER_GPA + 64, 32, VIRTQ_DESC_F_WRITE,
					0 };
	set_desc(0, 0x8000, 2 * sizeof(struct virtq_desc),
		 VIRTQ_DESC_F_INDIRECT, 0);
	make_available(0);

	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 1);
	cr_assert_eq(chain.head, 0);
	cr_assert_eq(chain.count, 2);
	cr_assert_eq(chain.segments[0].addr, guest + BUFFER_GPA);
	cr_assert_eq(chain.segments[1].addr, guest + BUFFER_GPA + 64);
	cr_assert(chain.segments[1].writable);
}

Test(virtio_mmio, indirect_without_feature_is_rejected)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	set_desc(0, 0x8000, 32, VIRTQ_DESC_F_INDIRECT, 0);
	make_available(0);
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, push_interrupt_and_ack)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	set_desc(5, BUFFER_GPA, 64, VIRTQ_DESC_F_WRITE, 0);
	make_available(5);
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 1);

	cr_assert_eq(virtio_mmio_push(&dev, 0, chain.head, 42), 0);
	cr_assert_eq(used()->idx, 1);
	cr_assert_eq(used()->ring[0].id, 5);
	cr_assert_eq(used()->ring[0].len, 42);
	cr_assert_eq(irq_level, 0);

	cr_assert(virtio_mmio_signal_used(&dev, 0));
	cr_assert_eq(reg_read(VIRTIO_MMIO_INTERRUPT_STATUS),
		     VIRTIO_MMIO_INT_VRING);
	cr_assert_eq(irq_level, 1);
	cr_assert_not(virtio_mmio_signal_used(&dev, 0),
		      "nothing new since the last signal");

	reg_write(VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	cr_assert_eq(reg_read(VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	cr_assert_eq(irq_level, 0);

	cr_assert_eq(virtio_mmio_push(&dev, 0, QUEUE_SIZE, 0), -1,
		     "head beyond the queue");
}

Test(virtio_mmio, ack_keeps_line_while_bits_remain)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	virtio_mmio_config_changed(&dev);
	set_desc(0, BUFFER_GPA, 8, 0, 0);
	make_available(0);
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 1);
	virtio_mmio_push(&dev, 0, 0, 0);
	virtio_mmio_signal_used(&dev, 0);
	cr_assert_eq(reg_read(VIRTIO_MMIO_INTERRUPT_STATUS), 3);
	reg_write(VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_VRING);
	cr_assert_eq(irq_level, 1);
	reg_write(VIRTIO_MMIO_INTERRUPT_ACK, VIRTIO_MMIO_INT_CONFIG);
	cr_assert_eq(irq_level, 0);
}

Test(virtio_mmio, no_interrupt_flag_suppresses)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	avail()->flags = VIRTQ_AVAIL_F_NO_INTERRUPT;
	set_desc(0, BUFFER_GPA, 8, 0, 0);
	make_available(0);
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 1);
	virtio_mmio_push(&dev, 0, 0, 0);
	cr_assert_not(virtio_mmio_signal_used(&dev, 0));
	cr_assert_eq(irq_level, 0);
}

Test(virtio_mmio, event_idx_suppresses_until_used_event)
{
	uint16_t *used_event = &avail()->ring[QUEUE_SIZE];
	uint16_t *avail_event = (uint16_t *)&used()->ring[QUEUE_SIZE];
	struct virtq_chain chain;

	bring_up(VERSION_1 | (1ULL << VIRTIO_F_EVENT_IDX));
	/* Ignored once EVENT_IDX is negotiated. */
	avail()->flags = VIRTQ_AVAIL_F_NO_INTERRUPT;
	*used_event = 2; /* interrupt once the third buffer is used */
	post_buffers(4);

	for (uint16_t i = 0; i < 2; i++) {
		cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 1);
		virtio_mmio_push(&dev, 0, chain.head, 1);
		cr_assert_not(virtio_mmio_signal_used(&dev, 0), "used %u", i);
	}
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 1);
	virtio_mmio_push(&dev, 0, chain.head, 1);
	cr_assert(virtio_mmio_signal_used(&dev, 0));
	cr_assert_eq(irq_level, 1);

	/* Draining the queue tells the driver where to notify next. */
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 1);
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 0);
	cr_assert_eq(*avail_event, 4);
}

Test(virtio_mmio, descriptor_loop_needs_reset)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	set_desc(0, BUFFER_GPA, 8, VIRTQ_DESC_F_NEXT, 1);
	set_desc(1, BUFFER_GPA, 8, VIRTQ_DESC_F_NEXT, 0);
	make_available(0);
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, self_loop_needs_reset)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	set_desc(2, BUFFER_GPA, 8, VIRTQ_DESC_F_NEXT, 2);
	make_available(2);
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, buffer_outside_memory_needs_reset)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	set_desc(0, GUEST_MEM_SIZE - 8, 16, 0, 0);
	make_available(0);
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, wrapping_address_needs_reset)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	set_desc(0, UINT64_MAX - 4, 16, 0, 0);
	make_available(0);
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, huge_length_needs_reset)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	set_desc(0, BUFFER_GPA, UINT32_MAX, VIRTQ_DESC_F_WRITE, 0);
	make_available(0);
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, head_beyond_queue_needs_reset)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	make_available(QUEUE_SIZE);
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, next_beyond_queue_needs_reset)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	set_desc(0, BUFFER_GPA, 8, VIRTQ_DESC_F_NEXT, 0xffff);
	make_available(0);
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, avail_index_jump_needs_reset)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	set_desc(0, BUFFER_GPA, 8, 0, 0);
	avail()->idx = QUEUE_SIZE + 1;
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, readable_after_writable_needs_reset)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	set_desc(0, BUFFER_GPA, 8, VIRTQ_DESC_F_WRITE | VIRTQ_DESC_F_NEXT, 1);
	set_desc(1, BUFFER_GPA, 8, 0, 0);
	make_available(0);
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, oversized_indirect_table_needs_reset)
{
	struct virtq_desc *table = (struct virtq_desc *)(guest + 0x8000);
	struct virtq_chain chain;

	bring_up(VERSION_1 | (1ULL << VIRTIO_F_INDIRECT_DESC));
	/* A legal-looking chain longer than the queue: 2 * QUEUE_SIZE. */
	for (uint16_t i = 0; i < 2 * QUEUE_SIZE; i++)
		table[i] = (struct virtq_desc){ BUFFER_GPA, 4,
						VIRTQ_DESC_F_NEXT, i + 1 };
	table[2 * QUEUE_SIZE - 1].flags = 0;
	set_desc(0, 0x8000, 2 * QUEUE_SIZE * sizeof(struct virtq_desc),
		 VIRTQ_DESC_F_INDIRECT, 0);
	make_available(0);
	assert_needs_reset(virtio_mmio_pop(&dev, 0, &chain));
}

Test(virtio_mmio, reset_recovers_device)
{
	struct virtq_chain chain;

	bring_up(VERSION_1);
	make_available(QUEUE_SIZE);
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), -1);

	reg_write(VIRTIO_MMIO_STATUS, 0);
	cr_assert_eq(backend.resets, 1);
	cr_assert_eq(reg_read(VIRTIO_MMIO_STATUS), 0);
	cr_assert_eq(reg_read(VIRTIO_MMIO_INTERRUPT_STATUS), 0);
	cr_assert_eq(irq_level, 0);
	reg_write(VIRTIO_MMIO_QUEUE_SEL, 0);
	cr_assert_eq(reg_read(VIRTIO_MMIO_QUEUE_READY), 0);

	memset(guest + AVAIL_GPA, 0, 0x1000);
	bring_up(VERSION_1);
	cr_assert_eq(backend.activations, 2);
	set_desc(0, BUFFER_GPA, 8, 0, 0);
	make_available(0);
	cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 1);
}

Test(virtio_mmio, config_space_goes_to_backend)
{
	uint32_t value = 0xdeadbeef;
	uint8_t byte;

	virtio_mmio_io(&dev, VIRTIO_MMIO_CONFIG + 4, (uint8_t *)&value, 4,
		       true);
	cr_assert_eq(memcmp(backend.config + 4, &value, 4), 0);
	virtio_mmio_io(&dev, VIRTIO_MMIO_CONFIG + 5, &byte, 1, false);
	cr_assert_eq(byte, 0xbe);
}

Test(virtio_mmio, config_change_bumps_generation)
{
	uint32_t generation = reg_read(VIRTIO_MMIO_CONFIG_GENERATION);

	virtio_mmio_config_changed(&dev);
	cr_assert_eq(reg_read(VIRTIO_MMIO_CONFIG_GENERATION), generation + 1);
	cr_assert_eq(reg_read(VIRTIO_MMIO_INTERRUPT_STATUS),
		     VIRTIO_MMIO_INT_CONFIG);
	cr_assert_eq(irq_level, 1);
}

Test(virtio_mmio, undefined_status_bits_do_not_stick)
{
	reg_write(VIRTIO_MMIO_STATUS, VIRTIO_STATUS_ACKNOWLEDGE | 0x30);
	cr_assert_eq(reg_read(VIRTIO_MMIO_STATUS), VIRTIO_STATUS_ACKNOWLEDGE);
}

/* --- Snapshot state ----------------------------------------------------- */

/* A second transport over the same guest memory, as a restoring VMM has. */
struct other_device {
	struct virtio_mmio dev;
	struct test_backend backend;
	int irq_level;
};

static void other_init(struct other_device *o)
{
	struct irq_line line = {
		.set_level = record_irq,
		.ctx = &o->irq_level,
		.gsi = 5,
	};

	memset(o, 0, sizeof(*o));
	o->irq_level = -1; /* neither level yet */
	cr_assert_eq(virtio_mmio_init(&o->dev, "restored", &test_ops,
				      &o->backend, &mem, line),
		     0);
}

static uint32_t other_read(struct other_device *o, uint64_t offset)
{
	uint32_t value;

	virtio_mmio_io(&o->dev, offset, (uint8_t *)&value, 4, false);
	return value;
}

/* Restores @raw as instance 0 into a fresh transport: returns the result
 * after checking that a failure left the transport untouched. */
static int restore_raw(const void *raw, size_t size)
{
	struct state_reader r;
	struct other_device o;
	struct virtio_mmio_state before;
	int ret;

	state_file_one_section(&r, STATE_DEV_VIRTIO_MMIO, raw, size);
	other_init(&o);
	memcpy(&before, &o.dev.state, sizeof(before));
	ret = virtio_mmio_restore(&o.dev, 0, &r);
	if (ret)
		cr_assert_eq(memcmp(&o.dev.state, &before, sizeof(before)), 0);
	cr_assert_eq(o.backend.activations + o.backend.resets, 0,
		     "restore called the backend");
	virtio_mmio_destroy(&o.dev);
	state_reader_close(&r);
	return ret;
}

Test(virtio_mmio, state_round_trip)
{
	struct other_device o;
	struct state_writer w;
	struct state_reader r;
	struct virtq_chain chain;

	bring_up(VERSION_1 | (1ULL << VIRTIO_F_EVENT_IDX));
	post_buffers(3);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(virtio_mmio_pop(&dev, 0, &chain), 1);
		virtio_mmio_push(&dev, 0, chain.head, 7);
	}
	cr_assert(virtio_mmio_signal_used(&dev, 0));
	virtio_mmio_config_changed(&dev);
	reg_write(VIRTIO_MMIO_QUEUE_SEL, 1);
	reg_write(VIRTIO_MMIO_QUEUE_NUM, 8); /* set up, not ready */
	reg_write(VIRTIO_MMIO_DEVICE_FEATURES_SEL, 1);

	state_writer_init(&w);
	virtio_mmio_save(&dev, 3, &w);
	state_file_through(&w, &r);
	other_init(&o);
	cr_assert_eq(virtio_mmio_restore(&o.dev, 0, &r), -1,
		     "saved as instance 3, not 0");
	cr_assert_eq(virtio_mmio_restore(&o.dev, 3, &r), 0);
	state_reader_close(&r);

	cr_assert_eq(o.irq_level, 1, "the interrupt was not re-driven");
	cr_assert_eq(o.backend.activations + o.backend.resets, 0);
	cr_assert_eq(memcmp(&o.dev.state, &dev.state, sizeof(dev.state)), 0);
	cr_assert_eq(other_read(&o, VIRTIO_MMIO_STATUS),
		     reg_read(VIRTIO_MMIO_STATUS));
	cr_assert_eq(other_read(&o, VIRTIO_MMIO_INTERRUPT_STATUS), 3);
	cr_assert_eq(other_read(&o, VIRTIO_MMIO_CONFIG_GENERATION), 1);
	cr_assert_eq(other_read(&o, VIRTIO_MMIO_DEVICE_FEATURES),
		     1u << (VIRTIO_F_VERSION_1 - 32));
	cr_assert_eq(other_read(&o, VIRTIO_MMIO_QUEUE_READY), 0);

	/* The queue goes on where the first device left it. */
	cr_assert_eq(virtio_mmio_pop(&o.dev, 0, &chain), 1);
	cr_assert_eq(chain.head, 2);
	cr_assert_eq(virtio_mmio_push(&o.dev, 0, chain.head, 9), 0);
	cr_assert_eq(used()->idx, 3);
	cr_assert_eq(used()->ring[2].id, 2);
	cr_assert_eq(used()->ring[2].len, 9);
	cr_assert_eq(virtio_mmio_pop(&o.dev, 0, &chain), 0);

	/* Acknowledging drops the line, and the device is live. */
	virtio_mmio_io(&o.dev, VIRTIO_MMIO_INTERRUPT_ACK,
		       (uint8_t *)&(uint32_t){ 3 }, 4, true);
	cr_assert_eq(o.irq_level, 0);
	virtio_mmio_io(&o.dev, VIRTIO_MMIO_QUEUE_NOTIFY,
		       (uint8_t *)&(uint32_t){ 0 }, 4, true);
	cr_assert_eq(o.backend.notifies, 1);
	virtio_mmio_destroy(&o.dev);
}

Test(virtio_mmio, restore_drives_a_quiet_line_low)
{
	struct other_device o;
	struct state_writer w;
	struct state_reader r;

	bring_up(VERSION_1);
	state_writer_init(&w);
	virtio_mmio_save(&dev, 0, &w);
	state_file_through(&w, &r);
	other_init(&o);
	cr_assert_eq(virtio_mmio_restore(&o.dev, 0, &r), 0);
	state_reader_close(&r);
	/* KVM's restored irqchip may hold the line high: say it is low. */
	cr_assert_eq(o.irq_level, 0);
	virtio_mmio_destroy(&o.dev);
}

Test(virtio_mmio, restore_takes_what_a_driver_can_leave)
{
	struct virtio_mmio_state s;

	/* Mid-negotiation with features the device would refuse, a queue
	 * being set up with a bad size, and selectors anywhere. */
	negotiate(VERSION_1 | (1ULL << 40));
	reg_write(VIRTIO_MMIO_QUEUE_SEL, 1);
	reg_write(VIRTIO_MMIO_QUEUE_NUM, 3);
	reg_write(VIRTIO_MMIO_QUEUE_SEL, 100);
	reg_write(VIRTIO_MMIO_DRIVER_FEATURES_SEL, 7);
	s = dev.state;
	cr_assert_eq(restore_raw(&s, sizeof(s)), 0);
}

Test(virtio_mmio, restore_rejects_impossible_state)
{
	struct virtio_mmio_state good, s;
	uint8_t raw[sizeof(good)];

	bring_up(VERSION_1);
	memcpy(&good, &dev.state, sizeof(good));

	s = good;
	s.queues[0].size = 3;
	cr_assert_eq(restore_raw(&s, sizeof(s)), -1);
	s = good;
	s.queues[0].size = 2 * QUEUE_SIZE;
	cr_assert_eq(restore_raw(&s, sizeof(s)), -1);
	s = good;
	s.queues[0].used_addr = GUEST_MEM_SIZE - 8;
	cr_assert_eq(restore_raw(&s, sizeof(s)), -1);
	s = good;
	s.queues[0].desc_addr = DESC_GPA + 8;
	cr_assert_eq(restore_raw(&s, sizeof(s)), -1);
	s = good;
	s.queues[2] = s.queues[0]; /* the backend has two queues */
	cr_assert_eq(restore_raw(&s, sizeof(s)), -1);
	s = good;
	s.status |= 0x20;
	cr_assert_eq(restore_raw(&s, sizeof(s)), -1);
	s = good;
	s.interrupt_status = 4;
	cr_assert_eq(restore_raw(&s, sizeof(s)), -1);
	s = good;
	s.driver_features |= 1ULL << 40;
	cr_assert_eq(restore_raw(&s, sizeof(s)), -1);
	s = good;
	s.driver_features &= ~VERSION_1;
	cr_assert_eq(restore_raw(&s, sizeof(s)), -1);

	memcpy(raw, &good, sizeof(raw));
	raw[offsetof(struct virtio_mmio_state, queues) +
	    sizeof(struct virtq_state) + offsetof(struct virtq_state, ready)] =
		2;
	cr_assert_eq(restore_raw(raw, sizeof(raw)), -1);
	cr_assert_eq(restore_raw(&good, sizeof(good) - 8), -1);
	cr_assert_eq(restore_raw(&good, sizeof(good)), 0);
}
