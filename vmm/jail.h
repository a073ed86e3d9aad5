/* SPDX-License-Identifier: Apache-2.0 */
/*
 * jail.h - thaw-vmm locking itself in before it reads a snapshot or a
 * kernel: the wall between a hostile guest that broke the VMM and the host.
 *
 * thaw-vmm starts as root, in a PID namespace and cgroup its supervisor
 * made (pool/host/jail_ids.h picks the uid and gid).  jail_enter() then, still
 * able to: joins the empty network namespace it is given (or makes one);
 * unshares mount, IPC, UTS and cgroup namespaces; mounts a tiny
 * tmpfs on the empty directory @root; gives it dev/kvm (a device node of
 * its own, owned by the jail's uid, mode 0600) and binds read-only the
 * files this VM reads: /kernel and /initrd for a boot, and read-write
 * /out, the one directory a snapshot or a working set may be written to;
 * pivots into it and detaches the host's tree; makes the tmpfs read-only;
 * and becomes the jail's uid and gid with no capability in any set
 * (bounding set included), securebits locked, no new privileges, no core
 * dumps, few files and processes.
 *
 * What the VMM needs of the host beyond that is opened first and kept as
 * descriptors: its log and console log, a restore's snapshot files (their
 * owner's alone, mode 0600: main() opens them before the jail, see
 * snapshot/preopen.h), its two listening sockets (their
 * paths are in the supervisor's run directory, which the jail does not
 * show), its TAP (net_tap: opened right after joining the namespace,
 * where the TAP is), /proc/self/pagemap for recording a working set, and the
 * PVM detection, which reads /sys.  A guest-initiated vsock connection looks
 * for a host socket by path, which no path in the jail names: it is
 * refused.
 *
 * Changing uid clears the parent-death signal; it is armed again and the
 * supervisor's end of --ready-fd checked, so a VMM whose supervisor died
 * meanwhile does not live on.
 */
#ifndef THAW_VMM_JAIL_H
#define THAW_VMM_JAIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct vm_config;

/* The largest uid or gid a jail takes ((uid_t)-1 means "none"). */
#define JAIL_ID_MAX 4294967294L

/* Where the writable directory is inside the jail. */
#define JAIL_OUT_DIR "/out"

struct jail {
	const char *root;     /* empty directory to become "/" */
	uid_t uid;	      /* not 0 */
	gid_t gid;	      /* not 0 */
	const char *writable; /* host directory seen as JAIL_OUT_DIR, or NULL */
	const char *netns;    /* network namespace to join; NULL: a new one */
};

/*
 * Enters jail @j: @cfg's kernel, initrd and restore paths are bound into
 * it and rewritten to their names inside; its sockets and pagemap are
 * opened first (cfg->*_fd), PVM detection resolved.  @supervisor_fd is a
 * pipe end whose reader is the supervisor (-1: none).  0, or -1 after one
 * error line (log.h) naming the step and path.
 */
int jail_enter(const struct jail *j, struct vm_config *cfg, int supervisor_fd);

/*
 * Caps the size of any file the VMM writes (a snapshot's memory.img is the
 * biggest) to @guest_bytes plus room for the rest, so a runaway writer
 * cannot fill the disk.  Writes past it fail with EFBIG instead of killing
 * the VMM.
 */
int jail_limit_file_size(uint64_t guest_bytes);

/*
 * The path inside the jail of @host_path, which must be the writable
 * directory or under it: "/out/..." into @out.  Unjailed (@writable NULL)
 * @host_path is used as is.  0, or -1 with @err saying why.
 */
int jail_inside_path(const char *writable, const char *host_path, char *out,
		     size_t size, char *err, size_t errlen);

#endif
