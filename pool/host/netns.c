// SPDX-License-Identifier: Apache-2.0
/*
 * netns.c - a sandbox's network namespace, veth pair, TAP and policy, and
 * the host's forwarding, masquerade and filters; see netns.h.
 *
 * A sandbox's namespace is made by a short-lived thread: it unshares its
 * own network namespace (a thread may; the daemon's other threads stay in
 * the host's), pins it by bind-mounting /proc/thread-self/ns/net on the
 * pin file, as `ip netns add` does, and configures it from inside, where
 * a netlink socket, /dev/net/tun and /proc/sys/net all act on the
 * thread's namespace.  A second netlink socket, opened before the
 * unshare, still speaks to the host's namespace: the veth pair is made
 * from inside with its peer placed in the host's (IFLA_NET_NS_FD), so
 * "veth0" never exists in the host's namespace, where concurrent creates
 * would collide on the name.  When the thread ends only the pin (and,
 * later, the VMM that joins it) keeps the namespace.
 *
 * Netlink is libnl-route-3's (Debian's libnl-route-3-dev): links,
 * addresses and routes as objects, its errors as text.  nftables is
 * libnftables': the rule set is a few lines of nft's own language, run
 * atomically, with its own error messages, and no nft binary to find.
 *
 * Teardown deletes the host's veth end first (which takes veth0 with it at
 * once: the namespace's own teardown is asynchronous and would leave the
 * host's end visible for a while), then unmounts and removes the pin; the
 * namespace, tap0 and the eBPF programs go when the last process in it
 * (the VMM) has gone.  What a dead daemon left is found by name: host
 * links starting with ifname_prefix, pins named NET_PIN_NAME one level
 * under the run directory.
 */
#include "pool/host/netns.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <linux/if_tun.h>
#include <linux/ip.h>
#include <linux/magic.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <netlink/netlink.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/link/inet.h>
#include <netlink/route/link/veth.h>
#include <netlink/route/route.h>
#include <nftables/libnftables.h>

#include "common/guest_net.h"

