// SPDX-License-Identifier: Apache-2.0
/*
 * process.c - envd's process.Process service over Connect (JSON codec),
 * on the processes of processes.c.
 *
 *	Start		server stream: StartRequest {process: {cmd, args,
 *			envs, cwd}, tag, stdin, pty} -> {event: start {pid}},
 *			{event: data {stdout|stderr}}..., {event: end
 *			{exitCode, exited, status}}, keepalives between
 *	Connect		server stream: the same from now on, of a running
 *			process chosen by pid or tag, its start event first
 *	List		{processes: [{config, pid, tag}]}, the running ones
 *	SendSignal	SIGKILL or SIGTERM to the process's group
 *	SendInput, CloseStdin, StreamInput, Update: see their handlers
 *
 * A command becomes the agent's EXEC: argv is cmd and args, the
 * environment thaw's exec gives (PATH, the sandbox's envVars) with the
 * request's envs over it, built by args_parse_exec() as for thaw's own
 * POST /sandboxes/ID/exec, so both APIs run a command alike.  It runs as
 * the request's user (E2B's default, "user", unless the SDK's `user`
 * option names another), whose HOME, USER and LOGNAME the agent sets,
 * in cwd or else that user's home, as envd does.  With stdin: true its
 * stdin stays open for SendInput and CloseStdin.  A guest without bash
 * runs the SDK's `/bin/bash -l -c CMD` with /bin/sh (processes.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "pool/e2b/processes.h"

/* thaw's exec environment's HOME (args_parse_exec), root's. */
/* Arguments of one command at most (the agent's frame bounds their text). */
#define MAX_ARGS 4096
#define ROOT_HOME "HOME=/root"

/* Connect's JSON for protobuf messages: a field may be absent or null. */
static json_t *field(json_t *obj, const char *name)
{
	json_t *v = json_object_get(obj, name);

	return json_is_null(v) ? NULL : v;
}

/*
 * What List shows of a running process: its ProcessConfig's own fields,
 * not the whole request object, which lives as long as the process does
 * and may carry any amount of what envd does not know.
 */
static json_t *kept_config(json_t *process)
{
	static const char *const fields[] = { "cmd", "args", "envs", "cwd" };
	json_t *kept = json_object();

	for (size_t i = 0; kept && i < sizeof(fields) / sizeof(*fields); i++)
		if (field(process, fields[i]))
			json_object_set(kept, fields[i],
					field(process, fields[i]));
	return kept;
}

/*
 * thaw's exec body for StartRequest.process @process (checked here, with
 * E2B's names in the messages): {"argv": [cmd, args...], "env": envs,
 * "cwd": cwd}.  NULL with a message in @err.
 */
static json_t *exec_body(json_t *process, char *err, size_t errlen)
{
	json_t *cmd = field(process, "cmd"), *args = field(process, "args");
	json_t *envs = field(process, "envs"), *cwd = field(process, "cwd");
	size_t i;
	json_t *a;

	if (!json_is_object(process) || !json_is_string(cmd) ||
	    !json_string_length(cmd)) {
		snprintf(err, errlen,
			 "\"process\" must be a ProcessConfig with a \"cmd\"");
		return NULL;
	}
	if ((args && !json_is_array(args)) || (envs && !json_is_object(envs)) ||
	    (cwd && !json_is_string(cwd))) {
		snprintf(err, errlen,
			 "\"process\": \"args\" must be an array of strings, "
			 "\"envs\" an object of strings, \"cwd\" a string");
		return NULL;
	}
	if (json_array_size(args) > MAX_ARGS) {
		snprintf(err, errlen, "\"process\": %zu \"args\", more than %d",
			 json_array_size(args), MAX_ARGS);
		return NULL;
	}
	json_t *argv = json_pack("[s]", json_string_value(cmd));
	json_array_foreach(args, i, a) json_array_append(argv, a);
	json_t *body = json_pack("{s:o}", "argv", argv);
	if (body && envs)
		json_object_set(body, "env", envs);
	if (body && cwd)
		json_object_set(body, "cwd", cwd);
	return body;
}

/*
 * Runs @req as @user: the agent sets the user's HOME unless the
 * environment has one, so args_parse_exec()'s root HOME goes (the request's
 * own stays), and the command starts in the user's home unless it says.
 * @home has room for the cwd.
 */
static void as_user(struct agent_exec_request *req, char **env,
		    const char *user, char *home, size_t len)
{
	req->user = user;
	if (!strcmp(user, "root"))
		snprintf(home, len, "/root");
	else if (strspn(user, "0123456789") == strlen(user))
		snprintf(home, len, "/"); /* a bare uid: no name, no home */
	else
		snprintf(home, len, "/home/%s", user);
	if (!req->cwd)
		req->cwd = home;
	size_t homes = 0, n = 0;
	for (; env && env[n]; n++)
		homes += !strncmp(env[n], "HOME=", 5);
	/* The base's is the first; one the request gave follows it. */
	for (size_t i = 0; homes == 1 && strcmp(user, "root") && i < n; i++)
		if (!strcmp(env[i], ROOT_HOME)) {
			free(env[i]);
			memmove(&env[i], &env[i + 1], (n - i) * sizeof(*env));
			break;
		}
}

