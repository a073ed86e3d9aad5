// SPDX-License-Identifier: Apache-2.0
/*
 * test_capfile.c - common/capfile.c, the bound on the console log and the
 * VMM's log: a writer that never stops leaves a file no larger than its
 * bound, holding its first bytes, a mark counting what went, and its
 * latest bytes in order, whatever the sizes of the writes; another writer
 * of the descriptor adds after the latest bytes; a pipe is written through.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/capfile.h"

static char path[64];

static int open_log(int flags)
{
	snprintf(path, sizeof(path), "/tmp/thaw-capfile-%d", (int)getpid());
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | flags,
		      0600);

	cr_assert_geq(fd, 0);
	return fd;
}

/* The whole file, NUL-terminated; *len its size. */
static char *slurp(size_t *len)
{
	FILE *f = fopen(path, "r");
	char *buf = malloc(1 << 20);
	size_t n;

	cr_assert_not_null(f);
	n = fread(buf, 1, (1 << 20) - 1, f);
	buf[n] = '\0';
	fclose(f);
	*len = n;
	return buf;
}

/* Writes "line N\n" for N in [from, to), @per lines a write. */
static void write_lines(struct capfile *f, int from, int to, int per)
{
	char buf[4096];

	for (int i = from; i < to;) {
		size_t n = 0;

		for (int k = 0; k < per && i < to; k++, i++)
			n += snprintf(buf + n, sizeof(buf) - n, "line %d\n", i);
		cr_assert_eq(capfile_write(f, buf, n), 0);
	}
}

/* The number after "line " at @p. */
static int line_number(const char *p)
{
	cr_assert_eq(strncmp(p, "line ", 5), 0, "not a line: %.20s", p);
	return atoi(p + 5);
}

static void check_flood(int per)
{
	struct capfile f;
	char err[128];
	size_t len;
	int fd = open_log(0);
	const int lines = 200000;

	cr_assert_eq(capfile_init(&f, fd, 16384, err, sizeof(err)), 0, "%s",
		     err);
	write_lines(&f, 0, lines, per);
	char *log = slurp(&len);

	cr_expect_leq(len, 16384, "the file is %zu bytes", len);
	cr_expect_leq(len, capfile_bound(&f));
	/* The head: the first lines, in order. */
	cr_expect_eq(strncmp(log, "line 0\nline 1\nline 2\n", 21), 0);
	/* The mark, counting every byte not in the file. */
	char *mark = strstr(log, "\n[thaw: ");
	unsigned long long dropped;

	cr_assert_not_null(mark);
	cr_assert_eq(sscanf(mark, "\n[thaw: %llu bytes dropped]\n", &dropped),
		     1);
	char *tail = strchr(mark + 1, '\n') + 1;
	size_t written = 0;

	for (int i = 0; i < lines; i++)
		written += snprintf(NULL, 0, "line %d\n", i);
	cr_expect_eq(written - dropped, (size_t)(mark - log) + strlen(tail),
		     "kept %zu of %zu bytes, %llu dropped",
		     (size_t)(mark - log) + strlen(tail), written, dropped);
	/* The tail ends with the last line, and its whole lines follow
	 * each other. */
	char *last = strrchr(log, '\n');

	*last = '\0';
	cr_expect_eq(line_number(strrchr(log, '\n') + 1), lines - 1);
	char *p = strchr(tail, '\n') + 1; /* the first may be cut */
	int prev = line_number(p);

	while ((p = strchr(p, '\n')) && p + 1 < last) {
		int n = line_number(++p);

		cr_expect_eq(n, prev + 1, "line %d after line %d", n, prev);
		prev = n;
	}
	free(log);
	capfile_destroy(&f);
	close(fd);
	unlink(path);
}

Test(capfile, a_flood_keeps_head_mark_and_tail_line_by_line)
{
	check_flood(1);
}

Test(capfile, a_flood_in_large_writes_keeps_head_mark_and_tail)
{
	check_flood(300);
}

Test(capfile, under_the_bound_nothing_is_cut)
{
	struct capfile f;
	char err[128];
	size_t len;
	int fd = open_log(0);

	cr_assert_eq(capfile_init(&f, fd, 4096, err, sizeof(err)), 0);
	write_lines(&f, 0, 100, 1);
	char *log = slurp(&len);

	cr_expect_null(strstr(log, "[thaw:"));
	cr_expect_eq(line_number(log), 0);
	cr_expect_eq(line_number(strstr(log, "line 99\n")), 99);
	free(log);
	capfile_destroy(&f);
	close(fd);
	unlink(path);
}

/* The SIGSYS handler's line lands after the latest bytes, even once the
 * tail was rewritten; a file opened O_APPEND is bounded all the same. */
Test(capfile, another_writer_of_the_descriptor_adds_at_the_end)
{
	struct capfile f;
	char err[128];
	size_t len;
	int fd = open_log(O_APPEND);

	cr_assert_eq(write(fd, "before\n", 7), 7);
	cr_assert_eq(capfile_init(&f, fd, 2048, err, sizeof(err)), 0);
	write_lines(&f, 0, 5000, 7);
	cr_assert_eq(write(fd, "last words\n", 11), 11);
	char *log = slurp(&len);

	cr_expect_leq(len, 7 + 2048 + 11);
	cr_expect_eq(strncmp(log, "before\nline 0\n", 14), 0);
	const char *end = "\nline 4999\nlast words\n";

	cr_expect_str_eq(log + len - strlen(end), end);
	free(log);
	capfile_destroy(&f);
	close(fd);
	unlink(path);
}

Test(capfile, a_pipe_is_written_through)
{
	struct capfile f;
	char err[128], buf[64] = "";
	int p[2];

	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(capfile_init(&f, p[1], 1024, err, sizeof(err)), 0);
	cr_assert_eq(capfile_write(&f, "hello\n", 6), 0);
	cr_expect_eq(read(p[0], buf, sizeof(buf)), 6);
	cr_expect_str_eq(buf, "hello\n");
	close(p[0]);
	/* A reader gone: the file writes nothing more, and says so once. */
	signal(SIGPIPE, SIG_IGN);
	cr_expect_lt(capfile_write(&f, "x", 1), 0);
	cr_expect_eq(f.fd, -1);
	capfile_destroy(&f);
	close(p[1]);
}

Test(capfile, bounds_parse_and_are_checked)
{
	char err[160];
	uint64_t max;
	struct capfile f;

	cr_expect_eq(capfile_parse_max("65536", &max, err, sizeof(err)), 0);
	cr_expect_eq(max, 65536);
	cr_expect_eq(capfile_parse_max("3M", &max, err, sizeof(err)), 0);
	cr_expect_eq(max, 3 << 20);
	cr_expect_eq(capfile_parse_max("16K", &max, err, sizeof(err)), 0);
	cr_expect_eq(max, 16384);
	const char *bad[] = {
		"", "-5", "100", "12X", "1T", "99999999999G", "4k"
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(capfile_parse_max(bad[i], &max, err, sizeof(err)),
			     -1, "'%s' accepted", bad[i]);
		cr_expect(strstr(err, "log bound"), "%s", err);
	}
	cr_expect_lt(capfile_init(&f, 2, 10, err, sizeof(err)), 0);
	cr_expect(strstr(err, "outside"), "%s", err);
}
