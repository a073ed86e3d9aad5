// SPDX-License-Identifier: Apache-2.0
/*
 * test_daemon_api.c - thawd's HTTP API on real KVM, the way clients drive it
 * and misuse it: bad requests get their status and code, clients that stall,
 * vanish or send garbage, a client gone mid-exec, exec streams, file round
 * trips, /health and /metrics.
 *
 * daemon_suite.h says how daemon-in-vm.sh runs it and what it shares with
 * the other test_daemon_* suites.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/daemon_suite.h"
#include "tests/integration/harness.h"

DAEMON_SUITE_HOOKS();

TestSuite(api, .init = connect_daemon);

/* ---- api ---- */

Test(api, bad_requests_get_their_status_and_code, .timeout = 600)
{
	char id[SB_ID_MAX], path[256];
	const char *unknown = "/sandboxes/sb-0000000000000000";

	create("{}", id);
	expect_json_error("POST", "/sandboxes", "{\"template\":", 400,
			  "bad_request");
	expect_json_error("POST", "/sandboxes", "{\"templat\":\"default\"}",
			  400, "bad_request");
	expect_json_error("POST", "/sandboxes", "{\"timeout_s\":\"10\"}", 400,
			  "bad_request");
	expect_json_error("POST", "/sandboxes", "[]", 400, "bad_request");
	expect_json_error("POST", "/sandboxes", "{\"template\":\"nope\"}", 404,
			  "not_found");
	expect_json_error("GET", unknown, NULL, 404, "not_found");
	expect_json_error("DELETE", unknown, NULL, 404, "not_found");
	snprintf(path, sizeof(path), "%s/exec", unknown);
	expect_json_error("POST", path, "{\"argv\":[\"true\"]}", 404,
			  "not_found");
	snprintf(path, sizeof(path), "%s/ping", unknown);
	expect_json_error("POST", path, NULL, 404, "not_found");
	snprintf(path, sizeof(path), "/sandboxes/%s/ping", id);
	expect_error("GET", path, NULL, 0, true, 405, "method_not_allowed",
		     "POST");
	expect_json_error("GET", "/nope", NULL, 404, "not_found");
	expect_error("DELETE", "/templates", NULL, 0, true, 405,
		     "method_not_allowed", "GET");
	expect_error("PUT", "/sandboxes", "{}", 2, true, 405,
		     "method_not_allowed", "GET POST");
	expect_error("GET", "/health", NULL, 0, false, 401, "unauthorized",
		     NULL);
	expect_error("POST", "/sandboxes", "{}", 2, false, 401, "unauthorized",
		     NULL);

	/* A valid object padded past max_request_bytes. */
	size_t big = MAX_REQUEST_BYTES + 4096;
	char *body = malloc(big + 1);
	memset(body, ' ', big);
	memcpy(body, "{}", 2);
	body[big] = '\0';
	expect_json_error("POST", "/sandboxes", body, 413, "too_large");
	free(body);

	snprintf(path, sizeof(path), "/sandboxes/%s/exec", id);
	expect_json_error("POST", path,
			  "{\"argv\":[\"true\"],\"cmd\":\"true\"}", 400,
			  "bad_request");
	expect_json_error("POST", path, "{\"argv\":[]}", 400, "bad_request");
	expect_json_error("POST", path, "{}", 400, "bad_request");
	expect_json_error("POST", path, "{\"argv\":[\"true\"],\"stdin\":\"*\"}",
			  400, "bad_request");
	snprintf(path, sizeof(path), "/sandboxes/%s/files?path=tmp/x", id);
	expect_error("PUT", path, "data", 4, true, 400, "bad_request", NULL);
	snprintf(path, sizeof(path), "/sandboxes/%s/files?path=%%2Fno%%2Fsuch",
		 id);
	expect_json_error("GET", path, NULL, 404, "not_found");
	snprintf(path, sizeof(path), "/sandboxes/%s/files?path=%%2Ftmp", id);
	expect_json_error("GET", path, NULL, 409, "conflict");
	expect_echo(id, "still-fine");
	delete_sandbox(id);
}

/* How many sandboxes the daemon has handed out, from GET /sandboxes. */
static size_t sandbox_count(void)
{
	struct reply r;

	cr_assert_eq(api(&r, "GET", NULL, "/sandboxes"), 200, "%s", r.body);
	size_t n = json_array_size(json_object_get(r.json, "sandboxes"));
	reply_free(&r);
	return n;
}

