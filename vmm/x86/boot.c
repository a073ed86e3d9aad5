// SPDX-License-Identifier: Apache-2.0
/*
 * boot.c - loads Linux into guest memory; see boot.h.
 *
 * Two kernel formats:
 *  - ELF vmlinux (what thaw builds): PT_LOAD segments go to their physical
 *    addresses and e_entry is the 64-bit entry, startup_64.  boot_params
 *    is built from scratch.  PT_NOTE segments are read for the note that
 *    makes the image a PVM guest (pvm_mode.h).
 *  - bzImage (what distributions ship): the setup header is copied into
 *    boot_params, the protected-mode part is loaded at the kernel's
 *    preferred address and entered at +0x200, the 64-bit entry that
 *    XLF_KERNEL_64 promises.  The kernel then decompresses itself.
 */
#include "vmm/x86/boot.h"

#include <asm/bootparam.h>
#include <asm/e820.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "vmm/x86/layout.h"
#include "vmm/x86/pvm_mode.h"

#define SETUP_HEADER_OFFSET 0x1f1
#define SETUP_HEADER_MAGIC 0x53726448 /* "HdrS" */
#define BZIMAGE_MIN_VERSION 0x020c    /* 2.12: xloadflags, 64-bit entry */
#define BZIMAGE_ENTRY_64_OFFSET 0x200
#define LOADER_TYPE_UNDEFINED 0xff
#define BOOT_FLAG_MAGIC 0xaa55
#define ELF_KERNEL_ALIGNMENT 0x1000000
#define PAGE_SIZE_4K 4096ULL

/* A read-only view of a whole file. */
struct file_map {
	const char *path;
	const uint8_t *data;
	uint64_t size;
};

