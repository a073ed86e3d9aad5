// SPDX-License-Identifier: Apache-2.0
/*
 * exec.c - EXEC and KILL: running commands for the host.
 *
 * Each command is forked into its own session (setsid), so its pid is
 * also its process group id and a timeout, KILL or disconnect can signal
 * everything it started with one kill(-pid).  stdin is a pipe fed by
 * stdin.c, stdout and stderr are two pipes streamed as STDOUT/STDERR
 * frames.  Whether exec itself worked is learnt synchronously through a
 * close-on-exec status pipe, so a missing program or user is an ERROR
 * rather than an EXIT 127.  In a guest each command moves into the
 * commands cgroup (init.c) before exec, so what it starts is bounded in
 * tasks and memory and cannot take the agent down with it.  A command run
 * as a USER drops to that user's groups, gid and uid (users.c) after
 * joining the cgroup (which needs root) and before chdir to CWD (which is
 * then checked with the user's rights).
 *
 * The agent is init (or a subreaper in tests), so SIGCHLD also brings
 * orphans; only pids in the exec list are reported.  When a command's
 * main process ends, whatever is already in its pipes is drained, then
 * EXIT is sent and the pipes are closed: output written later by
 * background processes it left behind is not delivered (PROTOCOL.md).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "guest/agent/agent.h"

/* Output read per pipe event; well under a frame. */
#define CHUNK (64u << 10)
/* At exit, drain at most this per pipe (the largest pipe buffer). */
#define DRAIN_MAX (1u << 20)

enum spawn_stage { STAGE_USER, STAGE_CHDIR, STAGE_EXEC };

struct spawn_status {
	enum spawn_stage stage;
	int err;
};

/* What the child becomes; user NULL: stays root. */
struct spawn_args {
	char **argv, **envp;
	const char *cwd;
	const struct user_id *user;
};

static uint8_t chunk[CHUNK];

struct exec *exec_find(const struct conn *c, uint32_t req)
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

static int become(const struct user_id *u)
{
	if (setgroups((size_t)u->ngroups, u->groups) < 0 ||
	    setgid(u->gid) < 0 || setuid(u->uid) < 0)
		return -errno;
	return 0;
}

static __attribute__((noreturn)) void child(int fds[4][2],
					    const struct spawn_args *a)
{
	struct spawn_status st = { .stage = STAGE_USER };
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
	if (a->user && (st.err = -become(a->user)) != 0)
		goto fail;
	st.stage = STAGE_CHDIR;
	if (a->cwd && chdir(a->cwd) < 0) {
		st.err = errno;
		goto fail;
	}
	if (a->envp)
		environ = a->envp;
	execvp(a->argv[0], a->argv);
	st.stage = STAGE_EXEC;
	st.err = errno;
fail:
	(void)!write(fds[3][1], &st, sizeof(st));
	_exit(127);
}

/* Returns the child's pid, or -errno with @why set for the ERROR. */
static pid_t spawn(int fds[4][2], const struct spawn_args *a, const char **why)
{
	struct spawn_status st;
	ssize_t n;
	pid_t pid;

	*why = "fork";
	pid = fork();
	if (pid < 0)
		return -errno;
	if (pid == 0)
		child(fds, a);
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
	*why = st.stage == STAGE_USER	 ? "user"
	       : st.stage == STAGE_CHDIR ? "chdir"
					 : "exec";
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
	stdin_release(e, EPIPE);
}

/* The exec's environment: ENV, else the agent's; a USER's HOME, USER and
 * LOGNAME added (ENV's own win) or, in the agent's, replacing root's. */
static int exec_environ(const struct thaw_msg *m, const struct user_id *u,
			char ***env_fields, char ***envp)
{
	if (thaw_has(m, THAW_T_ENV)) {
		*env_fields = strv(m, THAW_T_ENV);
		if (!*env_fields)
			return -ENOMEM;
	}
	if (!u) {
		*envp = *env_fields;
		return 0;
	}
	*envp = user_environ(*env_fields ? *env_fields : environ, !*env_fields,
			     u);
	return *envp ? 0 : -ENOMEM;
}

static void exec_fail(struct conn *c, uint32_t req, int ret, const char *why,
		      const char *argv0, const char *cwd, const char *user)
{
	if (strcmp(why, "exec") == 0)
		conn_error(c, req, -ret, "EXEC: ARGV[0] \"%s\": %s", argv0,
			   strerror(-ret));
	else if (strcmp(why, "chdir") == 0)
		conn_error(c, req, -ret, "EXEC: CWD \"%s\": %s", cwd,
			   strerror(-ret));
	else if (strcmp(why, "user") == 0)
		conn_error(c, req, -ret, "EXEC: USER \"%s\": %s", user,
			   strerror(-ret));
	else
		conn_error(c, req, -ret, "EXEC: %s: %s", why, strerror(-ret));
}

