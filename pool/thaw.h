/* SPDX-License-Identifier: Apache-2.0 */
/*
 * thaw.h - the `thaw` command's subcommands and what they share.  Each
 * subcommand parses its own options from argv (argv[0] is the subcommand)
 * and returns the process exit status.
 */
#ifndef THAW_POOL_THAW_H
#define THAW_POOL_THAW_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* Like env(1): the tool failed, not the guest's command. */
#define EXIT_THAW_ERROR 125

/* The signal that asked us to stop, or 0; set by thaw_catch_signals(). */
extern volatile sig_atomic_t thaw_interrupted;

/* SIGINT/SIGTERM/SIGHUP set thaw_interrupted; SIGPIPE is ignored. */
void thaw_catch_signals(void);

/* @env from the environment, else the path compiled in. */
const char *thaw_tool_path(const char *env, const char *built_in);

/*
 * The state directory (snapshots, catalog): $THAW_STATE_DIR, else
 * $XDG_STATE_HOME/thaw, else ~/.local/state/thaw.  Returns 0, or -1 after
 * a message when none can be formed.
 */
int thaw_state_dir(char *out, size_t len);

/* mkdir -p: 0, or -1 with errno. */
int thaw_make_dirs(const char *path);

/*
 * The default guest initramfs (thaw-agent as init), packed and cached by
 * thaw-mkinitramfs.  Returns 0, or -1 after a message starting with @who.
 */
int thaw_default_initrd(char *out, size_t len, const char *who);

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
	bool boot_flags; /* one of the five boot options was given */
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
	{ "from", required_argument, NULL, 'f' }
/* clang-format on */

/* Takes option @opt with @arg; false when @opt is not a machine option. */
bool machine_option(struct machine_options *m, int opt, const char *arg);

/* 0, or -1 after a message starting with @who when --from meets a boot
 * option. */
int machine_options_check(const struct machine_options *m, const char *who);

struct template_record;

/*
 * Fills @t's kernel and initrd hashes and its id: a template is what is
 * booted, so the same files, memory, vCPUs and extra command line (@cmdline,
 * may be NULL) give the same id.  Returns 0, or -1 after a message.
 */
int template_identify(const char *kernel, const char *initrd, const char *mem,
		      const char *vcpus, const char *cmdline,
		      struct template_record *t);

int thaw_run(int argc, char **argv);
int thaw_snapshot(int argc, char **argv);
int thaw_daemon(int argc, char **argv);	 /* daemon.c */
int thaw_sandbox(int argc, char **argv); /* client.c, like the next two */
int thaw_exec(int argc, char **argv);
int thaw_cp(int argc, char **argv);

#endif
