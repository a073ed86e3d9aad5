/* SPDX-License-Identifier: Apache-2.0 */
/*
 * subprocess.h - running a helper program for its answer.
 *
 * thaw's build-and-cache helpers (guest/kernel/build.sh, thaw-mkinitramfs)
 * print progress on stderr and the path of their result as the last line of
 * stdout.  Both the VMM and the CLI ask them for paths this way.
 */
#ifndef THAW_COMMON_SUBPROCESS_H
#define THAW_COMMON_SUBPROCESS_H

#include <stddef.h>

/*
 * Runs @argv (argv[0] is a path), lets its stderr through (the helper's
 * progress and errors reach the user as it prints them; see
 * run_set_stderr_sink()), and copies the last non-empty line of its stdout
 * into @out.  Returns 0 when the program exited 0 and printed a line that
 * fits; else, with one message in @err, -EIO when it failed (the message
 * points at its own, above), -EPROTO when its answer is no usable line, or
 * the errno of a pipe or of starting it.
 * A signal that interrupts the wait (the callers handle only those that
 * stop them) is passed on as SIGTERM.
 */
int run_for_last_line(char *const argv[], char *out, size_t outlen, char *err,
		      size_t errlen);

/*
 * From now on (process-wide; set once by a main()), the helpers' stderr
 * goes to @sink a line at a time instead of straight to ours: the daemon
 * logs it, so a template build's progress is in its log's format.  NULL:
 * straight through again.
 */
void run_set_stderr_sink(void (*sink)(const char *line));

#endif
