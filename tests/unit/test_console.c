// SPDX-License-Identifier: Apache-2.0
/*
 * test_console.c - the console copies every byte and recognises the lines
 * thaw-vmm acts on (init started, kernel panic), however the UART splits
 * the output.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vmm/console.h"

static void feed(struct console *c, const char *s, size_t chunk)
{
	for (size_t i = 0; i < strlen(s); i += chunk) {
		size_t n = strlen(s) - i < chunk ? strlen(s) - i : chunk;

		console_write(c, (const uint8_t *)s + i, n);
	}
}

Test(console, copies_bytes_and_notices_init)
{
	int p[2];
	struct console c;
	char buf[256] = { 0 };
	const char *log = "[    0.5] Run /init as init process\r\nhello\n";

	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(console_init(&c, p[1], -1, CAPFILE_DEFAULT_MAX), 0);
	feed(&c, log, 3);
	cr_expect_neq(c.first_output_ns, 0);
	cr_expect_neq(c.init_ns, 0);
	cr_expect_not(c.panicked);
	cr_assert_eq(read(p[0], buf, sizeof(buf)), (ssize_t)strlen(log));
	cr_expect_str_eq(buf, log);
	close(p[0]);
	close(p[1]);
}

Test(console, notices_panic_split_across_writes)
{
	struct console c;

	cr_assert_eq(console_init(&c, -1, -1, CAPFILE_DEFAULT_MAX), 0);
	feed(&c,
	     "[ 1.0] Kernel panic - not syncing: Attempted to kill init! "
	     "exitcode=0x00000700\n",
	     5);
	cr_expect(c.panicked);
	cr_expect_str_eq(c.panic_line, "Kernel panic - not syncing: Attempted "
				       "to kill init! exitcode=0x00000700");
	cr_expect_eq(c.init_ns, 0);
}

Test(console, overlong_lines_do_not_overflow)
{
	struct console c;
	char longline[4 * CONSOLE_LINE_MAX];

	cr_assert_eq(console_init(&c, -1, -1, CAPFILE_DEFAULT_MAX), 0);
	memset(longline, 'x', sizeof(longline) - 1);
	longline[sizeof(longline) - 1] = '\0';
	feed(&c, longline, 100);
	feed(&c, " Kernel panic - not syncing: late\n", 7);
	cr_expect_not(c.panicked, "marker beyond the kept prefix is not seen");
	feed(&c, "Kernel panic - not syncing: now\n", 64);
	cr_expect(c.panicked);
}

Test(console, closed_output_is_dropped_not_fatal)
{
	int p[2];
	struct console c;

	cr_assert_eq(pipe(p), 0);
	close(p[0]);
	cr_assert_eq(console_init(&c, p[1], -1, CAPFILE_DEFAULT_MAX), 0);
	signal(SIGPIPE, SIG_IGN);
	feed(&c, "line\n", 5);
	cr_expect_eq(c.out_fd, -1);
	close(p[1]);
}

/* A guest writing without end (cat /dev/zero > /dev/ttyS0) leaves its
 * boot messages, a mark and its last output in a bounded log. */
Test(console, a_flood_leaves_the_log_bounded)
{
	char path[64], buf[8192];
	struct console c;
	uint8_t zeros[4096] = { 0 };
	int fd;

	snprintf(path, sizeof(path), "/tmp/thaw-console-%d", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	cr_assert_eq(console_init(&c, -1, fd, 4096), 0);
	feed(&c, "[    0.5] Run /init as init process\n", 16);
	for (int i = 0; i < 1000; i++)
		console_write(&c, zeros, sizeof(zeros));
	feed(&c, "last words\n", 4);
	ssize_t n = pread(fd, buf, sizeof(buf), 0);

	cr_expect_leq(n, 4096);
	cr_expect_eq(strncmp(buf, "[    0.5] Run /init", 19), 0);
	cr_expect(memmem(buf, n, "bytes dropped]\n", 15));
	cr_expect_eq(memcmp(buf + n - 12, "\0last words\n", 12), 0);
	cr_expect_neq(c.init_ns, 0);
	console_destroy(&c);
	close(fd);
	unlink(path);
}
