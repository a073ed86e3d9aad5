// SPDX-License-Identifier: Apache-2.0
/*
 * test_log.c - common/log.c, the logger of thawd and thaw-vmm: the text
 * line's shape (timestamp, program, level word, sandbox), JSON lines that
 * parse with their fields, level filtering, bad settings, and the one-line
 * promise (a newline in a message, a message too long for a line), which
 * holds whatever bytes a guest put in a message: not UTF-8, C1 controls,
 * escapes that double a JSON line, a cut inside a character.
 *
 * Lines go to a pipe (log_set_fd) that each test reads back.  The logger's
 * settings are process-wide, so every test starts from the same ones.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <regex.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"

#define ID "5f3a9c1e2b7d4a60"

static int pipe_fd[2] = { -1, -1 };
static char out[16384];

static void set_level(const char *level)
{
	char err[128];

	cr_assert_eq(log_set_level(level, err, sizeof(err)), 0, "%s", err);
}

static void set_format(const char *format)
{
	char err[128];

	cr_assert_eq(log_set_format(format, err, sizeof(err)), 0, "%s", err);
}

static void setup(void)
{
	cr_assert_eq(pipe2(pipe_fd, O_NONBLOCK | O_CLOEXEC), 0);
	log_set_fd(pipe_fd[1]);
	log_set_program("thawd");
	log_set_sandbox(NULL);
	set_level("info");
	set_format("text");
}

static void teardown(void)
{
	log_set_fd(2);
	close(pipe_fd[0]);
	close(pipe_fd[1]);
}

TestSuite(log, .init = setup, .fini = teardown);

/* Everything written since the last call ("" for nothing). */
static const char *written(void)
{
	ssize_t n = read(pipe_fd[0], out, sizeof(out) - 1);

	cr_assert(n >= 0 || errno == EAGAIN, "read: %s", strerror(errno));
	out[n > 0 ? n : 0] = '\0';
	return out;
}

static void expect_matches(const char *line, const char *pattern)
{
	regex_t re;

	cr_assert_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NOSUB), 0);
	cr_expect_eq(regexec(&re, line, 0, NULL, 0), 0,
		     "\"%s\" does not match %s", line, pattern);
	regfree(&re);
}

#define TIME_RE \
	"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}Z"

Test(log, text_line_has_time_program_level_and_sandbox)
{
	log_write(LOG_LEVEL_WARNING, ID, "the VM stopped: %s", "killed");
	expect_matches(written(), "^" TIME_RE " thawd: warning: sandbox " ID
				  ": the VM stopped: killed\n$");
}

Test(log, text_info_has_no_level_word_nor_sandbox_when_none)
{
	log_info("serving on %s", "/run/thawd.sock");
	expect_matches(written(), "^" TIME_RE " thawd: serving on "
				  "/run/thawd\\.sock\n$");
}

Test(log, text_error_and_debug_name_their_level)
{
	set_level("debug");
	log_error("no socket");
	expect_matches(written(), "^" TIME_RE " thawd: error: no socket\n$");
	log_debug("restored");
	expect_matches(written(), "^" TIME_RE " thawd: debug: restored\n$");
}

Test(log, process_sandbox_is_used_when_a_line_names_none)
{
	log_set_sandbox(ID);
	log_info("ready");
	expect_matches(written(), " thawd: sandbox " ID ": ready\n$");
	log_write(LOG_LEVEL_INFO, "other", "mine");
	expect_matches(written(), " thawd: sandbox other: mine\n$");
}

static const char *field(json_t *j, const char *key)
{
	return json_string_value(json_object_get(j, key));
}

/* One JSON object on one line, parsed back. */
static json_t *json_written(void)
{
	const char *line = written();
	json_error_t e;

	cr_assert_not_null(strchr(line, '\n'), "no line: \"%s\"", line);
	cr_expect_eq(strchr(line, '\n')[1], '\0', "more than a line: %s", line);
	json_t *j = json_loads(line, 0, &e);
	cr_assert_not_null(j, "%s: %s", line, e.text);
	cr_assert(json_is_object(j));
	return j;
}

