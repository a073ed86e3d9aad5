// SPDX-License-Identifier: Apache-2.0
/*
 * bus.c - see bus.h.  A linear scan is right here: a VM has a handful of
 * devices, and an array keeps the structure trivially inspectable.
 */
#include "vmm/bus.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"

void bus_init(struct bus *bus, const char *name)
{
	memset(bus, 0, sizeof(*bus));
	bus->name = name;
}

int bus_register(struct bus *bus, const char *name, uint64_t base, uint64_t len,
		 void *device, bus_access_fn access)
{
	if (len == 0 || base + len < base) {
		log_error("%s bus: device %s: invalid range 0x%llx+0x%llx",
			  bus->name, name, (unsigned long long)base,
			  (unsigned long long)len);
		return -1;
	}
	for (int i = 0; i < bus->count; i++) {
		const struct bus_range *r = &bus->ranges[i];

		if (base < r->base + r->len && r->base < base + len) {
			log_error("%s bus: device %s at 0x%llx+0x%llx overlaps "
				  "%s at 0x%llx+0x%llx",
				  bus->name, name, (unsigned long long)base,
				  (unsigned long long)len, r->name,
				  (unsigned long long)r->base,
				  (unsigned long long)r->len);
			return -1;
		}
	}
	if (bus->count == BUS_MAX_RANGES) {
		log_error("%s bus: no room for device %s (limit %d)", bus->name,
			  name, BUS_MAX_RANGES);
		return -1;
	}
	bus->ranges[bus->count++] = (struct bus_range){
		.name = name,
		.base = base,
		.len = len,
		.device = device,
		.access = access,
	};
	return 0;
}

bool bus_dispatch(const struct bus *bus, uint64_t addr, uint8_t *data,
		  uint32_t len, bool is_write)
{
	for (int i = 0; i < bus->count; i++) {
		const struct bus_range *r = &bus->ranges[i];

		if (addr >= r->base && addr - r->base < r->len) {
			r->access(r->device, addr - r->base, data, len,
				  is_write);
			return true;
		}
	}
	if (!is_write)
		memset(data, 0xff, len);
	return false;
}
