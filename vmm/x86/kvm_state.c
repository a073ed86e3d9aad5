// SPDX-License-Identifier: Apache-2.0
/*
 * kvm_state.c - see kvm_state.h.
 */
#include "vmm/x86/kvm_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "vmm/kvm_ioctl.h"
#include "common/log.h"

#define CPUID_MAX_ENTRIES 256
#define MSR_MAX_ENTRIES 1024
#define XSAVE_LEGACY_SIZE ((int)sizeof(struct kvm_xsave))

struct kvm_msr_list *x86_msr_index_list(int kvm_fd)
{
	struct kvm_msr_list probe = { .nmsrs = 0 };

	/* The first call fails with E2BIG and says how many there are. */
	if (ioctl(kvm_fd, KVM_GET_MSR_INDEX_LIST, &probe) < 0 &&
	    errno != E2BIG) {
		log_error("KVM_GET_MSR_INDEX_LIST: %s", strerror(errno));
		return NULL;
	}
	if (probe.nmsrs > MSR_MAX_ENTRIES) {
		log_error("KVM_GET_MSR_INDEX_LIST: %u MSRs, more than %d",
			  probe.nmsrs, MSR_MAX_ENTRIES);
		return NULL;
	}
	struct kvm_msr_list *list =
		calloc(1, sizeof(*list) + probe.nmsrs * sizeof(uint32_t));
	if (!list) {
		log_error("MSR index list: out of memory");
		return NULL;
	}
	list->nmsrs = probe.nmsrs;
	if (KVM_IOCTL(kvm_fd, KVM_GET_MSR_INDEX_LIST, list) < 0) {
		free(list);
		return NULL;
	}
	return list;
}

static int compare_msr_index(const void *a, const void *b)
{
	uint32_t x = ((const struct kvm_msr_entry *)a)->index;
	uint32_t y = ((const struct kvm_msr_entry *)b)->index;

	return x < y ? -1 : x > y;
}

/* The host's XSAVE area size for KVM_GET_XSAVE2/KVM_SET_XSAVE. */
static int xsave_size(int kvm_fd)
{
	int size = ioctl(kvm_fd, KVM_CHECK_EXTENSION, KVM_CAP_XSAVE2);

	return size > XSAVE_LEGACY_SIZE ? size : XSAVE_LEGACY_SIZE;
}

/*
 * KVM_GET_MSRS stops at the first MSR the vCPU cannot read (one whose
 * feature its CPUID lacks) and returns how many it read: keep those, skip
 * the one that failed and go on with the rest.
 */
static int save_msrs(int vcpu_fd, uint32_t index,
		     const struct kvm_msr_list *list, struct state_writer *w)
{
	size_t bytes = sizeof(struct kvm_msrs) +
		       list->nmsrs * sizeof(struct kvm_msr_entry);
	struct kvm_msrs *out = calloc(1, bytes);
	struct kvm_msrs *batch = calloc(1, bytes);
	uint32_t next = 0;
	int ret = -1;

	if (!out || !batch) {
		log_error("vcpu %u: MSRs: out of memory", index);
		goto out;
	}
	while (next < list->nmsrs) {
		batch->nmsrs = list->nmsrs - next;
		for (uint32_t i = 0; i < batch->nmsrs; i++)
			batch->entries[i] = (struct kvm_msr_entry){
				.index = list->indices[next + i]
			};
		int got = ioctl(vcpu_fd, KVM_GET_MSRS, batch);
		if (got < 0) {
			log_error("vcpu %u: KVM_GET_MSRS: %s", index,
				  strerror(errno));
			goto out;
		}
		memcpy(&out->entries[out->nmsrs], batch->entries,
		       got * sizeof(struct kvm_msr_entry));
		out->nmsrs += got;
		next += got + 1;
	}
	qsort(out->entries, out->nmsrs, sizeof(struct kvm_msr_entry),
	      compare_msr_index);
	state_put(w, STATE_VCPU_MSRS, index, out,
		  sizeof(*out) + out->nmsrs * sizeof(struct kvm_msr_entry));
	ret = 0;
out:
	free(out);
	free(batch);
	return ret;
}

