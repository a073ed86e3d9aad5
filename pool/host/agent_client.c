// SPDX-License-Identifier: Apache-2.0
/*
 * agent_client.c - see agent_client.h.
 */
#include "agent_client.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "interrupt.h"
#include "printable.h"

/* Longest answer to CONNECT we accept: "OK " and a port number. */
#define HANDSHAKE_LINE_MAX 32
/* Bytes of RNG seed per CLONE: twice what a CRNG key needs. */
#define CLONE_ENTROPY 64
/* A CLONE frame with the longest fields the protocol allows, and slack. */
#define CLONE_FRAME_MAX 512

/* How often a wait looks at thaw_interrupted and the watch's stopping(). */
#define INTERRUPT_CHECK_MS 250
/* agent_connect_until()'s pauses between attempts: doubling, capped. */
#define CONNECT_RETRY_FIRST_NS 1000000L
#define CONNECT_RETRY_MAX_NS 20000000L

/* The earlier of two deadlines, 0 standing for none. */
static uint64_t earliest(uint64_t a, uint64_t b)
{
	if (!a || !b)
		return a | b;
	return a < b ? a : b;
}

static uint64_t deadline_after(uint64_t ms)
{
	return monotonic_ns() + ms * NS_PER_MS;
}

/*
 * A signal that interrupts poll() is looked at at once (^C reaches the
 * caller mid-wait); one that lands on another thread is seen at the next
 * slice, as the watch's stopping() is, by the daemon's workers and API
 * threads.
 */
int agent_wait(struct agent_conn *c, short events, uint64_t deadline_ns)
{
	const struct agent_watch *w = &c->watch;
	/* Asking for no event: only POLLHUP and POLLERR, a hang-up, come
	 * back; POLLRDHUP (a half-close) and a pipelined request do not. */
	struct pollfd p[2] = { { c->fd, events, 0 }, { w->client_fd, 0, 0 } };

	for (;;) {
		int timeout = INTERRUPT_CHECK_MS;

		if (thaw_interrupted)
			return -EINTR;
		if (w->stopping && w->stopping(w->arg))
			return -ESHUTDOWN;
		if (deadline_ns) {
			uint64_t now = monotonic_ns();

			if (now >= deadline_ns)
				return -ETIMEDOUT;
			/* Rounded up: waking a little early would spin. */
			uint64_t left =
				(deadline_ns - now + NS_PER_MS - 1) / NS_PER_MS;
			if (left < INTERRUPT_CHECK_MS)
				timeout = (int)left;
		}
		int ready = poll(p, w->client_fd >= 0 ? 2 : 1, timeout);
		if (ready < 0 && errno != EINTR)
			return -errno;
		if (ready > 0 && w->client_fd >= 0 && p[1].revents)
			return -ECONNABORTED;
		/* An error or hang-up on the agent's socket is for the read
		 * or write that follows to report. */
		if (ready > 0 && p[0].revents)
			return 0;
	}
}

/* Sends all of @buf, each byte within @deadline_ns. */
static int send_all(struct agent_conn *c, const void *buf, size_t len,
		    uint64_t deadline_ns)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = send(c->fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno != EAGAIN && errno != EINTR)
			return -errno;
		if (n < 0) {
			int ret = agent_wait(c, POLLOUT, deadline_ns);

			if (ret < 0)
				return ret;
			continue;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A frame's bytes leave within the patience, and the watch's deadline. */
static int send_bytes(struct agent_conn *c, const void *buf, size_t len)
{
	return send_all(
		c, buf, len,
		earliest(deadline_after(c->patience_ms), c->watch.deadline_ns));
}

/* Byte by byte: nothing after the newline may be consumed. */
static int read_line(struct agent_conn *c, char *line, size_t size,
		     uint64_t deadline_ns)
{
	size_t len = 0;

	while (len + 1 < size) {
		ssize_t n = read(c->fd, line + len, 1);

		if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			int ret = agent_wait(c, POLLIN, deadline_ns);

			if (ret < 0)
				return ret;
			continue;
		}
		if (n < 0)
			return -errno;
		if (n == 0)
			return -ECONNRESET;
		if (line[len] == '\n') {
			line[len] = '\0';
			return 0;
		}
		len++;
	}
	return -EPROTO;
}

/*
 * The next frame, by @deadline_ns (0: none); a frame begun must also end
 * within the patience, so a guest that stops mid-frame is caught even
 * when nothing else bounds the wait.  The watch is looked at before every
 * read, not only when there is nothing to read: a guest that floods us
 * must not keep a stop, a hang-up or a deadline from being seen.
 */
