// SPDX-License-Identifier: Apache-2.0
/*
 * test_netns.c - a sandbox's network (pool/host/netns.h) made for real:
 * namespaces, veths, TAPs, addresses, routes and an nftables table on this
 * host, in a pool (10.254.0.0/16) and under names (a scratch directory's)
 * no thaw uses.  What is inside a namespace is read with
 * `nsenter --net=PIN ip ...`, the way an operator would look; a stand-in
 * for the guest on tap0 answers ARP and pings, so the host's ping of a
 * sandbox's host address goes through the eBPF policy's NAT both ways.  Root
 * only; run under the VM lock (tests/CMakeLists.txt).
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_tun.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/guest_net.h"
#include "pool/host/netns.h"

#define TAP_UID 1879114731u /* no other test's jail id */
#define TAP_GID 1879114732u

static char run_dir[] = "/tmp/thaw-test-netns-XXXXXX";
static struct net_config cfg;
/* What the last net_host_setup() found (asserted where it matters). */
static struct net_host_found found;
static const struct net_policy internet = { .allow_internet = true };

/* @cmd's stdout (at most a few KiB), and its exit status in *@status. */
static char *run(int *status, const char *fmt, ...)
{
	static char out[8192];
	char cmd[1024];
	size_t n = 0, r;
	va_list ap;
	FILE *p;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	p = popen(cmd, "r");
	cr_assert(p, "popen %s", cmd);
	while ((r = fread(out + n, 1, sizeof(out) - 1 - n, p)) > 0)
		n += r;
	out[n] = '\0';
	*status = pclose(p);
	return out;
}

/* Asserts that @cmd, run inside @pin's namespace, prints @want. */
static void expect_inside(const char *pin, const char *cmd, const char *want)
{
	int status;
	char *out = run(&status, "nsenter --net=%s %s 2>&1", pin, cmd);

	cr_expect(status == 0 && strstr(out, want),
		  "%s in %s: wanted \"%s\" in: %s", cmd, pin, want, out);
}

static bool host_link_exists(const char *name)
{
	int status;

	run(&status, "ip link show dev %s 2>/dev/null", name);
	return status == 0;
}

static bool mounted(const char *path)
{
	int status;

	run(&status, "grep -q ' %s ' /proc/self/mountinfo", path);
	return status == 0;
}

/*
 * A guest's stand-in on a sandbox's tap0 (what the VMM opens): it answers
 * ARP for the guest's address and ICMP echo requests to it, so that the
 * host reaches the sandbox's host address through the policy's NAT as it
 * reaches a real guest.
 */
struct fake_guest {
	int tap; /* open before the thread starts: no frame goes unseen */
	pthread_t thread;
	atomic_bool stop;
	int answered; /* echo requests answered */
};

static uint16_t ip_checksum(const void *data, size_t len)
{
	const uint8_t *p = data;
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)p[i] << 8 | p[i + 1];
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

/* Turns @f (@len bytes, a frame for the guest) into its answer; its
 * length, or 0 for none. */
static size_t answer(uint8_t *f, size_t len)
{
	static const uint8_t guest_mac[] = GUEST_NET_GUEST_MAC;
	uint32_t guest = htonl(GUEST_NET_GUEST_ADDR);
	uint8_t tmp[6];

	memcpy(f, f + 6, 6); /* back to the sender */
	memcpy(f + 6, guest_mac, 6);
	if (len >= 42 && f[12] == 0x08 && f[13] == 0x06 && f[21] == 1 &&
	    !memcmp(f + 38, &guest, 4)) {
		f[21] = 2; /* ARP reply: we are the target */
		memcpy(tmp, f + 22, 6);
		memcpy(f + 32, tmp, 6);
		memcpy(tmp, f + 28, 4);
		memcpy(f + 22, guest_mac, 6);
		memcpy(f + 28, &guest, 4);
		memcpy(f + 38, tmp, 4);
		return 42;
	}
	if (len >= 42 && f[12] == 0x08 && f[13] == 0x00 && f[14] == 0x45 &&
	    f[23] == 1 /* ICMP */ && f[34] == 8 /* echo */ &&
	    !memcmp(f + 30, &guest, 4)) {
		size_t ip_len = (size_t)f[16] << 8 | f[17];

		if (ip_len < 28 || 14 + ip_len > len)
			return 0;
		memcpy(tmp, f + 26, 4); /* swap the addresses */
		memcpy(f + 26, f + 30, 4);
		memcpy(f + 30, tmp, 4);
		f[34] = 0; /* echo reply */
		f[36] = f[37] = 0;
		uint16_t sum = ip_checksum(f + 34, ip_len - 20);
		f[36] = sum >> 8;
		f[37] = sum & 0xff;
		return 14 + ip_len;
	}
	return 0;
}