/*
 * Room for any one piece of fixed-size vCPU state: save and restore move
 * them one at a time through the same buffer.
 */
union vcpu_fixed {
	struct kvm_mp_state mp;
	struct kvm_regs regs;
	struct kvm_sregs sregs;
	struct kvm_xcrs xcrs;
	struct kvm_debugregs debugregs;
	struct kvm_lapic_state lapic;
	struct kvm_vcpu_events events;
};

/* @request on vCPU @index; a failure is reported as "vcpu N: @name". */
static int vcpu_ioctl(int vcpu_fd, uint32_t index, unsigned long request,
		      const char *name, void *arg)
{
	char what[64];

	snprintf(what, sizeof(what), "vcpu %u: %s", index, name);
	return kvm_ioctl_named(vcpu_fd, request, arg, what) < 0 ? -1 : 0;
}

/* Reads fixed-size vCPU state with @request and stores it as @tag. */
static int save_fixed(int vcpu_fd, uint32_t index, unsigned long request,
		      const char *name, uint32_t tag, void *buf, size_t size,
		      struct state_writer *w)
{
	if (vcpu_ioctl(vcpu_fd, index, request, name, buf) < 0)
		return -1;
	state_put(w, tag, index, buf, size);
	return 0;
}

int x86_save_vcpu(int kvm_fd, int vcpu_fd, uint32_t index,
		  const struct kvm_msr_list *msrs, struct state_writer *w)
{
	union vcpu_fixed s;
	int xsave_bytes = xsave_size(kvm_fd);
	size_t cpuid_bytes =
		sizeof(struct kvm_cpuid2) +
		CPUID_MAX_ENTRIES * sizeof(struct kvm_cpuid_entry2);
	struct kvm_cpuid2 *cpuid = calloc(1, cpuid_bytes);
	struct kvm_xsave *xsave = calloc(1, xsave_bytes);
	int ret = -1;

	if (!cpuid || !xsave) {
		log_error("vcpu %u: out of memory", index);
		goto out;
	}
	cpuid->nent = CPUID_MAX_ENTRIES;
	if (kvm_ioctl_named(vcpu_fd, KVM_GET_CPUID2, cpuid, "KVM_GET_CPUID2") <
	    0)
		goto out;
	state_put(w, STATE_VCPU_CPUID, index, cpuid,
		  sizeof(*cpuid) +
			  cpuid->nent * sizeof(struct kvm_cpuid_entry2));

	int khz = ioctl(vcpu_fd, KVM_GET_TSC_KHZ, 0);
	if (khz <= 0) {
		log_error("vcpu %u: KVM_GET_TSC_KHZ: %s", index,
			  strerror(errno));
		goto out;
	}
	uint32_t tsc_khz = khz;
	state_put(w, STATE_VCPU_TSC_KHZ, index, &tsc_khz, sizeof(tsc_khz));

	if (save_fixed(vcpu_fd, index, KVM_GET_MP_STATE, "KVM_GET_MP_STATE",
		       STATE_VCPU_MP_STATE, &s.mp, sizeof(s.mp), w) < 0 ||
	    save_fixed(vcpu_fd, index, KVM_GET_REGS, "KVM_GET_REGS",
		       STATE_VCPU_REGS, &s.regs, sizeof(s.regs), w) < 0 ||
	    save_fixed(vcpu_fd, index, KVM_GET_SREGS, "KVM_GET_SREGS",
		       STATE_VCPU_SREGS, &s.sregs, sizeof(s.sregs), w) < 0)
		goto out;
	if (save_fixed(vcpu_fd, index,
		       xsave_bytes > XSAVE_LEGACY_SIZE ? KVM_GET_XSAVE2
						       : KVM_GET_XSAVE,
		       "KVM_GET_XSAVE", STATE_VCPU_XSAVE, xsave, xsave_bytes,
		       w) < 0)
		goto out;
	if (save_fixed(vcpu_fd, index, KVM_GET_XCRS, "KVM_GET_XCRS",
		       STATE_VCPU_XCRS, &s.xcrs, sizeof(s.xcrs), w) < 0 ||
	    save_fixed(vcpu_fd, index, KVM_GET_DEBUGREGS, "KVM_GET_DEBUGREGS",
		       STATE_VCPU_DEBUGREGS, &s.debugregs, sizeof(s.debugregs),
		       w) < 0 ||
	    save_fixed(vcpu_fd, index, KVM_GET_LAPIC, "KVM_GET_LAPIC",
		       STATE_VCPU_LAPIC, &s.lapic, sizeof(s.lapic), w) < 0 ||
	    save_msrs(vcpu_fd, index, msrs, w) < 0 ||
	    save_fixed(vcpu_fd, index, KVM_GET_VCPU_EVENTS,
		       "KVM_GET_VCPU_EVENTS", STATE_VCPU_EVENTS, &s.events,
		       sizeof(s.events), w) < 0)
		goto out;
	ret = 0;
out:
	free(cpuid);
	free(xsave);
	return ret;
}

