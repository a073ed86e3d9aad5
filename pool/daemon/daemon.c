// SPDX-License-Identifier: Apache-2.0
/*
 * daemon.c - `thaw daemon`: thawd in the foreground; see daemon.h.
 *
 * Start: load the config, take the state directory's lock (one daemon per
 * state directory, so cleaning up after a dead one can never hit a live
 * one), make the state directory's cgroup (cgroup.h: other daemons' are
 * never touched) and refuse to go on without the controllers the limits
 * need (limits fail closed), remove what a dead daemon left (its
 * sandboxes' cgroups and run directories; its VMMs died with it through
 * PR_SET_PDEATHSIG, and a cgroup's leftovers are killed with it; the
 * checkpoints it was writing, snapshot_store.h), find
 * each template's snapshot in the catalog or build it with `thaw snapshot
 * create`, start the pools, and only then bind the socket: a client that
 * can connect gets served.
 *
 * Stop (SIGTERM, SIGINT, SIGHUP): refuse new work, let every HTTP
 * connection finish, destroy every sandbox, remove the cgroups, the run
 * directory and the socket.  Connections finish at once whatever their
 * guests do: every wait on a guest (agent_wait(), agent_client.h) looks at
 * the stop flag at least every 250 ms, and no read or write to a guest
 * blocks outside it, so libmicrohttpd's stop never waits for a guest and
 * the VMMs die within seconds of the signal.
 *
 * The log (common/log.h) is thawd's from the first line: --log-level and
 * --log-format apply as they are parsed, the config's log_level and
 * log_format once it is loaded, unless a flag gave them.  Only a bad
 * option, found before any of that, is printed plainly with the usage,
 * under the same name, "thawd".
 */
#include "pool/daemon/daemon.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pool/daemon/api.h"
#include "common/clock.h"
#include "guest/kernel/default_kernel.h"
#include "snapshot/host_cpu.h"
#include "pool/host/interrupt.h"
#include "common/log.h"
#include "pool/host/paths.h"
#include "snapshot/state.h"
#include "common/subprocess.h"
#include "pool/host/template.h"
#include "pool/daemon/thawd.h"

#define LISTEN_BACKLOG 256

static const char usage[] =
	"usage: thaw daemon [--config FILE] [--socket PATH] [--state DIR]\n"
	"                   [--log-level error|warning|info|debug]\n"
	"                   [--log-format text|json]\n"
	"       thaw daemon --print-config\n"
	"Runs thawd in the foreground: keeps warm pools of restored clones of\n"
	"each template in FILE (without one, the embedded default: template\n"
	"'default', thaw's guest kernel and agent) and serves the HTTP API of\n"
	"pool/API.md on a Unix socket, and with e2b_listen E2B's API on TCP.\n"
	"--print-config prints the embedded default, which documents every\n"
	"setting.  SIGTERM stops every sandbox and removes what the daemon\n"
	"made.  The log goes to stderr, a line per event, as text or as JSON\n"
	"lines; --log-level and --log-format beat the config's log_level and\n"
	"log_format.\n";

struct daemon_options {
	const char *config, *socket, *state;
	bool print_config;
	bool log_level, log_format; /* given: the config's do not count */
};

/* The config's log settings, unless a flag gave them; they were checked
 * when the config was loaded. */
static void apply_log_config(const struct daemon_config *cfg,
			     const struct daemon_options *o)
{
	char err[128];

	if (!o->log_level)
		log_set_level(cfg->log_level, err, sizeof(err));
	if (!o->log_format)
		log_set_format(cfg->log_format, err, sizeof(err));
}

