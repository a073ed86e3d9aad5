// SPDX-License-Identifier: Apache-2.0
/*
 * vmm_process.c - see vmm_process.h.
 */
#include "pool/host/vmm_process.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h>
#include <sys/syscall.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pool/host/cgroup.h"
#include "pool/host/checkpoint.h"
#include "common/clock.h"
#include "common/guest_net.h"
#include "pool/host/interrupt.h"
#include "common/io.h"
#include "pool/host/netns.h"
#include "common/printable.h"

#define STOP_GRACE_TICKS 500 /* of 10 ms, before SIGKILL */
/* A snapshot writes all of guest memory before it answers. */
#define CONTROL_REPLY_TIMEOUT_MS 600000
#define MAX_VMM_ARGS 32
/* How often a wait for the VMM's readiness looks at thaw_interrupted. */
#define READY_CHECK_MS 250
/* Where root's run directories go (beside jail_ids.h's lock file). */
#define ROOT_RUN_DIR "/run/thaw"
/* The descriptor thaw-vmm's --ready-fd names: the one it gets past 2. */
#define READY_FD 3
#define READY_FD_ARG "3"

/* After mkdir or mkdtemp failed: nothing for vmm_process_remove(). */
static int no_run_dir(struct vmm_process *vmm, char *err, size_t errlen)
{
	int e = errno;

	snprintf(err, errlen, "cannot create %s: %s", vmm->dir, strerror(e));
	vmm->dir[0] = '\0';
	return -e;
}

static int make_run_dir(struct vmm_process *vmm, const char *run_dir, char *err,
			size_t errlen)
{
	const char *base = getenv("XDG_RUNTIME_DIR");
	bool root = geteuid() == 0;
	struct stat st;

	/* Never in a directory someone else may change, as another user's
	 * $XDG_RUNTIME_DIR kept through su or sudo -E would be. */
	if (base && (stat(base, &st) < 0 || !S_ISDIR(st.st_mode) ||
		     st.st_uid != geteuid() || (st.st_mode & 022)))
		base = NULL;
	if (!base && root)
		base = ROOT_RUN_DIR;

	if (run_dir) {
		/* Room for the longest file name in it, "/console.log". */
		size_t len = strlen(run_dir);

		if (len >= sizeof(vmm->dir) ||
		    len + sizeof("/console.log") > sizeof(vmm->vsock)) {
			snprintf(err, errlen,
				 "%s: path too long for a socket in it",
				 run_dir);
			return -ENAMETOOLONG;
		}
		memcpy(vmm->dir, run_dir, len + 1);
		if (mkdir(vmm->dir, 0700) < 0)
			return no_run_dir(vmm, err, errlen);
	} else if (!base ||
		   strlen(base) >
			   sizeof(vmm->dir) - sizeof("/thaw-run-XXXXXX") ||
		   (root && mkdir(base, 0755) < 0 && errno != EEXIST))
		base = "/tmp";
	if (!run_dir) {
		snprintf(vmm->dir, sizeof(vmm->dir), "%s/thaw-run-XXXXXX",
			 base);
		if (!mkdtemp(vmm->dir))
			return no_run_dir(vmm, err, errlen);
	}
	snprintf(vmm->vsock, sizeof(vmm->vsock), "%s/vsock.sock", vmm->dir);
	snprintf(vmm->control, sizeof(vmm->control), "%s/control.sock",
		 vmm->dir);
	snprintf(vmm->vmm_log, sizeof(vmm->vmm_log), "%s/vmm.log", vmm->dir);
	snprintf(vmm->console_log, sizeof(vmm->console_log), "%s/console.log",
		 vmm->dir);
	return 0;
}

/*
 * Claims the jail's id and makes its empty root; appends their flags to
 * @argv at *@n.  0, or a negative errno with @err.
 */
