// SPDX-License-Identifier: Apache-2.0
/*
 * typed_calls.c - the typed calls of thaw_client.h, each one request through
 * thaw_client_call(): its JSON body built with jansson, its answer taken
 * apart into the structs the header declares.
 *
 * An exec's answer is NDJSON when streamed: it is cut into lines as it
 * arrives, whatever the reads' boundaries, and each line becomes one event
 * for the caller.  A buffered exec's single object becomes the same events,
 * so callers handle one shape.  Output arrives as base64 (API.md) and
 * leaves decoded.
 */
#include "pool/client/client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/printable.h"

/* One exec event: a chunk of output as base64, far below this. */
#define EVENT_MAX (16 << 20)
/* Sandboxes or templates in a list answer: a daemon's limits are far
 * below (pool/API.md). */
#define LIST_MAX 65536

static int oom(char *err, size_t errlen)
{
	return client_fail(THAW_CLIENT_LOCAL, err, errlen, "out of memory");
}

/* "/sandboxes/<id><tail>", malloc'd; NULL when out of memory. */
static char *sandbox_path(struct thaw_client *c, const char *id,
			  const char *tail)
{
	char *escaped = client_escape(c, id, 0), *path = NULL;

	if (escaped && asprintf(&path, "/sandboxes/%s%s", escaped, tail) < 0)
		path = NULL;
	free(escaped);
	return path;
}

/*
 * @method @path with @body (or none: a POST then says Content-Length: 0)
 * and, when @answer is not NULL, the answer's JSON into it.  @body is the
 * caller's still.
 */
static int json_call(struct thaw_client *c, const char *method,
		     const char *path, const json_t *body, json_t **answer,
		     char *err, size_t errlen)
{
	struct thaw_call q = { .method = method, .path = path };
	struct thaw_reply r;
	char *text = NULL;
	int ret;

	if (!path || (body && !(text = json_dumps(body, JSON_COMPACT))))
		return oom(err, errlen);
	q.body = text ? text : strcmp(method, "POST") ? NULL : "";
	q.len = text ? strlen(text) : 0;
	ret = thaw_client_call(c, &q, &r, err, errlen);
	if (ret == 0 && answer) {
		json_error_t e;

		*answer = json_loadb(r.body ? r.body : "", r.len, 0, &e);
		if (!*answer)
			ret = client_fail(THAW_CLIENT_ANSWER, err, errlen,
					  "the daemon's answer is not JSON: %s",
					  e.text);
	}
	thaw_reply_free(&r);
	free(text);
	return ret;
}

/*
 * A string member into @out ("" when absent), printable; false when it
 * will not fit.
 */
static bool take_string(char *out, size_t len, const json_t *obj,
			const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));
	bool fits = (size_t)snprintf(out, len, "%s", s ? s : "") < len;

	printable(out);
	return fits;
}

static double number(const json_t *obj, const char *key)
{
	return json_number_value(json_object_get(obj, key));
}

static int too_long(const char *key, char *err, size_t errlen)
{
	return client_fail(THAW_CLIENT_ANSWER, err, errlen,
			   "the daemon's answer has a %s too long", key);
}

/* A sandbox's "restore" object; all zero when it has none. */
static void take_restore_phases(struct thaw_restore_phases *p, const json_t *o)
{
	*p = (struct thaw_restore_phases){
		.host_ms = number(o, "host_ms"),
		.vmm_start_ms = number(o, "vmm_start_ms"),
		.page_in_ms = number(o, "page_in_ms"),
		.state_restore_ms = number(o, "state_restore_ms"),
		.guest_ms = number(o, "guest_ms"),
		.agent_ms = number(o, "agent_ms"),
		.identity_ms = number(o, "identity_ms"),
		.prefetched_pages = number(o, "prefetched_pages"),
		.network_ms = number(o, "network_ms"),
	};
}

/* A list answer's element into @item; 0, or a code after @err. */
typedef int (*take_fn)(void *item, const json_t *o, char *err, size_t errlen);