/* tap0 of @pin's namespace, opened as the VMM opens it (a frame per
 * read or write), from this thread's namespace and back. */
static int open_tap_in(const char *pin)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI };
	int here = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
	int there = open(pin, O_RDONLY | O_CLOEXEC), tap;

	cr_assert(here >= 0 && there >= 0, "%s: %s", pin, strerror(errno));
	cr_assert_eq(setns(there, CLONE_NEWNET), 0, "setns %s: %s", pin,
		     strerror(errno));
	tap = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", GUEST_NET_TAP_NAME);
	if (tap >= 0 && ioctl(tap, TUNSETIFF, &ifr) < 0) {
		close(tap);
		tap = -1;
	}
	cr_assert_eq(setns(here, CLONE_NEWNET), 0, "setns back: %s",
		     strerror(errno));
	cr_assert_geq(tap, 0, "tap0 of %s: %s", pin, strerror(errno));
	close(here);
	close(there);
	return tap;
}

static void *fake_guest_run(void *arg)
{
	struct fake_guest *g = arg;
	uint8_t frame[2048];

	while (!atomic_load(&g->stop)) {
		struct pollfd p = { .fd = g->tap, .events = POLLIN };
		ssize_t n;
		size_t out;

		if (poll(&p, 1, 50) != 1)
			continue;
		n = read(g->tap, frame, sizeof(frame));
		out = n > 0 ? answer(frame, (size_t)n) : 0;
		if (out && write(g->tap, frame, out) == (ssize_t)out &&
		    frame[34] == 0)
			g->answered++;
	}
	return NULL;
}

static void fake_guest_start(struct fake_guest *g, const char *pin)
{
	g->tap = open_tap_in(pin);
	atomic_init(&g->stop, false);
	g->answered = 0;
	cr_assert_eq(pthread_create(&g->thread, NULL, fake_guest_run, g), 0);
}

static void fake_guest_stop(struct fake_guest *g)
{
	atomic_store(&g->stop, true);
	pthread_join(g->thread, NULL);
	close(g->tap);
}

static void setup(void)
{
	char err[512] = "";

	if (geteuid() != 0)
		cr_skip_test("network namespaces need root");
	cr_assert(mkdtemp(run_dir), "mkdtemp");
	cfg.pool = (struct net_cidr){ 0x0afe0000u, 16 }; /* 10.254.0.0/16 */
	/* Names of this run's own ("tt" + 5 of mkdtemp's letters). */
	snprintf(cfg.ifname_prefix, sizeof(cfg.ifname_prefix), "tt%s",
		 run_dir + strlen(run_dir) - 5);
	snprintf(cfg.nft_table, sizeof(cfg.nft_table), "thaw_test_%s",
		 run_dir + strlen(run_dir) - 6);
	cr_assert_eq(net_host_setup(&cfg, run_dir, &found, err, sizeof(err)), 0,
		     "%s", err);
}

static void teardown(void)
{
	char err[512] = "";
	int status;

	if (geteuid() != 0)
		return;
	cr_expect_eq(net_host_teardown(&cfg, err, sizeof(err)), 0, "%s", err);
	run(&status, "nft list table ip %s 2>/dev/null", cfg.nft_table);
	cr_expect_neq(status, 0, "table %s left", cfg.nft_table);
	run(&status, "rm -rf %s", run_dir);
}

