// SPDX-License-Identifier: Apache-2.0
/*
 * vmm_report.c - see vmm_report.h.  The writer formats by hand (no
 * snprintf: it runs in a SIGSYS handler); the reader checks a whole line
 * before it keeps it, so a getter only ever walks well-formed records.
 */
#include "vmm/vmm_report.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char hex[] = "0123456789ABCDEF";

static bool word_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

/* Bytes a value carries as %XX. */
static bool needs_escape(unsigned char c)
{
	return c <= ' ' || c == '%' || c == '=' || c == 0x7f;
}

/* Room left for more, keeping one byte for the newline. */
static size_t room(const struct vmm_record *r)
{
	return sizeof(r->line) - 1 - r->len;
}

static void put(struct vmm_record *r, const char *s, size_t n)
{
	memcpy(r->line + r->len, s, n);
	r->len += n;
}

void vmm_record_begin(struct vmm_record *r, const char *kind)
{
	size_t n = strnlen(kind, VMM_REPORT_KEY_MAX - 1);

	r->len = 0;
	put(r, kind, n);
}

/* " KEY=" when it and @need bytes after it fit; false when not. */
static bool put_key(struct vmm_record *r, const char *key, size_t need)
{
	size_t n = strnlen(key, VMM_REPORT_KEY_MAX - 1);

	if (room(r) < n + 2 + need)
		return false;
	put(r, " ", 1);
	put(r, key, n);
	put(r, "=", 1);
	return true;
}

void vmm_record_put_u64(struct vmm_record *r, const char *key, uint64_t value)
{
	char digits[20];
	size_t n = 0;

	do
		digits[sizeof(digits) - ++n] = (char)('0' + value % 10);
	while ((value /= 10) && n < sizeof(digits));
	if (put_key(r, key, n))
		put(r, digits + sizeof(digits) - n, n);
}

void vmm_record_put_text(struct vmm_record *r, const char *key,
			 const char *text)
{
	if (!put_key(r, key, 0))
		return;
	for (size_t i = 0; text[i] && i < VMM_REPORT_VALUE_MAX - 1; i++) {
		unsigned char c = (unsigned char)text[i];

		if (!needs_escape(c)) {
			if (room(r) < 1)
				return;
			put(r, (const char *)&c, 1);
		} else {
			char esc[3] = { '%', hex[c >> 4], hex[c & 15] };

			if (room(r) < 3)
				return;
			put(r, esc, 3);
		}
	}
}

int vmm_record_send(struct vmm_record *r, int fd)
{
	ssize_t n;

	r->line[r->len++] = '\n';
	do
		n = write(fd, r->line, r->len);
	while (n < 0 && errno == EINTR);
	r->len--;
	if (n < 0)
		return -errno;
	return (size_t)n == r->len + 1 ? 0 : -EIO;
}

void vmm_report_init(struct vmm_report *r)
{
	memset(r, 0, sizeof(*r));
}

static void note(struct vmm_report *r, const char *why, const char *line,
		 size_t len)
{
	if (r->problem[0])
		return;
	/* Quoted only up to the first byte that is not a word's. */
	size_t shown = 0;

	while (shown < len && shown < 40 &&
	       (word_char(line[shown]) || line[shown] == '=' ||
		line[shown] == ' ' || line[shown] == '%'))
		shown++;
	snprintf(r->problem, sizeof(r->problem), "%s: '%.*s'%s", why,
		 (int)shown, line, shown < len ? "..." : "");
}

static int hex_value(char c)
{
	const char *p = c ? strchr(hex, c) : NULL;

	return p ? (int)(p - hex) : -1;
}

/*
 * Walks the field at @p (a well-formed line's, past its space): its key's
 * length into *@key_len and its value's decoded length into *@value_len.
 * Returns the end of the field, or NULL when it is malformed.
 */
