/* SPDX-License-Identifier: Apache-2.0 */
/*
 * console.h - where the guest's serial console goes, and what thaw-vmm
 * learns from it.
 *
 * The UART hands complete lines here.  They are copied to the caller's
 * stdout and to an optional log file, bounded (capfile.h: a guest writes
 * as much as it likes, the host's disk keeps its first and latest bytes),
 * and two kinds of line are noticed on
 * the way: the kernel starting init ("Run /init as init process"), which
 * timestamps boot, and "Kernel panic - not syncing", which turns the reset a
 * panicking kernel performs (panic=-1, reboot=k) into an error instead of a
 * clean stop.  Reading the console is the only way to tell those apart
 * without ACPI or a pvpanic device, and it works for any Linux kernel.
 */
#ifndef THAW_VMM_CONSOLE_H
#define THAW_VMM_CONSOLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/capfile.h"

#define CONSOLE_LINE_MAX 256

struct console {
	int out_fd;		  /* -1: not copied */
	struct capfile log;	  /* its fd -1: no log */
	uint64_t boot_ns;	  /* monotonic time the guest started running */
	uint64_t first_output_ns; /* 0 until the first byte */
	uint64_t init_ns;	  /* 0 until init was started */
	bool panicked;
	char panic_line[CONSOLE_LINE_MAX];
	char line[CONSOLE_LINE_MAX];
	size_t line_len;
};

/*
 * @log_fd (-1: none) keeps at most @log_max bytes (capfile.h).  0, or -1
 * after a message.
 */
int console_init(struct console *c, int out_fd, int log_fd, uint64_t log_max);

/* Frees what console_init() took; the descriptors stay the caller's. */
void console_destroy(struct console *c);

/* The UART's output sink (serial.h); @ctx is the console. */
void console_write(void *ctx, const uint8_t *buf, size_t len);

#endif
