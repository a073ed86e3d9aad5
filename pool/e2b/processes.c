// SPDX-License-Identifier: Apache-2.0
/*
 * processes.c - the processes started through envd, kept beyond the
 * request that started them (processes.h).
 *
 * envd's processes outlive their Start call: a background command keeps
 * running when its client disconnects, Connect reattaches to it by pid or
 * tag, List shows it, SendSignal and SendInput reach it.  So each process
 * owns its own connection to its sandbox's agent (the agent ends an EXEC
 * when its connection closes, guest/PROTOCOL.md) and a reader thread, its
 * pump, which holds a reference to the sandbox and turns the agent's
 * frames into envd's ProcessEvents: start {pid}, data {stdout|stderr},
 * end {exitCode, exited, status, error}.  The process stays in the table
 * until it ended and its last stream let go of it.
 *
 * Streams (Start's, and each Connect's) are subscribers: every event is
 * queued with the number of subscribers that have yet to send it and
 * dropped once they all have; an event no subscriber is there for is
 * dropped at once, as envd drops the output of a process nobody watches.
 * The queue is bounded (E2B_PROCESS_QUEUE_BYTES, from the daemon's memory
 * budget): past it the pump stops reading, and the guest's process blocks
 * on its output as it would on a full pipe, until the slowest stream
 * catches up or goes away.  A stream whose client hangs up is freed by
 * its connection's end (connect.c), nothing else: the process runs on.
 *
 * A start reserves its process's place before it talks to the guest: in
 * one hold of the table's lock it counts the sandbox's processes
 * (E2B_MAX_PROCESSES) and the daemon's (e2b_max_processes), takes the
 * process's share of the memory budget and puts it in the table, where it
 * counts from then on (as "starting": List and Connect skip a process
 * without a pid), so that concurrent starts cannot all pass the counts
 * before any of them is in.  Every process, starting, running or ended
 * with streams still sending its output, counts until it is freed: the
 * caps bound what the table holds.
 *
 * The pump is the only reader of its agent connection; requests write to
 * it (KILL for SendSignal) under the process's write lock, which the pump
 * takes before it closes the connection.  One mutex (the table's) guards
 * every list, queue and count here; each process has its own condition,
 * on which its streams and its pump wait.  Pumps are detached; stopping
 * waits for their count to reach zero, which the daemon's stop flag
 * brings about within a slice of agent_wait() (250 ms).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/clock.h"
#include "common/log.h"
#include "pool/e2b/processes.h"

#define EXEC_REQUEST_ID 1
#define BASH "/bin/bash"
#define SH "/bin/sh"
/* A STDIN the agent could not take yet (ENOBUFS) is sent again after: */
#define STDIN_RETRY_NS (20 * NS_PER_MS)
/* Events queued for a process's streams, at most. */
#define E2B_PROCESS_QUEUE_BYTES (1u << 20)
/* What one process reserves besides its agent connection (its queue), so
 * that both together are the CONFIG_E2B_PROCESS_BYTES the config's
 * e2b_max_processes counts with. */
#define PROCESS_BUDGET (CONFIG_E2B_PROCESS_BYTES - SANDBOX_AGENT_CONN_BYTES)
_Static_assert(PROCESS_BUDGET + (64 << 10) >= E2B_PROCESS_QUEUE_BYTES,
	       "a process's reservation covers its queue, bar the headers");

struct event {
	json_t *msg; /* a StartResponse/ConnectResponse: {"event": {...}} */
	size_t bytes;
	int readers; /* subscribers yet to send it */
	uint64_t seq;
	struct event *next;
};

struct e2b_process {
	struct e2b_processes *owner;
	struct sandbox *sandbox; /* held by the pump until it ends */
	char sandbox_id[SANDBOX_ID_LEN + 1];
	uint32_t pid; /* 0 until the agent's EXEC_STARTED */
	char *tag;
	json_t *config;
	struct agent_conn agent;
	pthread_mutex_t write_lock; /* frames to the agent */
	uint32_t next_request_id;
	/* The request waiting for its OK or ERROR (ask()), which the pump
	 * hands over: 0 for none; its answer's errno (0: OK) and message. */
	uint32_t awaiting;
	bool answered;
	int answer_errno;
	char answer[256];
	pthread_cond_t wake; /* an event, an end, room in the queue */
	struct event *head, *tail;
	uint64_t next_seq;
	size_t queued;
	bool ended;		   /* no more events will come */
	struct e2b_stream_end end; /* how its streams end */
	int subscribers;
	int refs; /* the pump, streams, requests using it */
	struct e2b_process *next;
};

