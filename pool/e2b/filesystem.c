// SPDX-License-Identifier: Apache-2.0
/*
 * filesystem.c - envd's filesystem.Filesystem Connect service
 * (filesystem.h): Stat, ListDir, MakeDir, Move, Remove, the WatchDir
 * stream and the watchers polled instead (CreateWatcher, GetWatcherEvents,
 * RemoveWatcher).
 *
 * A call reads its request message (connect.c), its user (the
 * Authorization header, envd.c), resolves its paths as envd does
 * (fspath.c) and does its work on an agent connection of its own, closed
 * when it answers, as thaw's own API does (sandbox_sessions.c): every wait on
 * the guest is bounded by the daemon's patience and ends when the client hangs
 * up or the daemon stops.  The agent's errno becomes envd's Connect code
 * (e2b_code_of_errno: ENOENT not_found, EEXIST already_exists, a directory
 * expected invalid_argument...), the way E2B's SDK reads them: not_found is its
 * FileNotFoundError, already_exists makes makeDir() answer false.  What envd
 * does beyond the syscall, this does too: MakeDir says already_exists for a
 * directory that is there and invalid_argument for a file; Move makes the
 * destination's missing directories (owned by the user) first; Remove of
 * nothing is no error (Go's os.RemoveAll).
 *
 * ListDir's answer is one JSON message, which a hostile guest (a tree of
 * THAW_LIST_MAX_ENTRIES long names) could make large: it is written as
 * text entry by entry, never as a tree of JSON objects, each growth taken
 * from the daemon's memory budget and the whole capped at
 * E2B_LIST_MAX_BYTES (resource_exhausted past either), the budget held
 * until the answer has been sent.  WatchDir streams the agent's WATCH
 * events as they come, one envelope per event: a slow client slows the
 * reading of the guest's events, never grows a queue here.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "pool/e2b/filesystem.h"

#define FS_REQUEST_ID 5
#define WATCH_REQUEST_ID 6
/* ListDir's answer, at most. */
#define E2B_LIST_MAX_BYTES (16u << 20)
#define LIST_PREFIX "{\"entries\":["
#define LIST_SUFFIX "]}"

/* One call: its message, user and agent connection. */
struct fs_call {
	struct e2b_request *r;
	json_t *msg;
	char user[E2B_USER_MAX + 1];
	struct agent_conn agent;
	char err[1024];
};

/*
 * Opens call @c: its message (an envelope's when @streaming), its user,
 * and, @with_agent, a connection to the sandbox's agent.  A Connect code
 * with a message in c->err when one of them fails.
 */
static enum e2b_code call_open(struct MHD_Connection *conn,
			       struct e2b_request *r, struct fs_call *c,
			       bool streaming, bool with_agent)
{
	*c = (struct fs_call){ .r = r, .agent = { .fd = -1 } };
	c->msg = e2b_connect_request(r, streaming, c->err, sizeof(c->err));
	if (!c->msg)
		return E2B_INVALID_ARGUMENT;
	if (!e2b_request_user(conn, c->user, sizeof(c->user), c->err,
			      sizeof(c->err)))
		return E2B_UNAUTHENTICATED;
	if (!e2b_user_valid(c->user)) {
		snprintf(c->err, sizeof(c->err), "invalid user '%s'", c->user);
		return E2B_UNAUTHENTICATED;
	}
	if (!with_agent)
		return E2B_OK;
	int status = pool_error_status(
		sandbox_agent_open(r->sandbox, &c->agent, http_client_fd(conn),
				   c->err, sizeof(c->err)));
	if (status)
		return e2b_code_of_status((unsigned)status);
	http_paced(conn, r->d->cfg.idle_timeout_s,
		   sandbox_guest_deadline_ns(r->d));
	return E2B_OK;
}

/* Ends call @c with @answer (taken over) or, when @code is not E2B_OK,
 * the error in c->err. */
static enum MHD_Result call_close(struct MHD_Connection *conn,
				  struct fs_call *c, enum e2b_code code,
				  json_t *answer)
{
	sandbox_agent_close(c->r->d, &c->agent);
	json_decref(c->msg);
	if (code != E2B_OK) {
		json_decref(answer);
		return e2b_reply_connect_error(conn, c->r, code, "%s", c->err);
	}
	return e2b_reply_connect(conn, c->r, answer);
}

