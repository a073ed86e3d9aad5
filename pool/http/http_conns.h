/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http_conns.h - the engine's connection accounting (http_conns.c), as
 * http_server.c uses it: a server's connections are accepted here, not by
 * libmicrohttpd, so that each peer's share and each request head's
 * deadline are kept before any thread is spent on a connection.
 */
#ifndef THAW_POOL_HTTP_HTTP_CONNS_H
#define THAW_POOL_HTTP_HTTP_CONNS_H

#include <microhttpd.h>

#include "pool/http/http_server.h"

struct http_conns;

/* The connections of @params' limits (kept: they outlive it), accepted
 * from the listening socket @fd (taken over: http_conns_free() closes
 * it).  NULL when out of memory. */
struct http_conns *http_conns_new(const struct http_params *params, int fd);
/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION, with the http_conns as
 * its closure: ties connections to their slots, frees them. */
void http_conns_notify(void *cls, struct MHD_Connection *conn,
		       void **socket_context,
		       enum MHD_ConnectionNotificationCode toe);
/* Starts accepting for @mhd (MHD_USE_NO_LISTEN_SOCKET).  0 or -1. */
int http_conns_start(struct http_conns *g, struct MHD_Daemon *mhd);
/* Stops accepting; the connections already in stay. */
void http_conns_stop(struct http_conns *g);
/* After MHD_stop_daemon(): no connection is left. */
void http_conns_free(struct http_conns *g);
/* A request's head is in (its first handler call): no deadline while it
 * is served. */
void http_conn_head_in(struct MHD_Connection *conn);
/* A request ended: the next head is due within header_timeout_s, and
 * the connection may be silent idle_timeout_s again. */
void http_conn_replied(struct MHD_Connection *conn);

#endif