/* A stream of a process's events. */
struct subscriber {
	struct e2b_process *p;
	uint64_t next_seq;
	bool send_start; /* a Connect: its first message is start {pid} */
	/* The SDK takes the first message for the start event: no
	 * keepalive goes before it. */
	bool sent_any;
};

struct e2b_processes {
	struct daemon *d;
	pthread_mutex_t lock;
	pthread_cond_t pumps_done;
	int pumps;
	struct e2b_process *list;
	uint32_t count; /* in the list */
};

struct e2b_processes *processes_new(struct daemon *d)
{
	struct e2b_processes *ps = calloc(1, sizeof(*ps));

	if (!ps)
		return NULL;
	ps->d = d;
	pthread_mutex_init(&ps->lock, NULL);
	monotonic_cond_init(&ps->pumps_done);
	return ps;
}

static void event_free(struct event *e)
{
	json_decref(e->msg);
	free(e);
}

static void process_free(struct e2b_process *p)
{
	pthread_cond_destroy(&p->wake);
	pthread_mutex_destroy(&p->write_lock);
	json_decref(p->config);
	free(p->tag);
	free(p);
}

/* Frees @p once nothing refers to it, and gives back its place in the
 * table; under the lock. */
static void process_unref_locked(struct e2b_processes *ps,
				 struct e2b_process *p)
{
	if (--p->refs > 0)
		return;
	for (struct e2b_process **pp = &ps->list; *pp; pp = &(*pp)->next)
		if (*pp == p) {
			*pp = p->next;
			ps->count--;
			break;
		}
	while (p->head) {
		struct event *e = p->head;

		p->head = e->next;
		event_free(e);
	}
	sandbox_budget_give(ps->d, PROCESS_BUDGET);
	process_free(p);
}

void processes_put(struct e2b_processes *ps, struct e2b_process *p)
{
	pthread_mutex_lock(&ps->lock);
	process_unref_locked(ps, p);
	pthread_mutex_unlock(&ps->lock);
}

void processes_free(struct e2b_processes *ps)
{
	if (!ps)
		return;
	pthread_mutex_lock(&ps->lock);
	while (ps->pumps)
		pthread_cond_wait(&ps->pumps_done, &ps->lock);
	pthread_mutex_unlock(&ps->lock);
	/* No stream is left either (the server stopped first), so every
	 * process was freed with its last reference. */
	pthread_cond_destroy(&ps->pumps_done);
	pthread_mutex_destroy(&ps->lock);
	free(ps);
}

/* ---- events -------------------------------------------------------------- */

/* Queues @ev (taken over: {"start": ...} and the like) for @p's streams;
 * under the lock. */
static void push_event(struct e2b_process *p, json_t *ev)
{
	struct event *e = calloc(1, sizeof(*e));
	json_t *msg = ev ? json_pack("{s:o}", "event", ev) : NULL;

	if (!e || !msg || !p->subscribers) {
		free(e);
		json_decref(msg);
		p->next_seq++;
		return;
	}
	/* Roughly what its text and jansson's values take. */
	json_t *data = json_object_get(ev, "data");
	const char *key;
	json_t *v;
	e->bytes = 256;
	json_object_foreach(data, key, v) e->bytes += json_string_length(v);
	e->msg = msg;
	e->readers = p->subscribers;
	e->seq = p->next_seq++;
	if (p->tail)
		p->tail->next = e;
	else
		p->head = e;
	p->tail = e;
	p->queued += e->bytes;
	pthread_cond_broadcast(&p->wake);
}

