// SPDX-License-Identifier: Apache-2.0
/*
 * sandbox_files.c - the service core's file sessions with a sandbox's
 * agent (sandbox_ops.h): a file out of a sandbox (READ_FILE) and the
 * pieces of one into it (WRITE_FILE), for every front end's downloads and
 * uploads.
 *
 * Neither holds a whole file.  A download reads the agent's first frame
 * when it is opened, so that a front end answers a missing file with an
 * error and not with a success and an empty body, then hands out the rest
 * piece by piece as the client reads it; a guest sending more than
 * max_file_bytes, in data or in frames (padding counts), is cut off.
 * Every wait on the guest is bounded by the daemon's patience, each piece
 * having that long.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/daemon/sandbox_ops.h"
#include "common/clock.h"
#include "common/log.h"

/* The connection is the download's alone: one request on it. */
#define READ_FILE_REQUEST_ID 3
/* The agent reads a file 256 KiB at a time (guest/agent/files.c): each
 * DATA but the last has at least a page. */
#define MIN_READ_FILE_DATA 4096

int sandbox_file_write(struct agent_conn *agent, uint32_t id, bool *open,
		       const char *path, uint32_t mode, const char *user,
		       const char *data, size_t len)
{
	do {
		size_t n = len > AGENT_WRITE_CHUNK ? AGENT_WRITE_CHUNK : len;
		int ret = agent_write_file_as(agent, id, !*open, path, mode,
					      user, data, n, false);
		if (ret < 0)
			return ret;
		*open = true;
		data += n;
		len -= n;
	} while (len);
	return 0;
}

struct sandbox_download {
	struct daemon *d;
	struct sandbox *sandbox;
	struct agent_conn agent;
	uint64_t received; /* DATA bytes so far, at most max_file_bytes */
	uint64_t wire;	   /* whole frames so far, padding included */
	bool done;
	uint8_t *data;
	size_t len, off;
};

void sandbox_download_close(void *download)
{
	struct sandbox_download *dl = download;

	sandbox_agent_close(dl->d, &dl->agent);
	sandbox_put(dl->d, dl->sandbox);
	free(dl->data);
	free(dl);
}

/*
 * The next DATA payload of our READ_FILE into dl->data: 1, 0 at END, or
 * -1 after a message in @err, with the error in *@e (POOL_GUEST_ERROR:
 * its errno in *@guest_errno).
 */
static int next_data(struct sandbox_download *dl, char *err, size_t errlen,
		     enum pool_error *e, int *guest_errno)
{
	struct thaw_frame f;
	struct thaw_msg m;

	/* Each piece comes within the patience. */
	dl->agent.watch.deadline_ns = sandbox_guest_deadline_ns(dl->d);
	int ret = agent_next_frame(&dl->agent, &f);

