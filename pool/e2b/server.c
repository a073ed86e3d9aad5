// SPDX-License-Identifier: Apache-2.0
/*
 * server.c - the E2B listener (e2b.h): a TCP socket on e2b_listen, served
 * by the HTTP engine (pool/http) as thaw's own API is, with the same
 * limits (daemon_http_params()): http_conns.c accepts, capping connections
 * (max_connections, and max_connections_per_uid per uid for a client on this
 * host, whose socket's owner the kernel tells, per IP address for a remote one)
 * and giving each request head header_timeout_s; JSON bodies are collected up
 * to max_request_bytes from the memory budget (http_server.c).  Its connections
 * are counted apart from the Unix socket's, so a flood on the TCP port leaves
 * the socket usable.
 *
 * One table routes both of what E2B's cloud splits between two hosts, the
 * control plane (api.e2b.app, X-API-KEY) and envd (a sandbox's port
 * 49983, X-Access-Token): their paths do not overlap, and the SDK sends
 * both to this one address when E2B_API_URL and E2B_SANDBOX_URL name it.
 *
 * The engine's libmicrohttpd callback drives its requests as it does
 * thaw's own (e2b_api below): request_begin() at the headers (route, method,
 * credentials, the envd sandbox: all that the headers alone decide is
 * answered before any body is read), the route's body_piece() per piece of
 * a streamed body, its handler at the end.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "pool/e2b/e2b_internal.h"
#include "common/log.h"
#include "pool/e2b/filesystem.h"
#include "pool/e2b/processes.h"
#include "pool/http/http_server.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define LISTEN_BACKLOG 256

/* ---- routes -------------------------------------------------------------- */

#define API(m, p, h)                         \
	{                                    \
		m, p, E2B_API, h, NULL, NULL \
	}
#define ENVD(m, p, h)                         \
	{                                     \
		m, p, E2B_ENVD, h, NULL, NULL \
	}
/* A Connect RPC of envd's service @svc ("process.Process"). */
#define RPC(svc, name, h)                                        \
	{                                                        \
		"POST", "/" svc "/" name, E2B_RPC, h, NULL, NULL \
	}
#define PROCESS(name, h) RPC("process.Process", name, h)
#define FS(name, h) RPC("filesystem.Filesystem", name, h)

static const struct e2b_route routes[] = {
	API("POST", "/sandboxes", e2b_create_sandbox),
	API("POST", "/v2/sandboxes", e2b_create_sandbox),
	API("GET", "/sandboxes", e2b_list_sandboxes),
	API("GET", "/v2/sandboxes", e2b_list_sandboxes_v2),
	API("GET", "/sandboxes/{id}", e2b_get_sandbox),
	API("DELETE", "/sandboxes/{id}", e2b_kill_sandbox),
	API("POST", "/sandboxes/{id}/timeout", e2b_set_timeout),
	API("POST", "/sandboxes/{id}/refreshes", e2b_refresh),
	API("POST", "/sandboxes/{id}/pause", e2b_pause),
	API("POST", "/sandboxes/{id}/resume", e2b_resume),
	API("POST", "/sandboxes/{id}/connect", e2b_connect),
	API("POST", "/v2/sandboxes/{id}/connect", e2b_connect),
	API("POST", "/sandboxes/{id}/fork", e2b_fork),
	API("POST", "/sandboxes/{id}/snapshots", e2b_snapshot),
	API("PUT", "/sandboxes/{id}/network", e2b_update_network),
	API("GET", "/sandboxes/{id}/metrics", e2b_sandbox_metrics),
	API("GET", "/snapshots", e2b_list_snapshots),
	API("DELETE", "/templates/{id}", e2b_delete_snapshot),
	API("GET", "/templates", e2b_list_templates),
	ENVD("GET", "/health", e2b_health),
	ENVD("GET", "/files", e2b_files_get),
	{ "POST", "/files", E2B_ENVD, e2b_files_upload_end,
	  e2b_files_upload_begin, e2b_files_upload_piece },
	FS("Stat", e2b_fs_stat),
	FS("ListDir", e2b_fs_list_dir),
	FS("MakeDir", e2b_fs_make_dir),
	FS("Move", e2b_fs_move),
	FS("Remove", e2b_fs_remove),
	FS("WatchDir", e2b_fs_watch_dir),
	FS("CreateWatcher", e2b_fs_create_watcher),
	FS("GetWatcherEvents", e2b_fs_get_watcher_events),
	FS("RemoveWatcher", e2b_fs_remove_watcher),
	PROCESS("Start", e2b_process_start),
	PROCESS("Connect", e2b_process_connect),
	PROCESS("List", e2b_process_list),
	PROCESS("SendInput", e2b_process_send_input),
	PROCESS("StreamInput", e2b_process_stream_input),
	PROCESS("CloseStdin", e2b_process_close_stdin),
	PROCESS("SendSignal", e2b_process_send_signal),
	PROCESS("Update", e2b_process_update),
};

#define ID_CHARS                                                         \
	"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" \
	"_-"

