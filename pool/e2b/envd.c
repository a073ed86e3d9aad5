// SPDX-License-Identifier: Apache-2.0
/*
 * envd.c - what every envd request shares: the sandbox it is for, its
 * access token, its user; and envd's /health.
 *
 * E2B's cloud puts envd behind a proxy that finds the sandbox from the
 * Host header, <port>-<sandbox id>.<domain>; an SDK with E2B_SANDBOX_URL
 * set sends every envd request to that one URL with the headers
 * E2b-Sandbox-Id and E2b-Sandbox-Port instead.  Both are read here, the
 * header first.  Only envd's port (49983) is served: a sandbox's own
 * servers are reached through its network, not through this listener.  A
 * sandbox that does not exist is answered 502, as E2B's proxy answers it,
 * which the SDK reads as "the sandbox is not running" (its health probe,
 * and Connect's unavailable for a stream).
 *
 * Every sandbox made through the E2B API has an access token of its own,
 * 32 random bytes, handed out by its create (envdAccessToken) and asked
 * for in X-Access-Token by every envd request to it: one sandbox's token
 * opens no other.  The daemon's token opens every sandbox, those made
 * through thaw's own API included (they have no token until a connect
 * gives them one).  A file URL the SDK signed (files.downloadUrl and
 * uploadUrl of a sandbox with a token: /files?...&signature=v1_...) is
 * let in without the header when its signature is the sandbox's token's
 * for that path, operation and user, and has not expired.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <nettle/sha2.h>

#include "base64.h"
#include "e2b_internal.h"

#define ID_CHARS                                                         \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" \
	"_-"
/* A user name: POSIX's portable characters, as useradd takes them. */
#define USER_CHARS                                                       \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" \
	"_.-"
#define USER_MAX 32

