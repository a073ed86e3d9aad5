// SPDX-License-Identifier: Apache-2.0
/*
 * device_thread.c - a device backend's thread; see device_thread.h.
 */
#include "vmm/devices/device_thread.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/log.h"

int device_thread_init(struct device_thread *t, const char *name,
		       enum vmm_thread_role role, void *device,
		       void (*work)(void *, const struct epoll_event *, int),
		       int (*next_timeout)(void *))
{
	int err;

	memset(t, 0, sizeof(*t));
	t->name = name;
	t->role = role;
	t->device = device;
	t->work = work;
	t->next_timeout = next_timeout;
	atomic_init(&t->stop, false);
	t->kick_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	t->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
	if (t->kick_fd < 0 || t->epoll_fd < 0) {
		log_error("%s: eventfd/epoll_create1: %s", name,
			  strerror(errno));
		goto fail;
	}
	if (device_thread_watch(t, EPOLL_CTL_ADD, t->kick_fd, EPOLLIN,
				DEVICE_THREAD_TAG_KICK) < 0)
		goto fail;
	err = pthread_mutex_init(&t->lock, NULL);
	if (err) {
		log_error("%s: pthread_mutex_init: %s", name, strerror(err));
		goto fail;
	}
	err = pthread_cond_init(&t->cond, NULL);
	if (err) {
		log_error("%s: pthread_cond_init: %s", name, strerror(err));
		pthread_mutex_destroy(&t->lock);
		goto fail;
	}
	return 0;
fail:
	if (t->kick_fd >= 0)
		close(t->kick_fd);
	if (t->epoll_fd >= 0)
		close(t->epoll_fd);
	t->kick_fd = t->epoll_fd = -1;
	return -1;
}

int device_thread_watch(struct device_thread *t, int op, int fd,
			uint32_t events, uint64_t tag)
{
	struct epoll_event ev = { .events = events, .data.u64 = tag };

	if (epoll_ctl(t->epoll_fd, op, fd, &ev) < 0) {
		log_limited(LOG_LEVEL_ERROR, "%s: epoll_ctl on fd %d: %s",
			    t->name, fd, strerror(errno));
		return -1;
	}
	return 0;
}

void device_thread_kick(struct device_thread *t)
{
	uint64_t one = 1;

	/* EAGAIN means the counter is already non-zero: a wakeup is due. */
	if (write(t->kick_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		log_limited(LOG_LEVEL_WARNING,
			    "%s: cannot wake the device thread: %s", t->name,
			    strerror(errno));
}

/* Drains the kick and hands the other events to the device. */
static void pass(struct device_thread *t, struct epoll_event *events, int n)
{
	uint64_t count;
	int kept = 0;

	for (int i = 0; i < n; i++) {
		if (events[i].data.u64 != DEVICE_THREAD_TAG_KICK) {
			events[kept++] = events[i];
			continue;
		}
		if (read(t->kick_fd, &count, sizeof(count)) < 0 &&
		    errno != EAGAIN)
			log_limited(LOG_LEVEL_WARNING, "%s: eventfd read: %s",
				    t->name, strerror(errno));
	}
	t->work(t->device, events, kept);
}

/*
 * Between passes the thread holds no chain and touches no guest memory: the
 * place to honour device_thread_pause().  A stop ends the wait too.
 */
static void pause_point(struct device_thread *t)
{
	pthread_mutex_lock(&t->lock);
	if (t->pause_requested) {
		t->idle = true;
		pthread_cond_broadcast(&t->cond);
		while (t->pause_requested && !atomic_load(&t->stop))
			pthread_cond_wait(&t->cond, &t->lock);
		t->idle = false;
	}
	pthread_mutex_unlock(&t->lock);
}

/* An exited thread touches nothing either: a later pause must not wait. */
static void thread_exits(struct device_thread *t)
{
	pthread_mutex_lock(&t->lock);
	t->idle = true;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

static void *thread_main(void *arg)
{
	struct device_thread *t = arg;
	struct epoll_event events[DEVICE_THREAD_EPOLL_BATCH];
	int n;

	if (vmm_seccomp_enter(t->role) < 0) {
		thread_exits(t);
		return NULL;
	}
	while (!atomic_load(&t->stop)) {
		n = epoll_wait(t->epoll_fd, events, DEVICE_THREAD_EPOLL_BATCH,
			       t->next_timeout(t->device));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			log_error("%s: epoll_wait: %s", t->name,
				  strerror(errno));
			break;
		}
		/* The events wait with us: they are not guest memory. */
		pause_point(t);
		if (atomic_load(&t->stop))
			break;
		pass(t, events, n);
	}
	thread_exits(t);
	return NULL;
}

int device_thread_start(struct device_thread *t)
{
	sigset_t all, old;
	int err;

	/* Signals are for the main and vCPU threads, not this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&t->thread, NULL, thread_main, t);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		log_error("%s: pthread_create: %s", t->name, strerror(err));
		return -1;
	}
	t->running = true;
	return 0;
}

int device_thread_run_once(struct device_thread *t, int timeout_ms)
{
	struct epoll_event events[DEVICE_THREAD_EPOLL_BATCH];
	int n = epoll_wait(t->epoll_fd, events, DEVICE_THREAD_EPOLL_BATCH,
			   timeout_ms);

	if (n < 0)
		return -1;
	pass(t, events, n);
	return 0;
}

void device_thread_pause(struct device_thread *t)
{
	if (!t->running)
		return;
	pthread_mutex_lock(&t->lock);
	t->pause_requested = true;
	device_thread_kick(t);
	while (!t->idle)
		pthread_cond_wait(&t->cond, &t->lock);
	pthread_mutex_unlock(&t->lock);
}

void device_thread_resume(struct device_thread *t)
{
	if (!t->running)
		return;
	pthread_mutex_lock(&t->lock);
	t->pause_requested = false;
	pthread_cond_broadcast(&t->cond);
	pthread_mutex_unlock(&t->lock);
}

void device_thread_destroy(struct device_thread *t)
{
	if (t->epoll_fd < 0)
		return; /* init failed: nothing was made */
	if (t->running) {
		/* Under the lock, so a paused thread cannot miss it. */
		pthread_mutex_lock(&t->lock);
		atomic_store(&t->stop, true);
		pthread_cond_broadcast(&t->cond);
		pthread_mutex_unlock(&t->lock);
		device_thread_kick(t);
		pthread_join(t->thread, NULL);
		t->running = false;
	}
	close(t->kick_fd);
	close(t->epoll_fd);
	t->kick_fd = t->epoll_fd = -1;
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
}