static int fail(int e, char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* @fmt's message in @err, and -@e: every error here is -errno. */
static int fail(int e, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -e;
}

/* libnl's error codes are its own: the errno naming the same failure. */
static int nl_errno(int nlerr)
{
	switch (-nlerr) {
	case NLE_NOMEM:
		return ENOMEM;
	case NLE_EXIST:
		return EEXIST;
	case NLE_NODEV:
		return ENODEV;
	case NLE_OBJ_NOTFOUND:
		return ENOENT;
	case NLE_PERM:
		return EPERM;
	case NLE_NOACCESS:
		return EACCES;
	case NLE_BUSY:
		return EBUSY;
	case NLE_AGAIN:
		return EAGAIN;
	case NLE_INVAL:
	case NLE_RANGE:
		return EINVAL;
	case NLE_OPNOTSUPP:
	case NLE_AF_NOSUPPORT:
		return EOPNOTSUPP;
	default:
		return EIO;
	}
}

/* The first address of sandbox @index's /30, or 0 past the pool. */
static uint32_t slot_base(const struct net_config *cfg, uint32_t index)
{
	uint64_t size = 1ull << (32 - cfg->pool.prefix);

	if ((uint64_t)index * 4 + 4 > size)
		return 0;
	return cfg->pool.addr + index * 4;
}

/* A route netlink socket in *@out (the calling thread's namespace's). */
static int route_socket(struct nl_sock **out, char *err, size_t errlen,
			const char *where)
{
	struct nl_sock *sock = nl_socket_alloc();
	int ret;

	if (!sock)
		return fail(ENOMEM, err, errlen,
			    "netlink socket (%s): out of memory", where);
	ret = nl_connect(sock, NETLINK_ROUTE);
	if (ret < 0) {
		nl_socket_free(sock);
		return fail(nl_errno(ret), err, errlen,
			    "netlink socket (%s): %s", where, nl_geterror(ret));
	}
	*out = sock;
	return 0;
}

/* @addr (host order)/@prefix as libnl's address. */
static struct nl_addr *ipv4_addr(uint32_t addr, int prefix)
{
	uint32_t be = htonl(addr);
	struct nl_addr *a = nl_addr_build(AF_INET, &be, sizeof(be));

	if (a)
		nl_addr_set_prefixlen(a, prefix);
	return a;
}

static const char *addr_text(uint32_t addr, char buf[INET_ADDRSTRLEN])
{
	uint32_t be = htonl(addr);

	return inet_ntop(AF_INET, &be, buf, INET_ADDRSTRLEN);
}

/*
 * Sets @name up, with @mac unless NULL, in one request.  @own_arp_source
 * (arp_announce 2): its ARP asks from its own address whatever source a
 * program bound, for the host's veth end, as the policy lets only ARP
 * between the two veth ends through: a connection the host opens from
 * another of its addresses would otherwise never find the sandbox.  0, or
 * -errno with @err.
 */
static int link_up(struct nl_sock *sock, const char *name,
		   const unsigned char *mac, bool own_arp_source, char *err,
		   size_t errlen)
{
	struct rtnl_link *link = NULL, *change = rtnl_link_alloc();
	struct nl_addr *lladdr = NULL;
	int ret = change ? rtnl_link_get_kernel(sock, 0, name, &link)
			 : -NLE_NOMEM;

	if (ret == 0 && mac) {
		lladdr = nl_addr_build(AF_LLC, mac, 6);
		if (!lladdr)
			ret = -NLE_NOMEM;
		else
			rtnl_link_set_addr(change, lladdr);
	}
	if (ret == 0 && own_arp_source)
		ret = rtnl_link_inet_set_conf(change, IPV4_DEVCONF_ARP_ANNOUNCE,
					      2);
	if (ret == 0) {
		rtnl_link_set_flags(change, IFF_UP);
		ret = rtnl_link_change(sock, link, change, 0);
	}
	if (lladdr)
		nl_addr_put(lladdr);
	if (link)
		rtnl_link_put(link);
	if (change)
		rtnl_link_put(change);
	if (ret < 0)
		return fail(nl_errno(ret), err, errlen, "%s: setting it up: %s",
			    name, nl_geterror(ret));
	return 0;
}

static int add_address(struct nl_sock *sock, const char *name, int ifindex,
		       uint32_t addr, int prefix, char *err, size_t errlen)
{
	struct rtnl_addr *a = rtnl_addr_alloc();
	struct nl_addr *local = ipv4_addr(addr, prefix);
	char text[INET_ADDRSTRLEN];
	int ret = -NLE_NOMEM;

	if (a && local) {
		rtnl_addr_set_ifindex(a, ifindex);
		ret = rtnl_addr_set_local(a, local);
		if (ret == 0)
			ret = rtnl_addr_add(sock, a, 0);
	}
	if (local)
		nl_addr_put(local);
	if (a)
		rtnl_addr_put(a);
	if (ret < 0)
		return fail(nl_errno(ret), err, errlen, "%s: address %s/%d: %s",
			    name, addr_text(addr, text), prefix,
			    nl_geterror(ret));
	return 0;
}

static int add_default_route(struct nl_sock *sock, int ifindex,
			     uint32_t gateway, char *err, size_t errlen)
{
	struct rtnl_route *r = rtnl_route_alloc();
	struct rtnl_nexthop *nh = rtnl_route_nh_alloc();
	struct nl_addr *dst = ipv4_addr(0, 0), *gw = ipv4_addr(gateway, 32);
	char text[INET_ADDRSTRLEN];
	int ret = -NLE_NOMEM;

	if (r && nh && dst && gw) {
		rtnl_route_set_family(r, AF_INET);
		ret = rtnl_route_set_dst(r, dst);
		rtnl_route_nh_set_gateway(nh, gw);
		rtnl_route_nh_set_ifindex(nh, ifindex);
		rtnl_route_add_nexthop(r, nh);
		nh = NULL; /* the route's now */
		if (ret == 0)
			ret = rtnl_route_add(sock, r, NLM_F_CREATE);
	}
	if (nh)
		rtnl_route_nh_free(nh);
	if (r)
		rtnl_route_put(r);
	if (dst)
		nl_addr_put(dst);
	if (gw)
		nl_addr_put(gw);
	if (ret < 0)
		return fail(nl_errno(ret), err, errlen,
			    "default route via %s: %s",
			    addr_text(gateway, text), nl_geterror(ret));
	return 0;
}

/* Writes @value to /proc/sys/@name (the calling thread's namespace's). */
static int write_sysctl(const char *name, const char *value, char *err,
			size_t errlen)
{
	char path[128];
	int fd, e;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/sys/%s", name);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(errno, err, errlen, "%s: %s", path,
			    strerror(errno));
	n = write(fd, value, strlen(value));
	e = n < 0 ? errno : EIO;
	close(fd);
	if (n != (ssize_t)strlen(value))
		return fail(e, err, errlen, "%s = %s: %s", path, value,
			    n < 0 ? strerror(e) : "short write");
	return 0;
}

