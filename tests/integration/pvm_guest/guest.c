// SPDX-License-Identifier: Apache-2.0
/*
 * guest.c - the PVM gate's test guest: a few hundred lines of kernel, not
 * Linux, that proves a guest thaw-vmm starts in PVM mode really runs on
 * this host's native path and gets each kind of event a kernel depends on.
 *
 * It prints one "PVM: " line per step over the UART and stops the VM
 * through the i8042 reset port, which thaw-vmm treats as the guest's stop.
 * A step that does not happen prints nothing (or "PVM: FAIL ..."), so
 * test_pvm_gate.c, which reads the lines, can say which step is missing:
 *
 *   supervisor  thaw-vmm started the guest in native mode (pvm_mode.h),
 *               seen from inside: its first "mov %cs" reads the host's
 *               user selector, and the native-page MSR names thaw-vmm's
 *               page
 *   timer       a LAPIC timer interrupt taken in supervisor mode
 *   pending     a timer interrupt due while the page's flag is off waits,
 *               marked pending in the page, and comes at the doorbell
 *   hypercall   "int $0x1b" reaches the host: FLUSH_TLB returns 0, WRMSR
 *               of MSR_LSTAR reads back, an unknown number is -ENOSYS
 *   user        IRETQ to user mode, proven by the user program's first
 *               system call arriving with its magic and stack
 *   syscall 42  that SYSCALL, delivered at MSR_LSTAR
 *   page fault  a user read of an unmapped page: #PF with CR2 and a user
 *               error code; the kernel maps the page, the read is retried
 *               and the user program reports what it read (syscall 43);
 *               the page's CR2 cell, switched on before, holds the same
 *               address as CR2
 *   direct switch  the host's direct switch on (PTI's pair of top-level
 *               tables and the MSR's bits), GUEST_DIRECT_CALLS null system
 *               calls return through "int $0x19"; the fastest round trip
 *               must be well under one VM exit (DIRECT_MAX_CYCLES); then
 *               the guest switches back
 *   tick        (with GUEST_IDLE_WORD only) the kernel idles on a periodic
 *               timer and says on each tick whether it still runs natively:
 *               across a snapshot and restore, it must
 *
 * Freestanding: no libc, no red zone (interrupts push onto the kernel
 * stack), general registers only (no FPU state to save in the traps).
 */
#include <stdbool.h>
#include <stdint.h>

#include "tests/integration/pvm_guest/pvm_guest.h"

#define SERIAL_PORT 0x3f8

#define MSR_EFER 0xc0000080
#define EFER_SCE 0x1
#define MSR_STAR 0xc0000081
#define MSR_LSTAR 0xc0000082
#define MSR_FMASK 0xc0000084
#define RFLAGS_IF 0x200

#define MSR_APIC_BASE 0x1b
#define APIC_BASE_ENABLE (1ULL << 11)
#define APIC_BASE_X2APIC (1ULL << 10)
#define X2APIC_EOI 0x80b
#define X2APIC_SVR 0x80f
#define X2APIC_LVT_TIMER 0x832
#define X2APIC_TIMER_INITIAL 0x838
#define X2APIC_TIMER_DIVIDE 0x83e
#define APIC_SVR_ENABLE 0x100
#define APIC_SPURIOUS_VECTOR 0xff
#define APIC_DIVIDE_BY_1 0xb
#define TIMER_VECTOR 0x20
#define TIMER_TICKS 1000000
#define TIMER_PERIODIC (1U << 17)
/*
 * 1 s at KVM's 1 GHz APIC clock: each halt outlasts the looks after which
 * thaw-vmm takes a vCPU halted with interrupts off for stopped (vm.h), so a
 * VMM that misread a native guest's flag stops it (3 of 3 runs; 0.6 s was
 * not enough every time).
 */
#define IDLE_TIMER_TICKS 1000000000

/* boot_params.hdr.cmd_line_ptr (Documentation/arch/x86/zero-page.rst). */
#define BOOT_PARAMS_CMDLINE_PTR 0x228

