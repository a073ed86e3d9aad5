// SPDX-License-Identifier: Apache-2.0
/*
 * http_peer_uid.c - which uid holds the client end of a local TCP connection
 * (http_peer_uid.h), so that local clients of a TCP listener are told apart
 * as SO_PEERCRED tells a Unix socket's apart (http_conns.c).
 *
 * When a client connects over loopback, or to one of this host's own
 * addresses, its socket lives in this network namespace, and the kernel
 * knows who opened it.  NETLINK_SOCK_DIAG answers an exact lookup
 * (SOCK_DIAG_BY_FAMILY, inet_diag_req_v2 without a dump flag) of the
 * accepted connection's 4-tuple seen from the client's side: source the
 * peer's address and port, destination ours.  INET_DIAG_NOCOOKIE lets the
 * kernel find the socket by its addresses alone; its answer's idiag_uid is
 * the uid that created the socket.  Raw netlink: one message does not
 * need a library.
 *
 * The kernel's lookup falls back to listening sockets, and what is left
 * of a closed socket (orphaned, or a FIN_WAIT2/TIME_WAIT minisocket, which
 * answers uid 0) has no inode, so an answer counts only if it is the very
 * connection asked for (its whole 4-tuple) and still has an inode (an open
 * file: its owner's uid is the client's).  Otherwise a remote client
 * sending from a local listener's port would borrow that listener's uid,
 * and one that closed at once would pass for root.
 * A dual-stack listener sees IPv4 peers as v4-mapped IPv6 addresses, and
 * an IPv6 client socket can hold an IPv4 connection: both sides are
 * compared as IPv4 then.
 */
#include <errno.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

#include "pool/http/http_peer_uid.h"

/* One end of a TCP connection as inet_diag_sockid holds it: network byte
 * order, an IPv4 address in the first word. */
struct endpoint {
	uint8_t family;
	__be16 port;
	__be32 addr[4];
};

/* @e with a v4-mapped IPv6 address as the IPv4 one it is. */
static void unmap(struct endpoint *e)
{
	if (e->family != AF_INET6 || e->addr[0] || e->addr[1] ||
	    e->addr[2] != htonl(0xffff))
		return;
	*e = (struct endpoint){ .family = AF_INET,
				.port = e->port,
				.addr = { e->addr[3] } };
}

static int endpoint_of(const struct sockaddr_storage *ss, struct endpoint *e)
{
	const struct sockaddr_in *in = (const void *)ss;
	const struct sockaddr_in6 *in6 = (const void *)ss;

	*e = (struct endpoint){ .family = ss->ss_family };
	if (ss->ss_family == AF_INET) {
		e->port = in->sin_port;
		e->addr[0] = in->sin_addr.s_addr;
	} else if (ss->ss_family == AF_INET6) {
		e->port = in6->sin6_port;
		memcpy(e->addr, &in6->sin6_addr, sizeof(e->addr));
	} else {
		return -EAFNOSUPPORT;
	}
	unmap(e);
	return 0;
}

static bool same(const struct endpoint *a, const struct endpoint *b)
{
	return a->family == b->family && a->port == b->port &&
	       !memcmp(a->addr, b->addr, sizeof(a->addr));
}

/* Whether @m describes the socket whose ends are @client and @server. */
static bool is_connection(const struct inet_diag_msg *m,
			  const struct endpoint *client,
			  const struct endpoint *server)
{
	struct endpoint src = { .family = m->idiag_family,
				.port = m->id.idiag_sport },
			dst = { .family = m->idiag_family,
				.port = m->id.idiag_dport };

	memcpy(src.addr, m->id.idiag_src, sizeof(src.addr));
	memcpy(dst.addr, m->id.idiag_dst, sizeof(dst.addr));
	unmap(&src);
	unmap(&dst);
	return same(&src, client) && same(&dst, server);
}

/* Asks the kernel on @nl for the socket of ends @client and @server. */
static int ask(int nl, const struct endpoint *client,
	       const struct endpoint *server, uid_t *uid)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK }, from;
	socklen_t fromlen = sizeof(from);
	struct {
		struct nlmsghdr h;
		struct inet_diag_req_v2 r;
	} q = {
		.h = { .nlmsg_len = sizeof(q),
		       .nlmsg_type = SOCK_DIAG_BY_FAMILY,
		       .nlmsg_flags = NLM_F_REQUEST,
		       .nlmsg_seq = 1 },
		.r = { .sdiag_family = client->family,
		       .sdiag_protocol = IPPROTO_TCP,
		       .id = { .idiag_sport = client->port,
			       .idiag_dport = server->port,
			       .idiag_cookie = { INET_DIAG_NOCOOKIE,
						 INET_DIAG_NOCOOKIE } } },
	};
	union {
		struct nlmsghdr h;
		char bytes[4096];
	} a;

	memcpy(q.r.id.idiag_src, client->addr, sizeof(client->addr));
	memcpy(q.r.id.idiag_dst, server->addr, sizeof(server->addr));
	if (sendto(nl, &q, sizeof(q), 0, (struct sockaddr *)&kernel,
		   sizeof(kernel)) != sizeof(q))
		return -errno;
	/* The kernel answers an exact lookup before sendto() returns. */
	ssize_t n = recvfrom(nl, &a, sizeof(a), MSG_DONTWAIT,
			     (struct sockaddr *)&from, &fromlen);
	if (n < 0)
		return -errno;
	if (from.nl_pid || !NLMSG_OK(&a.h, (size_t)n) || a.h.nlmsg_seq != 1)
		return -EPROTO;
	if (a.h.nlmsg_type == NLMSG_ERROR) {
		const struct nlmsgerr *e = NLMSG_DATA(&a.h);

		if (a.h.nlmsg_len < NLMSG_LENGTH(sizeof(*e)))
			return -EPROTO;
		return e->error ? e->error : -EPROTO;
	}
	const struct inet_diag_msg *m = NLMSG_DATA(&a.h);
	if (a.h.nlmsg_type != SOCK_DIAG_BY_FAMILY ||
	    a.h.nlmsg_len < NLMSG_LENGTH(sizeof(*m)))
		return -EPROTO;
	if (!is_connection(m, client, server) || !m->idiag_inode)
		return -ENOENT;
	*uid = m->idiag_uid;
	return 0;
}

int http_peer_uid_tcp(int fd, const struct sockaddr_storage *peer, uid_t *uid)
{
	struct sockaddr_storage local;
	socklen_t len = sizeof(local);
	struct endpoint client, server;
	int err;

	if (getsockname(fd, (struct sockaddr *)&local, &len) < 0)
		return -errno;
	err = endpoint_of(peer, &client);
	if (!err)
		err = endpoint_of(&local, &server);
	if (err)
		return err;
	if (client.family != server.family)
		return -EAFNOSUPPORT;
	int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC,
			NETLINK_SOCK_DIAG);
	if (nl < 0)
		return -errno;
	err = ask(nl, &client, &server, uid);
	close(nl);
	return err;
}
