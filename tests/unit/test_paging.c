// SPDX-License-Identifier: Apache-2.0
/*
 * test_paging.c - the software page walk (vmm/x86/paging.c).
 *
 * Each test builds real x86-64 page tables inside a 64 MiB guest_memory and
 * checks translations to exact guest-physical addresses.  The tables:
 *
 *	0x1000 PML4, 0x2000 PDPT, 0x3000 PD, 0x4000 PT, 0x5000 PML5
 *
 * Kernel-style (negative, canonical) addresses are used so the upper-half
 * indices (511, 510) are exercised.
 */
#include <criterion/criterion.h>
#include <criterion/redirect.h>
#include <string.h>

#include "vmm/memory.h"
#include "vmm/x86/paging.h"

#define PML4 0x1000ULL
#define PDPT 0x2000ULL
#define PD 0x3000ULL
#define PT 0x4000ULL
#define PML5 0x5000ULL

#define P 0x1ULL
#define RW 0x2ULL
#define PS 0x80ULL
#define NX (1ULL << 63)

#define LA_4K 0xffffffff81234000ULL /* PML4 511, PDPT 510, PD 9, PT 0x34 */
#define LA_2M 0xffffffff81400000ULL /* PML4 511, PDPT 510, PD 10 */
#define LA_1G 0xffffffffc0000000ULL /* PML4 511, PDPT 511 */

static struct guest_memory mem;
static struct kvm_sregs sregs;

static unsigned int idx(uint64_t linear, int level)
{
	return (linear >> (12 + 9 * (level - 1))) & 511;
}

static void put(uint64_t table, uint64_t linear, int level, uint64_t entry)
{
	void *p = guest_memory_ptr(&mem, table + idx(linear, level) * 8, 8);

	cr_assert_not_null(p);
	memcpy(p, &entry, sizeof(entry));
}

static void setup(void)
{
	cr_assert_eq(guest_memory_create(&mem, 64), 0);
	sregs = (struct kvm_sregs){
		.cr0 = 0x80000011, /* PG, ET, PE */
		.cr3 = PML4,
		.cr4 = 0x20,   /* PAE */
		.efer = 0x500, /* LMA, LME */
	};
	put(PML4, LA_4K, 4, PDPT | P | RW);
	put(PDPT, LA_4K, 3, PD | P | RW);
	put(PD, LA_4K, 2, PT | P | RW);
	put(PT, LA_4K, 1, 0x123000 | P | RW);
	/* bit 12 of a large-page entry is PAT, not address */
	put(PD, LA_2M, 2, 0x600000 | 0x1000 | P | RW | PS);
	/* NX and protection-key bits 62:59 are not address either */
	put(PDPT, LA_1G, 3, NX | (0xfULL << 59) | 0x40000000 | P | PS);
}

static void teardown(void)
{
	guest_memory_destroy(&mem);
}

TestSuite(paging, .init = setup, .fini = teardown);

/* The last refusal's message. */
static char err[256];

#define EXPECT_GPA(linear, expected)                                           \
	do {                                                                   \
		uint64_t gpa_ = 0;                                             \
		cr_assert_eq(x86_translate(&mem, &sregs, (linear), &gpa_, err, \
					   sizeof(err)),                       \
			     0, "0x%llx did not translate: %s",                \
			     (unsigned long long)(linear), err);               \
		cr_assert_eq(gpa_, (uint64_t)(expected),                       \
			     "0x%llx -> 0x%llx, expected 0x%llx",              \
			     (unsigned long long)(linear),                     \
			     (unsigned long long)gpa_,                         \
			     (unsigned long long)(expected));                  \
	} while (0)

#define EXPECT_FAIL(linear)                                                    \
	do {                                                                   \
		uint64_t gpa_ = 0xdead;                                        \
		cr_assert_eq(x86_translate(&mem, &sregs, (linear), &gpa_, err, \
					   sizeof(err)),                       \
			     -1, "0x%llx translated to 0x%llx",                \
			     (unsigned long long)(linear),                     \
			     (unsigned long long)gpa_);                        \
		cr_assert_eq(gpa_, 0xdead);                                    \
	} while (0)

