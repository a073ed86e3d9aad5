// SPDX-License-Identifier: Apache-2.0
/*
 * vmm_main.c - the thaw-vmm command: one process, one microVM.
 *
 * Parses and validates the command line, enters the jail, has the builder
 * (builder.h) make the VMM, runs it until the guest stops, and reports.
 * The exit status is the VM's (enum vm_status), so callers can tell a
 * clean guest shutdown from a crash or a VMM error without parsing text.
 *
 * A supervisor hears from thaw-vmm on one channel, the --ready-fd pipe:
 * a ready record once its sockets listen (with a restore's phases), a stop
 * record as it ends (status, reason, timings), in vmm_report.h's format.
 * Everything thaw-vmm says for people goes through common/log.h, one line
 * each, named "thaw-vmm" and, with --sandbox-id, the sandbox it runs; its
 * supervisor keeps these lines in the sandbox's vmm.log, where the last
 * ones are the reason the VM stopped and a "timings:" line, but reads
 * them back never.  Only --help and the guest's console (on stdout) are
 * not log lines.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/capfile.h"
#include "guest/kernel/default_kernel.h"
#include "common/guest_net.h"
#include "vmm/jail.h"
#include "common/log.h"
#include "snapshot/preopen.h"
#include "vmm/seccomp_filters.h"
#include "vmm/builder.h"
#include "vmm/vm.h"

static const char usage[] =
	"usage: thaw-vmm [--kernel PATH] --initrd PATH [--cmdline EXTRA]\n"
	"                [--mem MiB] [--vcpus N] [--console-log PATH]\n"
	"                [--log-max BYTES]\n"
	"                [--vsock PATH] [--control PATH] [--net-tap NAME]\n"
	"                [--pvm auto|on|off]\n"
	"                [--ready-fd FD] [--no-seccomp] [JAIL] [LOGGING]\n"
	"       thaw-vmm --restore DIR [--page-in prefetch|lazy]\n"
	"                [--console-log PATH] [--log-max BYTES]\n"
	"                [--vsock PATH] [--control PATH] [--net-tap NAME]\n"
	"                [--pvm auto|on|off] [--ready-fd FD] [--no-seccomp]\n"
	"                [JAIL] [LOGGING]\n"
	"\n"
	"Boots Linux in a KVM microVM, or restores one from a snapshot, copies\n"
	"its serial console to stdout and exits when the guest stops.\n"
	"\n"
	"  --kernel PATH       ELF vmlinux or bzImage (default: thaw's guest\n"
	"                      kernel, built and cached on first use)\n"
	"  --initrd PATH       initramfs (cpio archive)\n"
	"  --cmdline EXTRA     appended to the kernel command line\n"
	"  --mem MiB           guest memory, %u..%u (default %u)\n"
	"  --vcpus N           1..%d (default 1)\n"
	"  --console-log PATH  also write the console to PATH\n"
	"  --log-max BYTES     the most the console log, and stderr when it\n"
	"                      is a file, may hold (suffix K, M, G; default\n"
	"                      3M): the first third, a \"[thaw: N bytes\n"
	"                      dropped]\" line, and the latest bytes\n"
	"  --vsock PATH        add a virtio-vsock device (guest CID 3); host\n"
	"                      programs reach guest ports through the Unix\n"
	"                      socket PATH (\"CONNECT <port>\\n\")\n"
	"  --net-tap NAME      add a virtio-net device (eth0, " GUEST_NET_GUEST_ADDR_STR
	"/%d,\n"
	"                      gateway " GUEST_NET_GATEWAY_ADDR_STR
	") over the existing TAP NAME of\n"
	"                      the VMM's network namespace (--netns when\n"
	"                      jailed); a restore needs it exactly when the\n"
	"                      snapshot has a network device\n"
	"  --control PATH      serve the control socket PATH (lines: ping,\n"
	"                      status, pause, resume, snapshot DIR,\n"
	"                      checkpoint DIR, working-set FILE, stop)\n"
	"  --restore DIR       continue the machine saved in DIR (state.bin,\n"
	"                      memory.img, pages.xxh3; or memory.diff over\n"
	"                      the snapshot DIR/parent links to) instead of\n"
	"                      booting\n"
	"  --page-in MODE      restored memory: prefetch (default: read the\n"
	"                      recorded working set, DIR/workingset.bin, with\n"
	"                      io_uring first) or lazy (page by page on use)\n"
	"  --pvm MODE          KVM-on-PVM host: auto (detect), on, off; on\n"
	"                      one, the emulator's workarounds apply and a\n"
	"                      kernel with thaw's PVM-guest ELF note starts\n"
	"                      in PVM mode (runs natively)\n"
	"  --ready-fd FD       report to FD: a \"ready ...\" line once the VM\n"
	"                      is built and its sockets listen, so that a\n"
	"                      supervisor connects once instead of polling,\n"
	"                      and a \"stop status=N ... reason=...\" line as\n"
	"                      it ends\n"
	"  --no-seccomp        no system call filters (debugging only: by\n"
	"                      default each thread may make only the system\n"
	"                      calls it needs, and any other one kills the VMM\n"
	"                      by SIGSYS after a \"seccomp: forbidden system\n"
	"                      call\" line)\n"
	"\n"
	"JAIL: as root, lock the VMM in before it reads any file (thaw's\n"
	"supervisors always do; its PID namespace is theirs to make).\n"
	"  --jail DIR          an empty directory to become its root: only\n"
	"                      dev/kvm and, read-only, the kernel and initrd\n"
	"                      it needs (a snapshot's files are opened\n"
	"                      before); then no capabilities\n"
	"  --uid N --gid N     whom it runs as there (not 0)\n"
	"  --writable DIR      the one directory it may write (a snapshot's,\n"
	"                      a working set's); seen as " JAIL_OUT_DIR
	" inside\n"
	"  --netns FILE        the (empty) network namespace to join, as\n"
	"                      `ip netns` keeps them (default: a new one)\n"
	"\n"
	"LOGGING: thaw-vmm's own lines go to stderr, one per event.\n"
	"  --log-level LEVEL   the least severe kept: error, warning, info\n"
	"                      (default) or debug\n"
	"  --log-format FMT    text (default: time, \"thaw-vmm:\", message) or\n"
	"                      json (one object a line, for log collectors)\n"
	"  --sandbox-id ID     the sandbox this VM runs, named on every line\n"
	"\n"
	"Exit status: 0 guest stopped itself, 1 VMM error, 2 bad usage,\n"
	"3 guest crashed (panic, triple fault), 4 interrupted by a signal.\n";

static void print_usage(FILE *f)
{
	fprintf(f, usage, MEMORY_MIN_MIB, MEMORY_MAX_MIB, VM_DEFAULT_MEM_MIB,
		VM_MAX_VCPUS, GUEST_NET_PREFIX);
}

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt,
							     ...)
{
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s (see thaw-vmm --help)", msg);
	return VM_USAGE;
}

static int parse_number(const char *flag, const char *arg, long min, long max,
			long *out)
{
	char *end;

	errno = 0;
	long v = strtol(arg, &end, 10);
	if (errno || end == arg || *end) {
		log_error("%s '%s' is not a number", flag, arg);
		return -1;
	}
	if (v < min || v > max) {
		log_error("%s %ld is outside %ld..%ld", flag, v, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

/*
 * A VMM that ends before its machine runs: the stop record says why (the
 * error it logged, or a usage error's), when a supervisor listens.
 */
