// SPDX-License-Identifier: Apache-2.0
/*
 * pvm_mode.c - see pvm_mode.h.  The boot page tables are adjusted in place
 * rather than written differently: they are the same identity map either
 * way (layout.h), and native mode only adds the user bit, because the host
 * runs the guest kernel at hardware CPL 3 on shadows of the guest's tables
 * and never lets CPL 3 through a supervisor-only entry.
 */
#include "vmm/x86/pvm_mode.h"

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>

#include "common/errbuf.h"
#include "common/log.h"
#include "vmm/x86/layout.h"
#include "vmm/x86/pvm_abi.h"

#define PTE_PRESENT 0x1ULL
#define PTE_USER 0x4ULL
#define PTE_LARGE 0x80ULL
#define PTE_ADDR_MASK 0x000ffffffffff000ULL
#define PAGE_TABLE_ENTRIES 512
#define RFLAGS_IF 0x200ULL

static uint64_t align4(uint64_t n)
{
	return (n + 3) & ~3ULL;
}

uint32_t pvm_mode_note_abi(const uint8_t *notes, uint64_t len)
{
	const uint64_t name_len = sizeof(THAW_NOTE_NAME);
	uint64_t pos = 0;

	while (len - pos >= sizeof(Elf64_Nhdr)) {
		Elf64_Nhdr nh;

		memcpy(&nh, notes + pos, sizeof(nh));
		pos += sizeof(nh);
		uint64_t name_at = pos;
		uint64_t desc_at = name_at + align4(nh.n_namesz);
		if (desc_at > len || align4(nh.n_descsz) > len - desc_at)
			return 0;
		pos = desc_at + align4(nh.n_descsz);
		if (nh.n_type != THAW_NOTE_PVM_GUEST ||
		    nh.n_namesz != name_len ||
		    memcmp(notes + name_at, THAW_NOTE_NAME, name_len) ||
		    nh.n_descsz != sizeof(uint32_t))
			continue;

		uint32_t abi;
		memcpy(&abi, notes + desc_at, sizeof(abi));
		return abi;
	}
	return 0;
}

/*
 * Sets the user bit in every present entry of the table at @table_addr and,
 * below @level 1, of the tables they point to (a large page ends the walk).
 */
static void set_user_bit(struct guest_memory *mem, uint64_t table_addr,
			 int level)
{
	uint64_t *table = guest_memory_ptr(
		mem, table_addr, PAGE_TABLE_ENTRIES * sizeof(uint64_t));

	for (int i = 0; i < PAGE_TABLE_ENTRIES; i++) {
		if (!(table[i] & PTE_PRESENT))
			continue;
		table[i] |= PTE_USER;
		if (level > 1 && !(table[i] & PTE_LARGE))
			set_user_bit(mem, table[i] & PTE_ADDR_MASK, level - 1);
	}
}

int pvm_mode_prepare_boot(struct guest_memory *mem, const struct x86_boot *boot,
			  char *err, size_t errlen)
{
	if (!boot->pvm_abi)
		return 0;
	if (boot->pvm_abi != THAW_PVM_GUEST_ABI) {
		errbuf_set(err, errlen,
			   "kernel: its PVM guest note asks for host ABI "
			   "revision %u; this thaw-vmm starts revision %u",
			   boot->pvm_abi, THAW_PVM_GUEST_ABI);
		return -EPROTONOSUPPORT;
	}
	set_user_bit(mem, BOOT_PML4_ADDR, 4);
	log_info("kernel is a PVM guest (host ABI revision %u): it starts in "
		 "native mode",
		 boot->pvm_abi);
	return 1;
}

struct kvm_msr_list *pvm_mode_saved_msrs(struct kvm_msr_list *msrs, char *err,
					 size_t errlen)
{
	struct kvm_msr_list *more = realloc(
		msrs, sizeof(*msrs) + (msrs->nmsrs + 1) * sizeof(uint32_t));

	if (!more) {
		free(msrs);
		errbuf_set(err, errlen, "MSR index list: out of memory");
		return NULL;
	}
	more->indices[more->nmsrs++] = PVM_MSR_NATIVE_PAGE;
	return more;
}

/* struct kvm_msrs ends in a flexible array: room for one entry through a
 * union (C11 allows no such struct inside another). */
union one_msr {
	struct kvm_msrs msrs;
	uint8_t bytes[sizeof(struct kvm_msrs) + sizeof(struct kvm_msr_entry)];
};

int pvm_mode_start_boot_vcpu(int vcpu_fd, const struct x86_boot *boot,
			     char *err, size_t errlen)
{
	union one_msr set = { .msrs.nmsrs = 1 };

	if (boot->pvm_abi != THAW_PVM_GUEST_ABI)
		return 0;
	set.msrs.entries[0].index = PVM_MSR_NATIVE_PAGE;
	set.msrs.entries[0].data =
		BOOT_PVM_NATIVE_PAGE_ADDR | PVM_NATIVE_PAGE_ON;
	int ret = ioctl(vcpu_fd, KVM_SET_MSRS, &set);
	if (ret != 1) {
		int e = ret < 0 ? errno : EINVAL;

		errbuf_set(err, errlen,
			   "vcpu 0: KVM_SET_MSRS of MSR 0x%x = 0x%llx (native "
			   "mode): %s",
			   PVM_MSR_NATIVE_PAGE,
			   (unsigned long long)set.msrs.entries[0].data,
			   ret < 0 ? strerror(e) : "refused");
		return -e;
	}
	return 0;
}

bool pvm_mode_interrupts_on(bool pvm_host, int vcpu_fd,
			    const struct guest_memory *mem, uint64_t rflags)
{
	union one_msr get = { .msrs.nmsrs = 1 };

	get.msrs.entries[0].index = PVM_MSR_NATIVE_PAGE;
	if (!pvm_host || ioctl(vcpu_fd, KVM_GET_MSRS, &get) != 1)
		return rflags & RFLAGS_IF;
	/* The reset value names no page: the guest is emulated. */
	uint64_t page = get.msrs.entries[0].data & ~PVM_NATIVE_PAGE_FLAGS;
	const uint8_t *flag =
		page ? guest_memory_ptr(mem, page + PVM_NATIVE_PAGE_IF, 1)
		     : NULL;
	return flag ? *flag != 0 : (rflags & RFLAGS_IF);
}