Test(api, stalled_vanishing_and_garbage_clients, .timeout = 600)
{
	char buf[4096];
	struct reply r;
	size_t before = sandbox_count();

	/* Half a create, then gone. */
	int fd = raw_connect();
	raw_write(fd, "POST /sandboxes HTTP/1.1\r\n" RAW_HEADERS
		      "Content-Length: 100\r\n\r\n{\"templ");
	close(fd);

	/* Half a request line, held open while others are served. */
	int stalled = raw_connect();
	raw_write(stalled, "GET /heal");
	for (int i = 0; i < 5; i++) {
		cr_expect_eq(api(&r, "GET", NULL, "/health"), 200, "%s",
			     r.body);
		cr_expect_lt(r.seconds, 2.0 * guest_slowness(),
			     "health behind a stalled client");
		reply_free(&r);
	}

	/* Not HTTP: an error answer or a closed connection, nothing else. */
	fd = raw_connect();
	raw_write(fd, "HELLO THERE\r\n\r\n");
	raw_wait_for(fd, "\r\n\r\n", scaled_s(10), buf, sizeof(buf));
	int status = 0;
	sscanf(buf, "HTTP/1.%*d %d", &status);
	cr_expect(buf[0] == '\0' || status >= 400, "garbage answered: %s", buf);
	close(fd);
	close(stalled);

	cr_expect_eq(api(&r, "GET", NULL, "/health"), 200, "%s", r.body);
	reply_free(&r);
	cr_expect_eq(sandbox_count(), before, "half a create made a sandbox");
}

Test(api, disconnect_mid_exec_kills_the_command, .timeout = 600)
{
	const char *body = "{\"cmd\":\"sleep 1000; touch /tmp/x\","
			   "\"stream\":true}";
	const char *check = "ps | grep -q '[s]leep 1000' && echo running; "
			    "[ -e /tmp/x ] && echo touched; echo checked";
	char id[SB_ID_MAX], buf[4096];
	struct exec_result x = { 0 };

	create("{}", id);
	int fd = raw_connect();
	raw_write(fd,
		  "POST /sandboxes/%s/exec HTTP/1.1\r\n" RAW_HEADERS
		  "Content-Length: %zu\r\n\r\n%s",
		  id, strlen(body), body);
	cr_assert(raw_wait_for(fd, "started", scaled_s(60), buf, sizeof(buf)),
		  "no started event: %s", buf);
	cr_expect_not_null(strstr(buf, " 200 "), "%s", buf);
	close(fd);

	double start = now_s();
	do {
		exec_result_free(&x);
		sleep_s(0.5);
		run_cmd(id, check, scaled_s(30), &x);
	} while (strcmp(x.out, "checked\n") && now_s() - start < scaled_s(30));
	fprintf(stderr, "test_daemon: command gone %.1f s after disconnect\n",
		now_s() - start);
	cr_expect_str_eq(x.out, "checked\n", "the command lives on");
	exec_result_free(&x);
	expect_echo(id, "served");
	delete_sandbox(id);
}

Test(api, exec_streams_and_reports, .timeout = 600)
{
	char id[SB_ID_MAX], *in = base64_encode("to stdin\n", 9);
	struct exec_result x;
	struct reply r;

	create("{\"env\":{\"A\":\"sandbox\",\"B\":\"sandbox\"}}", id);

	/* Streamed, with stdin: the events in order. */
	exec_json(&r, id,
		  json_pack("{s:[s,s,s], s:s}", "argv", "sh", "-c",
			    "cat; echo oops >&2; exit 3", "stdin", in),
		  0);
	cr_expect_eq(strncmp(r.type, "application/x-ndjson", 20), 0,
		     "Content-Type %s", r.type);
	parse_exec(&r, true, &x);
	cr_expect_str_empty(x.problem, "%s in: %s", x.problem, r.body);
	cr_expect_str_eq(x.out, "to stdin\n");
	cr_expect_str_eq(x.err, "oops\n");
	cr_expect_eq(x.exit_code, 3);
	cr_expect_eq(x.signal, -1);
	cr_expect_not(x.timed_out);
	exec_result_free(&x);
	reply_free(&r);

	/* Killed by a signal, streamed and not. */
	exec_json(&r, id, json_pack("{s:s}", "cmd", "echo before; kill -9 $$"),
		  0);
	parse_exec(&r, true, &x);
	cr_expect_str_empty(x.problem, "%s in: %s", x.problem, r.body);
	cr_expect_eq(x.signal, 9, "%s", r.body);
	cr_expect_eq(x.exit_code, -1, "%s", r.body);
	cr_expect_str_eq(x.out, "before\n");
	exec_result_free(&x);
	reply_free(&r);
	run_cmd(id, "kill -TERM $$", scaled_s(30), &x);
	cr_expect_eq(x.signal, 15);
	exec_result_free(&x);

	/* The exec's env wins over the sandbox's; cwd; the time limit. */
	exec_json(&r, id,
		  json_pack("{s:s, s:{s:s}, s:s, s:b}", "cmd",
			    "echo $A $B; pwd", "env", "B", "exec", "cwd",
			    "/tmp", "stream", 0),
		  0);
	parse_exec(&r, false, &x);
	cr_expect_str_eq(x.out, "sandbox exec\n/tmp\n", "%s", r.body);
	exec_result_free(&x);
	reply_free(&r);
	double start = now_s();
	run_cmd(id, "sleep 100", 1, &x);
	cr_expect(x.timed_out, "sleep 100 with timeout_s 1 not timed out");
	cr_expect_lt(now_s() - start, scaled_s(30));
	exec_result_free(&x);

	/* Output past max_exec_output_bytes is cut. */
	run_cmd(id, "head -c 2000000 /dev/zero", scaled_s(60), &x);
	cr_expect(x.truncated, "2000000 bytes of output not truncated");
	cr_expect_leq(x.out_len, MAX_EXEC_OUTPUT);
	cr_expect_gt(x.out_len, 0);
	exec_result_free(&x);
	free(in);
	delete_sandbox(id);
}

