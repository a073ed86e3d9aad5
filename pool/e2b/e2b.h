/* SPDX-License-Identifier: Apache-2.0 */
/*
 * e2b.h - the daemon's E2B-compatible listener: what pool/daemon/ sees of
 * pool/e2b/ (e2b_internal.h is the rest): a front end (frontend.h) the
 * program wires in, E2B_FRONTEND.
 *
 * With `e2b_listen = HOST:PORT` in the config, thawd serves on that TCP
 * address what E2B's cloud serves its SDKs: the control plane's REST API
 * (api.e2b.app: create, list, kill, pause... sandboxes) and, for each
 * sandbox, envd's API (process.Process and filesystem.Filesystem over the
 * Connect protocol, /files, /health), found by the E2b-Sandbox-Id header
 * or the <port>-<id>.<domain> Host header.  An unmodified E2B program then
 * drives thaw's sandboxes with E2B_API_URL and E2B_SANDBOX_URL set to
 * http://HOST:PORT and E2B_API_KEY to the daemon's token.
 */
#ifndef THAW_POOL_E2B_E2B_H
#define THAW_POOL_E2B_E2B_H

#include "pool/daemon/frontend.h"

/*
 * With d->cfg.e2b_listen set, listens there and serves, keeping what it
 * keeps with a sandbox in extension slot @slot, into *@state (the server);
 * without, *@state is NULL.  0, or -1 after a log line when it cannot
 * (the address is taken, out of memory).  The daemon calls it once the
 * pools run, as the Unix socket's server is started.
 */
int e2b_start(struct daemon *d, unsigned slot, void **state);

/*
 * Stops accepting, waits for every connection's thread and for every
 * process started through envd to let go of its sandbox.  The daemon calls
 * it after pools_stopping() (the daemon's stop flag ends every wait on a
 * guest) and before pools_stop().  NULL is a no-op.
 */
void e2b_stop(void *server);

/* What E2B keeps with a sandbox (its extension, struct e2b_sandbox),
 * freed with it. */
void e2b_sandbox_free(void *ext);

/* The E2B listener as the daemon's front end (frontend.h). */
#define E2B_FRONTEND                                                 \
	{                                                            \
		.name = "E2B", .start = e2b_start, .stop = e2b_stop, \
		.sandbox_free = e2b_sandbox_free,                    \
	}

#endif
