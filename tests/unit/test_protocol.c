// SPDX-License-Identifier: Apache-2.0
/*
 * test_protocol.c - the agent protocol codec (guest/protocol.c): exact
 * wire bytes, writer/parser round trips, every way a payload can be
 * malformed, and the incremental reader fed whole, byte by byte, and with
 * frames it must skip.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "guest/protocol.h"

static uint8_t buf[THAW_MAX_FRAME + 64];

Test(protocol, header_is_little_endian)
{
	struct thaw_header h = { .length = 0x01020304,
				 .request_id = 0xa0b0c0d0,
				 .type = 0x1122,
				 .flags = 0x3344 },
			   back;
	const uint8_t want[] = { 4,    3,    2,	   1,	 0xd0, 0xc0,
				 0xb0, 0xa0, 0x22, 0x11, 0x44, 0x33 };
	uint8_t out[THAW_HEADER_SIZE];

	thaw_header_encode(out, &h);
	cr_assert_arr_eq(out, want, sizeof(want));
	thaw_header_decode(out, &back);
	cr_assert_eq(back.length, h.length);
	cr_assert_eq(back.request_id, h.request_id);
	cr_assert_eq(back.type, h.type);
	cr_assert_eq(back.flags, h.flags);
}

Test(protocol, exec_round_trip)
{
	const uint8_t in[] = { 0, 'a', 0, 0xff };
	const char *argv[] = { "sh", "-c", "echo hi", "" };
	struct thaw_writer w;
	struct thaw_header h;
	struct thaw_msg m;
	const uint8_t *val;
	uint32_t len;
	size_t it = 0;
	char err[128], cwd[16];
	int n, i = 0;

	thaw_writer_init(&w, buf, sizeof(buf), 42, THAW_EXEC, 0);
	for (int k = 0; k < 4; k++)
		thaw_put_str(&w, THAW_T_ARGV, argv[k]);
	thaw_put_str(&w, THAW_T_ENV, "A=1");
	thaw_put_str(&w, THAW_T_CWD, "/tmp");
	thaw_put_bytes(&w, THAW_T_STDIN, in, sizeof(in));
	thaw_put_u32(&w, THAW_T_TIMEOUT_MS, 1500);
	n = thaw_writer_finish(&w);
	cr_assert_gt(n, THAW_HEADER_SIZE);
	thaw_header_decode(buf, &h);
	cr_assert_eq(h.length, (uint32_t)n - 4);
	cr_assert_eq(h.request_id, 42);
	cr_assert_eq(h.type, THAW_EXEC);

	cr_assert_eq(thaw_parse_type(&m, THAW_EXEC, buf + THAW_HEADER_SIZE,
				     (size_t)n - THAW_HEADER_SIZE, err,
				     sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(thaw_get(&m, THAW_T_ARGV)->count, 4);
	while (thaw_next(&m, THAW_T_ARGV, &it, &val, &len)) {
		cr_assert_eq(len, strlen(argv[i]));
		cr_assert(memcmp(val, argv[i], len) == 0);
		i++;
	}
	cr_assert_eq(i, 4);
	cr_assert_eq(thaw_get_str(&m, THAW_T_CWD, cwd, sizeof(cwd)), 0);
	cr_assert_str_eq(cwd, "/tmp");
	cr_assert_eq(thaw_get_str(&m, THAW_T_CWD, cwd, 4), -ENAMETOOLONG);
	cr_assert_eq(thaw_get(&m, THAW_T_STDIN)->len, sizeof(in));
	cr_assert_arr_eq(thaw_get(&m, THAW_T_STDIN)->data, in, sizeof(in));
	cr_assert_eq(thaw_get_u32(&m, THAW_T_TIMEOUT_MS, 0), 1500);
	/* Absent fields fall back to the caller's default. */
	cr_assert_eq(thaw_get_u32(&m, THAW_T_PID, 7), 7);
}

