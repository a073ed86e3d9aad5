// SPDX-License-Identifier: Apache-2.0
/*
 * agent_main.c - thaw-agent's entry point and event loop.
 *
 *   thaw-agent [--listen vsock:PORT | --listen unix:PATH]
 *
 * In the guest the agent is PID 1: it sets up the system (init.c), then
 * serves the protocol of guest/PROTOCOL.md on vsock port 1024.  On a host
 * (tests) it serves the same protocol on a Unix socket and, being nobody's
 * init, makes itself a child subreaper so orphaned grandchildren of its
 * execs are reaped by the same code as in the guest.
 *
 * One epoll set carries the listener, a signalfd (SIGCHLD; SIGTERM and
 * SIGINT when not PID 1), the connections, every exec's pipes and timeout
 * timerfd, every directory watch's inotify fd.  After each batch of events
 * one slice of a pending directory walk runs (watch.c: a recursive WATCH
 * of a big tree never holds the loop; while one is pending the loop polls
 * instead of waiting), then agent_sweep frees what died during the batch
 * and re-evaluates each connection's flow control.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <linux/vm_sockets.h>

#include "guest/agent/agent.h"

struct agent agent = { .epfd = -1 };

int watch_set(struct watch *w, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = w };
	int op = w->registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;

	if (epoll_ctl(agent.epfd, op, w->fd, &ev) < 0) {
		agent_log("epoll_ctl fd %d: %s", w->fd, strerror(errno));
		return -errno;
	}
	w->registered = true;
	return 0;
}

void watch_close(struct watch *w)
{
	if (w->fd < 0)
		return;
	/* close() would drop it from the set too, but not if it was dup'ed. */
	if (w->registered)
		epoll_ctl(agent.epfd, EPOLL_CTL_DEL, w->fd, NULL);
	close(w->fd);
	w->fd = -1;
	w->registered = false;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: thaw-agent [--listen vsock:PORT|unix:PATH]\n"
		"Serves the thaw agent protocol; default vsock:%d.\n",
		THAW_AGENT_VSOCK_PORT);
}

static int parse_port(const char *s, unsigned *port)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || v == 0 || v > 0xffffffffUL)
		return -EINVAL;
	*port = (unsigned)v;
	return 0;
}

static int listen_on(const char *addr)
{
	int fd;

	if (strncmp(addr, "unix:", 5) == 0) {
		struct sockaddr_un sun = { .sun_family = AF_UNIX };
		const char *path = addr + 5;

		if (!*path || strlen(path) >= sizeof(sun.sun_path)) {
			fprintf(stderr,
				"thaw-agent: --listen %s: path empty or longer "
				"than %zu bytes\n",
				addr, sizeof(sun.sun_path) - 1);
			return -EINVAL;
		}
		strcpy(sun.sun_path, path);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			    0);
		if (fd >= 0 &&
		    bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
			close(fd);
			fd = -1;
		}
	} else if (strncmp(addr, "vsock:", 6) == 0) {
		struct sockaddr_vm svm = { .svm_family = AF_VSOCK,
					   .svm_cid = VMADDR_CID_ANY };
		unsigned port;

		if (parse_port(addr + 6, &port)) {
			fprintf(stderr,
				"thaw-agent: --listen %s: port must be 1 to "
				"4294967295\n",
				addr);
			return -EINVAL;
		}
		svm.svm_port = port;
		fd = socket(AF_VSOCK,
			    SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd >= 0 &&
		    bind(fd, (struct sockaddr *)&svm, sizeof(svm)) < 0) {
			close(fd);
			fd = -1;
		}
	} else {
		fprintf(stderr,
			"thaw-agent: --listen %s: want vsock:PORT or "
			"unix:PATH\n",
			addr);
		return -EINVAL;
	}
	if (fd < 0 || listen(fd, 64) < 0) {
		int err = errno;

		agent_log("listen on %s: %s", addr, strerror(err));
		if (fd >= 0)
			close(fd);
		return -err;
	}
	return fd;
}

static void handle_signals(void)
{
	struct signalfd_siginfo si;
	bool child = false;

	while (read(agent.sig.fd, &si, sizeof(si)) == sizeof(si)) {
		if (si.ssi_signo == SIGCHLD)
			child = true;
		else
			agent.stopping = true;
	}
	/* Signals coalesce, so one SIGCHLD may stand for many children. */
	if (child)
		exec_reap();
}

