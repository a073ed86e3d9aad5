// SPDX-License-Identifier: Apache-2.0
/*
 * test_e2b.c - E2B compatibility end to end: the unmodified `e2b` npm
 * package drives a real `thaw daemon` through its e2b_listen exactly as an
 * existing E2B program would, told only E2B_API_URL, E2B_SANDBOX_URL and
 * E2B_API_KEY.
 *
 * tests/e2b holds the package.json and package-lock.json that pin the SDK
 * and the node scripts (sandbox.mjs: the control plane; commands.mjs:
 * envd's processes; files.mjs: envd's filesystem and /files); CMake copies
 * them into the build directory and the e2b_sdk fixture `npm ci`s the SDK
 * there, from the npm registry.  The scripts print one line per check and
 * say why each failed; a script passes when it exits 0.
 *
 * One daemon serves every script, so the template is built (one guest
 * boot) once per run: its config has a token, e2b_listen on a free loopback
 * port and a single template, "default", which E2B's `base` (what
 * Sandbox.create() asks for) falls back to.  How long the daemon took to
 * serve, its template boot mostly, becomes THAW_TEST_BOOT_S, which scales
 * the scripts' patience (harness.h's guest_slowness()): nothing here
 * asserts speed.
 *
 * Without a usable /dev/kvm the daemon runs in nested-kvm.sh's emulated
 * host while node runs here: NESTED_KVM_FORWARD makes the port on this
 * machine's loopback reach the daemon's e2b_listen in that host through
 * QEMU's user networking.  Whether it serves is then only seen on the wire
 * (its log comes out of the emulated host when it ends), so readiness is
 * an authenticated GET /v2/sandboxes answered 200, in both cases.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"
#include "tests/integration/thawd_fixture.h"
#include "tests/skips.h"
#include "common/io.h"

#define TOKEN "thaw-test-e2b-token-6c1f2e"
#define CGROUP_PARENT "thaw-test-e2b"
/* No other test's, so whatever is left in them is this one's. */
#define JAIL_IDS "1879114800-1879114899"
#define NETWORK_CIDR "10.202.0.0/16"
/* Only end hangs.  The first one covers the template's boot: 60-210 s on
 * KVM-on-PVM, far longer in nested-kvm.sh's emulated host. */
#define START_LIMIT_S 2400
#define SCRIPT_LIMIT_S 900 /* scaled by the boot the start measured */
#define STOP_LIMIT_S 120
/* The emulated host's memory: the template's boot and a few 128 MiB
 * sandboxes, and copies of the snapshot. */
#define NESTED_KVM_MEM_MIB "3072"

static const char *const scripts[] = { "sandbox.mjs", "commands.mjs",
				       "files.mjs" };

struct daemon_run {
	struct thawd_process
		proc; /* thaw daemon, or nested-kvm.sh running it */
	bool nested;
	int port;
	char state[64];
	char config[96];
	char log[96];
};

/* The daemon's config, for a listener on @d->port. */
static void config_text(const struct daemon_run *d, char *out, size_t len)
{
	/* In the emulated host the listener faces QEMU's forward, which
	 * arrives on its network device, not its loopback. */
	snprintf(out, len,
		 "; written by test_e2b\n"
		 "[daemon]\n"
		 "token = " TOKEN "\n"
		 "e2b_listen = %s:%d\n"
		 "cgroup_parent = " CGROUP_PARENT "\n"
		 "jail_ids = " JAIL_IDS "\n"
		 "network_cidr = " NETWORK_CIDR "\n"
		 "restore_timeout_s = 600\n"
		 "admit_cpu_pressure = 0\n"
		 "admit_restore_slowdown = 0\n"
		 "\n"
		 "[template default]\n"
		 "kernel = " THAW_TEST_IMAGES "/vmlinux\n"
		 "initrd = " THAW_TEST_IMAGES "/agent.cpio\n"
		 "mem_mib = 128\n"
		 "min_ready = 1\n"
		 "max_total = 8\n",
		 d->nested ? "0.0.0.0" : "127.0.0.1", d->port);
}

/*
 * Starts the daemon (in the emulated host when nested) and waits until
 * its E2B listener answers; records how long that took as
 * THAW_TEST_BOOT_S (see the top of the file).  False (and the test
 * failed, saying why) when it did not.  A test killed on the way (ctest's
 * timeout) takes its daemon, and the daemon its sandboxes, along;
 * nested-kvm.sh stops QEMU.
 */
