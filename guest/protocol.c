// SPDX-License-Identifier: Apache-2.0
/*
 * protocol.c - frame header, TLV writer and validating parser, and the
 * incremental frame reader of the thaw agent protocol (see protocol.h and
 * PROTOCOL.md).  Integers are assembled byte by byte so the code is
 * independent of host endianness and alignment.
 */
#include "guest/protocol.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

void thaw_header_encode(uint8_t out[THAW_HEADER_SIZE],
			const struct thaw_header *h)
{
	put32(out, h->length);
	put32(out + 4, h->request_id);
	put16(out + 8, h->type);
	put16(out + 10, h->flags);
}

void thaw_header_decode(const uint8_t in[THAW_HEADER_SIZE],
			struct thaw_header *h)
{
	h->length = get32(in);
	h->request_id = get32(in + 4);
	h->type = get16(in + 8);
	h->flags = get16(in + 10);
}

void thaw_writer_init(struct thaw_writer *w, void *buf, size_t cap,
		      uint32_t request_id, uint16_t type, uint16_t flags)
{
	struct thaw_header h = { .length = THAW_HEADER_REST,
				 .request_id = request_id,
				 .type = type,
				 .flags = flags };

	w->buf = buf;
	w->cap = cap < THAW_MAX_FRAME ? cap : THAW_MAX_FRAME;
	w->len = THAW_HEADER_SIZE;
	w->overflow = cap < THAW_HEADER_SIZE;
	if (!w->overflow)
		thaw_header_encode(w->buf, &h);
}

size_t thaw_writer_room(const struct thaw_writer *w)
{
	return w->overflow ? 0 : w->cap - w->len;
}

/* Reserves a TLV of @n value bytes; NULL (and overflow) if it won't fit. */
static uint8_t *tlv_reserve(struct thaw_writer *w, uint16_t tag, size_t n)
{
	uint8_t *p;

	if (w->overflow || thaw_writer_room(w) < THAW_TLV_HEADER ||
	    thaw_writer_room(w) - THAW_TLV_HEADER < n) {
		w->overflow = true;
		return NULL;
	}
	p = w->buf + w->len;
	put16(p, tag);
	put32(p + 2, (uint32_t)n);
	w->len += THAW_TLV_HEADER + n;
	return p + THAW_TLV_HEADER;
}

void thaw_put_bytes(struct thaw_writer *w, uint16_t tag, const void *p,
		    size_t n)
{
	uint8_t *v = tlv_reserve(w, tag, n);

	if (v && n)
		memcpy(v, p, n);
}

void thaw_put_str(struct thaw_writer *w, uint16_t tag, const char *s)
{
	thaw_put_bytes(w, tag, s, strlen(s));
}

void thaw_put_u8(struct thaw_writer *w, uint16_t tag, uint8_t v)
{
	uint8_t *p = tlv_reserve(w, tag, 1);

	if (p)
		*p = v;
}

void thaw_put_u32(struct thaw_writer *w, uint16_t tag, uint32_t v)
{
	uint8_t *p = tlv_reserve(w, tag, 4);

	if (p)
		put32(p, v);
}

void thaw_put_u64(struct thaw_writer *w, uint16_t tag, uint64_t v)
{
	uint8_t *p = tlv_reserve(w, tag, 8);

	if (p)
		put64(p, v);
}

size_t thaw_put_nested_begin(struct thaw_writer *w, uint16_t tag)
{
	size_t mark = w->len;

	tlv_reserve(w, tag, 0);
	return mark;
}

void thaw_put_nested_end(struct thaw_writer *w, size_t mark)
{
	if (w->overflow)
		return;
	put32(w->buf + mark + 2, (uint32_t)(w->len - mark - THAW_TLV_HEADER));
}

int thaw_writer_finish(struct thaw_writer *w)
{
	if (w->overflow)
		return -EMSGSIZE;
	put32(w->buf, (uint32_t)(w->len - 4));
	return (int)w->len;
}

#define FR(t, k, fl, min, max, n)                                   \
	{                                                           \
		.tag = THAW_T_##t, .kind = THAW_K_##k, .flags = fl, \
		.min_len = min, .max_len = max, .name = n           \
	}
#define F(t, k, fl, max, n) FR(t, k, fl, 0, max, n)
#define REQ THAW_F_REQUIRED
#define REP THAW_F_REPEATED
/* PATH_MAX counts the terminating NUL, which is not on the wire. */
#define PATH_LEN 4095

