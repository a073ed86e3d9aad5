// SPDX-License-Identifier: Apache-2.0
/*
 * fuzz_support.c - the harnesses' scratch files, quiet log, small guest
 * RAM and devices' host-side sockets (fuzz_support.h).  A harness aborts
 * when its own setup fails: that is the machine's fault, not an input's.
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/fuzz/fuzz_support.h"
#include "common/io.h"
#include "common/log.h"

#define MAX_FILES 8

/* tmpfs when there is one: each input writes its files, and on a disk's
 * file system the open(O_TRUNC)/ftruncate/close of those took a third of
 * snapshot_headers' and snapshot_state's time. */
static char dir[sizeof("/dev/shm/thaw-fuzz-XXXXXX")];
static char paths[MAX_FILES][sizeof(dir) + 33];
static int nr_paths;

static void remove_dir(void)
{
	for (int i = 0; i < nr_paths; i++)
		unlink(paths[i]);
	rmdir(dir);
}

const char *fuzz_path(const char *name)
{
	for (int i = 0; i < nr_paths; i++)
		if (!strcmp(strrchr(paths[i], '/') + 1, name))
			return paths[i];
	if (!nr_paths) {
		strcpy(dir, "/dev/shm/thaw-fuzz-XXXXXX");
		if (!mkdtemp(dir)) {
			strcpy(dir, "/tmp/thaw-fuzz-XXXXXX");
			if (!mkdtemp(dir))
				abort();
		}
		atexit(remove_dir);
	}
	if (nr_paths == MAX_FILES || strlen(name) > 32)
		abort();
	snprintf(paths[nr_paths], sizeof(paths[0]), "%s/%s", dir, name);
	return paths[nr_paths++];
}

void fuzz_write_file(const char *path, const void *data, size_t size,
		     uint64_t length)
{
	FILE *f = fopen(path, "we");

	if (!f || (size && fwrite(data, 1, size, f) != size) ||
	    ftruncate(fileno(f), (off_t)length) || fclose(f))
		abort();
}

void fuzz_quiet_log(void)
{
	int fd = open("/dev/null", O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		abort();
	log_set_fd(fd);
}

void fuzz_discard_output(void *ctx, const uint8_t *buf, size_t len)
{
	(void)ctx;
	(void)buf;
	(void)len;
}

void fuzz_ignore_reset(void *ctx)
{
	(void)ctx;
}

void fuzz_guest_memory(struct guest_memory *mem, uint8_t *host, uint64_t size)
{
	*mem = (struct guest_memory){
		.host = host,
		.size = size,
		.regions = { { .guest_addr = 0, .size = size } },
		.nr_regions = 1,
	};
}

/*
 * Made once, not per input: a listener bound and unlinked, or a socket pair
 * made and closed, for every input was a tenth of virtio_net's and
 * snapshot_state's time (perf, 2026-12-02), none of it the devices' code.
 * The devices take a dup, as they take a jailed VMM's listener or a TAP.
 */
int fuzz_vsock_listener(void)
{
	static struct pollfd listener = { .fd = -1, .events = POLLIN };
	int fd;

	if (listener.fd < 0) {
		listener.fd = unix_listen(fuzz_path("vsock"), SOMAXCONN,
					  SOCK_NONBLOCK);
		if (listener.fd < 0)
			abort();
	}
	/* poll() first: an accept() that finds nobody still makes a socket. */
	while (poll(&listener, 1, 0) == 1 &&
	       (fd = accept4(listener.fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
		close(fd);
	fd = dup(listener.fd);
	if (fd < 0)
		abort();
	return fd;
}

static void drop_frames(int fd)
{
	char frame;

	/* A SOCK_SEQPACKET read takes the whole message, cut to fit. */
	while (recv(fd, &frame, 1, MSG_DONTWAIT) >= 0)
		;
}

int fuzz_net_backend(int *peer)
{
	static int pair[2] = { -1, -1 };
	int fd;

	if (pair[0] < 0 &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair))
		abort();
	drop_frames(pair[0]);
	drop_frames(pair[1]);
	fd = dup(pair[0]);
	if (fd < 0)
		abort();
	*peer = pair[1];
	return fd;
}
