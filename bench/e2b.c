// SPDX-License-Identifier: Apache-2.0
/*
 * e2b.c - E2B's SDK against thaw: what an existing E2B program waits for
 * from `Sandbox.create()` to its first `commands.run('true')` returned,
 * through the unmodified e2b npm package, beside the same through thaw's
 * own API (create, then exec of `true`) on the same daemon in the same run.
 *
 * Per concurrency (1, 10, 50; --quick 1, 4, 8) one daemon with a warm pool
 * of that many clones and e2b_listen on a free loopback port.  Both figures
 * go in rounds of that many requests at once, each round waiting for the
 * pool to be full again first, so both meet the same pool: thaw's own
 * through bench_handout_rounds(), the SDK's through e2b_create.mjs (node),
 * which starts its round's creates together and prints each one's time; node's
 * own start is outside the times.  The SDK side pays what E2B users pay on
 * top: HTTP/1.1 on TCP, E2B's JSON, the Connect protocol's envelopes, the
 * daemon's translation to the agent's protocol, and node.
 *
 * The SDK is the one test_e2b uses: the e2b_sdk test (`npm ci`) installs it
 * in the build's tests/e2b, where CMake copies e2b_create.mjs too
 * (--e2b DIR points elsewhere).  Without it, or without node, the figures
 * are failures saying so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/io.h"

#define GROUP "e2b"
#define CREATE_OUTPUT_MAX 65536

/*
 * @creates SDK creates of @template, @concurrency at a time, each round
 * after the pool holds @concurrency ready clones; the times into @s.  0,
 * or -1 with @err (node's error line for the first that failed).
 */
static int sdk_rounds(const struct bench *b, const struct thawd *d,
		      const char *template, int concurrency, int creates,
		      struct samples *s, char *err, size_t errlen)
{
	char script[PATH_MAX], count[16];
	char *argv[] = { "/usr/bin/env",   "node", script,
			 (char *)template, count,  NULL };
	char *out = malloc(CREATE_OUTPUT_MAX);
	struct thaw_client *c = thawd_connect(d, err, errlen);
	int ret = c && out ? 0 : -1;

	if (!out)
		snprintf(err, errlen, "out of memory");
	snprintf(script, sizeof(script), "%s/e2b_create.mjs", b->e2b_dir);
	snprintf(count, sizeof(count), "%d", concurrency);
	for (int done = 0; done < creates && !ret; done += concurrency) {
		ret = thawd_wait_ready(c, template, concurrency, 600, err,
				       errlen);
		if (ret)
			break;
		int status = bench_run_capture(argv, 1, out, CREATE_OUTPUT_MAX);
		for (char *line = strtok(out, "\n"); line;
		     line = strtok(NULL, "\n")) {
			if (!strncmp(line, "ms ", 3)) {
				samples_add(s, strtod(line + 3, NULL));
			} else if (!ret) {
				snprintf(err, errlen, "after %zu creates: %s",
					 s->n, line);
				ret = -1;
			}
		}
		if (status && !ret) {
			snprintf(err, errlen,
				 "node e2b_create.mjs exited with status %d",
				 status);
			ret = -1;
		}
	}
	thaw_client_close(c);
	free(out);
	return ret;
}

/* Whether the SDK and the script are where the bench looks; @why if not. */
static bool sdk_installed(const struct bench *b, char *why, size_t len)
{
	char path[PATH_MAX];
	char *argv[] = { "/usr/bin/env", "node", "--version", NULL };
	char version[64];

	snprintf(path, sizeof(path), "%s/node_modules/e2b/package.json",
		 b->e2b_dir);
	if (access(path, R_OK)) {
		snprintf(why, len,
			 "no e2b SDK in %s (`ctest -R e2b_sdk` in the build "
			 "runs npm ci there; or --e2b DIR)",
			 b->e2b_dir);
		return false;
	}
	if (bench_run_capture(argv, 1, version, sizeof(version))) {
		snprintf(why, len, "no node on the PATH");
		return false;
	}
	return true;
}

void bench_e2b(struct bench *b)
{
	int creates = b->size->e2b_creates;
	char sdk_why[512];
	bool sdk = sdk_installed(b, sdk_why, sizeof(sdk_why));

	for (int i = 0; i < 3; i++) {
		int n = b->size->concurrency[i];
		struct template_spec t = {
			.name = "bench",
			.mem_mib = TEMPLATE_MEM_MIB,
			.min_ready = (unsigned)n,
			.max_total = (unsigned)n * 2,
		};
		const struct daemon_spec spec = {
			.max_sandboxes = (unsigned)n * 2 + 8,
			.e2b_port = loopback_free_port(),
		};
		char own[128], sdk_name[128], text[1024], url[64], why[1024];
		struct samples own_s = { 0 }, sdk_s = { 0 };
		struct restore_samples restores = { 0 };
		struct thawd d;

		snprintf(own, sizeof(own),
			 "thaw API: create -> exec true, concurrency %d", n);
		snprintf(sdk_name, sizeof(sdk_name),
			 "E2B SDK: Sandbox.create() -> commands.run('true'), "
			 "concurrency %d",
			 n);
		bench_progress("e2b: concurrency %d, %d creates each way", n,
			       creates);
		if (spec.e2b_port < 0 ||
		    bench_start_daemon(b, &d, &t, 1, &spec, why, sizeof(why))) {
			if (spec.e2b_port < 0)
				snprintf(why, sizeof(why),
					 "no free loopback port: %s",
					 strerror(-spec.e2b_port));
			bench_fail(b, GROUP, own, why);
			bench_fail(b, GROUP, sdk_name, why);
			continue;
		}
		int ret = bench_handout_rounds(&d, "bench", n, creates, n,
					       UNTIL_EXEC_TRUE, &own_s,
					       &restores, why, sizeof(why));
		if (ret && !own_s.n) {
			bench_fail(b, GROUP, own, why);
		} else {
			bench_note(
				b, text, sizeof(text),
				"POST /sandboxes on the Unix socket, then POST "
				"exec of `true`, from a warm pool%s%s",
				ret ? "; stopped early: " : "", ret ? why : "");
			report_add_samples(b->report, GROUP, own, "ms", &own_s,
					   text);
		}
		snprintf(url, sizeof(url), "http://127.0.0.1:%d",
			 spec.e2b_port);
		setenv("E2B_API_URL", url, 1);
		setenv("E2B_SANDBOX_URL", url, 1);
		setenv("E2B_API_KEY", d.token, 1);
		ret = sdk ? sdk_rounds(b, &d, "bench", n, creates, &sdk_s, why,
				       sizeof(why))
			  : -1;
		if (ret && !sdk_s.n) {
			bench_fail(b, GROUP, sdk_name, sdk ? why : sdk_why);
		} else {
			bench_note(b, text, sizeof(text),
				   "the e2b npm package (node) on e2b_listen: "
				   "create call made -> run('true') returned, "
				   "from a warm pool%s%s",
				   ret ? "; stopped early: " : "",
				   ret ? why : "");
			report_add_samples(b->report, GROUP, sdk_name, "ms",
					   &sdk_s, text);
		}
		bench_stop_daemon(&d);
		bench_restore_samples_free(&restores);
		samples_free(&own_s);
		samples_free(&sdk_s);
	}
}
