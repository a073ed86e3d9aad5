// SPDX-License-Identifier: Apache-2.0
/*
 * floor.c - thaw-bench-floor: the VMM's floor, the least a restore can cost.
 *
 * Whatever else a clone's latency holds (starting a process, waiting for
 * the guest agent, the daemon's bookkeeping), every restore has to create a
 * KVM VM and its vCPUs, map the snapshot's memory into it and load the saved
 * vCPU, irqchip and device state.  That part is what this program times:
 * builder_build() with cfg.restore_dir, the call thaw-vmm makes, then
 * builder_destroy() without vm_run(), so the guest never executes an
 * instruction.
 * Everything around it is left out on purpose, because each piece has its
 * own owner: fork/exec and the dynamic loader (the kernel's and libc's
 * cost), the guest resuming and answering the agent (the guest's), the
 * control socket and console log (thaw's plumbing, not the restore).  No
 * clone-level optimisation can go below this number, so it says how much of
 * an end-to-end restore is left to win above it.
 *
 * All iterations run in one process so that the numbers carry no process
 * start-up noise; the first one also pays for cold caches (the snapshot's
 * files, KVM's first VM in this process), which is why every iteration is
 * printed and none is averaged away here.
 *
 * A snapshot with an agent channel (every one `thaw snapshot create` makes)
 * only restores with a virtio-vsock device, and that device's host side is
 * a listening Unix socket: it lives in a private directory made for this
 * run, is bound and unlinked once per iteration like thaw-vmm does, and the
 * directory is removed at the end.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/clock.h"
#include "snapshot/state.h"
#include "vmm/builder.h"
#include "vmm/vm.h"

#define PROGRAM "thaw-bench-floor"
#define EXIT_ERROR 1
#define EXIT_USAGE 2
#define MAX_ITERATIONS 1000000

static const char usage[] =
	"usage: " PROGRAM " SNAPSHOT_DIR ITERATIONS [--page-in lazy|prefetch]\n"
	"\n"
	"Restores the snapshot in SNAPSHOT_DIR (state.bin, memory.img,\n"
	"pages.xxh3; e.g. $THAW_STATE_DIR/snapshots/ID) ITERATIONS times in\n"
	"this one process without running the guest, destroying each VM again:\n"
	"what every restore costs before the guest runs.  One line per\n"
	"iteration on stdout:\n"
	"\n"
	"  floor TOTAL_MS SETUP_MS STATE_MS\n"
	"\n"
	"  TOTAL_MS   builder_build(), from call to return (SETUP + STATE)\n"
	"  SETUP_MS   until state loading starts: state.bin read and checked,\n"
	"             memory.img mapped (and its working set prefetched), the\n"
	"             KVM VM with memory slots, irqchip and PIT, the devices\n"
	"             and the vCPUs created\n"
	"  STATE_MS   vCPU registers, irqchip, PIT, clock and device state\n"
	"             loaded from the snapshot\n"
	"\n"
	"  --page-in MODE  prefetch (default, as thaw-vmm: read the recorded\n"
	"                  working set first) or lazy (map only)\n"
	"\n"
	"Exit status: 0 done, 1 error (unreadable snapshot, no /dev/kvm),\n"
	"2 bad usage.\n";

static int usage_error(const char *what, const char *arg)
{
	fprintf(stderr, PROGRAM ": %s '%s' (see " PROGRAM " --help)\n", what,
		arg);
	return EXIT_USAGE;
}

/* Whether the snapshot in @dir has a virtio-vsock device to restore. */
static int snapshot_has_agent_channel(const char *dir, bool *has_channel)
{
	char path[PATH_MAX], err[512];
	struct state_reader r;
	size_t size;

	if (snprintf(path, sizeof(path), "%s/state.bin", dir) >=
	    (int)sizeof(path)) {
		fprintf(stderr, PROGRAM ": %s: path too long\n", dir);
		return -1;
	}
	if (state_reader_open(&r, path, err, sizeof(err)) < 0) {
		fprintf(stderr, PROGRAM ": %s\n", err);
		return -1;
	}
	*has_channel = state_find(&r, STATE_DEV_VSOCK, 0, &size) != NULL;
	state_reader_close(&r);
	return 0;
}

