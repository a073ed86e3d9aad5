// SPDX-License-Identifier: Apache-2.0
/*
 * snapshot_command.c - `thaw snapshot create|ls|verify|rm`: snapshots in the
 * catalog (snapshot/catalog.h) under the state directory (paths.h):
 *
 *	<state>/catalog/		the LMDB environment
 *	<state>/snapshots/<id>/		state.bin, memory.img, pages.xxh3,
 *					workingset.bin (after the first clone)
 *	<state>/snapshots/<id>/		a diff snapshot: state.bin,
 *					memory.diff and parent -> ../<parent>
 *					(snapshot/memdiff.h)
 *
 * create boots the guest (or, --from ID, restores a clone of snapshot ID,
 * whose child the new snapshot becomes, and runs a command in it if given
 * one), waits for its agent, has the VMM write the snapshot into
 * <state>/snapshots/.tmp-<id>-<pid>/ (every file fsynced): a booted guest's
 * is whole; a clone's is a checkpoint (vmm_process_checkpoint()), a diff of
 * ID holding only the pages the clone wrote, unless ID's chain is already
 * MEMDIFF_MAX_DEPTH diffs deep (then whole again).  It renames that to <id>/
 * and only then records it in the catalog, so a writer killed at any point
 * leaves either nothing visible or a whole snapshot.  What a killed writer
 * leaves behind (a .tmp- directory of a dead process, a directory the
 * catalog never heard of: snapshot_store.h) is removed by the next create
 * or rm, or the daemon's next start.  rm drops the catalog entry first, then
 * the files: a crash in between leaves an orphan directory, never an entry
 * without files.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "snapshot/catalog.h"
#include "pool/host/checkpoint.h"
#include "common/clock.h"
#include "pool/host/clone.h"
#include "guest/kernel/default_kernel.h"
#include "pool/host/interrupt.h"
#include "snapshot/memdiff.h"
#include "snapshot/memfile.h"
#include "pool/host/paths.h"
#include "pool/host/snapshot_store.h"
#include "snapshot/state.h"
#include "pool/host/template.h"
#include "pool/cli/thaw.h"
#include "pool/host/vmm_process.h"

#define SNAPSHOT_BOOT_TIMEOUT_S 600

struct paths {
	char state[PATH_MAX];
	char catalog[PATH_MAX + 16];
	char snapshots[PATH_MAX + 16];
};

static int open_catalog(struct paths *p, struct catalog *c, const char *who)
{
	char err[PATH_MAX + 128];

	if (thaw_state_dir(p->state, sizeof(p->state), err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return -1;
	}
	snprintf(p->catalog, sizeof(p->catalog), "%s/catalog", p->state);
	snprintf(p->snapshots, sizeof(p->snapshots), "%s/snapshots", p->state);
	if (thaw_make_dirs(p->snapshots, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return -1;
	}
	if (catalog_open(c, p->catalog, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return -1;
	}
	return 0;
}

/* Removes snapshot directory @dir, saying so when it cannot. */
static void remove_snapshot_dir(const char *dir)
{
	char err[PATH_MAX + 64];

	if (snapshot_store_remove(dir, err, sizeof(err)) < 0)
		fprintf(stderr, "thaw snapshot: %s\n", err);
}

/* A template is what was booted: the same inputs, the same id. */
static int describe_template(const struct machine_options *o,
			     const char *kernel, const char *initrd,
			     struct template_record *t,
			     struct snapshot_record *s)
{
	char err[PATH_MAX + 64];

	if (template_identify(kernel, initrd, o->mem, o->vcpus, o->cmdline,
			      o->network, t, err, sizeof(err)) < 0) {
		fprintf(stderr, "thaw snapshot create: %s\n", err);
		return -1;
	}
	t->nr_vcpus = s->nr_vcpus;
	t->mem_size = s->mem_size;
	t->created_unix = s->created_unix;
	memcpy(s->template_id, t->id, sizeof(t->id));
	return 0;
}

/* The snapshot of a booted guest: all of it, written by the VMM. */
static int snapshot_booted(struct vmm_process *vmm, const char *tmp,
			   struct vmm_checkpoint *ck, char *err, size_t errlen)
{
	char command[PATH_MAX + 80], reply[PATH_MAX + 80];