/*
 * A variable-size section: a header struct with a count, then @entry_size
 * bytes per entry.  Checks the count against @max and the section size,
 * and returns it in *count; NULL after a message otherwise.
 */
static const void *find_counted(const struct state_reader *r, uint32_t tag,
				uint32_t index, size_t header_size,
				size_t entry_size, uint32_t max,
				uint32_t *count)
{
	size_t size;
	const uint8_t *data = state_find(r, tag, index, &size);

	if (!data) {
		log_error("snapshot state %s: no %s section for vcpu %u",
			  r->path, state_tag_name(tag), index);
		return NULL;
	}
	if (size < header_size) {
		log_error(
			"snapshot state %s: %s of vcpu %u is %zu bytes, too short",
			r->path, state_tag_name(tag), index, size);
		return NULL;
	}
	memcpy(count, data, sizeof(*count)); /* nent/nmsrs come first */
	if (*count > max || size != header_size + *count * entry_size) {
		log_error(
			"snapshot state %s: %s of vcpu %u: %u entries do not fit its %zu bytes (at most %u)",
			r->path, state_tag_name(tag), index, *count, size, max);
		return NULL;
	}
	return data;
}

static int restore_cpuid(int vcpu_fd, uint32_t index,
			 const struct state_reader *r)
{
	uint32_t nent;
	const void *data = find_counted(
		r, STATE_VCPU_CPUID, index, sizeof(struct kvm_cpuid2),
		sizeof(struct kvm_cpuid_entry2), CPUID_MAX_ENTRIES, &nent);
	if (!data)
		return -1;

	size_t bytes = sizeof(struct kvm_cpuid2) +
		       nent * sizeof(struct kvm_cpuid_entry2);
	struct kvm_cpuid2 *cpuid = malloc(bytes);
	if (!cpuid) {
		log_error("vcpu %u: out of memory", index);
		return -1;
	}
	memcpy(cpuid, data, bytes);
	int ret = kvm_ioctl_named(vcpu_fd, KVM_SET_CPUID2, cpuid,
				  "KVM_SET_CPUID2 (snapshot CPUID)");
	free(cpuid);
	return ret < 0 ? -1 : 0;
}

static int restore_tsc_khz(int vcpu_fd, uint32_t index,
			   const struct state_reader *r)
{
	uint32_t saved;

	if (state_get(r, STATE_VCPU_TSC_KHZ, index, &saved, sizeof(saved)) < 0)
		return -1;
	int current = ioctl(vcpu_fd, KVM_GET_TSC_KHZ, 0);
	if (current > 0 && (uint32_t)current == saved)
		return 0;
	if (ioctl(vcpu_fd, KVM_SET_TSC_KHZ, (unsigned long)saved) < 0) {
		log_error(
			"vcpu %u: the snapshot's TSC runs at %u kHz, this host's at %d kHz, and KVM cannot scale it: %s",
			index, saved, current, strerror(errno));
		return -1;
	}
	return 0;
}

