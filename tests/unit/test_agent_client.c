// SPDX-License-Identifier: Apache-2.0
/*
 * test_agent_client.c - the host end of the agent channel
 * (pool/host/agent_client.h) against a guest that misbehaves: a socketpair
 * stands for the VMM's vsock socket, its other end for a hostile agent that
 * sends half a frame and goes silent, or never reads.  Every wait must end:
 * at the patience once a frame has begun, at the watch's deadline between
 * frames, when the daemon stops, when the client hangs up (and not when it
 * only half-closes).  Criterion's .timeout turns a wait that does not end
 * into a failure.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pool/host/agent_client.h"
#include "common/clock.h"

#define PATIENCE_MS 200
#define WAIT_MS 300

static int guest = -1; /* the hostile agent's end */

/* A connection on one end of a fresh socketpair, as agent_connect() would
 * leave it after the greeting. */
static void conn_on_pair(struct agent_conn *c)
{
	int sp[2];

	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
	memset(c, 0, sizeof(*c));
	c->fd = sp[0];
	c->patience_ms = PATIENCE_MS;
	c->watch.client_fd = -1;
	cr_assert_eq(fcntl(c->fd, F_SETFL, O_NONBLOCK), 0);
	cr_assert_eq(thaw_reader_init(&c->reader), 0);
	guest = sp[1];
}

static void write_frame(uint16_t type, uint32_t id)
{
	uint8_t buf[THAW_HEADER_SIZE];
	struct thaw_writer w;

	thaw_writer_init(&w, buf, sizeof(buf), id, type, 0);
	int n = thaw_writer_finish(&w);
	cr_assert_eq(write(guest, buf, (size_t)n), n);
}

static uint64_t after_ms(uint64_t ms)
{
	return monotonic_ns() + ms * NS_PER_MS;
}

Test(agent_client, a_whole_frame_arrives, .timeout = 10)
{
	struct agent_conn c;
	struct thaw_frame f;

	conn_on_pair(&c);
	write_frame(THAW_PONG, 7);
	cr_assert_eq(agent_next_frame(&c, &f), 0);
	cr_expect_eq(f.h.type, THAW_PONG);
	cr_expect_eq(f.h.request_id, 7);
	agent_close(&c);
	close(guest);
}

Test(agent_client, half_a_header_then_silence_times_out, .timeout = 10)
{
	struct agent_conn c;
	struct thaw_frame f;

	conn_on_pair(&c);
	/* No deadline of the watch: only the frame begun bounds the wait. */
	cr_assert_eq(write(guest, "\x10\0\0\0\x01", 5), 5);
	cr_expect_eq(agent_next_frame(&c, &f), -ETIMEDOUT);
	agent_close(&c);
	close(guest);
}

Test(agent_client, a_silent_guest_times_out_at_the_watch_deadline,
     .timeout = 10)
{
	struct agent_conn c;
	struct thaw_frame f;
	char err[256];

	conn_on_pair(&c);
	c.watch.deadline_ns = after_ms(WAIT_MS);
	cr_expect_eq(agent_next_frame(&c, &f), -ETIMEDOUT);
	write_frame(THAW_PONG, 1);
	cr_expect_eq(agent_next_frame(&c, &f), -ETIMEDOUT,
		     "a frame ready does not extend a deadline passed");
	c.watch.deadline_ns = 0;
	cr_expect_eq(agent_next_frame(&c, &f), 0, "without one it is read");
	cr_expect_eq(agent_wait_answer(&c, 1, err, sizeof(err)), -ETIMEDOUT,
		     "an answer is waited for only as long as the patience");
	agent_close(&c);
	close(guest);
}

/* Uploads to a guest that reads nothing: returns the first failure. */
static int upload_until_stuck(struct agent_conn *c)
{
	static char chunk[AGENT_WRITE_CHUNK];

	/* The socket buffers take a few chunks at most. */
	for (int i = 0; i < 256; i++) {
		int ret = agent_write_file(c, 3, i == 0, "/tmp/f", 0644, chunk,
					   sizeof(chunk), false);
		if (ret < 0)
			return ret;
	}
	return 0;
}

Test(agent_client, a_guest_that_never_reads_fails_the_write, .timeout = 20)
{
	struct agent_conn c;

	conn_on_pair(&c);
	cr_expect_eq(upload_until_stuck(&c), -ETIMEDOUT);
	agent_close(&c);
	close(guest);
}

static atomic_bool stop;

static bool stopping(void *arg)
{
	(void)arg;
	return atomic_load(&stop);
}

