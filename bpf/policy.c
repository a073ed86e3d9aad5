// SPDX-License-Identifier: Apache-2.0
/*
 * policy.c - loads a sandbox's copy of the policy programs (policy.bpf.c,
 * through the skeleton bpftool generates), fills their maps and attaches
 * them to the TC ingress hooks (clsact) of tap0 and veth0 in the caller's
 * network namespace; later updates write maps only.
 *
 * An update must never let a packet see half a policy (allow_out of the
 * new one with deny_out of the old, or allow_internet ahead of the lists).
 * The lists live in two generations in each trie (policy_abi.h): an update
 * writes the new lists into the idle generation, then flips one byte of
 * the config map (the generation bit and allow_internet together).  It
 * writes only the difference between what the idle generation holds (the
 * policy before the live one) and the new lists.  A
 * packet reads that byte once and looks up only its generation, so it sees
 * the old policy or the new one whole.  The old generation's entries stay
 * until the next update rewrites them: a packet that read the
 * old byte just before the flip (it runs for microseconds, in an RCU
 * section) is done long before another bpf_policy_update comes round.
 *
 * A sandbox's updates come one at a time (the caller serializes them).
 * Errors: -errno with a message naming the step, map, field or value.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpf/policy.bpf.skel.h"
#include "bpf/policy.h"

struct bpf_policy {
	struct policy_bpf *skel;
	struct policy_config cfg; /* as in the config map */
	struct net_policy live;	  /* the live generation's lists */
	struct net_policy idle;	  /* what the other one holds */
	bool idle_unknown;	  /* an update failed half way: clear it */
};

static int check_cidrs(const char *name, const struct net_cidr *c, uint32_t n,
		       char *err, size_t errlen)
{
	if (n > NET_POLICY_MAX_CIDRS) {
		snprintf(err, errlen, "%s has %u entries, at most %d", name, n,
			 NET_POLICY_MAX_CIDRS);
		return -E2BIG;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t mask = c[i].prefix ? ~0u << (32 - c[i].prefix) : 0;

		if (c[i].prefix > 32 || (c[i].addr & ~mask)) {
			snprintf(err, errlen,
				 "%s[%u]: %#x/%u is not a CIDR (prefix past "
				 "32 or host bits set)",
				 name, i, c[i].addr, c[i].prefix);
			return -EINVAL;
		}
	}
	return 0;
}

static struct policy_lpm_key lpm_key(uint32_t gen, const struct net_cidr *c)
{
	struct policy_lpm_key k = {
		.prefixlen = 32 + c->prefix,
		.gen = htonl(gen),
		.addr = htonl(c->addr),
	};

	return k;
}

static bool listed(const struct net_cidr *c, uint32_t n,
		   const struct net_cidr *x)
{
	for (uint32_t i = 0; i < n; i++)
		if (c[i].addr == x->addr && c[i].prefix == x->prefix)
			return true;
	return false;
}

static int map_error(struct bpf_map *map, const char *what,
		     const struct net_cidr *c, uint32_t gen, char *err,
		     size_t errlen)
{
	int e = errno;

	snprintf(err, errlen, "%s %#x/%u in map %s (generation %u): %s", what,
		 c->addr, c->prefix, bpf_map__name(map), gen, strerror(e));
	return -e;
}

/* Turns generation @gen of @map from list @from into list @to, writing
 * only the difference: an update that changes one CIDR costs two
 * syscalls, not a hundred. */
static int sync_list(struct bpf_map *map, uint32_t gen,
		     const struct net_cidr *from, uint32_t n_from,
		     const struct net_cidr *to, uint32_t n_to, char *err,
		     size_t errlen)
{
	int fd = bpf_map__fd(map);
	uint8_t one = 1;

	for (uint32_t i = 0; i < n_from; i++) {
		struct policy_lpm_key k = lpm_key(gen, &from[i]);

		/* A list may name one CIDR twice: gone at the first. */
		if (!listed(to, n_to, &from[i]) &&
		    bpf_map_delete_elem(fd, &k) && errno != ENOENT)
			return map_error(map, "removing", &from[i], gen, err,
					 errlen);
	}
	for (uint32_t i = 0; i < n_to; i++) {
		struct policy_lpm_key k = lpm_key(gen, &to[i]);

		if (!listed(from, n_from, &to[i]) &&
		    bpf_map_update_elem(fd, &k, &one, BPF_ANY))
			return map_error(map, "adding", &to[i], gen, err,
					 errlen);
	}
	return 0;
}

/* Removes every entry of generation @gen from @map: after a failed
 * update, when what it holds is no list's. */