/* Sandbox @index's pin: <run_dir>/<index>/netns. */
static void pin_path(char *path, size_t len, uint32_t index)
{
	snprintf(path, len, "%s/%u", run_dir, index);
	mkdir(path, 0700);
	snprintf(path, len, "%s/%u/%s", run_dir, index, NET_PIN_NAME);
}

static void create(struct sandbox_net *net, uint32_t index, double *ms)
{
	char pin[PATH_MAX], err[512] = "";
	double t0;

	pin_path(pin, sizeof(pin), index);
	t0 = monotonic_ms();
	cr_assert_eq(sandbox_net_create(net, &cfg, index, pin, TAP_UID, TAP_GID,
					&internet, err, sizeof(err)),
		     0, "%s", err);
	if (ms)
		*ms = monotonic_ms() - t0;
}

TestSuite(netns, .init = setup, .fini = teardown, .timeout = 60);

Test(netns, two_sandboxes_made_and_removed)
{
	struct sandbox_net nets[2];
	double create_ms[2], destroy_ms[2], t0;
	char pins[2][PATH_MAX], want[128], err[512] = "";
	int status;

	for (int i = 0; i < 2; i++) {
		create(&nets[i], (uint32_t)i, &create_ms[i]);
		snprintf(pins[i], sizeof(pins[i]), "%s", nets[i].netns_path);
	}
	cr_expect_eq(nets[1].host_address, 0x0afe0006u, "10.254.0.6");
	for (int i = 0; i < 2; i++) {
		const char *pin = pins[i];

		expect_inside(pin, "ip -o -4 addr show dev tap0",
			      "169.254.0.22/30");
		snprintf(want, sizeof(want), "10.254.0.%d/30", 4 * i + 2);
		expect_inside(pin, "ip -o -4 addr show dev veth0", want);
		snprintf(want, sizeof(want),
			 "default via 10.254.0.%d dev veth0", 4 * i + 1);
		expect_inside(pin, "ip -4 route show", want);
		expect_inside(pin, "ip -d link show tap0",
			      "link/ether 06:00:ac:10:00:01");
		expect_inside(pin, "ip -d link show tap0",
			      "tun type tap pi off vnet_hdr on persist on "
			      "user 1879114731 group 1879114732");
		expect_inside(pin, "ip link show veth0", ",UP,");
		expect_inside(pin, "ip link show lo", ",UP,");
		expect_inside(pin, "cat /proc/sys/net/ipv4/ip_forward", "1");
		snprintf(want, sizeof(want), "10.254.0.%d/30", 4 * i + 1);
		cr_expect(strstr(run(&status, "ip -o -4 addr show dev %s",
				     nets[i].host_veth),
				 want),
			  "%s has no %s", nets[i].host_veth, want);
		/* The host reaches the sandbox's address over its veth, the
		 * policy's NAT taking it to the guest's. */
		struct fake_guest guest;
		fake_guest_start(&guest, pin);
		snprintf(want, sizeof(want), "10.254.0.%d", 4 * i + 2);
		run(&status, "busybox ping -c 1 -W 3 %s >/dev/null 2>&1", want);
		fake_guest_stop(&guest);
		cr_expect_eq(status, 0, "ping %s failed", want);
		cr_expect_eq(guest.answered, 1, "the guest answered %d pings",
			     guest.answered);
	}
	cr_expect(strstr(run(&status, "nft list table ip %s", cfg.nft_table),
			 "masquerade"),
		  "no masquerade in table %s", cfg.nft_table);
	for (int i = 0; i < 2; i++) {
		char host_veth[IF_NAMESIZE];

		snprintf(host_veth, sizeof(host_veth), "%s", nets[i].host_veth);
		t0 = monotonic_ms();
		cr_expect_eq(sandbox_net_destroy(&nets[i], err, sizeof(err)), 0,
			     "%s", err);
		destroy_ms[i] = monotonic_ms() - t0;
		cr_expect(!host_link_exists(host_veth), "%s left", host_veth);
		cr_expect(!mounted(pins[i]), "%s still mounted", pins[i]);
		cr_expect_neq(access(pins[i], F_OK), 0, "%s left", pins[i]);
	}
	run(&status, "ip -o link show | grep -q ': %s'", cfg.ifname_prefix);
	cr_expect_neq(status, 0, "host links named %s* left",
		      cfg.ifname_prefix);
	fprintf(stderr,
		"sandbox_net_create: %.2f ms, %.2f ms; "
		"sandbox_net_destroy: %.2f ms, %.2f ms\n",
		create_ms[0], create_ms[1], destroy_ms[0], destroy_ms[1]);
}

