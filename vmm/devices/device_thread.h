/* SPDX-License-Identifier: Apache-2.0 */
/*
 * device_thread.h - the thread a virtio device backend does its work on,
 * and how the VMM pauses it for a snapshot.
 *
 * A device with host-side I/O (vsock's Unix sockets, the network's TAP)
 * gets one thread that waits in epoll on the device's descriptors and on an
 * eventfd, the kick, which vCPU threads write (the transport's notify
 * callback, or KVM itself as an ioeventfd on QueueNotify) and which the
 * device's own helpers write when they want another pass.  Each wake-up is
 * one pass: the device's work() callback gets the epoll events (never the
 * kick's: drained here) and then looks at its queues.  Its next_timeout()
 * callback says how long the next wait may last (-1: until an event).
 *
 * Pausing: device_thread_pause() returns once the thread sits between two
 * passes, where it holds no descriptor chain and touches no guest memory;
 * the events it woke for wait with it until device_thread_resume().  A
 * thread that exited (stopped, or its seccomp filter failed) counts as
 * paused.  Without a started thread (unit tests, fuzzing) both do nothing
 * and device_thread_run_once() runs one pass on the caller's thread.
 *
 * The thread blocks every signal (they are for the main and vCPU threads)
 * and loads its role's seccomp filter (seccomp_filters.h) before its first
 * pass.
 */
#ifndef THAW_VMM_DEVICES_DEVICE_THREAD_H
#define THAW_VMM_DEVICES_DEVICE_THREAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "vmm/seccomp_filters.h"

/* The kick's epoll tag; a device's own tags must differ from it. */
#define DEVICE_THREAD_TAG_KICK 0
#define DEVICE_THREAD_EPOLL_BATCH 32

struct device_thread {
	const char *name; /* for messages: "vsock /run/x.sock", "net tap0" */
	enum vmm_thread_role role;
	void *device;
	/* One pass over @n @events (kick excluded, @n may be 0). */
	void (*work)(void *device, const struct epoll_event *events, int n);
	/* Milliseconds the next wait may last, -1 for no limit. */
	int (*next_timeout)(void *device);

	int epoll_fd;
	int kick_fd;
	pthread_t thread;
	bool running;

	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool pause_requested;
	bool idle; /* between passes while paused, or exited */
	atomic_bool stop;
};

/*
 * Creates the epoll set and the kick eventfd (in the set under
 * DEVICE_THREAD_TAG_KICK).  @name must outlive @t.  Returns 0, or -1 after
 * a message, with nothing to release.
 */
int device_thread_init(struct device_thread *t, const char *name,
		       enum vmm_thread_role role, void *device,
		       void (*work)(void *, const struct epoll_event *, int),
		       int (*next_timeout)(void *));

/* epoll_ctl(@op) for @fd with @events and @tag; 0, or -1 after a message. */
int device_thread_watch(struct device_thread *t, int op, int fd,
			uint32_t events, uint64_t tag);

/* Wakes the thread for a pass; safe from any thread. */
void device_thread_kick(struct device_thread *t);

/* Starts the thread.  0, or -1 after a message. */
int device_thread_start(struct device_thread *t);

/*
 * Instead of a thread (tests, fuzzing): one pass on the caller's thread
 * after waiting up to @timeout_ms for an event (0: not at all).  Returns 0,
 * or -1 when epoll_wait fails.
 */
int device_thread_run_once(struct device_thread *t, int timeout_ms);

void device_thread_pause(struct device_thread *t);
void device_thread_resume(struct device_thread *t);

/* Stops and joins the thread (paused or not), then releases everything;
 * vCPU threads must no longer kick it. */
void device_thread_destroy(struct device_thread *t);

#endif
