/* SPDX-License-Identifier: Apache-2.0 */
/*
 * default_kernel.h - finding thaw's own guest kernel when no --kernel is
 * given: guest-kernel policy, so it lives beside the script that builds
 * the kernel, a library the VMM and the pool side both link.
 *
 * The kernel is built from Debian's linux-source package by build.sh,
 * which caches the result under a hash of its inputs and prints the
 * vmlinux path as its last line.  Running the script every time keeps a
 * single owner for the cache key: a cache hit costs a few milliseconds of
 * hashing, a miss builds the kernel (minutes, once per machine) with
 * progress on stderr.
 *
 * Errors (common/errbuf.h): 0 or a negative errno (-ENOENT: the script's
 * answer is no kernel file; run_for_last_line()'s), with a message naming the
 * script in the caller's err buffer (when the script fails, it points at the
 * script's messages).  This file prints nothing itself; the script's own
 * progress and errors still reach stderr (common/subprocess.h).
 */
#ifndef THAW_GUEST_DEFAULT_KERNEL_H
#define THAW_GUEST_DEFAULT_KERNEL_H

#include <stddef.h>

/* Fills @path (of @size bytes) with the kernel's path. */
int default_kernel_path(char *path, size_t size, char *err, size_t errlen);

#endif