static int file_map_open(struct file_map *f, const char *what, const char *path)
{
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	f->path = path;
	f->data = NULL;
	if (fd < 0) {
		log_error("%s %s: %s", what, path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
		log_error("%s %s: not a regular, non-empty file", what, path);
		close(fd);
		return -1;
	}
	f->size = st.st_size;
	void *p = mmap(NULL, f->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		log_error("%s %s: cannot map: %s", what, path, strerror(errno));
		return -1;
	}
	f->data = p;
	return 0;
}

static void file_map_close(struct file_map *f)
{
	if (f->data)
		munmap((void *)f->data, f->size);
	f->data = NULL;
}

static bool is_elf(const struct file_map *k)
{
	return k->size >= SELFMAG && memcmp(k->data, ELFMAG, SELFMAG) == 0;
}

static bool is_bzimage(const struct file_map *k)
{
	uint32_t magic;

	if (k->size < SETUP_HEADER_OFFSET + sizeof(struct setup_header))
		return false;
	memcpy(&magic, k->data + offsetof(struct boot_params, hdr.header),
	       sizeof(magic));
	return magic == SETUP_HEADER_MAGIC;
}

static int load_elf(struct guest_memory *mem, const struct file_map *k,
		    struct boot_params *params, struct x86_boot *boot)
{
	Elf64_Ehdr eh;

	if (k->size < sizeof(eh)) {
		log_error("kernel %s: truncated ELF header", k->path);
		return -1;
	}
	memcpy(&eh, k->data, sizeof(eh));
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_machine != EM_X86_64 ||
	    eh.e_type != ET_EXEC) {
		log_error("kernel %s: ELF file is not a 64-bit x86-64 kernel "
			  "image (class %u, machine %u, type %u)",
			  k->path, eh.e_ident[EI_CLASS], eh.e_machine,
			  eh.e_type);
		return -1;
	}
	if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 ||
	    eh.e_phoff > k->size ||
	    (k->size - eh.e_phoff) / sizeof(Elf64_Phdr) < eh.e_phnum) {
		log_error("kernel %s: program header table (offset %llu, %u "
			  "entries) lies outside the %llu-byte file",
			  k->path, (unsigned long long)eh.e_phoff, eh.e_phnum,
			  (unsigned long long)k->size);
		return -1;
	}

	bool entry_loaded = false;
	boot->kernel_end = 0;
	for (int i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		memcpy(&ph, k->data + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type != PT_LOAD && ph.p_type != PT_NOTE)
			continue;
		if (ph.p_offset > k->size ||
		    ph.p_filesz > k->size - ph.p_offset ||
		    ph.p_filesz > ph.p_memsz) {
			log_error(
				"kernel %s: segment %d (offset %llu, %llu "
				"bytes) extends past the end of the %llu-byte "
				"file",
				k->path, i, (unsigned long long)ph.p_offset,
				(unsigned long long)ph.p_filesz,
				(unsigned long long)k->size);
			return -1;
		}
		if (ph.p_type == PT_NOTE) {
			if (!boot->pvm_abi)
				boot->pvm_abi = pvm_mode_note_abi(
					k->data + ph.p_offset, ph.p_filesz);
			continue;
		}
		uint8_t *dst = guest_memory_ptr(mem, ph.p_paddr, ph.p_memsz);
		if (ph.p_paddr < HIGH_MEMORY_START) {
			log_error(
				"kernel %s: segment %d at 0x%llx lies below 1 "
				"MiB, where the boot structures go",
				k->path, i, (unsigned long long)ph.p_paddr);
			return -1;
		}
		if (!dst) {
			log_error("kernel %s: segment %d at 0x%llx (%llu MiB) "
				  "does not fit in %llu MiB of guest memory",
				  k->path, i, (unsigned long long)ph.p_paddr,
				  (unsigned long long)(ph.p_memsz / MIB),
				  (unsigned long long)(mem->size / MIB));
			return -1;
		}
		memcpy(dst, k->data + ph.p_offset, ph.p_filesz);
		memset(dst + ph.p_filesz, 0, ph.p_memsz - ph.p_filesz);
		if (eh.e_entry >= ph.p_paddr &&
		    eh.e_entry - ph.p_paddr < ph.p_memsz)
			entry_loaded = true;
		if (ph.p_paddr + ph.p_memsz > boot->kernel_end)
			boot->kernel_end = ph.p_paddr + ph.p_memsz;
	}
	if (!entry_loaded) {
		log_error("kernel %s: entry point 0x%llx is not inside any "
			  "loaded segment",
			  k->path, (unsigned long long)eh.e_entry);
		return -1;
	}
	boot->format = KERNEL_ELF;
	boot->entry = eh.e_entry;

	params->hdr.boot_flag = BOOT_FLAG_MAGIC;
	params->hdr.header = SETUP_HEADER_MAGIC;
	params->hdr.kernel_alignment = ELF_KERNEL_ALIGNMENT;
	return 0;
}

static int load_bzimage(struct guest_memory *mem, const struct file_map *k,
			struct boot_params *params, struct x86_boot *boot)
{
	struct setup_header *hdr = &params->hdr;
	/* The header ends at 0x202 + the byte at 0x201 (boot.rst). */
	size_t hdr_len = 0x202 + k->data[0x201] - SETUP_HEADER_OFFSET;

	if (hdr_len > sizeof(*hdr))
		hdr_len = sizeof(*hdr);
	memcpy(hdr, k->data + SETUP_HEADER_OFFSET, hdr_len);

	if (hdr->version < BZIMAGE_MIN_VERSION ||
	    !(hdr->xloadflags & XLF_KERNEL_64)) {
		log_error("kernel %s: bzImage boot protocol %u.%02u without a "
			  "64-bit entry point (need 2.12 and XLF_KERNEL_64)",
			  k->path, hdr->version >> 8, hdr->version & 0xff);
		return -1;
	}
	uint64_t setup_size =
		((hdr->setup_sects ? hdr->setup_sects : 4) + 1) * 512ULL;
	if (setup_size >= k->size) {
		log_error(
			"kernel %s: truncated bzImage (%llu bytes, setup alone "
			"is %llu)",
			k->path, (unsigned long long)k->size,
			(unsigned long long)setup_size);
		return -1;
	}
	uint64_t payload = k->size - setup_size;
	uint64_t load_addr = hdr->pref_address;
	uint64_t footprint =
		hdr->init_size > payload ? hdr->init_size : payload;
	uint8_t *dst = guest_memory_ptr(mem, load_addr, footprint);