static int plan_jail(struct vmm_process *vmm, const struct vmm_place *place,
		     const char **argv, int *n, char id[16], char *err,
		     size_t errlen)
{
	bool net = place && place->net_prepare;
	int ret = net ? 0 : jail_empty_netns(err, errlen);

	if (ret == 0)
		ret = jail_id_claim(place ? place->jail_ids : NULL, &vmm->jail,
				    err, errlen);
	if (ret < 0)
		return ret;
	snprintf(vmm->root, sizeof(vmm->root), "%s/root", vmm->dir);
	if (mkdir(vmm->root, 0755) < 0) {
		ret = -errno;
		snprintf(err, errlen, "cannot create %s: %s", vmm->root,
			 strerror(-ret));
		vmm->root[0] = '\0';
		jail_id_release(&vmm->jail);
		return ret;
	}
	if (net) {
		snprintf(vmm->netns, sizeof(vmm->netns), "%s/%s", vmm->dir,
			 NET_PIN_NAME);
		ret = place->net_prepare(place->net_arg, vmm->netns,
					 vmm->jail.id, vmm->jail.id, err,
					 errlen);
		if (ret < 0) {
			vmm->netns[0] = '\0'; /* net_prepare cleaned up */
			return ret;
		}
		argv[(*n)++] = "--net-tap";
		argv[(*n)++] = GUEST_NET_TAP_NAME;
	}
	snprintf(id, 16, "%u", vmm->jail.id);
	argv[(*n)++] = "--jail";
	argv[(*n)++] = vmm->root;
	argv[(*n)++] = "--uid";
	argv[(*n)++] = id;
	argv[(*n)++] = "--gid";
	argv[(*n)++] = id;
	argv[(*n)++] = "--netns";
	argv[(*n)++] = net ? vmm->netns : JAIL_NETNS_FILE;
	if (place && place->out_dir) {
		argv[(*n)++] = "--writable";
		argv[(*n)++] = place->out_dir;
	}
	return 0;
}

/*
 * The sanitizer options of our environment, at most @max - 1 of them,
 * into @env (NULL-terminated): all a jailed VMM inherits.
 */
static const char **sanitizer_environment(const char **env, int max)
{
	int n = 0;

	for (char **e = environ; *e && n < max - 1; e++)
		if (!strncmp(*e, "ASAN_OPTIONS=", 13) ||
		    !strncmp(*e, "UBSAN_OPTIONS=", 14) ||
		    !strncmp(*e, "LSAN_OPTIONS=", 13))
			env[n++] = *e;
	env[n] = NULL;
	return env;
}

/* A pipe's writer sees POLLERR once every reader is gone. */
static bool reader_gone(int fd)
{
	struct pollfd p = { .fd = fd, .events = 0 };

	return poll(&p, 1, 0) == 1 && (p.revents & POLLERR);
}

/*
 * The child could not become the VMM: its log line for people, its stop
 * record (vmm/vmm_report.h) on @report_fd for the supervisor, its exit.
 */
static void child_failed(int log, int report_fd, const char *why)
{
	struct vmm_record r;

	dprintf(log, "%s\n", why);
	vmm_record_begin(&r, VMM_REPORT_STOP);
	vmm_record_put_u64(&r, "status", VMM_EXEC_FAILED);
	vmm_record_put_text(&r, "reason", why);
	(void)vmm_record_send(&r, report_fd);
	_exit(VMM_EXEC_FAILED);
}

