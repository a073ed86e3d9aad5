// SPDX-License-Identifier: Apache-2.0
/*
 * e2b_files.c - envd's GET and POST /files (filesystem.h): a file out of the
 * sandbox, and files into it, with E2B's ?path= and ?username=.
 *
 * A download is the service core's (sandbox_files.c), as thaw's: the agent's
 * READ_FILE streamed to the client as it reads, never held whole, its
 * first frame read before the headers so that a missing file is envd's
 * 404 and a directory its 400.
 *
 * An upload is what the SDK's files.write() sends: multipart/form-data,
 * one part named "file" per file, its filename the file's path when there
 * is no ?path= (writeFiles), parts of other names skipped, as envd does;
 * or, as envd 0.5.7 takes it, an application/octet-stream body that is
 * the file at ?path=.  libmicrohttpd's MHD_PostProcessor splits the body;
 * each file's bytes go on to the agent as they come (WRITE_FILE, frames of
 * up to AGENT_WRITE_CHUNK), written by the agent to a temporary file
 * renamed over the path once the part is over, as owned by the user; the
 * missing directories above it are made first (MKDIR with parents, owned
 * by the user too), as envd's EnsureDirs.  The answer lists an EntryInfo
 * {name, type: "file", path} per file written.
 *
 * A hostile body is bounded: the files' bytes together by max_file_bytes
 * (413), the parts by E2B_UPLOAD_MAX_PARTS, the whole body by both plus
 * E2B_UPLOAD_PART_SLACK a part for its headers, a part's headers by the
 * post processor's buffer (E2B_UPLOAD_BUFFER, from the memory budget); a
 * slow one by the listener's idle timeout and connection caps, each piece
 * sent to the guest by the daemon's patience.  As envd, files are written
 * in order and an error stops the upload there: the files before it stay,
 * the one being written is dropped by the agent (its connection closes
 * before its last frame), and the answer is the error, in E2B's JSON,
 * once the body is in.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pool/e2b/filesystem.h"

#define FIRST_WRITE_ID 100
#define FS_REQUEST_ID 5
/* The post processor's buffer: a part's header lines must fit in it. */
#define E2B_UPLOAD_BUFFER (64u * 1024)
#define E2B_UPLOAD_MAX_PARTS 1024
/* A part's boundary and headers, at most, in the body's bound. */
#define E2B_UPLOAD_PART_SLACK (8u * 1024)
#define UPLOAD_MODE 0644

int e2b_files_args(const char *path, const char *username,
		   char user[E2B_USER_MAX + 1], char resolved[E2B_PATH_MAX + 1],
		   char *err, size_t errlen)
{
	username = username && *username ? username : E2B_DEFAULT_USER;
	if (!e2b_user_valid(username)) {
		snprintf(err, errlen,
			 "error looking up user '%.64s': a user name is 1 to "
			 "%d of [A-Za-z0-9_.-]",
			 username, E2B_USER_MAX);
		return 401;
	}
	snprintf(user, E2B_USER_MAX + 1, "%s", username);
	if (e2b_resolve_path(path ? path : "", user, resolved, err, errlen) < 0)
		return 400;
	return 0;
}

enum e2b_upload_kind e2b_upload_kind(const char *content_type)
{
	if (!content_type)
		return E2B_UPLOAD_UNSUPPORTED;
	content_type += strspn(content_type, " \t");
	size_t n = strcspn(content_type, "; \t");

	if (n == strlen("multipart/form-data") &&
	    !strncasecmp(content_type, "multipart/form-data", n))
		return E2B_UPLOAD_MULTIPART;
	if (n == strlen("application/octet-stream") &&
	    !strncasecmp(content_type, "application/octet-stream", n))
		return E2B_UPLOAD_RAW;
	return E2B_UPLOAD_UNSUPPORTED;
}

/* An agent's errno, or a failed wait's, as envd's status. */
static int files_status(int e)
{
	switch (e) {
	case ENOENT:
		return 404;
	case EISDIR:
	case ENOTDIR:
	case EINVAL:
	case ENAMETOOLONG:
	case ELOOP:
	case EEXIST:
		return 400;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return 507;
	case ETIMEDOUT:
		return 504;
	case ESHUTDOWN:
	case EINTR:
		return 503;
	default:
		return 500;
	}
}

static const char *query(struct MHD_Connection *conn, const char *name)
{
	return MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, name);
}