static int parse_options(int argc, char **argv, struct daemon_options *o)
{
	static const struct option options[] = {
		{ "config", required_argument, NULL, 'c' },
		{ "socket", required_argument, NULL, 's' },
		{ "state", required_argument, NULL, 'S' },
		{ "print-config", no_argument, NULL, 'p' },
		{ "log-level", required_argument, NULL, 'l' },
		{ "log-format", required_argument, NULL, 'f' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	char err[128];
	int opt;

	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
		switch (opt) {
		case 'c':
			o->config = optarg;
			break;
		case 's':
			o->socket = optarg;
			break;
		case 'S':
			o->state = optarg;
			break;
		case 'p':
			o->print_config = true;
			break;
		case 'l':
		case 'f':
			/* At once: a bad config is then logged as asked. */
			if ((opt == 'l' ? log_set_level : log_set_format)(
				    optarg, err, sizeof(err)) < 0)
				goto bad_value;
			*(opt == 'l' ? &o->log_level : &o->log_format) = true;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		case ':':
			fprintf(stderr, "thawd: %s needs a value\n%s",
				argv[optind - 1], usage);
			return 2;
		default:
			fprintf(stderr, "thawd: bad option '%s'\n%s",
				argv[optind - 1], usage);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "thawd: unexpected argument '%s'\n%s",
			argv[optind], usage);
		return 2;
	}
	return -1;
bad_value:
	fprintf(stderr, "thawd: %s\n%s", err, usage);
	return 2;
}

/* What a helper (the kernel build, thaw-mkinitramfs, `thaw snapshot
 * create`) says on stderr, as a line of our log. */
static void log_helper_line(const char *line)
{
	log_info("%s", line);
}

/* State directory, run directory and socket path, from flags and config. */
static int resolve_paths(struct daemon *d, const struct daemon_options *o)
{
	const char *state = o->state ? o->state : d->cfg.state_dir;
	char err[PATH_MAX + 64];

	/* Children (thaw snapshot create) and the catalog helpers read the
	 * state directory from the environment. */
	if (state[0] && setenv("THAW_STATE_DIR", state, 1) < 0)
		return -1;
	if (thaw_state_dir(d->state_dir, sizeof(d->state_dir), err,
			   sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}
	snprintf(d->run_dir, sizeof(d->run_dir), "%s/run", d->state_dir);
	const char *sock = o->socket ? o->socket : d->cfg.socket;
	int n = sock[0] ? snprintf(d->socket_path, sizeof(d->socket_path), "%s",
				   sock)
			: snprintf(d->socket_path, sizeof(d->socket_path),
				   "%s/thawd.sock", d->state_dir);
	if (n >= (int)sizeof(d->socket_path)) {
		log_error(
			"socket path %s%s is longer than a Unix socket allows (%zu bytes)",
			sock[0] ? sock : d->state_dir,
			sock[0] ? "" : "/thawd.sock",
			sizeof(d->socket_path) - 1);
		return -1;
	}
	if (thaw_make_dirs(d->run_dir, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}
	return 0;
}

/* Held for the daemon's life; the kernel drops it when we die. */
/* Descriptors a sandbox holds in the daemon (its VMM's pidfd and report
 * pipe, its idle agent connection, its jail id's lock) and those an API
 * request may hold besides its own socket (an agent connection, a file
 * being streamed). */
#define FDS_PER_SANDBOX 4
#define FDS_PER_CONNECTION 3
#define FDS_SPARE 64

/*
 * Raises the soft limit on open files to the hard one, as far as the
 * config needs: the usual soft limit of 1024 would otherwise end a daemon
 * of max_sandboxes = 1000 at 500 sandboxes, every restore and even every
 * DELETE failing with EMFILE.  A hard limit below the need is said at
 * start, not met at the 500th sandbox.
 */
static void raise_open_file_limit(const struct daemon_config *cfg)
{
	rlim_t need = (rlim_t)cfg->max_sandboxes * FDS_PER_SANDBOX +
		      (rlim_t)cfg->max_connections * FDS_PER_CONNECTION +
		      FDS_SPARE;
	struct rlimit lim;

	if (getrlimit(RLIMIT_NOFILE, &lim) < 0 || lim.rlim_cur >= need)
		return;
	lim.rlim_cur = lim.rlim_max == RLIM_INFINITY || lim.rlim_max > need
			       ? need
			       : lim.rlim_max;
	if (setrlimit(RLIMIT_NOFILE, &lim) < 0 || lim.rlim_cur < need)
		log_warning(
			"open files: at most %llu, while max_sandboxes = %u "
			"and max_connections = %u need about %llu (raise "
			"the hard limit, ulimit -Hn)",
			(unsigned long long)lim.rlim_cur, cfg->max_sandboxes,
			cfg->max_connections, (unsigned long long)need);
}

static int lock_state_dir(const struct daemon *d)
{
	char path[PATH_MAX + 16];

	snprintf(path, sizeof(path), "%s/thawd.lock", d->state_dir);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		log_error("cannot open %s: %s", path, strerror(errno));
		return -1;
	}
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		log_error("another thaw daemon serves %s (%s is locked)",
			  d->state_dir, path);
		close(fd);
		return -1;
	}
	return fd;
}

/*
 * Removes the files of @dir (a sandbox's run directory) and its jail's
 * empty root (its mounts were the dead VMM's own), then @dir.
 */
static void remove_run_dir(const char *dir)
{
	DIR *dp = opendir(dir);
	struct dirent *e;

	while (dp && (e = readdir(dp))) {
		char path[PATH_MAX * 2];

		if (e->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) <
			    (int)sizeof(path) &&
		    unlink(path) < 0 && errno == EISDIR)
			rmdir(path);
	}
	if (dp)
		closedir(dp);
	rmdir(dir);
}

