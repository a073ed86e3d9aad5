/* SPDX-License-Identifier: Apache-2.0 */
/*
 * thawd_process.h - a thawd under test: write its config, start
 * `thaw daemon` on it, wait until its socket (and its E2B port, when it
 * has one) answers, read its log's tail, stop it, and say why it died.
 *
 * The daemon's tests and thaw-bench both run daemons this way; it lives in
 * libthaw_client (not in tests/) because bench is built without
 * BUILD_TESTING too.  "Answers" is a request, not a log line: GET /health
 * on the Unix socket through the client library, GET /v2/sandboxes on the
 * E2B port, each with the daemon's token, and 200 back; a daemon that
 * printed "serving" but answers nothing is not up.  Its stdout and stderr
 * are appended to one log file, so a file may hold several daemons in
 * turn: the tail is this daemon's lines only.
 *
 * Errors follow common/errbuf.h: 0 or a negative errno, the message in the
 * caller's buffer; nothing here prints.
 */
#ifndef THAW_POOL_CLIENT_THAWD_PROCESS_H
#define THAW_POOL_CLIENT_THAWD_PROCESS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* How to run one daemon; fields left zero or NULL are not used. */
struct thawd_process_spec {
	const char *thaw;	 /* the thaw program (required) */
	const char *config;	 /* the config file's path (required) */
	const char *config_text; /* written to @config first; NULL: as is */
	const char *log;	 /* stdout and stderr appended (required) */
	const char *banner;	 /* a line written to @log before the start */
	const char *state;	 /* passed as --state */
	const char
		*socket; /* passed as --socket, and waited for (GET /health) */
	const char *token; /* the bearer token of both waits */
	int e2b_port; /* 127.0.0.1:@e2b_port waited for (GET /v2/sandboxes) */
	/* More arguments after thaw's own, NULL-terminated: --log-format
	 * json, say. */
	const char *const *args;
	/* Runs the daemon under this argv prefix (nested-kvm.sh, say), with
	 * @env's "NAME=VALUE" strings added to its environment. */
	const char *const *wrapper;
	const char *const *env;
	double start_limit_s; /* until it answers; 0: 600 s */
	/*
	 * Not our child but a grandchild nobody waits for: a criterion
	 * runner must have no child of its own end while its tests run
	 * (BoxFort's reaper then spins on that zombie).  Its exit status is
	 * then nobody's to see.
	 */
	bool detached;
	bool die_with_parent; /* PR_SET_PDEATHSIG SIGTERM; not when detached */
	bool own_process_group; /* setpgid(0, 0); SIGKILLs go to the group */
};

struct thawd_process {
	pid_t pid; /* 0: none (stopped, or never started) */
	bool child;
	bool own_process_group;
	int status;	  /* the wait status once a child ended */
	off_t log_from;	  /* where this daemon's lines begin in @log */
	double serving_s; /* start to answering */
	char log[PATH_MAX];
};

/*
 * Writes the config, starts the daemon and waits until what @s names
 * answers.  0; -ESRCH when the daemon ended first, -ETIMEDOUT when it did
 * not answer within the limit (it is killed), or another -errno (a file,
 * fork), @err saying why with the log's tail.
 */
int thawd_process_start(struct thawd_process *p,
			const struct thawd_process_spec *s, char *err,
			size_t errlen);

/*
 * Waits at most @limit_s for the daemon to end: 0 when it did (its status
 * in @p->status if it was our child, and @p->pid 0), -ETIMEDOUT when it
 * still runs.
 */
int thawd_process_wait(struct thawd_process *p, double limit_s);

/*
 * SIGTERM, then at most @limit_s for it to end.  0 when it ended well (or
 * was not running); -ETIMEDOUT when it ignored SIGTERM (it is SIGKILLed),
 * -EIO when it ended with a failing status; @err says which.
 */
int thawd_process_stop(struct thawd_process *p, double limit_s, char *err,
		       size_t errlen);

/* SIGKILL (its process group when it has one) and waits for it to go. */
void thawd_process_kill(struct thawd_process *p);

/* The last @len - 1 bytes of this daemon's log lines (or why none). */
void thawd_process_log_tail(const struct thawd_process *p, char *out,
			    size_t len);

/* Why a process with wait status @status ended: "exit status 1",
 * "killed by signal 9 (Killed)". */
void thawd_process_why(int status, char *out, size_t len);

#endif
