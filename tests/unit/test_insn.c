// SPDX-License-Identifier: Apache-2.0
/*
 * test_insn.c - the PVM instruction decoder (vmm/x86/insn.c).
 *
 * Every decode runs on a heap copy of exactly the bytes under test, so an
 * out-of-bounds read past the given size shows up under AddressSanitizer.
 * Register values are distinct and large so a wrong register, scale, sign
 * extension or segment base gives a visibly different address.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/x86/insn.h"

#define RIP 0xffffffff81234560ULL
#define FS_BASE 0x00007f0000001000ULL
#define GS_BASE 0xffff88807fc00000ULL

static struct kvm_regs regs;
static const struct x86_insn_env env = {
	.regs = &regs,
	.fs_base = FS_BASE,
	.gs_base = GS_BASE,
};

static void set_registers(void)
{
	regs = (struct kvm_regs){
		.rax = 0x1000000000ULL,
		.rbx = 0x2000000000ULL,
		.rcx = 0x30ULL,
		.rdx = 0x4000000000ULL,
		.rsi = 0x5000000000ULL,
		.rdi = 0x6000000000ULL,
		.rsp = 0xffffc90000013f00ULL,
		.rbp = 0xffffc90000013f80ULL,
		.r8 = 0x8800000000ULL,
		.r9 = 0x99ULL,
		.r10 = 0xa000000000ULL,
		.r11 = 0xb000000000ULL,
		.r12 = 0xffff888001234000ULL,
		.r13 = 0xd000000000ULL,
		.r14 = 0xe000000000ULL,
		.r15 = 0xf000000000ULL,
		.rip = RIP,
		.rflags = 0x246,
	};
}

TestSuite(insn, .init = set_registers);

#define BYTES(...)                        \
	(const uint8_t[]){ __VA_ARGS__ }, \
		sizeof((const uint8_t[]){ __VA_ARGS__ })

static enum x86_insn_kind decode(const uint8_t *bytes, size_t size,
				 struct x86_insn *insn)
{
	uint8_t *copy = malloc(size ? size : 1);

	cr_assert_not_null(copy);
	memcpy(copy, bytes, size);
	enum x86_insn_kind kind = x86_insn_decode(copy, size, &env, insn);

	free(copy);
	return kind;
}

#define EXPECT_MEM(kind_, len_, linear_, ...)                        \
	do {                                                         \
		struct x86_insn i_;                                  \
		cr_assert_eq(decode(BYTES(__VA_ARGS__), &i_), kind_, \
			     "kind %d", (int)i_.kind);               \
		cr_assert_eq(i_.kind, kind_);                        \
		cr_assert_eq(i_.len, len_, "len %u", i_.len);        \
		cr_assert(i_.has_mem);                               \
		cr_assert_eq(i_.linear, (uint64_t)(linear_),         \
			     "linear 0x%llx, expected 0x%llx",       \
			     (unsigned long long)i_.linear,          \
			     (unsigned long long)(linear_));         \
	} while (0)

#define EXPECT_PLAIN(kind_, len_, ...)                               \
	do {                                                         \
		struct x86_insn i_;                                  \
		cr_assert_eq(decode(BYTES(__VA_ARGS__), &i_), kind_, \
			     "kind %d", (int)i_.kind);               \
		cr_assert_eq(i_.kind, kind_);                        \
		cr_assert_eq(i_.len, len_, "len %u", i_.len);        \
		cr_assert_not(i_.has_mem);                           \
	} while (0)

#define EXPECT_UNSUPPORTED(...)                                              \
	do {                                                                 \
		struct x86_insn i_;                                          \
		cr_assert_eq(decode(BYTES(__VA_ARGS__), &i_),                \
			     X86_INSN_UNSUPPORTED, "kind %d", (int)i_.kind); \
		cr_assert_eq(i_.kind, X86_INSN_UNSUPPORTED);                 \
		cr_assert_eq(i_.len, 0);                                     \
		cr_assert_not(i_.has_mem);                                   \
	} while (0)

Test(insn, ldmxcsr_rbp_disp8)
{
	/* ldmxcsr -0x4(%rbp) */
	EXPECT_MEM(X86_INSN_LDMXCSR, 4, 0xffffc90000013f7cULL, 0x0f, 0xae, 0x55,
		   0xfc);
}

