/* SPDX-License-Identifier: Apache-2.0 */
/*
 * io.h - writing a whole buffer to a descriptor, the one I/O loop the VMM
 * (console copies) and the CLI (agent frames, relayed output) share.
 */
#ifndef THAW_COMMON_IO_H
#define THAW_COMMON_IO_H

#include <stddef.h>

/* Writes all @len bytes, retrying on EINTR; 0, or a negative errno. */
int write_full(int fd, const void *buf, size_t len);

#endif
