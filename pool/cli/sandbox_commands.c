// SPDX-License-Identifier: Apache-2.0
/*
 * client.c - `thaw sandbox create|ls|rm`, `thaw exec` and `thaw cp`: the
 * daemon's HTTP API (API.md) as commands.
 *
 * Every command is one or more requests through request(), the one place
 * that talks to libcurl: it dials the daemon's Unix socket, adds the bearer
 * token, sends a JSON body or streams an upload from a file, and turns any
 * failure into one line on stderr: the daemon's own status, code and
 * message, or why its socket could not be reached.  A successful answer's
 * body is handed to the command as it arrives rather than buffered, so a
 * long command's output shows as it is written, a large file never sits in
 * memory, and a ^C (seen by libcurl's progress callback) ends the transfer
 * at once: the daemon kills a command whose client went away.
 *
 * Exit status: thaw exec exits with the command's own status (128 + signal
 * when a signal killed it, 124 when its --timeout passed, as timeout(1)),
 * so its own failures, usage errors included, are 125 as for thaw run.
 * sandbox and cp exit 1 when a request failed and 2 on a usage error.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base64.h"
#include "interrupt.h"
#include "io.h"
#include "paths.h"
#include "thaw.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_TIMED_OUT 124 /* as timeout(1) */

/* Answers we buffer (JSON, errors) are small; more is a broken daemon. */
#define ANSWER_MAX (16 << 20)
/* One exec event: a chunk of output as base64, far below this. */
#define EVENT_MAX (16 << 20)
/* A socket path's room in struct sockaddr_un, its NUL included. */
#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)NULL)->sun_path)

struct options {
	const char *socket, *template, *cwd;
	long timeout_s; /* 0: not given */
	json_t *env;	/* --env K=V..., as the API's "env" object */
	bool send_stdin, json;
};

struct client;

/* One command: how its options are parsed, what it does with them. */
struct command {
	const char *name; /* "thaw sandbox create": every message's prefix */
	const char *usage;
	const char *accepts;  /* its option letters, besides socket and help */
	bool stop_at_operand; /* what follows ID are CMD's own options */
	int usage_status, fail_status;
	/* Runs with the operands left after the options. */
	int (*run)(struct client *c, const struct options *o, int argc,
		   char **argv);
};

/* The connection to the daemon, opened by the first request. */
struct client {
	const struct command *cmd;
	const struct options *opts;
	char socket[PATH_MAX];
	CURL *curl;
	struct curl_slist *headers;
	char error[CURL_ERROR_SIZE];
};

/* A file streamed as a request body. */
struct upload {
	int fd;
	const char *name; /* for messages */
	curl_off_t size;  /* -1: unknown, sent chunked */
};

/* One HTTP exchange; see request(). */
struct request {
	const char *who; /* messages' prefix; the command's name when NULL */
	const char *method;
	const char *path;      /* after the host, percent-encoded */
	json_t *json;	       /* the body, or NULL */
	struct upload *upload; /* or the body streamed from a file */
	/*
	 * A successful answer's body goes to @sink as it arrives (false after
	 * the sink's own message ends the transfer), or without one into
	 * @answer.
	 */
	bool (*sink)(const char *data, size_t len, void *arg);
	void *sink_arg;

	/* Filled in by request(). */
	CURL *curl;
	long status;
	char *answer;
	size_t answer_len;
	bool failed_locally; /* a sink or the upload said why already */
};

/* The usage error's line, then the usage; returns the exit status. */
__attribute__((format(printf, 2, 3))) static int
usage_error(const struct command *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s", cmd->usage);
	return cmd->usage_status;
}

/*
 * Readies the connection, once: the daemon's socket is --socket, else
 * $THAW_SOCKET, else the state directory's.  0, or -1 after a message.
 */
static int client_open(struct client *c, const char *who)
{
	const char *env = getenv("THAW_SOCKET");
	const char *token = getenv("THAW_TOKEN");
	char state[PATH_MAX], err[128];
	int n;

	if (c->curl)
		return 0;
	if (c->opts->socket)
		n = snprintf(c->socket, sizeof(c->socket), "%s",
			     c->opts->socket);
	else if (env && *env)
		n = snprintf(c->socket, sizeof(c->socket), "%s", env);
	else if (thaw_state_dir(state, sizeof(state), err, sizeof(err)) == 0)
		n = snprintf(c->socket, sizeof(c->socket), "%s/thawd.sock",
			     state);
	else {
		fprintf(stderr, "%s: %s\n", who, err);
		return -1;
	}
	/* curl would say so too, but as if the daemon had been lost. */
	if (n < 0 || (size_t)n >= SUN_PATH_MAX) {
		fprintf(stderr,
			"%s: the daemon's socket path is over %zu bytes: %s\n",
			who, SUN_PATH_MAX - 1, c->socket);
		return -1;
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) ||
	    !(c->curl = curl_easy_init())) {
		fprintf(stderr, "%s: cannot start libcurl\n", who);
		return -1;
	}
	if (token && *token) {
		char *header;

		if (asprintf(&header, "Authorization: Bearer %s", token) < 0 ||
		    !(c->headers = curl_slist_append(NULL, header))) {
			fprintf(stderr, "%s: out of memory\n", who);
			return -1;
		}
		free(header);
	}
	return 0;
}

