// SPDX-License-Identifier: Apache-2.0
/*
 * test_client_cli.c - the daemon's client commands (thaw sandbox, exec,
 * cp) as a user sees them, without a daemon or a VM: usage errors (a
 * network policy's CIDRs included), the message when the daemon cannot be
 * reached, and, against a fake daemon, what they send and how they take
 * its answers apart.
 *
 * The fake daemon is a thread serving canned HTTP answers on a Unix socket,
 * one connection per answer (each says Connection: close), and keeping the
 * requests for the test to look at.  An answer is written in pieces with a
 * pause between them, so the client meets NDJSON lines split across reads,
 * as it does when a real command writes slowly.  The client library the
 * commands are made of is checked against the same fake daemon where the
 * commands do not reach (typed answers, headers, cancelling), and the
 * base64 helpers the client and the daemon share are checked here too.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/base64.h"
#include "tests/integration/harness.h"
#include "pool/client/thaw_client.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_THAW_ERROR 125
#define TIMEOUT_S 30
#define MAX_EXCHANGES 4
#define MAX_PIECES 8

static char dir[] = "/tmp/thaw-client-test-XXXXXX";
static char sock[256];

static void setup(void)
{
	cr_assert_not_null(mkdtemp(dir));
	snprintf(sock, sizeof(sock), "%s/thawd.sock", dir);
	unsetenv("THAW_SOCKET");
	unsetenv("THAW_TOKEN");
	setenv("THAW_STATE_DIR", dir, 1);
}

static void teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(client, .init = setup, .fini = teardown, .timeout = 60);

/* A piece of an answer, written at once; zeroes end an answer. */
struct piece {
	const char *data;
	size_t len;
	bool interrupt; /* instead: ^C the client, wait for it to hang up */
};

#define TEXT(s) ((struct piece){ .data = (s), .len = strlen(s) })
#define INTERRUPT ((struct piece){ .interrupt = true })
#define NO_CONTENT TEXT("HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")

struct fake_daemon {
	int listen_fd;
	pthread_t thread;
	/* One answer per connection. */
	struct piece answers[MAX_EXCHANGES][MAX_PIECES];
	int nr_answers;
	char requests[MAX_EXCHANGES][65536];
	size_t request_len[MAX_EXCHANGES];
	int served;
	bool client_hung_up;
};

static bool ends_with(const char *s, size_t len, const char *tail)
{
	size_t n = strlen(tail);

	return len >= n && !memcmp(s + len - n, tail, n);
}

/* Reads one request: headers, then a Content-Length or chunked body. */
static void read_request(struct fake_daemon *f, int fd, char *buf, size_t *len)
{
	size_t cap = sizeof(f->requests[0]) - 1, want = 0;
	bool headers_done = false, chunked = false, continued = false;
	char *end;

	*len = 0;
	for (;;) {
		buf[*len] = '\0';
		end = strstr(buf, "\r\n\r\n");
		if (end && !headers_done) {
			const char *cl = strcasestr(buf, "Content-Length: ");

			headers_done = true;
			chunked = strcasestr(buf, "Transfer-Encoding: chunked");
			want = end + 4 - buf + (cl ? atol(cl + 16) : 0);
		}
		if (headers_done && !continued &&
		    strcasestr(buf, "Expect: 100-continue")) {
			continued = true;
			cr_assert_eq(send(fd, "HTTP/1.1 100 Continue\r\n\r\n",
					  25, MSG_NOSIGNAL),
				     25);
		}
		if (headers_done && !chunked && *len >= want)
			return;
		if (headers_done && chunked &&
		    ends_with(buf, *len, "0\r\n\r\n"))
			return;
		cr_assert_lt(*len, cap,
			     "request too large for the fake daemon");
		ssize_t n = read(fd, buf + *len, cap - *len);
		cr_assert_gt(n, 0, "client hung up mid-request: %s",
			     n < 0 ? strerror(errno) : "EOF");
		*len += n;
	}
}

static void interrupt_client(struct fake_daemon *f, int fd)
{
	struct ucred peer;
	socklen_t len = sizeof(peer);
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	cr_assert_eq(getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len), 0);
	cr_assert_eq(kill(peer.pid, SIGINT), 0);
	f->client_hung_up = poll(&p, 1, 10000) == 1 && read(fd, &c, 1) == 0;
}

static void *serve(void *arg)
{
	struct fake_daemon *f = arg;
	struct pollfd p = { .fd = f->listen_fd, .events = POLLIN };

	for (int i = 0; i < f->nr_answers; i++) {
		if (poll(&p, 1, TIMEOUT_S * 1000) != 1)
			break;
		int fd = accept4(f->listen_fd, NULL, NULL, SOCK_CLOEXEC);
		cr_assert_geq(fd, 0);
		read_request(f, fd, f->requests[i], &f->request_len[i]);
		f->served++;
		for (const struct piece *p = f->answers[i];
		     p->data || p->interrupt; p++) {
			if (p->interrupt) {
				interrupt_client(f, fd);
				break;
			}
			/* The client may hang up early: its business. */
			if (send(fd, p->data, p->len, MSG_NOSIGNAL) < 0)
				break;
			usleep(20000);
		}
		close(fd);
	}
	return NULL;
}

static void fake_start(struct fake_daemon *f)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };

	strcpy(addr.sun_path, sock);
	unlink(sock); /* the previous fake daemon's */
	f->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(f->listen_fd, 0);
	cr_assert_eq(bind(f->listen_fd, (struct sockaddr *)&addr, sizeof(addr)),
		     0);
	cr_assert_eq(listen(f->listen_fd, 8), 0);
	cr_assert_eq(pthread_create(&f->thread, NULL, serve, f), 0);
}

static void fake_stop(struct fake_daemon *f)
{
	pthread_join(f->thread, NULL);
	close(f->listen_fd);
}

/* Strings for answers live in a static ring: a test needs a few. */
static char *ring_printf(const char *fmt, ...)
{
	static char bufs[16][8192];
	static int next;
	char *buf = bufs[next++ % 16];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(bufs[0]), fmt, ap);
	va_end(ap);
	return buf;
}

static struct piece chunk(const char *data)
{
	return TEXT(ring_printf("%zx\r\n%s\r\n", strlen(data), data));
}

#define NDJSON_HEAD                                           \
	"HTTP/1.1 200 OK\r\n"                                 \
	"Content-Type: application/x-ndjson\r\n"              \
	"Transfer-Encoding: chunked\r\nConnection: close\r\n" \
	"\r\n"
#define LAST_CHUNK "0\r\n\r\n"

/* A whole answer with a Content-Length. */
static struct piece answer(const char *status, const char *type,
			   const char *body, size_t len)
{
	char *head = ring_printf("HTTP/1.1 %s\r\nContent-Type: %s\r\n"
				 "Content-Length: %zu\r\nConnection: close\r\n"
				 "\r\n",
				 status, type, len);
	size_t head_len = strlen(head);

	cr_assert_lt(head_len + len, 8192);
	memcpy(head + head_len, body, len);
	return (struct piece){ .data = head, .len = head_len + len };
}

static struct piece json_answer(const char *status, const char *body)
{
	return answer(status, "application/json", body, strlen(body));
}

