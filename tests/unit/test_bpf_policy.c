// SPDX-License-Identifier: Apache-2.0
/*
 * test_bpf_policy.c - bpf/policy.bpf.c and its loader on this machine's
 * kernel.  Each test runs in its own criterion worker, which moves into a
 * network namespace of its own (gone with the worker) and makes a veth
 * pair there for bpf_policy_attach; the programs are then found through
 * their TC filters (bpf_tc_query, the public API only) and driven with
 * BPF_PROG_TEST_RUN on frames built here.  Checksums of rewritten packets
 * are recomputed here from scratch, not by the helpers under test.
 * The attach test makes a real tap0 and veth0 and checks that nothing of
 * the policy outlives the interfaces.  Needs root; skips without.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_packet.h>
#include <linux/if_tun.h>
#include <linux/virtio_net.h>
#include <poll.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/ip_icmp.h>
#include <netinet/tcp.h>
#include <netinet/udp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/pkt_cls.h>

#include "common/guest_net.h"
#include "bpf/policy.h"

#define A(a, b, c, d) ((uint32_t)(a) << 24 | (b) << 16 | (c) << 8 | (d))
#define HOST_PEER A(10, 200, 0, 5)
#define HOST_ADDRESS A(10, 200, 0, 6)
#define DNS_SERVER A(192, 0, 2, 53)
#define HOST_OWN A(192, 168, 1, 10)
#define PUBLIC A(198, 51, 100, 10)
#define GUEST GUEST_NET_GUEST_ADDR
#define GATEWAY GUEST_NET_GATEWAY_ADDR

static struct bpf_policy *pol;
static struct net_addrs addrs;
static struct net_policy policy;
static int tap_prog, veth_prog;
static char err[512];

static void sh(const char *cmd)
{
	cr_assert_eq(system(cmd), 0, "%s failed", cmd);
}

/* The program attached to @ifname's ingress, as an fd. */
static int attached_prog(const char *ifname)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook,
			    .ifindex = (int)if_nametoindex(ifname),
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1, .priority = 1);
	int fd;

	cr_assert_eq(bpf_tc_query(&hook, &opts), 0, "no filter on %s", ifname);
	fd = bpf_prog_get_fd_by_id(opts.prog_id);
	cr_assert_geq(fd, 0, "prog id %u: %s", opts.prog_id, strerror(errno));
	return fd;
}

static void own_netns(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root: network namespaces and BPF");
	cr_assert_eq(unshare(CLONE_NEWNET), 0, "unshare: %s", strerror(errno));
}

static void default_addrs(void)
{
	memset(&addrs, 0, sizeof(addrs));
	addrs.host_address = HOST_ADDRESS;
	addrs.host_peer = HOST_PEER;
	addrs.pool = (struct net_cidr){ A(10, 200, 0, 0), 16 };
	addrs.dns_server = DNS_SERVER;
	addrs.n_host_addrs = 2;
	addrs.host_addrs[0] = HOST_OWN;
	addrs.host_addrs[1] = A(203, 0, 113, 1);
	memset(&policy, 0, sizeof(policy));
	policy.allow_internet = true;
}

/* Attaches the policy in @addrs/@policy to a veth pair: "tp" stands for
 * tap0, "vt" for veth0. */
static void load(void)
{
	sh("ip link add tp type veth peer name vt");
	cr_assert_eq(bpf_policy_attach(&pol, (int)if_nametoindex("tp"),
				       (int)if_nametoindex("vt"), &addrs,
				       &policy, err, sizeof(err)),
		     0, "%s", err);
	tap_prog = attached_prog("tp");
	veth_prog = attached_prog("vt");
}

static void setup(void)
{
	own_netns();
	default_addrs();
	load();
}

static void teardown(void)
{
	bpf_policy_destroy(pol);
	pol = NULL;
}

static void update(void)
{
	cr_assert_eq(bpf_policy_update(pol, &policy, err, sizeof(err)), 0, "%s",
		     err);
}

static void add(struct net_cidr *list, uint32_t *n, const char *cidr)
{
	cr_assert_eq(net_cidr_parse(cidr, &list[(*n)++], err, sizeof(err)), 0,
		     "%s", err);
}

/* --- frames ----------------------------------------------------------- */

struct frame {
	_Alignas(4) uint8_t pad[2]; /* the IP header 4-byte aligned */
	uint8_t b[256];
	uint32_t len;
};

static uint32_t sum16(const void *p, size_t n, uint32_t s)
{
	const uint8_t *b = p;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)b[i] << 8 | b[i + 1];
	if (n & 1)
		s += (uint32_t)b[n - 1] << 8;
	return s;
}

static uint16_t fold(uint32_t s)
{
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

static struct iphdr *ip_of(struct frame *f)
{
	return (struct iphdr *)(f->b + ETH_HLEN);
}

static uint8_t *l4_of(struct frame *f)
{
	return f->b + ETH_HLEN + sizeof(struct iphdr);
}

/* The L4 checksum over the pseudo header and segment (0 when right). */
static uint16_t l4_sum(struct frame *f)
{
	struct iphdr *ip = ip_of(f);
	uint32_t l4len = ntohs(ip->tot_len) - sizeof(*ip);
	uint32_t s = sum16(&ip->saddr, 8, 0);

	s += ip->protocol + l4len;
	return fold(sum16(l4_of(f), l4len, s));
}

static void fix_sums(struct frame *f)
{
	struct iphdr *ip = ip_of(f);
	uint8_t *l4 = l4_of(f);

	ip->check = 0;
	ip->check = htons(fold(sum16(ip, sizeof(*ip), 0)));
	if (ip->protocol == IPPROTO_TCP) {
		((struct tcphdr *)l4)->check = 0;
		((struct tcphdr *)l4)->check = htons(l4_sum(f));
	} else if (ip->protocol == IPPROTO_UDP) {
		((struct udphdr *)l4)->check = 0;
		((struct udphdr *)l4)->check = htons(l4_sum(f));
	} else if (ip->protocol == IPPROTO_ICMP) {
		uint32_t n = ntohs(ip->tot_len) - sizeof(*ip);

		((struct icmphdr *)l4)->checksum = 0;
		((struct icmphdr *)l4)->checksum = htons(fold(sum16(l4, n, 0)));
	}
}

/* TCP (@flags), UDP or ICMP (@flags: the type) from @src:@sport to
 * @dst:@dport with 10 bytes of payload, checksums right. */
static struct frame pkt(uint8_t proto, uint32_t src, uint16_t sport,
			uint32_t dst, uint16_t dport, uint8_t flags)
{
	static const uint8_t tap_mac[] = GUEST_NET_TAP_MAC;
	static const uint8_t guest_mac[] = GUEST_NET_GUEST_MAC;
	struct frame f = { .len = 0 };
	struct ether_header *eth = (struct ether_header *)f.b;
	struct iphdr *ip = ip_of(&f);
	uint8_t *l4 = l4_of(&f);
	uint32_t l4len;

	memcpy(eth->ether_dhost, tap_mac, ETH_ALEN);
	memcpy(eth->ether_shost, guest_mac, ETH_ALEN);
	eth->ether_type = htons(ETHERTYPE_IP);
	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = (struct tcphdr *)l4;

		th->source = htons(sport);
		th->dest = htons(dport);
		th->doff = 5;
		th->th_flags = flags;
		th->window = htons(1000);
		l4len = sizeof(*th);
	} else if (proto == IPPROTO_UDP) {
		struct udphdr *uh = (struct udphdr *)l4;

		uh->source = htons(sport);
		uh->dest = htons(dport);
		uh->len = htons(sizeof(*uh) + 10);
		l4len = sizeof(*uh);
	} else {
		struct icmphdr *ih = (struct icmphdr *)l4;

		ih->type = flags;
		ih->un.echo.id = htons(sport);
		ih->un.echo.sequence = htons(1);
		l4len = sizeof(*ih);
	}
	memset(l4 + l4len, 'x', 10);
	l4len += 10;
	ip->version = 4;
	ip->ihl = 5;
	ip->ttl = 64;
	ip->protocol = proto;
	ip->saddr = htonl(src);
	ip->daddr = htonl(dst);
	ip->tot_len = htons(sizeof(*ip) + l4len);
	f.len = ETH_HLEN + sizeof(*ip) + l4len;
	fix_sums(&f);
	return f;
}