Test(protocol, nested_entries_round_trip)
{
	struct thaw_writer w;
	struct thaw_msg m, e;
	const uint8_t *val;
	uint32_t len;
	size_t it = 0, mark;
	char err[128], name[16];
	int n;

	thaw_writer_init(&w, buf, sizeof(buf), 1, THAW_ENTRIES, 0);
	for (int i = 0; i < 2; i++) {
		mark = thaw_put_nested_begin(&w, THAW_T_ENTRY);
		thaw_put_str(&w, THAW_T_NAME, i ? "b" : "a");
		thaw_put_u8(&w, THAW_T_FILE_TYPE, THAW_FT_REGULAR);
		thaw_put_u32(&w, THAW_T_MODE, 0644);
		thaw_put_u64(&w, THAW_T_SIZE, 1ull << 40);
		thaw_put_u64(&w, THAW_T_MTIME_NS, (uint64_t)-5);
		thaw_put_nested_end(&w, mark);
	}
	n = thaw_writer_finish(&w);
	cr_assert_gt(n, 0);
	cr_assert_eq(thaw_parse_type(&m, THAW_ENTRIES, buf + THAW_HEADER_SIZE,
				     (size_t)n - THAW_HEADER_SIZE, err,
				     sizeof(err)),
		     0, "%s", err);
	for (int i = 0; thaw_next(&m, THAW_T_ENTRY, &it, &val, &len); i++) {
		cr_assert_eq(thaw_parse(&e, &thaw_entry_schema, val, len, err,
					sizeof(err)),
			     0, "%s", err);
		thaw_get_str(&e, THAW_T_NAME, name, sizeof(name));
		cr_assert_str_eq(name, i ? "b" : "a");
		cr_assert_eq(thaw_get_u64(&e, THAW_T_SIZE, 0), 1ull << 40);
		cr_assert_eq((int64_t)thaw_get_u64(&e, THAW_T_MTIME_NS, 0), -5);
	}
}

Test(protocol, writer_overflow_is_sticky)
{
	static uint8_t big[THAW_MAX_PAYLOAD];
	struct thaw_writer w;

	thaw_writer_init(&w, buf, 20, 1, THAW_PING, 0);
	thaw_put_bytes(&w, THAW_T_DATA, "12345678", 8);
	cr_assert(w.overflow);
	thaw_put_u8(&w, THAW_T_TIMED_OUT, 1);
	cr_assert_eq(thaw_writer_finish(&w), -EMSGSIZE);

	/* The payload limit holds whatever the buffer size. */
	thaw_writer_init(&w, buf, sizeof(buf), 1, THAW_DATA, 0);
	thaw_put_bytes(&w, THAW_T_DATA, big, sizeof(big));
	cr_assert_eq(thaw_writer_finish(&w), -EMSGSIZE);
	thaw_writer_init(&w, buf, sizeof(buf), 1, THAW_DATA, 0);
	thaw_put_bytes(&w, THAW_T_DATA, big,
		       THAW_MAX_PAYLOAD - THAW_TLV_HEADER);
	cr_assert_eq(thaw_writer_finish(&w), (int)THAW_MAX_FRAME);
	cr_assert_eq(thaw_writer_room(&w), 0);
}

/* Builds a payload from raw TLVs: tag, len, bytes (len may lie). */
static size_t tlv(uint8_t *p, uint16_t tag, uint32_t len, const void *v,
		  size_t vlen)
{
	p[0] = (uint8_t)tag;
	p[1] = (uint8_t)(tag >> 8);
	for (int i = 0; i < 4; i++)
		p[2 + i] = (uint8_t)(len >> (8 * i));
	memcpy(p + 6, v, vlen);
	return 6 + vlen;
}