static struct piece error_answer(const char *status, const char *code,
				 const char *message)
{
	return json_answer(
		status, ring_printf("{\"error\":{\"code\":\"%s\",\"message\":"
				    "\"%s\"}}",
				    code, message));
}

/* thaw WORDS..., @words NULL-terminated. */
static void thaw(char *const words[], struct run_result *r)
{
	char *argv[32] = { THAW };
	int n = 1;

	while (*words)
		argv[n++] = *words++;
	argv[n] = NULL;
	cr_assert_eq(run_command(argv, TIMEOUT_S, r), 0);
	cr_assert_not(r->timed_out, "thaw hung; stderr: %s", r->err);
}

/* A shell line, for pipes into thaw; THAW is $0. */
static void thaw_sh(const char *line, struct run_result *r)
{
	char *argv[] = { "/bin/sh", "-c", (char *)line, THAW, NULL };

	cr_assert_eq(run_command(argv, TIMEOUT_S, r), 0);
	cr_assert_not(r->timed_out, "thaw hung; stderr: %s", r->err);
}

#define WORDS(...) ((char *[]){ __VA_ARGS__, NULL })

static void expect_status(const struct run_result *r, int status)
{
	cr_expect_eq(r->status, status, "exit status %d, want %d; stderr: %s",
		     r->status, status, r->err);
}

static void expect_err(const struct run_result *r, const char *needle)
{
	cr_expect_not_null(strstr(r->err, needle), "stderr lacks '%s': %s",
			   needle, r->err);
}

/* One error line naming the problem, then the command's usage. */
static void expect_usage_error(char *const words[], int status,
			       const char *needle)
{
	struct run_result r;

	thaw(words, &r);
	expect_status(&r, status);
	expect_err(&r, needle);
	cr_expect(!strncmp(strchr(r.err, '\n') + 1, "usage: thaw ", 12),
		  "no usage after the error line: %s", r.err);
	cr_expect_eq(r.out_len, 0, "stdout not empty: %s", r.out);
	run_result_free(&r);
}

Test(client, sandbox_usage_errors)
{
	expect_usage_error(WORDS("sandbox", "frobnicate"), EXIT_USAGE,
			   "thaw sandbox: unknown command 'frobnicate'");
	expect_usage_error(WORDS("sandbox", "ls", "--frobnicate"), EXIT_USAGE,
			   "thaw sandbox ls: unknown option '--frobnicate'");
	expect_usage_error(WORDS("sandbox", "create", "--json"), EXIT_USAGE,
			   "thaw sandbox create: unknown option '--json'");
	expect_usage_error(WORDS("sandbox", "create", "--timeout", "soon"),
			   EXIT_USAGE,
			   "--timeout 'soon' is not a number of seconds");
	expect_usage_error(WORDS("sandbox", "create", "--env", "NOVALUE"),
			   EXIT_USAGE, "--env takes KEY=VALUE, not 'NOVALUE'");
	expect_usage_error(WORDS("sandbox", "create", "--template"), EXIT_USAGE,
			   "option '--template' needs a value");
	expect_usage_error(WORDS("sandbox", "create", "extra"), EXIT_USAGE,
			   "unexpected argument 'extra'");
	expect_usage_error(WORDS("sandbox", "rm"), EXIT_USAGE,
			   "thaw sandbox rm: no sandbox id given");
	/* A network policy's CIDRs: the daemon's parser, before a request. */
	expect_usage_error(
		WORDS("sandbox", "create", "--allow-out", "10.0.0.1/8"),
		EXIT_USAGE,
		"thaw sandbox create: --allow-out: '10.0.0.1/8' is "
		"not a CIDR: address bits past /8 are set");
	expect_usage_error(
		WORDS("sandbox", "create", "--deny-out", "example.com"),
		EXIT_USAGE, "--deny-out: 'example.com' is not a CIDR");
	expect_usage_error(WORDS("sandbox", "create", "--internet"), EXIT_USAGE,
			   "thaw sandbox create: unknown option '--internet'");
	expect_usage_error(WORDS("sandbox", "network"), EXIT_USAGE,
			   "thaw sandbox network: no sandbox id given");
	expect_usage_error(WORDS("sandbox", "network", "a", "b"), EXIT_USAGE,
			   "thaw sandbox network: unexpected argument 'b'");
	expect_usage_error(
		WORDS("sandbox", "network", "a", "--allow-out", "1.2.3.4/40"),
		EXIT_USAGE, "--allow-out: '1.2.3.4/40' is not a CIDR");
}

Test(client, sandbox_without_command_prints_usage)
{
	struct run_result r;

	thaw(WORDS("sandbox"), &r);
	expect_status(&r, EXIT_USAGE);
	expect_err(&r, "usage: thaw sandbox create");
	run_result_free(&r);
	thaw(WORDS("sandbox", "--help"), &r);
	expect_status(&r, 0);
	cr_expect_not_null(strstr(r.out, "thaw sandbox rm ID..."), "%s", r.out);
	run_result_free(&r);
}

/* exec's status is the command's: its own usage errors are 125. */
Test(client, exec_usage_errors)
{
	expect_usage_error(WORDS("exec", "--frobnicate", "sb-1", "--", "true"),
			   EXIT_THAW_ERROR,
			   "thaw exec: unknown option '--frobnicate'");
	expect_usage_error(WORDS("exec"), EXIT_THAW_ERROR,
			   "thaw exec: no sandbox id given");
	expect_usage_error(WORDS("exec", "sb-1"), EXIT_THAW_ERROR,
			   "thaw exec: no command given");
	expect_usage_error(WORDS("exec", "sb-1", "--"), EXIT_THAW_ERROR,
			   "thaw exec: no command given");
	expect_usage_error(
		WORDS("exec", "--timeout", "0", "sb-1", "--", "true"),
		EXIT_THAW_ERROR, "--timeout '0' is not a number of seconds");
	expect_usage_error(WORDS("exec", "--env", "=x", "sb-1", "--", "true"),
			   EXIT_THAW_ERROR, "--env takes KEY=VALUE, not '=x'");
	expect_usage_error(
		WORDS("exec", "--template", "t", "sb-1", "--", "true"),
		EXIT_THAW_ERROR, "unknown option '--template'");
	expect_usage_error(WORDS("exec", "sb-1", "--", "printf", "\xff"),
			   EXIT_THAW_ERROR, "is not UTF-8 text");
}

Test(client, cp_usage_errors)
{
	expect_usage_error(WORDS("cp", "a", "b"), EXIT_USAGE,
			   "thaw cp: neither SRC nor DST is in a sandbox");
	expect_usage_error(WORDS("cp", "sb-1:/a", "sb-2:/b"), EXIT_USAGE,
			   "thaw cp: SRC and DST are both in sandboxes");
	expect_usage_error(WORDS("cp", "sb-1:/a"), EXIT_USAGE,
			   "thaw cp: takes a SRC and a DST");
	expect_usage_error(WORDS("cp", "sb-1:/a", "b", "c"), EXIT_USAGE,
			   "thaw cp: takes a SRC and a DST");
	expect_usage_error(WORDS("cp", "sb-1:etc/hosts", "b"), EXIT_USAGE,
			   "'sb-1:etc/hosts': the path in the sandbox must be "
			   "absolute");
	/* A colon after a slash is part of a local name, as for scp. */
	expect_usage_error(WORDS("cp", "./a:b", "c"), EXIT_USAGE,
			   "neither SRC nor DST is in a sandbox");
}