Test(log, json_line_parses_with_every_field)
{
	set_format("json");
	log_write(LOG_LEVEL_WARNING, ID, "download: %s \"quoted\"", "gone");
	json_t *j = json_written();

	expect_matches(field(j, "time"), "^" TIME_RE "$");
	cr_expect_str_eq(field(j, "level"), "warning");
	cr_expect_str_eq(field(j, "program"), "thawd");
	cr_expect_eq(json_integer_value(json_object_get(j, "pid")), getpid());
	cr_expect_str_eq(field(j, "sandbox"), ID);
	cr_expect_str_eq(field(j, "msg"), "download: gone \"quoted\"");
	json_decref(j);
}

Test(log, json_line_without_sandbox_has_no_sandbox_field)
{
	set_format("json");
	log_info("stopping");
	json_t *j = json_written();

	cr_expect_str_eq(field(j, "level"), "info");
	cr_expect_null(json_object_get(j, "sandbox"));
	cr_expect_str_eq(field(j, "msg"), "stopping");
	json_decref(j);
}

Test(log, levels_below_the_setting_are_dropped)
{
	set_level("warning");
	cr_expect(log_enabled(LOG_LEVEL_ERROR));
	cr_expect(log_enabled(LOG_LEVEL_WARNING));
	cr_expect_not(log_enabled(LOG_LEVEL_INFO));
	log_info("dropped");
	log_debug("dropped too");
	cr_expect_str_eq(written(), "");
	log_warning("kept");
	cr_expect_not_null(strstr(written(), "thawd: warning: kept\n"));

	set_level("error");
	log_warning("dropped");
	cr_expect_str_eq(written(), "");
	log_error("kept");
	cr_expect_not_null(strstr(written(), "thawd: error: kept\n"));
}

Test(log, bad_level_and_format_are_named_and_change_nothing)
{
	char err[128] = "";

	cr_expect_eq(log_set_level("verbose", err, sizeof(err)), -1);
	cr_expect_not_null(strstr(err, "'verbose'"), "%s", err);
	cr_expect_not_null(strstr(err, "error, warning, info or debug"), "%s",
			   err);
	cr_expect_eq(log_set_level("INFO", err, sizeof(err)), -1);
	cr_expect_eq(log_set_format("yaml", err, sizeof(err)), -1);
	cr_expect_not_null(strstr(err, "'yaml'"), "%s", err);
	cr_expect_not_null(strstr(err, "text or json"), "%s", err);

	cr_expect(log_enabled(LOG_LEVEL_INFO), "the level stayed info");
	cr_expect_not(log_enabled(LOG_LEVEL_DEBUG));
	log_info("still text");
	expect_matches(written(), "^" TIME_RE " thawd: still text\n$");
}

Test(log, newline_in_a_message_does_not_split_the_line)
{
	log_write(LOG_LEVEL_ERROR, ID, "first\nthawd: forged line");
	const char *text = written();

	cr_expect_eq(strchr(text, '\n'), text + strlen(text) - 1,
		     "more than one line: \"%s\"", text);
	expect_matches(text, "^" TIME_RE " thawd: error: sandbox " ID
			     ": first thawd: forged line\n$");

	/* Nor do a terminal's escapes; a tab is harmless. */
	log_write(LOG_LEVEL_ERROR, ID, "a\rb\033[31mc\td");
	expect_matches(written(), ": a b [[]31mc\td\n$");

	set_format("json");
	log_write(LOG_LEVEL_ERROR, ID, "first\nsecond");
	json_t *line = json_written();
	cr_expect_str_eq(json_string_value(json_object_get(line, "msg")),
			 "first second");
	json_decref(line);
}

Test(log, long_message_is_cut_and_says_so)
{
	static char big[20000];
	memset(big, 'x', sizeof(big) - 1);
	log_write(LOG_LEVEL_INFO, ID, "%s", big);
	const char *text = written();
	size_t len = strlen(text);

	cr_expect_lt(len, 4096 + 128, "a line of %zu bytes", len);
	cr_expect_eq(strchr(text, '\n'), text + len - 1);
	cr_expect(len > 7 && !strcmp(text + len - 7, " [cut]\n"), "%s",
		  text + (len > 40 ? len - 40 : 0));

	set_format("json");
	log_write(LOG_LEVEL_INFO, ID, "%s", big);
	json_t *j = json_written();
	const char *msg = field(j, "msg");

	cr_assert_not_null(msg);
	cr_expect_lt(strlen(msg), 4096);
	cr_expect(strlen(msg) > 6 && !strcmp(msg + strlen(msg) - 6, " [cut]"));
	json_decref(j);
}