/* What the host's hypercall handler returns for a number it lacks. */
#define HC_ENOSYS 38
#define HC_UNKNOWN 0x10ff
/* The host's TSC frequency in kHz (PVM.md section 3). */
#define PVM_MSR_TSC_KHZ 0x4b564d13
/* How long the pending step waits for the host to mark the timer. */
#define PENDING_WAIT_MS 200
/* A VM exit costs 33,000 cycles or more here; a direct round trip 750-2,200. */
#define DIRECT_MAX_CYCLES 20000

#define VECTOR_PF 14
#define PF_ERROR_USER 0x4

#define PTE_PRESENT 0x1
#define PTE_WRITE 0x2
#define PTE_USER 0x4
#define PTE_LARGE 0x80
/* Native mode needs the user bit everywhere (pvm_abi.h). */
#define PTE_NATIVE (PTE_PRESENT | PTE_WRITE | PTE_USER)

#define PAGE_SIZE 4096
#define LARGE_PAGE_SIZE 0x200000ULL

/* What trap_common in entry.S pushes, lowest address first. */
struct trap_frame {
	uint64_t r15, r14, r13, r12, r11, r10, r9, r8;
	uint64_t rdi, rsi, rbp, rbx, rdx, rcx, rax;
	uint64_t vector, error;
	uint64_t rip, cs, rflags, rsp, ss;
};

struct idt_gate {
	uint16_t offset_low, selector;
	uint8_t ist, type;
	uint16_t offset_mid;
	uint32_t offset_high, reserved;
};

struct tss {
	uint32_t reserved0;
	uint64_t rsp0, rsp1, rsp2;
	uint64_t reserved1, ist[7], reserved2;
	uint16_t reserved3, iomap_base;
} __attribute__((packed));

struct table_register {
	uint16_t limit;
	uint64_t base;
} __attribute__((packed));

extern char trap_stubs[], kernel_stack_top[];
extern void syscall_entry(void), user_program(void);
extern void enter_user(uint64_t rip, uint64_t rsp) __attribute__((noreturn));
extern void guest_stop(void) __attribute__((noreturn));
void kernel_main(const uint8_t *boot_params) __attribute__((noreturn));
void trap(struct trap_frame *f);
uint64_t syscall_dispatch(uint64_t nr, uint64_t arg0, uint64_t arg1);

/* Two top-level tables, as PTI's pair (kernel, user 0x1000 above it), for
 * the direct switch; both map the same. */
static uint64_t pml4s[2][512] __attribute__((aligned(2 * PAGE_SIZE)));
static uint64_t *const pml4 = pml4s[0];
static uint64_t pdpt[512] __attribute__((aligned(PAGE_SIZE)));
static uint64_t pd_low[512] __attribute__((aligned(PAGE_SIZE)));
static uint64_t pd_fault[512] __attribute__((aligned(PAGE_SIZE)));
static uint64_t pt_fault[512] __attribute__((aligned(PAGE_SIZE)));
static uint64_t fault_page[512] __attribute__((aligned(PAGE_SIZE)));
/* Byte PVM_NATIVE_PAGE_IF is the interrupt flag (pvm_abi.h). */
static uint8_t *native_page;
static uint8_t user_stack[PAGE_SIZE] __attribute__((aligned(16)));
static struct idt_gate idt[256] __attribute__((aligned(16)));
static struct tss tss __attribute__((aligned(16)));
static uint64_t gdt[10] __attribute__((aligned(16))) = {
	[GUEST_KERNEL_CS / 8] = 0x00af9b000000ffffULL,
	[GUEST_KERNEL_DS / 8] = 0x00cf93000000ffffULL,
	[GUEST_USER32_CS / 8] = 0x00cffb000000ffffULL,
	[GUEST_USER_DS / 8] = 0x00cff3000000ffffULL,
	[GUEST_USER_CS / 8] = 0x00affb000000ffffULL,
	/* [GUEST_TSS_SEL / 8], two slots: filled in by load_tables() */
};

/* Read by syscall_entry: return through the host's direct switch. */
volatile uint8_t direct_switch;
static uint64_t direct_last, direct_best = ~0ULL;
static volatile unsigned timer_ticks;
static volatile bool user_arrived;
static bool idle_after_steps;

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ volatile("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
	__asm__ volatile("wrmsr"
			 :
			 : "c"(msr), "a"((uint32_t)v),
			   "d"((uint32_t)(v >> 32)));
}