int vmm_process_start(struct vmm_process *vmm, const char *const vmm_args[],
		      const struct vmm_place *place, char *err, size_t errlen)
{
	const struct cgroup *cgroup = place ? place->cgroup : NULL;
	bool jailed = !(place && place->no_jail);
	/* Ours: a jail's 10 and its network's 2, 3 sockets' and logs' 6,
	 * --log-max, --ready-fd, NULL. */
	const char *argv[MAX_VMM_ARGS + 23];
	char id[16]; /* the jail's uid and gid */
	int n = 0, ret, ready[2];

	memset(vmm, 0, sizeof(*vmm));
	vmm->report_fd = -1;
	vmm_report_init(&vmm->report);
	vmm->pidfd = -1;
	vmm->jail.lock_fd = -1;
	while (vmm_args[n] && n < MAX_VMM_ARGS) {
		argv[n] = vmm_args[n];
		n++;
	}
	ret = make_run_dir(vmm, place ? place->run_dir : NULL, err, errlen);
	if (ret < 0)
		return ret;
	if (!jailed && place->net_prepare) {
		snprintf(err, errlen,
			 "no network without the jail: the VMM joins its "
			 "namespace as it enters the jail");
		vmm_process_remove(vmm);
		return -EINVAL;
	}
	if (jailed) {
		ret = plan_jail(vmm, place, argv, &n, id, err, errlen);
		if (ret < 0) {
			vmm_process_remove(vmm);
			return ret;
		}
	} else {
		/* Debugging: nothing in the way of gdb or strace either. */
		argv[n++] = "--no-seccomp";
	}
	argv[n++] = "--vsock";
	argv[n++] = vmm->vsock;
	argv[n++] = "--control";
	argv[n++] = vmm->control;
	argv[n++] = "--console-log";
	argv[n++] = vmm->console_log;
	if (place && place->log_max) {
		argv[n++] = "--log-max";
		argv[n++] = place->log_max;
	}
	/* Close-on-exec both ends: only our child clears it on its end. */
	if (pipe2(ready, O_CLOEXEC) < 0) {
		ret = -errno;
		snprintf(err, errlen, "pipe: %s", strerror(-ret));
		vmm_process_remove(vmm);
		return ret;
	}
	argv[n++] = "--ready-fd";
	argv[n++] = READY_FD_ARG;
	argv[n] = NULL;
	/* A jailed VMM gets nothing of ours it does not need: not our
	 * environment either (tokens, paths), but its sanitizer's options. */
	char *const *env = environ;
	const char *jail_env[4] = { NULL };
	if (jailed)
		env = (char *const *)sanitizer_environment(jail_env, 4);

	vmm->started_ms = monotonic_ms();
	/* A jailed VMM is PID 1 of its own namespace: it sees no other
	 * process, and all of its own die with it. */
	struct clone_args clone = {
		.flags = CLONE_PIDFD | (jailed ? CLONE_NEWPID : 0),
		.pidfd = (uintptr_t)&vmm->pidfd,
		.exit_signal = SIGCHLD,
	};
	vmm->pid = syscall(SYS_clone3, &clone, sizeof(clone));
	if (vmm->pid < 0) {
		ret = -errno;
		snprintf(err, errlen, "clone3: %s", strerror(-ret));
		vmm->pid = 0;
		vmm->pidfd = -1;
		close(ready[0]);
		close(ready[1]);
		vmm_process_remove(vmm);
		return ret;
	}
	if (vmm->pid == 0) {
		sigset_t none;
		int log = open(vmm->vmm_log,
			       O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW |
				       O_CLOEXEC,
			       0600);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);

		/* The VMM dies with us even if we are killed outright. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		/* The daemon's threads block its stop signals (interrupt.h). */
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		/* Our parent may have died before PDEATHSIG was set. */
		if (reader_gone(ready[1]) || log < 0 || null < 0)
			_exit(VMM_EXEC_FAILED);
		if (cgroup && cgroup_enter(cgroup) < 0)
			child_failed(log, ready[1],
				     "cannot enter the sandbox's cgroup");
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(log, STDERR_FILENO);
		/* Its ready pipe at READY_FD, then no other descriptor of
		 * ours (whatever our own caller left open) goes along. */
		if (dup2(ready[1], READY_FD) < 0 ||
		    fcntl(READY_FD, F_SETFD, 0) < 0 ||
		    close_range(READY_FD + 1, ~0U, 0) < 0)
			_exit(VMM_EXEC_FAILED);
		execve(argv[0], (char *const *)argv, env);
		char why[PATH_MAX + 64];
		snprintf(why, sizeof(why), "cannot run %s: %s", argv[0],
			 strerror(errno));
		child_failed(log, READY_FD, why);
	}
	close(ready[1]);
	/* Read as it comes, never waited on but in wait_ready(). */
	fcntl(ready[0], F_SETFL, O_NONBLOCK);
	vmm->report_fd = ready[0];
	return 0;
}

/*
 * The last @size - 1 bytes of @path, NUL-terminated; returns their count
 * (0 when the file is missing or empty).  The console log is read from its
 * end: that is where a guest's last words are.
 */
static size_t read_tail(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	off_t end = fd < 0 ? 0 : lseek(fd, 0, SEEK_END);
	off_t from = end > (off_t)size - 1 ? end - ((off_t)size - 1) : 0;
	ssize_t n = fd < 0 ? -1 : pread(fd, buf, size - 1, from);

	if (fd >= 0)
		close(fd);
	n = n < 0 ? 0 : n;
	buf[n] = '\0';
	return n;
}