static const struct thaw_field_spec hello_fields[] = {
	F(VERSION, U32, REQ, 0, "VERSION"),
	F(AGENT_VERSION, STR, REQ, 64, "AGENT_VERSION"),
	F(BOOT_ID, STR, REQ, 64, "BOOT_ID"),
	FR(SANDBOX_ID, STR, 0, 1, 64, "SANDBOX_ID"),
};
static const struct thaw_field_spec ping_fields[] = {
	F(DATA, BYTES, 0, 0, "DATA"),
};
/* A user name (useradd allows 32 bytes) or a uid in decimal. */
#define USER_FIELD FR(USER, STR, 0, 1, 64, "USER")
static const struct thaw_field_spec exec_fields[] = {
	F(ARGV, STR, REQ | REP, 0, "ARGV"),	F(ENV, STR, REP, 0, "ENV"),
	F(CWD, STR, 0, PATH_LEN, "CWD"),	F(STDIN, BYTES, 0, 0, "STDIN"),
	F(TIMEOUT_MS, U32, 0, 0, "TIMEOUT_MS"), USER_FIELD,
	F(KEEP_STDIN, U8, 0, 0, "KEEP_STDIN"),
};
static const struct thaw_field_spec exec_started_fields[] = {
	F(PID, U32, REQ, 0, "PID"),
};
static const struct thaw_field_spec data_fields[] = {
	F(DATA, BYTES, REQ, 0, "DATA"),
};
static const struct thaw_field_spec exit_fields[] = {
	F(EXIT_CODE, U32, 0, 0, "EXIT_CODE"),
	F(SIGNAL, U32, 0, 0, "SIGNAL"),
	F(TIMED_OUT, U8, REQ, 0, "TIMED_OUT"),
};
static const struct thaw_field_spec kill_fields[] = {
	F(TARGET, U32, REQ, 0, "TARGET"),
	F(SIGNAL, U32, 0, 0, "SIGNAL"),
};
static const struct thaw_field_spec write_file_fields[] = {
	F(PATH, STR, 0, PATH_LEN, "PATH"),
	F(MODE, U32, 0, 0, "MODE"),
	F(DATA, BYTES, 0, 0, "DATA"),
	USER_FIELD,
};
static const struct thaw_field_spec path_fields[] = {
	F(PATH, STR, REQ, PATH_LEN, "PATH"),
};
static const struct thaw_field_spec end_fields[] = {
	F(SIZE, U64, 0, 0, "SIZE"),
};
/* Owner and group: a name of the guest's /etc/passwd or /etc/group, or
 * the id in decimal. */
#define STAT_SPECS                                                           \
	F(FILE_TYPE, U8, REQ, 0, "FILE_TYPE"), F(MODE, U32, REQ, 0, "MODE"), \
		F(SIZE, U64, REQ, 0, "SIZE"),                                \
		F(MTIME_NS, U64, REQ, 0, "MTIME_NS"),                        \
		FR(OWNER, STR, 0, 1, 64, "OWNER"),                           \
		FR(GROUP, STR, 0, 1, 64, "GROUP"),                           \
		FR(SYMLINK_TARGET, STR, 0, 1, PATH_LEN, "SYMLINK_TARGET")
