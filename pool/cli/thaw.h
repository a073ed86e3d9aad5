/* SPDX-License-Identifier: Apache-2.0 */
/*
 * thaw.h - the `thaw` command's subcommands and what they share.  Each
 * subcommand parses its own options from argv (argv[0] is the subcommand)
 * and returns the process exit status.
 */
#ifndef THAW_POOL_CLI_THAW_H
#define THAW_POOL_CLI_THAW_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Like env(1): the tool failed, not the guest's command. */
#define EXIT_THAW_ERROR 125

/*
 * The machine a command starts, the same options for `thaw run` and
 * `thaw snapshot create`: a boot (--mem --vcpus --kernel --initrd --cmdline,
 * or their defaults) or a clone of snapshot --from, which brings its own
 * machine.
 */
struct machine_options {
	const char *mem, *vcpus, *kernel, *initrd;
	const char *cmdline; /* extra kernel command line */
	const char *from;
	const char *log_max; /* --log-max: the VMM's logs' bound, or NULL */
	bool boot_flags;     /* one of the five boot options was given */
	bool no_jail;	     /* --no-jail: debugging only (vmm_process.h) */
	/* --network: the guest gets its network device, tap0 in a namespace
	 * of its own with no way out: what a template of a daemon's
	 * `network = nat` pool is booted, and its snapshot restored, with. */
	bool network;
};

/* clang-format off */
#define MACHINE_DEFAULTS { .mem = "256", .vcpus = "1" }

/* Their entries in a getopt_long option table. */
#define MACHINE_LONG_OPTIONS                        \
	{ "mem", required_argument, NULL, 'm' },    \
	{ "vcpus", required_argument, NULL, 'n' },  \
	{ "kernel", required_argument, NULL, 'k' }, \
	{ "initrd", required_argument, NULL, 'i' }, \
	{ "cmdline", required_argument, NULL, 'c' }, \
	{ "from", required_argument, NULL, 'f' },   \
	{ "no-jail", no_argument, NULL, 'J' },       \
	{ "network", no_argument, NULL, 'N' },       \
	{ "log-max", required_argument, NULL, 'X' }
/* clang-format on */

/* Takes option @opt with @arg; false when @opt is not a machine option. */
bool machine_option(struct machine_options *m, int opt, const char *arg);

/* 0, or -1 after a message starting with @who when --from meets a boot
 * option or --log-max is no bound. */
int machine_options_check(const struct machine_options *m, const char *who);

struct vmm_process;
struct agent_conn;

/*
 * Starts a VMM with @vmm_args, jailed unless @m says --no-jail and
 * allowed to write to @out_dir only (NULL: nowhere), and waits up to
 * @timeout_s for its agent (vmm_process.h).  0, or -1 after saying why in
 * lines starting with @who, the guest console's last output first when
 * the agent never answered; an interruption is left for the caller to
 * report.
 */
int machine_start(struct vmm_process *vmm, const char *who,
		  const struct machine_options *m, const char *const vmm_args[],
		  const char *out_dir, struct agent_conn *agent, int timeout_s);

/* The subcommands: run.c, snapshot_command.c, sandbox_commands.c (the
 * last three); `thaw daemon` is pool/daemon/thawd.h's. */
/*
 * Runs @argv in the guest behind @agent, copying its stdout to @out_fd and
 * its stderr to ours; returns its exit status for our exit (128 + signal,
 * 126/127 when it could not run, EXIT_THAW_ERROR when thaw failed: @who
 * says so on stderr).
 */
int thaw_relay_exec(const char *who, struct agent_conn *agent,
		    char *const argv[], uint32_t timeout_ms, int out_fd);

int thaw_run(int argc, char **argv);
int thaw_snapshot(int argc, char **argv);
int thaw_sandbox(int argc, char **argv);
int thaw_exec(int argc, char **argv);
int thaw_cp(int argc, char **argv);

#endif
