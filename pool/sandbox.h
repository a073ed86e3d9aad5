/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sandbox.h - one thaw-vmm process as the CLI (and later the daemon) sees
 * it: a private run directory holding its sockets and logs, the VMM child,
 * its control socket and the agent behind its vsock socket.
 *
 * The VMM is started with PR_SET_PDEATHSIG, so it dies with its supervisor
 * even on SIGKILL; sandbox_stop() asks it to stop through the control socket
 * and kills it after STOP_GRACE; sandbox_remove() leaves nothing behind.
 * Blocking waits give up when thaw_interrupted (thaw.h) is set.
 */
#ifndef THAW_POOL_SANDBOX_H
#define THAW_POOL_SANDBOX_H

#include <stddef.h>
#include <sys/types.h>

#include "agent_client.h"

struct cgroup;

/* Short paths: the vsock socket's must fit in sockaddr_un (108 bytes). */
struct sandbox {
	char dir[80];
	char vsock[96];
	char control[96];
	char vmm_log[96];
	char console_log[96];
	pid_t vmm;
	double started_ms; /* when the VMM was forked, CLOCK_MONOTONIC */
};

/* Milliseconds on CLOCK_MONOTONIC, for phase timings. */
double sandbox_now_ms(void);

/*
 * Where a sandbox lives: its run directory is @run_dir (created; NULL: a
 * fresh one in $XDG_RUNTIME_DIR or /tmp) and its VMM runs in @cgroup
 * (NULL: ours).  The VMM enters the cgroup before exec.
 */
struct sandbox_place {
	const char *run_dir;
	const struct cgroup *cgroup;
};

/*
 * Creates the run directory and starts thaw-vmm with @vmm_args (NULL
 * terminated; the VMM path first) plus the run directory's --vsock,
 * --control and --console-log.  @place may be NULL.  Returns 0, or -1 after
 * a message starting with @who.
 *
 * PR_SET_PDEATHSIG fires when the *thread* that forked exits: a threaded
 * caller must start VMMs from threads that live as long as the sandboxes.
 */
int sandbox_start(struct sandbox *sb, const char *who,
		  const char *const vmm_args[],
		  const struct sandbox_place *place);

/*
 * Waits until the guest agent greets us on a new connection, the VMM dies
 * (its reason is printed) or @timeout_s pass (the console's last lines are
 * printed).  Returns 0 with @agent connected, or -1.
 */
int sandbox_wait_agent(struct sandbox *sb, const char *who,
		       struct agent_conn *agent, int timeout_s);

/*
 * Sends one control line (control.h) and reads the one-line answer into
 * @reply.  Returns 0 when it starts with "ok", else -1 after a message that
 * includes the VMM's answer or the socket error.
 */
int sandbox_control(struct sandbox *sb, const char *who, const char *command,
		    char *reply, size_t len);

/* The VMM's reason for stopping: the first non-timings line of its log. */
void sandbox_vmm_reason(const struct sandbox *sb, char *out, size_t size);

/* "vmm setup 12.3 ms" from thaw-vmm's timings line, or -1. */
double sandbox_vmm_setup_ms(const struct sandbox *sb);

/* Stops the VMM (control socket, then SIGKILL after a grace period). */
void sandbox_stop(struct sandbox *sb);

/* SIGKILLs the VMM and reaps it: a disposable clone needs no goodbye. */
void sandbox_kill(struct sandbox *sb);

/* Stops the VMM if needed and removes the run directory. */
void sandbox_remove(struct sandbox *sb);

#endif
