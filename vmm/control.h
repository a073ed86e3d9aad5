/* SPDX-License-Identifier: Apache-2.0 */
/*
 * control.h - thaw-vmm's control socket: how a supervisor (thaw run, later
 * the pool daemon) talks to one VMM while it runs.
 *
 * A Unix stream socket speaking lines: each request is one line, each
 * answer one line starting with "ok" or "error".
 *
 *	ping		-> ok pong
 *	status		-> ok running|paused vcpus=N mem_mib=M uptime_ms=T
 *			   [setup_us=S restore_us=R prefetched_pages=P
 *			   prefetch_us=F started_at_us=A]
 *			   (the last five for a restored clone: S from the
 *			   VMM's start to its state restore, F of them spent
 *			   prefetching P pages; R loading the state; A the
 *			   VMM's start on CLOCK_MONOTONIC, which a supervisor
 *			   shares with its child, so it can tell how long
 *			   fork and exec took; a supervisor has them from
 *			   the ready record, vmm_report.h, with no round
 *			   trip: this line is for people and tests)
 *	pause		-> ok paused
 *	resume		-> ok running
 *	snapshot DIR	-> ok snapshot DIR   (state.bin, memory.img and
 *			   pages.xxh3 written into the existing DIR)
 *	checkpoint DIR	-> ok checkpoint DIR dirty_pages=N full=0|1 depth=D
 *			   pause_us=P total_us=T
 *			   with four descriptors passed alongside the line
 *			   (SCM_RIGHTS): DIR's state.bin, memory.diff,
 *			   memory.img and pages.xxh3, created empty by the
 *			   supervisor, which the VMM writes (vm.h's
 *			   vm_checkpoint(): a diff, or with full=1 all of
 *			   memory) and then derives guest memory from; DIR
 *			   only names them.  The supervisor removes the
 *			   files the answer says are unused.
 *	working-set FILE -> ok working-set pages=N  (snapshot/workingset.h)
 *	stop		-> ok stopping      (the VM then stops; thaw-vmm exits
 *0)
 *
 * A line longer than CONTROL_LINE_MAX or an unknown command gets an
 * "error ..." line; a client that sends an over-long line is then closed.
 * The socket is served by a thread of its own, so a slow client never
 * delays a vCPU.
 */
#ifndef THAW_VMM_CONTROL_H
#define THAW_VMM_CONTROL_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>

/* Room for a command and a path. */
#define CONTROL_LINE_MAX (PATH_MAX + 64)
#define CONTROL_MAX_CLIENTS 8
/* Descriptors one line may carry: a checkpoint's files. */
#define CONTROL_MAX_FDS 4

struct vm;

struct control_client {
	int fd;
	char line[CONTROL_LINE_MAX];
	size_t len;
	/* Received with the line being read, closed once it is answered;
	 * nr_fds counts those past CONTROL_MAX_FDS too (closed at once). */
	int fds[CONTROL_MAX_FDS];
	int nr_fds;
};

struct control {
	struct vm *vm;
	char path[108];
	int listen_fd;
	int wake_fd; /* eventfd: stop the thread */
	pthread_t thread;
	bool started;
	struct control_client clients[CONTROL_MAX_CLIENTS];
};

/*
 * Binds and listens on @path (which must not exist), or serves @listen_fd,
 * already listening on @path, when it is not -1 (a jailed VMM's, which
 * cannot reach @path): then @path is only named in messages and stays
 * for whoever bound it to remove.  0 or -1 + message.
 */
int control_init(struct control *c, struct vm *vm, const char *path,
		 int listen_fd);
int control_start(struct control *c);
/* Stops the thread, closes every socket and removes @path. */
void control_stop(struct control *c);

#endif
