// SPDX-License-Identifier: Apache-2.0
/*
 * test_boot.c - the boot-protocol loader writes what Linux reads: kernel
 * bytes at the right guest addresses, boot_params fields, the e820 map,
 * the command line, the initrd at the top of low RAM, and page tables that
 * identity-map the first 4 GiB.
 */
#include <asm/bootparam.h>
#include <asm/e820.h>
#include <criterion/criterion.h>
#include <elf.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vmm/x86/boot.h"
#include "vmm/x86/layout.h"

#define LOAD_ADDR 0x1000000ULL

static struct guest_memory mem;
static char dir[] = "/tmp/thaw-boot-test-XXXXXX";
static char kernel_path[128], initrd_path[128];

static void write_file(const char *path, const void *data, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	close(fd);
}

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	snprintf(kernel_path, sizeof(kernel_path), "%s/vmlinux", dir);
	snprintf(initrd_path, sizeof(initrd_path), "%s/initrd", dir);
	cr_assert_eq(guest_memory_create(&mem, 128), 0);
}

static void teardown(void)
{
	unlink(kernel_path);
	unlink(initrd_path);
	rmdir(dir);
	guest_memory_destroy(&mem);
}

/* An ELF kernel with a 32-byte text segment and a bss-only segment. */
static void write_elf_kernel(void)
{
	struct elf_kernel {
		Elf64_Ehdr eh;
		Elf64_Phdr ph[3];
		uint8_t text[32];
	} k = {
		.eh = { .e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3,
				     ELFCLASS64, ELFDATA2LSB, EV_CURRENT },
			.e_type = ET_EXEC,
			.e_machine = EM_X86_64,
			.e_entry = LOAD_ADDR + 8,
			.e_phoff = sizeof(Elf64_Ehdr),
			.e_phentsize = sizeof(Elf64_Phdr),
			.e_phnum = 3 },
		.ph = { { .p_type = PT_LOAD,
			  .p_offset = offsetof(struct elf_kernel, text),
			  .p_paddr = LOAD_ADDR,
			  .p_filesz = 32,
			  .p_memsz = 32 },
			{ .p_type = PT_NOTE },
			{ .p_type = PT_LOAD,
			  .p_paddr = LOAD_ADDR + 0x200000,
			  .p_memsz = 0x100000 } },
	};
	for (int i = 0; i < 32; i++)
		k.text[i] = 0xa0 + i;
	write_file(kernel_path, &k, sizeof(k));
}

static struct boot_params *params(void)
{
	return guest_memory_ptr(&mem, BOOT_PARAMS_ADDR,
				sizeof(struct boot_params));
}

TestSuite(boot, .init = setup, .fini = teardown);

Test(boot, elf_segments_land_at_their_physical_addresses)
{
	struct x86_boot b;
	uint8_t *text = guest_memory_ptr(&mem, LOAD_ADDR, 32);

	/* bss must be zeroed even if memory was dirty */
	memset(guest_memory_ptr(&mem, LOAD_ADDR + 0x200000, 16), 0xee, 16);
	write_elf_kernel();
	cr_assert_eq(
		x86_load_linux(&mem, kernel_path, NULL, "console=ttyS0", &b),
		0);
	cr_expect_eq(b.format, KERNEL_ELF);
	cr_expect_eq(b.entry, LOAD_ADDR + 8);
	cr_expect_eq(b.kernel_end, LOAD_ADDR + 0x300000);
	for (int i = 0; i < 32; i++)
		cr_expect_eq(text[i], 0xa0 + i);
	cr_expect_eq(
		*(uint8_t *)guest_memory_ptr(&mem, LOAD_ADDR + 0x200000, 1), 0);
	cr_expect_eq(params()->hdr.boot_flag, 0xaa55);
	cr_expect_eq(params()->hdr.header, 0x53726448);
	cr_expect_eq(params()->hdr.type_of_loader, 0xff);
	cr_expect_eq(b.initrd_addr, 0);
	cr_expect_eq(params()->hdr.ramdisk_size, 0);
}

Test(boot, command_line_is_copied_and_referenced)
{
	struct x86_boot b;

	write_elf_kernel();
	cr_assert_eq(x86_load_linux(&mem, kernel_path, NULL,
				    "console=ttyS0 panic=-1", &b),
		     0);
	cr_expect_eq(params()->hdr.cmd_line_ptr, BOOT_CMDLINE_ADDR);
	cr_expect_str_eq((char *)guest_memory_ptr(&mem, BOOT_CMDLINE_ADDR, 1),
			 "console=ttyS0 panic=-1");
}

Test(boot, e820_describes_low_memory_hole_and_ram)
{
	struct x86_boot b;

	write_elf_kernel();
	cr_assert_eq(x86_load_linux(&mem, kernel_path, NULL, "", &b), 0);
	struct boot_params *p = params();
	cr_assert_eq(p->e820_entries, 3);
	cr_expect_eq(p->e820_table[0].addr, 0);
	cr_expect_eq(p->e820_table[0].size, EBDA_START);
	cr_expect_eq(p->e820_table[0].type, E820_RAM);
	cr_expect_eq(p->e820_table[1].type, E820_RESERVED);
	cr_expect_eq(p->e820_table[2].addr, HIGH_MEMORY_START);
	cr_expect_eq(p->e820_table[2].size, 128 * MIB - HIGH_MEMORY_START);
	cr_expect_eq(p->e820_table[2].type, E820_RAM);
}

