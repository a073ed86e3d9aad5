// SPDX-License-Identifier: Apache-2.0
/*
 * policy.bpf.c - a sandbox's egress policy and 1:1 NAT (policy.h), as two
 * TC programs in the sandbox's namespace:
 *   tap_ingress  on tap0's ingress: every frame the guest sends;
 *   veth_ingress on veth0's ingress: every frame coming from the host.
 *
 * Headers are read with bpf_skb_load_bytes (GSO packets from the TAP may
 * be non-linear) and checked against both the frame and the IP total
 * length; anything short, inconsistent or not parsed is dropped as
 * NET_DROP_MALFORMED, never passed.  That includes, on purpose:
 *   - IP options (ihl > 5): nothing in a sandbox needs them, and source
 *     routing options would let a packet go elsewhere than its daddr;
 *   - fragments (MF or an offset): later fragments carry no L4 header, so
 *     the ports DNS and the flow map decide on are hidden, and a stateless
 *     filter cannot tie them to their first.  The guest sends TCP with DF
 *     (path MTU discovery) and its MTU is the path's, so only oversized
 *     UDP is lost.
 * IP protocols other than TCP, UDP and ICMP are dropped by rule 1
 * (NET_DROP_ALWAYS): their checksums could not be kept right by the NAT.
 * So is a guest packet whose source is not the guest's address (spoofing)
 * or whose Ethernet destination is a group address.
 *
 * The NAT rewrites the guest's address to host_address on the way out and
 * back on the way in, and DNS to the gateway to dns_server and back (the
 * flow map tells a redirected query's answer from one to a query the
 * guest sent dns_server itself); ICMP errors get the same rewrite in the
 * header they quote, so path MTU discovery works through the NAT.
 *
 * ARP is the one non-IPv4 protocol that passes, uncounted: from the guest
 * only between it and its gateway (the TAP answers it), from the host only
 * between host_peer and host_address.
 *
 * Counters: tap_ingress counts its decisions by rule; veth_ingress counts
 * DNS replies as NET_PASS_DNS, everything else it passes (replies to the
 * guest's connections, connections the host opens) as NET_PASS_INBOUND,
 * and what it drops as NET_DROP_ALWAYS (not to host_address, or from a
 * martian source) or NET_DROP_MALFORMED.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/pkt_cls.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <stdbool.h>
#include <stddef.h>

#include <bpf/bpf_endian.h>
#include <bpf/bpf_helpers.h>

#include "common/guest_net.h"
#include "bpf/policy_abi.h"

/* No GPL-only helper is used. */
char LICENSE[] SEC("license") = "Apache-2.0";

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__uint(max_entries,
	       2 * 64); /* two generations of NET_POLICY_MAX_CIDRS */
	__type(key, struct policy_lpm_key);
	__type(value, __u8);
} allow_out SEC(".maps"), deny_out SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct policy_config);
} config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, POLICY_HOST_ADDRS);
	__type(key, __u32); /* host order */
	__type(value, __u8);
} host_addrs SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, POLICY_FLOWS);
	__type(key, struct policy_flow_key);
	__type(value, __u64); /* its last packet, bpf_ktime_get_ns */
} flows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, NET_VERDICTS);
	__type(key, __u32);
	__type(value, struct policy_count);
} counters SEC(".maps");

/* A parsed IPv4 packet: addresses and ports in network order. */
struct pkt {
	__u32 saddr, daddr;
	__u32 l4_off;
	__u32 l4_len;	    /* the IP payload's length */
	__u16 sport, dport; /* ICMP echo: the identifier in both */
	__u8 proto;
	__u8 icmp_type;
	__u8 syn;	 /* TCP: a connection's first packet (SYN, no ACK) */
	__u8 group_dest; /* Ethernet destination is multicast/broadcast */
};

#define IP_OFF ETH_HLEN
#define IP_CSUM_OFF (IP_OFF + offsetof(struct iphdr, check))
#define IP_SADDR_OFF (IP_OFF + offsetof(struct iphdr, saddr))
#define IP_DADDR_OFF (IP_OFF + offsetof(struct iphdr, daddr))
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define DNS_PORT 53
#define PARSED (-1)

/* linux/icmp.h and linux/if_arp.h include libc's socket headers, which
 * the BPF target lacks: the two headers the programs read. */
struct icmp_head {
	__u8 type;
	__u8 code;
	__u16 checksum;
	__u16 id; /* echo */
	__u16 sequence;
};
#define ICMP_ECHOREPLY 0
#define ICMP_ECHO 8
#define ICMP_DEST_UNREACH 3
#define ICMP_TIME_EXCEEDED 11
#define ICMP_PARAMETERPROB 12

