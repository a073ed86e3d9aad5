// SPDX-License-Identifier: Apache-2.0
/*
 * api_request.c - libFuzzer harness: what thawd makes of a client's request
 * once libmicrohttpd has parsed it: the route, the query string's
 * arguments and the JSON body of every endpoint.
 *
 * The input is a request as text: a first line "PATH[?QUERY]", then the
 * body.  api_parse_route() takes the path; the query is split at '&' and
 * '=' (libmicrohttpd's job, done simply here: no unescaping) and its first
 * path= and mode= go to api_file_args(), as the files routes do; the body
 * goes through api_body_object() and then every endpoint's validation:
 * args_parse_exec() (a sandbox with and without a create-time environment,
 * by the path's length), api_parse_create(), api_parse_create_from(),
 * api_parse_timeout() and args_parse_network() (the body of POST
 * /sandboxes/ID/network, and a create's "network"). Every allocation is freed
 * on every path, as the handlers do.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "pool/daemon/api_internal.h"

/* The default template's limits (config.h's embedded default). */
#define TIMEOUT_S 300
#define MAX_TIMEOUT_S 86400

static void query_args(const char *query)
{
	const char *path = NULL, *mode = NULL;
	char *copy = strdup(query), *save = NULL, err[512];
	uint32_t bits;

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
		if (!path && !strcmp(arg, "path"))
			path = value;
		else if (!mode && !strcmp(arg, "mode"))
			mode = value;
	}
	if (!api_file_args(path, mode, &bits, err, sizeof(err)) && bits > 07777)
		abort();
	free(copy);
}

static void exec_body(json_t *body, bool sandbox_env)
{
	char *env[] = { "LANG=C.UTF-8", "TZ=UTC", NULL };
	struct sandbox c = { .env = sandbox_env ? env : NULL };
	struct agent_exec_request req = { 0 };
	char **argv = NULL, **envp = NULL, err[1024];
	void *stdin_data = NULL;
	bool stream;

	if (!args_parse_exec(body, c.env, &req, &argv, &envp, &stdin_data,
			     &stream, err, sizeof(err))) {
		json_t *t = json_object_get(body, "timeout_s");

		if (!req.argv || !req.argv[0])
			abort();
		/* The agent gets the time-out the client asked for. */
		if (json_is_integer(t) &&
		    req.timeout_ms != json_integer_value(t) * 1000)
			abort();
	}
	env_free(argv);
	env_free(envp);
	free(stdin_data);
}

/* What the maps can hold: each list within its size, each CIDR canonical. */
static bool cidrs_ok(const struct net_cidr *cidrs, uint32_t n)
{
	if (n > NET_POLICY_MAX_CIDRS)
		return false;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t mask =
			cidrs[i].prefix ? ~0u << (32 - cidrs[i].prefix) : 0;

		if (cidrs[i].prefix > 32 || (cidrs[i].addr & ~mask))
			return false;
	}
	return true;
}

static bool policy_ok(const struct net_policy *p)
{
	return cidrs_ok(p->allow_out, p->n_allow) &&
	       cidrs_ok(p->deny_out, p->n_deny);
}

/* POST /sandboxes against the default template's lease limits. */
static void create_body(json_t *body)
{
	static struct template_config tdefault = {
		.name = "default",
		.timeout_s = TIMEOUT_S,
		.max_timeout_s = MAX_TIMEOUT_S,
		.network = true,
		.allow_internet = true,
	};
	static const struct daemon_config cfg = { .templates = &tdefault,
						  .nr_templates = 1 };
	struct create_request req = { 0 };
	json_t *net = json_object_get(body, "network");
	char err[512];

	if (api_parse_create(body, &cfg, &req, err, sizeof(err)) == 0 &&
	    (req.template != &tdefault || req.timeout_s < 1 ||
	     req.timeout_s > MAX_TIMEOUT_S ||
	     req.has_network != (net && !json_is_null(net)) ||
	     (req.has_network && !policy_ok(&req.network))))
		abort();
	env_free(req.env);
}

/* POST /sandboxes with a "snapshot": an id, a count in bounds. */
static void create_from_body(json_t *body)
{
	struct create_from_request req = { 0 };
	char err[512];

	if (api_parse_create_from(body, &req, err, sizeof(err)) == 0 &&
	    (strlen(req.snapshot) != SANDBOX_ID_LEN ||
	     strspn(req.snapshot, "0123456789abcdef") != SANDBOX_ID_LEN ||
	     req.count < 1 || req.count > MAX_FORKS))
		abort();
	env_free(req.env);
}

/* POST /sandboxes/ID/network, the default template's defaults. */
static void network_body(json_t *body)
{
	const struct net_policy defaults = { .allow_internet = true };
	struct net_policy p;
	char err[512];

	if (!args_parse_network(body, &defaults, &p, err, sizeof(err)) &&
	    (!policy_ok(&p) ||
	     p.allow_internet !=
		     !json_is_false(json_object_get(body, "allow_internet"))))
		abort();
}

/* POST /sandboxes/ID/timeout. */
static void timeout_body(json_t *body)
{
	char err[512];
	uint32_t timeout_s;

	if (api_parse_timeout(body, MAX_TIMEOUT_S, &timeout_s, err,
			      sizeof(err)) &&
	    (timeout_s < 1 || timeout_s > MAX_TIMEOUT_S))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char id[SANDBOX_ID_LEN + 1], err[1024];
	const uint8_t *nl = memchr(data, '\n', size);
	size_t line = nl ? (size_t)(nl - data) : size;
	char *url = strndup((const char *)data, line);

	if (!url)
		abort();
	char *query = strchr(url, '?');
	if (query)
		*query++ = '\0';
	const struct api_route *route = api_parse_route(url, id);
	if (route && route->kind != ROUTE_PLAIN &&
	    strlen(id) != strspn(id, "0123456789abcdef"))
		abort();
	if (query)
		query_args(query);

	struct request r = {
		.x.body = { .buf = nl ? (char *)nl + 1 : NULL,
			    .len = nl ? size - line - 1 : 0 },
	};
	json_t *body = api_body_object(&r, err, sizeof(err));
	if (body) {
		exec_body(body, strlen(url) % 2);
		create_body(body);
		create_from_body(body);
		timeout_body(body);
		network_body(body);
		json_decref(body);
	}
	free(url);
	return 0;
}
