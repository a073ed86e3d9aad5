/* SPDX-License-Identifier: Apache-2.0 */
/*
 * netns.h - a sandbox's network: its own namespace holding tap0 and veth0
 * (guest_net.h), the host end of the veth, the sandbox's /30 from the
 * daemon's pool, and the eBPF policy (bpf/policy.h) on both interfaces.
 * Made while a clone is restored for the warm pool, never on the handout
 * path; torn down with the clone.  The namespace is pinned on a file in the
 * clone's run directory, which the VMM joins (its jail's --netns) and
 * opens tap0 in (--net-tap).
 *
 * The host side (net_host_setup, once per daemon): IPv4 forwarding, a
 * masquerade rule for the pool, filters that let the sandboxes' veths
 * reach the host only with answers and DNS and let into them only answers
 * (connections to a sandbox are the host's own), in an nftables table of
 * this state directory's own, and removal of what a dead
 * daemon of the same state directory left (host veths with its name prefix,
 * pinned namespaces).
 *
 * Errors: 0, or -errno with a message naming the interface, address or
 * file (libnl's and nft's errors mapped to the errno naming them); nothing
 * here logs: what is worth saying comes back to the caller.
 */
#ifndef THAW_POOL_NETNS_H
#define THAW_POOL_NETNS_H

#include <limits.h>
#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "bpf/policy.h"

/* The daemon's network settings (config.h fills them). */
struct net_config {
	struct net_cidr pool; /* network_cidr, default 10.200.0.0/16 */
	uint32_t n_dns;
	uint32_t dns_servers[4]; /* dns_servers; default: the host's */
	bool dns_always;	 /* DNS even when allow_internet is false */
	char ifname_prefix[8]; /* host veths: "th" + a hash of the state dir */
	char nft_table[32];    /* "thaw_" + that hash */
};

/* A sandbox's pin is <run_dir>/<its directory>/NET_PIN_NAME: where
 * net_host_setup() looks for a dead daemon's. */
#define NET_PIN_NAME "netns"

struct sandbox_net {
	uint32_t index;	       /* which /30 of the pool */
	uint32_t host_address; /* host order */
	char netns_path[PATH_MAX];
	char host_veth[IF_NAMESIZE];
	struct bpf_policy *policy;
};

/* What net_host_setup() found and changed, for its caller to say. */
struct net_host_found {
	int stale_links;	 /* a dead daemon's host veths, removed */
	int stale_pins;		 /* its pinned namespaces, removed */
	bool forwarding_was_off; /* net.ipv4.ip_forward, now 1 */
};

int net_host_setup(const struct net_config *cfg, const char *run_dir,
		   struct net_host_found *found, char *err, size_t errlen);
int net_host_teardown(const struct net_config *cfg, char *err, size_t errlen);

/*
 * Makes sandbox @index's namespace at @netns_path with tap0 owned by
 * @tap_uid:@tap_gid (the VMM's jail ids), veth0, addresses, routes and
 * @policy.
 */
int sandbox_net_create(struct sandbox_net *net, const struct net_config *cfg,
		       uint32_t index, const char *netns_path, uid_t tap_uid,
		       gid_t tap_gid, const struct net_policy *policy,
		       char *err, size_t errlen);
/* Replaces the policy (map writes only). */
int sandbox_net_set_policy(struct sandbox_net *net,
			   const struct net_policy *policy, char *err,
			   size_t errlen);
int sandbox_net_counters(struct sandbox_net *net, struct net_counters *out,
			 char *err, size_t errlen);
/* Removes the namespace (and so tap0 and both veth ends) and the pin,
 * all of it even when a step fails (the first failure is returned). */
int sandbox_net_destroy(struct sandbox_net *net, char *err, size_t errlen);

/*
 * A namespace holding tap0 alone (no way out), pinned at @netns_path: a
 * template boots in one, so that its snapshot has the network device.
 */
int net_tap_namespace(const char *netns_path, uid_t tap_uid, gid_t tap_gid,
		      char *err, size_t errlen);
/* Unmounts and removes a pin (the namespace goes with its last process). */
void net_pin_remove(const char *path);

#endif
