// SPDX-License-Identifier: Apache-2.0
/*
 * test_daemon_pool.c - thawd's warm pools on real KVM, through its HTTP API
 * (pool/API.md): fifty handouts at once, the pool refilling to min_ready,
 * capacity refused at once, an overloaded host refused before any restore,
 * sandboxes expiring unless extended, the working set recorded when the
 * template is built.
 *
 * daemon_suite.h says how daemon-in-vm.sh runs it and what it shares with
 * the other test_daemon_* suites.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/daemon_suite.h"
#include "tests/integration/harness.h"

DAEMON_SUITE_HOOKS();

TestSuite(pool, .init = connect_daemon);

/* ---- pool ---- */

struct handout {
	pthread_barrier_t *start;
	int index;
	long status;
	char id[SB_ID_MAX];
	double handout_ms, restore_ms, seconds;
	bool refused;	   /* 429, 503 or 504: the daemon said no, and why */
	char failure[512]; /* "" when the create was refused or worked */
};

/*
 * The answers a create may get under load besides 201: the pool at its
 * limits (429), the host too loaded to admit more (503), no clone ready in
 * time (504).  Never 500, and a sandbox handed out must answer.
 */
static bool refusal(long status)
{
	return status == 429 || status == 503 || status == 504;
}

static void *handout_thread(void *arg)
{
	struct handout *h = arg;
	struct exec_result x;
	struct reply r;
	char body[128], want[32];

	snprintf(body, sizeof(body),
		 "{\"template\":\"default\",\"env\":{\"ID\":\"n%d\"}}",
		 h->index);
	pthread_barrier_wait(h->start);
	h->status = api(&r, "POST", body, "/sandboxes");
	h->seconds = r.seconds;
	h->handout_ms = jnum(r.json, "handout_ms");
	h->restore_ms = jnum(r.json, "restore_ms");
	snprintf(h->id, sizeof(h->id), "%s", jstr(r.json, "id"));
	h->refused = refusal(h->status);
	if (!h->refused && (h->status != 201 || !h->id[0]))
		snprintf(h->failure, sizeof(h->failure), "create: %ld %.400s",
			 h->status, r.body);
	else if (h->refused && !*jstr(r.json, "code"))
		snprintf(h->failure, sizeof(h->failure),
			 "create refused %ld without an error code: %.400s",
			 h->status, r.body);
	else if (!h->refused)
		check_restore_phases(r.json, h->failure, sizeof(h->failure));
	reply_free(&r);
	if (h->failure[0] || h->refused)
		return NULL;

	/* The handed-out guest answers at once, before any exec. */
	long ping = api(&r, "POST", NULL, "/sandboxes/%s/ping", h->id);
	if (ping != 200 || jnum(r.json, "agent_ms") <= 0 ||
	    strcmp(jstr(r.json, "id"), h->id))
		snprintf(h->failure, sizeof(h->failure), "%s: ping: %ld %.400s",
			 h->id, ping, r.body);
	reply_free(&r);
	if (h->failure[0])
		return NULL;

	exec_json(&r, h->id,
		  json_pack("{s:s, s:b}", "cmd", "echo $ID", "stream", 0), 0);
	parse_exec(&r, false, &x);
	snprintf(want, sizeof(want), "n%d\n", h->index);
	if (x.problem[0] || x.exit_code != 0 || strcmp(x.out, want))
		snprintf(h->failure, sizeof(h->failure),
			 "%s: exec: %s exit %d stdout '%.40s'", h->id,
			 x.problem, x.exit_code, x.out);
	exec_result_free(&x);
	reply_free(&r);
	return NULL;
}