static void client_close(struct client *c)
{
	if (!c->curl)
		return;
	curl_easy_cleanup(c->curl);
	curl_slist_free_all(c->headers);
	curl_global_cleanup();
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct request *r = arg;
	size_t len = size * n;

	if (!r->status)
		curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, &r->status);
	/* An error answer is the daemon's JSON message, never the sink's. */
	if (r->sink && r->status / 100 == 2) {
		if (r->sink(data, len, r->sink_arg))
			return len;
		r->failed_locally = true;
		return 0;
	}
	if (r->answer_len + len > ANSWER_MAX) {
		fprintf(stderr, "%s: the daemon's answer is over %d MiB\n",
			r->who, ANSWER_MAX >> 20);
		r->failed_locally = true;
		return 0;
	}
	char *grown = realloc(r->answer, r->answer_len + len + 1);
	if (!grown) {
		fprintf(stderr, "%s: out of memory for the daemon's answer\n",
			r->who);
		r->failed_locally = true;
		return 0;
	}
	memcpy(grown + r->answer_len, data, len);
	r->answer_len += len;
	grown[r->answer_len] = '\0';
	r->answer = grown;
	return len;
}

static size_t on_upload(char *buf, size_t size, size_t n, void *arg)
{
	struct request *r = arg;

	for (;;) {
		ssize_t got = read(r->upload->fd, buf, size * n);

		if (got >= 0)
			return got;
		if (errno == EINTR && !thaw_interrupted)
			continue;
		if (!thaw_interrupted) {
			fprintf(stderr, "%s: cannot read %s: %s\n", r->who,
				r->upload->name, strerror(errno));
			r->failed_locally = true;
		}
		return CURL_READFUNC_ABORT;
	}
}

/* Called during waits too, so a ^C ends even a silent exec. */
static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	(void)arg;
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return thaw_interrupted != 0;
}

/* Loads the answer as JSON; NULL after a message when it is not. */
static json_t *answer_json(const struct request *r)
{
	json_error_t err;
	json_t *j =
		json_loadb(r->answer ? r->answer : "", r->answer_len, 0, &err);

	if (!j)
		fprintf(stderr, "%s: the daemon's answer is not JSON: %s\n",
			r->who, err.text);
	return j;
}

/* "<status> <code>: <message>" from an error answer (API.md). */
static void report_status(const struct request *r)
{
	json_t *j =
		json_loadb(r->answer ? r->answer : "", r->answer_len, 0, NULL);
	json_t *e = json_object_get(j, "error");
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *message = json_string_value(json_object_get(e, "message"));

	if (code && message)
		fprintf(stderr, "%s: %ld %s: %s\n", r->who, r->status, code,
			message);
	else
		fprintf(stderr,
			"%s: %ld from the daemon, without an error message\n",
			r->who, r->status);
	json_decref(j);
}

static void report_transport(struct client *c, const struct request *r,
			     CURLcode rc)
{
	long os_errno = 0;
	const char *reason = c->error[0] ? c->error : curl_easy_strerror(rc);

	if (rc != CURLE_COULDNT_CONNECT) {
		fprintf(stderr, "%s: lost the daemon at %s: %s\n", r->who,
			c->socket, reason);
		return;
	}
	/* The socket's own errno says more than curl's "Couldn't connect". */
	curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
	fprintf(stderr,
		"%s: cannot reach the daemon at %s: %s (is 'thaw daemon' running?)\n",
		r->who, c->socket, os_errno ? strerror(os_errno) : reason);
}

/*
 * Sends @r and takes in its answer.  Returns 0 on a 2xx status, the status
 * after the daemon's error message, or -1 after a message when the daemon
 * could not be reached or the transfer failed (or silently when ^C ended
 * it).  The caller frees r->answer.
 */