Test(log, errno_survives_a_line)
{
	errno = ENOSPC;
	log_info("about to fail");
	cr_expect_eq(errno, ENOSPC);
	written();
}

/* What a guest's console can hold, in both formats: a byte that is not
 * UTF-8, a lone continuation byte, a C1 control (CSI, U+009B), beside a
 * character that stays. */
Test(log, bytes_that_are_not_utf8_or_are_c1_controls_become_marks)
{
	log_write(LOG_LEVEL_ERROR, ID,
		  "a\xff"
		  "b\x80"
		  "c\xc2\x9b"
		  "31md \xc3\xa9");
	expect_matches(written(), ": a[?]b[?]c[?]31md \xc3\xa9\n$");

	set_format("json");
	log_write(LOG_LEVEL_ERROR, ID,
		  "a\xff"
		  "b\x80"
		  "c\xc2\x9b"
		  "31md \xc3\xa9");
	json_t *j = json_written();
	cr_expect_str_eq(field(j, "msg"), "a?b?c?31md \xc3\xa9");
	json_decref(j);

	/* Truncated and overlong forms, a surrogate: not UTF-8 either. */
	log_info("\xe2\x82 \xc0\xaf \xed\xa0\x80");
	json_t *k = json_written();
	cr_expect_str_eq(field(k, "msg"), "?? ?? ???");
	json_decref(k);
}

/* A line holds at most PIPE_BUF bytes, so that a pipe writes it whole. */
static void expect_one_short_line(const char *text)
{
	size_t len = strlen(text);

	cr_expect_leq(len, 4096, "a line of %zu bytes", len);
	cr_expect_eq(strchr(text, '\n'), text + len - 1);
}

Test(log, json_escapes_that_double_a_message_are_cut_not_dropped)
{
	static char slashes[4091], quotes[4091];
	memset(slashes, '\\', sizeof(slashes) - 1);
	memset(quotes, '"', sizeof(quotes) - 1);

	set_format("json");
	log_write(LOG_LEVEL_ERROR, ID, "%s", slashes);
	expect_one_short_line(written());
	json_t *j = json_loads(out, 0, NULL);
	cr_assert_not_null(j, "not JSON: %.80s", out);
	const char *msg = field(j, "msg");
	size_t len = strlen(msg);

	cr_expect_gt(len, 1000, "only %zu bytes kept", len);
	cr_expect(len > 6 && !strcmp(msg + len - 6, " [cut]"));
	cr_expect_eq(strspn(msg, "\\"), len - 6);
	json_decref(j);

	log_write(LOG_LEVEL_ERROR, ID, "%s", quotes);
	expect_one_short_line(written());
	json_t *q = json_loads(out, 0, NULL);
	cr_assert_not_null(q, "not JSON: %.80s", out);
	cr_expect_eq(strspn(field(q, "msg"), "\""),
		     strlen(field(q, "msg")) - 6);
	json_decref(q);
}

/* The cut falls inside a three-byte character whatever the alignment: it
 * goes before the character, which is neither split nor marked bad. */
Test(log, a_cut_does_not_split_a_character)
{
	static char euros[3 * 2000 + 3];

	for (int shift = 0; shift < 3; shift++) {
		memset(euros, 'x', (size_t)shift);
		for (int i = 0; i < 2000; i++)
			memcpy(euros + shift + 3 * i, "\xe2\x82\xac", 3);
		euros[shift + 3 * 2000] = '\0';

		set_format("text");
		log_info("%s", euros);
		const char *text = written();
		size_t len = strlen(text);

		expect_one_short_line(text);
		cr_expect_null(strchr(text, '?'), "a character was split");
		cr_expect(len > 7 && !strcmp(text + len - 7, " [cut]\n"));

		set_format("json");
		log_info("%s", euros);
		json_t *j = json_written();
		const char *msg = field(j, "msg");

		cr_assert_not_null(msg);
		cr_expect_eq((strlen(msg) - 6 - (size_t)shift) % 3, 0,
			     "a cut inside a character (%zu bytes)",
			     strlen(msg));
		json_decref(j);
	}
}

