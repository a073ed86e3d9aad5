// SPDX-License-Identifier: Apache-2.0
/*
 * test_memory_bus.c - guest memory layout and bounds (the one gate between
 * guest-chosen addresses and host memory) and the I/O bus dispatch.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "vmm/bus.h"
#include "vmm/memory.h"

Test(memory, small_guest_has_one_low_region)
{
	struct guest_memory mem;

	cr_assert_eq(guest_memory_create(&mem, 256), 0);
	cr_expect_eq(mem.nr_regions, 1);
	cr_expect_eq(guest_memory_low_end(&mem), 256 * MIB);
	cr_expect_not_null(guest_memory_ptr(&mem, 256 * MIB - 4096, 4096));
	cr_expect_null(guest_memory_ptr(&mem, 256 * MIB - 4096, 4097));
	cr_expect_null(guest_memory_ptr(&mem, 256 * MIB, 1));
	cr_expect_null(guest_memory_ptr(&mem, UINT64_MAX - 1, 16));
	cr_expect_null(guest_memory_ptr(&mem, 0, UINT64_MAX));
	guest_memory_destroy(&mem);
}

Test(memory, large_guest_skips_the_hole_below_4g)
{
	struct guest_memory mem;

	cr_assert_eq(guest_memory_create(&mem, 4096), 0);
	cr_assert_eq(mem.nr_regions, 2);
	cr_expect_eq(guest_memory_low_end(&mem), MEMORY_HOLE_START);
	cr_expect_eq(mem.regions[1].guest_addr, MEMORY_HIGH_START);
	cr_expect_eq(mem.regions[1].size, GIB);
	cr_expect_null(guest_memory_ptr(&mem, MEMORY_HOLE_START, 1));
	cr_expect_null(guest_memory_ptr(&mem, MEMORY_HOLE_START - 8, 16));
	uint8_t *high = guest_memory_ptr(&mem, MEMORY_HIGH_START, 1);
	cr_assert_not_null(high);
	cr_expect_eq(high, mem.host + MEMORY_HOLE_START,
		     "high RAM follows low RAM in the host mapping");
	cr_expect_not_null(guest_memory_ptr(&mem, 5 * GIB - 1, 1));
	cr_expect_null(guest_memory_ptr(&mem, 5 * GIB, 1));
	guest_memory_destroy(&mem);
}

Test(memory, sizes_outside_limits_are_refused)
{
	struct guest_memory mem;

	cr_expect_eq(guest_memory_create(&mem, MEMORY_MIN_MIB - 1), -1);
	cr_expect_eq(guest_memory_create(&mem, MEMORY_MAX_MIB + 1), -1);
}

struct recorder {
	uint64_t offset;
	uint32_t len;
	bool is_write;
	uint8_t value;
	int calls;
};

static void record(void *device, uint64_t offset, uint8_t *data, uint32_t len,
		   bool is_write)
{
	struct recorder *r = device;

	r->offset = offset;
	r->len = len;
	r->is_write = is_write;
	r->calls++;
	if (is_write)
		r->value = data[0];
	else
		memset(data, 0x5a, len);
}

Test(bus, dispatches_with_offsets_and_defaults_to_all_ones)
{
	struct bus bus;
	struct recorder a = { 0 }, b = { 0 };
	uint8_t data[4] = { 0x11 };

	bus_init(&bus, "pio");
	cr_assert_eq(bus_register(&bus, "a", 0x3f8, 8, &a, record), 0);
	cr_assert_eq(bus_register(&bus, "b", 0x60, 1, &b, record), 0);
	cr_expect(bus_dispatch(&bus, 0x3fb, data, 1, true));
	cr_expect_eq(a.offset, 3);
	cr_expect_eq(a.value, 0x11);
	cr_expect(bus_dispatch(&bus, 0x60, data, 2, false));
	cr_expect_eq(data[1], 0x5a);
	cr_expect_not(bus_dispatch(&bus, 0x80, data, 4, false));
	cr_expect_eq(data[0], 0xff);
	cr_expect_eq(data[3], 0xff);
	cr_expect_not(bus_dispatch(&bus, 0x400, data, 1, true));
	cr_expect_eq(a.calls + b.calls, 2);
}

Test(bus, overlapping_ranges_are_refused)
{
	struct bus bus;
	struct recorder a;

	bus_init(&bus, "mmio");
	cr_assert_eq(bus_register(&bus, "a", 0x1000, 0x1000, &a, record), 0);
	cr_expect_eq(bus_register(&bus, "b", 0x1fff, 2, &a, record), -1);
	cr_expect_eq(bus_register(&bus, "c", 0x800, 0x801, &a, record), -1);
	cr_expect_eq(bus_register(&bus, "d", 0x2000, 0, &a, record), -1);
	cr_expect_eq(bus_register(&bus, "e", UINT64_MAX, 2, &a, record), -1);
	cr_expect_eq(bus_register(&bus, "f", 0x2000, 0x10, &a, record), 0);
}
