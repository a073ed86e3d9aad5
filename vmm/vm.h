/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vm.h - one virtual machine: KVM objects, guest memory, devices, vCPU
 * threads, and how it stops.
 *
 * Life cycle: vm_create() does all setup (files are loaded and validated
 * before /dev/kvm is opened, guest memory is registered before the irqchip
 * because PVM hosts make the other order 15x slower); vm_run() starts one
 * thread per vCPU (plus the vsock device's and the control socket's threads
 * when configured) and blocks until the VM stops; vm_destroy() releases
 * everything.
 *
 * Stopping: whoever decides the VM is done (a vCPU thread on a guest reset,
 * triple fault or fatal exit, the main thread on SIGINT/SIGTERM or when all
 * vCPUs are parked, the control socket's "stop") calls vm_stop() once with a status and a reason; the
 * first call wins.  vCPU threads are kicked out of KVM_RUN with a signal and
 * immediate_exit, so no thread can sleep in the kernel past a stop.
 *
 * A guest that powers off or halts without ACPI ends with every CPU in HLT
 * with interrupts disabled, which KVM's in-kernel irqchip never reports.
 * The main thread therefore samples each vCPU's state a few times a second
 * (a kick is a few microseconds) and treats "all vCPUs parked for two
 * samples in a row" as the guest having stopped itself.
 */
#ifndef THAW_VMM_VM_H
#define THAW_VMM_VM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "bus.h"
#include "console.h"
#include "control.h"
#include "devices/i8042.h"
#include "devices/rtc.h"
#include "devices/serial.h"
#include "devices/vsock.h"
#include "memory.h"
#include "x86/boot.h"

#define VM_MAX_VCPUS 8
#define VM_DEFAULT_MEM_MIB 256

enum pvm_mode { PVM_AUTO, PVM_ON, PVM_OFF };

/* Exit statuses of vm_run() and of thaw-vmm. */
enum vm_status {
	VM_GUEST_STOPPED = 0, /* the guest rebooted, powered off or halted */
	VM_ERROR = 1,	      /* setup failed, or KVM/VMM could not go on */
	VM_USAGE = 2,	      /* bad command line */
	VM_GUEST_CRASHED = 3, /* kernel panic or triple fault */
	VM_INTERRUPTED = 4,   /* SIGINT/SIGTERM/SIGHUP */
};

struct vm_config {
	const char *kernel_path;
	const char *initrd_path;   /* may be NULL */
	const char *cmdline_extra; /* may be NULL */
	uint64_t mem_mib;
	int nr_vcpus;
	enum pvm_mode pvm;
	const char *vsock_path;	  /* host side of the agent channel, or NULL */
	const char *control_path; /* control.h's socket, or NULL */
	int console_fd;		  /* guest console copy, -1 for none */
	int console_log_fd;
};

struct vcpu {
	struct vm *vm;
	int id;
	int fd;
	struct kvm_run *run;
	size_t run_size;
	pthread_t thread;
	bool started;
	atomic_bool inspect; /* main thread asks for a parked check */
	atomic_bool parked;  /* halted with interrupts off / never started */
};

struct vm {
	int kvm_fd;
	int vm_fd;
	bool pvm;
	struct guest_memory mem;
	struct x86_boot boot;
	struct vcpu vcpus[VM_MAX_VCPUS];
	int nr_vcpus;
	struct bus pio;
	struct bus mmio;
	struct console console;
	struct serial serial;
	struct i8042 i8042;
	struct rtc rtc;
	bool devices_ready; /* all three initialised: destroy them */
	struct vsock vsock;
	bool vsock_ready;
	struct control control;
	bool control_ready;

	pthread_t main_thread;
	pthread_mutex_t stop_lock;
	atomic_bool stopping;
	int status;
	char reason[512];

	uint64_t created_ns; /* process start, for "vmm setup" */
	uint64_t running_ns; /* first vCPU entered the guest */
};

/*
 * Builds the VM.  @start_ns is when the caller started (timings count VMM
 * setup from there).  Returns 0, or -1 after one error line on stderr; on
 * error, vm_destroy() still cleans up what was made.
 */
int vm_create(struct vm *vm, const struct vm_config *cfg, uint64_t start_ns);

/* Runs until the VM stops; returns its enum vm_status. */
int vm_run(struct vm *vm);

void vm_stop(struct vm *vm, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

void vm_destroy(struct vm *vm);

#endif
