// SPDX-License-Identifier: Apache-2.0
/*
 * thaw.c - the `thaw` command: the user's entry point to sandboxes.  It
 * picks the subcommand, and holds the machine options and the VM start
 * that `thaw run` and `thaw snapshot create` share, with their messages;
 * what the daemon shares with them too (signals, tool and state paths, VMM
 * processes) is in pool/host/, which never prints.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/capfile.h"
#include "pool/host/netns.h"
#include "pool/cli/thaw.h"
#include "pool/daemon/thawd.h"
#include "pool/e2b/e2b.h"
#include "pool/host/vmm_process.h"

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
	case 'J':
		m->no_jail = true;
		return true;
	case 'N':
		m->network = true;
		return true;
	case 'X':
		m->log_max = arg;
		return true;
	default:
		return false;
	}
	m->boot_flags = true;
	return true;
}

int machine_options_check(const struct machine_options *m, const char *who)
{
	char err[256];
	uint64_t max;

	if (m->log_max &&
	    capfile_parse_max(m->log_max, &max, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: --log-max: %s\n", who, err);
		return -1;
	}
	if (!m->from || !m->boot_flags)
		return 0;
	fprintf(stderr,
		"%s: --from takes the machine from the snapshot: leave out --mem, --vcpus, --kernel, --initrd and --cmdline\n",
		who);
	return -1;
}

/* vmm_place's net_prepare for --network. */
static int tap_namespace(void *arg, const char *netns_path, uid_t uid,
			 gid_t gid, char *err, size_t errlen)
{
	(void)arg;
	return net_tap_namespace(netns_path, uid, gid, err, errlen);
}

int machine_start(struct vmm_process *vmm, const char *who,
		  const struct machine_options *m, const char *const vmm_args[],
		  const char *out_dir, struct agent_conn *agent, int timeout_s)
{
	struct vmm_place place = { .no_jail = m->no_jail,
				   .out_dir = out_dir,
				   .log_max = m->log_max,
				   .net_prepare =
					   m->network ? tap_namespace : NULL };
	/* vmm_process's messages quote the VMM's 512-byte reason. */
	char err[PATH_MAX + 1024], console[4096];

	if (m->no_jail)
		fprintf(stderr,
			"%s: WARNING: --no-jail: the VMM runs as %s with every "
			"capability and the whole host in view; a guest that "
			"breaks it owns this machine (debugging only)\n",
			who, geteuid() ? "this user" : "root");
	int ret = vmm_process_start(vmm, vmm_args, &place, err, sizeof(err));

	if (ret == 0)
		ret = vmm_process_wait_agent(vmm, agent, timeout_s, err,
					     sizeof(err));
	if (ret == 0)
		return 0;
	if (ret == -EINTR)
		return -1;
	size_t n = ret == -ETIMEDOUT ? vmm_process_console_tail(vmm, console,
								sizeof(console))
				     : 0;
	if (n > 0) {
		fprintf(stderr, "%s: last guest console output:\n", who);
		fwrite(console, 1, n, stderr);
	}
	fprintf(stderr, "%s: %s\n", who, err);
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

/* The front ends thawd serves besides its own API (frontend.h): each
 * starts only if the config asks for it (E2B: e2b_listen). */
static const struct frontend daemon_frontends[] = { E2B_FRONTEND };

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
		return thaw_daemon(argc - 1, argv + 1, daemon_frontends,
				   sizeof(daemon_frontends) /
					   sizeof(daemon_frontends[0]));
	if (!strcmp(argv[1], "sandbox"))
		return thaw_sandbox(argc - 1, argv + 1);
	if (!strcmp(argv[1], "exec"))
		return thaw_exec(argc - 1, argv + 1);
	if (!strcmp(argv[1], "cp"))
		return thaw_cp(argc - 1, argv + 1);
	fprintf(stderr, "thaw: unknown command '%s'\n%s", argv[1], usage);
	return 2;
}
