// SPDX-License-Identifier: Apache-2.0
/*
 * host_cpu.c - see host_cpu.h.
 */
#include "snapshot/host_cpu.h"

#include <cpuid.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

/*
 * The hashed words, each in a fixed slot: a leaf the CPU lacks stays zero
 * rather than shifting the words after it.
 */
struct cpu_words {
	uint32_t vendor[3];
	uint32_t leaf1_eax; /* family, model, stepping */
	uint32_t leaf1_ecx;
	uint32_t leaf1_edx;
	uint32_t leaf7_ebx;
	uint32_t leaf7_ecx;
	uint32_t leaf7_edx;
	uint32_t leaf7_1_eax;
	uint32_t xsave_xcr0_lo; /* leaf 0xd: XSAVE state components */
	uint32_t xsave_max_size;
	uint32_t xsave_xcr0_hi;
	uint32_t xsave_1_eax; /* XSAVEOPT, XSAVEC, XSAVES, ... */
	uint32_t ext1_ecx;
	uint32_t ext1_edx;
};

static void read_words(struct cpu_words *w)
{
	unsigned int max, a, b, c, d;

	memset(w, 0, sizeof(*w));
	/* Leaf 0 exists on every x86-64 CPU. */
	__cpuid(0, max, w->vendor[0], w->vendor[2], w->vendor[1]);
	if (max >= 1)
		__cpuid(1, w->leaf1_eax, b, w->leaf1_ecx, w->leaf1_edx);
	if (max >= 7) {
		__cpuid_count(7, 0, a, w->leaf7_ebx, w->leaf7_ecx,
			      w->leaf7_edx);
		if (a >= 1)
			__cpuid_count(7, 1, w->leaf7_1_eax, b, c, d);
	}
	if (max >= 0xd) {
		/* Subleaf 0 EBX follows the XCR0 the OS enabled: left out. */
		__cpuid_count(0xd, 0, w->xsave_xcr0_lo, b, w->xsave_max_size,
			      w->xsave_xcr0_hi);
		__cpuid_count(0xd, 1, w->xsave_1_eax, b, c, d);
	}
	/* gcc's cpuid.h returns unsigned, clang's int. */
	if ((unsigned)__get_cpuid_max(0x80000000, NULL) >= 0x80000001)
		__cpuid(0x80000001, a, b, w->ext1_ecx, w->ext1_edx);
}

uint64_t host_cpu_signature(void)
{
	struct cpu_words w;

	read_words(&w);
	return XXH3_64bits(&w, sizeof(w));
}

void host_cpu_describe(char *buf, size_t len)
{
	struct cpu_words w;
	char vendor[sizeof(w.vendor) + 1];

	read_words(&w);
	memcpy(vendor, w.vendor, sizeof(w.vendor));
	vendor[sizeof(w.vendor)] = '\0';

	/* The extended fields count only for the families that define them. */
	unsigned int family = (w.leaf1_eax >> 8) & 0xf;
	unsigned int model = (w.leaf1_eax >> 4) & 0xf;
	unsigned int stepping = w.leaf1_eax & 0xf;

	if (family == 0x6 || family == 0xf)
		model |= ((w.leaf1_eax >> 16) & 0xf) << 4;
	if (family == 0xf)
		family += (w.leaf1_eax >> 20) & 0xff;
	snprintf(buf, len, "%s family %u model %u stepping %u", vendor, family,
		 model, stepping);
}