/*
 * The cgroups of this state directory's daemon (cgroup.h): named after the
 * directory's real path, so two spellings of one directory are one group;
 * its network's names too (config_net_host), and its resolvers.
 */
static int init_cgroups(struct daemon *d)
{
	char owner[PATH_MAX], err[PATH_MAX * 2 + 256];

	if (!realpath(d->state_dir, owner)) {
		log_error("cannot resolve state directory %s: %s", d->state_dir,
			  strerror(errno));
		return -1;
	}
	config_net_host(&d->cfg, owner, "/etc/resolv.conf");
	if (d->cfg.dns_from_host && !d->cfg.net.n_dns)
		log_warning("dns_servers: /etc/resolv.conf names no nameserver "
			    "a sandbox can reach (loopback ones are skipped): "
			    "sandboxes have no DNS; dns_servers in the config "
			    "names resolvers");
	if (cgroup_init(&d->cgroups, d->cfg.cgroup_parent, owner, err,
			sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}
	return 0;
}

/* The controllers the config's limits need: memory and pids always, cpu
 * for a template with a quota. */
static unsigned needed_controllers(const struct daemon_config *cfg)
{
	unsigned needed = CGROUP_BIT(CGROUP_MEMORY) | CGROUP_BIT(CGROUP_PIDS);

	for (size_t i = 0; i < cfg->nr_templates; i++)
		if (cfg->templates[i].cpu_percent)
			needed |= CGROUP_BIT(CGROUP_CPU);
	return needed;
}

/*
 * Limits fail closed: without a controller they need, no sandbox is handed
 * out at all, unless the config says require_limits = false.  Each one
 * missing is named, so that one start says all there is to fix.
 */
static int check_limits(const struct daemon *d)
{
	unsigned needed = needed_controllers(&d->cfg);
	char err[PATH_MAX + 256];
	int ret = 0;

	for (int c = 0; c < CGROUP_NR; c++) {
		if (cgroup_require(&d->cgroups, CGROUP_BIT(c), err,
				   sizeof(err)) == 0)
			continue;
		if (!(needed & CGROUP_BIT(c))) {
			log_info("%s (no template asks for its limit)", err);
			continue;
		}
		if (d->cfg.require_limits) {
			log_error("%s: refusing to start, as its sandboxes' "
				  "limits would not apply (require_limits = "
				  "false in the config starts without them)",
				  err);
			ret = -1;
			continue;
		}
		log_warning("require_limits = false: %s: sandboxes run without "
			    "that limit; a guest can take this host's memory, "
			    "processes or CPUs (debugging only)",
			    err);
	}
	return ret;
}

/*
 * The host's side of the sandboxes' networks (netns.h), if a template has
 * one: before clean_leftovers(), which cannot remove a run directory that
 * still holds a dead daemon's pinned namespace.  Its names (host veths,
 * nftables table) are init_cgroups()'s config_net_host()'s.  A network
 * needs the jail, which is how the VMM enters it.
 */
static int init_network(struct daemon *d)
{
	struct net_config *net = &d->cfg.net;
	char err[PATH_MAX + 512];
	struct net_host_found found;
	uint32_t slots = 1u << (32 - net->pool.prefix) >> 2;

	for (size_t i = 0; i < d->cfg.nr_templates; i++) {
		struct template_config *t = &d->cfg.templates[i];

		if (t->network && !d->cfg.jail) {
			log_warning("template %s: no network: jail = false "
				    "(a VMM enters its network with its jail)",
				    t->name);
			t->network = false;
		}
		d->network |= t->network;
	}
	if (!d->network)
		return 0;
	if (slots > d->cfg.max_sandboxes)
		slots = d->cfg.max_sandboxes;
	d->net_free = calloc(slots, sizeof(*d->net_free));
	if (!d->net_free) {
		log_error("out of memory");
		return -1;
	}
	while (d->net_nfree < slots) {
		d->net_free[d->net_nfree] = slots - 1 - d->net_nfree;
		d->net_nfree++;
	}
	if (net_host_setup(net, d->run_dir, &found, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return -1;
	}
	if (found.stale_links || found.stale_pins)
		log_warning("removed what a previous daemon left: %d host "
			    "veths (%s*), %d network namespaces",
			    found.stale_links, net->ifname_prefix,
			    found.stale_pins);
	if (found.forwarding_was_off)
		log_info("net.ipv4.ip_forward was 0; set to 1 for the "
			 "sandboxes' traffic");
	return 0;
}

/* What a dead daemon left: run directories, cgroups (and their VMMs). */
static int clean_leftovers(struct daemon *d)
{
	char err[512];
	int reaped = cgroup_reap_stale(&d->cgroups, err, sizeof(err));
	int dirs = 0;

	if (reaped < 0) {
		log_error("%s", err);
		return -1;
	}
	DIR *dp = opendir(d->run_dir);
	struct dirent *e;
	while (dp && (e = readdir(dp))) {
		char path[PATH_MAX * 2];

		if (e->d_name[0] == '.')
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", d->run_dir,
			     e->d_name) >= (int)sizeof(path))
			continue;
		remove_run_dir(path);
		dirs++;
	}
	if (dp)
		closedir(dp);
	if (reaped || dirs)
		log_warning(
			"removed what a previous daemon left: %d cgroups, %d run directories",
			reaped, dirs);
	return 0;
}