Test(agent_client, stopping_ends_reads_and_writes, .timeout = 10)
{
	struct agent_conn c;
	struct thaw_frame f;

	conn_on_pair(&c);
	c.patience_ms = 3600 * 1000; /* only the stop may end these */
	c.watch.stopping = stopping;
	atomic_store(&stop, true);
	/* A guest with a frame always ready (a flood) must not hide it. */
	write_frame(THAW_PONG, 1);
	cr_expect_eq(agent_next_frame(&c, &f), -ESHUTDOWN);
	cr_expect_eq(upload_until_stuck(&c), -ESHUTDOWN);
	agent_close(&c);
	close(guest);
}

Test(agent_client, a_client_hang_up_ends_the_wait_a_half_close_does_not,
     .timeout = 10)
{
	struct agent_conn c;
	struct thaw_frame f;
	int client[2];

	conn_on_pair(&c);
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, client),
		     0);
	c.watch.client_fd = client[0];
	/* The request is in and the client says it sends no more. */
	cr_assert_eq(shutdown(client[1], SHUT_WR), 0);
	c.watch.deadline_ns = after_ms(WAIT_MS);
	cr_expect_eq(agent_next_frame(&c, &f), -ETIMEDOUT,
		     "a half-closed client still waits for its answer");
	close(client[1]);
	c.watch.deadline_ns = 0;
	cr_expect_eq(agent_next_frame(&c, &f), -ECONNABORTED);
	agent_close(&c);
	close(client[0]);
	close(guest);
}

Test(agent_client, the_guests_error_text_is_made_printable)
{
	uint8_t buf[256];
	struct thaw_writer w;
	struct thaw_msg m;
	char why[64], msg[32];

	thaw_writer_init(&w, buf, sizeof(buf), 1, THAW_ERROR, 0);
	thaw_put_u32(&w, THAW_T_ERRNO, ENOENT);
	thaw_put_str(&w, THAW_T_MESSAGE,
		     "no\nthaw: forged line\x1b[31m \xff and a long tail");
	int n = thaw_writer_finish(&w);
	cr_assert_gt(n, 0);
	cr_assert_eq(thaw_parse_type(&m, THAW_ERROR, buf + THAW_HEADER_SIZE,
				     (size_t)n - THAW_HEADER_SIZE, why,
				     sizeof(why)),
		     0, "%s", why);
	cr_expect_eq(agent_error_of(&m, msg, sizeof(msg)), ENOENT);
	cr_expect_lt(strlen(msg), sizeof(msg));
	for (const char *p = msg; *p; p++)
		cr_expect(*p >= ' ' && *p != 0x7f && (unsigned char)*p < 0x80,
			  "byte %#x of \"%s\" is not printable",
			  (unsigned char)*p, msg);
}

/* The guest sends the frame @w holds. */
static void send_guest(struct thaw_writer *w)
{
	int n = thaw_writer_finish(w);

	cr_assert_gt(n, 0);
	cr_assert_eq(write(guest, w->buf, (size_t)n), n);
}

