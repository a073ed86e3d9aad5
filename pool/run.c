// SPDX-License-Identifier: Apache-2.0
/*
 * run.c - `thaw run`: one command in a fresh microVM, then nothing left.
 *
 * Boots thaw-vmm with a vsock device whose host side lives in a private run
 * directory, waits for the guest agent's HELLO, executes the command, copies
 * its stdout and stderr to ours byte for byte, and returns its exit status
 * (128 + signal when it was killed).  The VM is then stopped through the
 * VMM's control socket (SIGKILL if it does not go within 5 s) and the run
 * directory removed, on every path out, including ^C.
 *
 * The guest is the default one unless --kernel/--initrd say otherwise:
 * thaw's kernel (thaw-vmm builds it on first use) and an initramfs whose
 * PID 1 is thaw-agent, packed and cached by thaw-mkinitramfs.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "agent_client.h"
#include "io.h"
#include "subprocess.h"
#include "thaw.h"

#define BOOT_TIMEOUT_S_DEFAULT 600
#define CONNECT_RETRY_NS 20000000L
#define EXIT_THAW_ERROR 125  /* like env(1): the tool failed, not CMD */
#define STOP_GRACE_TICKS 500 /* of 10 ms, before SIGKILL */

/* Short paths: the vsock socket's must fit in sockaddr_un (108 bytes). */
struct run {
	char dir[80];
	char vsock[96];
	char control[96];
	char vmm_log[96];
	char console_log[96];
	pid_t vmm;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	interrupted = sig;
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *tool_path(const char *env, const char *built_in)
{
	const char *p = getenv(env);

	return p ? p : built_in;
}

static int make_run_dir(struct run *r)
{
	const char *base = getenv("XDG_RUNTIME_DIR");

	if (!base || strlen(base) > sizeof(r->dir) - sizeof("/thaw-run-XXXXXX"))
		base = "/tmp";
	snprintf(r->dir, sizeof(r->dir), "%s/thaw-run-XXXXXX", base);
	if (!mkdtemp(r->dir)) {
		fprintf(stderr, "thaw run: cannot create %s: %s\n", r->dir,
			strerror(errno));
		return -1;
	}
	snprintf(r->vsock, sizeof(r->vsock), "%s/vsock.sock", r->dir);
	snprintf(r->control, sizeof(r->control), "%s/control.sock", r->dir);
	snprintf(r->vmm_log, sizeof(r->vmm_log), "%s/vmm.log", r->dir);
	snprintf(r->console_log, sizeof(r->console_log), "%s/console.log",
		 r->dir);
	return 0;
}

/* Starts thaw-vmm; it dies with us even if we are killed outright. */
static int start_vmm(struct run *r, char **vmm_argv)
{
	pid_t parent = getpid();

	r->vmm = fork();
	if (r->vmm < 0) {
		fprintf(stderr, "thaw run: fork: %s\n", strerror(errno));
		return -1;
	}
	if (r->vmm == 0) {
		int log = open(r->vmm_log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
		int null = open("/dev/null", O_RDWR);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent || log < 0 || null < 0)
			_exit(EXIT_THAW_ERROR);
		dup2(null, STDIN_FILENO);
		dup2(null, STDOUT_FILENO);
		dup2(log, STDERR_FILENO);
		execv(vmm_argv[0], vmm_argv);
		dprintf(log, "thaw run: cannot run %s: %s\n", vmm_argv[0],
			strerror(errno));
		_exit(EXIT_THAW_ERROR);
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

/*
 * The VMM's reason for stopping: the first line it printed that is not its
 * timings ("thaw-vmm: guest ...", or an input error naming the file).
 */
static void vmm_reason(const struct run *r, char *out, size_t size)
{
	char buf[8192];

	snprintf(out, size, "no message");
	read_tail(r->vmm_log, buf, sizeof(buf));
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		if (!strstr(line, "timings:")) {
			snprintf(out, size, "%s", line);
			return;
		}
	}
}

/* The guest console's last lines: why a guest never got to its agent. */
static void print_console_tail(const struct run *r)
{
	char buf[4096];
	size_t n = read_tail(r->console_log, buf, sizeof(buf));

	if (n > 0) {
		fprintf(stderr, "thaw run: last guest console output:\n");
		fwrite(buf, 1, n, stderr);
	}
}

/* "vmm setup 12.3 ms" from thaw-vmm's timings line, or -1. */
static double vmm_setup_ms(const struct run *r)
{
	char buf[8192];
	const char *p;

	read_tail(r->vmm_log, buf, sizeof(buf));
	p = strstr(buf, "vmm setup ");
	return p ? strtod(p + strlen("vmm setup "), NULL) : -1;
}

/* Asks the VMM to stop through its control socket; kills it if it won't. */
static void stop_vmm(struct run *r)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	struct timespec tick = { 0, 10000000L };
	int status;

	if (r->vmm <= 0)
		return;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	strcpy(addr.sun_path, r->control);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    write(fd, "stop\n", 5) != 5)
		kill(r->vmm, SIGTERM);
	for (int waited = 0; waitpid(r->vmm, &status, WNOHANG) == 0; waited++) {
		if (waited == STOP_GRACE_TICKS)
			kill(r->vmm, SIGKILL);
		nanosleep(&tick, NULL);
	}
	if (fd >= 0)
		close(fd);
	r->vmm = 0;
}

