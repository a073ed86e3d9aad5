// SPDX-License-Identifier: Apache-2.0
/*
 * api_agent.c - an HTTP request that waits on a sandbox's guest: its
 * connection's silence allowed as long as the guest may take, and the
 * client's socket, which the service core's agent sessions
 * (sandbox_sessions.c) watch for a hang-up.
 */
#include <errno.h>
#include <stdio.h>

#include "pool/daemon/api_internal.h"
#include "common/clock.h"

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
	api_guest_paced(conn, d, monotonic_ns() + sandbox_guest_patience_ns(d));
}

int api_client_fd(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return info ? info->connect_fd : -1;
}