enum MHD_Result e2b_process_start(struct MHD_Connection *conn,
				  struct e2b_request *r)
{
	char home[128];
	struct agent_exec_request req = { 0 };
	char **argv = NULL, **env = NULL;
	void *stdin_data = NULL, *events = NULL;
	char err[1024], user[64];
	bool stream;
	enum e2b_code code = E2B_INVALID_ARGUMENT;

	json_t *body = e2b_connect_request(r, true, err, sizeof(err));
	json_t *process = body ? json_object_get(body, "process") : NULL;
	json_t *tag = body ? field(body, "tag") : NULL;
	json_t *keep_stdin = body ? field(body, "stdin") : NULL;
	json_t *exec = NULL;

	if (!body)
		goto out;
	if (field(body, "pty")) {
		code = E2B_UNIMPLEMENTED;
		snprintf(err, sizeof(err),
			 "thaw's sandboxes have no pseudo-terminals: run the "
			 "command without pty");
		goto out;
	}
	if ((tag && !json_is_string(tag)) ||
	    (keep_stdin && !json_is_boolean(keep_stdin))) {
		snprintf(err, sizeof(err),
			 "\"tag\" must be a string, \"stdin\" a boolean");
		goto out;
	}
	if (!e2b_request_user(conn, user, sizeof(user), err, sizeof(err)))
		goto out;
	exec = exec_body(process, err, sizeof(err));
	if (!exec)
		goto out;
	int status =
		args_parse_exec(exec, sandbox_env(r->sandbox), &req, &argv,
				&env, &stdin_data, &stream, err, sizeof(err));
	if (status) {
		code = e2b_code_of_status((unsigned)status);
		goto out;
	}
	as_user(&req, env, user, home, sizeof(home));
	req.keep_stdin = json_is_true(keep_stdin);
	json_t *kept = kept_config(process);
	code = kept ? processes_start(r->server->processes, r->sandbox, &req,
				      kept, tag ? json_string_value(tag) : NULL,
				      http_client_fd(conn), &events, err,
				      sizeof(err))
		    : E2B_RESOURCE_EXHAUSTED;
	if (!kept)
		snprintf(err, sizeof(err), "out of memory");
	json_decref(kept);
out:
	json_decref(exec);
	json_decref(body);
	env_free(argv);
	env_free(env);
	free(stdin_data);
	if (code != E2B_OK)
		return e2b_reply_stream_error(conn, r, code, "%s", err);
	return e2b_reply_stream(conn, r, &process_stream_ops, events);
}

/*
 * The running process @body's "process" selector names ({"pid": N} or
 * {"tag": "..."}), held; NULL with a code and message for the answer.
 */
static struct e2b_process *selected(struct e2b_request *r, json_t *body,
				    enum e2b_code *code, char *err,
				    size_t errlen)
{
	json_t *sel = body ? field(body, "process") : NULL;
	json_t *pid = field(sel, "pid"), *tag = field(sel, "tag");

	*code = E2B_INVALID_ARGUMENT;
	if (!body)
		return NULL;
	if (!json_is_object(sel) || !pid == !tag ||
	    (pid && (!json_is_integer(pid) || json_integer_value(pid) < 1 ||
		     json_integer_value(pid) > UINT32_MAX)) ||
	    (tag && !json_is_string(tag))) {
		snprintf(err, errlen,
			 "\"process\" must select a process by \"pid\" (a "
			 "positive integer) or by \"tag\" (a string)");
		return NULL;
	}
	struct e2b_process *p =
		processes_find(r->server->processes, r->sandbox,
			       pid ? (uint32_t)json_integer_value(pid) : 0,
			       tag ? json_string_value(tag) : NULL);
	if (!p) {
		*code = E2B_NOT_FOUND;
		if (pid)
			snprintf(err, errlen, "process with pid %lld not found",
				 (long long)json_integer_value(pid));
		else
			snprintf(err, errlen,
				 "process with tag %.200s not found",
				 json_string_value(tag));
	}
	return p;
}

enum MHD_Result e2b_process_connect(struct MHD_Connection *conn,
				    struct e2b_request *r)
{
	enum e2b_code code;
	char err[512];
	json_t *body = e2b_connect_request(r, true, err, sizeof(err));
	struct e2b_process *p = selected(r, body, &code, err, sizeof(err));

	json_decref(body);
	if (!p)
		return e2b_reply_stream_error(conn, r, code, "%s", err);
	void *events = processes_attach(r->server->processes, p);
	processes_put(r->server->processes, p);
	if (!events)
		return e2b_reply_stream_error(conn, r, E2B_RESOURCE_EXHAUSTED,
					      "out of memory");
	return e2b_reply_stream(conn, r, &process_stream_ops, events);
}

