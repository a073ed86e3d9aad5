// SPDX-License-Identifier: Apache-2.0
/*
 * run.c - `thaw run`: one command in a fresh microVM, then nothing left.
 *
 * Boots thaw-vmm with a vsock device whose host side lives in a private run
 * directory, waits for the guest agent's HELLO, executes the command, copies
 * its stdout and stderr to ours byte for byte, and returns its exit status
 * (128 + signal when it was killed).  The VM is then stopped through the
 * VMM's control socket (SIGKILL if it does not go within 5 s) and the run
 * directory removed, on every path out, including ^C.
 *
 * The guest is the default one unless --kernel/--initrd say otherwise:
 * thaw's kernel (built and cached on first use) and an initramfs whose
 * PID 1 is thaw-agent, packed and cached by thaw-mkinitramfs.  Both are
 * found here, not by thaw-vmm: the VMM runs jailed (vmm_process.h) and
 * sees only the files it is handed.
 *
 * With --from SNAPSHOT the VM is a clone restored from a snapshot in the
 * catalog (snapshot_command.c) instead: registered as a live clone of it while
 * it runs, given its own entropy, clock and hostname (the agent's CLONE) before
 * the command, and the timing line breaks the restore down into its host
 * side (process start, VMM setup with the prefetch, state restore) and its
 * guest side (the agent's first answer), as the daemon's API does.
 *
 * A clone records the snapshot's working set only when asked to
 * (--record-working-set), and then runs no command of the user's but a
 * fixed warm-up: the pages every later restore prefetches are chosen by
 * that warm-up alone, never by code a first user ran (which could make
 * every later clone read what it liked).  The daemon asks once per
 * template, before any sandbox exists.  The jailed VMM writes the file
 * into a directory of its own beside the snapshot's files, which stay
 * read-only to it, and it is moved in place after the VMM is gone.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pool/host/agent_client.h"
#include "snapshot/catalog.h"
#include "common/clock.h"
#include "pool/host/clone.h"
#include "guest/kernel/default_kernel.h"
#include "pool/host/interrupt.h"
#include "common/io.h"
#include "pool/host/paths.h"
#include "guest/protocol.h"
#include "snapshot/state.h"
#include "pool/cli/thaw.h"
#include "pool/host/vmm_process.h"

#define BOOT_TIMEOUT_S_DEFAULT 600
#define EXEC_REQUEST_ID 1
#define CLONE_REQUEST_ID 2

struct run_options {
	struct machine_options machine;
	const char *page_in;
	long timeout_s, boot_timeout_s;
	bool record_working_set;
};

/* What a clone recording the working set runs, instead of a command. */
static char *warm_up[] = { "echo", "warmed up", NULL };

int thaw_relay_exec(const char *who, struct agent_conn *agent,
		    char *const argv[], uint32_t timeout_ms, int out_fd)
{
	const uint32_t id = EXEC_REQUEST_ID;
	struct thaw_frame f;
	struct thaw_msg m;
	char why[256];
	struct agent_exec_request r = { .argv = argv,
					.timeout_ms = timeout_ms };
	int ret = agent_exec(agent, id, &r);

	while (ret == 0 && !thaw_interrupted) {
		ret = agent_next_frame(agent, &f);
		if (ret < 0 || f.h.request_id != id)
			continue;
		if (thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, why,
				    sizeof(why)) < 0) {
			fprintf(stderr, "%s: bad frame from agent: %s\n", who,
				why);
			return EXIT_THAW_ERROR;
		}
		const struct thaw_field *data;

		switch (f.h.type) {
		case THAW_STDOUT:
		case THAW_STDERR:
			data = thaw_get(&m, THAW_T_DATA);
			/* A closed stdout must not stop the run. */
			write_full(f.h.type == THAW_STDOUT ? out_fd
							   : STDERR_FILENO,
				   data->data, data->len);
			break;
		case THAW_EXIT:
			if (thaw_get_u8(&m, THAW_T_TIMED_OUT, 0))
				fprintf(stderr, "%s: %s timed out\n", who,
					argv[0]);
			if (thaw_has(&m, THAW_T_SIGNAL))
				return 128 + thaw_get_u32(&m, THAW_T_SIGNAL, 0);
			return thaw_get_u32(&m, THAW_T_EXIT_CODE, 0);
		case THAW_ERROR:
			thaw_get_str(&m, THAW_T_MESSAGE, why, sizeof(why));
			fprintf(stderr, "%s: %s: %s\n", who, argv[0], why);
			/* As a shell answers a command it cannot run. */
			return thaw_get_u32(&m, THAW_T_ERRNO, 0) == ENOENT
				       ? 127
				       : 126;
		}
	}
	if (!thaw_interrupted)
		fprintf(stderr, "%s: lost the agent: %s\n", who,
			strerror(-ret));
	return EXIT_THAW_ERROR;
}

