// SPDX-License-Identifier: Apache-2.0
/*
 * test_e2b_parse.c - pool/e2b/'s pure parts without a server: the Connect
 * envelope both ways (short, oversized, flagged, compressed, trailing
 * bytes), the Host header of envd requests, the route table (every route,
 * 405s, hostile ids), the control plane's create body and list query
 * (E2B's defaults, bounds, what thaw refuses), and Connect's error codes.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "pool/e2b/e2b_internal.h"

/* ---- envelopes ----------------------------------------------------------- */

/* @msg behind an envelope header of @flags and length @claimed. */
static size_t envelope(char *buf, uint8_t flags, uint32_t claimed,
		       const char *msg)
{
	size_t n = strlen(msg);

	buf[0] = (char)flags;
	buf[1] = (char)(claimed >> 24);
	buf[2] = (char)(claimed >> 16);
	buf[3] = (char)(claimed >> 8);
	buf[4] = (char)claimed;
	memcpy(buf + 5, msg, n);
	return 5 + n;
}

Test(envelope, opens_one_message)
{
	char buf[64] = { 0 }, err[256];
	const char *msg;
	size_t len, n = envelope(buf, 0, 7, "{\"a\":1}");

	cr_assert(e2b_envelope_open(buf, n, &msg, &len, err, sizeof(err)), "%s",
		  err);
	cr_expect_eq(len, 7);
	cr_expect_eq(msg, buf + 5);
	/* An empty message is one too. */
	n = envelope(buf, 0, 0, "");
	cr_expect(e2b_envelope_open(buf, n, &msg, &len, err, sizeof(err)));
	cr_expect_eq(len, 0);
}

Test(envelope, refuses_what_is_not_exactly_one)
{
	char buf[64] = { 0 }, err[256];
	const char *msg;
	size_t len;

	/* Shorter than a header. */
	cr_expect_not(e2b_envelope_open(buf, 0, &msg, &len, err, sizeof(err)));
	cr_expect_not(
		e2b_envelope_open("\0\0\0", 3, &msg, &len, err, sizeof(err)));
	/* A length past the body, or short of it (a second envelope). */
	size_t n = envelope(buf, 0, 8, "{\"a\":1}");
	cr_expect_not(e2b_envelope_open(buf, n, &msg, &len, err, sizeof(err)));
	n = envelope(buf, 0, 0xffffffffu, "{}");
	cr_expect_not(e2b_envelope_open(buf, n, &msg, &len, err, sizeof(err)));
	n = envelope(buf, 0, 1, "{}");
	cr_expect_not(e2b_envelope_open(buf, n, &msg, &len, err, sizeof(err)));
	cr_expect(strstr(err, "exactly one"), "%s", err);
	/* Compressed, end-of-stream or unknown flags. */
	n = envelope(buf, E2B_FLAG_COMPRESSED, 2, "{}");
	cr_expect_not(e2b_envelope_open(buf, n, &msg, &len, err, sizeof(err)));
	cr_expect(strstr(err, "compressed"), "%s", err);
	n = envelope(buf, E2B_FLAG_END_STREAM, 2, "{}");
	cr_expect_not(e2b_envelope_open(buf, n, &msg, &len, err, sizeof(err)));
	n = envelope(buf, 0x80, 2, "{}");
	cr_expect_not(e2b_envelope_open(buf, n, &msg, &len, err, sizeof(err)));
}

Test(envelope, made_envelopes_open_again)
{
	char err[256];
	const char *msg;
	size_t len, msg_len;
	char *env = e2b_envelope_make(0, json_pack("{s:i}", "pid", 42), &len);

	cr_assert(env);
	cr_expect(e2b_envelope_open(env, len, &msg, &msg_len, err, sizeof(err)),
		  "%s", err);
	cr_expect_eq(msg_len, strlen("{\"pid\":42}"));
	cr_expect_eq(memcmp(msg, "{\"pid\":42}", msg_len), 0);
	free(env);
	env = e2b_envelope_make(E2B_FLAG_END_STREAM, json_object(), &len);
	cr_assert(env);
	cr_expect_eq(len, 7);
	cr_expect_eq(env[0], E2B_FLAG_END_STREAM);
	free(env);
	cr_expect_null(e2b_envelope_make(0, NULL, &len));
}

