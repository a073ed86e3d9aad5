// SPDX-License-Identifier: Apache-2.0
/*
 * test_vmm_net.c - thaw-vmm's virtio-net device with a real guest: thaw's
 * kernel and thaw-agent booted with --net-tap tap0 in a network namespace
 * the test makes (tap0 as the daemon makes it: 169.254.0.22/30, the TAP's
 * fixed MAC, common/guest_net.h), where it also serves HTTP with busybox
 * httpd.  The guest, through its agent, pings the gateway and fetches a
 * file from it.  Then the VM is snapshotted, and the snapshot restored into
 * a second namespace with a tap0 of its own (what every clone gets), the
 * restored agent given CLONE, which must forget the gateway's neighbour
 * entry the snapshot has, and the guest does it again, through the new TAP.
 *
 * The VMMs run unjailed in the test's own process tree, the test joining
 * each namespace before starting one (the jailed path, --netns, is the
 * daemon's and its test's).  Root only; it makes namespaces, so it runs
 * under the VM lock.  Without this host's own /dev/kvm, ctest runs it in
 * nested-kvm.sh's emulated host, with the tun module and ip(8) added.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pool/host/agent_client.h"
#include "tests/integration/guest_agent.h"
#include "common/guest_net.h"
#include "tests/integration/harness.h"
#include "guest/protocol.h"
#include "pool/host/vmm_process.h"

#define BOOT_TIMEOUT_S 900
#define EXEC_TIMEOUT_S 300
#define HTTP_PORT "8080"
/* iproute2's (nested-kvm.sh's host has busybox's ip first in PATH). */
#define IP "/usr/sbin/ip"
#define NS_A "thaw-vmmnet-a"
#define NS_B "thaw-vmmnet-b"

static char www[64] = "/tmp/thaw-vmmnet-www-XXXXXX";
static char snapshot_dir[64] = "/tmp/thaw-vmmnet-snap-XXXXXX";
static int home_netns = -1; /* the test's own namespace, to go back to */

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	cr_assert_eq(system(cmd), 0, "failed: %s", cmd);
}

/* Namespace @ns with tap0 as a sandbox's, and busybox httpd on it. */
static void make_namespace(const char *ns)
{
	sh(IP " netns add %s && " IP " -n %s link set lo up && " IP
	      " -n %s tuntap add " GUEST_NET_TAP_NAME " mode tap && " IP
	      " -n %s link set " GUEST_NET_TAP_NAME
	      " address 06:00:ac:10:00:01 && " IP
	      " -n %s addr add " GUEST_NET_GATEWAY_ADDR_STR
	      "/%d dev " GUEST_NET_TAP_NAME " && " IP
	      " -n %s link set " GUEST_NET_TAP_NAME " up",
	   ns, ns, ns, ns, ns, GUEST_NET_PREFIX, ns);
	sh(IP " netns exec %s busybox httpd -p " GUEST_NET_GATEWAY_ADDR_STR
	      ":" HTTP_PORT " -h %s",
	   ns, www);
}

static void remove_namespace(const char *ns)
{
	char cmd[256];

	/* httpd first: its namespace goes with its last process. */
	snprintf(cmd, sizeof(cmd),
		 IP " netns pids %s 2>/dev/null | xargs -r kill; " IP
		    " netns del %s 2>/dev/null",
		 ns, ns);
	(void)!system(cmd);
}

static void enter_namespace(const char *ns)
{
	char path[128];
	int fd;

	snprintf(path, sizeof(path), "/run/netns/%s", ns);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
	cr_assert_eq(setns(fd, CLONE_NEWNET), 0, "setns %s: %s", ns,
		     strerror(errno));
	close(fd);
}

/* The guest reaches its gateway: ICMP, and HTTP from the namespace's
 * httpd (the file says which namespace answered). */
static void expect_network(struct agent_conn *agent, const char *ns)
{
	char out[4096], want[64];

	cr_assert_eq(
		guest_sh(
			agent,
			"ip addr show eth0 && ping -c 1 -W 30 " GUEST_NET_GATEWAY_ADDR_STR
			" && wget -q -O - http://" GUEST_NET_GATEWAY_ADDR_STR
			":" HTTP_PORT "/x",
			scaled_s(EXEC_TIMEOUT_S), out, sizeof(out)),
		0, "guest: %s", out);
	snprintf(want, sizeof(want), "served by %s", ns);
	cr_assert(strstr(out, want), "guest got: %s", out);
	cr_assert(strstr(out, GUEST_NET_GUEST_ADDR_STR "/30"), "eth0: %s", out);
}