/*
 * Once per start: snapshots from before memory was private keep 0755/0644
 * modes (guest memory anyone on the host may read) until this takes them
 * back.  A failure is logged and costs nothing else.
 */
static void tighten_snapshot_modes(struct daemon *d)
{
	char dir[PATH_MAX + 16], err[512];
	struct catalog c;
	int n = -1;

	snprintf(dir, sizeof(dir), "%s/catalog", d->state_dir);
	pthread_mutex_lock(&d->catalog_lock);
	if (catalog_open(&c, dir, err, sizeof(err)) == 0) {
		n = catalog_tighten_modes(&c, err, sizeof(err));
		catalog_close(&c);
	}
	pthread_mutex_unlock(&d->catalog_lock);
	if (n < 0)
		log_warning("tightening the snapshots' modes: %s", err);
	else if (n)
		log_info("%d snapshot files and directories made private", n);
}

/*
 * The template's latest snapshot in the catalog, when this host can
 * restore it; false when there is none to use.
 */
static bool catalog_snapshot(struct daemon *d, const char *template_id,
			     struct snapshot_record *snap)
{
	char dir[PATH_MAX + 16], err[512];
	struct template_record t;
	struct catalog c;
	struct stat st;
	bool usable = false;

	snprintf(dir, sizeof(dir), "%s/catalog", d->state_dir);
	pthread_mutex_lock(&d->catalog_lock);
	if (catalog_open(&c, dir, err, sizeof(err)) == 0) {
		usable = catalog_get_template(&c, template_id, &t, NULL, 0) ==
				 0 &&
			 t.latest_snapshot[0] &&
			 catalog_get_snapshot(&c, t.latest_snapshot, snap, NULL,
					      0) == 0 &&
			 snap->format_version == STATE_FORMAT_VERSION &&
			 snap->cpu_signature == host_cpu_signature() &&
			 stat(snap->dir, &st) == 0;
		catalog_close(&c);
	} else {
		log_warning("%s", err);
	}
	pthread_mutex_unlock(&d->catalog_lock);
	return usable;
}

