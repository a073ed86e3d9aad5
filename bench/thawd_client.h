/* SPDX-License-Identifier: Apache-2.0 */
/*
 * thawd_client.h - what thaw-bench needs of the daemon: start one on a
 * config of its own, call its HTTP API over the Unix socket, stop it.
 *
 * The bench drives thawd exactly as a user does (pool/API.md), so every
 * handout figure includes the HTTP round trip a real client pays.  Each
 * scenario starts its own daemon, with the pool sizes it needs, on one
 * shared state directory: the template's snapshot is built by the first
 * daemon and found in the catalog by the others.  Requests go through
 * the daemon's client library (pool/client/thaw_client.h), one connection
 * per thread.
 */
#ifndef THAW_BENCH_THAWD_CLIENT_H
#define THAW_BENCH_THAWD_CLIENT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "pool/client/thaw_client.h"
#include "pool/client/thawd_process.h"

/* One [template NAME] section; zero fields keep the daemon's default. */
struct template_spec {
	const char *name;
	unsigned mem_mib;
	unsigned min_ready;
	unsigned max_total;
	unsigned restore_parallel;
	const char *page_in; /* NULL: the default */
	const char *network; /* "nat" or "none"; NULL: the default (nat) */
};

struct thawd {
	struct thawd_process proc; /* proc.pid: 0 when not running */
	char token[64]; /* the daemon's, sent with every call; "": none */
	char state_dir[PATH_MAX];
	char socket[PATH_MAX + 16];
};

/* The [daemon] settings a scenario picks; zero fields are the usual run. */
struct daemon_spec {
	unsigned max_sandboxes;
	/*
	 * true: the daemon's default admission; false: it does not watch CPU
	 * pressure or restore slowdown, so that a latency figure measures the
	 * concurrency the bench drives rather than the daemon refusing it
	 * (pool/API.md, *Admission*).
	 */
	bool admit_on_load;
	/* jail = false: VMMs unjailed, to measure what the jail costs. */
	bool no_jail;
	/* e2b_listen = 127.0.0.1:PORT (0: none), with a token, which every
	 * call of the bench then carries. */
	int e2b_port;
};

/* The token of a daemon started with an e2b_port. */
#define THAWD_E2B_TOKEN "thaw-bench-e2b-token"

/*
 * Writes a config with @templates (@n of them, all on @kernel and @initrd)
 * and @spec's settings into @state_dir, starts `@thaw daemon` on it (its
 * stderr goes to @state_dir/thawd.log) and waits until it serves.  Returns
 * 0, or -1 with @err saying why (the log's last lines when the daemon
 * died).
 */
int thawd_start(struct thawd *d, const char *thaw, const char *state_dir,
		const char *kernel, const char *initrd,
		const struct template_spec *templates, size_t n,
		const struct daemon_spec *spec, char *err, size_t errlen);

/* SIGTERM, then waits (SIGKILL after 120 s).  0, or -1 with @err.  The
 * log's tail, for error messages: thawd_process_log_tail(&d->proc). */
int thawd_stop(struct thawd *d, char *err, size_t errlen);

/*
 * A connection to @d's socket through the client library (calls time out
 * after 10 min); NULL with @err saying why.  thaw_client_close() ends it.
 */
struct thaw_client *thawd_connect(const struct thawd *d, char *err,
				  size_t errlen);

/* @name's pool as GET /templates reports it into @t.  0, or -1 with @err. */
int thawd_pool(struct thaw_client *c, const char *name, struct thaw_template *t,
	       char *err, size_t errlen);

/*
 * Waits until @name's pool has at least @ready clones ready and none
 * restoring beyond that, at most @limit_s seconds.  0, or -1 with @err
 * (what the pool held when time ran out).
 */
int thawd_wait_ready(struct thaw_client *c, const char *name, long ready,
		     double limit_s, char *err, size_t errlen);

/* One handout: the sandbox, and what it cost. */
struct handout {
	char id[THAW_CLIENT_ID_MAX];
	double ms; /* create request sent -> ping answered */
	/* The daemon's: its VMM started -> agent answered, identity pushed;
	 * and that split into the host's and the guest's phases. */
	double restore_ms;
	struct thaw_restore_phases restore;
};

/*
 * POST /sandboxes for @template and, once handed out, POST .../ping.
 * 0, or -1 with @err (status and the daemon's message).
 */
int thawd_handout(struct thaw_client *c, const char *template,
		  struct handout *h, char *err, size_t errlen);

/* thawd_handout() of the sandbox @spec asks for (a snapshot's, say). */
int thawd_create_ping(struct thaw_client *c, const struct thaw_create *spec,
		      struct handout *h, char *err, size_t errlen);

/*
 * POST /sandboxes for @template and, once handed out, `true` executed in
 * it: @h->ms is create request sent -> `true` exited.  0, or -1 with @err.
 */
int thawd_create_exec(struct thaw_client *c, const char *template,
		      struct handout *h, char *err, size_t errlen);

/* `true` in sandbox @id, waited for; @ms its round trip.  0 or -1. */
int thawd_exec_true(struct thaw_client *c, const char *id, double *ms,
		    char *err, size_t errlen);

/* @argv in sandbox @id, within @timeout_s (0: none), waited for; @ms (or
 * NULL) its round trip.  0 when it exited 0, or -1 with @err. */
int thawd_exec(struct thaw_client *c, const char *id, const char *const argv[],
	       unsigned timeout_s, double *ms, char *err, size_t errlen);

#endif