/* The code of an agent call's failure @ret, its message in c->err. */
static enum e2b_code agent_failed(int ret)
{
	return ret == -ETIMEDOUT   ? E2B_DEADLINE_EXCEEDED
	       : ret == -ESHUTDOWN ? E2B_UNAVAILABLE
				   : e2b_code_of_errno(-ret);
}

static enum e2b_code out_of_memory(struct fs_call *c)
{
	snprintf(c->err, sizeof(c->err), "out of memory");
	return E2B_INTERNAL;
}

/* String field @name of the message (absent or null: ""), or NULL after
 * an error in c->err. */
static const char *string_field(struct fs_call *c, const char *name)
{
	json_t *v = json_object_get(c->msg, name);

	if (!v || json_is_null(v))
		return "";
	if (!json_is_string(v)) {
		snprintf(c->err, sizeof(c->err), "%s must be a string", name);
		return NULL;
	}
	return json_string_value(v);
}

/* Field @name as a path resolved for the call's user. */
static enum e2b_code path_field(struct fs_call *c, const char *name,
				char out[E2B_PATH_MAX + 1])
{
	const char *path = string_field(c, name);

	if (!path ||
	    e2b_resolve_path(path, c->user, out, c->err, sizeof(c->err)) < 0)
		return E2B_INVALID_ARGUMENT;
	return E2B_OK;
}

static enum e2b_code bool_field(struct fs_call *c, const char *name, bool *out)
{
	json_t *v = json_object_get(c->msg, name);

	*out = json_is_true(v);
	if (v && !json_is_null(v) && !json_is_boolean(v)) {
		snprintf(c->err, sizeof(c->err), "%s must be true or false",
			 name);
		return E2B_INVALID_ARGUMENT;
	}
	return E2B_OK;
}

/* {"entry": EntryInfo} of @path, from a STAT. */
static enum e2b_code stat_entry(struct fs_call *c, const char *path,
				json_t **answer)
{
	struct agent_file_info info;
	int ret = agent_stat(&c->agent, FS_REQUEST_ID, path, &info, c->err,
			     sizeof(c->err));

	if (ret < 0)
		return agent_failed(ret);
	json_t *entry = e2b_entry_json(&info, path);
	*answer = entry ? json_pack("{s:o}", "entry", entry) : NULL;
	return *answer ? E2B_OK : out_of_memory(c);
}

enum MHD_Result e2b_fs_stat(struct MHD_Connection *conn, struct e2b_request *r)
{
	struct fs_call c;
	char path[E2B_PATH_MAX + 1];
	json_t *answer = NULL;
	enum e2b_code code = call_open(conn, r, &c, false, true);

	if (!code)
		code = path_field(&c, "path", path);
	if (!code)
		code = stat_entry(&c, path, &answer);
	return call_close(conn, &c, code, answer);
}

/* ---- ListDir ------------------------------------------------------------ */

/* ListDir's depth: a number or, as protobuf's JSON allows, a string of
 * digits; 0 or absent is 1, as envd has it. */
static enum e2b_code depth_field(struct fs_call *c, uint32_t *depth)
{
	json_t *v = json_object_get(c->msg, "depth");
	json_int_t n = 0;
	bool ok = true;

	if (json_is_integer(v)) {
		n = json_integer_value(v);
	} else if (json_is_string(v)) {
		const char *s = json_string_value(v);
		size_t digits = strspn(s, "0123456789");

		ok = digits && !s[digits] && digits <= 9;
		n = ok ? strtoll(s, NULL, 10) : 0;
	} else if (v && !json_is_null(v)) {
		ok = false;
	}
	if (!ok || n < 0 || n > THAW_LIST_MAX_DEPTH) {
		snprintf(c->err, sizeof(c->err),
			 "depth must be a whole number from 0 to %d",
			 THAW_LIST_MAX_DEPTH);
		return E2B_INVALID_ARGUMENT;
	}
	*depth = n ? (uint32_t)n : 1;
	return E2B_OK;
}

/* The text of ListDir's answer, growing from the memory budget. */
struct listing {
	struct fs_call *c;
	const char *dir;
	struct http_text t;
	uint64_t budget; /* taken for t's buffer */
	size_t entries;
	enum e2b_code code;
};

/* Appends @s (@n bytes) to the answer; false with l->code set when it
 * does not fit. */
