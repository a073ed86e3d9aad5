// SPDX-License-Identifier: Apache-2.0
/*
 * test_network.c - sandboxes' networks end to end: real guests of a real
 * daemon (`thaw daemon`, template network = nat) sending real packets
 * through their TAPs, namespaces and eBPF policies into a world this test
 * makes of network namespaces on this host (network-world.sh: an
 * "internet" host at 198.51.100.10 with dnsmasq, a metadata host at
 * 169.254.169.254, a private host at 10.99.0.10, each serving a marker
 * over HTTP).  From inside sandboxes, with busybox wget through `thaw
 * exec`: the internet host is reached by address and by name (DNS through
 * the configured resolver), the metadata and private hosts are not;
 * allow_out opens the private host but never the metadata one, and no
 * internet closes the rest, without touching another sandbox's policy; a
 * policy replaced on a running sandbox applies to its next packets; a
 * server in a sandbox answers the host on the sandbox's host address, and
 * another sandbox cannot reach it.  Every check looks for the marker,
 * never only at an exit status: the hosts answer the host itself (the
 * world's own check), so a missing marker is the policy's doing, and a
 * blocked check also wants the policy's drop counters to have moved.
 *
 * daemon-in-vm.sh runs it with THAW_STATE_DIR, THAW_TEST_THAW,
 * THAW_TEST_KERNEL and THAW_TEST_INITRD (see daemon_suite.h).  It makes
 * interfaces on this host: run it only under the VM lock, with flock -o
 * (the world's servers must not inherit the lock); through nested-kvm.sh
 * without a usable /dev/kvm, whose L1 gets the programs and kernel modules
 * (tests/CMakeLists.txt).  Root only.  One test, in steps, since a
 * daemon's start (its template's snapshot) is the slow part.
 */
#include <criterion/criterion.h>
#include <criterion/hooks.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/thawd_fixture.h"

#define TOKEN "thaw-test-network-7d31"
#define INTERNET "198.51.100.10"
#define METADATA "169.254.169.254"
#define PRIVATE "10.99.0.10"
#define SANDBOX_PORT "8080"
/* The suite's jail ids and pool: no other test's. */
#define JAIL_IDS "1879114740-1879114799"
#define POOL "10.201.0.0/16"
#define START_LIMIT_S 1200 /* the first start builds the snapshot */
#define STOP_LIMIT_S 120
#define ID_MAX 64
/* A wget that must succeed: seconds on a VMX host, scaled by the guest's
 * pace; one that must not: until its packets have met the policy. */
#define REACH_S 20
#define BLOCKED_S 30

static char state[4096], world[4200], config[4200], log_path[4200];
static struct thawd_process suite_daemon;

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	scale_criterion_timeouts(set);
}

/* Runs @argv; its stdout (the caller frees it), NULL when it did not
 * run or timed out. */
static char *output_of(char *const argv[], int timeout_s, int *status)
{
	struct run_result r;
	char *out;

	if (run_command(argv, scaled_s(timeout_s), &r) < 0)
		return NULL;
	*status = r.status;
	out = r.timed_out ? NULL : strdup(r.out ? r.out : "");
	if (r.status && r.err)
		fprintf(stderr, "test_network: %s: %s", argv[1], r.err);
	run_result_free(&r);
	return out;
}

/* Runs the shell command @fmt...; its stdout, as output_of(). */
static char *shell(int *status, const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	char *argv[] = { "/bin/sh", "-c", cmd, NULL };
	return output_of(argv, 120, status);
}

/*
 * `wget -O - URL` in sandbox @id within @timeout_s (thaw exec's deadline:
 * Debian's busybox 1.35 wget dies of a segmentation fault with -T): what
 * it got ("" for nothing).
 */
static char *guest_get(const char *id, const char *url, int timeout_s)
{
	char *thaw = getenv("THAW_TEST_THAW");
	char timeout[16];
	char *argv[] = { thaw,	     "exec", "--timeout", timeout,
			 (char *)id, "--",   "wget",	  "-q",
			 "-O",	     "-",    (char *)url, NULL };
	int status;
	char *out;

	snprintf(timeout, sizeof(timeout), "%d", timeout_s);
	out = output_of(argv, timeout_s + 120, &status);
	return out ? out : strdup("");
}