	if (ret < 0) {
		snprintf(err, errlen, "%s",
			 ret == -ECONNABORTED ? "client gone"
			 : ret == -ESHUTDOWN || ret == -EINTR
				 ? "the daemon is shutting down"
			 : ret == -ETIMEDOUT
				 ? "the guest stopped sending the file"
				 : "the sandbox's agent went away");
		*e = POOL_GUEST_ERROR;
		*guest_errno = -ret;
		return -1;
	}
	/* The connection is this READ_FILE's alone: anything else is a
	 * guest stalling (frames of no request reset no deadline here). */
	if (f.h.request_id != READ_FILE_REQUEST_ID) {
		snprintf(err, errlen,
			 "the agent sent %s of request %u to READ_FILE",
			 thaw_type_name(f.h.type), f.h.request_id);
		*e = POOL_FAILED;
		return -1;
	}
	/* Padding counts: empty DATA padded with unknown fields must reach
	 * the limit as data does. */
	dl->wire += THAW_HEADER_SIZE + f.payload_len;
	if (dl->wire > sandbox_frames_allowance(dl->d->cfg.max_file_bytes,
						MIN_READ_FILE_DATA)) {
		snprintf(err, errlen,
			 "the guest sent more than max_file_bytes (%" PRIu64
			 ") in frames",
			 dl->d->cfg.max_file_bytes);
		*e = POOL_TOO_LARGE;
		return -1;
	}
	if (thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, err,
			    errlen) < 0) {
		*e = POOL_FAILED;
		return -1;
	}
	if (f.h.type == THAW_END)
		return 0;
	if (f.h.type == THAW_ERROR) {
		*e = POOL_GUEST_ERROR;
		*guest_errno = agent_error_of(&m, err, errlen);
		return -1;
	}
	if (f.h.type != THAW_DATA) {
		snprintf(err, errlen, "the agent sent %s to READ_FILE",
			 thaw_type_name(f.h.type));
		*e = POOL_FAILED;
		return -1;
	}
	const struct thaw_field *data = thaw_get(&m, THAW_T_DATA);
	if (dl->received + data->len > dl->d->cfg.max_file_bytes) {
		snprintf(err, errlen,
			 "the guest sent more than max_file_bytes (%" PRIu64
			 ")",
			 dl->d->cfg.max_file_bytes);
		*e = POOL_TOO_LARGE;
		return -1;
	}
	dl->received += data->len;
	uint8_t *copy = realloc(dl->data, data->len ? data->len : 1);
	if (!copy) {
		*e = POOL_FAILED;
		return -1;
	}
	memcpy(copy, data->data, data->len);
	dl->data = copy;
	dl->len = data->len;
	dl->off = 0;
	return 1;
}

ssize_t sandbox_download_read(void *download, char *buf, size_t max)
{
	struct sandbox_download *dl = download;
	char err[512];
	enum pool_error e;
	int guest_errno;

	while (dl->off == dl->len) {
		if (dl->done)
			return 0;
		int got = next_data(dl, err, sizeof(err), &e, &guest_errno);
		if (got < 0) {
			/* Headers are out: all the front end can do is cut
			 * the body, and hang up on a guest that may still be
			 * sending. */
			log_write(LOG_LEVEL_WARNING, dl->sandbox->id,
				  "download: %s", err);
			sandbox_agent_close(dl->d, &dl->agent);
			return -1;
		}
		dl->done = got == 0;
	}
	size_t n = dl->len - dl->off < max ? dl->len - dl->off : max;
	memcpy(buf, dl->data + dl->off, n);
	dl->off += n;
	return (ssize_t)n;
}

enum pool_error sandbox_download_open(struct sandbox *c, const char *path,
				      int client_fd,
				      struct sandbox_download **out,
				      int *guest_errno, char *err,
				      size_t errlen)
{
	struct daemon *d = c->pool->d;
	struct sandbox_download *dl = calloc(1, sizeof(*dl));

	*out = NULL;
	if (!dl) {
		sandbox_put(d, c);
		snprintf(err, errlen, "out of memory");
		return POOL_FAILED;
	}
	*dl = (struct sandbox_download){ .d = d,
					 .sandbox = c,
					 .agent = { .fd = -1 } };
	enum pool_error e =
		sandbox_agent_open(c, &dl->agent, client_fd, err, errlen);
	if (e == POOL_OK &&
	    agent_read_file(&dl->agent, READ_FILE_REQUEST_ID, path) < 0) {
		snprintf(err, errlen, "asking the guest for %s failed", path);
		e = POOL_FAILED;
	}
	/* The first answer decides: a missing file must not be a 200. */
	if (e == POOL_OK) {
		int got = next_data(dl, err, errlen, &e, guest_errno);

		if (got >= 0) {
			e = POOL_OK;
			dl->done = got == 0;
		}
	}
	if (e != POOL_OK) {
		sandbox_download_close(dl);
		return e;
	}
	*out = dl;
	return POOL_OK;
}