/* No daemon: one line naming the socket tried, nothing on stdout. */
static void expect_unreachable(char *const words[], int status, const char *who,
			       const char *path, const char *reason)
{
	struct run_result r;
	char want[512];

	thaw(words, &r);
	expect_status(&r, status);
	snprintf(
		want, sizeof(want),
		"%s: cannot reach the daemon at %s: %s (is 'thaw daemon' running?)\n",
		who, path, reason);
	cr_expect_str_eq(r.err, want);
	cr_expect_eq(r.out_len, 0, "stdout not empty: %s", r.out);
	run_result_free(&r);
}

Test(client, unreachable_daemon)
{
	char other[300];

	snprintf(other, sizeof(other), "%s/other.sock", dir);
	expect_unreachable(
		WORDS("exec", "--socket", other, "sb-1", "--", "true"),
		EXIT_THAW_ERROR, "thaw exec", other,
		"No such file or directory");
	/* The default: the state directory's socket. */
	expect_unreachable(WORDS("sandbox", "ls"), EXIT_FAILED,
			   "thaw sandbox ls", sock,
			   "No such file or directory");
	setenv("THAW_SOCKET", other, 1);
	expect_unreachable(WORDS("sandbox", "create"), EXIT_FAILED,
			   "thaw sandbox create", other,
			   "No such file or directory");
	/* Only once for many IDs. */
	expect_unreachable(WORDS("sandbox", "rm", "sb-1", "sb-2"), EXIT_FAILED,
			   "thaw sandbox rm: sb-1", other,
			   "No such file or directory");
	unsetenv("THAW_SOCKET");
}