Test(netns, a_dead_daemons_networks_are_removed)
{
	struct sandbox_net net;
	char pin[PATH_MAX], host_veth[IF_NAMESIZE], err[512] = "";

	create(&net, 7, NULL);
	snprintf(pin, sizeof(pin), "%s", net.netns_path);
	snprintf(host_veth, sizeof(host_veth), "%s", net.host_veth);
	cr_assert(host_link_exists(host_veth));
	cr_assert(mounted(pin));
	/* The daemon dies: only what it held in its own memory goes. */
	bpf_policy_destroy(net.policy);
	cr_assert_eq(net_host_setup(&cfg, run_dir, &found, err, sizeof(err)), 0,
		     "%s", err);
	cr_expect(!host_link_exists(host_veth), "%s left", host_veth);
	cr_expect(!mounted(pin), "%s still mounted", pin);
	cr_expect_neq(access(pin, F_OK), 0, "%s left", pin);
	/* ... and says so: the daemon logs what was removed. */
	cr_expect_eq(found.stale_links, 1, "%d stale veths", found.stale_links);
	cr_expect_eq(found.stale_pins, 1, "%d stale pins", found.stale_pins);
}

Test(netns, an_index_past_the_pool_is_refused)
{
	struct sandbox_net net;
	char pin[PATH_MAX], err[512] = "";

	pin_path(pin, sizeof(pin), 16384); /* a /16 has 16384 /30s */
	cr_expect_eq(sandbox_net_create(&net, &cfg, 16384, pin, TAP_UID,
					TAP_GID, &internet, err, sizeof(err)),
		     -ENOSPC);
	cr_expect(strstr(err, "16384"), "%s", err);
	cr_expect_neq(access(pin, F_OK), 0, "%s made", pin);
}

Test(netns, a_templates_namespace_holds_tap0_alone)
{
	char pin[PATH_MAX], err[512] = "";
	int status;

	pin_path(pin, sizeof(pin), 9);
	cr_assert_eq(net_tap_namespace(pin, TAP_UID, TAP_GID, err, sizeof(err)),
		     0, "%s", err);
	expect_inside(pin, "ip -d link show tap0",
		      "persist on user 1879114731 group 1879114732");
	expect_inside(pin, "ip -o -4 addr show dev tap0", "169.254.0.22/30");
	run(&status, "nsenter --net=%s ip link show veth0 2>/dev/null", pin);
	cr_expect_neq(status, 0, "a template's namespace has a veth0");
	net_pin_remove(pin);
	cr_expect(!mounted(pin), "%s still mounted", pin);
	cr_expect_neq(access(pin, F_OK), 0, "%s left", pin);
}

/* This test's own "host": a fresh network namespace, so that it can give
 * the host whatever addresses it needs. */
static void own_host(void)
{
	if (geteuid() != 0)
		cr_skip_test("network namespaces need root");
	cr_assert_eq(unshare(CLONE_NEWNET), 0, "unshare: %s", strerror(errno));
	setup();
}

/* The guest sends IPv4 packet @proto to @dst with @l4 (@len bytes, at
 * most 16) on @tap. */