static int clear_gen(struct bpf_map *map, uint32_t gen, char *err,
		     size_t errlen)
{
	struct policy_lpm_key keys[2 * NET_POLICY_MAX_CIDRS], k;
	int fd = bpf_map__fd(map);
	uint32_t n = 0;
	void *prev = NULL;

	while (n < 2 * NET_POLICY_MAX_CIDRS &&
	       bpf_map_get_next_key(fd, prev, &k) == 0) {
		if (k.gen == htonl(gen))
			keys[n++] = k;
		prev = &k;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (bpf_map_delete_elem(fd, &keys[i]) && errno != ENOENT) {
			int e = errno;

			snprintf(err, errlen,
				 "clearing generation %u of map %s: %s", gen,
				 bpf_map__name(map), strerror(e));
			return -e;
		}
	}
	return 0;
}

static int write_config(struct bpf_policy *p, char *err, size_t errlen)
{
	uint32_t zero = 0;

	if (bpf_map_update_elem(bpf_map__fd(p->skel->maps.config), &zero,
				&p->cfg, BPF_ANY)) {
		int e = errno;

		snprintf(err, errlen, "writing map config: %s", strerror(e));
		return -e;
	}
	return 0;
}

int bpf_policy_update(struct bpf_policy *p, const struct net_policy *policy,
		      char *err, size_t errlen)
{
	uint32_t gen = (p->cfg.state & POLICY_STATE_GEN) ^ 1;
	struct bpf_map *allow = p->skel->maps.allow_out;
	struct bpf_map *deny = p->skel->maps.deny_out;
	int ret = check_cidrs("allow_out", policy->allow_out, policy->n_allow,
			      err, errlen);

	if (ret == 0)
		ret = check_cidrs("deny_out", policy->deny_out, policy->n_deny,
				  err, errlen);
	if (ret == 0 && p->idle_unknown) {
		ret = clear_gen(allow, gen, err, errlen);
		if (ret == 0)
			ret = clear_gen(deny, gen, err, errlen);
		if (ret == 0) {
			memset(&p->idle, 0, sizeof(p->idle));
			p->idle_unknown = false;
		}
	}
	if (ret < 0)
		return ret;
	/* Until both are through, the idle generation is half of each. */
	p->idle_unknown = true;
	ret = sync_list(allow, gen, p->idle.allow_out, p->idle.n_allow,
			policy->allow_out, policy->n_allow, err, errlen);
	if (ret == 0)
		ret = sync_list(deny, gen, p->idle.deny_out, p->idle.n_deny,
				policy->deny_out, policy->n_deny, err, errlen);
	if (ret < 0)
		return ret;
	p->idle = *policy;
	p->idle_unknown = false;
	p->cfg.state =
		gen | (policy->allow_internet ? POLICY_STATE_INTERNET : 0);
	ret = write_config(p, err, errlen);
	if (ret < 0) {
		p->cfg.state ^= POLICY_STATE_GEN; /* still the old one */
		return ret;
	}
	p->idle = p->live;
	p->live = *policy;
	return 0;
}

static int fill_maps(struct bpf_policy *p, const struct net_addrs *a,
		     const struct net_policy *policy, char *err, size_t errlen)
{
	int fd = bpf_map__fd(p->skel->maps.host_addrs);
	uint8_t one = 1;

	if (a->n_host_addrs > NET_MAX_HOST_ADDRS || a->pool.prefix > 32) {
		snprintf(err, errlen,
			 "net_addrs: %u host addresses (at most %d), pool "
			 "prefix /%u",
			 a->n_host_addrs, NET_MAX_HOST_ADDRS, a->pool.prefix);
		return -EINVAL;
	}
	for (uint32_t i = 0; i < a->n_host_addrs; i++) {
		if (bpf_map_update_elem(fd, &a->host_addrs[i], &one, BPF_ANY)) {
			int e = errno;

			snprintf(err, errlen,
				 "adding host address %#x to map host_addrs: "
				 "%s",
				 a->host_addrs[i], strerror(e));
			return -e;
		}
	}
	p->cfg = (struct policy_config){
		.host_address = a->host_address,
		.host_peer = a->host_peer,
		.pool_addr = a->pool.addr,
		.pool_mask = a->pool.prefix ? ~0u << (32 - a->pool.prefix) : 0,
		.dns_server = a->dns_server,
		.flags = a->dns_always ? POLICY_FLAG_DNS_ALWAYS : 0,
		.datagram_idle_s = a->datagram_idle_s ? a->datagram_idle_s
						      : POLICY_DATAGRAM_IDLE_S,
		/* Generation 1 live and empty: the first update fills 0. */
		.state = POLICY_STATE_GEN,
	};
	return bpf_policy_update(p, policy, err, errlen);
}