static const struct thaw_field_spec stat_result_fields[] = {
	STAT_SPECS,
};
static const struct thaw_field_spec entries_fields[] = {
	F(ENTRY, BYTES, REP, 0, "ENTRY"),
};
static const struct thaw_field_spec entry_fields[] = {
	F(NAME, STR, REQ, 255, "NAME"),
	STAT_SPECS,
	/* Relative to the listed directory. */
	FR(PATH, STR, 0, 1, PATH_LEN, "PATH"),
};
static const struct thaw_field_spec list_fields[] = {
	F(PATH, STR, REQ, PATH_LEN, "PATH"),
	F(DEPTH, U32, 0, 0, "DEPTH"),
};
static const struct thaw_field_spec mkdir_fields[] = {
	F(PATH, STR, REQ, PATH_LEN, "PATH"),
	F(MODE, U32, 0, 0, "MODE"),
	F(PARENTS, U8, 0, 0, "PARENTS"),
	USER_FIELD,
};
static const struct thaw_field_spec remove_fields[] = {
	F(PATH, STR, REQ, PATH_LEN, "PATH"),
	F(RECURSIVE, U8, 0, 0, "RECURSIVE"),
};
static const struct thaw_field_spec error_fields[] = {
	F(ERRNO, U32, REQ, 0, "ERRNO"),
	F(MESSAGE, STR, REQ, 1024, "MESSAGE"),
};
static const struct thaw_field_spec clone_fields[] = {
	FR(ENTROPY, BYTES, REQ, 32, 256, "ENTROPY"),
	F(REALTIME_NS, U64, REQ, 0, "REALTIME_NS"),
	/* The kernel's limit for sethostname (__NEW_UTS_LEN). */
	FR(HOSTNAME, HOSTNAME, REQ, 1, 64, "HOSTNAME"),
	FR(SANDBOX_ID, STR, REQ, 1, 64, "SANDBOX_ID"),
};
static const struct thaw_field_spec stdin_fields[] = {
	F(TARGET, U32, REQ, 0, "TARGET"),
	F(DATA, BYTES, 0, 0, "DATA"),
};
static const struct thaw_field_spec rename_fields[] = {
	F(PATH, STR, REQ, PATH_LEN, "PATH"),
	F(NEW_PATH, STR, REQ, PATH_LEN, "NEW_PATH"),
};
static const struct thaw_field_spec watch_fields[] = {
	F(PATH, STR, REQ, PATH_LEN, "PATH"),
	F(RECURSIVE, U8, 0, 0, "RECURSIVE"),
};
static const struct thaw_field_spec fs_event_fields[] = {
	/* Empty: the watched directory itself, or an overflow anywhere. */
	F(PATH, STR, REQ, PATH_LEN, "PATH"),
	F(EVENT, U8, REQ, 0, "EVENT"),
};

#define S(t, f)                                            \
	{                                                  \
		.type = THAW_##t, .name = #t, .fields = f, \
		.nfields = sizeof(f) / sizeof(f[0])        \
	}
#define S0(t)                                                              \
	{                                                                  \
		.type = THAW_##t, .name = #t, .fields = NULL, .nfields = 0 \
	}

static const struct thaw_schema schemas[] = {
	S(HELLO, hello_fields),
	S(PING, ping_fields),
	S(PONG, ping_fields),
	S(EXEC, exec_fields),
	S(EXEC_STARTED, exec_started_fields),
	S(STDOUT, data_fields),
	S(STDERR, data_fields),
	S(EXIT, exit_fields),
	S(KILL, kill_fields),
	S(WRITE_FILE, write_file_fields),
	S(READ_FILE, path_fields),
	S(DATA, data_fields),
	S(END, end_fields),
	S(STAT, path_fields),
	S(STAT_RESULT, stat_result_fields),
	S(LIST, list_fields),
	S(ENTRIES, entries_fields),
	S(MKDIR, mkdir_fields),
	S(REMOVE, remove_fields),
	S0(OK),
	S(ERROR, error_fields),
	S(CLONE, clone_fields),
	S(STDIN, stdin_fields),
	S(RENAME, rename_fields),
	S(WATCH, watch_fields),
	S0(WATCHING),
	S(FS_EVENT, fs_event_fields),
};

const struct thaw_schema thaw_entry_schema = S(ENTRIES, entry_fields);

const struct thaw_schema *thaw_schema_of(uint16_t type)
{
	/* Types are numbered densely from 1 in table order. */
	if (type == 0 || type > sizeof(schemas) / sizeof(schemas[0]))
		return NULL;
	return &schemas[type - 1];
}

const char *thaw_type_name(uint16_t type)
{
	static _Thread_local char unknown[16];
	const struct thaw_schema *s = thaw_schema_of(type);

	if (s)
		return s->name;
	snprintf(unknown, sizeof(unknown), "type %u", type);
	return unknown;
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (errlen) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return -EPROTO;
}

static const struct thaw_field_spec *spec_of(const struct thaw_schema *s,
					     uint16_t tag, size_t *index)
{
	for (size_t i = 0; i < s->nfields; i++) {
		if (s->fields[i].tag == tag) {
			*index = i;
			return &s->fields[i];
		}
	}
	return NULL;
}

/* RFC 1123's set; isalnum() would depend on the locale. */
static bool hostname_char(uint8_t c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
	       (c >= '0' && c <= '9') || c == '-' || c == '.';
}

