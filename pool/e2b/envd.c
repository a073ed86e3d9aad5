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
 * sandbox that does not exist is answered 502 to credentials that would
 * open it (the daemon's token, the token it had), as E2B's proxy answers
 * it, which the SDK reads as "the sandbox is not running" (its health
 * probe, and Connect's unavailable for a stream); to any other
 * credentials, or none, 401 as a sandbox that exists, after the same
 * work: an id that leaked or was guessed tells nothing without its
 * sandbox's token.
 *
 * Every sandbox made through the E2B API has an access token of its own,
 * handed out by its create (envdAccessToken) and asked for in
 * X-Access-Token by every envd request to it: one sandbox's token opens no
 * other.  It is derived from the sandbox's id under a key the listener
 * draws at its start (e2b_sandbox_token()), which is how a request with
 * the token of a sandbox since killed is told apart, as E2B's proxy does,
 * with 502 (the SDK's isRunning() is then false), with nothing kept of
 * the dead.  The daemon's token opens every sandbox, those made
 * through thaw's own API included (they have no token until a connect
 * gives them one).  A file URL the SDK signed (files.downloadUrl and
 * uploadUrl of a sandbox with a token: /files?...&signature=v1_...) is
 * let in without the header when its signature is the sandbox's token's
 * for that path, operation and user, and has not expired.  Such a URL
 * made with E2B_SANDBOX_URL set is that one address, and a plain fetch of
 * it names no sandbox: the sandbox is then the one whose token made the
 * signature, found by trying every E2B sandbox's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <nettle/hmac.h>
#include <nettle/sha2.h>

#include "common/base64.h"
#include "pool/e2b/e2b_internal.h"

#define ID_CHARS                                                         \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" \
	"_-"
/* A user name: POSIX's portable characters, as useradd takes them. */
#define USER_CHARS                                                       \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" \
	"_.-"
#define USER_MAX 32

/* @s's SHA-256 into @digest. */
static void digest_of(const char *s, uint8_t digest[SHA256_DIGEST_SIZE])
{
	struct sha256_ctx ctx;

	sha256_init(&ctx);
	sha256_update(&ctx, strlen(s), (const uint8_t *)s);
	sha256_digest(&ctx, SHA256_DIGEST_SIZE, digest);
}

bool e2b_secret_equal(const char *a, const char *b)
{
	uint8_t da[SHA256_DIGEST_SIZE], db[SHA256_DIGEST_SIZE];
	uint8_t diff = 0;

	/* Digests of equal length, compared whole: the time taken says
	 * nothing of either's length or of where they differ. */
	digest_of(a, da);
	digest_of(b, db);
	for (size_t i = 0; i < sizeof(da); i++)
		diff |= da[i] ^ db[i];
	return diff == 0;
}

void e2b_sandbox_token(const struct e2b_server *s, const char *id,
		       char out[E2B_TOKEN_LEN + 1])
{
	struct hmac_sha256_ctx ctx;
	uint8_t mac[SHA256_DIGEST_SIZE];

	_Static_assert(2 * sizeof(mac) == E2B_TOKEN_LEN, "a token's length");
	hmac_sha256_set_key(&ctx, sizeof(s->token_key), s->token_key);
	hmac_sha256_update(&ctx, strlen(id), (const uint8_t *)id);
	hmac_sha256_digest(&ctx, sizeof(mac), mac);
	for (size_t i = 0; i < sizeof(mac); i++)
		snprintf(out + 2 * i, 3, "%02x", mac[i]);
	explicit_bzero(mac, sizeof(mac));
	explicit_bzero(&ctx, sizeof(ctx));
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

void e2b_sandbox_free(void *ext)
{
	struct e2b_sandbox *e = ext;

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

/* A file URL's signature, read once, to be checked against tokens. */
struct url_signature {
	struct sha256_ctx prefix;	    /* of "PATH:OPERATION:USER:" */
	const char *expiration;		    /* NULL: none */
	uint8_t digest[SHA256_DIGEST_SIZE]; /* what it says */
};

/* @signature read into @sig; false when it cannot be one, or expired. */
static bool signature_read(struct url_signature *sig, const char *signature,
			   const char *path, const char *operation,
			   const char *user, const char *expiration,
			   int64_t now_s)
{
	/* The SDK strips the padding: 43 characters of base64, to which
	 * base64_decode() wants its one '=' back. */
	enum { UNPADDED = (SHA256_DIGEST_SIZE + 2) / 3 * 4 - 1 };
	char padded[UNPADDED + 2];
	size_t n;

	if (expiration &&
	    (strspn(expiration, "0123456789") != strlen(expiration) ||
	     !*expiration || strlen(expiration) > 18 ||
	     strtoll(expiration, NULL, 10) < now_s))
		return false;
	if (strncmp(signature, "v1_", 3) || strlen(signature + 3) != UNPADDED)
		return false;
	snprintf(padded, sizeof(padded), "%s=", signature + 3);
	uint8_t *digest = base64_decode(padded, UNPADDED + 1, &n);
	/* One text per digest: the last character's two spare bits are 0,
	 * as the SDK's encoder leaves them. */
	char *canonical = digest ? base64_encode(digest, n) : NULL;
	bool read = canonical && n == sizeof(sig->digest) &&
		    !strcmp(canonical, padded);
	if (read)
		memcpy(sig->digest, digest, n);
	free(canonical);
	free(digest);
	sig->expiration = expiration;
	sha256_init(&sig->prefix);
	sha256_update(&sig->prefix, strlen(path), (const uint8_t *)path);
	sha256_update(&sig->prefix, 1, (const uint8_t *)":");
	sha256_update(&sig->prefix, strlen(operation),
		      (const uint8_t *)operation);
	sha256_update(&sig->prefix, 1, (const uint8_t *)":");
	sha256_update(&sig->prefix, strlen(user), (const uint8_t *)user);
	sha256_update(&sig->prefix, 1, (const uint8_t *)":");
	return read;
}

/* Whether @token made @sig, in the same time whatever the answer. */
static bool signature_by(const struct url_signature *sig, const char *token)
{
	struct sha256_ctx ctx = sig->prefix;
	uint8_t digest[SHA256_DIGEST_SIZE];
	uint8_t diff = 0;

	sha256_update(&ctx, strlen(token), (const uint8_t *)token);
	if (sig->expiration) {
		sha256_update(&ctx, 1, (const uint8_t *)":");
		sha256_update(&ctx, strlen(sig->expiration),
			      (const uint8_t *)sig->expiration);
	}
	sha256_digest(&ctx, sizeof(digest), digest);
	for (size_t i = 0; i < sizeof(digest); i++)
		diff |= digest[i] ^ sig->digest[i];
	return diff == 0;
}

bool e2b_signature_valid(const char *signature, const char *path,
			 const char *operation, const char *user,
			 const char *token, const char *expiration,
			 int64_t now_s)
{
	struct url_signature sig;

	return signature_read(&sig, signature, path, operation, user,
			      expiration, now_s) &&
	       signature_by(&sig, token);
}

/* The signature of @conn's /files request of @method, read into @sig;
 * false when it has none, or one that cannot be valid. */
static bool url_signature_of(struct MHD_Connection *conn,
			     const struct e2b_request *r, const char *method,
			     struct url_signature *sig)
{
	const char *signature = MHD_lookup_connection_value(
		conn, MHD_GET_ARGUMENT_KIND, "signature");
	const char *path = MHD_lookup_connection_value(
		conn, MHD_GET_ARGUMENT_KIND, "path");
	const char *user = MHD_lookup_connection_value(
		conn, MHD_GET_ARGUMENT_KIND, "username");
	const char *expiration = MHD_lookup_connection_value(
		conn, MHD_GET_ARGUMENT_KIND, "signature_expiration");

	if (!signature || strcmp(r->route->path, "/files"))
		return false;
	return signature_read(sig, signature, path ? path : "",
			      strcmp(method, "GET") ? "write" : "read",
			      user ? user : "", expiration,
			      (int64_t)time(NULL));
}

/*
 * The live sandbox whose access token signed @conn's /files URL, held;
 * NULL when none did.  A plain fetch of a URL the SDK signed with
 * E2B_SANDBOX_URL set (downloadUrl, uploadUrl) names no sandbox: its
 * signature does.  Every E2B sandbox's token is tried, the same work for
 * each and no stop at a match, so the time taken tells nothing of which
 * one signed it, or whether one did.  That work is one HMAC-SHA256 (the
 * token, from the id) and one SHA-256 of about 100 bytes (the signature)
 * per E2B sandbox, max_sandboxes at most, for anyone who sends such a URL:
 * it is done outside the daemon's lock, which only the copy of the ids
 * takes, so that creates, leases and every other request go on meanwhile.
 */
static struct sandbox *sandbox_of_signature(struct MHD_Connection *conn,
					    const struct e2b_request *r,
					    const char *method)
{
	struct url_signature sig;
	sandbox_id *ids = NULL;
	size_t found = SIZE_MAX;

	if (!url_signature_of(conn, r, method, &sig))
		return NULL;
	size_t n = sandboxes_with_ext(r->d, r->server->slot, &ids);
	for (size_t i = 0; i < n; i++) {
		char token[E2B_TOKEN_LEN + 1];

		/* A sandbox's token is derived from its id (e2b_sandbox_token),
		 * as its create made it. */
		e2b_sandbox_token(r->server, ids[i], token);
		bool signer = signature_by(&sig, token);
		found = signer && found == SIZE_MAX ? i : found;
		explicit_bzero(token, sizeof(token));
	}
	/* Gone since, it is not found; a sandbox never loses its E2B record,
	 * and its id is no other's. */
	struct sandbox *c =
		found != SIZE_MAX ? sandbox_get(r->d, ids[found]) : NULL;
	free(ids);
	return c;
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

/* What a request's credentials make of the sandbox it names. */
enum verdict {
	OPENS,	 /* it exists, and they open it */
	GONE,	 /* they would open it, and it does not exist */
	REFUSED, /* they open nothing, or there are none */
};

/*
 * The verdict on @conn's credentials for sandbox @id: its X-Access-Token,
 * or its signature of a /files URL; the daemon's token opens every
 * sandbox.  *@held is then the sandbox, held, when they open it, else
 * NULL.  The token @id would have is derived whether it exists or not,
 * and is what an unknown sandbox's (and a sandbox's without an E2B record)
 * is checked against: the same work every time, so that without
 * credentials neither the answer nor its time tells whether an id is a
 * sandbox's.  That hashing of what the client sent is done outside the
 * daemon's lock, which is held only to read whether the sandbox has an
 * E2B record (its token is the one derived: give_record() made it so); and an
 * X-Access-Token longer than any that could open something (a sandbox's,
 * the daemon's: token is at most 255 bytes) is refused before any work,
 * whatever the id.
 */
static enum verdict credentials(struct MHD_Connection *conn,
				const struct e2b_request *r, const char *id,
				const char *method, struct sandbox **held)
{
	const char *token = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
							"X-Access-Token");
	const char *daemon_token = r->d->cfg.token; /* set once, at start */
	/* The longest a daemon's token may be, not this one's: the time of a
	 * refusal tells nothing of it. */
	size_t longest = sizeof(r->d->cfg.token) - 1;
	char secret[E2B_TOKEN_LEN + 1];
	struct url_signature sig;
	bool own, daemons = false;

	_Static_assert(sizeof(r->d->cfg.token) > E2B_TOKEN_LEN,
		       "a sandbox's token fits where the daemon's does");
	*held = NULL;
	if (token && strnlen(token, longest + 1) > longest)
		return REFUSED;
	struct sandbox *c = sandbox_get(r->d, id);
	e2b_sandbox_token(r->server, id, secret);
	bool tokened = c && sandbox_ext(r->d, c, r->server->slot);
	if (token) {
		own = e2b_secret_equal(token, secret);
		daemons = e2b_secret_equal(token, daemon_token);
	} else {
		own = url_signature_of(conn, r, method, &sig) &&
		      signature_by(&sig, secret);
	}
	explicit_bzero(secret, sizeof(secret));
	if (c && ((tokened && own) || daemons)) {
		*held = c;
		return OPENS;
	}
	if (c)
		sandbox_put(r->d, c);
	return !c && (own || daemons) ? GONE : REFUSED;
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
			return e2b_reply_error(
				conn, r, 400,
				"E2b-Sandbox-Id is not a sandbox id");
		memcpy(id, header, n + 1);
		if (port_header)
			port = (unsigned)strtoul(port_header, NULL, 10);
	} else if (!host || !e2b_parse_host(host, &port, id)) {
		if (MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND,
						"signature") &&
		    !strcmp(r->route->path, "/files")) {
			r->sandbox = sandbox_of_signature(conn, r, method);
			return r->sandbox ? MHD_YES
					  : e2b_reply_error(
						    conn, r, 401,
						    "the URL's signature is "
						    "no running sandbox's, "
						    "or it expired");
		}
		return e2b_reply_error(
			conn, r, 400,
			"no sandbox named: an envd request needs the header "
			"E2b-Sandbox-Id or a Host of <port>-<id>.<domain>");
	}
	if (port != E2B_ENVD_PORT)
		return no_sandbox(conn, r, id,
				  "only envd's port (49983) is served here");
	enum verdict v = credentials(conn, r, id, method, &r->sandbox);
	if (v == OPENS)
		return MHD_YES;
	/* Only credentials for the sandbox learn that it is gone. */
	if (v == GONE)
		return no_sandbox(conn, r, id, "The sandbox was not found");
	return e2b_reply_error(conn, r, 401,
			       "%s X-Access-Token for sandbox %s: give its "
			       "envdAccessToken (or the daemon's token)",
			       MHD_lookup_connection_value(
				       conn, MHD_HEADER_KIND, "X-Access-Token")
				       ? "wrong"
				       : "no",
			       id);
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

	if (sandbox_busy(r->sandbox, err, sizeof(err)))
		return e2b_reply_error(conn, r, 502, "%s", err);
	return e2b_reply_empty(conn, r, 204);
}
