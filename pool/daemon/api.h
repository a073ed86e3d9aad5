/* SPDX-License-Identifier: Apache-2.0 */
/*
 * api.h - thawd's HTTP/1.1 + JSON API (pool/API.md) on a Unix socket.
 *
 * The HTTP engine (pool/http) runs libmicrohttpd with one thread per
 * connection, so a slow exec or a slow client occupies only its own thread
 * (connections are capped per uid, and request heads have a deadline:
 * http_conns.c); jansson parses and prints JSON.  Each request is served
 * from the daemon's state (daemon.h): handouts from the pools, exec and
 * files through a fresh connection to the sandbox's agent, which ends
 * (killing what it started) when the HTTP client goes away.  The routes
 * are split by concern across pool/daemon/api*.c; api_internal.h lists
 * which file serves what.
 */
#ifndef THAW_POOL_DAEMON_API_H
#define THAW_POOL_DAEMON_API_H

#include "pool/http/http_server.h"

struct daemon;

/* Serves on the bound, listening socket @fd (taken over, closed on
 * failure too); http_stop() stops it.  NULL on failure, after a
 * message. */
struct http_server *api_start(struct daemon *d, int fd);

#endif
