/* SPDX-License-Identifier: Apache-2.0 */
/*
 * client_internal.h - what thaw_client.c lends typed_calls.c: not part of the
 * library's API.
 */
#ifndef THAW_POOL_CLIENT_INTERNAL_H
#define THAW_POOL_CLIENT_INTERNAL_H

#include <jansson.h>

#include "pool/client/thaw_client.h"

/* Formats @err and returns @code, so that failing is one statement. */
__attribute__((format(printf, 4, 5))) int
client_fail(int code, char *err, size_t errlen, const char *fmt, ...);

/* @len bytes of @s (all when 0) percent-encoded, malloc'd; NULL: no memory. */
char *client_escape(struct thaw_client *c, const char *s, size_t len);

#endif
