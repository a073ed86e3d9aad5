// SPDX-License-Identifier: Apache-2.0
/*
 * http_conns.c - who may hold a server's connections, and for how long
 * without a request (http_conns.h).
 *
 * libmicrohttpd runs a thread per connection and takes at most
 * max_connections; its own timeout (120 s) counts idle time only.  So
 * one member of the socket's group could hold every slot: open them all,
 * or trickle a byte of a request head now and then on each (slowloris).
 * Two rules stop that:
 *
 *  - A uid (the peer's, SO_PEERCRED) holds at most max_connections_per_uid
 *    connections.  On a TCP socket (the E2B listener) SO_PEERCRED tells
 *    nothing, and an address alone would make every local user one peer
 *    (127.0.0.1): one of them holding its share would lock the others
 *    out.  So a TCP peer whose socket is on this host (loopback, or an
 *    address of the host's) is its uid too, the socket's owner, asked of
 *    the kernel (http_peer_uid.c); a remote peer is its IP address (an IPv6
 *    one its /64, which one host usually holds whole), and every local
 *    peer whose uid cannot be read (a socket bound to a device escapes
 *    the kernel's exact lookup, and any user may bind one to lo and
 *    connect from each of 127.0.0.0/8's addresses) is one peer together:
 *    an unknown uid is never a free slot.
 *    libmicrohttpd's accept callback sees only an address, so the server
 *    is started with MHD_USE_NO_LISTEN_SOCKET and this file's thread
 *    accepts: it finds the peer, and refuses (a 429, or a 503 when every
 *    slot is taken) and closes before any thread is spent on the
 *    connection; the others go to MHD_add_connection().
 *  - A connection must deliver a whole request head within
 *    header_timeout_s of its accept or of its previous reply.  Each slot
 *    has a deadline, cleared when the head is in (the request's first
 *    handler call) and set again when the request ends; the accept thread
 *    wakes at the earliest one and shuts the socket of a connection past
 *    it, so its thread reads an end of file and libmicrohttpd closes it.
 *
 * The slots are a table of max_connections under one lock.  A slot is
 * taken at the accept, tied to its libmicrohttpd connection by
 * MHD_CONNECTION_NOTIFY_STARTED (its socket context, from libmicrohttpd's
 * own thread, soon after MHD_add_connection()) and freed by
 * MHD_CONNECTION_NOTIFY_CLOSED, which libmicrohttpd sends before it closes
 * the socket: a shutdown() under the lock never hits a reused descriptor.
 * What a client can make happen again and again (refusals, cut heads) is
 * logged through log_limited(): all on the accept thread, as that needs.
 * libmicrohttpd's own limit is set above ours (http_server.c): it counts a
 * connection until a little after NOTIFY_CLOSED, and a connection it
 * refused for that would never tell us.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <xxhash.h>

#include "pool/http/http_conns.h"
#include "common/clock.h"
#include "common/log.h"
#include "pool/http/http_peer_uid.h"

/* "uid 4294967295 (TCP " and the longest IPv6 address text, with room. */
#define WHO_MAX 96

struct http_conn {
	bool used;
	bool started; /* tied to a libmicrohttpd connection */
	int fd;
	uint64_t peer; /* peer_of()'s key */
	/* "uid 1000", "uid 1000 (TCP 127.0.0.1)", "address 10.0.0.1": for
	 * the log and the 429's message */
	char who[WHO_MAX];
	uint64_t head_deadline_ms; /* monotonic; 0: serving a request */
	struct http_conns *owner;
};

struct http_conns {
	const struct http_params *params;
	struct MHD_Daemon *mhd;
	int listen_fd;
	int wake_fd; /* wakes the thread: a new deadline, or a stop */
	atomic_bool stopping;
	pthread_t thread;
	bool running;
	pthread_mutex_t lock;
	struct http_conn *slots; /* params->max_connections */
	/* Keys IPv6 prefixes: no client can pick one that is another's. */
	uint64_t prefix_seed;
};