static void expect_bad(uint16_t type, const uint8_t *p, size_t n,
		       const char *needle)
{
	struct thaw_msg m;
	char err[256] = "";

	cr_assert_eq(thaw_parse_type(&m, type, p, n, err, sizeof(err)),
		     -EPROTO);
	cr_assert(strstr(err, needle), "message '%s' lacks '%s'", err, needle);
}

Test(protocol, malformed_payloads_are_rejected)
{
	uint8_t p[256];
	size_t n;

	/* A TLV header cut short. */
	n = tlv(p, THAW_T_PATH, 1, "x", 1);
	expect_bad(THAW_STAT, p, n + 3, "truncated field header");
	/* A value running past the payload. */
	n = tlv(p, THAW_T_PATH, 50, "abc", 3);
	expect_bad(THAW_STAT, p, n, "runs past the payload end");
	/* Fixed-size field of the wrong size. */
	n = tlv(p, THAW_T_PATH, 1, "x", 1);
	n += tlv(p + n, THAW_T_MODE, 2, "\x01\x02", 2);
	expect_bad(THAW_MKDIR, p, n, "field MODE has 2 bytes, want 4");
	/* NUL inside a string. */
	n = tlv(p, THAW_T_PATH, 3, "a\0b", 3);
	expect_bad(THAW_STAT, p, n, "field PATH contains a NUL");
	/* Duplicate of a non-repeated field. */
	n = tlv(p, THAW_T_PATH, 1, "a", 1);
	n += tlv(p + n, THAW_T_PATH, 1, "b", 1);
	expect_bad(THAW_STAT, p, n, "field PATH appears twice");
	/* Missing required field, also on an empty payload. */
	n = tlv(p, THAW_T_MODE, 4, "\0\0\0\0", 4);
	expect_bad(THAW_MKDIR, p, n, "MKDIR: field PATH missing");
	expect_bad(THAW_EXEC, p, 0, "EXEC: field ARGV missing");
	/* Over the field's own limit. */
	{
		char name[300];

		memset(name, 'n', sizeof(name));
		n = tlv(p, THAW_T_AGENT_VERSION, 65, name, 65);
		expect_bad(THAW_HELLO, p, n,
			   "AGENT_VERSION has 65 bytes, max 64");
	}
}

/* Version 2's fields are validated like the others. */
Test(protocol, version_2_fields_are_validated)
{
	char user[65];
	uint8_t p[256];
	size_t n;

	memset(user, 'u', sizeof(user));
	n = tlv(p, THAW_T_ARGV, 4, "true", 4);
	n += tlv(p + n, THAW_T_USER, 65, user, 65);
	expect_bad(THAW_EXEC, p, n, "EXEC: field USER has 65 bytes, max 64");
	n = tlv(p, THAW_T_ARGV, 4, "true", 4);
	n += tlv(p + n, THAW_T_USER, 0, "", 0);
	expect_bad(THAW_EXEC, p, n, "field USER has 0 bytes, min 1");
	n = tlv(p, THAW_T_ARGV, 4, "true", 4);
	n += tlv(p + n, THAW_T_KEEP_STDIN, 4, "\1\0\0\0", 4);
	expect_bad(THAW_EXEC, p, n, "field KEEP_STDIN has 4 bytes, want 1");
	n = tlv(p, THAW_T_DATA, 1, "x", 1);
	expect_bad(THAW_STDIN, p, n, "STDIN: field TARGET missing");
	n = tlv(p, THAW_T_PATH, 2, "/a", 2);
	expect_bad(THAW_RENAME, p, n, "RENAME: field NEW_PATH missing");
	n = tlv(p, THAW_T_PATH, 2, "/a", 2);
	n += tlv(p + n, THAW_T_DEPTH, 1, "\3", 1);
	expect_bad(THAW_LIST, p, n, "field DEPTH has 1 bytes, want 4");
	n = tlv(p, THAW_T_PATH, 0, "", 0);
	expect_bad(THAW_FS_EVENT, p, n, "FS_EVENT: field EVENT missing");
	n = tlv(p, THAW_T_PATH, 1, "f", 1);
	n += tlv(p + n, THAW_T_EVENT, 1, "\1", 1);
	n += tlv(p + n, THAW_T_SYMLINK_TARGET, 0, "", 0);
	expect_bad(THAW_STAT_RESULT, p, n, "STAT_RESULT: field SYMLINK_TARGET");
	{
		struct thaw_msg m;
		char err[128];

		n = tlv(p, THAW_T_PATH, 0, "", 0);
		n += tlv(p + n, THAW_T_EVENT, 1, "\6", 1);
		cr_assert_eq(thaw_parse_type(&m, THAW_FS_EVENT, p, n, err,
					     sizeof(err)),
			     0, "an empty PATH names the watched directory: %s",
			     err);
		cr_assert_eq(thaw_parse_type(&m, THAW_WATCHING, NULL, 0, err,
					     sizeof(err)),
			     0, "%s", err);
	}
}