enum MHD_Result e2b_files_get(struct MHD_Connection *conn,
			      struct e2b_request *r)
{
	char user[E2B_USER_MAX + 1], path[E2B_PATH_MAX + 1], err[1024];
	struct sandbox_download *dl;
	int guest_errno;
	int status =
		e2b_files_args(query(conn, "path"), query(conn, "username"),
			       user, path, err, sizeof(err));

	if (status)
		return e2b_reply_error(conn, r, status, "%s", err);
	/* The download holds the sandbox of its own: it may outlive the
	 * request's end. */
	struct sandbox *c = sandbox_get(r->d, r->sandbox->id);
	if (!c)
		return e2b_reply_error(conn, r, 502, "sandbox %s is gone",
				       r->sandbox->id);
	http_paced(conn, r->d->cfg.idle_timeout_s,
		   sandbox_guest_deadline_ns(r->d));
	enum pool_error e =
		sandbox_download_open(c, path, http_client_fd(conn), &dl,
				      &guest_errno, err, sizeof(err));
	if (e != POOL_OK)
		status = e == POOL_GUEST_ERROR ? files_status(guest_errno)
					       : (int)pool_error_status(e);
	if (status == 404)
		snprintf(err, sizeof(err), "path '%.900s' does not exist",
			 path);
	if (status)
		return e2b_reply_error(conn, r, (unsigned)status, "%s", err);
	struct MHD_Response *resp = http_stream_response(
		sandbox_download_read, sandbox_download_close, dl,
		"application/octet-stream");
	if (!resp)
		return e2b_reply_error(conn, r, 500, "out of memory");
	return e2b_reply(conn, r, 200, resp);
}

/* ---- uploads ------------------------------------------------------------ */

struct upload {
	struct daemon *d;
	struct MHD_PostProcessor *pp; /* NULL for a raw body */
	uint64_t budget;	      /* the post processor's buffer */
	struct agent_conn agent;
	char user[E2B_USER_MAX + 1];
	bool has_path; /* ?path= given: every file goes there */
	char path[E2B_PATH_MAX + 1];
	struct e2b_part_cursor cursor;
	unsigned parts;
	bool skipping; /* the current part is not a file */
	bool writing;  /* a file is being written, as request_id */
	bool open;     /* its WRITE_FILE has begun */
	char file[E2B_PATH_MAX + 1];
	uint32_t request_id;
	uint64_t body_bytes, file_bytes;
	json_t *written; /* the EntryInfo of each file written */
	int status;	 /* the upload's error, answered at its end */
	char err[1024];
};

static void upload_free(struct e2b_request *r)
{
	struct upload *u = r->state;

	if (u->pp)
		MHD_destroy_post_processor(u->pp);
	sandbox_budget_give(u->d, u->budget);
	/* A file still being written is dropped by the agent. */
	sandbox_agent_close(u->d, &u->agent);
	json_decref(u->written);
	free(u);
	r->state = NULL;
}

__attribute__((format(printf, 3, 4))) static void
upload_fail(struct upload *u, int status, const char *fmt, ...)
{
	va_list ap;

	if (u->status)
		return;
	u->status = status;
	va_start(ap, fmt);
	vsnprintf(u->err, sizeof(u->err), fmt, ap);
	va_end(ap);
}

/* An agent call's failure @ret, its message in @why. */
static void agent_fail(struct upload *u, int ret, const char *why)
{
	upload_fail(u, files_status(-ret), "%s: %s", u->file, why);
}

/* Starts writing a file of a part whose filename is @filename. */
static void begin_file(struct upload *u, const char *filename)
{
	char err[512];

	if (u->has_path) {
		memcpy(u->file, u->path, sizeof(u->file));
	} else if (!filename || !*filename) {
		upload_fail(u, 400,
			    "error getting multipart custom part file name: "
			    "filename not found in Content-Disposition header "
			    "(and no ?path=)");
		return;
	} else if (e2b_resolve_path(filename, u->user, u->file, u->err,
				    sizeof(u->err)) < 0) {
		u->status = 400;
		return;
	}
	size_t i;
	json_t *e;
	json_array_foreach(u->written, i, e)
	{
		if (!strcmp(json_string_value(json_object_get(e, "path")),
			    u->file)) {
			upload_fail(
				u, 400,
				"you cannot upload multiple files to the "
				"same path '%s' in one upload request, only "
				"the first specified file was uploaded",
				u->file);
			return;
		}
	}
	/* envd's EnsureDirs: the directories above it, the user's. */
	char parent[E2B_PATH_MAX + 1];
	const char *base = e2b_base_name(u->file);
	size_t n = base > u->file + 1 ? (size_t)(base - u->file - 1) : 1;
	memcpy(parent, u->file, n);
	parent[n] = '\0';
	int ret = agent_mkdir(&u->agent, FS_REQUEST_ID, parent, 0755, true,
			      u->user, err, sizeof(err));
	if (ret < 0 && ret != -EEXIST && ret != -ENOTDIR) {
		agent_fail(u, ret, err);
		return;
	}
	u->writing = true;
	u->open = false;
	u->request_id++;
}

