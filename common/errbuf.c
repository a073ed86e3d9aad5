// SPDX-License-Identifier: Apache-2.0
/*
 * errbuf.c - see errbuf.h.
 */
#include "common/errbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void errbuf_set(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

void errbuf_append(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	size_t used;

	if (!err || !errlen)
		return;
	used = strnlen(err, errlen - 1);
	va_start(ap, fmt);
	vsnprintf(err + used, errlen - used, fmt, ap);
	va_end(ap);
}
