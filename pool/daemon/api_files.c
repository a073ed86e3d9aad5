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
 * The download and the sending of an upload's pieces are the service
 * core's (sandbox_files.c), which E2B's /files serves too.
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
	int ret = sandbox_file_write(&r->agent, FILE_REQUEST_ID, &r->write_open,
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

enum MHD_Result api_get_file(struct MHD_Connection *conn, struct request *r,
			     struct daemon *d)
{
	const char *path;
	uint32_t mode;
	char err[512];
	struct sandbox_download *dl;
	int guest_errno;
	int status = file_args(conn, &path, &mode, err, sizeof(err));

	if (status)
		return api_reply_error(conn, r, status, "%s", err);
	struct sandbox *c = sandbox_get(d, r->id);
	if (!c)
		return api_no_sandbox(conn, r);
	http_paced(conn, d->cfg.idle_timeout_s, sandbox_guest_deadline_ns(d));
	enum pool_error e =
		sandbox_download_open(c, path, http_client_fd(conn), &dl,
				      &guest_errno, err, sizeof(err));
	if (e != POOL_OK)
		return api_reply_error(
			conn, r,
			e == POOL_GUEST_ERROR
				? (unsigned)file_status(guest_errno)
				: pool_error_status(e),
			"%s", err);
	struct MHD_Response *resp = http_stream_response(
		sandbox_download_read, sandbox_download_close, dl,
		"application/octet-stream");
	if (!resp)
		return api_reply_error(conn, r, 500, "out of memory");
	return api_reply(conn, r, 200, resp);
}