/* tap0: persistent, owned by the VMM's ids, its vnet header on. */
static int make_tap(uid_t uid, gid_t gid, char *err, size_t errlen)
{
	struct ifreq ifr = { .ifr_flags = IFF_TAP | IFF_NO_PI | IFF_VNET_HDR };
	int fd = open("/dev/net/tun", O_RDWR | O_CLOEXEC);
	const char *what = "TUNSETIFF";
	int ret = 0;

	if (fd < 0)
		return fail(errno, err, errlen, "/dev/net/tun: %s",
			    strerror(errno));
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", GUEST_NET_TAP_NAME);
	if (ioctl(fd, TUNSETIFF, &ifr) == 0) {
		what = "TUNSETOWNER";
		if (ioctl(fd, TUNSETOWNER, (unsigned long)uid) == 0) {
			what = "TUNSETGROUP";
			if (ioctl(fd, TUNSETGROUP, (unsigned long)gid) == 0) {
				what = "TUNSETPERSIST";
				if (ioctl(fd, TUNSETPERSIST, 1ul) == 0)
					what = NULL;
			}
		}
	}
	if (what)
		ret = fail(errno, err, errlen, "%s: %s: %s", GUEST_NET_TAP_NAME,
			   what, strerror(errno));
	close(fd);
	return ret;
}

/* veth0 here, its peer @host_name in the namespace of @host_ns. */
static int make_veth(struct nl_sock *sock, const char *host_name, int host_ns,
		     char *err, size_t errlen)
{
	struct rtnl_link *link = rtnl_link_veth_alloc(), *peer;
	int ret = -NLE_NOMEM;

	if (link) {
		rtnl_link_set_name(link, GUEST_NET_VETH_NAME);
		rtnl_link_set_mtu(link, GUEST_NET_MTU);
		peer = rtnl_link_veth_get_peer(link);
		rtnl_link_set_name(peer, host_name);
		rtnl_link_set_mtu(peer, GUEST_NET_MTU);
		rtnl_link_set_ns_fd(peer, host_ns);
		rtnl_link_put(peer);
		ret = rtnl_link_add(sock, link, NLM_F_CREATE | NLM_F_EXCL);
		rtnl_link_veth_release(link);
	}
	if (ret < 0)
		return fail(nl_errno(ret), err, errlen, "veth %s - %s: %s",
			    GUEST_NET_VETH_NAME, host_name, nl_geterror(ret));
	return 0;
}

/* What the namespace's thread needs, and what it answers. */
struct ns_job {
	const char *pin;
	struct sandbox_net *net; /* NULL: tap0 alone (net_tap_namespace) */
	uid_t tap_uid;
	gid_t tap_gid;
	const struct net_policy *policy;
	struct net_addrs addrs;
	int host_ns;
	char *err;
	size_t errlen;
	int ret;
	bool pin_taken; /* the pin was there already: someone else's */
};