bool e2b_secret_equal(const char *a, const char *b)
{
	size_t n = strlen(b);
	unsigned char diff = 0;

	if (strlen(a) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(a[i] ^ b[i]);
	return diff == 0;
}

int e2b_new_token(char out[E2B_TOKEN_LEN + 1])
{
	unsigned char raw[E2B_TOKEN_LEN / 2];

	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -1;
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(out + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

void e2b_sandbox_free(struct e2b_sandbox *e)
{
	if (!e)
		return;
	json_decref(e->metadata);
	explicit_bzero(e->access_token, sizeof(e->access_token));
	free(e);
}

bool e2b_parse_host(const char *host, unsigned *port,
		    char id[E2B_PATH_ID_MAX + 1])
{
	size_t digits = strspn(host, "0123456789");

	if (!digits || digits > 5 || host[digits] != '-')
		return false;
	const char *start = host + digits + 1;
	size_t n = strspn(start, ID_CHARS);
	/* The id ends at the first dot; a domain must follow. */
	if (!n || n > E2B_PATH_ID_MAX || start[n] != '.' || !start[n + 1])
		return false;
	*port = (unsigned)strtoul(host, NULL, 10);
	memcpy(id, start, n);
	id[n] = '\0';
	return true;
}

bool e2b_signature_valid(const char *signature, const char *path,
			 const char *operation, const char *user,
			 const char *token, const char *expiration,
			 int64_t now_s)
{
	uint8_t digest[SHA256_DIGEST_SIZE];
	struct sha256_ctx ctx;
	char *b64;

	if (expiration &&
	    (strspn(expiration, "0123456789") != strlen(expiration) ||
	     !*expiration || strlen(expiration) > 18 ||
	     strtoll(expiration, NULL, 10) < now_s))
		return false;
	if (strncmp(signature, "v1_", 3))
		return false;
	sha256_init(&ctx);
	sha256_update(&ctx, strlen(path), (const uint8_t *)path);
	sha256_update(&ctx, 1, (const uint8_t *)":");
	sha256_update(&ctx, strlen(operation), (const uint8_t *)operation);
	sha256_update(&ctx, 1, (const uint8_t *)":");
	sha256_update(&ctx, strlen(user), (const uint8_t *)user);
	sha256_update(&ctx, 1, (const uint8_t *)":");
	sha256_update(&ctx, strlen(token), (const uint8_t *)token);
	if (expiration) {
		sha256_update(&ctx, 1, (const uint8_t *)":");
		sha256_update(&ctx, strlen(expiration),
			      (const uint8_t *)expiration);
	}
	sha256_digest(&ctx, sizeof(digest), digest);
	b64 = base64_encode(digest, sizeof(digest));
	if (!b64)
		return false;
	/* The SDK strips the padding. */
	b64[strcspn(b64, "=")] = '\0';
	bool valid = e2b_secret_equal(signature + 3, b64);
	free(b64);
	return valid;
}

/* Whether @conn's /files request carries @c's signature for it; under the
 * daemon's lock (the token). */
static bool signed_file_url(struct MHD_Connection *conn,
			    const struct e2b_request *r,
			    const struct sandbox *c, const char *method)
{
	const char *signature = MHD_lookup_connection_value(
		conn, MHD_GET_ARGUMENT_KIND, "signature");
	const char *path = MHD_lookup_connection_value(
		conn, MHD_GET_ARGUMENT_KIND, "path");
	const char *user = MHD_lookup_connection_value(
		conn, MHD_GET_ARGUMENT_KIND, "username");
	const char *expiration = MHD_lookup_connection_value(
		conn, MHD_GET_ARGUMENT_KIND, "signature_expiration");

	if (!signature || !c->e2b || strcmp(r->route->path, "/files"))
		return false;
	return e2b_signature_valid(signature, path ? path : "",
				   strcmp(method, "GET") ? "write" : "read",
				   user ? user : "", c->e2b->access_token,
				   expiration, (int64_t)time(NULL));
}

/* An envd request's error: Connect's on an RPC (in a stream's end
 * message for a streaming call), else E2B's. */
__attribute__((format(printf, 4, 5))) static enum MHD_Result
envd_error(struct MHD_Connection *conn, struct e2b_request *r, unsigned status,
	   const char *fmt, ...)
{
	char message[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	if (r->route->kind != E2B_RPC)
		return e2b_reply_error(conn, r, status, "%s", message);
	/* A stream's error goes in its end message, where the client reads
	 * it (connect-web shows a streaming call's HTTP error as "HTTP 401"
	 * alone). */
	const char *type = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
	if (type && !strncmp(type, "application/connect+", 20))
		return e2b_reply_stream_error(
			conn, r, e2b_code_of_status(status), "%s", message);
	return e2b_reply_connect_error(conn, r, e2b_code_of_status(status),
				       "%s", message);
}

/* E2B's proxy's answer for a sandbox it cannot reach. */
static enum MHD_Result no_sandbox(struct MHD_Connection *conn,
				  struct e2b_request *r, const char *id,
				  const char *why)
{
	return e2b_reply_json(conn, r, 502,
			      json_pack("{s:s,s:s,s:i}", "sandboxId", id,
					"message", why, "code", 502));
}

enum MHD_Result e2b_envd_begin(struct MHD_Connection *conn,
			       struct e2b_request *r, const char *method)
{
	const char *header = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							 "E2b-Sandbox-Id");
	const char *port_header = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, "E2b-Sandbox-Port");
	const char *host = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
						       MHD_HTTP_HEADER_HOST);
	char id[E2B_PATH_ID_MAX + 1];
	unsigned port = E2B_ENVD_PORT;

	if (header) {
		size_t n = strlen(header);

		if (!n || n > E2B_PATH_ID_MAX || strspn(header, ID_CHARS) != n)
			return envd_error(conn, r, 400,
					  "E2b-Sandbox-Id is not a sandbox id");
		memcpy(id, header, n + 1);
		if (port_header)
			port = (unsigned)strtoul(port_header, NULL, 10);
	} else if (!host || !e2b_parse_host(host, &port, id)) {
		return envd_error(
			conn, r, 400,
			"no sandbox named: an envd request needs the header "
			"E2b-Sandbox-Id or a Host of <port>-<id>.<domain>");
	}
	if (port != E2B_ENVD_PORT)
		return no_sandbox(conn, r, id,
				  "only envd's port (49983) is served here");
	struct sandbox *c = sandbox_get(r->d, id);
	if (!c)
		return no_sandbox(conn, r, id, "The sandbox was not found");
	const char *token = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							"X-Access-Token");
	pthread_mutex_lock(&r->d->lock);
	bool valid = token ? (c->e2b &&
			      e2b_secret_equal(token, c->e2b->access_token)) ||
				     e2b_secret_equal(token, r->d->cfg.token)
			   : signed_file_url(conn, r, c, method);
	pthread_mutex_unlock(&r->d->lock);
	if (!valid) {
		sandbox_put(r->d, c);
		return envd_error(conn, r, 401,
				  "%s X-Access-Token for sandbox %s: give its "
				  "envdAccessToken (or the daemon's token)",
				  token ? "wrong" : "no", id);
	}
	r->sandbox = c;
	return MHD_YES;
}

bool e2b_request_user(struct MHD_Connection *conn, char *user, size_t len,
		      char *err, size_t errlen)
{
	const char *auth = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	size_t n;

	if (!auth || strncmp(auth, "Basic ", 6)) {
		snprintf(user, len, "%s", E2B_DEFAULT_USER);
		return true;
	}
	auth += 6;
	/* Decoded bytes, not a string: every length is checked. */
	char *plain = base64_decode(auth, strnlen(auth, 4 * USER_MAX), &n);
	const char *colon = plain ? memchr(plain, ':', n) : NULL;
	size_t name = colon ? (size_t)(colon - plain) : 0;
	bool ok = name && name <= USER_MAX && name < len;
	for (size_t i = 0; ok && i < name; i++)
		ok = plain[i] && strchr(USER_CHARS, plain[i]);
	if (ok) {
		memcpy(user, plain, name);
		user[name] = '\0';
	} else {
		snprintf(err, errlen,
			 "Authorization: Basic must carry \"USER:\" in "
			 "base64, USER being 1 to %d of [A-Za-z0-9_.-]",
			 USER_MAX);
	}
	free(plain);
	return ok;
}

/* envd's GET /health: 204 while the sandbox runs. */
enum MHD_Result e2b_health(struct MHD_Connection *conn, struct e2b_request *r)
{
	char err[512];

	if (api_sandbox_busy(r->sandbox, err, sizeof(err)))
		return e2b_reply_error(conn, r, 502, "%s", err);
	return e2b_reply_empty(conn, r, 204);
}