static bool listing_add(struct listing *l, const char *s, size_t n)
{
	struct daemon *d = l->c->r->d;

	if (l->t.len + n > l->t.cap) {
		size_t cap = l->t.cap ? 2 * l->t.cap : 64 * 1024;

		while (cap < l->t.len + n)
			cap *= 2;
		if (cap > E2B_LIST_MAX_BYTES) {
			snprintf(
				l->c->err, sizeof(l->c->err),
				"the listing of %.900s passed %u bytes after %zu "
				"entries: ask for less depth",
				l->dir, E2B_LIST_MAX_BYTES, l->entries);
			l->code = E2B_RESOURCE_EXHAUSTED;
			return false;
		}
		if (!sandbox_budget_take(d, cap - l->t.cap)) {
			sandbox_budget_spent(d, l->c->err, sizeof(l->c->err));
			l->code = E2B_RESOURCE_EXHAUSTED;
			return false;
		}
		l->budget += cap - l->t.cap;
		if (!http_text_reserve(&l->t, cap)) {
			l->code = out_of_memory(l->c);
			return false;
		}
	}
	memcpy(l->t.buf + l->t.len, s, n);
	l->t.len += n;
	return true;
}

static int list_each(const struct agent_file_info *info, void *arg)
{
	struct listing *l = arg;
	char joined[2 * (E2B_PATH_MAX + 1)], path[E2B_PATH_MAX + 1];

	snprintf(joined, sizeof(joined), "%s/%s", l->dir, info->path);
	if (e2b_resolve_path(joined, "root", path, l->c->err,
			     sizeof(l->c->err)) < 0) {
		l->code = E2B_INTERNAL;
		return -1;
	}
	json_t *entry = e2b_entry_json(info, path);
	char *text = entry ? json_dumps(entry, HTTP_JSON_FLAGS) : NULL;

	json_decref(entry);
	if (!text) {
		l->code = out_of_memory(l->c);
		return -1;
	}
	bool fits = (!l->entries++ || listing_add(l, ",", 1)) &&
		    listing_add(l, text, strlen(text));
	free(text);
	return fits ? 0 : -1;
}

enum MHD_Result e2b_fs_list_dir(struct MHD_Connection *conn,
				struct e2b_request *r)
{
	struct fs_call c;
	char path[E2B_PATH_MAX + 1];
	uint32_t depth = 1;
	enum e2b_code code = call_open(conn, r, &c, false, true);
	struct listing l = { .c = &c, .dir = path, .code = E2B_OK };

	if (!code)
		code = path_field(&c, "path", path);
	if (!code)
		code = depth_field(&c, &depth);
	if (!code && listing_add(&l, LIST_PREFIX, strlen(LIST_PREFIX))) {
		int ret = agent_list(&c.agent, FS_REQUEST_ID, path, depth,
				     list_each, &l, c.err, sizeof(c.err));

		if (ret == -E2BIG) {
			snprintf(
				c.err, sizeof(c.err),
				"%.900s holds more than %d entries down to depth "
				"%u: ask for less depth",
				path, THAW_LIST_MAX_ENTRIES, depth);
			code = E2B_RESOURCE_EXHAUSTED;
		} else if (ret < 0) {
			code = l.code ? l.code : agent_failed(ret);
		}
	}
	if (!code)
		code = l.code;
	if (!code && !listing_add(&l, LIST_SUFFIX, strlen(LIST_SUFFIX)))
		code = l.code;
	if (code) {
		sandbox_budget_give(r->d, l.budget);
		free(l.t.buf);
		return call_close(conn, &c, code, NULL);
	}
	sandbox_agent_close(r->d, &c.agent);
	json_decref(c.msg);
	/* The budget goes back once the answer has been sent. */
	return e2b_reply(conn, r, 200,
			 http_held_response(&r->x, l.t.buf, l.t.len,
					    "application/json", l.budget));
}

/* ---- MakeDir, Move, Remove ---------------------------------------------- */

enum MHD_Result e2b_fs_make_dir(struct MHD_Connection *conn,
				struct e2b_request *r)
{
	struct fs_call c;
	struct agent_file_info info;
	char path[E2B_PATH_MAX + 1];
	json_t *answer = NULL;
	enum e2b_code code = call_open(conn, r, &c, false, true);
	int ret = 0;