/* tap0, up with its address and MAC: its ifindex, or -errno with @err. */
static int configure_tap(struct ns_job *job, struct nl_sock *sock)
{
	static const unsigned char tap_mac[] = GUEST_NET_TAP_MAC;
	char *err = job->err;
	size_t errlen = job->errlen;
	int tap, ret;

	/* The guest is IPv4-only: no IPv6 addresses, DAD or router
	 * solicitations on our links (ENOENT: no IPv6 at all). */
	ret = write_sysctl("net/ipv6/conf/default/disable_ipv6", "1", err,
			   errlen);
	if (ret < 0 && ret != -ENOENT)
		return ret;
	ret = make_tap(job->tap_uid, job->tap_gid, err, errlen);
	if (ret < 0)
		return ret;
	tap = (int)if_nametoindex(GUEST_NET_TAP_NAME);
	if (!tap)
		return fail(errno, err, errlen, "%s vanished: %s",
			    GUEST_NET_TAP_NAME, strerror(errno));
	ret = link_up(sock, "lo", NULL, false, err, errlen);
	if (ret == 0)
		ret = add_address(sock, GUEST_NET_TAP_NAME, tap,
				  GUEST_NET_GATEWAY_ADDR, GUEST_NET_PREFIX, err,
				  errlen);
	if (ret == 0)
		ret = link_up(sock, GUEST_NET_TAP_NAME, tap_mac, false, err,
			      errlen);
	return ret < 0 ? ret : tap;
}

/* A sandbox's: tap0, veth0, both veth ends' addresses, the route out,
 * the policy. */
static int configure_sandbox(struct ns_job *job, struct nl_sock *host,
			     struct nl_sock *sock)
{
	struct sandbox_net *net = job->net;
	char *err = job->err;
	size_t errlen = job->errlen;
	int tap, veth, host_veth, ret;

	/* Routing between tap0 and veth0; the policy's NAT makes the
	 * guest's packets come from host_address, veth0's own address,
	 * which tap0 must accept, and reverse-path filtering must not
	 * judge (the namespace may inherit the host's settings). */
	ret = write_sysctl("net/ipv4/ip_forward", "1", err, errlen);
	if (ret == 0)
		ret = write_sysctl("net/ipv4/conf/all/rp_filter", "0", err,
				   errlen);
	if (ret == 0)
		ret = write_sysctl("net/ipv4/conf/default/rp_filter", "0", err,
				   errlen);
	if (ret < 0)
		return ret;
	tap = configure_tap(job, sock);
	if (tap < 0)
		return tap;
	ret = write_sysctl("net/ipv4/conf/" GUEST_NET_TAP_NAME "/accept_local",
			   "1", err, errlen);
	if (ret == 0)
		ret = make_veth(sock, net->host_veth, job->host_ns, err,
				errlen);
	if (ret < 0)
		return ret;
	veth = (int)if_nametoindex(GUEST_NET_VETH_NAME);
	if (!veth)
		return fail(errno, err, errlen, "%s vanished: %s",
			    GUEST_NET_VETH_NAME, strerror(errno));
	/* A DNS answer, after the policy's NAT, comes in on veth0 from the
	 * gateway: an address of this namespace's own. */
	ret = write_sysctl("net/ipv4/conf/" GUEST_NET_VETH_NAME "/accept_local",
			   "1", err, errlen);
	if (ret == 0)
		ret = add_address(sock, GUEST_NET_VETH_NAME, veth,
				  net->host_address, 30, err, errlen);
	if (ret == 0)
		ret = link_up(sock, GUEST_NET_VETH_NAME, NULL, false, err,
			      errlen);
	if (ret == 0)
		ret = add_default_route(sock, veth, job->addrs.host_peer, err,
					errlen);
	if (ret < 0)
		return ret;
	/* The host's end, through the socket that stayed in its namespace;
	 * if_nametoindex would look here. */
	struct rtnl_link *link = NULL;
	ret = rtnl_link_get_kernel(host, 0, net->host_veth, &link);
	if (ret < 0)
		return fail(nl_errno(ret), err, errlen, "%s: %s",
			    net->host_veth, nl_geterror(ret));
	host_veth = rtnl_link_get_ifindex(link);
	rtnl_link_put(link);
	ret = add_address(host, net->host_veth, host_veth, job->addrs.host_peer,
			  30, err, errlen);
	if (ret == 0)
		ret = link_up(host, net->host_veth, NULL, true, err, errlen);
	if (ret < 0)
		return ret;
	return bpf_policy_attach(&net->policy, tap, veth, &job->addrs,
				 job->policy, err, errlen);
}

