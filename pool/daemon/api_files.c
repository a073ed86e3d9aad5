// SPDX-License-Identifier: Apache-2.0
/*
 * api_files.c - GET and PUT /sandboxes/ID/files?path=: a file out of or
 * into a sandbox, through its agent's READ_FILE and WRITE_FILE.
 *
 * Neither holds a whole file.  An upload is passed on to the agent piece
 * by piece as libmicrohttpd hands us the body (api_put_file_begin at the
 * headers connects, api_put_file_piece forwards, api_put_file_end closes
 * and waits for the agent's verdict); a failure midway is remembered and
 * answered once the body is in, as HTTP wants.  A download reads the
 * agent's first frame before answering, so a missing file is a 404 and
 * not a 200 with an empty body, then streams the rest from a callback; an
 * error after the headers can only cut the body short, as does a guest
 * sending more than max_file_bytes.  Every wait on the guest is bounded
 * by the daemon's patience (agent_client.h), each piece sent or received
 * having that long.  The agent's errno becomes the status (file_status).
 * The download and the sending of an upload's pieces serve E2B's /files
 * too (pool/e2b/e2b_files.c: api_download with envd's statuses,
 * api_send_file_piece).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/daemon/api_internal.h"
#include "common/clock.h"
#include "common/log.h"

#define FILE_REQUEST_ID 3
/* The agent reads a file 256 KiB at a time (guest/agent/files.c): each
 * DATA but the last has at least a page. */
#define MIN_READ_FILE_DATA 4096

int api_file_args(const char *path, const char *m, uint32_t *mode, char *err,
		  size_t errlen)
{
	if (!path || path[0] != '/' || strlen(path) > 4095) {
		snprintf(
			err, errlen,
			"?path= must be an absolute path of at most 4095 bytes");
		return 400;
	}
	*mode = 0644;
	if (m) {
		char *end;
		unsigned long v = strtoul(m, &end, 8);

		if (!m[0] || *end || v > 07777) {
			snprintf(
				err, errlen,
				"?mode= must be octal permission bits, at most 07777 (got \"%s\")",
				m);
			return 400;
		}
		*mode = (uint32_t)v;
	}
	return 0;
}

/* The request's ?path= and ?mode=, checked by api_file_args(). */
static int file_args(struct MHD_Connection *conn, const char **path,
		     uint32_t *mode, char *err, size_t errlen)
{
	*path = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND,
					    "path");
	return api_file_args(*path,
			     MHD_lookup_connection_value(
				     conn, MHD_GET_ARGUMENT_KIND, "mode"),
			     mode, err, errlen);
}

/* An agent ERROR, or a failed wait on the agent, as an HTTP status. */
static int file_status(int e)
{
	switch (e) {
	case ENOENT:
		return 404;
	case EISDIR:
	case EINVAL:
	case ENOTDIR:
	case EEXIST:
	case EACCES:
	case EPERM:
	case EROFS:
		return 409;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return 413;
	case ETIMEDOUT: /* the guest did not answer in time */
		return 504;
	case ESHUTDOWN: /* the daemon stops */
	case EINTR:
		return 503;
	default:
		return 500;
	}
}