Test(insn, stmxcsr_r12_sib_disp8)
{
	/* stmxcsr 0x8(%r12): r12 as a base always needs a SIB byte */
	EXPECT_MEM(X86_INSN_STMXCSR, 6, 0xffff888001234008ULL, 0x41, 0x0f, 0xae,
		   0x5c, 0x24, 0x08);
}

Test(insn, ldmxcsr_rip_relative)
{
	/* ldmxcsr 0x10(%rip): relative to the end of the 7-byte insn */
	EXPECT_MEM(X86_INSN_LDMXCSR, 7, RIP + 7 + 0x10, 0x0f, 0xae, 0x15, 0x10,
		   0x00, 0x00, 0x00);
}

Test(insn, ldmxcsr_rip_relative_negative)
{
	/* ldmxcsr -0x20(%rip) */
	EXPECT_MEM(X86_INSN_LDMXCSR, 7, RIP + 7 - 0x20, 0x0f, 0xae, 0x15, 0xe0,
		   0xff, 0xff, 0xff);
}

Test(insn, ldmxcsr_gs_absolute_sib_no_base)
{
	/* ldmxcsr %gs:0x1000: SIB with no base and no index */
	EXPECT_MEM(X86_INSN_LDMXCSR, 9, GS_BASE + 0x1000, 0x65, 0x0f, 0xae,
		   0x14, 0x25, 0x00, 0x10, 0x00, 0x00);
}

Test(insn, stmxcsr_fs_base)
{
	/* stmxcsr %fs:(%rax) */
	EXPECT_MEM(X86_INSN_STMXCSR, 4, FS_BASE + 0x1000000000ULL, 0x64, 0x0f,
		   0xae, 0x18);
}

Test(insn, flat_segment_overrides_ignored)
{
	/* ds, cs, ss, es: (%rax), no base added in 64-bit mode */
	EXPECT_MEM(X86_INSN_LDMXCSR, 4, 0x1000000000ULL, 0x3e, 0x0f, 0xae,
		   0x10);
	EXPECT_MEM(X86_INSN_LDMXCSR, 4, 0x1000000000ULL, 0x2e, 0x0f, 0xae,
		   0x10);
	EXPECT_MEM(X86_INSN_LDMXCSR, 4, 0x1000000000ULL, 0x36, 0x0f, 0xae,
		   0x10);
	EXPECT_MEM(X86_INSN_LDMXCSR, 4, 0x1000000000ULL, 0x26, 0x0f, 0xae,
		   0x10);
	/* the last segment prefix wins */
	EXPECT_MEM(X86_INSN_LDMXCSR, 5, 0x1000000000ULL, 0x65, 0x3e, 0x0f, 0xae,
		   0x10);
	EXPECT_MEM(X86_INSN_LDMXCSR, 5, GS_BASE + 0x1000000000ULL, 0x3e, 0x65,
		   0x0f, 0xae, 0x10);
}

Test(insn, sib_scale_index_disp8)
{
	/* ldmxcsr -0x10(%rbp,%rcx,4) */
	EXPECT_MEM(X86_INSN_LDMXCSR, 5, 0xffffc90000013f80ULL + 0x30 * 4 - 0x10,
		   0x0f, 0xae, 0x54, 0x8d, 0xf0);
	/* stmxcsr (%rbx,%rcx,8) */
	EXPECT_MEM(X86_INSN_STMXCSR, 4, 0x2000000000ULL + 0x30 * 8, 0x0f, 0xae,
		   0x1c, 0xcb);
}