Test(boot, initrd_sits_page_aligned_at_the_top_of_ram)
{
	struct x86_boot b;
	uint8_t initrd[5000];

	for (size_t i = 0; i < sizeof(initrd); i++)
		initrd[i] = i * 7;
	write_elf_kernel();
	write_file(initrd_path, initrd, sizeof(initrd));
	cr_assert_eq(x86_load_linux(&mem, kernel_path, initrd_path, "", &b), 0);
	cr_expect_eq(b.initrd_size, sizeof(initrd));
	cr_expect_eq(b.initrd_addr % 4096, 0);
	cr_expect_leq(b.initrd_addr + sizeof(initrd), 128 * MIB);
	cr_expect_gt(b.initrd_addr + sizeof(initrd), 128 * MIB - 4096);
	cr_expect_eq(params()->hdr.ramdisk_image, b.initrd_addr);
	cr_expect_eq(params()->hdr.ramdisk_size, sizeof(initrd));
	cr_expect_arr_eq(guest_memory_ptr(&mem, b.initrd_addr, sizeof(initrd)),
			 initrd, sizeof(initrd));
}

Test(boot, bzimage_is_loaded_at_its_preferred_address)
{
	static uint8_t image[5 * 512 + 8192];
	struct x86_boot b;
	struct setup_header hdr = { 0 };

	hdr.setup_sects = 4;
	hdr.boot_flag = 0xaa55;
	hdr.header = 0x53726448;
	hdr.version = 0x020f;
	hdr.xloadflags = XLF_KERNEL_64 | XLF_CAN_BE_LOADED_ABOVE_4G;
	hdr.pref_address = 0x1000000;
	hdr.init_size = 0x400000;
	hdr.cmdline_size = 2047;
	memcpy(image + 0x1f1, &hdr, sizeof(hdr));
	image[0x201] = 0x6a; /* header length byte */
	for (int i = 0; i < 8192; i++)
		image[5 * 512 + i] = i & 0xff;
	write_file(kernel_path, image, sizeof(image));
	cr_assert_eq(x86_load_linux(&mem, kernel_path, NULL, "quiet", &b), 0);
	cr_expect_eq(b.format, KERNEL_BZIMAGE);
	cr_expect_eq(b.entry, 0x1000000 + 0x200);
	cr_expect_eq(b.kernel_end, 0x1000000 + 0x400000);
	cr_expect_arr_eq(guest_memory_ptr(&mem, 0x1000000, 8192),
			 image + 5 * 512, 8192);
	cr_expect_eq(params()->hdr.code32_start, 0x1000000);
	cr_expect_eq(params()->hdr.version, 0x020f);
	cr_expect(params()->hdr.loadflags & CAN_USE_HEAP);
}

Test(boot, bzimage_without_64bit_entry_is_refused)
{
	static uint8_t image[5 * 512 + 512];
	struct x86_boot b;
	struct setup_header hdr = { .setup_sects = 4,
				    .header = 0x53726448,
				    .version = 0x020f };

	memcpy(image + 0x1f1, &hdr, sizeof(hdr));
	image[0x201] = 0x6a;
	write_file(kernel_path, image, sizeof(image));
	cr_expect_eq(x86_load_linux(&mem, kernel_path, NULL, "", &b), -1);
}

Test(boot, elf_entry_outside_segments_is_refused)
{
	struct x86_boot b;
	struct {
		Elf64_Ehdr eh;
		Elf64_Phdr ph;
	} k = {
		.eh = { .e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3,
				     ELFCLASS64, ELFDATA2LSB, EV_CURRENT },
			.e_type = ET_EXEC,
			.e_machine = EM_X86_64,
			.e_entry = 0x5000000,
			.e_phoff = sizeof(Elf64_Ehdr),
			.e_phentsize = sizeof(Elf64_Phdr),
			.e_phnum = 1 },
		.ph = { .p_type = PT_LOAD,
			.p_paddr = LOAD_ADDR,
			.p_memsz = 64 },
	};

	write_file(kernel_path, &k, sizeof(k));
	cr_expect_eq(x86_load_linux(&mem, kernel_path, NULL, "", &b), -1);
}

Test(boot, page_tables_identity_map_four_gib)
{
	x86_write_boot_page_tables(&mem);
	uint64_t *pml4 = guest_memory_ptr(&mem, BOOT_PML4_ADDR, 8);
	uint64_t *pdpt = guest_memory_ptr(&mem, BOOT_PDPT_ADDR, 4 * 8);
	uint64_t *gdt = guest_memory_ptr(&mem, BOOT_GDT_ADDR, 4 * 8);

	cr_expect_eq(pml4[0] & ~0xfffULL, BOOT_PDPT_ADDR);
	cr_expect_eq(pml4[0] & 1, 1);
	for (int g = 0; g < 4; g++) {
		uint64_t *pd =
			guest_memory_ptr(&mem, pdpt[g] & ~0xfffULL, 4096);

		cr_assert_not_null(pd);
		for (int i = 0; i < 512; i += 97) {
			cr_expect_eq(pd[i] & ~0xfffULL,
				     ((uint64_t)g << 30) | ((uint64_t)i << 21));
			cr_expect_eq(pd[i] & 0x83, 0x83); /* P, RW, PS */
		}
	}
	/* __BOOT_CS: present, 64-bit code; __BOOT_DS: present data */
	cr_expect_eq((gdt[2] >> 53) & 1, 1);
	cr_expect_eq((gdt[2] >> 47) & 1, 1);
	cr_expect_eq((gdt[3] >> 47) & 1, 1);
}