static int next_frame(struct agent_conn *c, struct thaw_frame *f,
		      uint64_t deadline_ns)
{
	for (;;) {
		if (!thaw_reader_idle(&c->reader) && !c->frame_deadline_ns)
			c->frame_deadline_ns = deadline_after(c->patience_ms);
		int ret = agent_wait(
			c, POLLIN, earliest(deadline_ns, c->frame_deadline_ns));
		if (ret < 0)
			return ret;
		ret = thaw_reader_read(&c->reader, c->fd, f);
		switch (ret) {
		case THAW_READ_FRAME:
			c->frame_deadline_ns = 0;
			return 0;
		case THAW_READ_AGAIN:
			continue;
		case THAW_READ_EOF:
			return -EPIPE;
		case THAW_READ_OVERSIZED:
		case THAW_READ_RUNT:
			return -EPROTO;
		default:
			return ret < 0 ? ret : -EPROTO;
		}
	}
}

int agent_connect(struct agent_conn *c, const char *vsock_path,
		  uint64_t patience_ms, char *err, size_t errlen)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	char line[HANDSHAKE_LINE_MAX];
	int ret;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	c->watch.client_fd = -1;
	c->patience_ms = patience_ms;
	if (strlen(vsock_path) >= sizeof(addr.sun_path)) {
		snprintf(err, errlen, "socket path too long: %s", vsock_path);
		return -ENAMETOOLONG;
	}
	strcpy(addr.sun_path, vsock_path);
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		snprintf(err, errlen, "socket: %s", strerror(errno));
		return -errno;
	}
	/* Non-blocking, a full backlog is EAGAIN: the VMM is busy. */
	if (connect(c->fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		ret = errno == ENOENT || errno == ECONNREFUSED ||
				      errno == EAGAIN
			      ? -EAGAIN
			      : -errno;
		snprintf(err, errlen, "%s: %s", vsock_path, strerror(errno));
		goto fail;
	}
	uint64_t deadline = deadline_after(patience_ms);
	ret = send_all(c, "CONNECT 1024\n", 13, deadline);
	if (ret == 0)
		ret = read_line(c, line, sizeof(line), deadline);
	if (ret == -ECONNRESET) { /* the guest has no listener yet */
		snprintf(err, errlen, "agent not listening yet");
		ret = -EAGAIN;
		goto fail;
	}
	if (ret == -ETIMEDOUT) {
		snprintf(err, errlen, "no vsock answer on %s within %llu ms",
			 vsock_path, (unsigned long long)patience_ms);
		ret = -EAGAIN;
		goto fail;
	}
	if (ret == 0 && strncmp(line, "OK ", 3) != 0)
		ret = -EPROTO;
	if (ret < 0) {
		snprintf(err, errlen, "vsock handshake on %s: %s", vsock_path,
			 strerror(-ret));
		goto fail;
	}

	ret = thaw_reader_init(&c->reader);
	if (ret < 0) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	struct thaw_frame f;
	struct thaw_msg m;
	char why[128];

	ret = next_frame(c, &f, deadline);
	if (ret == -ETIMEDOUT) {
		snprintf(err, errlen,
			 "no greeting from the agent within %llu ms",
			 (unsigned long long)patience_ms);
		ret = -EAGAIN;
		goto fail;
	}
	if (ret == 0 && f.h.type != THAW_HELLO)
		ret = -EPROTO;
	if (ret == 0)
		ret = thaw_parse_type(&m, f.h.type, f.payload, f.payload_len,
				      why, sizeof(why));
	if (ret < 0) {
		snprintf(err, errlen, "agent greeting: %s", strerror(-ret));
		goto fail;
	}
	uint32_t version = thaw_get_u32(&m, THAW_T_VERSION, 0);
	if (version != THAW_PROTOCOL_VERSION) {
		snprintf(err, errlen, "agent speaks protocol %u, we speak %u",
			 version, THAW_PROTOCOL_VERSION);
		ret = -EPROTO;
		goto fail;
	}
	thaw_get_str(&m, THAW_T_AGENT_VERSION, c->agent_version,
		     sizeof(c->agent_version));
	return 0;
fail:
	agent_close(c);
	return ret;
}

