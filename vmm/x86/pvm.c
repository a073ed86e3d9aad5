// SPDX-License-Identifier: Apache-2.0
/*
 * pvm.c - see pvm.h.  The emulation handler reads the vCPU state, lets the
 * pure decoder in insn.c identify the instruction and compute its memory
 * operand, then applies the instruction's architectural effect with the
 * ordinary KVM state ioctls.  Guest memory operands go through the software
 * page walk in paging.c because KVM_TRANSLATE does not work on PVM.
 *
 * Anything not recognised stops the guest with the bytes in the message:
 * the list of instructions comes from measurement (PVM-NOTES.md section 3),
 * and a new one should be looked at, not skipped.
 */
#include "vmm/x86/pvm.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "vmm/x86/insn.h"
#include "vmm/kvm_ioctl.h"
#include "common/log.h"
#include "vmm/x86/paging.h"

#define X86_RFLAGS_AC (1ULL << 18)
#define X86_EFER_LMA (1ULL << 10)

#define X86_VECTOR_BP 3
#define X86_VECTOR_GP 13

/*
 * MXCSR bits that may be set: FXSAVE's MXCSR_MASK on every CPU with DAZ,
 * which is every x86-64 CPU PVM runs on.  ldmxcsr of anything else #GPs.
 */
#define MXCSR_MASK 0xffffu

bool pvm_host_detected(void)
{
	return access("/sys/module/kvm_pvm", F_OK) == 0;
}

/*
 * The flags, one reason each (measured, PVM-NOTES.md section 2):
 *
 * nopv - with paravirt on, the kernel's first hypercall (kvm_hypercall2 in
 *	ptp_kvm init) executes vmcall, which loops forever on PVM.
 *
 * clearcpuid= - CPUID masking through KVM_SET_CPUID2 does not reach the
 *	guest here, so features are hidden on the command line instead (6.1
 *	takes feature numbers, word * 32 + bit).  Each is an instruction group
 *	the emulator lacks but the kernel would use when present:
 *	  129 PCLMULQDQ, 137 SSSE3, 140 FMA, 147 SSE4.1, 148 SSE4.2,
 *	  153 AES, 156 AVX, 157 F16C - kernel SIMD crypto (blake2s in the
 *	      RNG takes the SSE path as soon as SSSE3 is present)
 *	  141 CX16 - cmpxchg16b
 *	  151 POPCNT - popcnt in hweight
 *	  154 XSAVE - xsave/xrstor; without it the kernel uses fxsave
 *	  293 AVX2, 304 AVX512F, 317 SHA_NI, 520 GFNI, 521 VAES,
 *	  522 VPCLMULQDQ - more SIMD crypto paths
 *	  295 SMEP, 308 SMAP - with SMAP cleared the kernel patches out its
 *	      clac/stac (the handler below still copes with stray ones)
 *
 * rcupdate.rcu_cpu_stall_suppress=1 - with the guest kernel emulated, a
 *	loaded host lets one vCPU wait tens of seconds for another; RCU
 *	calls that a stall and NMIs every CPU for a backtrace, whose
 *	paranoid entry reads the CPU number with lsl (GET_PERCPU_BASE),
 *	which the emulator cannot run: the VM died of its own diagnostics
 *	(2 vCPUs, 2026-12-02).
 *
 * thaw_pvm_syscall - enables thaw's guest kernel patch that completes user
 *	space system calls: on PVM, syscall jumps to LSTAR without entering
 *	kernel mode and faults there (section 4).  The patch acts only with
 *	this flag, so the same kernel is untouched on VMX/SVM hosts.
 */
const char *pvm_kernel_cmdline(void)
{
	return "nopv clearcpuid=129,137,140,141,147,148,151,153,154,156,157,"
	       "293,295,304,308,317,520,521,522 "
	       "rcupdate.rcu_cpu_stall_suppress=1 thaw_pvm_syscall";
}

