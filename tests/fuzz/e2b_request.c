// SPDX-License-Identifier: Apache-2.0
/*
 * e2b_request.c - libFuzzer harness: what the E2B listener (pool/e2b/)
 * makes of a client's request once libmicrohttpd has parsed it: the
 * route, a Host header, the list query, a Connect envelope and the JSON
 * bodies of a create and of process.Process/Start's request.
 *
 * The input is text: a first line "METHOD PATH[?QUERY]", a second line,
 * the Host header, then the body.  e2b_find_route() takes the method and
 * path (an id it finds must be of the id characters); the query is split
 * at '&' and '=' (libmicrohttpd's job, done simply: no unescaping) and its
 * state=, metadata=, limit= and nextToken= go to e2b_parse_list_query();
 * path= and username= go to e2b_files_args() (/files' query), whose
 * resolved path must be clean: absolute, no empty, "." or ".." segment;
 * e2b_parse_host() takes the host (a port and id it finds must fit); the
 * body is opened as one Connect envelope (the message must lie inside
 * it), and both the envelope's message and the whole body go through
 * http_parse_object() and e2b_parse_create() against the embedded default
 * config.  Every allocation is freed on every path, as the handlers do.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool/e2b/e2b_internal.h"
#include "pool/e2b/filesystem.h"

#define ID_CHARS                                                         \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" \
	"_-"

static struct daemon_config cfg;

/* /files' ?path= and ?username=: a resolved path is clean. */
static void files_query(const char *path, const char *username)
{
	char user[E2B_USER_MAX + 1], resolved[E2B_PATH_MAX + 1], err[1024];

	if (e2b_files_args(path, username, user, resolved, err, sizeof(err)))
		return;
	size_t n = strlen(resolved);
	if (resolved[0] != '/' || n > E2B_PATH_MAX ||
	    (n > 1 && resolved[n - 1] == '/') || strstr(resolved, "//") ||
	    strstr(resolved, "/./") || strstr(resolved, "/../") ||
	    (n >= 2 && !strcmp(resolved + n - 2, "/.")) ||
	    (n >= 3 && !strcmp(resolved + n - 3, "/..")))
		abort();
}

/* The query's arguments the list takes, as the route would pass them. */
static void list_query(const char *query)
{
	const char *state = NULL, *metadata = NULL, *limit = NULL, *next = NULL;
	const char *path = NULL, *username = NULL;
	char *copy = strdup(query), *save = NULL, err[512];
	struct e2b_list_query q;

	if (!copy)
		abort();
	for (char *arg = strtok_r(copy, "&", &save); arg;
	     arg = strtok_r(NULL, "&", &save)) {
		char *eq = strchr(arg, '=');
		const char *value = "";

		if (eq) {
			*eq = '\0';
			value = eq + 1;
		}
		if (!strcmp(arg, "state"))
			state = value;
		else if (!strcmp(arg, "metadata"))
			metadata = value;
		else if (!strcmp(arg, "limit"))
			limit = value;
		else if (!strcmp(arg, "nextToken"))
			next = value;
		else if (!strcmp(arg, "path"))
			path = value;
		else if (!strcmp(arg, "username"))
			username = value;
	}
	files_query(path, username);
	if (!e2b_parse_list_query(state, metadata, limit, next, &q, err,
				  sizeof(err)) &&
	    (q.limit < 1 || q.limit > 100 || (!q.running && !q.paused)))
		abort();
	json_decref(q.metadata);
	free(copy);
}

static void create_body(const char *text, size_t len)
{
	struct e2b_create_request req;
	char err[1024];
	json_t *body = http_parse_object(text, len, err, sizeof(err));

	if (!body)
		return;
	if (!e2b_parse_create(body, &cfg, 300, &req, err, sizeof(err)) &&
	    (!req.metadata || !req.timeout_s))
		abort();
	env_free(req.env);
	json_decref(req.metadata);
	json_decref(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *text = (const char *)data;
	const char *nl = memchr(text, '\n', size);
	size_t line = nl ? (size_t)(nl - text) : size;
	const char *nl2 = nl ? memchr(nl + 1, '\n', size - line - 1) : NULL;
	char id[E2B_PATH_ID_MAX + 1], err[512];
	bool known;
	unsigned port;

	if (!cfg.nr_templates && config_load(&cfg, NULL, err, sizeof(err)))
		abort();
	char *head = strndup(text, line);
	if (!head)
		abort();
	char *url = strchr(head, ' ');
	if (url) {
		*url++ = '\0';
		char *query = strchr(url, '?');

		if (query)
			*query++ = '\0';
		const struct e2b_route *rt =
			e2b_find_route(head, url, id, &known);
		if (rt && strspn(id, ID_CHARS) != strlen(id))
			abort();
		if (query)
			list_query(query);
	}
	free(head);
	if (nl) {
		size_t host_len =
			nl2 ? (size_t)(nl2 - nl - 1) : size - line - 1;
		char *host = strndup(nl + 1, host_len);

		if (!host)
			abort();
		if (e2b_parse_host(host, &port, id) &&
		    (port > 99999 || !id[0] || strlen(id) > E2B_PATH_ID_MAX))
			abort();
		free(host);
	}
	if (nl2) {
		const char *body = nl2 + 1, *msg;
		size_t len = size - (size_t)(body - text), msg_len;

		if (e2b_envelope_open(body, len, &msg, &msg_len, err,
				      sizeof(err))) {
			if (msg < body || msg + msg_len > body + len)
				abort();
			create_body(msg, msg_len);
		}
		create_body(body, len);
	}
	return 0;
}