static struct frame out_tcp(uint32_t dst, uint16_t dport)
{
	return pkt(IPPROTO_TCP, GUEST, 40000, dst, dport, TH_SYN);
}

static struct frame arp(uint16_t op, uint32_t spa, uint32_t tpa)
{
	struct frame f = { .len = ETH_HLEN + 28 };
	uint8_t *a = f.b + ETH_HLEN;

	memset(f.b, 0xff, ETH_ALEN);
	f.b[12] = 0x08;
	f.b[13] = 0x06;
	a[1] = 1;    /* Ethernet */
	a[2] = 0x08; /* IPv4 */
	a[4] = 6;
	a[5] = 4;
	a[7] = (uint8_t)op;
	spa = htonl(spa);
	tpa = htonl(tpa);
	memcpy(a + 14, &spa, 4);
	memcpy(a + 24, &tpa, 4);
	return f;
}

/* Runs @prog on @f: TC_ACT_OK/TC_ACT_SHOT; the frame it let go in @f.
 * -1 when the kernel refused to run it (errno). */
static int run(int prog, struct frame *f)
{
	uint8_t out[sizeof(f->b) + 64];
	DECLARE_LIBBPF_OPTS(bpf_test_run_opts, o, .data_in = f->b,
			    .data_size_in = f->len, .data_out = out,
			    .data_size_out = sizeof(out), .repeat = 1);

	if (bpf_prog_test_run_opts(prog, &o))
		return -1;
	cr_assert_leq(o.data_size_out, sizeof(f->b));
	memcpy(f->b, out, o.data_size_out);
	f->len = o.data_size_out;
	return (int)o.retval;
}

static struct net_counters counters(void)
{
	struct net_counters c;

	cr_assert_eq(bpf_policy_counters(pol, &c, err, sizeof(err)), 0, "%s",
		     err);
	return c;
}

/* Runs @f through @prog and checks the verdict by the counter it moved. */
static int expect(int prog, struct frame *f, enum net_verdict v)
{
	struct net_counters before = counters(), after;
	uint32_t len = f->len;
	int r = run(prog, f);

	cr_assert_neq(r, -1, "test run of %u bytes: %s", len, strerror(errno));
	after = counters();
	for (int i = 0; i < NET_VERDICTS; i++) {
		uint64_t d = after.packets[i] - before.packets[i];

		cr_assert_eq(d, i == (int)v,
			     "verdict %d counted %lu times, "
			     "expected verdict %d",
			     i, (unsigned long)d, v);
		if (i == (int)v)
			cr_assert_eq(after.bytes[i] - before.bytes[i], len);
	}
	cr_assert_eq(r, v < NET_DROP_ALWAYS ? TC_ACT_OK : TC_ACT_SHOT,
		     "verdict %d returned %d", v, r);
	return r;
}

static void to(uint32_t dst, enum net_verdict v)
{
	struct frame f = out_tcp(dst, 80);

	expect(tap_prog, &f, v);
}

static void check_sums(struct frame *f)
{
	struct iphdr *ip = ip_of(f);

	cr_assert_eq(fold(sum16(ip, sizeof(*ip), 0)), 0, "IP checksum");
	if (ip->protocol != IPPROTO_ICMP)
		cr_assert_eq(l4_sum(f), 0, "L4 checksum of proto %u",
			     ip->protocol);
}

static void check_addrs(struct frame *f, uint32_t src, uint32_t dst)
{
	cr_assert_eq(ntohl(ip_of(f)->saddr), src, "saddr %#x, want %#x",
		     ntohl(ip_of(f)->saddr), src);
	cr_assert_eq(ntohl(ip_of(f)->daddr), dst, "daddr %#x, want %#x",
		     ntohl(ip_of(f)->daddr), dst);
	check_sums(f);
}

TestSuite(bpf_policy, .init = setup, .fini = teardown);

Test(bpf_policy, always_dropped_even_when_allowed)
{
	static const char *const listed[] = {
		"169.254.169.254", "169.254.0.0/16", "127.0.0.0/8",
		"10.200.0.0/16",   "192.168.1.10",   "224.0.0.0/4",
		"0.0.0.0/0",	   "203.0.113.1",
	};
	static const uint32_t dropped[] = {
		A(169, 254, 169, 254),
		A(169, 254, 0, 22),
		A(127, 0, 0, 1),
		A(0, 1, 2, 3),
		HOST_PEER,
		HOST_ADDRESS,
		A(10, 200, 7, 2),
		HOST_OWN,
		A(203, 0, 113, 1),
		A(224, 0, 0, 251),
		A(239, 1, 2, 3),
		A(255, 255, 255, 255),
		A(240, 0, 0, 1),
		A(168, 63, 129, 16),   /* Azure's WireServer */
		A(100, 100, 100, 200), /* Alibaba Cloud's metadata */
	};

	for (size_t i = 0; i < sizeof(listed) / sizeof(*listed); i++)
		add(policy.allow_out, &policy.n_allow, listed[i]);
	update();
	for (size_t i = 0; i < sizeof(dropped) / sizeof(*dropped); i++)
		to(dropped[i], NET_DROP_ALWAYS);
	to(PUBLIC, NET_PASS_ALLOW_OUT); /* 0.0.0.0/0 is listed */
}

static const struct {
	uint32_t addr;
	enum net_verdict v;
} order[] = {
	{ A(10, 1, 2, 3), NET_PASS_ALLOW_OUT },
	{ A(8, 8, 8, 8), NET_PASS_ALLOW_OUT },
	{ A(10, 2, 3, 4), NET_DROP_DENY_OUT },
	{ A(8, 8, 8, 9), NET_DROP_DENY_OUT },
	{ A(1, 1, 1, 1), NET_DROP_DENY_OUT },
	{ A(192, 168, 1, 1), NET_DROP_PRIVATE },
	{ A(172, 16, 0, 1), NET_DROP_PRIVATE },
	{ A(172, 31, 255, 1), NET_DROP_PRIVATE },
	{ A(100, 64, 0, 1), NET_DROP_PRIVATE },
	{ A(100, 127, 0, 1), NET_DROP_PRIVATE },
	{ A(172, 32, 0, 1), NET_PASS_INTERNET },
	{ A(100, 128, 0, 1), NET_PASS_INTERNET },
	{ A(9, 9, 9, 9), NET_PASS_INTERNET },
};

