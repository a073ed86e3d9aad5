// SPDX-License-Identifier: Apache-2.0
/*
 * netns_stub.c - TEMPORARY, branch netapi only: the two calls of
 * pool/host/netns.h that the daemon's API makes (policy updates, counters),
 * so that thaw_daemon links before helper netns's pool/host/netns.c is
 * merged.  pool/daemon/CMakeLists.txt links it only while netns.c does not
 * exist; delete this file at that merge.  No sandbox has a network without
 * netns.c (sandbox.net stays NULL), so the daemon never calls these; a
 * unit test that does gets a failure.
 */
#include <stdio.h>

#include "netns.h"

int sandbox_net_set_policy(struct sandbox_net *net,
			   const struct net_policy *policy, char *err,
			   size_t errlen)
{
	(void)net;
	(void)policy;
	snprintf(err, errlen, "no network support (netns.c not built)");
	return -1;
}

int sandbox_net_counters(struct sandbox_net *net, struct net_counters *out,
			 char *err, size_t errlen)
{
	(void)net;
	(void)out;
	snprintf(err, errlen, "no network support (netns.c not built)");
	return -1;
}
