// SPDX-License-Identifier: Apache-2.0
/*
 * paging.c - see paging.h.  One loop walks 5 or 4 levels; a set PS bit ends
 * the walk early at the PDPTE (1 GiB) or PDE (2 MiB) level.  Frame addresses
 * are masked to bits 51:12, the architectural maximum, which drops NX and the
 * software/protection-key bits above; the large-page mask then also drops
 * the PAT bit (bit 12) those entries carry.
 */
#include "vmm/x86/paging.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define X86_CR0_PG (1ULL << 31)
#define X86_CR4_PAE (1ULL << 5)
#define X86_CR4_LA57 (1ULL << 12)
#define X86_EFER_LMA (1ULL << 10)

#define PTE_PRESENT (1ULL << 0)
#define PTE_PS (1ULL << 7)
#define PTE_ADDR_MASK 0x000ffffffffff000ULL

#define PAGE_SIZE 4096ULL

static const char *const level_names[] = {
	[1] = "PTE", [2] = "PDE", [3] = "PDPTE", [4] = "PML4E", [5] = "PML5E",
};

static bool is_canonical(uint64_t linear, unsigned int bits)
{
	return (uint64_t)((int64_t)(linear << (64 - bits)) >> (64 - bits)) ==
	       linear;
}

int x86_translate(const struct guest_memory *mem, const struct kvm_sregs *sregs,
		  uint64_t linear, uint64_t *gpa, char *err, size_t errlen)
{
	if (!(sregs->cr0 & X86_CR0_PG) || !(sregs->cr4 & X86_CR4_PAE) ||
	    !(sregs->efer & X86_EFER_LMA)) {
		snprintf(err, errlen,
			 "page walk: linear address 0x%" PRIx64
			 ": unsupported paging mode (cr0 0x%llx, cr4 0x%llx, "
			 "efer 0x%llx)",
			 linear, (unsigned long long)sregs->cr0,
			 (unsigned long long)sregs->cr4,
			 (unsigned long long)sregs->efer);
		return -1;
	}

	int levels = sregs->cr4 & X86_CR4_LA57 ? 5 : 4;

	if (!is_canonical(linear, 12 + 9 * (unsigned int)levels)) {
		snprintf(err, errlen,
			 "page walk: linear address 0x%" PRIx64
			 " is not canonical for %d-level paging",
			 linear, levels);
		return -1;
	}

	uint64_t table = sregs->cr3 & PTE_ADDR_MASK;

	for (int level = levels; level >= 1; level--) {
		unsigned int shift = 12 + 9 * (unsigned int)(level - 1);
		uint64_t entry_gpa = table + ((linear >> shift) & 511) * 8;
		const void *p = guest_memory_ptr(mem, entry_gpa, 8);
		uint64_t entry;

		if (!p) {
			snprintf(err, errlen,
				 "page walk: linear address 0x%" PRIx64
				 ": %s at gpa 0x%" PRIx64
				 " is outside guest RAM",
				 linear, level_names[level], entry_gpa);
			return -1;
		}
		/* Guest and host are both x86: same byte order. */
		memcpy(&entry, p, sizeof(entry));
		if (!(entry & PTE_PRESENT)) {
			snprintf(err, errlen,
				 "page walk: linear address 0x%" PRIx64
				 " is not mapped: %s at gpa 0x%" PRIx64
				 " is not present (0x%" PRIx64 ")",
				 linear, level_names[level], entry_gpa, entry);
			return -1;
		}
		if ((entry & PTE_PS) && level > 3) {
			snprintf(err, errlen,
				 "page walk: linear address 0x%" PRIx64
				 ": %s at gpa 0x%" PRIx64
				 " has the reserved PS bit set (0x%" PRIx64 ")",
				 linear, level_names[level], entry_gpa, entry);
			return -1;
		}
		/* In a PTE bit 7 is PAT, not a page size. */
		if ((entry & PTE_PS) && level > 1) {
			uint64_t size = 1ULL << shift;

			*gpa = (entry & PTE_ADDR_MASK & ~(size - 1)) |
			       (linear & (size - 1));
			return 0;
		}
		table = entry & PTE_ADDR_MASK;
	}
	*gpa = table | (linear & (PAGE_SIZE - 1));
	return 0;
}

/*
 * Host pointer for the part of [linear, linear + len) that lies in the page
 * of @linear; its length goes to @chunk.  NULL, with @err filled, on failure.
 */
static uint8_t *page_chunk(const struct guest_memory *mem,
			   const struct kvm_sregs *sregs, uint64_t linear,
			   size_t len, size_t *chunk, char *err, size_t errlen)
{
	uint64_t gpa;

	*chunk = PAGE_SIZE - (linear & (PAGE_SIZE - 1));
	if (*chunk > len)
		*chunk = len;
	if (x86_translate(mem, sregs, linear, &gpa, err, errlen) < 0)
		return NULL;

	uint8_t *host = guest_memory_ptr(mem, gpa, *chunk);

	if (!host)
		snprintf(err, errlen,
			 "page walk: linear address 0x%" PRIx64
			 " maps to gpa 0x%" PRIx64
			 ", which is not guest RAM (%zu bytes)",
			 linear, gpa, *chunk);
	return host;
}

int x86_read_linear(const struct guest_memory *mem,
		    const struct kvm_sregs *sregs, uint64_t linear, void *buf,
		    size_t len, char *err, size_t errlen)
{
	uint8_t *dst = buf;

	while (len > 0) {
		size_t chunk;
		const uint8_t *src = page_chunk(mem, sregs, linear, len, &chunk,
						err, errlen);

		if (!src)
			return -1;
		memcpy(dst, src, chunk);
		linear += chunk;
		dst += chunk;
		len -= chunk;
	}
	return 0;
}

int x86_write_linear(const struct guest_memory *mem,
		     const struct kvm_sregs *sregs, uint64_t linear,
		     const void *buf, size_t len, char *err, size_t errlen)
{
	const uint8_t *src = buf;

	while (len > 0) {
		size_t chunk;
		uint8_t *dst = page_chunk(mem, sregs, linear, len, &chunk, err,
					  errlen);

		if (!dst)
			return -1;
		memcpy(dst, src, chunk);
		linear += chunk;
		src += chunk;
		len -= chunk;
	}
	return 0;
}