#define SECOND LOG_LIMIT_INTERVAL_NS

Test(log, a_limit_lets_a_burst_through_then_one_a_second)
{
	struct log_limit limit = { 0 };
	unsigned int suppressed = 99;
	uint64_t t = 5 * SECOND;

	for (int i = 0; i < LOG_LIMIT_BURST; i++) {
		cr_expect(log_limit_pass(&limit, t, &suppressed), "line %d", i);
		cr_expect_eq(suppressed, 0);
	}
	for (int i = 0; i < 500; i++)
		cr_expect_not(
			log_limit_pass(&limit, t + SECOND - 1, &suppressed));
	cr_expect(log_limit_pass(&limit, t + SECOND, &suppressed));
	cr_expect_eq(suppressed, 500);
	cr_expect_not(log_limit_pass(&limit, t + SECOND + 1, &suppressed));
	cr_expect(log_limit_pass(&limit, t + 2 * SECOND, &suppressed));
	cr_expect_eq(suppressed, 1);
}

Test(log, a_quiet_limit_earns_its_burst_back)
{
	struct log_limit limit = { 0 };
	unsigned int suppressed;
	uint64_t t = SECOND;
	int passed = 0;

	while (log_limit_pass(&limit, t, &suppressed))
		passed++;
	cr_expect_eq(passed, LOG_LIMIT_BURST);
	/* A long silence is worth one burst, not more. */
	t += 1000 * SECOND;
	for (passed = 0; log_limit_pass(&limit, t, &suppressed); passed++)
		cr_expect_eq(suppressed, passed ? 0 : 1);
	cr_expect_eq(passed, LOG_LIMIT_BURST);
}

/* Lines in @s. */
static int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

Test(log, a_limited_site_writes_its_burst_then_counts_the_rest)
{
	const int calls = 3 * LOG_LIMIT_BURST;
	struct log_limit limit = { 0 };
	char suffix[64];

	for (int i = 0; i < calls; i++)
		log_write_limited(&limit, LOG_LEVEL_WARNING,
				  "virtio-mmio vsock: queue 0: bad %d", i);
	int lines = count_lines(written());

	/* However slow this machine, not one line a call. */
	cr_expect_geq(lines, LOG_LIMIT_BURST);
	cr_expect_lt(lines, calls);
	limit.refilled_ns -= SECOND; /* a second later */
	log_write_limited(&limit, LOG_LEVEL_WARNING, "virtio-mmio: bad");
	snprintf(suffix, sizeof(suffix), "bad \\(%d similar suppressed\\)\n$",
		 calls - lines);
	expect_matches(written(), suffix);
	/* A level below the setting neither writes nor spends the limit. */
	set_level("error");
	log_write_limited(&limit, LOG_LEVEL_WARNING, "quiet");
	cr_expect_str_eq(written(), "");
}

Test(log, a_bounded_log_file_keeps_its_head_and_latest_lines)
{
	char path[64], err[128], buf[8192];
	int fd;

	snprintf(path, sizeof(path), "/tmp/thaw-log-%d", (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	cr_assert_geq(fd, 0);
	log_set_fd(fd);
	cr_assert_eq(log_set_max(4096, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < 2000; i++)
		log_warning("guest wrote bad thing %d", i);
	log_info("the VM stopped");
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);

	cr_assert_gt(n, 0);
	cr_expect_leq(n, 4096);
	buf[n] = '\0';
	cr_expect(strstr(buf, "bad thing 0\n"));
	cr_expect(strstr(buf, "bytes dropped]\n"));
	expect_matches(buf,
		       "bad thing 1999\n" TIME_RE " thawd: the VM stopped\n$");
	/* A pipe again: unbounded, as the other tests expect. */
	log_set_fd(pipe_fd[1]);
	close(fd);
	unlink(path);
}
