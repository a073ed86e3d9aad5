// SPDX-License-Identifier: Apache-2.0
/*
 * bench.c - see bench.h: the helpers every scenario uses.
 *
 * They are deliberately few: a scenario reads top to bottom as "start a
 * daemon, drive it, add the samples", and everything specific to a figure
 * stays in the scenario's file.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"

void bench_note(const struct bench *b, char *out, size_t len, const char *fmt,
		...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(out, len, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < len && b->scaled[0])
		snprintf(out + n, len - (size_t)n, "%s%s", n ? "; " : "",
			 b->scaled);
}

void bench_progress(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "thaw-bench: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

void bench_fail(struct bench *b, const char *group, const char *name,
		const char *why)
{
	bench_progress("%s, %s: not measured: %s", group, name, why);
	report_add_failure(b->report, group, name, why);
	b->failures++;
}

int bench_start_daemon(struct bench *b, struct thawd *d,
		       const struct template_spec *t, size_t n,
		       const struct daemon_spec *spec, char *err, size_t errlen)
{
	if (thawd_start(d, b->thaw, b->state_dir, b->kernel, b->initrd, t, n,
			spec, err, errlen))
		return -1;
	if (!b->snapshot[0]) {
		struct thaw_client *c = thawd_connect(d, err, errlen);
		struct thaw_template p;

		if (c && !thawd_pool(c, t[0].name, &p, err, errlen))
			snprintf(b->snapshot, sizeof(b->snapshot), "%s",
				 p.snapshot);
		thaw_client_close(c);
	}
	return 0;
}

void bench_stop_daemon(struct thawd *d)
{
	char err[256];

	if (thawd_stop(d, err, sizeof(err)))
		bench_progress("%s", err);
}

int bench_run_capture(char *const argv[], int fd, char *out, size_t outlen)
{
	int pipefd[2];

	out[0] = '\0';
	if (pipe(pipefd))
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return -1;
	}
	if (!pid) {
		dup2(pipefd[1], fd);
		close(pipefd[0]);
		execv(argv[0], argv);
		fprintf(stderr, "%s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	size_t len = 0;
	ssize_t got;
	char sink[4096];
	while ((got = read(pipefd[0], len + 1 < outlen ? out + len : sink,
			   len + 1 < outlen ? outlen - len - 1
					    : sizeof(sink))) > 0)
		if (len + 1 < outlen)
			len += (size_t)got;
	out[len] = '\0';
	close(pipefd[0]);
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

long bench_kib_field(const char *path, const char *key)
{
	FILE *f = fopen(path, "r");
	char line[256];
	long v = -1;
	size_t n = strlen(key);

	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, key, n) && line[n] == ':') {
			v = strtol(line + n + 1, NULL, 10);
			break;
		}
	if (f)
		fclose(f);
	return v;
}