/*
 * The verdict is the stop record's: the VMM's reason as it ended, or the
 * child's that could not become one.  A VMM that wrote none had no say.
 */
void vmm_process_reason(const struct vmm_process *vmm, char *out, size_t size)
{
	const struct vmm_report *r = &vmm->report;
	char reason[VMM_REPORT_VALUE_MAX], name[VMM_REPORT_KEY_MAX];
	uint64_t nr;
	bool said = vmm_report_text(r->stop, "reason", reason,
				    sizeof(reason)) == 0 &&
		    reason[0];

	/* Shown in logs and the API's JSON: one printable UTF-8 line. */
	if (said)
		printable(reason);
	/*
	 * A filtered VMM dies by SIGSYS after its handler's record, "stop
	 * seccomp_syscall=41 seccomp_name=socket ..." (vmm/seccomp_filters.h):
	 * that record is the verdict.
	 */
	if (WIFSIGNALED(vmm->wait_status) &&
	    WTERMSIG(vmm->wait_status) == SIGSYS) {
		if (vmm_report_u64(r->stop, "seccomp_syscall", &nr) == 0 &&
		    vmm_report_text(r->stop, "seccomp_name", name,
				    sizeof(name)) == 0) {
			printable(name);
			snprintf(out, size,
				 "killed by its seccomp filter: forbidden "
				 "system call %llu (%s)",
				 (unsigned long long)nr, name);
		} else {
			snprintf(out, size,
				 "killed by its seccomp filter: SIGSYS, and "
				 "no record says which system call%s%s",
				 r->problem[0] ? "; its report: " : "",
				 r->problem);
		}
	} else if (said) {
		snprintf(out, size, "%s", reason);
	} else if (WIFSIGNALED(vmm->wait_status)) { /* it had no say */
		snprintf(out, size, "killed by signal %d (%s)%s%s",
			 WTERMSIG(vmm->wait_status),
			 strsignal(WTERMSIG(vmm->wait_status)),
			 r->problem[0] ? "; its report: " : "", r->problem);
	} else {
		snprintf(out, size, "exited with status %d, no message%s%s",
			 WEXITSTATUS(vmm->wait_status),
			 r->problem[0] ? "; its report: " : "", r->problem);
	}
}

size_t vmm_process_console_tail(const struct vmm_process *vmm, char *buf,
				size_t size)
{
	return read_tail(vmm->console_log, buf, size);
}

double vmm_process_setup_ms(const struct vmm_process *vmm)
{
	uint64_t us;

	return vmm_report_u64(vmm->report.stop, "setup_us", &us) == 0 ? us / 1e3
								      : -1;
}

/*
 * Takes what the report pipe holds: 1 at its end (EOF), 0 when it is
 * empty for now, a negative errno when it failed.
 */
static int read_report(struct vmm_process *vmm)
{
	char buf[VMM_REPORT_LINE_MAX];

	for (;;) {
		ssize_t n = read(vmm->report_fd, buf, sizeof(buf));

		if (n > 0) {
			vmm_report_feed(&vmm->report, buf, (size_t)n);
		} else if (n == 0) {
			vmm_report_end(&vmm->report);
			return 1;
		} else if (errno != EINTR) {
			return errno == EAGAIN ? 0 : -errno;
		}
	}
}

/*
 * The VMM is reaped: neither its pid nor its pidfd mean anything now, and
 * its report has all it will say (its last writer is gone).
 */
static void forget(struct vmm_process *vmm)
{
	vmm->pid = 0;
	if (vmm->pidfd >= 0)
		close(vmm->pidfd);
	vmm->pidfd = -1;
	if (vmm->report_fd >= 0) {
		read_report(vmm);
		close(vmm->report_fd);
	}
	vmm->report_fd = -1;
}

bool vmm_process_reap(struct vmm_process *vmm)
{
	if (vmm->pid <= 0 ||
	    waitpid(vmm->pid, &vmm->wait_status, WNOHANG) != vmm->pid)
		return false;
	forget(vmm);
	return true;
}

static bool vmm_exited(void *arg)
{
	return vmm_process_reap(arg);
}

