/* SPDX-License-Identifier: Apache-2.0 */
/*
 * guest_net.h - the guest-facing side of a sandbox's network, identical in
 * every sandbox.
 *
 * Clones restored from one snapshot share the guest's MAC, address and
 * routes: they are in the snapshot's memory.  So every sandbox gets its own
 * network namespace holding a TAP device of the same name with the same
 * addresses (DESIGN.md "Network per sandbox"), and these constants are all
 * the VMM (the guest's kernel command line, the device's MAC), the daemon
 * (the TAP) and the eBPF policy (what "the guest" and "its gateway" are)
 * have to agree on.  The TAP's MAC is fixed too, so the guest's cached
 * neighbour entry for its gateway stays right in every clone.
 *
 * Addresses are in host byte order.
 */
#ifndef THAW_COMMON_GUEST_NET_H
#define THAW_COMMON_GUEST_NET_H

/* 169.254.0.20/30: the guest's link, as E2B's sandboxes have it. */
#define GUEST_NET_GUEST_ADDR 0xa9fe0015u   /* 169.254.0.21, eth0 */
#define GUEST_NET_GATEWAY_ADDR 0xa9fe0016u /* 169.254.0.22, the TAP */
#define GUEST_NET_PREFIX 30
#define GUEST_NET_GUEST_ADDR_STR "169.254.0.21"
#define GUEST_NET_GATEWAY_ADDR_STR "169.254.0.22"
#define GUEST_NET_NETMASK_STR "255.255.255.252"
/* The guest resolves through its gateway; the policy sends that on to
 * the daemon's dns_servers. */
#define GUEST_NET_DNS_ADDR_STR GUEST_NET_GATEWAY_ADDR_STR

/* Locally administered, unicast. */
#define GUEST_NET_GUEST_MAC                        \
	{                                          \
		0x06, 0x00, 0xac, 0x10, 0x00, 0x02 \
	}
#define GUEST_NET_TAP_MAC                          \
	{                                          \
		0x06, 0x00, 0xac, 0x10, 0x00, 0x01 \
	}
/* The TAP's name inside each sandbox's namespace, and the namespace's end
 * of its veth pair. */
#define GUEST_NET_TAP_NAME "tap0"
#define GUEST_NET_VETH_NAME "veth0"
#define GUEST_NET_MTU 1500

#endif