/* ---- the Host header -------------------------------------------------------
 */

Test(host, port_and_id)
{
	char id[E2B_PATH_ID_MAX + 1];
	unsigned port;

	cr_assert(e2b_parse_host("49983-0123456789abcdef.e2b.app", &port, id));
	cr_expect_eq(port, 49983);
	cr_expect_str_eq(id, "0123456789abcdef");
	cr_assert(e2b_parse_host("3000-abc.localhost:8080", &port, id));
	cr_expect_eq(port, 3000);
	cr_expect_str_eq(id, "abc");
}

Test(host, hostile_or_other_hosts)
{
	static const char *const bad[] = {
		"",
		"localhost",
		"127.0.0.1:49999",
		"49983-abc",	      /* no domain */
		"49983-abc.",	      /* an empty one */
		"-abc.e2b.app",	      /* no port */
		"123456-abc.e2b.app", /* six digits */
		"49983-.e2b.app",
		"49983-a/b.e2b.app",
		"49983-a b.e2b.app",
		"49983-"
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		".e2b.app", /* 65 characters */
	};
	char id[E2B_PATH_ID_MAX + 1];
	unsigned port;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_not(e2b_parse_host(bad[i], &port, id), "%s", bad[i]);
}

/* ---- signed file URLs ------------------------------------------------------
 */

/* Signatures made by node's crypto as the SDK's getSignature makes them. */
Test(signature, the_sdks_signatures)
{
	cr_expect(e2b_signature_valid(
		"v1_HB2bgZ+RgifWQVkD4WDT8wNBFTVrggZWSRD5EqI0H/0",
		"/home/user/a.txt", "read", "user", "tok123", NULL, 0));
	cr_expect(e2b_signature_valid(
		"v1_O3ZeWsqOn61hDR9z+E1K/qsV9yuTwX6Aj8u25OCQPcw",
		"/home/user/a.txt", "write", "", "tok123", "1893456000",
		1893455999));
	/* Expired, another operation, path, user or token, no prefix. */
	cr_expect_not(e2b_signature_valid(
		"v1_O3ZeWsqOn61hDR9z+E1K/qsV9yuTwX6Aj8u25OCQPcw",
		"/home/user/a.txt", "write", "", "tok123", "1893456000",
		1893456001));
	cr_expect_not(e2b_signature_valid(
		"v1_HB2bgZ+RgifWQVkD4WDT8wNBFTVrggZWSRD5EqI0H/0",
		"/home/user/a.txt", "write", "user", "tok123", NULL, 0));
	cr_expect_not(e2b_signature_valid(
		"v1_HB2bgZ+RgifWQVkD4WDT8wNBFTVrggZWSRD5EqI0H/0",
		"/home/user/b.txt", "read", "user", "tok123", NULL, 0));
	cr_expect_not(e2b_signature_valid(
		"v1_HB2bgZ+RgifWQVkD4WDT8wNBFTVrggZWSRD5EqI0H/0",
		"/home/user/a.txt", "read", "root", "tok123", NULL, 0));
	cr_expect_not(e2b_signature_valid(
		"v1_HB2bgZ+RgifWQVkD4WDT8wNBFTVrggZWSRD5EqI0H/0",
		"/home/user/a.txt", "read", "user", "tok124", NULL, 0));
	cr_expect_not(e2b_signature_valid(
		"HB2bgZ+RgifWQVkD4WDT8wNBFTVrggZWSRD5EqI0H/0",
		"/home/user/a.txt", "read", "user", "tok123", NULL, 0));
	cr_expect_not(e2b_signature_valid("v1_", "", "read", "", "", NULL, 0));
	/* The same digest, its last character's spare bits set. */
	cr_expect_not(e2b_signature_valid(
		"v1_HB2bgZ+RgifWQVkD4WDT8wNBFTVrggZWSRD5EqI0H/1",
		"/home/user/a.txt", "read", "user", "tok123", NULL, 0));
	cr_expect_not(e2b_signature_valid(
		"v1_O3ZeWsqOn61hDR9z+E1K/qsV9yuTwX6Aj8u25OCQPcw",
		"/home/user/a.txt", "write", "", "tok123", "-1", 0));
}

