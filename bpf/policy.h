/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy.h - a sandbox's egress policy, enforced by eBPF (policy.bpf.c).
 *
 * Two TC programs run inside the sandbox's network namespace: one on the
 * TAP's ingress (every packet the guest sends) and one on the namespace's
 * veth ingress (every packet coming to the sandbox from the host).  Besides
 * the policy they do the sandbox's 1:1 NAT, stateless because the mapping
 * is fixed: the guest's address (guest_net.h) <-> the sandbox's host
 * address, the address the host reaches it at.  Decisions, first match
 * wins, for a packet from the guest:
 *   1. dropped whatever the policy says: not IPv4 (ARP to the gateway
 *      excepted), 169.254.0.0/16 (metadata, link-local; DNS to the gateway
 *      excepted, below), 127.0.0.0/8, the host's own addresses, the
 *      daemon's address pool (other sandboxes), 0.0.0.0/8, multicast and
 *      240.0.0.0/4 (reserved, the broadcast address), group MACs,
 *      a source other than the guest's address, IP protocols other than
 *      TCP, UDP and ICMP, and (NET_DROP_MALFORMED) malformed or truncated
 *      headers, IP options and fragments (policy.bpf.c says why) --
 *      unless it answers a connection the host opened to the sandbox's
 *      host address (a flow map);
 *   2. allow_out: passed;  3. deny_out: dropped;
 *   4. private ranges (10/8, 172.16/12, 192.168/16, 100.64/10): dropped;
 *   5. the rest: passed if allow_internet.
 * DNS to the gateway (UDP/TCP 53) goes to dns_server, and only if
 * allow_internet or dns_always.
 * From the host, only packets to host_address pass (NET_PASS_INBOUND),
 * and none from rule 1's ranges or the pool but host_peer; ARP between
 * host_peer and host_address passes uncounted.
 *
 * Each sandbox has its own copy of the programs and maps: a policy change
 * is map writes only, and takes effect for the next packet.
 * Addresses are in host byte order.
 */
#ifndef THAW_BPF_POLICY_H
#define THAW_BPF_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/policy_abi.h"

#define NET_POLICY_MAX_CIDRS 64
#define NET_MAX_HOST_ADDRS POLICY_HOST_ADDRS

struct net_cidr {
	uint32_t addr;	/* host order, bits past prefix zero */
	uint8_t prefix; /* 0..32 */
};

/* What a client may set (POST /sandboxes "network"). */
struct net_policy {
	bool allow_internet;
	uint32_t n_allow, n_deny;
	struct net_cidr allow_out[NET_POLICY_MAX_CIDRS];
	struct net_cidr deny_out[NET_POLICY_MAX_CIDRS];
};

/* What the daemon fixes for a sandbox. */
struct net_addrs {
	uint32_t host_address; /* the sandbox's, namespace end of its veth */
	uint32_t host_peer;    /* the host's end of that veth */
	struct net_cidr pool;  /* every sandbox's addresses (network_cidr) */
	uint32_t dns_server;   /* 0: no DNS */
	bool dns_always;       /* DNS even without allow_internet */
	/* How long a UDP or ICMP flow outlives its last packet; 0:
	 * POLICY_DATAGRAM_IDLE_S. */
	uint32_t datagram_idle_s;
	uint32_t n_host_addrs;
	uint32_t host_addrs[NET_MAX_HOST_ADDRS]; /* the host's own */
};

/* Packets and bytes per decision: enum net_verdict, in policy_abi.h. */
struct net_counters {
	uint64_t packets[NET_VERDICTS];
	uint64_t bytes[NET_VERDICTS];
};

struct bpf_policy;

/*
 * Loads the programs and maps, fills them, and attaches them (TC clsact
 * ingress) to the interfaces @tap_ifindex and @veth_ifindex of the calling
 * thread's network namespace.  0, or -errno with @err.
 */
int bpf_policy_attach(struct bpf_policy **out, int tap_ifindex,
		      int veth_ifindex, const struct net_addrs *addrs,
		      const struct net_policy *policy, char *err,
		      size_t errlen);
/* Replaces the policy: map writes only.  0, or -errno with @err. */
int bpf_policy_update(struct bpf_policy *p, const struct net_policy *policy,
		      char *err, size_t errlen);
/* Sums the per-CPU counters into @out.  0, or -errno with @err. */
int bpf_policy_counters(struct bpf_policy *p, struct net_counters *out,
			char *err, size_t errlen);
/* Releases our references; the programs stay attached until the
 * namespace's interfaces go. */
void bpf_policy_destroy(struct bpf_policy *p);

/* "A.B.C.D/N" (or "A.B.C.D" = /32) -> @out; 0, or -EINVAL with @err naming
 * @text.  Host bits set are an error. */
int net_cidr_parse(const char *text, struct net_cidr *out, char *err,
		   size_t errlen);

/* Whether @net holds address @a (host order). */
bool net_cidr_contains(struct net_cidr net, uint32_t a);

#endif