/* The packets sandbox @id's policy dropped so far, by every rule. */
static long dropped(const char *id)
{
	int status;
	char *out = shell(&status,
			  "curl -s -H 'Authorization: Bearer " TOKEN
			  "' --unix-socket %s/thawd.sock http://x/metrics | "
			  "grep '^thaw_sandbox_network_packets_total{sandbox="
			  "\"%s\",verdict=\"drop_' | "
			  "awk '{n += $2} END {print n + 0}'",
			  state, id);
	long n = out && status == 0 ? strtol(out, NULL, 10) : -1;

	free(out);
	return n;
}

/* The daemon's metric @series (name and labels) in /metrics, -1 without. */
static double metric(const char *series)
{
	int status;
	char *out = shell(&status,
			  "curl -s -H 'Authorization: Bearer " TOKEN
			  "' --unix-socket %s/thawd.sock http://x/metrics | "
			  "grep -F '%s ' | awk '{print $2}'",
			  state, series);
	double v = out && status == 0 && out[0] ? strtod(out, NULL) : -1;

	free(out);
	return v;
}

/* What a packet that did not arrive went through: the sandbox's
 * namespace, the host's routes, the policy's counters. */
static void explain_network(const char *id)
{
	int status;
	char *out = shell(
		&status,
		"nsenter --net=%s/run/%s/netns sh -c '/usr/sbin/ip addr; /usr/sbin/ip route; "
		"/usr/sbin/ip -s link' 2>&1; /usr/sbin/ip route; "
		"curl -s -H 'Authorization: Bearer " TOKEN "' --unix-socket "
		"%s/thawd.sock http://x/metrics | grep 'sandbox=\"%s'",
		state, id, state, id);

	fprintf(stderr, "test_network: sandbox %s's network:\n%s\n", id,
		out ? out : "(no answer)");
	free(out);
	out = shell(
		&status,
		"%s exec %s -- sh -c 'ip addr; ip route; cat /proc/net/arp; "
		"cat /proc/net/snmp' 2>&1; nsenter --net=%s/run/%s/netns cat "
		"/proc/net/arp",
		getenv("THAW_TEST_THAW"), id, state, id);
	fprintf(stderr, "test_network: inside sandbox %s:\n%s\n", id,
		out ? out : "(no answer)");
	free(out);
}

/* A guest's pace sets how long an answer may take (a guest kernel in an
 * emulator takes tens of seconds for one wget). */
static void expect_reached(const char *id, const char *url, const char *marker)
{
	char *got = guest_get(id, url, scaled_s(REACH_S));

	cr_expect(strstr(got, marker),
		  "sandbox %s: %s: wanted \"%s\", got \"%s\"", id, url, marker,
		  got);
	if (!strstr(got, marker))
		explain_network(id);
	free(got);
}

/*
 * Blocked: no marker, and the policy itself dropped packets meanwhile
 * (so a guest too slow to send anything within the deadline fails the
 * check instead of passing it).
 */
static void expect_blocked(const char *id, const char *url, const char *marker)
{
	long before = dropped(id);
	char *got = guest_get(id, url, BLOCKED_S);
	long after = dropped(id);

	cr_expect(!strstr(got, marker), "sandbox %s reached %s (\"%s\")", id,
		  url, got);
	cr_expect(before >= 0 && after > before,
		  "sandbox %s: %s: the policy dropped nothing (%ld, then %ld)",
		  id, url, before, after);
	free(got);
}

/* `thaw daemon` on the suite's config, logging to log_path, once its
 * socket answers. */