	if (!code)
		code = path_field(&c, "path", path);
	if (!code)
		ret = agent_stat(&c.agent, FS_REQUEST_ID, path, &info, c.err,
				 sizeof(c.err));
	if (!code && ret == 0) {
		bool dir = info.type == THAW_FT_DIR;

		snprintf(c.err, sizeof(c.err),
			 dir ? "directory already exists: %.900s"
			     : "path already exists but it is not a "
			       "directory: %.900s",
			 path);
		code = dir ? E2B_ALREADY_EXISTS : E2B_INVALID_ARGUMENT;
	} else if (!code && ret != -ENOENT) {
		code = agent_failed(ret);
	}
	if (!code) {
		ret = agent_mkdir(&c.agent, FS_REQUEST_ID, path, 0755, true,
				  c.user, c.err, sizeof(c.err));
		code = ret < 0 ? agent_failed(ret) : E2B_OK;
	}
	if (!code) {
		answer = json_pack("{s:{s:s,s:s,s:s}}", "entry", "name",
				   e2b_base_name(path), "type",
				   "FILE_TYPE_DIRECTORY", "path", path);
		code = answer ? E2B_OK : out_of_memory(&c);
	}
	return call_close(conn, &c, code, answer);
}

/*
 * Makes the directory @path is in, and the missing ones above it, owned
 * by the call's user (envd's EnsureDirs).  One that exists is no error,
 * nor is a file in the way: what needed the directory says so.
 */
static enum e2b_code ensure_parent(struct fs_call *c, const char *path)
{
	char parent[E2B_PATH_MAX + 1];
	const char *base = e2b_base_name(path);
	size_t n = base > path + 1 ? (size_t)(base - path - 1) : 1;

	memcpy(parent, path, n);
	parent[n] = '\0';
	int ret = agent_mkdir(&c->agent, FS_REQUEST_ID, parent, 0755, true,
			      c->user, c->err, sizeof(c->err));
	if (ret < 0 && ret != -EEXIST && ret != -ENOTDIR)
		return agent_failed(ret);
	return E2B_OK;
}

enum MHD_Result e2b_fs_move(struct MHD_Connection *conn, struct e2b_request *r)
{
	struct fs_call c;
	char from[E2B_PATH_MAX + 1], to[E2B_PATH_MAX + 1];
	json_t *answer = NULL;
	enum e2b_code code = call_open(conn, r, &c, false, true);

	if (!code)
		code = path_field(&c, "source", from);
	if (!code)
		code = path_field(&c, "destination", to);
	if (!code)
		code = ensure_parent(&c, to);
	if (!code) {
		int ret = agent_rename(&c.agent, FS_REQUEST_ID, from, to, c.err,
				       sizeof(c.err));
		code = ret < 0 ? agent_failed(ret) : E2B_OK;
	}
	if (!code)
		code = stat_entry(&c, to, &answer);
	return call_close(conn, &c, code, answer);
}

enum MHD_Result e2b_fs_remove(struct MHD_Connection *conn,
			      struct e2b_request *r)
{
	struct fs_call c;
	char path[E2B_PATH_MAX + 1];
	enum e2b_code code = call_open(conn, r, &c, false, true);

	if (!code)
		code = path_field(&c, "path", path);
	if (!code) {
		int ret = agent_remove(&c.agent, FS_REQUEST_ID, path, true,
				       c.err, sizeof(c.err));
		code = ret < 0 && ret != -ENOENT ? agent_failed(ret) : E2B_OK;
	}
	return call_close(conn, &c, code, code ? NULL : json_object());
}

/* ---- WatchDir ----------------------------------------------------------- */

/* A WatchDir stream's source: the watch's agent connection. */
struct watch_stream {
	struct daemon *d;
	struct agent_conn agent;
	bool started;
};

static json_t *watch_message(const char *kind, json_t *value)
{
	return json_pack("{s:o}", kind, value);
}

/* How a stream ends when the agent's connection failed with @ret. */
static void watch_failed(int ret, const char *what, struct e2b_stream_end *end)
{
	end->code = ret == -ESHUTDOWN	   ? E2B_UNAVAILABLE
		    : ret == -ECONNABORTED ? E2B_CANCELED
		    : ret == -EPIPE	   ? E2B_UNAVAILABLE
					   : agent_failed(ret);
	snprintf(end->message, sizeof(end->message), "watcher error: %.400s",
		 ret == -ESHUTDOWN ? "the daemon is stopping"
		 : ret == -EPIPE   ? "the sandbox's agent went away"
				   : what);
}

static enum e2b_step watch_next(void *src, uint64_t until_ns, json_t **msg,
				struct e2b_stream_end *end)
{
	struct watch_stream *w = src;
	struct agent_fs_event ev;
	struct thaw_frame f;
	char err[512];

