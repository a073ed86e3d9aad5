// SPDX-License-Identifier: Apache-2.0
/*
 * thawd_process.c - see thawd_process.h.
 *
 * fork + exec of `thaw daemon` (or of the wrapper running it); a detached
 * daemon is forked by a middle child that reports its pid on a pipe and
 * exits, so nobody waits for it and its end shows only as its /proc entry
 * going (or turning zombie).  The waits poll every 100 ms on the monotonic
 * clock: a start builds a template's snapshot, minutes on an emulated
 * host, so nothing here needs to be finer.
 */
#include "pool/client/thawd_process.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/errbuf.h"
#include "pool/client/thaw_client.h"

#define DEFAULT_START_LIMIT_S 600
#define POLL_MS 100
#define MAX_ARGS 64

static double now_s(void)
{
	return monotonic_ns() / 1e9;
}

static int write_config(const struct thawd_process_spec *s, char *err,
			size_t errlen)
{
	FILE *f = fopen(s->config, "we");

	if (!f || fputs(s->config_text, f) < 0 || fclose(f)) {
		int e = errno ? errno : EIO;

		errbuf_set(err, errlen, "%s: %s", s->config, strerror(e));
		return -e;
	}
	return 0;
}

/* The argv: [wrapper...] thaw daemon --config C [--state S] [--socket S]
 * [args...]. */
static void build_argv(const struct thawd_process_spec *s, const char **argv)
{
	int n = 0;

	for (const char *const *w = s->wrapper; w && *w && n < MAX_ARGS / 2;)
		argv[n++] = *w++;
	argv[n++] = s->thaw;
	argv[n++] = "daemon";
	argv[n++] = "--config";
	argv[n++] = s->config;
	if (s->state) {
		argv[n++] = "--state";
		argv[n++] = s->state;
	}
	if (s->socket) {
		argv[n++] = "--socket";
		argv[n++] = s->socket;
	}
	for (const char *const *a = s->args; a && *a && n < MAX_ARGS - 1;)
		argv[n++] = *a++;
	argv[n] = NULL;
}

/* In the forked child: becomes the daemon, output into @log. */
static void exec_daemon(const struct thawd_process_spec *s, int log,
			pid_t parent)
{
	const char *argv[MAX_ARGS];
	int null = open("/dev/null", O_RDONLY | O_CLOEXEC);

	if (s->die_with_parent && !s->detached) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
	}
	if (s->own_process_group)
		setpgid(0, 0);
	for (const char *const *e = s->env; e && *e; e++)
		putenv((char *)*e);
	build_argv(s, argv);
	if (null < 0 || dup2(null, STDIN_FILENO) < 0 ||
	    dup2(log, STDOUT_FILENO) < 0 || dup2(log, STDERR_FILENO) < 0)
		_exit(127);
	/* A daemon inherits nothing else: a test runner's pipe held open
	 * would keep the runner waiting for the daemon's end. */
	close_range(3, ~0U, 0);
	execv(argv[0], (char *const *)argv);
	dprintf(STDERR_FILENO, "thawd_process: cannot run %s: %s\n", argv[0],
		strerror(errno));
	_exit(127);
}

/* Forks the daemon as our child, or detached (thawd_process.h); its pid,
 * or -errno. */
static pid_t fork_daemon(const struct thawd_process_spec *s, int log)
{
	pid_t parent = getpid(), pid = -1, mid;
	int p[2];

	if (!s->detached) {
		pid = fork();
		if (pid == 0)
			exec_daemon(s, log, parent);
		return pid < 0 ? -errno : pid;
	}
	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	mid = fork();
	if (mid == 0) {
		pid = fork();
		if (pid == 0)
			exec_daemon(s, log, getpid());
		_exit(write(p[1], &pid, sizeof(pid)) != sizeof(pid));
	}
	int e = mid < 0 ? errno : 0;
	close(p[1]);
	if (mid < 0 || read(p[0], &pid, sizeof(pid)) != sizeof(pid) || pid < 0)
		pid = -(e ? e : ECHILD);
	close(p[0]);
	if (mid > 0)
		waitpid(mid, NULL, 0);
	return pid;
}

/* Whether the thaw API on @s->socket answers GET /health with 200. */
static bool socket_answers(const struct thawd_process_spec *s)
{
	const struct thaw_client_options o = { .socket = s->socket,
					       .token = s->token,
					       .timeout_s = 10 };
	const struct thaw_call health = { .method = "GET", .path = "/health" };
	struct thaw_reply r = { 0 };
	char why[256];
	struct thaw_client *c = thaw_client_open(&o, why, sizeof(why));
	bool up = c && !access(s->socket, F_OK) &&
		  thaw_client_call(c, &health, &r, why, sizeof(why)) == 0 &&
		  r.status == 200;

	thaw_reply_free(&r);
	thaw_client_close(c);
	return up;
}

/* Whether the E2B listener on 127.0.0.1:@s->e2b_port answers an
 * authenticated GET /v2/sandboxes with 200: a raw request, so that an E2B
 * test's only client of that port is the SDK it tests. */
