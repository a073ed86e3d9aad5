// SPDX-License-Identifier: Apache-2.0
/*
 * thaw-bench.c - thaw's numbers, measured the way users meet them.
 *
 * `thaw-bench all` (or one scenario by name) starts thawd on the guest it is
 * given and drives it over its API like a client: handouts from a warm pool
 * and restores on demand at several concurrencies, the first exec after a
 * handout with lazy and prefetched memory and a dropped or warm page cache,
 * memory per idle clone, density until something gives, sustained restores.
 * Beside those: cold boots of the same guest (`thaw run`), the VMM's floor
 * (thaw-bench-floor: KVM objects and state without running the guest), the
 * jail's cost (restores and warm handouts with jail = false beside the
 * default), the network's (setup per clone, warm handouts with network =
 * none beside nat, guest -> host TCP, policy updates), checkpoints (against
 * dirty memory, forks, rollbacks, chains), and peers (gVisor,
 * bubblewrap) running the same `true`.  Every figure keeps its raw
 * samples; bench/report.c turns them into results.json, a markdown table
 * and plots.  A scenario that fails is a row saying why, never a
 * silent gap, and never a failed build: the bench exits 0 once it wrote its
 * report.
 *
 * Sizes: the (500 handouts per concurrency, up to 1000 idle clones,
 * density to 2000) on a real KVM host; --quick, and nested-kvm.sh's emulated
 * host (THAW_EMULATED_HOST), scale them down, and the report says so.
 *
 * This file is the command line and the order of the run: it parses the
 * options, picks the sizes, calls each scenario asked for and writes the
 * report.  The scenarios live with their kin, behind bench.h: handouts.c
 * (warm pool, on demand, sustained restores), startup.c (cold boot, the
 * VMM floor, first exec), bench_jail.c (jailed against --no-jail), network.c
 * (a sandbox's network), bench_checkpoints.c (RL operations),
 * bench_memory.c (memory per idle clone, density), e2b.c (E2B's SDK beside
 * thaw's own API) and peers.c (thaw against gVisor and bubblewrap).
 */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench/bench.h"

static const struct sizes full = {
	.concurrency = { 1, 10, 50 },
	.handouts = 500,
	.boots = 5,
	.floor_runs = 100,
	.first_execs = 20,
	.idle_clones = { 10, 100, 1000 },
	.density_max = 2000,
	.sustained_s = 60,
	.peer_runs = 50,
	.transfers = 10,
	.transfer_mib = 64,
	.round_trips = 1000,
	.policy_writes = 500,
	.dirty_mib = { 1, 16, 128 },
	.checkpoints = 10,
	.forks = { 1, 8, 32 },
	.fork_rounds = 5,
	.rollbacks = 20,
	.chain_restores = 20,
	.e2b_creates = 200,
};

/*
 * --quick, and nested-kvm.sh's emulated host, whose own kernel crashed
 * with ~40 guests (see test_daemon) and whose timings are an emulator's.
 */
static const struct sizes small = {
	.concurrency = { 1, 4, 8 },
	.handouts = 40,
	.boots = 3,
	.floor_runs = 20,
	.first_execs = 5,
	.idle_clones = { 10, 0, 0 },
	.density_max = 24,
	.sustained_s = 20,
	.peer_runs = 10,
	.transfers = 3,
	.transfer_mib = 1,
	.round_trips = 200,
	.policy_writes = 40,
	.dirty_mib = { 1, 8, 0 },
	.checkpoints = 3,
	.forks = { 1, 4, 8 },
	.fork_rounds = 2,
	.rollbacks = 5,
	.chain_restores = 5,
	.e2b_creates = 16,
};

/* ---- main ---------------------------------------------------------------- */

