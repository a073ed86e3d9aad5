// SPDX-License-Identifier: Apache-2.0
/*
 * vm.c - the machine: /dev/kvm and the VM's KVM objects, a boot's kernel,
 * command line and first registers, the vCPU threads and their exits,
 * pausing, stopping and teardown (see vm.h for the life cycle).  Snapshots,
 * saving and restoring a machine, are vm_snapshot.c's; the device table is
 * vm_devices.c's; whether to boot or restore, and the control socket, are
 * the builder's (builder.c), which this file does not know.
 */
#include "vmm/vm.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/guest_net.h"
#include "vmm/kvm_ioctl.h"
#include "common/log.h"
#include "vmm/seccomp_filters.h"
#include "vmm/vm_devices.h"
#include "vmm/vm_internal.h"
#include "vmm/x86/cpu.h"
#include "vmm/x86/layout.h"
#include "vmm/x86/mptable.h"
#include "vmm/x86/pvm.h"
#include "vmm/x86/pvm_mode.h"

#define KVM_DEVICE "/dev/kvm"
#define KVM_EXPECTED_API_VERSION 12

/* Signals the main thread waits for; SIGUSR2 means "vm_stop() happened". */
#define SIGNAL_STOP SIGUSR2
/* Kicks a vCPU thread out of KVM_RUN. */
#define SIGNAL_KICK SIGUSR1

/* How often the main thread looks at vCPUs for "every CPU parked". */
#define PARKED_SAMPLE_MS 250
#define PARKED_SAMPLES_TO_STOP 2
/* The longest gap between samples of a halt with interrupts on. */
#define PARKED_SAMPLE_CAP_MS 8000

/*
 * Linux console on the UART; reboot (and panic=-1) through the keyboard
 * controller, which is how the guest ends the VM; no PCI bus to scan; one
 * UART instead of four to probe; skip the PS/2 mouse port and multiplexer
 * probing a stock kernel's i8042 driver would do.
 */
static const char base_cmdline[] =
	"console=ttyS0 reboot=k panic=-1 pci=off nomodule 8250.nr_uarts=1 "
	"i8042.noaux i8042.nomux i8042.nopnp";

static const int required_caps[] = {
	KVM_CAP_IRQCHIP,      KVM_CAP_USER_MEMORY,
	KVM_CAP_SET_TSS_ADDR, KVM_CAP_PIT2,
	KVM_CAP_EXT_CPUID,    KVM_CAP_IMMEDIATE_EXIT,
	KVM_CAP_MP_STATE,     KVM_CAP_SET_IDENTITY_MAP_ADDR,
	KVM_CAP_IOEVENTFD,
};

static void kick(struct vcpu *v, int signal)
{
	__atomic_store_n(&v->run->immediate_exit, 1, __ATOMIC_SEQ_CST);
	pthread_kill(v->thread, signal);
}

void vm_stop(struct vm *vm, int status, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&vm->stop_lock);
	if (!atomic_load(&vm->stopping)) {
		vm->status = status;
		va_start(ap, fmt);
		vsnprintf(vm->reason, sizeof(vm->reason), fmt, ap);
		va_end(ap);
		atomic_store(&vm->stopping, true);
		pthread_mutex_lock(&vm->pause_lock);
		pthread_cond_broadcast(&vm->pause_cond);
		pthread_mutex_unlock(&vm->pause_lock);
		for (int i = 0; i < vm->nr_vcpus; i++)
			if (vm->vcpus[i].started)
				kick(&vm->vcpus[i], SIGNAL_KICK);
		/* Before vm_run() (a failed restore) nobody waits yet. */
		if (vm->main_thread_known)
			pthread_kill(vm->main_thread, SIGNAL_STOP);
	}
	pthread_mutex_unlock(&vm->stop_lock);
}