static int compare_doubles(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* "min .. median .. p95 .. max" of @v (sorted in place). */
static void describe(double *v, int n, char *out, size_t len)
{
	qsort(v, n, sizeof(*v), compare_doubles);
	snprintf(out, len, "min %.2f median %.2f p95 %.2f max %.2f", v[0],
		 v[n / 2], v[(int)ceil(0.95 * n) - 1], v[n - 1]);
}

/* True where guest kernels are emulated: inside nested-kvm.sh's
 * software-emulated host, or on KVM-on-PVM. */
static bool emulated_host(void)
{
	return getenv("THAW_EMULATED_HOST") != NULL || kvm_is_pvm();
}

Test(pool, fifty_concurrent_handouts, .timeout = 2400)
{
	const int n = emulated_host() && !getenv("THAW_TEST_FULL_SIZE")
			      ? CONCURRENT_EMULATED
			      : CONCURRENT;
	static struct handout h[CONCURRENT];
	pthread_t threads[CONCURRENT];
	pthread_barrier_t start;
	double handout_ms[CONCURRENT], seconds[CONCURRENT];
	char a[160], b[160], log_end[2100];
	int ok = 0, created = 0, refused = 0;

	pthread_barrier_init(&start, NULL, (unsigned)n + 1);
	for (int i = 0; i < n; i++) {
		h[i] = (struct handout){ .start = &start, .index = i };
		cr_assert_eq(pthread_create(&threads[i], NULL, handout_thread,
					    &h[i]),
			     0);
	}
	double cpu = process_cpu_s(daemon_pid());
	double begin = now_s();
	pthread_barrier_wait(&start);
	for (int i = 0; i < n; i++)
		pthread_join(threads[i], NULL);
	double wall = now_s() - begin;
	cpu = process_cpu_s(daemon_pid()) - cpu;
	pthread_barrier_destroy(&start);

	for (int i = 0; i < n; i++) {
		cr_expect_str_empty(h[i].failure, "sandbox %d: %s", i,
				    h[i].failure);
		ok += !h[i].failure[0] && !h[i].refused;
		refused += h[i].refused;
		if (h[i].status == 201) {
			cr_expect(h[i].handout_ms >= 0 && h[i].restore_ms > 0,
				  "%s: handout_ms %f restore_ms %f", h[i].id,
				  h[i].handout_ms, h[i].restore_ms);
			for (int j = 0; j < i; j++)
				cr_expect_str_neq(h[i].id, h[j].id);
			handout_ms[created] = h[i].handout_ms;
			seconds[created++] = h[i].seconds * 1000;
		}
	}
	cr_assert_gt(created, 0, "no create succeeded");
	describe(handout_ms, created, a, sizeof(a));
	describe(seconds, created, b, sizeof(b));
	fprintf(stderr,
		"test_daemon: %d concurrent creates + exec, %d ok and %d refused "
		"(429/503/504) in %.1f s, the daemon's CPU meanwhile %.2f s "
		"(%.1f %% of a core); of the %d created: handout_ms %s; "
		"create request ms %s%s\n",
		n, ok, refused, wall, cpu, 100 * cpu / wall, created, a, b,
		n < CONCURRENT ? " (fewer than 50: guest kernels emulated)"
			       : "");
	cr_expect_eq(ok + refused, n);
	if (ok + refused < n) {
		tail_of(files.log, 0, log_end, sizeof(log_end));
		fprintf(stderr, "test_daemon: the daemon's log ends:\n%s\n",
			log_end);
	}

	char *log = slurp(files.log, NULL);
	cr_assert_not_null(log);
	for (int i = 0; i < n; i++) {
		char line[128];

		snprintf(line, sizeof(line),
			 "thawd: sandbox %s: handout template default in ",
			 h[i].id);
		if (h[i].id[0])
			cr_expect_not_null(strstr(log, line),
					   "no log line '%s'", line);
	}
	free(log);

	double del = now_s();
	for (int i = 0; i < n; i++)
		if (h[i].id[0])
			delete_sandbox(h[i].id);
	fprintf(stderr, "test_daemon: %d deletes in %.1f s\n", n,
		now_s() - del);

	struct reply r;
	cr_assert_eq(api(&r, "GET", NULL, "/sandboxes"), 200);
	for (int i = 0; i < n; i++)
		if (h[i].id[0])
			cr_expect_null(strstr(r.body, h[i].id),
				       "%s still listed", h[i].id);
	reply_free(&r);
}

Test(pool, refills_to_min_ready, .timeout = 900)
{
	char ids[MIN_READY][SB_ID_MAX];
	struct pool_counts c;

	cr_assert_geq(wait_settled("default", &c), 0,
		      "the pool never settled: ready %.0f restoring %.0f",
		      c.ready, c.restoring);
	cr_expect_eq(c.min_ready, MIN_READY);
	cr_expect_eq(c.max_total, MAX_TOTAL);
	for (int i = 0; i < MIN_READY; i++)
		create("{\"template\":\"default\"}", ids[i]);
	double refill = wait_settled("default", &c);
	fprintf(stderr, "test_daemon: pool back to %d ready in %.1f s\n",
		MIN_READY, refill);
	cr_expect_geq(refill, 0, "after %d s: ready %.0f restoring %.0f",
		      scaled_s(SETTLE_LIMIT_S), c.ready, c.restoring);
	cr_expect_eq(c.leased, MIN_READY, "leased %.0f", c.leased);
	for (int i = 0; i < MIN_READY; i++)
		delete_sandbox(ids[i]);
}

Test(pool, capacity_is_refused_at_once, .timeout = 900)
{
	const char *body = "{\"template\":\"tight\"}";
	char a[SB_ID_MAX], b[SB_ID_MAX], c[SB_ID_MAX];
	struct reply r;

	create(body, a);
	create(body, b);
	cr_expect_eq(api(&r, "POST", body, "/sandboxes"), 429, "%s", r.body);
	cr_expect_str_eq(jstr(json_object_get(r.json, "error"), "code"),
			 "capacity", "%s", r.body);
	fprintf(stderr, "test_daemon: capacity refusal in %.3f s\n", r.seconds);
	cr_expect_lt(r.seconds, 2.0 * guest_slowness());
	reply_free(&r);
	delete_sandbox(a);
	create(body, c);
	delete_sandbox(b);
	delete_sandbox(c);
}

/* The overloaded daemon overloaded_host_refuses_new_restores starts in
 * place of the suite's, and whether the suite's was stopped for it. */
static pid_t overloaded_daemon = -1;
static bool suite_daemon_stopped;

/* The suite's daemon again, for the tests after this one, even when the
 * test failed half-way. */
static void restart_suite_daemon(void)
{
	char err[4096];
	int status;

	if (overloaded_daemon > 0) {
		kill(overloaded_daemon, SIGTERM);
		cr_expect_eq(
			wait_exit(overloaded_daemon, scaled_s(120), &status), 1,
			"the overloaded daemon ignores SIGTERM");
		unlink(files.pid);
	}
	if (!suite_daemon_stopped)
		return;
	write_config(SUITE_DAEMON_KEYS);
	cr_expect_gt(daemon_start(false, err, sizeof(err)), 0,
		     "the suite's daemon: %s", err);
}

/*
 * A daemon whose host is overloaded starts no restore, answers a create
 * at once with 503 "overloaded" and a Retry-After, and says why in
 * /health, /metrics and its log.  The overload is real as far as the
 * daemon can tell, without faking /proc: a floor of 100 % of the host's
 * memory, which MemAvailable never reaches, every other signal off.
 */
Test(pool, overloaded_host_refuses_new_restores, .timeout = 900,
     .fini = restart_suite_daemon)
{
	char err[4096], *end;
	pid_t suite = daemon_pid();
	struct pool_counts c;
	struct reply r;
	struct stat st;
	int status;

	cr_assert_eq(kill(suite, SIGTERM), 0);
	suite_daemon_stopped = true;
	cr_assert_geq(wait_exit(suite, scaled_s(120), &status), 0,
		      "the suite's daemon ignores SIGTERM");
	unlink(files.pid);
	write_config("admit_cpu_pressure = 0\n"
		     "admit_memory_pressure = 0\n"
		     "admit_io_pressure = 0\n"
		     "admit_restore_slowdown = 0\n"
		     "admit_min_available_percent = 100\n");
	off_t log_from = stat(files.log, &st) == 0 ? st.st_size : 0;
	overloaded_daemon = daemon_start(true, err, sizeof(err));
	cr_assert_gt(overloaded_daemon, 0, "%s", err);

	cr_assert_eq(api(&r, "GET", NULL, "/health"), 200, "%s", r.body);
	cr_expect_str_eq(jstr(r.json, "status"), "ok", "%s", r.body);
	cr_expect(json_is_false(json_object_get(r.json, "admitting")), "%s",
		  r.body);
	cr_expect_not_null(
		strstr(jstr(r.json, "overload"), "memory available "), "%s",
		r.body);
	reply_free(&r);

	cr_expect_eq(api(&r, "POST", "{}", "/sandboxes"), 503, "%s", r.body);
	json_t *error = json_object_get(r.json, "error");
	cr_expect_str_eq(jstr(error, "code"), "overloaded", "%s", r.body);
	cr_expect_not_null(strstr(jstr(error, "message"), "memory available "),
			   "%s", r.body);
	long retry_after = strtol(r.retry_after, &end, 10);
	cr_expect(r.retry_after[0] && !*end && retry_after >= 1 &&
			  retry_after <= 5,
		  "Retry-After: \"%s\"", r.retry_after);
	fprintf(stderr,
		"test_daemon: overload refusal in %.3f s, Retry-After %s\n",
		r.seconds, r.retry_after);
	cr_expect_lt(r.seconds, 2.0 * guest_slowness());
	reply_free(&r);

	cr_assert_eq(api(&r, "GET", NULL, "/metrics"), 200, "%s", r.body);
	cr_expect_not_null(strstr(r.body, "\nthaw_admitting 0\n"), "%s",
			   r.body);
	cr_expect_not_null(strstr(r.body, "\nthaw_overload_rejections_total{"
					  "template=\"default\"} 1\n"),
			   "%s", r.body);
	cr_expect_not_null(
		strstr(r.body, "\nthaw_host_memory_available_bytes "), "%s",
		r.body);
	cr_expect_null(strstr(r.body, "thaw_host_pressure_avg10_percent{"),
		       "pressure is not watched, so not read: %s", r.body);
	reply_free(&r);

	/* Not even the first fill of the warm pool. */
	pool_counts("default", &c);
	cr_expect(c.ready == 0 && c.restoring == 0 && c.leased == 0,
		  "ready %.0f restoring %.0f leased %.0f", c.ready, c.restoring,
		  c.leased);
	cr_expect_eq(live_vmms(NULL, 0), 0);
	char *log = slurp(files.log, NULL);
	cr_expect(log && strlen(log) >= (size_t)log_from &&
			  strstr(log + log_from,
				 "not admitting new sandboxes: the host is "
				 "overloaded: memory available "),
		  "no warning in the daemon's log");
	free(log);
}

/*
 * A sandbox created for 2 s is gone after ~4 s, VMM and all; one created
 * for 3 s but extended (before any of that) outlives it.
 */
Test(pool, sandboxes_expire_unless_extended, .timeout = 900)
{
	char id[SB_ID_MAX], kept[SB_ID_MAX], before[64], body[64];
	struct reply r;

	create("{\"timeout_s\":3}", kept);
	cr_assert_eq(api(&r, "GET", NULL, "/sandboxes/%s", kept), 200);
	snprintf(before, sizeof(before), "%s", jstr(r.json, "expires"));
	reply_free(&r);
	/* Long enough to outlast the rest of the test on a slow host. */
	snprintf(body, sizeof(body), "{\"timeout_s\":%d}",
		 scaled_s(60) < MAX_TIMEOUT_S ? scaled_s(60) : MAX_TIMEOUT_S);
	cr_expect_eq(api(&r, "POST", body, "/sandboxes/%s/timeout", kept), 200,
		     "%s", r.body);
	cr_expect_str_eq(jstr(r.json, "id"), kept);
	cr_expect_gt(strcmp(jstr(r.json, "expires"), before), 0,
		     "expires %s, was %s", jstr(r.json, "expires"), before);
	reply_free(&r);
	for (int bad = 0; bad < 2; bad++) {
		snprintf(body, sizeof(body), "{\"timeout_s\":%d}",
			 bad ? MAX_TIMEOUT_S + 1 : 0);
		cr_expect_eq(
			api(&r, "POST", body, "/sandboxes/%s/timeout", kept),
			400, "%s: %ld %s", body, r.status, r.body);
		reply_free(&r);
	}

	create("{\"timeout_s\":2}", id);
	double created = now_s();
	pid_t vmm = sandbox_vmm(id);
	sleep_s(4 - (now_s() - created));
	long status;
	while ((status = api(&r, "GET", NULL, "/sandboxes/%s", id)) == 200 &&
	       now_s() - created < scaled_s(8)) {
		reply_free(&r);
		sleep_s(0.1);
	}
	reply_free(&r);
	fprintf(stderr, "test_daemon: 2 s sandbox gone after %.1f s\n",
		now_s() - created);
	cr_expect_eq(status, 404, "after %.1f s: %ld", now_s() - created,
		     status);
	cr_expect(wait_gone(vmm, scaled_s(5)), "expired sandbox's VMM %d runs",
		  (int)vmm);

	cr_expect_eq(api(&r, "GET", NULL, "/sandboxes/%s", kept), 200,
		     "the extended sandbox: %s", r.body);
	reply_free(&r);
	expect_echo(kept, "extended");
	delete_sandbox(kept);
}

/*
 * Before any sandbox, the daemon recorded each template's working set
 * (what a restored clone touches first), which its restores prefetch.
 */
Test(pool, working_set_recorded_at_template_build, .timeout = 600)
{
	struct reply r;
	size_t i;
	json_t *t;
	int checked = 0;

	cr_assert_eq(api(&r, "GET", NULL, "/templates"), 200);
	json_array_foreach(json_object_get(r.json, "templates"), i, t)
	{
		char path[PATH_MAX + 128];
		struct stat st;

		snprintf(path, sizeof(path), "%s/snapshots/%s/workingset.bin",
			 files.state, jstr(t, "snapshot"));
		cr_expect(stat(path, &st) == 0 && st.st_size > 0,
			  "template %s: no working set at %s", jstr(t, "name"),
			  path);
		checked++;
	}
	cr_expect_gt(checked, 0, "no templates: %s", r.body);
	reply_free(&r);
}