static inline uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;

	__asm__ volatile("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return (uint64_t)hi << 32 | lo;
}

static inline uint64_t rdtsc(void)
{
	uint32_t lo, hi;

	__asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
	return (uint64_t)hi << 32 | lo;
}

/* The host's hypercall (pvm_abi.h): number in %rax, arguments in %rbx,
 * %rcx, %rdx, result in %rax. */
static inline uint64_t hypercall(uint64_t nr, uint64_t a0, uint64_t a1,
				 uint64_t a2)
{
	__asm__ volatile("int %[vector]"
			 : "+a"(nr), "+b"(a0), "+c"(a1), "+d"(a2)
			 : [vector] "i"(PVM_HC_VECTOR)
			 : "memory");
	return nr;
}

static inline uint16_t read_cs(void)
{
	uint16_t cs;

	__asm__ volatile("mov %%cs, %0" : "=r"(cs));
	return cs;
}

static inline uint64_t read_cr2(void)
{
	uint64_t v;

	__asm__ volatile("mov %%cr2, %0" : "=r"(v));
	return v;
}

static void puts(const char *s)
{
	for (; *s; s++)
		outb(SERIAL_PORT, (uint8_t)*s);
}

static void put_hex(uint64_t v)
{
	char buf[19] = "0x";
	int n = 2;
	int shift = 60;

	while (shift > 0 && !((v >> shift) & 0xf))
		shift -= 4;
	for (; shift >= 0; shift -= 4)
		buf[n++] = "0123456789abcdef"[(v >> shift) & 0xf];
	buf[n] = 0;
	puts(buf);
}

static void __attribute__((noreturn)) fail(const char *what, uint64_t value)
{
	puts("PVM: FAIL ");
	puts(what);
	puts(" ");
	put_hex(value);
	puts("\n");
	guest_stop();
}

/*
 * The guest's own page tables, in place of thaw-vmm's boot identity map: one
 * tree for both modes, the first GiB identity-mapped with
 * 2 MiB pages (the guest, its stacks, the user program: all of it), the
 * second GiB's first page left out until the fault maps it.
 */
static void build_page_tables(void)
{
	pml4[0] = (uint64_t)pdpt | PTE_NATIVE;
	pdpt[0] = (uint64_t)pd_low | PTE_NATIVE;
	for (uint64_t i = 0; i < 512; i++)
		pd_low[i] = i * LARGE_PAGE_SIZE | PTE_NATIVE | PTE_LARGE;
	pdpt[GUEST_FAULT_ADDR >> 30] = (uint64_t)pd_fault | PTE_NATIVE;
	pd_fault[0] = (uint64_t)pt_fault | PTE_NATIVE;
	__asm__ volatile("mov %0, %%cr3" : : "r"(pml4) : "memory");
}

static void set_gate(int vector, uint64_t handler)
{
	idt[vector] = (struct idt_gate){
		.offset_low = (uint16_t)handler,
		.selector = GUEST_KERNEL_CS,
		.type = 0x8e, /* present, DPL 0, 64-bit interrupt gate */
		.offset_mid = (uint16_t)(handler >> 16),
		.offset_high = (uint32_t)(handler >> 32),
	};
}

static void load_tables(void)
{
	uint64_t base = (uint64_t)&tss;
	struct table_register gdtr = { sizeof(gdt) - 1, (uint64_t)gdt };
	struct table_register idtr = { sizeof(idt) - 1, (uint64_t)idt };

	tss.rsp0 = (uint64_t)kernel_stack_top;
	tss.iomap_base = sizeof(tss);
	/* A 64-bit available TSS descriptor: 16 bytes, two GDT slots. */
	gdt[GUEST_TSS_SEL / 8] = (sizeof(tss) - 1) | (base & 0xffffff) << 16 |
				 0x89ULL << 40 | ((base >> 24) & 0xff) << 56;
	gdt[GUEST_TSS_SEL / 8 + 1] = base >> 32;
	for (int v = 0; v < 256; v++)
		set_gate(v, (uint64_t)trap_stubs + 16 * v);
	__asm__ volatile("lgdt %0" : : "m"(gdtr));
	__asm__ volatile("lidt %0" : : "m"(idtr));
	__asm__ volatile("ltr %w0" : : "r"(GUEST_TSS_SEL));
}