/* Drops the events every stream has sent; under the lock. */
static void trim_events(struct e2b_process *p)
{
	while (p->head && p->head->readers <= 0) {
		struct event *e = p->head;

		p->head = e->next;
		if (!p->head)
			p->tail = NULL;
		p->queued -= e->bytes;
		event_free(e);
	}
	pthread_cond_broadcast(&p->wake);
}

static void end_process(struct e2b_process *p, enum e2b_code code,
			const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Marks @p ended, its streams ending with @code (E2B_OK: after its end
 * event); under the lock. */
static void end_process(struct e2b_process *p, enum e2b_code code,
			const char *fmt, ...)
{
	va_list ap;

	if (p->ended)
		return;
	p->ended = true;
	p->end.code = code;
	va_start(ap, fmt);
	vsnprintf(p->end.message, sizeof(p->end.message), fmt, ap);
	va_end(ap);
	pthread_cond_broadcast(&p->wake);
}

/* ---- the pump ------------------------------------------------------------ */

/* envd's EndEvent for an EXIT frame. */
static json_t *exit_event(const struct thaw_msg *m)
{
	char status[64];

	if (thaw_has(m, THAW_T_SIGNAL)) {
		uint32_t sig = thaw_get_u32(m, THAW_T_SIGNAL, 0);
		const char *name = sig < NSIG ? sigabbrev_np((int)sig) : NULL;

		snprintf(status, sizeof(status), "signal: %s%s",
			 name ? "SIG" : "", name ? name : "unknown");
		return json_pack("{s:{s:i,s:b,s:s}}", "end", "exitCode", -1,
				 "exited", 0, "status", status);
	}
	uint32_t code = thaw_get_u32(m, THAW_T_EXIT_CODE, 0);
	snprintf(status, sizeof(status), "exit status %u", code);
	return json_pack("{s:{s:i,s:b,s:s}}", "end", "exitCode", (int)code,
			 "exited", 1, "status", status);
}

/* The OK or ERROR of a request of ask(), to its waiter; others (one
 * given up on) are dropped. */
static void hand_over_answer(struct e2b_process *p, const struct thaw_frame *f,
			     const struct thaw_msg *m)
{
	struct e2b_processes *ps = p->owner;
	char why[sizeof(p->answer)] = "";
	int e = f->h.type == THAW_OK	  ? 0
		: f->h.type == THAW_ERROR ? agent_error_of(m, why, sizeof(why))
					  : EPROTO;

	pthread_mutex_lock(&ps->lock);
	if (p->awaiting && f->h.request_id == p->awaiting) {
		p->answered = true;
		p->answer_errno = e;
		snprintf(p->answer, sizeof(p->answer), "%s",
			 e == EPROTO && !why[0] ? "a frame that is no answer"
						: why);
		pthread_cond_broadcast(&p->wake);
	}
	pthread_mutex_unlock(&ps->lock);
}

/* One frame of the EXEC into an event; false once the process ended. */
static bool pump_frame(struct e2b_process *p, const struct thaw_frame *f)
{
	struct e2b_processes *ps = p->owner;
	struct thaw_msg m;
	char why[512];
	json_t *ev = NULL;

	if (thaw_parse_type(&m, f->h.type, f->payload, f->payload_len, why,
			    sizeof(why)) < 0) {
		pthread_mutex_lock(&ps->lock);
		end_process(p, E2B_INTERNAL, "the agent broke the protocol: %s",
			    why);
		pthread_mutex_unlock(&ps->lock);
		return false;
	}
	if (f->h.request_id != EXEC_REQUEST_ID) {
		hand_over_answer(p, f, &m);
		return true;
	}
	const struct thaw_field *data = thaw_get(&m, THAW_T_DATA);
	switch (f->h.type) {
	case THAW_STDOUT:
	case THAW_STDERR: {
		char *b64 = base64_encode(data->data, data->len);

		ev = json_pack("{s:{s:s}}", "data",
			       f->h.type == THAW_STDOUT ? "stdout" : "stderr",
			       b64 ? b64 : "");
		free(b64);
		break;
	}
	case THAW_EXIT:
		ev = exit_event(&m);
		break;
	case THAW_ERROR:
		agent_error_of(&m, why, sizeof(why));
		pthread_mutex_lock(&ps->lock);
		end_process(p, E2B_INVALID_ARGUMENT, "cannot start: %s", why);
		pthread_mutex_unlock(&ps->lock);
		return false;
	default:
		pthread_mutex_lock(&ps->lock);
		end_process(p, E2B_INTERNAL, "the agent sent %s to EXEC",
			    thaw_type_name(f->h.type));
		pthread_mutex_unlock(&ps->lock);
		return false;
	}
	pthread_mutex_lock(&ps->lock);
	push_event(p, ev);
	if (f->h.type == THAW_EXIT)
		end_process(p, E2B_OK, "exited");
	pthread_mutex_unlock(&ps->lock);
	return f->h.type != THAW_EXIT;
}

/* Why reading the agent failed, for the streams' end. */
static void pump_failed(struct e2b_process *p, int ret)
{
	struct e2b_processes *ps = p->owner;

	pthread_mutex_lock(&ps->lock);
	if (ret == -ESHUTDOWN || ret == -EINTR)
		end_process(p, E2B_UNAVAILABLE, "the daemon is stopping");
	else
		end_process(p, E2B_UNAVAILABLE,
			    "sandbox %s: its agent went away (%s): the "
			    "sandbox was killed, paused or stopped",
			    p->sandbox_id, strerror(-ret));
	pthread_mutex_unlock(&ps->lock);
}

static void *pump_main(void *arg)
{
	struct e2b_process *p = arg;
	struct e2b_processes *ps = p->owner;
	struct daemon *d = ps->d;
	struct thaw_frame f;

	for (;;) {
		/* Room in the queue first: the guest waits, not our memory.
		 * A stopping server frees every stream, so this ends. */
		pthread_mutex_lock(&ps->lock);
		while (p->queued > E2B_PROCESS_QUEUE_BYTES && p->subscribers)
			pthread_cond_wait(&p->wake, &ps->lock);
		pthread_mutex_unlock(&ps->lock);
		int ret = agent_next_frame(&p->agent, &f);
		if (ret < 0) {
			pump_failed(p, ret);
			break;
		}
		if (!pump_frame(p, &f))
			break;
	}
	pthread_mutex_lock(&p->write_lock);
	sandbox_agent_close(d, &p->agent);
	pthread_mutex_unlock(&p->write_lock);
	sandbox_put(d, p->sandbox);
	pthread_mutex_lock(&ps->lock);
	p->sandbox = NULL;
	process_unref_locked(ps, p);
	if (!--ps->pumps)
		pthread_cond_broadcast(&ps->pumps_done);
	pthread_mutex_unlock(&ps->lock);
	return NULL;
}

/* ---- streams ------------------------------------------------------------- */

/* A subscriber of @p from its next event on; under the lock. */
static struct subscriber *subscribe(struct e2b_process *p, bool send_start)
{
	struct subscriber *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	*s = (struct subscriber){ .p = p,
				  .next_seq = p->next_seq,
				  .send_start = send_start };
	p->subscribers++;
	p->refs++;
	return s;
}

static enum e2b_step stream_next(void *src, uint64_t until_ns, json_t **msg,
				 struct e2b_stream_end *end)
{
	struct subscriber *s = src;
	struct e2b_process *p = s->p;
	struct e2b_processes *ps = p->owner;
	struct timespec ts = { .tv_sec = (time_t)(until_ns / 1000000000ull),
			       .tv_nsec = (long)(until_ns % 1000000000ull) };
	enum e2b_step step = E2B_STEP_IDLE;

	pthread_mutex_lock(&ps->lock);
	if (s->send_start) {
		s->send_start = false;
		*msg = json_pack("{s:{s:{s:I}}}", "event", "start", "pid",
				 (json_int_t)p->pid);
		s->sent_any = true;
		pthread_mutex_unlock(&ps->lock);
		return E2B_STEP_MESSAGE;
	}
	for (;;) {
		struct event *e = p->head;

		while (e && e->seq < s->next_seq)
			e = e->next;
		if (e) {
			*msg = json_incref(e->msg);
			s->next_seq = e->seq + 1;
			e->readers--;
			trim_events(p);
			s->sent_any = true;
			step = E2B_STEP_MESSAGE;
			break;
		}
		if (p->ended) {
			*end = p->end;
			if (end->code == E2B_OK)
				end->message[0] = '\0';
			step = E2B_STEP_END;
			break;
		}
		if (pthread_cond_timedwait(&p->wake, &ps->lock, &ts) ==
		    ETIMEDOUT)
			break;
	}
	pthread_mutex_unlock(&ps->lock);
	return step;
}

static json_t *stream_keepalive(void *src)
{
	const struct subscriber *s = src;
	struct e2b_processes *ps = s->p->owner;

	pthread_mutex_lock(&ps->lock);
	bool started = s->sent_any;
	pthread_mutex_unlock(&ps->lock);
	return started ? json_pack("{s:{s:{}}}", "event", "keepalive") : NULL;
}

/* A stream's end: its unsent events no longer wait for it. */
static void stream_free(void *src)
{
	struct subscriber *s = src;
	struct e2b_process *p = s->p;
	struct e2b_processes *ps = p->owner;

	pthread_mutex_lock(&ps->lock);
	for (struct event *e = p->head; e; e = e->next)
		if (e->seq >= s->next_seq)
			e->readers--;
	p->subscribers--;
	trim_events(p);
	process_unref_locked(ps, p);
	pthread_mutex_unlock(&ps->lock);
	free(s);
}

const struct e2b_stream_ops process_stream_ops = {
	.next = stream_next,
	.keepalive = stream_keepalive,
	.free = stream_free,
};

void *processes_attach(struct e2b_processes *ps, struct e2b_process *p)
{
	pthread_mutex_lock(&ps->lock);
	struct subscriber *s = subscribe(p, true);
	pthread_mutex_unlock(&ps->lock);
	return s;
}

/* ---- the table ----------------------------------------------------------- */

/*
 * Sends @req and reads its first frame, under the guest's patience: the
 * pid (into *@pid), or why it did not start.  A guest without /bin/bash (thaw's
 * own has busybox's sh alone) runs the SDK's `/bin/bash -l -c CMD` as
 * `/bin/sh -l -c CMD`, whose options mean the same (the argv it makes
 * for that is *@sh_argv_out's, the caller's to free).
 */
static enum e2b_code exec_started(struct e2b_process *p,
				  const struct agent_exec_request *req,
				  uint32_t *pid, char ***sh_argv_out, char *err,
				  size_t errlen)
{
	struct agent_exec_request sh = *req;
	char **sh_argv = NULL;
	struct thaw_frame f;
	struct thaw_msg m;
	char why[512];

	for (bool retried = false;; retried = true) {
		int ret = agent_exec(&p->agent, EXEC_REQUEST_ID, req);

		if (ret < 0) {
			snprintf(err, errlen, "%s",
				 ret == -E2BIG
					 ? "the command, its environment and "
					   "stdin do not fit in one agent "
					   "frame (1 MiB)"
				 : ret == -EOPNOTSUPP
					 ? "the sandbox's agent is too old to "
					   "run a command as a user"
					 : strerror(-ret));
			return ret == -E2BIG ? E2B_INVALID_ARGUMENT
					     : E2B_UNAVAILABLE;
		}
		p->agent.watch.deadline_ns =
			sandbox_guest_deadline_ns(p->owner->d);
		ret = agent_next_frame(&p->agent, &f);
		p->agent.watch.deadline_ns = 0;
		if (ret < 0) {
			snprintf(err, errlen,
				 "the sandbox's agent did not start the "
				 "command: %s",
				 strerror(-ret));
			return E2B_UNAVAILABLE;
		}
		if (f.h.request_id != EXEC_REQUEST_ID ||
		    thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, why,
				    sizeof(why)) < 0 ||
		    (f.h.type != THAW_EXEC_STARTED && f.h.type != THAW_ERROR)) {
			snprintf(err, errlen, "the agent answered EXEC with %s",
				 thaw_type_name(f.h.type));
			return E2B_INTERNAL;
		}
		if (f.h.type == THAW_EXEC_STARTED) {
			*pid = thaw_get_u32(&m, THAW_T_PID, 0);
			return E2B_OK;
		}
		int e = agent_error_of(&m, why, sizeof(why));
		size_t n = 0;
		while (req->argv[n])
			n++;
		bool retry =
			e == ENOENT && !retried && !strcmp(req->argv[0], BASH);
		if (retry)
			sh_argv = *sh_argv_out =
				calloc(n + 1, sizeof(*sh_argv));
		if (!retry || !sh_argv) {
			snprintf(err, errlen, "%s", why);
			return e2b_code_of_errno(e);
		}
		memcpy(sh_argv, req->argv, n * sizeof(*sh_argv));
		sh_argv[0] = SH;
		sh.argv = sh_argv;
		req = &sh;
	}
}

