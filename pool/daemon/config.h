/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config.h - thawd's configuration: an INI file (parsed with inih), or the
 * embedded default when no file is given.  Every key is optional; the
 * default text (config_default_text, printed by `thaw daemon
 * --print-config`) documents them all.
 *
 *	[daemon]		socket, socket_group, state_dir, token,
 *				token_file, max_sandboxes, max_connections,
 *				max_connections_per_uid, header_timeout_s,
 *				idle_timeout_s,
 *				max_request_bytes, max_file_bytes,
 *				max_exec_output_bytes, api_memory_budget_bytes,
 *				restore_timeout_s,
 *				cgroup_parent, log_level, log_format, log_max,
 *				admit_cpu_pressure, admit_memory_pressure,
 *				admit_io_pressure, admit_min_available_percent,
 *				admit_restore_slowdown, jail, jail_ids,
 *				require_limits, network_cidr, dns_servers,
 *				dns_without_internet, e2b_listen,
 *				e2b_max_processes
 *	[template NAME]		kernel, initrd, cmdline, mem_mib, vcpus,
 *				min_ready, max_total, timeout_s, max_timeout_s,
 *				cpu_percent, memory_limit_mib, pids_limit,
 *				restore_parallel, page_in, network,
 *				allow_internet
 *
 * A key a file leaves out keeps the embedded default's value; each
 * [template NAME] starts from the embedded [template default], and a file
 * without any [template] section gets that one, named "default".  Unknown
 * sections or keys, a key given twice, bad numbers, out-of-range values and
 * inconsistent ones (min_ready > max_total, timeout_s > max_timeout_s, a
 * memory limit below the guest's memory, the templates' min_ready adding up
 * to more than max_sandboxes, both token and token_file, e2b_listen
 * without a token, more e2b_max_processes than half of
 * api_memory_budget_bytes holds) are errors naming
 * file:line, section, key and value; nothing is half-loaded.  Keys and
 * sections start in the first column (inih would take an indented line for
 * the continuation of the previous value) and a line holds at most 198
 * characters (inih's buffer).
 *
 * The network keys fill struct net_config (netns.h) but for what depends
 * on the host: config_net_host() adds that once the state directory is
 * known.
 */
#ifndef THAW_POOL_DAEMON_CONFIG_H
#define THAW_POOL_DAEMON_CONFIG_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/host/jail_ids.h"
#include "pool/host/netns.h"

#define CONFIG_NAME_MAX 64 /* template names: [A-Za-z0-9_.-], 1..63 */
/* A value the file says is "auto": derived once the file is read. */
#define CONFIG_AUTO UINT32_MAX
/*
 * What a process started through envd reserves of api_memory_budget_bytes
 * while it lives (pool/e2b/processes.c): the most a hostile guest can make
 * it hold, its agent connection's three frames (the reader's buffer, a
 * frame on its way in, an event being made) and its event queue (1 MiB),
 * the frames' headers rounded away.
 */
#define CONFIG_E2B_PROCESS_BYTES (4ull << 20)

struct template_config {
	char name[CONFIG_NAME_MAX];
	char kernel[PATH_MAX]; /* "": thaw's guest kernel */
	char initrd[PATH_MAX]; /* "": the thaw-agent initramfs */
	char cmdline[1024];    /* extra kernel command line, may be "" */
	uint32_t mem_mib, vcpus;
	uint32_t min_ready, max_total;
	uint32_t timeout_s, max_timeout_s;
	uint32_t cpu_percent;	   /* of one CPU; 0: no limit; once loaded
				    * never CONFIG_AUTO (100 per vCPU) */
	uint32_t memory_limit_mib; /* of the VMM process: guest + overhead;
				    * never 0 once loaded */
	uint32_t pids_limit;
	uint32_t restore_parallel; /* restores of this template at once */
	bool page_in_lazy;	   /* page_in = lazy (default prefetch) */
	bool network;		   /* network = nat; false: none */
	bool allow_internet;	   /* a create's default (API.md) */
};

struct daemon_config {
	char socket[108];	  /* "": <state_dir>/thawd.sock */
	char socket_group[64];	  /* "": the daemon's group */
	char state_dir[PATH_MAX]; /* "": thaw's default (paths.h) */
	char token[256];	  /* "": no authentication; or token_file's */
	char cgroup_parent[64];
	char log_level[8];  /* error, warning, info or debug (log.h) */
	char log_format[8]; /* text or json */
	uint32_t max_sandboxes, max_connections, restore_timeout_s;
	/* once loaded never CONFIG_AUTO (a quarter of max_connections) */
	uint32_t max_connections_per_uid;
	uint32_t header_timeout_s; /* a request head's deadline */
	uint32_t idle_timeout_s;   /* silence allowed inside a request */
	uint64_t log_max;	   /* each VMM log's bound (capfile.h) */
	/* admission.h's limits; 0 turns one off */
	uint32_t admit_cpu_pressure, admit_memory_pressure, admit_io_pressure;
	uint32_t admit_min_available_percent, admit_restore_slowdown;
	uint64_t max_request_bytes, max_file_bytes, max_exec_output_bytes;
	uint64_t api_memory_budget_bytes; /* what requests may hold at once */
	bool jail; /* false: every VMM runs as the daemon does (debugging) */
	/* false: start even without the memory, pids (or a template's cpu)
	 * cgroup controller (debugging) */
	bool require_limits;
	struct jail_ids jail_ids;
	/* network_cidr, dns_servers, dns_without_internet; the rest is
	 * config_net_host()'s */
	struct net_config net;
	bool dns_from_host; /* dns_servers = "": config_net_host() reads them */
	/* "HOST:PORT" of the E2B listener (pool/e2b/e2b.h), "": none; never
	 * set without a token */
	char e2b_listen[128];
	/* processes started through envd alive at once; once loaded never
	 * CONFIG_AUTO (as many as half of api_memory_budget_bytes holds) */
	uint32_t e2b_max_processes;
	struct template_config *templates;
	size_t nr_templates;
};

extern const char config_default_text[];

/*
 * Loads @path, or the embedded default when @path is NULL.  0, or a negative
 * errno after one message in @err: -EINVAL for what the file says, the
 * errno of opening or reading @path or a token_file, -ENOMEM.  On error @c
 * is all zeros.  config_free() releases a loaded @c.
 */
int config_load(struct daemon_config *c, const char *path, char *err,
		size_t errlen);
void config_free(struct daemon_config *c);

/*
 * Completes @c->net for the daemon of @state_dir (its real path): the host
 * veths' name prefix and the nftables table from cgroup.h's hash of it
 * ("th" + 5 hex digits, "thaw_" + 16), so a restarted daemon finds what a
 * dead one of the same directory left; with dns_servers = "" the
 * nameservers of @resolv_conf, loopback ones skipped (none left: no DNS,
 * which the caller says).
 */
void config_net_host(struct daemon_config *c, const char *state_dir,
		     const char *resolv_conf);

/* A sandbox of @t's policy when no request set one: allow_internet as
 * the template says, no allow_out or deny_out. */
void config_net_policy(const struct template_config *t, struct net_policy *out);

/* The template called @name, or NULL. */
const struct template_config *config_template(const struct daemon_config *c,
					      const char *name);

#endif
