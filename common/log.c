// SPDX-License-Identifier: Apache-2.0
/*
 * log.c - see log.h.  Settings are process-wide and set once at start, by
 * main(), before threads exist; writing reads them without a lock.
 */
#include "log.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* A line longer than this is cut, and says so. */
#define LINE_MAX_BYTES 4096

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
} logger = { .program = "thaw", .level = LOG_LEVEL_INFO, .fd = 2 };

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
	logger.fd = fd;
}

bool log_enabled(enum log_level level)
{
	return level <= logger.level;
}

const char *log_level_setting(void)
{
	return level_names[logger.level];
}

/*
 * One line per call, whatever the message holds: a guest's or a client's
 * bytes quoted in it must not forge a line of their own (a newline), move
 * the cursor or recolour a terminal (other control characters).  Tabs stay.
 */
static void one_line(char *msg)
{
	for (unsigned char *p = (unsigned char *)msg; *p; p++)
		if ((*p < 0x20 && *p != '\t') || *p == 0x7f)
			*p = ' ';
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

static int json_line(char *line, size_t size, const char *when,
		     enum log_level level, const char *sandbox,
		     const char *msg)
{
	json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "time", when, "level",
			      level_names[level], "program", logger.program,
			      "pid", (json_int_t)getpid());
	size_t n = 0;

	if (o && sandbox[0])
		json_object_set_new(o, "sandbox", json_string(sandbox));
	/* Not json_string(): a guest-supplied byte that is not UTF-8 must
	 * not lose the whole line. */
	if (o)
		json_object_set_new(o, "msg",
				    json_stringn_nocheck(msg, strlen(msg)));
	if (o)
		n = json_dumpb(o, line, size - 1, JSON_COMPACT);
	json_decref(o);
	if (n == 0 || n >= size - 1)
		return -1;
	line[n] = '\n';
	return (int)n + 1;
}

void log_write(enum log_level level, const char *sandbox, const char *fmt,
	       ...)
{
	char msg[LINE_MAX_BYTES], line[LINE_MAX_BYTES * 2], when[40];
	int saved_errno = errno;
	va_list ap;
	int len;

	if (!log_enabled(level))
		return;
	va_start(ap, fmt);
	if (vsnprintf(msg, sizeof(msg), fmt, ap) >= (int)sizeof(msg))
		strcpy(msg + sizeof(msg) - sizeof(" [cut]"), " [cut]");
	va_end(ap);
	one_line(msg);
	if (!sandbox)
		sandbox = logger.sandbox;
	timestamp(when, sizeof(when));
	if (logger.format == LOG_FORMAT_JSON)
		len = json_line(line, sizeof(line), when, level, sandbox, msg);
	else
		len = snprintf(line, sizeof(line), "%s %s: %s%s%s%s%s%s\n",
			       when, logger.program,
			       level == LOG_LEVEL_INFO ? "" : level_names[level],
			       level == LOG_LEVEL_INFO ? "" : ": ",
			       sandbox[0] ? "sandbox " : "", sandbox,
			       sandbox[0] ? ": " : "", msg);
	if (len > 0 && (size_t)len < sizeof(line))
		(void)!write(logger.fd, line, (size_t)len);
	errno = saved_errno;
}
