// SPDX-License-Identifier: Apache-2.0
/*
 * test_daemon_hostile.c - a hostile guest (hostile_agent.c: its PID 1 sends
 * half frames, stops reading, floods, sends endless files) against thawd on
 * real KVM: it stalls no other sandbox, every request to it ends within the
 * daemon's patience, and SIGTERM stops the daemon in seconds.  The suite
 * has a daemon of its own (not the suite daemon of daemon_suite.h), in
 * THAW_STATE_DIR/hostile.
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
#include <sys/wait.h>
#include <unistd.h>

#include "tests/integration/daemon_suite.h"
#include "tests/integration/harness.h"

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	scale_criterion_timeouts(set);
}

/* ---- hostile ---- */

/*
 * A daemon of its own, in THAW_STATE_DIR/hostile, with two templates: one
 * of thaw's guest and one whose PID 1 is hostile_agent.c (hostile.cpio,
 * beside THAW_TEST_INITRD).  Its patience for a guest is short, since
 * that is what ends every hostile request: restores take under 2 s on
 * this suite's hosts, emulated ones included.
 */
#define HOSTILE_CGROUP_PARENT "thaw-test-hostile"
#define HOSTILE_PATIENCE_S 10
#define HOSTILE_FILE_BYTES (4 << 20)
#define HOSTILE_EXEC_OUTPUT (64 << 20)
#define HOSTILE_BUDGET (16 << 20)
/* A hostile request ends by its deadline plus this (scheduling, a
 * kill's round trip). */
#define HOSTILE_SLACK_S 5
/* SIGTERM ends the daemon within this, whatever the guests do. */
#define HOSTILE_STOP_S 5

static pid_t hostile_pid;

static void write_hostile_config(void)
{
	const char *kernel = getenv("THAW_TEST_KERNEL"),
		   *initrd = getenv("THAW_TEST_INITRD");
	const char *names[] = { "normal", "hostile" };
	char images[PATH_MAX];
	FILE *f = fopen(files.config, "w");

	cr_assert_not_null(f, "%s: %s", files.config, strerror(errno));
	snprintf(images, sizeof(images), "%s", initrd);
	*strrchr(images, '/') = '\0';
	fprintf(f,
		"[daemon]\n"
		"token = " TOKEN "\n"
		"cgroup_parent = " HOSTILE_CGROUP_PARENT "\n"
		"restore_timeout_s = %d\n"
		"max_file_bytes = %d\n"
		"max_exec_output_bytes = %d\n"
		"api_memory_budget_bytes = %d\n"
		"jail_ids = %u-%u\n" SUITE_DAEMON_KEYS,
		HOSTILE_PATIENCE_S, HOSTILE_FILE_BYTES, HOSTILE_EXEC_OUTPUT,
		HOSTILE_BUDGET, JAIL_FIRST_ID, JAIL_LAST_ID);
	for (int i = 0; i < 2; i++)
		fprintf(f,
			"\n[template %s]\n"
			"kernel = %s\n"
			"initrd = %s%s\n"
			"mem_mib = 128\n"
			"vcpus = 1\n"
			"min_ready = 1\n"
			"max_total = 4\n"
			"page_in = lazy\n",
			names[i], kernel, i ? images : initrd,
			i ? "/hostile.cpio" : "");
	fclose(f);
}

static void start_hostile_daemon(void)
{
	char state[PATH_MAX], err[4096];
	const char *top = getenv("THAW_STATE_DIR");

	cr_assert(top && getenv("THAW_TEST_THAW") &&
			  getenv("THAW_TEST_KERNEL") &&
			  getenv("THAW_TEST_INITRD"),
		  "run through daemon-in-vm.sh");
	json_object_seed(0);
	snprintf(state, sizeof(state), "%s/hostile", top);
	cr_assert(mkdir(state, 0700) == 0 || errno == EEXIST, "%s: %s", state,
		  strerror(errno));
	cr_assert(files_in(state));
	write_hostile_config();
	hostile_pid = daemon_start(true, err, sizeof(err));
	cr_assert_gt(hostile_pid, 0, "the hostile suite's daemon: %s", err);
	find_parent_cgroups(HOSTILE_CGROUP_PARENT);
}

static void stop_hostile_daemon(void)
{
	if (hostile_pid > 0 && kill(hostile_pid, SIGKILL) == 0)
		wait_exit(hostile_pid, 10, NULL);
}

TestSuite(hostile, .init = start_hostile_daemon, .fini = stop_hostile_daemon);

/* A request of a thread, and how long it took. */
struct timed_call {
	pthread_t thread;
	struct call q;
	char path[256];
	struct reply r;
	double seconds;
};