static void check_native_mode(void)
{
	uint16_t cs = read_cs();
	if (cs != GUEST_USER_CS)
		fail("thaw-vmm did not start the guest natively: mov %cs reads",
		     cs);
	native_page = (uint8_t *)(rdmsr(PVM_MSR_NATIVE_PAGE) &
				  ~PVM_NATIVE_PAGE_FLAGS);
	puts("PVM: supervisor (native from the first instruction: mov %cs "
	     "reads ");
	put_hex(cs);
	puts("; native page ");
	put_hex((uint64_t)native_page);
	puts(")\n");
}

static void take_timer_interrupt(void)
{
	wrmsr(MSR_APIC_BASE,
	      rdmsr(MSR_APIC_BASE) | APIC_BASE_ENABLE | APIC_BASE_X2APIC);
	wrmsr(X2APIC_SVR, APIC_SVR_ENABLE | APIC_SPURIOUS_VECTOR);
	wrmsr(X2APIC_TIMER_DIVIDE, APIC_DIVIDE_BY_1);
	wrmsr(X2APIC_LVT_TIMER, TIMER_VECTOR); /* one-shot */
	wrmsr(X2APIC_TIMER_INITIAL, TIMER_TICKS);
	/* Interrupts on for the HLT only: native mode's flag (pvm_abi.h). */
	while (!timer_ticks) {
		native_page[PVM_NATIVE_PAGE_IF] = 1;
		__asm__ volatile("hlt" ::: "memory");
		native_page[PVM_NATIVE_PAGE_IF] = 0;
	}
}

/*
 * The Xen-like pending flag: with the page's flag off a timer interrupt
 * that comes due must wait, the host marking it pending in the page; the
 * guest then sets the flag and rings the doorbell, as the host kernel's
 * own guest side does in its irq_enable, and takes it there.
 */
static void take_pending_interrupt_at_doorbell(void)
{
	volatile uint8_t *page = native_page;
	uint64_t wait = rdmsr(PVM_MSR_TSC_KHZ) * PENDING_WAIT_MS;
	unsigned before = timer_ticks;
	uint64_t start;

	wrmsr(X2APIC_TIMER_INITIAL, TIMER_TICKS / 10);
	start = rdtsc();
	while (!page[PVM_NATIVE_PAGE_PENDING] && rdtsc() - start < wait)
		;
	if (timer_ticks != before)
		fail("an interrupt arrived with the page's flag off: ticks",
		     timer_ticks - before);
	if (!page[PVM_NATIVE_PAGE_PENDING])
		fail("the host never marked the timer pending, in ms",
		     PENDING_WAIT_MS);
	page[PVM_NATIVE_PAGE_IF] = 1;
	outb(PVM_DOORBELL_PORT, 0);
	page[PVM_NATIVE_PAGE_IF] = 0;
	if (timer_ticks != before + 1)
		fail("the doorbell did not deliver the pending timer: ticks",
		     timer_ticks - before);
	puts("PVM: pending interrupt not taken with the flag off, taken at "
	     "the doorbell\n");
}

static void setup_syscall(void)
{
	wrmsr(MSR_EFER, rdmsr(MSR_EFER) | EFER_SCE);
	wrmsr(MSR_STAR, (uint64_t)GUEST_USER32_CS << 48 |
				(uint64_t)GUEST_KERNEL_CS << 32);
	wrmsr(MSR_LSTAR, (uint64_t)syscall_entry);
	wrmsr(MSR_FMASK, RFLAGS_IF);
}

/*
 * Hypercalls: one that only succeeds, one whose effect is visible (the
 * WRMSR of MSR_LSTAR, set back to the system call entry), one the host
 * does not have.  An "int $0x1b" the host did not take would reach the
 * guest's own IDT, where trap() fails on it.
 */
