// SPDX-License-Identifier: Apache-2.0
/*
 * peers.c - see peers.h.
 *
 * The flags are the ones a fair comparison needs, no more: each peer gets
 * the isolation its users would normally run it with, minus what neither
 * thaw's sandboxes nor the other peer have (a network), plus nothing that
 * makes it faster than it would be out of the box.
 *
 * runsc (gVisor, Debian 12's runsc 0.0~20221219):
 *   --network=none  thaw's clones have no network (only the agent's vsock),
 *	bubblewrap's --unshare-net leaves loopback only.  runsc's default,
 *	a user-space network stack behind a veth pair NATed with iptables,
 *	would also be extra work on every start, and it fails outright where
 *	the iptables program is missing ("exec: "iptables": executable file
 *	not found in $PATH", exit 128): on the development machines and on a
 *	stock Debian 12 host, whose firewall is nftables (iptables is an
 *	optional package there).
 *   no --platform   runsc's own default: ptrace in this release (systrap in
 *	later ones).  The KVM platform would need /dev/kvm, and gVisor
 *	recommends it only on bare metal, while thaw also runs nested.
 *   no --ignore-cgroups  `runsc do` puts every sandbox in a cgroup of its
 *	own, as thawd does with every clone; both pay for it.
 *   no --rootless   we run as root (so does thawd); as another user
 *	`runsc do` refuses and says so, which is reported, not worked around.
 *   `do` itself runs the command on a read-only view of the host's / with
 *	a writable tmpfs overlay, the closest gVisor has to bwrap's bind.
 *
 * bwrap (bubblewrap 0.8): --ro-bind / / with a fresh /dev and the new pid
 *   namespace's own /proc, and new pid, ipc, uts and net namespaces: how
 *   sandboxing tools built on it (Flatpak and the like) start a command.
 *   --die-with-parent so a bwrap killed on a timeout takes its child along.
 *   As root no user namespace is made (bwrap adds one only for callers
 *   without privileges), which makes this the cheapest honest sandbox.
 *
 * Every run starts the peer's own executable afresh with posix_spawnp, in
 * its own process group so a timeout can kill all of it, with stdin from
 * /dev/null and stdout and stderr in a memory file read only when the run
 * failed.  The time is taken from just before the spawn to the reaping of
 * the exited process; the exit is waited for on a pidfd, so it is seen as
 * soon as it happens and a run past PEER_TIMEOUT_MS is killed.
 *
 * bench_peers(), at the end, is thaw-bench's peers scenario: thaw's own
 * figure on the same command (a handout from a warm pool, `true` run in it,
 * the release), then each peer's.
 */
#include "bench/peers.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench/bench.h"
#include "common/clock.h"

#define PEER_TIMEOUT_MS 60000
/* How much of a failed peer's output goes into an error message. */
#define ERROR_OUTPUT_LINES 4
#define ERROR_OUTPUT_BYTES 600

extern char **environ;

struct peer {
	const char *name;
	const char *const *argv;
};

static const char *const runsc_argv[] = { "runsc", "--network=none", "do",
					  "true", NULL };

static const char *const bwrap_argv[] = {
	"bwrap",
	"--ro-bind",
	"/",
	"/",
	"--dev",
	"/dev",
	"--proc",
	"/proc",
	"--unshare-pid",
	"--unshare-ipc",
	"--unshare-uts",
	"--unshare-net",
	"--die-with-parent",
	"true",
	NULL,
};

static const struct peer peers[] = {
	{ "runsc", runsc_argv },
	{ "bwrap", bwrap_argv },
};

const char *const peer_names[] = { "runsc", "bwrap", NULL };

static const struct peer *find_peer(const char *name)
{
	for (size_t i = 0; i < sizeof(peers) / sizeof(peers[0]); i++)
		if (!strcmp(peers[i].name, name))
			return &peers[i];
	return NULL;
}

/* "runsc --network=none do true", for messages that say what was run. */
static void format_command(const struct peer *p, char *out, size_t outlen)
{
	size_t used = 0;

	out[0] = '\0';
	for (int i = 0; p->argv[i] && used < outlen; i++)
		used += snprintf(out + used, outlen - used, "%s%s",
				 i ? " " : "", p->argv[i]);
}

