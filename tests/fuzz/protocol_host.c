// SPDX-License-Identifier: Apache-2.0
/*
 * protocol_host.c - libFuzzer harness: the agent protocol as the host reads
 * it, from a guest that sends anything.
 *
 * The input's first byte picks one conversation of pool/host and the
 * daemon; the rest is what "the agent" sends, written into one end of a
 * socketpair whose other end is a struct agent_conn, then closed, so every
 * wait ends at the input's end (no thread, no deadline).  The host's own
 * code reads it: agent_next_frame() (protocol.c's frame reader under
 * agent_client.c's non-blocking reads), agent_wait_answer() and
 * agent_ping() (their request-id and type checks, ERROR to errno),
 * agent_error_of(), agent_stat() and agent_list() (STAT_RESULT and
 * ENTRIES into struct agent_file_info), agent_watch() with
 * agent_fs_event_of(); and thaw_parse_type() with the accessors the way the
 * greeting (agent_connect), an exec's events (api_exec.c) and a download
 * (api_files.c) use them.  Those two daemon loops are static functions
 * tied to libmicrohttpd, so their field accesses are repeated here.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pool/host/agent_client.h"
#include "guest/protocol.h"

#define REQUEST_ID 1

enum conversation {
	GREETING,
	ANSWERS,
	PING,
	EXEC_EVENTS,
	DOWNLOAD,
	STAT,
	LIST,
	WATCH,
	NR_CONVERSATIONS,
};

/* What agent_connect() does with the first frame. */
static void greeting(struct agent_conn *c)
{
	struct thaw_frame f;
	struct thaw_msg m;
	char why[128];

	if (agent_next_frame(c, &f) || f.h.type != THAW_HELLO ||
	    thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, why,
			    sizeof(why)))
		return;
	if (thaw_get_u32(&m, THAW_T_VERSION, 0) == THAW_PROTOCOL_VERSION)
		thaw_get_str(&m, THAW_T_AGENT_VERSION, c->agent_version,
			     sizeof(c->agent_version));
}

/* An exec's events and a download's pieces, field by field. */
static void stream(struct agent_conn *c, bool download)
{
	struct thaw_frame f;
	struct thaw_msg m;
	char why[512];

	while (!agent_next_frame(c, &f)) {
		if (f.h.request_id != REQUEST_ID)
			continue;
		if (thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, why,
				    sizeof(why)) < 0)
			return;
		const struct thaw_field *data = thaw_get(&m, THAW_T_DATA);
		uint8_t *copy;

		switch (f.h.type) {
		case THAW_EXEC_STARTED:
			thaw_get_u32(&m, THAW_T_PID, 0);
			break;
		case THAW_STDOUT:
		case THAW_STDERR:
		case THAW_DATA:
			copy = malloc(data->len ? data->len : 1);
			if (!copy)
				abort();
			memcpy(copy, data->data, data->len);
			free(copy);
			break;
		case THAW_EXIT:
			thaw_get_u8(&m, THAW_T_TIMED_OUT, 0);
			if (thaw_has(&m, THAW_T_SIGNAL))
				thaw_get_u32(&m, THAW_T_SIGNAL, 0);
			else
				thaw_get_u32(&m, THAW_T_EXIT_CODE, 0);
			return;
		case THAW_ERROR:
			if (agent_error_of(&m, why, sizeof(why)) <= 0)
				abort(); /* an ERROR must never read as success
					  */
			return;
		case THAW_END:
			if (download)
				return;
			break;
		default:
			break;
		}
	}
}

static int count_entry(const struct agent_file_info *info, void *arg)
{
	/* Every string the guest gave is a C string within its buffer. */
	if (strlen(info->name) >= sizeof(info->name) ||
	    strlen(info->symlink_target) >= sizeof(info->symlink_target))
		abort();
	return ++*(int *)arg == 1000; /* stops early, then reads to END */
}

/* A watch's events up to its end, as a WatchDir stream reads them. */
static void watch(struct agent_conn *c, char *err, size_t errlen)
{
	struct agent_fs_event ev;
	struct thaw_frame f;

	if (agent_watch(c, REQUEST_ID, "/home/user", true, err, errlen))
		return;
	while (!agent_next_frame(c, &f) &&
	       agent_fs_event_of(&f, REQUEST_ID, &ev, err, errlen) == 1) {
		if (ev.type < THAW_EV_CREATE || ev.type > THAW_EV_OVERFLOW)
			abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct agent_file_info info;
	struct agent_conn c = { .patience_ms = 1000,
				.version = THAW_PROTOCOL_VERSION };
	int entries = 0;
	char err[512];
	int sv[2];

	/* All of it must fit the socket's buffer: nobody else reads. */
	if (size < 1 || size > 64 * 1024)
		return -1;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) ||
	    thaw_reader_init(&c.reader))
		abort();
	c.fd = sv[0];
	if (write(sv[1], data + 1, size - 1) != (ssize_t)(size - 1) ||
	    shutdown(sv[1], SHUT_WR))
		abort();

	switch (data[0] % NR_CONVERSATIONS) {
	case GREETING:
		greeting(&c);
		break;
	case ANSWERS:
		while (agent_wait_answer(&c, REQUEST_ID, err, sizeof(err)) !=
		       -EPIPE)
			;
		break;
	case PING:
		agent_ping(&c, REQUEST_ID, err, sizeof(err));
		break;
	case EXEC_EVENTS:
		stream(&c, false);
		break;
	case DOWNLOAD:
		stream(&c, true);
		break;
	case STAT:
		agent_stat(&c, REQUEST_ID, "/etc", &info, err, sizeof(err));
		break;
	case LIST:
		agent_list(&c, REQUEST_ID, "/etc", 3, count_entry, &entries,
			   err, sizeof(err));
		break;
	case WATCH:
		watch(&c, err, sizeof(err));
		break;
	}
	agent_close(&c);
	close(sv[1]);
	return 0;
}