Test(protocol, unknown_tags_skipped_unknown_types_refused)
{
	uint8_t p[64];
	struct thaw_msg m;
	char err[128];
	size_t n;

	n = tlv(p, 999, 3, "new", 3);
	n += tlv(p + n, THAW_T_PATH, 1, "/", 1);
	cr_assert_eq(thaw_parse_type(&m, THAW_STAT, p, n, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert(thaw_has(&m, THAW_T_PATH));
	cr_assert_eq(thaw_parse_type(&m, 0, p, n, err, sizeof(err)), -ENOSYS);
	cr_assert_eq(thaw_parse_type(&m, 500, p, n, err, sizeof(err)), -ENOSYS);
	cr_assert_str_eq(err, "unknown message type 500");
	cr_assert_str_eq(thaw_type_name(THAW_WRITE_FILE), "WRITE_FILE");
	cr_assert_str_eq(thaw_type_name(500), "type 500");
}

/* A nonblocking pipe to feed the reader through its fd interface. */
static int fds[2];
static struct thaw_reader rd;

static void pipe_setup(void)
{
	cr_assert_eq(pipe2(fds, O_NONBLOCK), 0);
	fcntl(fds[0], F_SETPIPE_SZ, 1 << 20);
	cr_assert_eq(thaw_reader_init(&rd), 0);
}

static void pipe_teardown(void)
{
	close(fds[0]);
	if (fds[1] >= 0)
		close(fds[1]);
	thaw_reader_free(&rd);
}

static size_t ping(uint8_t *out, uint32_t req, const char *data)
{
	struct thaw_writer w;

	thaw_writer_init(&w, out, 256, req, THAW_PING, 0);
	if (data)
		thaw_put_str(&w, THAW_T_DATA, data);
	return (size_t)thaw_writer_finish(&w);
}

static void put(const void *p, size_t n)
{
	cr_assert_eq(write(fds[1], p, n), (ssize_t)n);
}

TestSuite(reader, .init = pipe_setup, .fini = pipe_teardown);

Test(reader, frames_back_to_back)
{
	uint8_t a[256], b[256];
	size_t na = ping(a, 1, "first"), nb = ping(b, 2, NULL);
	struct thaw_frame f;

	put(a, na);
	put(b, nb);
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_FRAME);
	cr_assert_eq(f.h.request_id, 1);
	cr_assert_eq(f.payload_len, na - THAW_HEADER_SIZE);
	cr_assert(memcmp(f.payload, a + THAW_HEADER_SIZE, f.payload_len) == 0);
	/* An empty payload is a whole frame too. */
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_FRAME);
	cr_assert_eq(f.h.request_id, 2);
	cr_assert_eq(f.payload_len, 0);
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_AGAIN);
	cr_assert(thaw_reader_idle(&rd));
	close(fds[1]);
	fds[1] = -1;
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_EOF);
}

