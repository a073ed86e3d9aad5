/* SPDX-License-Identifier: Apache-2.0 */
/*
 * protocol.h - the codec for the thaw agent protocol (guest/PROTOCOL.md),
 * shared by thaw-agent in the guest and the host side that talks to it.
 *
 * A frame is a 12-byte little-endian header (u32 length of everything after
 * the length field, u32 request_id, u16 type, u16 flags) and a payload of at
 * most THAW_MAX_PAYLOAD bytes.  A payload is a flat sequence of TLV fields
 * (u16 tag, u32 len, value); each message type has a schema that says which
 * tags it knows, their kinds, and which are required or may repeat, so both
 * sides validate a payload the same way and unknown tags can be added later
 * without breaking older peers.
 *
 * Nothing here allocates except thaw_reader_init (one payload-sized buffer,
 * once per connection): the writer encodes into caller memory and parsed
 * fields point into the payload they came from.  Functions report errors as
 * negative errno values, never by exiting.
 */
#ifndef THAW_GUEST_PROTOCOL_H
#define THAW_GUEST_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Version 2 added fields an older agent would skip, changing what a request
 * does (EXEC's USER and KEEP_STDIN, LIST's DEPTH): a host must not send them
 * to an agent that greets with version 1.
 */
#define THAW_PROTOCOL_VERSION 2
#define THAW_PROTOCOL_VERSION_MIN 1
#define THAW_HEADER_SIZE 12
/* The part of the header that the length field counts. */
#define THAW_HEADER_REST 8
#define THAW_MAX_PAYLOAD (1u << 20)
#define THAW_MAX_FRAME (THAW_HEADER_SIZE + THAW_MAX_PAYLOAD)
#define THAW_TLV_HEADER 6

/* Header flags.  Any other bit set is a protocol error. */
#define THAW_FLAG_FINAL 0x0001u
#define THAW_KNOWN_FLAGS THAW_FLAG_FINAL

/* The agent's vsock port; the guest is CID 3 by the VMM's convention. */
#define THAW_AGENT_VSOCK_PORT 1024

enum thaw_type {
	THAW_HELLO = 1,
	THAW_PING = 2,
	THAW_PONG = 3,
	THAW_EXEC = 4,
	THAW_EXEC_STARTED = 5,
	THAW_STDOUT = 6,
	THAW_STDERR = 7,
	THAW_EXIT = 8,
	THAW_KILL = 9,
	THAW_WRITE_FILE = 10,
	THAW_READ_FILE = 11,
	THAW_DATA = 12,
	THAW_END = 13,
	THAW_STAT = 14,
	THAW_STAT_RESULT = 15,
	THAW_LIST = 16,
	THAW_ENTRIES = 17,
	THAW_MKDIR = 18,
	THAW_REMOVE = 19,
	THAW_OK = 20,
	THAW_ERROR = 21,
	THAW_CLONE = 22,
	THAW_STDIN = 23,
	THAW_RENAME = 24,
	THAW_WATCH = 25,
	THAW_WATCHING = 26,
	THAW_FS_EVENT = 27,
};

enum thaw_tag {
	THAW_T_VERSION = 1,
	THAW_T_AGENT_VERSION = 2,
	THAW_T_BOOT_ID = 3,
	THAW_T_ARGV = 4,
	THAW_T_ENV = 5,
	THAW_T_CWD = 6,
	THAW_T_STDIN = 7,
	THAW_T_TIMEOUT_MS = 8,
	THAW_T_PID = 9,
	THAW_T_DATA = 10,
	THAW_T_EXIT_CODE = 11,
	THAW_T_SIGNAL = 12,
	THAW_T_TIMED_OUT = 13,
	THAW_T_TARGET = 14,
	THAW_T_PATH = 15,
	THAW_T_MODE = 16,
	THAW_T_FILE_TYPE = 17,
	THAW_T_SIZE = 18,
	THAW_T_MTIME_NS = 19,
	THAW_T_ENTRY = 20,
	THAW_T_NAME = 21,
	THAW_T_PARENTS = 22,
	THAW_T_RECURSIVE = 23,
	THAW_T_ERRNO = 24,
	THAW_T_MESSAGE = 25,
	THAW_T_ENTROPY = 26,
	THAW_T_REALTIME_NS = 27,
	THAW_T_HOSTNAME = 28,
	THAW_T_SANDBOX_ID = 29,
	THAW_T_USER = 30,
	THAW_T_KEEP_STDIN = 31,
	THAW_T_NEW_PATH = 32,
	THAW_T_OWNER = 33,
	THAW_T_GROUP = 34,
	THAW_T_SYMLINK_TARGET = 35,
	THAW_T_DEPTH = 36,
	THAW_T_EVENT = 37,
};