/* @c's processes in the table; under the lock. */
static uint32_t count_held(struct e2b_processes *ps, const struct sandbox *c)
{
	uint32_t n = 0;

	for (struct e2b_process *p = ps->list; p; p = p->next)
		n += !strcmp(p->sandbox_id, c->id);
	return n;
}

/*
 * Puts @p, a process of @c about to start, in the table with its share of
 * the memory budget, in one hold of the lock with the counts that allow
 * it; false with a message in @err past a cap or the budget.
 */
static bool reserve(struct e2b_processes *ps, struct e2b_process *p,
		    const struct sandbox *c, char *err, size_t errlen)
{
	struct daemon *d = ps->d;
	bool reserved = false;

	pthread_mutex_lock(&ps->lock);
	uint32_t held = count_held(ps, c);
	if (held >= E2B_MAX_PROCESSES)
		snprintf(err, errlen,
			 "sandbox %s has %u processes started through envd, "
			 "the most a sandbox may (%u): wait for one to end",
			 c->id, held, E2B_MAX_PROCESSES);
	else if (ps->count >= d->cfg.e2b_max_processes)
		snprintf(err, errlen,
			 "the daemon has %u processes started through envd, "
			 "the most it may (e2b_max_processes = %u in its "
			 "config): wait for one to end",
			 ps->count, d->cfg.e2b_max_processes);
	else if (!sandbox_budget_take(d, PROCESS_BUDGET))
		sandbox_budget_spent(d, err, errlen);
	else
		reserved = true;
	if (reserved) {
		p->next = ps->list;
		ps->list = p;
		ps->count++;
	}
	pthread_mutex_unlock(&ps->lock);
	return reserved;
}