Test(paging, page_4k)
{
	EXPECT_GPA(LA_4K, 0x123000);
	EXPECT_GPA(LA_4K + 0xabc, 0x123abc);
	EXPECT_GPA(LA_4K + 0xfff, 0x123fff);
}

Test(paging, pte_pat_bit_is_not_a_page_size)
{
	put(PT, LA_4K, 1, 0x123000 | P | PS);
	EXPECT_GPA(LA_4K + 0x10, 0x123010);
}

Test(paging, page_2m)
{
	EXPECT_GPA(LA_2M, 0x600000);
	EXPECT_GPA(LA_2M + 0x12345, 0x612345);
	EXPECT_GPA(LA_2M + 0x1fffff, 0x7fffff);
}

Test(paging, page_1g)
{
	EXPECT_GPA(LA_1G, 0x40000000);
	EXPECT_GPA(LA_1G + 0x12345678, 0x52345678);
}

Test(paging, cr3_low_bits_ignored)
{
	sregs.cr3 = PML4 | 0x18 | 0x5; /* PWT/PCD or a PCID */
	EXPECT_GPA(LA_4K + 0x1, 0x123001);
}

Test(paging, low_half_address)
{
	const uint64_t la = 0x00007f0000200000ULL;

	put(PML4, la, 4, 0x6000 | P | RW);
	put(0x6000, la, 3, 0x7000 | P | RW);
	put(0x7000, la, 2, 0x8000 | P | RW);
	put(0x8000, la, 1, 0x3ff000 | P | RW);
	EXPECT_GPA(la + 0x42, 0x3ff042);
}

Test(paging, not_present)
{
	/* next 4K page: PTE is zero */
	EXPECT_FAIL(LA_4K + 0x1000);
	/* PD entry zero */
	EXPECT_FAIL(LA_4K + 0x400000);
	/* PDPT entry zero */
	EXPECT_FAIL(0xffffffff00000000ULL);
	/* PML4 entry zero */
	EXPECT_FAIL(0xffff888000000000ULL);
	/* an entry with every bit but present set */
	put(PT, LA_4K, 1, ~P);
	EXPECT_FAIL(LA_4K);
}

Test(paging, not_present_message_names_addresses)
{
	EXPECT_FAIL(LA_4K + 0x1008);
	cr_assert_str_eq(
		err,
		"page walk: linear address 0xffffffff81235008 is not mapped: "
		"PTE at gpa 0x41a8 is not present (0x0)");
}

Test(paging, table_pointer_outside_ram)
{
	/* PT pointer far beyond the 64 MiB of RAM */
	put(PD, LA_4K, 2, 0x000ffffffffff000ULL | P | RW);
	EXPECT_FAIL(LA_4K);
	/* PT pointer just past the end of RAM */
	put(PD, LA_4K, 2, 64 * MIB | P | RW);
	EXPECT_FAIL(LA_4K);
	/* PT pointer into the MMIO hole */
	put(PD, LA_4K, 2, 0xd0000000 | P | RW);
	EXPECT_FAIL(LA_4K);
	/* CR3 itself outside RAM */
	sregs.cr3 = 0x7ffff000;
	EXPECT_FAIL(LA_2M);
}

Test(paging, last_table_in_ram)
{
	/* a table in the last page of RAM is fine */
	const uint64_t last = 64 * MIB - 0x1000;

	put(PD, LA_4K, 2, last | P | RW);
	put(last, LA_4K, 1, 0x2ff000 | P);
	EXPECT_GPA(LA_4K + 8, 0x2ff008);
}

Test(paging, reserved_ps_in_pml4)
{
	put(PML4, LA_4K, 4, PDPT | P | RW | PS);
	EXPECT_FAIL(LA_4K);
}

Test(paging, non_canonical)
{
	EXPECT_FAIL(0x0000800000000000ULL);
	EXPECT_FAIL(0xffff7fffffffffffULL);
	EXPECT_FAIL(0x8000000000000000ULL);
}

Test(paging, unsupported_modes)
{
	struct kvm_sregs paging_off = sregs;
	struct kvm_sregs legacy_pae = sregs;
	struct kvm_sregs no_pae = sregs;

	paging_off.cr0 &= ~0x80000000ULL;
	legacy_pae.efer = 0;
	no_pae.cr4 = 0;
	sregs = paging_off;
	EXPECT_FAIL(LA_4K);
	sregs = legacy_pae;
	EXPECT_FAIL(LA_4K);
	sregs = no_pae;
	EXPECT_FAIL(LA_4K);
}