enum thaw_file_type {
	THAW_FT_OTHER = 0,
	THAW_FT_REGULAR = 1,
	THAW_FT_DIR = 2,
	THAW_FT_SYMLINK = 3,
	THAW_FT_CHAR = 4,
	THAW_FT_BLOCK = 5,
	THAW_FT_FIFO = 6,
	THAW_FT_SOCKET = 7,
};

/* FS_EVENT's EVENT: envd's EventType numbers, and OVERFLOW (events lost). */
enum thaw_event_type {
	THAW_EV_CREATE = 1,
	THAW_EV_WRITE = 2,
	THAW_EV_REMOVE = 3,
	THAW_EV_RENAME = 4,
	THAW_EV_CHMOD = 5,
	THAW_EV_OVERFLOW = 6,
};

/* LIST's DEPTH, and how many entries one LIST may answer. */
#define THAW_LIST_MAX_DEPTH 64
#define THAW_LIST_MAX_ENTRIES 65536

struct thaw_header {
	uint32_t length; /* bytes after the length field */
	uint32_t request_id;
	uint16_t type;
	uint16_t flags;
};

void thaw_header_encode(uint8_t out[THAW_HEADER_SIZE],
			const struct thaw_header *h);
void thaw_header_decode(const uint8_t in[THAW_HEADER_SIZE],
			struct thaw_header *h);

/*
 * Frame writer.  Encodes one frame into @buf; a field that does not fit
 * (in @cap or in THAW_MAX_PAYLOAD) sets the sticky overflow flag, which
 * thaw_writer_finish reports, so callers check once at the end.
 */
struct thaw_writer {
	uint8_t *buf;
	size_t cap; /* whole frame, header included */
	size_t len;
	bool overflow;
};

void thaw_writer_init(struct thaw_writer *w, void *buf, size_t cap,
		      uint32_t request_id, uint16_t type, uint16_t flags);
/* Payload bytes that can still be added (TLV headers included). */
size_t thaw_writer_room(const struct thaw_writer *w);
void thaw_put_bytes(struct thaw_writer *w, uint16_t tag, const void *p,
		    size_t n);
void thaw_put_str(struct thaw_writer *w, uint16_t tag, const char *s);
void thaw_put_u8(struct thaw_writer *w, uint16_t tag, uint8_t v);
void thaw_put_u32(struct thaw_writer *w, uint16_t tag, uint32_t v);
void thaw_put_u64(struct thaw_writer *w, uint16_t tag, uint64_t v);
/*
 * A field whose value is itself a TLV sequence (LIST's ENTRY): begin
 * returns a mark, the caller puts the inner fields, end patches the length.
 */
size_t thaw_put_nested_begin(struct thaw_writer *w, uint16_t tag);
void thaw_put_nested_end(struct thaw_writer *w, size_t mark);
/* Fills in the length; returns the frame's size in bytes or -EMSGSIZE. */
int thaw_writer_finish(struct thaw_writer *w);

/* Schemas: what each message type may carry. */
enum thaw_kind {
	THAW_K_U8,
	THAW_K_U32,
	THAW_K_U64,
	THAW_K_STR, /* bytes without NUL; not NUL-terminated on the wire */
	THAW_K_BYTES,
	THAW_K_HOSTNAME, /* a str of letters, digits, '-' and '.' only */
};

#define THAW_F_REQUIRED 0x1
#define THAW_F_REPEATED 0x2

struct thaw_field_spec {
	uint16_t tag;
	uint8_t kind;
	uint8_t flags;
	uint32_t min_len; /* for str, bytes and hostname */
	uint32_t max_len; /* 0: bounded only by the payload */
	const char *name;
};

struct thaw_schema {
	uint16_t type;
	const char *name;
	const struct thaw_field_spec *fields;
	size_t nfields;
};

