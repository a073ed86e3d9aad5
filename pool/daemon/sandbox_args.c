// SPDX-License-Identifier: Apache-2.0
/*
 * sandbox_args.c - the request fields both front ends read alike
 * (sandbox_args.h): pure functions of a parsed JSON body, no daemon state.
 *
 * thaw's API and E2B's listener each parse their own protocol, but a
 * sandbox's env, network policy and command are the same things in both:
 * E2B's front end translates its fields into these shapes and lets the
 * same checks, with the same bounds and messages, decide.
 */
#include "pool/daemon/sandbox_args.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/base64.h"

/* The most timeout_s can be: the agent's TIMEOUT_MS is a u32. */
#define MAX_EXEC_TIMEOUT_S (UINT32_MAX / 1000)
/* The agent's PATH, used whenever we send an environment of our own. */
#define GUEST_PATH \
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

/* ---- fields -------------------------------------------------------------- */

/*
 * Checks @body's fields against @allowed (NULL-terminated); a field that
 * is not there is a typo a user would want to hear about.
 */
bool args_known_fields(json_t *body, const char *const allowed[], char *err,
		       size_t errlen)
{
	const char *key;
	json_t *value;

	json_object_foreach(body, key, value)
	{
		bool known = false;

		for (int i = 0; allowed[i]; i++)
			known |= !strcmp(key, allowed[i]);
		if (!known) {
			snprintf(err, errlen, "unknown field \"%s\"", key);
			return false;
		}
	}
	return true;
}

/* @field as a whole number in [min, max]; absent: @def. */
bool args_get_uint(json_t *body, const char *field, uint32_t min, uint32_t max,
		   uint32_t def, uint32_t *out, char *err, size_t errlen)
{
	json_t *v = json_object_get(body, field);

	*out = def;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max) {
		snprintf(err, errlen,
			 "\"%s\" must be a whole number from %u to %u", field,
			 min, max);
		return false;
	}
	*out = (uint32_t)json_integer_value(v);
	return true;
}

/* Appends KEY=VALUE entries of object @env to @v (grown); false on error. */
bool args_add_env(char ***v, size_t *n, json_t *env, char *err, size_t errlen)
{
	const char *key;
	json_t *value;

	if (!env || json_is_null(env))
		return true;
	if (!json_is_object(env)) {
		snprintf(err, errlen,
			 "\"env\" must be an object of string values");
		return false;
	}
	json_object_foreach(env, key, value)
	{
		if (!json_is_string(value) || !key[0] || strchr(key, '=')) {
			snprintf(
				err, errlen,
				"\"env\": \"%s\" must be a name without '=' with a string value",
				key);
			return false;
		}
		char **grown = realloc(*v, (*n + 2) * sizeof(**v));
		if (!grown)
			return false;
		*v = grown;
		if (asprintf(&grown[*n], "%s=%s", key,
			     json_string_value(value)) < 0)
			return false;
		grown[++*n] = NULL;
	}
	return true;
}

void env_free(char **env)
{
	for (size_t i = 0; env && env[i]; i++)
		free(env[i]);
	free(env);
}

/* ---- a sandbox's env and network ----------------------------------------- */

/*
 * A sandbox's env is kept for its whole lease and sent with every exec, in
 * one agent frame (1 MiB) with the command: it is bounded well below that.
 */
#define MAX_ENV_ENTRIES 256
#define MAX_ENV_BYTES (64u << 10)

bool args_env_fits(char *const *env, size_t n, char *err, size_t errlen)
{
	size_t bytes = 0;

	for (size_t i = 0; i < n; i++)
		bytes += strlen(env[i]) + 1;
	if (n <= MAX_ENV_ENTRIES && bytes <= MAX_ENV_BYTES)
		return true;
	snprintf(err, errlen,
		 "\"env\" has %zu entries of %zu bytes (as KEY=VALUE): at "
		 "most %d entries and %u bytes",
		 n, bytes, MAX_ENV_ENTRIES, MAX_ENV_BYTES);
	return false;
}

/* @what ("allow_out") of @net: at most NET_POLICY_MAX_CIDRS CIDRs. */
static bool parse_cidrs(json_t *net, const char *what, struct net_cidr *out,
			uint32_t *n, char *err, size_t errlen)
{
	json_t *list = json_object_get(net, what), *v;
	size_t i;

	if (!list)
		return true;
	if (!json_is_array(list) ||
	    json_array_size(list) > NET_POLICY_MAX_CIDRS) {
		snprintf(err, errlen,
			 "\"network\": \"%s\" must be an array of at most %d "
			 "CIDRs (\"A.B.C.D/N\")",
			 what, NET_POLICY_MAX_CIDRS);
		return false;
	}
	json_array_foreach(list, i, v)
	{
		char why[160];

		if (!json_is_string(v)) {
			snprintf(err, errlen,
				 "\"network\": \"%s\"[%zu] is not a string",
				 what, i);
			return false;
		}
		if (net_cidr_parse(json_string_value(v), &out[i], why,
				   sizeof(why)) < 0) {
			snprintf(err, errlen, "\"network\": \"%s\"[%zu]: %s",
				 what, i, why);
			return false;
		}
	}
	*n = (uint32_t)json_array_size(list);
	return true;
}