static void agent_sweep(void)
{
	struct conn **pc = &agent.conns;

	while (*pc) {
		struct conn *c = *pc;

		if (c->dead) {
			*pc = c->next;
			conn_destroy(c);
		} else {
			conn_update(c);
			pc = &c->next;
		}
	}
	exec_sweep();
}

static void dispatch(struct watch *w, uint32_t events)
{
	switch (w->kind) {
	case W_LISTENER:
		conn_accept();
		break;
	case W_SIGNAL:
		handle_signals();
		break;
	case W_CONN:
		conn_event(w->obj, events);
		break;
	case W_STDIN:
	case W_STDOUT:
	case W_STDERR:
	case W_TIMER:
		exec_event(w, events);
		break;
	case W_INOTIFY:
		fswatch_event(w);
		break;
	}
}

static int run(void)
{
	struct epoll_event evs[64];

	while (!agent.stopping) {
		/* A directory walk goes on between batches: poll, not wait. */
		int n = epoll_wait(agent.epfd, evs, 64,
				   fswatch_walking() ? 0 : -1);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			agent_log("epoll_wait: %s", strerror(errno));
			return -errno;
		}
		for (int i = 0; i < n; i++)
			dispatch(evs[i].data.ptr, evs[i].events);
		fswatch_walk();
		agent_sweep();
	}
	return 0;
}

/*
 * Children get fds 0-2 by dup2 from pipes; if the kernel started us with
 * them closed (no /dev/console), a pipe could land there and be clobbered.
 */
static void fill_std_fds(void)
{
	int fd;

	do {
		fd = open("/dev/null", O_RDWR);
	} while (fd >= 0 && fd < 3);
	if (fd >= 0)
		close(fd);
}

static int setup(const char *addr)
{
	sigset_t mask;

	agent.epfd = epoll_create1(EPOLL_CLOEXEC);
	if (agent.epfd < 0) {
		agent_log("epoll_create1: %s", strerror(errno));
		return -errno;
	}
	/* A client that vanishes must cost an EPIPE, not the agent. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	if (!agent.pid1) {
		sigaddset(&mask, SIGTERM);
		sigaddset(&mask, SIGINT);
		if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
			agent_log("PR_SET_CHILD_SUBREAPER: %s",
				  strerror(errno));
	}
	sigprocmask(SIG_BLOCK, &mask, NULL);
	agent.sig = (struct watch){ .kind = W_SIGNAL };
	agent.sig.fd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (agent.sig.fd < 0) {
		agent_log("signalfd: %s", strerror(errno));
		return -errno;
	}
	if (watch_set(&agent.sig, EPOLLIN))
		return -1;
	agent.listener = (struct watch){ .kind = W_LISTENER };
	agent.listener.fd = listen_on(addr);
	if (agent.listener.fd < 0)
		return agent.listener.fd;
	return watch_set(&agent.listener, EPOLLIN);
}

int main(int argc, char **argv)
{
	char vsock_default[32];
	const char *addr = vsock_default;
	int ret;

	snprintf(vsock_default, sizeof(vsock_default), "vsock:%d",
		 THAW_AGENT_VSOCK_PORT);
	/*
	 * As init, argv holds the kernel command line words the kernel did
	 * not recognise (meant for some other kernel): none are ours.
	 */
	for (int i = 1; i < argc && getpid() != 1; i++) {
		if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
			addr = argv[++i];
		} else if (strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "--version") == 0) {
			printf("thaw-agent %s\n", THAW_AGENT_VERSION);
			return 0;
		} else {
			fprintf(stderr, "thaw-agent: unknown argument '%s'\n",
				argv[i]);
			usage(stderr);
			return 2;
		}
	}
	agent.pid1 = getpid() == 1;
	fill_std_fds();
	/* /dev/kmsg exists only once devtmpfs is mounted. */
	if (agent.pid1)
		pid1_setup();
	log_open(agent.pid1);
	read_boot_id(agent.boot_id, sizeof(agent.boot_id));
	ret = setup(addr);
	if (ret == 0) {
		log_line("thaw-agent %s ready on %s", THAW_AGENT_VERSION, addr);
		ret = run();
	}
	exec_kill_all();
	if (agent.pid1) {
		/* Init must not exit; ending the VM tells the host instead. */
		agent_log("fatal error, powering off");
		sync();
		reboot(RB_POWER_OFF);
	}
	return ret ? 1 : 0;
}