Test(reader, byte_by_byte)
{
	uint8_t a[256];
	size_t na = ping(a, 9, "partial reads");
	struct thaw_frame f;

	for (size_t i = 0; i < na; i++) {
		cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_AGAIN,
			     "at byte %zu", i);
		put(a + i, 1);
	}
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_FRAME);
	cr_assert_eq(f.h.request_id, 9);
	cr_assert_eq(f.h.type, THAW_PING);
	cr_assert(memcmp(f.payload, a + THAW_HEADER_SIZE, f.payload_len) == 0);
}

Test(reader, truncated_frame_then_eof)
{
	uint8_t a[256];
	size_t na = ping(a, 3, "cut");
	struct thaw_frame f;

	put(a, na - 2);
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_AGAIN);
	cr_assert_not(thaw_reader_idle(&rd));
	close(fds[1]);
	fds[1] = -1;
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), -EPIPE);
}

Test(reader, oversized_is_reported_then_skipped)
{
	struct thaw_header h = { .length = THAW_HEADER_REST + THAW_MAX_PAYLOAD +
					   1,
				 .request_id = 77,
				 .type = THAW_WRITE_FILE };
	static uint8_t junk[THAW_MAX_PAYLOAD + 1];
	uint8_t hdr[THAW_HEADER_SIZE], a[256];
	size_t na = ping(a, 78, "after");
	struct thaw_frame f;

	thaw_header_encode(hdr, &h);
	put(hdr, sizeof(hdr));
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_OVERSIZED);
	cr_assert_eq(f.h.request_id, 77);
	cr_assert_eq(f.h.type, THAW_WRITE_FILE);
	cr_assert_null(f.payload);
	/* The skipped bytes may look like frames; they are not parsed. */
	memset(junk, 0x01, sizeof(junk));
	put(junk, 1000);
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_AGAIN);
	put(junk + 1000, sizeof(junk) - 1000);
	put(a, na);
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_FRAME);
	cr_assert_eq(f.h.request_id, 78);
}

Test(reader, largest_frame_fits)
{
	static uint8_t big[THAW_MAX_PAYLOAD - THAW_TLV_HEADER];
	struct thaw_writer w;
	struct thaw_frame f;
	int n;

	thaw_writer_init(&w, buf, sizeof(buf), 5, THAW_DATA, 0);
	thaw_put_bytes(&w, THAW_T_DATA, big, sizeof(big));
	n = thaw_writer_finish(&w);
	cr_assert_eq(n, (int)THAW_MAX_FRAME);
	/* More than a pipe holds: write what fits, let the reader drain. */
	for (size_t off = 0;;) {
		ssize_t k = write(fds[1], buf + off, (size_t)n - off);
		int st;

		off += k > 0 ? (size_t)k : 0;
		st = thaw_reader_read(&rd, fds[0], &f);
		if (st == THAW_READ_FRAME)
			break;
		cr_assert_eq(st, THAW_READ_AGAIN);
		cr_assert_lt(off, (size_t)n, "whole frame sent, none read");
	}
	cr_assert_eq(f.payload_len, THAW_MAX_PAYLOAD);
}

Test(reader, runt_length_is_skipped)
{
	const uint8_t runt[] = { 5, 0, 0, 0, 1, 2, 3, 4, 5 };
	uint8_t a[256];
	size_t na = ping(a, 4, NULL);
	struct thaw_frame f;

	put(runt, sizeof(runt));
	put(a, na);
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_RUNT);
	cr_assert_eq(f.h.length, 5);
	cr_assert_eq(thaw_reader_read(&rd, fds[0], &f), THAW_READ_FRAME);
	cr_assert_eq(f.h.request_id, 4);
}

