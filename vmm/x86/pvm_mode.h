/* SPDX-License-Identifier: Apache-2.0 */
/*
 * pvm_mode.h - starting a PVM guest: a kernel that runs natively on a
 * KVM-on-PVM host instead of in KVM's instruction emulator.
 *
 * The image says it is one with an ELF note (pvm_abi.h), which the ELF
 * loader hands to pvm_mode_note_abi() as it meets PT_NOTE segments.  When
 * the host is KVM-on-PVM (pvm.h) and the image has the note, thaw-vmm
 * starts the boot vCPU in the state of any 64-bit kernel (cpu.h), but
 * already in the host's native mode, on boot page tables that mode can run
 * on, with BOOT_PVM_NATIVE_PAGE_ADDR (layout.h) as its native page: not
 * one instruction of the guest is emulated, and the guest tells from its
 * first one, "mov %cs" (pvm_abi.h), with no fault possible on any host.
 * Other vCPUs start as the guest starts them (INIT/SIPI, emulated) and
 * switch themselves.  Everything else about the guest, its IDT, its system
 * calls, its LAPIC timer, is plain x86 the host delivers.
 */
#ifndef THAW_VMM_X86_PVM_MODE_H
#define THAW_VMM_X86_PVM_MODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvm.h>

#include "vmm/memory.h"
#include "vmm/x86/boot.h"

/*
 * The host ABI revision the thaw PVM-guest note among @len bytes of ELF
 * notes names, or 0 when they have none (or are not well-formed notes,
 * which makes them someone else's).
 */
uint32_t pvm_mode_note_abi(const uint8_t *notes, uint64_t len);

/*
 * Prepares a boot on a KVM-on-PVM host for the kernel x86_load_linux() put
 * in @boot: for a PVM guest, the boot page tables
 * (x86_write_boot_page_tables(), already written) get the user bit native
 * mode needs.  Returns 1 when the guest starts in PVM mode, 0 when the
 * image is not a PVM guest (nothing changed), or -EPROTONOSUPPORT when it
 * asks for an ABI revision this thaw-vmm does not speak, with a message in
 * @err.
 */
int pvm_mode_prepare_boot(struct guest_memory *mem, const struct x86_boot *boot,
			  char *err, size_t errlen);

/*
 * Puts the boot vCPU @vcpu_fd, whose boot registers are set, in native mode
 * for the PVM guest pvm_mode_prepare_boot() accepted in @boot (nothing for
 * another image).  0, or -errno of KVM_SET_MSRS with a message in @err.
 */
int pvm_mode_start_boot_vcpu(int vcpu_fd, const struct x86_boot *boot,
			     char *err, size_t errlen);

/*
 * Whether vCPU @vcpu_fd, sampled outside KVM_RUN with @rflags, takes
 * interrupts.  Elsewhere than on a KVM-on-PVM host (@pvm_host false) and
 * for a guest the host emulates, RFLAGS.IF says; a native guest's flag is
 * its page's byte (pvm_abi.h), which KVM's RFLAGS does not show: an idle
 * native guest halts with RFLAGS.IF clear.
 */
bool pvm_mode_interrupts_on(bool pvm_host, int vcpu_fd,
			    const struct guest_memory *mem, uint64_t rflags);

/*
 * @msrs (KVM's saved MSRs, x86_msr_index_list()) with the native-page MSR
 * added, which KVM does not list: without it a snapshot of a native guest
 * restores emulated, for good (pvm_abi.h).  Frees @msrs; NULL with a
 * message in @err when out of memory.
 */
struct kvm_msr_list *pvm_mode_saved_msrs(struct kvm_msr_list *msrs, char *err,
					 size_t errlen);

#endif