static void start_daemon(void)
{
	char text[2048], socket[4200];

	snprintf(text, sizeof(text),
		 "; written by test_network\n"
		 "[daemon]\n"
		 "token = " TOKEN "\n"
		 "max_sandboxes = 8\n"
		 "restore_timeout_s = %d\n"
		 "jail_ids = " JAIL_IDS "\n"
		 "network_cidr = " POOL "\n"
		 "dns_servers = " INTERNET "\n"
		 /* Other suites may load the host meanwhile: admission's
		  * own test is test_daemon_pool's. */
		 "admit_cpu_pressure = 0\n"
		 "admit_restore_slowdown = 0\n"
		 "\n[template default]\n"
		 "kernel = %s\n"
		 "initrd = %s\n"
		 "mem_mib = 128\n"
		 "min_ready = 2\n"
		 "max_total = 4\n"
		 "page_in = lazy\n"
		 "network = nat\n",
		 scaled_s(600), getenv("THAW_TEST_KERNEL"),
		 getenv("THAW_TEST_INITRD"));
	snprintf(socket, sizeof(socket), "%s/thawd.sock", state);
	thawd_fixture_start(&suite_daemon,
			    &(struct thawd_process_spec){
				    .thaw = getenv("THAW_TEST_THAW"),
				    .config = config,
				    .config_text = text,
				    .log = log_path,
				    .state = state,
				    .socket = socket,
				    .token = TOKEN,
				    .start_limit_s = scaled_s(START_LIMIT_S),
			    },
			    true);
}

/*
 * After the test, also one a failed check ended: the daemon stops (taking
 * its VMMs, namespaces and nftables table with it) and the world goes.
 */
static void clean_up(void)
{
	int status;

	thawd_process_stop(&suite_daemon, scaled_s(STOP_LIMIT_S), NULL, 0);
	if (world[0])
		free(shell(&status, "%s down %s", NETWORK_WORLD, world));
}

/* `thaw sandbox create` with @options (NULL-terminated); its id. */
static void create_sandbox(char id[ID_MAX], const char *options[])
{
	char *argv[16] = { getenv("THAW_TEST_THAW"), "sandbox", "create" };
	int argc = 3, status = -1;

	for (int i = 0; options && options[i] && argc < 15; i++)
		argv[argc++] = (char *)options[i];
	char *out = output_of(argv, 600, &status);

	bool created = out && status == 0;

	if (!created)
		free(out);
	cr_assert(created, "thaw sandbox create failed (%d)", status);
	out[strcspn(out, "\n")] = '\0';
	snprintf(id, ID_MAX, "%s", out);
	free(out);
}

/* `thaw sandbox network @id @options`: a running sandbox's new policy. */
static void set_policy(const char *id, const char *options[])
{
	char *argv[16] = { getenv("THAW_TEST_THAW"), "sandbox", "network",
			   (char *)id };
	int argc = 4, status = -1;

	for (int i = 0; options[i] && argc < 15; i++)
		argv[argc++] = (char *)options[i];
	free(output_of(argv, 120, &status));
	cr_assert_eq(status, 0, "thaw sandbox network %s failed", id);
}

/* Sandbox @id's host address, read from its namespace's veth0. */
static void host_address(const char *id, char addr[32])
{
	int status;
	char *out = shell(
		&status,
		"nsenter --net=%s/run/%s/netns ip -o -4 addr show "
		"dev veth0 | sed -n 's|.* inet \\([0-9.]*\\)/30 .*|\\1|p'",
		state, id);

	cr_assert(out && status == 0 && out[0], "sandbox %s: no veth0 address",
		  id);
	out[strcspn(out, "\n")] = '\0';
	snprintf(addr, 32, "%s", out);
	free(out);
}