static bool start_daemon(struct daemon_run *d)
{
	static const char *const wrapper[] = { THAW_NESTED_KVM, NULL };
	char text[2048], forward[64], boot[32];
	const char *const env[] = {
		forward,
		"NESTED_KVM_PROGRAMS=" THAW_VMM " " THAW_TEST_IMAGES
		"/vmlinux " THAW_TEST_IMAGES "/agent.cpio",
		"NESTED_KVM_MEM=" NESTED_KVM_MEM_MIB,
		"NESTED_KVM_SMP=2",
		"NESTED_KVM_TIMEOUT=7200",
		NULL,
	};

	config_text(d, text, sizeof(text));
	snprintf(forward, sizeof(forward), "NESTED_KVM_FORWARD=%d", d->port);
	const struct thawd_process_spec s = {
		.thaw = THAW,
		.config = d->config,
		.config_text = text,
		.log = d->log,
		.state = d->state,
		.token = TOKEN,
		.e2b_port = d->port,
		.wrapper = d->nested ? wrapper : NULL,
		.env = d->nested ? env : NULL,
		.start_limit_s = START_LIMIT_S,
		.die_with_parent = true,
		.own_process_group = true,
	};
	if (!thawd_fixture_start(&d->proc, &s, false))
		return false;
	snprintf(boot, sizeof(boot), "%ld", (long)d->proc.serving_s + 1);
	setenv("THAW_TEST_BOOT_S", boot, 1);
	fprintf(stderr,
		"test_e2b: E2B listener on 127.0.0.1:%d answering after %s s%s\n",
		d->port, boot,
		d->nested ? " (daemon in nested-kvm.sh's host)" : "");
	return true;
}

/* SIGTERM (the daemon stops its sandboxes; nested-kvm.sh stops QEMU),
 * then SIGKILL to its whole process group if it lingers. */
static void stop_daemon(struct daemon_run *d)
{
	char err[256];

	if (thawd_process_stop(&d->proc, STOP_LIMIT_S, err, sizeof(err)))
		fprintf(stderr, "test_e2b: %s\n", err);
}

/* Runs tests/e2b's @script with node against @d; true when it passed.
 * Its output, a line per check, goes to stderr either way. */
static bool run_script(const struct daemon_run *d, const char *script)
{
	char path[sizeof(THAW_E2B_DIR) + 64];
	char *argv[] = { NODE, path, NULL };
	struct run_result r;
	int limit = scaled_s(SCRIPT_LIMIT_S);

	snprintf(path, sizeof(path), "%s/%s", THAW_E2B_DIR, script);
	if (run_command(argv, limit, &r) < 0) {
		cr_expect_fail("cannot run %s %s: %s", NODE, path,
			       strerror(errno));
		return false;
	}
	fprintf(stderr, "test_e2b: %s: %s after %.0f s, exit status %d\n%s%s",
		script, r.timed_out ? "killed" : "ended", r.seconds, r.status,
		r.out, r.err);
	bool passed = !r.timed_out && r.status == 0;
	cr_expect(passed, "%s %s (port %d): %s", script,
		  r.timed_out ? "timed out" : "failed", d->port,
		  r.timed_out ? "see its output above"
			      : "see the checks above");
	run_result_free(&r);
	return passed;
}

Test(e2b, sdk_scripts, .timeout = 7200)
{
	struct daemon_run d = { .nested = !kvm_usable() };
	char slowness[32], url[64], tail[8192];
	bool passed = true;

	thaw_skip_unless_node(NODE[0] && access(NODE, X_OK) == 0,
			      "no node (\"" NODE "\"): the E2B SDK needs "
			      "Node.js");
	cr_assert_eq(
		access(THAW_E2B_DIR "/node_modules/e2b/package.json", R_OK), 0,
		"the e2b SDK is not installed in %s (the e2b_sdk test "
		"runs npm ci there)",
		THAW_E2B_DIR);
	snprintf(d.state, sizeof(d.state), "/tmp/thaw-test-e2b-XXXXXX");
	cr_assert_not_null(mkdtemp(d.state), "mkdtemp: %s", strerror(errno));
	snprintf(d.config, sizeof(d.config), "%s/thawd.conf", d.state);
	snprintf(d.log, sizeof(d.log), "%s/thawd.log", d.state);
	d.port = loopback_free_port();
	cr_assert_gt(d.port, 0, "no free loopback port: %s", strerror(-d.port));
	if (start_daemon(&d)) {
		snprintf(url, sizeof(url), "http://127.0.0.1:%d", d.port);
		snprintf(slowness, sizeof(slowness), "%.1f", guest_slowness());
		setenv("E2B_API_URL", url, 1);
		setenv("E2B_SANDBOX_URL", url, 1);
		setenv("E2B_API_KEY", TOKEN, 1);
		setenv("THAW_E2B_SLOWNESS", slowness, 1);
		for (size_t i = 0; i < sizeof(scripts) / sizeof(*scripts); i++)
			passed &= run_script(&d, scripts[i]);
	}
	stop_daemon(&d);
	if (!passed) {
		thawd_process_log_tail(&d.proc, tail, sizeof(tail));
		fprintf(stderr, "test_e2b: the daemon's log ends:\n%s\n", tail);
	}
	char *rm[] = { "/bin/rm", "-rf", d.state, NULL };
	struct run_result r;
	if (run_command(rm, 300, &r) == 0)
		run_result_free(&r);
}