/* "the VM stopped: " and its reason, after @what when there is one. */
static void vm_stopped(const struct vmm_process *vmm, const char *what,
		       char *err, size_t errlen)
{
	char reason[512];

	vmm_process_reason(vmm, reason, sizeof(reason));
	snprintf(err, errlen, "%s%sthe VM stopped: %s", what,
		 what[0] ? ": " : "", reason);
}

/*
 * Waits for the VMM's ready record: 0 once it came, -ECANCELED when the
 * VMM ended first (its stop record or EOF), -ETIMEDOUT when the deadline
 * passed, -EINTR when a signal came.  The pipe stays open for the rest.
 */
static int wait_ready(struct vmm_process *vmm, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p = { vmm->report_fd, POLLIN, 0 };
		uint64_t now = monotonic_ns();
		uint64_t left_ms = now < deadline_ns
					   ? (deadline_ns - now) / NS_PER_MS + 1
					   : 0;

		if (thaw_interrupted)
			return -EINTR;
		if (!left_ms)
			return -ETIMEDOUT;
		int n = poll(&p, 1,
			     left_ms < READY_CHECK_MS ? (int)left_ms
						      : READY_CHECK_MS);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n <= 0)
			continue;
		int ended = read_report(vmm);
		if (vmm->report.ready[0])
			return 0;
		if (ended < 0)
			return ended;
		if (ended || vmm->report.stop[0])
			return -ECANCELED;
	}
}

int vmm_process_wait_agent(struct vmm_process *vmm, struct agent_conn *agent,
			   int timeout_s, char *err, size_t errlen)
{
	const struct agent_wait wait = {
		.deadline_ns = monotonic_ns() + timeout_s * 1000 * NS_PER_MS,
		.give_up = vmm_exited,
		.arg = vmm,
	};
	char why[256] = "the VMM did not set up its VM";
	int ret = wait_ready(vmm, wait.deadline_ns);

	/* Its end of the pipe closed as it exited: reaped, for the reason. */
	if (ret == -ECANCELED) {
		struct pollfd exited = { vmm->pidfd, POLLIN, 0 };

		poll(&exited, 1, READY_CHECK_MS);
		vmm_process_reap(vmm);
	}
	if (ret == 0)
		ret = agent_connect_until(agent, vmm->vsock, &wait, why,
					  sizeof(why));

	switch (ret) {
	case 0:
		return 0;
	case -ECANCELED:
		vm_stopped(vmm, "", err, errlen);
		return -ECHILD;
	case -ETIMEDOUT:
		snprintf(err, errlen,
			 "no answer from the guest agent within %d s (%s)",
			 timeout_s, why);
		return ret;
	case -EINTR:
		/* The caller reports the interruption. */
		snprintf(err, errlen, "interrupted");
		return ret;
	default:
		snprintf(err, errlen, "%s", why);
		return ret;
	}
}

/* A connection to the VMM's control socket, or a negative errno. */
static int connect_control(const struct vmm_process *vmm)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	strcpy(addr.sun_path, vmm->control);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int e = errno;

		close(fd);
		return -e;
	}
	return fd;
}

/*
 * Reads one line into @reply; polls so a dying VMM cannot hang us.
 * -ECHILD when the VMM died, -EINTR when interrupted.
 */
static int read_line(struct vmm_process *vmm, int fd, char *reply, size_t len,
		     int timeout_ms)
{
	size_t used = 0;
	int waited_ms = 0;

	while (used < len - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		int ready = poll(&p, 1, 100);

		if (thaw_interrupted)
			return -EINTR;
		if (vmm_exited(vmm))
			return -ECHILD;
		if (ready <= 0) {
			if (ready < 0 && errno != EINTR)
				return -errno;
			waited_ms += 100;
			if (waited_ms > timeout_ms)
				return -ETIMEDOUT;
			continue;
		}
		ssize_t n = read(fd, reply + used, 1);
		if (n <= 0)
			return n < 0 ? -errno : -ECONNRESET;
		if (reply[used] == '\n')
			break;
		used++;
	}
	reply[used] = '\0';
	return 0;
}

/*
 * Sends @command and its newline in one message carrying @nr_fds
 * descriptors (SCM_RIGHTS; none when 0), so they arrive with the line.
 */
