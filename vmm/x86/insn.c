// SPDX-License-Identifier: Apache-2.0
/*
 * insn.c - see insn.h.  The decoder is deliberately narrow: it parses the
 * general instruction format (legacy prefixes, REX, opcode, ModRM, SIB,
 * displacement) only as far as the six recognised instructions need, and
 * rejects every opcode outside them, including the 0x67 address-size and
 * 0xf0 lock prefixes, which fall through to the opcode switch.  Rejecting is
 * always safe: the caller then stops the guest with the bytes in the message.
 */
#include "vmm/x86/insn.h"

struct cursor {
	const uint8_t *bytes;
	size_t size;
	size_t pos;
};

static bool take(struct cursor *c, uint8_t *b)
{
	if (c->pos >= c->size)
		return false;
	*b = c->bytes[c->pos++];
	return true;
}

static bool take_disp32(struct cursor *c, int32_t *disp)
{
	uint32_t v = 0;

	for (int i = 0; i < 4; i++) {
		uint8_t b;

		if (!take(c, &b))
			return false;
		v |= (uint32_t)b << (8 * i);
	}
	*disp = (int32_t)v;
	return true;
}

enum segment { SEG_FLAT, SEG_FS, SEG_GS };

#define REX_B 0x1
#define REX_X 0x2

struct prefixes {
	/*
	 * 66/f2/f3 select a different instruction for every two-byte opcode
	 * recognised here (f3 0f 01 ca is FRED's ERETU, for instance), so
	 * their presence is all that matters.
	 */
	bool mandatory;
	enum segment seg;
	uint8_t rex;
};

/* A decoded memory operand before it is resolved against registers. */
struct mem_operand {
	int base;  /* register number 0-15, or -1 */
	int index; /* register number 0-15, or -1 */
	unsigned int scale;
	int64_t disp;
	bool rip_relative;
};

/* ModRM/SIB register numbers (rax, rcx, rdx, rbx, rsp, ...) to kvm_regs. */
static uint64_t gpr(const struct kvm_regs *r, int n)
{
	const __u64 *by_number[16] = {
		&r->rax, &r->rcx, &r->rdx, &r->rbx, &r->rsp, &r->rbp,
		&r->rsi, &r->rdi, &r->r8,  &r->r9,  &r->r10, &r->r11,
		&r->r12, &r->r13, &r->r14, &r->r15,
	};

	return *by_number[n & 15];
}

/*
 * Parses the SIB byte and displacement following a ModRM byte with mod != 3.
 * Note the two encodings that ignore REX.B: rm == 100 always means "SIB
 * follows" and mod == 00 with rm == 101 always means RIP-relative, which is
 * why r12 and r13 as bases need a SIB byte and a disp8 respectively.
 */
static bool decode_mem_operand(struct cursor *c, uint8_t modrm, uint8_t rex,
			       struct mem_operand *op)
{
	unsigned int mod = modrm >> 6;
	unsigned int rm = modrm & 7;
	bool disp32 = mod == 2;

	*op = (struct mem_operand){ .base = -1, .index = -1, .scale = 1 };
	if (rm == 4) {
		uint8_t sib;

		if (!take(c, &sib))
			return false;
		unsigned int index = ((sib >> 3) & 7) | (rex & REX_X ? 8 : 0);
		unsigned int base = sib & 7;

		/* Only the 100 encoding without REX.X means "no index". */
		if (index != 4)
			op->index = (int)index;
		op->scale = 1u << (sib >> 6);
		if (base == 5 && mod == 0)
			disp32 = true;
		else
			op->base = (int)(base | (rex & REX_B ? 8 : 0));
	} else if (rm == 5 && mod == 0) {
		op->rip_relative = true;
		disp32 = true;
	} else {
		op->base = (int)(rm | (rex & REX_B ? 8 : 0));
	}

	if (mod == 1) {
		uint8_t b;

		if (!take(c, &b))
			return false;
		op->disp = (int8_t)b;
	} else if (disp32) {
		int32_t d;

		if (!take_disp32(c, &d))
			return false;
		op->disp = d;
	}
	return true;
}

/*
 * 64-bit effective address arithmetic wraps modulo 2^64, which unsigned
 * addition gives for free.  Canonical checks are left to the page walk.
 */
