/* SPDX-License-Identifier: Apache-2.0 */
/*
 * log.h - the one logger of thaw's long-running programs, the daemon and
 * the VMM: a level, a timestamp, the program's name, and the sandbox a line
 * is about, on one line of stderr per call.
 *
 * Two formats.  Text, for people:
 *
 *	2026-12-01T03:35:18.123Z thawd: warning: sandbox 5f3a...: VMM died
 *
 * (info lines carry no level word, as compilers print them).  JSON lines,
 * for the collectors platforms ship logs to (--log-format json):
 *
 *	{"time":"2026-12-01T03:35:18.123Z","level":"warning","program":"thawd",
 *	 "pid":812,"sandbox":"5f3a...","msg":"VMM died"}
 *
 * A line is formatted whole first, at most PIPE_BUF (4096) bytes with its
 * newline (a longer message is cut, on a character's boundary, and ends in
 * " [cut]"), and written with one write(2).  A pipe, which is how the
 * daemon and supervisors read a VMM's stderr, writes that much at once, so
 * lines of concurrent threads, and of processes sharing the descriptor, do
 * not interleave there (nor in a file opened O_APPEND).  A terminal or a
 * socket may take part of it: the rest is written after, and only then can
 * another writer's bytes come between.  Whatever a message quotes (a
 * guest's console, an agent's error) is made printable() first: one line,
 * UTF-8, no terminal controls.  Libraries do not log: they return an error
 * and its message, and the program decides (see CONTRIBUTING.md, Errors).
 */
#ifndef THAW_COMMON_LOG_H
#define THAW_COMMON_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum log_level {
	LOG_LEVEL_ERROR,
	LOG_LEVEL_WARNING,
	LOG_LEVEL_INFO,
	LOG_LEVEL_DEBUG,
};

enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };

/* The defaults: "thaw", info, text, stderr. */

/* The name every line carries ("thawd", "thaw-vmm"). */
void log_set_program(const char *program);

/*
 * "error", "warning", "info" or "debug"; "text" or "json".  Return 0, or -1
 * with @err naming the value and the accepted ones.
 */
int log_set_level(const char *level, char *err, size_t errlen);
int log_set_format(const char *format, char *err, size_t errlen);

/* The sandbox every line is about when a call names none (a VMM serves
 * one); NULL: none. */
void log_set_sandbox(const char *id);

/* Lines go to @fd instead of 2 (tests), unbounded. */
void log_set_fd(int fd);

/*
 * From now on the log, when it is a regular file (a supervisor's vmm.log),
 * holds at most @max bytes from where it is: its first lines, a mark, its
 * latest lines (capfile.h).  0, or a negative errno with @err.
 */
int log_set_max(uint64_t max, char *err, size_t errlen);

bool log_enabled(enum log_level level);

/* The level set, as log_set_level() takes it: for the programs a daemon
 * starts, so that they log as much as it does. */
const char *log_level_setting(void);

/* One line at @level about sandbox @sandbox (NULL: the process's). */
__attribute__((format(printf, 3, 4))) void
log_write(enum log_level level, const char *sandbox, const char *fmt, ...);

/*
 * Rate limits, for lines a guest can trigger at will (a device told
 * garbage): each call site has its own limit, which lets LOG_LIMIT_BURST
 * lines through, then one per LOG_LIMIT_INTERVAL_NS; the next line to pass
 * ends in "(N similar suppressed)".  A quiet site earns its burst back, a
 * line a second.  Zero-initialised is ready.
 */
#define LOG_LIMIT_BURST 10
#define LOG_LIMIT_INTERVAL_NS 1000000000ULL

struct log_limit {
	bool started;
	unsigned int tokens;
	unsigned int suppressed;
	uint64_t refilled_ns;
};

/*
 * Whether a line at @now_ns passes @limit; when it does, *@suppressed is
 * how many did not since the last one that did.
 */
bool log_limit_pass(struct log_limit *limit, uint64_t now_ns,
		    unsigned int *suppressed);

/* log_write() about the process's sandbox, if @limit lets it pass. */
__attribute__((format(printf, 3, 4))) void
log_write_limited(struct log_limit *limit, enum log_level level,
		  const char *fmt, ...);

/* A line at @level, limited per call site. */
#define log_limited(level, ...)                                       \
	do {                                                          \
		static struct log_limit site_limit;                   \
		log_write_limited(&site_limit, (level), __VA_ARGS__); \
	} while (0)

#define log_error(...) log_write(LOG_LEVEL_ERROR, NULL, __VA_ARGS__)
#define log_warning(...) log_write(LOG_LEVEL_WARNING, NULL, __VA_ARGS__)
#define log_info(...) log_write(LOG_LEVEL_INFO, NULL, __VA_ARGS__)
#define log_debug(...) log_write(LOG_LEVEL_DEBUG, NULL, __VA_ARGS__)

#endif
