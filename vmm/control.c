// SPDX-License-Identifier: Apache-2.0
/*
 * control.c - see control.h.  poll() over at most CONTROL_MAX_CLIENTS + 2
 * descriptors is all a control socket needs.
 */
#include "vmm/control.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/io.h"
#include "common/log.h"
#include "vmm/seccomp_filters.h"
#include "vmm/vm.h"

int control_init(struct control *c, struct vm *vm, const char *path,
		 int listen_fd)
{
	memset(c, 0, sizeof(*c));
	c->vm = vm;
	c->listen_fd = c->wake_fd = -1;
	for (int i = 0; i < CONTROL_MAX_CLIENTS; i++)
		c->clients[i].fd = -1;
	if (strlen(path) >= sizeof(c->path)) {
		log_error("control socket %s: path longer than %zu bytes", path,
			  sizeof(c->path) - 1);
		return -1;
	}
	c->wake_fd = eventfd(0, EFD_CLOEXEC);
	if (c->wake_fd < 0) {
		log_error("control socket %s: eventfd: %s", path,
			  strerror(errno));
		return -1;
	}
	if (listen_fd >= 0) {
		c->listen_fd = listen_fd; /* c->path empty: not ours */
		return 0;
	}
	c->listen_fd = unix_listen(path, CONTROL_MAX_CLIENTS, 0);
	if (c->listen_fd < 0) {
		log_error("control socket %s: %s", path,
			  strerror(-c->listen_fd));
		return -1;
	}
	strcpy(c->path, path);
	return 0;
}

static void reply(struct control_client *cl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void reply(struct control_client *cl, const char *fmt, ...)
{
	char buf[CONTROL_LINE_MAX];
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if (n > (int)sizeof(buf) - 2)
		n = sizeof(buf) - 2;
	buf[n++] = '\n';
	/* A client that does not read its answers loses them, not us. */
	if (send(cl->fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL) < 0)
		return;
}

static void reply_status(struct control_client *cl, struct vm *vm)
{
	struct vm_restore_times t;
	char restore[192] = "";

	pthread_mutex_lock(&vm->pause_lock);
	bool paused = vm->paused;
	pthread_mutex_unlock(&vm->pause_lock);
	const char *state = atomic_load(&vm->stopping) ? "stopping"
			    : paused		       ? "paused"
						       : "running";

	if (vm_restore_times(vm, &t))
		snprintf(restore, sizeof(restore),
			 " setup_us=%llu restore_us=%llu prefetched_pages=%llu"
			 " prefetch_us=%llu started_at_us=%llu",
			 (unsigned long long)t.setup_us,
			 (unsigned long long)t.restore_us,
			 (unsigned long long)t.prefetched_pages,
			 (unsigned long long)t.prefetch_us,
			 (unsigned long long)t.started_at_us);
	reply(cl, "ok %s vcpus=%d mem_mib=%llu uptime_ms=%llu%s", state,
	      vm->nr_vcpus, (unsigned long long)(vm->mem.size / MIB),
	      (unsigned long long)((monotonic_ns() - vm->running_ns) / 1000000),
	      restore);
}

/* Closes the descriptors @cl sent that no command took. */
static void drop_fds(struct control_client *cl)
{
	for (int i = 0; i < cl->nr_fds && i < CONTROL_MAX_FDS; i++)
		close(cl->fds[i]);
	cl->nr_fds = 0;
}

/*
 * "checkpoint DIR" with its four files (control.h).  The descriptors are
 * closed before the answer: a supervisor that reads it may count on that.
 */
static void checkpoint(struct control_client *cl, struct vm *vm,
		       const char *dir)
{
	struct vm_checkpoint_result res;
	struct vm_checkpoint_files files = {
		.state_fd = cl->fds[0],
		.diff_fd = cl->fds[1],
		.memory_fd = cl->fds[2],
		.hashes_fd = cl->fds[3],
		.dir = dir,
	};
	int got = cl->nr_fds;
	int ret = got == CONTROL_MAX_FDS ? vm_checkpoint(vm, &files, &res) : -1;

	drop_fds(cl);
	if (got != CONTROL_MAX_FDS)
		reply(cl,
		      "error checkpoint takes %d descriptors with its line "
		      "(state.bin, memory.diff, memory.img, pages.xxh3), "
		      "got %d",
		      CONTROL_MAX_FDS, got);
	else if (ret < 0)
		reply(cl, "error checkpoint to %s failed (see the VMM log)",
		      dir);
	else
		reply(cl,
		      "ok checkpoint %s dirty_pages=%llu full=%d depth=%u "
		      "pause_us=%llu total_us=%llu",
		      dir, (unsigned long long)res.dirty_pages, res.full,
		      res.depth, (unsigned long long)res.pause_ns / 1000,
		      (unsigned long long)res.total_ns / 1000);
}

/* "snapshot DIR" and "working-set FILE": the argument after one space. */
static const char *argument(const char *line, const char *command)
{
	size_t n = strlen(command);

	if (strncmp(line, command, n) || line[n] != ' ' || !line[n + 1])
		return NULL;
	return line + n + 1;
}

#ifdef THAW_TEST_HOOKS
/*
 * Test builds only (THAW_TEST_HOOKS): a system call outside the control
 * thread's seccomp list, so tests can watch the filter kill the VMM.  A
 * reply means it was allowed.
 */
static void forbidden_syscall(struct control_client *cl)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (fd >= 0)
		close(fd);
	reply(cl, "error socket(AF_INET) was allowed: no seccomp filter");
}
#endif