/*
 * The first ERROR_OUTPUT_LINES lines of what the peer wrote to @output_fd,
 * joined by " | ", or "no output".
 */
static void read_output_head(int output_fd, char *out, size_t outlen)
{
	char buf[ERROR_OUTPUT_BYTES + 1];
	ssize_t n = pread(output_fd, buf, ERROR_OUTPUT_BYTES, 0);
	int lines = 0;
	size_t used = 0;

	if (n <= 0) {
		snprintf(out, outlen, "no output");
		return;
	}
	buf[n] = '\0';
	out[0] = '\0';
	for (char *save, *line = strtok_r(buf, "\n", &save);
	     line && lines < ERROR_OUTPUT_LINES && used < outlen;
	     line = strtok_r(NULL, "\n", &save), lines++)
		used += snprintf(out + used, outlen - used, "%s%s",
				 lines ? " | " : "", line);
}

static pid_t spawn_peer(const struct peer *p, int output_fd, int *spawn_err)
{
	posix_spawn_file_actions_t actions;
	posix_spawnattr_t attr;
	sigset_t no_signals, all_signals;
	pid_t pid = -1;

	sigemptyset(&no_signals);
	sigfillset(&all_signals);
	posix_spawn_file_actions_init(&actions);
	posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
					 O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&actions, output_fd, STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&actions, output_fd, STDERR_FILENO);
	posix_spawnattr_init(&attr);
	/* A peer starts as from a shell, whatever the bench does with its
	 * own signals, and in a group of its own for a timeout's kill. */
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP |
						POSIX_SPAWN_SETSIGMASK |
						POSIX_SPAWN_SETSIGDEF);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setsigmask(&attr, &no_signals);
	posix_spawnattr_setsigdefault(&attr, &all_signals);
	*spawn_err = posix_spawnp(&pid, p->argv[0], &actions, &attr,
				  (char *const *)p->argv, environ);
	posix_spawnattr_destroy(&attr);
	posix_spawn_file_actions_destroy(&actions);
	return *spawn_err ? -1 : pid;
}

/*
 * Waits for @pid to exit, at most until @deadline_ns.  Returns 1 when it
 * exited (not yet reaped), 0 when the deadline passed, -1 with errno set.
 */
static int wait_for_exit(pid_t pid, uint64_t deadline_ns)
{
	int pidfd = syscall(SYS_pidfd_open, pid, 0);
	int ret;

	if (pidfd < 0)
		return -1;
	do {
		uint64_t now_ns = monotonic_ns();
		int timeout_ms =
			now_ns >= deadline_ns
				? 0
				: (int)((deadline_ns - now_ns + NS_PER_MS - 1) /
					NS_PER_MS);
		struct pollfd pfd = { .fd = pidfd, .events = POLLIN };

		ret = poll(&pfd, 1, timeout_ms);
	} while (ret < 0 && errno == EINTR);
	int saved_errno = errno;
	close(pidfd);
	errno = saved_errno;
	return ret;
}

