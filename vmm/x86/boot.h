/* SPDX-License-Identifier: Apache-2.0 */
/*
 * boot.h - the Linux x86 64-bit boot protocol.
 *
 * x86_load_linux() puts a kernel (ELF vmlinux or bzImage), an optional
 * initrd and the command line into guest memory and writes boot_params with
 * the e820 map; x86_write_boot_page_tables() and the vCPU code (cpu.h) then
 * enter the kernel's 64-bit entry point in long mode with %rsi pointing at
 * boot_params, as Documentation/arch/x86/boot.rst ("64-bit boot protocol")
 * describes.  No firmware and no real-mode setup code run.
 *
 * Every file is validated before a byte lands in guest memory: a truncated
 * or foreign file, a kernel that does not fit, an initrd too large for RAM
 * all give one error line that names the file and the numbers.
 */
#ifndef THAW_VMM_X86_BOOT_H
#define THAW_VMM_X86_BOOT_H

#include <stdint.h>

#include "vmm/memory.h"

enum kernel_format { KERNEL_ELF, KERNEL_BZIMAGE };

struct x86_boot {
	enum kernel_format format;
	uint64_t entry;	      /* 64-bit entry point (guest physical) */
	uint64_t kernel_end;  /* first byte after the kernel's footprint */
	uint64_t initrd_addr; /* 0 when there is none */
	uint64_t initrd_size;
	uint32_t cmdline_max; /* longest command line the kernel takes */
	uint32_t pvm_abi;     /* PVM guest note's revision, 0: none */
};

int x86_load_linux(struct guest_memory *mem, const char *kernel_path,
		   const char *initrd_path, const char *cmdline,
		   struct x86_boot *boot);

/*
 * Replaces the command line x86_load_linux() wrote; -1 with a message when
 * the kernel does not take one that long.
 */
int x86_set_cmdline(struct guest_memory *mem, const struct x86_boot *boot,
		    const char *cmdline);

/* Identity-maps the first BOOT_IDENTITY_MAP_GIB GiB and writes the GDT. */
void x86_write_boot_page_tables(struct guest_memory *mem);

#endif
