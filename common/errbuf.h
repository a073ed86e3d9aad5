/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errbuf.h - the error contract of thaw's libraries: a failing call
 * returns a code and writes one message into a buffer its caller owns
 * (char *err, size_t errlen), naming the file, field or value at fault.
 * The caller decides whether and how to show it (a main() prints it, the
 * daemon logs it or maps it to an HTTP status); libraries never print.
 */
#ifndef THAW_COMMON_ERRBUF_H
#define THAW_COMMON_ERRBUF_H

#include <stddef.h>

/*
 * Formats the message into @err (truncated to @errlen bytes, always
 * terminated).  A NULL @err or a zero @errlen means the caller does not
 * want the message: nothing is written.
 */
__attribute__((format(printf, 3, 4))) void errbuf_set(char *err, size_t errlen,
						      const char *fmt, ...);

/* The same, appended to the message already in @err. */
__attribute__((format(printf, 3, 4))) void
errbuf_append(char *err, size_t errlen, const char *fmt, ...);

#endif