enum e2b_code processes_start(struct e2b_processes *ps, struct sandbox *c,
			      const struct agent_exec_request *req,
			      json_t *config, const char *tag, int client_fd,
			      void **events, char *err, size_t errlen)
{
	struct daemon *d = ps->d;
	struct e2b_process *p = calloc(1, sizeof(*p));
	pthread_attr_t attr;
	pthread_t thread;
	uint32_t pid = 0;

	if (!p || (tag && !(p->tag = strdup(tag)))) {
		free(p);
		snprintf(err, errlen, "out of memory");
		return E2B_RESOURCE_EXHAUSTED;
	}
	p->owner = ps;
	p->agent.fd = -1;
	snprintf(p->sandbox_id, sizeof(p->sandbox_id), "%s", c->id);
	pthread_mutex_init(&p->write_lock, NULL);
	monotonic_cond_init(&p->wake);
	p->config = json_incref(config);
	p->refs = 1; /* the pump's; this start's until there is one */
	if (!reserve(ps, p, c, err, errlen)) {
		process_free(p);
		return E2B_RESOURCE_EXHAUSTED;
	}
	int status = pool_error_status(
		sandbox_agent_open(c, &p->agent, -1, err, errlen));
	if (status) {
		processes_put(ps, p);
		return e2b_code_of_status((unsigned)status);
	}
	char **sh_argv = NULL; /* exec_started()'s */
	/* Until it runs, a client that hangs up ends it (the connection's
	 * close kills it); from then on the process is its own. */
	p->agent.watch.client_fd = client_fd;
	enum e2b_code code = exec_started(p, req, &pid, &sh_argv, err, errlen);
	p->agent.watch.client_fd = -1;
	free(sh_argv);
	p->sandbox = code == E2B_OK ? sandbox_get(d, c->id) : NULL;
	if (!p->sandbox) {
		if (code == E2B_OK) {
			snprintf(err, errlen, "the sandbox went away");
			code = E2B_UNAVAILABLE;
		}
		sandbox_agent_close(d, &p->agent);
		processes_put(ps, p);
		return code;
	}
	pthread_mutex_lock(&ps->lock);
	p->pid = pid;
	struct subscriber *s = subscribe(p, false);
	push_event(p, json_pack("{s:{s:I}}", "start", "pid", (json_int_t)pid));
	ps->pumps++;
	pthread_mutex_unlock(&ps->lock);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int ret = pthread_create(&thread, &attr, pump_main, p);
	pthread_attr_destroy(&attr);
	if (ret) {
		/* As if its agent went away: the stream ends with that. */
		log_error("e2b: cannot start a process's reader: %s",
			  strerror(ret));
		sandbox_agent_close(d, &p->agent);
		sandbox_put(d, p->sandbox);
		pthread_mutex_lock(&ps->lock);
		p->sandbox = NULL;
		end_process(p, E2B_RESOURCE_EXHAUSTED,
			    "cannot start a thread: %s", strerror(ret));
		process_unref_locked(ps, p);
		if (!--ps->pumps)
			pthread_cond_broadcast(&ps->pumps_done);
		pthread_mutex_unlock(&ps->lock);
	}
	*events = s;
	return s ? E2B_OK : E2B_RESOURCE_EXHAUSTED;
}