static const char usage[] =
	"usage: thaw-bench [OPTIONS] all|SCENARIO...\n"
	"\n"
	"Measures thaw on this host and writes OUT/results.json, OUT/results.md\n"
	"and PNG plots, then prints the table.  Scenarios: handout (warm\n"
	"pool), restore (on demand), boot (cold, and the ratio to a handout),\n"
	"floor (VMM setup without running), first-exec, memory, density,\n"
	"sustained, jail (restores and warm handouts, jailed and --no-jail),\n"
	"network (setup per clone, warm handouts with and without a network,\n"
	"guest -> host TCP throughput and round trips, policy updates),\n"
	"checkpoint (checkpoints against dirty memory, forks of one\n"
	"checkpoint, rollbacks, restores from a chain of checkpoints), e2b\n"
	"(Sandbox.create() -> first commands.run('true') through the e2b SDK,\n"
	"beside thaw's own create -> exec), peers.\n"
	"Needs /dev/kvm and root (drop_caches, cgroups, namespaces).\n"
	"\n"
	"  --kernel FILE   guest kernel (required)\n"
	"  --initrd FILE   initramfs with thaw-agent (required)\n"
	"  --out DIR       where results go (default bench/results/DATE)\n"
	"  --quick         small sizes, for a first look\n"
	"  --thaw FILE     the thaw program (default: the one built with this)\n"
	"  --floor FILE    thaw-bench-floor (default: the one built with this)\n"
	"  --e2b DIR       the e2b SDK installed (node_modules) with\n"
	"                  e2b_create.mjs (default: the build's tests/e2b,\n"
	"                  which `ctest -R e2b_sdk` fills)\n"
	"  --e2b-creates N creates per concurrency through each API in the e2b\n"
	"                  scenario (default 200, --quick 16; at least one\n"
	"                  round): fewer where the guest is emulated\n";

static bool wanted(char **names, int n, const char *scenario)
{
	for (int i = 0; i < n; i++)
		if (!strcmp(names[i], "all") || !strcmp(names[i], scenario))
			return true;
	return false;
}

