// SPDX-License-Identifier: Apache-2.0
/*
 * api_exec.c - POST /sandboxes/ID/exec: a command in the sandbox, through
 * its agent's EXEC (guest/PROTOCOL.md).
 *
 * Streamed (the default), the answer is NDJSON events whose body a
 * libmicrohttpd callback produces as the agent's frames arrive: started,
 * stdout, stderr (base64), then exit or error.  Collected (stream:false),
 * the request's thread runs the command to its end and answers once, its
 * output cut at max_exec_output_bytes and taken from the daemon's memory
 * budget (a 503 once that is spent), as is its reply until it is sent.  Either
 * way the wait watches the client too: a client that goes away mid-exec has its
 * command killed at once (one that only half-closed its side still gets its
 * answer), and a guest that stays silent past the command's timeout (plus the
 * daemon's patience for a guest) ends the exec with a 504.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/daemon/api_internal.h"
#include "common/base64.h"
#include "common/clock.h"
#include "common/log.h"

#define EXEC_REQUEST_ID 1
#define KILL_REQUEST_ID 2
/* The most timeout_s can be: the agent's TIMEOUT_MS is a u32. */
#define MAX_EXEC_TIMEOUT_S (UINT32_MAX / 1000)
/* Base64's length for @n bytes, and a collected reply's other fields. */
#define BASE64_LEN(n) (((uint64_t)(n) + 2) / 3 * 4)
#define REPLY_FIELDS_BYTES 256
/* The agent's PATH, used whenever we send an environment of our own. */
#define GUEST_PATH \
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

struct exec_run {
	struct daemon *d;
	struct sandbox *sandbox;
	struct agent_conn agent;
	bool done;
	/* stream: NDJSON bytes not yet taken by libmicrohttpd */
	char *pending;
	size_t pending_len, pending_off;
	/* collected (stream:false) */
	struct http_text out, err;
	uint64_t max_output;
	bool truncated;
	uint64_t wire;	  /* whole frames read, padding included */
	bool over_budget; /* collecting more would pass the budget */
	json_t *result;	  /* the exit or error event */
	int error_status; /* the HTTP status an error event stands for */
	bool abandoned;	  /* the client went away */
};

static void exec_run_free(struct exec_run *x)
{
	sandbox_agent_close(x->d, &x->agent);
	sandbox_budget_give(x->d, x->out.cap + x->err.cap);
	if (x->sandbox)
		sandbox_put(x->d, x->sandbox);
	free(x->pending);
	free(x->out.buf);
	free(x->err.buf);
	json_decref(x->result);
	free(x);
}

/* Appends up to the output limit and the budget; what is cut is
 * remembered. */
static void collect(struct exec_run *x, struct http_text *t, const uint8_t *p,
		    size_t n)
{
	if (t->len + n > x->max_output) {
		n = t->len < x->max_output ? x->max_output - t->len : 0;
		x->truncated = true;
	}
	if (!n)
		return;
	if (t->len + n > t->cap) {
		size_t cap = t->cap ? t->cap : 65536;

		while (cap < t->len + n)
			cap *= 2;
		if (!sandbox_budget_take(x->d, cap - t->cap)) {
			x->over_budget = true;
			return;
		}
		size_t had = t->cap;
		if (!http_text_reserve(t, cap)) {
			sandbox_budget_give(x->d, cap - had);
			return;
		}
	}
	memcpy(t->buf + t->len, p, n);
	t->len += n;
}

/* Kills the command, past the client's hang-up and the exec's deadline:
 * the KILL must still reach the guest. */
static void kill_exec(struct exec_run *x)
{
	x->agent.watch.client_fd = -1;
	x->agent.watch.deadline_ns = 0;
	agent_kill(&x->agent, KILL_REQUEST_ID, EXEC_REQUEST_ID, SIGKILL);
}

/*
 * The error event ending an exec whose wait for the agent failed with
 * @ret; NULL when the client went away (x->abandoned: the command is
 * killed, nobody would read its output).
 */
static json_t *wait_failed(struct exec_run *x, int ret)
{
	char why[512];

	x->done = true;
	switch (ret) {
	case -ECONNABORTED:
		log_write(LOG_LEVEL_INFO, x->sandbox->id,
			  "client gone, killing its exec");
		x->abandoned = true;
		kill_exec(x);
		return NULL;
	case -ESHUTDOWN:
	case -EINTR:
		snprintf(why, sizeof(why), "the daemon is shutting down");
		x->error_status = 503;
		break;
	case -ETIMEDOUT:
		snprintf(why, sizeof(why),
			 "the guest went silent: the command did not end "
			 "within %u s of its timeout, or a frame stayed "
			 "unfinished that long",
			 x->d->cfg.restore_timeout_s);
		x->error_status = 504;
		kill_exec(x);
		break;
	default:
		x->error_status = 500;
		snprintf(why, sizeof(why), "the sandbox's agent went away: %s",
			 x->sandbox->vmm.pid > 0 ? strerror(-ret)
						 : "the VM was stopped");
		break;
	}
	return json_pack("{s:s,s:s}", "type", "error", "message", why);
}