static void guest_ip(int tap, uint8_t proto, uint32_t dst, const uint8_t *l4,
		     size_t len)
{
	static const uint8_t tap_mac[] = GUEST_NET_TAP_MAC;
	static const uint8_t guest_mac[] = GUEST_NET_GUEST_MAC;
	uint8_t f[14 + 20 + 16] = { 0 };
	uint32_t src = htonl(GUEST_NET_GUEST_ADDR), dst_be = htonl(dst);
	uint16_t sum;

	cr_assert_leq(len, 16);
	memcpy(f, tap_mac, 6);
	memcpy(f + 6, guest_mac, 6);
	f[12] = 0x08; /* IPv4 */
	f[14] = 0x45;
	f[17] = (uint8_t)(20 + len); /* total length */
	f[22] = 64;		     /* TTL */
	f[23] = proto;
	memcpy(f + 26, &src, 4);
	memcpy(f + 30, &dst_be, 4);
	sum = ip_checksum(f + 14, 20);
	f[24] = sum >> 8;
	f[25] = sum & 0xff;
	memcpy(f + 34, l4, len);
	cr_assert_eq(write(tap, f, 34 + len), (ssize_t)(34 + len), "tap0: %s",
		     strerror(errno));
}

/* The guest sends a UDP datagram from @sport to @dst:@dport on @tap. */
static void guest_udp(int tap, uint16_t sport, uint32_t dst, uint16_t dport)
{
	const uint8_t udp[12] = {
		sport >> 8, sport & 0xff, dport >> 8, dport & 0xff,
		0,	    12,		  0,	      0, /* no checksum */
		'p',	    'i',	  'n',	      'g',
	};

	guest_ip(tap, 17, dst, udp, sizeof(udp));
}

/* The guest sends an ICMP echo request to @dst on @tap. */
static void guest_ping(int tap, uint32_t dst)
{
	uint8_t icmp[8] = { 8, 0, 0, 0, 0x12, 0x34, 0, 1 };
	uint16_t sum = ip_checksum(icmp, sizeof(icmp));

	icmp[2] = sum >> 8;
	icmp[3] = sum & 0xff;
	guest_ip(tap, 1, dst, icmp, sizeof(icmp));
}

static int udp_socket(uint32_t addr, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port),
				  .sin_addr.s_addr = htonl(addr) };
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	cr_assert(fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0,
		  "UDP socket on port %u: %s", port, strerror(errno));
	return fd;
}

/* Whether a datagram reaches @fd within a second. */
static bool received(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char buf[64];

	return poll(&p, 1, 1000) == 1 && recv(fd, buf, sizeof(buf), 0) > 0;
}

/* Waits until veth0 has let @n datagrams from the host through. */
static void wait_inbound(struct sandbox_net *net, uint64_t n)
{
	struct net_counters c = { 0 };
	char err[512] = "";

	for (int i = 0; i < 100 && c.packets[NET_PASS_INBOUND] < n; i++) {
		cr_assert_eq(sandbox_net_counters(net, &c, err, sizeof(err)), 0,
			     "%s", err);
		usleep(10000);
	}
}

/*
 * Rule 1 keeps the guest off every address of the host's, however many
 * other sandboxes' veth ends come first (here 64 addresses in the pool,
 * as many sandboxes would add), and off the broadcast address of the
 * host's subnets, which the host receives as its own.  A connection the
 * host opened from the same address is answered: the frames get through.
 */
