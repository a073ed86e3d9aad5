// SPDX-License-Identifier: Apache-2.0
/*
 * subprocess.c - see subprocess.h.  With a stderr sink the helper's stderr
 * is a second pipe, read with poll() beside stdout and cut into lines.
 */
#include "common/subprocess.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Longer stderr lines are passed on in pieces of this size. */
#define STDERR_LINE_MAX 1024

static void (*stderr_sink)(const char *line);

void run_set_stderr_sink(void (*sink)(const char *line))
{
	stderr_sink = sink;
}

struct line_buffer {
	char text[STDERR_LINE_MAX + 1];
	size_t len;
};

/* Passes each whole line of @data to the sink; a partial one waits. */
static void take_stderr(struct line_buffer *b, const char *data, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (data[i] != '\n')
			b->text[b->len++] = data[i];
		if (data[i] == '\n' || b->len == STDERR_LINE_MAX) {
			b->text[b->len] = '\0';
			stderr_sink(b->text);
			b->len = 0;
		}
	}
}

int run_for_last_line(char *const argv[], char *out, size_t outlen, char *err,
		      size_t errlen)
{
	char buf[4096];
	size_t len = 0;
	int pipefd[2], errfd[2] = { -1, -1 }, status;
	pid_t pid;
	posix_spawn_file_actions_t actions;
	struct line_buffer err_line = { .len = 0 };

	/* Close-on-exec: a VMM another thread starts meanwhile must not hold
	 * a pipe's write end, or we would wait for its EOF as long as it
	 * lives.  The helper's own copies are dup2()s, which stay open. */
	if (pipe2(pipefd, O_CLOEXEC) < 0) {
		int ret = -errno;

		snprintf(err, errlen, "pipe: %s", strerror(-ret));
		return ret;
	}
	if (stderr_sink && pipe2(errfd, O_CLOEXEC) < 0) {
		int ret = -errno;

		snprintf(err, errlen, "pipe: %s", strerror(-ret));
		close(pipefd[0]);
		close(pipefd[1]);
		return ret;
	}
	posix_spawn_file_actions_init(&actions);
	posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
	if (stderr_sink) {
		posix_spawn_file_actions_adddup2(&actions, errfd[1],
						 STDERR_FILENO);
	}
	/* A child starts with no signal blocked, whatever the calling
	 * thread blocks (the daemon's threads block its stop signals). */
	posix_spawnattr_t attr;
	sigset_t none;

	sigemptyset(&none);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
	int spawned =
		posix_spawn(&pid, argv[0], &actions, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&actions);
	close(pipefd[1]);
	if (stderr_sink)
		close(errfd[1]);
	if (spawned) {
		snprintf(err, errlen, "cannot run %s: %s", argv[0],
			 strerror(spawned));
		close(pipefd[0]);
		if (stderr_sink)
			close(errfd[0]);
		return -spawned;
	}
	bool passed_on = false;
	struct pollfd fds[2] = { { pipefd[0], POLLIN, 0 },
				 { errfd[0], POLLIN, 0 } };

	while (fds[0].fd >= 0 || fds[1].fd >= 0) {
		/* Our callers handle only the signals that stop them (no
		 * SA_RESTART): the helper is asked to stop too, and we wait
		 * for it to go, so nothing outlives us. */
		if (poll(fds, 2, -1) < 0) {
			if (errno != EINTR)
				break;
			if (!passed_on)
				kill(pid, SIGTERM);
			passed_on = true;
			continue;
		}
		if (fds[1].revents) {
			char chunk[512];
			ssize_t n = read(fds[1].fd, chunk, sizeof(chunk));

			if (n > 0)
				take_stderr(&err_line, chunk, (size_t)n);
			else if (n == 0 || errno != EINTR) {
				close(fds[1].fd);
				fds[1].fd = -1;
			}
		}
		if (!fds[0].revents)
			continue;
		ssize_t n = read(fds[0].fd, buf + len, sizeof(buf) - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			close(fds[0].fd);
			fds[0].fd = -1;
			continue;
		}
		len += n;
		if (len == sizeof(buf) - 1) { /* keep the tail: the answer */
			memmove(buf, buf + len / 2, len - len / 2);
			len -= len / 2;
		}
	}
	if (err_line.len)
		take_stderr(&err_line, "\n", 1);
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen,
			 "%s failed (%s %d); see its messages above", argv[0],
			 WIFEXITED(status) ? "exit status" : "signal",
			 WIFEXITED(status) ? WEXITSTATUS(status)
					   : WTERMSIG(status));
		return -EIO;
	}
	buf[len] = '\0';
	while (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	char *last = strrchr(buf, '\n');
	last = last ? last + 1 : buf;
	if (!*last || strlen(last) >= outlen) {
		snprintf(err, errlen, "%s printed no usable path ('%s')",
			 argv[0], last);
		return -EPROTO;
	}
	strcpy(out, last);
	return 0;
}