static void make_hypercalls(void)
{
	uint64_t r = hypercall(PVM_HC_FLUSH_TLB, 0, 0, 0);

	if (r)
		fail("hypercall FLUSH_TLB returned", r);
	r = hypercall(PVM_HC_WRMSR, MSR_LSTAR, (uint64_t)user_program, 0);
	if (r || rdmsr(MSR_LSTAR) != (uint64_t)user_program)
		fail("hypercall WRMSR of MSR_LSTAR: LSTAR reads",
		     rdmsr(MSR_LSTAR));
	r = hypercall(PVM_HC_WRMSR, MSR_LSTAR, (uint64_t)syscall_entry, 0);
	if (r || rdmsr(MSR_LSTAR) != (uint64_t)syscall_entry)
		fail("hypercall WRMSR back: LSTAR reads", rdmsr(MSR_LSTAR));
	r = hypercall(HC_UNKNOWN, 0, 0, 0);
	if (r != (uint64_t)-HC_ENOSYS)
		fail("hypercall of an unknown number returned", r);
	puts("PVM: hypercall FLUSH_TLB ok, WRMSR ok, unknown number "
	     "-ENOSYS\n");
}

/* From here on the host writes each #PF's address to the page's cell. */
static void switch_on_cr2_cell(void)
{
	uint64_t v = (uint64_t)native_page | PVM_NATIVE_PAGE_CR2_CELL;

	wrmsr(PVM_MSR_NATIVE_PAGE, v);
	if (rdmsr(PVM_MSR_NATIVE_PAGE) != v || read_cs() != GUEST_USER_CS)
		fail("the native-page MSR with the CR2 cell reads",
		     rdmsr(PVM_MSR_NATIVE_PAGE));
}

/* Whether the command line thaw-vmm wrote has @word (as a whole word). */
static bool cmdline_has(const uint8_t *boot_params, const char *word)
{
	uint32_t ptr;

	__builtin_memcpy(&ptr, boot_params + BOOT_PARAMS_CMDLINE_PTR,
			 sizeof(ptr));
	for (const char *c = (const char *)(uint64_t)ptr; *c; c++) {
		if (c != (const char *)(uint64_t)ptr && c[-1] != ' ')
			continue;
		int n = 0;
		while (word[n] && c[n] == word[n])
			n++;
		if (!word[n] && (c[n] == ' ' || !c[n]))
			return true;
	}
	return false;
}

void kernel_main(const uint8_t *boot_params)
{
	idle_after_steps = cmdline_has(boot_params, GUEST_IDLE_WORD);
	puts("PVM: guest started\n");
	/* On thaw-vmm's boot page tables, which it opened to native mode. */
	check_native_mode();
	build_page_tables();
	load_tables();
	setup_syscall();
	take_timer_interrupt();
	take_pending_interrupt_at_doorbell();
	make_hypercalls();
	switch_on_cr2_cell();
	puts("PVM: entering user mode\n");
	enter_user((uint64_t)user_program,
		   (uint64_t)user_stack + sizeof(user_stack));
}

static void timer_interrupt(const struct trap_frame *f)
{
	timer_ticks++;
	wrmsr(X2APIC_EOI, 0);
	if (timer_ticks > 1)
		return; /* idle ticks: idle() reports them */
	puts("PVM: timer (vector ");
	put_hex(f->vector);
	puts(", interrupted cs ");
	put_hex(f->cs);
	puts(")\n");
}

/* Maps the page the user program reads and lets the read run again. */
static void user_page_fault(const struct trap_frame *f)
{
	uint64_t cell =
		*(volatile uint64_t *)(native_page + PVM_NATIVE_PAGE_CR2);
	uint64_t cr2 = read_cr2();

	puts("PVM: page fault at ");
	put_hex(cr2);
	puts(" error ");
	put_hex(f->error);
	puts(" from user rip ");
	put_hex(f->rip);
	puts("\n");
	if (cr2 != GUEST_FAULT_ADDR || !(f->error & PF_ERROR_USER))
		fail("unexpected page fault at", cr2);
	if (cell != cr2)
		fail("the page's CR2 cell does not hold CR2 but", cell);
	puts("PVM: cr2 cell ");
	put_hex(cell);
	puts("\n");
	fault_page[0] = GUEST_FAULT_PATTERN;
	pt_fault[0] = (uint64_t)fault_page | PTE_NATIVE;
	__asm__ volatile("invlpg (%0)" : : "r"(cr2) : "memory");
}

