// SPDX-License-Identifier: Apache-2.0
/*
 * vm_snapshot.c - a machine's snapshots: saving a running VM into a
 * directory, and building a VM from one instead of booting (vm.h's
 * vm_snapshot() and vm_create() with cfg->restore_dir).
 *
 * On disk a snapshot is one directory of files:
 * - state.bin (snapshot/state.h): a header with the host CPU's signature,
 *   the memory size, the vCPU count and the memory file's hash root, then
 *   tagged sections: the machine's shape (struct saved_config), KVM's VM
 *   state (irqchip, PIT, clock), each vCPU's registers, MSRs, LAPIC and the
 *   rest (x86/kvm_state.h), and each device's own state, which the device
 *   writes itself (the device table, vm_devices.h);
 * - memory.img and pages.xxh3 (snapshot/memfile.h): guest memory as a flat
 *   file and a hash per page, whose root the header carries;
 * - workingset.bin (snapshot/workingset.h), optional: the pages a clone
 *   touched early in its life, recorded later by vm_record_working_set().
 * Saving pauses every vCPU outside KVM_RUN and the device threads (vm.c's
 * vm_pause()), writes memory first because the state file's header holds
 * its hash root, then the state file, then fsyncs the directory.
 *
 * Restoring goes in an order each step depends on: the state file is read
 * and checked (same kind of CPU, a consistent shape, an agent channel and
 * a network device iff the snapshot has them) before /dev/kvm is opened, so a
 * snapshot this host cannot run fails early and cheaply; memory is the memory
 * file mapped MAP_PRIVATE (pages come from the page cache, shared by every
 * clone of the snapshot, and a clone's writes stay its own), optionally
 * prefetched with io_uring from the working set; it must be in place before the
 * VM's memory slots are registered (vm_create_kvm(), vm_internal.h).  Then the
 * vCPUs' state, then KVM's VM state (the irqchip) before the devices,
 * which re-drive their IRQ lines into it; last, the vCPUs are told they
 * were paused, so the guest's clocks do not count the time in between as
 * a soft lockup.
 *
 * The VMM never opens the catalog: it is told which directory to write or
 * read; recording a snapshot is the pool side's.
 */
#include "vm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "host_cpu.h"
#include "jail.h"
#include "log.h"
#include "memfile.h"
#include "preopen.h"
#include "state.h"
#include "vm_devices.h"
#include "vm_internal.h"
#include "workingset.h"
#include "x86/kvm_state.h"

/*
 * The machine's shape, saved beside the KVM and device state so a restore
 * can rebuild the same VM before it loads any of that state.
 */
struct saved_config {
	uint64_t mem_size;
	uint32_t nr_vcpus;
	/* SAVED_VSOCK | SAVED_NET.  Once a 0/1 has_vsock: snapshots from
	 * before the network read the same. */
	uint32_t devices;
};

#define SAVED_VSOCK 1u
#define SAVED_NET 2u

static int snapshot_path(char *out, const char *dir, const char *file)
{
	if (snprintf(out, PATH_MAX, "%s/%s", dir, file) >= PATH_MAX) {
		log_error("snapshot %s: path too long", dir);
		return -1;
	}
	return 0;
}

/* Whether device @bit is in the snapshot exactly when the command line
 * (@given: its @flag) asks for it; 0, or -1 after a message. */
static int check_device(const struct saved_config *sc, const char *dir,
			uint32_t bit, bool given, const char *what,
			const char *add_hint, const char *flag)
{
	bool saved = sc->devices & bit;

	if (saved == given)
		return 0;
	log_error("snapshot %s %s %s: %s %s", dir, saved ? "has" : "has no",
		  what, saved ? add_hint : "leave out", flag);
	return -1;
}

