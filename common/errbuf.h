/* SPDX-License-Identifier: Apache-2.0 */
/*
 * errbuf.h - the error contract of thaw's libraries: a failing call
 * returns a code and writes one message into a buffer its caller owns
 * (char *err, size_t errlen), naming the file, field or value at fault.
 * The caller decides whether and how to show it (a main() prints it, the
 * daemon logs it or maps it to an HTTP status); libraries never print.
 *
 * The code, in every library (snapshot/, the catalog, pool/host/): an int
 * function returns 0, or a negative errno that says what happened: the
 * failing system call's errno where there is one, -EINVAL for a malformed
 * file or value, -ENOENT for something absent, -ENOMEM, -ENAMETOOLONG, ...
 * Never a bare -1, so a caller can tell "not there" from "broken" without
 * parsing the message.  A positive value is an answer the function's header
 * documents (a count, memfile_verify()'s "read fine, does not match"), and
 * a function returning a pointer returns NULL on failure.  Each library's
 * headers restate this in a line and name the errnos worth testing for.
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
