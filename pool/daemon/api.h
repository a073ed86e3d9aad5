/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.h - thawd's HTTP/1.1 + JSON API (pool/API.md) on a Unix socket.
 *
 * libmicrohttpd parses HTTP and runs one thread per connection, so a slow
 * exec or a slow client occupies only its own thread (connections are
 * capped per uid, and request heads have a deadline: api_conns.c); jansson
 * parses and prints JSON.  Each request is served from the daemon's state
 * (daemon.h): handouts from the pools, exec and files through a fresh
 * connection to the sandbox's agent, which ends (killing what it started) when
 * the HTTP client goes away.  The server and its routes are split by concern
 * across pool/daemon/api*.c; api_internal.h lists which file serves what.
 */
#ifndef THAW_POOL_DAEMON_API_H
#define THAW_POOL_DAEMON_API_H

struct daemon;
struct api_server;

/* Serves on the bound, listening socket @fd (taken over, closed on
 * failure too).  NULL on failure, after a message. */
struct api_server *api_start(struct daemon *d, int fd);

/* Stops accepting, waits for every connection's thread. */
void api_stop(struct api_server *server);

#endif