static int open_kvm(struct vm *vm)
{
	vm->kvm_fd = open(KVM_DEVICE, O_RDWR | O_CLOEXEC);
	if (vm->kvm_fd < 0) {
		log_error("%s: %s (this host offers no KVM: hardware "
			  "virtualisation off, module not loaded, or a nested "
			  "guest without it)",
			  KVM_DEVICE, strerror(errno));
		return -1;
	}
	int version = ioctl(vm->kvm_fd, KVM_GET_API_VERSION, 0);
	if (version != KVM_EXPECTED_API_VERSION) {
		log_error("%s: KVM API version %d, expected %d", KVM_DEVICE,
			  version, KVM_EXPECTED_API_VERSION);
		return -1;
	}
	for (size_t i = 0; i < sizeof(required_caps) / sizeof(int); i++) {
		if (ioctl(vm->kvm_fd, KVM_CHECK_EXTENSION, required_caps[i]) <=
		    0) {
			log_error(
				"%s: KVM lacks capability %d (see KVM_CAP_* in "
				"linux/kvm.h)",
				KVM_DEVICE, required_caps[i]);
			return -1;
		}
	}
	return 0;
}

/* Memory first: on PVM hosts registering it after the irqchip costs ~7 ms. */
static int create_machine(struct vm *vm)
{
	vm->vm_fd =
		kvm_ioctl_named(vm->kvm_fd, KVM_CREATE_VM, 0, "KVM_CREATE_VM");
	if (vm->vm_fd < 0)
		return -1;
	for (int i = 0; i < vm->mem.nr_regions; i++) {
		const struct memory_region *r = &vm->mem.regions[i];
		struct kvm_userspace_memory_region region = {
			.slot = i,
			.guest_phys_addr = r->guest_addr,
			.memory_size = r->size,
			.userspace_addr = (uint64_t)(uintptr_t)(vm->mem.host +
								r->host_offset),
		};
		if (KVM_IOCTL(vm->vm_fd, KVM_SET_USER_MEMORY_REGION, &region) <
		    0)
			return -1;
	}
	uint64_t identity_map = KVM_IDENTITY_MAP_ADDR;
	struct kvm_pit_config pit = { .flags = KVM_PIT_SPEAKER_DUMMY };

	if (ioctl(vm->vm_fd, KVM_SET_TSS_ADDR, KVM_TSS_ADDR) < 0) {
		log_error("KVM_SET_TSS_ADDR: %s", strerror(errno));
		return -1;
	}
	if (KVM_IOCTL(vm->vm_fd, KVM_SET_IDENTITY_MAP_ADDR, &identity_map) <
		    0 ||
	    KVM_IOCTL(vm->vm_fd, KVM_CREATE_IRQCHIP, NULL) < 0 ||
	    KVM_IOCTL(vm->vm_fd, KVM_CREATE_PIT2, &pit) < 0)
		return -1;
	return 0;
}

static int create_devices(struct vm *vm, const struct vm_config *cfg)
{
	bus_init(&vm->pio, "pio");
	bus_init(&vm->mmio, "mmio");
	if (console_init(&vm->console, cfg->console_fd, cfg->console_log_fd,
			 cfg->log_max) < 0)
		return -1;
	return vm_devices_create(vm, cfg);
}

/*
 * Opens each vCPU's statistics for the main thread's looks, before any
 * KVM_RUN holds the vCPU (KVM_GET_STATS_FD would wait for it).  A vCPU
 * without them (a kernel before 5.16) is sampled at every look.
 */
static void watch_vcpus(struct vm *vm)
{
	bool told = false;

	for (int i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		struct vcpu_activity first;
		char err[256];

		if (vcpu_stats_open(&v->stats, v->fd, &first, err,
				    sizeof(err)) == 0) {
			vcpu_watch_start(&v->watch, &first,
					 PARKED_SAMPLE_MS * NS_PER_MS,
					 PARKED_SAMPLE_CAP_MS * NS_PER_MS);
		} else if (!told) {
			log_debug("vcpu %d: %s; vCPUs without statistics are "
				  "kicked every %d ms to watch for a halted "
				  "guest",
				  i, err, PARKED_SAMPLE_MS);
			told = true;
		}
	}
}