static uint64_t linear_address(const struct mem_operand *op,
			       const struct prefixes *p, unsigned int len,
			       const struct x86_insn_env *env)
{
	uint64_t addr = (uint64_t)op->disp;

	if (op->rip_relative)
		addr += env->regs->rip + len;
	if (op->base >= 0)
		addr += gpr(env->regs, op->base);
	if (op->index >= 0)
		addr += gpr(env->regs, op->index) * op->scale;
	if (p->seg == SEG_FS)
		addr += env->fs_base;
	else if (p->seg == SEG_GS)
		addr += env->gs_base;
	return addr;
}

static void parse_prefixes(struct cursor *c, struct prefixes *p)
{
	*p = (struct prefixes){ .seg = SEG_FLAT };
	while (c->pos < c->size) {
		uint8_t b = c->bytes[c->pos];

		switch (b) {
		case 0x66:
		case 0xf2:
		case 0xf3:
			p->mandatory = true;
			break;
		/* 64-bit mode ignores the CS, SS, DS and ES bases. */
		case 0x2e:
		case 0x36:
		case 0x3e:
		case 0x26:
			p->seg = SEG_FLAT;
			break;
		case 0x64:
			p->seg = SEG_FS;
			break;
		case 0x65:
			p->seg = SEG_GS;
			break;
		default:
			if ((b & 0xf0) != 0x40)
				return;
			/* A REX prefix counts only right before the opcode. */
			c->pos++;
			p->rex = b;
			continue;
		}
		c->pos++;
		p->rex = 0;
	}
}

static enum x86_insn_kind decode_0f(struct cursor *c, const struct prefixes *p,
				    const struct x86_insn_env *env,
				    struct x86_insn *insn)
{
	uint8_t op, modrm;

	if (p->mandatory || !take(c, &op) || !take(c, &modrm))
		return X86_INSN_UNSUPPORTED;

	if (op == 0x01) {
		if (modrm == 0xca)
			return X86_INSN_CLAC;
		if (modrm == 0xcb)
			return X86_INSN_STAC;
		return X86_INSN_UNSUPPORTED;
	}
	if (op != 0xae || modrm >> 6 == 3)
		return X86_INSN_UNSUPPORTED;

	enum x86_insn_kind kind;

	switch ((modrm >> 3) & 7) {
	case 2:
		kind = X86_INSN_LDMXCSR;
		break;
	case 3:
		kind = X86_INSN_STMXCSR;
		break;
	default:
		return X86_INSN_UNSUPPORTED;
	}

	struct mem_operand mem;

	if (!decode_mem_operand(c, modrm, p->rex, &mem))
		return X86_INSN_UNSUPPORTED;
	insn->has_mem = true;
	insn->linear = linear_address(&mem, p, (unsigned int)c->pos, env);
	return kind;
}

enum x86_insn_kind x86_insn_decode(const uint8_t *bytes, size_t size,
				   const struct x86_insn_env *env,
				   struct x86_insn *insn)
{
	struct cursor c = {
		.bytes = bytes,
		.size = size < X86_INSN_MAX_LEN ? size : X86_INSN_MAX_LEN,
	};
	struct prefixes p;
	enum x86_insn_kind kind = X86_INSN_UNSUPPORTED;
	uint8_t op;

	*insn = (struct x86_insn){ .kind = X86_INSN_UNSUPPORTED };
	parse_prefixes(&c, &p);
	if (!take(&c, &op))
		return X86_INSN_UNSUPPORTED;

	switch (op) {
	case 0xcc:
		kind = X86_INSN_INT3;
		break;
	case 0x9b:
		kind = X86_INSN_FWAIT;
		break;
	case 0x0f:
		kind = decode_0f(&c, &p, env, insn);
		break;
	}

	if (kind == X86_INSN_UNSUPPORTED) {
		*insn = (struct x86_insn){ .kind = X86_INSN_UNSUPPORTED };
		return kind;
	}
	insn->kind = kind;
	insn->len = (unsigned int)c.pos;
	return kind;
}

const char *x86_insn_name(enum x86_insn_kind kind)
{
	switch (kind) {
	case X86_INSN_INT3:
		return "int3";
	case X86_INSN_FWAIT:
		return "fwait";
	case X86_INSN_LDMXCSR:
		return "ldmxcsr";
	case X86_INSN_STMXCSR:
		return "stmxcsr";
	case X86_INSN_CLAC:
		return "clac";
	case X86_INSN_STAC:
		return "stac";
	case X86_INSN_UNSUPPORTED:
		break;
	}
	return "unsupported";
}