struct arp_ipv4 {
	__u16 hrd;
	__u16 pro;
	__u8 hln;
	__u8 pln;
	__u16 op;
	__u8 sha[ETH_ALEN];
	__u32 spa;
	__u8 tha[ETH_ALEN];
	__u32 tpa;
} __attribute__((packed));
#define ARPHRD_ETHER 1
#define ARPOP_REQUEST 1
#define ARPOP_REPLY 2

static __always_inline int count(struct __sk_buff *skb, int verdict)
{
	__u32 key = verdict;
	struct policy_count *c = bpf_map_lookup_elem(&counters, &key);

	if (c) { /* per-CPU: no other writer */
		c->packets++;
		c->bytes += skb->len;
	}
	return verdict < NET_DROP_ALWAYS ? TC_ACT_OK : TC_ACT_SHOT;
}

/* ARP for IPv4 over Ethernet between @a and @b (either way round, network
 * order); NET_DROP_* otherwise. */
static __always_inline int check_arp(struct __sk_buff *skb, __u32 a, __u32 b)
{
	struct arp_ipv4 arp;

	if (bpf_skb_load_bytes(skb, ETH_HLEN, &arp, sizeof(arp)))
		return NET_DROP_MALFORMED;
	if (arp.hrd != bpf_htons(ARPHRD_ETHER) ||
	    arp.pro != bpf_htons(ETH_P_IP) || arp.hln != ETH_ALEN ||
	    arp.pln != 4)
		return NET_DROP_ALWAYS;
	if (arp.op != bpf_htons(ARPOP_REQUEST) &&
	    arp.op != bpf_htons(ARPOP_REPLY))
		return NET_DROP_ALWAYS;
	if ((arp.spa == a && arp.tpa == b) || (arp.spa == b && arp.tpa == a))
		return PARSED;
	return NET_DROP_ALWAYS;
}

/* Ethernet + IPv4 + TCP/UDP/ICMP header checks into @p: PARSED, or the
 * NET_DROP_* verdict. */
static __always_inline int parse(struct __sk_buff *skb, struct pkt *p)
{
	struct ethhdr eth;
	struct iphdr ip;
	__u32 len = skb->len, tot, room;

	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)))
		return NET_DROP_MALFORMED;
	if (eth.h_proto != bpf_htons(ETH_P_IP))
		return NET_DROP_ALWAYS;
	p->group_dest = eth.h_dest[0] & 1;
	if (bpf_skb_load_bytes(skb, IP_OFF, &ip, sizeof(ip)))
		return NET_DROP_MALFORMED;
	tot = bpf_ntohs(ip.tot_len);
	if (ip.version != 4 || ip.ihl < 5 || tot < ip.ihl * 4u ||
	    tot > len - ETH_HLEN)
		return NET_DROP_MALFORMED;
	if (ip.ihl != 5 || (ip.frag_off & bpf_htons(IP_MF | IP_OFFSET)))
		return NET_DROP_MALFORMED; /* the header comment says why */
	p->saddr = ip.saddr;
	p->daddr = ip.daddr;
	p->proto = ip.protocol;
	p->l4_off = IP_OFF + sizeof(ip);
	room = tot - sizeof(ip);
	p->l4_len = room;
	p->icmp_type = 0;
	p->syn = 0;
	if (ip.protocol == IPPROTO_TCP) {
		struct tcphdr th;

		if (room < sizeof(th) ||
		    bpf_skb_load_bytes(skb, p->l4_off, &th, sizeof(th)))
			return NET_DROP_MALFORMED;
		if (th.doff < 5 || th.doff * 4u > room)
			return NET_DROP_MALFORMED;
		p->sport = th.source;
		p->dport = th.dest;
		p->syn = th.syn && !th.ack;
	} else if (ip.protocol == IPPROTO_UDP) {
		struct udphdr uh;
		__u32 ulen;

		if (room < sizeof(uh) ||
		    bpf_skb_load_bytes(skb, p->l4_off, &uh, sizeof(uh)))
			return NET_DROP_MALFORMED;
		ulen = bpf_ntohs(uh.len);
		if (ulen < sizeof(uh) || ulen > room)
			return NET_DROP_MALFORMED;
		p->sport = uh.source;
		p->dport = uh.dest;
	} else if (ip.protocol == IPPROTO_ICMP) {
		struct icmp_head ih;

		if (room < sizeof(ih) ||
		    bpf_skb_load_bytes(skb, p->l4_off, &ih, sizeof(ih)))
			return NET_DROP_MALFORMED;
		p->icmp_type = ih.type;
		p->sport = ih.id;
		p->dport = ih.id;
	} else {
		return NET_DROP_ALWAYS;
	}
	return PARSED;
}