/* KVM vCPU objects and their kvm_run mappings, with no state set yet. */
static int create_vcpu_fds(struct vm *vm)
{
	int run_size = ioctl(vm->kvm_fd, KVM_GET_VCPU_MMAP_SIZE, 0);

	if (run_size <= 0) {
		log_error("KVM_GET_VCPU_MMAP_SIZE: %s", strerror(errno));
		return -1;
	}
	for (int i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];

		v->fd = ioctl(vm->vm_fd, KVM_CREATE_VCPU, i);
		if (v->fd < 0) {
			log_error("vcpu %d: KVM_CREATE_VCPU: %s", i,
				  strerror(errno));
			return -1;
		}
		v->run = mmap(NULL, run_size, PROT_READ | PROT_WRITE,
			      MAP_SHARED, v->fd, 0);
		if (v->run == MAP_FAILED) {
			v->run = NULL;
			log_error("vcpu %d: cannot map kvm_run: %s", i,
				  strerror(errno));
			return -1;
		}
		v->run_size = run_size;
	}
	watch_vcpus(vm);
	return 0;
}

int vm_create_kvm(struct vm *vm, const struct vm_config *cfg)
{
	if (open_kvm(vm) < 0 || create_machine(vm) < 0 ||
	    create_devices(vm, cfg) < 0 || create_vcpu_fds(vm) < 0)
		return -1;
	return 0;
}

/* Fresh vCPUs for a boot: CPU 0 at the kernel entry, the rest waiting. */
static int setup_boot_vcpus(struct vm *vm)
{
	struct kvm_cpuid2 *cpuid = x86_supported_cpuid(vm->kvm_fd);
	int ret = -1;

	if (!cpuid)
		return -1;
	for (int i = 0; i < vm->nr_vcpus; i++) {
		int fd = vm->vcpus[i].fd;

		if (x86_setup_cpuid(fd, cpuid, i, vm->nr_vcpus) < 0 ||
		    x86_setup_msrs(fd, i) < 0 || x86_setup_fpu(fd, i) < 0 ||
		    x86_setup_lapic(fd, i) < 0)
			goto out;
	}
	ret = x86_setup_boot_registers(vm->vcpus[0].fd, vm->boot.entry);
	char err[256];
	if (ret == 0 && vm->pvm &&
	    pvm_mode_start_boot_vcpu(vm->vcpus[0].fd, &vm->boot, err,
				     sizeof(err)) < 0) {
		log_error("%s", err);
		ret = -1;
	}
out:
	free(cpuid);
	return ret;
}

/* The kernel finds virtio-mmio devices only through its command line. */
#define STR(x) #x
#define XSTR(x) STR(x)
static const char vsock_cmdline[] = " virtio_mmio.device=4K@" XSTR(
	VIRTIO_MMIO_BASE) ":" XSTR(VIRTIO_MMIO_FIRST_IRQ);
/* The network's window, and eth0 configured by the kernel itself (IP_PNP)
 * as every sandbox has it (guest_net.h): no DHCP, no init script, and
 * /proc/net/pnp, which the initramfs's /etc/resolv.conf points at, names
 * the gateway as the resolver. */
static const char net_cmdline[] =
	" virtio_mmio.device=4K@" XSTR(VIRTIO_MMIO_NET_BASE) ":" XSTR(
		VIRTIO_MMIO_NET_IRQ) " ip=" GUEST_NET_GUEST_ADDR_STR
				     "::" GUEST_NET_GATEWAY_ADDR_STR
				     ":" GUEST_NET_NETMASK_STR
				     "::eth0:off:" GUEST_NET_DNS_ADDR_STR;

/*
 * The guest's command line; with @tsc_khz (not 0) the TSC's rate too, which
 * the guest then takes as given (tsc_early_khz=).
 */
static char *build_cmdline(const struct vm *vm, const struct vm_config *cfg,
			   int tsc_khz)
{
	char *cmdline, tsc[32] = "";

	if (tsc_khz > 0)
		snprintf(tsc, sizeof(tsc), " tsc_early_khz=%d", tsc_khz);
	if (asprintf(&cmdline, "%s%s%s%s%s%s%s%s", base_cmdline,
		     cfg->vsock_path ? vsock_cmdline : "",
		     cfg->net_tap ? net_cmdline : "", vm->pvm ? " " : "",
		     vm->pvm ? pvm_kernel_cmdline() : "", tsc,
		     cfg->cmdline_extra ? " " : "",
		     cfg->cmdline_extra ? cfg->cmdline_extra : "") < 0) {
		log_error("kernel command line: out of memory");
		return NULL;
	}
	return cmdline;
}

