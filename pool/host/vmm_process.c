// SPDX-License-Identifier: Apache-2.0
/*
 * vmm_process.c - see vmm_process.h.
 */
#include "vmm_process.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "clock.h"
#include "interrupt.h"
#include "io.h"

/*
 * A restored clone answers within milliseconds of its VMM starting, so the
 * first attempts come quickly; a booting guest takes seconds, so later
 * ones back off.
 */
#define CONNECT_RETRY_FAST_NS 1000000L
#define CONNECT_RETRY_SLOW_NS 20000000L
#define CONNECT_FAST_PHASE_MS 500
#define STOP_GRACE_TICKS 500 /* of 10 ms, before SIGKILL */
/* A snapshot writes all of guest memory before it answers. */
#define CONTROL_REPLY_TIMEOUT_MS 600000
#define MAX_VMM_ARGS 32

static int make_run_dir(struct vmm_process *vmm, const char *who,
			const char *run_dir)
{
	const char *base = getenv("XDG_RUNTIME_DIR");

	if (run_dir) {
		/* Room for the longest file name in it, "/console.log". */
		size_t len = strlen(run_dir);

		if (len >= sizeof(vmm->dir) ||
		    len + sizeof("/console.log") > sizeof(vmm->vsock)) {
			fprintf(stderr,
				"%s: %s: path too long for a socket in it\n",
				who, run_dir);
			return -1;
		}
		memcpy(vmm->dir, run_dir, len + 1);
		if (mkdir(vmm->dir, 0700) < 0) {
			fprintf(stderr, "%s: cannot create %s: %s\n", who,
				vmm->dir, strerror(errno));
			vmm->dir[0] = '\0';
			return -1;
		}
	} else if (!base ||
		   strlen(base) > sizeof(vmm->dir) - sizeof("/thaw-run-XXXXXX"))
		base = "/tmp";
	if (!run_dir) {
		snprintf(vmm->dir, sizeof(vmm->dir), "%s/thaw-run-XXXXXX", base);
		if (!mkdtemp(vmm->dir)) {
			fprintf(stderr, "%s: cannot create %s: %s\n", who,
				vmm->dir, strerror(errno));
			vmm->dir[0] = '\0';
			return -1;
		}
	}
	snprintf(vmm->vsock, sizeof(vmm->vsock), "%s/vsock.sock", vmm->dir);
	snprintf(vmm->control, sizeof(vmm->control), "%s/control.sock", vmm->dir);
	snprintf(vmm->vmm_log, sizeof(vmm->vmm_log), "%s/vmm.log", vmm->dir);
	snprintf(vmm->console_log, sizeof(vmm->console_log), "%s/console.log",
		 vmm->dir);
	return 0;
}