static int send_line(int fd, const char *command, const int *fds, int nr_fds)
{
	union {
		char space[CMSG_SPACE(CHECKPOINT_FILES * sizeof(int))];
		struct cmsghdr align;
	} u;
	char line[PATH_MAX + 80];
	size_t len = strlen(command);
	struct iovec iov = { line, len + 1 };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (len + 1 > sizeof(line) || nr_fds > CHECKPOINT_FILES)
		return -E2BIG;
	memcpy(line, command, len);
	line[len] = '\n';
	if (nr_fds) {
		msg.msg_control = u.space;
		msg.msg_controllen = CMSG_SPACE(nr_fds * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);

		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(nr_fds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, nr_fds * sizeof(int));
	}
	do
		n = sendmsg(fd, &msg, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	/* The descriptors went with the first byte; the rest as it comes. */
	return write_full(fd, line + n, len + 1 - n);
}

/*
 * vmm_process_control() with @nr_fds descriptors sent alongside, the
 * answer awaited at most @timeout_ms.
 */
static int control_within(struct vmm_process *vmm, const char *command,
			  const int *fds, int nr_fds, char *reply, size_t len,
			  int timeout_ms, char *err, size_t errlen)
{
	int fd = connect_control(vmm);
	int ret;

	reply[0] = '\0';
	if (fd < 0) {
		snprintf(err, errlen, "control socket %s: %s", vmm->control,
			 strerror(-fd));
		return fd;
	}
	ret = send_line(fd, command, fds, nr_fds);
	if (ret == 0)
		ret = read_line(vmm, fd, reply, len, timeout_ms);
	close(fd);
	if (ret < 0) {
		char what[PATH_MAX + 64];

		snprintf(what, sizeof(what), "no answer to '%s' from the VMM",
			 command);
		if (ret == -ECHILD)
			vm_stopped(vmm, what, err, errlen);
		else
			snprintf(err, errlen, "%s", what);
		return ret;
	}
	if (strncmp(reply, "ok", 2)) {
		snprintf(err, errlen, "the VMM answered '%s' to '%s'", reply,
			 command);
		return -EPROTO;
	}
	return 0;
}

int vmm_process_control(struct vmm_process *vmm, const char *command,
			char *reply, size_t len, char *err, size_t errlen)
{
	return control_within(vmm, command, NULL, 0, reply, len,
			      CONTROL_REPLY_TIMEOUT_MS, err, errlen);
}

/* The checkpoint's answer (control.h) into @out. */
static int parse_checkpoint(const char *reply, struct vmm_checkpoint *out,
			    char *err, size_t errlen)
{
	static const char *const keys[] = { "dirty_pages=", "full=", "depth=",
					    "pause_us=", "total_us=" };
	double v[5];

	for (size_t i = 0; i < 5; i++) {
		if (vmm_control_number(reply, keys[i], &v[i]) < 0) {
			snprintf(err, errlen,
				 "the VMM's checkpoint answer '%s' has no "
				 "number %s",
				 reply, keys[i]);
			return -EPROTO;
		}
	}
	*out = (struct vmm_checkpoint){
		.dirty_pages = (uint64_t)v[0],
		.full = v[1] != 0,
		.depth = (unsigned)v[2],
		.pause_ms = v[3] / 1000,
		.total_ms = v[4] / 1000,
	};
	return 0;
}

int vmm_process_checkpoint(struct vmm_process *vmm, const char *dir,
			   struct vmm_checkpoint *out, char *err, size_t errlen)
{
	char command[PATH_MAX + 16], reply[PATH_MAX + 160];
	int fds[CHECKPOINT_FILES];
	int ret;

	if ((size_t)snprintf(command, sizeof(command), "checkpoint %s", dir) >=
	    sizeof(command)) {
		snprintf(err, errlen, "checkpoint %s: path too long", dir);
		return -ENAMETOOLONG;
	}
	ret = checkpoint_files_create(dir, fds, err, errlen);
	if (ret)
		return ret;
	ret = control_within(vmm, command, fds, CHECKPOINT_FILES, reply,
			     sizeof(reply), CONTROL_REPLY_TIMEOUT_MS, err,
			     errlen);
	if (ret == 0)
		ret = parse_checkpoint(reply, out, err, errlen);
	if (ret == 0)
		ret = checkpoint_files_finish(dir, fds, out->full, err, errlen);
	else
		checkpoint_files_discard(dir, fds);
	return ret;
}

int vmm_control_number(const char *reply, const char *key, double *out)
{
	size_t n = strlen(key);

	for (const char *p = reply; (p = strstr(p, key)); p += n) {
		char *end;

		if (p != reply && p[-1] != ' ')
			continue; /* the tail of a longer key */
		/* Values are unsigned; strtod() alone would skip spaces. */
		if (!isdigit((unsigned char)p[n]))
			return -EINVAL;
		errno = 0;
		*out = strtod(p + n, &end);
		if (errno || (*end && *end != ' '))
			return -EINVAL;
		return 0;
	}
	return -ENOENT;
}

double vmm_restore_host_ms(const struct vmm_restore_phases *p)
{
	return p->process_start_ms + p->setup_ms + p->state_restore_ms;
}

int vmm_restore_phases_parse(const char *ready, double forked_ms,
			     double agent_ready_ms,
			     struct vmm_restore_phases *p, char *err,
			     size_t errlen)
{
	uint64_t started_at_us, setup_us, restore_us, prefetch_us, pages;
	const struct {
		const char *key;
		uint64_t *value;
	} fields[] = {
		{ "started_at_us", &started_at_us },
		{ "setup_us", &setup_us },
		{ "restore_us", &restore_us },
		{ "prefetch_us", &prefetch_us },
		{ "prefetched_pages", &pages },
	};

	for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
		int ret = vmm_report_u64(ready, fields[i].key, fields[i].value);

		if (ret < 0) {
			snprintf(err, errlen,
				 "the VMM's ready record '%s' has %s %s field",
				 ready, ret == -ENOENT ? "no" : "a bad",
				 fields[i].key);
			return -EPROTO;
		}
	}
	double started_at_ms = started_at_us / 1e3;
	double restored_at_ms =
		started_at_ms + (double)(setup_us + restore_us) / 1e3;
	*p = (struct vmm_restore_phases){
		.process_start_ms = started_at_ms - forked_ms,
		.setup_ms = setup_us / 1e3,
		.page_in_ms = prefetch_us / 1e3,
		.prefetched_pages = (double)pages,
		.state_restore_ms = restore_us / 1e3,
		.agent_ms = agent_ready_ms - restored_at_ms,
	};
	return 0;
}