int agent_connect_until(struct agent_conn *c, const char *vsock_path,
			const struct agent_wait *w, char *err, size_t errlen)
{
	long pause_ns = CONNECT_RETRY_FIRST_NS;

	for (uint64_t now = monotonic_ns();; now = monotonic_ns()) {
		uint64_t left_ms = now < w->deadline_ns
					   ? (w->deadline_ns - now) / NS_PER_MS
					   : 0;
		int ret =
			agent_connect(c, vsock_path, left_ms + 1, err, errlen);

		if (ret != -EAGAIN)
			return ret;
		if (thaw_interrupted)
			return -EINTR;
		if (w->give_up && w->give_up(w->arg))
			return -ECANCELED;
		now = monotonic_ns();
		if (now >= w->deadline_ns)
			return -ETIMEDOUT;
		struct timespec pause = { 0, pause_ns };

		nanosleep(&pause, NULL);
		pause_ns = pause_ns * 2 < CONNECT_RETRY_MAX_NS
				   ? pause_ns * 2
				   : CONNECT_RETRY_MAX_NS;
	}
}

/* Encodes one frame with @fill and sends it. */
static int send_frame(struct agent_conn *c, uint32_t id, uint16_t type,
		      uint16_t flags, size_t cap,
		      void (*fill)(struct thaw_writer *w, const void *arg),
		      const void *arg)
{
	uint8_t *buf = malloc(cap);
	struct thaw_writer w;

	if (!buf)
		return -ENOMEM;
	thaw_writer_init(&w, buf, cap, id, type, flags);
	fill(&w, arg);
	int len = thaw_writer_finish(&w);
	int ret = len < 0 ? -E2BIG : send_bytes(c, buf, (size_t)len);
	free(buf);
	return ret;
}

static void fill_exec(struct thaw_writer *w, const void *arg)
{
	const struct agent_exec_request *r = arg;

	for (int i = 0; r->argv[i]; i++)
		thaw_put_str(w, THAW_T_ARGV, r->argv[i]);
	for (int i = 0; r->env && r->env[i]; i++)
		thaw_put_str(w, THAW_T_ENV, r->env[i]);
	thaw_put_str(w, THAW_T_CWD, r->cwd ? r->cwd : "/");
	if (r->stdin_len)
		thaw_put_bytes(w, THAW_T_STDIN, r->stdin_data, r->stdin_len);
	if (r->timeout_ms)
		thaw_put_u32(w, THAW_T_TIMEOUT_MS, r->timeout_ms);
}

int agent_exec(struct agent_conn *c, uint32_t id,
	       const struct agent_exec_request *r)
{
	return send_frame(c, id, THAW_EXEC, 0, THAW_MAX_FRAME, fill_exec, r);
}

struct kill_args {
	uint32_t target, signal;
};

static void fill_kill(struct thaw_writer *w, const void *arg)
{
	const struct kill_args *k = arg;

	thaw_put_u32(w, THAW_T_TARGET, k->target);
	thaw_put_u32(w, THAW_T_SIGNAL, k->signal);
}

int agent_kill(struct agent_conn *c, uint32_t id, uint32_t target,
	       uint32_t signal)
{
	struct kill_args k = { target, signal };

	return send_frame(c, id, THAW_KILL, 0, 64, fill_kill, &k);
}

struct write_args {
	bool first;
	const char *path;
	uint32_t mode;
	const void *data;
	size_t len;
};

static void fill_write(struct thaw_writer *w, const void *arg)
{
	const struct write_args *a = arg;

	if (a->first) {
		thaw_put_str(w, THAW_T_PATH, a->path);
		thaw_put_u32(w, THAW_T_MODE, a->mode);
	}
	if (a->len)
		thaw_put_bytes(w, THAW_T_DATA, a->data, a->len);
}

int agent_write_file(struct agent_conn *c, uint32_t id, bool first,
		     const char *path, uint32_t mode, const void *data,
		     size_t len, bool final)
{
	struct write_args a = { first, path, mode, data, len };

	if (len > AGENT_WRITE_CHUNK)
		return -E2BIG;
	return send_frame(c, id, THAW_WRITE_FILE, final ? THAW_FLAG_FINAL : 0,
			  AGENT_WRITE_CHUNK + PATH_MAX + 64, fill_write, &a);
}

static void fill_path(struct thaw_writer *w, const void *arg)
{
	thaw_put_str(w, THAW_T_PATH, arg);
}

int agent_read_file(struct agent_conn *c, uint32_t id, const char *path)
{
	return send_frame(c, id, THAW_READ_FILE, 0, PATH_MAX + 64, fill_path,
			  path);
}

