// SPDX-License-Identifier: Apache-2.0
/*
 * subprocess.c - see subprocess.h.
 */
#include "subprocess.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int run_for_last_line(char *const argv[], char *out, size_t outlen, char *err,
		      size_t errlen)
{
	char buf[4096];
	size_t len = 0;
	int pipefd[2], status;
	pid_t pid;
	posix_spawn_file_actions_t actions;

	if (pipe(pipefd) < 0) {
		snprintf(err, errlen, "pipe: %s", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_init(&actions);
	posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addclose(&actions, pipefd[0]);
	int spawned = posix_spawn(&pid, argv[0], &actions, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&actions);
	close(pipefd[1]);
	if (spawned) {
		snprintf(err, errlen, "cannot run %s: %s", argv[0],
			 strerror(spawned));
		close(pipefd[0]);
		return -1;
	}
	bool passed_on = false;

	for (;;) {
		ssize_t n = read(pipefd[0], buf + len, sizeof(buf) - 1 - len);

		/* Our callers handle only the signals that stop them (no
		 * SA_RESTART): the helper is asked to stop too, and we wait
		 * for it to go, so nothing outlives us. */
		if (n < 0 && errno == EINTR) {
			if (!passed_on)
				kill(pid, SIGTERM);
			passed_on = true;
			continue;
		}
		if (n <= 0)
			break;
		len += n;
		if (len == sizeof(buf) - 1) { /* keep the tail: the answer */
			memmove(buf, buf + len / 2, len - len / 2);
			len -= len / 2;
		}
	}
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		snprintf(err, errlen,
			 "%s failed (%s %d); see its messages above", argv[0],
			 WIFEXITED(status) ? "exit status" : "signal",
			 WIFEXITED(status) ? WEXITSTATUS(status)
					   : WTERMSIG(status));
		return -1;
	}
	buf[len] = '\0';
	while (len > 0 && buf[len - 1] == '\n')
		buf[--len] = '\0';
	char *last = strrchr(buf, '\n');
	last = last ? last + 1 : buf;
	if (!*last || strlen(last) >= outlen) {
		snprintf(err, errlen, "%s printed no usable path ('%s')",
			 argv[0], last);
		return -1;
	}
	strcpy(out, last);
	return 0;
}