int api_send_file_piece(struct agent_conn *agent, uint32_t id, bool *open,
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

/* Called per piece of a PUT body: on to the agent, or remember why not. */
void api_put_file_piece(struct MHD_Connection *conn, struct request *r,
			struct daemon *d, const char *data, size_t len)
{
	const char *path;
	uint32_t mode;

	if (r->upload_status)
		return;
	if (r->uploaded + len > d->cfg.max_file_bytes) {
		r->upload_status = 413;
		snprintf(r->upload_err, sizeof(r->upload_err),
			 "the file is larger than max_file_bytes (%" PRIu64 ")",
			 d->cfg.max_file_bytes);
		return;
	}
	file_args(conn, &path, &mode, r->upload_err, sizeof(r->upload_err));
	int ret =
		api_send_file_piece(&r->agent, FILE_REQUEST_ID, &r->write_open,
				    path, mode, NULL, data, len);
	if (ret < 0) {
		r->upload_status = file_status(-ret);
		snprintf(r->upload_err, sizeof(r->upload_err),
			 "sending the file to the guest: %s",
			 ret == -ETIMEDOUT ? "the guest stopped reading"
					   : strerror(-ret));
		/* The guest drops the half-written file. */
		sandbox_agent_close(d, &r->agent);
		return;
	}
	r->uploaded += len;
}

enum MHD_Result api_put_file_begin(struct MHD_Connection *conn,
				   struct request *r, struct daemon *d)
{
	const char *path;
	uint32_t mode;
	char err[512];
	const char *length = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

	int status = file_args(conn, &path, &mode, err, sizeof(err));
	if (status)
		return api_reply_error(conn, r, status, "%s", err);
	if (length && strtoull(length, NULL, 10) > d->cfg.max_file_bytes)
		return api_reply_error(
			conn, r, 413,
			"the file is larger than max_file_bytes (%" PRIu64 ")",
			d->cfg.max_file_bytes);
	r->sandbox = sandbox_get(d, r->id);
	if (!r->sandbox)
		return api_no_sandbox(conn, r);
	status = pool_error_status(sandbox_agent_open(
		r->sandbox, &r->agent, http_client_fd(conn), err, sizeof(err)));
	if (status)
		return api_reply_error(conn, r, status, "%s", err);
	http_paced(conn, d->cfg.idle_timeout_s, sandbox_guest_deadline_ns(d));
	return MHD_YES;
}

enum MHD_Result api_put_file_end(struct MHD_Connection *conn, struct request *r,
				 struct daemon *d)
{
	char err[512];

	if (!r->upload_status) {
		const char *path;
		uint32_t mode;

		file_args(conn, &path, &mode, err, sizeof(err));
		int ret = agent_write_file(&r->agent, FILE_REQUEST_ID,
					   !r->write_open, path, mode, NULL, 0,
					   true);
		if (ret == 0)
			ret = agent_wait_answer(&r->agent, FILE_REQUEST_ID, err,
						sizeof(err));
		if (ret < 0) {
			r->upload_status = file_status(-ret);
			snprintf(r->upload_err, sizeof(r->upload_err), "%s",
				 err);
		}
	}
	(void)d;
	if (r->upload_status)
		return api_reply_error(conn, r, (unsigned)r->upload_status,
				       "%s", r->upload_err);
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	return api_reply(conn, r, 204, resp);
}

struct download {
	struct daemon *d;
	struct sandbox *sandbox;
	int (*status_of)(int err); /* the caller's API's statuses */
	struct agent_conn agent;
	uint64_t received;	 /* DATA bytes so far, at most max_file_bytes */
	uint64_t wire;		 /* whole frames so far, padding included */
	struct thaw_frame first; /* a DATA frame read before the headers */
	bool have_first, done;
	uint8_t *data;
	size_t len, off;
};

static void download_free(void *cls)
{
	struct download *dl = cls;

	sandbox_agent_close(dl->d, &dl->agent);
	sandbox_put(dl->d, dl->sandbox);
	free(dl->data);
	free(dl);
}

/*
 * The next DATA payload of our READ_FILE into dl->data: 1, 0 at END, or
 * -1 (error, message in @err with the errno's status in *status).
 */
static int next_data(struct download *dl, char *err, size_t errlen, int *status)
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
		*status = dl->status_of(-ret);
		return -1;
	}
	/* The connection is this READ_FILE's alone: anything else is a
	 * guest stalling (frames of no request reset no deadline here). */
	if (f.h.request_id != FILE_REQUEST_ID) {
		snprintf(err, errlen,
			 "the agent sent %s of request %u to READ_FILE",
			 thaw_type_name(f.h.type), f.h.request_id);
		*status = 500;
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
		*status = 413;
		return -1;
	}
	if (thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, err,
			    errlen) < 0) {
		*status = 500;
		return -1;
	}
	if (f.h.type == THAW_END)
		return 0;
	if (f.h.type == THAW_ERROR) {
		*status = dl->status_of(agent_error_of(&m, err, errlen));
		return -1;
	}
	if (f.h.type != THAW_DATA) {
		snprintf(err, errlen, "the agent sent %s to READ_FILE",
			 thaw_type_name(f.h.type));
		*status = 500;
		return -1;
	}
	const struct thaw_field *data = thaw_get(&m, THAW_T_DATA);
	if (dl->received + data->len > dl->d->cfg.max_file_bytes) {
		snprintf(err, errlen,
			 "the guest sent more than max_file_bytes (%" PRIu64
			 ")",
			 dl->d->cfg.max_file_bytes);
		*status = 413;
		return -1;
	}
	dl->received += data->len;
	uint8_t *copy = realloc(dl->data, data->len ? data->len : 1);
	if (!copy) {
		*status = 500;
		return -1;
	}
	memcpy(copy, data->data, data->len);
	dl->data = copy;
	dl->len = data->len;
	dl->off = 0;
	return 1;
}