static void *ns_thread(void *arg)
{
	struct ns_job *job = arg;
	struct nl_sock *host, *sock = NULL;

	job->ret = route_socket(&host, job->err, job->errlen, "host");
	if (job->ret < 0)
		return NULL;
	if (unshare(CLONE_NEWNET) < 0) {
		job->ret = fail(errno, job->err, job->errlen,
				"unshare(CLONE_NEWNET): %s", strerror(errno));
	} else if (mount("/proc/thread-self/ns/net", job->pin, NULL, MS_BIND,
			 NULL) < 0) {
		job->ret =
			fail(errno, job->err, job->errlen, "%s: bind mount: %s",
			     job->pin, strerror(errno));
	} else {
		job->ret =
			route_socket(&sock, job->err, job->errlen, "sandbox");
		if (job->ret == 0 && job->net)
			job->ret = configure_sandbox(job, host, sock);
		else if (job->ret == 0)
			job->ret = configure_tap(job, sock);
		if (job->ret > 0) /* tap0's ifindex */
			job->ret = 0;
	}
	if (sock)
		nl_socket_free(sock);
	nl_socket_free(host);
	return NULL;
}

/*
 * Creates @job's pin and runs its thread.  0, or -errno with @err;
 * job->pin_taken when the pin was there already (someone else's).
 */
static int run_job(struct ns_job *job)
{
	pthread_t thread;
	int fd, e;

	fd = open(job->pin, O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0444);
	if (fd < 0) {
		job->pin_taken = errno == EEXIST;
		return fail(errno, job->err, job->errlen, "%s: %s", job->pin,
			    strerror(errno));
	}
	close(fd);
	job->host_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (job->host_ns < 0)
		return fail(errno, job->err, job->errlen,
			    "/proc/self/ns/net: %s", strerror(errno));
	e = pthread_create(&thread, NULL, ns_thread, job);
	if (e)
		job->ret = fail(e, job->err, job->errlen,
				"namespace thread: %s", strerror(e));
	else
		pthread_join(thread, NULL);
	close(job->host_ns);
	return job->ret;
}

/* Adds @a to @addrs unless it is in the pool (rule 1's whole: other
 * sandboxes' veth ends would only crowd the map) or there already. */
static int add_host_address(struct net_addrs *addrs, uint32_t a, char *err,
			    size_t errlen)
{
	if (net_cidr_contains(addrs->pool, a))
		return 0;
	for (uint32_t i = 0; i < addrs->n_host_addrs; i++)
		if (addrs->host_addrs[i] == a)
			return 0;
	if (addrs->n_host_addrs == NET_MAX_HOST_ADDRS)
		return fail(E2BIG, err, errlen,
			    "the host has more than %d IPv4 addresses outside "
			    "network_cidr (broadcast ones included): a sandbox "
			    "could reach those past them, so none is made",
			    NET_MAX_HOST_ADDRS);
	addrs->host_addrs[addrs->n_host_addrs++] = a;
	return 0;
}

static uint32_t ipv4_of(const struct sockaddr *sa)
{
	return ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
}

/* Interface address @i and what the host receives as its own with it:
 * its subnet's broadcast address (the kernel's broadcast route for it,
 * whatever the address's own broadcast setting), the subnet's first
 * address (older kernels route it as broadcast too), and the broadcast
 * address it was given. */