/* Refuses a snapshot this VMM and host cannot run, before KVM is opened. */
static int check_snapshot(const struct state_reader *r,
			  const struct vm_config *cfg, struct saved_config *sc)
{
	uint64_t host = host_cpu_signature();

	if (r->header.cpu_signature != host) {
		char cpu[128];

		host_cpu_describe(cpu, sizeof(cpu));
		log_error(
			"snapshot %s was taken on another kind of CPU (signature %016llx); this host is %s (signature %016llx)",
			cfg->restore_dir,
			(unsigned long long)r->header.cpu_signature, cpu,
			(unsigned long long)host);
		return -1;
	}
	if (state_get(r, STATE_VM_CONFIG, 0, sc, sizeof(*sc)) < 0)
		return -1;
	if (sc->nr_vcpus < 1 || sc->nr_vcpus > VM_MAX_VCPUS ||
	    sc->nr_vcpus != r->header.nr_vcpus ||
	    sc->mem_size != r->header.mem_size ||
	    (sc->devices & ~(SAVED_VSOCK | SAVED_NET))) {
		log_error(
			"snapshot state %s: inconsistent machine (%u vCPUs, header says %u; %llu bytes of memory, header says %llu)",
			r->path, sc->nr_vcpus, r->header.nr_vcpus,
			(unsigned long long)sc->mem_size,
			(unsigned long long)r->header.mem_size);
		return -1;
	}
	/* A clone's network is its own TAP; one the snapshot has no device
	 * for would be silently unused, so it is refused too. */
	if (check_device(sc, cfg->restore_dir, SAVED_VSOCK,
			 cfg->vsock_path != NULL, "an agent channel",
			 "give it a socket path with", "--vsock") < 0 ||
	    check_device(sc, cfg->restore_dir, SAVED_NET, cfg->net_tap != NULL,
			 "a network device", "give it the clone's TAP with",
			 "--net-tap") < 0)
		return -1;
	return 0;
}

static int map_snapshot_memory(struct vm *vm, const struct vm_config *cfg,
			       const struct state_reader *r)
{
	char memory[PATH_MAX], hashes[PATH_MAX], working_set[PATH_MAX];
	char err[512];
	int fd;

	if (snapshot_path(memory, cfg->restore_dir, "memory.img") < 0 ||
	    snapshot_path(hashes, cfg->restore_dir, "pages.xxh3") < 0 ||
	    snapshot_path(working_set, cfg->restore_dir, "workingset.bin") < 0)
		return -1;
	void *host =
		memfile_map(memory, hashes, r->header.mem_size,
			    r->header.memory_hash_root, &fd, err, sizeof(err));
	if (!host) {
		log_error("%s", err);
		return -1;
	}
	if (guest_memory_adopt(&vm->mem, host, r->header.mem_size) < 0) {
		close(fd);
		return -1;
	}
	if (cfg->page_in == PAGE_IN_PREFETCH) {
		uint64_t start = monotonic_ns();

		/* Only an optimisation: without it (not recorded yet, a bad
		 * file, no io_uring) pages come on demand. */
		int ret = workingset_prefetch(
			fd, vm->mem.host, vm->mem.size, working_set,
			&vm->prefetched_pages, err, sizeof(err));
		if (ret < 0 && ret != -ENOENT)
			log_warning("%s: restoring without prefetch", err);
		vm->prefetch_ns = monotonic_ns() - start;
	}
	close(fd);
	return 0;
}