static ssize_t download_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct download *dl = cls;
	char err[512];
	int status;

	(void)pos;
	while (dl->off == dl->len) {
		if (dl->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		int got = next_data(dl, err, sizeof(err), &status);
		if (got < 0) {
			/* Headers are out: all we can do is cut the body, and
			 * hang up on a guest that may still be sending. */
			log_write(LOG_LEVEL_WARNING, dl->sandbox->id,
				  "download: %s", err);
			sandbox_agent_close(dl->d, &dl->agent);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		dl->done = got == 0;
	}
	size_t n = dl->len - dl->off < max ? dl->len - dl->off : max;
	memcpy(buf, dl->data + dl->off, n);
	dl->off += n;
	return (ssize_t)n;
}

int api_download(struct sandbox *c, const char *path, int client_fd,
		 int (*status_of)(int err), struct MHD_Response **resp,
		 char *err, size_t errlen)
{
	struct daemon *d = c->pool->d;
	struct download *dl = calloc(1, sizeof(*dl));
	int status;

	if (!dl) {
		sandbox_put(d, c);
		snprintf(err, errlen, "out of memory");
		return 500;
	}
	*dl = (struct download){ .d = d,
				 .sandbox = c,
				 .status_of = status_of,
				 .agent = { .fd = -1 } };
	status = pool_error_status(
		sandbox_agent_open(c, &dl->agent, client_fd, err, errlen));
	if (!status && agent_read_file(&dl->agent, FILE_REQUEST_ID, path) < 0) {
		snprintf(err, errlen, "asking the guest for %s failed", path);
		status = 500;
	}
	/* The first answer decides the status: 404 must not be a 200. */
	if (!status) {
		int got = next_data(dl, err, errlen, &status);

		if (got >= 0) {
			status = 0;
			dl->done = got == 0;
		}
	}
	*resp = status ? NULL
		       : MHD_create_response_from_callback(
				 MHD_SIZE_UNKNOWN, 256 * 1024, download_read,
				 dl, download_free);
	if (!status && !*resp) {
		snprintf(err, errlen, "out of memory");
		status = 500;
	}
	if (status) {
		download_free(dl);
		return status;
	}
	MHD_add_response_header(*resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"application/octet-stream");
	return 0;
}

enum MHD_Result api_get_file(struct MHD_Connection *conn, struct request *r,
			     struct daemon *d)
{
	const char *path;
	uint32_t mode;
	char err[512];
	struct MHD_Response *resp;
	int status = file_args(conn, &path, &mode, err, sizeof(err));

	if (status)
		return api_reply_error(conn, r, status, "%s", err);
	struct sandbox *c = sandbox_get(d, r->id);
	if (!c)
		return api_no_sandbox(conn, r);
	http_paced(conn, d->cfg.idle_timeout_s, sandbox_guest_deadline_ns(d));
	status = api_download(c, path, http_client_fd(conn), file_status, &resp,
			      err, sizeof(err));
	if (status)
		return api_reply_error(conn, r, status, "%s", err);
	return api_reply(conn, r, 200, resp);
}