static void remove_run_dir(const struct run *r)
{
	unlink(r->vsock);
	unlink(r->control);
	unlink(r->vmm_log);
	unlink(r->console_log);
	rmdir(r->dir);
}

/* Polls the vsock socket until the agent greets us or the VMM is gone. */
static int wait_for_agent(struct run *r, struct agent_conn *agent,
			  int timeout_s)
{
	double deadline = now_ms() + timeout_s * 1e3;
	struct timespec retry = { 0, CONNECT_RETRY_NS };
	char err[256] = "";
	int status;

	for (;;) {
		int ret = agent_connect(agent, r->vsock, err, sizeof(err));

		if (ret == 0)
			return 0;
		if (ret != -EAGAIN) {
			fprintf(stderr, "thaw run: %s\n", err);
			return -1;
		}
		if (waitpid(r->vmm, &status, WNOHANG) == r->vmm) {
			r->vmm = 0;
			char reason[512];

			vmm_reason(r, reason, sizeof(reason));
			fprintf(stderr,
				"thaw run: the VM stopped before its agent answered: %s\n",
				reason);
			return -1;
		}
		if (interrupted)
			return -1;
		if (now_ms() > deadline) {
			print_console_tail(r);
			fprintf(stderr,
				"thaw run: no answer from the guest agent "
				"within %d s (%s)\n",
				timeout_s, err);
			return -1;
		}
		nanosleep(&retry, NULL);
	}
}

/* Streams the command's output; returns its exit status for our exit. */
static int relay_exec(struct agent_conn *agent, char *const argv[],
		      uint32_t timeout_ms)
{
	const uint32_t id = 1;
	struct thaw_frame f;
	struct thaw_msg m;
	char why[256];
	int ret = agent_exec(agent, id, argv, timeout_ms);

	while (ret == 0 && !interrupted) {
		ret = agent_next_frame(agent, &f);
		if (ret < 0 || f.h.request_id != id)
			continue;
		if (thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, why,
				    sizeof(why)) < 0) {
			fprintf(stderr, "thaw run: bad frame from agent: %s\n",
				why);
			return EXIT_THAW_ERROR;
		}
		const struct thaw_field *data;

		switch (f.h.type) {
		case THAW_STDOUT:
		case THAW_STDERR:
			data = thaw_get(&m, THAW_T_DATA);
			/* A closed stdout must not stop the run. */
			write_full(f.h.type == THAW_STDOUT ? STDOUT_FILENO
							   : STDERR_FILENO,
				   data->data, data->len);
			break;
		case THAW_EXIT:
			if (thaw_get_u8(&m, THAW_T_TIMED_OUT, 0))
				fprintf(stderr, "thaw run: %s timed out\n",
					argv[0]);
			if (thaw_has(&m, THAW_T_SIGNAL))
				return 128 + thaw_get_u32(&m, THAW_T_SIGNAL, 0);
			return thaw_get_u32(&m, THAW_T_EXIT_CODE, 0);
		case THAW_ERROR:
			thaw_get_str(&m, THAW_T_MESSAGE, why, sizeof(why));
			fprintf(stderr, "thaw run: %s: %s\n", argv[0], why);
			/* As a shell answers a command it cannot run. */
			return thaw_get_u32(&m, THAW_T_ERRNO, 0) == ENOENT
				       ? 127
				       : 126;
		}
	}
	if (!interrupted)
		fprintf(stderr, "thaw run: lost the agent: %s\n",
			strerror(-ret));
	return EXIT_THAW_ERROR;
}

