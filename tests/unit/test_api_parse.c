// SPDX-License-Identifier: Apache-2.0
/*
 * test_api_parse.c - what thawd makes of request bodies and query
 * arguments without a server (args_parse_exec, api_file_args): the inputs
 * the api_request fuzz harness found wrong, and their neighbours; the
 * network policy (args_parse_network) alone and in a create.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/daemon/api_internal.h"

/* args_parse_exec on @text for a sandbox without an environment: its
 * status, the request in @req. */
static int parse(const char *text, struct agent_exec_request *req, char *err,
		 size_t errlen)
{
	struct sandbox c = { .env = NULL };
	char **argv = NULL, **env = NULL;
	void *stdin_data = NULL;
	bool stream;
	json_t *body = json_loads(text, 0, NULL);

	cr_assert(body, "%s", text);
	*req = (struct agent_exec_request){ 0 };
	int status = args_parse_exec(body, c.env, req, &argv, &env, &stdin_data,
				     &stream, err, errlen);
	env_free(argv);
	env_free(env);
	free(stdin_data);
	json_decref(body);
	return status;
}

/* Found by api_request: timeout_s 6238026 became 6238026000 % 2^32 ms. */
Test(api_parse, exec_timeout_fits_the_agents_milliseconds)
{
	struct agent_exec_request req;
	char err[512];

	cr_expect_eq(parse("{\"cmd\":\"true\",\"timeout_s\":4294967}", &req,
			   err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(req.timeout_ms, 4294967000u);
	cr_expect_eq(parse("{\"cmd\":\"true\",\"timeout_s\":4294968}", &req,
			   err, sizeof(err)),
		     400);
	cr_expect(strstr(err, "\"timeout_s\""), "%s", err);
	cr_expect_eq(parse("{\"argv\":[\"c\"],\"timeout_s\":6238026}", &req,
			   err, sizeof(err)),
		     400);
}

Test(api_parse, file_args)
{
	char err[512];
	uint32_t mode;

	cr_expect_eq(api_file_args("/tmp/a", NULL, &mode, err, sizeof(err)), 0);
	cr_expect_eq(mode, 0644);
	cr_expect_eq(api_file_args("/tmp/a", "0600", &mode, err, sizeof(err)),
		     0);
	cr_expect_eq(mode, 0600);
	cr_expect_eq(api_file_args("/tmp/a", "10000", &mode, err, sizeof(err)),
		     400);
	cr_expect_eq(api_file_args("/tmp/a", "", &mode, err, sizeof(err)), 400);
	cr_expect_eq(api_file_args("tmp/a", NULL, &mode, err, sizeof(err)),
		     400);
	cr_expect_eq(api_file_args(NULL, NULL, &mode, err, sizeof(err)), 400);
}

/* args_parse_network on @text with @defaults; its status. */
static int parse_net(const char *text, const struct net_policy *defaults,
		     struct net_policy *out, char *err, size_t errlen)
{
	json_t *net = json_loads(text, JSON_DECODE_ANY, NULL);

	cr_assert(net, "%s", text);
	err[0] = '\0';
	int status = args_parse_network(net, defaults, out, err, errlen);
	json_decref(net);
	return status;
}

Test(api_parse, network_fields_replace_the_defaults)
{
	struct net_policy defaults = { .allow_internet = true,
				       .n_allow = 1,
				       .allow_out = { { 0x0a000000, 8 } } };
	struct net_policy p;
	char err[512];

	cr_assert_eq(parse_net("{}", &defaults, &p, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect(p.allow_internet);
	cr_expect_eq(p.n_allow, 1, "left out: the template's");
	cr_expect_eq(p.n_deny, 0);

	cr_assert_eq(parse_net("{\"allow_internet\":false,"
			       "\"allow_out\":[\"192.168.1.0/24\",\"1.2.3.4\"],"
			       "\"deny_out\":[\"0.0.0.0/0\"]}",
			       &defaults, &p, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_not(p.allow_internet);
	cr_assert_eq(p.n_allow, 2);
	cr_expect_eq(p.allow_out[0].addr, 0xc0a80100u);
	cr_expect_eq(p.allow_out[0].prefix, 24);
	cr_expect_eq(p.allow_out[1].addr, 0x01020304u);
	cr_expect_eq(p.allow_out[1].prefix, 32, "an address is its /32");
	cr_assert_eq(p.n_deny, 1);
	cr_expect_eq(p.deny_out[0].prefix, 0);

	/* An empty list is a list: it empties the template's. */
	cr_assert_eq(parse_net("{\"allow_out\":[]}", &defaults, &p, err,
			       sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(p.n_allow, 0);
}

/* Each bad "network" is a 400 whose message names what is wrong. */
Test(api_parse, bad_networks_name_the_field_and_value)
{
	static const struct {
		const char *text, *message;
	} bad[] = {
		{ "[]", "\"network\" must be an object" },
		{ "true", "\"network\" must be an object" },
		{ "{\"allow_internet\":1}",
		  "\"allow_internet\" must be true or false" },
		{ "{\"allow_internet\":\"false\"}", "must be true or false" },
		{ "{\"allow_in\":[]}", "unknown field \"allow_in\"" },
		{ "{\"allow_out\":\"10.0.0.0/8\"}",
		  "\"allow_out\" must be an array of at most 64 CIDRs" },
		{ "{\"deny_out\":{}}", "\"deny_out\" must be an array" },
		{ "{\"allow_out\":[10]}", "\"allow_out\"[0] is not a string" },
		{ "{\"deny_out\":[\"1.1.1.1\",\"10.0.0.1/8\"]}",
		  "\"deny_out\"[1]: '10.0.0.1/8' is not a CIDR: address bits "
		  "past /8 are set" },
		{ "{\"allow_out\":[\"10.0.0.0/33\"]}",
		  "'10.0.0.0/33' is not a CIDR" },
		{ "{\"allow_out\":[\"example.com\"]}",
		  "'example.com' is not a CIDR" },
		{ "{\"allow_out\":[\"\"]}", "'' is not a CIDR" },
		{ "{\"allow_out\":[\"::1/128\"]}", "'::1/128' is not a CIDR" },
	};
	struct net_policy defaults = { .allow_internet = true }, p;
	char err[512];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_expect_eq(
			parse_net(bad[i].text, &defaults, &p, err, sizeof(err)),
			400, "%s", bad[i].text);
		cr_expect(strstr(err, bad[i].message),
			  "%s: \"%s\" lacks \"%s\"", bad[i].text, err,
			  bad[i].message);
	}
}

/* NET_POLICY_MAX_CIDRS is the limit of each list. */
Test(api_parse, network_lists_hold_at_most_the_maps_size)
{
	struct net_policy defaults = { 0 }, p;
	json_t *list = json_array();
	char err[512], cidr[32];

	for (int i = 0; i < NET_POLICY_MAX_CIDRS; i++) {
		snprintf(cidr, sizeof(cidr), "10.0.%d.0/24", i);
		json_array_append_new(list, json_string(cidr));
	}
	json_t *net =
		json_pack("{s:O,s:O}", "allow_out", list, "deny_out", list);
	cr_expect_eq(args_parse_network(net, &defaults, &p, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(p.n_allow, NET_POLICY_MAX_CIDRS);
	cr_expect_eq(p.n_deny, NET_POLICY_MAX_CIDRS);
	json_array_append_new(list, json_string("10.1.0.0/16"));
	cr_expect_eq(args_parse_network(net, &defaults, &p, err, sizeof(err)),
		     400);
	cr_expect(strstr(err, "at most 64"), "%s", err);
	json_decref(net);
	json_decref(list);
}

/* POST /sandboxes' "network": from the template's defaults, refused for a
 * template without a network. */
Test(api_parse, create_takes_a_network)
{
	struct template_config t[2] = {
		{ .name = "default",
		  .timeout_s = 60,
		  .max_timeout_s = 600,
		  .network = true,
		  .allow_internet = true },
		{ .name = "offline", .timeout_s = 60, .max_timeout_s = 600 },
	};
	const struct daemon_config cfg = { .templates = t, .nr_templates = 2 };
	struct create_request req;
	char err[512];
	json_t *body;

	body = json_loads("{}", 0, NULL);
	req = (struct create_request){ 0 };
	cr_expect_eq(api_parse_create(body, &cfg, &req, err, sizeof(err)), 0);
	cr_expect_not(req.has_network, "none given: the pool's stays");
	json_decref(body);

	body = json_loads("{\"network\":{\"deny_out\":[\"8.8.8.8/32\"]}}", 0,
			  NULL);
	cr_expect_eq(api_parse_create(body, &cfg, &req, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect(req.has_network);
	cr_expect(req.network.allow_internet, "the template's");
	cr_expect_eq(req.network.n_deny, 1);
	json_decref(body);

	body = json_loads("{\"network\":{\"allow_out\":[\"10.0.0.0/80\"]}}", 0,
			  NULL);
	cr_expect_eq(api_parse_create(body, &cfg, &req, err, sizeof(err)), 400);
	cr_expect(strstr(err, "'10.0.0.0/80'"), "%s", err);
	json_decref(body);

	body = json_loads("{\"template\":\"offline\",\"network\":{}}", 0, NULL);
	cr_expect_eq(api_parse_create(body, &cfg, &req, err, sizeof(err)), 400);
	cr_expect(strstr(err, "template \"offline\" has no network"), "%s",
		  err);
	json_decref(body);

	body = json_loads("{\"network\":null}", 0, NULL);
	cr_expect_eq(api_parse_create(body, &cfg, &req, err, sizeof(err)), 0);
	cr_expect_not(req.has_network, "null: none given");
	json_decref(body);

	body = json_loads("{\"template\":\"offline\"}", 0, NULL);
	cr_expect_eq(api_parse_create(body, &cfg, &req, err, sizeof(err)), 0);
	json_decref(body);
	env_free(req.env);
}