static int add_interface_address(struct net_addrs *addrs,
				 const struct ifaddrs *i, char *err,
				 size_t errlen)
{
	uint32_t a = ipv4_of(i->ifa_addr);
	uint32_t mask = i->ifa_netmask ? ipv4_of(i->ifa_netmask) : ~0u;
	int ret = add_host_address(addrs, a, err, errlen);

	if (ret == 0 && ~mask > 1u)
		ret = add_host_address(addrs, a | ~mask, err, errlen);
	if (ret == 0 && ~mask > 1u)
		ret = add_host_address(addrs, a & mask, err, errlen);
	if (ret < 0)
		return ret;
	if ((i->ifa_flags & IFF_BROADCAST) && i->ifa_broadaddr &&
	    i->ifa_broadaddr->sa_family == AF_INET)
		return add_host_address(addrs, ipv4_of(i->ifa_broadaddr), err,
					errlen);
	return 0;
}

/*
 * The addresses the host receives as its own, which no guest may reach:
 * every interface's and its subnet's broadcast addresses (a datagram to
 * one reaches the host's sockets as well).  All of them or -errno with
 * @err: a list cut short would let the guest reach the rest.
 */
static int host_addresses(struct net_addrs *addrs, char *err, size_t errlen)
{
	struct ifaddrs *list, *i;
	int ret = 0;

	addrs->n_host_addrs = 0;
	if (getifaddrs(&list) < 0)
		return fail(errno, err, errlen,
			    "the host's addresses (getifaddrs): %s",
			    strerror(errno));
	for (i = list; i && ret == 0; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET)
			ret = add_interface_address(addrs, i, err, errlen);
	freeifaddrs(list);
	return ret;
}

static bool is_netns(const char *path)
{
	struct statfs fs;

	return statfs(path, &fs) == 0 && fs.f_type == NSFS_MAGIC;
}

void net_pin_remove(const char *path)
{
	if (is_netns(path))
		umount2(path, MNT_DETACH);
	unlink(path);
}

/* Deletes host link @name (and so its veth peer); 0 when gone, else
 * libnl's error. */
static int delete_link(struct nl_sock *sock, const char *name)
{
	struct rtnl_link *link = rtnl_link_alloc();
	int ret = -NLE_NOMEM;

	if (link) {
		rtnl_link_set_name(link, name);
		ret = rtnl_link_delete(sock, link);
		rtnl_link_put(link);
	}
	return ret == -NLE_NODEV || ret == -NLE_OBJ_NOTFOUND ? 0 : ret;
}

int sandbox_net_create(struct sandbox_net *net, const struct net_config *cfg,
		       uint32_t index, const char *netns_path, uid_t tap_uid,
		       gid_t tap_gid, const struct net_policy *policy,
		       char *err, size_t errlen)
{
	uint32_t base = slot_base(cfg, index);
	struct ns_job job = {
		.pin = netns_path,
		.net = net,
		.tap_uid = tap_uid,
		.tap_gid = tap_gid,
		.policy = policy,
		.err = err,
		.errlen = errlen,
		.addrs = {
			.host_address = base + 2,
			.host_peer = base + 1,
			.pool = cfg->pool,
			.dns_server = cfg->n_dns ? cfg->dns_servers[0] : 0,
			.dns_always = cfg->dns_always,
		},
	};
	int ret;

	memset(net, 0, sizeof(*net));
	if (!base)
		return fail(ENOSPC, err, errlen,
			    "sandbox %u: past the end of network_cidr's /%u",
			    index, cfg->pool.prefix);
	ret = host_addresses(&job.addrs, err, errlen);
	if (ret < 0)
		return ret;
	net->index = index;
	net->host_address = base + 2;
	snprintf(net->host_veth, sizeof(net->host_veth), "%s%u",
		 cfg->ifname_prefix, index);
	if (snprintf(net->netns_path, sizeof(net->netns_path), "%s",
		     netns_path) >= (int)sizeof(net->netns_path))
		return fail(ENAMETOOLONG, err, errlen, "%s: path too long",
			    netns_path);
	ret = run_job(&job);
	if (ret < 0) {
		char ignored[256]; /* the failure's message is the one to keep
				    */

		if (job.pin_taken)
			net->netns_path[0] = '\0'; /* not ours */
		sandbox_net_destroy(net, ignored, sizeof(ignored));
	}
	return ret;
}