static void write_data(struct upload *u, const char *data, size_t len)
{
	if (u->file_bytes + len > u->d->cfg.max_file_bytes) {
		upload_fail(u, 413,
			    "the files are larger than max_file_bytes "
			    "(%" PRIu64 ")",
			    u->d->cfg.max_file_bytes);
		return;
	}
	u->file_bytes += len;
	int ret = sandbox_file_write(&u->agent, u->request_id, &u->open,
				     u->file, UPLOAD_MODE, u->user, data, len);
	if (ret < 0)
		agent_fail(u, ret,
			   ret == -ETIMEDOUT ? "the guest stopped reading"
					     : strerror(-ret));
}

/* Ends the file being written: its last frame, the agent's verdict. */
static void finish_file(struct upload *u)
{
	char err[512];

	u->writing = false;
	int ret =
		agent_write_file_as(&u->agent, u->request_id, !u->open, u->file,
				    UPLOAD_MODE, u->user, NULL, 0, true);
	if (ret == 0)
		ret = agent_wait_answer(&u->agent, u->request_id, err,
					sizeof(err));
	else
		snprintf(err, sizeof(err), "%s", strerror(-ret));
	if (ret < 0) {
		agent_fail(u, ret, err);
		return;
	}
	json_t *e = json_pack("{s:s,s:s,s:s}", "name", e2b_base_name(u->file),
			      "type", "file", "path", u->file);
	if (!e || json_array_append_new(u->written, e) < 0)
		upload_fail(u, 500, "out of memory");
}

/* MHD_PostProcessor's iterator: a piece of a part. */
static enum MHD_Result upload_part(void *cls, enum MHD_ValueKind kind,
				   const char *key, const char *filename,
				   const char *content_type,
				   const char *transfer_encoding,
				   const char *data, uint64_t off, size_t size)
{
	struct upload *u = cls;

	(void)kind;
	(void)content_type;
	(void)transfer_encoding;
	if (!u->status &&
	    e2b_part_begins(&u->cursor, key, filename, off, size)) {
		if (u->writing)
			finish_file(u);
		if (++u->parts > E2B_UPLOAD_MAX_PARTS)
			upload_fail(u, 400,
				    "the body has more than %d parts: send "
				    "the files in several uploads",
				    E2B_UPLOAD_MAX_PARTS);
		u->skipping = !key || strcmp(key, "file");
		if (!u->status && !u->skipping)
			begin_file(u, filename);
	}
	if (!u->status && !u->skipping && size)
		write_data(u, data, size);
	return u->status ? MHD_NO : MHD_YES;
}

/* Checks the headers and sets the upload up; 0 or an HTTP status with a
 * message in u->err. */