Test(bpf_policy, allow_beats_deny_beats_private)
{
	add(policy.allow_out, &policy.n_allow, "10.1.0.0/16");
	add(policy.allow_out, &policy.n_allow, "8.8.8.8");
	add(policy.deny_out, &policy.n_deny, "10.0.0.0/8");
	add(policy.deny_out, &policy.n_deny, "8.8.8.0/24");
	add(policy.deny_out, &policy.n_deny, "1.0.0.0/8");
	update();
	for (size_t i = 0; i < sizeof(order) / sizeof(*order); i++)
		to(order[i].addr, order[i].v);
}

Test(bpf_policy, allow_internet_off)
{
	policy.allow_internet = false;
	add(policy.allow_out, &policy.n_allow, "198.51.100.0/24");
	add(policy.allow_out, &policy.n_allow, "192.168.5.0/24");
	update();
	to(A(9, 9, 9, 9), NET_DROP_NO_INTERNET);
	to(A(10, 0, 0, 1), NET_DROP_PRIVATE);
	to(PUBLIC, NET_PASS_ALLOW_OUT);
	to(A(192, 168, 5, 1), NET_PASS_ALLOW_OUT);
	to(A(192, 168, 6, 1), NET_DROP_PRIVATE);
}

Test(bpf_policy, nat_out_and_in)
{
	static const uint8_t protos[] = { IPPROTO_TCP, IPPROTO_UDP,
					  IPPROTO_ICMP };

	for (size_t i = 0; i < sizeof(protos); i++) {
		uint8_t flags = protos[i] == IPPROTO_ICMP ? ICMP_ECHO : TH_SYN;
		struct frame f =
			pkt(protos[i], GUEST, 40000, PUBLIC, 443, flags);

		expect(tap_prog, &f, NET_PASS_INTERNET);
		check_addrs(&f, HOST_ADDRESS, PUBLIC);
		f = pkt(protos[i], PUBLIC, 443, HOST_ADDRESS, 40000,
			protos[i] == IPPROTO_ICMP ? ICMP_ECHOREPLY
						  : TH_SYN | TH_ACK);
		expect(veth_prog, &f, NET_PASS_INBOUND);
		check_addrs(&f, PUBLIC, GUEST);
	}
}

/* ICMP "fragmentation needed" from @src to @dst about a TCP packet
 * @qsrc -> @qdst it quotes (its header and 8 bytes). */
static struct frame icmp_error(uint32_t src, uint32_t dst, uint32_t qsrc,
			       uint32_t qdst)
{
	struct frame q = pkt(IPPROTO_TCP, qsrc, 40000, qdst, 443, TH_ACK);
	struct frame f = pkt(IPPROTO_ICMP, src, 0, dst, 0, ICMP_DEST_UNREACH);
	struct icmphdr *ih = (struct icmphdr *)l4_of(&f);
	uint32_t quote = sizeof(struct iphdr) + 8;

	ih->code = ICMP_FRAG_NEEDED;
	ih->un.frag.mtu = htons(1400);
	memcpy(l4_of(&f) + sizeof(*ih), ip_of(&q), quote);
	ip_of(&f)->tot_len = htons(sizeof(struct iphdr) + sizeof(*ih) + quote);
	f.len = ETH_HLEN + ntohs(ip_of(&f)->tot_len);
	fix_sums(&f);
	return f;
}

static struct iphdr *quoted(struct frame *f)
{
	return (struct iphdr *)(l4_of(f) + sizeof(struct icmphdr));
}

static void check_icmp_error(struct frame *f, uint32_t qsrc, uint32_t qdst)
{
	uint32_t n = ntohs(ip_of(f)->tot_len) - sizeof(struct iphdr);

	cr_assert_eq(fold(sum16(l4_of(f), n, 0)), 0, "ICMP checksum");
	cr_assert_eq(fold(sum16(quoted(f), sizeof(struct iphdr), 0)), 0,
		     "quoted IP checksum");
	cr_assert_eq(ntohl(quoted(f)->saddr), qsrc);
	cr_assert_eq(ntohl(quoted(f)->daddr), qdst);
}

/* ICMP errors carry the NAT into the header they quote: path MTU
 * discovery through the sandbox's address works both ways. */
Test(bpf_policy, icmp_errors_quote_the_translated_header)
{
	struct frame f = icmp_error(PUBLIC, HOST_ADDRESS, HOST_ADDRESS, PUBLIC);

	expect(veth_prog, &f, NET_PASS_INBOUND);
	check_addrs(&f, PUBLIC, GUEST);
	check_icmp_error(&f, GUEST, PUBLIC);
	f = icmp_error(GUEST, PUBLIC, PUBLIC, GUEST);
	expect(tap_prog, &f, NET_PASS_INTERNET);
	check_addrs(&f, HOST_ADDRESS, PUBLIC);
	check_icmp_error(&f, PUBLIC, HOST_ADDRESS);
	/* A quote about someone else is left alone. */
	f = icmp_error(PUBLIC, HOST_ADDRESS, A(1, 2, 3, 4), PUBLIC);
	expect(veth_prog, &f, NET_PASS_INBOUND);
	check_icmp_error(&f, A(1, 2, 3, 4), PUBLIC);
	/* An error too short to quote an IP header. */
	f = pkt(IPPROTO_ICMP, PUBLIC, 0, HOST_ADDRESS, 0, ICMP_DEST_UNREACH);
	expect(veth_prog, &f, NET_DROP_MALFORMED);
}

Test(bpf_policy, udp_without_checksum_keeps_none)
{
	struct frame f = pkt(IPPROTO_UDP, GUEST, 40000, PUBLIC, 443, 0);
	struct udphdr *uh = (struct udphdr *)l4_of(&f);

	uh->check = 0;
	expect(tap_prog, &f, NET_PASS_INTERNET);
	cr_assert_eq(((struct udphdr *)l4_of(&f))->check, 0);
	cr_assert_eq(ntohl(ip_of(&f)->saddr), HOST_ADDRESS);
	cr_assert_eq(fold(sum16(ip_of(&f), sizeof(struct iphdr), 0)), 0);
}

Test(bpf_policy, dns_redirect_both_ways)
{
	static const uint8_t protos[] = { IPPROTO_UDP, IPPROTO_TCP };

	for (size_t i = 0; i < sizeof(protos); i++) {
		struct frame f =
			pkt(protos[i], GUEST, 5353, GATEWAY, 53, TH_SYN);

		expect(tap_prog, &f, NET_PASS_DNS);
		check_addrs(&f, HOST_ADDRESS, DNS_SERVER);
		f = pkt(protos[i], DNS_SERVER, 53, HOST_ADDRESS, 5353,
			TH_SYN | TH_ACK);
		expect(veth_prog, &f, NET_PASS_DNS);
		check_addrs(&f, GATEWAY, GUEST);
	}
	/* An answer to no query through the gateway keeps its source. */
	struct frame f =
		pkt(IPPROTO_UDP, DNS_SERVER, 53, HOST_ADDRESS, 5354, 0);

	expect(veth_prog, &f, NET_PASS_INBOUND);
	check_addrs(&f, DNS_SERVER, GUEST);
	/* The gateway answers nothing but DNS. */
	f = pkt(IPPROTO_UDP, GUEST, 5353, GATEWAY, 54, 0);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	f = pkt(IPPROTO_ICMP, GUEST, 1, GATEWAY, 0, ICMP_ECHO);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
}