Test(paging, five_level)
{
	/* canonical only with 57-bit addresses; bits 47:0 as LA_4K's */
	const uint64_t la = 0xff00ffff81234000ULL;

	sregs.cr4 |= 1ULL << 12; /* LA57 */
	sregs.cr3 = PML5;
	cr_assert_eq(idx(la, 5), 0x100);
	put(PML5, la, 5, PML4 | P | RW);
	put(PML4, la, 4, PDPT | P | RW);
	EXPECT_GPA(la + 0x123, 0x123123);
	/* the upper bits take part now: a different PML5 slot is empty */
	EXPECT_FAIL(LA_4K);
	/* 4-level non-canonical, 5-level canonical and unmapped */
	EXPECT_FAIL(0x0000800000000000ULL);
	/* beyond 57 bits */
	EXPECT_FAIL(0x0100000000000000ULL);
}

Test(paging, five_level_reserved_ps)
{
	const uint64_t la = 0xff00ffff81234000ULL;

	sregs.cr4 |= 1ULL << 12;
	sregs.cr3 = PML5;
	put(PML5, la, 5, PML4 | P | RW | PS);
	EXPECT_FAIL(la);
}

Test(paging, read_write_across_pages)
{
	/* the next linear page maps to a physically distant frame */
	put(PT, LA_4K + 0x1000, 1, 0x2ff000 | P | RW);
	const uint8_t data[4] = { 0x11, 0x22, 0x33, 0x44 };
	uint8_t back[4] = { 0 };

	cr_assert_eq(x86_write_linear(&mem, &sregs, LA_4K + 0xffe, data, 4, err,
				      sizeof(err)),
		     0);
	uint8_t *first = guest_memory_ptr(&mem, 0x123ffe, 2);
	uint8_t *second = guest_memory_ptr(&mem, 0x2ff000, 2);

	cr_assert_eq(first[0], 0x11);
	cr_assert_eq(first[1], 0x22);
	cr_assert_eq(second[0], 0x33);
	cr_assert_eq(second[1], 0x44);
	/* and nothing leaked into the physically next page */
	cr_assert_eq(*(uint8_t *)guest_memory_ptr(&mem, 0x124000, 1), 0);

	cr_assert_eq(x86_read_linear(&mem, &sregs, LA_4K + 0xffe, back, 4, err,
				     sizeof(err)),
		     0);
	cr_assert_arr_eq(back, data, 4);
}

Test(paging, read_write_in_one_page)
{
	uint32_t value = 0x1f80, back = 0;

	cr_assert_eq(x86_write_linear(&mem, &sregs, LA_2M + 0x1ffffc, &value,
				      sizeof(value), err, sizeof(err)),
		     0);
	cr_assert_eq(*(uint32_t *)guest_memory_ptr(&mem, 0x7ffffc, 4), 0x1f80);
	cr_assert_eq(x86_read_linear(&mem, &sregs, LA_2M + 0x1ffffc, &back,
				     sizeof(back), err, sizeof(err)),
		     0);
	cr_assert_eq(back, 0x1f80);
}

Test(paging, cross_page_into_unmapped_page_fails)
{
	uint32_t value = 0;

	cr_assert_eq(x86_read_linear(&mem, &sregs, LA_4K + 0xffe, &value,
				     sizeof(value), err, sizeof(err)),
		     -1);
}

Test(paging, leaf_outside_ram_fails_on_access)
{
	uint32_t value = 0xffffffff;

	/* translates (to 0x40000010), but that is not RAM in a 64 MiB VM */
	EXPECT_GPA(LA_1G + 0x10, 0x40000010);
	cr_assert_eq(x86_read_linear(&mem, &sregs, LA_1G + 0x10, &value,
				     sizeof(value), err, sizeof(err)),
		     -1);
	cr_assert_eq(x86_write_linear(&mem, &sregs, LA_1G + 0x10, &value,
				      sizeof(value), err, sizeof(err)),
		     -1);
	cr_assert_eq(value, 0xffffffff);
}