	if (!w->started) {
		w->started = true;
		*msg = watch_message("start", json_object());
		return E2B_STEP_MESSAGE;
	}
	w->agent.watch.deadline_ns = until_ns;
	int ret = agent_next_frame(&w->agent, &f);
	if (ret == -ETIMEDOUT)
		return E2B_STEP_IDLE;
	if (ret == 0)
		ret = agent_fs_event_of(&f, WATCH_REQUEST_ID, &ev, err,
					sizeof(err));
	else
		snprintf(err, sizeof(err), "%s", strerror(-ret));
	if (ret == 1) {
		json_t *event = e2b_event_json(&ev);

		if (event) {
			*msg = watch_message("filesystem", event);
			return E2B_STEP_MESSAGE;
		}
		ret = -EOVERFLOW;
		snprintf(err, sizeof(err),
			 "the guest's queue of events overflowed: events "
			 "were lost");
	}
	if (ret == 0) /* the watched directory itself went away */
		end->code = E2B_OK;
	else
		watch_failed(ret, err, end);
	return E2B_STEP_END;
}

static json_t *watch_keepalive(void *src)
{
	(void)src;
	return watch_message("keepalive", json_object());
}

static void watch_free(void *src)
{
	struct watch_stream *w = src;

	sandbox_agent_close(w->d, &w->agent);
	free(w);
}

static const struct e2b_stream_ops watch_stream_ops = {
	.next = watch_next,
	.keepalive = watch_keepalive,
	.free = watch_free,
};

enum MHD_Result e2b_fs_watch_dir(struct MHD_Connection *conn,
				 struct e2b_request *r)
{
	struct fs_call c;
	char path[E2B_PATH_MAX + 1];
	bool recursive = false;
	enum e2b_code code = call_open(conn, r, &c, true, true);

	if (!code)
		code = path_field(&c, "path", path);
	if (!code)
		code = bool_field(&c, "recursive", &recursive);
	if (!code) {
		int ret = agent_watch(&c.agent, WATCH_REQUEST_ID, path,
				      recursive, c.err, sizeof(c.err));
		code = ret < 0 ? agent_failed(ret) : E2B_OK;
	}
	struct watch_stream *w = code ? NULL : calloc(1, sizeof(*w));
	if (!code && !w)
		code = out_of_memory(&c);
	json_decref(c.msg);
	if (code) {
		sandbox_agent_close(r->d, &c.agent);
		return e2b_reply_stream_error(conn, r, code, "%s", c.err);
	}
	*w = (struct watch_stream){ .d = r->d, .agent = c.agent };
	return e2b_reply_stream(conn, r, &watch_stream_ops, w);
}

/* ---- the watchers polled instead of streamed ---------------------------- */

enum MHD_Result e2b_fs_create_watcher(struct MHD_Connection *conn,
				      struct e2b_request *r)
{
	struct fs_call c;
	char path[E2B_PATH_MAX + 1], id[E2B_WATCHER_ID_LEN + 1];
	bool recursive = false;
	json_t *answer = NULL;
	enum e2b_code code = call_open(conn, r, &c, false, false);

	if (!code)
		code = path_field(&c, "path", path);
	if (!code)
		code = bool_field(&c, "recursive", &recursive);
	if (!code)
		code = watchers_create(r->server->watchers, r->sandbox, path,
				       recursive, id, c.err, sizeof(c.err));
	if (!code) {
		answer = json_pack("{s:s}", "watcherId", id);
		code = answer ? E2B_OK : out_of_memory(&c);
	}
	return call_close(conn, &c, code, answer);
}

enum MHD_Result e2b_fs_get_watcher_events(struct MHD_Connection *conn,
					  struct e2b_request *r)
{
	struct fs_call c;
	json_t *answer = NULL;
	enum e2b_code code = call_open(conn, r, &c, false, false);
	const char *id = code ? NULL : string_field(&c, "watcherId");

	if (!code && !id)
		code = E2B_INVALID_ARGUMENT;
	if (!code)
		code = watchers_events(r->server->watchers, r->sandbox, id,
				       &answer, c.err, sizeof(c.err));
	return call_close(conn, &c, code, answer);
}

enum MHD_Result e2b_fs_remove_watcher(struct MHD_Connection *conn,
				      struct e2b_request *r)
{
	struct fs_call c;
	enum e2b_code code = call_open(conn, r, &c, false, false);
	const char *id = code ? NULL : string_field(&c, "watcherId");

	if (!code && !id)
		code = E2B_INVALID_ARGUMENT;
	if (!code)
		code = watchers_remove(r->server->watchers, r->sandbox, id,
				       c.err, sizeof(c.err));
	return call_close(conn, &c, code, code ? NULL : json_object());
}
