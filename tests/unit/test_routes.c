// SPDX-License-Identifier: Apache-2.0
/*
 * test_routes.c - thawd's URL routing (api_parse_route) without a server:
 * every route with and without one trailing slash, and hostile paths
 * (empty, "/", short prefixes, empty and over-long ids, an id followed by
 * junk, percent escapes libmicrohttpd did not decode, very long paths),
 * which must name no route and leave no id.  Under ASan a read past a
 * URL's end fails here.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "pool/daemon/api_internal.h"

#define ID "0123456789abcdef"

static char id[SANDBOX_ID_LEN + 1];

/* @url exactly as a heap string of its own length, so ASan sees a read
 * one byte past it. */
static const struct api_route *route_of(const char *url)
{
	char *copy = strdup(url);
	const struct api_route *rt;

	cr_assert_not_null(copy);
	memset(id, 'x', sizeof(id) - 1);
	id[sizeof(id) - 1] = '\0';
	rt = api_parse_route(copy, id);
	free(copy);
	return rt;
}

static void expect_route(const char *url, const char *path,
			 enum route_kind kind, const char *want_id)
{
	const struct api_route *rt = route_of(url);

	cr_assert_not_null(rt, "%s: no route", url);
	cr_expect_str_eq(rt->path, path, "%s", url);
	cr_expect_eq(rt->kind, kind, "%s", url);
	cr_expect_str_eq(id, want_id, "%s", url);
}

static void expect_none(const char *url)
{
	cr_expect_null(route_of(url), "\"%.80s\" has a route", url);
	cr_expect_str_empty(id, "\"%.80s\" left id \"%s\"", url, id);
}

Test(routes, each_route_with_and_without_a_trailing_slash)
{
	static const char *const fixed[] = { "/sandboxes", "/templates",
					     "/snapshots", "/health",
					     "/metrics" };
	static const char *const sub[] = {
		"",	     "/exec",  "/timeout",    "/network",
		"/ping",     "/files", "/checkpoint", "/fork",
		"/rollback", "/pause", "/resume",
	};
	char url[128];

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		expect_route(fixed[i], fixed[i], ROUTE_PLAIN, "");
		snprintf(url, sizeof(url), "%s/", fixed[i]);
		expect_route(url, fixed[i], ROUTE_PLAIN, "");
	}
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++) {
		snprintf(url, sizeof(url), "/sandboxes/" ID "%s", sub[i]);
		expect_route(url, sub[i], ROUTE_SANDBOX, ID);
		snprintf(url, sizeof(url), "/sandboxes/" ID "%s/", sub[i]);
		expect_route(url, sub[i], ROUTE_SANDBOX, ID);
	}
	expect_route("/sandboxes/5f", "", ROUTE_SANDBOX, "5f");
	expect_route("/snapshots/" ID, "", ROUTE_SNAPSHOT, ID);
	expect_route("/snapshots/" ID "/", "", ROUTE_SNAPSHOT, ID);
}

Test(routes, hostile_paths_name_no_route)
{
	static const char *const bad[] = {
		"",
		"/",
		"//",
		"/x",
		"/s",
		"/sandboxes//",
		"/sandboxesx",
		"/sandboxes//exec",
		"/sandboxes///exec",
		"/sandboxes/" ID "junk/exec",
		"/sandboxes/" ID "0",
		"/sandboxes/" ID "0/exec",
		"/sandboxes/" ID "//",
		"/sandboxes/" ID "/exec//",
		"/sandboxes/" ID "/exe",
		"/sandboxes/" ID "/execx",
		"/sandboxes/" ID "/exec/more",
		"/sandboxes/0123456789ABCDEF/exec",
		"/sandboxes/%30123456789abcdef/exec",
		"/sandboxes/" ID "%2Fexec",
		"/sandboxes/../health",
		"/sandboxes/./exec",
		"/sandboxes/ 0123456789abcde/exec",
		"/health?x=1",
		"/healthz",
		"/templates/default",
		"/snapshots//",
		"/snapshots/" ID "junk",
		"/snapshots/" ID "/exec",
		"/snapshots/" ID "/checkpoint",
		"/snapshots/0123456789ABCDEF",
		"/snapshotsx/" ID,
		"/sandboxes/" ID "/snapshots",
		"health",
		"sandboxes/" ID,
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_none(bad[i]);
}

Test(routes, very_long_paths_name_no_route)
{
	size_t len = 1 << 20;
	char *url = malloc(len + 1);

	cr_assert_not_null(url);
	memset(url, 'a', len);
	url[len] = '\0';
	memcpy(url, "/sandboxes/", 11);
	expect_none(url);
	memset(url + 11, '/', len - 11);
	expect_none(url);
	memcpy(url + len - 5, "/exec", 5);
	memcpy(url + 11, ID, 16);
	expect_none(url);
	free(url);
}

/* Every prefix of every route: none reads past its end. */
Test(routes, every_prefix_of_a_route)
{
	static const char url[] = "/sandboxes/" ID "/files/";
	char prefix[sizeof(url)];

	for (size_t n = 0; n < sizeof(url) - 1; n++) {
		memcpy(prefix, url, n);
		prefix[n] = '\0';
		route_of(prefix);
	}
	expect_route("/sandboxes/" ID "/f"
		     "iles",
		     "/files", true, ID);
}
