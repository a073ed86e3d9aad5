// SPDX-License-Identifier: Apache-2.0
/*
 * exec.c - EXEC and KILL: running commands for the host.
 *
 * Each command is forked into its own session (setsid), so its pid is
 * also its process group id and a timeout, KILL or disconnect can signal
 * everything it started with one kill(-pid).  stdin is a pipe fed from
 * the EXEC's STDIN bytes as the child reads, stdout and stderr are two
 * pipes streamed as STDOUT/STDERR frames.  Whether exec itself worked is
 * learnt synchronously through a close-on-exec status pipe, so a missing
 * program is an ERROR rather than an EXIT 127.  In a guest each command
 * moves into the commands cgroup (init.c) before exec, so what it starts
 * is bounded in tasks and memory and cannot take the agent down with it.
 *
 * The agent is init (or a subreaper in tests), so SIGCHLD also brings
 * orphans; only pids in the exec list are reported.  When a command's
 * main process ends, whatever is already in its pipes is drained, then
 * EXIT is sent and the pipes are closed: output written later by
 * background processes it left behind is not delivered (PROTOCOL.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent.h"

/* Output read per pipe event; well under a frame. */
#define CHUNK (64u << 10)
/* At exit, drain at most this per pipe (the largest pipe buffer). */
#define DRAIN_MAX (1u << 20)

struct spawn_status {
	int stage; /* 0 chdir, 1 exec */
	int err;
};

static uint8_t chunk[CHUNK];

static struct exec *find(const struct conn *c, uint32_t req)
{
	for (struct exec *e = agent.execs; e; e = e->next) {
		if (!e->dead && e->conn == c && e->req == req)
			return e;
	}
	return NULL;
}

/* A NULL-terminated vector of the @tag strings, in one allocation. */
static char **strv(const struct thaw_msg *m, uint16_t tag)
{
	const struct thaw_field *f = thaw_get(m, tag);
	size_t size = (f->count + 1) * sizeof(char *), it = 0, i = 0;
	const uint8_t *val;
	uint32_t len;
	char **v, *s;

	while (thaw_next(m, tag, &it, &val, &len))
		size += len + 1;
	v = malloc(size);
	if (!v)
		return NULL;
	s = (char *)(v + f->count + 1);
	it = 0;
	while (thaw_next(m, tag, &it, &val, &len)) {
		memcpy(s, val, len);
		s[len] = '\0';
		v[i++] = s;
		s += len + 1;
	}
	v[i] = NULL;
	return v;
}

static void close_pair(int p[2])
{
	for (int i = 0; i < 2; i++) {
		if (p[i] >= 0)
			close(p[i]);
		p[i] = -1;
	}
}

static __attribute__((noreturn)) void child(int fds[4][2], char **argv,
					    char **envp, const char *cwd)
{
	struct spawn_status st = { .stage = 0 };
	sigset_t none;

	setsid();
	/* Before it runs a single instruction of its own: see init.c. */
	if (commands_cgroup_fd >= 0)
		(void)!write(commands_cgroup_fd, "0", 1);
	/* Blocked and ignored signals survive exec; the command wants
	 * neither the agent's SIGCHLD block nor its ignored SIGPIPE. */
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	dup2(fds[0][0], STDIN_FILENO);
	dup2(fds[1][1], STDOUT_FILENO);
	dup2(fds[2][1], STDERR_FILENO);
	if (cwd && chdir(cwd) < 0) {
		st.err = errno;
	} else {
		if (envp)
			environ = envp;
		execvp(argv[0], argv);
		st.stage = 1;
		st.err = errno;
	}
	(void)!write(fds[3][1], &st, sizeof(st));
	_exit(127);
}

/* Returns the child's pid, or -errno with @why set for the ERROR. */
static pid_t spawn(int fds[4][2], char **argv, char **envp, const char *cwd,
		   const char **why)
{
	struct spawn_status st;
	ssize_t n;
	pid_t pid;

	*why = "fork";
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		child(fds, argv, envp, cwd);
	close(fds[0][0]);
	close(fds[1][1]);
	close(fds[2][1]);
	close(fds[3][1]);
	fds[0][0] = fds[1][1] = fds[2][1] = fds[3][1] = -1;
	do {
		n = read(fds[3][0], &st, sizeof(st));
	} while (n < 0 && errno == EINTR);
	if (n != sizeof(st))
		return pid;
	waitpid(pid, NULL, 0);
	*why = st.stage == 0 ? "chdir" : "exec";
	return -st.err;
}

static int arm_timer(struct exec *e, uint32_t ms)
{
	struct itimerspec its = {
		.it_value = { .tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000 },
	};

	e->timer.fd =
		timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	if (e->timer.fd < 0)
		return -errno;
	if (timerfd_settime(e->timer.fd, 0, &its, NULL) < 0)
		return -errno;
	return watch_set(&e->timer, EPOLLIN);
}