static int upload_setup(struct MHD_Connection *conn, struct e2b_request *r,
			struct upload *u)
{
	const char *path = query(conn, "path");
	const char *encoding = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_ENCODING);
	const char *length = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	const char *type = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	enum e2b_upload_kind kind = e2b_upload_kind(type);
	uint64_t max_body = kind == E2B_UPLOAD_RAW
				    ? u->d->cfg.max_file_bytes
				    : u->d->cfg.max_file_bytes +
					      (uint64_t)E2B_UPLOAD_MAX_PARTS *
						      E2B_UPLOAD_PART_SLACK;
	int status = e2b_files_args(path, query(conn, "username"), u->user,
				    u->path, u->err, sizeof(u->err));

	u->has_path = path != NULL;
	if (status)
		return status;
	if (encoding && strcasecmp(encoding, "identity")) {
		snprintf(u->err, sizeof(u->err),
			 "Content-Encoding %.64s is not taken: send the body "
			 "uncompressed",
			 encoding);
		return 400;
	}
	if (kind == E2B_UPLOAD_UNSUPPORTED) {
		snprintf(u->err, sizeof(u->err),
			 "unsupported content type: %.128s, expected "
			 "multipart/form-data or application/octet-stream",
			 type ? type : "(none)");
		return 400;
	}
	if (kind == E2B_UPLOAD_RAW && !u->has_path) {
		snprintf(u->err, sizeof(u->err),
			 "path query parameter is required for raw body "
			 "upload");
		return 400;
	}
	if (length && strtoull(length, NULL, 10) > max_body) {
		snprintf(u->err, sizeof(u->err),
			 "the upload is larger than max_file_bytes "
			 "(%" PRIu64 ")",
			 u->d->cfg.max_file_bytes);
		return 413;
	}
	if (kind == E2B_UPLOAD_MULTIPART) {
		if (!sandbox_budget_take(u->d, E2B_UPLOAD_BUFFER)) {
			sandbox_budget_spent(u->d, u->err, sizeof(u->err));
			return 503;
		}
		u->budget = E2B_UPLOAD_BUFFER;
		u->pp = MHD_create_post_processor(conn, E2B_UPLOAD_BUFFER,
						  upload_part, u);
		if (!u->pp) {
			snprintf(u->err, sizeof(u->err),
				 "the multipart body's Content-Type has no "
				 "usable boundary");
			return 400;
		}
	}
	status = pool_error_status(sandbox_agent_open(r->sandbox, &u->agent,
						      http_client_fd(conn),
						      u->err, sizeof(u->err)));
	if (status)
		return status;
	http_paced(conn, r->d->cfg.idle_timeout_s,
		   sandbox_guest_deadline_ns(r->d));
	if (kind == E2B_UPLOAD_RAW)
		begin_file(u, NULL);
	return u->status;
}

enum MHD_Result e2b_files_upload_begin(struct MHD_Connection *conn,
				       struct e2b_request *r)
{
	struct upload *u = calloc(1, sizeof(*u));

	if (!u)
		return MHD_NO;
	*u = (struct upload){ .d = r->d,
			      .agent = { .fd = -1 },
			      .request_id = FIRST_WRITE_ID,
			      .written = json_array() };
	r->state = u;
	r->state_free = upload_free;
	if (!u->written)
		return MHD_NO;
	int status = upload_setup(conn, r, u);
	if (status)
		return e2b_reply_error(conn, r, (unsigned)status, "%s", u->err);
	return MHD_YES;
}

void e2b_files_upload_piece(struct MHD_Connection *conn, struct e2b_request *r,
			    const char *data, size_t len)
{
	struct upload *u = r->state;
	uint64_t max_body = u->pp ? u->d->cfg.max_file_bytes +
					    (uint64_t)E2B_UPLOAD_MAX_PARTS *
						    E2B_UPLOAD_PART_SLACK
				  : u->d->cfg.max_file_bytes;

	(void)conn;
	if (u->status)
		return;
	u->body_bytes += len;
	if (u->body_bytes > max_body)
		upload_fail(u, 413,
			    "the upload is larger than max_file_bytes "
			    "(%" PRIu64 ")",
			    u->d->cfg.max_file_bytes);
	else if (!u->pp)
		write_data(u, data, len);
	else if (MHD_post_process(u->pp, data, len) == MHD_NO)
		upload_fail(u, 400,
			    "the multipart/form-data body is malformed (a "
			    "part's headers past %u bytes, or no boundary "
			    "where one belongs)",
			    E2B_UPLOAD_BUFFER);
}

enum MHD_Result e2b_files_upload_end(struct MHD_Connection *conn,
				     struct e2b_request *r)
{
	struct upload *u = r->state;

	if (u->pp) {
		/* Done before the last file's end: its bytes may still be
		 * in the processor's buffer until it sees the closing
		 * boundary, which it checks here. */
		bool whole = MHD_destroy_post_processor(u->pp) == MHD_YES;

		u->pp = NULL;
		if (!whole)
			upload_fail(u, 400,
				    "the multipart/form-data body ended before "
				    "its closing boundary");
	}
	if (!u->status && u->writing)
		finish_file(u);
	if (u->status)
		return e2b_reply_error(conn, r, (unsigned)u->status, "%s",
				       u->err);
	json_t *written = u->written;
	u->written = NULL;
	return e2b_reply_json(conn, r, 200, written);
}
