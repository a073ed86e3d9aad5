// SPDX-License-Identifier: Apache-2.0
/*
 * hostile_agent.c - a guest's PID 1 that speaks guest/PROTOCOL.md just well
 * enough to be built into a template and handed out (HELLO, CLONE, PING),
 * then does to the host what a guest with root could: test_daemon_hostile's
 * hostile suite boots it (hostile.cpio) beside the real agent and checks
 * that the daemon keeps serving, ends every request by its deadline and
 * stops in seconds.  Per request:
 *
 *	EXEC half-frame		sends half a frame header, then nothing
 *	EXEC flood		endless STDOUT
 *	EXEC anything else	exits 0 at once
 *	READ_FILE /padded	endless empty DATA, padded with an unknown
 *				field to 60 KiB
 *	READ_FILE /foreign	endless DATA of another request id
 *	READ_FILE anything else	endless DATA
 *	WRITE_FILE, or a frame	the connection stops reading: the host's
 *	over 128 KiB (an EXEC	writes fill its buffers
 *	with large stdin)
 *	KILL			ignored
 *
 * One process per connection (forked), so a connection stuck on purpose
 * leaves the others served.  Not the product agent, and built only for the
 * tests: static, like thaw-agent.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "guest/protocol.h"

/* Frames longer than this are never read: the guest that stops reading. */
#define NOREAD_OVER (128u << 10)
#define FLOOD_CHUNK (60u << 10)

static uint8_t frame[THAW_MAX_FRAME];

static int read_full(int fd, void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n <= 0 && !(n < 0 && errno == EINTR))
			return -1;
		if (n > 0) {
			p += n;
			len -= (size_t)n;
		}
	}
	return 0;
}

static void send_all(int fd, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			_exit(0); /* the host hung up */
		p += n;
		len -= (size_t)n;
	}
}

/* Builds frames in the one buffer: begin, thaw_put_*, then send_frame. */
static struct thaw_writer out;

static void begin(uint32_t id, uint16_t type)
{
	thaw_writer_init(&out, frame, sizeof(frame), id, type, 0);
}

static void send_frame(int fd)
{
	int n = thaw_writer_finish(&out);

	if (n > 0)
		send_all(fd, frame, (size_t)n);
}

static void silence(void)
{
	for (;;)
		pause();
}

static void endless(int fd, uint32_t id, uint16_t type)
{
	static uint8_t junk[FLOOD_CHUNK];

	memset(junk, 'x', sizeof(junk));
	for (;;) {
		begin(id, type);
		thaw_put_bytes(&out, THAW_T_DATA, junk, sizeof(junk));
		send_frame(fd);
	}
}

/* A field no schema has: parsers skip it, the frame still crosses. */
#define PAD_TAG 999

static void read_file(int fd, uint32_t id, const struct thaw_msg *m)
{
	static uint8_t junk[FLOOD_CHUNK];
	char path[64] = "";

	thaw_get_str(m, THAW_T_PATH, path, sizeof(path));
	if (!strcmp(path, "/foreign"))
		endless(fd, id + 1, THAW_DATA);
	if (strcmp(path, "/padded"))
		endless(fd, id, THAW_DATA);
	for (;;) {
		begin(id, THAW_DATA);
		thaw_put_bytes(&out, THAW_T_DATA, junk, 0);
		thaw_put_bytes(&out, PAD_TAG, junk, sizeof(junk));
		send_frame(fd);
	}
}

static void exec(int fd, uint32_t id, const struct thaw_msg *m)
{
	char argv0[64] = "";
	static const uint8_t half_header[5] = { 0x20, 0, 0, 0, 1 };

	thaw_get_str(m, THAW_T_ARGV, argv0, sizeof(argv0));
	if (!strcmp(argv0, "half-frame")) {
		send_all(fd, half_header, sizeof(half_header));
		silence();
	}
	begin(id, THAW_EXEC_STARTED);
	thaw_put_u32(&out, THAW_T_PID, 2);
	send_frame(fd);
	if (!strcmp(argv0, "flood"))
		endless(fd, id, THAW_STDOUT);
	begin(id, THAW_EXIT);
	thaw_put_u32(&out, THAW_T_EXIT_CODE, 0);
	thaw_put_u8(&out, THAW_T_TIMED_OUT, 0);
	send_frame(fd);
}

static void serve(int fd)
{
	uint8_t header[THAW_HEADER_SIZE];
	static uint8_t payload[THAW_MAX_PAYLOAD];
	struct thaw_header h;
	struct thaw_msg m;
	char why[128];

	begin(0, THAW_HELLO);
	thaw_put_u32(&out, THAW_T_VERSION, THAW_PROTOCOL_VERSION);
	thaw_put_str(&out, THAW_T_AGENT_VERSION, "hostile");
	thaw_put_str(&out, THAW_T_BOOT_ID,
		     "00000000-0000-0000-0000-000000000000");
	send_frame(fd);
	while (read_full(fd, header, sizeof(header)) == 0) {
		thaw_header_decode(header, &h);
		uint32_t len = h.length - THAW_HEADER_REST;
		if (h.length < THAW_HEADER_REST || len > NOREAD_OVER)
			silence();
		if (read_full(fd, payload, len) < 0 ||
		    thaw_parse_type(&m, h.type, payload, len, why,
				    sizeof(why)) < 0)
			break;
		switch (h.type) {
		case THAW_CLONE:
			begin(h.request_id, THAW_OK);
			send_frame(fd);
			break;
		case THAW_PING:
			begin(h.request_id, THAW_PONG);
			send_frame(fd);
			break;
		case THAW_EXEC:
			exec(fd, h.request_id, &m);
			break;
		case THAW_READ_FILE:
			read_file(fd, h.request_id, &m);
			break;
		case THAW_WRITE_FILE:
			silence();
			break;
		case THAW_KILL:
			break;
		default:
			begin(h.request_id, THAW_ERROR);
			thaw_put_u32(&out, THAW_T_ERRNO, EINVAL);
			thaw_put_str(&out, THAW_T_MESSAGE, "hostile");
			send_frame(fd);
		}
	}
	_exit(0);
}

int main(void)
{
	struct sockaddr_vm addr = { .svm_family = AF_VSOCK,
				    .svm_cid = VMADDR_CID_ANY,
				    .svm_port = THAW_AGENT_VSOCK_PORT };
	int listener = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	/* PID 1's children are reaped by the kernel then. */
	signal(SIGCHLD, SIG_IGN);
	if (listener < 0 ||
	    bind(listener, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    listen(listener, 64) < 0)
		silence(); /* PID 1 must not exit: the host sees no agent */
	for (;;) {
		int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0)
			continue;
		if (fork() == 0) {
			close(listener);
			serve(fd);
		}
		close(fd);
	}
}