struct e2b_process *processes_find(struct e2b_processes *ps,
				   const struct sandbox *c, uint32_t pid,
				   const char *tag)
{
	struct e2b_process *found = NULL;

	pthread_mutex_lock(&ps->lock);
	for (struct e2b_process *p = ps->list; p && !found; p = p->next)
		if (!p->ended && p->pid && !strcmp(p->sandbox_id, c->id) &&
		    (tag ? p->tag && !strcmp(p->tag, tag) : p->pid == pid))
			found = p;
	if (found)
		found->refs++;
	pthread_mutex_unlock(&ps->lock);
	return found;
}

json_t *processes_list(struct e2b_processes *ps, const struct sandbox *c)
{
	json_t *list = json_array();

	pthread_mutex_lock(&ps->lock);
	for (struct e2b_process *p = ps->list; p; p = p->next) {
		if (p->ended || !p->pid || strcmp(p->sandbox_id, c->id))
			continue;
		json_t *info = json_pack("{s:O,s:I}", "config", p->config,
					 "pid", (json_int_t)p->pid);
		if (info && p->tag)
			json_object_set_new(info, "tag", json_string(p->tag));
		json_array_append_new(list, info);
	}
	pthread_mutex_unlock(&ps->lock);
	return json_pack("{s:o}", "processes", list);
}