Test(insn, sib_rex_x_index)
{
	/* stmxcsr (%rax,%r9,4) */
	EXPECT_MEM(X86_INSN_STMXCSR, 5, 0x1000000000ULL + 0x99 * 4, 0x42, 0x0f,
		   0xae, 0x1c, 0x88);
	/* ldmxcsr (%rax,%r12): index 100 with REX.X is r12, not "none" */
	EXPECT_MEM(X86_INSN_LDMXCSR, 5, 0x1000000000ULL + 0xffff888001234000ULL,
		   0x42, 0x0f, 0xae, 0x14, 0x20);
}

Test(insn, sib_no_index)
{
	/* ldmxcsr (%rsp): index 100 without REX.X; scale is then ignored */
	EXPECT_MEM(X86_INSN_LDMXCSR, 4, 0xffffc90000013f00ULL, 0x0f, 0xae, 0x14,
		   0x24);
	EXPECT_MEM(X86_INSN_LDMXCSR, 4, 0xffffc90000013f00ULL, 0x0f, 0xae, 0x14,
		   0xe4);
}

Test(insn, sib_no_base_with_index)
{
	/* ldmxcsr 0x100(,%rcx,2) */
	EXPECT_MEM(X86_INSN_LDMXCSR, 8, 0x100 + 0x30 * 2, 0x0f, 0xae, 0x14,
		   0x4d, 0x00, 0x01, 0x00, 0x00);
}

Test(insn, rex_b_does_not_change_special_encodings)
{
	/* SIB base 101 with mod 00 stays "disp32, no base" under REX.B */
	EXPECT_MEM(X86_INSN_LDMXCSR, 9, 0x1000, 0x41, 0x0f, 0xae, 0x14, 0x25,
		   0x00, 0x10, 0x00, 0x00);
	/* rm 101 with mod 00 stays RIP-relative under REX.B */
	EXPECT_MEM(X86_INSN_LDMXCSR, 8, RIP + 8 + 0x10, 0x41, 0x0f, 0xae, 0x15,
		   0x10, 0x00, 0x00, 0x00);
	/* so r13 as a base takes mod 01 with disp8 0: stmxcsr 0x0(%r13) */
	EXPECT_MEM(X86_INSN_STMXCSR, 5, 0xd000000000ULL, 0x41, 0x0f, 0xae, 0x5d,
		   0x00);
}

Test(insn, rex_extends_base)
{
	/* ldmxcsr (%r8) */
	EXPECT_MEM(X86_INSN_LDMXCSR, 4, 0x8800000000ULL, 0x41, 0x0f, 0xae,
		   0x10);
	/* REX.W and REX.R do not matter: ldmxcsr -0x4(%rbp) */
	EXPECT_MEM(X86_INSN_LDMXCSR, 5, 0xffffc90000013f7cULL, 0x4c, 0x0f, 0xae,
		   0x55, 0xfc);
	/* a bare 40 is a REX prefix too */
	EXPECT_MEM(X86_INSN_LDMXCSR, 5, 0xffffc90000013f7cULL, 0x40, 0x0f, 0xae,
		   0x55, 0xfc);
}

Test(insn, rex_before_legacy_prefix_is_ignored)
{
	/* 41 65 0f ae 10: the REX is not last, so (%rax), not (%r8) */
	EXPECT_MEM(X86_INSN_LDMXCSR, 5, GS_BASE + 0x1000000000ULL, 0x41, 0x65,
		   0x0f, 0xae, 0x10);
	/* 65 41 0f ae 10: %gs:(%r8) */
	EXPECT_MEM(X86_INSN_LDMXCSR, 5, GS_BASE + 0x8800000000ULL, 0x65, 0x41,
		   0x0f, 0xae, 0x10);
}