static void *timed_call_thread(void *arg)
{
	struct timed_call *t = arg;
	double start = now_s();

	request(&t->q, &t->r);
	t->seconds = now_s() - start;
	return NULL;
}

/* Starts @method @path with @body (@len bytes, kept by the caller) in a
 * thread; the client gives up after @limit_s. */
static void call_in_thread(struct timed_call *t, const char *method,
			   const void *body, size_t len, int limit_s,
			   const char *path_fmt, const char *id)
{
	memset(t, 0, sizeof(*t));
	snprintf(t->path, sizeof(t->path), path_fmt, id);
	t->q = (struct call){ .method = method,
			      .path = t->path,
			      .body = body,
			      .len = len,
			      .limit_s = limit_s };
	cr_assert_eq(pthread_create(&t->thread, NULL, timed_call_thread, t), 0);
}

static void timed_call(struct timed_call *t, const char *method,
		       const void *body, size_t len, int limit_s,
		       const char *path_fmt, const char *id)
{
	call_in_thread(t, method, body, len, limit_s, path_fmt, id);
	pthread_join(t->thread, NULL);
}

/* An exec of argv [@argv0] in @id, stream:false, in a thread. */
static const char *collected_exec(const char *argv0)
{
	static char body[128];

	snprintf(body, sizeof(body), "{\"argv\":[\"%s\"],\"stream\":false}",
		 argv0);
	return body;
}

/* The daemon's thaw_api_memory_bytes. */
static double api_memory_bytes(void)
{
	struct reply r;

	cr_assert_eq(api(&r, "GET", NULL, "/metrics"), 200, "%s", r.body);
	const char *line = strstr(r.body, "\nthaw_api_memory_bytes ");
	double v = line ? strtod(line + 23, NULL) : NAN;
	reply_free(&r);
	return v;
}

/* A client that sends its request, then shuts down its sending side:
 * it still gets the answer. */
static void expect_answer_after_half_close(const char *id)
{
	const char *body = "{\"cmd\":\"sleep 1; echo hi\",\"stream\":false}";
	char buf[8192];
	int fd = raw_connect();

	raw_write(fd,
		  "POST /sandboxes/%s/exec HTTP/1.1\r\n" RAW_HEADERS
		  "Connection: close\r\nContent-Length: %zu\r\n\r\n%s",
		  id, strlen(body), body);
	cr_assert_eq(shutdown(fd, SHUT_WR), 0);
	raw_wait_for(fd, "aGkK", scaled_s(60), buf, sizeof(buf));
	cr_expect(strstr(buf, " 200 ") && strstr(buf, "aGkK"),
		  "a half-closed client's exec: \"%s\"", buf);
	close(fd);
}