/*
 * Whether @url (@len bytes) is @pattern, its "{id}" matching one segment
 * copied into @id.  No byte past @len is read.
 */
static bool path_matches(const char *pattern, const char *url, size_t len,
			 char id[E2B_PATH_ID_MAX + 1])
{
	const char *hole = strstr(pattern, "{id}");
	size_t head = hole ? (size_t)(hole - pattern) : strlen(pattern);

	if (!hole)
		return len == head && !memcmp(pattern, url, len);
	const char *tail = hole + 4;
	size_t tail_len = strlen(tail);
	if (len < head + tail_len + 1 || memcmp(pattern, url, head) ||
	    memcmp(tail, url + len - tail_len, tail_len))
		return false;
	size_t n = len - head - tail_len;
	if (n > E2B_PATH_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!url[head + i] || !strchr(ID_CHARS, url[head + i]))
			return false;
	memcpy(id, url + head, n);
	id[n] = '\0';
	return true;
}

const struct e2b_route *e2b_find_route(const char *method, const char *url,
				       char id[E2B_PATH_ID_MAX + 1],
				       bool *path_known)
{
	size_t len = strlen(url);

	*path_known = false;
	id[0] = '\0';
	if (len > 1 && url[len - 1] == '/')
		len--;
	for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
		if (!path_matches(routes[i].path, url, len, id))
			continue;
		if (!strcmp(routes[i].method, method))
			return &routes[i];
		*path_known = true;
	}
	id[0] = '\0';
	return NULL;
}

/* ---- replies ------------------------------------------------------------- */

enum MHD_Result e2b_reply(struct MHD_Connection *conn, struct e2b_request *r,
			  unsigned status, struct MHD_Response *resp)
{
	return http_answer(conn, &r->x, status, resp);
}

enum MHD_Result e2b_reply_json_header(struct MHD_Connection *conn,
				      struct e2b_request *r, unsigned status,
				      json_t *json, const char *name,
				      const char *value)
{
	return e2b_reply(conn, r, status,
			 http_json_response(json, value ? name : NULL, value));
}

enum MHD_Result e2b_reply_json(struct MHD_Connection *conn,
			       struct e2b_request *r, unsigned status,
			       json_t *json)
{
	return e2b_reply_json_header(conn, r, status, json, NULL, NULL);
}

enum MHD_Result e2b_reply_empty(struct MHD_Connection *conn,
				struct e2b_request *r, unsigned status)
{
	return e2b_reply(
		conn, r, status,
		MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT));
}