Test(reader, advance_without_fd)
{
	uint8_t a[256];
	size_t na = ping(a, 11, "direct"), off = 0;
	struct thaw_frame f;
	int st = THAW_READ_AGAIN;

	/* Feed in odd-sized pieces through the want/advance interface. */
	while (st == THAW_READ_AGAIN) {
		uint8_t *p;
		size_t n;

		thaw_reader_want(&rd, &p, &n);
		cr_assert_gt(n, 0);
		n = n > 3 ? 3 : n;
		cr_assert_leq(off + n, na);
		memcpy(p, a + off, n);
		off += n;
		st = thaw_reader_advance(&rd, n, &f);
	}
	cr_assert_eq(st, THAW_READ_FRAME);
	cr_assert_eq(off, na);
	cr_assert_eq(f.h.request_id, 11);
}

/* A CLONE payload of all its fields but those in @omit, a THAW_T_ mask. */
static size_t clone_payload(uint8_t *p, size_t entropy_len,
			    const char *hostname, uint32_t omit)
{
	static const uint8_t entropy[300] = { 1, 2, 3 };
	static const uint8_t ns[8] = { 0x00, 0x10, 0x5e, 0x3a,
				       0x7d, 0x4b, 0x7f, 0x17 };
	size_t n = 0;

	if (!(omit & 1u << THAW_T_ENTROPY))
		n += tlv(p + n, THAW_T_ENTROPY, (uint32_t)entropy_len, entropy,
			 entropy_len);
	if (!(omit & 1u << THAW_T_REALTIME_NS))
		n += tlv(p + n, THAW_T_REALTIME_NS, 8, ns, 8);
	if (!(omit & 1u << THAW_T_HOSTNAME))
		n += tlv(p + n, THAW_T_HOSTNAME, (uint32_t)strlen(hostname),
			 hostname, strlen(hostname));
	if (!(omit & 1u << THAW_T_SANDBOX_ID))
		n += tlv(p + n, THAW_T_SANDBOX_ID, 5, "sb-42", 5);
	return n;
}

Test(protocol, clone_round_trip)
{
	uint8_t entropy[64];
	struct thaw_writer w;
	struct thaw_header h;
	struct thaw_msg m;
	char err[128], s[65];
	int n;

	for (size_t i = 0; i < sizeof(entropy); i++)
		entropy[i] = (uint8_t)(255 - i);
	thaw_writer_init(&w, buf, sizeof(buf), 3, THAW_CLONE, 0);
	thaw_put_bytes(&w, THAW_T_ENTROPY, entropy, sizeof(entropy));
	thaw_put_u64(&w, THAW_T_REALTIME_NS, 1700000000123456789ull);
	thaw_put_str(&w, THAW_T_HOSTNAME, "sandbox-7.thaw");
	thaw_put_str(&w, THAW_T_SANDBOX_ID, "sb_7 (any text)");
	n = thaw_writer_finish(&w);
	cr_assert_gt(n, 0);
	thaw_header_decode(buf, &h);
	cr_assert_eq(h.type, 22);
	cr_assert_str_eq(thaw_type_name(THAW_CLONE), "CLONE");
	cr_assert_eq(thaw_parse_type(&m, h.type, buf + THAW_HEADER_SIZE,
				     (size_t)n - THAW_HEADER_SIZE, err,
				     sizeof(err)),
		     0, "%s", err);
	cr_assert_eq(thaw_get(&m, THAW_T_ENTROPY)->len, sizeof(entropy));
	cr_assert_arr_eq(thaw_get(&m, THAW_T_ENTROPY)->data, entropy,
			 sizeof(entropy));
	cr_assert_eq(thaw_get_u64(&m, THAW_T_REALTIME_NS, 0),
		     1700000000123456789ull);
	cr_assert_eq(thaw_get_str(&m, THAW_T_HOSTNAME, s, sizeof(s)), 0);
	cr_assert_str_eq(s, "sandbox-7.thaw");
	cr_assert_eq(thaw_get_str(&m, THAW_T_SANDBOX_ID, s, sizeof(s)), 0);
	cr_assert_str_eq(s, "sb_7 (any text)");

	/* The sizes at both ends of each range are accepted. */
	n = (int)clone_payload(buf, 32, "a", 0);
	cr_assert_eq(thaw_parse_type(&m, THAW_CLONE, buf, (size_t)n, err,
				     sizeof(err)),
		     0, "%s", err);
	n = (int)clone_payload(
		buf, 256,
		"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.",
		0);
	cr_assert_eq(thaw_parse_type(&m, THAW_CLONE, buf, (size_t)n, err,
				     sizeof(err)),
		     0, "%s", err);
}