/*
 * Sends one request with @send (@arg) on @p's connection and waits, under
 * the guest's patience, for its OK or ERROR, which the pump hands over.
 * 0, the ERROR's -errno with its message in @err, -ESRCH when the process
 * had ended, -ECONNRESET when it ended after the request left (the pump
 * reads nothing past an EXIT), or a transport error.  One at a time: the
 * write lock is held.
 */
static int ask(struct e2b_process *p,
	       int (*send)(struct agent_conn *c, uint32_t id, const void *arg),
	       const void *arg, char *err, size_t errlen)
{
	struct e2b_processes *ps = p->owner;
	uint64_t deadline = sandbox_guest_deadline_ns(ps->d);
	struct timespec ts = { .tv_sec = (time_t)(deadline / 1000000000ull),
			       .tv_nsec = (long)(deadline % 1000000000ull) };
	int ret = -ESRCH;

	pthread_mutex_lock(&p->write_lock);
	pthread_mutex_lock(&ps->lock);
	uint32_t id = ++p->next_request_id + EXEC_REQUEST_ID;
	p->awaiting = p->ended || p->agent.fd < 0 ? 0 : id;
	p->answered = false;
	pthread_mutex_unlock(&ps->lock);
	if (p->awaiting)
		ret = send(&p->agent, id, arg);
	/* A connection that broke is a process that ended; the agent's own
	 * EPIPE means a closed stdin. */
	if (ret == -EPIPE)
		ret = -ECONNRESET;
	pthread_mutex_lock(&ps->lock);
	while (!ret && !p->answered && !p->ended)
		if (pthread_cond_timedwait(&p->wake, &ps->lock, &ts) ==
		    ETIMEDOUT)
			ret = -ETIMEDOUT;
	if (!ret && p->answered) {
		ret = -p->answer_errno;
		snprintf(err, errlen, "%s", p->answer);
	} else if (!ret) {
		ret = -ECONNRESET; /* it ended after the request left */
	}
	p->awaiting = 0;
	pthread_mutex_unlock(&ps->lock);
	pthread_mutex_unlock(&p->write_lock);
	return ret;
}