int main(int argc, char **argv)
{
	static const char *const scenarios[] = {
		"all",	      "handout",    "restore", "boot",	    "floor",
		"first-exec", "memory",	    "density", "sustained", "jail",
		"network",    "checkpoint", "peers",   "e2b",
	};
	static const struct option options[] = {
		{ "kernel", required_argument, NULL, 'k' },
		{ "initrd", required_argument, NULL, 'i' },
		{ "out", required_argument, NULL, 'o' },
		{ "quick", no_argument, NULL, 'q' },
		{ "thaw", required_argument, NULL, 't' },
		{ "floor", required_argument, NULL, 'f' },
		{ "e2b", required_argument, NULL, 'e' },
		{ "e2b-creates", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct bench b = { .thaw = THAW,
			   .floor = THAW_BENCH_FLOOR,
			   .e2b_dir = THAW_E2B_DIR };
	char out[PATH_MAX] = "", err[1024], scaled[128];
	struct sizes sizes;
	bool quick = false;
	long e2b_creates = 0;
	int opt;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'k':
			b.kernel = optarg;
			break;
		case 'i':
			b.initrd = optarg;
			break;
		case 'o':
			snprintf(out, sizeof(out), "%s", optarg);
			break;
		case 'q':
			quick = true;
			break;
		case 't':
			b.thaw = optarg;
			break;
		case 'f':
			b.floor = optarg;
			break;
		case 'e':
			b.e2b_dir = optarg;
			break;
		case 'c': {
			char *end;

			e2b_creates = strtol(optarg, &end, 10);
			if (*end || e2b_creates < 1 || e2b_creates > 100000) {
				fprintf(stderr,
					"thaw-bench: --e2b-creates %s: not a "
					"whole number in 1..100000\n",
					optarg);
				return 2;
			}
			break;
		}
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fputs(usage, stderr);
			return 2;
		}
	}
	if (optind == argc || !b.kernel || !b.initrd) {
		fprintf(stderr, "thaw-bench: %s\n%s",
			optind == argc ? "name a scenario, or all"
				       : "--kernel and --initrd are required",
			usage);
		return 2;
	}
	for (int i = optind; i < argc; i++) {
		bool known = false;

		for (size_t k = 0; k < sizeof(scenarios) / sizeof(*scenarios);
		     k++)
			known |= !strcmp(argv[i], scenarios[k]);
		if (!known) {
			fprintf(stderr, "thaw-bench: no scenario \"%s\"\n%s",
				argv[i], usage);
			return 2;
		}
	}
	for (const char *f = b.kernel; f; f = f == b.kernel ? b.initrd : NULL)
		if (access(f, R_OK)) {
			fprintf(stderr, "thaw-bench: %s: %s\n", f,
				strerror(errno));
			return 2;
		}
	if (!out[0]) {
		time_t now = time(NULL);
		char day[32];

		strftime(day, sizeof(day), "%Y-%m-%d", gmtime(&now));
		snprintf(out, sizeof(out), "bench/results/%s", day);
	}
	sizes = full;
	b.scaled = "";
	if (quick) {
		sizes = small;
		b.scaled = "--quick: scaled down";
	} else if (getenv("THAW_EMULATED_HOST")) {
		sizes = small;
		b.scaled = "emulated host: scaled down, emulator timings";
	}
	if (e2b_creates) {
		sizes.e2b_creates = (int)e2b_creates;
		snprintf(scaled, sizeof(scaled), "%s%s--e2b-creates %ld",
			 b.scaled, b.scaled[0] ? "; " : "", e2b_creates);
		b.scaled = scaled;
	}
	b.size = &sizes;
	snprintf(b.state_dir, sizeof(b.state_dir), "/tmp/thaw-bench-XXXXXX");
	if (!mkdtemp(b.state_dir)) {
		fprintf(stderr, "thaw-bench: %s: %s\n", b.state_dir,
			strerror(errno));
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	b.report = report_new();
	struct machine m;
	machine_describe(&m);
	snprintf(m.build, sizeof(m.build), "%s", THAW_BENCH_BUILD);
	report_set_machine(b.report, &m);
	if (b.scaled[0])
		bench_progress("%s", b.scaled);

	char **names = argv + optind;
	int n = argc - optind;
	struct restore_samples restores = { 0 };
	if (wanted(names, n, "handout"))
		bench_handouts(&b, true, NULL);
	if (wanted(names, n, "restore"))
		bench_handouts(&b, false, &restores);
	if (wanted(names, n, "boot"))
		bench_boot(&b, &restores);
	if (wanted(names, n, "floor"))
		bench_floor(&b, &restores);
	if (wanted(names, n, "first-exec"))
		bench_first_exec(&b);
	if (wanted(names, n, "memory"))
		bench_memory(&b);
	if (wanted(names, n, "density"))
		bench_density(&b);
	if (wanted(names, n, "sustained"))
		bench_sustained(&b);
	if (wanted(names, n, "jail"))
		bench_jail(&b);
	if (wanted(names, n, "network"))
		bench_network(&b);
	if (wanted(names, n, "checkpoint"))
		bench_checkpoints(&b);
	if (wanted(names, n, "e2b"))
		bench_e2b(&b);
	if (wanted(names, n, "peers"))
		bench_peers(&b);

	int status = 0;
	if (report_write(b.report, out, err, sizeof(err))) {
		fprintf(stderr, "thaw-bench: %s\n", err);
		status = 1;
	}
	report_print_markdown(b.report, stdout);
	if (!status)
		bench_progress("results in %s", out);
	if (b.failures) {
		char log[PATH_MAX + 16];
		char *cp[] = { "/bin/cp", log, out, NULL };

		snprintf(log, sizeof(log), "%s/thawd.log", b.state_dir);
		if (!access(log, F_OK) &&
		    !bench_run_capture(cp, 2, err, sizeof(err)))
			bench_progress(
				"%d figures not measured: the daemons' log is "
				"%s/thawd.log",
				b.failures, out);
	}
	report_free(b.report);
	bench_restore_samples_free(&restores);
	char *rm[] = { "/bin/rm", "-rf", b.state_dir, NULL };
	bench_run_capture(rm, 2, err, sizeof(err));
	return status;
}