static int check_value(const struct thaw_schema *s,
		       const struct thaw_field_spec *fs, const uint8_t *v,
		       uint32_t len, char *err, size_t errlen)
{
	static const uint32_t fixed[] = {
		[THAW_K_U8] = 1, [THAW_K_U32] = 4, [THAW_K_U64] = 8
	};

	switch (fs->kind) {
	case THAW_K_U8:
	case THAW_K_U32:
	case THAW_K_U64:
		if (len != fixed[fs->kind])
			return fail(err, errlen,
				    "%s: field %s has %u bytes, want %u",
				    s->name, fs->name, len, fixed[fs->kind]);
		return 0;
	case THAW_K_STR:
		if (memchr(v, 0, len))
			return fail(err, errlen,
				    "%s: field %s contains a NUL byte", s->name,
				    fs->name);
		break;
	case THAW_K_HOSTNAME:
		for (uint32_t i = 0; i < len; i++) {
			if (!hostname_char(v[i]))
				return fail(err, errlen,
					    "%s: field %s has byte 0x%02x at "
					    "offset %u, not a hostname "
					    "character",
					    s->name, fs->name, v[i], i);
		}
		break;
	}
	if (len < fs->min_len)
		return fail(err, errlen, "%s: field %s has %u bytes, min %u",
			    s->name, fs->name, len, fs->min_len);
	if (fs->max_len && len > fs->max_len)
		return fail(err, errlen, "%s: field %s has %u bytes, max %u",
			    s->name, fs->name, len, fs->max_len);
	return 0;
}

int thaw_parse(struct thaw_msg *m, const struct thaw_schema *schema,
	       const uint8_t *payload, size_t len, char *err, size_t errlen)
{
	size_t off = 0;
	int ret;

	memset(m, 0, sizeof(*m));
	m->schema = schema;
	m->payload = payload;
	m->len = len;
	while (off < len) {
		const struct thaw_field_spec *fs;
		struct thaw_field *f;
		uint32_t vlen;
		uint16_t tag;
		size_t i;

		if (len - off < THAW_TLV_HEADER)
			return fail(err, errlen,
				    "%s: truncated field header at offset %zu "
				    "(%zu bytes left)",
				    schema->name, off, len - off);
		tag = get16(payload + off);
		vlen = get32(payload + off + 2);
		off += THAW_TLV_HEADER;
		if (vlen > len - off)
			return fail(err, errlen,
				    "%s: field tag %u length %u runs past the "
				    "payload end (%zu bytes left)",
				    schema->name, tag, vlen, len - off);
		fs = spec_of(schema, tag, &i);
		if (fs) {
			f = &m->f[i];
			if (f->count && !(fs->flags & THAW_F_REPEATED))
				return fail(err, errlen,
					    "%s: field %s appears twice",
					    schema->name, fs->name);
			ret = check_value(schema, fs, payload + off, vlen, err,
					  errlen);
			if (ret)
				return ret;
			if (!f->count) {
				f->data = payload + off;
				f->len = vlen;
			}
			f->count++;
		}
		off += vlen;
	}
	for (size_t i = 0; i < schema->nfields; i++) {
		if ((schema->fields[i].flags & THAW_F_REQUIRED) &&
		    !m->f[i].count)
			return fail(err, errlen, "%s: field %s missing",
				    schema->name, schema->fields[i].name);
	}
	return 0;
}

int thaw_parse_type(struct thaw_msg *m, uint16_t type, const uint8_t *payload,
		    size_t len, char *err, size_t errlen)
{
	const struct thaw_schema *s = thaw_schema_of(type);

	if (!s) {
		fail(err, errlen, "unknown message type %u", type);
		return -ENOSYS;
	}
	return thaw_parse(m, s, payload, len, err, errlen);
}

const struct thaw_field *thaw_get(const struct thaw_msg *m, uint16_t tag)
{
	static const struct thaw_field absent;
	size_t i;

	if (!spec_of(m->schema, tag, &i))
		return &absent;
	return &m->f[i];
}

bool thaw_has(const struct thaw_msg *m, uint16_t tag)
{
	return thaw_get(m, tag)->count > 0;
}

uint8_t thaw_get_u8(const struct thaw_msg *m, uint16_t tag, uint8_t def)
{
	const struct thaw_field *f = thaw_get(m, tag);

	return f->count && f->len == 1 ? f->data[0] : def;
}

uint32_t thaw_get_u32(const struct thaw_msg *m, uint16_t tag, uint32_t def)
{
	const struct thaw_field *f = thaw_get(m, tag);

	return f->count && f->len == 4 ? get32(f->data) : def;
}

uint64_t thaw_get_u64(const struct thaw_msg *m, uint16_t tag, uint64_t def)
{
	const struct thaw_field *f = thaw_get(m, tag);

	return f->count && f->len == 8 ? get64(f->data) : def;
}

