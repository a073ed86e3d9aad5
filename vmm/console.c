// SPDX-License-Identifier: Apache-2.0
/*
 * console.c - see console.h.  Lines longer than CONSOLE_LINE_MAX are still
 * copied whole; only the copy kept for recognising markers is cut.
 */
#include "vmm/console.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/io.h"
#include "common/log.h"

#define PANIC_MARKER "Kernel panic - not syncing"
#define INIT_MARKER_PREFIX "Run /"
#define INIT_MARKER_SUFFIX " as init process"

int console_init(struct console *c, int out_fd, int log_fd, uint64_t log_max)
{
	char err[256];

	memset(c, 0, sizeof(*c));
	c->out_fd = out_fd;
	if (capfile_init(&c->log, log_fd, log_max, err, sizeof(err)) < 0) {
		log_error("console log: %s", err);
		return -1;
	}
	return 0;
}

void console_destroy(struct console *c)
{
	capfile_destroy(&c->log);
}

static void end_of_line(struct console *c, uint64_t now)
{
	char *line = c->line;

	c->line[c->line_len] = '\0';
	c->line_len = 0;
	if (!c->panicked) {
		char *panic = strstr(line, PANIC_MARKER);

		if (panic) {
			c->panicked = true;
			strcpy(c->panic_line, panic);
		}
	}
	if (!c->init_ns) {
		char *run = strstr(line, INIT_MARKER_PREFIX);

		if (run && strstr(run, INIT_MARKER_SUFFIX))
			c->init_ns = now;
	}
}

void console_write(void *ctx, const uint8_t *buf, size_t len)
{
	struct console *c = ctx;
	uint64_t now = monotonic_ns();

	if (!c->first_output_ns && len)
		c->first_output_ns = now;
	/* A closed stdout or a full disk must not stop the guest: the copy
	 * that failed is dropped. */
	if (c->out_fd >= 0 && write_full(c->out_fd, buf, len) < 0)
		c->out_fd = -1;
	(void)capfile_write(&c->log, buf, len);
	for (size_t i = 0; i < len; i++) {
		if (buf[i] == '\n') {
			end_of_line(c, now);
		} else if (buf[i] != '\r' &&
			   c->line_len < CONSOLE_LINE_MAX - 1) {
			c->line[c->line_len++] = buf[i];
		}
	}
}