/* A new policy on new interfaces, for other net_addrs. */
static void reload(void)
{
	bpf_policy_destroy(pol);
	close(tap_prog);
	close(veth_prog);
	sh("ip link del tp");
	load();
}

/* A query through the gateway, and one straight to dns_server. */
static void dns_verdicts(enum net_verdict via_gateway, enum net_verdict direct)
{
	struct frame f = pkt(IPPROTO_UDP, GUEST, 5353, GATEWAY, 53, 0);

	expect(tap_prog, &f, via_gateway);
	f = pkt(IPPROTO_UDP, GUEST, 5353, DNS_SERVER, 53, 0);
	expect(tap_prog, &f, direct);
}

Test(bpf_policy, dns_needs_internet_or_dns_always)
{
	dns_verdicts(NET_PASS_DNS, NET_PASS_INTERNET);
	policy.allow_internet = false;
	update();
	dns_verdicts(NET_DROP_NO_INTERNET, NET_DROP_NO_INTERNET);
	addrs.dns_always = true;
	reload();
	dns_verdicts(NET_PASS_DNS, NET_DROP_NO_INTERNET);
	addrs.dns_server = 0;
	policy.allow_internet = true;
	reload();
	dns_verdicts(NET_DROP_ALWAYS, NET_PASS_INTERNET);
}

Test(bpf_policy, host_opened_connections_only)
{
	struct frame f;

	/* The host connects to the sandbox: the guest's answers pass. */
	f = pkt(IPPROTO_TCP, HOST_PEER, 5555, HOST_ADDRESS, 8080, TH_SYN);
	expect(veth_prog, &f, NET_PASS_INBOUND);
	check_addrs(&f, HOST_PEER, GUEST);
	f = pkt(IPPROTO_TCP, GUEST, 8080, HOST_PEER, 5555, TH_SYN | TH_ACK);
	expect(tap_prog, &f, NET_PASS_REPLY);
	check_addrs(&f, HOST_ADDRESS, HOST_PEER);
	/* ... from another port of the guest, or to another of the host's:
	 * no. */
	f = pkt(IPPROTO_TCP, GUEST, 8081, HOST_PEER, 5555, TH_ACK);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	f = pkt(IPPROTO_UDP, GUEST, 8080, HOST_PEER, 5555, 0);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	/* A packet of a connection the guest opened records nothing. */
	f = pkt(IPPROTO_TCP, HOST_PEER, 22, HOST_ADDRESS, 40000,
		TH_SYN | TH_ACK);
	expect(veth_prog, &f, NET_PASS_INBOUND);
	f = pkt(IPPROTO_TCP, GUEST, 40000, HOST_PEER, 22, TH_ACK);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	/* UDP and ping from the host's own addresses. */
	f = pkt(IPPROTO_UDP, HOST_OWN, 6000, HOST_ADDRESS, 7000, 0);
	expect(veth_prog, &f, NET_PASS_INBOUND);
	f = pkt(IPPROTO_UDP, GUEST, 7000, HOST_OWN, 6000, 0);
	expect(tap_prog, &f, NET_PASS_REPLY);
	check_addrs(&f, HOST_ADDRESS, HOST_OWN);
	f = pkt(IPPROTO_ICMP, HOST_PEER, 77, HOST_ADDRESS, 0, ICMP_ECHO);
	expect(veth_prog, &f, NET_PASS_INBOUND);
	f = pkt(IPPROTO_ICMP, GUEST, 77, HOST_PEER, 0, ICMP_ECHOREPLY);
	expect(tap_prog, &f, NET_PASS_REPLY);
	f = pkt(IPPROTO_ICMP, GUEST, 77, HOST_PEER, 0, ICMP_ECHO);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
}

/* A UDP or ICMP flow the host opened ends once it has been idle for
 * datagram_idle_s, either way; a packet keeps it open; TCP's does not end
 * by time. */
Test(bpf_policy, datagram_flows_end_when_idle)
{
	struct frame f;

	addrs.datagram_idle_s = 1;
	reload();
	f = pkt(IPPROTO_UDP, HOST_PEER, 6000, HOST_ADDRESS, 7000, 0);
	expect(veth_prog, &f, NET_PASS_INBOUND);
	f = pkt(IPPROTO_ICMP, HOST_PEER, 77, HOST_ADDRESS, 0, ICMP_ECHO);
	expect(veth_prog, &f, NET_PASS_INBOUND);
	f = pkt(IPPROTO_TCP, HOST_PEER, 5555, HOST_ADDRESS, 8080, TH_SYN);
	expect(veth_prog, &f, NET_PASS_INBOUND);
	for (int i = 0; i < 3; i++) {
		usleep(600 * 1000); /* 1.8 s in all, never 1 s idle */
		f = pkt(IPPROTO_UDP, GUEST, 7000, HOST_PEER, 6000, 0);
		expect(tap_prog, &f, NET_PASS_REPLY);
	}
	usleep(1300 * 1000);
	f = pkt(IPPROTO_UDP, GUEST, 7000, HOST_PEER, 6000, 0);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	f = pkt(IPPROTO_ICMP, GUEST, 77, HOST_PEER, 0, ICMP_ECHOREPLY);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	f = pkt(IPPROTO_TCP, GUEST, 8080, HOST_PEER, 5555, TH_ACK);
	expect(tap_prog, &f, NET_PASS_REPLY);
	/* The host's next datagram opens it again. */
	f = pkt(IPPROTO_UDP, HOST_PEER, 6000, HOST_ADDRESS, 7000, 0);
	expect(veth_prog, &f, NET_PASS_INBOUND);
	f = pkt(IPPROTO_UDP, GUEST, 7000, HOST_PEER, 6000, 0);
	expect(tap_prog, &f, NET_PASS_REPLY);
}

/* Nothing but the host's connections is recorded: a flood of the world's
 * packets cannot push them out of the flow map (an LRU). */
Test(bpf_policy, flows_only_from_the_host)
{
	struct frame f;

	f = pkt(IPPROTO_TCP, HOST_PEER, 5555, HOST_ADDRESS, 8080, TH_SYN);
	expect(veth_prog, &f, NET_PASS_INBOUND);
	for (uint32_t i = 0; i < 4 * POLICY_FLOWS; i++) {
		f = pkt(IPPROTO_UDP, PUBLIC, (uint16_t)(1024 + i), HOST_ADDRESS,
			7001, 0);
		cr_assert_eq(run(veth_prog, &f), TC_ACT_OK);
	}
	f = pkt(IPPROTO_TCP, GUEST, 8080, HOST_PEER, 5555, TH_SYN | TH_ACK);
	expect(tap_prog, &f, NET_PASS_REPLY);
}