/* Encodes CLONE and checks it against the schema the agent applies. */
static int clone_frame(uint8_t *buf, uint32_t id, const char *hostname,
		       const char *sandbox_id, char *err, size_t errlen)
{
	uint8_t entropy[CLONE_ENTROPY];
	struct thaw_writer w;
	struct timespec now;
	struct thaw_msg m;
	ssize_t got;
	int n;

	/* At most 256 bytes: getrandom returns them all or fails. */
	got = getrandom(entropy, sizeof(entropy), 0);
	if (got != (ssize_t)sizeof(entropy)) {
		n = got < 0 ? -errno : -EIO;
		snprintf(err, errlen, "CLONE: getrandom: %s", strerror(-n));
		return n;
	}
	clock_gettime(CLOCK_REALTIME, &now);
	thaw_writer_init(&w, buf, CLONE_FRAME_MAX, id, THAW_CLONE, 0);
	thaw_put_bytes(&w, THAW_T_ENTROPY, entropy, sizeof(entropy));
	thaw_put_u64(&w, THAW_T_REALTIME_NS,
		     (uint64_t)now.tv_sec * 1000000000u +
			     (uint64_t)now.tv_nsec);
	thaw_put_str(&w, THAW_T_HOSTNAME, hostname);
	thaw_put_str(&w, THAW_T_SANDBOX_ID, sandbox_id);
	explicit_bzero(entropy, sizeof(entropy));
	n = thaw_writer_finish(&w);
	if (n < 0) {
		snprintf(err, errlen, "CLONE: hostname or sandbox id too long");
		return -EINVAL;
	}
	if (thaw_parse_type(&m, THAW_CLONE, buf + THAW_HEADER_SIZE,
			    (size_t)n - THAW_HEADER_SIZE, err, errlen) < 0)
		return -EINVAL;
	return n;
}

/*
 * The answer to request @id: @success (OK, or PONG to a PING), or ERROR
 * turned into -errno and @err.
 */
static int simple_answer(struct agent_conn *c, uint32_t id, uint16_t success,
			 char *err, size_t errlen)
{
	struct thaw_frame f;
	struct thaw_msg m;
	int ret;

	ret = next_frame(
		c, &f,
		earliest(deadline_after(c->patience_ms), c->watch.deadline_ns));
	if (ret < 0) {
		snprintf(err, errlen, "waiting for the agent: %s",
			 strerror(-ret));
		return ret;
	}
	if (f.h.request_id != id ||
	    (f.h.type != success && f.h.type != THAW_ERROR)) {
		snprintf(err, errlen,
			 "agent sent %s for request %u, want %s "
			 "or ERROR for %u",
			 thaw_type_name(f.h.type), f.h.request_id,
			 thaw_type_name(success), id);
		return -EPROTO;
	}
	if (thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, err,
			    errlen) < 0)
		return -EPROTO;
	if (f.h.type == success)
		return 0;
	return -agent_error_of(&m, err, errlen);
}

int agent_error_of(const struct thaw_msg *m, char *msg, size_t len)
{
	const struct thaw_field *text = thaw_get(m, THAW_T_MESSAGE);
	uint32_t e = thaw_get_u32(m, THAW_T_ERRNO, 0);

	snprintf(msg, len, "%.*s", text ? (int)text->len : 0,
		 text ? (const char *)text->data : "");
	printable(msg);
	/* An ERROR must never read as success, nor as a non-errno. */
	return e && e < 4096 ? (int)e : EPROTO;
}

int agent_wait_answer(struct agent_conn *c, uint32_t id, char *err,
		      size_t errlen)
{
	return simple_answer(c, id, THAW_OK, err, errlen);
}

static void fill_nothing(struct thaw_writer *w, const void *arg)
{
	(void)w;
	(void)arg;
}

int agent_ping(struct agent_conn *c, uint32_t id, char *err, size_t errlen)
{
	int ret = send_frame(c, id, THAW_PING, 0, THAW_HEADER_SIZE,
			     fill_nothing, NULL);

	if (ret < 0) {
		snprintf(err, errlen, "sending PING: %s", strerror(-ret));
		return ret;
	}
	return simple_answer(c, id, THAW_PONG, err, errlen);
}

int agent_clone(struct agent_conn *c, uint32_t id, const char *hostname,
		const char *sandbox_id, char *err, size_t errlen)
{
	uint8_t buf[CLONE_FRAME_MAX];
	int n = clone_frame(buf, id, hostname, sandbox_id, err, errlen);
	int ret = n < 0 ? n : send_bytes(c, buf, (size_t)n);

	/* The entropy seeds the guest's RNG; it is nobody else's business. */
	explicit_bzero(buf, sizeof(buf));
	if (n < 0)
		return n;
	if (ret < 0) {
		snprintf(err, errlen, "sending CLONE: %s", strerror(-ret));
		return ret;
	}
	return simple_answer(c, id, THAW_OK, err, errlen);
}

int agent_next_frame(struct agent_conn *c, struct thaw_frame *f)
{
	return next_frame(c, f, c->watch.deadline_ns);
}

void agent_close(struct agent_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	thaw_reader_free(&c->reader);
}
