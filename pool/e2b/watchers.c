// SPDX-License-Identifier: Apache-2.0
/*
 * watchers.c - the watches envd's CreateWatcher starts and
 * GetWatcherEvents polls (filesystem.h), kept between those calls.
 *
 * Each watcher owns an agent connection holding one WATCH: the guest's
 * agent keeps the inotify watches and their events, this keeps no queue.
 * A poll reads, without waiting, the events the connection has ready (at
 * most E2B_WATCHER_BATCH of them, and E2B_WATCHER_BATCH_BYTES of names;
 * the rest stay in the guest and the socket for the next poll), so what a
 * watcher costs the daemon is its connection, taken from the memory
 * budget as every request's is (sandbox_sessions.c).  A guest whose events pile
 * up unread is the agent's to bound: it says so with an OVERFLOW, which
 * fails the watcher as fsnotify's overflow fails envd's.
 *
 * A watcher belongs to its sandbox: only requests for that sandbox find
 * it.  The SDK never removes one it forgot, and a killed sandbox's
 * watchers can no longer be asked for, so each create first frees those
 * whose sandbox is gone; at most E2B_MAX_WATCHERS live per sandbox and
 * E2B_MAX_WATCHERS_ALL in all, and the daemon's stop frees the rest.
 *
 * One mutex guards the table.  A request using a watcher (a poll, which
 * reads its socket outside the lock) marks it busy; another request for
 * it meanwhile is answered aborted, never made to wait.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "pool/e2b/filesystem.h"

#define WATCH_REQUEST_ID 1
/* A poll's names, at most. */
#define E2B_WATCHER_BATCH_BYTES (1u << 20)

struct watcher {
	char id[E2B_WATCHER_ID_LEN + 1];
	char sandbox_id[SANDBOX_ID_LEN + 1];
	struct agent_conn agent;
	bool busy;
	bool ended; /* the watched directory went away: no more events */
	enum e2b_code failed; /* E2B_OK until the watch fails, then for good */
	char message[512];
	struct watcher *next;
};

struct e2b_watchers {
	struct daemon *d;
	pthread_mutex_t lock;
	struct watcher *head;
	unsigned count; /* in the list, and being created */
};

struct e2b_watchers *watchers_new(struct daemon *d)
{
	struct e2b_watchers *ws = calloc(1, sizeof(*ws));

	if (ws) {
		ws->d = d;
		pthread_mutex_init(&ws->lock, NULL);
	}
	return ws;
}

static void watcher_free(struct e2b_watchers *ws, struct watcher *w)
{
	/* The agent ends the WATCH with its connection. */
	sandbox_agent_close(ws->d, &w->agent);
	free(w);
}

void watchers_free(struct e2b_watchers *ws)
{
	if (!ws)
		return;
	while (ws->head) {
		struct watcher *w = ws->head;

		ws->head = w->next;
		watcher_free(ws, w);
	}
	pthread_mutex_destroy(&ws->lock);
	free(ws);
}

/* Frees the watchers whose sandbox is gone; call with the lock held. */
static void reap(struct e2b_watchers *ws)
{
	for (struct watcher **p = &ws->head; *p;) {
		struct watcher *w = *p;
		struct sandbox *c =
			w->busy ? NULL : sandbox_get(ws->d, w->sandbox_id);

		if (c || w->busy) {
			if (c)
				sandbox_put(ws->d, c);
			p = &w->next;
			continue;
		}
		*p = w->next;
		ws->count--;
		watcher_free(ws, w);
	}
}

/* A slot for a new watcher of @c, or a Connect code with a message. */
static enum e2b_code reserve(struct e2b_watchers *ws, const struct sandbox *c,
			     char *err, size_t errlen)
{
	unsigned mine = 0;

	pthread_mutex_lock(&ws->lock);
	reap(ws);
	for (struct watcher *w = ws->head; w; w = w->next)
		mine += !strcmp(w->sandbox_id, c->id);
	bool room = mine < E2B_MAX_WATCHERS && ws->count < E2B_MAX_WATCHERS_ALL;
	if (room)
		ws->count++;
	pthread_mutex_unlock(&ws->lock);
	if (!room)
		snprintf(err, errlen,
			 "too many watchers (%u of this sandbox, %d at most; "
			 "%d of all sandboxes): remove some (RemoveWatcher)",
			 mine, E2B_MAX_WATCHERS, E2B_MAX_WATCHERS_ALL);
	return room ? E2B_OK : E2B_RESOURCE_EXHAUSTED;
}

