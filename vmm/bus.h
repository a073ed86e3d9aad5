/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bus.h - address-space dispatch for port I/O and MMIO exits.
 *
 * A bus is a small array of non-overlapping ranges, each owned by one
 * device.  A vCPU thread that takes a KVM_EXIT_IO or KVM_EXIT_MMIO looks the
 * address up here and calls the owner's access function with the offset into
 * its range.  Devices are registered once during VM setup, before any vCPU
 * runs, so lookups need no lock; each device serialises its own state.
 *
 * Accesses nobody claims behave like an empty ISA bus / unbacked MMIO:
 * reads return all ones, writes are dropped.  Real firmware-less guests probe
 * many legacy ports (0x80 delay, PCI config, other UARTs) and expect exactly
 * that.
 */
#ifndef THAW_VMM_BUS_H
#define THAW_VMM_BUS_H

#include <stdbool.h>
#include <stdint.h>

#define BUS_MAX_RANGES 32

/*
 * One access: @data holds @len bytes (1, 2, 4 or 8), little endian, as KVM
 * passes them.  On a read the device fills @data; on a write it consumes it.
 */
typedef void (*bus_access_fn)(void *device, uint64_t offset, uint8_t *data,
			      uint32_t len, bool is_write);

struct bus_range {
	const char *name;
	uint64_t base;
	uint64_t len;
	void *device;
	bus_access_fn access;
};

struct bus {
	const char *name; /* "pio" or "mmio", for error messages */
	struct bus_range ranges[BUS_MAX_RANGES];
	int count;
};

void bus_init(struct bus *bus, const char *name);

/*
 * Claims [base, base + len) for @device.  Returns 0, or -1 after an error
 * line (log.h) naming both ranges when it overlaps an existing one or the bus
 * is full.
 */
int bus_register(struct bus *bus, const char *name, uint64_t base, uint64_t len,
		 void *device, bus_access_fn access);

/*
 * Routes one access.  Returns true if a device claimed it; otherwise applies
 * the empty-bus behaviour above and returns false.
 */
bool bus_dispatch(const struct bus *bus, uint64_t addr, uint8_t *data,
		  uint32_t len, bool is_write);

#endif