/* Rewrites the IPv4 address at @field_off from @old to @new (network
 * order), keeping the IP and L4 checksums right: TCP and UDP checksums
 * cover the pseudo header (BPF_F_PSEUDO_HDR keeps a guest's
 * CHECKSUM_PARTIAL packets right too); a UDP checksum of 0 means none and
 * stays 0 (BPF_F_MARK_MANGLED_0).  0, or -1 (drop). */
static __always_inline int rewrite(struct __sk_buff *skb, struct pkt *p,
				   __u32 field_off, __u32 old, __u32 new)
{
	__u64 flags = BPF_F_PSEUDO_HDR | sizeof(new);

	if (p->proto == IPPROTO_TCP) {
		if (bpf_l4_csum_replace(
			    skb, p->l4_off + offsetof(struct tcphdr, check),
			    old, new, flags))
			return -1;
	} else if (p->proto == IPPROTO_UDP) {
		if (bpf_l4_csum_replace(
			    skb, p->l4_off + offsetof(struct udphdr, check),
			    old, new, flags | BPF_F_MARK_MANGLED_0))
			return -1;
	}
	if (bpf_l3_csum_replace(skb, IP_CSUM_OFF, old, new, sizeof(new)))
		return -1;
	return bpf_skb_store_bytes(skb, field_off, &new, sizeof(new), 0) ? -1
									 : 0;
}

/* @check, a ones' complement checksum over data holding @old, once @old
 * is @new (RFC 1624; any byte order, as long as all three share it). */
