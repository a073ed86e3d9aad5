// SPDX-License-Identifier: Apache-2.0
/*
 * vm_snapshot.c - a machine's snapshots: saving a running VM into a
 * directory, and building a VM from one instead of booting (vm.h's
 * vm_snapshot() and vm_restore()).
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
 * Or, for a diff snapshot, memory.diff (snapshot/memdiff.h) instead of
 * memory.img and pages.xxh3: the pages written since the snapshot DIR/parent
 * links to, and a STATE_VM_MEMORY section in state.bin naming that parent's
 * root and the chain's depth.
 * Saving pauses every vCPU outside KVM_RUN and the device threads (vm.c's
 * vm_pause()), writes memory first because the state file's header holds
 * its hash root, then the state file, then fsyncs the directory.
 *
 * A checkpoint (vm_checkpoint()) saves the same way into files its
 * supervisor created and passed as descriptors: a diff when guest memory
 * derives from a snapshot (a restore, or an earlier checkpoint) whose
 * chain is not MEMDIFF_MAX_DEPTH deep, else all of memory.  Still paused,
 * it maps the pages it wrote from the new file over guest memory: the same
 * bytes, the guest notices nothing (KVM's MMU notifier drops its mappings
 * of the replaced pages), and from then on memory derives from the
 * checkpoint, so the next one finds only pages written since.  The files
 * are fsynced once the guest runs again.
 *
 * Restoring goes in an order each step depends on: the state file is read
 * and checked (same kind of CPU, a consistent shape, an agent channel and
 * a network device iff the snapshot has them) before /dev/kvm is opened, so a
 * snapshot this host cannot run fails early and cheaply; memory is the memory
 * file mapped MAP_PRIVATE (pages come from the page cache, shared by every
 * clone of the snapshot, and a clone's writes stay its own), a diff chain's
 * layers mapped over it oldest first, optionally
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
#include "vmm/vm.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "snapshot/host_cpu.h"
#include "vmm/jail.h"
#include "common/log.h"
#include "snapshot/memdiff.h"
#include "snapshot/memfile.h"
#include "snapshot/preopen.h"
#include "snapshot/state.h"
#include "vmm/vm_devices.h"
#include "vmm/vm_internal.h"
#include "snapshot/workingset.h"
#include "vmm/x86/kvm_state.h"
#include "vmm/x86/pvm_mode.h"

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

/*
 * STATE_VM_MEMORY: present when memory is a diff (memdiff.h) of a parent
 * whose root is parent_root, @depth layers over a base memory.img.
 */
struct saved_memory {
	uint64_t parent_root;
	uint32_t depth;
	uint32_t reserved; /* zero */
};

/* The chain found is the one the state file says its memory is. */
static int check_chain(const struct state_reader *r,
		       const struct memdiff_chain *chain)
{
	struct saved_memory sm = { 0 };
	size_t size;
	const void *data = state_find(r, STATE_VM_MEMORY, 0, &size);

	if (data && size == sizeof(sm))
		memcpy(&sm, data, sizeof(sm));
	if ((data && size != sizeof(sm)) || sm.reserved ||
	    sm.depth != chain->depth ||
	    (chain->depth &&
	     sm.parent_root != chain->layers[0].h.parent_root)) {
		log_error(
			"snapshot state %s: its memory is %u diff layers over "
			"parent %#llx, but its directory holds %u",
			r->path, sm.depth, (unsigned long long)sm.parent_root,
			chain->depth);
		return -1;
	}
	return 0;
}

/*
 * The base's memory.img mapped MAP_PRIVATE, and each diff layer's pages
 * over it (memdiff.h): all checked against the state file's root first.
 */