Test(insn, disp32_sign_extended)
{
	/* ldmxcsr 0x100(%rbx) */
	EXPECT_MEM(X86_INSN_LDMXCSR, 7, 0x2000000100ULL, 0x0f, 0xae, 0x93, 0x00,
		   0x01, 0x00, 0x00);
	/* stmxcsr -0x100(%rax) */
	EXPECT_MEM(X86_INSN_STMXCSR, 7, 0x1000000000ULL - 0x100, 0x0f, 0xae,
		   0x98, 0x00, 0xff, 0xff, 0xff);
}

Test(insn, address_wraps_modulo_2_64)
{
	regs.rax = 0xfffffffffffffff0ULL;
	/* ldmxcsr 0x20(%rax) */
	EXPECT_MEM(X86_INSN_LDMXCSR, 4, 0x10, 0x0f, 0xae, 0x50, 0x20);
}

Test(insn, trailing_bytes_are_not_part_of_the_insn)
{
	/* KVM hands over 15 bytes; only the first 4 are ldmxcsr */
	EXPECT_MEM(X86_INSN_LDMXCSR, 4, 0xffffc90000013f7cULL, 0x0f, 0xae, 0x55,
		   0xfc, 0x0f, 0x0b, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
		   0x90, 0x90);
}

Test(insn, no_operand_instructions)
{
	EXPECT_PLAIN(X86_INSN_INT3, 1, 0xcc);
	EXPECT_PLAIN(X86_INSN_INT3, 1, 0xcc, 0x90, 0x90);
	EXPECT_PLAIN(X86_INSN_FWAIT, 1, 0x9b);
	EXPECT_PLAIN(X86_INSN_FWAIT, 1, 0x9b, 0xdb, 0xe3);
	EXPECT_PLAIN(X86_INSN_CLAC, 3, 0x0f, 0x01, 0xca);
	EXPECT_PLAIN(X86_INSN_STAC, 3, 0x0f, 0x01, 0xcb);
}

Test(insn, prefix_counts_in_length)
{
	EXPECT_PLAIN(X86_INSN_INT3, 2, 0x3e, 0xcc);
	/* 14 prefixes + cc is the longest legal instruction */
	EXPECT_PLAIN(X86_INSN_INT3, 15, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e,
		     0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0xcc);
	/* one more and it is past the 15-byte limit */
	EXPECT_UNSUPPORTED(0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e,
			   0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0x3e, 0xcc);
}

Test(insn, unsupported_bytes)
{
	EXPECT_UNSUPPORTED(0x0f, 0x0b);		    /* ud2 */
	EXPECT_UNSUPPORTED(0x0f, 0x0b, 0x90, 0x90); /* ud2 + padding */
	EXPECT_UNSUPPORTED(0x90);		    /* nop */
	EXPECT_UNSUPPORTED(0x0f, 0x01, 0xc1);	    /* vmcall */
	EXPECT_UNSUPPORTED(0x0f, 0x01, 0xf8);	    /* swapgs */
	EXPECT_UNSUPPORTED(0x0f, 0xae, 0xe8);	    /* lfence: mod 3 */
	EXPECT_UNSUPPORTED(0x0f, 0xae, 0xd0);	    /* mod 3, /2 */
	EXPECT_UNSUPPORTED(0x0f, 0xae, 0x38);	    /* clflush (%rax): /7 */
	EXPECT_UNSUPPORTED(0x48, 0x0f, 0xae, 0x2f); /* xrstor64: /5 */
	EXPECT_UNSUPPORTED(0x0f, 0xae, 0x00);	    /* fxsave (%rax): /0 */
	EXPECT_UNSUPPORTED(0xf0, 0x48, 0x0f, 0xc7, 0x0e); /* cmpxchg16b */
	EXPECT_UNSUPPORTED(0xf3, 0x48, 0x0f, 0xb8, 0xc7); /* popcnt */
}