static void send_started(struct exec *e)
{
	struct thaw_writer w;

	conn_begin(e->conn, &w, THAW_TLV_HEADER + 4, e->req, THAW_EXEC_STARTED,
		   0);
	thaw_put_u32(&w, THAW_T_PID, (uint32_t)e->pid);
	conn_commit(e->conn, &w);
}

static void exec_close(struct exec *e)
{
	watch_close(&e->in);
	watch_close(&e->out);
	watch_close(&e->err);
	watch_close(&e->timer);
	free(e->stdin_buf);
	e->stdin_buf = NULL;
}

void exec_start(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	const struct thaw_field *in = thaw_get(m, THAW_T_STDIN);
	int fds[4][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } };
	char cwd[4096], **argv = NULL, **envp = NULL;
	const char *why = "out of memory";
	struct exec *e = NULL;
	pid_t pid;
	int ret = -ENOMEM;

	if (find(c, req)) {
		conn_error(c, req, EEXIST,
			   "EXEC: request id %u already names a running exec",
			   req);
		return;
	}
	if (thaw_get_str(m, THAW_T_CWD, cwd, sizeof(cwd)) < 0)
		cwd[0] = '\0';
	argv = strv(m, THAW_T_ARGV);
	if (thaw_has(m, THAW_T_ENV))
		envp = strv(m, THAW_T_ENV);
	e = calloc(1, sizeof(*e));
	if (!argv || (thaw_has(m, THAW_T_ENV) && !envp) || !e)
		goto fail;
	if (in->len) {
		e->stdin_buf = malloc(in->len);
		if (!e->stdin_buf)
			goto fail;
		memcpy(e->stdin_buf, in->data, in->len);
		e->stdin_len = in->len;
	}
	why = "pipe";
	for (int i = 0; i < 4; i++) {
		if (pipe2(fds[i], O_CLOEXEC) < 0) {
			ret = -errno;
			goto fail;
		}
	}
	pid = spawn(fds, argv, envp, cwd[0] ? cwd : NULL, &why);
	if (pid < 0) {
		ret = pid;
		goto fail;
	}
	e->conn = c;
	e->req = req;
	e->pid = pid;
	e->in = (struct watch){ .kind = W_STDIN, .fd = fds[0][1], .obj = e };
	e->out = (struct watch){ .kind = W_STDOUT, .fd = fds[1][0], .obj = e };
	e->err = (struct watch){ .kind = W_STDERR, .fd = fds[2][0], .obj = e };
	e->timer = (struct watch){ .kind = W_TIMER, .fd = -1, .obj = e };
	close(fds[3][0]);
	e->next = agent.execs;
	agent.execs = e;
	free(argv);
	free(envp);
	for (int i = 0; i < 3; i++)
		fcntl(i == 0   ? e->in.fd
		      : i == 1 ? e->out.fd
			       : e->err.fd,
		      F_SETFL, O_NONBLOCK);
	send_started(e);
	if (!e->stdin_len)
		watch_close(&e->in);
	ret = 0;
	if (e->in.fd >= 0)
		ret = watch_set(&e->in, EPOLLOUT);
	if (!ret && !c->over)
		ret = watch_set(&e->out, EPOLLIN);
	if (!ret && !c->over)
		ret = watch_set(&e->err, EPOLLIN);
	if (!ret && thaw_get_u32(m, THAW_T_TIMEOUT_MS, 0))
		ret = arm_timer(e, thaw_get_u32(m, THAW_T_TIMEOUT_MS, 0));
	if (ret) {
		/* Already started: kill it; EXIT will report the signal. */
		agent_log("exec %d: setup failed: %s", pid, strerror(-ret));
		kill(-pid, SIGKILL);
	}
	return;
fail:
	if (strcmp(why, "exec") == 0)
		conn_error(c, req, -ret, "EXEC: ARGV[0] \"%s\": %s", argv[0],
			   strerror(-ret));
	else if (strcmp(why, "chdir") == 0)
		conn_error(c, req, -ret, "EXEC: CWD \"%s\": %s", cwd,
			   strerror(-ret));
	else
		conn_error(c, req, -ret, "EXEC: %s: %s", why, strerror(-ret));
	for (int i = 0; i < 4; i++)
		close_pair(fds[i]);
	if (e)
		free(e->stdin_buf);
	free(e);
	free(argv);
	free(envp);
}

static void write_stdin(struct exec *e)
{
	while (e->stdin_off < e->stdin_len) {
		ssize_t n = write(e->in.fd, e->stdin_buf + e->stdin_off,
				  e->stdin_len - e->stdin_off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN)
				return;
			/* EPIPE: the command closed its stdin; fine. */
			break;
		}
		e->stdin_off += (size_t)n;
	}
	watch_close(&e->in);
	free(e->stdin_buf);
	e->stdin_buf = NULL;
}