Test(client, socket_without_a_listener)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(addr.sun_path, sock);
	cr_assert_eq(bind(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	close(fd);
	expect_unreachable(WORDS("cp", "sb-1:/etc/hosts", "-"), EXIT_FAILED,
			   "thaw cp", sock, "Connection refused");
}

/* The request's body: what follows the headers. */
static const char *body_of(const char *request)
{
	const char *end = strstr(request, "\r\n\r\n");

	cr_assert_not_null(end, "no headers end in: %s", request);
	return end + 4;
}

static void expect_request(const char *request, const char *needle)
{
	cr_expect_not_null(strstr(request, needle), "request lacks '%s': %s",
			   needle, request);
}

/* stdout "hi\n" and stderr "oops\n", each line split across two writes. */
static void output_then(struct fake_daemon *f, const char *last)
{
	struct piece pieces[] = {
		TEXT(NDJSON_HEAD),
		chunk("{\"type\":\"started\",\"pid\":42}\n{\"type\":\"std"),
		chunk("out\",\"data\":\"aGkK\"}\n{\"type\":\"stderr\",\"da"),
		chunk("ta\":\"b29wcwo=\"}\n"),
		last ? chunk(last) : TEXT(LAST_CHUNK),
		last ? TEXT(LAST_CHUNK) : (struct piece){ 0 },
		{ 0 },
	};

	memcpy(f->answers[f->nr_answers++], pieces, sizeof(pieces));
}

Test(client, exec_streams_output_and_exit_code)
{
	struct fake_daemon f = { 0 };
	struct run_result r;

	output_then(
		&f,
		"{\"type\":\"exit\",\"exit_code\":3,\"timed_out\":false}\n");
	fake_start(&f);
	thaw(WORDS("exec", "--socket", sock, "--env", "A=1", "--env", "B=x=y",
		   "--cwd", "/tmp", "--timeout", "5", "sb-1", "--", "sh", "-c",
		   "echo hi; exit 3"),
	     &r);
	fake_stop(&f);
	expect_status(&r, 3);
	cr_expect_str_eq(r.out, "hi\n");
	cr_expect_str_eq(r.err, "oops\n");
	cr_expect(!strncmp(f.requests[0],
			   "POST /sandboxes/sb-1/exec HTTP/1.1\r\n", 36),
		  "request: %s", f.requests[0]);
	const char *body = body_of(f.requests[0]);
	expect_request(body, "\"argv\":[\"sh\",\"-c\",\"echo hi; exit 3\"]");
	expect_request(body, "\"stream\":true");
	expect_request(body, "\"env\":{\"A\":\"1\",\"B\":\"x=y\"}");
	expect_request(body, "\"cwd\":\"/tmp\"");
	expect_request(body, "\"timeout_s\":5");
	cr_expect_null(strstr(body, "\"stdin\""), "body: %s", body);
	cr_expect_null(strstr(f.requests[0], "Authorization"), "%s",
		       f.requests[0]);
	run_result_free(&r);
}

static void expect_exec_end(const char *last, int status, const char *err)
{
	struct fake_daemon f = { 0 };
	struct run_result r;

	output_then(&f, last);
	fake_start(&f);
	thaw(WORDS("exec", "--socket", sock, "sb-1", "sleep", "100"), &r);
	fake_stop(&f);
	expect_status(&r, status);
	cr_expect_str_eq(r.out, "hi\n");
	cr_expect(r.err_len >= 5 && !strncmp(r.err, "oops\n", 5), "stderr: %s",
		  r.err);
	cr_expect_str_eq(r.err + (r.err_len >= 5 ? 5 : 0), err);
	run_result_free(&r);
}

Test(client, exec_ends)
{
	expect_exec_end(
		"{\"type\":\"exit\",\"signal\":9,\"timed_out\":false}\n",
		128 + 9, "");
	expect_exec_end("{\"type\":\"exit\",\"signal\":9,\"timed_out\":true}\n",
			124, "thaw exec: sleep timed out\n");
	expect_exec_end("{\"type\":\"error\",\"message\":\"the VMM died\"}\n",
			EXIT_THAW_ERROR, "thaw exec: the VMM died\n");
	/* A last line without its newline still counts. */
	expect_exec_end("{\"type\":\"exit\",\"exit_code\":0}", 0, "");
	expect_exec_end(NULL, EXIT_THAW_ERROR,
			"thaw exec: the daemon ended the exec stream before "
			"sleep ended\n");
	expect_exec_end(
		"{\"type\":\"stdout\",\"data\":\"!!\"}\n", EXIT_THAW_ERROR,
		"thaw exec: bad output event from the daemon: no base64 "
		"data\n");
	expect_exec_end("{not json\n", EXIT_THAW_ERROR,
			"thaw exec: bad event from the daemon: string or '}' "
			"expected near 'not'\n");
}

Test(client, exec_error_answer_and_token)
{
	struct fake_daemon f = {
		.answers = { { error_answer("404 Not Found", "not_found",
					    "no sandbox sb-9") } },
		.nr_answers = 1,
	};
	struct run_result r;

	setenv("THAW_TOKEN", "s3cret", 1);
	fake_start(&f);
	thaw(WORDS("exec", "--socket", sock, "sb-9", "--", "true"), &r);
	fake_stop(&f);
	expect_status(&r, EXIT_THAW_ERROR);
	cr_expect_str_eq(r.err, "thaw exec: 404 not_found: no sandbox sb-9\n");
	cr_expect_eq(r.out_len, 0);
	expect_request(f.requests[0], "\r\nAuthorization: Bearer s3cret\r\n");
	run_result_free(&r);
}

Test(client, exec_sends_stdin)
{
	struct fake_daemon f = { 0 };
	struct run_result r;
	char line[600];

	output_then(&f, "{\"type\":\"exit\",\"exit_code\":0}\n");
	fake_start(&f);
	snprintf(line, sizeof(line),
		 "printf 'abc' | \"$0\" exec --socket '%s' --stdin sb-1 -- cat",
		 sock);
	thaw_sh(line, &r);
	fake_stop(&f);
	expect_status(&r, 0);
	expect_request(body_of(f.requests[0]), "\"stdin\":\"YWJj\"");
	run_result_free(&r);
}

/* An exec's start, then a ^C of the client. */
static void started_then_interrupt(struct fake_daemon *f)
{
	struct piece pieces[] = {
		TEXT(NDJSON_HEAD),
		chunk("{\"type\":\"started\",\"pid\":42}\n"),
		INTERRUPT,
		{ 0 },
	};

	memcpy(f->answers[f->nr_answers++], pieces, sizeof(pieces));
}

/* ^C hangs up on the daemon, which kills the command. */
Test(client, exec_interrupted)
{
	struct fake_daemon f = { 0 };
	struct run_result r;

	started_then_interrupt(&f);
	fake_start(&f);
	thaw(WORDS("exec", "--socket", sock, "sb-1", "--", "sleep", "100"), &r);
	fake_stop(&f);
	expect_status(&r, 128 + SIGINT);
	cr_expect_str_eq(r.err, "thaw exec: interrupted\n");
	cr_expect(f.client_hung_up, "thaw kept the connection open");
	cr_expect_lt(r.seconds, 5, "took %.1f s", r.seconds);
	run_result_free(&r);
}

static const char sandbox_json[] =
	"{\"id\":\"sb-3f9a0c2e71d4b805\",\"template\":\"py\","
	"\"created\":\"2026-11-30T01:02:03.456Z\","
	"\"expires\":\"2026-11-30T01:03:03.456Z\","
	"\"restore_ms\":41.7,\"restore\":{\"host_ms\":3.9,"
	"\"guest_ms\":37.8},\"handout_ms\":0.08}";

/* `thaw WORDS...` (a create) against a daemon answering 201 with @json. */
static void create_with(char *const words[], const char *json,
			struct fake_daemon *f, struct run_result *r)
{
	*f = (struct fake_daemon){
		.answers = { { json_answer("201 Created", json) } },
		.nr_answers = 1,
	};
	fake_start(f);
	thaw(words, r);
	fake_stop(f);
}

Test(client, sandbox_create_prints_the_id)
{
	static struct fake_daemon f;
	struct run_result r;

	create_with(WORDS("sandbox", "create", "--socket", sock, "--template",
			  "py", "--timeout", "60", "--env", "K=V"),
		    sandbox_json, &f, &r);
	expect_status(&r, 0);
	cr_expect_str_eq(r.out, "sb-3f9a0c2e71d4b805\n");
	expect_err(&r, "restore 41.7 ms (host side 3.9 ms, guest side 37.8 "
		       "ms), handout 0.08 ms");
	cr_expect(!strncmp(f.requests[0], "POST /sandboxes HTTP/1.1\r\n", 26),
		  "request: %s", f.requests[0]);
	cr_expect_str_eq(body_of(f.requests[0]),
			 "{\"template\":\"py\",\"timeout_s\":60,"
			 "\"env\":{\"K\":\"V\"}}");
	run_result_free(&r);
}

Test(client, sandbox_create_at_capacity)
{
	struct fake_daemon f = {
		.answers = { { error_answer(
			"429 Too Many Requests", "capacity",
			"template py is at max_total (16)") } },
		.nr_answers = 1,
	};
	struct run_result r;

	fake_start(&f);
	thaw(WORDS("sandbox", "create", "--socket", sock), &r);
	fake_stop(&f);
	expect_status(&r, EXIT_FAILED);
	cr_expect_str_eq(r.err, "thaw sandbox create: 429 capacity: template "
				"py is at max_total (16)\n");
	cr_expect_str_eq(body_of(f.requests[0]), "{}");
	run_result_free(&r);
}

/* The daemon's text reaches a terminal: JSON can carry its escapes. */
Test(client, daemon_text_cannot_drive_the_terminal)
{
	struct fake_daemon f = {
		.answers = { { error_answer("404 Not Found", "not_found",
					    "no sandbox \\u001b[2J\\u009b1m"
					    "x\\nforged") } },
		.nr_answers = 1,
	};
	struct run_result r;

	fake_start(&f);
	thaw(WORDS("sandbox", "rm", "--socket", sock, "x"), &r);
	fake_stop(&f);
	expect_status(&r, EXIT_FAILED);
	cr_expect_str_eq(r.err,
			 "thaw sandbox rm: x: 404 not_found: no sandbox  "
			 "[2J?1mx forged\n");
	run_result_free(&r);
}

Test(client, sandbox_ls_table_and_json)
{
	struct piece list = json_answer(
		"200 OK", ring_printf("{\"sandboxes\":[%s]}", sandbox_json));
	struct fake_daemon f = {
		.answers = { { list }, { list } },
		.nr_answers = 2,
	};
	struct run_result r;

	fake_start(&f);
	thaw(WORDS("sandbox", "ls", "--socket", sock), &r);
	expect_status(&r, 0);
	cr_expect_str_eq(r.out,
			 "ID                   TEMPLATE         STATE    "
			 "CREATED                  EXPIRES                  "
			 "RESTORE_MS\n"
			 "sb-3f9a0c2e71d4b805  py               -        "
			 "2026-11-30T01:02:03.456Z 2026-11-30T01:03:03.456Z "
			 "      41.7\n");
	run_result_free(&r);
	thaw(WORDS("sandbox", "ls", "--json", "--socket", sock), &r);
	fake_stop(&f);
	expect_status(&r, 0);
	cr_expect_str_eq(r.out,
			 ring_printf("{\"sandboxes\":[%s]}\n", sandbox_json));
	cr_expect(!strncmp(f.requests[1], "GET /sandboxes HTTP/1.1\r\n", 25),
		  "request: %s", f.requests[1]);
	run_result_free(&r);
}

static const char checkpoint_json[] =
	"\"snapshot\":\"5d2e000000000001\",\"parent\":\"9c1f000000000000\","
	"\"dirty_bytes\":1048576,\"full\":false,\"depth\":1,"
	"\"pause_ms\":3.1,\"total_ms\":14.7";

Test(client, sandbox_checkpoint_and_fork)
{
	struct fake_daemon f = {
		.answers = { { json_answer(
				     "201 Created",
				     ring_printf("{%s}", checkpoint_json)) },
			     { json_answer(
				     "201 Created",
				     ring_printf(
					     "{%s,\"sandboxes\":[%s,{\"error\":"
					     "{\"code\":\"capacity\",\"message\":"
					     "\"no room\"}}]}",
					     checkpoint_json,
					     sandbox_json)) } },
		.nr_answers = 2,
	};
	struct run_result r;

	fake_start(&f);
	thaw(WORDS("sandbox", "checkpoint", "--socket", sock,
		   "3f9a0c2e71d4b805"),
	     &r);
	expect_status(&r, 0);
	cr_expect_str_eq(r.out, "5d2e000000000001\n");
	expect_err(&r, "checkpoint 5d2e000000000001 (parent 9c1f000000000000, "
		       "depth 1): 1.0 MiB written, paused 3.1 ms");
	cr_expect(!strncmp(f.requests[0],
			   "POST /sandboxes/3f9a0c2e71d4b805/checkpoint "
			   "HTTP/1.1\r\n",
			   53),
		  "request: %s", f.requests[0]);
	run_result_free(&r);
	thaw(WORDS("sandbox", "fork", "--socket", sock, "-n", "2",
		   "3f9a0c2e71d4b805"),
	     &r);
	fake_stop(&f);
	/* One fork made, one refused: its id printed, the other's why. */
	expect_status(&r, EXIT_FAILED);
	cr_expect_str_eq(r.out, "sb-3f9a0c2e71d4b805\n");
	expect_err(&r, "thaw sandbox fork: fork 2: capacity: no room");
	cr_expect_str_eq(body_of(f.requests[1]), "{\"count\":2}");
	run_result_free(&r);
}

Test(client, sandbox_rollback_sends_the_snapshot)
{
	struct fake_daemon f = {
		.answers = { { json_answer("200 OK", sandbox_json) } },
		.nr_answers = 1,
	};
	struct run_result r;

	fake_start(&f);
	thaw(WORDS("sandbox", "rollback", "--socket", sock, "3f9a0c2e71d4b805",
		   "5d2e000000000001"),
	     &r);
	fake_stop(&f);
	expect_status(&r, 0);
	expect_err(&r, "sandbox sb-3f9a0c2e71d4b805 rolled back to");
	cr_expect_str_eq(body_of(f.requests[0]),
			 "{\"snapshot\":\"5d2e000000000001\"}");
	run_result_free(&r);
}

Test(client, sandbox_operations_usage_errors)
{
	expect_usage_error(WORDS("sandbox", "rollback", "3f9a0c2e71d4b805"),
			   EXIT_USAGE, "no snapshot id given");
	expect_usage_error(WORDS("sandbox", "fork", "-n", "65", "x"),
			   EXIT_USAGE, "-n '65' is not a count from 1 to 64");
	expect_usage_error(WORDS("sandbox", "pause"), EXIT_USAGE,
			   "no sandbox id given");
	expect_usage_error(WORDS("sandbox", "resume", "a", "b"), EXIT_USAGE,
			   "unexpected argument 'b'");
	expect_usage_error(WORDS("sandbox", "create", "--template", "t",
				 "--snapshot", "s"),
			   EXIT_USAGE, "--template or --snapshot, not both");
}

Test(client, sandbox_rm_tries_every_id)
{
	struct fake_daemon f = {
		.answers = { { NO_CONTENT },
			     { error_answer("404 Not Found", "not_found",
					    "no sandbox sb-2") },
			     { NO_CONTENT } },
		.nr_answers = 3,
	};
	struct run_result r;

	fake_start(&f);
	thaw(WORDS("sandbox", "rm", "--socket", sock, "sb-1", "sb-2", "a/b"),
	     &r);
	fake_stop(&f);
	expect_status(&r, EXIT_FAILED);
	cr_expect_str_eq(r.err, "thaw sandbox rm: sb-2: 404 not_found: no "
				"sandbox sb-2\n");
	cr_expect_eq(f.served, 3);
	expect_request(f.requests[0], "DELETE /sandboxes/sb-1 HTTP/1.1\r\n");
	expect_request(f.requests[1], "DELETE /sandboxes/sb-2 HTTP/1.1\r\n");
	/* An id never becomes more of the path. */
	expect_request(f.requests[2], "DELETE /sandboxes/a%2Fb HTTP/1.1\r\n");
	run_result_free(&r);
}

static void read_file(const char *path, char *buf, size_t cap, size_t *len)
{
	int fd = open(path, O_RDONLY);

	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	ssize_t n = read(fd, buf, cap);
	cr_assert_geq(n, 0);
	*len = n;
	close(fd);
}

/* Nothing but @names (and . and ..) in the test directory. */
static void expect_dir_holds(int n, const char *names[])
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int seen = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		bool known =
			!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");

		for (int i = 0; i < n; i++)
			known |= !strcmp(e->d_name, names[i]);
		cr_expect(known, "left behind: %s", e->d_name);
		seen += known && e->d_name[0] != '.';
	}
	closedir(d);
	cr_expect_eq(seen, n);
}