Test(hostile, a_hostile_guest_stalls_nothing_and_stops_in_seconds,
     .timeout = 2400)
{
	/* A request waits on the guest twice at most, each within the
	 * patience: for its agent connection (a loaded host's guest takes
	 * seconds to accept), then for what the guest withholds. */
	const int deadline = 2 * HOSTILE_PATIENCE_S + HOSTILE_SLACK_S;
	const int hang = 6 * HOSTILE_PATIENCE_S; /* the client's limit */
	char normal[SB_ID_MAX], hostile[SB_ID_MAX], base[PATH_MAX], sock[64];
	char list[3 * PATH_MAX];
	struct timed_call half, upload, down, flood;
	struct reply r;
	char *big = calloc(1, HOSTILE_FILE_BYTES);

	cr_assert_not_null(big);
	create("{\"template\":\"normal\"}", normal);
	create("{\"template\":\"hostile\"}", hostile);

	/* Half a frame and a guest that stops reading, at once, while the
	 * normal sandbox is served. */
	call_in_thread(&half, "POST", collected_exec("half-frame"),
		       strlen(collected_exec("half-frame")), hang,
		       "/sandboxes/%s/exec", hostile);
	call_in_thread(&upload, "PUT", big, HOSTILE_FILE_BYTES, hang,
		       "/sandboxes/%s/files?path=/tmp/big", hostile);
	for (int i = 0; i < 3; i++)
		expect_echo(normal, "served");
	pthread_join(half.thread, NULL);
	pthread_join(upload.thread, NULL);
	fprintf(stderr,
		"test_daemon: half a frame answered %ld after %.1f s, an "
		"unread upload %ld after %.1f s\n",
		half.r.status, half.seconds, upload.r.status, upload.seconds);
	cr_expect_eq(half.r.status, 504, "half a frame: %s", half.r.body);
	cr_expect_lt(half.seconds, deadline);
	cr_expect_eq(upload.r.status, 504, "unread upload: %s", upload.r.body);
	cr_expect_lt(upload.seconds, deadline);
	reply_free(&half.r);
	reply_free(&upload.r);

	/* An endless file stops at max_file_bytes: the body is cut. */
	timed_call(&down, "GET", NULL, 0, hang,
		   "/sandboxes/%s/files?path=/etc/hostname", hostile);
	fprintf(stderr,
		"test_daemon: an endless download ended after %.1f s "
		"(status %ld, %zu bytes)\n",
		down.seconds, down.r.status, down.r.len);
	cr_expect_lt(down.seconds, hang - 1, "the endless download went on");
	cr_expect_neq(down.r.status, 200, "an endless file was answered whole");
	reply_free(&down.r);
	char *log = slurp(files.log, NULL);
	cr_expect(log && strstr(log, "the guest sent more than max_file_bytes"),
		  "the daemon did not cut the download at max_file_bytes");
	free(log);
	/* So does one of empty frames padded to 60 KiB, and one of another
	 * request's frames (each frame reset the wait before). */
	static const char *const stalls[] = {
		"/sandboxes/%s/files?path=/padded",
		"/sandboxes/%s/files?path=/foreign",
	};
	for (int i = 0; i < 2; i++) {
		timed_call(&down, "GET", NULL, 0, hang, stalls[i], hostile);
		fprintf(stderr,
			"test_daemon: %s ended after %.1f s (status %ld, %zu "
			"bytes)\n",
			down.path, down.seconds, down.r.status, down.r.len);
		cr_expect_lt(down.seconds, hang - 1, "%s went on", down.path);
		cr_expect_neq(down.r.status, 200, "%s answered whole",
			      down.path);
		reply_free(&down.r);
	}

	/* Endless output collected: past the budget, 503 with Retry-After. */
	timed_call(&flood, "POST", collected_exec("flood"),
		   strlen(collected_exec("flood")), hang, "/sandboxes/%s/exec",
		   hostile);
	cr_expect_eq(flood.r.status, 503, "flood: %ld %.300s", flood.r.status,
		     flood.r.body);
	cr_expect_str_neq(flood.r.retry_after, "", "no Retry-After");
	reply_free(&flood.r);
	cr_expect_eq(api_memory_bytes(), 0, "requests that ended hold memory");

	/* timeout_s past the agent's 32-bit milliseconds is refused, the
	 * largest that fits works. */
	cr_expect_eq(api(&r, "POST",
			 "{\"cmd\":\"sleep 2\",\"timeout_s\":4294968,"
			 "\"stream\":false}",
			 "/sandboxes/%s/exec", normal),
		     400, "timeout_s 4294968: %ld %s", r.status, r.body);
	reply_free(&r);
	struct exec_result x;
	run_cmd(normal, "sleep 2; echo done", 4294967, &x);
	cr_expect_str_eq(x.out, "done\n");
	cr_expect_not(x.timed_out);
	exec_result_free(&x);

	expect_answer_after_half_close(normal);

	/* SIGTERM with hostile requests hanging: everything gone in
	 * seconds. */
	pid_t vmm = sandbox_vmm(hostile);
	cr_assert(vmm_run_dir(vmm, base, sizeof(base), sock, sizeof(sock)));
	*strrchr(base, '/') = '\0';
	call_in_thread(&half, "POST", collected_exec("half-frame"),
		       strlen(collected_exec("half-frame")), hang,
		       "/sandboxes/%s/exec", hostile);
	call_in_thread(&upload, "PUT", big, HOSTILE_FILE_BYTES, hang,
		       "/sandboxes/%s/files?path=/tmp/big", hostile);
	/* Until both are surely stuck on the guest (well before they time
	 * out). */
	sleep_s(HOSTILE_PATIENCE_S / 2);
	double start = now_s();
	int status = 0;
	cr_assert_eq(kill(hostile_pid, SIGTERM), 0);
	int how = wait_exit(hostile_pid, HOSTILE_STOP_S, &status);
	double took = now_s() - start;
	fprintf(stderr, "test_daemon: SIGTERM to exit %.1f s\n", took);
	cr_expect_eq(how, 1, "the daemon outlived SIGTERM by %d s",
		     HOSTILE_STOP_S);
	cr_expect(how != 1 || (WIFEXITED(status) && !WEXITSTATUS(status)),
		  "SIGTERM: status %#x", status);
	if (how == 1)
		hostile_pid = -1;
	pthread_join(half.thread, NULL);
	pthread_join(upload.thread, NULL);
	reply_free(&half.r);
	reply_free(&upload.r);
	cr_expect_eq(live_vmms(NULL, 0), 0, "VMMs outlived the daemon");
	int all = 0;
	empty_cgroups(&all);
	cr_expect_eq(all, 0, "%d cgroups left below %s", all,
		     cg_list(&parent, list, sizeof(list)));
	cr_expect_eq(run_dirs(base, sock), 0, "run dirs left in %s", base);
	free(big);
}