static int take_sandbox(void *item, const json_t *o, char *err, size_t errlen)
{
	struct thaw_sandbox *s = item;

	memset(s, 0, sizeof(*s));
	if (!take_string(s->id, sizeof(s->id), o, "id"))
		return too_long("sandbox id", err, errlen);
	if (!take_string(s->template, sizeof(s->template), o, "template") ||
	    !take_string(s->created, sizeof(s->created), o, "created") ||
	    !take_string(s->expires, sizeof(s->expires), o, "expires") ||
	    !take_string(s->state, sizeof(s->state), o, "state") ||
	    !take_string(s->snapshot, sizeof(s->snapshot), o, "snapshot") ||
	    !take_string(s->stop_reason, sizeof(s->stop_reason), o,
			 "stop_reason") ||
	    !take_string(s->host_address, sizeof(s->host_address),
			 json_object_get(o, "network"), "host_address"))
		return too_long("sandbox field", err, errlen);
	s->restore_ms = number(o, "restore_ms");
	take_restore_phases(&s->restore, json_object_get(o, "restore"));
	s->handout_ms = number(o, "handout_ms");
	s->pid = (long)number(o, "pid");
	return 0;
}

/* A sandbox answered on its own, which must name it. */
static int take_one_sandbox(struct thaw_sandbox *s, const json_t *o, char *err,
			    size_t errlen)
{
	int ret = json_is_object(o)
			  ? take_sandbox(s, o, err, errlen)
			  : client_fail(THAW_CLIENT_ANSWER, err, errlen,
					"the daemon's answer is not "
					"an object");

	if (ret == 0 && !s->id[0])
		ret = client_fail(THAW_CLIENT_ANSWER, err, errlen,
				  "the daemon's answer has no id");
	return ret;
}

/*
 * GET @path's array @key (of @what), each element through @take into a
 * malloc'd array of *@n @size-byte items, its address stored at @list (a
 * pointer to the caller's typed pointer).
 */
static int get_list(struct thaw_client *c, const char *path, const char *key,
		    const char *what, size_t size, take_fn take, void *list,
		    size_t *n, char *err, size_t errlen)
{
	json_t *answer = NULL, *items, *o;
	int ret = json_call(c, "GET", path, NULL, &answer, err, errlen);
	char *out = NULL;
	size_t i;

	*n = 0;
	items = json_object_get(answer, key);
	if (ret == 0 && !json_is_array(items))
		ret = client_fail(THAW_CLIENT_ANSWER, err, errlen,
				  "the daemon's answer has no %s list", what);
	/* Checked before the array is sized by the answer: a few bytes per
	 * element ("0,") must not cost a struct each. */
	if (ret == 0 && json_array_size(items) > LIST_MAX)
		ret = client_fail(THAW_CLIENT_ANSWER, err, errlen,
				  "the daemon's %s list has over %d elements",
				  what, LIST_MAX);
	json_array_foreach(items, i, o)
	{
		if (ret)
			break;
		if (!json_is_object(o))
			ret = client_fail(THAW_CLIENT_ANSWER, err, errlen,
					  "the daemon's %s list holds a "
					  "non-object",
					  what);
	}
	if (ret == 0 && json_array_size(items) &&
	    !(out = calloc(json_array_size(items), size)))
		ret = oom(err, errlen);
	json_array_foreach(items, i, o)
	{
		if (ret)
			break;
		ret = take(out + i * size, o, err, errlen);
	}
	if (ret) {
		free(out);
		out = NULL;
	} else {
		*n = json_array_size(items);
	}
	memcpy(list, &out, sizeof(out));
	json_decref(answer);
	return ret;
}