static uint64_t now_ms(void)
{
	return monotonic_ns() / 1000000;
}

struct http_conns *http_conns_new(const struct http_params *params, int fd)
{
	struct http_conns *g = calloc(1, sizeof(*g));

	if (!g)
		return NULL;
	g->slots = calloc(params->max_connections, sizeof(*g->slots));
	g->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!g->slots || g->wake_fd < 0) {
		if (g->wake_fd >= 0)
			close(g->wake_fd);
		free(g->slots);
		free(g);
		return NULL;
	}
	/* Without randomness the seed is 0: prefixes are still told apart,
	 * only a chosen collision gets easier. */
	if (getrandom(&g->prefix_seed, sizeof(g->prefix_seed), GRND_NONBLOCK) !=
	    sizeof(g->prefix_seed))
		g->prefix_seed = 0;
	g->params = params;
	g->listen_fd = fd;
	pthread_mutex_init(&g->lock, NULL);
	return g;
}

/*
 * An answer written straight to a refused connection, which then closes:
 * no thread is spent on it.  The socket is new, so the short reply fits
 * its buffer; one that does not is dropped with the connection.  What the
 * client sent already is read first: closing a socket with unread data
 * resets the connection, and a reset makes the client drop the answer.
 */
static void refuse(int fd, unsigned status, const char *reason,
		   const char *code, const char *retry_after,
		   const char *message)
{
	char body[384], head[256];
	int blen =
		snprintf(body, sizeof(body),
			 "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"}}\n",
			 code, message);
	int hlen = snprintf(head, sizeof(head),
			    "HTTP/1.1 %u %s\r\nContent-Type: application/json"
			    "\r\nConnection: close\r\n%s%s%sContent-Length: "
			    "%d\r\n\r\n",
			    status, reason, retry_after ? "Retry-After: " : "",
			    retry_after ? retry_after : "",
			    retry_after ? "\r\n" : "", blen);
	struct iovec iov[2] = { { head, (size_t)hlen },
				{ body, (size_t)blen } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };

	char unread[4096];

	if (sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_limited(LOG_LEVEL_INFO, "http: refusing a connection: %s",
			    strerror(errno));
	shutdown(fd, SHUT_WR);
	/* Bounded: the accept thread must not be held by a client. */
	for (int i = 0; i < 16; i++)
		if (recv(fd, unread, sizeof(unread), MSG_DONTWAIT) <= 0)
			break;
	close(fd);
}

/* Takes a slot for @fd of @peer (@who), or refuses it (and closes @fd). */
static struct http_conn *admit(struct http_conns *g, int fd, uint64_t peer,
			       const char *who)
{
	struct http_conn *free_slot = NULL;
	uint32_t mine = 0;
	char msg[WHO_MAX + 128];

	pthread_mutex_lock(&g->lock);
	for (uint32_t i = 0; i < g->params->max_connections; i++) {
		struct http_conn *s = &g->slots[i];

		if (!s->used)
			free_slot = free_slot ? free_slot : s;
		else if (s->peer == peer)
			mine++;
	}
	if (free_slot && mine < g->params->max_connections_per_uid) {
		*free_slot = (struct http_conn){
			.used = true,
			.fd = fd,
			.peer = peer,
			.head_deadline_ms =
				now_ms() +
				g->params->header_timeout_s * 1000ull,
			.owner = g,
		};
		snprintf(free_slot->who, sizeof(free_slot->who), "%s", who);
	}
	pthread_mutex_unlock(&g->lock);
	if (!free_slot) {
		snprintf(msg, sizeof(msg),
			 "all %u connections (max_connections) are in use",
			 g->params->max_connections);
		refuse(fd, 503, "Service Unavailable", "unavailable", "1", msg);
		return NULL;
	}
	if (mine >= g->params->max_connections_per_uid) {
		snprintf(msg, sizeof(msg),
			 "%s has %u connections open, the most one peer may "
			 "(max_connections_per_uid)",
			 who, mine);
		log_limited(LOG_LEVEL_INFO, "http: %s", msg);
		refuse(fd, 429, "Too Many Requests", "connections", NULL, msg);
		return NULL;
	}
	return free_slot;
}