static const char *field_end(const char *p, const char *end, size_t *key_len,
			     size_t *value_len)
{
	const char *k = p;

	while (p < end && word_char(*p))
		p++;
	*key_len = (size_t)(p - k);
	if (!*key_len || *key_len >= VMM_REPORT_KEY_MAX || p == end ||
	    *p != '=')
		return NULL;
	*value_len = 0;
	for (p++; p < end && *p != ' '; (*value_len)++) {
		if (*p == '%') {
			if (end - p < 3 || hex_value(p[1]) < 0 ||
			    hex_value(p[2]) < 0)
				return NULL;
			p += 3;
		} else if (needs_escape((unsigned char)*p)) {
			return NULL;
		} else {
			p++;
		}
	}
	return *value_len < VMM_REPORT_VALUE_MAX ? p : NULL;
}

/* Whether @line (@len bytes, no newline) is a record as vmm_report.h says. */
static bool well_formed(const char *line, size_t len, size_t *kind_len)
{
	const char *end = line + len, *p = line;
	size_t key_len, value_len;

	while (p < end && word_char(*p))
		p++;
	*kind_len = (size_t)(p - line);
	if (!*kind_len || *kind_len >= VMM_REPORT_KEY_MAX)
		return false;
	while (p < end) {
		if (*p != ' ' ||
		    !(p = field_end(p + 1, end, &key_len, &value_len)))
			return false;
	}
	return true;
}

/* A whole line, newline gone: kept by its kind if it is a record. */
static void take_line(struct vmm_report *r, const char *line, size_t len)
{
	size_t kind_len;
	char *slot = NULL;

	if (!well_formed(line, len, &kind_len)) {
		note(r, "a garbled record", line, len);
		return;
	}
	if (kind_len == strlen(VMM_REPORT_READY) &&
	    !memcmp(line, VMM_REPORT_READY, kind_len))
		slot = r->ready;
	else if (kind_len == strlen(VMM_REPORT_STOP) &&
		 !memcmp(line, VMM_REPORT_STOP, kind_len))
		slot = r->stop;
	if (!slot)
		return; /* a kind of a later VMM's */
	memcpy(slot, line, len);
	slot[len] = '\0';
}

void vmm_report_feed(struct vmm_report *r, const char *bytes, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char c = bytes[i];

		if (c == '\n') {
			if (!r->overlong)
				take_line(r, r->partial, r->partial_len);
			r->overlong = false;
			r->partial_len = 0;
		} else if (r->overlong) {
			continue;
		} else if (r->partial_len == sizeof(r->partial) - 1) {
			note(r, "a record longer than the channel's bound",
			     r->partial, r->partial_len);
			r->overlong = true;
		} else {
			r->partial[r->partial_len++] = c;
		}
	}
}

void vmm_report_end(struct vmm_report *r)
{
	if (r->partial_len && !r->overlong)
		note(r, "a truncated record", r->partial, r->partial_len);
	r->partial_len = 0;
	r->overlong = false;
}

int vmm_report_text(const char *record, const char *key, char *value,
		    size_t size)
{
	const char *end = record + strlen(record);
	const char *p = strchr(record, ' ');
	size_t want = strlen(key), key_len, value_len;

	while (p && p < end) {
		const char *field = p + 1;
		const char *next = field_end(field, end, &key_len, &value_len);

		if (!next)
			return -ENOENT; /* not a record the reader kept */
		if (key_len == want && !memcmp(field, key, want)) {
			if (value_len >= size)
				return -ENOSPC;
			size_t n = 0;

			for (const char *v = field + key_len + 1; v < next;) {
				if (*v == '%') {
					value[n++] =
						(char)(hex_value(v[1]) << 4 |
						       hex_value(v[2]));
					v += 3;
				} else {
					value[n++] = *v++;
				}
			}
			value[n] = '\0';
			return 0;
		}
		p = next;
	}
	return -ENOENT;
}

int vmm_report_u64(const char *record, const char *key, uint64_t *value)
{
	char text[24];
	uint64_t v = 0;
	int ret = vmm_report_text(record, key, text, sizeof(text));

	if (ret == -ENOSPC)
		return -EINVAL;
	if (ret < 0)
		return ret;
	if (!text[0])
		return -EINVAL;
	for (const char *p = text; *p; p++) {
		if (*p < '0' || *p > '9' || v > (UINT64_MAX - (*p - '0')) / 10)
			return -EINVAL;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*value = v;
	return 0;
}