int vmm_process_start(struct vmm_process *vmm, const char *who,
		  const char *const vmm_args[],
		  const struct vmm_place *place)
{
	const struct cgroup *cgroup = place ? place->cgroup : NULL;
	const char *argv[MAX_VMM_ARGS + 7];
	pid_t parent = getpid();
	int n = 0;

	memset(vmm, 0, sizeof(*vmm));
	while (vmm_args[n] && n < MAX_VMM_ARGS) {
		argv[n] = vmm_args[n];
		n++;
	}
	if (make_run_dir(vmm, who, place ? place->run_dir : NULL) < 0)
		return -1;
	argv[n++] = "--vsock";
	argv[n++] = vmm->vsock;
	argv[n++] = "--control";
	argv[n++] = vmm->control;
	argv[n++] = "--console-log";
	argv[n++] = vmm->console_log;
	argv[n] = NULL;

	vmm->started_ms = monotonic_ms();
	vmm->pid = fork();
	if (vmm->pid < 0) {
		fprintf(stderr, "%s: fork: %s\n", who, strerror(errno));
		vmm->pid = 0;
		return -1;
	}
	if (vmm->pid == 0) {
		int log = open(vmm->vmm_log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int null = open("/dev/null", O_RDWR);

		/* The VMM dies with us even if we are killed outright. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || log < 0 || null < 0)
			_exit(VMM_EXEC_FAILED);
		if (cgroup && cgroup_enter(cgroup) < 0) {
			dprintf(log, "%s: cannot enter the sandbox's cgroup\n",
				who);
			_exit(VMM_EXEC_FAILED);
		}
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(log, STDERR_FILENO);
		execv(argv[0], (char *const *)argv);
		dprintf(log, "%s: cannot run %s: %s\n", who, argv[0],
			strerror(errno));
		_exit(VMM_EXEC_FAILED);
	}
	return 0;
}

/*
 * The last @size - 1 bytes of @path, NUL-terminated; returns their count
 * (0 when the file is missing or empty).  Logs are read from their end:
 * that is where the VMM's reason and timings, and a guest's last words, are.
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

/* @s past @prefix, or NULL when @s does not start with it. */
static const char *skip(const char *s, const char *prefix)
{
	size_t n = strlen(prefix);

	return strncmp(s, prefix, n) ? NULL : s + n;
}

/*
 * The message of one of thaw-vmm's text log lines, "TIME thaw-vmm: [LEVEL: ]
 * [sandbox ID: ]MESSAGE" (log.h): what was the whole line before the VMM had
 * a logger.  Other lines (this file's own, written into the log by the
 * child before exec) come back whole.
 */
static const char *vmm_log_message(const char *line)
{
	const char *space = strchr(line, ' ');
	const char *p = space ? skip(space + 1, "thaw-vmm: ") : NULL;
	const char *after;

	if (!p || line[0] < '0' || line[0] > '9' || space[-1] != 'Z')
		return line;
	if ((after = skip(p, "error: ")) || (after = skip(p, "warning: ")) ||
	    (after = skip(p, "debug: ")))
		p = after;
	if ((after = skip(p, "sandbox ")) && (after = strstr(after, ": ")))
		p = after + 2;
	return p;
}

void vmm_process_reason(const struct vmm_process *vmm, char *out, size_t size)
{
	char buf[8192];

	snprintf(out, size, "no message");
	read_tail(vmm->vmm_log, buf, sizeof(buf));
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		const char *msg = vmm_log_message(line);

		if (!strstr(msg, "timings:")) {
			snprintf(out, size, "%s", msg);
			return;
		}
	}
}

/* The guest console's last lines: why a guest never got to its agent. */
static void print_console_tail(const struct vmm_process *vmm, const char *who)
{
	char buf[4096];
	size_t n = read_tail(vmm->console_log, buf, sizeof(buf));

	if (n > 0) {
		fprintf(stderr, "%s: last guest console output:\n", who);
		fwrite(buf, 1, n, stderr);
	}
}

double vmm_process_setup_ms(const struct vmm_process *vmm)
{
	char buf[8192];
	const char *p;

	read_tail(vmm->vmm_log, buf, sizeof(buf));
	p = strstr(buf, "vmm setup ");
	return p ? strtod(p + strlen("vmm setup "), NULL) : -1;
}

static bool vmm_exited(struct vmm_process *vmm, const char *who)
{
	int status;
	char reason[512];

	if (vmm->pid <= 0 || waitpid(vmm->pid, &status, WNOHANG) != vmm->pid)
		return false;
	vmm->pid = 0;
	vmm_process_reason(vmm, reason, sizeof(reason));
	fprintf(stderr, "%s: the VM stopped: %s\n", who, reason);
	return true;
}

int vmm_process_wait_agent(struct vmm_process *vmm, const char *who,
		       struct agent_conn *agent, int timeout_s)
{
	double deadline = monotonic_ms() + timeout_s * 1e3;
	char err[256] = "";

	for (;;) {
		double left_ms = deadline - monotonic_ms();
		int ret = agent_connect(agent, vmm->vsock,
					left_ms > 1 ? (uint64_t)left_ms : 1,
					err, sizeof(err));

		if (ret == 0)
			return 0;
		if (ret != -EAGAIN) {
			fprintf(stderr, "%s: %s\n", who, err);
			return -1;
		}
		if (vmm_exited(vmm, who) || thaw_interrupted)
			return -1;
		if (monotonic_ms() > deadline) {
			print_console_tail(vmm, who);
			fprintf(stderr,
				"%s: no answer from the guest agent within %d s (%s)\n",
				who, timeout_s, err);
			return -1;
		}
		struct timespec retry = { 0,
					  monotonic_ms() - vmm->started_ms <
							  CONNECT_FAST_PHASE_MS
						  ? CONNECT_RETRY_FAST_NS
						  : CONNECT_RETRY_SLOW_NS };
		nanosleep(&retry, NULL);
	}
}

static int connect_control(const struct vmm_process *vmm)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	strcpy(addr.sun_path, vmm->control);
	if (fd >= 0 &&
	    connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Reads one line into @reply; polls so a dying VMM cannot hang us. */
static int read_line(struct vmm_process *vmm, const char *who, int fd, char *reply,
		     size_t len)
{
	size_t used = 0;
	int waited_ms = 0;

	while (used < len - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		int ready = poll(&p, 1, 100);

		if (thaw_interrupted || vmm_exited(vmm, who))
			return -1;
		if (ready <= 0) {
			if (ready < 0 && errno != EINTR)
				return -1;
			waited_ms += 100;
			if (waited_ms > CONTROL_REPLY_TIMEOUT_MS)
				return -1;
			continue;
		}
		ssize_t n = read(fd, reply + used, 1);
		if (n <= 0)
			return -1;
		if (reply[used] == '\n')
			break;
		used++;
	}
	reply[used] = '\0';
	return 0;
}

int vmm_process_control(struct vmm_process *vmm, const char *who, const char *command,
		    char *reply, size_t len)
{
	int fd = connect_control(vmm);
	int ret = -1;

	reply[0] = '\0';
	if (fd < 0) {
		fprintf(stderr, "%s: control socket %s: %s\n", who, vmm->control,
			strerror(errno));
		return -1;
	}
	if (write_full(fd, command, strlen(command)) < 0 ||
	    write_full(fd, "\n", 1) < 0 ||
	    read_line(vmm, who, fd, reply, len) < 0)
		fprintf(stderr, "%s: no answer to '%s' from the VMM\n", who,
			command);
	else if (strncmp(reply, "ok", 2))
		fprintf(stderr, "%s: the VMM answered '%s' to '%s'\n", who,
			reply, command);
	else
		ret = 0;
	close(fd);
	return ret;
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
	vmm->pid = 0;
}

void vmm_process_kill(struct vmm_process *vmm)
{
	if (vmm->pid <= 0)
		return;
	kill(vmm->pid, SIGKILL);
	while (waitpid(vmm->pid, NULL, 0) < 0 && errno == EINTR)
		;
	vmm->pid = 0;
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
	rmdir(vmm->dir);
	vmm->dir[0] = '\0';
}