void trap(struct trap_frame *f)
{
	if (f->vector == TIMER_VECTOR)
		timer_interrupt(f);
	else if (f->vector == VECTOR_PF && user_arrived)
		user_page_fault(f);
	else
		fail("unexpected event: vector, rip, error follow",
		     f->vector << 56 | (f->rip & 0xffffffffffULL) << 8 |
			     (f->error & 0xff));
}

static void set_native_page_bits(uint64_t bits)
{
	uint64_t v = (uint64_t)native_page | bits;

	wrmsr(PVM_MSR_NATIVE_PAGE, v);
	if (rdmsr(PVM_MSR_NATIVE_PAGE) != v)
		fail("the native-page MSR reads", rdmsr(PVM_MSR_NATIVE_PAGE));
}

/* Called from the REPORT system call: the user program's next calls and
 * their returns go through the host's direct switch. */
static void start_direct_switch(void)
{
	__builtin_memcpy(pml4s[1], pml4s[0], sizeof(pml4s[0]));
	set_native_page_bits(PVM_NATIVE_PAGE_CR2_CELL | PVM_NATIVE_PAGE_DIRECT);
	direct_switch = 1;
}

static void null_call(void)
{
	uint64_t now = rdtsc();

	if (direct_last && now - direct_last < direct_best)
		direct_best = now - direct_last;
	direct_last = now;
}

static void finish_direct_switch(void)
{
	direct_switch = 0;
	set_native_page_bits(PVM_NATIVE_PAGE_CR2_CELL);
	if (direct_best >= DIRECT_MAX_CYCLES)
		fail("the direct switch did not engage: fastest round trip",
		     direct_best);
	puts("PVM: direct switch: a null system call round trip in ");
	put_hex(direct_best);
	puts(" cycles at best\n");
}

/* Ticks GUEST_IDLE_TICKS times, saying each time how it runs, and stops. */
static void __attribute__((noreturn)) idle(void)
{
	puts("PVM: idling\n");
	wrmsr(X2APIC_LVT_TIMER, TIMER_VECTOR | TIMER_PERIODIC);
	wrmsr(X2APIC_TIMER_INITIAL, IDLE_TIMER_TICKS);
	for (unsigned tick = 1; tick <= GUEST_IDLE_TICKS; tick++) {
		unsigned seen = timer_ticks;

		while (timer_ticks == seen) {
			native_page[PVM_NATIVE_PAGE_IF] = 1;
			__asm__ volatile("hlt" ::: "memory");
			native_page[PVM_NATIVE_PAGE_IF] = 0;
		}
		puts("PVM: tick ");
		put_hex(tick);
		puts(", mov %cs reads ");
		put_hex(read_cs());
		puts("\n");
	}
	guest_stop();
}

uint64_t syscall_dispatch(uint64_t nr, uint64_t arg0, uint64_t arg1)
{
	switch (nr) {
	case GUEST_SYSCALL_HELLO:
		if (arg0 != GUEST_USER_MAGIC || arg1 <= (uint64_t)user_stack ||
		    arg1 > (uint64_t)user_stack + sizeof(user_stack))
			fail("first system call without the user's magic",
			     arg0);
		user_arrived = true;
		puts("PVM: user (the user program called with rsp ");
		put_hex(arg1);
		puts(")\nPVM: syscall 42\n");
		return 0;
	case GUEST_SYSCALL_REPORT:
		if (arg0 != GUEST_FAULT_PATTERN)
			fail("the user program read", arg0);
		puts("PVM: user read ");
		put_hex(arg0);
		puts(" at ");
		put_hex(arg1);
		puts(" after the fault\n");
		start_direct_switch();
		return 0;
	case GUEST_SYSCALL_NULL:
		null_call();
		return 0;
	case GUEST_SYSCALL_DIRECT_DONE:
		finish_direct_switch();
		puts("PVM: done\n");
		if (idle_after_steps)
			idle();
		guest_stop();
	}
	fail("unknown system call", nr);
}