/*
 * Commands run on the control thread; a snapshot blocks it for as long as
 * writing guest memory takes, which is fine: the guest is paused meanwhile
 * and other clients only wait.  Failures are explained in the VMM's log
 * (log.h), the reply says where to look.
 */
static void handle_line(struct control *c, struct control_client *cl)
{
	struct vm *vm = c->vm;
	const char *arg = argument(cl->line, "checkpoint");

	/* Descriptors are for a checkpoint; any other line drops them. */
	if (arg) {
		checkpoint(cl, vm, arg);
		return;
	}
	drop_fds(cl);
	if (!strcmp(cl->line, "ping")) {
		reply(cl, "ok pong");
	} else if (!strcmp(cl->line, "status")) {
		reply_status(cl, vm);
	} else if (!strcmp(cl->line, "pause")) {
		if (vm_pause(vm) == 0)
			reply(cl, "ok paused");
		else
			reply(cl, "error cannot pause (see the VMM log)");
	} else if (!strcmp(cl->line, "resume")) {
		vm_resume(vm);
		reply(cl, "ok running");
	} else if ((arg = argument(cl->line, "snapshot"))) {
		if (vm_snapshot(vm, arg) == 0)
			reply(cl, "ok snapshot %s", arg);
		else
			reply(cl,
			      "error snapshot to %s failed (see the VMM log)",
			      arg);
	} else if ((arg = argument(cl->line, "working-set"))) {
		uint64_t pages;

		if (vm_record_working_set(vm, arg, &pages) == 0)
			reply(cl, "ok working-set pages=%llu",
			      (unsigned long long)pages);
		else
			reply(cl,
			      "error working set to %s failed (see the VMM log)",
			      arg);
#ifdef THAW_TEST_HOOKS
	} else if (!strcmp(cl->line, "forbidden-syscall")) {
		forbidden_syscall(cl);
#endif
	} else if (!strcmp(cl->line, "stop")) {
		vm_stop(vm, VM_GUEST_STOPPED,
			"stopped through the control socket");
		reply(cl, "ok stopping");
	} else {
		reply(cl,
		      "error unknown command '%.64s' (ping, status, pause, resume, snapshot DIR, checkpoint DIR, working-set FILE, stop)",
		      cl->line);
	}
}

static void close_client(struct control_client *cl)
{
	drop_fds(cl);
	close(cl->fd);
	cl->fd = -1;
	cl->len = 0;
}

/*
 * Keeps the descriptors that came with @msg for the line being read, and
 * counts them all: past CONTROL_MAX_FDS (or a truncated message, which
 * counts one more) they are closed at once and the command that wanted
 * them refuses the count.
 */