/* ---- routes ----------------------------------------------------------------
 */

Test(routes, every_route_and_its_id)
{
	static const struct {
		const char *method, *url, *id;
		enum e2b_route_kind kind;
	} cases[] = {
		{ "POST", "/sandboxes", "", E2B_API },
		{ "POST", "/v2/sandboxes", "", E2B_API },
		{ "GET", "/v2/sandboxes/", "", E2B_API },
		{ "GET", "/sandboxes/abc-1_2", "abc-1_2", E2B_API },
		{ "DELETE", "/sandboxes/0123456789abcdef", "0123456789abcdef",
		  E2B_API },
		{ "POST", "/sandboxes/x/timeout", "x", E2B_API },
		{ "POST", "/sandboxes/x/refreshes", "x", E2B_API },
		{ "POST", "/sandboxes/x/pause", "x", E2B_API },
		{ "POST", "/sandboxes/x/resume", "x", E2B_API },
		{ "POST", "/v2/sandboxes/x/connect", "x", E2B_API },
		{ "POST", "/sandboxes/x/connect", "x", E2B_API },
		{ "POST", "/sandboxes/x/fork", "x", E2B_API },
		{ "POST", "/sandboxes/x/snapshots", "x", E2B_API },
		{ "PUT", "/sandboxes/x/network", "x", E2B_API },
		{ "GET", "/sandboxes/x/metrics", "x", E2B_API },
		{ "GET", "/snapshots", "", E2B_API },
		{ "DELETE", "/templates/0123456789abcdef", "0123456789abcdef",
		  E2B_API },
		{ "GET", "/templates", "", E2B_API },
		{ "GET", "/health", "", E2B_ENVD },
		{ "POST", "/process.Process/Start", "", E2B_RPC },
		{ "POST", "/process.Process/SendSignal", "", E2B_RPC },
	};
	char id[E2B_PATH_ID_MAX + 1];
	bool known;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct e2b_route *rt = e2b_find_route(
			cases[i].method, cases[i].url, id, &known);

		cr_assert(rt, "%s %s", cases[i].method, cases[i].url);
		cr_expect_str_eq(rt->method, cases[i].method);
		cr_expect_str_eq(id, cases[i].id, "%s", cases[i].url);
		cr_expect_eq(rt->kind, cases[i].kind, "%s", cases[i].url);
	}
}

Test(routes, wrong_method_and_hostile_paths)
{
	static const char *const missing[] = {
		"/",
		"/sandboxes//timeout",
		"/sandboxes/a/b/timeout",
		"/sandboxes/a%2f/timeout",
		"/sandboxes/../templates",
		"/sandboxes/a.b",
		"/sandboxes/abc/timeoutx",
		"/sandboxes/abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefghijklm",
		"/process.Process/Start/",
		"/process.Process/Nope",
		"//sandboxes",
	};
	char id[E2B_PATH_ID_MAX + 1];
	bool known;

	cr_expect_null(e2b_find_route("PUT", "/sandboxes", id, &known));
	cr_expect(known);
	cr_expect_null(e2b_find_route("GET", "/sandboxes/x/pause", id, &known));
	cr_expect(known);
	cr_expect_str_eq(id, "");
	for (size_t i = 0; i < sizeof(missing) / sizeof(missing[0]); i++) {
		const struct e2b_route *rt =
			e2b_find_route("POST", missing[i], id, &known);

		/* "/process.Process/Start/" is Start: one slash is allowed. */
		if (!strcmp(missing[i], "/process.Process/Start/")) {
			cr_expect(rt);
			continue;
		}
		cr_expect(!rt || rt->kind == E2B_API, "%s", missing[i]);
		cr_expect_null(e2b_find_route("GET", missing[i], id, &known),
			       "%s", missing[i]);
	}
}

/* ---- the control plane's bodies
 * ---------------------------------------------- */

static struct daemon_config cfg;

static void load_default(void)
{
	char err[512];

	cr_assert_eq(config_load(&cfg, NULL, err, sizeof(err)), 0, "%s", err);
}

static void free_default(void)
{
	config_free(&cfg);
}

/* e2b_parse_create of @text: its status, the request in @req (whose
 * env and metadata the caller frees with free_create). */