static int restore_xsave(int kvm_fd, int vcpu_fd, uint32_t index,
			 const struct state_reader *r)
{
	size_t saved;
	const void *data = state_find(r, STATE_VCPU_XSAVE, index, &saved);
	int host = xsave_size(kvm_fd);

	if (!data || saved < (size_t)XSAVE_LEGACY_SIZE ||
	    saved > (size_t)host) {
		log_error(
			"snapshot state %s: vcpu %u XSAVE area is %zu bytes; this host takes %d..%d",
			r->path, index, data ? saved : 0, XSAVE_LEGACY_SIZE,
			host);
		return -1;
	}
	/* KVM_SET_XSAVE reads the host's full size: pad with zeros. */
	struct kvm_xsave *xsave = calloc(1, host);
	if (!xsave) {
		log_error("vcpu %u: out of memory", index);
		return -1;
	}
	memcpy(xsave, data, saved);
	int ret = KVM_IOCTL(vcpu_fd, KVM_SET_XSAVE, xsave);
	free(xsave);
	return ret < 0 ? -1 : 0;
}

static int restore_msrs(int vcpu_fd, uint32_t index,
			const struct state_reader *r)
{
	uint32_t n;
	const void *data =
		find_counted(r, STATE_VCPU_MSRS, index, sizeof(struct kvm_msrs),
			     sizeof(struct kvm_msr_entry), MSR_MAX_ENTRIES, &n);
	if (!data)
		return -1;

	size_t bytes =
		sizeof(struct kvm_msrs) + n * sizeof(struct kvm_msr_entry);
	struct kvm_msrs *msrs = malloc(bytes);
	if (!msrs) {
		log_error("vcpu %u: out of memory", index);
		return -1;
	}
	memcpy(msrs, data, bytes);
	int set = ioctl(vcpu_fd, KVM_SET_MSRS, msrs);
	int ret = 0;
	if (set < 0 || (uint32_t)set != n) {
		log_error(
			"vcpu %u: KVM_SET_MSRS: %s at MSR 0x%x (%d of %u set)",
			index, set < 0 ? strerror(errno) : "refused",
			set >= 0 && (uint32_t)set < n ? msrs->entries[set].index
						      : 0,
			set, n);
		ret = -1;
	}
	free(msrs);
	return ret;
}

/* Reads fixed-size section @tag and sets it with @request. */
static int restore_fixed(int vcpu_fd, uint32_t index, unsigned long request,
			 const char *name, uint32_t tag, void *buf, size_t size,
			 const struct state_reader *r)
{
	if (state_get(r, tag, index, buf, size) < 0)
		return -1;
	return vcpu_ioctl(vcpu_fd, index, request, name, buf);
}

/*
 * KVM_GET_VCPU_EVENTS reports a pending NMI and the SIPI vector without
 * marking them valid, and KVM_SET_VCPU_EVENTS ignores what is not marked:
 * without the flags an NMI pending at the snapshot, or an AP waiting for
 * its SIPI, would be lost in every clone.
 */
static int restore_events(int vcpu_fd, uint32_t index,
			  const struct state_reader *r)
{
	struct kvm_vcpu_events events;

	if (state_get(r, STATE_VCPU_EVENTS, index, &events, sizeof(events)) < 0)
		return -1;
	events.flags |= KVM_VCPUEVENT_VALID_NMI_PENDING |
			KVM_VCPUEVENT_VALID_SIPI_VECTOR;
	return vcpu_ioctl(vcpu_fd, index, KVM_SET_VCPU_EVENTS,
			  "KVM_SET_VCPU_EVENTS", &events);
}