/* Attaches @prog to @ifindex's ingress; *@created says whether the clsact
 * qdisc is ours (to remove on failure). */
static int tc_attach(struct bpf_program *prog, int ifindex, bool *created,
		     char *err, size_t errlen)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1, .priority = 1,
			    .prog_fd = bpf_program__fd(prog),
			    .flags = BPF_TC_F_REPLACE);
	char name[IF_NAMESIZE] = "?";
	int r = bpf_tc_hook_create(&hook);

	*created = r == 0;
	if (r && r != -EEXIST)
		goto fail;
	r = bpf_tc_attach(&hook, &opts);
	if (r == 0)
		return 0;
fail:
	if_indextoname(ifindex, name);
	snprintf(err, errlen, "attaching %s to ingress of %s (ifindex %d): %s",
		 bpf_program__name(prog), name, ifindex, strerror(-r));
	return r;
}

static void tc_remove(int ifindex, bool created)
{
	DECLARE_LIBBPF_OPTS(bpf_tc_hook, hook, .ifindex = ifindex,
			    .attach_point = BPF_TC_INGRESS);
	DECLARE_LIBBPF_OPTS(bpf_tc_opts, opts, .handle = 1, .priority = 1);

	if (created) {
		hook.attach_point = BPF_TC_INGRESS | BPF_TC_EGRESS;
		bpf_tc_hook_destroy(&hook);
	} else {
		bpf_tc_detach(&hook, &opts);
	}
}

int bpf_policy_attach(struct bpf_policy **out, int tap_ifindex,
		      int veth_ifindex, const struct net_addrs *addrs,
		      const struct net_policy *policy, char *err, size_t errlen)
{
	struct bpf_policy *p = calloc(1, sizeof(*p));
	bool tap_created;
	bool veth_created;
	int ret;

	if (!p) {
		snprintf(err, errlen, "bpf policy: out of memory");
		return -ENOMEM;
	}
	p->skel = policy_bpf__open();
	if (!p->skel) {
		ret = -errno;
		snprintf(err, errlen, "opening the policy's BPF object: %s",
			 strerror(-ret));
		free(p);
		return ret;
	}
	ret = policy_bpf__load(p->skel);
	if (ret < 0) {
		snprintf(err, errlen,
			 "loading the policy's BPF programs and maps: %s",
			 strerror(-ret));
		goto fail;
	}
	/* Maps full before any packet reaches the programs. */
	ret = fill_maps(p, addrs, policy, err, errlen);
	if (ret < 0)
		goto fail;
	ret = tc_attach(p->skel->progs.tap_ingress, tap_ifindex, &tap_created,
			err, errlen);
	if (ret < 0)
		goto fail;
	ret = tc_attach(p->skel->progs.veth_ingress, veth_ifindex,
			&veth_created, err, errlen);
	if (ret < 0) {
		tc_remove(tap_ifindex, tap_created);
		goto fail;
	}
	*out = p;
	return 0;
fail:
	bpf_policy_destroy(p);
	return ret;
}

int bpf_policy_counters(struct bpf_policy *p, struct net_counters *out,
			char *err, size_t errlen)
{
	int fd = bpf_map__fd(p->skel->maps.counters);
	int ncpu = libbpf_num_possible_cpus();
	struct policy_count *v;

	if (ncpu <= 0) {
		snprintf(err, errlen, "counting possible CPUs: %s",
			 strerror(-ncpu));
		return ncpu < 0 ? ncpu : -EIO;
	}
	v = calloc(ncpu, sizeof(*v));
	if (!v) {
		snprintf(err, errlen, "bpf counters: out of memory");
		return -ENOMEM;
	}
	memset(out, 0, sizeof(*out));
	for (uint32_t i = 0; i < NET_VERDICTS; i++) {
		if (bpf_map_lookup_elem(fd, &i, v)) {
			int e = errno;

			snprintf(err, errlen, "reading map counters[%u]: %s", i,
				 strerror(e));
			free(v);
			return -e;
		}
		for (int c = 0; c < ncpu; c++) {
			out->packets[i] += v[c].packets;
			out->bytes[i] += v[c].bytes;
		}
	}
	free(v);
	return 0;
}

void bpf_policy_destroy(struct bpf_policy *p)
{
	if (!p)
		return;
	policy_bpf__destroy(p->skel);
	free(p);
}