static int request(struct client *c, struct request *r)
{
	char url[16 + 3 * PATH_MAX];
	char *body = NULL;

	if (!r->who)
		r->who = c->cmd->name;
	if (client_open(c, r->who) < 0)
		return -1;
	if (snprintf(url, sizeof(url), "http://thaw%s", r->path) >=
	    (int)sizeof(url)) {
		fprintf(stderr, "%s: request path too long\n", r->who);
		return -1;
	}
	if (r->json && !(body = json_dumps(r->json, JSON_COMPACT))) {
		fprintf(stderr, "%s: out of memory for the request\n", r->who);
		return -1;
	}
	r->curl = c->curl;
	c->error[0] = '\0';
	/* Reset, not a fresh handle: the connection stays open for the next. */
	curl_easy_reset(c->curl);
	curl_easy_setopt(c->curl, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	curl_easy_setopt(c->curl, CURLOPT_URL, url);
	curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, r->method);
	curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
	curl_easy_setopt(c->curl, CURLOPT_ERRORBUFFER, c->error);
	/* Our handlers own the signals; there is no DNS to time out. */
	curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
	if (body) {
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)strlen(body));
	}
	if (r->upload) {
		curl_easy_setopt(c->curl, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c->curl, CURLOPT_READFUNCTION, on_upload);
		curl_easy_setopt(c->curl, CURLOPT_READDATA, r);
		curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE,
				 r->upload->size);
	}
	CURLcode rc = curl_easy_perform(c->curl);
	free(body);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->status);
	if (thaw_interrupted || r->failed_locally)
		return -1;
	if (rc != CURLE_OK) {
		report_transport(c, r, rc);
		return -1;
	}
	if (r->status / 100 != 2) {
		report_status(r);
		return r->status;
	}
	return 0;
}

/* @len bytes of @s (all when 0) percent-encoded; NULL after a message. */
static char *escape(struct client *c, const char *who, const char *s,
		    size_t len)
{
	char *escaped;

	if (client_open(c, who) < 0)
		return NULL;
	if (!(escaped = curl_easy_escape(c->curl, s, len)))
		fprintf(stderr, "%s: out of memory\n", who);
	return escaped;
}

/* "/sandboxes/<id><tail>", malloc'd; NULL after a message. */
static char *sandbox_path(struct client *c, const char *who, const char *id,
			  size_t id_len, const char *tail)
{
	char *escaped = escape(c, who, id, id_len), *path = NULL;

	if (escaped && asprintf(&path, "/sandboxes/%s%s", escaped, tail) < 0) {
		fprintf(stderr, "%s: out of memory\n", who);
		path = NULL;
	}
	curl_free(escaped);
	return path;
}

/* "/sandboxes/<id>/files?path=<remote><query>"; NULL after a message. */
static char *files_path(struct client *c, const char *id, size_t id_len,
			const char *remote, const char *query)
{
	const char *who = c->cmd->name;
	char *escaped = escape(c, who, remote, 0), *tail = NULL, *path = NULL;

	if (escaped &&
	    asprintf(&tail, "/files?path=%s%s", escaped, query) < 0) {
		fprintf(stderr, "%s: out of memory\n", who);
		tail = NULL;
	}
	if (tail)
		path = sandbox_path(c, who, id, id_len, tail);
	curl_free(escaped);
	free(tail);
	return path;
}

/* A JSON string member; false when @value is not UTF-8 (or no memory). */
static bool set_string(json_t *obj, const char *key, const char *value)
{
	return json_object_set_new(obj, key, json_string(value)) == 0;
}

static const char *member(json_t *obj, const char *key)
{
	const char *s = json_string_value(json_object_get(obj, key));

	return s ? s : "-";
}

static int sandbox_create(struct client *c, const struct options *o, int argc,
			  char **argv)
{
	struct request r = { .method = "POST", .path = "/sandboxes" };
	int status = c->cmd->fail_status;

	if (argc > 0)
		return usage_error(c->cmd, "unexpected argument '%s'", argv[0]);
	r.json = json_object();
	if (o->template && !set_string(r.json, "template", o->template)) {
		json_decref(r.json);
		return usage_error(c->cmd, "--template '%s' is not UTF-8 text",
				   o->template);
	}
	if (o->timeout_s)
		json_object_set_new(r.json, "timeout_s",
				    json_integer(o->timeout_s));
	if (o->env)
		json_object_set(r.json, "env", o->env);
	if (request(c, &r) == 0) {
		json_t *vmm = answer_json(&r);
		const char *id = json_string_value(json_object_get(vmm, "id"));

		if (id) {
			fprintf(stderr,
				"thaw: sandbox of template %s, restore %.1f ms, handout %.2f ms\n",
				member(vmm, "template"),
				json_number_value(
					json_object_get(vmm, "restore_ms")),
				json_number_value(
					json_object_get(vmm, "handout_ms")));
			printf("%s\n", id);
			status = 0;
		} else if (vmm) {
			fprintf(stderr, "%s: the daemon's answer has no id\n",
				r.who);
		}
		json_decref(vmm);
	}
	free(r.answer);
	json_decref(r.json);
	return status;
}

