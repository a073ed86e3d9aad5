/* SPDX-License-Identifier: Apache-2.0 */
/*
 * default_kernel.h - finding thaw's own guest kernel when no --kernel is
 * given.
 *
 * The kernel is built from Debian's linux-source package by
 * guest/kernel/build.sh, which caches the result under a hash of its inputs
 * and prints the vmlinux path as its last line.  Running the script every
 * time keeps a single owner for the cache key: a cache hit costs a few
 * milliseconds of hashing, a miss builds the kernel (minutes, once per
 * machine) with progress on stderr.
 */
#ifndef THAW_COMMON_DEFAULT_KERNEL_H
#define THAW_COMMON_DEFAULT_KERNEL_H

#include <stddef.h>

/* Fills @path (of @size bytes); returns 0, or -1 after an error line. */
int default_kernel_path(char *path, size_t size);

#endif