/* The error event ending an exec whose guest broke the protocol (@why);
 * closing the connection then ends the command. */
static json_t *protocol_error(struct exec_run *x, const char *why)
{
	x->done = true;
	x->error_status = 500;
	return json_pack("{s:s,s:s}", "type", "error", "message", why);
}

/*
 * The end of a collected exec whose output passed its limit: nobody would
 * see more, so the command is killed and the guest no longer read (one
 * flooding forever kept a daemon thread busy forever).
 */
static json_t *output_cut(struct exec_run *x)
{
	x->done = true;
	kill_exec(x);
	return json_pack("{s:s,s:b,s:i}", "type", "exit", "timed_out", 0,
			 "signal", SIGKILL);
}

/*
 * Waits for the exec's next frame and turns it into an event: started,
 * stdout, stderr, exit or error (the last two end the exec, with x->done).
 * Returns the event, or NULL when there is none yet (a frame of another
 * request, output being collected) or the client went away.  A daemon
 * stopping or a guest silent past the command's timeout ends the exec
 * with an error event, as does collected output past the budget.
 */
static json_t *next_exec_event(struct exec_run *x, bool collecting)
{
	struct thaw_frame f;
	struct thaw_msg m;
	char why[512];
	json_t *ev = NULL;

	int ret = agent_next_frame(&x->agent, &f);
	if (ret < 0)
		return wait_failed(x, ret);
	/* The connection is this EXEC's alone (nothing is read after a
	 * KILL): a frame of another request is a guest stalling. */
	if (f.h.request_id != EXEC_REQUEST_ID) {
		snprintf(why, sizeof(why),
			 "the agent sent %s of request %u to EXEC",
			 thaw_type_name(f.h.type), f.h.request_id);
		return protocol_error(x, why);
	}
	if (thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, why,
			    sizeof(why)) < 0)
		return protocol_error(x, why);
	/* Collected, every frame counts toward the output's limit, padding
	 * and empty ones included; past it the command ends. */
	if (collecting) {
		x->wire += THAW_HEADER_SIZE + f.payload_len;
		if (x->wire > sandbox_frames_allowance(2 * x->max_output, 1))
			x->truncated = true;
		if (x->truncated)
			return output_cut(x);
	}
	const struct thaw_field *data = thaw_get(&m, THAW_T_DATA);
	switch (f.h.type) {
	case THAW_EXEC_STARTED:
		return json_pack("{s:s,s:I}", "type", "started", "pid",
				 (json_int_t)thaw_get_u32(&m, THAW_T_PID, 0));
	case THAW_STDOUT:
	case THAW_STDERR:
		if (collecting) {
			collect(x, f.h.type == THAW_STDOUT ? &x->out : &x->err,
				data->data, data->len);
			if (x->truncated)
				return output_cut(x);
			if (!x->over_budget)
				return NULL;
			x->done = true;
			x->error_status = 503;
			kill_exec(x);
			sandbox_budget_spent(x->d, why, sizeof(why));
			return json_pack("{s:s,s:s}", "type", "error",
					 "message", why);
		}
		char *b64 = base64_encode(data->data, data->len);
		ev = json_pack("{s:s,s:s}", "type",
			       f.h.type == THAW_STDOUT ? "stdout" : "stderr",
			       "data", b64 ? b64 : "");
		free(b64);
		return ev;
	case THAW_EXIT:
		x->done = true;
		ev = json_pack("{s:s,s:b}", "type", "exit", "timed_out",
			       thaw_get_u8(&m, THAW_T_TIMED_OUT, 0));
		if (thaw_has(&m, THAW_T_SIGNAL))
			json_object_set_new(ev, "signal",
					    json_integer(thaw_get_u32(
						    &m, THAW_T_SIGNAL, 0)));
		else
			json_object_set_new(ev, "exit_code",
					    json_integer(thaw_get_u32(
						    &m, THAW_T_EXIT_CODE, 0)));
		return ev;
	case THAW_ERROR:
		x->done = true;
		x->error_status = 400; /* the guest cannot start it */
		agent_error_of(&m, why, sizeof(why));
		return json_pack("{s:s,s:s}", "type", "error", "message", why);
	default:
		snprintf(why, sizeof(why), "the agent sent %s to EXEC",
			 thaw_type_name(f.h.type));
		return protocol_error(x, why);
	}
}

static ssize_t exec_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct exec_run *x = cls;

	(void)pos;
	while (x->pending_off == x->pending_len) {
		if (x->done)
			return x->abandoned ? MHD_CONTENT_READER_END_WITH_ERROR
					    : MHD_CONTENT_READER_END_OF_STREAM;
		json_t *ev = next_exec_event(x, false);
		if (!ev)
			continue;
		free(x->pending);
		x->pending = json_dumps(ev, HTTP_JSON_FLAGS);
		json_decref(ev);
		if (!x->pending)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		x->pending_len = strlen(x->pending);
		x->pending[x->pending_len++] = '\n'; /* over the NUL */
		x->pending_off = 0;
	}
	size_t n = x->pending_len - x->pending_off;
	if (n > max)
		n = max;
	memcpy(buf, x->pending + x->pending_off, n);
	x->pending_off += n;
	return (ssize_t)n;
}