/* One run of @p; its wall time in *ms, or -1 with @err saying why not. */
static int run_once(const struct peer *p, double *ms, char *err, size_t errlen)
{
	char command[256], output[ERROR_OUTPUT_BYTES + 64];
	int spawn_err, status;
	int output_fd = memfd_create("peer-output", MFD_CLOEXEC);

	format_command(p, command, sizeof(command));
	if (output_fd < 0) {
		snprintf(err, errlen, "%s: memfd_create: %s", p->name,
			 strerror(errno));
		return -1;
	}
	uint64_t start_ns = monotonic_ns();
	pid_t pid = spawn_peer(p, output_fd, &spawn_err);
	if (pid < 0) {
		if (spawn_err == ENOENT)
			snprintf(err, errlen,
				 "%s: not installed (no %s in PATH)", p->name,
				 p->argv[0]);
		else
			snprintf(err, errlen, "%s: cannot start `%s`: %s",
				 p->name, command, strerror(spawn_err));
		close(output_fd);
		return -1;
	}
	int exited = wait_for_exit(pid, start_ns + PEER_TIMEOUT_MS * NS_PER_MS);
	int wait_errno = errno;
	if (exited <= 0)
		kill(-pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	*ms = (double)(monotonic_ns() - start_ns) / NS_PER_MS;
	read_output_head(output_fd, output, sizeof(output));
	close(output_fd);

	if (exited < 0) {
		snprintf(err, errlen, "%s: waiting for `%s`: %s (killed it)",
			 p->name, command, strerror(wait_errno));
		return -1;
	}
	if (exited == 0) {
		snprintf(err, errlen,
			 "%s: `%s` did not exit within %d s (killed it): %s",
			 p->name, command, PEER_TIMEOUT_MS / 1000, output);
		return -1;
	}
	if (WIFSIGNALED(status)) {
		snprintf(err, errlen,
			 "%s: `%s` was killed by signal %d (%s): %s", p->name,
			 command, WTERMSIG(status), strsignal(WTERMSIG(status)),
			 output);
		return -1;
	}
	if (WEXITSTATUS(status) != 0) {
		snprintf(err, errlen, "%s: `%s` exited with status %d: %s",
			 p->name, command, WEXITSTATUS(status), output);
		return -1;
	}
	return 0;
}

int peer_measure(const char *peer, int runs, struct samples *out, char *err,
		 size_t errlen)
{
	const struct peer *p = find_peer(peer);

	if (!p) {
		snprintf(err, errlen, "unknown peer '%s' (known: runsc, bwrap)",
			 peer);
		return -1;
	}
	if (runs < 1) {
		snprintf(err, errlen,
			 "%s: %d runs asked for, at least 1 needed", peer,
			 runs);
		return -1;
	}
	for (int i = 0; i < runs; i++) {
		char why[ERROR_OUTPUT_BYTES + 512];
		double ms;

		if (run_once(p, &ms, why, sizeof(why)) < 0) {
			snprintf(err, errlen, "%s (run %d of %d)", why, i + 1,
				 runs);
			return -1;
		}
		int ret = samples_add(out, ms);
		if (ret < 0) {
			snprintf(err, errlen, "%s: keeping sample %.3f ms: %s",
				 peer, ms, strerror(-ret));
			return -1;
		}
	}
	return 0;
}

void bench_peers(struct bench *b)
{
	struct template_spec t = { .name = "peer",
				   .mem_mib = TEMPLATE_MEM_MIB,
				   .min_ready = 1,
				   .max_total = 4 };
	const char *name = "thaw: handout + `true` + release";
	char why[1024], text[512];
	struct samples s = { 0 };
	const struct daemon_spec spec = { .max_sandboxes = 8 };
	struct thawd d;

	bench_progress("peers: `true` in a fresh sandbox, %d runs each",
		       b->size->peer_runs);
	if (bench_start_daemon(b, &d, &t, 1, &spec, why, sizeof(why))) {
		bench_fail(b, "peers", name, why);
	} else {
		struct thaw_client *c = thawd_connect(&d, why, sizeof(why));
		int ret = c ? 0 : -1;

		for (int i = 0; i < b->size->peer_runs && !ret; i++) {
			struct handout h;
			double exec;

			ret = thawd_wait_ready(c, "peer", 1, 600, why,
					       sizeof(why));
			double start = monotonic_ms();
			if (!ret)
				ret = thawd_handout(c, "peer", &h, why,
						    sizeof(why));
			if (!ret) {
				ret = thawd_exec_true(c, h.id, &exec, why,
						      sizeof(why));
				if (thaw_client_delete(c, h.id, why,
						       sizeof(why)))
					ret = -1;
			}
			if (!ret)
				samples_add(&s, monotonic_ms() - start);
		}
		thaw_client_close(c);
		bench_stop_daemon(&d);
		if (ret) {
			bench_fail(b, "peers", name, why);
		} else {
			bench_note(b, text, sizeof(text), "from the warm pool");
			report_add_samples(b->report, "peers", name, "ms", &s,
					   text);
		}
	}
	samples_free(&s);

	for (int i = 0; peer_names[i]; i++) {
		char label[96];
		struct samples p = { 0 };

		snprintf(label, sizeof(label), "%s: `true` in a fresh sandbox",
			 peer_names[i]);
		if (peer_measure(peer_names[i], b->size->peer_runs, &p, why,
				 sizeof(why))) {
			bench_fail(b, "peers", label, why);
		} else {
			bench_note(b, text, sizeof(text),
				   "same host, same command");
			report_add_samples(b->report, "peers", label, "ms", &p,
					   text);
		}
		samples_free(&p);
	}
}