/* Shuts the connections past their head deadline; the next deadline, or
 * 0 when none is pending. */
static uint64_t enforce_deadlines(struct http_conns *g)
{
	uint64_t now = now_ms(), next = 0;

	pthread_mutex_lock(&g->lock);
	for (uint32_t i = 0; i < g->params->max_connections; i++) {
		struct http_conn *s = &g->slots[i];

		/* Before NOTIFY_STARTED the socket may be one libmicrohttpd
		 * could not take and closed (out of memory): never touched. */
		if (!s->used || !s->started || !s->head_deadline_ms)
			continue;
		if (s->head_deadline_ms <= now) {
			log_limited(LOG_LEVEL_INFO,
				    "http: closing a connection of %s: no "
				    "whole request head within %u s "
				    "(header_timeout_s)",
				    s->who, g->params->header_timeout_s);
			shutdown(s->fd, SHUT_RDWR);
			s->head_deadline_ms = 0;
		} else if (!next || s->head_deadline_ms < next) {
			next = s->head_deadline_ms;
		}
	}
	pthread_mutex_unlock(&g->lock);
	return next;
}

/* Peer keys: a uid is below 2^32, the rest are tagged above it. */
#define PEER_ADDRESS (1ull << 32)	/* an IPv4 address */
#define PEER_PREFIX6 (2ull << 32)	/* an IPv6 /64, keyed */
#define PEER_LOCAL_UNKNOWN (3ull << 32) /* on this host, uid unknown */

/* @addr (AF_INET or AF_INET6, v4-mapped already unmapped) is loopback. */
static bool is_loopback(const struct sockaddr_storage *addr)
{
	const struct sockaddr_in *in = (const void *)addr;
	const struct sockaddr_in6 *in6 = (const void *)addr;

	if (addr->ss_family == AF_INET)
		return (ntohl(in->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&in6->sin6_addr);
}

/* Whether @addr is loopback or an address of one of this host's
 * interfaces (in this network namespace). */
static bool is_local(const struct sockaddr_storage *addr)
{
	const struct sockaddr_in *in = (const void *)addr;
	const struct sockaddr_in6 *in6 = (const void *)addr;
	struct ifaddrs *list, *i;
	bool local = false;

	if (is_loopback(addr))
		return true;
	if (getifaddrs(&list) < 0)
		return true; /* unknown: not a free slot either */
	for (i = list; i && !local; i = i->ifa_next) {
		const struct sockaddr *a = i->ifa_addr;

		if (!a || a->sa_family != addr->ss_family)
			continue;
		if (a->sa_family == AF_INET)
			local = ((const struct sockaddr_in *)a)
					->sin_addr.s_addr ==
				in->sin_addr.s_addr;
		else
			local = IN6_ARE_ADDR_EQUAL(
				&((const struct sockaddr_in6 *)a)->sin6_addr,
				&in6->sin6_addr);
	}
	freeifaddrs(list);
	return local;
}

/* @addr with a v4-mapped IPv6 address as the IPv4 one it is. */
static void unmapped(const struct sockaddr_storage *addr,
		     struct sockaddr_storage *out)
{
	const struct sockaddr_in6 *in6 = (const void *)addr;
	struct sockaddr_in *in = (void *)out;

	*out = *addr;
	if (addr->ss_family != AF_INET6 ||
	    !IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr))
		return;
	memset(out, 0, sizeof(*out));
	in->sin_family = AF_INET;
	in->sin_port = in6->sin6_port;
	memcpy(&in->sin_addr, &in6->sin6_addr.s6_addr[12], 4);
}

/*
 * Who @fd's peer (@addr) is, for max_connections_per_uid (the top of the
 * file): a uid, a Unix socket's (SO_PEERCRED) or a local TCP client
 * socket's (http_peer_uid.c); all local TCP peers of unknown uid together; or
 * a remote TCP peer's IPv4 address or IPv6 /64.  False when it cannot be
 * read.
 */