Test(netns_host, the_host_is_unreachable_at_every_address, .init = own_host,
     .fini = teardown, .timeout = 60)
{
	const uint32_t host = 0xcb007101u; /* 203.0.113.1/24 */
	struct sockaddr_in sandbox = { .sin_family = AF_INET,
				       .sin_port = htons(40000) };
	struct net_counters c = { 0 };
	struct sandbox_net net;
	char err[512] = "";
	int status, tap, unicast, broadcast;

	run(&status, "ip link set lo up && "
		     "ip link add tt_pool type veth peer name tt_pool_peer && "
		     "for i in $(seq 1 64); do ip addr add 10.254.1.$i/32 "
		     "dev tt_pool || exit 1; done && "
		     "ip link add tt_host type veth peer name tt_host_peer && "
		     "ip addr add 203.0.113.1/24 dev tt_host && "
		     "ip link set tt_host_peer up && ip link set tt_host up");
	cr_assert_eq(status, 0, "host addresses");
	create(&net, 0, NULL);
	tap = open_tap_in(net.netns_path);
	unicast = udp_socket(host, 9999);
	broadcast = udp_socket(0, 9998);

	sandbox.sin_addr.s_addr = htonl(net.host_address);
	/* The host's ARP from host_peer, which the policy lets through (a
	 * datagram from 203.0.113.1 would ask from that address). */
	run(&status, "busybox ping -c 1 -W 1 10.254.0.2 >/dev/null 2>&1");
	cr_assert_eq(sendto(unicast, "open", 4, 0, (struct sockaddr *)&sandbox,
			    sizeof(sandbox)),
		     4, "sendto: %s", strerror(errno));
	wait_inbound(&net, 1);
	guest_udp(tap, 40000, host, 9999);
	cr_expect(received(unicast), "the answer to the host's datagram");
	guest_udp(tap, 41000, host, 9999);
	cr_expect(!received(unicast), "the guest reached 203.0.113.1");
	guest_udp(tap, 41000, 0xcb0071ffu, 9998);
	cr_expect(!received(broadcast), "the guest reached 203.0.113.255");
	cr_assert_eq(sandbox_net_counters(&net, &c, err, sizeof(err)), 0, "%s",
		     err);
	/* (Rule 1's drops also count the host's IPv6 chatter on veth0.) */
	cr_expect_eq(c.packets[NET_PASS_REPLY], 1, "%llu passed as replies",
		     (unsigned long long)c.packets[NET_PASS_REPLY]);
	cr_expect_eq(c.packets[NET_PASS_INTERNET], 0,
		     "%llu passed as the internet",
		     (unsigned long long)c.packets[NET_PASS_INTERNET]);
	close(tap);
	close(unicast);
	close(broadcast);
	cr_expect_eq(sandbox_net_destroy(&net, err, sizeof(err)), 0, "%s", err);
}

/*
 * An address the host gains after a sandbox was made (a VPN, a bridge)
 * is not in that sandbox's host_addrs: the host's own firewall keeps the
 * guest off it, and off any host address, letting through only DNS to
 * the resolver and answers to what the host opened.
 */
Test(netns_host, the_host_is_unreachable_at_addresses_it_gains_later,
     .init = own_host, .fini = teardown, .timeout = 60)
{
	const uint32_t resolver = 0xc6336435u; /* 198.51.100.53 */
	struct sockaddr_in sandbox = { .sin_family = AF_INET,
				       .sin_port = htons(40000) };
	struct sandbox_net net;
	char err[512] = "";
	int status, tap, dns, late, opener;

	cfg.n_dns = 1;
	cfg.dns_servers[0] = resolver;
	cr_assert_eq(net_host_setup(&cfg, run_dir, &found, err, sizeof(err)), 0,
		     "%s", err);
	run(&status, "ip link add tt_dns type veth peer name tt_dns_peer && "
		     "ip addr add 198.51.100.53/24 dev tt_dns && "
		     "ip link set tt_dns_peer up && ip link set tt_dns up");
	cr_assert_eq(status, 0, "the resolver's address");
	create(&net, 0, NULL);
	run(&status, "ip link add tt_late type veth peer name tt_late_peer && "
		     "ip addr add 192.0.2.1/24 dev tt_late && "
		     "ip link set tt_late_peer up && ip link set tt_late up");
	cr_assert_eq(status, 0, "the address gained later");
	tap = open_tap_in(net.netns_path);
	dns = udp_socket(resolver, 53);
	late = udp_socket(0, 9997);
	opener = udp_socket(0, 9996);

	guest_udp(tap, 41000, GUEST_NET_GATEWAY_ADDR, 53);
	cr_expect(received(dns), "the guest's DNS query");
	guest_udp(tap, 41000, 0xc0000201u, 9997);
	cr_expect(!received(late), "the guest reached 192.0.2.1");
	guest_udp(tap, 41000, 0xc00002ffu, 9997);
	cr_expect(!received(late), "the guest reached 192.0.2.255");

	/* The host's datagram goes from host_peer, 10.254.0.1. */
	sandbox.sin_addr.s_addr = htonl(net.host_address);
	cr_assert_eq(sendto(opener, "open", 4, 0, (struct sockaddr *)&sandbox,
			    sizeof(sandbox)),
		     4, "sendto: %s", strerror(errno));
	wait_inbound(&net, 1);
	guest_udp(tap, 40000, 0x0afe0001u, 9996);
	cr_expect(received(opener), "the answer to the host's datagram");
	close(tap);
	close(dns);
	close(late);
	close(opener);
	cr_expect_eq(sandbox_net_destroy(&net, err, sizeof(err)), 0, "%s", err);
}