/* NULL for a type this protocol version does not define. */
const struct thaw_schema *thaw_schema_of(uint16_t type);
/* "EXEC", or "type 77" in a static buffer for unknown types. */
const char *thaw_type_name(uint16_t type);
/* The nested schema of a LIST ENTRY field. */
extern const struct thaw_schema thaw_entry_schema;

#define THAW_MAX_FIELDS 12

/* One parsed field: its first occurrence and how many times it appeared. */
struct thaw_field {
	const uint8_t *data;
	uint32_t len;
	uint32_t count;
};

struct thaw_msg {
	const struct thaw_schema *schema;
	const uint8_t *payload;
	size_t len;
	struct thaw_field f[THAW_MAX_FIELDS];
};

/*
 * Validates @payload against @schema: every TLV inside the payload, known
 * fields of the right size and kind, required ones present, non-repeated
 * ones at most once.  Unknown tags are skipped.  Returns 0, or -EPROTO with
 * a message naming the field in @err.
 */
int thaw_parse(struct thaw_msg *m, const struct thaw_schema *schema,
	       const uint8_t *payload, size_t len, char *err, size_t errlen);
/* Like thaw_parse with the type's schema; -ENOSYS for an unknown type. */
int thaw_parse_type(struct thaw_msg *m, uint16_t type, const uint8_t *payload,
		    size_t len, char *err, size_t errlen);

/* The field of @tag (count 0 when absent); @tag must be in the schema. */
const struct thaw_field *thaw_get(const struct thaw_msg *m, uint16_t tag);
bool thaw_has(const struct thaw_msg *m, uint16_t tag);
/* Typed getters return @def when the field is absent. */
uint8_t thaw_get_u8(const struct thaw_msg *m, uint16_t tag, uint8_t def);
uint32_t thaw_get_u32(const struct thaw_msg *m, uint16_t tag, uint32_t def);
uint64_t thaw_get_u64(const struct thaw_msg *m, uint16_t tag, uint64_t def);
/*
 * Copies a string field into @out as a C string.  Returns 0, -ENOENT when
 * absent or -ENAMETOOLONG when it does not fit.
 */
int thaw_get_str(const struct thaw_msg *m, uint16_t tag, char *out,
		 size_t outlen);
/*
 * Walks the occurrences of @tag in a parsed message: start with *@iter = 0;
 * returns true and sets @val/@len while there are more.
 */
bool thaw_next(const struct thaw_msg *m, uint16_t tag, size_t *iter,
	       const uint8_t **val, uint32_t *len);

/*
 * Incremental frame reader for a (typically nonblocking) stream.  It reads
 * no further than the current frame, so nothing is ever carried over
 * between frames, and it skips the payload of a frame it will not hold
 * (oversized) without storing it, so one bad frame costs no resync.
 */
enum thaw_read_status {
	THAW_READ_AGAIN = 0, /* no complete frame yet */
	THAW_READ_FRAME, /* the frame is in *f, payload valid until next call */
	THAW_READ_OVERSIZED, /* f->h is the header; the payload is skipped */
	THAW_READ_RUNT, /* length < 8: no header to read; length bytes skipped
			 */
	THAW_READ_EOF,	/* the peer closed the stream between frames */
};

struct thaw_frame {
	struct thaw_header h;
	const uint8_t *payload;
	uint32_t payload_len;
};

struct thaw_reader {
	uint8_t hdr[THAW_HEADER_SIZE];
	size_t hdr_have;
	uint8_t *buf; /* THAW_MAX_PAYLOAD bytes */
	uint32_t body_len;
	uint32_t body_have;
	uint64_t discard; /* bytes still to skip */
	struct thaw_header h;
};

int thaw_reader_init(struct thaw_reader *r);
void thaw_reader_free(struct thaw_reader *r);
/* True between frames: an EOF now is a clean close. */
bool thaw_reader_idle(const struct thaw_reader *r);
/* Where the next bytes go and how many the current frame still needs. */
void thaw_reader_want(struct thaw_reader *r, uint8_t **p, size_t *n);
/* Accounts for @n bytes stored at thaw_reader_want's pointer. */
int thaw_reader_advance(struct thaw_reader *r, size_t n, struct thaw_frame *f);
/*
 * Reads from @fd until a frame event or EAGAIN.  Returns a thaw_read_status
 * or a negative errno: the read's, or -EPIPE when the peer closed mid-frame.
 */
int thaw_reader_read(struct thaw_reader *r, int fd, struct thaw_frame *f);

#endif