static const char file_data[] = "line one\n\0binary\xff tail";

Test(client, cp_download)
{
	struct fake_daemon f = {
		.answers = { { answer("200 OK", "application/octet-stream",
				      file_data, sizeof(file_data)) },
			     { answer("200 OK", "application/octet-stream",
				      file_data, sizeof(file_data)) } },
		.nr_answers = 2,
	};
	struct run_result r;
	char dst[300], got[256];
	size_t len;

	snprintf(dst, sizeof(dst), "%s/copy", dir);
	fake_start(&f);
	thaw(WORDS("cp", "--socket", sock, "sb-1:/etc/my file", dst), &r);
	expect_status(&r, 0);
	cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
	run_result_free(&r);
	read_file(dst, got, sizeof(got), &len);
	cr_expect_eq(len, sizeof(file_data));
	cr_expect_arr_eq(got, file_data, sizeof(file_data));
	expect_request(f.requests[0], "GET /sandboxes/sb-1/files?path="
				      "%2Fetc%2Fmy%20file HTTP/1.1\r\n");
	/* Into a directory: the remote file's name. */
	thaw(WORDS("cp", "--socket", sock, "sb-1:/etc/hosts", dir), &r);
	fake_stop(&f);
	expect_status(&r, 0);
	run_result_free(&r);
	snprintf(dst, sizeof(dst), "%s/hosts", dir);
	read_file(dst, got, sizeof(got), &len);
	cr_expect_eq(len, sizeof(file_data));
	expect_dir_holds(3, (const char *[]){ "thawd.sock", "copy", "hosts" });
}

Test(client, cp_download_error_leaves_the_target_alone)
{
	struct fake_daemon f = {
		.answers = { { error_answer(
				     "404 Not Found", "not_found",
				     "/nope: No such file or directory") },
			     { error_answer("409 Conflict", "conflict",
					    "/etc: not a regular file") } },
		.nr_answers = 2,
	};
	struct run_result r;
	char dst[300], got[64];
	size_t len;

	snprintf(dst, sizeof(dst), "%s/absent", dir);
	fake_start(&f);
	thaw(WORDS("cp", "--socket", sock, "sb-1:/nope", dst), &r);
	expect_status(&r, EXIT_FAILED);
	cr_expect_str_eq(r.err, "thaw cp: 404 not_found: /nope: No such file "
				"or directory\n");
	run_result_free(&r);
	snprintf(dst, sizeof(dst), "%s/kept", dir);
	int fd = open(dst, O_WRONLY | O_CREAT, 0600);
	cr_assert_eq(write(fd, "old", 3), 3);
	close(fd);
	thaw(WORDS("cp", "--socket", sock, "sb-1:/etc", dst), &r);
	fake_stop(&f);
	expect_status(&r, EXIT_FAILED);
	expect_err(&r, "thaw cp: 409 conflict: /etc: not a regular file");
	run_result_free(&r);
	read_file(dst, got, sizeof(got), &len);
	cr_expect_eq(len, 3);
	expect_dir_holds(2, (const char *[]){ "thawd.sock", "kept" });
}