/* Boots the guest, runs @cmd in it; the plain `thaw run`. */
static int run_booted(const struct run_options *o, char **cmd)
{
	const struct machine_options *m = &o->machine;
	/* Found (and built) here: a jailed VMM sees only what it is given. */
	char initrd[PATH_MAX], kernel[PATH_MAX];
	const char *vmm_args[] = {
		thaw_tool_path("THAW_VMM", THAW_VMM_PATH),
		"--initrd",
		m->initrd ? m->initrd : initrd,
		"--kernel",
		m->kernel ? m->kernel : kernel,
		"--mem",
		m->mem,
		"--vcpus",
		m->vcpus,
		m->cmdline ? "--cmdline" : NULL,
		m->cmdline,
		NULL,
	};
	struct agent_conn agent = { .fd = -1 };
	struct vmm_process vmm = { 0 };
	int status = EXIT_THAW_ERROR;
	char err[PATH_MAX + 128];

	if ((!m->initrd && thaw_default_initrd(initrd, sizeof(initrd), err,
					       sizeof(err)) < 0) ||
	    (!m->kernel && default_kernel_path(kernel, sizeof(kernel), err,
					       sizeof(err)) < 0)) {
		fprintf(stderr, "thaw run: %s\n", err);
		return EXIT_THAW_ERROR;
	}
	if (machine_start(&vmm, "thaw run", m, vmm_args, NULL, &agent,
			  o->boot_timeout_s) == 0) {
		double ready = monotonic_ms();

		status = thaw_relay_exec("thaw run", &agent, cmd,
					 o->timeout_s * 1000, STDOUT_FILENO);
		agent_close(&agent);
		vmm_process_stop(&vmm);
		double setup = vmm_process_setup_ms(&vmm);
		fprintf(stderr,
			"thaw: vmm setup %.1f ms, boot to agent ready %.1f ms, "
			"command %.1f ms\n",
			setup, ready - vmm.started_ms - (setup > 0 ? setup : 0),
			monotonic_ms() - ready);
	}
	vmm_process_remove(&vmm);
	return status;
}

/*
 * Runs @cmd in a clone restored from snapshot o->machine.from.  The clone gets
 * its own identity (entropy, clock, hostname) before anything runs in it.
 * With o->record_working_set, @cmd is the fixed warm-up, and the clone
 * records the snapshot's working set for later ones unless it has one.
 */