int net_tap_namespace(const char *netns_path, uid_t tap_uid, gid_t tap_gid,
		      char *err, size_t errlen)
{
	struct ns_job job = {
		.pin = netns_path,
		.tap_uid = tap_uid,
		.tap_gid = tap_gid,
		.err = err,
		.errlen = errlen,
	};

	int ret = run_job(&job);

	if (ret < 0 && !job.pin_taken)
		net_pin_remove(netns_path);
	return ret;
}

int sandbox_net_set_policy(struct sandbox_net *net,
			   const struct net_policy *policy, char *err,
			   size_t errlen)
{
	return bpf_policy_update(net->policy, policy, err, errlen);
}

int sandbox_net_counters(struct sandbox_net *net, struct net_counters *out,
			 char *err, size_t errlen)
{
	return bpf_policy_counters(net->policy, out, err, errlen);
}

int sandbox_net_destroy(struct sandbox_net *net, char *err, size_t errlen)
{
	struct nl_sock *sock = NULL;
	int ret = 0;

	if (net->policy)
		bpf_policy_destroy(net->policy);
	net->policy = NULL;
	if (net->host_veth[0]) {
		ret = route_socket(&sock, err, errlen, "host");
		if (ret == 0) {
			ret = delete_link(sock, net->host_veth);
			nl_socket_free(sock);
			if (ret < 0)
				ret = fail(nl_errno(ret), err, errlen,
					   "%s: not deleted: %s",
					   net->host_veth, nl_geterror(ret));
		}
		net->host_veth[0] = '\0';
	}
	if (net->netns_path[0])
		net_pin_remove(net->netns_path);
	net->netns_path[0] = '\0';
	return ret;
}

/* Host links named @prefix*: a dead daemon's veth ends.  Their count. */
static int remove_stale_links(struct nl_sock *sock, const char *prefix)
{
	struct nl_cache *cache;
	struct nl_object *obj;
	size_t len = strlen(prefix);
	int removed = 0;

	if (rtnl_link_alloc_cache(sock, AF_UNSPEC, &cache) < 0)
		return 0;
	for (obj = nl_cache_get_first(cache); obj;
	     obj = nl_cache_get_next(obj)) {
		const char *name = rtnl_link_get_name((struct rtnl_link *)obj);

		if (name && !strncmp(name, prefix, len) &&
		    delete_link(sock, name) == 0)
			removed++;
	}
	nl_cache_free(cache);
	return removed;
}

/* Pins <run_dir>/<dir>/NET_PIN_NAME.  Their count. */
static int remove_stale_pins(const char *run_dir)
{
	DIR *dp = opendir(run_dir);
	struct dirent *e;
	int removed = 0;

	while (dp && (e = readdir(dp))) {
		char path[PATH_MAX];

		if (e->d_name[0] == '.' ||
		    snprintf(path, sizeof(path), "%s/%s/%s", run_dir, e->d_name,
			     NET_PIN_NAME) >= (int)sizeof(path) ||
		    access(path, F_OK) < 0)
			continue;
		net_pin_remove(path);
		removed++;
	}
	if (dp)
		closedir(dp);
	return removed;
}

/*
 * Runs nft commands @cmds.  0, or -errno with nft's message in @err.
 * libnftables exit()s when it cannot open its netlink socket: a kernel
 * without nfnetlink must be found out here first.
 */