static void put_entry(struct thaw_writer *w, const char *path,
		      const char *target)
{
	size_t mark = thaw_put_nested_begin(w, THAW_T_ENTRY);

	thaw_put_str(w, THAW_T_NAME,
		     strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
	thaw_put_u8(w, THAW_T_FILE_TYPE,
		    target ? THAW_FT_SYMLINK : THAW_FT_REGULAR);
	thaw_put_u32(w, THAW_T_MODE, 0644);
	thaw_put_u64(w, THAW_T_SIZE, 5);
	thaw_put_u64(w, THAW_T_MTIME_NS, 7);
	thaw_put_str(w, THAW_T_OWNER, "user");
	thaw_put_str(w, THAW_T_GROUP, "1000");
	thaw_put_str(w, THAW_T_PATH, path);
	if (target)
		thaw_put_str(w, THAW_T_SYMLINK_TARGET, target);
	thaw_put_nested_end(w, mark);
}

struct seen {
	int n, stop_at;
	char paths[4][9000];
};

static int remember(const struct agent_file_info *info, void *arg)
{
	struct seen *s = arg;

	cr_assert_lt(s->n, 4);
	snprintf(s->paths[s->n], sizeof(s->paths[0]), "%s %s %s %s %s",
		 info->path, info->name, info->owner, info->group,
		 info->symlink_target);
	return ++s->n == s->stop_at ? 42 : 0;
}

/*
 * agent_list hands over each entry's fields; when its callback stops it,
 * the answer is still read to its END, so the connection serves on.
 */
Test(agent_client, a_listing_is_read_to_its_end, .timeout = 10)
{
	static uint8_t buf[4096];
	static struct seen s;
	struct thaw_writer w;
	struct agent_conn c;
	char err[256];

	conn_on_pair(&c);
	c.version = THAW_PROTOCOL_VERSION;
	s = (struct seen){ .stop_at = 0 };
	for (int round = 0; round < 2; round++) {
		thaw_writer_init(&w, buf, sizeof(buf), 5, THAW_ENTRIES, 0);
		put_entry(&w, "a", NULL);
		put_entry(&w, "a/l", "/x");
		send_guest(&w);
		thaw_writer_init(&w, buf, sizeof(buf), 5, THAW_ENTRIES, 0);
		put_entry(&w, "a/f", NULL);
		send_guest(&w);
		thaw_writer_init(&w, buf, sizeof(buf), 5, THAW_END, 0);
		thaw_put_u64(&w, THAW_T_SIZE, 3);
		send_guest(&w);
	}
	write_frame(THAW_PONG, 6);
	cr_assert_eq(agent_list(&c, 5, "/d", 2, remember, &s, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(s.n, 3);
	cr_expect_str_eq(s.paths[1], "a/l l user 1000 /x");
	cr_expect_str_eq(s.paths[2], "a/f f user 1000 ");
	s = (struct seen){ .stop_at = 1 };
	cr_expect_eq(agent_list(&c, 5, "/d", 2, remember, &s, err, sizeof(err)),
		     42);
	cr_expect_eq(s.n, 1, "not called after it said stop");
	cr_expect_eq(agent_ping(&c, 6, err, sizeof(err)), 0, "%s", err);
	agent_close(&c);
	close(guest);
}

Test(agent_client, watch_events_are_read_and_checked)
{
	uint8_t buf[256];
	struct agent_fs_event ev;
	struct thaw_writer w;
	struct thaw_frame f;
	char err[256];

	thaw_writer_init(&w, buf, sizeof(buf), 3, THAW_FS_EVENT, 0);
	thaw_put_str(&w, THAW_T_PATH, "d/f");
	thaw_put_u8(&w, THAW_T_EVENT, THAW_EV_RENAME);
	int n = thaw_writer_finish(&w);
	thaw_header_decode(buf, &f.h);
	f.payload = buf + THAW_HEADER_SIZE;
	f.payload_len = (uint32_t)n - THAW_HEADER_SIZE;
	cr_assert_eq(agent_fs_event_of(&f, 3, &ev, err, sizeof(err)), 1, "%s",
		     err);
	cr_expect_eq(ev.type, THAW_EV_RENAME);
	cr_expect_str_eq(ev.name, "d/f");
	cr_expect_eq(agent_fs_event_of(&f, 4, &ev, err, sizeof(err)), -EPROTO,
		     "another request's frame");

	buf[n - 1] = 9; /* EVENT, the last byte: no such event */
	cr_expect_eq(agent_fs_event_of(&f, 3, &ev, err, sizeof(err)), -EPROTO);
	cr_expect(strstr(err, "EVENT 9"), "%s", err);

	thaw_writer_init(&w, buf, sizeof(buf), 3, THAW_END, 0);
	n = thaw_writer_finish(&w);
	thaw_header_decode(buf, &f.h);
	f.payload_len = 0;
	cr_expect_eq(agent_fs_event_of(&f, 3, &ev, err, sizeof(err)), 0);
}

/* What a version-1 agent would skip is never sent to one. */
Test(agent_client, a_version_1_agent_gets_no_version_2_fields, .timeout = 10)
{
	char *argv[] = { "id", NULL };
	struct agent_exec_request r = { .argv = argv, .user = "user" };
	struct agent_conn c;
	char err[256];

	conn_on_pair(&c);
	c.version = 1;
	cr_expect_eq(agent_exec(&c, 1, &r), -EOPNOTSUPP);
	r = (struct agent_exec_request){ .argv = argv, .keep_stdin = true };
	cr_expect_eq(agent_exec(&c, 1, &r), -EOPNOTSUPP);
	cr_expect_eq(agent_write_file_as(&c, 2, true, "/f", 0644, "user", "x",
					 1, true),
		     -EOPNOTSUPP);
	cr_expect_eq(
		agent_mkdir(&c, 3, "/d", 0755, true, "user", err, sizeof(err)),
		-EOPNOTSUPP);
	cr_expect(strstr(err, "protocol 1"), "%s", err);
	cr_expect_eq(
		agent_list(&c, 4, "/d", 2, remember, NULL, err, sizeof(err)),
		-EOPNOTSUPP);
	agent_close(&c);
	close(guest);
}
