/* SPDX-License-Identifier: Apache-2.0 */
/*
 * vmm_process.h - one thaw-vmm child process, as `thaw run`, `thaw snapshot
 * create` and the daemon supervise it: a private run directory holding its
 * sockets and logs, the VMM child, its control socket and the agent behind
 * its vsock socket.  (The daemon's sandbox, what its API hands out, is one
 * of these plus a lease: daemon.h.)
 *
 * Each VMM is jailed (vmm/jail.h) unless its place says no_jail: it runs
 * in a PID namespace of its own as a uid of its own (jail_ids.h), locked in
 * `root` in its run directory, which only it sees filled.
 *
 * The VMM is started with PR_SET_PDEATHSIG, so it dies with its supervisor
 * even on SIGKILL; vmm_process_stop() asks it to stop through the control
 * socket and kills it after STOP_GRACE; vmm_process_remove() leaves nothing
 * behind.  Blocking waits give up when thaw_interrupted (interrupt.h) is
 * set.
 *
 * The VMM reports on one channel, its --ready-fd pipe (vmm/vmm_report.h):
 * a ready record once its sockets listen, carrying a restore's phases,
 * and a stop record as it ends, carrying its status, reason and timings
 * (or the SIGSYS handler's, naming the forbidden call).  The supervisor
 * keeps the pipe for the VMM's life and reads what is left once it is
 * reaped; its log (vmm.log) is for people and never parsed.
 *
 * Errors: 0 or a negative errno, with one message in the caller's @err;
 * the caller prints it.
 */
#ifndef THAW_POOL_HOST_VMM_PROCESS_H
#define THAW_POOL_HOST_VMM_PROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pool/host/agent_client.h"
#include "pool/host/jail_ids.h"
#include "vmm/vmm_report.h"

struct cgroup;

/* The child's exit status when it could not become the VMM (as env(1)). */
#define VMM_EXEC_FAILED 125

/* Short paths: the vsock socket's must fit in sockaddr_un (108 bytes). */
struct vmm_process {
	char dir[80];
	char vsock[96];
	char control[96];
	char vmm_log[96];
	char console_log[96];
	char root[96];	     /* the jail's root, "" when not jailed */
	char netns[96];	     /* its network's pin, "" without one */
	struct jail_id jail; /* its uid and gid while it lives */
	pid_t pid;
	/* Polls readable once the VMM has ended (pidfd_open): a supervisor
	 * of many VMMs learns of an exit without asking each one.  Open
	 * while pid is. */
	int pidfd;
	/* The VMM's report pipe (thaw-vmm --ready-fd), non-blocking: its
	 * ready record comes once its sockets listen, which
	 * vmm_process_wait_agent() waits for (no connection is attempted
	 * before there is a socket to take it), EOF if it ended first; what
	 * is left (its stop record) is read once it is reaped, then the pipe
	 * is closed.  Open while pid is. */
	int report_fd;
	struct vmm_report report; /* the records read so far */
	int wait_status;   /* waitpid's, once vmm_process_reap() reaped it */
	double started_ms; /* when the VMM was forked, CLOCK_MONOTONIC */
};

/*
 * Where a VMM lives: its run directory is @run_dir (created; NULL: a
 * fresh one in $XDG_RUNTIME_DIR or /tmp) and its VMM runs in @cgroup
 * (NULL: ours).  The VMM enters the cgroup before exec.  It is jailed with
 * an id of @jail_ids (NULL: jail_ids_from_env()'s) unless @no_jail, and
 * may write to @out_dir only (NULL: nowhere), which its jail's uid owns
 * until jail_reclaim() hands it back, after vmm_process_remove().  Its
 * vmm.log and console.log hold at most @log_max bytes each (thaw-vmm
 * --log-max; NULL: its default).
 */
struct vmm_place {
	const char *run_dir;
	const struct cgroup *cgroup;
	bool no_jail; /* debugging only: the VMM runs as we do */
	const struct jail_ids *jail_ids;
	const char *out_dir;
	const char *log_max;
	/*
	 * A network (jailed VMMs only): once the run directory and the
	 * jail's id exist, @net_prepare makes a namespace pinned at
	 * @netns_path (the run directory's NET_PIN_NAME, netns.h) holding
	 * tap0 owned by @uid:@gid, the jail's; the VMM joins it (--netns)
	 * instead of the shared empty one and opens tap0 (--net-tap).
	 * vmm_process_remove() unpins it.  NULL: no network.
	 */
	int (*net_prepare)(void *arg, const char *netns_path, uid_t uid,
			   gid_t gid, char *err, size_t errlen);
	void *net_arg;
};

/*
 * Creates the run directory and starts thaw-vmm with @vmm_args (NULL
 * terminated; the VMM path first) plus the run directory's --vsock,
 * --control and --console-log, @place's --log-max, and its jail's --jail,
 * --uid, --gid, --netns and --writable (and --net-tap with a network).  @place
 * may be NULL.  A VMM that cannot be run or put in its cgroup exits with
 * VMM_EXEC_FAILED and says why in its log.
 *
 * PR_SET_PDEATHSIG fires when the *thread* that forked exits: a threaded
 * caller must start VMMs from threads that live as long as the sandboxes.
 */
int vmm_process_start(struct vmm_process *vmm, const char *const vmm_args[],
		      const struct vmm_place *place, char *err, size_t errlen);

/*
 * Waits until the guest agent greets us on a new connection.  Returns 0
 * with @agent connected; -ECHILD when the VMM died ("the VM stopped: " and
 * its reason); -ETIMEDOUT when @timeout_s passed, the guest console's last
 * lines (vmm_process_console_tail) being the likely why; -EINTR
 * ("interrupted") when thaw_interrupted was set, which callers report in
 * their own way; or agent_connect()'s errors.
 */