Test(protocol, clone_schema_rejects_bad_fields)
{
	static const struct {
		uint16_t tag;
		const char *missing;
	} required[] = {
		{ THAW_T_ENTROPY, "CLONE: field ENTROPY missing" },
		{ THAW_T_REALTIME_NS, "CLONE: field REALTIME_NS missing" },
		{ THAW_T_HOSTNAME, "CLONE: field HOSTNAME missing" },
		{ THAW_T_SANDBOX_ID, "CLONE: field SANDBOX_ID missing" },
	};
	char name[66];
	uint8_t p[1024];
	size_t n;

	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
		n = clone_payload(p, 64, "h", 1u << required[i].tag);
		expect_bad(THAW_CLONE, p, n, required[i].missing);
	}
	n = clone_payload(p, 31, "h", 0);
	expect_bad(THAW_CLONE, p, n, "field ENTROPY has 31 bytes, min 32");
	n = clone_payload(p, 0, "h", 0);
	expect_bad(THAW_CLONE, p, n, "field ENTROPY has 0 bytes, min 32");
	n = clone_payload(p, 257, "h", 0);
	expect_bad(THAW_CLONE, p, n, "field ENTROPY has 257 bytes, max 256");

	memset(name, 'h', sizeof(name) - 1);
	name[65] = '\0';
	n = clone_payload(p, 64, name, 0);
	expect_bad(THAW_CLONE, p, n, "field HOSTNAME has 65 bytes, max 64");
	n = clone_payload(p, 64, "", 0);
	expect_bad(THAW_CLONE, p, n, "field HOSTNAME has 0 bytes, min 1");
	n = clone_payload(p, 64, "bad_name", 0);
	expect_bad(THAW_CLONE, p, n,
		   "field HOSTNAME has byte 0x5f at offset 3, not a hostname");
	n = clone_payload(p, 64, "new\nline", 0);
	expect_bad(THAW_CLONE, p, n, "byte 0x0a at offset 3");
	/* A NUL is no hostname character either. */
	n = tlv(p, THAW_T_HOSTNAME, 3, "a\0b", 3);
	expect_bad(THAW_CLONE, p, n, "byte 0x00 at offset 1");
}

Test(protocol, hello_may_carry_a_sandbox_id)
{
	struct thaw_writer w;
	struct thaw_msg m;
	char err[128], id[65];
	int n;

	for (int with_id = 0; with_id < 2; with_id++) {
		thaw_writer_init(&w, buf, sizeof(buf), 0, THAW_HELLO, 0);
		thaw_put_u32(&w, THAW_T_VERSION, THAW_PROTOCOL_VERSION);
		thaw_put_str(&w, THAW_T_AGENT_VERSION, "0.1.0");
		thaw_put_str(&w, THAW_T_BOOT_ID, "b");
		if (with_id)
			thaw_put_str(&w, THAW_T_SANDBOX_ID, "sb-1");
		n = thaw_writer_finish(&w);
		cr_assert_eq(thaw_parse_type(&m, THAW_HELLO,
					     buf + THAW_HEADER_SIZE,
					     (size_t)n - THAW_HEADER_SIZE, err,
					     sizeof(err)),
			     0, "%s", err);
		cr_assert_eq(
			thaw_get_str(&m, THAW_T_SANDBOX_ID, id, sizeof(id)),
			with_id ? 0 : -ENOENT);
	}
	cr_assert_str_eq(id, "sb-1");
}
