// SPDX-License-Identifier: Apache-2.0
/*
 * sandbox_sessions.c - the service core's sessions with a sandbox's agent
 * (sandbox_ops.h), for every front end's exec, files and ping, and the
 * daemon's memory budget they take from.
 *
 * Every request opens its own connection to the agent (vsock through the
 * VMM's Unix socket) and closes it when done: the agent ends what a
 * connection started when it closes, so a request that goes away takes
 * its command or half-written file with it.  Every wait on the agent
 * (agent_wait(), agent_client.h) also watches the client's socket and the
 * daemon's stop flag, so neither a client that hangs up nor a daemon that
 * stops waits for a guest that may take minutes, or never answer.
 *
 * Memory a guest or a client can make the daemon hold is taken from one
 * budget (api_memory_budget_bytes): each agent connection reserves what it
 * may hold at most (SANDBOX_AGENT_CONN_BYTES), an exec's collected output
 * what it grows by, a request body what it is; when the budget is spent
 * the request is refused (POOL_NO_MEMORY: a 503 with a Retry-After), never
 * given more memory.
 */
#include <stdio.h>

#include "pool/daemon/sandbox_ops.h"
#include "pool/http/http_server.h"
#include "common/clock.h"

/*
 * How long the daemon waits on a guest: as long as a restore may take, its
 * one measure of a guest's pace (seconds where the guest kernel is emulated
 * or the guest is being bombed).
 */
uint64_t sandbox_guest_patience_ns(const struct daemon *d)
{
	return d->cfg.restore_timeout_s * 1000ull * NS_PER_MS;
}

uint64_t sandbox_guest_deadline_ns(const struct daemon *d)
{
	return monotonic_ns() + sandbox_guest_patience_ns(d);
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

uint64_t sandbox_frames_allowance(uint64_t data, uint32_t min_frame_data)
{
	uint64_t frames = data / min_frame_data + 1;

	return data + frames * (THAW_HEADER_SIZE + THAW_TLV_HEADER) +
	       THAW_MAX_FRAME;
}

bool sandbox_budget_take(struct daemon *d, uint64_t bytes)
{
	pthread_mutex_lock(&d->lock);
	bool fits =
		d->api_memory_used + bytes <= d->cfg.api_memory_budget_bytes;
	if (fits)
		d->api_memory_used += bytes;
	pthread_mutex_unlock(&d->lock);
	return fits;
}

void sandbox_budget_give(struct daemon *d, uint64_t bytes)
{
	pthread_mutex_lock(&d->lock);
	d->api_memory_used -= bytes;
	pthread_mutex_unlock(&d->lock);
}

void sandbox_budget_spent(const struct daemon *d, char *err, size_t errlen)
{
	snprintf(err, errlen,
		 "the daemon's memory for requests (api_memory_budget_bytes "
		 "= %llu) is in use: try again later",
		 (unsigned long long)d->cfg.api_memory_budget_bytes);
}

enum pool_error sandbox_agent_open(struct sandbox *c, struct agent_conn *agent,
				   int client_fd, char *err, size_t errlen)
{
	struct daemon *d = c->pool->d;
	char why[256];

	agent->fd = -1;
	if (!sandbox_budget_take(d, SANDBOX_AGENT_CONN_BYTES)) {
		sandbox_budget_spent(d, err, errlen);
		return POOL_NO_MEMORY;
	}
	if (sandbox_busy(c, err, errlen)) {
		sandbox_budget_give(d, SANDBOX_AGENT_CONN_BYTES);
		return POOL_CONFLICT;
	}
	if (sandbox_stopped(c)) { /* its reason is set by then, and stays */
		snprintf(err, errlen, "sandbox %s stopped: %s", c->id,
			 c->stop_reason);
		sandbox_budget_give(d, SANDBOX_AGENT_CONN_BYTES);
		return POOL_FAILED;
	}
	/* A guest busy with other connections may refuse one for a moment
	 * (-EAGAIN, seen under concurrent handouts): retried until the
	 * deadline, unless its VMM dies or the daemon stops. */
	const struct agent_wait wait = {
		.deadline_ns = sandbox_guest_deadline_ns(d),
		.give_up = give_up_connecting,
		.arg = c,
	};
	int ret = agent_connect_until(agent, c->vmm.vsock, &wait, why,
				      sizeof(why));

	if (ret < 0) {
		snprintf(err, errlen,
			 "sandbox %s: its agent does not answer: %s", c->id,
			 why);
		sandbox_budget_give(d, SANDBOX_AGENT_CONN_BYTES);
		return POOL_FAILED;
	}
	agent->watch = (struct agent_watch){ .client_fd = client_fd,
					     .stopping = daemon_stopping,
					     .arg = d };
	return POOL_OK;
}

void sandbox_agent_close(struct daemon *d, struct agent_conn *agent)
{
	if (agent->fd >= 0)
		sandbox_budget_give(d, SANDBOX_AGENT_CONN_BYTES);
	agent_close(agent);
}

/* ---- the HTTP edge's share ----------------------------------------------- */

const unsigned daemon_counted_codes[HTTP_CODES] = { 200, 201, 204, 400, 401,
						    404, 405, 409, 411, 413,
						    429, 500, 503 };

void daemon_count_status(struct daemon *d, unsigned status)
{
	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < HTTP_CODES; i++)
		if (daemon_counted_codes[i] == status)
			d->http_count[i]++;
	pthread_mutex_unlock(&d->lock);
}

/* The engine's callbacks, on the daemon's budget and counters. */
static bool take_budget(void *d, uint64_t bytes)
{
	return sandbox_budget_take(d, bytes);
}

static void give_budget(void *d, uint64_t bytes)
{
	sandbox_budget_give(d, bytes);
}

static void budget_spent(void *d, char *err, size_t errlen)
{
	sandbox_budget_spent(d, err, errlen);
}

static void count_status(void *d, unsigned status)
{
	daemon_count_status(d, status);
}

void daemon_http_params(struct daemon *d, struct http_params *params)
{
	*params = (struct http_params){
		.max_connections = d->cfg.max_connections,
		.max_connections_per_uid = d->cfg.max_connections_per_uid,
		.header_timeout_s = d->cfg.header_timeout_s,
		.idle_timeout_s = d->cfg.idle_timeout_s,
		.max_request_bytes = d->cfg.max_request_bytes,
		.owner = d,
		.budget_take = take_budget,
		.budget_give = give_budget,
		.budget_spent = budget_spent,
		.count_status = count_status,
	};
}