int x86_restore_vcpu(int kvm_fd, int vcpu_fd, uint32_t index,
		     const struct state_reader *r)
{
	union vcpu_fixed s;

	if (restore_cpuid(vcpu_fd, index, r) < 0 ||
	    restore_tsc_khz(vcpu_fd, index, r) < 0 ||
	    restore_fixed(vcpu_fd, index, KVM_SET_MP_STATE, "KVM_SET_MP_STATE",
			  STATE_VCPU_MP_STATE, &s.mp, sizeof(s.mp), r) < 0 ||
	    restore_fixed(vcpu_fd, index, KVM_SET_REGS, "KVM_SET_REGS",
			  STATE_VCPU_REGS, &s.regs, sizeof(s.regs), r) < 0 ||
	    restore_fixed(vcpu_fd, index, KVM_SET_SREGS, "KVM_SET_SREGS",
			  STATE_VCPU_SREGS, &s.sregs, sizeof(s.sregs), r) < 0 ||
	    restore_xsave(kvm_fd, vcpu_fd, index, r) < 0 ||
	    restore_fixed(vcpu_fd, index, KVM_SET_XCRS, "KVM_SET_XCRS",
			  STATE_VCPU_XCRS, &s.xcrs, sizeof(s.xcrs), r) < 0 ||
	    restore_fixed(vcpu_fd, index, KVM_SET_DEBUGREGS,
			  "KVM_SET_DEBUGREGS", STATE_VCPU_DEBUGREGS,
			  &s.debugregs, sizeof(s.debugregs), r) < 0 ||
	    restore_fixed(vcpu_fd, index, KVM_SET_LAPIC, "KVM_SET_LAPIC",
			  STATE_VCPU_LAPIC, &s.lapic, sizeof(s.lapic), r) < 0 ||
	    restore_msrs(vcpu_fd, index, r) < 0 ||
	    restore_events(vcpu_fd, index, r) < 0)
		return -1;
	return 0;
}

void x86_notify_paused(int vcpu_fd)
{
	/* EINVAL: the guest never enabled kvmclock; nothing to tell it. */
	ioctl(vcpu_fd, KVM_KVMCLOCK_CTRL, 0);
}

static const struct {
	uint32_t tag;
	uint32_t chip_id;
} irqchips[] = {
	{ STATE_VM_PIC_MASTER, KVM_IRQCHIP_PIC_MASTER },
	{ STATE_VM_PIC_SLAVE, KVM_IRQCHIP_PIC_SLAVE },
	{ STATE_VM_IOAPIC, KVM_IRQCHIP_IOAPIC },
};

int x86_save_vm(int vm_fd, struct state_writer *w)
{
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock = { 0 };

	for (size_t i = 0; i < sizeof(irqchips) / sizeof(irqchips[0]); i++) {
		struct kvm_irqchip chip = { .chip_id = irqchips[i].chip_id };

		if (KVM_IOCTL(vm_fd, KVM_GET_IRQCHIP, &chip) < 0)
			return -1;
		state_put(w, irqchips[i].tag, 0, &chip, sizeof(chip));
	}
	if (KVM_IOCTL(vm_fd, KVM_GET_PIT2, &pit) < 0 ||
	    KVM_IOCTL(vm_fd, KVM_GET_CLOCK, &clock) < 0)
		return -1;
	state_put(w, STATE_VM_PIT, 0, &pit, sizeof(pit));
	state_put(w, STATE_VM_CLOCK, 0, &clock, sizeof(clock));
	return 0;
}

int x86_restore_vm(int vm_fd, const struct state_reader *r)
{
	struct kvm_pit_state2 pit;
	struct kvm_clock_data clock;

	if (state_get(r, STATE_VM_PIT, 0, &pit, sizeof(pit)) < 0 ||
	    KVM_IOCTL(vm_fd, KVM_SET_PIT2, &pit) < 0)
		return -1;
	if (state_get(r, STATE_VM_CLOCK, 0, &clock, sizeof(clock)) < 0)
		return -1;
	/* Only the value: the saved flags describe the old host's clock. */
	struct kvm_clock_data set = { .clock = clock.clock };
	if (KVM_IOCTL(vm_fd, KVM_SET_CLOCK, &set) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(irqchips) / sizeof(irqchips[0]); i++) {
		struct kvm_irqchip chip;

		if (state_get(r, irqchips[i].tag, 0, &chip, sizeof(chip)) < 0)
			return -1;
		if (chip.chip_id != irqchips[i].chip_id) {
			log_error("snapshot state %s: %s section holds chip %u",
				  r->path, state_tag_name(irqchips[i].tag),
				  chip.chip_id);
			return -1;
		}
		if (KVM_IOCTL(vm_fd, KVM_SET_IRQCHIP, &chip) < 0)
			return -1;
	}
	return 0;
}