int args_parse_network(json_t *net, const struct net_policy *defaults,
		       struct net_policy *out, char *err, size_t errlen)
{
	static const char *const fields[] = { "allow_internet", "allow_out",
					      "deny_out", NULL };
	json_t *internet = json_object_get(net, "allow_internet");
	char why[256];

	*out = *defaults;
	if (!json_is_object(net)) {
		snprintf(err, errlen, "\"network\" must be an object");
		return 400;
	}
	if (!args_known_fields(net, fields, why, sizeof(why))) {
		snprintf(err, errlen, "\"network\": %s", why);
		return 400;
	}
	if (internet && !json_is_boolean(internet)) {
		snprintf(err, errlen,
			 "\"network\": \"allow_internet\" must be true or "
			 "false");
		return 400;
	}
	if (internet)
		out->allow_internet = json_is_true(internet);
	if (!parse_cidrs(net, "allow_out", out->allow_out, &out->n_allow, err,
			 errlen) ||
	    !parse_cidrs(net, "deny_out", out->deny_out, &out->n_deny, err,
			 errlen))
		return 400;
	return 0;
}

/* ---- times --------------------------------------------------------------- */

void args_format_time(int64_t ms, char *out, size_t len)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char base[32];

	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", gmtime_r(&s, &tm));
	snprintf(out, len, "%s.%03dZ", base, (int)(ms % 1000));
}

/* ---- a command ----------------------------------------------------------- */

static char **strv_copy(char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	char **copy = calloc(n + 1, sizeof(*copy));
	for (size_t i = 0; copy && i < n; i++) {
		copy[i] = strdup(v[i]);
		if (!copy[i]) {
			env_free(copy);
			return NULL;
		}
	}
	return copy;
}

int args_parse_exec(json_t *body, char *const *sandbox_env,
		    struct agent_exec_request *req, char ***argv_out,
		    char ***env_out, void **stdin_out, bool *stream, char *err,
		    size_t errlen)
{
	static const char *const fields[] = { "argv",	"cmd",	 "env",
					      "cwd",	"stdin", "timeout_s",
					      "stream", NULL };
	json_t *argv = json_object_get(body, "argv");
	json_t *cmd = json_object_get(body, "cmd");
	json_t *cwd = json_object_get(body, "cwd");
	json_t *in = json_object_get(body, "stdin");
	json_t *st = json_object_get(body, "stream");
	uint32_t timeout_s;
	size_t n = 0;

	if (!args_known_fields(body, fields, err, errlen) ||
	    !args_get_uint(body, "timeout_s", 0, MAX_EXEC_TIMEOUT_S, 0,
			   &timeout_s, err, errlen))
		return 400;
	if (!argv == !cmd) {
		snprintf(err, errlen,
			 "give exactly one of \"argv\" and \"cmd\"");
		return 400;
	}
	if (argv && (!json_is_array(argv) || !json_array_size(argv))) {
		snprintf(err, errlen,
			 "\"argv\" must be a non-empty array of strings");
		return 400;
	}
	if ((cmd && !json_is_string(cmd)) || (cwd && !json_is_string(cwd)) ||
	    (in && !json_is_string(in)) || (st && !json_is_boolean(st))) {
		snprintf(
			err, errlen,
			"\"cmd\", \"cwd\" and \"stdin\" must be strings, \"stream\" a boolean");
		return 400;
	}
	size_t count = argv ? json_array_size(argv) : 3;
	char **v = calloc(count + 1, sizeof(*v));
	if (!v)
		return 500;
	*argv_out = v;
	if (cmd) {
		v[0] = strdup("/bin/sh");
		v[1] = strdup("-c");
		v[2] = strdup(json_string_value(cmd));
	}
	for (size_t i = 0; argv && i < count; i++) {
		json_t *a = json_array_get(argv, i);

		if (!json_is_string(a)) {
			snprintf(
				err, errlen,
				"\"argv\" must be a non-empty array of strings");
			return 400;
		}
		v[i] = strdup(json_string_value(a));
	}
	for (size_t i = 0; i < count; i++)
		if (!v[i])
			return 500;
	json_t *env = json_object_get(body, "env");
	if ((env && !json_is_null(env) && json_object_size(env)) ||
	    sandbox_env) {
		/* The agent replaces its whole environment by ours: start
		 * from what it would have had. */
		char *base[] = { GUEST_PATH, "HOME=/root", NULL };

		*env_out = strv_copy(base);
		n = 2;
		char **copy = strv_copy(sandbox_env);
		for (size_t i = 0; copy && copy[i]; i++) {
			char **grown =
				realloc(*env_out, (n + 2) * sizeof(char *));
			if (!grown)
				break;
			*env_out = grown;
			grown[n++] = copy[i];
			grown[n] = NULL;
		}
		free(copy);
		if (!*env_out || !args_add_env(env_out, &n, env, err, errlen))
			return 400;
	}
	if (in) {
		size_t len;
		*stdin_out = base64_decode(json_string_value(in),
					   json_string_length(in), &len);
		if (!*stdin_out) {
			snprintf(err, errlen, "\"stdin\" is not base64");
			return 400;
		}
		req->stdin_data = *stdin_out;
		req->stdin_len = len;
	}
	req->argv = v;
	req->env = *env_out;
	req->cwd = cwd ? json_string_value(cwd) : NULL;
	req->timeout_ms = timeout_s * 1000;
	*stream = !st || json_is_true(st);
	return 0;
}