enum MHD_Result e2b_process_list(struct MHD_Connection *conn,
				 struct e2b_request *r)
{
	char err[512];
	json_t *body = e2b_connect_request(r, false, err, sizeof(err));

	if (!body)
		return e2b_reply_connect_error(conn, r, E2B_INVALID_ARGUMENT,
					       "%s", err);
	json_decref(body);
	return e2b_reply_connect(
		conn, r, processes_list(r->server->processes, r->sandbox));
}

/* SendSignalRequest.signal: the enum's name or number; 0 when neither
 * SIGKILL nor SIGTERM, the two envd's Signal has. */
static uint32_t parse_signal(json_t *v)
{
	static const struct {
		const char *name;
		uint32_t number;
	} signals[] = { { "SIGNAL_SIGKILL", SIGKILL },
			{ "SIGNAL_SIGTERM", SIGTERM } };

	for (size_t i = 0; i < sizeof(signals) / sizeof(signals[0]); i++)
		if ((json_is_string(v) &&
		     !strcmp(json_string_value(v), signals[i].name)) ||
		    (json_is_integer(v) &&
		     json_integer_value(v) == signals[i].number))
			return signals[i].number;
	return 0;
}

enum MHD_Result e2b_process_send_signal(struct MHD_Connection *conn,
					struct e2b_request *r)
{
	enum e2b_code code;
	char err[512];
	json_t *body = e2b_connect_request(r, false, err, sizeof(err));
	uint32_t signal = body ? parse_signal(field(body, "signal")) : 0;
	struct e2b_process *p = NULL;

	if (body && !signal)
		snprintf(err, sizeof(err),
			 "\"signal\" must be SIGNAL_SIGKILL or "
			 "SIGNAL_SIGTERM");
	else
		p = selected(r, body, &code, err, sizeof(err));
	json_decref(body);
	if (!p)
		return e2b_reply_connect_error(
			conn, r, signal ? code : E2B_INVALID_ARGUMENT, "%s",
			err);
	code = processes_signal(p, signal, err, sizeof(err));
	processes_put(r->server->processes, p);
	if (code != E2B_OK)
		return e2b_reply_connect_error(conn, r, code, "%s", err);
	return e2b_reply_connect(conn, r, json_object());
}

/*
 * SendInput {process, input: {stdin: base64}} and CloseStdin {process}:
 * the bytes reach the command's stdin pipe before the answer (processes.c
 * waits for the agent's OK), so an input sent after another arrives
 * after it.
 */
static enum MHD_Result stdin_route(struct MHD_Connection *conn,
				   struct e2b_request *r, bool close)
{
	enum e2b_code code;
	char err[512];
	json_t *body = e2b_connect_request(r, false, err, sizeof(err));
	json_t *input = body ? field(body, "input") : NULL;
	json_t *data = field(input, "stdin");
	uint8_t *bytes = NULL;
	size_t len = 0;

	if (body && !close && field(input, "pty")) {
		json_decref(body);
		return e2b_reply_connect_error(
			conn, r, E2B_UNIMPLEMENTED,
			"thaw's sandboxes have no pseudo-terminals");
	}
	if (body && !close &&
	    (!json_is_string(data) ||
	     !(bytes = base64_decode(json_string_value(data),
				     json_string_length(data), &len)))) {
		json_decref(body);
		return e2b_reply_connect_error(
			conn, r, E2B_INVALID_ARGUMENT,
			"\"input\" must hold \"stdin\": bytes in base64");
	}
	struct e2b_process *p = selected(r, body, &code, err, sizeof(err));
	json_decref(body);
	if (p) {
		code = processes_stdin(p, bytes, len, close, err, sizeof(err));
		processes_put(r->server->processes, p);
	}
	free(bytes);
	if (code != E2B_OK)
		return e2b_reply_connect_error(conn, r, code, "%s", err);
	return e2b_reply_connect(conn, r, json_object());
}

enum MHD_Result e2b_process_send_input(struct MHD_Connection *conn,
				       struct e2b_request *r)
{
	return stdin_route(conn, r, false);
}

enum MHD_Result e2b_process_close_stdin(struct MHD_Connection *conn,
					struct e2b_request *r)
{
	return stdin_route(conn, r, true);
}

/* A client stream, which connect-web cannot send over HTTP/1.1: the SDK
 * never calls it (SendInput is its way). */
enum MHD_Result e2b_process_stream_input(struct MHD_Connection *conn,
					 struct e2b_request *r)
{
	return e2b_reply_connect_error(
		conn, r, E2B_UNIMPLEMENTED,
		"StreamInput is a client stream, not served over HTTP/1.1: "
		"use SendInput");
}

/* Update resizes a process's pseudo-terminal, which thaw has none of. */
enum MHD_Result e2b_process_update(struct MHD_Connection *conn,
				   struct e2b_request *r)
{
	return e2b_reply_connect_error(
		conn, r, E2B_UNIMPLEMENTED,
		"thaw's sandboxes have no pseudo-terminals to resize");
}