/* The table of GET /sandboxes; 0, or -1 after a message. */
static int print_sandboxes(const struct request *r)
{
	json_t *answer = answer_json(r);
	json_t *list = json_object_get(answer, "sandboxes"), *vmm;
	size_t i;

	if (!json_is_array(list)) {
		if (answer)
			fprintf(stderr,
				"%s: the daemon's answer has no sandbox list\n",
				r->who);
		json_decref(answer);
		return -1;
	}
	printf("%-20s %-16s %-24s %-24s %10s\n", "ID", "TEMPLATE", "CREATED",
	       "EXPIRES", "RESTORE_MS");
	json_array_foreach(list, i, vmm)
		printf("%-20s %-16s %-24s %-24s %10.1f\n", member(vmm, "id"),
		       member(vmm, "template"), member(vmm, "created"),
		       member(vmm, "expires"),
		       json_number_value(json_object_get(vmm, "restore_ms")));
	json_decref(answer);
	return 0;
}

static int sandbox_ls(struct client *c, const struct options *o, int argc,
		      char **argv)
{
	struct request r = { .method = "GET", .path = "/sandboxes" };
	int ret;

	if (argc > 0)
		return usage_error(c->cmd, "unexpected argument '%s'", argv[0]);
	ret = request(c, &r);
	if (ret == 0 && o->json) {
		fwrite(r.answer, 1, r.answer_len, stdout);
		if (!r.answer_len || r.answer[r.answer_len - 1] != '\n')
			putchar('\n');
	} else if (ret == 0) {
		ret = print_sandboxes(&r);
	}
	free(r.answer);
	return ret == 0 ? 0 : c->cmd->fail_status;
}

/* Every ID is tried: one that fails does not keep the others alive. */
static int sandbox_rm(struct client *c, const struct options *o, int argc,
		      char **argv)
{
	int status = 0;

	(void)o;
	if (argc == 0)
		return usage_error(c->cmd, "no sandbox id given");
	for (int i = 0; i < argc; i++) {
		char who[256];

		snprintf(who, sizeof(who), "%s: %s", c->cmd->name, argv[i]);
		struct request r = { .who = who, .method = "DELETE" };
		char *path = sandbox_path(c, who, argv[i], 0, "");
		int ret = -1;

		r.path = path;
		if (path)
			ret = request(c, &r);
		free(path);
		free(r.answer);
		if (ret != 0)
			status = c->cmd->fail_status;
		/* Without the daemon the other IDs would only say so again. */
		if (ret < 0)
			break;
	}
	return status;
}

/* An exec's NDJSON answer, taken apart line by line as it arrives. */
struct exec_stream {
	const char *who, *cmd;
	char *line; /* the part of a line received so far */
	size_t len;
	int status; /* ours to exit with; -1 until the last event */
};

static bool exec_output(struct exec_stream *s, json_t *event, int fd)
{
	json_t *data = json_object_get(event, "data");
	size_t len;
	void *bytes = json_is_string(data)
			      ? base64_decode(json_string_value(data),
					      json_string_length(data), &len)
			      : NULL;

	if (!bytes) {
		fprintf(stderr,
			"%s: bad output event from the daemon: no base64 data\n",
			s->who);
		return false;
	}
	/* A closed stdout must not stop the command. */
	write_full(fd, bytes, len);
	free(bytes);
	return true;
}

/* One event (API.md); false after a message when it is malformed. */
static bool exec_event(struct exec_stream *s, const char *line, size_t len)
{
	json_error_t err;
	json_t *e = json_loadb(line, len, 0, &err);
	const char *type = json_string_value(json_object_get(e, "type"));
	bool ok = true;

	if (!type) {
		fprintf(stderr, "%s: bad event from the daemon: %s\n", s->who,
			e ? "no type" : err.text);
		json_decref(e);
		return false;
	}
	if (!strcmp(type, "stdout")) {
		ok = exec_output(s, e, STDOUT_FILENO);
	} else if (!strcmp(type, "stderr")) {
		ok = exec_output(s, e, STDERR_FILENO);
	} else if (!strcmp(type, "exit")) {
		json_t *sig = json_object_get(e, "signal");

		if (json_is_true(json_object_get(e, "timed_out"))) {
			fprintf(stderr, "%s: %s timed out\n", s->who, s->cmd);
			s->status = EXIT_TIMED_OUT;
		} else if (sig) {
			s->status = 128 + json_integer_value(sig);
		} else {
			s->status = json_integer_value(
					    json_object_get(e, "exit_code")) &
				    0xff;
		}
	} else if (!strcmp(type, "error")) {
		fprintf(stderr, "%s: %s\n", s->who, member(e, "message"));
		s->status = EXIT_THAW_ERROR;
	}
	/* "started", and what a newer daemon may add, need nothing. */
	json_decref(e);
	return ok;
}