/*
 * With nopv (PVM quirks) the guest has no kvmclock to tell it the TSC's
 * rate, so it measures it against the PIT.  On a loaded host (the guest
 * kernel emulated, many guests on two CPUs) that measurement fails: the
 * kernel marks the TSC unstable, gives up the LAPIC timer and ticks on the
 * PIT at HZ for good, and so does every clone of its snapshot, each tick
 * emulated (seen: a 250 Hz PIT in every idle clone, restores starved).
 * KVM knows the rate; the guest is told it, once the vCPUs exist.
 */
static int tell_guest_tsc_rate(struct vm *vm, const struct vm_config *cfg)
{
	if (!vm->pvm)
		return 0;
	int khz = ioctl(vm->vcpus[0].fd, KVM_GET_TSC_KHZ, 0);
	if (khz <= 0) {
		log_error("KVM_GET_TSC_KHZ: %s", strerror(errno));
		return -1;
	}
	char *cmdline = build_cmdline(vm, cfg, khz);
	if (!cmdline)
		return -1;
	int ret = x86_set_cmdline(&vm->mem, &vm->boot, cmdline);
	free(cmdline);
	return ret;
}

void vm_init(struct vm *vm, const struct vm_config *cfg, uint64_t start_ns)
{
	memset(vm, 0, sizeof(*vm));
	vm->kvm_fd = vm->vm_fd = -1;
	for (int i = 0; i < VM_MAX_VCPUS; i++)
		vm->vcpus[i] = (struct vcpu){
			.vm = vm, .id = i, .fd = -1, .stats.fd = -1
		};
	pthread_mutex_init(&vm->stop_lock, NULL);
	pthread_mutex_init(&vm->pause_lock, NULL);
	pthread_cond_init(&vm->pause_cond, NULL);
	vm->created_ns = start_ns;
	vm->nr_vcpus = cfg->nr_vcpus;
	vm->pagemap_fd = cfg->pagemap_fd;
	vm->writable_dir = cfg->writable_dir;
	vm->pvm = cfg->pvm == PVM_ON ||
		  (cfg->pvm == PVM_AUTO && pvm_host_detected());
}