int vm_restore_machine(struct vm *vm, const struct vm_config *cfg)
{
	char path[PATH_MAX];
	char err[512] = "";
	struct state_reader r;
	struct saved_config sc;
	int ret = -1;

	if (snapshot_path(path, cfg->restore_dir, "state.bin") < 0)
		return -1;
	if (state_reader_open(&r, path, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}
	if (check_snapshot(&r, cfg, &sc) < 0)
		goto out;
	vm->nr_vcpus = sc.nr_vcpus;
	if (map_snapshot_memory(vm, cfg, &r) < 0 || vm_create_kvm(vm, cfg) < 0)
		goto out;

	vm->restore_start_ns = monotonic_ns();
	for (int i = 0; i < vm->nr_vcpus; i++)
		if (x86_restore_vcpu(vm->kvm_fd, vm->vcpus[i].fd, i, &r) < 0)
			goto out;
	/* The irqchip before the devices, which re-drive their lines. */
	if (x86_restore_vm(vm->vm_fd, &r) < 0 || vm_devices_restore(vm, &r) < 0)
		goto out;
	for (int i = 0; i < vm->nr_vcpus; i++)
		x86_notify_paused(vm->vcpus[i].fd);
	vm->restored_ns = monotonic_ns();
	ret = 0;
out:
	/* What the state_get() of any restore above found missing. */
	if (ret < 0 && err[0])
		log_error("%s", err);
	state_reader_close(&r);
	/* A file main() opened that the restore did not read (a working
	 * set, paged in lazily) is no business of the running VM. */
	snapshot_files_forget();
	return ret;
}

static int save_state(struct vm *vm, const char *path, uint64_t memory_root)
{
	struct saved_config sc = {
		.mem_size = vm->mem.size,
		.nr_vcpus = vm->nr_vcpus,
		.devices =
			(vm_has_device(vm, STATE_DEV_VSOCK) ? SAVED_VSOCK : 0) |
			(vm_has_device(vm, STATE_DEV_NET) ? SAVED_NET : 0),
	};
	struct state_file_header header = {
		.cpu_signature = host_cpu_signature(),
		.mem_size = vm->mem.size,
		.memory_hash_root = memory_root,
		.nr_vcpus = vm->nr_vcpus,
	};
	struct kvm_msr_list *msrs = x86_msr_index_list(vm->kvm_fd);
	struct state_writer w;
	char err[512];
	int ret = -1;

	state_writer_init(&w);
	if (!msrs)
		goto out;
	state_put(&w, STATE_VM_CONFIG, 0, &sc, sizeof(sc));
	if (x86_save_vm(vm->vm_fd, &w) < 0)
		goto out;
	for (int i = 0; i < vm->nr_vcpus; i++)
		if (x86_save_vcpu(vm->kvm_fd, vm->vcpus[i].fd, i, msrs, &w) < 0)
			goto out;
	vm_devices_save(vm, &w);
	if (state_writer_save(&w, &header, path, err, sizeof(err)) < 0)
		log_error("%s", err);
	else
		ret = 0;
out:
	state_writer_free(&w);
	free(msrs);
	return ret;
}

static int sync_directory(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (fd < 0 || fsync(fd) < 0) {
		log_error("snapshot %s: cannot sync the directory: %s", dir,
			  strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

int vm_snapshot(struct vm *vm, const char *host_dir)
{
	char state[PATH_MAX], memory[PATH_MAX], hashes[PATH_MAX];
	char dir[PATH_MAX], err[PATH_MAX + 128];
	bool was_paused;
	uint64_t root;

	if (jail_inside_path(vm->writable_dir, host_dir, dir, sizeof(dir), err,
			     sizeof(err)) < 0) {
		log_error("snapshot: %s", err);
		return -1;
	}
	if (snapshot_path(state, dir, "state.bin") < 0 ||
	    snapshot_path(memory, dir, "memory.img") < 0 ||
	    snapshot_path(hashes, dir, "pages.xxh3") < 0)
		return -1;
	pthread_mutex_lock(&vm->pause_lock);
	was_paused = vm->paused;
	pthread_mutex_unlock(&vm->pause_lock);
	if (vm_pause(vm) < 0)
		return -1;
	/* Memory first: the state file's header carries its hash root. */
	int ret = 0;

	if (memfile_write(vm->mem.host, vm->mem.size, memory, hashes, &root,
			  err, sizeof(err)) < 0) {
		log_error("%s", err);
		ret = -1;
	}
	if (ret == 0)
		ret = save_state(vm, state, root);
	if (ret == 0)
		ret = sync_directory(dir);
	if (!was_paused)
		vm_resume(vm);
	return ret;
}

int vm_record_working_set(struct vm *vm, const char *path, uint64_t *pages)
{
	char inside[PATH_MAX], err[PATH_MAX + 128];
	int ret = jail_inside_path(vm->writable_dir, path, inside,
				   sizeof(inside), err, sizeof(err));

	if (ret == 0)
		ret = workingset_record(vm->mem.host, vm->mem.size, inside,
					vm->pagemap_fd, pages, err,
					sizeof(err));

	if (ret < 0)
		log_error("%s", err);
	return ret;
}
