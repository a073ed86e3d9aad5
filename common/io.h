/* SPDX-License-Identifier: Apache-2.0 */
/*
 * io.h - moving a whole buffer to or from a descriptor, the one I/O loop
 * the VMM (console copies), the CLI (agent frames, relayed output) and the
 * snapshot files share; and a listening Unix socket, which the VMM's
 * devices and its jail (bound before it is entered) both make; and a free
 * loopback TCP port, for the daemon's e2b_listen that test_e2b and
 * thaw-bench's e2b scenario give it.
 */
#ifndef THAW_COMMON_IO_H
#define THAW_COMMON_IO_H

#include <stddef.h>
#include <sys/types.h>

/* Writes all @len bytes, retrying on EINTR; 0, or a negative errno. */
int write_full(int fd, const void *buf, size_t len);

/* Writes all @len bytes at offset @off, as write_full(). */
int pwrite_full(int fd, const void *buf, size_t len, off_t off);

/*
 * Reads exactly @len bytes from offset @off, retrying on EINTR; 0, -EIO
 * when the file ends first, or a negative errno.
 */
int pread_full(int fd, void *buf, size_t len, off_t off);

/*
 * A SOCK_STREAM socket bound to @path and listening with @backlog;
 * @flags adds SOCK_NONBLOCK.  The descriptor (close-on-exec), or a negative
 * errno with nothing left behind but, after a failed listen, @path.
 */
int unix_listen(const char *path, int backlog, int flags);

/*
 * A TCP port no socket on 127.0.0.1 has now (the kernel's pick), for a
 * server about to be started on it; or a negative errno.
 */
int loopback_free_port(void);

#endif
