// SPDX-License-Identifier: Apache-2.0
/*
 * printable.c - see printable.h.  The UTF-8 check is RFC 3629's: no
 * overlong forms, no surrogates, nothing past U+10FFFF, which is what
 * jansson and collectors' JSON parsers accept.
 */
#include "common/printable.h"

#include <stdint.h>

static int is_continuation(unsigned char c)
{
	return (c & 0xc0) == 0x80;
}

/* The length of the valid UTF-8 character at @p, or 0 when it is not. */
static size_t utf8_char(const unsigned char *p, uint32_t *cp)
{
	size_t n;
	uint32_t min;

	if (p[0] < 0x80) {
		*cp = p[0];
		return 1;
	}
	if ((p[0] & 0xe0) == 0xc0) {
		n = 2, min = 0x80, *cp = p[0] & 0x1f;
	} else if ((p[0] & 0xf0) == 0xe0) {
		n = 3, min = 0x800, *cp = p[0] & 0x0f;
	} else if ((p[0] & 0xf8) == 0xf0) {
		n = 4, min = 0x10000, *cp = p[0] & 0x07;
	} else {
		return 0;
	}
	/* The NUL that ends the string is no continuation: no overrun. */
	for (size_t i = 1; i < n; i++) {
		if (!is_continuation(p[i]))
			return 0;
		*cp = (*cp << 6) | (p[i] & 0x3f);
	}
	if (*cp < min || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff))
		return 0;
	return n;
}

void printable(char *s)
{
	unsigned char *in = (unsigned char *)s, *out = in;
	uint32_t cp;

	while (*in) {
		size_t n = utf8_char(in, &cp);

		if (n == 0 || (cp >= 0x80 && cp <= 0x9f)) {
			*out++ = '?';
			in += n ? n : 1;
		} else if ((cp < 0x20 && cp != '\t') || cp == 0x7f) {
			*out++ = ' ';
			in++;
		} else {
			while (n--)
				*out++ = *in++;
		}
	}
	*out = '\0';
}

size_t printable_cut(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t cut = len;

	/* Back over at most three continuation bytes to their lead byte. */
	while (cut > 0 && len - cut < 3 && is_continuation(p[cut]))
		cut--;
	return is_continuation(p[cut]) ? len : cut;
}
