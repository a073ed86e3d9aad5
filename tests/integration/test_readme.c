// SPDX-License-Identifier: Apache-2.0
/*
 * test_readme.c - README.md's "First steps" block, run as a new user would:
 * the block is read out of README.md itself (the code block after the line
 * "<!-- test_readme runs the next block as written -->"), so the two cannot
 * drift apart, and it runs under /bin/sh, which is dash on Debian: a bash-ism
 * anywhere on the way (the block, or a script thaw runs for it) fails here.
 * No flag is added: `thaw run` finds thaw's kernel itself, `thaw daemon`
 * runs its embedded default.
 *
 * The block runs in a scratch directory whose build/ is this build tree and
 * with HOME there, so its state (~/.local/state/thaw) is the test's own;
 * only the kernel cache (~/.cache/thaw, filled by the guest_images fixture)
 * is the real one, through XDG_CACHE_HOME, so the kernel is not rebuilt.
 * `set -e` turns every failed step into a failed run; every process the
 * block started carries THAW_README_RUN in its environment, which is how
 * the test finds anything left behind, and removes it.
 *
 * The commands need a KVM host: without a usable /dev/kvm (nested-kvm.sh's
 * emulated host has busybox's sh and no kernel build tools) the test is
 * skipped and says so.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/skips.h"

#define MARKER "<!-- test_readme runs the next block as written -->"
/* Only ends a hang: a kernel-emulating host boots a guest in ~30 s, and
 * the block boots two and restores a few. */
#define BLOCK_TIMEOUT_S 1800

static char scratch[64];

/* The code block after MARKER in README.md, or a failed assertion. */
static char *readme_block(void)
{
	FILE *f = fopen(THAW_SOURCE_DIR "/README.md", "r");
	char *text = NULL, *block;
	size_t cap = 0;

	cr_assert_not_null(f, "%s/README.md: %s", THAW_SOURCE_DIR,
			   strerror(errno));
	ssize_t n = getdelim(&text, &cap, '\0', f);
	fclose(f);
	cr_assert_gt(n, 0, "README.md is empty");
	char *mark = strstr(text, MARKER);
	cr_assert_not_null(mark, "README.md lacks the line %s", MARKER);
	char *open = strstr(mark, "\n```sh\n");
	cr_assert_not_null(open, "no ```sh block after %s", MARKER);
	open += strlen("\n```sh\n");
	char *close = strstr(open, "\n```");
	cr_assert_not_null(close, "the block after %s never ends", MARKER);
	block = strndup(open, (size_t)(close - open) + 1);
	free(text);
	return block;
}

/* True when process @pid's environment holds THAW_README_RUN=@scratch. */
static bool started_by_block(const char *pid)
{
	char path[300], env[65536], want[128];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%s/environ", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	n = read(fd, env, sizeof(env) - 1);
	close(fd);
	if (n <= 0)
		return false;
	snprintf(want, sizeof(want), "THAW_README_RUN=%s", scratch);
	for (char *p = env; p < env + n; p += strlen(p) + 1)
		if (strcmp(p, want) == 0)
			return true;
	return false;
}

/* SIGKILLs what the block left running; returns how many there were. */
static int kill_leftovers(void)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	int found = 0;

	cr_assert_not_null(proc);
	while ((e = readdir(proc))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9' ||
		    !started_by_block(e->d_name))
			continue;
		fprintf(stderr, "test_readme: process %s outlived the block\n",
			e->d_name);
		kill(atoi(e->d_name), SIGKILL);
		found++;
	}
	closedir(proc);
	return found;
}

/* The kernel cache the guest_images fixture filled: ~/.cache of the test. */
static void keep_real_cache(void)
{
	char cache[512];

	if (getenv("XDG_CACHE_HOME"))
		return;
	snprintf(cache, sizeof(cache), "%s/.cache",
		 getenv("HOME") ? getenv("HOME") : "/root");
	setenv("XDG_CACHE_HOME", cache, 1);
}

/* @text holds `"exit_code"`, optional blanks, then 0. */
static bool exit_code_zero(const char *text)
{
	const char *p = strstr(text, "\"exit_code\"");

	if (!p)
		return false;
	p += strlen("\"exit_code\"");
	p += strspn(p, " :");
	return p[0] == '0' && (p[1] < '0' || p[1] > '9');
}

Test(readme, first_steps_run_as_written, .timeout = BLOCK_TIMEOUT_S + 120)
{
	char script[128], home[128], link[128], cmd[192];
	struct run_result r;

	thaw_skip_unless_kvm(kvm_usable(),
			     "no usable /dev/kvm here: README's commands run "
			     "on a KVM host (the suite's VM tests use "
			     "nested-kvm.sh's emulated host instead)");
	char *block = readme_block();

	snprintf(scratch, sizeof(scratch), "/tmp/thaw-readme-XXXXXX");
	cr_assert_not_null(mkdtemp(scratch));
	snprintf(home, sizeof(home), "%s/home", scratch);
	snprintf(link, sizeof(link), "%s/build", scratch);
	snprintf(script, sizeof(script), "%s/first-steps.sh", scratch);
	cr_assert_eq(mkdir(home, 0700), 0);
	cr_assert_eq(symlink(THAW_BINARY_DIR, link), 0);
	FILE *f = fopen(script, "w");
	cr_assert_not_null(f);
	fputs(block, f);
	cr_assert_eq(fclose(f), 0);

	keep_real_cache();
	setenv("HOME", home, 1);
	unsetenv("THAW_STATE_DIR");
	unsetenv("XDG_STATE_HOME");
	setenv("THAW_README_RUN", scratch, 1);
	cr_assert_eq(chdir(scratch), 0);
	char *argv[] = { "/bin/sh", "-e", "-x", script, NULL };
	cr_assert_eq(run_command(argv, BLOCK_TIMEOUT_S, &r), 0);
	int left = kill_leftovers();

	cr_assert_not(r.timed_out, "the block hung; stdout:\n%s\nstderr:\n%s",
		      r.out, r.err);
	cr_expect_eq(r.status, 0,
		     "the block failed (status %d); stdout:\n%s\n"
		     "stderr (sh -x):\n%s",
		     r.status, r.out, r.err);
	cr_expect_eq(left, 0, "processes outlived the block (see above)");
	/* thaw run -- echo hi */
	cr_expect(!strncmp(r.out, "hi\n", 3), "stdout: %s", r.out);
	/* thaw run --from: uname -a of the clone */
	cr_expect_not_null(strstr(r.out, "\nLinux "), "stdout: %s", r.out);
	/* the exec through the API, the file written and read back */
	cr_expect(exit_code_zero(r.out), "stdout: %s", r.out);
	cr_expect_not_null(strstr(r.out, "hello\n"), "stdout: %s", r.out);
	cr_expect_not_null(strstr(r.out, "thaw_handouts_total"), "stdout: %s",
			   r.out);
	cr_expect_neq(access("home/.local/state/thaw/thawd.sock", F_OK), 0,
		      "the daemon left its socket");

	run_result_free(&r);
	free(block);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", scratch);
	cr_expect_eq(system(cmd), 0);
}