#define VCPU_IOCTL(fd, request, arg) \
	kvm_ioctl_named(fd, request, arg, "emulating an instruction: " #request)

static int cannot_emulate(uint64_t rip, const uint8_t *bytes, size_t size,
			  const char *why)
{
	char hex[X86_INSN_MAX_LEN * 3] = "";
	size_t pos = 0;

	for (size_t i = 0; i < size; i++)
		pos += (size_t)snprintf(hex + pos, sizeof(hex) - pos, "%s%02x",
					i ? " " : "", bytes[i]);
	log_error("cannot emulate instruction at rip 0x%llx: %s%s",
		  (unsigned long long)rip,
		  size ? hex : "(KVM gave no instruction bytes)", why);
	return -1;
}

/*
 * Queues @vector as an exception already being delivered, so KVM raises it
 * on the next entry at the current RIP (which the caller has set).  Only the
 * exception fields change; flags stay 0 so KVM keeps its own NMI, SMM,
 * interrupt-shadow and payload state instead of taking our copy of it.
 */
static int inject_exception(int vcpu_fd, uint8_t vector, bool has_error_code,
			    uint32_t error_code)
{
	struct kvm_vcpu_events events;

	if (VCPU_IOCTL(vcpu_fd, KVM_GET_VCPU_EVENTS, &events) < 0)
		return -1;
	if (events.exception.injected || events.exception.pending) {
		log_error("cannot inject exception %u: exception %u is "
			  "already %s",
			  vector, events.exception.nr,
			  events.exception.injected ? "injected" : "pending");
		return -1;
	}
	events.flags = 0;
	events.exception.injected = 1;
	events.exception.pending = 0;
	events.exception.nr = vector;
	events.exception.has_error_code = has_error_code;
	events.exception.error_code = has_error_code ? error_code : 0;
	events.exception_has_payload = 0;
	events.exception_payload = 0;
	return VCPU_IOCTL(vcpu_fd, KVM_SET_VCPU_EVENTS, &events);
}

static int emulate_mxcsr(int vcpu_fd, const struct guest_memory *mem,
			 const struct kvm_sregs *sregs, struct kvm_regs *regs,
			 const struct x86_insn *insn)
{
	struct kvm_fpu fpu;
	char walk_err[256] = "";
	int err;

	if (VCPU_IOCTL(vcpu_fd, KVM_GET_FPU, &fpu) < 0)
		return -1;

	if (insn->kind == X86_INSN_LDMXCSR) {
		uint32_t value;

		err = x86_read_linear(mem, sregs, insn->linear, &value,
				      sizeof(value), walk_err,
				      sizeof(walk_err));
		if (!err && (value & ~MXCSR_MASK))
			/* A fault: nothing is loaded and RIP stays put. */
			return inject_exception(vcpu_fd, X86_VECTOR_GP, true,
						0);
		if (!err) {
			fpu.mxcsr = value;
			err = VCPU_IOCTL(vcpu_fd, KVM_SET_FPU, &fpu);
		}
	} else {
		err = x86_write_linear(mem, sregs, insn->linear, &fpu.mxcsr,
				       sizeof(fpu.mxcsr), walk_err,
				       sizeof(walk_err));
	}
	if (err) {
		/* A failed KVM_SET_FPU has said why already. */
		if (walk_err[0])
			log_error("%s", walk_err);
		log_error("%s at rip 0x%llx: cannot access its operand "
			  "at linear address 0x%llx",
			  x86_insn_name(insn->kind),
			  (unsigned long long)regs->rip,
			  (unsigned long long)insn->linear);
		return -1;
	}
	regs->rip += insn->len;
	return VCPU_IOCTL(vcpu_fd, KVM_SET_REGS, regs);
}

int pvm_handle_emulation_failure(int vcpu_fd, const struct guest_memory *mem,
				 const struct kvm_run *run)
{
	struct kvm_regs regs;
	struct kvm_sregs sregs;

	if (run->exit_reason != KVM_EXIT_INTERNAL_ERROR ||
	    run->emulation_failure.suberror != KVM_INTERNAL_ERROR_EMULATION) {
		log_error("not an emulation failure: exit reason %u, "
			  "suberror %u",
			  run->exit_reason, run->emulation_failure.suberror);
		return -1;
	}
	if (VCPU_IOCTL(vcpu_fd, KVM_GET_REGS, &regs) < 0 ||
	    VCPU_IOCTL(vcpu_fd, KVM_GET_SREGS, &sregs) < 0)
		return -1;

	const uint8_t *bytes = run->emulation_failure.insn_bytes;
	size_t size = 0;

	if (run->emulation_failure.flags &
	    KVM_INTERNAL_ERROR_EMULATION_FLAG_INSTRUCTION_BYTES)
		size = run->emulation_failure.insn_size < X86_INSN_MAX_LEN
			       ? run->emulation_failure.insn_size
			       : X86_INSN_MAX_LEN;

	/* The decoder knows 64-bit mode only; elsewhere 40-4f are inc/dec. */
	if (!(sregs.efer & X86_EFER_LMA) || !sregs.cs.l)
		return cannot_emulate(regs.rip, bytes, size,
				      " (vCPU not in 64-bit mode)");

	struct x86_insn_env env = {
		.regs = &regs,
		.fs_base = sregs.fs.base,
		.gs_base = sregs.gs.base,
	};
	struct x86_insn insn;

	/*
	 * No privilege checks: guest user code runs natively on PVM, so only
	 * kernel (CPL 0) instructions reach the emulator and this handler.
	 */
	switch (x86_insn_decode(bytes, size, &env, &insn)) {
	case X86_INSN_INT3:
		/* #BP is a trap: it reports the address after the int3. */
		regs.rip += insn.len;
		if (VCPU_IOCTL(vcpu_fd, KVM_SET_REGS, &regs) < 0)
			return -1;
		return inject_exception(vcpu_fd, X86_VECTOR_BP, false, 0);
	case X86_INSN_FWAIT:
		/*
		 * fwait only reports pending unmasked x87 exceptions; the
		 * kernel's own x87 use (fninit, fxsave/fxrstor) leaves none.
		 */
		regs.rip += insn.len;
		return VCPU_IOCTL(vcpu_fd, KVM_SET_REGS, &regs);
	case X86_INSN_LDMXCSR:
	case X86_INSN_STMXCSR:
		return emulate_mxcsr(vcpu_fd, mem, &sregs, &regs, &insn);
	case X86_INSN_CLAC:
		regs.rflags &= ~X86_RFLAGS_AC;
		regs.rip += insn.len;
		return VCPU_IOCTL(vcpu_fd, KVM_SET_REGS, &regs);
	case X86_INSN_STAC:
		regs.rflags |= X86_RFLAGS_AC;
		regs.rip += insn.len;
		return VCPU_IOCTL(vcpu_fd, KVM_SET_REGS, &regs);
	case X86_INSN_UNSUPPORTED:
		break;
	}
	return cannot_emulate(regs.rip, bytes, size, "");
}
