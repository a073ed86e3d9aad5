// SPDX-License-Identifier: Apache-2.0
/*
 * jail.c - see jail.h.  The order matters: everything that needs root or
 * the host's paths (mounts, the device node, sockets, /proc, /sys) comes
 * before the pivot; the identity change comes last, with securebits locked
 * first so that no later step can win a capability back.
 */
#include "vmm/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <linux/securebits.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "vmm/control.h"
#include "common/io.h"
#include "common/log.h"
#include "vmm/vm.h"
#include "vmm/x86/pvm.h"

#define KVM_DEVICE "/dev/kvm"
/* Room for a handful of mount points and dev/kvm, nothing to store. */
#define JAIL_TMPFS_OPTIONS "size=64k,nr_inodes=32,mode=0755"
/* vCPU, vsock and control threads and the main one, with room. */
#define JAIL_MAX_THREADS 32
/* Guest vCPUs, eventfds, vsock connections (devices/vsock.h), logs. */
#define JAIL_MAX_FILES 512
/* A snapshot's state.bin and working set beside memory.img. */
#define JAIL_FILE_SLACK (64ULL << 20)

static int fail(const char *step, const char *path)
{
	log_error("jail: %s%s%s: %s", step, path ? " " : "", path ? path : "",
		  strerror(errno));
	return -1;
}

/* @root/@name, into @out. */
static int inside(char *out, size_t size, const char *root, const char *name)
{
	if ((size_t)snprintf(out, size, "%s%s", root, name) >= size) {
		errno = ENAMETOOLONG;
		return fail("path", root);
	}
	return 0;
}

/*
 * Binds host @source, the VM's @what, at @name in the jail, read-only
 * unless @writable, never with devices, set-uid programs or executables.
 */
static int bind_into(const char *root, const char *what, const char *source,
		     const char *name, bool writable)
{
	unsigned long flags = MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV |
			      MS_NOEXEC | (writable ? 0 : MS_RDONLY);
	char target[PATH_MAX];
	struct stat st;
	int fd;

	if (inside(target, sizeof(target), root, name) < 0)
		return -1;
	/* As the VM would have said it without a jail. */
	if (stat(source, &st) < 0) {
		log_error("%s %s: %s", what, source, strerror(errno));
		return -1;
	}
	if (S_ISDIR(st.st_mode)) {
		if (mkdir(target, 0755) < 0)
			return fail("mkdir", target);
	} else {
		fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			  0644);
		if (fd < 0)
			return fail("create", target);
		close(fd);
	}
	if (mount(source, target, NULL, MS_BIND, NULL) < 0)
		return fail("bind", source);
	if (mount(NULL, target, NULL, flags, NULL) < 0)
		return fail("remount", target);
	return 0;
}

/* A /dev/kvm node of the jail's own: the host's stays root's. */
static int make_kvm_node(const struct jail *j)
{
	char dev[PATH_MAX], node[PATH_MAX];
	struct stat st;

	if (stat(KVM_DEVICE, &st) < 0)
		return fail("", KVM_DEVICE);
	if (inside(dev, sizeof(dev), j->root, "/dev") < 0 ||
	    inside(node, sizeof(node), j->root, "/dev/kvm") < 0)
		return -1;
	if (mkdir(dev, 0755) < 0)
		return fail("mkdir", dev);
	if (mknod(node, S_IFCHR | 0600, st.st_rdev) < 0)
		return fail("mknod", node);
	if (chown(node, j->uid, j->gid) < 0)
		return fail("chown", node);
	return 0;
}