static bool exec_data(const char *data, size_t len, void *arg)
{
	struct exec_stream *s = arg;
	char *grown, *start, *nl;

	if (s->len + len > EVENT_MAX) {
		fprintf(stderr, "%s: an event from the daemon is over %d MiB\n",
			s->who, EVENT_MAX >> 20);
		return false;
	}
	if (!(grown = realloc(s->line, s->len + len))) {
		fprintf(stderr, "%s: out of memory for the command's output\n",
			s->who);
		return false;
	}
	s->line = grown;
	memcpy(s->line + s->len, data, len);
	s->len += len;
	start = s->line;
	while ((nl = memchr(start, '\n', s->len - (start - s->line)))) {
		if (nl > start && !exec_event(s, start, nl - start))
			return false;
		start = nl + 1;
	}
	s->len -= start - s->line;
	memmove(s->line, start, s->len);
	return true;
}

/* All of our stdin as base64 into @body's "stdin"; 0, or -1 after a
 * message (none when ^C ended it). */
static int add_stdin(const char *who, json_t *body)
{
	char *input = NULL, *text = NULL;
	size_t len = 0;
	ssize_t n = 1;

	while (n != 0) {
		char *grown = realloc(input, len + 65536);

		if (!grown)
			goto oom;
		input = grown;
		n = read(STDIN_FILENO, input + len, 65536);
		if (n > 0)
			len += n;
		else if (n < 0 && (errno != EINTR || thaw_interrupted))
			break;
	}
	if (n < 0) {
		if (!thaw_interrupted)
			fprintf(stderr, "%s: cannot read stdin: %s\n", who,
				strerror(errno));
		free(input);
		return -1;
	}
	if (!(text = base64_encode(input, len)) ||
	    json_object_set_new(body, "stdin", json_string_nocheck(text)) < 0)
		goto oom;
	free(input);
	free(text);
	return 0;
oom:
	fprintf(stderr, "%s: out of memory for stdin\n", who);
	free(input);
	free(text);
	return -1;
}

/* The API's exec body; NULL after a message, *@status what to exit with. */
static json_t *exec_body(const struct command *cmd, const struct options *o,
			 int argc, char **argv, int *status)
{
	json_t *body = json_object(), *args = json_array();

	json_object_set_new(body, "argv", args);
	json_object_set_new(body, "stream", json_true());
	for (int i = 0; i < argc; i++)
		if (json_array_append_new(args, json_string(argv[i])) < 0) {
			*status = usage_error(cmd,
					      "argument '%s' is not UTF-8 text",
					      argv[i]);
			goto fail;
		}
	if (o->cwd && !set_string(body, "cwd", o->cwd)) {
		*status = usage_error(cmd, "--cwd '%s' is not UTF-8 text",
				      o->cwd);
		goto fail;
	}
	if (o->env)
		json_object_set(body, "env", o->env);
	if (o->timeout_s)
		json_object_set_new(body, "timeout_s",
				    json_integer(o->timeout_s));
	*status = cmd->fail_status;
	if (o->send_stdin && add_stdin(cmd->name, body) < 0)
		goto fail;
	return body;
fail:
	json_decref(body);
	return NULL;
}

static int exec_run(struct client *c, const struct options *o, int argc,
		    char **argv)
{
	struct exec_stream s = { .who = c->cmd->name, .status = -1 };
	struct request r = { .method = "POST",
			     .sink = exec_data,
			     .sink_arg = &s };
	char *path = NULL;
	int status;

	if (argc < 1)
		return usage_error(c->cmd, "no sandbox id given");
	const char *id = argv[0];
	argc--, argv++;
	if (argc > 0 && !strcmp(argv[0], "--"))
		argc--, argv++;
	if (argc < 1)
		return usage_error(c->cmd,
				   "no command given (thaw exec ID -- CMD)");
	s.cmd = argv[0];
	if (!(r.json = exec_body(c->cmd, o, argc, argv, &status)))
		return status;
	r.path = path = sandbox_path(c, s.who, id, 0, "/exec");
	if (path && request(c, &r) == 0) {
		/* A last line without its newline still counts. */
		bool ok = s.status >= 0 || !s.len ||
			  exec_event(&s, s.line, s.len);

		if (ok && s.status < 0)
			fprintf(stderr,
				"%s: the daemon ended the exec stream before %s ended\n",
				s.who, s.cmd);
	}
	free(path);
	free(r.answer);
	free(s.line);
	json_decref(r.json);
	return s.status < 0 ? EXIT_THAW_ERROR : s.status;
}

