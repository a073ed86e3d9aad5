// SPDX-License-Identifier: Apache-2.0
/*
 * agent_client.c - see agent_client.h.
 */
#include "agent_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "io.h"

/* Longest answer to CONNECT we accept: "OK " and a port number. */
#define HANDSHAKE_LINE_MAX 32

/* Byte by byte: nothing after the newline may be consumed. */
static int read_line(int fd, char *line, size_t size)
{
	size_t len = 0;

	while (len + 1 < size) {
		ssize_t n = read(fd, line + len, 1);

		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		if (line[len] == '\n') {
			line[len] = '\0';
			return 0;
		}
		len++;
	}
	return -EPROTO;
}

int agent_connect(struct agent_conn *c, const char *vsock_path, char *err,
		  size_t errlen)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char line[HANDSHAKE_LINE_MAX];
	int ret;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	if (strlen(vsock_path) >= sizeof(addr.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", vsock_path);
		return -ENAMETOOLONG;
	}
	strcpy(addr.sun_path, vsock_path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -errno;
	}
	if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		ret = errno == ENOENT || errno == ECONNREFUSED ? -EAGAIN
							       : -errno;
		snprintf(err, errlen, "%s: %s", vsock_path, strerror(errno));
		goto fail;
	}
	ret = write_full(c->fd, "CONNECT 1024\n", 13);
	if (ret == 0)
		ret = read_line(c->fd, line, sizeof(line));
	if (ret == -ECONNRESET) { /* the guest has no listener yet */
		snprintf(err, errlen, "agent not listening yet");
		ret = -EAGAIN;
		goto fail;
	}
	if (ret == 0 && strncmp(line, "OK ", 3) != 0)
		ret = -EPROTO;
	if (ret < 0) {
		snprintf(err, errlen, "vsock handshake on %s: %s", vsock_path,
			 strerror(-ret));
		goto fail;
	}

	ret = thaw_reader_init(&c->reader);
	if (ret < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	struct thaw_frame f;
	struct thaw_msg m;
	char why[128];

	ret = agent_next_frame(c, &f);
	if (ret == 0 && f.h.type != THAW_HELLO)
		ret = -EPROTO;
	if (ret == 0)
		ret = thaw_parse_type(&m, f.h.type, f.payload, f.payload_len,
				      why, sizeof(why));
	if (ret < 0) {
		snprintf(err, errlen, "agent greeting: %s", strerror(-ret));
		goto fail;
	}
	uint32_t version = thaw_get_u32(&m, THAW_T_VERSION, 0);
	if (version != THAW_PROTOCOL_VERSION) {
		snprintf(err, errlen, "agent speaks protocol %u, we speak %u",
			 version, THAW_PROTOCOL_VERSION);
		ret = -EPROTO;
		goto fail;
	}
	thaw_get_str(&m, THAW_T_AGENT_VERSION, c->agent_version,
		     sizeof(c->agent_version));
	return 0;
fail:
	agent_close(c);
	return ret;
}

int agent_exec(struct agent_conn *c, uint32_t id, char *const argv[],
	       uint32_t timeout_ms)
{
	size_t cap = THAW_MAX_FRAME;
	uint8_t *buf = malloc(cap);
	struct thaw_writer w;

	if (!buf)
		return -ENOMEM;
	thaw_writer_init(&w, buf, cap, id, THAW_EXEC, 0);
	for (int i = 0; argv[i]; i++)
		thaw_put_str(&w, THAW_T_ARGV, argv[i]);
	thaw_put_str(&w, THAW_T_CWD, "/");
	if (timeout_ms)
		thaw_put_u32(&w, THAW_T_TIMEOUT_MS, timeout_ms);
	int len = thaw_writer_finish(&w);
	int ret = len < 0 ? len : write_full(c->fd, buf, len);
	free(buf);
	return ret;
}

int agent_next_frame(struct agent_conn *c, struct thaw_frame *f)
{
	for (;;) {
		int ret = thaw_reader_read(&c->reader, c->fd, f);

		switch (ret) {
		case THAW_READ_FRAME:
			return 0;
		case THAW_READ_AGAIN:
			continue;
		case THAW_READ_EOF:
			return -EPIPE;
		case THAW_READ_OVERSIZED:
		case THAW_READ_RUNT:
			return -EPROTO;
		default:
			return ret < 0 ? ret : -EPROTO;
		}
	}
}

void agent_close(struct agent_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	thaw_reader_free(&c->reader);
}
