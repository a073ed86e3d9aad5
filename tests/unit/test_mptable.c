// SPDX-License-Identifier: Apache-2.0
/*
 * test_mptable.c - the MP table Linux parses for CPUs and interrupt
 * routing: found where Linux scans, checksums valid, one processor entry per
 * vCPU with the BSP flagged, one IOAPIC, an interrupt entry per pin.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "vmm/x86/layout.h"
#include "vmm/x86/mptable.h"

static struct guest_memory mem;

static void setup(void)
{
	cr_assert_eq(guest_memory_create(&mem, 64), 0);
}

static void teardown(void)
{
	guest_memory_destroy(&mem);
}

static uint8_t sum(const uint8_t *p, size_t len)
{
	uint8_t s = 0;

	while (len--)
		s += *p++;
	return s;
}

TestSuite(mptable, .init = setup, .fini = teardown);

static void check_table(int cpus)
{
	cr_assert_eq(mptable_write(&mem, cpus), 0);
	uint8_t *mpf = guest_memory_ptr(&mem, MPTABLE_ADDR, 16);
	uint32_t table_addr;

	cr_expect_arr_eq(mpf, "_MP_", 4);
	cr_expect_eq(sum(mpf, 16), 0, "floating pointer checksum");
	memcpy(&table_addr, mpf + 4, 4);
	uint8_t *t = guest_memory_ptr(&mem, table_addr, 44);
	cr_assert_not_null(t);
	cr_expect_arr_eq(t, "PCMP", 4);
	uint16_t len, count;
	memcpy(&len, t + 4, 2);
	memcpy(&count, t + 34, 2);
	cr_expect_eq(sum(t, len), 0, "table checksum");
	cr_expect_eq(count, cpus + 1 + 1 + IOAPIC_PINS + 2);

	/* Walk the entries: processors first, in APIC ID order. */
	uint8_t *e = t + 44;
	int processors = 0, intsrc = 0, ioapics = 0;
	for (int i = 0; i < count; i++) {
		switch (e[0]) {
		case 0:
			cr_expect_eq(e[1], processors);
			cr_expect_eq(e[3] & 1, 1, "enabled");
			cr_expect_eq((e[3] & 2) != 0, processors == 0, "BSP");
			processors++;
			e += 20;
			break;
		case 2:
			cr_expect_eq(e[1], cpus, "IOAPIC id after the CPUs");
			ioapics++;
			e += 8;
			break;
		case 3: {
			uint16_t flags;

			memcpy(&flags, e + 2, 2);
			cr_expect_eq(e[5], e[7], "ISA IRQ routed to same pin");
			cr_expect_eq(flags,
				     e[7] >= VIRTIO_MMIO_FIRST_IRQ ? 0x0d : 0,
				     "pin %d: level-triggered for virtio only",
				     e[7]);
			intsrc++;
			e += 8;
			break;
		}
		default:
			e += 8;
		}
	}
	cr_expect_eq(processors, cpus);
	cr_expect_eq(ioapics, 1);
	cr_expect_eq(intsrc, IOAPIC_PINS);
	cr_expect_eq(e - t, len);
}

Test(mptable, one_cpu)
{
	check_table(1);
}

Test(mptable, eight_cpus)
{
	check_table(8);
}

Test(mptable, cpu_count_out_of_range)
{
	cr_expect_eq(mptable_write(&mem, 0), -1);
	cr_expect_eq(mptable_write(&mem, MPTABLE_MAX_CPUS + 1), -1);
}