/* Whether the guest's neighbour table has an entry for its gateway. */
static bool knows_gateway(struct agent_conn *agent)
{
	char out[4096];

	cr_assert_eq(guest_sh(agent, "ip neigh show dev eth0",
			      scaled_s(EXEC_TIMEOUT_S), out, sizeof(out)),
		     0, "guest: %s", out);
	return strstr(out, GUEST_NET_GATEWAY_ADDR_STR " ") != NULL;
}

static void write_page(const char *ns)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/x", www);
	f = fopen(path, "w");
	cr_assert(f);
	fprintf(f, "served by %s\n", ns);
	fclose(f);
}

static void start(struct vmm_process *vmm, struct agent_conn *agent,
		  const char *const args[])
{
	struct vmm_place place = { .no_jail = true };
	char err[1024];

	cr_assert_eq(vmm_process_start(vmm, args, &place, err, sizeof(err)), 0,
		     "%s", err);
	if (vmm_process_wait_agent(vmm, agent, scaled_s(BOOT_TIMEOUT_S), err,
				   sizeof(err)) < 0) {
		char tail[4096];

		vmm_process_console_tail(vmm, tail, sizeof(tail));
		cr_assert_fail("no agent: %s; console: %s", err, tail);
	}
}

static void setup(void)
{
	if (geteuid() != 0)
		cr_skip_test("needs root (network namespaces, TAPs)");
	/* ip netns keeps its pins in /run/netns; nested-kvm.sh's host has
	 * no /run. */
	cr_assert(mkdir("/run", 0755) == 0 || errno == EEXIST);
	home_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	cr_assert_geq(home_netns, 0);
	cr_assert(mkdtemp(www));
	cr_assert(mkdtemp(snapshot_dir));
	remove_namespace(NS_A);
	remove_namespace(NS_B);
}

static void teardown(void)
{
	char cmd[256];

	/* Out of the namespaces first: removing one kills what is in it. */
	if (home_netns >= 0 && setns(home_netns, CLONE_NEWNET) == 0)
		close(home_netns);
	remove_namespace(NS_A);
	remove_namespace(NS_B);
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s", www, snapshot_dir);
	(void)!system(cmd);
}

Test(vmm_net, guest_reaches_its_gateway_before_and_after_a_restore,
     .init = setup, .fini = teardown, .timeout = 3 * BOOT_TIMEOUT_S)
{
	const char *const boot_args[] = {
		THAW_VMM,
		"--kernel",
		THAW_TEST_IMAGES "/vmlinux",
		"--initrd",
		THAW_TEST_IMAGES "/agent.cpio",
		"--mem",
		"256",
		"--net-tap",
		GUEST_NET_TAP_NAME,
		NULL,
	};
	const char *const restore_args[] = {
		THAW_VMM,    "--restore",	 snapshot_dir,
		"--net-tap", GUEST_NET_TAP_NAME, NULL,
	};
	struct agent_conn agent = { .fd = -1 };
	struct vmm_process vmm = { 0 };
	char reply[256], err[512], cmd[128];

	write_page(NS_A);
	make_namespace(NS_A);
	enter_namespace(NS_A);
	start(&vmm, &agent, boot_args);
	expect_network(&agent, NS_A);
	cr_assert(knows_gateway(&agent), "the ping left no neighbour entry");
	agent_close(&agent);
	snprintf(cmd, sizeof(cmd), "snapshot %s", snapshot_dir);
	cr_assert_eq(vmm_process_control(&vmm, cmd, reply, sizeof(reply), err,
					 sizeof(err)),
		     0, "%s", err);
	vmm_process_remove(&vmm);

	/* A clone in another namespace, its own tap0 and server. */
	write_page(NS_B);
	make_namespace(NS_B);
	enter_namespace(NS_B);
	memset(&vmm, 0, sizeof(vmm));
	start(&vmm, &agent, restore_args);
	cr_assert_eq(agent_clone(&agent, 2, "clone", "vmmnet-test", err,
				 sizeof(err)),
		     0, "%s", err);
	cr_assert(!knows_gateway(&agent), "CLONE kept the old neighbour entry");
	expect_network(&agent, NS_B);
	agent_close(&agent);
	vmm_process_remove(&vmm);
}

ReportHook(PRE_ALL)(struct criterion_test_set *set)
{
	scale_criterion_timeouts(set);
}