/* The Connect code and message of ask()'s @ret for process @p. */
static enum e2b_code asked(const struct e2b_process *p, int ret,
			   const char *what, char *err, size_t errlen)
{
	char why[256];

	if (!ret)
		return E2B_OK;
	snprintf(why, sizeof(why), "%s", err);
	if (ret == -ESRCH || ret == -ECONNRESET) {
		snprintf(err, errlen, "process %u is not running", p->pid);
		return E2B_NOT_FOUND;
	}
	if (ret == -EPIPE) {
		snprintf(err, errlen,
			 "process %u: its stdin is closed (a process takes "
			 "input when started with stdin: true, until "
			 "CloseStdin)",
			 p->pid);
		return E2B_FAILED_PRECONDITION;
	}
	snprintf(err, errlen, "process %u: %s: %s", p->pid, what,
		 ret == -ETIMEDOUT ? "the guest did not answer" : why);
	return ret == -ETIMEDOUT ? E2B_DEADLINE_EXCEEDED
				 : e2b_code_of_errno(-ret);
}

struct signal_args {
	uint32_t signal;
};

static int send_kill(struct agent_conn *c, uint32_t id, const void *arg)
{
	const struct signal_args *a = arg;

	return agent_kill(c, id, EXEC_REQUEST_ID, a->signal);
}

enum e2b_code processes_signal(struct e2b_process *p, uint32_t signal,
			       char *err, size_t errlen)
{
	struct signal_args a = { signal };
	int ret = ask(p, send_kill, &a, err, errlen);

	/* Ended once the signal left: it did its work, or needed none. */
	return asked(p, ret == -ECONNRESET ? 0 : ret, "kill", err, errlen);
}

struct stdin_args {
	const uint8_t *data;
	size_t len;
	bool close;
};

static int send_stdin(struct agent_conn *c, uint32_t id, const void *arg)
{
	const struct stdin_args *a = arg;

	return agent_send_stdin(c, id, EXEC_REQUEST_ID, a->data, a->len,
				a->close);
}

enum e2b_code processes_stdin(struct e2b_process *p, const void *data,
			      size_t len, bool close, char *err, size_t errlen)
{
	const uint8_t *bytes = data;
	uint64_t deadline = sandbox_guest_deadline_ns(p->owner->d);
	size_t off = 0;
	int ret;

	do {
		struct stdin_args a = {
			bytes + off,
			len - off < AGENT_STDIN_CHUNK ? len - off
						      : AGENT_STDIN_CHUNK,
			close && len - off <= AGENT_STDIN_CHUNK,
		};

		ret = ask(p, send_stdin, &a, err, errlen);
		/* The command has not read what came before: it will. */
		if (ret == -ENOBUFS && monotonic_ns() < deadline) {
			struct timespec pause = { 0, STDIN_RETRY_NS };

			nanosleep(&pause, NULL);
			continue;
		}
		off += a.len;
	} while (!ret && off < len);
	return asked(p, ret, close && !len ? "close stdin" : "stdin", err,
		     errlen);
}