/* "KEY=VALUE"s as the API's env object; NULL when one is not text. */
static json_t *env_object(const char *const *env)
{
	json_t *o = json_object();

	for (; o && *env; env++) {
		const char *eq = strchr(*env, '=');

		if (!eq || json_object_setn_new(o, *env, eq - *env,
						json_string(eq + 1)) < 0) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

/* Sets @key to @value (consumed); false when @value is NULL. */
static bool set(json_t *obj, const char *key, json_t *value)
{
	return value && json_object_set_new(obj, key, value) == 0;
}

static int not_text(const char *what, char *err, size_t errlen)
{
	return client_fail(THAW_CLIENT_LOCAL, err, errlen,
			   "the %s is not UTF-8 text", what);
}

static int bad_env(char *err, size_t errlen)
{
	return client_fail(THAW_CLIENT_LOCAL, err, errlen,
			   "an env entry is not KEY=VALUE in UTF-8");
}

/* Strings, NULL-terminated, as a JSON array; NULL when one is not text. */
static json_t *string_array(const char *const *v)
{
	json_t *a = json_array();

	for (; a && *v; v++) {
		if (json_array_append_new(a, json_string(*v)) < 0) {
			json_decref(a);
			return NULL;
		}
	}
	return a;
}

/* @n as API.md's "network" object; NULL when a CIDR is not text. */
static json_t *network_object(const struct thaw_network *n)
{
	json_t *o = json_object();

	if (o && n->allow_internet >= 0 &&
	    !set(o, "allow_internet", json_boolean(n->allow_internet)))
		goto fail;
	if (o && n->allow_out &&
	    !set(o, "allow_out", string_array(n->allow_out)))
		goto fail;
	if (o && n->deny_out && !set(o, "deny_out", string_array(n->deny_out)))
		goto fail;
	return o;
fail:
	json_decref(o);
	return NULL;
}

/* POST /sandboxes with @spec's body (and "count": @count unless 0) into
 * *@answer (the caller's to release). */
static int create_call(struct thaw_client *c, const struct thaw_create *spec,
		       unsigned count, json_t **answer, char *err,
		       size_t errlen)
{
	json_t *body = json_object();
	int ret;

	if (!body)
		return oom(err, errlen);
	if (spec->template &&
	    !set(body, "template", json_string(spec->template)))
		ret = not_text("template", err, errlen);
	else if (spec->snapshot &&
		 !set(body, "snapshot", json_string(spec->snapshot)))
		ret = not_text("snapshot id", err, errlen);
	else if (spec->timeout_s &&
		 !set(body, "timeout_s", json_integer(spec->timeout_s)))
		ret = oom(err, errlen);
	else if (spec->env && !set(body, "env", env_object(spec->env)))
		ret = bad_env(err, errlen);
	else if (spec->network &&
		 !set(body, "network", network_object(spec->network)))
		ret = not_text("network policy", err, errlen);
	else if (count && !set(body, "count", json_integer(count)))
		ret = oom(err, errlen);
	else
		ret = json_call(c, "POST", "/sandboxes", body, answer, err,
				errlen);
	json_decref(body);
	return ret;
}

int thaw_client_create(struct thaw_client *c, const struct thaw_create *spec,
		       struct thaw_sandbox *s, char *err, size_t errlen)
{
	json_t *answer = NULL;
	int ret = create_call(c, spec, 0, &answer, err, errlen);

	if (ret == 0)
		ret = take_one_sandbox(s, answer, err, errlen);
	json_decref(answer);
	return ret;
}

/* GET /sandboxes/@id's answer into *@answer (the caller's to release). */
static int get_sandbox(struct thaw_client *c, const char *id, json_t **answer,
		       char *err, size_t errlen)
{
	char *path = sandbox_path(c, id, "");
	int ret = json_call(c, "GET", path, NULL, answer, err, errlen);

	free(path);
	return ret;
}

int thaw_client_get(struct thaw_client *c, const char *id,
		    struct thaw_sandbox *s, char *err, size_t errlen)
{
	json_t *answer = NULL;
	int ret = get_sandbox(c, id, &answer, err, errlen);

	if (ret == 0)
		ret = take_one_sandbox(s, answer, err, errlen);
	json_decref(answer);
	return ret;
}

/* A list of CIDR strings as "A.B.C.D/N ..."; false when it is no such
 * list or will not fit. */
static bool take_cidrs(char *out, size_t len, const json_t *list)
{
	const json_t *v;
	size_t i, n = 0;

	out[0] = '\0';
	if (!json_is_array(list))
		return false;
	json_array_foreach(list, i, v)
	{
		const char *s = json_string_value(v);
		int w = snprintf(out + n, len - n, "%s%s", n ? " " : "",
				 s ? s : "");

		if (!s || w < 0 || (size_t)w >= len - n)
			return false;
		n += w;
	}
	printable(out);
	return true;
}

/* A sandbox answer's "network" into @n. */
static int take_network(struct thaw_sandbox_network *n, const json_t *answer,
			char *err, size_t errlen)
{
	const json_t *o = json_object_get(answer, "network");

	memset(n, 0, sizeof(*n));
	if (!json_is_object(answer) ||
	    (o && !json_is_null(o) && !json_is_object(o)))
		return client_fail(THAW_CLIENT_ANSWER, err, errlen,
				   "the daemon's answer has no network object");
	if (!json_is_object(o))
		return 0;
	n->present = true;
	n->allow_internet = json_is_true(json_object_get(o, "allow_internet"));
	if (!take_string(n->host_address, sizeof(n->host_address), o,
			 "host_address") ||
	    !take_cidrs(n->allow_out, sizeof(n->allow_out),
			json_object_get(o, "allow_out")) ||
	    !take_cidrs(n->deny_out, sizeof(n->deny_out),
			json_object_get(o, "deny_out")))
		return client_fail(THAW_CLIENT_ANSWER, err, errlen,
				   "the daemon's network object is malformed");
	return 0;
}

int thaw_client_get_network(struct thaw_client *c, const char *id,
			    struct thaw_sandbox_network *n, char *err,
			    size_t errlen)
{
	json_t *answer = NULL;
	int ret = get_sandbox(c, id, &answer, err, errlen);

	if (ret == 0)
		ret = take_network(n, answer, err, errlen);
	json_decref(answer);
	return ret;
}

int thaw_client_set_network(struct thaw_client *c, const char *id,
			    const struct thaw_network *policy,
			    struct thaw_sandbox_network *n, char *err,
			    size_t errlen)
{
	char *path = sandbox_path(c, id, "/network");
	json_t *body = network_object(policy), *answer = NULL;
	int ret;

	if (!body)
		ret = not_text("network policy", err, errlen);
	else
		ret = json_call(c, "POST", path, body, &answer, err, errlen);
	if (ret == 0 && n)
		ret = take_network(n, answer, err, errlen);
	json_decref(answer);
	json_decref(body);
	free(path);
	return ret;
}

int thaw_client_list(struct thaw_client *c, struct thaw_sandbox **list,
		     size_t *n, char *err, size_t errlen)
{
	return get_list(c, "/sandboxes", "sandboxes", "sandbox", sizeof(**list),
			take_sandbox, list, n, err, errlen);
}

int thaw_client_delete(struct thaw_client *c, const char *id, char *err,
		       size_t errlen)
{
	char *path = sandbox_path(c, id, "");
	int ret = json_call(c, "DELETE", path, NULL, NULL, err, errlen);

	free(path);
	return ret;
}

int thaw_client_health(struct thaw_client *c, struct thaw_health *h, char *err,
		       size_t errlen)
{
	json_t *answer = NULL;
	int ret = json_call(c, "GET", "/health", NULL, &answer, err, errlen);

	if (ret == 0) {
		/* A daemon from before admission has no field: it admits. */
		const json_t *admitting = json_object_get(answer, "admitting");

		h->admitting = !json_is_false(admitting);
		take_string(h->overload, sizeof(h->overload), answer,
			    "overload");
	}
	json_decref(answer);
	return ret;
}

int thaw_client_ping(struct thaw_client *c, const char *id, double *agent_ms,
		     char *err, size_t errlen)
{
	char *path = sandbox_path(c, id, "/ping");
	json_t *answer = NULL;
	int ret = json_call(c, "POST", path, NULL, &answer, err, errlen);

	if (ret == 0 && agent_ms)
		*agent_ms = number(answer, "agent_ms");
	json_decref(answer);
	free(path);
	return ret;
}

/* ---- exec ---- */

/* An exec's answer being taken apart; see thaw_client_exec(). */
struct exec_stream {
	thaw_exec_fn fn;
	void *arg;
	char *line; /* the part of a line received so far */
	size_t len;
	bool ended; /* an exit or error event came */
};

/* The exec body of API.md; NULL with @err when @spec cannot be sent. */
static json_t *exec_body(const struct thaw_exec *spec, char *err, size_t errlen)
{
	json_t *body = json_object(), *args = json_array();
	char *input = NULL;

	if (!set(body, "argv", args) ||
	    !set(body, "stream", json_boolean(!spec->buffered))) {
		oom(err, errlen);
		goto fail;
	}
	for (const char *const *a = spec->argv; *a; a++)
		if (json_array_append_new(args, json_string(*a)) < 0) {
			not_text("command", err, errlen);
			goto fail;
		}
	if (spec->cwd && !set(body, "cwd", json_string(spec->cwd))) {
		not_text("cwd", err, errlen);
		goto fail;
	}
	if (spec->env && !set(body, "env", env_object(spec->env))) {
		bad_env(err, errlen);
		goto fail;
	}
	if ((spec->timeout_s &&
	     !set(body, "timeout_s", json_integer(spec->timeout_s))) ||
	    (spec->input &&
	     (!(input = base64_encode(spec->input, spec->input_len)) ||
	      !set(body, "stdin", json_string_nocheck(input))))) {
		oom(err, errlen);
		goto fail;
	}
	free(input);
	return body;
fail:
	free(input);
	json_decref(body);
	return NULL;
}

/* @key's base64 as an output event of @type, to the caller. */
static int output_event(struct exec_stream *s, enum thaw_exec_event_type type,
			const json_t *o, const char *key, char *err,
			size_t errlen)
{
	const json_t *data = json_object_get(o, key);
	struct thaw_exec_event e = { .type = type };
	void *bytes = json_is_string(data)
			      ? base64_decode(json_string_value(data),
					      json_string_length(data), &e.len)
			      : NULL;
	int ret;

	if (!bytes)
		return client_fail(
			THAW_CLIENT_ANSWER, err, errlen,
			"bad output event from the daemon: no base64 data");
	e.data = bytes;
	ret = s->fn(&e, s->arg, err, errlen);
	free(bytes);
	return ret;
}

/* The end of the command: an exit event, or the buffered answer's. */
static int exit_event(struct exec_stream *s, const json_t *o, char *err,
		      size_t errlen)
{
	struct thaw_exec_event e = {
		.type = THAW_EXEC_EXIT,
		.exit_code = (int)json_integer_value(
			json_object_get(o, "exit_code")),
		.signal = (int)json_integer_value(json_object_get(o, "signal")),
		.timed_out = json_is_true(json_object_get(o, "timed_out")),
		.truncated = json_is_true(json_object_get(o, "truncated")),
	};

	s->ended = true;
	return s->fn(&e, s->arg, err, errlen);
}

/* One NDJSON line (API.md) to the caller. */
static int stream_event(struct exec_stream *s, const char *line, size_t len,
			char *err, size_t errlen)
{
	json_error_t jerr;
	json_t *o = json_loadb(line, len, 0, &jerr);
	const char *type = json_string_value(json_object_get(o, "type"));
	struct thaw_exec_event e = { .type = THAW_EXEC_STARTED };
	int ret = 0;

	if (!type)
		ret = client_fail(THAW_CLIENT_ANSWER, err, errlen,
				  "bad event from the daemon: %s",
				  o ? "no type" : jerr.text);
	else if (!strcmp(type, "stdout"))
		ret = output_event(s, THAW_EXEC_STDOUT, o, "data", err, errlen);
	else if (!strcmp(type, "stderr"))
		ret = output_event(s, THAW_EXEC_STDERR, o, "data", err, errlen);
	else if (!strcmp(type, "exit"))
		ret = exit_event(s, o, err, errlen);
	else if (!strcmp(type, "started") || !strcmp(type, "error")) {
		const char *m =
			json_string_value(json_object_get(o, "message"));
		char *message = NULL;

		if (!strcmp(type, "error")) {
			e.type = THAW_EXEC_ERROR;
			message = strdup(m ? m : "");
			if (message)
				printable(message);
			e.message = message;
			s->ended = true;
		}
		e.pid = (long)json_integer_value(json_object_get(o, "pid"));
		ret = e.type == THAW_EXEC_ERROR && !message
			      ? oom(err, errlen)
			      : s->fn(&e, s->arg, err, errlen);
		free(message);
	}
	/* What a newer daemon may add needs nothing. */
	json_decref(o);
	return ret;
}

static int stream_data(const void *data, size_t len, void *arg, char *err,
		       size_t errlen)
{
	struct exec_stream *s = arg;
	char *grown, *start, *nl;
	int ret;

	if (s->len + len > EVENT_MAX)
		return client_fail(THAW_CLIENT_ANSWER, err, errlen,
				   "an event from the daemon is over %d MiB",
				   EVENT_MAX >> 20);
	if (!(grown = realloc(s->line, s->len + len)))
		return client_fail(THAW_CLIENT_LOCAL, err, errlen,
				   "out of memory for the command's output");
	s->line = grown;
	memcpy(s->line + s->len, data, len);
	s->len += len;
	start = s->line;
	while ((nl = memchr(start, '\n', s->len - (start - s->line)))) {
		if (nl > start &&
		    (ret = stream_event(s, start, nl - start, err, errlen)))
			return ret;
		start = nl + 1;
	}
	s->len -= start - s->line;
	memmove(s->line, start, s->len);
	return 0;
}

/* A buffered exec's one object, as the events a stream would have had. */
static int buffered_events(struct exec_stream *s, const json_t *o, char *err,
			   size_t errlen)
{
	int ret = output_event(s, THAW_EXEC_STDOUT, o, "stdout", err, errlen);

	if (!ret)
		ret = output_event(s, THAW_EXEC_STDERR, o, "stderr", err,
				   errlen);
	return ret ? ret : exit_event(s, o, err, errlen);
}

int thaw_client_exec(struct thaw_client *c, const char *id,
		     const struct thaw_exec *spec, thaw_exec_fn fn, void *arg,
		     char *err, size_t errlen)
{
	struct exec_stream s = { .fn = fn, .arg = arg };
	json_t *body = exec_body(spec, err, errlen), *answer = NULL;
	char *path = sandbox_path(c, id, "/exec"), *text = NULL;
	struct thaw_call q = { .method = "POST",
			       .path = path,
			       .sink = stream_data,
			       .sink_arg = &s };
	struct thaw_reply r = { 0 };
	int ret = THAW_CLIENT_LOCAL;

	if (!body)
		goto out;
	if (spec->buffered) {
		ret = json_call(c, "POST", path, body, &answer, err, errlen);
		if (ret == 0)
			ret = buffered_events(&s, answer, err, errlen);
		goto out;
	}
	if (!path || !(text = json_dumps(body, JSON_COMPACT))) {
		ret = oom(err, errlen);
		goto out;
	}
	q.body = text;
	q.len = strlen(text);
	ret = thaw_client_call(c, &q, &r, err, errlen);
	/* A last line without its newline still counts. */
	if (ret == 0 && !s.ended && s.len)
		ret = stream_event(&s, s.line, s.len, err, errlen);
	if (ret == 0 && !s.ended)
		ret = client_fail(
			THAW_CLIENT_ANSWER, err, errlen,
			"the daemon ended the exec stream before %s ended",
			spec->argv[0]);
out:
	thaw_reply_free(&r);
	json_decref(answer);
	json_decref(body);
	free(text);
	free(path);
	free(s.line);
	return ret;
}

/* ---- files ---- */

/* "/sandboxes/<id>/files?path=<path><query>"; NULL when out of memory. */
static char *files_path(struct thaw_client *c, const char *id, const char *path,
			const char *query)
{
	char *escaped = client_escape(c, path, 0), *tail = NULL, *full = NULL;

	if (escaped && asprintf(&tail, "/files?path=%s%s", escaped, query) < 0)
		tail = NULL;
	if (tail)
		full = sandbox_path(c, id, tail);
	free(escaped);
	free(tail);
	return full;
}

int thaw_client_upload(struct thaw_client *c, const char *id, const char *path,
		       int mode, const struct thaw_upload *up, char *err,
		       size_t errlen)
{
	char query[24] = "";
	struct thaw_call q = { .method = "PUT", .upload = up };
	struct thaw_reply r;
	int ret;

	if (mode >= 0)
		snprintf(query, sizeof(query), "&mode=0%03o",
			 (unsigned)mode & 07777);
	if (!(q.path = files_path(c, id, path, query)))
		return oom(err, errlen);
	ret = thaw_client_call(c, &q, &r, err, errlen);
	thaw_reply_free(&r);
	free((char *)q.path);
	return ret;
}

int thaw_client_download(struct thaw_client *c, const char *id,
			 const char *path, thaw_client_data_fn fn, void *arg,
			 char *err, size_t errlen)
{
	struct thaw_call q = { .method = "GET", .sink = fn, .sink_arg = arg };
	struct thaw_reply r;
	int ret;

	if (!(q.path = files_path(c, id, path, "")))
		return oom(err, errlen);
	ret = thaw_client_call(c, &q, &r, err, errlen);
	thaw_reply_free(&r);
	free((char *)q.path);
	return ret;
}

/* ---- the daemon ---- */

static int take_template(void *item, const json_t *o, char *err, size_t errlen)
{
	struct thaw_template *t = item;

	if (!take_string(t->name, sizeof(t->name), o, "name") ||
	    !take_string(t->snapshot, sizeof(t->snapshot), o, "snapshot"))
		return too_long("template field", err, errlen);
	t->mem_mib = (long)number(o, "mem_mib");
	t->vcpus = (long)number(o, "vcpus");
	t->min_ready = (long)number(o, "min_ready");
	t->max_total = (long)number(o, "max_total");
	t->ready = (long)number(o, "ready");
	t->restoring = (long)number(o, "restoring");
	t->leased = (long)number(o, "leased");
	return 0;
}

int thaw_client_templates(struct thaw_client *c, struct thaw_template **list,
			  size_t *n, char *err, size_t errlen)
{
	return get_list(c, "/templates", "templates", "template",
			sizeof(**list), take_template, list, n, err, errlen);
}

int thaw_client_metric(struct thaw_client *c, const char *metric,
		       const char *template, double *value, char *err,
		       size_t errlen)
{
	struct thaw_call q = { .method = "GET", .path = "/metrics" };
	struct thaw_reply r;
	char *series = NULL;
	int ret = thaw_client_call(c, &q, &r, err, errlen);

	if (ret == 0 &&
	    asprintf(&series, "%s{template=\"%s\"} ", metric, template) < 0) {
		series = NULL;
		ret = oom(err, errlen);
	}
	if (ret == 0) {
		ret = client_fail(THAW_CLIENT_ANSWER, err, errlen,
				  "GET /metrics has no %.200s", series);
		for (char *line = r.body; line; line = strchr(line, '\n')) {
			line += *line == '\n';
			if (!strncmp(line, series, strlen(series))) {
				*value = strtod(line + strlen(series), NULL);
				ret = 0;
				break;
			}
		}
	}
	free(series);
	thaw_reply_free(&r);
	return ret;
}

/* ---- checkpoints, forks, rollbacks, pause, resume, snapshots ---- */

/* A checkpoint's answer into @ck. */
static int take_checkpoint(struct thaw_checkpoint *ck, const json_t *o,
			   char *err, size_t errlen)
{
	memset(ck, 0, sizeof(*ck));
	if (!json_is_object(o) ||
	    !take_string(ck->snapshot, sizeof(ck->snapshot), o, "snapshot") ||
	    !take_string(ck->parent, sizeof(ck->parent), o, "parent") ||
	    !ck->snapshot[0])
		return client_fail(THAW_CLIENT_ANSWER, err, errlen,
				   "the daemon's answer names no checkpoint");
	ck->dirty_bytes = number(o, "dirty_bytes");
	ck->pause_ms = number(o, "pause_ms");
	ck->total_ms = number(o, "total_ms");
	ck->depth = (long)number(o, "depth");
	ck->full = json_is_true(json_object_get(o, "full"));
	return 0;
}

/* POST /sandboxes/@id@tail with @body (or none), the answer into
 * *@answer (the caller's to release). */
static int sandbox_post(struct thaw_client *c, const char *id, const char *tail,
			const json_t *body, json_t **answer, char *err,
			size_t errlen)
{
	char *path = sandbox_path(c, id, tail);
	int ret = json_call(c, "POST", path, body, answer, err, errlen);

	free(path);
	return ret;
}

int thaw_client_checkpoint(struct thaw_client *c, const char *id,
			   struct thaw_checkpoint *ck, char *err, size_t errlen)
{
	json_t *answer = NULL;
	int ret =
		sandbox_post(c, id, "/checkpoint", NULL, &answer, err, errlen);

	if (ret == 0)
		ret = take_checkpoint(ck, answer, err, errlen);
	json_decref(answer);
	return ret;
}

static int take_fork_entry(void *item, const json_t *o, char *err,
			   size_t errlen)
{
	struct thaw_fork_entry *f = item;
	const json_t *e = json_object_get(o, "error");

	memset(f, 0, sizeof(*f));
	if (e) {
		char code[64], message[sizeof(f->error) - sizeof(code) - 2];

		take_string(code, sizeof(code), e, "code");
		take_string(message, sizeof(message), e, "message");
		snprintf(f->error, sizeof(f->error), "%s: %s", code, message);
		return 0;
	}
	if (!take_string(f->id, sizeof(f->id), o, "id") || !f->id[0])
		return too_long("fork's sandbox id", err, errlen);
	return 0;
}

/* Takes @answer's "sandboxes" entries into *@list of *@n. */
static int take_fork_entries(const json_t *answer,
			     struct thaw_fork_entry **list, size_t *n,
			     char *err, size_t errlen)
{
	const json_t *items = json_object_get(answer, "sandboxes"), *o;
	size_t i;

	*list = NULL;
	*n = 0;
	if (!json_is_array(items) || json_array_size(items) > LIST_MAX)
		return client_fail(THAW_CLIENT_ANSWER, err, errlen,
				   "the daemon's answer has no sandbox list");
	if (json_array_size(items) &&
	    !(*list = calloc(json_array_size(items), sizeof(**list))))
		return oom(err, errlen);
	json_array_foreach(items, i, o)
	{
		int ret = json_is_object(o)
				  ? take_fork_entry(&(*list)[i], o, err, errlen)
				  : client_fail(THAW_CLIENT_ANSWER, err, errlen,
						"the daemon's sandbox list "
						"holds a non-object");

		if (ret) {
			free(*list);
			*list = NULL;
			return ret;
		}
	}
	*n = json_array_size(items);
	return 0;
}

int thaw_client_create_many(struct thaw_client *c,
			    const struct thaw_create *spec, unsigned count,
			    struct thaw_fork_entry **list, size_t *n, char *err,
			    size_t errlen)
{
	json_t *answer = NULL;
	int ret = create_call(c, spec, count, &answer, err, errlen);

	*list = NULL;
	*n = 0;
	if (ret == 0)
		ret = take_fork_entries(answer, list, n, err, errlen);
	json_decref(answer);
	return ret;
}

int thaw_client_fork(struct thaw_client *c, const char *id, unsigned count,
		     struct thaw_checkpoint *ck, struct thaw_fork_entry **list,
		     size_t *n, char *err, size_t errlen)
{
	json_t *body = json_pack("{s:I}", "count", (json_int_t)count);
	json_t *answer = NULL;
	int ret =
		body ? sandbox_post(c, id, "/fork", body, &answer, err, errlen)
		     : oom(err, errlen);

	*list = NULL;
	*n = 0;
	if (ret == 0)
		ret = take_checkpoint(ck, answer, err, errlen);
	if (ret == 0)
		ret = take_fork_entries(answer, list, n, err, errlen);
	json_decref(answer);
	json_decref(body);
	return ret;
}

/* A sandbox answer into @s (NULL: not wanted). */
static int take_if_wanted(struct thaw_sandbox *s, const json_t *answer,
			  char *err, size_t errlen)
{
	return s ? take_one_sandbox(s, answer, err, errlen) : 0;
}

int thaw_client_rollback(struct thaw_client *c, const char *id,
			 const char *snapshot, struct thaw_sandbox *s,
			 char *err, size_t errlen)
{
	json_t *body = json_object(), *answer = NULL;
	int ret;

	if (!body)
		return oom(err, errlen);
	if (!set(body, "snapshot", json_string(snapshot)))
		ret = not_text("snapshot id", err, errlen);
	else
		ret = sandbox_post(c, id, "/rollback", body, &answer, err,
				   errlen);
	if (ret == 0)
		ret = take_if_wanted(s, answer, err, errlen);
	json_decref(answer);
	json_decref(body);
	return ret;
}

int thaw_client_pause(struct thaw_client *c, const char *id,
		      struct thaw_checkpoint *ck, char *err, size_t errlen)
{
	json_t *answer = NULL;
	int ret = sandbox_post(c, id, "/pause", NULL, &answer, err, errlen);

	if (ret == 0 && ck)
		ret = take_checkpoint(ck, json_object_get(answer, "checkpoint"),
				      err, errlen);
	json_decref(answer);
	return ret;
}

int thaw_client_resume(struct thaw_client *c, const char *id,
		       struct thaw_sandbox *s, char *err, size_t errlen)
{
	json_t *answer = NULL;
	int ret = sandbox_post(c, id, "/resume", NULL, &answer, err, errlen);

	if (ret == 0)
		ret = take_if_wanted(s, answer, err, errlen);
	json_decref(answer);
	return ret;
}

static int take_snapshot(void *item, const json_t *o, char *err, size_t errlen)
{
	struct thaw_snapshot *s = item;

	memset(s, 0, sizeof(*s));
	if (!take_string(s->id, sizeof(s->id), o, "id") ||
	    !take_string(s->parent, sizeof(s->parent), o, "parent") ||
	    !take_string(s->template, sizeof(s->template), o, "template") ||
	    !take_string(s->created, sizeof(s->created), o, "created"))
		return too_long("snapshot field", err, errlen);
	s->size = number(o, "size");
	s->dirty_bytes = number(o, "dirty_bytes");
	s->depth = (long)number(o, "depth");
	s->live_users = (long)number(o, "live_users");
	s->children = (long)number(o, "children");
	s->base = json_is_true(json_object_get(o, "base"));
	return 0;
}

int thaw_client_snapshots(struct thaw_client *c, struct thaw_snapshot **list,
			  size_t *n, char *err, size_t errlen)
{
	return get_list(c, "/snapshots", "snapshots", "snapshot",
			sizeof(**list), take_snapshot, list, n, err, errlen);
}

int thaw_client_delete_snapshot(struct thaw_client *c, const char *id,
				char *err, size_t errlen)
{
	char *escaped = client_escape(c, id, 0), *path = NULL;
	int ret;

	if (escaped && asprintf(&path, "/snapshots/%s", escaped) < 0)
		path = NULL;
	ret = json_call(c, "DELETE", path, NULL, NULL, err, errlen);
	free(escaped);
	free(path);
	return ret;
}
