/* SPDX-License-Identifier: Apache-2.0 */
/*
 * insn.h - the few x86-64 instructions thaw-vmm has to emulate itself.
 *
 * On PVM hosts KVM's instruction emulator runs the guest kernel and gives up
 * on a handful of instructions (see PVM-NOTES.md section 3), returning the
 * bytes at RIP to user space.  This decoder recognises exactly those
 * instructions and nothing else: anything it does not know is reported as
 * X86_INSN_UNSUPPORTED so the VMM stops the guest instead of guessing.
 *
 * Decoding assumes 64-bit mode (the only mode a thaw guest kernel runs in)
 * and is a pure function of the bytes and the register values passed in: no
 * KVM, no guest memory.  It never reads past the given size, so truncated
 * input simply decodes as unsupported.
 */
#ifndef THAW_VMM_X86_INSN_H
#define THAW_VMM_X86_INSN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <linux/kvm.h>

/* Architectural limit; longer byte sequences #GP on hardware. */
#define X86_INSN_MAX_LEN 15

enum x86_insn_kind {
	X86_INSN_UNSUPPORTED = 0,
	X86_INSN_INT3,	  /* cc */
	X86_INSN_FWAIT,	  /* 9b */
	X86_INSN_LDMXCSR, /* 0f ae /2, memory operand */
	X86_INSN_STMXCSR, /* 0f ae /3, memory operand */
	X86_INSN_CLAC,	  /* 0f 01 ca */
	X86_INSN_STAC,	  /* 0f 01 cb */
};

struct x86_insn {
	enum x86_insn_kind kind;
	unsigned int len; /* total, prefixes included; 0 when unsupported */
	bool has_mem;	  /* @linear is valid */
	uint64_t linear;  /* linear address of the memory operand */
};

/*
 * What the effective-address computation needs besides the general
 * registers: RIP comes from @regs->rip, and FS/GS overrides add the segment
 * bases (from KVM_GET_SREGS; the only segment bases 64-bit mode honours).
 */
struct x86_insn_env {
	const struct kvm_regs *regs;
	uint64_t fs_base;
	uint64_t gs_base;
};

/*
 * Decodes the instruction in @bytes[0, size) (at most X86_INSN_MAX_LEN are
 * looked at) into @insn and returns its kind.  Unknown, malformed or
 * truncated instructions give X86_INSN_UNSUPPORTED with @insn->len 0; this
 * is not an error and prints nothing - the caller decides what to report.
 */
enum x86_insn_kind x86_insn_decode(const uint8_t *bytes, size_t size,
				   const struct x86_insn_env *env,
				   struct x86_insn *insn);

/* Mnemonic for messages: "ldmxcsr", ..., "unsupported". */
const char *x86_insn_name(enum x86_insn_kind kind);

#endif