/*
 * Records @pl's working set, the pages a restored clone touches first,
 * unless its snapshot has one: `thaw run --from --record-working-set`
 * restores a clone, gives it its identity, runs a fixed warm-up command
 * and has the VMM write the pages it touched to workingset.bin, which every
 * later restore with page_in = prefetch reads ahead with io_uring.  Recorded
 * now, before any user code, so that it holds what every clone needs and
 * nothing a user did.  A failure costs only speed: restores then page in
 * lazily.
 */
static void record_working_set(const struct pool *pl)
{
	char path[CATALOG_PATH_MAX + 32], answer[64], err[PATH_MAX + 64];
	char *argv[] = { "/proc/self/exe",
			 "run",
			 "--from",
			 (char *)pl->snapshot_id,
			 "--record-working-set",
			 NULL,
			 NULL };
	double started_ms = monotonic_ms();

	/* A networked template's snapshot has the device: it needs its
	 * TAP; without a jail there is no network (init_network()). */
	if (!pl->d->cfg.jail)
		argv[5] = "--no-jail";
	else if (pl->t->network)
		argv[5] = "--network";
	snprintf(path, sizeof(path), "%s/workingset.bin", pl->snapshot_dir);
	if (pl->t->page_in_lazy || access(path, F_OK) == 0)
		return;
	log_info("template %s: recording the working set of snapshot %s",
		 pl->t->name, pl->snapshot_id);
	int ret = run_for_last_line(argv, answer, sizeof(answer), err,
				    sizeof(err));
	if (access(path, F_OK) == 0)
		log_info("template %s: working set recorded in %.1f s",
			 pl->t->name, (monotonic_ms() - started_ms) / 1e3);
	else
		log_warning(
			"template %s: no working set recorded (%s): restores page in lazily",
			pl->t->name, ret < 0 ? err : "the warm-up left none");
}