static int run_nft(const char *cmds, char *err, size_t errlen)
{
	int probe =
		socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);

	if (probe < 0)
		return fail(errno, err, errlen,
			    "nftables cannot work here: a netfilter netlink "
			    "socket: %s (load the nfnetlink and nf_tables "
			    "modules, or give every template network = none)",
			    strerror(errno));
	close(probe);

	struct nft_ctx *nft = nft_ctx_new(NFT_CTX_DEFAULT);
	int ret = 0;

	if (!nft)
		return fail(ENOMEM, err, errlen, "nftables: no context");
	nft_ctx_buffer_output(nft);
	nft_ctx_buffer_error(nft);
	/* nft says what was wrong in text only: EINVAL stands for it. */
	if (nft_run_cmd_from_buffer(nft, cmds))
		ret = fail(EINVAL, err, errlen, "nftables: %s",
			   nft_ctx_get_error_buffer(nft));
	nft_ctx_free(nft);
	return ret;
}

/* Turns on the host's IPv4 forwarding; *@was_off says it was off. */
static int host_forwarding(bool *was_off, char *err, size_t errlen)
{
	const char *path = "/proc/sys/net/ipv4/ip_forward";
	char was = '0';
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		if (read(fd, &was, 1) != 1)
			was = '0';
		close(fd);
	}
	*was_off = was != '1';
	return *was_off ? write_sysctl("net/ipv4/ip_forward", "1", err, errlen)
			: 0;
}

int net_host_setup(const struct net_config *cfg, const char *run_dir,
		   struct net_host_found *found, char *err, size_t errlen)
{
	char cmds[2048], pool[INET_ADDRSTRLEN], dns[INET_ADDRSTRLEN];
	char dns_rule[128] = "";
	struct nl_sock *sock;
	int ret = route_socket(&sock, err, errlen, "host");

	memset(found, 0, sizeof(*found));
	if (ret < 0)
		return ret;
	found->stale_links = remove_stale_links(sock, cfg->ifname_prefix);
	nl_socket_free(sock);
	found->stale_pins = remove_stale_pins(run_dir);
	ret = host_forwarding(&found->forwarding_was_off, err, errlen);
	if (ret < 0)
		return ret;
	if (cfg->n_dns)
		snprintf(dns_rule, sizeof(dns_rule),
			 "    iifname \"%s*\" ip daddr %s "
			 "meta l4proto { tcp, udp } th dport 53 accept\n",
			 cfg->ifname_prefix,
			 addr_text(cfg->dns_servers[0], dns));
	/*
	 * Made anew in one transaction: a dead daemon's table goes too.
	 * The input chain lets the sandboxes' veths reach the host only with
	 * answers to what the host opened and DNS to the resolver the policy
	 * sends it to: the policy's host_addrs has the host's addresses as
	 * they were when a sandbox was made, this any it gains later.  The
	 * forward chain lets into the veths only answers to what the
	 * sandboxes opened: connections to a sandbox are the host's own
	 * (output), never a neighbour's that routes the pool through the
	 * host, nor another sandbox's.
	 */
	snprintf(
		cmds, sizeof(cmds),
		"table ip %1$s\n"
		"delete table ip %1$s\n"
		"table ip %1$s {\n"
		"  chain postrouting {\n"
		"    type nat hook postrouting priority srcnat; policy accept;\n"
		"    ip saddr %2$s/%3$u oifname != \"%4$s*\" masquerade\n"
		"  }\n"
		"  chain input {\n"
		"    type filter hook input priority filter; policy accept;\n"
		"    iifname \"%4$s*\" ct state established,related accept\n"
		"%5$s"
		"    iifname \"%4$s*\" drop\n"
		"  }\n"
		"  chain forward {\n"
		"    type filter hook forward priority filter; policy accept;\n"
		"    oifname \"%4$s*\" ct state established,related accept\n"
		"    oifname \"%4$s*\" drop\n"
		"  }\n"
		"}\n",
		cfg->nft_table, addr_text(cfg->pool.addr, pool),
		cfg->pool.prefix, cfg->ifname_prefix, dns_rule);
	return run_nft(cmds, err, errlen);
}

int net_host_teardown(const struct net_config *cfg, char *err, size_t errlen)
{
	char cmds[128];

	snprintf(cmds, sizeof(cmds), "table ip %s\ndelete table ip %s\n",
		 cfg->nft_table, cfg->nft_table);
	return run_nft(cmds, err, errlen);
}