int vm_boot(struct vm *vm, const struct vm_config *cfg)
{
	/* Everything that can be wrong with the inputs is found before
	 * KVM is touched. */
	if (guest_memory_create(&vm->mem, cfg->mem_mib) < 0)
		return -1;
	char *cmdline = build_cmdline(vm, cfg, 0);
	if (!cmdline)
		return -1;
	int ret = x86_load_linux(&vm->mem, cfg->kernel_path, cfg->initrd_path,
				 cmdline, &vm->boot);
	free(cmdline);
	if (ret < 0 || mptable_write(&vm->mem, vm->nr_vcpus) < 0)
		return -1;
	x86_write_boot_page_tables(&vm->mem);
	char err[256];
	if (vm->pvm &&
	    pvm_mode_prepare_boot(&vm->mem, &vm->boot, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}

	if (vm_create_kvm(vm, cfg) < 0 || tell_guest_tsc_rate(vm, cfg) < 0 ||
	    setup_boot_vcpus(vm) < 0)
		return -1;
	return 0;
}

bool vm_restore_times(const struct vm *vm, struct vm_restore_times *t)
{
	if (!vm->restored_ns)
		return false;
	*t = (struct vm_restore_times){
		.started_at_us = vm->created_ns / 1000,
		.setup_us = (vm->restore_start_ns - vm->created_ns) / 1000,
		.restore_us = (vm->restored_ns - vm->restore_start_ns) / 1000,
		.prefetched_pages = vm->prefetched_pages,
		.prefetch_us = vm->prefetch_ns / 1000,
	};
	return true;
}

int vm_pause(struct vm *vm)
{
	int ret = 0;

	pthread_mutex_lock(&vm->pause_lock);
	if (vm->paused)
		goto out;
	if (!atomic_load(&vm->vcpus_started) || atomic_load(&vm->stopping)) {
		log_error("pause: the VM is not running");
		ret = -1;
		goto out;
	}
	atomic_store(&vm->pause_requested, true);
	for (int i = 0; i < vm->nr_vcpus; i++)
		kick(&vm->vcpus[i], SIGNAL_KICK);
	while (vm->paused_vcpus < vm->nr_vcpus && !atomic_load(&vm->stopping))
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	if (atomic_load(&vm->stopping)) {
		atomic_store(&vm->pause_requested, false);
		log_error("pause: the VM stopped meanwhile");
		ret = -1;
		goto out;
	}
	vm->paused = true;
out:
	pthread_mutex_unlock(&vm->pause_lock);
	/*
	 * Outside the lock: a device thread may call vm_stop() (which takes
	 * it) before it reaches its pause point.  Only the control thread
	 * pauses and resumes, so nothing races this.
	 */
	if (ret == 0)
		vm_devices_pause(vm);
	return ret;
}

void vm_resume(struct vm *vm)
{
	vm_devices_resume(vm);
	pthread_mutex_lock(&vm->pause_lock);
	if (vm->paused) {
		vm->paused = false;
		atomic_store(&vm->pause_requested, false);
		pthread_cond_broadcast(&vm->pause_cond);
	}
	pthread_mutex_unlock(&vm->pause_lock);
}

/* A vCPU thread asked to pause: wait, outside KVM_RUN, until resumed. */
static void vcpu_wait_paused(struct vcpu *v)
{
	struct vm *vm = v->vm;

	pthread_mutex_lock(&vm->pause_lock);
	vm->paused_vcpus++;
	pthread_cond_broadcast(&vm->pause_cond);
	while (atomic_load(&vm->pause_requested) && !atomic_load(&vm->stopping))
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	vm->paused_vcpus--;
	pthread_mutex_unlock(&vm->pause_lock);
}

static void sample_parked(struct vcpu *v)
{
	struct kvm_mp_state mp;
	struct kvm_regs regs;

	if (ioctl(v->fd, KVM_GET_MP_STATE, &mp) < 0 ||
	    ioctl(v->fd, KVM_GET_REGS, &regs) < 0) {
		atomic_store(&v->parked, false);
		return;
	}
	bool interrupts_on = pvm_mode_interrupts_on(v->vm->pvm, v->fd,
						    &v->vm->mem, regs.rflags);
	atomic_store(
		&v->parked,
		mp.mp_state == KVM_MP_STATE_UNINITIALIZED ||
			mp.mp_state == KVM_MP_STATE_INIT_RECEIVED ||
			(mp.mp_state == KVM_MP_STATE_HALTED && !interrupts_on));
}

static uint64_t vcpu_rip(const struct vcpu *v)
{
	struct kvm_regs regs;

	return ioctl(v->fd, KVM_GET_REGS, &regs) < 0 ? 0 : regs.rip;
}

/* Returns 0 to re-enter the guest, -1 when the VM is stopping. */
static int handle_exit(struct vcpu *v)
{
	struct vm *vm = v->vm;
	struct kvm_run *run = v->run;

	switch (run->exit_reason) {
	case KVM_EXIT_IO: {
		uint8_t *data = (uint8_t *)run + run->io.data_offset;

		for (uint32_t i = 0; i < run->io.count; i++)
			bus_dispatch(&vm->pio, run->io.port,
				     data + i * run->io.size, run->io.size,
				     run->io.direction == KVM_EXIT_IO_OUT);
		return 0;
	}
	case KVM_EXIT_MMIO:
		bus_dispatch(&vm->mmio, run->mmio.phys_addr, run->mmio.data,
			     run->mmio.len, run->mmio.is_write);
		return 0;
	case KVM_EXIT_SHUTDOWN:
		/* No RIP: on AMD, KVM resets the vCPU on a shutdown intercept.
		 */
		vm_stop(vm, VM_GUEST_CRASHED,
			"vcpu %d: guest triple fault (KVM_EXIT_SHUTDOWN)",
			v->id);
		return -1;
	case KVM_EXIT_SYSTEM_EVENT:
		if (run->system_event.type == KVM_SYSTEM_EVENT_CRASH)
			vm_stop(vm, VM_GUEST_CRASHED, "vcpu %d: guest crashed",
				v->id);
		else
			vm_guest_requested_reset(vm);
		return -1;
	case KVM_EXIT_INTERNAL_ERROR:
		if (run->internal.suberror == KVM_INTERNAL_ERROR_EMULATION &&
		    vm->pvm) {
			if (pvm_handle_emulation_failure(v->fd, &vm->mem,
							 run) == 0)
				return 0;
			vm_stop(vm, VM_ERROR,
				"vcpu %d: stopped at an instruction the host "
				"cannot run",
				v->id);
			return -1;
		}
		vm_stop(vm, VM_ERROR,
			"vcpu %d: KVM internal error, suberror %u, at rip "
			"0x%llx",
			v->id, run->internal.suberror,
			(unsigned long long)vcpu_rip(v));
		return -1;
	case KVM_EXIT_FAIL_ENTRY:
		vm_stop(vm, VM_ERROR,
			"vcpu %d: KVM could not enter the guest (hardware "
			"reason 0x%llx)",
			v->id,
			(unsigned long long)
				run->fail_entry.hardware_entry_failure_reason);
		return -1;
	default:
		vm_stop(vm, VM_ERROR,
			"vcpu %d: unexpected KVM exit reason %u at rip 0x%llx",
			v->id, run->exit_reason,
			(unsigned long long)vcpu_rip(v));
		return -1;
	}
}

static void *vcpu_thread(void *arg)
{
	struct vcpu *v = arg;
	struct vm *vm = v->vm;
	sigset_t kick_set;

	sigemptyset(&kick_set);
	sigaddset(&kick_set, SIGNAL_KICK);
	pthread_sigmask(SIG_UNBLOCK, &kick_set, NULL);

	/* No guest instruction before every thread is filtered (vm_run);
	 * a failure reaches the main thread through the same barrier. */
	vmm_seccomp_enter(VMM_THREAD_VCPU);
	pthread_mutex_lock(&vm->pause_lock);
	while (!vm->vcpus_may_run && !atomic_load(&vm->stopping))
		pthread_cond_wait(&vm->pause_cond, &vm->pause_lock);
	pthread_mutex_unlock(&vm->pause_lock);

	while (!atomic_load(&vm->stopping)) {
		if (ioctl(v->fd, KVM_RUN, 0) < 0) {
			if (errno != EINTR && errno != EAGAIN) {
				vm_stop(vm, VM_ERROR, "vcpu %d: KVM_RUN: %s",
					v->id, strerror(errno));
				break;
			}
			__atomic_store_n(&v->run->immediate_exit, 0,
					 __ATOMIC_SEQ_CST);
			if (atomic_exchange(&v->inspect, false))
				sample_parked(v);
			/*
			 * Only here: a KVM_RUN that returned EINTR has
			 * completed the I/O of the previous exit, so the
			 * vCPU's state is whole (KVM's rule for snapshots).
			 */
			if (atomic_load(&vm->pause_requested))
				vcpu_wait_paused(v);
			continue;
		}
		if (handle_exit(v) < 0)
			break;
	}
	return NULL;
}

static void ignore_signal(int sig)
{
	(void)sig;
}

/*
 * Whether @v needs sampling now; a vCPU its statistics show running since
 * the last look is not parked, whatever its last sample said.
 */
static bool needs_sample(struct vcpu *v, uint64_t now)
{
	struct vcpu_activity seen;

	if (v->stats.fd < 0 || vcpu_stats_read(&v->stats, &seen) < 0)
		return true;
	switch (vcpu_watch_look(&v->watch, &seen, atomic_load(&v->parked),
				now)) {
	case VCPU_RAN:
		atomic_store(&v->parked, false);
		return false;
	case VCPU_WAIT:
		return false;
	case VCPU_SAMPLE:
		break;
	}
	return true;
}

/* Called every PARKED_SAMPLE_MS; returns true once the guest has stopped. */
static bool all_parked(struct vm *vm, int *consecutive)
{
	uint64_t now = monotonic_ns();
	bool parked = true;

	if (atomic_load(&vm->pause_requested)) {
		/* A paused guest is not a stopped one. */
		*consecutive = 0;
		return false;
	}
	for (int i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		bool sample = needs_sample(v, now);

		/* The last samples count, before this look's kicks. */
		parked = parked && atomic_load(&v->parked);
		if (sample) {
			atomic_store(&v->inspect, true);
			kick(v, SIGNAL_KICK);
		}
	}
	*consecutive = parked ? *consecutive + 1 : 0;
	return *consecutive >= PARKED_SAMPLES_TO_STOP;
}

int vm_run(struct vm *vm)
{
	struct sigaction kick_action = { .sa_handler = ignore_signal };
	struct timespec sample = { 0, PARKED_SAMPLE_MS * 1000000L };
	sigset_t wait_set;
	int parked_samples = 0;

	sigemptyset(&wait_set);
	sigaddset(&wait_set, SIGINT);
	sigaddset(&wait_set, SIGTERM);
	sigaddset(&wait_set, SIGHUP);
	sigaddset(&wait_set, SIGNAL_STOP);
	pthread_sigmask(SIG_BLOCK, &wait_set, NULL);
	sigaction(SIGNAL_KICK, &kick_action, NULL);
	vm->main_thread = pthread_self();
	vm->main_thread_known = true;

	int threads = vm_devices_start(vm);
	if (vm->companion.start) {
		if (vm->companion.start(vm->companion.arg) == 0)
			threads++;
		else
			vm_stop(vm, VM_ERROR, "%s: cannot start its thread",
				vm->companion.name);
	}

	vm->running_ns = monotonic_ns();
	vm->console.boot_ns = vm->running_ns;
	for (int i = 0; i < vm->nr_vcpus; i++) {
		struct vcpu *v = &vm->vcpus[i];
		int err;

		pthread_mutex_lock(&vm->stop_lock);
		err = pthread_create(&v->thread, NULL, vcpu_thread, v);
		v->started = err == 0;
		pthread_mutex_unlock(&vm->stop_lock);
		if (err) {
			vm_stop(vm, VM_ERROR,
				"vcpu %d: cannot start thread: %s", i,
				strerror(err));
			break;
		}
		threads++;
	}
	/*
	 * The threads above were created unfiltered and load their own
	 * filters; the main thread's comes last, so none inherits it.
	 */
	if (vmm_seccomp_wait_threads(threads) < 0 ||
	    vmm_seccomp_enter(VMM_THREAD_MAIN) < 0) {
		vm_stop(vm, VM_ERROR,
			"seccomp: a thread could not load its filter");
	} else {
		pthread_mutex_lock(&vm->pause_lock);
		vm->vcpus_may_run = true;
		pthread_cond_broadcast(&vm->pause_cond);
		pthread_mutex_unlock(&vm->pause_lock);
	}

	atomic_store(&vm->vcpus_started, !atomic_load(&vm->stopping));
	while (!atomic_load(&vm->stopping)) {
		int sig = sigtimedwait(&wait_set, NULL, &sample);

		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP)
			vm_stop(vm, VM_INTERRUPTED, "stopped by signal %s",
				strsignal(sig));
		else if (sig < 0 && errno == EAGAIN &&
			 all_parked(vm, &parked_samples))
			vm_stop(vm, VM_GUEST_STOPPED,
				"guest halted (every vCPU stopped with "
				"interrupts off)");
	}
	for (int i = 0; i < vm->nr_vcpus; i++)
		if (vm->vcpus[i].started)
			pthread_join(vm->vcpus[i].thread, NULL);
	serial_flush(&vm->serial);
	return vm->status;
}

void vm_destroy(struct vm *vm)
{
	/* After the vCPUs: devices own what their exits use. */
	vm_devices_destroy(vm);
	for (int i = 0; i < VM_MAX_VCPUS; i++) {
		struct vcpu *v = &vm->vcpus[i];

		vcpu_stats_close(&v->stats);
		if (v->run)
			munmap(v->run, v->run_size);
		if (v->fd >= 0)
			close(v->fd);
	}
	if (vm->vm_fd >= 0)
		close(vm->vm_fd);
	if (vm->kvm_fd >= 0)
		close(vm->kvm_fd);
	guest_memory_destroy(&vm->mem);
	console_destroy(&vm->console);
	pthread_mutex_destroy(&vm->stop_lock);
	pthread_cond_destroy(&vm->pause_cond);
	pthread_mutex_destroy(&vm->pause_lock);
}

int page_in_mode_parse(const char *word, enum page_in_mode *mode)
{
	if (!strcmp(word, "prefetch"))
		*mode = PAGE_IN_PREFETCH;
	else if (!strcmp(word, "lazy"))
		*mode = PAGE_IN_LAZY;
	else
		return -1;
	return 0;
}