/* The exec's pipes and timer, set up once the child runs. */
static int exec_watch(struct exec *e, int fds[4][2], uint32_t timeout_ms)
{
	int ret = 0;

	e->in.fd = fds[0][1];
	e->out.fd = fds[1][0];
	e->err.fd = fds[2][0];
	fds[0][1] = fds[1][0] = fds[2][0] = -1;
	fcntl(e->in.fd, F_SETFL, O_NONBLOCK);
	fcntl(e->out.fd, F_SETFL, O_NONBLOCK);
	fcntl(e->err.fd, F_SETFL, O_NONBLOCK);
	stdin_start(e);
	if (!e->conn->over)
		ret = watch_set(&e->out, EPOLLIN);
	if (!ret && !e->conn->over)
		ret = watch_set(&e->err, EPOLLIN);
	if (!ret && timeout_ms)
		ret = arm_timer(e, timeout_ms);
	return ret;
}

void exec_start(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	int fds[4][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 }, { -1, -1 } };
	char cwd[4096], user[USER_NAME_MAX + 1] = "", err[256];
	char **argv = NULL, **env_fields = NULL, **envp = NULL;
	struct spawn_args args = { 0 };
	const char *why = "out of memory";
	struct user_id uid;
	struct exec *e;
	pid_t pid;
	int ret = -ENOMEM;

	if (exec_find(c, req) || fswatch_find(c, req)) {
		conn_error(c, req, EEXIST,
			   "EXEC: request id %u already names a running "
			   "request",
			   req);
		return;
	}
	if (thaw_get_str(m, THAW_T_CWD, cwd, sizeof(cwd)) < 0)
		cwd[0] = '\0';
	/* The schema bounds USER to fit. */
	if (thaw_get_str(m, THAW_T_USER, user, sizeof(user)) == 0 &&
	    user_resolve(user, &uid, err, sizeof(err)) < 0) {
		conn_error(c, req, EINVAL, "EXEC: %s", err);
		return;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		goto fail;
	e->in = (struct watch){ .kind = W_STDIN, .fd = -1, .obj = e };
	e->out = (struct watch){ .kind = W_STDOUT, .fd = -1, .obj = e };
	e->err = (struct watch){ .kind = W_STDERR, .fd = -1, .obj = e };
	e->timer = (struct watch){ .kind = W_TIMER, .fd = -1, .obj = e };
	args.argv = argv = strv(m, THAW_T_ARGV);
	args.user = user[0] ? &uid : NULL;
	args.cwd = cwd[0] ? cwd : NULL;
	if (!argv || exec_environ(m, args.user, &env_fields, &envp) < 0 ||
	    stdin_init(e, thaw_get(m, THAW_T_STDIN),
		       thaw_get_u8(m, THAW_T_KEEP_STDIN, 0)) < 0)
		goto fail;
	args.envp = envp;
	why = "pipe";
	for (int i = 0; i < 4; i++) {
		if (pipe2(fds[i], O_CLOEXEC) < 0) {
			ret = -errno;
			goto fail;
		}
	}
	pid = spawn(fds, &args, &why);
	if (pid < 0) {
		ret = pid;
		goto fail;
	}
	e->conn = c;
	e->req = req;
	e->pid = pid;
	e->next = agent.execs;
	agent.execs = e;
	send_started(e);
	ret = exec_watch(e, fds, thaw_get_u32(m, THAW_T_TIMEOUT_MS, 0));
	if (ret) {
		/* Already started: kill it; EXIT will report the signal. */
		agent_log("exec %d: setup failed: %s", pid, strerror(-ret));
		kill(-pid, SIGKILL);
	}
	e = NULL;
	ret = 0;
fail:
	if (ret)
		exec_fail(c, req, ret, why, argv ? argv[0] : "", cwd, user);
	for (int i = 0; i < 4; i++)
		close_pair(fds[i]);
	if (e)
		stdin_release(e, 0);
	free(e);
	if (envp != env_fields)
		free(envp);
	free(env_fields);
	free(argv);
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
		stdin_write(e);
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
		/* Every STDIN frame has its answer before the exec's end. */
		stdin_release(e, EPIPE);
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
	struct exec *e = exec_find(c, target);

	if (sig < 1 || sig > (uint32_t)SIGRTMAX) {
		conn_error(c, req, EINVAL, "KILL: SIGNAL %u is not 1..%d", sig,
			   SIGRTMAX);
		return;
	}
	if (!e && fswatch_stop(c, target)) {
		conn_ok(c, req);
		return;
	}
	if (!e) {
		conn_error(c, req, ESRCH,
			   "KILL: TARGET %u is not a running exec or watch on "
			   "this connection",
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
		e->conn = NULL;
		exec_close(e);
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