static int create(const char *text, struct e2b_create_request *req, char *err,
		  size_t errlen)
{
	json_t *body = json_loads(text, 0, NULL);

	cr_assert(body, "%s", text);
	int status = e2b_parse_create(body, &cfg, 300, req, err, errlen);
	json_decref(body);
	return status;
}

static void free_create(struct e2b_create_request *req)
{
	env_free(req->env);
	json_decref(req->metadata);
}

TestSuite(create, .init = load_default, .fini = free_default);

Test(create, base_is_the_default_template)
{
	struct e2b_create_request req;
	char err[512];

	cr_assert_eq(create("{}", &req, err, sizeof(err)), 0, "%s", err);
	cr_expect_str_eq(req.template->name, "default");
	cr_expect_str_eq(req.template_id, "base");
	cr_expect_eq(req.timeout_s, 300);
	cr_expect_eq(json_object_size(req.metadata), 0);
	free_create(&req);
	cr_assert_eq(create("{\"templateID\":\"base\",\"timeout\":300,"
			    "\"envVars\":{\"A\":\"1\"},\"metadata\":"
			    "{\"k\":\"v\"},\"secure\":true,\"autoPause\":"
			    "false,\"mcp\":null}",
			    &req, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(req.timeout_s, 300);
	cr_assert_eq(req.nr_env, 1);
	cr_expect_str_eq(req.env[0], "A=1");
	cr_expect_str_eq(json_string_value(json_object_get(req.metadata, "k")),
			 "v");
	free_create(&req);
}

Test(create, default_timeout_within_the_templates_bound)
{
	struct e2b_create_request req;
	char err[512];
	json_t *body = json_object();

	cfg.templates[0].max_timeout_s = 100;
	cr_expect_eq(e2b_parse_create(body, &cfg, 300, &req, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(req.timeout_s, 100);
	free_create(&req);
	json_decref(body);
}

Test(create, refuses_what_thaw_cannot_do)
{
	static const struct {
		const char *body;
		int status;
		const char *says;
	} cases[] = {
		{ "{\"templateID\":\"nope\"}", 404, "nope" },
		{ "{\"templateID\":7}", 400, "templateID" },
		{ "{\"timeout\":0}", 400, "timeout" },
		{ "{\"timeout\":86401}", 400, "timeout" },
		{ "{\"timeout\":\"5\"}", 400, "timeout" },
		{ "{\"envVars\":{\"A=B\":\"1\"}}", 400, "envVars" },
		{ "{\"envVars\":[]}", 400, "envVars" },
		{ "{\"metadata\":{\"k\":1}}", 400, "metadata" },
		{ "{\"metadata\":\"k=v\"}", 400, "metadata" },
		{ "{\"autoPause\":true}", 400, "autoPause" },
		{ "{\"volumeMounts\":[{\"name\":\"v\",\"path\":\"/v\"}]}", 400,
		  "volumeMounts" },
		{ "{\"allow_internet_access\":\"yes\"}", 400,
		  "allow_internet_access" },
		{ "{\"network\":{\"egressProxy\":{\"address\":\"p:1\"}}}", 400,
		  "egressProxy" },
	};
	struct e2b_create_request req;
	char err[512];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_expect_eq(create(cases[i].body, &req, err, sizeof(err)),
			     cases[i].status, "%s: %s", cases[i].body, err);
		cr_expect(strstr(err, cases[i].says), "%s: %s", cases[i].body,
			  err);
		free_create(&req);
	}
}

Test(create, metadata_is_bounded)
{
	struct e2b_create_request req;
	char err[512];
	json_t *m = json_object();

	for (int i = 0; i < 65; i++) {
		char key[16];

		snprintf(key, sizeof(key), "k%d", i);
		json_object_set_new(m, key, json_string("v"));
	}
	json_t *body = json_pack("{s:o}", "metadata", m);
	cr_expect_eq(e2b_parse_create(body, &cfg, 300, &req, err, sizeof(err)),
		     400);
	free_create(&req);
	json_decref(body);
}

Test(create, network_needs_a_networked_template)
{
	struct e2b_create_request req;
	char err[512];

	/* The default template has a network (nat). */
	cr_expect_eq(create("{\"allow_internet_access\":false}", &req, err,
			    sizeof(err)),
		     0, "%s", err);
	cr_expect(req.internet_given);
	cr_expect_not(req.internet);
	free_create(&req);
	cfg.templates[0].network = false;
	cr_expect_eq(create("{\"allow_internet_access\":true}", &req, err,
			    sizeof(err)),
		     400);
	free_create(&req);
	/* No network is no internet: asking for none holds. */
	cr_expect_eq(create("{\"allow_internet_access\":false}", &req, err,
			    sizeof(err)),
		     0, "%s", err);
	free_create(&req);
}

/* ---- the list query
 * ------------------------------------------------------------ */

Test(list_query, defaults_and_filters)
{
	struct e2b_list_query q;
	char err[512];

	cr_assert_eq(e2b_parse_list_query(NULL, NULL, NULL, NULL, &q, err,
					  sizeof(err)),
		     0);
	cr_expect(q.running && q.paused);
	cr_expect_eq(q.limit, 100);
	cr_expect_str_eq(q.next_token, "");
	json_decref(q.metadata);
	cr_assert_eq(e2b_parse_list_query("paused", "a%253Db=c%2526d&x=y", "5",
					  "0123456789abcdef", &q, err,
					  sizeof(err)),
		     0, "%s", err);
	cr_expect(!q.running && q.paused);
	cr_expect_eq(q.limit, 5);
	cr_expect_str_eq(q.next_token, "0123456789abcdef");
	/* Decoded twice, as the SDK encodes each part twice. */
	cr_expect_str_eq(json_string_value(json_object_get(q.metadata, "a=b")),
			 "c&d");
	cr_expect_str_eq(json_string_value(json_object_get(q.metadata, "x")),
			 "y");
	json_decref(q.metadata);
}

Test(list_query, refuses_bad_arguments)
{
	static const char *const bad[][4] = {
		{ "stopped", NULL, NULL, NULL },
		{ "running,", NULL, NULL, NULL },
		{ NULL, NULL, "0", NULL },
		{ NULL, NULL, "101", NULL },
		{ NULL, NULL, "-1", NULL },
		{ NULL, NULL, "99999999999", NULL },
		{ NULL, NULL, NULL, "../x" },
		{ NULL, "novalue", NULL, NULL },
	};
	struct e2b_list_query q;
	char err[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(e2b_parse_list_query(bad[i][0], bad[i][1],
						  bad[i][2], bad[i][3], &q, err,
						  sizeof(err)),
			     400, "case %zu", i);
		json_decref(q.metadata);
	}
}

/* ---- Connect's codes
 * -------------------------------------------------------------- */

Test(codes, names_statuses_and_errnos)
{
	cr_expect_str_eq(e2b_code_name(E2B_NOT_FOUND), "not_found");
	cr_expect_eq(e2b_code_status(E2B_NOT_FOUND), 404);
	cr_expect_str_eq(e2b_code_name(E2B_UNIMPLEMENTED), "unimplemented");
	cr_expect_eq(e2b_code_status(E2B_UNIMPLEMENTED), 501);
	cr_expect_eq(e2b_code_status(E2B_UNAUTHENTICATED), 401);
	cr_expect_str_eq(e2b_code_name((enum e2b_code)99), "unknown");
	cr_expect_eq(e2b_code_of_errno(ENOENT), E2B_NOT_FOUND);
	cr_expect_eq(e2b_code_of_errno(EEXIST), E2B_ALREADY_EXISTS);
	cr_expect_eq(e2b_code_of_errno(EACCES), E2B_PERMISSION_DENIED);
	cr_expect_eq(e2b_code_of_errno(EIO), E2B_INTERNAL);
	/* A WATCH past the agent's limits (guest/PROTOCOL.md). */
	cr_expect_eq(e2b_code_of_errno(ENOSPC), E2B_RESOURCE_EXHAUSTED);
	cr_expect_eq(e2b_code_of_errno(EMFILE), E2B_RESOURCE_EXHAUSTED);
	cr_expect_eq(e2b_code_of_status(409), E2B_FAILED_PRECONDITION);
	cr_expect_eq(e2b_code_of_status(503), E2B_UNAVAILABLE);
}
