// SPDX-License-Identifier: Apache-2.0
/*
 * default_kernel.c - see default_kernel.h.  THAW_KERNEL_BUILDER in the
 * environment overrides the script compiled in, for installs that move it.
 */
#include "default_kernel.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef THAW_KERNEL_BUILDER
#error "THAW_KERNEL_BUILDER must name guest/kernel/build.sh"
#endif

extern char **environ;

int default_kernel_path(char *path, size_t size)
{
	const char *script = getenv("THAW_KERNEL_BUILDER");
	char out[4096];
	size_t len = 0;
	int pipefd[2], status;
	pid_t pid;
	posix_spawn_file_actions_t actions;

	if (!script)
		script = THAW_KERNEL_BUILDER;
	if (pipe(pipefd) < 0) {
		fprintf(stderr, "default kernel: pipe: %s\n", strerror(errno));
		return -1;
	}
	posix_spawn_file_actions_init(&actions);
	posix_spawn_file_actions_adddup2(&actions, pipefd[1], STDOUT_FILENO);
	posix_spawn_file_actions_addclose(&actions, pipefd[0]);
	char *argv[] = { "/bin/sh", (char *)script, NULL };
	int err = posix_spawn(&pid, "/bin/sh", &actions, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&actions);
	close(pipefd[1]);
	if (err) {
		fprintf(stderr, "default kernel: cannot run %s: %s\n", script,
			strerror(err));
		close(pipefd[0]);
		return -1;
	}
	for (;;) {
		ssize_t n = read(pipefd[0], out + len, sizeof(out) - 1 - len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		len += n;
		if (len ==
		    sizeof(out) - 1) { /* keep the tail: the path is last */
			memmove(out, out + len / 2, len - len / 2);
			len -= len / 2;
		}
	}
	close(pipefd[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr,
			"default kernel: %s failed (status %d); see its "
			"messages above, or pass --kernel\n",
			script, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
		return -1;
	}
	out[len] = '\0';
	while (len > 0 && out[len - 1] == '\n')
		out[--len] = '\0';
	char *last = strrchr(out, '\n');
	last = last ? last + 1 : out;

	struct stat st;
	if (stat(last, &st) < 0 || !S_ISREG(st.st_mode) ||
	    strlen(last) >= size) {
		fprintf(stderr,
			"default kernel: %s printed '%s', which is not a "
			"kernel file\n",
			script, last);
		return -1;
	}
	strcpy(path, last);
	return 0;
}