Test(bpf_policy, inbound_only_to_host_address_from_sane_sources)
{
	static const uint32_t bad[] = {
		A(10, 200, 0, 9),      HOST_ADDRESS,	A(127, 0, 0, 1),
		A(169, 254, 169, 254), A(224, 0, 0, 1), A(0, 0, 0, 0),
	};
	struct frame f;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		f = pkt(IPPROTO_TCP, bad[i], 80, HOST_ADDRESS, 8080, TH_SYN);
		expect(veth_prog, &f, NET_DROP_ALWAYS);
	}
	f = pkt(IPPROTO_TCP, PUBLIC, 80, A(10, 200, 0, 10), 8080, TH_SYN);
	expect(veth_prog, &f, NET_DROP_ALWAYS);
	f = pkt(IPPROTO_TCP, PUBLIC, 80, GUEST, 8080, TH_SYN);
	expect(veth_prog, &f, NET_DROP_ALWAYS);
}

static const struct {
	bool tap; /* else veth */
	uint16_t op;
	uint32_t spa, tpa;
	bool passes;
} arps[] = {
	{ true, 1, GUEST, GATEWAY, true },
	{ true, 2, GUEST, GATEWAY, true },
	{ true, 1, GUEST, A(169, 254, 169, 254), false },
	{ true, 1, A(169, 254, 0, 20), GATEWAY, false },
	{ true, 3, GUEST, GATEWAY, false },
	{ false, 1, HOST_PEER, HOST_ADDRESS, true },
	{ false, 2, HOST_ADDRESS, HOST_PEER, true },
	{ false, 1, HOST_PEER, A(10, 200, 0, 10), false },
	{ false, 1, GUEST, GATEWAY, false },
};

Test(bpf_policy, not_ipv4_or_not_unicast)
{
	struct frame f = out_tcp(PUBLIC, 80);
	struct frame a;

	f.b[12] = 0x86; /* IPv6 */
	f.b[13] = 0xdd;
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	f.b[12] = 0x81; /* VLAN */
	f.b[13] = 0x00;
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	expect(veth_prog, &f, NET_DROP_ALWAYS);
	f = out_tcp(PUBLIC, 80);
	memset(f.b, 0xff, ETH_ALEN); /* broadcast MAC */
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	f = out_tcp(PUBLIC, 80);
	f.b[0] = 0x01; /* multicast MAC */
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	/* Not from the guest's address. */
	f = pkt(IPPROTO_TCP, A(169, 254, 0, 20), 1, PUBLIC, 80, TH_SYN);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	f = pkt(IPPROTO_TCP, HOST_ADDRESS, 1, PUBLIC, 80, TH_SYN);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	/* Other IP protocols (GRE). */
	f = out_tcp(PUBLIC, 80);
	ip_of(&f)->protocol = 47;
	fix_sums(&f);
	expect(tap_prog, &f, NET_DROP_ALWAYS);

	/* ARP: between the guest and its gateway, the host and the
	 * sandbox's address; nothing else. */
	for (size_t i = 0; i < sizeof(arps) / sizeof(*arps); i++) {
		int prog = arps[i].tap ? tap_prog : veth_prog;

		a = arp(arps[i].op, arps[i].spa, arps[i].tpa);
		if (arps[i].passes)
			cr_assert_eq(run(prog, &a), TC_ACT_OK, "arp %zu", i);
		else
			expect(prog, &a, NET_DROP_ALWAYS);
	}
	a = arp(1, GUEST, GATEWAY);
	a.b[ETH_HLEN + 1] = 6; /* IEEE 802 hardware */
	expect(tap_prog, &a, NET_DROP_ALWAYS);
}

/* Every cut of @whole, with the IP total length as it was (longer than
 * the frame) and as the cut (consistent, the L4 header short). */
static void truncations(int prog, const struct frame *whole, uint32_t l4_min)
{
	for (uint32_t len = 0; len < whole->len; len++) {
		struct frame f = *whole;

		f.len = len;
		if (len < ETH_HLEN + sizeof(struct iphdr)) {
			/* The kernel's test run refuses frames shorter than
			 * their Ethernet and IPv4 headers (EINVAL);
			 * short_frames_through_a_real_tap sends those.  If it
			 * runs one, it is dropped. */
			int r = run(prog, &f);

			if (r == -1)
				cr_assert_eq(errno, EINVAL, "%u bytes", len);
			else
				cr_assert_eq(r, TC_ACT_SHOT, "%u bytes", len);
			continue;
		}
		expect(prog, &f, NET_DROP_MALFORMED);
		if (len >= ETH_HLEN + sizeof(struct iphdr) &&
		    len < ETH_HLEN + sizeof(struct iphdr) + l4_min) {
			f = *whole;
			f.len = len;
			ip_of(&f)->tot_len = htons(len - ETH_HLEN);
			fix_sums(&f);
			expect(prog, &f, NET_DROP_MALFORMED);
		}
	}
}

Test(bpf_policy, truncated_at_every_length)
{
	struct frame f;

	f = out_tcp(PUBLIC, 80);
	truncations(tap_prog, &f, sizeof(struct tcphdr));
	f = pkt(IPPROTO_UDP, GUEST, 1, PUBLIC, 53, 0);
	truncations(tap_prog, &f, sizeof(struct udphdr));
	f = pkt(IPPROTO_UDP, GUEST, 1, GATEWAY, 53, 0);
	truncations(tap_prog, &f, sizeof(struct udphdr));
	f = pkt(IPPROTO_ICMP, GUEST, 1, PUBLIC, 0, ICMP_ECHO);
	truncations(tap_prog, &f, sizeof(struct icmphdr));
	f = pkt(IPPROTO_TCP, PUBLIC, 80, HOST_ADDRESS, 1, TH_ACK);
	truncations(veth_prog, &f, sizeof(struct tcphdr));
	f = pkt(IPPROTO_UDP, DNS_SERVER, 53, HOST_ADDRESS, 1, 0);
	truncations(veth_prog, &f, sizeof(struct udphdr));
	f = arp(1, GUEST, GATEWAY);
	for (uint32_t len = ETH_HLEN + 1; len < f.len; len++) {
		struct frame t = f;

		t.len = len;
		expect(tap_prog, &t, NET_DROP_MALFORMED);
	}
}

