// SPDX-License-Identifier: Apache-2.0
/*
 * test_pvm_mode.c - PVM mode's two decisions without a host: which ELF
 * notes make an image a PVM guest (its own note among others, nothing for
 * foreign or broken notes), and what starting one changes in the boot page
 * tables (the user bit on every entry of the identity map, nothing for an
 * image that is not a PVM guest, an error for an ABI revision thaw-vmm
 * does not speak).  test_pvm_gate runs the whole path on a real host.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "vmm/x86/layout.h"
#include "vmm/x86/pvm_abi.h"
#include "vmm/x86/pvm_mode.h"

#define PTE_USER 0x4ULL

/* One ELF note: header, a name of 5 to 8 bytes (padded to 8), a 4-byte
 * descriptor. */
struct note {
	Elf64_Nhdr nh;
	char name[8];
	uint32_t desc;
};

static struct note make_note(const char *name, uint32_t type, uint32_t desc)
{
	struct note n = { .nh = { .n_namesz = strlen(name) + 1,
				  .n_descsz = sizeof(uint32_t),
				  .n_type = type },
			  .desc = desc };

	strcpy(n.name, name);
	return n;
}

Test(pvm_note, its_own_note_names_the_abi_revision)
{
	struct note n = make_note(THAW_NOTE_NAME, THAW_NOTE_PVM_GUEST, 7);

	cr_expect_eq(pvm_mode_note_abi((const uint8_t *)&n, sizeof(n)), 7);
}

Test(pvm_note, is_found_after_another_vendors_note)
{
	struct note n[2] = {
		make_note("Linux", THAW_NOTE_PVM_GUEST, 9),
		make_note(THAW_NOTE_NAME, THAW_NOTE_PVM_GUEST, 1),
	};

	cr_expect_eq(pvm_mode_note_abi((const uint8_t *)n, sizeof(n)), 1);
}

Test(pvm_note, another_type_or_vendor_is_not_a_pvm_guest)
{
	struct note other_type = make_note(THAW_NOTE_NAME, 1, 1);
	struct note other_name = make_note("Linux", THAW_NOTE_PVM_GUEST, 1);

	cr_expect_eq(pvm_mode_note_abi((const uint8_t *)&other_type,
				       sizeof(other_type)),
		     0);
	cr_expect_eq(pvm_mode_note_abi((const uint8_t *)&other_name,
				       sizeof(other_name)),
		     0);
}

Test(pvm_note, a_truncated_or_oversized_note_is_ignored)
{
	struct note n = make_note(THAW_NOTE_NAME, THAW_NOTE_PVM_GUEST, 1);

	cr_expect_eq(pvm_mode_note_abi((const uint8_t *)&n, sizeof(n) - 1), 0);
	n.nh.n_descsz = 0xfffffff0;
	cr_expect_eq(pvm_mode_note_abi((const uint8_t *)&n, sizeof(n)), 0);
	cr_expect_eq(pvm_mode_note_abi((const uint8_t *)&n, 3), 0);
}

static struct guest_memory mem;

static void boot_tables(void)
{
	cr_assert_eq(guest_memory_create(&mem, 64), 0);
	x86_write_boot_page_tables(&mem);
}

static void free_memory(void)
{
	guest_memory_destroy(&mem);
}

TestSuite(pvm_boot, .init = boot_tables, .fini = free_memory);

Test(pvm_boot, a_pvm_guest_gets_the_user_bit_on_every_boot_mapping)
{
	struct x86_boot boot = { .pvm_abi = THAW_PVM_GUEST_ABI };
	char err[256] = "";

	cr_assert_eq(pvm_mode_prepare_boot(&mem, &boot, err, sizeof(err)), 1,
		     "%s", err);
	uint64_t *pml4 = guest_memory_ptr(&mem, BOOT_PML4_ADDR, 4096);
	uint64_t *pdpt = guest_memory_ptr(&mem, BOOT_PDPT_ADDR, 4096);
	cr_expect_eq(pml4[0] & PTE_USER, PTE_USER);
	cr_expect_eq(pml4[1], 0, "an absent entry stays absent");
	for (int g = 0; g < BOOT_IDENTITY_MAP_GIB; g++) {
		uint64_t *pd =
			guest_memory_ptr(&mem, pdpt[g] & ~0xfffULL, 4096);

		cr_expect_eq(pdpt[g] & PTE_USER, PTE_USER);
		for (int i = 0; i < 512; i++)
			cr_expect_eq(pd[i] & (PTE_USER | 0x83), PTE_USER | 0x83,
				     "GiB %d, PD entry %d: %#llx", g, i,
				     (unsigned long long)pd[i]);
	}
}

Test(pvm_boot, an_image_without_the_note_is_left_alone)
{
	struct x86_boot boot = { .pvm_abi = 0 };
	char err[256] = "";

	cr_expect_eq(pvm_mode_prepare_boot(&mem, &boot, err, sizeof(err)), 0);
	uint64_t *pml4 = guest_memory_ptr(&mem, BOOT_PML4_ADDR, 4096);
	cr_expect_eq(pml4[0] & PTE_USER, 0);
}

Test(pvm_boot, an_abi_revision_it_does_not_speak_is_an_error)
{
	struct x86_boot boot = { .pvm_abi = THAW_PVM_GUEST_ABI + 1 };
	char err[256] = "";

	cr_expect_eq(pvm_mode_prepare_boot(&mem, &boot, err, sizeof(err)),
		     -EPROTONOSUPPORT);
	cr_expect_not_null(strstr(err, "revision 2"), "%s", err);
}