static int end_early(int ready_fd, int status)
{
	builder_report_stop(NULL, status, NULL, ready_fd);
	return status;
}

/*
 * Builds the threads' seccomp filters (seccomp_filters.h), which vm_run()
 * loads, or says loudly that there will be none.  0, or -1 after a message.
 */
static int start_filtering(bool seccomp, int console_log_fd, int report_fd)
{
	char err[256];

	if (!seccomp) {
		log_warning("--no-seccomp: NO SYSTEM CALL FILTERS; a guest "
			    "that breaks this VMM may make any system call "
			    "(debugging only)");
		return 0;
	}
	if (vmm_seccomp_prepare(console_log_fd, report_fd, err, sizeof(err)) <
	    0) {
		log_error("%s", err);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "kernel", required_argument, NULL, 'k' },
		{ "initrd", required_argument, NULL, 'i' },
		{ "cmdline", required_argument, NULL, 'c' },
		{ "mem", required_argument, NULL, 'm' },
		{ "vcpus", required_argument, NULL, 'n' },
		{ "console-log", required_argument, NULL, 'l' },
		{ "log-max", required_argument, NULL, 'X' },
		{ "pvm", required_argument, NULL, 'p' },
		{ "vsock", required_argument, NULL, 'v' },
		{ "control", required_argument, NULL, 'C' },
		{ "net-tap", required_argument, NULL, 'T' },
		{ "restore", required_argument, NULL, 'r' },
		{ "page-in", required_argument, NULL, 'P' },
		{ "log-level", required_argument, NULL, 'L' },
		{ "log-format", required_argument, NULL, 'F' },
		{ "sandbox-id", required_argument, NULL, 'S' },
		{ "ready-fd", required_argument, NULL, 'R' },
		{ "no-seccomp", no_argument, NULL, 's' },
		{ "jail", required_argument, NULL, 'J' },
		{ "uid", required_argument, NULL, 'U' },
		{ "gid", required_argument, NULL, 'G' },
		{ "writable", required_argument, NULL, 'W' },
		{ "netns", required_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	uint64_t start_ns = monotonic_ns();
	struct vm_config cfg = {
		.mem_mib = VM_DEFAULT_MEM_MIB,
		.nr_vcpus = 1,
		.pvm = PVM_AUTO,
		.console_fd = STDOUT_FILENO,
		.console_log_fd = -1,
		.log_max = CAPFILE_DEFAULT_MAX,
		.page_in = PAGE_IN_PREFETCH,
		.vsock_fd = -1,
		.control_fd = -1,
		.pagemap_fd = -1,
		.net_tap_fd = -1,
	};
	struct jail jail = { 0 };
	bool boot_flags = false; /* flags that only make sense for a boot */
	bool seccomp = true;
	const char *console_log = NULL;
	int ready_fd = -1;
	int usage = 0; /* the first usage error's status */
	char kernel[PATH_MAX], err[256];
	long n;
	int opt;

	log_set_program("thaw-vmm");
	/* A reader that goes away (of a socket, of the report pipe) must not
	 * kill the VMM mid-guest. */
	signal(SIGPIPE, SIG_IGN);
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
		/* After a usage error, only where to report it matters. */
		if (usage && opt != 'R')
			continue;
		switch (opt) {
		case 'k':
			boot_flags = true;
			cfg.kernel_path = optarg;
			break;
		case 'i':
			boot_flags = true;
			cfg.initrd_path = optarg;
			break;
		case 'c':
			boot_flags = true;
			cfg.cmdline_extra = optarg;
			break;
		case 'm':
			if (parse_number("--mem", optarg, MEMORY_MIN_MIB,
					 MEMORY_MAX_MIB, &n) < 0) {
				usage = VM_USAGE;
				break;
			}
			cfg.mem_mib = n;
			boot_flags = true;
			break;
		case 'n':
			if (parse_number("--vcpus", optarg, 1, VM_MAX_VCPUS,
					 &n) < 0) {
				usage = VM_USAGE;
				break;
			}
			cfg.nr_vcpus = n;
			boot_flags = true;
			break;
		case 'l':
			console_log = optarg;
			break;
		case 'X':
			if (capfile_parse_max(optarg, &cfg.log_max, err,
					      sizeof(err)) < 0)
				usage = usage_error("--log-max: %s", err);
			break;
		case 'p':
			if (!strcmp(optarg, "auto"))
				cfg.pvm = PVM_AUTO;
			else if (!strcmp(optarg, "on"))
				cfg.pvm = PVM_ON;
			else if (!strcmp(optarg, "off"))
				cfg.pvm = PVM_OFF;
			else
				usage = usage_error(
					"--pvm takes auto, on or off, not '%s'",
					optarg);
			break;
		case 'v':
			cfg.vsock_path = optarg;
			break;
		case 'C':
			cfg.control_path = optarg;
			break;
		case 'T':
			cfg.net_tap = optarg;
			break;
		case 'r':
			cfg.restore_dir = optarg;
			break;
		case 'P':
			if (page_in_mode_parse(optarg, &cfg.page_in))
				usage = usage_error(
					"--page-in takes prefetch or "
					"lazy, not '%s'",
					optarg);
			break;
		case 'L':
			if (log_set_level(optarg, err, sizeof(err)) < 0)
				usage = usage_error("%s", err);
			break;
		case 'F':
			if (log_set_format(optarg, err, sizeof(err)) < 0)
				usage = usage_error("%s", err);
			break;
		case 'S':
			log_set_sandbox(optarg);
			break;
		case 'R':
			if (parse_number("--ready-fd", optarg, 0, INT_MAX,
					 &n)) {
				usage = VM_USAGE;
				break;
			}
			/* Not inherited: a helper we spawn (the kernel
			 * build) must not hold the supervisor's EOF back. */
			if (fcntl((int)n, F_SETFD, FD_CLOEXEC) < 0) {
				usage = usage_error("--ready-fd %ld is not an "
						    "open file descriptor",
						    n);
				break;
			}
			ready_fd = (int)n;
			break;
		case 's':
			seccomp = false;
			break;
		case 'J':
			jail.root = optarg;
			break;
		case 'U':
			if (parse_number("--uid", optarg, 1, JAIL_ID_MAX, &n)) {
				usage = VM_USAGE;
				break;
			}
			jail.uid = (uid_t)n;
			break;
		case 'G':
			if (parse_number("--gid", optarg, 1, JAIL_ID_MAX, &n)) {
				usage = VM_USAGE;
				break;
			}
			jail.gid = (gid_t)n;
			break;
		case 'W':
			jail.writable = optarg;
			break;
		case 'N':
			jail.netns = optarg;
			break;
		case 'h':
			print_usage(stdout);
			return 0;
		case ':':
			usage = usage_error("option '%s' needs a value",
					    argv[optind - 1]);
			break;
		default:
			usage = usage_error("unknown option '%s'",
					    argv[optind - 1]);
			break;
		}
	}
	if (usage)
		return end_early(ready_fd, usage);
	if (optind < argc)
		return end_early(
			ready_fd,
			usage_error("unexpected argument '%s'", argv[optind]));
	if (cfg.restore_dir && boot_flags)
		return end_early(
			ready_fd,
			usage_error("--restore takes the machine from the "
				    "snapshot: leave out --kernel, --initrd, "
				    "--cmdline, --mem and --vcpus"));
	if (!cfg.restore_dir && !cfg.initrd_path)
		return end_early(ready_fd, usage_error("--initrd is required"));
	if ((jail.root || jail.writable) && (!jail.uid || !jail.gid))
		return end_early(ready_fd,
				 usage_error("--jail needs --uid and --gid"));
	if ((jail.uid || jail.gid || jail.writable || jail.netns) && !jail.root)
		return end_early(
			ready_fd,
			usage_error(
				"--uid, --gid, --writable and --netns need --jail"));
	/* A jail without --netns makes an empty namespace: no TAP there. */
	if (cfg.net_tap && jail.root && !jail.netns)
		return end_early(
			ready_fd,
			usage_error("--net-tap with --jail needs --netns: the "
				    "TAP is looked up in that namespace"));
	if (jail.root && !cfg.restore_dir && !cfg.kernel_path)
		return end_early(
			ready_fd,
			usage_error("--jail needs --kernel: the default kernel "
				    "is built outside the jail"));
	/* A guest's device errors lengthen the log: bounded, from here. */
	if (log_set_max(cfg.log_max, err, sizeof(err)) < 0) {
		log_error("stderr: %s", err);
		return end_early(ready_fd, VM_ERROR);
	}

	/* The snapshot's files are their owner's alone (0600): a jailed VMM
	 * reads them through descriptors opened now (preopen.h). */
	if (cfg.restore_dir &&
	    snapshot_files_preopen(cfg.restore_dir, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return end_early(ready_fd, VM_ERROR);
	}
	if (console_log) {
		/* The guest's output: its secrets too, for its owner only. */
		cfg.console_log_fd = open(console_log,
					  O_WRONLY | O_CREAT | O_TRUNC |
						  O_CLOEXEC | O_NOFOLLOW,
					  0600);
		if (cfg.console_log_fd < 0) {
			log_error("console log %s: %s", console_log,
				  strerror(errno));
			return end_early(ready_fd, VM_ERROR);
		}
	}
	if (!cfg.restore_dir && !cfg.kernel_path) {
		char err[512];

		if (default_kernel_path(kernel, sizeof(kernel), err,
					sizeof(err)) < 0) {
			log_error("%s", err);
			return end_early(ready_fd, VM_ERROR);
		}
		cfg.kernel_path = kernel;
		start_ns = monotonic_ns(); /* a kernel build is not VM setup */
	}
	/* Half in a jail, exit handlers would find no /proc (below). */
	if (jail.root && jail_enter(&jail, &cfg, ready_fd) < 0)
		_exit(end_early(ready_fd, VM_ERROR));

	struct vmm *vmm = malloc(sizeof(*vmm));
	if (!vmm) {
		log_error("out of memory");
		return end_early(ready_fd, VM_ERROR);
	}
	int status;
	if (builder_build(vmm, &cfg, start_ns) < 0 ||
	    (jail.root && jail_limit_file_size(vmm->vm.mem.size) < 0) ||
	    start_filtering(seccomp, cfg.console_log_fd, ready_fd) < 0) {
		status = end_early(ready_fd, VM_ERROR);
	} else {
		int ret = builder_report_ready(&vmm->vm, ready_fd);

		if (ret < 0)
			log_warning("--ready-fd %d: %s", ready_fd,
				    strerror(-ret));
		status = vm_run(&vmm->vm);
		builder_report_stop(&vmm->vm, status, vmm->vm.reason, ready_fd);
	}
	builder_destroy(vmm);
	free(vmm);
	if (ready_fd >= 0)
		close(ready_fd);
	if (cfg.console_log_fd >= 0)
		close(cfg.console_log_fd);
	/* Exit handlers (a sanitizer's leak check) need /proc, which a jail
	 * lacks, and calls no seccomp list has; nothing is left to flush. */
	if (jail.root || vmm_seccomp_enabled())
		_exit(status);
	return status;
}