enum MHD_Result e2b_reply_error(struct MHD_Connection *conn,
				struct e2b_request *r, unsigned status,
				const char *fmt, ...)
{
	char message[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	if (!r->route || r->route->kind != E2B_RPC)
		return e2b_reply_json(conn, r, status,
				      json_pack("{s:i,s:s}", "code",
						(int)status, "message",
						message));
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

enum MHD_Result e2b_reply_pool_error(struct MHD_Connection *conn,
				     struct e2b_request *r, enum pool_error e,
				     const char *message)
{
	return e2b_reply_error(conn, r, pool_error_status(e), "%s", message);
}

json_t *e2b_body_object(const struct e2b_request *r, char *err, size_t errlen)
{
	return http_parse_object(r->x.body.buf, r->x.body.len, err, errlen);
}

/* ---- requests ------------------------------------------------------------ */

/* The control plane's key: X-API-KEY, the daemon's token (never ""
 * here: config.c refuses e2b_listen without one). */
static bool api_key_valid(struct MHD_Connection *conn, const struct daemon *d)
{
	const char *key =
		MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-API-KEY");

	return key && e2b_secret_equal(key, d->cfg.token);
}

/* First call of a request: everything the headers alone decide. */
static enum MHD_Result request_begin(struct MHD_Connection *conn,
				     struct http_exchange *x, void *cls,
				     const char *url, const char *method)
{
	struct e2b_request *r = (struct e2b_request *)x;
	bool path_known;

	r->server = cls;
	r->d = r->server->d;
	r->route = e2b_find_route(method, url, r->id, &path_known);
	if (!r->route && path_known)
		return e2b_reply_error(conn, r, 405, "%s does not take %s", url,
				       method);
	if (!r->route)
		return e2b_reply_error(conn, r, 404, "no such route: %s %s",
				       method, url);
	if (r->route->kind == E2B_API && !api_key_valid(conn, r->d))
		return e2b_reply_error(
			conn, r, 401,
			"Invalid API key: X-API-KEY must be the thaw daemon's "
			"token");
	if (r->route->kind != E2B_API) {
		enum MHD_Result ret = e2b_envd_begin(conn, r, method);

		if (r->x.answered)
			return ret;
	}
	if (r->route->body_begin) {
		r->x.streamed = true;
		return r->route->body_begin(conn, r);
	}
	return MHD_YES;
}

static void request_piece(struct MHD_Connection *conn, struct http_exchange *x,
			  const char *data, size_t len)
{
	struct e2b_request *r = (struct e2b_request *)x;

	r->route->body_piece(conn, r, data, len);
}

static enum MHD_Result request_end(struct MHD_Connection *conn,
				   struct http_exchange *x, const char *method)
{
	struct e2b_request *r = (struct e2b_request *)x;

	(void)method;
	return r->route->handler(conn, r);
}

static enum MHD_Result request_fail(struct MHD_Connection *conn,
				    struct http_exchange *x, unsigned status,
				    const char *message)
{
	/* A body too large (413) or over the memory budget (503): on a
	 * Connect route in Connect's shape, which its client reads. */
	return e2b_reply_error(conn, (struct e2b_request *)x, status, "%s",
			       message);
}

static void request_finish(struct http_exchange *x)
{
	struct e2b_request *r = (struct e2b_request *)x;

	if (r->state_free)
		r->state_free(r);
	if (r->sandbox)
		sandbox_put(r->d, r->sandbox);
}

static const struct http_protocol e2b_api = {
	.what = "E2B server",
	.request_size = sizeof(struct e2b_request),
	.begin = request_begin,
	.piece = request_piece,
	.end = request_end,
	.fail = request_fail,
	.finish = request_finish,
};

/* ---- the listener -------------------------------------------------------- */

/*
 * A listening socket on @listen ("HOST:PORT", "[V6]:PORT"; config.c
 * checked its shape), or -1 after a log line.
 */
static int listen_on(const char *listen_at)
{
	char host[256];
	const char *colon = strrchr(listen_at, ':');
	struct addrinfo hints = { .ai_family = AF_UNSPEC,
				  .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_PASSIVE | AI_NUMERICSERV },
			*res = NULL;
	int fd = -1, one = 1;

	size_t n = colon ? (size_t)(colon - listen_at) : 0;
	if (n && listen_at[0] == '[' && listen_at[n - 1] == ']') {
		listen_at++;
		n -= 2;
	}
	snprintf(host, sizeof(host), "%.*s", (int)n, listen_at);
	int gai = getaddrinfo(host, colon + 1, &hints, &res);
	if (gai) {
		log_error("e2b_listen: cannot resolve %s: %s", host,
			  gai_strerror(gai));
		return -1;
	}
	fd = socket(res->ai_family, res->ai_socktype | SOCK_CLOEXEC,
		    res->ai_protocol);
	if (fd < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, res->ai_addr, res->ai_addrlen) < 0 ||
	    listen(fd, LISTEN_BACKLOG) < 0) {
		log_error("e2b_listen: cannot listen on %s: %s", listen_at,
			  strerror(errno));
		if (fd >= 0)
			close(fd);
		fd = -1;
	}
	freeaddrinfo(res);
	return fd;
}

/* Whether @token is what E2B's Python SDK lets through as an API key:
 * e2b_ and hex digits (docs/e2b.md). */
static bool python_sdk_takes(const char *token)
{
	if (strncmp(token, "e2b_", 4))
		return false;
	size_t hex = strspn(token + 4, "0123456789abcdef");
	return hex && !token[4 + hex];
}

/* The listener on d->cfg.e2b_listen; NULL after a log line. */
static struct e2b_server *serve(struct daemon *d, unsigned slot)
{
	struct e2b_server *s = calloc(1, sizeof(*s));
	int fd = listen_on(d->cfg.e2b_listen);

	if (!s || fd < 0) {
		if (fd >= 0)
			close(fd);
		free(s);
		return NULL;
	}
	s->slot = slot;
	if (getrandom(s->token_key, sizeof(s->token_key), 0) !=
	    (ssize_t)sizeof(s->token_key)) {
		log_error("cannot start the E2B server: no randomness for its "
			  "access tokens: %s",
			  strerror(errno));
		close(fd);
		free(s);
		return NULL;
	}
	s->d = d;
	s->processes = processes_new(d);
	s->watchers = watchers_new(d);
	if (!s->processes || !s->watchers) {
		log_error("cannot start the E2B server: out of memory");
		close(fd);
		processes_free(s->processes);
		watchers_free(s->watchers);
		free(s);
		return NULL;
	}
	if (!python_sdk_takes(d->cfg.token))
		log_warning("e2b_listen: the token is not e2b_ and hex digits: "
			    "E2B's Python SDK refuses such an API key before "
			    "sending it (2.25 to 2.29; later ones unless "
			    "E2B_VALIDATE_API_KEY=false)");
	struct http_params params;

	daemon_http_params(d, &params);
	s->http = http_serve(&params, fd, &e2b_api, s);
	if (!s->http) {
		processes_free(s->processes);
		watchers_free(s->watchers);
		free(s);
		return NULL;
	}
	return s;
}

int e2b_start(struct daemon *d, unsigned slot, void **state)
{
	*state = NULL;
	if (!d->cfg.e2b_listen[0])
		return 0;
	*state = serve(d, slot);
	if (!*state)
		return -1;
	log_info("serving E2B's API on %s", d->cfg.e2b_listen);
	return 0;
}

void e2b_stop(void *server)
{
	struct e2b_server *s = server;

	if (!s)
		return;
	http_stop(s->http);
	processes_free(s->processes);
	watchers_free(s->watchers);
	free(s);
}