static bool peer_of(struct http_conns *g, int fd,
		    const struct sockaddr_storage *addr, uint64_t *peer,
		    char *who, size_t len)
{
	struct sockaddr_storage a;
	const struct sockaddr_in *in = (const void *)&a;
	const struct sockaddr_in6 *in6 = (const void *)&a;
	struct ucred cred;
	socklen_t credlen = sizeof(cred);
	char text[INET6_ADDRSTRLEN];
	uid_t uid;
	int err;

	if (addr->ss_family != AF_INET && addr->ss_family != AF_INET6) {
		if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &credlen) <
		    0) {
			log_warning("http: SO_PEERCRED: %s", strerror(errno));
			return false;
		}
		*peer = cred.uid;
		snprintf(who, len, "uid %u", (unsigned)cred.uid);
		return true;
	}
	unmapped(addr, &a);
	if (a.ss_family == AF_INET)
		inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
	else
		inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
	err = http_peer_uid_tcp(fd, addr, &uid);
	if (!err) {
		*peer = uid;
		snprintf(who, len, "uid %u (TCP %s)", (unsigned)uid, text);
		return true;
	}
	/* -ENOENT: a remote peer, a local one gone already, or one whose
	 * socket the exact lookup misses (bound to a device). */
	if (err != -ENOENT)
		log_limited(LOG_LEVEL_WARNING,
			    "http: cannot read the uid of %s's socket: %s; "
			    "counted by its address, or as a local "
			    "client of unknown uid",
			    text, strerror(-err));
	if (is_local(&a)) {
		*peer = PEER_LOCAL_UNKNOWN;
		snprintf(who, len, "a local client of unknown uid (TCP %s)",
			 text);
	} else if (a.ss_family == AF_INET) {
		*peer = PEER_ADDRESS | ntohl(in->sin_addr.s_addr);
		snprintf(who, len, "address %s", text);
	} else {
		*peer = PEER_PREFIX6 | (XXH3_64bits_withSeed(&in6->sin6_addr, 8,
							     g->prefix_seed) &
					0xffffffffu);
		snprintf(who, len, "address %s (its /64)", text);
	}
	return true;
}

static void accept_one(struct http_conns *g)
{
	struct sockaddr_storage addr;
	socklen_t addrlen = sizeof(addr);
	char who[WHO_MAX];
	uint64_t peer;
	int fd = accept4(g->listen_fd, (struct sockaddr *)&addr, &addrlen,
			 SOCK_CLOEXEC | SOCK_NONBLOCK);

	if (fd < 0) {
		if (errno != EAGAIN && errno != EINTR &&
		    errno != ECONNABORTED) {
			log_limited(LOG_LEVEL_WARNING, "http: accept: %s",
				    strerror(errno));
			/* EMFILE and the like: let connections end first. */
			usleep(100 * 1000);
		}
		return;
	}
	if (!peer_of(g, fd, &addr, &peer, who, sizeof(who))) {
		close(fd);
		return;
	}
	struct http_conn *s = admit(g, fd, peer, who);
	if (!s)
		return;
	/* It closes @fd whatever happens. */
	if (MHD_add_connection(g->mhd, fd, (struct sockaddr *)&addr, addrlen) ==
	    MHD_YES)
		return;
	log_limited(LOG_LEVEL_WARNING, "http: cannot serve a connection: %s",
		    strerror(errno));
	pthread_mutex_lock(&g->lock);
	if (s->used && s->fd == fd && !s->started)
		s->used = false;
	pthread_mutex_unlock(&g->lock);
}

static void wake(struct http_conns *g)
{
	uint64_t one = 1;

	if (write(g->wake_fd, &one, sizeof(one)) != sizeof(one) &&
	    errno != EAGAIN)
		log_error("http: cannot wake the accepting thread: %s",
			  strerror(errno));
}