	if (load_addr < HIGH_MEMORY_START || !dst) {
		log_error("kernel %s: needs %llu MiB at 0x%llx, more than %llu "
			  "MiB of guest memory holds",
			  k->path, (unsigned long long)(footprint / MIB),
			  (unsigned long long)load_addr,
			  (unsigned long long)(mem->size / MIB));
		return -1;
	}
	memcpy(dst, k->data + setup_size, payload);
	boot->format = KERNEL_BZIMAGE;
	boot->entry = load_addr + BZIMAGE_ENTRY_64_OFFSET;
	boot->kernel_end = load_addr + footprint;
	hdr->code32_start = load_addr;
	hdr->loadflags |= CAN_USE_HEAP;
	return 0;
}

static int load_initrd(struct guest_memory *mem, const char *path,
		       uint64_t initrd_max, struct x86_boot *boot)
{
	struct file_map f;

	if (file_map_open(&f, "initrd", path) < 0)
		return -1;

	uint64_t top = guest_memory_low_end(mem);
	if (top > initrd_max + 1)
		top = initrd_max + 1;
	uint64_t room = top > boot->kernel_end ? top - boot->kernel_end : 0;
	if (f.size > room) {
		log_error("initrd %s: %llu MiB does not fit in guest memory: "
			  "%llu MiB left above the kernel (raise --mem)",
			  path, (unsigned long long)((f.size + MIB - 1) / MIB),
			  (unsigned long long)(room / MIB));
		file_map_close(&f);
		return -1;
	}
	boot->initrd_addr = (top - f.size) & ~(PAGE_SIZE_4K - 1);
	boot->initrd_size = f.size;
	memcpy(guest_memory_ptr(mem, boot->initrd_addr, f.size), f.data,
	       f.size);
	file_map_close(&f);
	return 0;
}

static void add_e820(struct boot_params *params, uint64_t addr, uint64_t size,
		     uint32_t type)
{
	struct boot_e820_entry *e = &params->e820_table[params->e820_entries++];

	e->addr = addr;
	e->size = size;
	e->type = type;
}

static void write_e820(const struct guest_memory *mem,
		       struct boot_params *params)
{
	add_e820(params, 0, EBDA_START, E820_RAM);
	add_e820(params, EBDA_START, HIGH_MEMORY_START - EBDA_START,
		 E820_RESERVED);
	add_e820(params, HIGH_MEMORY_START,
		 guest_memory_low_end(mem) - HIGH_MEMORY_START, E820_RAM);
	if (mem->nr_regions > 1)
		add_e820(params, mem->regions[1].guest_addr,
			 mem->regions[1].size, E820_RAM);
}

int x86_set_cmdline(struct guest_memory *mem, const struct x86_boot *boot,
		    const char *cmdline)
{
	if (strlen(cmdline) > boot->cmdline_max) {
		log_error("kernel command line is %zu bytes; the kernel takes "
			  "%u",
			  strlen(cmdline), boot->cmdline_max);
		return -1;
	}
	strcpy(guest_memory_ptr(mem, BOOT_CMDLINE_ADDR, BOOT_CMDLINE_MAX),
	       cmdline);
	return 0;
}

int x86_load_linux(struct guest_memory *mem, const char *kernel_path,
		   const char *initrd_path, const char *cmdline,
		   struct x86_boot *boot)
{
	struct boot_params *params =
		guest_memory_ptr(mem, BOOT_PARAMS_ADDR, sizeof(*params));
	struct file_map kernel;
	int ret;

