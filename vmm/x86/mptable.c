// SPDX-License-Identifier: Apache-2.0
/*
 * mptable.c - see mptable.h.  Layout: the 16-byte floating pointer, then the
 * configuration table header, then its entries in the order the spec wants
 * them (processors, buses, IOAPICs, I/O interrupts, local interrupts).
 */
#include "vmm/x86/mptable.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "vmm/x86/layout.h"

#define MP_SPEC_REV 4
#define APIC_VERSION 0x14
#define IOAPIC_VERSION 0x11
#define CPU_ENABLED 1
#define CPU_BOOTSTRAP 2
#define ISA_BUS_ID 0
#define ALL_LAPICS 0xff
/* MP spec interrupt flags: polarity active high (1), trigger level (3 << 2) */
#define MP_IRQ_LEVEL_HIGH 0x0d

enum mp_entry_type { MP_PROCESSOR, MP_BUS, MP_IOAPIC, MP_INTSRC, MP_LINTSRC };
enum mp_irq_type { MP_INT, MP_NMI, MP_SMI, MP_EXTINT };

struct mp_floating_pointer {
	char signature[4];
	uint32_t table_addr;
	uint8_t length; /* in 16-byte units */
	uint8_t spec_rev;
	uint8_t checksum;
	uint8_t features[5];
} __attribute__((packed));

struct mp_table_header {
	char signature[4];
	uint16_t length;
	uint8_t spec_rev;
	uint8_t checksum;
	char oem[8];
	char product[12];
	uint32_t oem_table;
	uint16_t oem_table_size;
	uint16_t entry_count;
	uint32_t lapic_addr;
	uint16_t ext_length;
	uint8_t ext_checksum;
	uint8_t reserved;
} __attribute__((packed));

struct mp_processor {
	uint8_t type;
	uint8_t apic_id;
	uint8_t apic_version;
	uint8_t flags;
	uint32_t signature;
	uint32_t features;
	uint32_t reserved[2];
} __attribute__((packed));

struct mp_bus {
	uint8_t type;
	uint8_t bus_id;
	char bus_type[6];
} __attribute__((packed));

struct mp_ioapic {
	uint8_t type;
	uint8_t apic_id;
	uint8_t version;
	uint8_t flags;
	uint32_t addr;
} __attribute__((packed));

struct mp_interrupt {
	uint8_t type;
	uint8_t irq_type;
	uint16_t flags; /* 0: polarity and trigger conform to the bus */
	uint8_t src_bus;
	uint8_t src_irq;
	uint8_t dst_apic;
	uint8_t dst_pin;
} __attribute__((packed));

static uint8_t checksum(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint8_t sum = 0;

	while (len--)
		sum += *b++;
	return (uint8_t)-sum;
}

int mptable_write(struct guest_memory *mem, int nr_cpus)
{
	const int nr_entries = nr_cpus + 1 + 1 + IOAPIC_PINS + 2;
	const size_t table_len =
		sizeof(struct mp_table_header) +
		nr_cpus * sizeof(struct mp_processor) + sizeof(struct mp_bus) +
		sizeof(struct mp_ioapic) +
		(IOAPIC_PINS + 2) * sizeof(struct mp_interrupt);
	const size_t total = sizeof(struct mp_floating_pointer) + table_len;
	const uint8_t ioapic_id = nr_cpus;

	if (nr_cpus < 1 || nr_cpus > MPTABLE_MAX_CPUS) {
		log_error("mptable: %d CPUs; supported are 1..%d", nr_cpus,
			  MPTABLE_MAX_CPUS);
		return -1;
	}
	uint8_t *base = guest_memory_ptr(mem, MPTABLE_ADDR, total);
	if (!base || MPTABLE_ADDR + total > HIGH_MEMORY_START) {
		log_error("mptable: %zu bytes do not fit at 0x%x", total,
			  MPTABLE_ADDR);
		return -1;
	}
	memset(base, 0, total);

	struct mp_floating_pointer *mpf = (void *)base;
	struct mp_table_header *hdr = (void *)(mpf + 1);
	uint8_t *p = (uint8_t *)(hdr + 1);

	for (int cpu = 0; cpu < nr_cpus; cpu++) {
		struct mp_processor e = {
			.type = MP_PROCESSOR,
			.apic_id = cpu,
			.apic_version = APIC_VERSION,
			.flags = CPU_ENABLED | (cpu == 0 ? CPU_BOOTSTRAP : 0),
		};
		memcpy(p, &e, sizeof(e));
		p += sizeof(e);
	}
	struct mp_bus bus = { .type = MP_BUS, .bus_id = ISA_BUS_ID };
	memcpy(bus.bus_type, "ISA   ", 6);
	memcpy(p, &bus, sizeof(bus));
	p += sizeof(bus);

	struct mp_ioapic ioapic = { .type = MP_IOAPIC,
				    .apic_id = ioapic_id,
				    .version = IOAPIC_VERSION,
				    .flags = CPU_ENABLED,
				    .addr = IOAPIC_ADDR };
	memcpy(p, &ioapic, sizeof(ioapic));
	p += sizeof(ioapic);

	/*
	 * virtio-mmio lines are level-triggered: a device keeps its line up
	 * while InterruptStatus is non-zero, and an edge would be lost when
	 * new work arrives before the driver acknowledges the old.
	 */
	for (int pin = 0; pin < IOAPIC_PINS; pin++) {
		struct mp_interrupt e = { .type = MP_INTSRC,
					  .irq_type = MP_INT,
					  .flags = pin >= VIRTIO_MMIO_FIRST_IRQ
							   ? MP_IRQ_LEVEL_HIGH
							   : 0,
					  .src_bus = ISA_BUS_ID,
					  .src_irq = pin,
					  .dst_apic = ioapic_id,
					  .dst_pin = pin };
		memcpy(p, &e, sizeof(e));
		p += sizeof(e);
	}
	/* The legacy PIC reaches LINT0 as ExtINT; NMIs arrive on LINT1. */
	struct mp_interrupt lint[2] = {
		{ .type = MP_LINTSRC,
		  .irq_type = MP_EXTINT,
		  .src_bus = ISA_BUS_ID,
		  .dst_apic = ALL_LAPICS,
		  .dst_pin = 0 },
		{ .type = MP_LINTSRC,
		  .irq_type = MP_NMI,
		  .src_bus = ISA_BUS_ID,
		  .dst_apic = ALL_LAPICS,
		  .dst_pin = 1 },
	};
	memcpy(p, lint, sizeof(lint));

	memcpy(hdr->signature, "PCMP", 4);
	hdr->length = table_len;
	hdr->spec_rev = MP_SPEC_REV;
	memcpy(hdr->oem, "THAW    ", 8);
	memcpy(hdr->product, "THAW-VMM    ", 12);
	hdr->entry_count = nr_entries;
	hdr->lapic_addr = LAPIC_ADDR;
	hdr->checksum = checksum(hdr, table_len);

	memcpy(mpf->signature, "_MP_", 4);
	mpf->table_addr = MPTABLE_ADDR + sizeof(*mpf);
	mpf->length = 1;
	mpf->spec_rev = MP_SPEC_REV;
	mpf->checksum = checksum(mpf, sizeof(*mpf));
	return 0;
}
