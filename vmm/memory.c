// SPDX-License-Identifier: Apache-2.0
/*
 * memory.c - see memory.h.  A booting guest's mapping is anonymous, private
 * and MAP_NORESERVE: a guest that never touches most of its RAM costs
 * nothing, and untouched pages read as zero, which the boot protocol relies
 * on.  A restored clone's mapping is the snapshot's memory file instead.
 */
#include "vmm/memory.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "common/log.h"

static int check_size(uint64_t mib)
{
	if (mib < MEMORY_MIN_MIB || mib > MEMORY_MAX_MIB) {
		log_error(
			"guest memory: %llu MiB is outside the supported range "
			"%u..%u MiB",
			(unsigned long long)mib, MEMORY_MIN_MIB,
			MEMORY_MAX_MIB);
		return -1;
	}
	return 0;
}

static void set_layout(struct guest_memory *mem, uint8_t *host, uint64_t size)
{
	mem->host = host;
	mem->size = size;

	uint64_t low = size < MEMORY_HOLE_START ? size : MEMORY_HOLE_START;
	mem->regions[0] = (struct memory_region){ 0, low, 0 };
	mem->nr_regions = 1;
	if (size > low) {
		mem->regions[1] = (struct memory_region){ MEMORY_HIGH_START,
							  size - low, low };
		mem->nr_regions = 2;
	}
}

int guest_memory_create(struct guest_memory *mem, uint64_t mib)
{
	memset(mem, 0, sizeof(*mem));
	if (check_size(mib) < 0)
		return -1;
	uint64_t size = mib * MIB;
	void *host = mmap(NULL, size, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (host == MAP_FAILED) {
		log_error("guest memory: cannot map %llu MiB: %s",
			  (unsigned long long)mib, strerror(errno));
		return -1;
	}
	set_layout(mem, host, size);
	return 0;
}

int guest_memory_adopt(struct guest_memory *mem, void *host, uint64_t size)
{
	memset(mem, 0, sizeof(*mem));
	if (size % MIB) {
		log_error(
			"guest memory: %llu bytes is not a whole number of MiB",
			(unsigned long long)size);
		munmap(host, size);
		return -1;
	}
	if (check_size(size / MIB) < 0) {
		munmap(host, size);
		return -1;
	}
	set_layout(mem, host, size);
	return 0;
}

void guest_memory_destroy(struct guest_memory *mem)
{
	if (mem->host)
		munmap(mem->host, mem->size);
	memset(mem, 0, sizeof(*mem));
}

void *guest_memory_ptr(const struct guest_memory *mem, uint64_t gpa,
		       uint64_t len)
{
	for (int i = 0; i < mem->nr_regions; i++) {
		const struct memory_region *r = &mem->regions[i];

		if (gpa >= r->guest_addr && gpa - r->guest_addr <= r->size &&
		    len <= r->size - (gpa - r->guest_addr))
			return mem->host + r->host_offset +
			       (gpa - r->guest_addr);
	}
	return NULL;
}

uint64_t guest_memory_low_end(const struct guest_memory *mem)
{
	return mem->regions[0].size;
}
