// SPDX-License-Identifier: Apache-2.0
/*
 * http_peer_uid.h - the uid owning the client socket of an accepted TCP
 * connection, when that socket is on this host (http_peer_uid.c says how).
 */
#ifndef THAW_POOL_HTTP_HTTP_PEER_UID_H
#define THAW_POOL_HTTP_HTTP_PEER_UID_H

#include <sys/socket.h>
#include <sys/types.h>

/*
 * The uid owning the socket at the other end of @fd, a TCP connection this
 * process accepted from @peer (accept()'s address), into *@uid: 0, or
 * -ENOENT when no open socket of this network namespace is that end (a
 * remote peer, or one that closed its socket already), another negative
 * errno when the kernel cannot be asked.
 */
int http_peer_uid_tcp(int fd, const struct sockaddr_storage *peer, uid_t *uid);

#endif
