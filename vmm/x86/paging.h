/* SPDX-License-Identifier: Apache-2.0 */
/*
 * paging.h - guest linear to guest-physical translation, done in software.
 *
 * thaw-vmm sometimes has to touch guest memory the way a guest instruction
 * would: emulating an instruction KVM gave up on (PVM, see pvm.h), and later
 * snapshot and debugging code that follows guest pointers.  KVM_TRANSLATE
 * was measured not to help on PVM hosts, so the walk is done here, reading
 * the guest's own page tables through guest_memory_ptr().  Every table
 * pointer comes from the guest and is bounds-checked like any other guest
 * address.
 *
 * Supported: 64-bit paging, 4-level (CR0.PG, CR4.PAE, EFER.LMA) and 5-level
 * (CR4.LA57), with 1 GiB and 2 MiB pages - everything a 64-bit Linux guest
 * can be in once it runs.  Legacy 32-bit and PAE paging are refused.
 *
 * Only presence is checked, not the U/S, R/W and NX permission bits, and
 * the accessed/dirty bits are not updated: the callers act for the guest
 * kernel on its own data, where neither changes the outcome.
 */
#ifndef THAW_VMM_X86_PAGING_H
#define THAW_VMM_X86_PAGING_H

#include <stddef.h>
#include <stdint.h>

#include <linux/kvm.h>

#include "vmm/memory.h"

/*
 * Translates @linear with the paging mode and CR3 in @sregs and stores the
 * guest-physical address in @gpa.  Returns 0, or -1 with a message in @err
 * (@errlen bytes; nothing is printed) naming the linear address and, where
 * there is one, the failing entry's level, guest-physical address and value
 * (not present, reserved bit set, outside guest RAM, non-canonical address,
 * unsupported paging mode).
 * The result itself is not checked against guest RAM.
 */
int x86_translate(const struct guest_memory *mem, const struct kvm_sregs *sregs,
		  uint64_t linear, uint64_t *gpa, char *err, size_t errlen);

/*
 * Copy @len bytes between guest linear [linear, linear + len) and @buf,
 * translating each page separately, so a range may cross page boundaries.
 * Returns 0, or -1 with @err naming the address; on failure a write may
 * have changed the pages before the failing one.
 */
int x86_read_linear(const struct guest_memory *mem,
		    const struct kvm_sregs *sregs, uint64_t linear, void *buf,
		    size_t len, char *err, size_t errlen);
int x86_write_linear(const struct guest_memory *mem,
		     const struct kvm_sregs *sregs, uint64_t linear,
		     const void *buf, size_t len, char *err, size_t errlen);

#endif