static void take_fds(struct control_client *cl, struct msghdr *msg)
{
	for (struct cmsghdr *cm = CMSG_FIRSTHDR(msg); cm;
	     cm = CMSG_NXTHDR(msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		int n = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);

		for (int i = 0; i < n; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int),
			       sizeof(fd));
			if (cl->nr_fds < CONTROL_MAX_FDS)
				cl->fds[cl->nr_fds] = fd;
			else
				close(fd);
			cl->nr_fds++;
		}
	}
	if (msg->msg_flags & MSG_CTRUNC)
		cl->nr_fds = CONTROL_MAX_FDS + 1;
}

/* Reads what is there; answers each complete line. */
static void serve_client(struct control *c, struct control_client *cl)
{
	char buf[CONTROL_LINE_MAX];
	/* One more than a line may carry, to see a sender's excess. */
	union {
		char space[CMSG_SPACE((CONTROL_MAX_FDS + 1) * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = { buf, sizeof(buf) };
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = control.space,
		.msg_controllen = sizeof(control.space),
	};
	ssize_t n = recvmsg(cl->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n > 0)
		take_fds(cl, &msg);
	if (n <= 0) {
		close_client(cl);
		return;
	}
	for (ssize_t i = 0; i < n; i++) {
		if (buf[i] == '\n') {
			cl->line[cl->len > 0 && cl->line[cl->len - 1] == '\r'
					 ? cl->len - 1
					 : cl->len] = '\0';
			cl->len = 0;
			handle_line(c, cl);
		} else if (cl->len == CONTROL_LINE_MAX - 1) {
			reply(cl, "error line longer than %d bytes",
			      CONTROL_LINE_MAX - 1);
			close_client(cl);
			return;
		} else {
			cl->line[cl->len++] = buf[i];
		}
	}
}

static void accept_client(struct control *c)
{
	int fd = accept4(c->listen_fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	for (int i = 0; i < CONTROL_MAX_CLIENTS; i++) {
		if (c->clients[i].fd < 0) {
			c->clients[i].fd = fd;
			c->clients[i].len = 0;
			c->clients[i].nr_fds = 0;
			return;
		}
	}
	struct control_client busy = { .fd = fd };
	reply(&busy, "error too many control clients (%d)",
	      CONTROL_MAX_CLIENTS);
	close(fd);
}

static void *control_thread(void *arg)
{
	struct control *c = arg;
	struct pollfd fds[CONTROL_MAX_CLIENTS + 2];

	if (vmm_seccomp_enter(VMM_THREAD_CONTROL) < 0)
		return NULL;
	for (;;) {
		fds[0] = (struct pollfd){ c->wake_fd, POLLIN, 0 };
		fds[1] = (struct pollfd){ c->listen_fd, POLLIN, 0 };
		for (int i = 0; i < CONTROL_MAX_CLIENTS; i++)
			fds[i + 2] =
				(struct pollfd){ c->clients[i].fd, POLLIN, 0 };
		if (poll(fds, CONTROL_MAX_CLIENTS + 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (fds[0].revents)
			break;
		if (fds[1].revents)
			accept_client(c);
		for (int i = 0; i < CONTROL_MAX_CLIENTS; i++)
			if (fds[i + 2].revents && c->clients[i].fd >= 0)
				serve_client(c, &c->clients[i]);
	}
	return NULL;
}

int control_start(struct control *c)
{
	sigset_t all, old;

	/* Signals belong to the main thread (vm.c). */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int err = pthread_create(&c->thread, NULL, control_thread, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		log_error("control socket: cannot start thread: %s",
			  strerror(err));
		return -1;
	}
	c->started = true;
	return 0;
}

void control_stop(struct control *c)
{
	uint64_t one = 1;

	if (c->started && write(c->wake_fd, &one, sizeof(one)) == sizeof(one))
		pthread_join(c->thread, NULL);
	c->started = false;
	for (int i = 0; i < CONTROL_MAX_CLIENTS; i++)
		if (c->clients[i].fd >= 0)
			close_client(&c->clients[i]);
	if (c->listen_fd >= 0)
		close(c->listen_fd);
	if (c->wake_fd >= 0)
		close(c->wake_fd);
	c->listen_fd = c->wake_fd = -1;
	if (c->path[0])
		unlink(c->path);
	c->path[0] = '\0';
}