Test(bpf_policy, malformed_headers)
{
	struct frame f, w = out_tcp(PUBLIC, 80);

	f = w;
	ip_of(&f)->version = 6;
	expect(tap_prog, &f, NET_DROP_MALFORMED);
	f = w;
	ip_of(&f)->ihl = 4;
	expect(tap_prog, &f, NET_DROP_MALFORMED);
	f = w;
	ip_of(&f)->ihl = 6; /* options */
	fix_sums(&f);
	expect(tap_prog, &f, NET_DROP_MALFORMED);
	f = w;
	ip_of(&f)->tot_len = htons(10);
	expect(tap_prog, &f, NET_DROP_MALFORMED);
	f = w;
	ip_of(&f)->frag_off = htons(IP_MF);
	fix_sums(&f);
	expect(tap_prog, &f, NET_DROP_MALFORMED);
	f = w;
	ip_of(&f)->frag_off = htons(1);
	fix_sums(&f);
	expect(tap_prog, &f, NET_DROP_MALFORMED);
	expect(veth_prog, &f, NET_DROP_MALFORMED);
	f = w;
	((struct tcphdr *)l4_of(&f))->doff = 4;
	expect(tap_prog, &f, NET_DROP_MALFORMED);
	f = w;
	((struct tcphdr *)l4_of(&f))->doff = 15; /* past the packet */
	expect(tap_prog, &f, NET_DROP_MALFORMED);
	f = pkt(IPPROTO_UDP, GUEST, 1, PUBLIC, 53, 0);
	((struct udphdr *)l4_of(&f))->len = htons(7);
	expect(tap_prog, &f, NET_DROP_MALFORMED);
	((struct udphdr *)l4_of(&f))->len = htons(19);
	expect(tap_prog, &f, NET_DROP_MALFORMED);
	/* Ethernet padding past the IP total length is fine. */
	f = w;
	memset(f.b + f.len, 0, 10);
	f.len += 10;
	expect(tap_prog, &f, NET_PASS_INTERNET);
}

Test(bpf_policy, counters_count_packets_and_bytes)
{
	struct net_counters c;
	struct frame f;

	for (int i = 0; i < 3; i++) {
		f = out_tcp(PUBLIC, 80);
		cr_assert_eq(run(tap_prog, &f), TC_ACT_OK);
	}
	f = out_tcp(A(169, 254, 169, 254), 80);
	cr_assert_eq(run(tap_prog, &f), TC_ACT_SHOT);
	c = counters();
	cr_assert_eq(c.packets[NET_PASS_INTERNET], 3);
	cr_assert_eq(c.bytes[NET_PASS_INTERNET], 3 * f.len);
	cr_assert_eq(c.packets[NET_DROP_ALWAYS], 1);
	cr_assert_eq(c.bytes[NET_DROP_ALWAYS], f.len);
	for (int i = 0; i < NET_VERDICTS; i++)
		if (i != NET_PASS_INTERNET && i != NET_DROP_ALWAYS)
			cr_assert_eq(c.packets[i] + c.bytes[i], 0);
}

Test(bpf_policy, update_applies_to_the_next_packet)
{
	to(A(10, 9, 9, 9), NET_DROP_PRIVATE);
	to(PUBLIC, NET_PASS_INTERNET);
	add(policy.allow_out, &policy.n_allow, "10.9.0.0/16");
	add(policy.deny_out, &policy.n_deny, "198.51.100.0/24");
	update();
	to(A(10, 9, 9, 9), NET_PASS_ALLOW_OUT);
	to(PUBLIC, NET_DROP_DENY_OUT);
	/* Generations: what an update before the last one listed is gone. */
	memset(&policy, 0, sizeof(policy));
	add(policy.allow_out, &policy.n_allow, "1.2.3.0/24");
	update();
	to(A(10, 9, 9, 9), NET_DROP_PRIVATE);
	to(PUBLIC, NET_DROP_NO_INTERNET);
	to(A(1, 2, 3, 4), NET_PASS_ALLOW_OUT);
	policy.allow_internet = true;
	update();
	to(PUBLIC, NET_PASS_INTERNET);
	to(A(10, 9, 9, 9), NET_DROP_PRIVATE);
	/* Full lists, many times over, each one whole. */
	for (int round = 0; round < 6; round++) {
		memset(&policy, 0, sizeof(policy));
		policy.allow_internet = round & 1;
		for (uint32_t i = 0; i < NET_POLICY_MAX_CIDRS; i++) {
			policy.allow_out[i] =
				(struct net_cidr){ A(10, round, i, 0), 24 };
			policy.deny_out[i] =
				(struct net_cidr){ A(20 + round, i, 0, 0), 16 };
		}
		policy.n_allow = policy.n_deny = NET_POLICY_MAX_CIDRS;
		update();
		to(A(10, round, 63, 1), NET_PASS_ALLOW_OUT);
		to(A(20 + round, 63, 0, 1), NET_DROP_DENY_OUT);
		if (round)
			to(A(10, round - 1, 63, 1), NET_DROP_PRIVATE);
		to(A(9, 9, 9, 9),
		   round & 1 ? NET_PASS_INTERNET : NET_DROP_NO_INTERNET);
	}
}

