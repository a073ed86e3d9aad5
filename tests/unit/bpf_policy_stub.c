// SPDX-License-Identifier: Apache-2.0
/*
 * bpf_policy_stub.c - TEMPORARY: bpf/policy.h's loader until branch `bpf`
 * is merged; attaches nothing.  Remove with that merge.
 */
#include "policy.h"

#include <stdlib.h>

struct bpf_policy {
	int unused;
};

int bpf_policy_attach(struct bpf_policy **out, int tap_ifindex,
		      int veth_ifindex, const struct net_addrs *addrs,
		      const struct net_policy *policy, char *err, size_t errlen)
{
	(void)tap_ifindex, (void)veth_ifindex, (void)addrs, (void)policy,
		(void)err, (void)errlen;
	*out = calloc(1, sizeof(**out));
	return 0;
}

int bpf_policy_update(struct bpf_policy *p, const struct net_policy *policy,
		      char *err, size_t errlen)
{
	(void)p, (void)policy, (void)err, (void)errlen;
	return 0;
}

int bpf_policy_counters(struct bpf_policy *p, struct net_counters *out,
			char *err, size_t errlen)
{
	(void)p, (void)out, (void)err, (void)errlen;
	return 0;
}

void bpf_policy_destroy(struct bpf_policy *p)
{
	free(p);
}