Test(client, cp_upload_keeps_the_mode)
{
	struct fake_daemon f = {
		.answers = { { NO_CONTENT } },
		.nr_answers = 1,
	};
	struct run_result r;
	char src[300];

	snprintf(src, sizeof(src), "%s/src", dir);
	int fd = open(src, O_WRONLY | O_CREAT, 0640);
	cr_assert_eq(write(fd, file_data, sizeof(file_data)),
		     (ssize_t)sizeof(file_data));
	close(fd);
	cr_assert_eq(chmod(src, 0640), 0);
	fake_start(&f);
	thaw(WORDS("cp", "--socket", sock, src, "sb-1:/tmp/x y"), &r);
	fake_stop(&f);
	expect_status(&r, 0);
	cr_expect_eq(r.err_len, 0, "stderr: %s", r.err);
	expect_request(f.requests[0], "PUT /sandboxes/sb-1/files?path="
				      "%2Ftmp%2Fx%20y&mode=0640 HTTP/1.1\r\n");
	expect_request(f.requests[0], ring_printf("\r\nContent-Length: %zu\r\n",
						  sizeof(file_data)));
	const char *body = body_of(f.requests[0]);
	cr_expect_eq(f.request_len[0] - (body - f.requests[0]),
		     sizeof(file_data));
	cr_expect_arr_eq(body, file_data, sizeof(file_data));
	run_result_free(&r);
}

Test(client, cp_upload_from_a_pipe_is_chunked)
{
	struct fake_daemon f = {
		.answers = { { NO_CONTENT } },
		.nr_answers = 1,
	};
	struct run_result r;
	char line[600];

	snprintf(line, sizeof(line),
		 "printf 'piped' | \"$0\" cp --socket '%s' - sb-1:/tmp/p",
		 sock);
	fake_start(&f);
	thaw_sh(line, &r);
	fake_stop(&f);
	expect_status(&r, 0);
	expect_request(
		f.requests[0],
		"PUT /sandboxes/sb-1/files?path=%2Ftmp%2Fp HTTP/1.1\r\n");
	expect_request(f.requests[0], "\r\nTransfer-Encoding: chunked\r\n");
	expect_request(body_of(f.requests[0]), "5\r\npiped\r\n");
	run_result_free(&r);
}

Test(client, cp_of_a_directory)
{
	struct run_result r;

	thaw(WORDS("cp", "--socket", sock, dir, "sb-1:/tmp/d"), &r);
	expect_status(&r, EXIT_FAILED);
	cr_expect_str_eq(r.err,
			 ring_printf("thaw cp: %s is a directory\n", dir));
	run_result_free(&r);
}

/* ---- the client library itself (pool/client/thaw_client.h) ---- */

static struct thaw_client *library_open(const char *token,
					volatile sig_atomic_t *cancel)
{
	const struct thaw_client_options o = { .socket = sock,
					       .token = token,
					       .cancel = cancel };
	char err[256];
	struct thaw_client *c = thaw_client_open(&o, err, sizeof(err));

	cr_assert_not_null(c, "%s", err);
	return c;
}

Test(client, library_reads_the_daemons_state)
{
	static const char metrics[] =
		"# TYPE thaw_handouts_total counter\n"
		"thaw_handouts_total{template=\"default\"} 2\n"
		"thaw_handouts_total{template=\"py\"} 7\n";
	struct piece text = answer("200 OK", "text/plain; version=0.0.4",
				   metrics, strlen(metrics));
	struct fake_daemon f = {
		.answers = {
			{ json_answer("200 OK",
				      "{\"templates\":[{\"name\":\"py\","
				      "\"snapshot\":\"9c1f\",\"mem_mib\":256,"
				      "\"vcpus\":1,\"min_ready\":2,"
				      "\"max_total\":16,\"ready\":2,"
				      "\"restoring\":1,\"leased\":3}]}") },
			{ text },
			{ text },
			{ TEXT("HTTP/1.1 503 Service Unavailable\r\n"
			       "Content-Type: application/json\r\n"
			       "Retry-After: 1\r\nContent-Length: 58\r\n"
			       "Connection: close\r\n\r\n"
			       "{\"error\":{\"code\":\"unavailable\","
			       "\"message\":\"shutting down\"}}") },
		},
		.nr_answers = 4,
	};
	struct thaw_call health = { .method = "GET", .path = "/health" };
	struct thaw_template *t;
	struct thaw_reply r;
	char err[256], value[64];
	double v = -1;
	size_t n;

	fake_start(&f);
	struct thaw_client *c = library_open(NULL, NULL);
	cr_assert_eq(thaw_client_templates(c, &t, &n, err, sizeof(err)), 0,
		     "%s", err);
	cr_assert_eq(n, 1);
	cr_expect_str_eq(t[0].name, "py");
	cr_expect_str_eq(t[0].snapshot, "9c1f");
	cr_expect(t[0].max_total == 16 && t[0].ready == 2 &&
		  t[0].restoring == 1 && t[0].leased == 3);
	free(t);
	cr_expect_eq(thaw_client_metric(c, "thaw_handouts_total", "py", &v, err,
					sizeof(err)),
		     0, "%s", err);
	cr_expect_eq(v, 7);
	cr_expect_eq(thaw_client_metric(c, "thaw_handouts_total", "go", &v, err,
					sizeof(err)),
		     THAW_CLIENT_ANSWER);
	cr_expect_eq(thaw_client_call(c, &health, &r, err, sizeof(err)),
		     THAW_CLIENT_STATUS);
	cr_expect_str_eq(err, "503 unavailable: shutting down");
	cr_expect_eq(r.status, 503);
	cr_expect(thaw_reply_header(&r, "retry-after", value, sizeof(value)));
	cr_expect_str_eq(value, "1");
	cr_expect(thaw_reply_header(&r, "Content-Type", value, sizeof(value)));
	cr_expect_str_eq(value, "application/json");
	cr_expect_not(thaw_reply_header(&r, "Allow", value, sizeof(value)));
	thaw_reply_free(&r);
	thaw_client_close(c);
	fake_stop(&f);
	cr_expect(!strncmp(f.requests[0], "GET /templates HTTP/1.1\r\n", 25),
		  "request: %s", f.requests[0]);
	cr_expect_null(strstr(f.requests[0], "Authorization"));
}

/* /health says whether the daemon admits and why not; a daemon that
 * says nothing of admission admits. */