static bool e2b_answers(const struct thawd_process_spec *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_port = htons(s->e2b_port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct timeval limit = { .tv_sec = 10 };
	char buf[64] = "";
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), status = -1;

	if (fd < 0)
		return false;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
	if (!connect(fd, (struct sockaddr *)&a, sizeof(a)) &&
	    dprintf(fd,
		    "GET /v2/sandboxes HTTP/1.1\r\nHost: 127.0.0.1\r\n"
		    "X-API-KEY: %s\r\nConnection: close\r\n\r\n",
		    s->token ? s->token : "") > 0 &&
	    read(fd, buf, sizeof(buf) - 1) > 0)
		sscanf(buf, "HTTP/1.%*d %d", &status);
	close(fd);
	return status == 200;
}

int thawd_process_start(struct thawd_process *p,
			const struct thawd_process_spec *s, char *err,
			size_t errlen)
{
	double limit =
		s->start_limit_s > 0 ? s->start_limit_s : DEFAULT_START_LIMIT_S;
	char tail[2048], why[64];
	int ret;

	memset(p, 0, sizeof(*p));
	p->own_process_group = s->own_process_group;
	p->child = !s->detached;
	snprintf(p->log, sizeof(p->log), "%s", s->log);
	if (s->config_text && (ret = write_config(s, err, errlen)))
		return ret;
	int log = open(s->log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (log < 0) {
		ret = -errno;
		errbuf_set(err, errlen, "%s: %s", s->log, strerror(-ret));
		return ret;
	}
	if (s->banner)
		dprintf(log, "%s\n", s->banner);
	p->log_from = lseek(log, 0, SEEK_END);
	double start = now_s();
	pid_t pid = fork_daemon(s, log);
	close(log);
	if (pid < 0) {
		errbuf_set(err, errlen, "fork: %s", strerror(-pid));
		return pid;
	}
	p->pid = pid;
	for (;;) {
		if ((!s->socket || socket_answers(s)) &&
		    (!s->e2b_port || e2b_answers(s))) {
			p->serving_s = now_s() - start;
			return 0;
		}
		if (thawd_process_wait(p, 0) == 0) {
			thawd_process_log_tail(p, tail, sizeof(tail));
			if (p->child)
				thawd_process_why(p->status, why, sizeof(why));
			errbuf_set(err, errlen,
				   "thaw daemon ended (%s) before it answered; "
				   "its log ends:\n%s",
				   p->child ? why : "not our child", tail);
			return -ESRCH;
		}
		if (now_s() - start > limit)
			break;
		sleep_ms(POLL_MS);
	}
	thawd_process_kill(p);
	thawd_process_log_tail(p, tail, sizeof(tail));
	errbuf_set(err, errlen,
		   "thaw daemon did not answer%s%s within %.0f s; its log "
		   "ends:\n%s",
		   s->socket ? " on its socket" : "",
		   s->e2b_port ? " on its E2B port" : "", limit, tail);
	return -ETIMEDOUT;
}

/* Whether process @pid (not our child) is gone, or a zombie. */
static bool gone(pid_t pid)
{
	char path[64], stat[512];
	int fd;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	n = read(fd, stat, sizeof(stat) - 1);
	close(fd);
	stat[n > 0 ? n : 0] = '\0';
	const char *end = strrchr(stat, ')');
	return !end || end[1] != ' ' || end[2] == 'Z' || end[2] == 'X';
}

int thawd_process_wait(struct thawd_process *p, double limit_s)
{
	double start = now_s();

	if (p->pid <= 0)
		return 0;
	for (;;) {
		if (p->child ? waitpid(p->pid, &p->status, WNOHANG) == p->pid
			     : gone(p->pid)) {
			p->pid = 0;
			return 0;
		}
		if (now_s() - start >= limit_s)
			return -ETIMEDOUT;
		sleep_ms(limit_s < 1 ? 10 : 50);
	}
}

int thawd_process_stop(struct thawd_process *p, double limit_s, char *err,
		       size_t errlen)
{
	char why[64];

	if (p->pid <= 0)
		return 0;
	kill(p->pid, SIGTERM);
	if (thawd_process_wait(p, limit_s)) {
		thawd_process_kill(p);
		errbuf_set(err, errlen,
			   "thaw daemon ignored SIGTERM for %.0f s", limit_s);
		return -ETIMEDOUT;
	}
	if (p->child && (!WIFEXITED(p->status) || WEXITSTATUS(p->status))) {
		thawd_process_why(p->status, why, sizeof(why));
		errbuf_set(err, errlen, "thaw daemon ended with %s", why);
		return -EIO;
	}
	return 0;
}

void thawd_process_kill(struct thawd_process *p)
{
	if (p->pid <= 0)
		return;
	kill(p->own_process_group ? -p->pid : p->pid, SIGKILL);
	thawd_process_wait(p, 30);
}

void thawd_process_log_tail(const struct thawd_process *p, char *out,
			    size_t len)
{
	int fd = open(p->log, O_RDONLY | O_CLOEXEC);
	struct stat st;
	ssize_t n = 0;

	out[0] = '\0';
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(out, len, "(%s: %s)", p->log, strerror(errno));
		if (fd >= 0)
			close(fd);
		return;
	}
	off_t from = st.st_size - (off_t)len + 1;
	if (from < p->log_from)
		from = p->log_from;
	n = pread(fd, out, len - 1, from);
	out[n > 0 ? n : 0] = '\0';
	close(fd);
}

void thawd_process_why(int status, char *out, size_t len)
{
	if (WIFEXITED(status))
		snprintf(out, len, "exit status %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(out, len, "killed by signal %d (%s)", WTERMSIG(status),
			 strsignal(WTERMSIG(status)));
	else
		snprintf(out, len, "wait status %#x", status);
}
