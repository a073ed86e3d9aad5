/* SPDX-License-Identifier: Apache-2.0 */
/*
 * memory.h - guest RAM: one host mapping, one or two guest-physical regions.
 *
 * x86 guests need a hole below 4 GiB for the IOAPIC, the local APIC and
 * MMIO devices, so RAM is laid out as
 *
 *	[0, min(size, 3 GiB))		low RAM, host offset == guest address
 *	[4 GiB, 4 GiB + rest)		high RAM, only when size > 3 GiB
 *
 * and both live in a single host mapping (high RAM right after low RAM), so
 * a later snapshot is one contiguous file.  Everything that touches guest
 * memory goes through guest_memory_ptr(), which bounds-checks against this
 * layout: guest-supplied addresses are never trusted.
 */
#ifndef THAW_VMM_MEMORY_H
#define THAW_VMM_MEMORY_H

#include <stdint.h>

#define MIB (1024ULL * 1024)
#define GIB (1024 * MIB)

/* Start of the 32-bit MMIO hole; devices are placed inside it. */
#define MEMORY_HOLE_START (3 * GIB)
#define MEMORY_HIGH_START (4 * GIB)

#define MEMORY_MIN_MIB 64
#define MEMORY_MAX_MIB (256 * 1024)

struct memory_region {
	uint64_t guest_addr;
	uint64_t size;
	uint64_t host_offset; /* into guest_memory.host */
};

struct guest_memory {
	uint8_t *host;
	uint64_t size;
	struct memory_region regions[2];
	int nr_regions;
};

/*
 * Maps @mib MiB of zeroed guest RAM.  Returns 0, or -1 after an error line
 * (log.h) naming the size and the reason.
 */
int guest_memory_create(struct guest_memory *mem, uint64_t mib);
/*
 * Takes over @host, an existing mapping of @size bytes (a snapshot's memory
 * file), with the same layout.  On error the mapping is unmapped.
 */
int guest_memory_adopt(struct guest_memory *mem, void *host, uint64_t size);
void guest_memory_destroy(struct guest_memory *mem);

/*
 * Host pointer for guest-physical [gpa, gpa + len), or NULL when any part of
 * it is not RAM or the range crosses from one region into the hole.
 */
void *guest_memory_ptr(const struct guest_memory *mem, uint64_t gpa,
		       uint64_t len);

/* End of low RAM: the highest guest address usable below 4 GiB, plus one. */
uint64_t guest_memory_low_end(const struct guest_memory *mem);

#endif
