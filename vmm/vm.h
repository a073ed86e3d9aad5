/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vm.h - one virtual machine: KVM objects, guest memory, devices, vCPU
 * threads, and how it stops.
 *
 * Life cycle: vm_init() readies the structure; vm_boot() or vm_restore()
 * builds the machine (which of them, and the control socket beside it, is
 * the builder's choice: builder.h); vm_run() starts one thread per vCPU
 * (plus the vsock and network devices' threads and the builder's companion
 * thread, when there are) and blocks until the VM stops; vm_destroy()
 * releases everything.  A build loads and validates files before /dev/kvm
 * is opened, and registers guest memory before the irqchip because PVM
 * hosts make the other order 15x slower.  Each of vm_run()'s threads loads
 * its seccomp filter before its work, the main thread last, and no vCPU
 * enters KVM_RUN before every filter is in place (seccomp_filters.h).
 *
 * Stopping: whoever decides the VM is done (a vCPU thread on a guest reset,
 * triple fault or fatal exit, the main thread on SIGINT/SIGTERM or when all
 * vCPUs are parked, the control socket's "stop") calls vm_stop() once with a
 * status and a reason; the first call wins.  vCPU threads are kicked out of
 * KVM_RUN with a signal and immediate_exit, so no thread can sleep in the
 * kernel past a stop.
 *
 * Snapshots (vm_snapshot.c): vm_snapshot() pauses every vCPU outside
 * KVM_RUN (the same kick as a stop; a vCPU parks only after a KVM_RUN that
 * returned EINTR, which first completes the I/O of the previous exit, so its
 * state is whole) and the device threads, and saves KVM's, the devices' and
 * guest memory's state into a directory; vm_restore() builds the machine
 * from such a directory instead of booting, and the vCPUs continue where
 * the snapshot stopped them.  The VMM never opens the
 * catalog: it is told which directory to write or read.
 *
 * A guest that powers off or halts without ACPI ends with every CPU in HLT
 * with interrupts disabled, which KVM's in-kernel irqchip never reports.
 * The main thread therefore looks at each vCPU a few times a second and
 * treats "all vCPUs parked for two samples in a row" as the guest having
 * stopped itself.  A look reads KVM's statistics (vcpu_stats.h), which
 * leaves the vCPU alone; only a vCPU still in the wait (a halt) it was in
 * at the last look is sampled (kicked out of KVM_RUN for its state), and
 * one halted with interrupts on is sampled less and less often while the
 * halt lasts (up to 8 s apart), so idle clones cost next to nothing.
 * Without usable statistics every vCPU is sampled at every look.
 */
#ifndef THAW_VMM_VM_H
#define THAW_VMM_VM_H

#include <linux/kvm.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "vmm/bus.h"
#include "common/clock.h"
#include "vmm/console.h"
#include "vmm/devices/i8042.h"
#include "vmm/devices/rtc.h"
#include "vmm/devices/serial.h"
#include "vmm/devices/virtio_net.h"
#include "vmm/devices/vsock.h"
#include "vmm/memory.h"
#include "vmm/vcpu_stats.h"
#include "vmm/x86/boot.h"

#define VM_MAX_VCPUS 8
#define VM_DEFAULT_MEM_MIB 256

enum pvm_mode { PVM_AUTO, PVM_ON, PVM_OFF };

/* How a restored clone gets its memory pages. */
enum page_in_mode {
	PAGE_IN_PREFETCH, /* the recorded working set first, if there is one */
	PAGE_IN_LAZY,	  /* each page when the guest first touches it */
};

/* "prefetch" or "lazy" into @mode: 0, or -1 for any other word. */
int page_in_mode_parse(const char *word, enum page_in_mode *mode);

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
	const char *net_tap;	  /* the TAP of a virtio-net device, or NULL */
	const char *control_path; /* control.h's socket, or NULL */
	int console_fd;		  /* guest console copy, -1 for none */
	int console_log_fd;	  /* -1 for none */
	uint64_t log_max;	  /* the console log's bound (capfile.h) */
	const char *restore_dir;  /* restore this snapshot instead of booting */
	enum page_in_mode page_in;
	/* Opened before a jail (jail.h) hid what they name; -1: not yet,
	 * the build opens vsock_path, control_path and net_tap itself
	 * and recording a working set opens /proc/self/pagemap. */
	int vsock_fd, control_fd, pagemap_fd, net_tap_fd;
	const char *writable_dir; /* the jail's JAIL_OUT_DIR, host path */
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
	/* The main thread's: without stats (fd -1) it samples every time. */
	struct vcpu_stats stats;
	struct vcpu_watch watch;
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
	struct vsock vsock;
	struct net_dev net;
	uint32_t devices_created; /* vm_devices.c: bit i, table entry i */
	/*
	 * A thread beside the machine's own that vm_run() starts with them,
	 * so that it loads its seccomp filter under the same barrier (the
	 * builder's control socket); start NULL: none.  Its owner stops it
	 * before vm_destroy().
	 */
	struct {
		const char *name; /* for the message when it cannot start */
		int (*start)(void *arg); /* 0 when its thread runs */
		void *arg;
	} companion;

	/* Pausing (vm_pause): guarded by pause_lock. */
	pthread_mutex_t pause_lock;
	pthread_cond_t pause_cond;
	atomic_bool pause_requested;
	int paused_vcpus;
	bool paused;
	atomic_bool vcpus_started; /* every vCPU thread is running */
	/* Every thread's seccomp filter is loaded: vCPUs may enter KVM_RUN. */
	bool vcpus_may_run;

	pthread_t main_thread;
	bool main_thread_known;
	pthread_mutex_t stop_lock;
	atomic_bool stopping;
	int status;
	char reason[512];

	uint64_t created_ns; /* process start, for "vmm setup" */
	uint64_t running_ns; /* first vCPU entered the guest */
	/* Restored clones: setup ends where state restore starts. */
	uint64_t restore_start_ns;
	uint64_t restored_ns;
	uint64_t prefetch_ns; /* duration, inside setup */
	uint64_t prefetched_pages;

	int pagemap_fd;		  /* cfg's, or -1 */
	const char *writable_dir; /* cfg's: snapshots only go there */

	/*
	 * What guest memory derives from (vm_checkpoint()): a restored or
	 * checkpointed VM's is a snapshot's memory mapped MAP_PRIVATE, whose
	 * root and diff layers (memdiff.h) these are; a booted VM's is
	 * anonymous (memory_from_file false).
	 */
	bool memory_from_file;
	uint64_t memory_root;
	unsigned memory_depth;
};

/*
 * Readies @vm for vm_boot() or vm_restore() with @cfg's shape; @start_ns
 * is when the VMM started (timings count its setup from there).
 */
void vm_init(struct vm *vm, const struct vm_config *cfg, uint64_t start_ns);

/*
 * Builds a fresh machine: guest memory with @cfg's kernel, initrd and
 * command line loaded into it, the KVM VM, its devices and vCPUs at the
 * kernel's entry.  Returns 0, or -1 after one error line (log.h); on
 * error, vm_destroy() still cleans up what was made.
 */
int vm_boot(struct vm *vm, const struct vm_config *cfg);

/*
 * Builds the machine the snapshot cfg->restore_dir describes
 * (vm_snapshot.c): its memory, vCPUs, irqchip and devices in their saved
 * state.  Returns and cleans up as vm_boot().
 */
int vm_restore(struct vm *vm, const struct vm_config *cfg);

/*
 * Where a restored machine's setup went, in microseconds (control.h's
 * status and vmm_report.h's ready record both say it): from the VMM's
 * start (started_at_us, CLOCK_MONOTONIC) to its state restore (setup_us),
 * prefetch_us of them prefetching prefetched_pages pages, then loading the
 * state (restore_us).  False, @t untouched, for a booted machine.
 */
struct vm_restore_times {
	uint64_t started_at_us, setup_us, restore_us, prefetched_pages,
		prefetch_us;
};
bool vm_restore_times(const struct vm *vm, struct vm_restore_times *t);

/* Runs until the VM stops; returns its enum vm_status. */
int vm_run(struct vm *vm);

/*
 * Stops every vCPU outside KVM_RUN and the device threads' access to guest
 * memory.  Returns 0 (also when already paused), or -1 after a message when
 * the VM is not running or is stopping.
 */
int vm_pause(struct vm *vm);
void vm_resume(struct vm *vm);

/*
 * Writes state.bin, memory.img and pages.xxh3 into the existing directory
 * @dir, all fsynced, pausing the VM meanwhile (it stays paused if it was).
 * Returns 0, or -1 after a message.
 */
int vm_snapshot(struct vm *vm, const char *dir);

/*
 * The files a checkpoint writes, created empty by its supervisor and passed
 * over the control socket: the VMM writes through them and needs no path.
 */
struct vm_checkpoint_files {
	int state_fd;	 /* state.bin */
	int diff_fd;	 /* memory.diff, for a diff */
	int memory_fd;	 /* memory.img and */
	int hashes_fd;	 /* pages.xxh3, for a full checkpoint */
	const char *dir; /* where they are, for messages */
};

struct vm_checkpoint_result {
	uint64_t dirty_pages; /* pages written: the diff's, or all */
	bool full;	      /* memory.img, not memory.diff */
	unsigned depth;	      /* diff layers under the new state: 0 full */
	uint64_t pause_ns, total_ns;
};

/*
 * Writes a checkpoint into @files, pausing the VM (it stays paused if it
 * was): the pages the guest wrote since its memory's snapshot as a
 * memory.diff over it, or (a booted VM, a chain MEMDIFF_MAX_DEPTH deep,
 * writes too many or too scattered for a diff) all of memory as memory.img
 * and pages.xxh3; then state.bin.  Before resuming, the pages written are
 * mapped from the new file in place of the guest's copies (the same bytes),
 * so its memory derives from the checkpoint and the next one writes only
 * what changed since.  The files are fsynced after the guest resumed.
 * 0, or -1 after a message.
 */
int vm_checkpoint(struct vm *vm, const struct vm_checkpoint_files *files,
		  struct vm_checkpoint_result *out);

/* Records which memory pages the guest has touched (workingset.h). */
int vm_record_working_set(struct vm *vm, const char *path, uint64_t *pages);

void vm_stop(struct vm *vm, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

void vm_destroy(struct vm *vm);

#endif