enum e2b_code watchers_create(struct e2b_watchers *ws, struct sandbox *c,
			      const char *path, bool recursive,
			      char id[E2B_WATCHER_ID_LEN + 1], char *err,
			      size_t errlen)
{
	char token[E2B_TOKEN_LEN + 1];
	enum e2b_code code = reserve(ws, c, err, errlen);

	if (code)
		return code;
	struct watcher *w = calloc(1, sizeof(*w));
	if (w)
		w->agent.fd = -1;
	if (!w || e2b_new_token(token) < 0) {
		snprintf(err, errlen, "out of memory or randomness");
		code = E2B_INTERNAL;
	}
	int status = code ? 0
			  : pool_error_status(sandbox_agent_open(
				    c, &w->agent, -1, err, errlen));
	if (status)
		code = e2b_code_of_status((unsigned)status);
	if (!code) {
		int ret = agent_watch(&w->agent, WATCH_REQUEST_ID, path,
				      recursive, err, errlen);
		code = ret == 0 ? E2B_OK : e2b_code_of_errno(-ret);
	}
	pthread_mutex_lock(&ws->lock);
	if (code) {
		ws->count--;
	} else {
		snprintf(w->id, sizeof(w->id), "w%.16s", token);
		snprintf(w->sandbox_id, sizeof(w->sandbox_id), "%s", c->id);
		w->next = ws->head;
		ws->head = w;
	}
	pthread_mutex_unlock(&ws->lock);
	if (code && w)
		watcher_free(ws, w);
	if (!code)
		memcpy(id, w->id, sizeof(w->id));
	return code;
}

/*
 * Watcher @id of @c, marked busy (unlinked too when @unlink); NULL with a
 * Connect code in *@code and a message in @err.
 */
static struct watcher *take(struct e2b_watchers *ws, const struct sandbox *c,
			    const char *id, bool unlink, enum e2b_code *code,
			    char *err, size_t errlen)
{
	struct watcher **p, *w = NULL;

	pthread_mutex_lock(&ws->lock);
	for (p = &ws->head; *p; p = &(*p)->next)
		if (!strcmp((*p)->id, id) && !strcmp((*p)->sandbox_id, c->id))
			break;
	w = *p;
	if (!w) {
		*code = E2B_NOT_FOUND;
		snprintf(err, errlen, "watcher with id %.64s not found", id);
	} else if (w->busy) {
		*code = E2B_ABORTED;
		snprintf(err, errlen,
			 "watcher %s is being read by another request: try "
			 "again once it answered",
			 id);
		w = NULL;
	} else {
		w->busy = true;
		if (unlink) {
			*p = w->next;
			ws->count--;
		}
	}
	pthread_mutex_unlock(&ws->lock);
	return w;
}

/* The watch failed with @ret (a transport error or the agent's). */
static void watcher_failed(struct watcher *w, int ret, const char *why)
{
	w->failed = ret == -ESHUTDOWN ? E2B_UNAVAILABLE
		    : ret == -EPIPE   ? E2B_UNAVAILABLE
				      : e2b_code_of_errno(-ret);
	snprintf(w->message, sizeof(w->message), "watcher error: %.400s",
		 ret == -EPIPE ? "the sandbox's agent went away" : why);
}

/* Appends to @events what @w's connection has ready, without waiting. */
static void drain(struct watcher *w, json_t *events)
{
	size_t bytes = 0;
	char err[512];

	while (!w->failed && !w->ended &&
	       json_array_size(events) < E2B_WATCHER_BATCH &&
	       bytes < E2B_WATCHER_BATCH_BYTES) {
		struct agent_fs_event ev;
		struct thaw_frame f;

		/* A frame begun and not whole stays in the reader for the
		 * next poll. */
		w->agent.watch.deadline_ns = monotonic_ns() + NS_PER_MS;
		int ret = agent_next_frame(&w->agent, &f);
		if (ret == -ETIMEDOUT)
			return;
		if (ret == 0)
			ret = agent_fs_event_of(&f, WATCH_REQUEST_ID, &ev, err,
						sizeof(err));
		else
			snprintf(err, sizeof(err), "%s", strerror(-ret));
		if (ret == 0) {
			w->ended = true;
		} else if (ret < 0) {
			watcher_failed(w, ret, err);
		} else {
			json_t *event = e2b_event_json(&ev);

			if (!event)
				watcher_failed(w, -EOVERFLOW,
					       "the guest's queue of events "
					       "overflowed: events were lost");
			else if (json_array_append_new(events, event) == 0)
				bytes += strlen(ev.name);
		}
	}
}

enum e2b_code watchers_events(struct e2b_watchers *ws, struct sandbox *c,
			      const char *id, json_t **answer, char *err,
			      size_t errlen)
{
	enum e2b_code code = E2B_OK;
	struct watcher *w = take(ws, c, id, false, &code, err, errlen);

	if (!w)
		return code;
	json_t *events = json_array();
	if (events)
		drain(w, events);
	/* Events read before a failure go out first; the failure with the
	 * next poll, and every one after. */
	if (!events) {
		snprintf(err, errlen, "out of memory");
		code = E2B_INTERNAL;
	} else if (!json_array_size(events) && w->failed) {
		snprintf(err, errlen, "%s", w->message);
		code = w->failed;
	}
	pthread_mutex_lock(&ws->lock);
	w->busy = false;
	pthread_mutex_unlock(&ws->lock);
	if (code) {
		json_decref(events);
		return code;
	}
	*answer = json_pack("{s:o}", "events", events);
	if (!*answer) {
		snprintf(err, errlen, "out of memory");
		return E2B_INTERNAL;
	}
	return E2B_OK;
}

enum e2b_code watchers_remove(struct e2b_watchers *ws, struct sandbox *c,
			      const char *id, char *err, size_t errlen)
{
	enum e2b_code code = E2B_OK;
	struct watcher *w = take(ws, c, id, true, &code, err, errlen);

	if (w)
		watcher_free(ws, w);
	return code;
}