static const char run_usage[] =
	"usage: thaw run [--mem MiB] [--vcpus N] [--kernel K --initrd I]\n"
	"                [--timeout S] [--boot-timeout S] -- CMD [ARG...]\n"
	"Boots a microVM, runs CMD in it, copies its stdout and stderr, exits\n"
	"with its exit status (128+signal if killed; 125 if thaw failed).\n";

int thaw_run(int argc, char **argv)
{
	static const struct option options[] = {
		{ "mem", required_argument, NULL, 'm' },
		{ "vcpus", required_argument, NULL, 'n' },
		{ "kernel", required_argument, NULL, 'k' },
		{ "initrd", required_argument, NULL, 'i' },
		{ "timeout", required_argument, NULL, 't' },
		{ "boot-timeout", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *mem = "256", *vcpus = "1", *kernel = NULL, *initrd = NULL;
	long timeout_s = 0, boot_timeout_s = BOOT_TIMEOUT_S_DEFAULT;
	char initrd_buf[PATH_MAX], *end;
	int opt;

	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv, "+:", options, NULL)) != -1) {
		switch (opt) {
		case 'm':
			mem = optarg; /* thaw-vmm checks the range */
			break;
		case 'n':
			vcpus = optarg;
			break;
		case 'k':
			kernel = optarg;
			break;
		case 'i':
			initrd = optarg;
			break;
		case 't':
		case 'b':
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (errno || *end || end == optarg || v < 1 ||
			    v > 86400) {
				fprintf(stderr,
					"thaw run: --%s '%s' is not a number "
					"of seconds (1..86400)\n",
					opt == 't' ? "timeout" : "boot-timeout",
					optarg);
				return EXIT_THAW_ERROR;
			}
			*(opt == 't' ? &timeout_s : &boot_timeout_s) = v;
			break;
		case 'h':
			fputs(run_usage, stdout);
			return 0;
		case ':':
			fprintf(stderr, "thaw run: option '%s' needs a value\n",
				argv[optind - 1]);
			return EXIT_THAW_ERROR;
		default:
			fprintf(stderr,
				"thaw run: unknown option '%s' (see thaw run "
				"--help)\n",
				argv[optind - 1]);
			return EXIT_THAW_ERROR;
		}
	}
	if (optind >= argc) {
		fprintf(stderr,
			"thaw run: no command given (thaw run -- CMD)\n");
		return EXIT_THAW_ERROR;
	}
	char **cmd = argv + optind;

	if (!initrd) {
		char *mk[] = { (char *)tool_path("THAW_MKINITRAMFS",
						 THAW_MKINITRAMFS_PATH),
			       "--init",
			       (char *)tool_path("THAW_AGENT", THAW_AGENT_PATH),
			       NULL };
		if (run_for_last_line(mk, initrd_buf, sizeof(initrd_buf),
				      "thaw run: guest initramfs") < 0)
			return EXIT_THAW_ERROR;
		initrd = initrd_buf;
	}

	struct sigaction sa = { .sa_handler = on_signal };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);

	struct run r = { 0 };
	if (make_run_dir(&r) < 0)
		return EXIT_THAW_ERROR;
	char *vmm_argv[] = { (char *)tool_path("THAW_VMM", THAW_VMM_PATH),
			     "--initrd",
			     (char *)initrd,
			     "--mem",
			     (char *)mem,
			     "--vcpus",
			     (char *)vcpus,
			     "--vsock",
			     r.vsock,
			     "--control",
			     r.control,
			     "--console-log",
			     r.console_log,
			     kernel ? "--kernel" : NULL,
			     (char *)kernel,
			     NULL };

	struct agent_conn agent = { .fd = -1 };
	int status = EXIT_THAW_ERROR;
	double start = now_ms();
	if (start_vmm(&r, vmm_argv) == 0 &&
	    wait_for_agent(&r, &agent, boot_timeout_s) == 0) {
		double ready = now_ms();

		status = relay_exec(&agent, cmd, timeout_s * 1000);
		agent_close(&agent);
		stop_vmm(&r);
		double setup = vmm_setup_ms(&r);
		fprintf(stderr,
			"thaw: vmm setup %.1f ms, boot to agent ready %.1f ms, "
			"command %.1f ms\n",
			setup, ready - start - (setup > 0 ? setup : 0),
			now_ms() - ready);
	}
	stop_vmm(&r);
	if (interrupted) {
		fprintf(stderr, "thaw run: interrupted\n");
		status = 128 + interrupted;
	}
	remove_run_dir(&r);
	return status;
}