Test(insn, prefixes_that_change_the_instruction)
{
	/* 66/f2/f3 make these other instructions (or #UD) */
	EXPECT_UNSUPPORTED(0x66, 0x0f, 0xae, 0x10);
	EXPECT_UNSUPPORTED(0xf3, 0x0f, 0xae, 0x10);
	EXPECT_UNSUPPORTED(0xf3, 0x0f, 0xae, 0xd0); /* wrfsbase %eax */
	EXPECT_UNSUPPORTED(0xf3, 0x0f, 0x01, 0xca); /* eretu */
	EXPECT_UNSUPPORTED(0xf2, 0x0f, 0x01, 0xca); /* erets */
	EXPECT_UNSUPPORTED(0x66, 0x0f, 0x01, 0xcb);
	/* 32-bit addressing and lock are not handled */
	EXPECT_UNSUPPORTED(0x67, 0x0f, 0xae, 0x10);
	EXPECT_UNSUPPORTED(0xf0, 0x0f, 0xae, 0x10);
	/* REX on its own, segment prefix on its own */
	EXPECT_UNSUPPORTED(0x41);
	EXPECT_UNSUPPORTED(0x65);
}

Test(insn, empty_input)
{
	struct x86_insn insn;

	cr_assert_eq(x86_insn_decode(NULL, 0, &env, &insn),
		     X86_INSN_UNSUPPORTED);
	cr_assert_eq(insn.len, 0);
}

/* Every proper prefix of a valid encoding is truncated input. */
Test(insn, truncated_input)
{
	static const struct {
		uint8_t bytes[X86_INSN_MAX_LEN];
		size_t len;
		enum x86_insn_kind kind;
	} cases[] = {
		{ { 0x0f, 0xae, 0x55, 0xfc }, 4, X86_INSN_LDMXCSR },
		{ { 0x41, 0x0f, 0xae, 0x5c, 0x24, 0x08 }, 6, X86_INSN_STMXCSR },
		{ { 0x0f, 0xae, 0x15, 0x10, 0x00, 0x00, 0x00 },
		  7,
		  X86_INSN_LDMXCSR },
		{ { 0x65, 0x0f, 0xae, 0x14, 0x25, 0x00, 0x10, 0x00, 0x00 },
		  9,
		  X86_INSN_LDMXCSR },
		{ { 0x0f, 0xae, 0x93, 0x00, 0x01, 0x00, 0x00 },
		  7,
		  X86_INSN_LDMXCSR },
		{ { 0x0f, 0x01, 0xca }, 3, X86_INSN_CLAC },
		{ { 0x0f, 0x01, 0xcb }, 3, X86_INSN_STAC },
		{ { 0x3e, 0xcc }, 2, X86_INSN_INT3 },
	};

	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct x86_insn insn;

		for (size_t n = 0; n < cases[c].len; n++) {
			cr_assert_eq(decode(cases[c].bytes, n, &insn),
				     X86_INSN_UNSUPPORTED,
				     "case %zu cut to %zu bytes decoded", c, n);
			cr_assert_eq(insn.len, 0);
		}
		cr_assert_eq(decode(cases[c].bytes, cases[c].len, &insn),
			     cases[c].kind, "case %zu in full", c);
		cr_assert_eq(insn.len, cases[c].len);
	}
}

Test(insn, names)
{
	cr_assert_str_eq(x86_insn_name(X86_INSN_INT3), "int3");
	cr_assert_str_eq(x86_insn_name(X86_INSN_FWAIT), "fwait");
	cr_assert_str_eq(x86_insn_name(X86_INSN_LDMXCSR), "ldmxcsr");
	cr_assert_str_eq(x86_insn_name(X86_INSN_STMXCSR), "stmxcsr");
	cr_assert_str_eq(x86_insn_name(X86_INSN_CLAC), "clac");
	cr_assert_str_eq(x86_insn_name(X86_INSN_STAC), "stac");
	cr_assert_str_eq(x86_insn_name(X86_INSN_UNSUPPORTED), "unsupported");
}
