// SPDX-License-Identifier: Apache-2.0
/*
 * agent_client.c - see agent_client.h.
 */
#include "pool/host/agent_client.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "pool/host/interrupt.h"
#include "common/printable.h"

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
	if (version < THAW_PROTOCOL_VERSION_MIN ||
	    version > THAW_PROTOCOL_VERSION) {
		snprintf(err, errlen,
			 "agent speaks protocol %u, we speak %u to %u", version,
			 THAW_PROTOCOL_VERSION_MIN, THAW_PROTOCOL_VERSION);
		ret = -EPROTO;
		goto fail;
	}
	c->version = version;
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
	if (r->user)
		thaw_put_str(w, THAW_T_USER, r->user);
	if (r->keep_stdin)
		thaw_put_u8(w, THAW_T_KEEP_STDIN, 1);
}

/* Version 1 agents skip what version 2 added; they must not get it. */
static bool lacks_v2(const struct agent_conn *c)
{
	return c->version < 2;
}

int agent_exec(struct agent_conn *c, uint32_t id,
	       const struct agent_exec_request *r)
{
	if ((r->user || r->keep_stdin) && lacks_v2(c))
		return -EOPNOTSUPP;
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

struct stdin_args {
	uint32_t target;
	const void *data;
	size_t len;
};

static void fill_stdin(struct thaw_writer *w, const void *arg)
{
	const struct stdin_args *a = arg;

	thaw_put_u32(w, THAW_T_TARGET, a->target);
	if (a->len)
		thaw_put_bytes(w, THAW_T_DATA, a->data, a->len);
}

int agent_send_stdin(struct agent_conn *c, uint32_t id, uint32_t target,
		     const void *data, size_t len, bool close)
{
	struct stdin_args a = { target, data, len };

	if (len > AGENT_STDIN_CHUNK)
		return -E2BIG;
	return send_frame(c, id, THAW_STDIN, close ? THAW_FLAG_FINAL : 0,
			  AGENT_STDIN_CHUNK + 64, fill_stdin, &a);
}

struct write_args {
	bool first;
	const char *path;
	uint32_t mode;
	const char *user;
	const void *data;
	size_t len;
};

static void fill_write(struct thaw_writer *w, const void *arg)
{
	const struct write_args *a = arg;

	if (a->first) {
		thaw_put_str(w, THAW_T_PATH, a->path);
		thaw_put_u32(w, THAW_T_MODE, a->mode);
		if (a->user)
			thaw_put_str(w, THAW_T_USER, a->user);
	}
	if (a->len)
		thaw_put_bytes(w, THAW_T_DATA, a->data, a->len);
}

int agent_write_file_as(struct agent_conn *c, uint32_t id, bool first,
			const char *path, uint32_t mode, const char *user,
			const void *data, size_t len, bool final)
{
	struct write_args a = { first, path, mode, user, data, len };

	if (len > AGENT_WRITE_CHUNK)
		return -E2BIG;
	if (user && first && lacks_v2(c))
		return -EOPNOTSUPP;
	return send_frame(c, id, THAW_WRITE_FILE, final ? THAW_FLAG_FINAL : 0,
			  AGENT_WRITE_CHUNK + PATH_MAX + 128, fill_write, &a);
}

int agent_write_file(struct agent_conn *c, uint32_t id, bool first,
		     const char *path, uint32_t mode, const void *data,
		     size_t len, bool final)
{
	return agent_write_file_as(c, id, first, path, mode, NULL, data, len,
				   final);
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
 * The next frame of request @id, parsed into @m (valid until the next
 * read): @success (OK, PONG to a PING, ...) or ERROR, which is turned into
 * -errno and @err; 1 for @also, a second type the caller takes.
 */
static int answer_of(struct agent_conn *c, uint32_t id, uint16_t success,
		     uint16_t also, struct thaw_msg *m, char *err,
		     size_t errlen)
{
	struct thaw_frame f;
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
	    (f.h.type != success && f.h.type != THAW_ERROR &&
	     (!also || f.h.type != also))) {
		snprintf(err, errlen,
			 "agent sent %s for request %u, want %s "
			 "or ERROR for %u",
			 thaw_type_name(f.h.type), f.h.request_id,
			 thaw_type_name(success), id);
		return -EPROTO;
	}
	if (thaw_parse_type(m, f.h.type, f.payload, f.payload_len, err,
			    errlen) < 0)
		return -EPROTO;
	if (f.h.type == success)
		return 0;
	if (f.h.type == also)
		return 1;
	return -agent_error_of(m, err, errlen);
}

/* The answer to request @id: @success, or ERROR as -errno and @err. */
static int simple_answer(struct agent_conn *c, uint32_t id, uint16_t success,
			 char *err, size_t errlen)
{
	struct thaw_msg m;

	return answer_of(c, id, success, 0, &m, err, errlen);
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

/* The fields of a file request; what is 0/NULL is left out. */
struct file_args {
	const char *path, *new_path, *user;
	bool has_mode;
	uint32_t mode;
	bool parents, recursive;
	uint32_t depth; /* > 1 only */
};

static void fill_file(struct thaw_writer *w, const void *arg)
{
	const struct file_args *a = arg;

	thaw_put_str(w, THAW_T_PATH, a->path);
	if (a->new_path)
		thaw_put_str(w, THAW_T_NEW_PATH, a->new_path);
	if (a->has_mode)
		thaw_put_u32(w, THAW_T_MODE, a->mode);
	if (a->parents)
		thaw_put_u8(w, THAW_T_PARENTS, 1);
	if (a->recursive)
		thaw_put_u8(w, THAW_T_RECURSIVE, 1);
	if (a->depth > 1)
		thaw_put_u32(w, THAW_T_DEPTH, a->depth);
	if (a->user)
		thaw_put_str(w, THAW_T_USER, a->user);
}

/* Sends file request @type with @a; 0 or -errno after a message in @err. */
static int file_request(struct agent_conn *c, uint32_t id, uint16_t type,
			const struct file_args *a, char *err, size_t errlen)
{
	int ret;

	if ((a->user || a->depth > 1) && lacks_v2(c)) {
		snprintf(err, errlen,
			 "%s: the agent speaks protocol %u, without users "
			 "and depths",
			 thaw_type_name(type), c->version);
		return -EOPNOTSUPP;
	}
	ret = send_frame(c, id, type, 0, 2 * PATH_MAX + 256, fill_file, a);
	if (ret < 0)
		snprintf(err, errlen, "sending %s %s: %s", thaw_type_name(type),
			 a->path, strerror(-ret));
	return ret;
}

/* file_request, then its answer: @success or ERROR. */
static int file_command(struct agent_conn *c, uint32_t id, uint16_t type,
			const struct file_args *a, uint16_t success, char *err,
			size_t errlen)
{
	int ret = file_request(c, id, type, a, err, errlen);

	return ret ? ret : simple_answer(c, id, success, err, errlen);
}

/* STAT_RESULT's or an ENTRY's fields; strings left "" when absent. */
static void info_of(const struct thaw_msg *m, struct agent_file_info *info)
{
	uint8_t type = thaw_get_u8(m, THAW_T_FILE_TYPE, THAW_FT_OTHER);

	memset(info, 0, sizeof(*info));
	info->type = type <= THAW_FT_SOCKET ? type : THAW_FT_OTHER;
	info->mode = thaw_get_u32(m, THAW_T_MODE, 0) & 07777;
	info->size = thaw_get_u64(m, THAW_T_SIZE, 0);
	info->mtime_ns = (int64_t)thaw_get_u64(m, THAW_T_MTIME_NS, 0);
	/* The schemas bound every one to fit; absent ones stay "". */
	thaw_get_str(m, THAW_T_NAME, info->name, sizeof(info->name));
	thaw_get_str(m, THAW_T_PATH, info->path, sizeof(info->path));
	thaw_get_str(m, THAW_T_OWNER, info->owner, sizeof(info->owner));
	thaw_get_str(m, THAW_T_GROUP, info->group, sizeof(info->group));
	thaw_get_str(m, THAW_T_SYMLINK_TARGET, info->symlink_target,
		     sizeof(info->symlink_target));
}

int agent_stat(struct agent_conn *c, uint32_t id, const char *path,
	       struct agent_file_info *info, char *err, size_t errlen)
{
	struct file_args a = { .path = path };
	struct thaw_msg m;
	int ret = file_request(c, id, THAW_STAT, &a, err, errlen);

	if (ret == 0)
		ret = answer_of(c, id, THAW_STAT_RESULT, 0, &m, err, errlen);
	if (ret == 0)
		info_of(&m, info);
	return ret;
}

/* Passes each ENTRY of an ENTRIES frame to @each while it returns 0. */
static int entries_of(const struct thaw_msg *m,
		      int (*each)(const struct agent_file_info *, void *),
		      void *arg, struct agent_file_info *info, char *err,
		      size_t errlen)
{
	const uint8_t *val;
	uint32_t len;
	size_t it = 0;
	int ret = 0;

	while (!ret && thaw_next(m, THAW_T_ENTRY, &it, &val, &len)) {
		struct thaw_msg e;

		if (thaw_parse(&e, &thaw_entry_schema, val, len, err, errlen) <
		    0)
			return -EPROTO;
		info_of(&e, info);
		ret = each(info, arg);
	}
	return ret;
}

int agent_list(struct agent_conn *c, uint32_t id, const char *path,
	       uint32_t depth,
	       int (*each)(const struct agent_file_info *info, void *arg),
	       void *arg, char *err, size_t errlen)
{
	struct file_args a = { .path = path, .depth = depth };
	struct agent_file_info *info;
	int ret, stopped = 0;

	if (depth < 1 || depth > THAW_LIST_MAX_DEPTH) {
		snprintf(err, errlen, "LIST %s: depth %u is not 1..%d", path,
			 depth, THAW_LIST_MAX_DEPTH);
		return -EINVAL;
	}
	info = malloc(sizeof(*info));
	if (!info) {
		snprintf(err, errlen, "LIST %s: out of memory", path);
		return -ENOMEM;
	}
	ret = file_request(c, id, THAW_LIST, &a, err, errlen);
	while (ret == 0) {
		struct thaw_msg m;

		ret = answer_of(c, id, THAW_END, THAW_ENTRIES, &m, err, errlen);
		if (ret != 1)
			break;
		ret = stopped ? 0
			      : entries_of(&m, each, arg, info, err, errlen);
		if (ret == -EPROTO)
			break;
		/* Read on to END, so the connection stays usable. */
		stopped = stopped ? stopped : ret;
		ret = 0;
	}
	free(info);
	return ret ? ret : stopped;
}

int agent_mkdir(struct agent_conn *c, uint32_t id, const char *path,
		uint32_t mode, bool parents, const char *user, char *err,
		size_t errlen)
{
	struct file_args a = { .path = path,
			       .has_mode = true,
			       .mode = mode,
			       .parents = parents,
			       .user = user };
	return file_command(c, id, THAW_MKDIR, &a, THAW_OK, err, errlen);
}

int agent_remove(struct agent_conn *c, uint32_t id, const char *path,
		 bool recursive, char *err, size_t errlen)
{
	struct file_args a = { .path = path, .recursive = recursive };
	return file_command(c, id, THAW_REMOVE, &a, THAW_OK, err, errlen);
}

int agent_rename(struct agent_conn *c, uint32_t id, const char *from,
		 const char *to, char *err, size_t errlen)
{
	struct file_args a = { .path = from, .new_path = to };
	return file_command(c, id, THAW_RENAME, &a, THAW_OK, err, errlen);
}

int agent_watch(struct agent_conn *c, uint32_t id, const char *path,
		bool recursive, char *err, size_t errlen)
{
	struct file_args a = { .path = path, .recursive = recursive };
	return file_command(c, id, THAW_WATCH, &a, THAW_WATCHING, err, errlen);
}

int agent_fs_event_of(const struct thaw_frame *f, uint32_t watch_id,
		      struct agent_fs_event *ev, char *err, size_t errlen)
{
	struct thaw_msg m;

	if (f->h.request_id != watch_id ||
	    (f->h.type != THAW_FS_EVENT && f->h.type != THAW_END &&
	     f->h.type != THAW_ERROR)) {
		snprintf(err, errlen,
			 "agent sent %s for request %u, want FS_EVENT, END or "
			 "ERROR for watch %u",
			 thaw_type_name(f->h.type), f->h.request_id, watch_id);
		return -EPROTO;
	}
	if (thaw_parse_type(&m, f->h.type, f->payload, f->payload_len, err,
			    errlen) < 0)
		return -EPROTO;
	if (f->h.type == THAW_END)
		return 0;
	if (f->h.type == THAW_ERROR)
		return -agent_error_of(&m, err, errlen);
	ev->type = thaw_get_u8(&m, THAW_T_EVENT, 0);
	if (ev->type < THAW_EV_CREATE || ev->type > THAW_EV_OVERFLOW) {
		snprintf(err, errlen, "FS_EVENT of watch %u: EVENT %u unknown",
			 watch_id, ev->type);
		return -EPROTO;
	}
	/* The schema bounds PATH to fit. */
	thaw_get_str(&m, THAW_T_PATH, ev->name, sizeof(ev->name));
	return 1;
}

int agent_unwatch(struct agent_conn *c, uint32_t id, uint32_t watch_id)
{
	/* The agent takes a KILL of a watch as its end; no signal is sent. */
	return agent_kill(c, id, watch_id, SIGKILL);
}