/* Reads one chunk; returns bytes read, 0 at EOF/closed, -1 on EAGAIN. */
static ssize_t pump_pipe(struct exec *e, struct watch *w)
{
	uint16_t type = w->kind == W_STDOUT ? THAW_STDOUT : THAW_STDERR;
	struct thaw_writer tw;
	ssize_t n;

	do {
		n = read(w->fd, chunk, sizeof(chunk));
	} while (n < 0 && errno == EINTR);
	if (n < 0 && errno == EAGAIN)
		return -1;
	if (n <= 0) {
		watch_close(w);
		return 0;
	}
	conn_begin(e->conn, &tw, THAW_TLV_HEADER + (size_t)n, e->req, type, 0);
	thaw_put_bytes(&tw, THAW_T_DATA, chunk, (size_t)n);
	conn_commit(e->conn, &tw);
	return n;
}

static void on_timeout(struct exec *e)
{
	watch_close(&e->timer);
	e->timed_out = true;
	kill(-e->pid, SIGKILL);
}

void exec_event(struct watch *w, uint32_t events)
{
	struct exec *e = w->obj;

	(void)events;
	if (w->fd < 0 || e->dead || !e->conn)
		return;
	switch (w->kind) {
	case W_STDIN:
		write_stdin(e);
		break;
	case W_STDOUT:
	case W_STDERR:
		pump_pipe(e, w);
		break;
	case W_TIMER:
		on_timeout(e);
		break;
	default:
		break;
	}
}

static void send_exit(struct exec *e, int status)
{
	struct thaw_writer w;

	conn_begin(e->conn, &w, 3 * THAW_TLV_HEADER + 9, e->req, THAW_EXIT, 0);
	if (WIFSIGNALED(status))
		thaw_put_u32(&w, THAW_T_SIGNAL, (uint32_t)WTERMSIG(status));
	else
		thaw_put_u32(&w, THAW_T_EXIT_CODE,
			     (uint32_t)WEXITSTATUS(status));
	thaw_put_u8(&w, THAW_T_TIMED_OUT, e->timed_out);
	conn_commit(e->conn, &w);
}

static void finish(struct exec *e, int status)
{
	if (e->conn) {
		/* Everything the process wrote before exiting is in the
		 * pipes now; deliver it ahead of EXIT. */
		struct watch *ws[] = { &e->out, &e->err };

		for (int i = 0; i < 2; i++) {
			size_t total = 0;
			ssize_t n = 1;

			while (ws[i]->fd >= 0 && total < DRAIN_MAX && n > 0) {
				n = pump_pipe(e, ws[i]);
				total += n > 0 ? (size_t)n : 0;
			}
		}
		send_exit(e, status);
	}
	exec_close(e);
	e->dead = true;
}

void exec_reap(void)
{
	int status;
	pid_t pid;

	while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
		for (struct exec *e = agent.execs; e; e = e->next) {
			if (!e->dead && e->pid == pid) {
				finish(e, status);
				break;
			}
		}
	}
}

void exec_kill(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	uint32_t target = thaw_get_u32(m, THAW_T_TARGET, 0);
	uint32_t sig = thaw_get_u32(m, THAW_T_SIGNAL, SIGKILL);
	struct exec *e = find(c, target);

	if (sig < 1 || sig > (uint32_t)SIGRTMAX) {
		conn_error(c, req, EINVAL, "KILL: SIGNAL %u is not 1..%d", sig,
			   SIGRTMAX);
		return;
	}
	if (!e) {
		conn_error(c, req, ESRCH,
			   "KILL: TARGET %u is not a running exec on this "
			   "connection",
			   target);
		return;
	}
	if (kill(-e->pid, (int)sig) < 0) {
		conn_error(c, req, errno, "KILL: process group %d: %s", e->pid,
			   strerror(errno));
		return;
	}
	conn_ok(c, req);
}

void exec_pause(struct conn *c, bool paused)
{
	for (struct exec *e = agent.execs; e; e = e->next) {
		struct watch *ws[] = { &e->out, &e->err };

		if (e->dead || e->conn != c)
			continue;
		for (int i = 0; i < 2; i++) {
			struct watch *w = ws[i];

			if (w->fd < 0 || w->registered == !paused)
				continue;
			/* Removed, not masked: a hung-up pipe would still
			 * report EPOLLHUP with an empty event mask. */
			if (paused) {
				epoll_ctl(agent.epfd, EPOLL_CTL_DEL, w->fd,
					  NULL);
				w->registered = false;
			} else if (watch_set(w, EPOLLIN) < 0) {
				kill(-e->pid, SIGKILL);
			}
		}
	}
}

void exec_detach(struct conn *c)
{
	for (struct exec *e = agent.execs; e; e = e->next) {
		if (e->dead || e->conn != c)
			continue;
		kill(-e->pid, SIGKILL);
		exec_close(e);
		e->conn = NULL;
	}
}

void exec_kill_all(void)
{
	for (struct exec *e = agent.execs; e; e = e->next) {
		if (!e->dead)
			kill(-e->pid, SIGKILL);
	}
}

void exec_sweep(void)
{
	struct exec **pe = &agent.execs;

	while (*pe) {
		struct exec *e = *pe;

		if (e->dead) {
			*pe = e->next;
			free(e);
		} else {
			pe = &e->next;
		}
	}
}