/* Finds @pl's snapshot, or boots its template and takes one. */
static int prepare_template(struct daemon *d, struct pool *pl)
{
	const struct template_config *t = pl->t;
	char kernel[PATH_MAX], initrd[PATH_MAX], mem[16], vcpus[16];
	char id[CATALOG_ID_LEN + 8], err[PATH_MAX + 64];
	struct template_record rec = { 0 };
	struct snapshot_record snap;

	snprintf(kernel, sizeof(kernel), "%s", t->kernel);
	snprintf(initrd, sizeof(initrd), "%s", t->initrd);
	if (!kernel[0] &&
	    default_kernel_path(kernel, sizeof(kernel), err, sizeof(err)) < 0) {
		log_error("template %s: %s", t->name, err);
		return -1;
	}
	if (!initrd[0] &&
	    thaw_default_initrd(initrd, sizeof(initrd), err, sizeof(err)) < 0) {
		log_error("template %s: %s", t->name, err);
		return -1;
	}
	snprintf(mem, sizeof(mem), "%u", t->mem_mib);
	snprintf(vcpus, sizeof(vcpus), "%u", t->vcpus);
	if (template_identify(kernel, initrd, mem, vcpus, t->cmdline,
			      t->network, &rec, err, sizeof(err)) < 0) {
		log_error("template %s: %s", t->name, err);
		return -1;
	}
	if (catalog_snapshot(d, rec.id, &snap)) {
		log_info("template %s: snapshot %s from the catalog", t->name,
			 snap.id);
	} else {
		char *argv[] = { "/proc/self/exe",
				 "snapshot",
				 "create",
				 "--kernel",
				 kernel,
				 "--initrd",
				 initrd,
				 "--mem",
				 mem,
				 "--vcpus",
				 vcpus,
				 NULL,
				 NULL,
				 NULL,
				 NULL,
				 NULL };
		double started_ms;
		int n = 11;

		if (!d->cfg.jail)
			argv[n++] = "--no-jail";
		if (t->network)
			argv[n++] = "--network";
		if (t->cmdline[0]) {
			argv[n++] = "--cmdline";
			argv[n++] = (char *)t->cmdline;
		}
		log_info("template %s: booting it to take its snapshot",
			 t->name);
		started_ms = monotonic_ms();
		if (run_for_last_line(argv, id, sizeof(id), err, sizeof(err)) <
		    0) {
			log_error("template %s: %s", t->name, err);
			return -1;
		}
		if (!catalog_snapshot(d, rec.id, &snap)) {
			log_error(
				"template %s: snapshot %s is not in the catalog as the template's latest",
				t->name, id);
			return -1;
		}
		log_info("template %s: built snapshot %s in %.1f s", t->name,
			 snap.id, (monotonic_ms() - started_ms) / 1e3);
	}
	memcpy(pl->template_id, rec.id, sizeof(pl->template_id));
	memcpy(pl->snapshot_id, snap.id, sizeof(pl->snapshot_id));
	memcpy(pl->snapshot_dir, snap.dir, sizeof(pl->snapshot_dir));
	record_working_set(pl);
	return 0;
}

static int listen_socket(const struct daemon *d)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	const char *group = d->cfg.socket_group;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", d->socket_path);
	/* We hold the state lock: a socket file here is a dead daemon's. */
	unlink(d->socket_path);
	if (fd < 0 || bind(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    chmod(d->socket_path, 0660) < 0) {
		log_error("cannot create socket %s: %s", d->socket_path,
			  strerror(errno));
		goto fail;
	}
	if (group[0]) {
		struct group *g = getgrnam(group);

		if (!g || chown(d->socket_path, (uid_t)-1, g->gr_gid) < 0) {
			log_error("cannot give socket %s to group %s: %s",
				  d->socket_path, group,
				  g ? strerror(errno) : "no such group");
			goto fail;
		}
	}
	if (listen(fd, LISTEN_BACKLOG) < 0) {
		log_error("listen on %s: %s", d->socket_path, strerror(errno));
		goto fail;
	}
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	unlink(d->socket_path);
	return -1;
}

/* Starts each of @d's front ends; -1 once one cannot start. */
static int start_frontends(struct daemon *d)
{
	for (size_t i = 0; i < d->nr_frontends; i++)
		if (d->frontends[i].start(d, (unsigned)i,
					  &d->frontend_state[i]) < 0)
			return -1;
	return 0;
}

/* Stops those started, last first. */
static void stop_frontends(struct daemon *d)
{
	for (size_t i = d->nr_frontends; i-- > 0;)
		d->frontends[i].stop(d->frontend_state[i]);
}