/* The local end of a download. */
struct download {
	const char *who, *name;
	int fd;
};

static bool download_data(const char *data, size_t len, void *arg)
{
	struct download *d = arg;
	int ret = write_full(d->fd, data, len);

	if (ret < 0)
		fprintf(stderr, "%s: cannot write %s: %s\n", d->who, d->name,
			strerror(-ret));
	return ret == 0;
}

/* Where a download lands: @local, or in it when it is a directory. */
static int download_target(const char *who, const char *local,
			   const char *remote, char *out, size_t len)
{
	const char *base = strrchr(remote, '/') + 1;
	struct stat st;
	int n;

	if (stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (!*base) {
			fprintf(stderr,
				"%s: %s names no file to copy into %s\n", who,
				remote, local);
			return -1;
		}
		n = snprintf(out, len, "%s/%s", local, base);
	} else {
		n = snprintf(out, len, "%s", local);
	}
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "%s: %s: path too long\n", who, local);
		return -1;
	}
	return 0;
}

/* Gives the finished temporary file @d its mode and @target's name. */
static int download_finish(struct download *d, const char *tmp,
			   const char *target)
{
	mode_t mask = umask(0);
	struct stat st;
	int err = 0;

	umask(mask);
	/* Like a plain create, or keeping the mode of the file replaced. */
	if (fchmod(d->fd, stat(target, &st) == 0 ? st.st_mode & 07777
						 : 0666 & ~mask) < 0)
		err = errno;
	if (close(d->fd) < 0 && !err)
		err = errno;
	d->fd = -1;
	if (!err && rename(tmp, target) < 0)
		err = errno;
	if (err)
		fprintf(stderr, "%s: cannot write %s: %s\n", d->who, target,
			strerror(err));
	return err ? -1 : 0;
}

/*
 * GET into a temporary file beside the target, renamed over it once the
 * whole file arrived: an error answer, a broken transfer or a ^C leave the
 * target as it was.
 */