	snprintf(command, sizeof(command), "snapshot %s", tmp);
	*ck = (struct vmm_checkpoint){ .full = true };
	return vmm_process_control(vmm, command, reply, sizeof(reply), err,
				   errlen);
}

/*
 * Starts a VMM with @vmm_args, waits for its agent, runs @cmd in a clone
 * (NULL: nothing), and has the VMM write a snapshot into @tmp: a booted
 * guest's whole, a clone's as a checkpoint (@ck says which it became).
 * The VM is gone afterwards either way.
 */
static int snapshot_vm(const struct machine_options *m,
		       const char *const vmm_args[], const char *tmp,
		       char **cmd, struct vmm_checkpoint *ck)
{
	const char *who = "thaw snapshot create";
	/* err: a control error quotes the command and the VM's reason. */
	char err[PATH_MAX + 1024];
	struct agent_conn agent = { .fd = -1 };
	struct vmm_process vmm;
	int ret = -1;

	/* A clone's checkpoint files are passed to it: it writes nowhere. */
	if (machine_start(&vmm, who, m, vmm_args, m->from ? NULL : tmp, &agent,
			  SNAPSHOT_BOOT_TIMEOUT_S) < 0)
		goto out;
	double ready = monotonic_ms();
	int status = cmd ? thaw_relay_exec(who, &agent, cmd,
					   SNAPSHOT_BOOT_TIMEOUT_S * 1000,
					   STDERR_FILENO)
			 : 0;
	if (status) {
		fprintf(stderr, "%s: %s exited with status %d: no snapshot\n",
			who, cmd[0], status);
		goto out;
	}
	/* Clones start without this connection; the agent keeps listening. */
	agent_close(&agent);
	double written = monotonic_ms();
	if ((m->from ? vmm_process_checkpoint(&vmm, tmp, ck, err, sizeof(err))
		     : snapshot_booted(&vmm, tmp, ck, err, sizeof(err))) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		goto out;
	}
	fprintf(stderr, "thaw: start to agent ready %.1f ms, ",
		ready - vmm.started_ms);
	if (m->from)
		fprintf(stderr,
			"checkpoint %.1f ms (guest paused %.1f ms): %s, %llu "
			"pages, depth %u\n",
			ck->total_ms, ck->pause_ms, ck->full ? "whole" : "diff",
			(unsigned long long)ck->dirty_pages, ck->depth);
	else
		fprintf(stderr, "snapshot %.1f ms\n", monotonic_ms() - written);
	ret = 0;
out:
	agent_close(&agent);
	vmm_process_remove(&vmm);
	/* The files are the jail uid's until then: it is another VMM's next. */
	if (jail_reclaim(tmp, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		ret = -1;
	}
	return ret;
}

static const char create_usage[] =
	"usage: thaw snapshot create [--mem MiB] [--vcpus N] [--kernel K] [--initrd I]\n"
	"                            [--cmdline EXTRA] [--network] [--no-jail]\n"
	"       thaw snapshot create --from ID [--network] [--no-jail] [-- CMD [ARG...]]\n"
	"Boots the guest (or restores a clone of snapshot ID and runs CMD in it,\n"
	"its output on stderr), snapshots it once its agent answers (and CMD\n"
	"exited 0), and prints the new snapshot's id.  A snapshot taken --from ID\n"
	"is ID's child: ID cannot be removed before it.  It is a diff of ID,\n"
	"holding only the memory pages the clone wrote, unless ID is already 8\n"
	"diffs deep: then it holds all of memory again.  The VMM runs\n"
	"jailed, writing only the new snapshot's directory; --no-jail\n"
	"(debugging only) drops the jail.  --network gives the guest its\n"
	"network device (tap0 in a namespace of its own, no way out), as a\n"
	"daemon's templates with network = nat have it; restore such a\n"
	"snapshot with --network too.\n";

static int parse_create(int argc, char **argv, struct machine_options *o,
			char ***cmd)
{
	static const struct option options[] = {
		MACHINE_LONG_OPTIONS,
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *who = "thaw snapshot create";
	int opt;

	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+:", options, NULL)) != -1) {
		if (machine_option(o, opt, optarg))
			continue;
		switch (opt) {
		case 'h':
			fputs(create_usage, stdout);
			return 0;
		default:
			fprintf(stderr, "%s: bad option '%s'\n", who,
				argv[optind - 1]);
			return 2;
		}
	}
	if (optind < argc && (!o->from || strcmp(argv[optind - 1], "--"))) {
		fprintf(stderr, "%s: unexpected argument '%s'%s\n", who,
			argv[optind],
			o->from ? ""
				: " (a command runs in a clone: --from ID)");
		return 2;
	}
	*cmd = optind < argc ? argv + optind : NULL;
	if (machine_options_check(o, who) < 0)
		return 2;
	return -1; /* go on */
}

/* What the new snapshot's VMM starts from: a boot, or a clone. */
struct origin {
	char kernel[PATH_MAX], initrd[PATH_MAX];
	char clone_id[CATALOG_ID_LEN + 1];
	struct snapshot_record parent;
	bool registered;
};

static int find_origin(const struct machine_options *o, const struct paths *p,
		       struct origin *from, struct template_record *t)
{
	const char *who = "thaw snapshot create";
	struct catalog c;
	char err[PATH_MAX + 128];

	if (!o->from) {
		if (o->kernel)
			snprintf(from->kernel, sizeof(from->kernel), "%s",
				 o->kernel);
		else if (default_kernel_path(from->kernel, sizeof(from->kernel),
					     err, sizeof(err)) < 0) {
			fprintf(stderr, "%s: %s\n", who, err);
			return -1;
		}
		if (o->initrd)
			snprintf(from->initrd, sizeof(from->initrd), "%s",
				 o->initrd);
		else if (thaw_default_initrd(from->initrd, sizeof(from->initrd),
					     err, sizeof(err)) < 0) {
			fprintf(stderr, "%s: %s\n", who, err);
			return -1;
		}
		return 0;
	}
	if (catalog_new_id(from->clone_id) < 0)
		return -1;
	if (clone_register(o->from, from->clone_id, &from->parent, err,
			   sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return -1;
	}
	from->registered = true;
	/* Opened after clone_register() closed its own: one environment per
	 * process at a time, as LMDB requires. */
	int ret = catalog_open(&c, p->catalog, err, sizeof(err));
	if (ret == 0)
		ret = catalog_get_template(&c, from->parent.template_id, t, err,
					   sizeof(err));
	catalog_close(&c);
	if (ret < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		return -1;
	}
	return 0;
}

static int create(int argc, char **argv)
{
	struct machine_options o = MACHINE_DEFAULTS;
	const char *who = "thaw snapshot create";
	char err[512], tmp[PATH_MAX + 64], final[PATH_MAX + 64];
	struct template_record t = { 0 };
	struct snapshot_record s = { 0 };
	struct origin from = { 0 };
	struct vmm_checkpoint ck;
	struct paths p;
	struct catalog c;
	char **cmd;
	int status = 1;

	int parsed = parse_create(argc, argv, &o, &cmd);
	if (parsed >= 0)
		return parsed;
	if (open_catalog(&p, &c, who) < 0)
		return 1;
	snapshot_store_collect(p.snapshots, &c);
	/* Closed while the VMM runs: LMDB environments must not be carried
	 * across fork. */
	catalog_close(&c);
	if (find_origin(&o, &p, &from, &t) < 0)
		goto out;
	if (catalog_new_id(s.id) < 0) {
		fprintf(stderr, "%s: no randomness for an id\n", who);
		goto out;
	}
	if (snapshot_store_paths(p.snapshots, s.id, getpid(), tmp, final,
				 sizeof(tmp), err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		goto out;
	}
	/* Guest memory goes in: no one else may look (preopen.h). */
	if (mkdir(tmp, 0700) < 0) {
		fprintf(stderr, "%s: cannot create %s: %s\n", who, tmp,
			strerror(errno));
		goto out;
	}

	const char *vmm_path = thaw_tool_path("THAW_VMM", THAW_VMM_PATH);
	const char *boot[] = { vmm_path,    "--kernel",
			       from.kernel, "--initrd",
			       from.initrd, "--mem",
			       o.mem,	    "--vcpus",
			       o.vcpus,	    o.cmdline ? "--cmdline" : NULL,
			       o.cmdline,   NULL };
	const char *restore[] = { vmm_path, "--restore", from.parent.dir,
				  NULL };
	thaw_catch_signals();
	if (snapshot_vm(&o, o.from ? restore : boot, tmp, cmd, &ck) < 0)
		goto fail;
	if (snapshot_store_describe(tmp, final, &s, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		goto fail;
	}
	s.depth = ck.depth;
	s.dirty_bytes = ck.full ? 0 : ck.dirty_pages * MEMDIFF_PAGE_SIZE;
	if ((!o.from &&
	     describe_template(&o, from.kernel, from.initrd, &t, &s) < 0))
		goto fail;
	if (o.from) {
		memcpy(s.parent, from.parent.id, sizeof(s.parent));
		memcpy(s.template_id, t.id, sizeof(t.id));
	}
	/* A diff's memory is its parent's too: the restore follows this. */
	if (!ck.full &&
	    snapshot_link_parent(tmp, from.parent.id, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		goto fail;
	}
	if (rename(tmp, final) < 0) {
		fprintf(stderr, "%s: cannot move %s to %s: %s\n", who, tmp,
			final, strerror(errno));
		goto fail;
	}
	if (snapshot_store_sync_dir(p.snapshots, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		remove_snapshot_dir(final);
		goto out;
	}
	if (catalog_open(&c, p.catalog, err, sizeof(err)) < 0 ||
	    catalog_add_snapshot(&c, &t, &s, err, sizeof(err)) < 0) {
		fprintf(stderr, "%s: %s\n", who, err);
		catalog_close(&c);
		remove_snapshot_dir(final);
		goto out;
	}
	catalog_close(&c);
	printf("%s\n", s.id);
	status = 0;
	goto out;
fail:
	remove_snapshot_dir(tmp);
	status = thaw_interrupted ? 128 + thaw_interrupted : 1;
out:
	if (from.registered &&
	    clone_unregister(o.from, from.clone_id, err, sizeof(err)) < 0)
		fprintf(stderr, "%s: %s\n", who, err);
	return status;
}

static void print_size(uint64_t bytes)
{
	printf(" %8.1f", bytes / (1024.0 * 1024.0));
}

static int list(struct catalog *c)
{
	struct snapshot_record *recs;
	uint32_t *clones;
	size_t n;
	char err[512];

	if (catalog_list_snapshots(c, &recs, &clones, &n, err, sizeof(err)) <
	    0) {
		fprintf(stderr, "thaw snapshot ls: %s\n", err);
		return 1;
	}
	printf("%-16s %-16s %-16s %-19s %8s %5s %8s %9s %5s %6s %8s\n", "ID",
	       "PARENT", "TEMPLATE", "CREATED", "MEM_MIB", "VCPUS", "DISK_MIB",
	       "DIRTY_MIB", "DEPTH", "CLONES", "CHILDREN");
	for (size_t i = 0; i < n; i++) {
		char created[32];
		time_t t = recs[i].created_unix;
		struct tm tm;

		strftime(created, sizeof(created), "%Y-%m-%d %H:%M:%S",
			 gmtime_r(&t, &tm));
		printf("%-16s %-16s %-16s %-19s", recs[i].id,
		       recs[i].parent[0] ? recs[i].parent : "-",
		       recs[i].template_id, created);
		print_size(recs[i].mem_size);
		printf(" %5u", recs[i].nr_vcpus);
		print_size(recs[i].memory_disk + recs[i].state_size);
		/* A diff's written pages; a whole memory has none. */
		if (recs[i].depth)
			printf(" %9.1f",
			       recs[i].dirty_bytes / (1024.0 * 1024.0));
		else
			printf(" %9s", "-");
		printf(" %5u %6u %8u\n", recs[i].depth, clones[i],
		       recs[i].children);
	}
	free(recs);
	free(clones);
	return 0;
}

/* Exit 0 only when the state file and every memory page check out. */
static int verify(struct catalog *c, const char *id)
{
	/* memfile_verify()'s message can name three paths. */
	char err[3 * PATH_MAX], path[CATALOG_PATH_MAX + 32];
	struct snapshot_record s;
	struct state_reader r;

	if (catalog_get_snapshot(c, id, &s, err, sizeof(err)) < 0) {
		fprintf(stderr, "thaw snapshot verify: %s\n", err);
		return 1;
	}
	snprintf(path, sizeof(path), "%s/state.bin", s.dir);
	if (state_reader_open(&r, path, err, sizeof(err)) < 0) {
		fprintf(stderr, "thaw snapshot verify: %s\n", err);
		return 1;
	}
	bool matches = r.header.mem_size == s.mem_size &&
		       r.header.memory_hash_root == s.memory_hash_root &&
		       r.header.nr_vcpus == s.nr_vcpus &&
		       r.header.cpu_signature == s.cpu_signature;
	state_reader_close(&r);
	if (!matches) {
		fprintf(stderr,
			"thaw snapshot verify: %s does not match the catalog's record of snapshot %s\n",
			path, id);
		return 1;
	}
	/* A diff's every layer, then its base (memdiff.h). */
	if (memdiff_chain_verify(s.dir, s.mem_size, s.memory_hash_root, err,
				 sizeof(err))) {
		fprintf(stderr, "thaw snapshot verify: %s\n", err);
		return 1;
	}
	printf("snapshot %s: ok (state file and %llu memory pages verified%s)\n",
	       id, (unsigned long long)(s.mem_size / MEMFILE_PAGE_SIZE),
	       s.depth ? ", with the diffs under them" : "");
	return 0;
}

static int remove_snapshot(struct paths *p, struct catalog *c, const char *id)
{
	char err[512];
	struct snapshot_record s;

	if (catalog_get_snapshot(c, id, &s, err, sizeof(err)) < 0 ||
	    catalog_remove_snapshot(c, id, err, sizeof(err)) < 0) {
		fprintf(stderr, "thaw snapshot rm: %s\n", err);
		return 1;
	}
	remove_snapshot_dir(s.dir);
	snapshot_store_collect(p->snapshots, c);
	return 0;
}

static const char usage[] =
	"usage: thaw snapshot create [--mem MiB] [--vcpus N] [--kernel K] [--initrd I]\n"
	"                            [--cmdline EXTRA] [--network] [--no-jail]\n"
	"       thaw snapshot create --from ID [--network] [--no-jail] [-- CMD [ARG...]]\n"
	"       thaw snapshot ls\n"
	"       thaw snapshot verify ID\n"
	"       thaw snapshot rm ID\n"
	"Snapshots live under $THAW_STATE_DIR (default ~/.local/state/thaw);\n"
	"run a clone of one with thaw run --from ID -- CMD.\n";

int thaw_snapshot(int argc, char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : NULL;
	struct paths p;
	struct catalog c;
	int status;

	if (!cmd || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
		fputs(usage, cmd ? stdout : stderr);
		return cmd ? 0 : 2;
	}
	if (!strcmp(cmd, "create"))
		return create(argc - 1, argv + 1);
	bool takes_id = !strcmp(cmd, "verify") || !strcmp(cmd, "rm");
	if (!takes_id && strcmp(cmd, "ls")) {
		fprintf(stderr, "thaw snapshot: unknown command '%s'\n%s", cmd,
			usage);
		return 2;
	}
	if (argc != (takes_id ? 3 : 2)) {
		fprintf(stderr, "thaw snapshot %s: %s\n%s", cmd,
			takes_id ? "takes one snapshot id"
				 : "takes no arguments",
			usage);
		return 2;
	}
	if (open_catalog(&p, &c, "thaw snapshot") < 0)
		return 1;
	if (!strcmp(cmd, "ls"))
		status = list(&c);
	else if (!strcmp(cmd, "verify"))
		status = verify(&c, argv[2]);
	else
		status = remove_snapshot(&p, &c, argv[2]);
	catalog_close(&c);
	return status;
}
