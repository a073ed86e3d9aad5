/* SPDX-License-Identifier: Apache-2.0 */
/*
 * frontend.h - what thawd knows of a front end besides its own HTTP API:
 * a table of callbacks the program wires in (pool/cli/thaw.c), so that
 * nothing under pool/daemon names one.
 *
 * A front end (E2B's listener, pool/e2b, and later others) serves the
 * service core's verbs (sandbox_ops.h) in some other protocol.  The daemon
 * starts each once its pools and its own API run, stops each after
 * pools_stopping() and before pools_stop(), and gives each a slot of its
 * own in every sandbox (sandbox.ext[slot], sandbox_ops.h's
 * sandbox_ext_*()) for what it keeps with one, freed with the sandbox by
 * the front end's sandbox_free(): the shape of a Linux driver's
 * private-data pointer, with its release callback.
 */
#ifndef THAW_POOL_DAEMON_FRONTEND_H
#define THAW_POOL_DAEMON_FRONTEND_H

struct daemon;

/* The most front ends one daemon runs: each has a slot in every sandbox. */
#define FRONTENDS_MAX 4

struct frontend {
	const char *name; /* "E2B", for the log */
	/*
	 * Starts serving, if the config asks for it, with @slot its
	 * extension slot; *@state is what stop() gets (NULL: nothing to
	 * stop).  0, or -1 after a log line (the daemon then stops).
	 */
	int (*start)(struct daemon *d, unsigned slot, void **state);
	/* Stops accepting and waits for what it started; NULL is a no-op. */
	void (*stop)(void *state);
	/* Frees what the front end kept with a sandbox (non-NULL). */
	void (*sandbox_free)(void *ext);
};

#endif