static void *accept_main(void *arg)
{
	struct http_conns *g = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = g->listen_fd, .events = POLLIN },
				       { .fd = g->wake_fd, .events = POLLIN } };
		uint64_t next = enforce_deadlines(g), now = now_ms();
		int timeout = !next ? -1 : next <= now ? 0 : (int)(next - now);

		if (poll(p, 2, timeout) < 0 && errno != EINTR) {
			log_error("http: poll: %s", strerror(errno));
			return NULL;
		}
		if (p[1].revents) {
			uint64_t n;

			if (atomic_load(&g->stopping))
				return NULL;
			if (read(g->wake_fd, &n, sizeof(n)) < 0 &&
			    errno != EAGAIN)
				log_error("http: eventfd: %s", strerror(errno));
		}
		if (p[0].revents)
			accept_one(g);
	}
}

int http_conns_start(struct http_conns *g, struct MHD_Daemon *mhd)
{
	int err;

	g->mhd = mhd;
	err = pthread_create(&g->thread, NULL, accept_main, g);
	if (err) {
		log_error("http: cannot start the accepting thread: %s",
			  strerror(err));
		return -1;
	}
	g->running = true;
	return 0;
}

void http_conns_stop(struct http_conns *g)
{
	if (!g || !g->running)
		return;
	atomic_store(&g->stopping, true);
	wake(g);
	pthread_join(g->thread, NULL);
	g->running = false;
}

void http_conns_free(struct http_conns *g)
{
	if (!g)
		return;
	http_conns_stop(g);
	close(g->listen_fd);
	close(g->wake_fd);
	pthread_mutex_destroy(&g->lock);
	free(g->slots);
	free(g);
}

void http_conns_notify(void *cls, struct MHD_Connection *conn,
		       void **socket_context,
		       enum MHD_ConnectionNotificationCode toe)
{
	struct http_conns *g = cls;
	struct http_conn *s = *socket_context;

	pthread_mutex_lock(&g->lock);
	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *info = MHD_get_connection_info(
			conn, MHD_CONNECTION_INFO_CONNECTION_FD);

		for (uint32_t i = 0; info && i < g->params->max_connections;
		     i++) {
			s = &g->slots[i];
			if (s->used && !s->started &&
			    s->fd == info->connect_fd) {
				s->started = true;
				*socket_context = s;
				break;
			}
		}
	} else if (s) {
		s->used = false;
		*socket_context = NULL;
	}
	pthread_mutex_unlock(&g->lock);
	/* libmicrohttpd starts a connection added from another thread in
	 * its own, later: the accept thread may be asleep with no deadline
	 * to keep, and this one is now due. */
	if (toe == MHD_CONNECTION_NOTIFY_STARTED)
		wake(g);
}

/* The slot of @conn, or NULL (not ours: never, once started). */
static struct http_conn *slot_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

	return info ? info->socket_context : NULL;
}

void http_conn_head_in(struct MHD_Connection *conn)
{
	struct http_conn *s = slot_of(conn);

	if (!s)
		return;
	pthread_mutex_lock(&s->owner->lock);
	s->head_deadline_ms = 0;
	pthread_mutex_unlock(&s->owner->lock);
}

void http_conn_replied(struct MHD_Connection *conn)
{
	struct http_conn *s = slot_of(conn);

	if (!s)
		return;
	/* Paced by its client again: the request that ended may have lifted
	 * its silence limit (MHD_CONNECTION_OPTION_TIMEOUT) while it waited
	 * on something slower than its client. */
	MHD_set_connection_option(conn, MHD_CONNECTION_OPTION_TIMEOUT,
				  (unsigned)s->owner->params->idle_timeout_s);
	pthread_mutex_lock(&s->owner->lock);
	s->head_deadline_ms =
		now_ms() + s->owner->params->header_timeout_s * 1000ull;
	pthread_mutex_unlock(&s->owner->lock);
	/* The accept thread may be asleep until a later deadline, or with
	 * none. */
	wake(s->owner);
}
