// SPDX-License-Identifier: Apache-2.0
/*
 * api_agent.c - the API's side of a sandbox's agent, shared by ping, exec
 * and files.
 *
 * Every request opens its own connection to the agent (vsock through the
 * VMM's Unix socket) and closes it when done: the agent ends what a
 * connection started when it closes, so a request that goes away takes
 * its command or half-written file with it.  Every wait on the agent
 * (agent_wait(), agent_client.h) also watches the HTTP client's socket and
 * the daemon's stop flag, so neither a client that hangs up nor a daemon
 * that stops waits for a guest that may take minutes, or never answer.
 *
 * Memory a guest or a client can make the daemon hold is taken from one
 * budget (api_memory_budget_bytes): each agent connection reserves what it
 * may hold at most (API_AGENT_CONN_BYTES), an exec's collected output
 * what it grows by; when the budget is spent the request is answered 503
 * with a Retry-After, never with more memory.
 */
#include <errno.h>
#include <stdio.h>

#include "pool/daemon/api_internal.h"
#include "common/clock.h"

/*
 * How long the daemon waits on a guest: as long as a restore may take, its
 * one measure of a guest's pace (seconds where the guest kernel is emulated
 * or the guest is being bombed).
 */
uint64_t api_guest_patience_ns(const struct daemon *d)
{
	return d->cfg.restore_timeout_s * 1000ull * NS_PER_MS;
}

/* @flag, one the daemon's lock guards. */
static bool flag_of(struct daemon *d, const bool *flag)
{
	pthread_mutex_lock(&d->lock);
	bool set = *flag;
	pthread_mutex_unlock(&d->lock);
	return set;
}

static bool sandbox_stopped(struct sandbox *c)
{
	return flag_of(c->pool->d, &c->stopped);
}

static bool daemon_stopping(void *arg)
{
	struct daemon *d = arg;

	return flag_of(d, &d->stopping);
}

/* Retrying a connection is pointless: the VMM died or we stop. */
static bool give_up_connecting(void *arg)
{
	struct sandbox *c = arg;

	return sandbox_stopped(c) || daemon_stopping(c->pool->d);
}

uint64_t api_frames_allowance(uint64_t data, uint32_t min_frame_data)
{
	uint64_t frames = data / min_frame_data + 1;

	return data + frames * (THAW_HEADER_SIZE + THAW_TLV_HEADER) +
	       THAW_MAX_FRAME;
}

bool api_budget_take(struct daemon *d, uint64_t bytes)
{
	pthread_mutex_lock(&d->lock);
	bool fits =
		d->api_memory_used + bytes <= d->cfg.api_memory_budget_bytes;
	if (fits)
		d->api_memory_used += bytes;
	pthread_mutex_unlock(&d->lock);
	return fits;
}

void api_budget_give(struct daemon *d, uint64_t bytes)
{
	pthread_mutex_lock(&d->lock);
	d->api_memory_used -= bytes;
	pthread_mutex_unlock(&d->lock);
}

void api_budget_spent(const struct daemon *d, char *err, size_t errlen)
{
	snprintf(err, errlen,
		 "the daemon's memory for requests (api_memory_budget_bytes "
		 "= %llu) is in use: try again later",
		 (unsigned long long)d->cfg.api_memory_budget_bytes);
}

/* Connects to @c's agent; an HTTP status and message when it cannot. */
int api_connect_agent(struct sandbox *c, struct agent_conn *agent,
		      int client_fd, char *err, size_t errlen)
{
	struct daemon *d = c->pool->d;
	char why[256];

	agent->fd = -1;
	if (!api_budget_take(d, API_AGENT_CONN_BYTES)) {
		api_budget_spent(d, err, errlen);
		return 503;
	}
	if (sandbox_busy(c, err, errlen)) {
		api_budget_give(d, API_AGENT_CONN_BYTES);
		return 409;
	}
	if (sandbox_stopped(c)) { /* its reason is set by then, and stays */
		snprintf(err, errlen, "sandbox %s stopped: %s", c->id,
			 c->stop_reason);
		api_budget_give(d, API_AGENT_CONN_BYTES);
		return 500;
	}
	/* A guest busy with other connections may refuse one for a moment
	 * (-EAGAIN, seen under concurrent handouts): retried until the
	 * deadline, unless its VMM dies or the daemon stops. */
	const struct agent_wait wait = {
		.deadline_ns =
			monotonic_ns() + api_guest_patience_ns(c->pool->d),
		.give_up = give_up_connecting,
		.arg = c,
	};
	int ret = agent_connect_until(agent, c->vmm.vsock, &wait, why,
				      sizeof(why));

	if (ret < 0) {
		snprintf(err, errlen,
			 "sandbox %s: its agent does not answer: %s", c->id,
			 why);
		api_budget_give(d, API_AGENT_CONN_BYTES);
		return 500;
	}
	agent->watch = (struct agent_watch){ .client_fd = client_fd,
					     .stopping = daemon_stopping,
					     .arg = d };
	return 0;
}

void api_close_agent(struct daemon *d, struct agent_conn *agent)
{
	if (agent->fd >= 0)
		api_budget_give(d, API_AGENT_CONN_BYTES);
	agent_close(agent);
}

void api_guest_paced(struct MHD_Connection *conn, const struct daemon *d,
		     uint64_t deadline_ns)
{
	uint64_t now = monotonic_ns();
	unsigned limit_s = 0; /* none */

	if (deadline_ns) {
		uint64_t left_s = deadline_ns > now ? (deadline_ns - now) /
							      NS_PER_MS / 1000
						    : 0;

		limit_s = (unsigned)(left_s + d->cfg.idle_timeout_s);
	}
	MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT, limit_s);
}

void api_guest_stepped(struct MHD_Connection *conn, const struct daemon *d)
{
	api_guest_paced(conn, d, monotonic_ns() + api_guest_patience_ns(d));
}

int api_client_fd(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return info ? info->connect_fd : -1;
}