Test(network, sandboxes_reach_what_their_policy_allows, .timeout = 3000,
     .fini = clean_up)
{
	char a[ID_MAX], b[ID_MAX], c[ID_MAX], b_addr[32], url[64];
	char *out;
	int status;

	if (geteuid() != 0)
		cr_skip_test("needs root: it makes namespaces and interfaces");
	cr_assert(getenv("THAW_STATE_DIR") && getenv("THAW_TEST_THAW") &&
			  getenv("THAW_TEST_KERNEL") &&
			  getenv("THAW_TEST_INITRD"),
		  "run through daemon-in-vm.sh");
	snprintf(state, sizeof(state), "%s", getenv("THAW_STATE_DIR"));
	snprintf(world, sizeof(world), "%s/world", state);
	snprintf(config, sizeof(config), "%s/thawd.ini", state);
	snprintf(log_path, sizeof(log_path), "%s/thawd.log", state);
	setenv("THAW_TOKEN", TOKEN, 1);
	/* nested-kvm.sh's L1 has PATH=/bin (busybox's ip among them); ip,
	 * curl and the rest are where they are on the host. */
	char path[4096];
	snprintf(path, sizeof(path), "/usr/sbin:/usr/bin:/sbin:%s",
		 getenv("PATH") ? getenv("PATH") : "/bin");
	setenv("PATH", path, 1);

	out = shell(&status, "%s up %s", NETWORK_WORLD, world);
	cr_assert(out && status == 0, "network-world.sh up failed");
	free(out);
	/* page_in = lazy: no working set to record (a restore and a warm-up
	 * more on an emulated host). */
	start_daemon();
	create_sandbox(a, NULL);
	create_sandbox(b, NULL);
	/* C asks for the private network and the metadata host, and no
	 * internet: its policy must not leak into A's, nor A's into C's. */
	create_sandbox(c, (const char *[]){ "--no-internet", "--allow-out",
					    "10.99.0.0/24", "--allow-out",
					    "169.254.0.0/16", NULL });

	expect_reached(a, "http://" INTERNET "/", "internet");
	expect_reached(a, "http://internet.thaw.test/", "internet");
	expect_blocked(a, "http://" METADATA "/", "metadata");
	expect_blocked(a, "http://" PRIVATE "/", "private");

	expect_reached(c, "http://" PRIVATE "/", "private");
	expect_blocked(c, "http://" METADATA "/", "metadata");
	expect_blocked(c, "http://" INTERNET "/", "internet");

	/* A running sandbox's new policy applies to its next packets. */
	set_policy(c, (const char *[]){ "--internet", NULL });
	expect_reached(c, "http://" INTERNET "/", "internet");
	expect_blocked(c, "http://" PRIVATE "/", "private");
	set_policy(c, (const char *[]){ "--no-internet", NULL });
	expect_blocked(c, "http://" INTERNET "/", "internet");
	/* Each clone's network setup and each policy write were timed. */
	const char *setups =
		"thaw_network_setup_seconds_count{template=\"default\"}";
	const char *updates = "thaw_network_policy_update_seconds_count"
			      "{template=\"default\"}";
	cr_expect(metric(setups) >= 3, "%s is %f", setups, metric(setups));
	cr_expect(metric(updates) >= 2, "%s is %f", updates, metric(updates));

	/* A server in B answers the host on B's host address... */
	host_address(b, b_addr);
	snprintf(url, sizeof(url), "http://%s:" SANDBOX_PORT "/", b_addr);
	char *argv[] = {
		getenv("THAW_TEST_THAW"),
		"exec",
		b,
		"--",
		"sh",
		"-c",
		"mkdir -p /tmp/www && echo sandbox-b >/tmp/www/index.html"
		" && httpd -p " SANDBOX_PORT " -h /tmp/www",
		NULL
	};
	free(output_of(argv, 120, &status));
	cr_expect_eq(status, 0, "httpd in sandbox %s did not start", b);
	out = shell(&status, "curl -s -m 10 %s", url);
	cr_expect(out && strstr(out, "sandbox-b"),
		  "the host got \"%s\" from %s", out ? out : "", url);
	free(out);
	/* ...and sandbox A cannot reach it. */
	expect_blocked(a, url, "sandbox-b");

	/* A removed sandbox's network goes with it. */
	char *rm[] = { getenv("THAW_TEST_THAW"), "sandbox", "rm", b, NULL };
	free(output_of(rm, 120, &status));
	cr_expect_eq(status, 0, "thaw sandbox rm %s", b);
	out = shell(&status, "test -e %s/run/%s/netns", state, b);
	cr_expect_neq(status, 0, "sandbox %s's namespace left", b);
	free(out);

	thawd_fixture_stop(&suite_daemon, scaled_s(STOP_LIMIT_S));
}
