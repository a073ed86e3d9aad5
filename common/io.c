// SPDX-License-Identifier: Apache-2.0
/*
 * io.c - see io.h.
 */
#include "common/io.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum io_op { IO_WRITE, IO_PWRITE, IO_PREAD };

/*
 * The loop behind all three: a short transfer goes on where it stopped, and
 * one that moves nothing (end of file, a device taking no more) is -EIO
 * rather than a loop that never ends.  Only IO_PREAD stores through @p,
 * so the writers may hand in their const buffers.
 */
static int io_full(enum io_op op, int fd, uint8_t *p, size_t len, off_t off)
{
	while (len > 0) {
		ssize_t n = op == IO_WRITE    ? write(fd, p, len)
			    : op == IO_PWRITE ? pwrite(fd, p, len, off)
					      : pread(fd, p, len, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= n;
		off += n;
	}
	return 0;
}

int write_full(int fd, const void *buf, size_t len)
{
	return io_full(IO_WRITE, fd, (uint8_t *)buf, len, 0);
}

int pwrite_full(int fd, const void *buf, size_t len, off_t off)
{
	return io_full(IO_PWRITE, fd, (uint8_t *)buf, len, off);
}

int pread_full(int fd, void *buf, size_t len, off_t off)
{
	return io_full(IO_PREAD, fd, buf, len, off);
}

int unix_listen(const char *path, int backlog, int flags)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd, ret;

	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	strcpy(addr.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | flags, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(fd, backlog) < 0) {
		ret = -errno;
		close(fd);
		return ret;
	}
	return fd;
}

int loopback_free_port(void)
{
	struct sockaddr_in addr = { .sin_family = AF_INET,
				    .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(addr);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ret;

	if (fd < 0)
		return -errno;
	ret = bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
			      getsockname(fd, (struct sockaddr *)&addr, &len) <
				      0
		      ? -errno
		      : ntohs(addr.sin_port);
	close(fd);
	return ret;
}