/*
 * The host routes the pool for its own sake, not its network's: a
 * neighbour that routes a sandbox's host address through the host (or
 * another sandbox) does not reach it; the host does, and the sandbox's
 * own connections out get their answers.
 */
Test(netns_host, only_the_host_opens_connections_to_a_sandbox, .init = own_host,
     .fini = teardown, .timeout = 60)
{
	struct fake_guest guest;
	struct net_counters c;
	struct sandbox_net net;
	char neighbour[32], err[512] = "";
	uint64_t inbound;
	int status;

	snprintf(neighbour, sizeof(neighbour), "tt-neighbour-%d",
		 (int)getpid());
	create(&net, 0, NULL);
	run(&status,
	    "ip netns add %1$s && "
	    "ip link add tt_lan type veth peer name lan netns %1$s && "
	    "ip addr add 192.0.2.1/24 dev tt_lan && ip link set tt_lan up && "
	    "ip -n %1$s addr add 192.0.2.2/24 dev lan && "
	    "ip -n %1$s link set lan up && "
	    "ip -n %1$s route add 10.254.0.0/16 via 192.0.2.1",
	    neighbour);
	cr_assert_eq(status, 0, "the neighbour %s", neighbour);
	fake_guest_start(&guest, net.netns_path);
	/* From another of the host's addresses first (no neighbour entry
	 * yet): the host's ARP still comes from its veth end's, the one
	 * source the policy lets ARP in from. */
	run(&status, "busybox ping -I 192.0.2.1 -c 1 -W 3 10.254.0.2 "
		     ">/dev/null 2>&1");
	cr_expect_eq(status, 0,
		     "the host's ping of its sandbox from 192.0.2.1");
	run(&status, "busybox ping -c 1 -W 3 10.254.0.2 >/dev/null 2>&1");
	cr_expect_eq(status, 0, "the host's ping of its sandbox");
	run(&status,
	    "ip netns exec %s busybox ping -c 1 -W 2 10.254.0.2 "
	    ">/dev/null 2>&1",
	    neighbour);
	cr_expect_neq(status, 0, "the neighbour reached the sandbox");
	/* The guest's own ping of the neighbour gets its answer. */
	cr_assert_eq(sandbox_net_counters(&net, &c, err, sizeof(err)), 0, "%s",
		     err);
	guest_ping(guest.tap, 0xc0000202u);
	wait_inbound(&net, c.packets[NET_PASS_INBOUND] + 1);
	inbound = c.packets[NET_PASS_INBOUND];
	cr_assert_eq(sandbox_net_counters(&net, &c, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(c.packets[NET_PASS_INBOUND], inbound + 1,
		     "the neighbour's answer to the guest");
	fake_guest_stop(&guest);
	cr_expect_eq(guest.answered, 2, "the guest answered %d pings",
		     guest.answered);
	run(&status, "ip netns del %s", neighbour);
	cr_expect_eq(sandbox_net_destroy(&net, err, sizeof(err)), 0, "%s", err);
}