int vmm_process_wait_agent(struct vmm_process *vmm, struct agent_conn *agent,
			   int timeout_s, char *err, size_t errlen);

/*
 * Sends one control line (control.h) and reads the one-line answer into
 * @reply.  Returns 0 when it starts with "ok"; -EPROTO when it does not
 * (@err quotes it); another negative errno when the socket failed or no
 * answer came.
 */
int vmm_process_control(struct vmm_process *vmm, const char *command,
			char *reply, size_t len, char *err, size_t errlen);

/* What a checkpoint wrote and took (control.h's answer). */
struct vmm_checkpoint {
	uint64_t dirty_pages; /* pages written: a diff's, or all of memory */
	bool full;	      /* memory.img and pages.xxh3, not memory.diff */
	unsigned depth;	      /* diff layers under it; 0 when full */
	double pause_ms, total_ms;
};

/*
 * Checkpoints running @vmm into the existing directory @dir (checkpoint.h):
 * creates its files there, passes them to the VMM with the "checkpoint"
 * line, and leaves in @dir state.bin and either memory.diff (@out->full
 * false: a diff of the snapshot the VM's memory derived from, which the
 * caller links as @dir's parent, snapshot_link_parent()) or memory.img and
 * pages.xxh3, all fsynced; @dir itself is the caller's to sync.  The VM's
 * memory derives from the new files afterwards.  On failure the files are
 * removed.  0, or vmm_process_control()'s errors, -EPROTO for an answer
 * without its numbers.
 */
int vmm_process_checkpoint(struct vmm_process *vmm, const char *dir,
			   struct vmm_checkpoint *out, char *err,
			   size_t errlen);

/*
 * The number after @key (with its '=': "setup_us=") in a control answer
 * such as a checkpoint's (control.h), where fields are space-separated
 * KEY=VALUE words.  0 with *@out; -ENOENT when no word starts with @key,
 * -EINVAL when its value is not an unsigned decimal number.
 */
int vmm_control_number(const char *reply, const char *key, double *out);

/*
 * Where a restored clone's time went, in ms, from its VMM's fork to its
 * agent's first answer.  The host side is process_start_ms + setup_ms +
 * state_restore_ms, page-in being part of the setup; the guest side,
 * agent_ms, starts when the state is loaded and the vCPUs may run.  The
 * four add up to that whole time.
 */
struct vmm_restore_phases {
	double process_start_ms; /* fork -> the VMM's main(): exec, loader */
	double setup_ms;	 /* snapshot read and checked, memory mapped
				    and prefetched, the KVM VM built */
	double page_in_ms;	 /* the prefetch, inside setup_ms */
	double prefetched_pages; /* 0 when lazy or no working set */
	double state_restore_ms; /* vCPU, irqchip and device state loaded */
	double agent_ms;	 /* state loaded -> the agent's first answer */
};

/* process_start_ms + setup_ms + state_restore_ms: the host's share. */
double vmm_restore_host_ms(const struct vmm_restore_phases *p);

/*
 * @p from a restored VMM's ready record (@ready, vmm/vmm_report.h), the
 * VMM having been forked at @forked_ms and its agent having first answered
 * at @agent_ready_ms (both CLOCK_MONOTONIC, as the record's started_at_us).
 * 0, or -EPROTO when the record lacks a restored clone's fields (@err
 * quotes it and names the field).
 */
int vmm_restore_phases_parse(const char *ready, double forked_ms,
			     double agent_ready_ms,
			     struct vmm_restore_phases *p, char *err,
			     size_t errlen);

/*
 * @p from the ready record restored @vmm sent before its agent answered
 * (no round trip: vmm_process_wait_agent() read it), @agent_ready_ms
 * being when its agent first answered.  0, or the parser's error.
 */
int vmm_process_restore_phases(const struct vmm_process *vmm,
			       double agent_ready_ms,
			       struct vmm_restore_phases *p, char *err,
			       size_t errlen);

/*
 * The VMM's reason for stopping, its verdict, from its stop record once it
 * is reaped; when it wrote none (killed outright), what vmm_process_reap()
 * saw: the signal or exit status (and a record the pipe cut or garbled).
 * A VMM its seccomp filter killed (reaped, dead by SIGSYS) is "killed by
 * its seccomp filter: forbidden system call 41 (socket)", from the record
 * its SIGSYS handler wrote.
 */
void vmm_process_reason(const struct vmm_process *vmm, char *out, size_t size);

/*
 * The guest console's last bytes into @buf (NUL-terminated): why a guest
 * never got to its agent.  Returns their count, 0 when there are none.
 */
size_t vmm_process_console_tail(const struct vmm_process *vmm, char *buf,
				size_t size);

/* The VMM's setup in ms from its stop record (setup_us), or -1. */
double vmm_process_setup_ms(const struct vmm_process *vmm);

/* Reaps the VMM if it has ended, without blocking: true then, and pid
 * and pidfd are gone, and its report read to its end. */
bool vmm_process_reap(struct vmm_process *vmm);

/* Stops the VMM (control socket, then SIGKILL after a grace period). */
void vmm_process_stop(struct vmm_process *vmm);

/* SIGKILLs the VMM and reaps it: a disposable clone needs no goodbye. */
void vmm_process_kill(struct vmm_process *vmm);

/* Stops the VMM if needed, removes the run directory, frees its jail id. */
void vmm_process_remove(struct vmm_process *vmm);

#endif