static int cp_download(struct client *c, const char *id, size_t id_len,
		       const char *remote, const char *local)
{
	const char *who = c->cmd->name;
	char target[PATH_MAX], tmp[PATH_MAX + 16];
	struct download d = { .who = who,
			      .name = "stdout",
			      .fd = STDOUT_FILENO };
	struct request r = { .method = "GET",
			     .sink = download_data,
			     .sink_arg = &d };
	bool to_stdout = !strcmp(local, "-");
	char *path = NULL;
	int ret = -1;

	if (!to_stdout) {
		if (download_target(who, local, remote, target,
				    sizeof(target)) < 0)
			return c->cmd->fail_status;
		snprintf(tmp, sizeof(tmp), "%s.thaw-XXXXXX", target);
		if ((d.fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
			fprintf(stderr, "%s: cannot create %s: %s\n", who,
				target, strerror(errno));
			return c->cmd->fail_status;
		}
		d.name = target;
	}
	r.path = path = files_path(c, id, id_len, remote, "");
	if (path)
		ret = request(c, &r);
	if (ret == 0 && !to_stdout)
		ret = download_finish(&d, tmp, target);
	if (!to_stdout && ret != 0) {
		if (d.fd >= 0)
			close(d.fd);
		unlink(tmp);
	}
	free(path);
	free(r.answer);
	return ret == 0 ? 0 : c->cmd->fail_status;
}

/* PUT from the local file (or stdin), with its permission bits. */
static int cp_upload(struct client *c, const char *local, const char *id,
		     size_t id_len, const char *remote)
{
	const char *who = c->cmd->name;
	bool from_stdin = !strcmp(local, "-");
	struct upload up = { .fd = STDIN_FILENO, .name = "stdin", .size = -1 };
	struct request r = { .method = "PUT", .upload = &up };
	char mode[16] = "", *path = NULL;
	int ret = -1;
	struct stat st;

	if (!from_stdin && (up.fd = open(local, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "%s: cannot open %s: %s\n", who, local,
			strerror(errno));
		return c->cmd->fail_status;
	}
	if (!from_stdin)
		up.name = local;
	if (fstat(up.fd, &st) < 0)
		fprintf(stderr, "%s: cannot read %s: %s\n", who, up.name,
			strerror(errno));
	else if (S_ISDIR(st.st_mode))
		fprintf(stderr, "%s: %s is a directory\n", who, up.name);
	else
		ret = 0;
	/* A pipe's length is known at its end only: curl sends it chunked. */
	if (ret == 0 && S_ISREG(st.st_mode))
		up.size = st.st_size;
	if (ret == 0 && !from_stdin)
		snprintf(mode, sizeof(mode), "&mode=0%03o",
			 (unsigned)(st.st_mode & 0777));
	if (ret == 0) {
		r.path = path = files_path(c, id, id_len, remote, mode);
		ret = path ? request(c, &r) : -1;
	}
	if (!from_stdin)
		close(up.fd);
	free(path);
	free(r.answer);
	return ret == 0 ? 0 : c->cmd->fail_status;
}

/*
 * The length of the sandbox id in "ID:/path", read as scp reads a remote
 * name (a colon before any slash), or 0 for a local path: "./a:b" is local.
 */
static size_t remote_id_len(const char *arg)
{
	size_t n = strcspn(arg, ":/");

	return arg[n] == ':' ? n : 0;
}

static int cp_run(struct client *c, const struct options *o, int argc,
		  char **argv)
{
	(void)o;
	if (argc != 2)
		return usage_error(c->cmd, "takes a SRC and a DST");
	size_t src_id = remote_id_len(argv[0]);
	size_t dst_id = remote_id_len(argv[1]);
	if (src_id && dst_id)
		return usage_error(
			c->cmd,
			"SRC and DST are both in sandboxes: one must be local");
	if (!src_id && !dst_id)
		return usage_error(
			c->cmd,
			"neither SRC nor DST is in a sandbox (ID:/path)");
	const char *remote = src_id ? argv[0] : argv[1];
	size_t id_len = src_id ? src_id : dst_id;
	if (remote[id_len + 1] != '/')
		return usage_error(
			c->cmd,
			"'%s': the path in the sandbox must be absolute",
			remote);
	if (src_id)
		return cp_download(c, argv[0], src_id, argv[0] + src_id + 1,
				   argv[1]);
	return cp_upload(c, argv[0], argv[1], dst_id, argv[1] + dst_id + 1);
}

/* One table for every command; struct command says which takes what. */
static const struct option long_options[] = {
	{ "socket", required_argument, NULL, 'S' },
	{ "help", no_argument, NULL, 'h' },
	{ "template", required_argument, NULL, 'T' },
	{ "timeout", required_argument, NULL, 't' },
	{ "env", required_argument, NULL, 'e' },
	{ "cwd", required_argument, NULL, 'C' },
	{ "stdin", no_argument, NULL, 'i' },
	{ "json", no_argument, NULL, 'j' },
	{ NULL, 0, NULL, 0 },
};

/* Takes option @opt; -1 to go on, or the exit status of a usage error. */
static int take_option(const struct command *cmd, struct options *o, int opt,
		       const char *arg)
{
	const char *eq;
	char *end;

	switch (opt) {
	case 'S':
		o->socket = arg;
		break;
	case 'T':
		o->template = arg;
		break;
	case 'C':
		o->cwd = arg;
		break;
	case 'i':
		o->send_stdin = true;
		break;
	case 'j':
		o->json = true;
		break;
	case 't':
		errno = 0;
		o->timeout_s = strtol(arg, &end, 10);
		if (errno || *end || end == arg || o->timeout_s < 1 ||
		    o->timeout_s > UINT32_MAX)
			return usage_error(
				cmd,
				"--timeout '%s' is not a number of seconds (1 or more)",
				arg);
		break;
	case 'e':
		eq = strchr(arg, '=');
		if (!eq || eq == arg)
			return usage_error(
				cmd, "--env takes KEY=VALUE, not '%s'", arg);
		if (!o->env)
			o->env = json_object();
		if (json_object_setn_new(o->env, arg, eq - arg,
					 json_string(eq + 1)) < 0)
			return usage_error(cmd, "--env '%s' is not UTF-8 text",
					   arg);
		break;
	}
	return -1;
}

/* -1 to go on, or the exit status (0 after --help). */
static int parse_options(const struct command *cmd, int argc, char **argv,
			 struct options *o)
{
	int opt, index = 0;

	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv,
				  cmd->stop_at_operand ? "+:h" : ":h",
				  long_options, &index)) != -1) {
		if (opt == 'h') {
			fputs(cmd->usage, stdout);
			return 0;
		}
		if (opt == ':')
			return usage_error(cmd, "option '%s' needs a value",
					   argv[optind - 1]);
		if (opt == '?' && optopt)
			return usage_error(cmd, "unknown option '-%c'", optopt);
		if (opt == '?')
			return usage_error(cmd, "unknown option '%s'",
					   argv[optind - 1]);
		if (opt != 'S' && !strchr(cmd->accepts, opt))
			return usage_error(cmd, "unknown option '--%s'",
					   long_options[index].name);
		int status = take_option(cmd, o, opt, optarg);
		if (status >= 0)
			return status;
	}
	return -1;
}

