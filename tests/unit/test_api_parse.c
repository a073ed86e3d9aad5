// SPDX-License-Identifier: Apache-2.0
/*
 * test_api_parse.c - what thawd makes of request bodies and query
 * arguments without a server (api_parse_exec, api_file_args): the inputs
 * the api_request fuzz harness found wrong, and their neighbours.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>

#include "api_internal.h"

/* api_parse_exec on @text for a sandbox without an environment: its
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
	int status = api_parse_exec(body, &c, req, &argv, &env, &stdin_data,
				    &stream, err, errlen);
	api_free_strv(argv);
	api_free_strv(env);
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
