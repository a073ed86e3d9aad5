// SPDX-License-Identifier: Apache-2.0
/*
 * io.c - see io.h.
 */
#include "io.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

int write_full(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= n;
	}
	return 0;
}
