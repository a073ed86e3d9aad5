// SPDX-License-Identifier: Apache-2.0
/*
 * api_agent.c - the API's side of a sandbox's agent, shared by ping, exec
 * and files.
 *
 * Every request opens its own connection to the agent (vsock through the
 * VMM's Unix socket) and closes it when done: the agent ends what a
 * connection started when it closes, so a request that goes away takes
 * its command or half-written file with it.  While a route waits on the
 * agent it also watches the HTTP client's socket and the daemon's stop
 * flag, so neither a client that hangs up nor a daemon that stops waits
 * for a guest that may take minutes.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>

#include "api_internal.h"
#include "clock.h"

/* How often a waiting response looks at the daemon's stop flag. */
#define WAIT_SLICE_MS 250

/*
 * How long the daemon waits on a guest: as long as a restore may take, its
 * one measure of a guest's pace (seconds where the guest kernel is emulated
 * or the guest is being bombed).
 */
uint64_t api_guest_patience_ns(const struct daemon *d)
{
	return d->cfg.restore_timeout_s * 1000ull * NS_PER_MS;
}

static bool sandbox_stopped(void *arg)
{
	struct sandbox *c = arg;
	struct daemon *d = c->pool->d;

	pthread_mutex_lock(&d->lock);
	bool stopped = c->stopped;
	pthread_mutex_unlock(&d->lock);
	return stopped;
}

/* Connects to @c's agent; an HTTP status and message when it cannot. */
int api_connect_agent(struct sandbox *c, struct agent_conn *agent, char *err,
		      size_t errlen)
{
	char why[256];

	if (sandbox_stopped(c)) { /* its reason is set by then, and stays */
		snprintf(err, errlen, "sandbox %s stopped: %s", c->id,
			 c->stop_reason);
		return 500;
	}
	/* A guest busy with other connections may refuse one for a moment
	 * (-EAGAIN, seen under concurrent handouts): retried until the
	 * deadline, unless its VMM dies or the daemon stops. */
	const struct agent_wait wait = {
		.deadline_ns =
			monotonic_ns() + api_guest_patience_ns(c->pool->d),
		.give_up = sandbox_stopped,
		.arg = c,
	};
	int ret = agent_connect_until(agent, c->vmm.vsock, &wait, why,
				      sizeof(why));

	if (ret < 0) {
		snprintf(err, errlen,
			 "sandbox %s: its agent does not answer: %s", c->id,
			 why);
		return 500;
	}
	return 0;
}

/*
 * Waits until the agent has a frame for us, the client hangs up, the
 * daemon stops, or monotonic_ns() passes @deadline_ns (0: never).  The
 * client's socket is watched for POLLRDHUP only: a pipelined next request
 * must not count as a hangup.
 */
enum wait_outcome api_wait_agent_or_client(struct daemon *d, int agent_fd,
					   int client_fd, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p[2] = { { agent_fd, POLLIN, 0 },
				       { client_fd, POLLRDHUP, 0 } };
		int n = poll(p, client_fd >= 0 ? 2 : 1, WAIT_SLICE_MS);

		if (n < 0 && errno != EINTR)
			return CLIENT_GONE;
		if (client_fd >= 0 && p[1].revents)
			return CLIENT_GONE;
		if (p[0].revents)
			return AGENT_READY;
		pthread_mutex_lock(&d->lock);
		bool stopping = d->stopping;
		pthread_mutex_unlock(&d->lock);
		if (stopping)
			return DAEMON_STOPPING;
		if (deadline_ns && monotonic_ns() > deadline_ns)
			return GUEST_SILENT;
	}
}

int api_client_fd(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return info ? info->connect_fd : -1;
}