int vmm_process_restore_phases(const struct vmm_process *vmm,
			       double agent_ready_ms,
			       struct vmm_restore_phases *p, char *err,
			       size_t errlen)
{
	return vmm_restore_phases_parse(vmm->report.ready, vmm->started_ms,
					agent_ready_ms, p, err, errlen);
}

void vmm_process_stop(struct vmm_process *vmm)
{
	struct timespec tick = { 0, 10000000L };
	int status;

	if (vmm->pid <= 0)
		return;
	int fd = connect_control(vmm);
	if (fd < 0 || write(fd, "stop\n", 5) != 5)
		kill(vmm->pid, SIGTERM);
	for (int waited = 0; waitpid(vmm->pid, &status, WNOHANG) == 0;
	     waited++) {
		if (waited == STOP_GRACE_TICKS)
			kill(vmm->pid, SIGKILL);
		nanosleep(&tick, NULL);
	}
	if (fd >= 0)
		close(fd);
	forget(vmm);
}

void vmm_process_kill(struct vmm_process *vmm)
{
	if (vmm->pid <= 0)
		return;
	kill(vmm->pid, SIGKILL);
	while (waitpid(vmm->pid, NULL, 0) < 0 && errno == EINTR)
		;
	forget(vmm);
}

void vmm_process_remove(struct vmm_process *vmm)
{
	vmm_process_stop(vmm);
	if (!vmm->dir[0])
		return;
	unlink(vmm->vsock);
	unlink(vmm->control);
	unlink(vmm->vmm_log);
	unlink(vmm->console_log);
	if (vmm->netns[0])
		net_pin_remove(vmm->netns);
	/* Its mounts were in its own namespace, gone with it. */
	if (vmm->root[0]) {
		rmdir(vmm->root);
		jail_id_release(&vmm->jail);
	}
	rmdir(vmm->dir);
	vmm->dir[0] = vmm->root[0] = vmm->netns[0] = '\0';
}