/* The jail's tree, still seen from the host's root. */
static int build_root(const struct jail *j, struct vm_config *cfg, int netns_fd)
{
	if (unshare(CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS |
		    CLONE_NEWCGROUP | (netns_fd < 0 ? CLONE_NEWNET : 0)) < 0)
		return fail("unshare", NULL);
	if (netns_fd >= 0 && setns(netns_fd, CLONE_NEWNET) < 0)
		return fail("setns", j->netns);
	/* The TAP is the namespace's, and /dev/net/tun is gone below. */
	if (cfg->net_tap) {
		cfg->net_tap_fd = net_tap_open(cfg->net_tap);
		if (cfg->net_tap_fd < 0)
			return -1;
	}
	/* Nothing we mount may show up in the host's namespace. */
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return fail("make / private", NULL);
	if (mount("thaw-jail", j->root, "tmpfs", MS_NOSUID | MS_NOEXEC,
		  JAIL_TMPFS_OPTIONS) < 0)
		return fail("tmpfs on", j->root);
	if (cfg->kernel_path) {
		if (bind_into(j->root, "kernel", cfg->kernel_path, "/kernel",
			      false) < 0)
			return -1;
		cfg->kernel_path = "/kernel";
	}
	if (cfg->initrd_path) {
		if (bind_into(j->root, "initrd", cfg->initrd_path, "/initrd",
			      false) < 0)
			return -1;
		cfg->initrd_path = "/initrd";
	}
	/* A snapshot's files are no one else's (0600): not bound, but
	 * opened before (snapshot/preopen.h). */
	if (j->writable) {
		if (chown(j->writable, j->uid, j->gid) < 0)
			return fail("chown", j->writable);
		if (bind_into(j->root, "writable directory", j->writable,
			      JAIL_OUT_DIR, true) < 0)
			return -1;
		cfg->writable_dir = j->writable;
	}
	return make_kvm_node(j);
}

/*
 * /proc/self/pagemap, opened without CAP_SYS_ADMIN in effect: the kernel
 * decides at open whether reads show physical frame numbers, which the
 * working set does not need and a broken VMM must not learn.
 */