Test(bpf_policy, bad_policies_refused)
{
	policy.n_allow = NET_POLICY_MAX_CIDRS + 1;
	cr_assert_eq(bpf_policy_update(pol, &policy, err, sizeof(err)), -E2BIG);
	cr_assert(strstr(err, "allow_out has 65 entries"), "%s", err);
	policy.n_allow = 0;
	policy.n_deny = 1;
	policy.deny_out[0] = (struct net_cidr){ A(10, 0, 0, 1), 8 };
	cr_assert_eq(bpf_policy_update(pol, &policy, err, sizeof(err)),
		     -EINVAL);
	cr_assert(strstr(err, "deny_out[0]"), "%s", err);
	/* The policy in force is untouched. */
	to(PUBLIC, NET_PASS_INTERNET);
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static bool prog_exists(uint32_t id)
{
	int fd = bpf_prog_get_fd_by_id(id);

	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

static uint32_t prog_id(const char *ifname)
{
	struct bpf_prog_info info = {};
	uint32_t len = sizeof(info);
	int fd = attached_prog(ifname);

	cr_assert_eq(bpf_obj_get_info_by_fd(fd, &info, &len), 0);
	close(fd);
	return info.id;
}

/* The real interfaces, attached and removed: the programs work on them
 * until they go and are freed with them; a failed attach leaves no qdisc. */
Test(bpf_policy_attach, real_tap_and_veth, .init = own_netns)
{
	struct bpf_policy *p;
	uint32_t ids[2];
	double t0, attach_ms = 0, full_ms, one_ms;
	int i;

	default_addrs();
	sh("ip tuntap add dev " GUEST_NET_TAP_NAME " mode tap && "
	   "ip link add " GUEST_NET_VETH_NAME " type veth peer name hostend");
	int tap = (int)if_nametoindex(GUEST_NET_TAP_NAME);
	int veth = (int)if_nametoindex(GUEST_NET_VETH_NAME);

	/* Fails on the veth: the TAP is left as it was. */
	cr_assert_eq(bpf_policy_attach(&p, tap, 9999, &addrs, &policy, err,
				       sizeof(err)),
		     -ENODEV, "%s", err);
	cr_assert(strstr(err, "veth_ingress") && strstr(err, "9999"), "%s",
		  err);
	cr_assert_eq(system("tc qdisc show dev " GUEST_NET_TAP_NAME
			    " | grep -q clsact"),
		     256, "clsact left on tap0");

	for (i = 0; i < 10; i++) {
		t0 = now_ms();
		cr_assert_eq(bpf_policy_attach(&p, tap, veth, &addrs, &policy,
					       err, sizeof(err)),
			     0, "%s", err);
		attach_ms += now_ms() - t0;
		if (i < 9)
			bpf_policy_destroy(p); /* the next one replaces it */
	}
	ids[0] = prog_id(GUEST_NET_TAP_NAME);
	ids[1] = prog_id(GUEST_NET_VETH_NAME);
	/* Worst case: three policies in turn, so that every update replaces
	 * two full lists in the idle generation; then one CIDR changed. */
	policy.n_allow = policy.n_deny = NET_POLICY_MAX_CIDRS;
	t0 = now_ms();
	for (i = 0; i < 99; i++) {
		for (uint32_t j = 0; j < NET_POLICY_MAX_CIDRS; j++) {
			policy.allow_out[j] =
				(struct net_cidr){ A(10, i % 3, j, 0), 24 };
			policy.deny_out[j] =
				(struct net_cidr){ A(20 + i % 3, j, 0, 0), 16 };
		}
		cr_assert_eq(bpf_policy_update(p, &policy, err, sizeof(err)), 0,
			     "%s", err);
	}
	full_ms = (now_ms() - t0) / 99;
	t0 = now_ms();
	for (i = 0; i < 100; i++) {
		policy.allow_out[0].addr = A(10, 100, i, 0);
		cr_assert_eq(bpf_policy_update(p, &policy, err, sizeof(err)), 0,
			     "%s", err);
	}
	one_ms = (now_ms() - t0) / 100;
	cr_log_info("load+attach %.2f ms per sandbox; update replacing "
		    "2 x %d CIDRs %.3f ms, changing one %.3f ms",
		    attach_ms / 10, NET_POLICY_MAX_CIDRS, full_ms, one_ms);

	bpf_policy_destroy(p);
	cr_assert(prog_exists(ids[0]) && prog_exists(ids[1]),
		  "the programs stay attached after destroy");
	sh("ip link del " GUEST_NET_TAP_NAME
	   " && ip link del " GUEST_NET_VETH_NAME);
	/* Freed after an RCU grace period. */
	for (i = 0; i < 500 && (prog_exists(ids[0]) || prog_exists(ids[1]));
	     i++)
		usleep(10000);
	cr_assert(!prog_exists(ids[0]) && !prog_exists(ids[1]),
		  "programs %u/%u outlived their interfaces", ids[0], ids[1]);
}

/* Frames cut inside their IPv4 header, as a TAP can deliver them (the
 * test run refuses them): each dropped as malformed. */
Test(bpf_policy_attach, short_frames_through_a_real_tap, .init = own_netns)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
	struct frame whole = out_tcp(PUBLIC, 80);
	const uint32_t cuts = sizeof(struct iphdr);
	struct net_counters c;
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);

	cr_assert_geq(fd, 0, "/dev/net/tun: %s", strerror(errno));
	strcpy(ifr.ifr_name, GUEST_NET_TAP_NAME);
	cr_assert_eq(ioctl(fd, TUNSETIFF, &ifr), 0, "TUNSETIFF: %s",
		     strerror(errno));
	sh("ip link set " GUEST_NET_TAP_NAME
	   " up && ip link add " GUEST_NET_VETH_NAME
	   " type veth peer name hostend");
	default_addrs();
	cr_assert_eq(bpf_policy_attach(&pol,
				       (int)if_nametoindex(GUEST_NET_TAP_NAME),
				       (int)if_nametoindex(GUEST_NET_VETH_NAME),
				       &addrs, &policy, err, sizeof(err)),
		     0, "%s", err);
	for (uint32_t len = ETH_HLEN; len < ETH_HLEN + cuts; len++)
		cr_assert_eq(write(fd, whole.b, len), (ssize_t)len,
			     "writing %u bytes: %s", len, strerror(errno));
	cr_assert_eq(write(fd, whole.b, whole.len), (ssize_t)whole.len);
	/* The TAP hands them to the stack through a softirq. */
	for (int i = 0; i < 500; i++) {
		c = counters();
		if (c.packets[NET_DROP_MALFORMED] == cuts &&
		    c.packets[NET_PASS_INTERNET] == 1)
			break;
		usleep(10000);
	}
	cr_assert_eq(c.packets[NET_DROP_MALFORMED], cuts);
	cr_assert_eq(c.packets[NET_PASS_INTERNET], 1);
	cr_assert_eq(c.packets[NET_DROP_ALWAYS], 0);
	bpf_policy_destroy(pol);
	close(fd);
}

/* The path a sandbox's packets take: a TAP with the guest's offloads
 * (virtio-net header), the namespace forwarding to veth0, the host's end in
 * another namespace ("H", made here).  The namespace's settings are the
 * ones pool/host/netns.c must make: ip_forward, and accept_local on both
 * interfaces (after the NAT a packet from the guest comes from
 * host_address, and a DNS answer from the gateway: addresses of the
 * namespace's own, martians to the kernel without it). */
static char h_ns[32];

static void drop_h(void)
{
	char cmd[64];

	if (h_ns[0]) {
		snprintf(cmd, sizeof(cmd), "ip netns del %s", h_ns);
		if (system(cmd) != 0)
			fprintf(stderr, "%s failed\n", cmd);
	}
	teardown();
}

/* An AF_PACKET socket on @ifname in namespace @ns. */
static int packet_socket_in(const char *ns, const char *ifname)
{
	char path[64];
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), other, s;
	struct sockaddr_ll sll = { .sll_family = AF_PACKET,
				   .sll_protocol = htons(ETH_P_ALL) };
	struct timeval tv = { .tv_sec = 5 };

	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	other = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert(self >= 0 && other >= 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(setns(other, CLONE_NEWNET), 0);
	s = socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL));
	sll.sll_ifindex = (int)if_nametoindex(ifname);
	cr_assert(s >= 0 && sll.sll_ifindex > 0);
	cr_assert_eq(bind(s, (struct sockaddr *)&sll, sizeof(sll)), 0);
	cr_assert_eq(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)),
		     0);
	cr_assert_eq(setns(self, CLONE_NEWNET), 0);
	close(self);
	close(other);
	return s;
}

/* Reads from @fd (skipping @skip bytes of each) until an IPv4 TCP or UDP
 * (@proto) frame from @sport: into @f. */
static void receive_l4(int fd, size_t skip, uint8_t proto, uint16_t sport,
		       struct frame *f)
{
	uint8_t buf[2048];

	for (int i = 0; i < 100; i++) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t n;

		cr_assert_eq(poll(&p, 1, 5000), 1,
			     "no frame of protocol %u from port %u in 5 s",
			     proto, sport);
		n = read(fd, buf, sizeof(buf));
		cr_assert_gt(n, 0, "read: %s", strerror(errno));
		if ((size_t)n < skip + ETH_HLEN + sizeof(struct iphdr) +
					sizeof(struct udphdr) ||
		    (size_t)n - skip > sizeof(f->b))
			continue;
		memcpy(f->b, buf + skip, n - skip);
		f->len = (uint32_t)(n - skip);
		if (f->b[12] == 0x08 && f->b[13] == 0 &&
		    ip_of(f)->protocol == proto &&
		    /* the source port leads TCP and UDP headers alike */
		    ((struct udphdr *)l4_of(f))->source == htons(sport))
			return;
	}
	cr_assert_fail("no frame of protocol %u from port %u", proto, sport);
}

/* What a TCP checksum field holds under offload: the pseudo header's sum,
 * folded, not inverted. */