static int map_snapshot_memory(struct vm *vm, const struct vm_config *cfg,
			       const struct state_reader *r)
{
	char memory[PATH_MAX], hashes[PATH_MAX], working_set[PATH_MAX];
	char err[PATH_MAX + 256];
	struct memdiff_chain chain;
	uint64_t size = r->header.mem_size;
	int fd;

	if (memdiff_chain_open(&chain, cfg->restore_dir, size,
			       r->header.memory_hash_root, err,
			       sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}
	if (check_chain(r, &chain) < 0 ||
	    snapshot_path(memory, chain.base_dir, "memory.img") < 0 ||
	    snapshot_path(hashes, chain.base_dir, "pages.xxh3") < 0 ||
	    snapshot_path(working_set, chain.base_dir, "workingset.bin") < 0)
		goto fail;
	void *host = memfile_map(memory, hashes, size, chain.base_root, &fd,
				 err, sizeof(err));
	if (!host) {
		log_error("%s", err);
		goto fail;
	}
	if (memdiff_chain_map(&chain, host, err, sizeof(err)) < 0) {
		log_error("%s", err);
		munmap(host, size);
		close(fd);
		goto fail;
	}
	vm->memory_from_file = true;
	vm->memory_root = r->header.memory_hash_root;
	vm->memory_depth = chain.depth;
	memdiff_chain_close(&chain);
	if (guest_memory_adopt(&vm->mem, host, size) < 0) {
		close(fd);
		return -1;
	}
	if (cfg->page_in == PAGE_IN_PREFETCH) {
		uint64_t start = monotonic_ns();

		/* Only an optimisation: without it (not recorded yet, a bad
		 * file, no io_uring) pages come on demand.  A chain's is its
		 * base's: most of what a clone touches early is there. */
		int ret = workingset_prefetch(
			fd, vm->mem.host, vm->mem.size, working_set,
			&vm->prefetched_pages, err, sizeof(err));
		if (ret < 0 && ret != -ENOENT)
			log_warning("%s: restoring without prefetch", err);
		vm->prefetch_ns = monotonic_ns() - start;
	}
	close(fd);
	return 0;

fail:
	memdiff_chain_close(&chain);
	return -1;
}

int vm_restore(struct vm *vm, const struct vm_config *cfg)
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

/*
 * Collects the machine's state into @w and fills @header, whose memory root
 * is @memory_root; @memory (NULL: memory is whole) says which diff it is.
 */
static int collect_state(struct vm *vm, struct state_writer *w,
			 struct state_file_header *header, uint64_t memory_root,
			 const struct saved_memory *memory)
{
	struct saved_config sc = {
		.mem_size = vm->mem.size,
		.nr_vcpus = vm->nr_vcpus,
		.devices =
			(vm_has_device(vm, STATE_DEV_VSOCK) ? SAVED_VSOCK : 0) |
			(vm_has_device(vm, STATE_DEV_NET) ? SAVED_NET : 0),
	};
	struct kvm_msr_list *msrs = x86_msr_index_list(vm->kvm_fd);
	char err[128];
	int ret = -1;

	if (msrs && vm->pvm &&
	    !(msrs = pvm_mode_saved_msrs(msrs, err, sizeof(err))))
		log_error("%s", err);

	*header = (struct state_file_header){
		.cpu_signature = host_cpu_signature(),
		.mem_size = vm->mem.size,
		.memory_hash_root = memory_root,
		.nr_vcpus = vm->nr_vcpus,
	};
	state_writer_init(w);
	if (!msrs)
		return -1;
	state_put(w, STATE_VM_CONFIG, 0, &sc, sizeof(sc));
	if (memory)
		state_put(w, STATE_VM_MEMORY, 0, memory, sizeof(*memory));
	if (x86_save_vm(vm->vm_fd, w) < 0)
		goto out;
	for (int i = 0; i < vm->nr_vcpus; i++)
		if (x86_save_vcpu(vm->kvm_fd, vm->vcpus[i].fd, i, msrs, w) < 0)
			goto out;
	vm_devices_save(vm, w);
	ret = 0;
out:
	free(msrs);
	return ret;
}

static int save_state(struct vm *vm, const char *path, uint64_t memory_root)
{
	struct state_file_header header;
	struct state_writer w;
	char err[512];
	int ret = collect_state(vm, &w, &header, memory_root, NULL);

	if (ret == 0 &&
	    state_writer_save(&w, &header, path, err, sizeof(err)) < 0) {
		log_error("%s", err);
		ret = -1;
	}
	state_writer_free(&w);
	return ret;
}

static bool vm_was_paused(struct vm *vm)
{
	pthread_mutex_lock(&vm->pause_lock);
	bool paused = vm->paused;
	pthread_mutex_unlock(&vm->pause_lock);
	return paused;
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
	was_paused = vm_was_paused(vm);
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

/*
 * A checkpoint in progress: what it found and wrote.  Its file names are
 * for messages only (the files are descriptors).
 */
struct checkpoint {
	const struct vm_checkpoint_files *files;
	char state[PATH_MAX], diff[PATH_MAX], memory[PATH_MAX],
		hashes[PATH_MAX];
	struct memdiff_extents written;
	struct saved_memory parent;
	uint64_t root;
};

/*
 * Whether this checkpoint can be a diff: a memory that derives from a
 * snapshot less than MEMDIFF_MAX_DEPTH layers deep, whose written pages
 * fit a layer and are fewer than half the guest's (more, and a full
 * memory.img costs about as much and starts a fresh chain).  -1 after a
 * message when the written pages cannot be read.
 */
static int choose_diff(struct vm *vm, struct checkpoint *c)
{
	char err[512];
	uint64_t pages = vm->mem.size / MEMDIFF_PAGE_SIZE;

	if (!vm->memory_from_file || vm->memory_depth >= MEMDIFF_MAX_DEPTH)
		return 0;
	int ret = memdiff_find_written(vm->mem.host, vm->mem.size,
				       vm->pagemap_fd, MEMDIFF_MAX_EXTENTS,
				       &c->written, err, sizeof(err));
	if (ret == -E2BIG) {
		log_info("checkpoint %s: %s: writing all of memory",
			 c->files->dir, err);
		return 0;
	}
	if (ret < 0) {
		log_error("checkpoint %s: %s", c->files->dir, err);
		return -1;
	}
	return c->written.pages < pages / 2;
}

/*
 * Writes memory and state; memory then derives from the new files.  The
 * VM is paused.  0, or -1 after a message.
 */
static int write_checkpoint(struct vm *vm, struct checkpoint *c,
			    struct vm_checkpoint_result *out)
{
	const struct vm_checkpoint_files *f = c->files;
	struct state_file_header header;
	struct state_writer w;
	char err[PATH_MAX + 256];
	int diff = choose_diff(vm, c);
	int ret;

	if (diff < 0)
		return -1;
	out->full = !diff;
	if (diff) {
		c->parent = (struct saved_memory){
			.parent_root = vm->memory_root,
			.depth = vm->memory_depth + 1,
		};
		out->dirty_pages = c->written.pages;
		out->depth = c->parent.depth;
		ret = memdiff_write(f->diff_fd, vm->mem.host, vm->mem.size,
				    &c->written, vm->memory_root, &c->root,
				    c->diff, err, sizeof(err));
	} else {
		out->dirty_pages = vm->mem.size / MEMDIFF_PAGE_SIZE;
		out->depth = 0;
		ret = memfile_write_fd(vm->mem.host, vm->mem.size, f->memory_fd,
				       f->hashes_fd, c->memory, c->hashes,
				       &c->root, err, sizeof(err));
	}
	if (ret < 0) {
		log_error("checkpoint: %s", err);
		return -1;
	}
	ret = collect_state(vm, &w, &header, c->root, diff ? &c->parent : NULL);
	if (ret == 0 && state_writer_save_fd(&w, &header, f->state_fd, c->state,
					     err, sizeof(err)) < 0) {
		log_error("checkpoint: %s", err);
		ret = -1;
	}
	state_writer_free(&w);
	return ret;
}

/*
 * Maps what the checkpoint wrote over guest memory: the same bytes, now
 * the file's pages (KVM's MMU notifier drops its mappings of the old
 * ones).  A failed MAP_FIXED may leave the range unmapped: the guest
 * cannot go on then, and the VM stops.
 */
static int remap_memory(struct vm *vm, struct checkpoint *c,
			const struct vm_checkpoint_result *out)
{
	const struct vm_checkpoint_files *f = c->files;
	char err[PATH_MAX + 256];
	int ret;

	if (!out->full) {
		ret = memdiff_map_extents(f->diff_fd, vm->mem.host,
					  c->written.e, c->written.nr, c->diff,
					  err, sizeof(err));
	} else if (mmap(vm->mem.host, vm->mem.size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE, f->memory_fd,
			0) == MAP_FAILED) {
		ret = -errno;
		snprintf(err, sizeof(err), "memory file %s: cannot map: %s",
			 c->memory, strerror(errno));
	} else {
		ret = 0;
	}
	if (ret < 0) {
		vm_stop(vm, VM_ERROR, "checkpoint: guest memory lost: %s", err);
		return -1;
	}
	vm->memory_from_file = true;
	vm->memory_root = c->root;
	vm->memory_depth = out->depth;
	return 0;
}

static int sync_files(const struct checkpoint *c, bool full)
{
	const struct vm_checkpoint_files *f = c->files;
	int fds[] = { f->state_fd, full ? f->memory_fd : f->diff_fd,
		      full ? f->hashes_fd : -1 };
	const char *names[] = { c->state, full ? c->memory : c->diff,
				c->hashes };

	for (size_t i = 0; i < 3; i++) {
		if (fds[i] >= 0 && fsync(fds[i]) < 0) {
			log_error("checkpoint: %s: cannot write: %s", names[i],
				  strerror(errno));
			return -1;
		}
	}
	return 0;
}

int vm_checkpoint(struct vm *vm, const struct vm_checkpoint_files *files,
		  struct vm_checkpoint_result *out)
{
	struct checkpoint c = { .files = files };
	uint64_t start = monotonic_ns();
	bool was_paused = vm_was_paused(vm);
	int ret = -1;

	memset(out, 0, sizeof(*out));
	if (snapshot_path(c.state, files->dir, "state.bin") < 0 ||
	    snapshot_path(c.diff, files->dir, MEMDIFF_FILE) < 0 ||
	    snapshot_path(c.memory, files->dir, "memory.img") < 0 ||
	    snapshot_path(c.hashes, files->dir, "pages.xxh3") < 0 ||
	    vm_pause(vm) < 0)
		return -1;
	if (write_checkpoint(vm, &c, out) == 0)
		ret = remap_memory(vm, &c, out);
	if (!was_paused)
		vm_resume(vm);
	out->pause_ns = monotonic_ns() - start;
	/* Outside the pause: the guest runs while the disk catches up. */
	if (ret == 0)
		ret = sync_files(&c, out->full);
	out->total_ns = monotonic_ns() - start;
	memdiff_extents_free(&c.written);
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
