/* SPDX-License-Identifier: Apache-2.0 */
/*
 * printable.h - making a string that came from outside (a guest's console,
 * an agent's error, a daemon's answer) safe to show on one line of a log
 * or a terminal.  Such bytes must not forge a line of their own (a
 * newline), move a terminal's cursor or recolour it (C0 and C1 controls,
 * escape sequences), nor make a JSON encoder refuse the line (bytes that
 * are not UTF-8).  The log and the CLI share this one filter.
 */
#ifndef THAW_COMMON_PRINTABLE_H
#define THAW_COMMON_PRINTABLE_H

#include <stddef.h>

/*
 * Rewrites @s in place: C0 controls and DEL become spaces (tabs stay),
 * C1 controls (U+0080-U+009F) and each byte that does not start a valid
 * UTF-8 character become '?'.  The result is valid UTF-8 and never longer
 * than @s.
 */
void printable(char *s);

/*
 * The largest length <= @len at which @s can be cut without splitting a
 * UTF-8 character; @s holds more than @len bytes (its NUL counts).
 */
size_t printable_cut(const char *s, size_t len);

#endif
