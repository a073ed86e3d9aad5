/* SPDX-License-Identifier: Apache-2.0 */
/*
 * guest_agent.h - what integration tests ask of a live guest's agent
 * through a connection they hold (agent_client.h): run a shell command,
 * read a file.  Criterion asserts that the agent answers as the protocol
 * says; what the guest did (exit status, output, bytes) is the caller's to
 * judge.
 */
#ifndef THAW_TESTS_GUEST_AGENT_H
#define THAW_TESTS_GUEST_AGENT_H

#include <stddef.h>

#include "pool/host/agent_client.h"

/*
 * Runs `sh -c @script` in the guest, for at most @timeout_s (unscaled:
 * the caller scales); its exit status.  Its stdout and stderr go to @out,
 * truncated to @size - 1 bytes and NUL-terminated.
 */
int guest_sh(struct agent_conn *agent, const char *script, int timeout_s,
	     char *out, size_t size);

/*
 * Calls @chunk for each piece of the guest's @path; its length in all, or
 * -1 when the agent could not read it (no such file, for one).
 */
long guest_read(struct agent_conn *agent, const char *path,
		void (*chunk)(void *arg, const void *data, size_t len),
		void *arg);

#endif