static int run_clone(const struct run_options *o, char **cmd)
{
	char clone_id[CATALOG_ID_LEN + 1], hostname[32], err[PATH_MAX + 128];
	char working_set[CATALOG_PATH_MAX + 32];
	char recording[CATALOG_PATH_MAX + 32], recorded[CATALOG_PATH_MAX + 64];
	struct vmm_restore_phases phases;
	struct snapshot_record snap;
	struct agent_conn agent = { .fd = -1 };
	struct vmm_process vmm = { 0 };
	int status = EXIT_THAW_ERROR;

	if (catalog_new_id(clone_id) < 0) {
		fprintf(stderr, "thaw run: no randomness for a clone id\n");
		return EXIT_THAW_ERROR;
	}
	if (clone_register(o->machine.from, clone_id, &snap, err, sizeof(err)) <
	    0) {
		fprintf(stderr, "thaw run: %s\n", err);
		return EXIT_THAW_ERROR;
	}
	snprintf(working_set, sizeof(working_set), "%s/workingset.bin",
		 snap.dir);
	/* Beside the snapshot, not in it: other clones see its directory.
	 * Named as `thaw snapshot`'s garbage collection finds a dead
	 * writer's leftovers. */
	const char *slash = strrchr(snap.dir, '/');
	snprintf(recording, sizeof(recording), "%.*s/.tmp-ws-%s-%d",
		 slash ? (int)(slash - snap.dir) : 0, snap.dir, snap.id,
		 (int)getpid());
	snprintf(recorded, sizeof(recorded), "%s/workingset.bin", recording);
	bool record = o->record_working_set && access(working_set, F_OK) < 0 &&
		      mkdir(recording, 0700) == 0;
	snprintf(hostname, sizeof(hostname), "thaw-%.8s", clone_id);
	const char *vmm_args[] = {
		thaw_tool_path("THAW_VMM", THAW_VMM_PATH),
		"--restore",
		snap.dir,
		"--page-in",
		o->page_in,
		NULL,
	};
	if (machine_start(&vmm, "thaw run", &o->machine, vmm_args,
			  record ? recording : NULL, &agent,
			  o->boot_timeout_s) < 0)
		goto out;
	double ready = monotonic_ms();
	if (vmm_process_restore_phases(&vmm, ready, &phases, err, sizeof(err)) <
	    0) {
		fprintf(stderr, "thaw run: %s\n", err);
		goto out;
	}
	double identity_start = monotonic_ms();
	if (agent_clone(&agent, CLONE_REQUEST_ID, hostname, clone_id, err,
			sizeof(err)) < 0) {
		fprintf(stderr,
			"thaw run: the clone refused its identity: %s\n", err);
		goto out;
	}
	double identity = monotonic_ms();
	status = thaw_relay_exec("thaw run", &agent, cmd, o->timeout_s * 1000,
				 STDOUT_FILENO);
	double done = monotonic_ms();
	agent_close(&agent);
	if (record) {
		char command[sizeof(recorded) + 16], reply[128];

		snprintf(command, sizeof(command), "working-set %s", recorded);
		/* Not fatal: later restores only go without a working set. */
		if (vmm_process_control(&vmm, command, reply, sizeof(reply),
					err, sizeof(err)) < 0)
			fprintf(stderr, "thaw run: %s\n", err);
	}

	fprintf(stderr,
		"thaw: restore to ready %.1f ms: host side %.1f ms (process start %.1f ms, vmm setup %.1f ms with %.0f pages prefetched in %.1f ms, state restore %.1f ms), guest side: first agent answer %.1f ms; clone identity %.1f ms, command %.1f ms\n",
		ready - vmm.started_ms, vmm_restore_host_ms(&phases),
		phases.process_start_ms, phases.setup_ms,
		phases.prefetched_pages, phases.page_in_ms,
		phases.state_restore_ms, phases.agent_ms,
		identity - identity_start, done - identity);
out:
	agent_close(&agent);
	vmm_process_remove(&vmm);
	if (record) {
		/* Whoever records first wins; a rename never shows half.  The
		 * file is the jail uid's until reclaimed. */
		if (jail_reclaim(recording, err, sizeof(err)) < 0)
			fprintf(stderr, "thaw run: %s\n", err);
		else if (rename(recorded, working_set) < 0 && errno != ENOENT)
			fprintf(stderr, "thaw run: %s: %s\n", working_set,
				strerror(errno));
		unlink(recorded);
		rmdir(recording);
	}
	if (clone_unregister(o->machine.from, clone_id, err, sizeof(err)) < 0)
		fprintf(stderr, "thaw run: %s\n", err);
	return status;
}