static __always_inline __u16 csum_update(__u16 check, __u32 old, __u32 new)
{
	__u32 sum = (__u16)~check;

	sum += (__u16)~old + (__u16) ~(old >> 16) + (__u16) new +
	       (__u16)(new >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* An ICMP error quotes the header of the packet it is about: the NAT
 * rewrites the quoted address at @field_off (an offset in struct iphdr)
 * from @old to @new as well, or the receiving stack cannot tie the error
 * to its socket (path MTU discovery depends on it).  The quoted header's
 * checksum and the ICMP checksum (no pseudo header) follow; the quoted L4
 * checksum is left, as receivers never check it.  0 (done, or nothing to
 * do), or -1: a quote too short to hold an IP header (drop). */
static __always_inline int rewrite_quoted(struct __sk_buff *skb, struct pkt *p,
					  __u32 field_off, __u32 old, __u32 new)
{
	__u32 quote = p->l4_off + sizeof(struct icmp_head);
	__u32 icmp_csum = p->l4_off + offsetof(struct icmp_head, checksum);
	__u32 check_off = quote + offsetof(struct iphdr, check);
	__u16 check, new_check;
	__u32 addr;

	if (p->proto != IPPROTO_ICMP || (p->icmp_type != ICMP_DEST_UNREACH &&
					 p->icmp_type != ICMP_TIME_EXCEEDED &&
					 p->icmp_type != ICMP_PARAMETERPROB))
		return 0;
	if (p->l4_len < sizeof(struct icmp_head) + sizeof(struct iphdr) ||
	    bpf_skb_load_bytes(skb, quote + field_off, &addr, sizeof(addr)) ||
	    bpf_skb_load_bytes(skb, check_off, &check, sizeof(check)))
		return -1;
	if (addr != old)
		return 0;
	new_check = csum_update(check, old, new);
	if (bpf_l4_csum_replace(skb, icmp_csum, old, new, sizeof(new)) ||
	    bpf_l4_csum_replace(skb, icmp_csum, check, new_check,
				sizeof(new_check)) ||
	    bpf_skb_store_bytes(skb, quote + field_off, &new, sizeof(new), 0) ||
	    bpf_skb_store_bytes(skb, check_off, &new_check, sizeof(new_check),
				0))
		return -1;
	return 0;
}

/* Rule 1's ranges (host order): 0/8, 127/8, 169.254/16, multicast and
 * 240/4 (reserved, the limited broadcast). */
static __always_inline bool martian(__u32 a)
{
	return (a >> 24) == 0 || (a >> 24) == 127 || (a >> 16) == 0xa9fe ||
	       a >= 0xe0000000;
}

/* Cloud platform endpoints outside 169.254/16 (host order): Azure's
 * WireServer and Alibaba Cloud's metadata service.  Rule 1 for where a
 * guest sends, not a martian() source: Azure's resolver answers from the
 * WireServer's address. */
static __always_inline bool cloud_endpoint(__u32 a)
{
	return a == 0xa83f8110u /* 168.63.129.16 */ ||
	       a == 0x646464c8u /* 100.100.100.200 */;
}

static __always_inline bool in_pool(const struct policy_config *c, __u32 a)
{
	return (a & c->pool_mask) == c->pool_addr;
}

static __always_inline bool private_range(__u32 a)
{
	return (a >> 24) == 10 || (a & 0xfff00000) == 0xac100000 ||
	       (a >> 16) == 0xc0a8 || (a & 0xffc00000) == 0x64400000;
}

static __always_inline bool in_list(void *trie, __u32 gen, __u32 addr)
{
	struct policy_lpm_key k = {
		.prefixlen = 64,
		.gen = bpf_htonl(gen),
		.addr = addr,
	};

	return bpf_map_lookup_elem(trie, &k) != NULL;
}

/* Whether flow @k is live; a live flow's packet keeps it so. */
static __always_inline bool has_flow(struct policy_flow_key *k,
				     const struct policy_config *c)
{
	__u64 *seen = bpf_map_lookup_elem(&flows, k);
	__u64 now = bpf_ktime_get_ns();

	if (!seen)
		return false;
	if (k->proto != IPPROTO_TCP &&
	    now - *seen > (__u64)c->datagram_idle_s * 1000000000ull)
		return false;
	*seen = now;
	return true;
}

static __always_inline void add_flow(struct policy_flow_key *k)
{
	__u64 now = bpf_ktime_get_ns();

	bpf_map_update_elem(&flows, k, &now, BPF_ANY);
}

/* A guest's DNS query to its gateway: to dns_server if DNS is on. */
static __always_inline int dns_query(struct __sk_buff *skb, struct pkt *p,
				     const struct policy_config *c, __u32 state)
{
	__u32 dns = bpf_htonl(c->dns_server);
	struct policy_flow_key k = {
		.remote = dns,
		.remote_port = bpf_htons(DNS_PORT),
		.local_port = p->sport,
		.proto = p->proto,
		.kind = POLICY_FLOW_DNS,
	};

	if (!c->dns_server)
		return NET_DROP_ALWAYS;
	if (!(state & POLICY_STATE_INTERNET) &&
	    !(c->flags & POLICY_FLAG_DNS_ALWAYS))
		return NET_DROP_NO_INTERNET;
	add_flow(&k);
	if (rewrite(skb, p, IP_DADDR_OFF, p->daddr, dns))
		return NET_DROP_MALFORMED;
	return NET_PASS_DNS;
}

/* Rules 1-5 for a parsed guest packet: the verdict. */
static __always_inline int decide(struct __sk_buff *skb, struct pkt *p,
				  const struct policy_config *c)
{
	__u32 state = *(volatile __u32 *)&c->state;
	__u32 gen = state & POLICY_STATE_GEN;
	__u32 d = bpf_ntohl(p->daddr);

	if (p->saddr != bpf_htonl(GUEST_NET_GUEST_ADDR) || p->group_dest)
		return NET_DROP_ALWAYS;
	if (d == GUEST_NET_GATEWAY_ADDR && p->dport == bpf_htons(DNS_PORT) &&
	    (p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP))
		return dns_query(skb, p, c, state);
	if (martian(d) || cloud_endpoint(d) || in_pool(c, d) ||
	    bpf_map_lookup_elem(&host_addrs, &d)) {
		struct policy_flow_key k = {
			.remote = p->daddr,
			.remote_port = p->dport,
			.local_port = p->sport,
			.proto = p->proto,
			.kind = POLICY_FLOW_INBOUND,
		};

		if (p->proto == IPPROTO_ICMP && p->icmp_type != ICMP_ECHOREPLY)
			return NET_DROP_ALWAYS;
		return has_flow(&k, c) ? NET_PASS_REPLY : NET_DROP_ALWAYS;
	}
	if (in_list(&allow_out, gen, p->daddr))
		return NET_PASS_ALLOW_OUT;
	if (in_list(&deny_out, gen, p->daddr))
		return NET_DROP_DENY_OUT;
	if (private_range(d))
		return NET_DROP_PRIVATE;
	return state & POLICY_STATE_INTERNET ? NET_PASS_INTERNET
					     : NET_DROP_NO_INTERNET;
}

/* What both programs do first: the Ethernet type, ARP (between @arp_a and
 * @arp_b, network order) and the IPv4 headers into @p.  PARSED, or the TC
 * action to return. */
static __always_inline int receive(struct __sk_buff *skb, struct pkt *p,
				   __u32 arp_a, __u32 arp_b)
{
	__u16 proto;
	int v;

	if (bpf_skb_load_bytes(skb, offsetof(struct ethhdr, h_proto), &proto,
			       sizeof(proto)))
		return count(skb, NET_DROP_MALFORMED);
	if (proto == bpf_htons(ETH_P_ARP)) {
		v = check_arp(skb, arp_a, arp_b);
		return v == PARSED ? TC_ACT_OK : count(skb, v);
	}
	v = parse(skb, p);
	return v == PARSED ? PARSED : count(skb, v);
}

SEC("tc")
int tap_ingress(struct __sk_buff *skb)
{
	__u32 zero = 0;
	const struct policy_config *c = bpf_map_lookup_elem(&config, &zero);
	struct pkt p;
	int v;

	if (!c)
		return TC_ACT_SHOT;
	v = receive(skb, &p, bpf_htonl(GUEST_NET_GUEST_ADDR),
		    bpf_htonl(GUEST_NET_GATEWAY_ADDR));
	if (v != PARSED)
		return v;
	v = decide(skb, &p, c);
	if (v >= NET_DROP_ALWAYS)
		return count(skb, v);
	/* NAT after the verdict: the world sees the sandbox's host address. */
	if (rewrite(skb, &p, IP_SADDR_OFF, p.saddr,
		    bpf_htonl(c->host_address)) ||
	    rewrite_quoted(skb, &p, offsetof(struct iphdr, daddr), p.saddr,
			   bpf_htonl(c->host_address)))
		return count(skb, NET_DROP_MALFORMED);
	return count(skb, v);
}

/* A source the sandbox must never see traffic from: rule 1's ranges and
 * the pool (other sandboxes, our own address), host_peer excepted. */
static __always_inline bool bad_source(const struct policy_config *c, __u32 s)
{
	return martian(s) || (in_pool(c, s) && s != c->host_peer);
}

SEC("tc")
int veth_ingress(struct __sk_buff *skb)
{
	__u32 zero = 0;
	const struct policy_config *c = bpf_map_lookup_elem(&config, &zero);
	struct policy_flow_key k = {};
	struct pkt p;
	__u32 s;
	int v;

	if (!c)
		return TC_ACT_SHOT;
	v = receive(skb, &p, bpf_htonl(c->host_peer),
		    bpf_htonl(c->host_address));
	if (v != PARSED)
		return v;
	s = bpf_ntohl(p.saddr);
	if (bpf_ntohl(p.daddr) != c->host_address || bad_source(c, s))
		return count(skb, NET_DROP_ALWAYS);

	k.remote = p.saddr;
	k.remote_port = p.sport;
	k.local_port = p.dport;
	k.proto = p.proto;
	v = NET_PASS_INBOUND;
	if (p.proto != IPPROTO_ICMP && s == c->dns_server &&
	    p.sport == bpf_htons(DNS_PORT)) {
		k.kind = POLICY_FLOW_DNS;
		if (has_flow(&k, c)) {
			/* The guest asked its gateway: the answer is its. */
			if (rewrite(skb, &p, IP_SADDR_OFF, p.saddr,
				    bpf_htonl(GUEST_NET_GATEWAY_ADDR)))
				return count(skb, NET_DROP_MALFORMED);
			v = NET_PASS_DNS;
		}
	}
	if (v == NET_PASS_INBOUND &&
	    (s == c->host_peer || bpf_map_lookup_elem(&host_addrs, &s))) {
		bool opens =
			p.proto == IPPROTO_UDP ||
			(p.proto == IPPROTO_TCP && p.syn) ||
			(p.proto == IPPROTO_ICMP && p.icmp_type == ICMP_ECHO);

		/* The host opens a connection: the guest may answer it
		 * although the host's addresses are in rule 1. */
		k.kind = POLICY_FLOW_INBOUND;
		if (opens)
			add_flow(&k);
	}
	if (rewrite(skb, &p, IP_DADDR_OFF, p.daddr,
		    bpf_htonl(GUEST_NET_GUEST_ADDR)) ||
	    rewrite_quoted(skb, &p, offsetof(struct iphdr, saddr), p.daddr,
			   bpf_htonl(GUEST_NET_GUEST_ADDR)))
		return count(skb, NET_DROP_MALFORMED);
	return count(skb, v);
}