static int open_pagemap(struct vm_config *cfg)
{
	struct __user_cap_header_struct header = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct caps[_LINUX_CAPABILITY_U32S_3];
	uint32_t effective;

	if (syscall(SYS_capget, &header, caps) < 0)
		return fail("capget", NULL);
	effective = caps[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective;
	caps[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective &=
		~CAP_TO_MASK(CAP_SYS_ADMIN);
	if (syscall(SYS_capset, &header, caps) < 0)
		return fail("capset", NULL);
	cfg->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	int open_errno = errno;
	caps[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective = effective;
	if (syscall(SYS_capset, &header, caps) < 0)
		return fail("capset", NULL);
	errno = open_errno;
	if (cfg->pagemap_fd < 0)
		return fail("", "/proc/self/pagemap");
	return 0;
}

/* What the VMM keeps of the host: bound or opened now, used as fds. */
static int open_outside(struct vm_config *cfg)
{
	if (cfg->vsock_path) {
		cfg->vsock_fd = unix_listen(cfg->vsock_path, SOMAXCONN, 0);
		if (cfg->vsock_fd < 0) {
			errno = -cfg->vsock_fd;
			return fail("vsock socket", cfg->vsock_path);
		}
	}
	if (cfg->control_path) {
		cfg->control_fd =
			unix_listen(cfg->control_path, CONTROL_MAX_CLIENTS, 0);
		if (cfg->control_fd < 0) {
			errno = -cfg->control_fd;
			return fail("control socket", cfg->control_path);
		}
	}
	if (open_pagemap(cfg) < 0)
		return -1;
	if (cfg->pvm == PVM_AUTO)
		cfg->pvm = pvm_host_detected() ? PVM_ON : PVM_OFF;
	return 0;
}

static int pivot_into(const char *root)
{
	if (chdir(root) < 0)
		return fail("chdir", root);
	if (syscall(SYS_pivot_root, ".", ".") == 0) {
		/* The host's tree is stacked under ours: drop it. */
		if (umount2(".", MNT_DETACH) < 0)
			return fail("detach the host's root", NULL);
	} else if (errno == EINVAL) {
		/* An initramfs root cannot be pivoted away from (the
		 * emulated test host's): move ours over it instead. */
		if (mount(".", "/", NULL, MS_MOVE, NULL) < 0 || chroot(".") < 0)
			return fail("move the root to /", root);
	} else {
		return fail("pivot_root into", root);
	}
	if (chdir("/") < 0)
		return fail("chdir", "/");
	if (mount(NULL, "/", NULL,
		  MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NOEXEC, NULL) < 0)
		return fail("remount / read-only", NULL);
	return 0;
}

static int limit(int resource, const char *name, rlim_t value)
{
	struct rlimit r = { value, value };

	if (setrlimit(resource, &r) < 0)
		return fail("setrlimit", name);
	return 0;
}

static int become(const struct jail *j)
{
	struct __user_cap_header_struct header = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = { 0 };

	if (limit(RLIMIT_CORE, "RLIMIT_CORE", 0) < 0 ||
	    limit(RLIMIT_NOFILE, "RLIMIT_NOFILE", JAIL_MAX_FILES) < 0 ||
	    limit(RLIMIT_NPROC, "RLIMIT_NPROC", JAIL_MAX_THREADS) < 0)
		return -1;
	/* Root's uid 0 will never grant capabilities again, locked. */
	if (prctl(PR_SET_SECUREBITS,
		  SECBIT_NOROOT | SECBIT_NOROOT_LOCKED |
			  SECBIT_NO_SETUID_FIXUP |
			  SECBIT_NO_SETUID_FIXUP_LOCKED |
			  SECBIT_KEEP_CAPS_LOCKED |
			  SECBIT_NO_CAP_AMBIENT_RAISE |
			  SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED,
		  0, 0, 0) < 0)
		return fail("securebits", NULL);
	for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0)
			return fail("drop from the bounding set", NULL);
	if (setgroups(0, NULL) < 0)
		return fail("setgroups", NULL);
	if (setresgid(j->gid, j->gid, j->gid) < 0)
		return fail("setresgid", NULL);
	if (setresuid(j->uid, j->uid, j->uid) < 0)
		return fail("setresuid", NULL);
	/* With NO_SETUID_FIXUP the sets survived the uid change: clear. */
	if (syscall(SYS_capset, &header, none) < 0)
		return fail("capset", NULL);
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return fail("clear ambient capabilities", NULL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail("no_new_privs", NULL);
	/* Proof, not hope: root must be out of reach now. */
	if (setuid(0) == 0 || geteuid() == 0) {
		errno = EPERM;
		return fail("still able to become root", NULL);
	}
	return 0;
}

/* The uid change cleared the parent-death signal: arm it again. */
static int keep_dying_with(int supervisor_fd)
{
	struct pollfd p = { .fd = supervisor_fd, .events = 0 };

	if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
		return fail("PR_SET_PDEATHSIG", NULL);
	/* A pipe's writer sees POLLERR once its reader is gone. */
	if (supervisor_fd >= 0 && poll(&p, 1, 0) == 1 &&
	    (p.revents & POLLERR)) {
		errno = ESRCH;
		return fail("the supervisor is gone", NULL);
	}
	return 0;
}

int jail_enter(const struct jail *j, struct vm_config *cfg, int supervisor_fd)
{
	if (j->uid == 0 || j->gid == 0) {
		errno = EINVAL;
		return fail("the uid and gid must not be root's", NULL);
	}
	if (geteuid() != 0) {
		errno = EPERM;
		return fail("setting up a jail needs root (--no-jail to debug)",
			    NULL);
	}
	int netns_fd = -1, ret = -1;

	if (j->netns) {
		netns_fd = open(j->netns, O_RDONLY | O_CLOEXEC);
		if (netns_fd < 0)
			return fail("", j->netns);
	}
	if (open_outside(cfg) == 0 && build_root(j, cfg, netns_fd) == 0 &&
	    pivot_into(j->root) == 0 && become(j) == 0 &&
	    keep_dying_with(supervisor_fd) == 0)
		ret = 0;
	if (netns_fd >= 0)
		close(netns_fd);
	return ret;
}

int jail_limit_file_size(uint64_t guest_bytes)
{
	/* EFBIG from write() beats dying of SIGXFSZ mid-snapshot. */
	signal(SIGXFSZ, SIG_IGN);
	return limit(RLIMIT_FSIZE, "RLIMIT_FSIZE",
		     guest_bytes + JAIL_FILE_SLACK);
}

int jail_inside_path(const char *writable, const char *host_path, char *out,
		     size_t size, char *err, size_t errlen)
{
	size_t n = writable ? strlen(writable) : 0;
	const char *rest = host_path + n;

	if (!writable) {
		if ((size_t)snprintf(out, size, "%s", host_path) < size)
			return 0;
	} else if (strncmp(host_path, writable, n) || (*rest && *rest != '/') ||
		   strstr(rest, "/..")) {
		snprintf(err, errlen,
			 "%s is outside the jail's writable directory %s",
			 host_path, writable);
		return -1;
	} else if ((size_t)snprintf(out, size, "%s%s", JAIL_OUT_DIR, rest) <
		   size) {
		return 0;
	}
	snprintf(err, errlen, "%s: path too long", host_path);
	return -1;
}
