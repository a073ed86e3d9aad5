// SPDX-License-Identifier: Apache-2.0
/*
 * log.c - see log.h.  Settings are process-wide and set once at start, by
 * main(), before threads exist; writing reads them without a lock.  A
 * bounded log file and the rate limits are shared by every thread: one
 * lock, taken only for them, serialises them.
 */
#include "common/log.h"

#include "common/capfile.h"
#include "common/clock.h"
#include "common/io.h"
#include "common/printable.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/*
 * A line, newline included, fits in PIPE_BUF bytes: a pipe writes that
 * much at once (log.h).  A longer message is cut, and says so.
 */
#define LINE_MAX_BYTES PIPE_BUF

static const char cut_mark[] = " [cut]";

static const char *const level_names[] = {
	[LOG_LEVEL_ERROR] = "error",
	[LOG_LEVEL_WARNING] = "warning",
	[LOG_LEVEL_INFO] = "info",
	[LOG_LEVEL_DEBUG] = "debug",
};

static struct {
	const char *program;
	enum log_level level;
	enum log_format format;
	char sandbox[64];
	int fd;
	bool bounded; /* lines go through file */
	struct capfile file;
} logger = { .program = "thaw", .level = LOG_LEVEL_INFO, .fd = 2 };

static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
/* log_last_error()'s, under shared_lock. */
static char last_error[512];

void log_set_program(const char *program)
{
	logger.program = program;
}

int log_set_level(const char *level, char *err, size_t errlen)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]);
	     i++)
		if (!strcmp(level, level_names[i])) {
			logger.level = (enum log_level)i;
			return 0;
		}
	snprintf(err, errlen,
		 "log level '%s': expected error, warning, info or debug",
		 level);
	return -1;
}

int log_set_format(const char *format, char *err, size_t errlen)
{
	if (!strcmp(format, "text"))
		logger.format = LOG_FORMAT_TEXT;
	else if (!strcmp(format, "json"))
		logger.format = LOG_FORMAT_JSON;
	else {
		snprintf(err, errlen, "log format '%s': expected text or json",
			 format);
		return -1;
	}
	return 0;
}

void log_set_sandbox(const char *id)
{
	snprintf(logger.sandbox, sizeof(logger.sandbox), "%s", id ? id : "");
}

void log_set_fd(int fd)
{
	if (logger.bounded)
		capfile_destroy(&logger.file);
	logger.bounded = false;
	logger.fd = fd;
}

int log_set_max(uint64_t max, char *err, size_t errlen)
{
	struct capfile file;
	int ret = capfile_init(&file, logger.fd, max, err, errlen);

	if (ret < 0)
		return ret;
	if (logger.bounded)
		capfile_destroy(&logger.file);
	/* A pipe or a terminal has no size to bound: lines go as before,
	 * each on its own (a failed one does not silence the next). */
	logger.bounded = file.capped;
	if (file.capped)
		logger.file = file;
	else
		capfile_destroy(&file);
	return 0;
}

bool log_enabled(enum log_level level)
{
	return level <= logger.level;
}

const char *log_level_setting(void)
{
	return level_names[logger.level];
}

/* RFC 3339 in UTC with milliseconds: what collectors parse without help. */
static void timestamp(char *out, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	size_t n = strftime(out, len, "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out + n, len - n, ".%03ldZ", ts.tv_nsec / 1000000);
}

/*
 * The formats: the line's length, newline included, which is @size or
 * more when it does not fit (as snprintf's, whose NUL needs a byte), or -1
 * when jansson has no memory.
 */
static long json_line(char *line, size_t size, const char *when,
		      enum log_level level, const char *sandbox,
		      const char *msg)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "time", when, "level",
			      level_names[level], "program", logger.program,
			      "pid", (json_int_t)getpid());
	size_t n = 0;

	if (o && sandbox[0])
		json_object_set_new(o, "sandbox", json_string(sandbox));
	/* printable() made @msg UTF-8: json_string() accepts it. */
	if (o)
		json_object_set_new(o, "msg", json_string(msg));
	if (o)
		n = json_dumpb(o, line, size - 2, JSON_COMPACT);
	json_decref(o);
	if (n == 0)
		return -1;
	if (n <= size - 2)
		line[n] = '\n';
	return (long)n + 1;
}

static long text_line(char *line, size_t size, const char *when,
		      enum log_level level, const char *sandbox,
		      const char *msg)
{
	return snprintf(line, size, "%s %s: %s%s%s%s%s%s\n", when,
			logger.program,
			level == LOG_LEVEL_INFO ? "" : level_names[level],
			level == LOG_LEVEL_INFO ? "" : ": ",
			sandbox[0] ? "sandbox " : "", sandbox,
			sandbox[0] ? ": " : "", msg);
}