	memset(boot, 0, sizeof(*boot));
	memset(params, 0, sizeof(*params));
	boot->cmdline_max = BOOT_CMDLINE_MAX - 1;
	if (strlen(cmdline) > boot->cmdline_max) {
		log_error("kernel command line is %zu bytes; the limit is %u",
			  strlen(cmdline), boot->cmdline_max);
		return -1;
	}
	if (file_map_open(&kernel, "kernel", kernel_path) < 0)
		return -1;
	if (is_elf(&kernel)) {
		ret = load_elf(mem, &kernel, params, boot);
	} else if (is_bzimage(&kernel)) {
		ret = load_bzimage(mem, &kernel, params, boot);
	} else {
		log_error("kernel %s: neither an ELF vmlinux nor a bzImage (no "
			  "ELF magic, no HdrS setup header)",
			  kernel_path);
		ret = -1;
	}
	file_map_close(&kernel);
	if (ret < 0)
		return -1;

	if (boot->format == KERNEL_BZIMAGE &&
	    params->hdr.cmdline_size < boot->cmdline_max)
		boot->cmdline_max = params->hdr.cmdline_size;
	if (x86_set_cmdline(mem, boot, cmdline) < 0)
		return -1;
	params->hdr.type_of_loader = LOADER_TYPE_UNDEFINED;
	params->hdr.cmd_line_ptr = BOOT_CMDLINE_ADDR;
	params->hdr.cmdline_size = BOOT_CMDLINE_MAX - 1;

	if (initrd_path) {
		uint64_t initrd_max = UINT32_MAX;

		if (boot->format == KERNEL_BZIMAGE &&
		    !(params->hdr.xloadflags & XLF_CAN_BE_LOADED_ABOVE_4G))
			initrd_max = params->hdr.initrd_addr_max;
		if (load_initrd(mem, initrd_path, initrd_max, boot) < 0)
			return -1;
		params->hdr.ramdisk_image = (uint32_t)boot->initrd_addr;
		params->ext_ramdisk_image = boot->initrd_addr >> 32;
		params->hdr.ramdisk_size = (uint32_t)boot->initrd_size;
		params->ext_ramdisk_size = boot->initrd_size >> 32;
	}
	write_e820(mem, params);
	return 0;
}

/* Flat 64-bit code and data descriptors at the selectors Linux expects. */
#define GDT_CODE64 0x00af9b000000ffffULL
#define GDT_DATA 0x00cf93000000ffffULL
#define PTE_PRESENT_RW 0x3ULL
#define PDE_LARGE 0x80ULL

void x86_write_boot_page_tables(struct guest_memory *mem)
{
	uint64_t *gdt = guest_memory_ptr(mem, BOOT_GDT_ADDR, 4 * 8);
	uint64_t *pml4 = guest_memory_ptr(mem, BOOT_PML4_ADDR, 4096);
	uint64_t *pdpt = guest_memory_ptr(mem, BOOT_PDPT_ADDR, 4096);
	uint64_t *pd = guest_memory_ptr(mem, BOOT_PD_ADDR,
					BOOT_IDENTITY_MAP_GIB * 4096);

	gdt[0] = 0;
	gdt[1] = 0;
	gdt[2] = GDT_CODE64; /* __BOOT_CS = 0x10 */
	gdt[3] = GDT_DATA;   /* __BOOT_DS = 0x18 */

	pml4[0] = BOOT_PDPT_ADDR | PTE_PRESENT_RW;
	for (int g = 0; g < BOOT_IDENTITY_MAP_GIB; g++) {
		pdpt[g] = (BOOT_PD_ADDR + g * 4096) | PTE_PRESENT_RW;
		for (int i = 0; i < 512; i++)
			pd[g * 512 + i] = ((uint64_t)g << 30) |
					  ((uint64_t)i << 21) | PTE_PRESENT_RW |
					  PDE_LARGE;
	}
}