int thaw_daemon(int argc, char **argv, const struct frontend *frontends,
		size_t nr_frontends)
{
	struct daemon_options o = { 0 };
	struct daemon d = { 0 };
	struct http_server *server = NULL;
	char err[1024];
	int status = 1, lock = -1, fd;
	sigset_t unblocked;

	log_set_program("thawd");
	if (nr_frontends > FRONTENDS_MAX) {
		log_error("%zu front ends: at most %d have a slot in a sandbox",
			  nr_frontends, FRONTENDS_MAX);
		return 2;
	}
	int parsed = parse_options(argc, argv, &o);
	if (parsed >= 0)
		return parsed;
	if (o.print_config) {
		fputs(config_default_text, stdout);
		return 0;
	}
	if (config_load(&d.cfg, o.config, err, sizeof(err)) < 0) {
		log_error("%s", err);
		return 2;
	}
	apply_log_config(&d.cfg, &o);
	if (!d.cfg.jail)
		log_warning("jail = false: every sandbox's VMM runs as this "
			    "daemon's user with every capability and the whole "
			    "host in view; a guest that breaks its VMM owns "
			    "this machine (debugging only)");
	/* The `thaw run` and `thaw snapshot create` it starts take theirs
	 * from the same range. */
	char ids[32];
	snprintf(ids, sizeof(ids), "%u-%u", d.cfg.jail_ids.first,
		 d.cfg.jail_ids.last);
	setenv(JAIL_IDS_ENV, ids, 1);
	pthread_mutex_init(&d.lock, NULL);
	pthread_mutex_init(&d.catalog_lock, NULL);
	monotonic_cond_init(&d.work);
	d.vmm_exits = -1;
	d.frontends = frontends;
	d.nr_frontends = nr_frontends;
	d.started_ns = monotonic_ns();
	thaw_catch_signals();
	raise_open_file_limit(&d.cfg);
	run_set_stderr_sink(log_helper_line);
	if (resolve_paths(&d, &o) < 0 || (lock = lock_state_dir(&d)) < 0)
		goto out;
	if (init_cgroups(&d) < 0)
		goto out;
	if (check_limits(&d) < 0 || init_network(&d) < 0 ||
	    clean_leftovers(&d) < 0) {
		cgroup_release(&d.cgroups);
		goto out;
	}
	tighten_snapshot_modes(&d);
	/* A checkpoint a dead daemon was writing is garbage now. */
	snapshots_collect(&d);
	d.pools = calloc(d.cfg.nr_templates, sizeof(*d.pools));
	if (!d.pools)
		goto out;
	d.nr_pools = d.cfg.nr_templates;
	for (size_t i = 0; i < d.nr_pools; i++) {
		d.pools[i].d = &d;
		d.pools[i].t = &d.cfg.templates[i];
		if (thaw_interrupted || prepare_template(&d, &d.pools[i]) < 0)
			goto stop;
	}
	/* From here on a stop signal wakes the main thread alone. */
	thaw_block_stop_signals(&unblocked);
	if (pools_start(&d) < 0) {
		log_error("cannot start the pool threads");
		goto stop;
	}
	fd = listen_socket(&d);
	if (fd < 0)
		goto stop;
	server = api_start(&d, fd);
	if (!server)
		goto stop;
	log_info("serving on %s", d.socket_path);
	if (start_frontends(&d) < 0)
		goto stop;
	thaw_wait_for_interrupt(&unblocked);
	status = 0;
stop:
	log_info("stopping");
	pools_stopping(&d);
	stop_frontends(&d);
	http_stop(server);
	if (server)
		unlink(d.socket_path);
	pools_stop(&d);
	if (cgroup_reap_stale(&d.cgroups, err, sizeof(err)) < 0)
		log_error("%s", err);
	cgroup_release(&d.cgroups);
	if (d.network && net_host_teardown(&d.cfg.net, err, sizeof(err)) < 0)
		log_warning("%s", err);
	rmdir(d.run_dir);
out:
	free(d.net_free);
	free(d.pools);
	config_free(&d.cfg);
	if (lock >= 0)
		close(lock);
	return status;
}