static int client_main(const struct command *cmd, int argc, char **argv)
{
	struct options o = { 0 };
	struct client c = { .cmd = cmd, .opts = &o };
	int status = parse_options(cmd, argc, argv, &o);

	if (status < 0) {
		thaw_catch_signals();
		status = cmd->run(&c, &o, argc - optind, argv + optind);
		if (thaw_interrupted) {
			fprintf(stderr, "%s: interrupted\n", cmd->name);
			status = 128 + thaw_interrupted;
		}
	}
	client_close(&c);
	json_decref(o.env);
	return status;
}

#define SOCKET_HELP                                                           \
	"Every command takes --socket PATH, the daemon's socket (default\n"   \
	"$THAW_SOCKET, else thawd.sock in the state directory,\n"             \
	"~/.local/state/thaw unless $THAW_STATE_DIR or $XDG_STATE_HOME say\n" \
	"otherwise), and sends $THAW_TOKEN as the bearer token when it is set.\n"

static const char sandbox_usage[] =
	"usage: thaw sandbox create [--template T] [--timeout S] [--env K=V]...\n"
	"       thaw sandbox ls [--json]\n"
	"       thaw sandbox rm ID...\n"
	"Sandboxes are clones thawd (thaw daemon) hands out from its warm pools.\n"
	"create prints the new sandbox's id; the daemon removes it --timeout\n"
	"seconds later (the template's default when not given) unless rm does\n"
	"first.  Its --env is set for every thaw exec in it.\n" SOCKET_HELP;

static const char exec_usage[] =
	"usage: thaw exec [--env K=V]... [--cwd DIR] [--timeout S] [--stdin]\n"
	"                 ID -- CMD [ARG...]\n"
	"Runs CMD in sandbox ID (see thaw sandbox create), copying its stdout\n"
	"and stderr as they come; --stdin sends all of our stdin to it.  Exits\n"
	"with CMD's exit status (128+signal if killed, 124 if --timeout passed,\n"
	"125 if thaw failed); ^C kills CMD.\n" SOCKET_HELP;

static const char cp_usage[] =
	"usage: thaw cp SRC DST\n"
	"Copies a file into or out of a sandbox: one of SRC and DST is\n"
	"ID:/abs/path, the other a local path, or - for stdin or stdout.  An\n"
	"upload keeps the local file's permission bits; a download replaces\n"
	"DST only once the whole file has arrived.\n" SOCKET_HELP;

#define SANDBOX "thaw sandbox "

static const struct command sandbox_commands[] = {
	{ .name = SANDBOX "create",
	  .usage = sandbox_usage,
	  .accepts = "Tte",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_create },
	{ .name = SANDBOX "ls",
	  .usage = sandbox_usage,
	  .accepts = "j",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_ls },
	{ .name = SANDBOX "rm",
	  .usage = sandbox_usage,
	  .accepts = "",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_rm },
};

int thaw_sandbox(int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;
	size_t n = sizeof(sandbox_commands) / sizeof(sandbox_commands[0]);

	if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		fputs(sandbox_usage, sub ? stdout : stderr);
		return sub ? 0 : EXIT_USAGE;
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(sandbox_commands[i].name + strlen(SANDBOX), sub))
			return client_main(&sandbox_commands[i], argc - 1,
					   argv + 1);
	fprintf(stderr, "thaw sandbox: unknown command '%s'\n%s", sub,
		sandbox_usage);
	return EXIT_USAGE;
}

int thaw_exec(int argc, char **argv)
{
	static const struct command exec = {
		.name = "thaw exec",
		.usage = exec_usage,
		.accepts = "eCti",
		.stop_at_operand = true,
		.usage_status = EXIT_THAW_ERROR,
		.fail_status = EXIT_THAW_ERROR,
		.run = exec_run,
	};

	return client_main(&exec, argc, argv);
}

int thaw_cp(int argc, char **argv)
{
	static const struct command cp = {
		.name = "thaw cp",
		.usage = cp_usage,
		.accepts = "",
		.usage_status = EXIT_USAGE,
		.fail_status = EXIT_FAILED,
		.run = cp_run,
	};

	return client_main(&cp, argc, argv);
}