int thaw_get_str(const struct thaw_msg *m, uint16_t tag, char *out,
		 size_t outlen)
{
	const struct thaw_field *f = thaw_get(m, tag);

	if (!f->count)
		return -ENOENT;
	if (f->len >= outlen)
		return -ENAMETOOLONG;
	memcpy(out, f->data, f->len);
	out[f->len] = '\0';
	return 0;
}

bool thaw_next(const struct thaw_msg *m, uint16_t tag, size_t *iter,
	       const uint8_t **val, uint32_t *len)
{
	/* thaw_parse already checked every TLV lies inside the payload. */
	while (*iter + THAW_TLV_HEADER <= m->len) {
		const uint8_t *p = m->payload + *iter;
		uint32_t vlen = get32(p + 2);

		*iter += THAW_TLV_HEADER + vlen;
		if (get16(p) == tag) {
			*val = p + THAW_TLV_HEADER;
			*len = vlen;
			return true;
		}
	}
	return false;
}

int thaw_reader_init(struct thaw_reader *r)
{
	memset(r, 0, sizeof(*r));
	r->buf = malloc(THAW_MAX_PAYLOAD);
	return r->buf ? 0 : -ENOMEM;
}

void thaw_reader_free(struct thaw_reader *r)
{
	free(r->buf);
	r->buf = NULL;
}

static bool in_body(const struct thaw_reader *r)
{
	return r->hdr_have == THAW_HEADER_SIZE;
}

bool thaw_reader_idle(const struct thaw_reader *r)
{
	return r->hdr_have == 0 && r->discard == 0;
}

void thaw_reader_want(struct thaw_reader *r, uint8_t **p, size_t *n)
{
	if (r->discard) {
		/* Skipped bytes land in the payload buffer and are dropped. */
		*p = r->buf;
		*n = r->discard < THAW_MAX_PAYLOAD ? r->discard
						   : THAW_MAX_PAYLOAD;
	} else if (in_body(r)) {
		*p = r->buf + r->body_have;
		*n = r->body_len - r->body_have;
	} else if (r->hdr_have < 4) {
		/* The length alone decides whether a header follows. */
		*p = r->hdr + r->hdr_have;
		*n = 4 - r->hdr_have;
	} else {
		*p = r->hdr + r->hdr_have;
		*n = THAW_HEADER_SIZE - r->hdr_have;
	}
}

static int frame_done(struct thaw_reader *r, struct thaw_frame *f)
{
	f->h = r->h;
	f->payload = r->buf;
	f->payload_len = r->body_len;
	r->hdr_have = 0;
	r->body_have = 0;
	r->body_len = 0;
	return THAW_READ_FRAME;
}

int thaw_reader_advance(struct thaw_reader *r, size_t n, struct thaw_frame *f)
{
	if (r->discard) {
		r->discard -= n;
		return THAW_READ_AGAIN;
	}
	if (in_body(r)) {
		r->body_have += (uint32_t)n;
		if (r->body_have < r->body_len)
			return THAW_READ_AGAIN;
		return frame_done(r, f);
	}
	r->hdr_have += n;
	if (r->hdr_have == 4) {
		uint32_t length = get32(r->hdr);

		if (length < THAW_HEADER_REST) {
			memset(f, 0, sizeof(*f));
			f->h.length = length;
			r->hdr_have = 0;
			r->discard = length;
			return THAW_READ_RUNT;
		}
		return THAW_READ_AGAIN;
	}
	if (r->hdr_have < THAW_HEADER_SIZE)
		return THAW_READ_AGAIN;
	thaw_header_decode(r->hdr, &r->h);
	if (r->h.length - THAW_HEADER_REST > THAW_MAX_PAYLOAD) {
		memset(f, 0, sizeof(*f));
		f->h = r->h;
		r->hdr_have = 0;
		r->discard = r->h.length - THAW_HEADER_REST;
		return THAW_READ_OVERSIZED;
	}
	r->body_len = r->h.length - THAW_HEADER_REST;
	r->body_have = 0;
	if (r->body_len == 0)
		return frame_done(r, f);
	return THAW_READ_AGAIN;
}

int thaw_reader_read(struct thaw_reader *r, int fd, struct thaw_frame *f)
{
	for (;;) {
		uint8_t *p;
		size_t n;
		ssize_t got;
		int st;

		thaw_reader_want(r, &p, &n);
		got = read(fd, p, n);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return THAW_READ_AGAIN;
			return -errno;
		}
		if (got == 0)
			return thaw_reader_idle(r) ? THAW_READ_EOF : -EPIPE;
		st = thaw_reader_advance(r, (size_t)got, f);
		if (st != THAW_READ_AGAIN)
			return st;
	}
}