Test(client, library_reads_admission)
{
	struct fake_daemon f = {
		.answers = {
			{ json_answer("200 OK",
				      "{\"status\":\"ok\",\"admitting\":false,"
				      "\"overload\":\"cpu pressure 93 %\"}") },
			{ json_answer("200 OK", "{\"status\":\"ok\"}") },
		},
		.nr_answers = 2,
	};
	struct thaw_health h;
	char err[256];

	fake_start(&f);
	struct thaw_client *c = library_open(NULL, NULL);
	cr_assert_eq(thaw_client_health(c, &h, err, sizeof(err)), 0, "%s", err);
	cr_expect_not(h.admitting);
	cr_expect_str_eq(h.overload, "cpu pressure 93 %");
	cr_assert_eq(thaw_client_health(c, &h, err, sizeof(err)), 0, "%s", err);
	cr_expect(h.admitting);
	cr_expect_str_empty(h.overload);
	thaw_client_close(c);
	fake_stop(&f);
	cr_expect(!strncmp(f.requests[0], "GET /health HTTP/1.1\r\n", 22),
		  "request: %s", f.requests[0]);
}

Test(client, library_gets_one_sandbox_and_refuses_bad_lists)
{
	static const char stopped[] =
		"{\"id\":\"sb-3f9a0c2e71d4b805\",\"template\":\"py\","
		"\"state\":\"stopped\",\"pid\":812,"
		"\"stop_reason\":\"the guest panicked\",\"restore_ms\":41.7,"
		"\"restore\":{\"host_ms\":3.9,\"vmm_start_ms\":3.5,"
		"\"page_in_ms\":1.2,\"prefetched_pages\":5376,"
		"\"state_restore_ms\":0.4,\"guest_ms\":37.8,"
		"\"agent_ms\":36.1,\"identity_ms\":1.7,\"network_ms\":2.5}}";
	/* 3 bytes an element, as a list must not cost a struct each. */
	static char zeros[3 * 70000 + 32];
	size_t len =
		(size_t)snprintf(zeros, sizeof(zeros), "{\"sandboxes\":[0");

	for (int i = 1; i < 70000; i++)
		len += (size_t)snprintf(zeros + len, sizeof(zeros) - len, ",0");
	snprintf(zeros + len, sizeof(zeros) - len, "]}");
	struct fake_daemon f = {
		.answers = {
			{ json_answer("200 OK", stopped) },
			{ json_answer("200 OK", "{\"sandboxes\":[0]}") },
			{ TEXT(ring_printf("HTTP/1.1 200 OK\r\n"
					   "Content-Type: application/json\r\n"
					   "Content-Length: %zu\r\n"
					   "Connection: close\r\n\r\n",
					   strlen(zeros))),
			  TEXT(zeros) },
		},
		.nr_answers = 3,
	};
	const struct thaw_client_options none = { .socket = NULL };
	struct thaw_sandbox s, *list = NULL;
	char err[256];
	size_t n = 1;

	cr_expect_null(thaw_client_open(&none, err, sizeof(err)));
	cr_expect_str_eq(err, "no socket for the daemon");

	fake_start(&f);
	struct thaw_client *c = library_open(NULL, NULL);
	cr_assert_eq(
		thaw_client_get(c, "sb-3f9a0c2e71d4b805", &s, err, sizeof(err)),
		0, "%s", err);
	cr_expect_str_eq(s.id, "sb-3f9a0c2e71d4b805");
	cr_expect_str_eq(s.state, "stopped");
	cr_expect_eq(s.pid, 812);
	cr_expect_str_eq(s.stop_reason, "the guest panicked");
	const struct thaw_restore_phases *p = &s.restore;
	cr_expect(p->host_ms == 3.9 && p->vmm_start_ms == 3.5 &&
			  p->page_in_ms == 1.2 && p->prefetched_pages == 5376 &&
			  p->state_restore_ms == 0.4,
		  "host side %f: vmm start %f (page-in %f, %f pages), "
		  "state %f",
		  p->host_ms, p->vmm_start_ms, p->page_in_ms,
		  p->prefetched_pages, p->state_restore_ms);
	cr_expect(p->guest_ms == 37.8 && p->agent_ms == 36.1 &&
			  p->identity_ms == 1.7,
		  "guest side %f: agent %f, identity %f", p->guest_ms,
		  p->agent_ms, p->identity_ms);
	cr_expect(p->network_ms == 2.5, "network %f", p->network_ms);
	cr_expect_eq(thaw_client_list(c, &list, &n, err, sizeof(err)),
		     THAW_CLIENT_ANSWER);
	cr_expect_str_eq(err, "the daemon's sandbox list holds a non-object");
	cr_expect_eq(thaw_client_list(c, &list, &n, err, sizeof(err)),
		     THAW_CLIENT_ANSWER);
	cr_expect_str_eq(err,
			 "the daemon's sandbox list has over 65536 elements");
	cr_expect(list == NULL && n == 0);
	thaw_client_close(c);
	fake_stop(&f);
	cr_expect(!strncmp(f.requests[0],
			   "GET /sandboxes/sb-3f9a0c2e71d4b805 HTTP/1.1\r\n",
			   45),
		  "request: %s", f.requests[0]);
}

/* Records a buffered exec's events. */
struct events {
	char out[64], err[64];
	int exits;
	struct thaw_exec_event end;
};

static int record_event(const struct thaw_exec_event *e, void *arg, char *err,
			size_t errlen)
{
	struct events *ev = arg;

	(void)err;
	(void)errlen;
	if (e->type == THAW_EXEC_STDOUT || e->type == THAW_EXEC_STDERR)
		snprintf(e->type == THAW_EXEC_STDOUT ? ev->out : ev->err,
			 sizeof(ev->out), "%.*s", (int)e->len,
			 (const char *)e->data);
	if (e->type == THAW_EXEC_EXIT) {
		ev->exits++;
		ev->end = *e;
	}
	return 0;
}