Test(api, file_round_trip, .timeout = 600)
{
	char id[SB_ID_MAX], path[256];
	char *data = malloc(FILE_BYTES);
	struct exec_result x;
	struct reply r;

	for (size_t n = 0; n < FILE_BYTES;) {
		ssize_t got = getrandom(data + n, FILE_BYTES - n, 0);

		cr_assert_gt(got, 0, "getrandom: %s", strerror(errno));
		n += got;
	}
	create("{}", id);
	/* "/tmp/round trip.bin", percent-encoded. */
	snprintf(path, sizeof(path),
		 "/sandboxes/%s/files?path=%%2Ftmp%%2Fround%%20trip.bin&"
		 "mode=0600",
		 id);
	request(&(struct call){ .method = "PUT",
				.path = path,
				.body = data,
				.len = FILE_BYTES },
		&r);
	cr_expect_eq(r.status, 204, "PUT: %ld %s", r.status, r.body);
	reply_free(&r);

	snprintf(path, sizeof(path),
		 "/sandboxes/%s/files?path=%%2Ftmp%%2Fround%%20trip.bin", id);
	request(&(struct call){ .method = "GET", .path = path }, &r);
	cr_expect_eq(r.status, 200, "GET: %ld", r.status);
	cr_expect_eq(strncmp(r.type, "application/octet-stream", 24), 0,
		     "Content-Type %s", r.type);
	cr_expect_eq(r.len, FILE_BYTES);
	cr_expect(r.len == FILE_BYTES && !memcmp(r.body, data, FILE_BYTES),
		  "the file came back different");
	fprintf(stderr, "test_daemon: 1 MiB file in; out in %.3f s\n",
		r.seconds);
	reply_free(&r);
	run_cmd(id, "stat -c %a '/tmp/round trip.bin'", scaled_s(30), &x);
	cr_expect_str_eq(x.out, "600\n");
	exec_result_free(&x);
	free(data);
	delete_sandbox(id);
}

Test(api, health_and_metrics, .timeout = 600)
{
	char id[SB_ID_MAX];
	struct reply r;

	cr_assert_eq(api(&r, "GET", NULL, "/health"), 200);
	cr_expect_str_eq(jstr(r.json, "status"), "ok", "%s", r.body);
	cr_expect(!isnan(jnum(r.json, "sandboxes")) &&
			  !isnan(jnum(r.json, "uptime_s")),
		  "%s", r.body);
	/* Limits fail closed: a daemon that runs has them all (the
	 * templates' CPU quota is the default, one CPU per vCPU). */
	json_t *limits = json_object_get(r.json, "limits");
	cr_expect(json_is_true(json_object_get(limits, "memory")) &&
			  json_is_true(json_object_get(limits, "pids")) &&
			  json_is_true(json_object_get(limits, "cpu")),
		  "%s", r.body);
	reply_free(&r);

	double before = handouts();
	create("{}", id);
	double after = handouts();
	cr_expect(before >= 0 && after == before + 1,
		  "thaw_handouts_total %f, was %f", after, before);
	cr_assert_eq(api(&r, "GET", NULL, "/metrics"), 200);
	cr_expect_eq(strncmp(r.type, "text/plain", 10), 0, "%s", r.type);
	cr_expect_not_null(strstr(r.body, "\nthaw_handout_seconds_bucket{"),
			   "%s", r.body);
	cr_expect_not_null(strstr(r.body, "# TYPE thaw_handout_seconds "
					  "histogram"),
			   "%s", r.body);
	cr_expect_not_null(strstr(r.body, "# TYPE thaw_handouts_total "
					  "counter"),
			   "%s", r.body);
	/* The template has a network (network = nat, the default): each
	 * clone's was made, and timed, before its VMM started. */
	static const char *const counted[] = { "restore_host", "restore_guest",
					       "network_setup" };
	for (size_t i = 0; i < sizeof(counted) / sizeof(counted[0]); i++) {
		char metric[80];

		snprintf(metric, sizeof(metric),
			 "\nthaw_%s_seconds_count{template=\"default\"} ",
			 counted[i]);
		const char *count = strstr(r.body, metric);
		cr_expect(count && atof(count + strlen(metric)) >= 1,
			  "nothing counted in %s: %s", metric + 1, r.body);
	}
	reply_free(&r);

	cr_assert_eq(api(&r, "GET", NULL, "/sandboxes/%s", id), 200);
	cr_expect(vmm_alive((pid_t)jnum(r.json, "pid")), "%s", r.body);
	cr_expect_str_eq(jstr(r.json, "template"), "default");
	char problem[512];
	check_restore_phases(r.json, problem, sizeof(problem));
	cr_expect_str_empty(problem, "%s", problem);
	cr_expect(jnum(json_object_get(r.json, "restore"), "network_ms") > 0,
		  "a networked clone's network took no time: %s", r.body);
	reply_free(&r);
	delete_sandbox(id);
}