static const char run_usage[] =
	"usage: thaw run [--mem MiB] [--vcpus N] [--kernel K --initrd I] [--cmdline EXTRA]\n"
	"                [--timeout S] [--boot-timeout S] [--no-jail] [--log-max BYTES]\n"
	"                [--network] -- CMD [ARG...]\n"
	"       thaw run --from SNAPSHOT [--page-in prefetch|lazy] [--network]\n"
	"                [--timeout S] [--boot-timeout S] [--no-jail] [--log-max BYTES]\n"
	"                -- CMD [ARG...]\n"
	"       thaw run --from SNAPSHOT --record-working-set [--no-jail] [--log-max BYTES]\n"
	"Boots a microVM (or restores a clone of SNAPSHOT, see thaw snapshot),\n"
	"runs CMD in it, copies its stdout and stderr, exits with its exit\n"
	"status (128+signal if killed; 125 if thaw failed).  Its VMM runs\n"
	"jailed: a uid of its own, its own namespaces, a root holding only\n"
	"what it needs, no capabilities; --no-jail (debugging only) drops that.\n"
	"--record-working-set runs a fixed warm-up instead of CMD in a clone of\n"
	"SNAPSHOT and records the pages it touched, which later restores read\n"
	"ahead (--page-in prefetch); no other run records them.\n"
	"--log-max bounds each of the VMM's logs (default 3M, see thaw-vmm).\n"
	"--network gives the guest its network device, tap0 in a namespace of\n"
	"its own with no way out (a snapshot taken with it needs it).\n";

int thaw_run(int argc, char **argv)
{
	static const struct option options[] = {
		MACHINE_LONG_OPTIONS,
		{ "page-in", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "boot-timeout", required_argument, NULL, 'b' },
		{ "record-working-set", no_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct run_options o = { .machine = MACHINE_DEFAULTS,
				 .page_in = "prefetch",
				 .boot_timeout_s = BOOT_TIMEOUT_S_DEFAULT };
	char *end;
	int opt;

	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+:", options, NULL)) != -1) {
		if (machine_option(&o.machine, opt, optarg))
			continue;
		switch (opt) {
		case 'p':
			if (strcmp(optarg, "prefetch") &&
			    strcmp(optarg, "lazy")) {
				fprintf(stderr,
					"thaw run: --page-in takes prefetch or lazy, not '%s'\n",
					optarg);
				return EXIT_THAW_ERROR;
			}
			o.page_in = optarg;
			break;
		case 't':
		case 'b':
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 1 ||
			    v > 86400) {
				fprintf(stderr,
					"thaw run: --%s '%s' is not a number "
					"of seconds (1..86400)\n",
					opt == 't' ? "timeout" : "boot-timeout",
					optarg);
				return EXIT_THAW_ERROR;
			}
			*(opt == 't' ? &o.timeout_s : &o.boot_timeout_s) = v;
			break;
		case 'w':
			o.record_working_set = true;
			break;
		case 'h':
			fputs(run_usage, stdout);
			return 0;
		case ':':
			fprintf(stderr, "thaw run: option '%s' needs a value\n",
				argv[optind - 1]);
			return EXIT_THAW_ERROR;
		default:
			fprintf(stderr,
				"thaw run: unknown option '%s' (see thaw run "
				"--help)\n",
				argv[optind - 1]);
			return EXIT_THAW_ERROR;
		}
	}
	if (o.record_working_set && (!o.machine.from || optind < argc)) {
		fprintf(stderr,
			"thaw run: --record-working-set takes --from SNAPSHOT "
			"and no command: it runs a fixed warm-up\n");
		return EXIT_THAW_ERROR;
	}
	if (optind >= argc && !o.record_working_set) {
		fprintf(stderr,
			"thaw run: no command given (thaw run -- CMD)\n");
		return EXIT_THAW_ERROR;
	}
	if (machine_options_check(&o.machine, "thaw run") < 0)
		return EXIT_THAW_ERROR;

	thaw_catch_signals();
	char **cmd = o.record_working_set ? warm_up : argv + optind;
	int status = o.machine.from ? run_clone(&o, cmd) : run_booted(&o, cmd);
	if (thaw_interrupted) {
		fprintf(stderr, "thaw run: interrupted\n");
		status = 128 + thaw_interrupted;
	}
	return status;
}