static double ms_between(uint64_t from_ns, uint64_t to_ns)
{
	return (double)(to_ns - from_ns) / NS_PER_MS;
}

static int measure(const struct vm_config *cfg, long iterations)
{
	struct vmm *vmm = malloc(sizeof(*vmm));

	if (!vmm) {
		fprintf(stderr, PROGRAM ": out of memory\n");
		return -1;
	}
	const struct vm *vm = &vmm->vm;
	for (long i = 0; i < iterations; i++) {
		uint64_t start_ns = monotonic_ns();
		int ret = builder_build(vmm, cfg, start_ns);
		uint64_t end_ns = monotonic_ns();

		if (ret == 0) {
			printf("floor %.3f %.3f %.3f\n",
			       ms_between(start_ns, end_ns),
			       ms_between(vm->created_ns, vm->restore_start_ns),
			       ms_between(vm->restore_start_ns,
					  vm->restored_ns));
			fflush(stdout);
		}
		builder_destroy(vmm);
		if (ret < 0) {
			fprintf(stderr,
				PROGRAM ": restoring %s failed in iteration "
					"%ld (see above)\n",
				cfg->restore_dir, i + 1);
			free(vmm);
			return -1;
		}
	}
	free(vmm);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "page-in", required_argument, NULL, 'P' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct vm_config cfg = {
		.nr_vcpus = 1, /* the snapshot's count replaces it */
		.pvm = PVM_AUTO,
		.console_fd = -1,
		.console_log_fd = -1,
		.page_in = PAGE_IN_PREFETCH,
		.vsock_fd = -1,
		.control_fd = -1,
		.pagemap_fd = -1,
	};
	char socket_dir[] = "/tmp/" PROGRAM ".XXXXXX";
	char socket_path[sizeof(socket_dir) + sizeof("/vsock.sock")];
	bool has_channel;
	struct stat st;
	char *end;
	int opt;

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
		switch (opt) {
		case 'P':
			if (page_in_mode_parse(optarg, &cfg.page_in))
				return usage_error(
					"--page-in takes lazy or prefetch, not",
					optarg);
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case ':':
			return usage_error("missing value of option",
					   argv[optind - 1]);
		default:
			return usage_error("unknown option", argv[optind - 1]);
		}
	}
	if (argc - optind != 2) {
		fputs(usage, stderr);
		return EXIT_USAGE;
	}
	cfg.restore_dir = argv[optind];
	errno = 0;
	long iterations = strtol(argv[optind + 1], &end, 10);
	if (errno || end == argv[optind + 1] || *end || iterations < 1 ||
	    iterations > MAX_ITERATIONS)
		return usage_error("ITERATIONS must be a number in 1..1000000, "
				   "not",
				   argv[optind + 1]);

	if (stat(cfg.restore_dir, &st) < 0) {
		fprintf(stderr, PROGRAM ": snapshot directory %s: %s\n",
			cfg.restore_dir, strerror(errno));
		return EXIT_ERROR;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr,
			PROGRAM ": snapshot directory %s: not a directory\n",
			cfg.restore_dir);
		return EXIT_ERROR;
	}
	if (snapshot_has_agent_channel(cfg.restore_dir, &has_channel) < 0)
		return EXIT_ERROR;
	if (has_channel) {
		if (!mkdtemp(socket_dir)) {
			fprintf(stderr, PROGRAM ": cannot create %s: %s\n",
				socket_dir, strerror(errno));
			return EXIT_ERROR;
		}
		snprintf(socket_path, sizeof(socket_path), "%s/vsock.sock",
			 socket_dir);
		cfg.vsock_path = socket_path;
	}

	int ret = measure(&cfg, iterations);
	if (has_channel && rmdir(socket_dir) < 0) {
		fprintf(stderr, PROGRAM ": cannot remove %s: %s\n", socket_dir,
			strerror(errno));
		ret = -1;
	}
	return ret < 0 ? EXIT_ERROR : 0;
}