Test(client, library_exec_ping_delete_and_a_raw_put)
{
	struct fake_daemon f = {
		.answers = { { json_answer("200 OK",
					   "{\"stdout\":\"aGkK\",\"stderr\":"
					   "\"b29wcwo=\",\"signal\":9,"
					   "\"timed_out\":true,"
					   "\"truncated\":true}") },
			     { json_answer("200 OK", "{\"id\":\"sb-1\","
						     "\"agent_ms\":0.41}") },
			     { NO_CONTENT },
			     { NO_CONTENT } },
		.nr_answers = 4,
	};
	const struct thaw_call put = {
		.method = "PUT",
		.path = "/sandboxes/sb-1/files?path=%2Fx",
		.body = "data",
		.len = 4,
		.expect_continue = true
	};
	struct thaw_reply r;
	const char *const argv[] = { "true", NULL };
	const struct thaw_exec spec = { .argv = argv, .buffered = true };
	struct events ev = { 0 };
	char err[256];
	double ms = 0;

	fake_start(&f);
	struct thaw_client *c = library_open("t0k", NULL);
	cr_expect_eq(thaw_client_exec(c, "sb-1", &spec, record_event, &ev, err,
				      sizeof(err)),
		     0, "%s", err);
	cr_expect_str_eq(ev.out, "hi\n");
	cr_expect_str_eq(ev.err, "oops\n");
	cr_expect_eq(ev.exits, 1);
	cr_expect(ev.end.signal == 9 && ev.end.timed_out && ev.end.truncated);
	cr_expect_eq(thaw_client_ping(c, "sb-1", &ms, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect_eq(ms, 0.41);
	cr_expect_eq(thaw_client_delete(c, "sb-1", err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(thaw_client_call(c, &put, &r, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(r.status, 204);
	thaw_reply_free(&r);
	thaw_client_close(c);
	fake_stop(&f);
	cr_expect_str_eq(body_of(f.requests[0]),
			 "{\"argv\":[\"true\"],\"stream\":false}");
	expect_request(f.requests[0], "\r\nAuthorization: Bearer t0k\r\n");
	expect_request(f.requests[1], "POST /sandboxes/sb-1/ping HTTP/1.1\r\n");
	expect_request(f.requests[1], "\r\nContent-Length: 0\r\n");
	expect_request(f.requests[2], "DELETE /sandboxes/sb-1 HTTP/1.1\r\n");
	/* The go-ahead header joins the token's, and the body follows it. */
	expect_request(f.requests[3], "\r\nAuthorization: Bearer t0k\r\n");
	expect_request(f.requests[3], "\r\nExpect: 100-continue\r\n");
	cr_expect_str_eq(body_of(f.requests[3]), "data");
}

static volatile sig_atomic_t library_canceled;

static void on_sigint(int sig)
{
	library_canceled = sig;
}

/* The cancel flag ends a call the daemon is silent in, and hangs up. */
Test(client, library_cancel_ends_a_silent_exec)
{
	struct fake_daemon f = { 0 };
	const char *const argv[] = { "sleep", "100", NULL };
	const struct thaw_exec spec = { .argv = argv };
	struct sigaction sa = { .sa_handler = on_sigint };
	struct events ev = { 0 };
	char err[256];

	cr_assert_eq(sigaction(SIGINT, &sa, NULL), 0);
	started_then_interrupt(&f);
	fake_start(&f);
	struct thaw_client *c = library_open(NULL, &library_canceled);
	cr_expect_eq(thaw_client_exec(c, "sb-1", &spec, record_event, &ev, err,
				      sizeof(err)),
		     THAW_CLIENT_CANCELED, "%s", err);
	thaw_client_close(c);
	fake_stop(&f);
	cr_expect_eq(library_canceled, SIGINT);
	cr_expect(f.client_hung_up, "the library kept the connection open");
	cr_expect_eq(ev.exits, 0);
}

/* RFC 4648's test vectors, both ways. */
Test(base64, rfc4648_vectors)
{
	static const char *const plain[] = { "",     "f",     "fo",    "foo",
					     "foob", "fooba", "foobar" };
	static const char *const coded[] = {
		"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"
	};

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		char *text = base64_encode(plain[i], strlen(plain[i]));
		size_t len;
		char *bytes = base64_decode(coded[i], strlen(coded[i]), &len);

		cr_assert_not_null(text);
		cr_expect_str_eq(text, coded[i]);
		cr_assert_not_null(bytes, "decoding '%s'", coded[i]);
		cr_expect_eq(len, strlen(plain[i]));
		cr_expect_arr_eq(bytes, plain[i], len);
		free(text);
		free(bytes);
	}
}

Test(base64, every_byte_at_every_length_round_trips)
{
	unsigned char data[300];

	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (unsigned char)(i * 167 + 13);
	for (size_t n = 0; n <= sizeof(data); n++) {
		char *text = base64_encode(data, n);
		size_t len;

		cr_assert_not_null(text);
		cr_assert_eq(strlen(text), (n + 2) / 3 * 4);
		unsigned char *back = base64_decode(text, strlen(text), &len);
		cr_assert_not_null(back, "length %zu", n);
		cr_assert_eq(len, n);
		cr_assert_arr_eq(back, data, n);
		free(text);
		free(back);
	}
}

Test(base64, rejects_what_is_not_base64)
{
	static const char *const bad[] = { "Zg",       "Zm9",	"Z===",
					   "Zg==Zg==", "Zm9v!", "Zg=a" };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		size_t len;

		errno = 0;
		cr_expect_null(base64_decode(bad[i], strlen(bad[i]), &len),
			       "'%s' decoded", bad[i]);
		cr_expect_eq(errno, EINVAL, "'%s'", bad[i]);
	}
}

static const char network_json[] =
	"{\"id\":\"3f9a0c2e71d4b805\",\"template\":\"py\","
	"\"network\":{\"allow_internet\":true,"
	"\"allow_out\":[\"10.0.0.0/8\",\"192.168.1.0/24\"],\"deny_out\":[],"
	"\"host_address\":\"10.200.0.2\"}}";

Test(client, sandbox_create_sends_the_network)
{
	static struct fake_daemon f;
	struct run_result r;

	create_with(WORDS("sandbox", "create", "--socket", sock, "--allow-out",
			  "10.0.0.0/8", "--no-internet", "--allow-out",
			  "1.2.3.4", "--deny-out", "8.8.8.8/32"),
		    network_json, &f, &r);
	expect_status(&r, 0);
	expect_err(&r, "handout 0.00 ms, host address 10.200.0.2\n");
	cr_expect_str_eq(body_of(f.requests[0]),
			 "{\"network\":{\"allow_internet\":false,"
			 "\"allow_out\":[\"10.0.0.0/8\",\"1.2.3.4\"],"
			 "\"deny_out\":[\"8.8.8.8/32\"]}}");
	run_result_free(&r);
}

/* Without policy options it shows; with them it replaces, then shows. */
Test(client, sandbox_network_shows_and_sets)
{
	struct fake_daemon f = {
		.answers = { { json_answer("200 OK", network_json) },
			     { json_answer("200 OK", network_json) },
			     { json_answer("200 OK", sandbox_json) } },
		.nr_answers = 3,
	};
	static const char shown[] = "host_address 10.200.0.2\n"
				    "allow_internet true\n"
				    "allow_out 10.0.0.0/8 192.168.1.0/24\n"
				    "deny_out -\n";
	struct run_result r;

	fake_start(&f);
	thaw(WORDS("sandbox", "network", "--socket", sock, "3f9a0c2e71d4b805"),
	     &r);
	expect_status(&r, 0);
	cr_expect_str_eq(r.out, shown);
	run_result_free(&r);
	thaw(WORDS("sandbox", "network", "--socket", sock, "3f9a0c2e71d4b805",
		   "--internet", "--deny-out", "1.1.1.1"),
	     &r);
	expect_status(&r, 0);
	cr_expect_str_eq(r.out, shown);
	run_result_free(&r);
	thaw(WORDS("sandbox", "network", "--socket", sock, "3f9a0c2e71d4b805"),
	     &r);
	fake_stop(&f);
	expect_status(&r, 0);
	cr_expect_str_eq(r.out, "network none\n", "an answer without one");
	run_result_free(&r);

	cr_expect(!strncmp(f.requests[0],
			   "GET /sandboxes/3f9a0c2e71d4b805 HTTP/1.1\r\n", 41),
		  "request: %s", f.requests[0]);
	cr_expect(
		!strncmp(
			f.requests[1],
			"POST /sandboxes/3f9a0c2e71d4b805/network HTTP/1.1\r\n",
			50),
		"request: %s", f.requests[1]);
	cr_expect_str_eq(
		body_of(f.requests[1]),
		"{\"allow_internet\":true,\"deny_out\":[\"1.1.1.1\"]}");
}
