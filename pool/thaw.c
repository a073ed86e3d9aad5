// SPDX-License-Identifier: Apache-2.0
/*
 * thaw.c - the `thaw` command: the user's entry point to sandboxes, and
 * what its subcommands share (signals, tool and state paths).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "subprocess.h"
#include "thaw.h"

volatile sig_atomic_t thaw_interrupted;

static void on_signal(int sig)
{
	thaw_interrupted = sig;
}

void thaw_catch_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

const char *thaw_tool_path(const char *env, const char *built_in)
{
	const char *p = getenv(env);

	return p ? p : built_in;
}

int thaw_state_dir(char *out, size_t len)
{
	const char *dir = getenv("THAW_STATE_DIR");
	const char *xdg = getenv("XDG_STATE_HOME");
	const char *home = getenv("HOME");
	int n;

	if (dir && *dir)
		n = snprintf(out, len, "%s", dir);
	else if (xdg && *xdg)
		n = snprintf(out, len, "%s/thaw", xdg);
	else if (home && *home)
		n = snprintf(out, len, "%s/.local/state/thaw", home);
	else {
		fprintf(stderr,
			"thaw: no state directory: set THAW_STATE_DIR or HOME\n");
		return -1;
	}
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "thaw: state directory path too long\n");
		return -1;
	}
	return 0;
}

int thaw_make_dirs(const char *path)
{
	char partial[PATH_MAX];
	size_t len = strlen(path);

	if (len >= sizeof(partial)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	memcpy(partial, path, len + 1);
	for (char *p = partial + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(partial, 0755) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(partial, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

int thaw_default_initrd(char *out, size_t len, const char *who)
{
	char what[64];
	char *mk[] = { (char *)thaw_tool_path("THAW_MKINITRAMFS",
					      THAW_MKINITRAMFS_PATH),
		       "--init",
		       (char *)thaw_tool_path("THAW_AGENT", THAW_AGENT_PATH),
		       NULL };

	snprintf(what, sizeof(what), "%s: guest initramfs", who);
	return run_for_last_line(mk, out, len, what);
}

bool machine_option(struct machine_options *m, int opt, const char *arg)
{
	switch (opt) {
	case 'm':
		m->mem = arg; /* thaw-vmm checks the ranges */
		break;
	case 'n':
		m->vcpus = arg;
		break;
	case 'k':
		m->kernel = arg;
		break;
	case 'i':
		m->initrd = arg;
		break;
	case 'c':
		m->cmdline = arg;
		break;
	case 'f':
		m->from = arg;
		return true;
	default:
		return false;
	}
	m->boot_flags = true;
	return true;
}

int machine_options_check(const struct machine_options *m, const char *who)
{
	if (!m->from || !m->boot_flags)
		return 0;
	fprintf(stderr,
		"%s: --from takes the machine from the snapshot: leave out --mem, --vcpus, --kernel, --initrd and --cmdline\n",
		who);
	return -1;
}

static const char usage[] =
	"usage: thaw COMMAND [ARG...]\n"
	"  run [OPTIONS] -- CMD [ARG...]   run CMD in a fresh microVM\n"
	"  snapshot create|ls|verify|rm    manage snapshots to restore from\n"
	"  daemon [OPTIONS]                run thawd, the sandbox pool, in the foreground\n"
	"  sandbox create|ls|rm            sandboxes from the daemon's warm pools\n"
	"  exec [OPTIONS] ID -- CMD [ARG...]  run CMD in sandbox ID\n"
	"  cp SRC DST                      copy a file to or from a sandbox (ID:/path)\n"
	"Run 'thaw COMMAND --help' for a command's options.\n";

int main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "run"))
		return thaw_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "snapshot"))
		return thaw_snapshot(argc - 1, argv + 1);
	if (!strcmp(argv[1], "daemon"))
		return thaw_daemon(argc - 1, argv + 1);
	if (!strcmp(argv[1], "sandbox"))
		return thaw_sandbox(argc - 1, argv + 1);
	if (!strcmp(argv[1], "exec"))
		return thaw_exec(argc - 1, argv + 1);
	if (!strcmp(argv[1], "cp"))
		return thaw_cp(argc - 1, argv + 1);
	fprintf(stderr, "thaw: unknown command '%s'\n%s", argv[1], usage);
	return 2;
}
