/* SPDX-License-Identifier: Apache-2.0 */
/*
 * fuzz_support.h - what several harnesses need: one scratch directory per
 * process for the files a harness must present by path (removed at exit),
 * a quiet logger (the devices log every bad input; the lines are still
 * formatted, only not written), a small guest RAM without KVM, and the
 * host-side sockets of the vsock and network devices, made once per process.
 */
#ifndef THAW_FUZZ_SUPPORT_H
#define THAW_FUZZ_SUPPORT_H

#include <stddef.h>
#include <stdint.h>

#include "vmm/memory.h"

/* /dev/shm/thaw-fuzz-XXXXXX/@name (/tmp/... without /dev/shm), made once
 * per process, @name removed at exit with the directory.  A name is at
 * most 32 bytes. */
const char *fuzz_path(const char *name);

/* Writes @size bytes of @data to @path, truncated or extended to
 * @length bytes (a sparse tail reads as zeros). */
void fuzz_write_file(const char *path, const void *data, size_t size,
		     uint64_t length);

/* log.h's lines go to /dev/null from now on. */
void fuzz_quiet_log(void);

/* A serial sink that drops the guest's output; an i8042 reset that does
 * nothing. */
void fuzz_discard_output(void *ctx, const uint8_t *buf, size_t len);
void fuzz_ignore_reset(void *ctx);

/* @mem describes @size bytes at @host as guest RAM from address 0. */
void fuzz_guest_memory(struct guest_memory *mem, uint8_t *host, uint64_t size);

/*
 * vsock_init()'s @listen_fd, as a jailed VMM adopts one: a dup of a
 * listener on fuzz_path("vsock") bound once per process (the device closes
 * the dup).  Clients a previous input left queued on it are closed first,
 * so each input starts with none.
 */
int fuzz_vsock_listener(void);

/*
 * The network device's backend for net_init() (which owns and closes it):
 * a dup of one end of a SOCK_SEQPACKET pair made once per process, a frame
 * per message as on a TAP; *@peer is the other end, the host network's
 * side.  Frames a previous input left in either direction are dropped
 * first, so each input starts with none.
 */
int fuzz_net_backend(int *peer);

#endif