/* The bytes @c takes in a JSON string: printable() left no control but
 * the tab to escape. */
static size_t json_size(unsigned char c)
{
	return c == '"' || c == '\\' || c == '\t' ? 2 : 1;
}

/* Ends @msg near @at, on a character's boundary, with the cut mark; @msg
 * has room for @at + sizeof(cut_mark) bytes. */
static void cut(char *msg, size_t at)
{
	strcpy(msg + printable_cut(msg, at), cut_mark);
}

void log_write(enum log_level level, const char *sandbox, const char *fmt, ...)
{
	char msg[LINE_MAX_BYTES], line[LINE_MAX_BYTES], when[40], about[65];
	long (*format)(char *, size_t, const char *, enum log_level,
		       const char *, const char *) =
		logger.format == LOG_FORMAT_JSON ? json_line : text_line;
	int saved_errno = errno;
	va_list ap;
	long len;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	if (vsnprintf(msg, sizeof(msg), fmt, ap) >= (int)sizeof(msg))
		cut(msg, sizeof(msg) - sizeof(cut_mark));
	va_end(ap);
	/* A guest's or a client's bytes quoted in a message must not forge
	 * a line, drive a terminal or make the JSON encoder refuse it. */
	printable(msg);
	if (level == LOG_LEVEL_ERROR) {
		pthread_mutex_lock(&shared_lock);
		size_t n = strnlen(msg, sizeof(last_error) - 1);

		n = msg[n] ? printable_cut(msg, n) : n;

		memcpy(last_error, msg, n);
		last_error[n] = '\0';
		pthread_mutex_unlock(&shared_lock);
	}
	snprintf(about, sizeof(about), "%s",
		 sandbox ? sandbox : logger.sandbox);
	printable(about);
	timestamp(when, sizeof(when));

	len = format(line, sizeof(line), when, level, about, msg);
	if (len >= (long)sizeof(line)) {
		/* Cut what the excess and the mark take on the line: one
		 * more try fits. */
		size_t need =
			(size_t)len - (sizeof(line) - 1) + strlen(cut_mark);
		size_t at = strlen(msg), gone = 0;

		while (at > 0 && gone < need) {
			at--;
			gone += logger.format == LOG_FORMAT_JSON
					? json_size((unsigned char)msg[at])
					: 1;
		}
		cut(msg, at);
		len = format(line, sizeof(line), when, level, about, msg);
	}
	/* Never lose a line: without memory for JSON, it goes as text; a
	 * prefix too long for any message (a huge program name) is cut. */
	if (len < 0)
		len = text_line(line, sizeof(line), when, level, about, msg);
	if (len >= (long)sizeof(line)) {
		len = sizeof(line) - 1;
		line[len - 1] = '\n';
	}
	if (logger.bounded) {
		pthread_mutex_lock(&shared_lock);
		(void)capfile_write(&logger.file, line, (size_t)len);
		pthread_mutex_unlock(&shared_lock);
	} else {
		(void)write_full(logger.fd, line, (size_t)len);
	}
	errno = saved_errno;
}

void log_last_error(char *out, size_t size)
{
	pthread_mutex_lock(&shared_lock);
	snprintf(out, size, "%s", last_error);
	pthread_mutex_unlock(&shared_lock);
}

bool log_limit_pass(struct log_limit *limit, uint64_t now_ns,
		    unsigned int *suppressed)
{
	bool pass;

	pthread_mutex_lock(&shared_lock);
	if (!limit->started) {
		limit->started = true;
		limit->tokens = LOG_LIMIT_BURST;
		limit->refilled_ns = now_ns;
	}
	/* A token a second, up to the burst: a quiet site may speak again. */
	while (limit->tokens < LOG_LIMIT_BURST &&
	       now_ns - limit->refilled_ns >= LOG_LIMIT_INTERVAL_NS) {
		limit->tokens++;
		limit->refilled_ns += LOG_LIMIT_INTERVAL_NS;
	}
	if (limit->tokens == LOG_LIMIT_BURST)
		limit->refilled_ns = now_ns;
	pass = limit->tokens > 0;
	if (pass) {
		limit->tokens--;
		*suppressed = limit->suppressed;
		limit->suppressed = 0;
	} else {
		limit->suppressed++;
	}
	pthread_mutex_unlock(&shared_lock);
	return pass;
}

void log_write_limited(struct log_limit *limit, enum log_level level,
		       const char *fmt, ...)
{
	char msg[LINE_MAX_BYTES];
	unsigned int suppressed;
	va_list ap;

	if (!log_enabled(level) ||
	    !log_limit_pass(limit, monotonic_ns(), &suppressed))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (suppressed)
		log_write(level, NULL, "%s (%u similar suppressed)", msg,
			  suppressed);
	else
		log_write(level, NULL, "%s", msg);
}
