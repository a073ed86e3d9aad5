/* SPDX-License-Identifier: Apache-2.0 */
/*
 * policy_abi.h - what the eBPF programs (policy.bpf.c) and their loader
 * (policy.c) share: the verdicts the counters are indexed by, and the
 * maps' keys and values.  Included by both sides, so it uses the kernel's
 * uapi types only (the BPF target has no libc headers).
 *
 * The policy lives in two generations (GEN bit of policy_config.state);
 * a packet reads the state once and looks up only its generation's
 * entries, and an update fills the idle generation before it flips the
 * bit (policy.c says why that is atomic enough).
 */
#ifndef THAW_BPF_POLICY_ABI_H
#define THAW_BPF_POLICY_ABI_H

#include <linux/types.h>

/* Packets and bytes per decision (index of the counters). */
enum net_verdict {
	NET_PASS_ALLOW_OUT,
	NET_PASS_INTERNET,
	NET_PASS_REPLY, /* answers a connection the host opened */
	NET_PASS_DNS,
	NET_PASS_INBOUND, /* host -> sandbox */
	NET_DROP_ALWAYS,  /* rule 1 */
	NET_DROP_DENY_OUT,
	NET_DROP_PRIVATE,
	NET_DROP_NO_INTERNET,
	NET_DROP_MALFORMED,
	NET_VERDICTS
};

/* allow_out and deny_out: an LPM trie each.  The generation is the first
 * 32 bits of the key's data, so an entry's prefixlen is 32 + the CIDR's
 * and a lookup's 64.  gen and addr are in network order. */
struct policy_lpm_key {
	__u32 prefixlen;
	__u32 gen;
	__u32 addr;
};

#define POLICY_STATE_GEN 1u	 /* which generation of allow/deny is live */
#define POLICY_STATE_INTERNET 2u /* allow_internet of that generation */
#define POLICY_FLAG_DNS_ALWAYS 1u

/* The config array's one element.  Addresses in host order. */
struct policy_config {
	__u32 host_address;
	__u32 host_peer;
	__u32 pool_addr;
	__u32 pool_mask;
	__u32 dns_server; /* 0: no DNS */
	__u32 flags;	  /* POLICY_FLAG_* */
	/* POLICY_STATE_*: the one word an update changes, and only in its
	 * lowest byte, so no packet reads it half written. */
	__u32 state;
	/* A UDP or ICMP flow ends this long after its last packet. */
	__u32 datagram_idle_s;
};

/* The flow map: connections the host opened to the sandbox (recorded at
 * veth ingress) and the guest's DNS queries redirected to dns_server
 * (recorded at tap ingress), both keyed as the packet from the world
 * side carries them.  remote and the ports in network order; ICMP echo
 * uses its identifier as both ports.  The value is the flow's last
 * packet, either way (bpf_ktime_get_ns): UDP and ICMP have no end a
 * packet shows, so their flows end datagram_idle_s after it, as
 * conntrack's do; TCP flows last until the LRU drops them. */
enum policy_flow_kind {
	POLICY_FLOW_INBOUND = 1,
	POLICY_FLOW_DNS = 2,
};

struct policy_flow_key {
	__u32 remote;
	__u16 remote_port;
	__u16 local_port;
	__u8 proto;
	__u8 kind; /* enum policy_flow_kind */
	__u8 pad[2];
};

struct policy_count {
	__u64 packets;
	__u64 bytes;
};

#define POLICY_FLOWS 1024
/* conntrack's nf_conntrack_udp_timeout_stream. */
#define POLICY_DATAGRAM_IDLE_S 120

/* The host_addrs map: the host's own addresses and its subnets' broadcast
 * addresses, the pool's left out (rule 1 has the pool whole). */
#define POLICY_HOST_ADDRS 256

#endif