static void exec_stream_free(void *cls)
{
	exec_run_free(cls);
}

/* stream:false: runs to the end here, then answers in one object. */
static enum MHD_Result exec_collected(struct MHD_Connection *conn,
				      struct request *r, struct exec_run *x)
{
	while (!x->done) {
		json_t *ev = next_exec_event(x, true);

		if (ev && x->done)
			x->result = ev;
		else
			json_decref(ev);
	}
	if (x->abandoned) {
		exec_run_free(x);
		return MHD_NO;
	}
	json_t *res = x->result;
	const char *type = json_string_value(json_object_get(res, "type"));
	if (!type || strcmp(type, "exit")) {
		const char *msg =
			json_string_value(json_object_get(res, "message"));
		enum MHD_Result ret =
			api_reply_error(conn, r, (unsigned)x->error_status,
					"exec: %s", msg ? msg : "failed");
		exec_run_free(x);
		return ret;
	}
	/* The reply is made and held from the budget too: base64 of the
	 * output, its copy in the JSON, the JSON's text. */
	uint64_t reply_budget =
		3 * (BASE64_LEN(x->out.len) + BASE64_LEN(x->err.len)) +
		REPLY_FIELDS_BYTES;
	if (!sandbox_budget_take(x->d, reply_budget)) {
		char why[256];

		exec_run_free(x);
		sandbox_budget_spent(r->d, why, sizeof(why));
		return api_reply_error(conn, r, 503, "exec: %s", why);
	}
	char *out = base64_encode(x->out.buf, x->out.len);
	char *errs = base64_encode(x->err.buf, x->err.len);
	json_t *j = json_pack("{s:s,s:s,s:O}", "stdout", out ? out : "",
			      "stderr", errs ? errs : "", "timed_out",
			      json_object_get(res, "timed_out"));
	free(out);
	free(errs);
	json_t *code = json_object_get(res, "exit_code");
	json_object_set(j, code ? "exit_code" : "signal",
			code ? code : json_object_get(res, "signal"));
	if (x->truncated)
		json_object_set_new(j, "truncated", json_true());
	exec_run_free(x);
	return api_reply_json_held(conn, r, 200, j, reply_budget);
}

enum MHD_Result api_exec(struct MHD_Connection *conn, struct request *r,
			 struct daemon *d)
{
	struct agent_exec_request req = { 0 };
	char **argv = NULL, **env = NULL;
	void *stdin_data = NULL;
	bool stream = true;
	char err[1024];
	int status = 0;
	enum MHD_Result ret;

	struct sandbox *c = sandbox_get(d, r->id);
	if (!c)
		return api_no_sandbox(conn, r);
	json_t *body = api_body_object(r, err, sizeof(err));
	if (!body)
		status = 400;
	else
		status =
			args_parse_exec(body, sandbox_env(c), &req, &argv, &env,
					&stdin_data, &stream, err, sizeof(err));
	struct exec_run *x = status ? NULL : calloc(1, sizeof(*x));
	if (!status && !x) {
		snprintf(err, sizeof(err), "out of memory");
		status = 500;
	}
	if (x) {
		*x = (struct exec_run){ .d = d,
					.sandbox = c,
					.agent = { .fd = -1 },
					.max_output =
						d->cfg.max_exec_output_bytes };
		c = NULL; /* x holds it now */
		/* Past timeout_s the guest still has to kill and report. */
		uint64_t deadline_ns =
			req.timeout_ms
				? monotonic_ns() + req.timeout_ms * NS_PER_MS +
					  sandbox_guest_patience_ns(d)
				: 0;
		status = pool_error_status(sandbox_agent_open(
			x->sandbox, &x->agent, http_client_fd(conn), err,
			sizeof(err)));
		if (!status) {
			http_paced(conn, d->cfg.idle_timeout_s, deadline_ns);
			x->agent.watch.deadline_ns = deadline_ns;
			int sent = agent_exec(&x->agent, EXEC_REQUEST_ID, &req);

			if (sent < 0) {
				snprintf(
					err, sizeof(err), "exec: %s",
					sent == -E2BIG
						? "the request does not fit in one agent frame (1 MiB): send large stdin as a file"
						: strerror(-sent));
				status = sent == -E2BIG ? 413 : 500;
			}
		}
	}
	json_decref(body);
	env_free(argv);
	env_free(env);
	free(stdin_data);
	if (c)
		sandbox_put(d, c);
	if (status) {
		if (x)
			exec_run_free(x);
		return api_reply_error(conn, r, status, "%s", err);
	}
	if (!stream)
		return exec_collected(conn, r, x);
	struct MHD_Response *resp = MHD_create_response_from_callback(
		MHD_SIZE_UNKNOWN, 64 * 1024, exec_stream_read, x,
		exec_stream_free);
	if (!resp) {
		exec_run_free(x);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"application/x-ndjson");
	ret = api_reply(conn, r, 200, resp);
	return ret;
}