static uint16_t partial_sum(struct frame *f)
{
	struct iphdr *ip = ip_of(f);
	uint32_t l4len = ntohs(ip->tot_len) - sizeof(*ip);

	return htons(
		(uint16_t)~fold(sum16(&ip->saddr, 8, IPPROTO_TCP + l4len)));
}

Test(bpf_policy_attach, forwarded_through_a_real_namespace, .init = own_netns,
     .fini = drop_h)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
	struct virtio_net_hdr vh = {
		.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
		.csum_start = ETH_HLEN + sizeof(struct iphdr),
		.csum_offset = offsetof(struct tcphdr, check),
	};
	uint8_t buf[sizeof(vh) + sizeof(((struct frame *)0)->b)];
	struct frame f = out_tcp(PUBLIC, 80), got;
	struct tcphdr *th = (struct tcphdr *)l4_of(&f);
	char cmd[1024];
	int tap, h, sock;

	default_addrs();
	snprintf(h_ns, sizeof(h_ns), "thaw-bpf-test-%d", (int)getpid());
	tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	cr_assert_geq(tap, 0);
	strcpy(ifr.ifr_name, GUEST_NET_TAP_NAME);
	cr_assert_eq(ioctl(tap, TUNSETIFF, &ifr), 0, "TUNSETIFF: %s",
		     strerror(errno));
	snprintf(cmd, sizeof(cmd),
		 "set -e; ip netns add %1$s; "
		 "ip link add veth0 type veth peer name hostend netns %1$s; "
		 "ip link set tap0 address 06:00:ac:10:00:01 up; "
		 "ip addr add 169.254.0.22/30 dev tap0; "
		 "ip neigh add 169.254.0.21 lladdr 06:00:ac:10:00:02 dev tap0; "
		 "ip addr add 10.200.0.6/30 dev veth0; ip link set veth0 up; "
		 "ip route add default via 10.200.0.5; "
		 "sysctl -qw net.ipv4.ip_forward=1 "
		 "net.ipv4.conf.tap0.accept_local=1 "
		 "net.ipv4.conf.veth0.accept_local=1; "
		 "ip -n %1$s addr add 10.200.0.5/30 dev hostend; "
		 "ip -n %1$s link set hostend up",
		 h_ns);
	sh(cmd);
	cr_assert_eq(bpf_policy_attach(&pol,
				       (int)if_nametoindex(GUEST_NET_TAP_NAME),
				       (int)if_nametoindex(GUEST_NET_VETH_NAME),
				       &addrs, &policy, err, sizeof(err)),
		     0, "%s", err);
	h = packet_socket_in(h_ns, "hostend");

	/* Out: the guest's checksum offload (CHECKSUM_PARTIAL: the field
	 * holds the pseudo header's sum) follows the new source. */
	th->check = partial_sum(&f);
	memcpy(buf, &vh, sizeof(vh));
	memcpy(buf + sizeof(vh), f.b, f.len);
	cr_assert_eq(write(tap, buf, sizeof(vh) + f.len),
		     (ssize_t)(sizeof(vh) + f.len), "write: %s",
		     strerror(errno));
	receive_l4(h, 0, IPPROTO_TCP, 40000, &got);
	cr_assert_eq(ntohl(ip_of(&got)->saddr), HOST_ADDRESS);
	cr_assert_eq(fold(sum16(ip_of(&got), sizeof(struct iphdr), 0)), 0);
	th = (struct tcphdr *)l4_of(&got);
	cr_assert_eq(th->check, partial_sum(&got),
		     "partial checksum not moved to the new source");

	/* In: the host's answer reaches the guest, checksums whole. */
	strcpy(ifr.ifr_name, GUEST_NET_VETH_NAME);
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	cr_assert_eq(ioctl(sock, SIOCGIFHWADDR, &ifr), 0, "%s",
		     strerror(errno));
	close(sock);
	f = pkt(IPPROTO_TCP, PUBLIC, 80, HOST_ADDRESS, 40000, TH_SYN | TH_ACK);
	memcpy(f.b, ifr.ifr_hwaddr.sa_data, ETH_ALEN);
	cr_assert_eq(write(h, f.b, f.len), (ssize_t)f.len, "write: %s",
		     strerror(errno));
	receive_l4(tap, sizeof(vh), IPPROTO_TCP, 80, &got);
	check_addrs(&got, PUBLIC, GUEST);

	/* DNS through the gateway, there and back. */
	f = pkt(IPPROTO_UDP, GUEST, 5353, GATEWAY, 53, 0);
	memset(buf, 0, sizeof(vh));
	memcpy(buf + sizeof(vh), f.b, f.len);
	cr_assert_eq(write(tap, buf, sizeof(vh) + f.len),
		     (ssize_t)(sizeof(vh) + f.len));
	receive_l4(h, 0, IPPROTO_UDP, 5353, &got);
	check_addrs(&got, HOST_ADDRESS, DNS_SERVER);
	f = pkt(IPPROTO_UDP, DNS_SERVER, 53, HOST_ADDRESS, 5353, 0);
	memcpy(f.b, ifr.ifr_hwaddr.sa_data, ETH_ALEN);
	cr_assert_eq(write(h, f.b, f.len), (ssize_t)f.len);
	receive_l4(tap, sizeof(vh), IPPROTO_UDP, 53, &got);
	check_addrs(&got, GATEWAY, GUEST);
	close(h);
	close(tap);
}

/* test_network's daemon: its pool, its DNS server on the public host, the
 * world's host ends among the host's own addresses. */
Test(bpf_policy, a_public_host_that_is_the_dns_server_is_reached)
{
	addrs.pool = (struct net_cidr){ A(10, 201, 0, 0), 16 };
	addrs.host_address = A(10, 201, 0, 10);
	addrs.host_peer = A(10, 201, 0, 9);
	addrs.dns_server = PUBLIC;
	addrs.n_host_addrs = 5;
	addrs.host_addrs[0] = A(198, 51, 100, 1);
	addrs.host_addrs[1] = A(10, 99, 0, 1);
	addrs.host_addrs[2] = A(169, 254, 169, 1);
	addrs.host_addrs[3] = A(10, 201, 0, 9);
	addrs.host_addrs[4] = A(127, 0, 0, 1);
	reload();
	to(PUBLIC, NET_PASS_INTERNET);
}

/* On Azure the host's resolver is the WireServer's address: the guest's
 * DNS through its gateway reaches it and is answered, while the guest
 * cannot send it anything itself. */
Test(bpf_policy, dns_through_a_resolver_rule_1_keeps_the_guest_off)
{
	struct frame f;

	addrs.dns_server = A(168, 63, 129, 16);
	reload();
	f = pkt(IPPROTO_UDP, GUEST, 5353, GATEWAY, 53, 0);
	expect(tap_prog, &f, NET_PASS_DNS);
	check_addrs(&f, HOST_ADDRESS, A(168, 63, 129, 16));
	f = pkt(IPPROTO_UDP, GUEST, 5353, A(168, 63, 129, 16), 53, 0);
	expect(tap_prog, &f, NET_DROP_ALWAYS);
	f = pkt(IPPROTO_UDP, A(168, 63, 129, 16), 53, HOST_ADDRESS, 5353, 0);
	expect(veth_prog, &f, NET_PASS_DNS);
	check_addrs(&f, GATEWAY, GUEST);
}
