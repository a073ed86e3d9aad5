/*
 * entry.S - the PVM gate guest's machine-level parts: where thaw-vmm
 * enters it, the interrupt and exception stubs its IDT points at, the
 * system call entry, the user-mode program, and the ELF note that tells
 * thaw-vmm this image is a PVM guest.  Everything with a choice in it is in
 * guest.c; this file only moves registers between the CPU and C.
 */
#include "tests/integration/pvm_guest/pvm_guest.h"

	.section .note.thaw, "a"
	.balign 4
	.long 5				/* name size: "thaw" and its NUL */
	.long 4				/* descriptor size */
	.long THAW_NOTE_PVM_GUEST	/* type */
	.asciz "thaw"
	.balign 4
	.long THAW_PVM_GUEST_ABI	/* descriptor: the guest ABI it speaks */

	.section .text.entry, "ax"
	.globl _start
_start:
	/* thaw-vmm's 64-bit boot state: identity paging, a boot stack in
	 * the first MiB, %rsi at boot_params (for the command line). */
	lea kernel_stack_top(%rip), %rsp
	mov %rsi, %rdi
	call kernel_main
	/* kernel_main() never returns; if it did, stop the VM. */
	jmp guest_stop

/*
 * One 16-byte stub per vector: the CPU (or the hypervisor, in PVM mode)
 * pushes an error code for some exceptions only, so the others push a 0
 * to give trap() one frame layout.
 */
	.text
	.balign 16
	.globl trap_stubs
trap_stubs:
	.set vector, 0
	.rept 256
	.balign 16
	.if vector == 8 || (vector >= 10 && vector <= 14) || vector == 17 || vector == 21 || vector == 29 || vector == 30
	.else
	pushq $0
	.endif
	pushq $vector
	jmp trap_common
	.set vector, vector + 1
	.endr

trap_common:
	push %rax
	push %rcx
	push %rdx
	push %rbx
	push %rbp
	push %rsi
	push %rdi
	push %r8
	push %r9
	push %r10
	push %r11
	push %r12
	push %r13
	push %r14
	push %r15
	mov %rsp, %rdi
	call trap
	pop %r15
	pop %r14
	pop %r13
	pop %r12
	pop %r11
	pop %r10
	pop %r9
	pop %r8
	pop %rdi
	pop %rsi
	pop %rbp
	pop %rbx
	pop %rdx
	pop %rcx
	pop %rax
	add $16, %rsp			/* vector and error code */
	iretq

/*
 * MSR_LSTAR.  SYSCALL leaves %rsp on the user stack, so the entry moves to
 * the kernel stack first; %rcx and %r11 hold the user RIP and RFLAGS that
 * SYSRET returns to.
 */
	.globl syscall_entry
syscall_entry:
	mov %rsp, syscall_user_rsp(%rip)
	lea kernel_stack_top(%rip), %rsp
	push %rcx
	push %r11
	mov %rsi, %rdx			/* syscall(nr, arg0, arg1) */
	mov %rdi, %rsi
	mov %rax, %rdi
	call syscall_dispatch
	pop %r11
	pop %rcx
	mov syscall_user_rsp(%rip), %rsp
	cmpb $0, direct_switch(%rip)
	jne 1f
	sysretq
1:	int $PVM_ERETU_VECTOR		/* the host's direct return (guest.c) */

	.globl enter_user
enter_user:				/* enter_user(rip, rsp) */
	pushq $GUEST_USER_DS
	push %rsi
	pushq $GUEST_USER_RFLAGS
	pushq $GUEST_USER_CS
	push %rdi
	iretq

/*
 * The user program: a system call, a read of a page nothing maps yet (the
 * kernel maps it on the fault and the read is retried), a second system
 * call with what it read, then GUEST_DIRECT_CALLS null calls and one to
 * say they are done.  It never returns.
 */
	.globl user_program
user_program:
	mov $GUEST_SYSCALL_HELLO, %eax
	mov $GUEST_USER_MAGIC, %edi
	mov %rsp, %rsi
	syscall
	mov $GUEST_FAULT_ADDR, %rbx
	mov (%rbx), %rdi
	mov $GUEST_SYSCALL_REPORT, %eax
	mov %rbx, %rsi
	syscall
	/* The kernel switched to the host's direct switch meanwhile. */
	mov $GUEST_DIRECT_CALLS, %r12d
2:	mov $GUEST_SYSCALL_NULL, %eax
	syscall
	dec %r12d
	jnz 2b
	mov $GUEST_SYSCALL_DIRECT_DONE, %eax
	syscall
1:	jmp 1b

	.globl guest_stop
guest_stop:
	mov $0xfe, %al			/* i8042: pulse the reset line */
	out %al, $0x64
2:	hlt
	jmp 2b

	.bss
	.balign 16
	.space 16384
	.globl kernel_stack_top
kernel_stack_top:
	.balign 8
syscall_user_rsp:
	.quad 0
	.section .note.GNU-stack, "", @progbits
