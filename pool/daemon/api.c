// SPDX-License-Identifier: Apache-2.0
/*
 * api.c - see api.h; the routes and their answers are pool/API.md's.
 *
 * libmicrohttpd calls handle() several times per request: first with no
 * body (we allocate the request's context and check what can be checked
 * from the headers alone: route, method, token, declared length), then
 * once per piece of body, then once more with none, when we answer.  JSON
 * bodies are collected up to max_request_bytes; a file upload is passed on
 * to the guest piece by piece as it arrives, so its size is bounded by
 * max_file_bytes, not by our memory.
 *
 * Exec and file downloads answer with a response whose body a callback
 * produces: it waits on the agent's connection and, at the same time, on
 * the client's socket, so a client that goes away mid-exec is noticed at
 * once and its command killed.
 */
#include "api.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <jansson.h>
#include <microhttpd.h>

#include "agent_client.h"
#include "base64.h"
#include "clock.h"
#include "daemon.h"

/* One line per value; milliseconds print as 41.7, not 41.700000000000003. */
#define JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(12))
/* A file transfer whose guest sends nothing for this long has failed. */
#define FILE_IDLE_S 60
#define EXEC_REQUEST_ID 1
#define KILL_REQUEST_ID 2
#define FILE_REQUEST_ID 3
/* How often a waiting response looks at the daemon's stop flag. */
#define WAIT_SLICE_MS 250
/* Idle HTTP connections (between or inside requests) are dropped after: */
#define CONNECTION_TIMEOUT_S 120
/* The agent's PATH, used whenever we send an environment of our own. */
#define GUEST_PATH \
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

enum route {
	ROUTE_NONE,
	ROUTE_SANDBOXES,
	ROUTE_SANDBOX,
	ROUTE_EXEC,
	ROUTE_TIMEOUT,
	ROUTE_PING,
	ROUTE_FILES,
	ROUTE_TEMPLATES,
	ROUTE_HEALTH,
	ROUTE_METRICS,
};

/* One HTTP request's state, from its first handle() call to completed(). */
struct request {
	struct daemon *d;
	enum route route;
	char id[SANDBOX_ID_LEN + 1];
	bool answered;
	/* JSON bodies */
	char *body;
	size_t len;
	bool too_large;
	/* PUT files: the upload goes straight on to the agent */
	struct sandbox *clone;
	struct agent_conn agent;
	uint64_t uploaded;
	bool write_open;
	int upload_status; /* an error to answer at the end, or 0 */
	char upload_err[512];
};

static const unsigned counted_codes[HTTP_CODES] = { 200, 201, 204, 400,
						    401, 404, 405, 411,
						    413, 429, 500, 503 };

static void count_status(struct daemon *d, unsigned status)
{
	pthread_mutex_lock(&d->lock);
	for (int i = 0; i < HTTP_CODES; i++)
		if (counted_codes[i] == status)
			d->http_count[i]++;
	pthread_mutex_unlock(&d->lock);
}

static enum MHD_Result send_response(struct MHD_Connection *conn,
				     struct request *r, unsigned status,
				     struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	enum MHD_Result ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	r->answered = true;
	count_status(r->d, status);
	return ret;
}

static enum MHD_Result send_text(struct MHD_Connection *conn, struct request *r,
				 unsigned status, const char *type, char *text)
{
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		strlen(text), text, MHD_RESPMEM_MUST_FREE);

	if (!resp) {
		free(text);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	return send_response(conn, r, status, resp);
}

/* Answers with @json (taken over). */
static enum MHD_Result send_json(struct MHD_Connection *conn, struct request *r,
				 unsigned status, json_t *json)
{
	char *text = json ? json_dumps(json, JSON_FLAGS) : NULL;

	json_decref(json);
	if (!text)
		return MHD_NO;
	/* One line: curl users see the prompt on its own line. */
	size_t n = strlen(text);
	char *line = realloc(text, n + 2);
	if (!line) {
		free(text);
		return MHD_NO;
	}
	memcpy(line + n, "\n", 2);
	return send_text(conn, r, status, "application/json", line);
}

static const char *error_code(unsigned status)
{
	switch (status) {
	case 400:
		return "bad_request";
	case 401:
		return "unauthorized";
	case 404:
		return "not_found";
	case 405:
		return "method_not_allowed";
	case 409:
		return "conflict";
	case 411:
		return "length_required";
	case 413:
		return "too_large";
	case 429:
		return "capacity";
	case 503:
		return "unavailable";
	case 504:
		return "timeout";
	default:
		return "internal";
	}
}

/* The error object of API.md, with an Allow header for a 405. */
static enum MHD_Result send_error_allow(struct MHD_Connection *conn,
					struct request *r, unsigned status,
					const char *allow, const char *message)
{
	json_t *j = json_pack("{s:{s:s,s:s}}", "error", "code",
			      error_code(status), "message", message);
	char *text = j ? json_dumps(j, JSON_FLAGS) : NULL;
	char *line = text ? malloc(strlen(text) + 2) : NULL;

	json_decref(j);
	if (line)
		sprintf(line, "%s\n", text);
	free(text);
	if (!line)
		return MHD_NO;
	struct MHD_Response *resp = MHD_create_response_from_buffer(
		strlen(line), line, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(line);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"application/json");
	if (allow)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
	return send_response(conn, r, status, resp);
}

static enum MHD_Result send_error(struct MHD_Connection *conn,
				  struct request *r, unsigned status,
				  const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static enum MHD_Result send_error(struct MHD_Connection *conn,
				  struct request *r, unsigned status,
				  const char *fmt, ...)
{
	char message[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	return send_error_allow(conn, r, status, NULL, message);
}

static void format_time(int64_t ms, char *out, size_t len)
{
	time_t s = (time_t)(ms / 1000);
	struct tm tm;
	char base[32];

	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", gmtime_r(&s, &tm));
	snprintf(out, len, "%s.%03dZ", base, (int)(ms % 1000));
}

/* Milliseconds to two decimals: JSON readers need not see float noise. */
static double hundredths(double ms)
{
	return (double)(int64_t)(ms * 100 + 0.5) / 100;
}

/* The sandbox object of API.md; call with the daemon locked. */
static json_t *sandbox_json(const struct sandbox *c, bool detail)
{
	char created[40], expires[40];

	format_time(c->created_ms, created, sizeof(created));
	format_time(c->expires_ms, expires, sizeof(expires));
	json_t *j = json_pack("{s:s,s:s,s:s,s:s,s:f,s:f,s:s}", "id", c->id,
			      "template", c->pool->t->name, "created", created,
			      "expires", expires, "restore_ms",
			      hundredths(c->restore_ms), "handout_ms",
			      hundredths(c->handout_ms), "state",
			      c->stopped ? "stopped" : "running");
	if (j && detail) {
		json_object_set_new(j, "pid", json_integer(c->vmm.pid));
		if (c->stopped)
			json_object_set_new(j, "stop_reason",
					    json_string(c->stop_reason));
	}
	return j;
}

/* Answers with held clone @c's object, and lets go of it. */
static enum MHD_Result send_sandbox(struct MHD_Connection *conn,
				    struct request *r, struct sandbox *c,
				    unsigned status, bool detail)
{
	pthread_mutex_lock(&r->d->lock);
	json_t *j = sandbox_json(c, detail);
	pthread_mutex_unlock(&r->d->lock);
	sandbox_put(r->d, c);
	return send_json(conn, r, status, j);
}

/* ---- request bodies ---------------------------------------------------- */

/*
 * Parses the collected body as a JSON object ("{}" when empty).  NULL
 * after an error message in @err.
 */
static json_t *parse_body(const struct request *r, char *err, size_t errlen)
{
	json_error_t e;
	json_t *j;

	if (!r->len)
		return json_object();
	j = json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, &e);
	if (!j) {
		snprintf(err, errlen, "malformed JSON at line %d column %d: %s",
			 e.line, e.column, e.text);
		return NULL;
	}
	if (!json_is_object(j)) {
		snprintf(err, errlen, "the body must be a JSON object");
		json_decref(j);
		return NULL;
	}
	return j;
}

/*
 * Checks @body's fields against @allowed (NULL-terminated); a field that
 * is not there is a typo a user would want to hear about.
 */
static bool known_fields(json_t *body, const char *const allowed[], char *err,
			 size_t errlen)
{
	const char *key;
	json_t *value;

	json_object_foreach(body, key, value)
	{
		bool known = false;

		for (int i = 0; allowed[i]; i++)
			known |= !strcmp(key, allowed[i]);
		if (!known) {
			snprintf(err, errlen, "unknown field \"%s\"", key);
			return false;
		}
	}
	return true;
}

/* @field as a whole number in [min, max]; absent: @def. */
static bool get_uint(json_t *body, const char *field, uint32_t min,
		     uint32_t max, uint32_t def, uint32_t *out, char *err,
		     size_t errlen)
{
	json_t *v = json_object_get(body, field);

	*out = def;
	if (!v || json_is_null(v))
		return true;
	if (!json_is_integer(v) || json_integer_value(v) < min ||
	    json_integer_value(v) > max) {
		snprintf(err, errlen,
			 "\"%s\" must be a whole number from %u to %u", field,
			 min, max);
		return false;
	}
	*out = (uint32_t)json_integer_value(v);
	return true;
}

static void free_strv(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

/* Appends KEY=VALUE entries of object @env to @v (grown); false on error. */
static bool add_env(char ***v, size_t *n, json_t *env, char *err, size_t errlen)
{
	const char *key;
	json_t *value;

	if (!env || json_is_null(env))
		return true;
	if (!json_is_object(env)) {
		snprintf(err, errlen,
			 "\"env\" must be an object of string values");
		return false;
	}
	json_object_foreach(env, key, value)
	{
		if (!json_is_string(value) || !key[0] || strchr(key, '=')) {
			snprintf(
				err, errlen,
				"\"env\": \"%s\" must be a name without '=' with a string value",
				key);
			return false;
		}
		char **grown = realloc(*v, (*n + 2) * sizeof(**v));
		if (!grown)
			return false;
		*v = grown;
		if (asprintf(&grown[*n], "%s=%s", key,
			     json_string_value(value)) < 0)
			return false;
		grown[++*n] = NULL;
	}
	return true;
}

static char **strv_copy(char *const *v)
{
	size_t n = 0;

	while (v && v[n])
		n++;
	char **copy = calloc(n + 1, sizeof(*copy));
	for (size_t i = 0; copy && i < n; i++) {
		copy[i] = strdup(v[i]);
		if (!copy[i]) {
			free_strv(copy);
			return NULL;
		}
	}
	return copy;
}

/* ---- routes without a sandbox ------------------------------------------ */

static enum MHD_Result get_health(struct MHD_Connection *conn,
				  struct request *r, struct daemon *d)
{
	pthread_mutex_lock(&d->lock);
	json_t *j = json_pack(
		"{s:s,s:i,s:I}", "status", d->stopping ? "stopping" : "ok",
		"sandboxes", (int)d->total, "uptime_s",
		(json_int_t)((realtime_ms() - d->started_ms) / 1000));
	pthread_mutex_unlock(&d->lock);
	return send_json(conn, r, d->stopping ? 503 : 200, j);
}

static enum MHD_Result get_templates(struct MHD_Connection *conn,
				     struct request *r, struct daemon *d)
{
	json_t *list = json_array();

	pthread_mutex_lock(&d->lock);
	for (size_t i = 0; i < d->nr_pools; i++) {
		const struct pool *pl = &d->pools[i];
		const struct template_config *t = pl->t;

		json_array_append_new(
			list,
			json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:i,s:i}",
				  "name", t->name, "snapshot", pl->snapshot_id,
				  "mem_mib", (int)t->mem_mib, "vcpus",
				  (int)t->vcpus, "min_ready", (int)t->min_ready,
				  "max_total", (int)t->max_total, "ready",
				  (int)pl->ready, "restoring",
				  (int)pl->restoring, "leased",
				  (int)pl->leased));
	}
	pthread_mutex_unlock(&d->lock);
	return send_json(conn, r, 200, json_pack("{s:o}", "templates", list));
}

/* Prometheus text: appends printf output to a growing buffer. */
struct text {
	char *buf;
	size_t len, cap;
	bool failed;
};

/* Grows @t's buffer to @cap bytes; false (and t->failed) without memory. */
static bool text_reserve(struct text *t, size_t cap)
{
	char *grown = realloc(t->buf, cap);

	if (!grown) {
		t->failed = true;
		return false;
	}
	t->buf = grown;
	t->cap = cap;
	return true;
}

static void put(struct text *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(struct text *t, const char *fmt, ...)
{
	va_list ap;

	for (;;) {
		size_t room = t->cap - t->len;
		va_start(ap, fmt);
		int n = t->buf ? vsnprintf(t->buf + t->len, room, fmt, ap) : -1;
		va_end(ap);
		if (n >= 0 && (size_t)n < room) {
			t->len += n;
			return;
		}
		if (!text_reserve(t, t->cap ? t->cap * 2 : 8192))
			return;
	}
}

static void put_histogram(struct text *t, const char *name,
			  const char *template, const struct histogram *h)
{
	uint64_t cumulative = 0;

	for (int i = 0; i < HISTOGRAM_BUCKETS; i++) {
		cumulative += h->count[i];
		put(t, "%s_bucket{template=\"%s\",le=\"%g\"} %" PRIu64 "\n",
		    name, template, histogram_bounds[i], cumulative);
	}
	put(t, "%s_bucket{template=\"%s\",le=\"+Inf\"} %" PRIu64 "\n", name,
	    template, h->total);
	put(t, "%s_sum{template=\"%s\"} %.6f\n", name, template, h->sum);
	put(t, "%s_count{template=\"%s\"} %" PRIu64 "\n", name, template,
	    h->total);
}

/* One metric family per template field: name, type, help, value. */
#define POOL_METRIC(out, dm, metric, kind, help, expr)                         \
	do {                                                                   \
		put(out, "# HELP " metric " " help "\n# TYPE " metric " " kind \
			 "\n");                                                \
		for (size_t i = 0; i < (dm)->nr_pools; i++) {                  \
			const struct pool *pl = &(dm)->pools[i];               \
			put(out, metric "{template=\"%s\"} %" PRIu64 "\n",     \
			    pl->t->name, (uint64_t)(expr));                    \
		}                                                              \
	} while (0)

static enum MHD_Result get_metrics(struct MHD_Connection *conn,
				   struct request *r, struct daemon *d)
{
	struct text t = { 0 };

	pthread_mutex_lock(&d->lock);
	POOL_METRIC(&t, d, "thaw_pool_ready", "gauge",
		    "Restored clones waiting in the pool.", pl->ready);
	POOL_METRIC(&t, d, "thaw_pool_restoring", "gauge",
		    "Clones being restored.", pl->restoring);
	POOL_METRIC(&t, d, "thaw_sandboxes_leased", "gauge",
		    "Sandboxes handed out.", pl->leased);
	POOL_METRIC(&t, d, "thaw_handouts_total", "counter",
		    "Sandboxes handed out since start.", pl->handouts);
	POOL_METRIC(&t, d, "thaw_restore_failures_total", "counter",
		    "Restores that failed.", pl->restore_failures);
	POOL_METRIC(&t, d, "thaw_capacity_rejections_total", "counter",
		    "Creates refused at max_total or max_sandboxes.",
		    pl->rejections);
	POOL_METRIC(&t, d, "thaw_sandboxes_expired_total", "counter",
		    "Sandboxes killed when their timeout passed.", pl->expired);
	put(&t,
	    "# HELP thaw_handout_seconds Time a create waited for its clone.\n"
	    "# TYPE thaw_handout_seconds histogram\n");
	for (size_t i = 0; i < d->nr_pools; i++)
		put_histogram(&t, "thaw_handout_seconds", d->pools[i].t->name,
			      &d->pools[i].handout_s);
	put(&t,
	    "# HELP thaw_restore_seconds VMM start to the agent's first answer.\n"
	    "# TYPE thaw_restore_seconds histogram\n");
	for (size_t i = 0; i < d->nr_pools; i++)
		put_histogram(&t, "thaw_restore_seconds", d->pools[i].t->name,
			      &d->pools[i].restore_s);
	put(&t, "# HELP thaw_http_requests_total Answered requests by status.\n"
		"# TYPE thaw_http_requests_total counter\n");
	for (int i = 0; i < HTTP_CODES; i++)
		put(&t, "thaw_http_requests_total{code=\"%u\"} %" PRIu64 "\n",
		    counted_codes[i], d->http_count[i]);
	pthread_mutex_unlock(&d->lock);
	if (t.failed) {
		free(t.buf);
		return MHD_NO;
	}
	return send_text(conn, r, 200, "text/plain; version=0.0.4", t.buf);
}

/* ---- sandboxes --------------------------------------------------------- */

static enum MHD_Result create_sandbox(struct MHD_Connection *conn,
				      struct request *r, struct daemon *d)
{
	static const char *const fields[] = { "template", "timeout_s", "env",
					      NULL };
	char err[512];
	json_t *body = parse_body(r, err, sizeof(err));
	const char *name = "default";
	char **env = NULL;
	size_t nr_env = 0;
	uint32_t timeout_s;
	struct pool *pl;

	if (!body)
		return send_error(conn, r, 400, "%s", err);
	json_t *tmpl = json_object_get(body, "template");
	if (tmpl && !json_is_string(tmpl)) {
		json_decref(body);
		return send_error(conn, r, 400,
				  "\"template\" must be a string");
	}
	if (tmpl)
		name = json_string_value(tmpl);
	pl = pool_find(d, name);
	if (!known_fields(body, fields, err, sizeof(err)) ||
	    (pl && !get_uint(body, "timeout_s", 1, pl->t->max_timeout_s,
			     pl->t->timeout_s, &timeout_s, err, sizeof(err))) ||
	    !add_env(&env, &nr_env, json_object_get(body, "env"), err,
		     sizeof(err))) {
		json_decref(body);
		free_strv(env);
		return send_error(conn, r, 400, "%s", err);
	}
	if (!pl) {
		enum MHD_Result ret =
			send_error(conn, r, 404, "no template \"%s\"", name);
		json_decref(body);
		free_strv(env);
		return ret;
	}
	json_decref(body);

	struct sandbox *c;
	int status = pool_handout(pl, timeout_s, env, &c, err, sizeof(err));
	if (status != 201)
		return send_error(conn, r, status, "%s", err);
	return send_sandbox(conn, r, c, 201, false);
}

static enum MHD_Result list_sandboxes(struct MHD_Connection *conn,
				      struct request *r, struct daemon *d)
{
	json_t *list = json_array();

	pthread_mutex_lock(&d->lock);
	for (const struct sandbox *c = d->leased; c; c = c->next)
		json_array_append_new(list, sandbox_json(c, false));
	pthread_mutex_unlock(&d->lock);
	return send_json(conn, r, 200, json_pack("{s:o}", "sandboxes", list));
}

static enum MHD_Result no_sandbox(struct MHD_Connection *conn,
				  struct request *r)
{
	return send_error(conn, r, 404, "no sandbox \"%s\"", r->id);
}

static enum MHD_Result get_sandbox(struct MHD_Connection *conn,
				   struct request *r, struct daemon *d)
{
	struct sandbox *c = sandbox_get(d, r->id);

	if (!c)
		return no_sandbox(conn, r);
	return send_sandbox(conn, r, c, 200, true);
}

static enum MHD_Result set_timeout(struct MHD_Connection *conn,
				   struct request *r, struct daemon *d)
{
	static const char *const fields[] = { "timeout_s", NULL };
	char err[512];
	uint32_t timeout_s;
	struct sandbox *c = sandbox_get(d, r->id);

	if (!c)
		return no_sandbox(conn, r);
	json_t *body = parse_body(r, err, sizeof(err));
	bool ok = body && known_fields(body, fields, err, sizeof(err)) &&
		  get_uint(body, "timeout_s", 1, c->pool->t->max_timeout_s, 0,
			   &timeout_s, err, sizeof(err));
	if (ok && !timeout_s) {
		snprintf(err, sizeof(err), "\"timeout_s\" is required");
		ok = false;
	}
	json_decref(body);
	if (!ok) {
		sandbox_put(d, c);
		return send_error(conn, r, 400, "%s", err);
	}
	pthread_mutex_lock(&d->lock);
	c->expires_ms = realtime_ms() + (int64_t)timeout_s * 1000;
	pthread_mutex_unlock(&d->lock);
	return send_sandbox(conn, r, c, 200, true);
}

/* ---- talking to a sandbox's agent -------------------------------------- */

/*
 * How long the daemon waits on a guest: as long as a restore may take, its
 * one measure of a guest's pace (seconds where the guest kernel is emulated
 * or the guest is being bombed).
 */
static uint64_t guest_patience_ns(const struct daemon *d)
{
	return d->cfg.restore_timeout_s * 1000ull * NS_PER_MS;
}

/* Connects to @c's agent; an HTTP status and message when it cannot. */
static int connect_agent(struct sandbox *c, struct agent_conn *agent,
			 char *err, size_t errlen)
{
	char why[256];

	if (c->stopped) {
		snprintf(err, errlen, "sandbox %s stopped: %s", c->id,
			 c->stop_reason);
		return 500;
	}
	/* A guest busy with other connections may refuse one for a moment
	 * (-EAGAIN, seen under concurrent handouts): retry while we wait. */
	uint64_t give_up = monotonic_ns() + guest_patience_ns(c->pool->d);
	const struct timespec pause = { 0, 50 * 1000000L };
	int ret;

	for (uint64_t now = monotonic_ns();; now = monotonic_ns()) {
		uint64_t left_ms =
			now < give_up ? (give_up - now) / NS_PER_MS : 0;

		ret = agent_connect(agent, c->vmm.vsock, left_ms + 1, why,
				    sizeof(why));
		if (ret != -EAGAIN || c->stopped || left_ms == 0)
			break;
		nanosleep(&pause, NULL);
	}
	if (ret < 0) {
		snprintf(err, errlen,
			 "sandbox %s: its agent does not answer: %s", c->id,
			 why);
		return 500;
	}
	return 0;
}

/*
 * A round trip to the sandbox's agent on a fresh connection, as an exec's
 * would start: proof that the guest runs and answers, and what that costs.
 */
static enum MHD_Result ping_sandbox(struct MHD_Connection *conn,
				    struct request *r, struct daemon *d)
{
	struct sandbox *c = sandbox_get(d, r->id);
	struct agent_conn agent;
	char err[512];

	if (!c)
		return no_sandbox(conn, r);
	uint64_t start = monotonic_ns();
	int status = connect_agent(c, &agent, err, sizeof(err));
	if (!status) {
		char why[256];

		if (agent_ping(&agent, 1, why, sizeof(why)) < 0) {
			snprintf(err, sizeof(err),
				 "sandbox %s: its agent does not answer a "
				 "ping: %s",
				 c->id, why);
			status = 500;
		}
		agent_close(&agent);
	}
	double agent_ms = (double)(monotonic_ns() - start) / 1e6;
	sandbox_put(d, c);
	if (status)
		return send_error(conn, r, status, "%s", err);
	return send_json(conn, r, 200,
			 json_pack("{s:s,s:f}", "id", r->id, "agent_ms",
				   hundredths(agent_ms)));
}

enum wait_outcome {
	AGENT_READY,
	CLIENT_GONE,
	DAEMON_STOPPING,
	GUEST_SILENT, /* the deadline passed */
};

/*
 * Waits until the agent has a frame for us, the client hangs up, the
 * daemon stops, or monotonic_ns() passes @deadline_ns (0: never).  The
 * client's socket is watched for POLLRDHUP only: a pipelined next request
 * must not count as a hangup.
 */
static enum wait_outcome wait_agent_or_client(struct daemon *d, int agent_fd,
					      int client_fd,
					      uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p[2] = { { agent_fd, POLLIN, 0 },
				       { client_fd, POLLRDHUP, 0 } };
		int n = poll(p, client_fd >= 0 ? 2 : 1, WAIT_SLICE_MS);

		if (n < 0 && errno != EINTR)
			return CLIENT_GONE;
		if (client_fd >= 0 && p[1].revents)
			return CLIENT_GONE;
		if (p[0].revents)
			return AGENT_READY;
		pthread_mutex_lock(&d->lock);
		bool stopping = d->stopping;
		pthread_mutex_unlock(&d->lock);
		if (stopping)
			return DAEMON_STOPPING;
		if (deadline_ns && monotonic_ns() > deadline_ns)
			return GUEST_SILENT;
	}
}

static int client_fd_of(struct MHD_Connection *conn)
{
	const union MHD_ConnectionInfo *info = MHD_get_connection_info(
		conn, MHD_CONNECTION_INFO_CONNECTION_FD);

	return info ? info->connect_fd : -1;
}

/* ---- exec -------------------------------------------------------------- */

struct exec_run {
	struct daemon *d;
	struct sandbox *clone;
	struct agent_conn agent;
	int client_fd;
	bool done;
	/* stream: NDJSON bytes not yet taken by libmicrohttpd */
	char *pending;
	size_t pending_len, pending_off;
	/* collected (stream:false) */
	struct text out, err;
	uint64_t max_output;
	bool truncated;
	json_t *result;	      /* the exit or error event */
	int error_status;     /* the HTTP status an error event stands for */
	bool abandoned;	      /* the client went away */
	uint64_t deadline_ns; /* 0, or when to stop waiting for the guest */
};

static void exec_run_free(struct exec_run *x)
{
	agent_close(&x->agent);
	if (x->clone)
		sandbox_put(x->d, x->clone);
	free(x->pending);
	free(x->out.buf);
	free(x->err.buf);
	json_decref(x->result);
	free(x);
}

/* Appends up to the output limit; what is cut is remembered. */
static void collect(struct exec_run *x, struct text *t, const uint8_t *p,
		    size_t n)
{
	if (t->len + n > x->max_output) {
		n = t->len < x->max_output ? x->max_output - t->len : 0;
		x->truncated = true;
	}
	if (!n)
		return;
	if (t->len + n > t->cap) {
		size_t cap = t->cap ? t->cap : 65536;

		while (cap < t->len + n)
			cap *= 2;
		if (!text_reserve(t, cap))
			return;
	}
	memcpy(t->buf + t->len, p, n);
	t->len += n;
}

/*
 * Reads the next frame of our exec and turns it into an event: started,
 * stdout, stderr, exit or error (the last two end the exec).  Returns the
 * event, or NULL when the frame was someone else's; sets x->done at the
 * end, and on transport errors (with an error event).
 */
static json_t *next_exec_event(struct exec_run *x, bool collecting)
{
	struct thaw_frame f;
	struct thaw_msg m;
	char why[512];
	json_t *ev = NULL;

	int ret = agent_next_frame(&x->agent, &f);
	if (ret < 0) {
		x->done = true;
		x->error_status = 500;
		snprintf(why, sizeof(why), "the sandbox's agent went away: %s",
			 x->clone->vmm.pid > 0 ? strerror(-ret)
					      : "the VM was stopped");
		return json_pack("{s:s,s:s}", "type", "error", "message", why);
	}
	if (f.h.request_id != EXEC_REQUEST_ID)
		return NULL;
	if (thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, why,
			    sizeof(why)) < 0) {
		x->done = true;
		x->error_status = 500;
		return json_pack("{s:s,s:s}", "type", "error", "message", why);
	}
	const struct thaw_field *data = thaw_get(&m, THAW_T_DATA);
	switch (f.h.type) {
	case THAW_EXEC_STARTED:
		return json_pack("{s:s,s:I}", "type", "started", "pid",
				 (json_int_t)thaw_get_u32(&m, THAW_T_PID, 0));
	case THAW_STDOUT:
	case THAW_STDERR:
		if (collecting) {
			collect(x, f.h.type == THAW_STDOUT ? &x->out : &x->err,
				data->data, data->len);
			return NULL;
		}
		char *b64 = base64_encode(data->data, data->len);
		ev = json_pack("{s:s,s:s}", "type",
			       f.h.type == THAW_STDOUT ? "stdout" : "stderr",
			       "data", b64 ? b64 : "");
		free(b64);
		return ev;
	case THAW_EXIT:
		x->done = true;
		ev = json_pack("{s:s,s:b}", "type", "exit", "timed_out",
			       thaw_get_u8(&m, THAW_T_TIMED_OUT, 0));
		if (thaw_has(&m, THAW_T_SIGNAL))
			json_object_set_new(ev, "signal",
					    json_integer(thaw_get_u32(
						    &m, THAW_T_SIGNAL, 0)));
		else
			json_object_set_new(ev, "exit_code",
					    json_integer(thaw_get_u32(
						    &m, THAW_T_EXIT_CODE, 0)));
		return ev;
	case THAW_ERROR:
		x->done = true;
		x->error_status = 400; /* the guest cannot start it */
		agent_error_of(&m, why, sizeof(why));
		return json_pack("{s:s,s:s}", "type", "error", "message", why);
	default:
		return NULL;
	}
}

/*
 * Waits for the exec's next event: NULL when there is none yet (a frame of
 * another request, output being collected) or when the client went away
 * (x->abandoned; the command is then killed, nobody would read its
 * output).  A daemon stopping or a guest silent past the command's
 * timeout ends the exec with an error event.
 */
static json_t *exec_wait_event(struct exec_run *x, bool collecting)
{
	char why[128];

	switch (wait_agent_or_client(x->d, x->agent.fd, x->client_fd,
				     x->deadline_ns)) {
	case AGENT_READY:
		return next_exec_event(x, collecting);
	case CLIENT_GONE:
		fprintf(stderr,
			"thawd: sandbox %s: client gone, killing its exec\n",
			x->clone->id);
		x->abandoned = true;
		agent_kill(&x->agent, KILL_REQUEST_ID, EXEC_REQUEST_ID,
			   SIGKILL);
		x->done = true;
		return NULL;
	case DAEMON_STOPPING:
		snprintf(why, sizeof(why), "the daemon is shutting down");
		x->error_status = 503;
		break;
	default:
		snprintf(
			why, sizeof(why),
			"the guest did not end the command within %u s of its timeout",
			x->d->cfg.restore_timeout_s);
		x->error_status = 504;
		agent_kill(&x->agent, KILL_REQUEST_ID, EXEC_REQUEST_ID,
			   SIGKILL);
		break;
	}
	x->done = true;
	return json_pack("{s:s,s:s}", "type", "error", "message", why);
}

static ssize_t exec_stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct exec_run *x = cls;

	(void)pos;
	while (x->pending_off == x->pending_len) {
		if (x->done)
			return x->abandoned ? MHD_CONTENT_READER_END_WITH_ERROR
					    : MHD_CONTENT_READER_END_OF_STREAM;
		json_t *ev = exec_wait_event(x, false);
		if (!ev)
			continue;
		free(x->pending);
		x->pending = json_dumps(ev, JSON_FLAGS);
		json_decref(ev);
		if (!x->pending)
			return MHD_CONTENT_READER_END_WITH_ERROR;
		x->pending_len = strlen(x->pending);
		x->pending[x->pending_len++] = '\n'; /* over the NUL */
		x->pending_off = 0;
	}
	size_t n = x->pending_len - x->pending_off;
	if (n > max)
		n = max;
	memcpy(buf, x->pending + x->pending_off, n);
	x->pending_off += n;
	return (ssize_t)n;
}

static void exec_stream_free(void *cls)
{
	exec_run_free(cls);
}

/* Builds EXEC from the body; an HTTP status and message on bad input. */
static int parse_exec(json_t *body, const struct sandbox *c,
		      struct agent_exec_request *req, char ***argv_out,
		      char ***env_out, void **stdin_out, bool *stream,
		      char *err, size_t errlen)
{
	static const char *const fields[] = { "argv",	"cmd",	 "env",
					      "cwd",	"stdin", "timeout_s",
					      "stream", NULL };
	json_t *argv = json_object_get(body, "argv");
	json_t *cmd = json_object_get(body, "cmd");
	json_t *cwd = json_object_get(body, "cwd");
	json_t *in = json_object_get(body, "stdin");
	json_t *st = json_object_get(body, "stream");
	uint32_t timeout_s;
	size_t n = 0;

	if (!known_fields(body, fields, err, errlen) ||
	    !get_uint(body, "timeout_s", 0, 86400 * 365, 0, &timeout_s, err,
		      errlen))
		return 400;
	if (!argv == !cmd) {
		snprintf(err, errlen,
			 "give exactly one of \"argv\" and \"cmd\"");
		return 400;
	}
	if (argv && (!json_is_array(argv) || !json_array_size(argv))) {
		snprintf(err, errlen,
			 "\"argv\" must be a non-empty array of strings");
		return 400;
	}
	if ((cmd && !json_is_string(cmd)) || (cwd && !json_is_string(cwd)) ||
	    (in && !json_is_string(in)) || (st && !json_is_boolean(st))) {
		snprintf(
			err, errlen,
			"\"cmd\", \"cwd\" and \"stdin\" must be strings, \"stream\" a boolean");
		return 400;
	}
	size_t count = argv ? json_array_size(argv) : 3;
	char **v = calloc(count + 1, sizeof(*v));
	if (!v)
		return 500;
	*argv_out = v;
	if (cmd) {
		v[0] = strdup("/bin/sh");
		v[1] = strdup("-c");
		v[2] = strdup(json_string_value(cmd));
	}
	for (size_t i = 0; argv && i < count; i++) {
		json_t *a = json_array_get(argv, i);

		if (!json_is_string(a)) {
			snprintf(
				err, errlen,
				"\"argv\" must be a non-empty array of strings");
			return 400;
		}
		v[i] = strdup(json_string_value(a));
	}
	for (size_t i = 0; i < count; i++)
		if (!v[i])
			return 500;
	json_t *env = json_object_get(body, "env");
	if ((env && !json_is_null(env) && json_object_size(env)) || c->env) {
		/* The agent replaces its whole environment by ours: start
		 * from what it would have had. */
		char *base[] = { GUEST_PATH, "HOME=/root", NULL };

		*env_out = strv_copy(base);
		n = 2;
		char **sandbox_env = strv_copy(c->env);
		for (size_t i = 0; sandbox_env && sandbox_env[i]; i++) {
			char **grown =
				realloc(*env_out, (n + 2) * sizeof(char *));
			if (!grown)
				break;
			*env_out = grown;
			grown[n++] = sandbox_env[i];
			grown[n] = NULL;
		}
		free(sandbox_env);
		if (!*env_out || !add_env(env_out, &n, env, err, errlen))
			return 400;
	}
	if (in) {
		size_t len;
		*stdin_out = base64_decode(json_string_value(in),
					   json_string_length(in), &len);
		if (!*stdin_out) {
			snprintf(err, errlen, "\"stdin\" is not base64");
			return 400;
		}
		req->stdin_data = *stdin_out;
		req->stdin_len = len;
	}
	req->argv = v;
	req->env = *env_out;
	req->cwd = cwd ? json_string_value(cwd) : NULL;
	req->timeout_ms = timeout_s * 1000;
	*stream = !st || json_is_true(st);
	return 0;
}

/* stream:false: runs to the end here, then answers in one object. */
static enum MHD_Result exec_collected(struct MHD_Connection *conn,
				      struct request *r, struct exec_run *x)
{
	while (!x->done) {
		json_t *ev = exec_wait_event(x, true);

		if (ev && x->done)
			x->result = ev;
		else
			json_decref(ev);
	}
	if (x->abandoned) {
		exec_run_free(x);
		return MHD_NO;
	}
	json_t *res = x->result;
	const char *type = json_string_value(json_object_get(res, "type"));
	if (!type || strcmp(type, "exit")) {
		const char *msg =
			json_string_value(json_object_get(res, "message"));
		enum MHD_Result ret =
			send_error(conn, r, (unsigned)x->error_status,
				   "exec: %s", msg ? msg : "failed");
		exec_run_free(x);
		return ret;
	}
	char *out = base64_encode(x->out.buf, x->out.len);
	char *errs = base64_encode(x->err.buf, x->err.len);
	json_t *j = json_pack("{s:s,s:s,s:O}", "stdout", out ? out : "",
			      "stderr", errs ? errs : "", "timed_out",
			      json_object_get(res, "timed_out"));
	free(out);
	free(errs);
	json_t *code = json_object_get(res, "exit_code");
	json_object_set(j, code ? "exit_code" : "signal",
			code ? code : json_object_get(res, "signal"));
	if (x->truncated)
		json_object_set_new(j, "truncated", json_true());
	exec_run_free(x);
	return send_json(conn, r, 200, j);
}

static enum MHD_Result exec_sandbox(struct MHD_Connection *conn,
				    struct request *r, struct daemon *d)
{
	struct agent_exec_request req = { 0 };
	char **argv = NULL, **env = NULL;
	void *stdin_data = NULL;
	bool stream = true;
	char err[1024];
	int status = 0;
	enum MHD_Result ret;

	struct sandbox *c = sandbox_get(d, r->id);
	if (!c)
		return no_sandbox(conn, r);
	json_t *body = parse_body(r, err, sizeof(err));
	if (!body)
		status = 400;
	else
		status = parse_exec(body, c, &req, &argv, &env, &stdin_data,
				    &stream, err, sizeof(err));
	struct exec_run *x = status ? NULL : calloc(1, sizeof(*x));
	if (!status && !x) {
		snprintf(err, sizeof(err), "out of memory");
		status = 500;
	}
	if (x) {
		*x = (struct exec_run){ .d = d,
					.clone = c,
					.agent = { .fd = -1 },
					.client_fd = client_fd_of(conn),
					.max_output =
						d->cfg.max_exec_output_bytes };
		c = NULL; /* x holds it now */
		/* Past timeout_s the guest still has to kill and report. */
		if (req.timeout_ms)
			x->deadline_ns = monotonic_ns() +
					 req.timeout_ms * NS_PER_MS +
					 guest_patience_ns(d);
		status = connect_agent(x->clone, &x->agent, err, sizeof(err));
		if (!status) {
			int sent = agent_exec(&x->agent, EXEC_REQUEST_ID, &req);

			if (sent < 0) {
				snprintf(
					err, sizeof(err), "exec: %s",
					sent == -E2BIG
						? "the request does not fit in one agent frame (1 MiB): send large stdin as a file"
						: strerror(-sent));
				status = sent == -E2BIG ? 413 : 500;
			}
		}
	}
	json_decref(body);
	free_strv(argv);
	free_strv(env);
	free(stdin_data);
	if (c)
		sandbox_put(d, c);
	if (status) {
		if (x)
			exec_run_free(x);
		return send_error(conn, r, status, "%s", err);
	}
	if (!stream)
		return exec_collected(conn, r, x);
	struct MHD_Response *resp = MHD_create_response_from_callback(
		MHD_SIZE_UNKNOWN, 64 * 1024, exec_stream_read, x,
		exec_stream_free);
	if (!resp) {
		exec_run_free(x);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"application/x-ndjson");
	ret = send_response(conn, r, 200, resp);
	return ret;
}

/* ---- files ------------------------------------------------------------- */

/* ?path= (absolute, bounded) and ?mode= (octal); 0 or 400 with @err. */
static int file_args(struct MHD_Connection *conn, const char **path,
		     uint32_t *mode, char *err, size_t errlen)
{
	const char *m = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND,
						    "mode");

	*path = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND,
					    "path");
	if (!*path || (*path)[0] != '/' || strlen(*path) > 4095) {
		snprintf(
			err, errlen,
			"?path= must be an absolute path of at most 4095 bytes");
		return 400;
	}
	*mode = 0644;
	if (m) {
		char *end;
		unsigned long v = strtoul(m, &end, 8);

		if (!m[0] || *end || v > 07777) {
			snprintf(
				err, errlen,
				"?mode= must be octal permission bits, at most 07777 (got \"%s\")",
				m);
			return 400;
		}
		*mode = (uint32_t)v;
	}
	return 0;
}

/* An agent ERROR for a file as an HTTP status. */
static int file_status(int e)
{
	switch (e) {
	case ENOENT:
		return 404;
	case EISDIR:
	case EINVAL:
	case ENOTDIR:
	case EEXIST:
	case EACCES:
	case EPERM:
	case EROFS:
		return 409;
	case ENOSPC:
	case EDQUOT:
	case EFBIG:
		return 413;
	default:
		return 500;
	}
}

/* Called per piece of a PUT body: on to the agent, or remember why not. */
static void upload_piece(struct request *r, struct daemon *d,
			 struct MHD_Connection *conn, const char *data,
			 size_t len)
{
	const char *path;
	uint32_t mode;

	if (r->upload_status)
		return;
	if (r->uploaded + len > d->cfg.max_file_bytes) {
		r->upload_status = 413;
		snprintf(r->upload_err, sizeof(r->upload_err),
			 "the file is larger than max_file_bytes (%" PRIu64 ")",
			 d->cfg.max_file_bytes);
		return;
	}
	file_args(conn, &path, &mode, r->upload_err, sizeof(r->upload_err));
	do {
		size_t n = len > AGENT_WRITE_CHUNK ? AGENT_WRITE_CHUNK : len;
		int ret = agent_write_file(&r->agent, FILE_REQUEST_ID,
					   !r->write_open, path, mode, data, n,
					   false);
		if (ret < 0) {
			r->upload_status = 500;
			snprintf(r->upload_err, sizeof(r->upload_err),
				 "sending the file to the guest: %s",
				 strerror(-ret));
			return;
		}
		r->write_open = true;
		r->uploaded += n;
		data += n;
		len -= n;
	} while (len);
}

static enum MHD_Result put_file_begin(struct MHD_Connection *conn,
				      struct request *r, struct daemon *d)
{
	const char *path;
	uint32_t mode;
	char err[512];
	const char *length = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);

	int status = file_args(conn, &path, &mode, err, sizeof(err));
	if (status)
		return send_error(conn, r, status, "%s", err);
	if (length && strtoull(length, NULL, 10) > d->cfg.max_file_bytes)
		return send_error(
			conn, r, 413,
			"the file is larger than max_file_bytes (%" PRIu64 ")",
			d->cfg.max_file_bytes);
	r->clone = sandbox_get(d, r->id);
	if (!r->clone)
		return no_sandbox(conn, r);
	status = connect_agent(r->clone, &r->agent, err, sizeof(err));
	if (status)
		return send_error(conn, r, status, "%s", err);
	return MHD_YES;
}

static enum MHD_Result put_file_end(struct MHD_Connection *conn,
				    struct request *r, struct daemon *d)
{
	char err[512];

	if (!r->upload_status) {
		const char *path;
		uint32_t mode;

		file_args(conn, &path, &mode, err, sizeof(err));
		int ret = agent_write_file(&r->agent, FILE_REQUEST_ID,
					   !r->write_open, path, mode, NULL, 0,
					   true);
		if (ret == 0)
			ret = agent_wait_answer(&r->agent, FILE_REQUEST_ID, err,
						sizeof(err));
		if (ret < 0) {
			r->upload_status = file_status(-ret);
			snprintf(r->upload_err, sizeof(r->upload_err), "%s",
				 err);
		}
	}
	(void)d;
	if (r->upload_status)
		return send_error(conn, r, (unsigned)r->upload_status, "%s",
				  r->upload_err);
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	return send_response(conn, r, 204, resp);
}

struct download {
	struct daemon *d;
	struct sandbox *clone;
	struct agent_conn agent;
	int client_fd;
	struct thaw_frame first; /* a DATA frame read before the headers */
	bool have_first, done;
	uint8_t *data;
	size_t len, off;
};

static void download_free(void *cls)
{
	struct download *dl = cls;

	agent_close(&dl->agent);
	sandbox_put(dl->d, dl->clone);
	free(dl->data);
	free(dl);
}

/*
 * The next DATA payload of our READ_FILE into dl->data: 1, 0 at END, or
 * -1 (error, message in @err with the errno's status in *status).
 */
static int next_data(struct download *dl, char *err, size_t errlen, int *status)
{
	struct thaw_frame f;
	struct thaw_msg m;

	do {
		uint64_t deadline =
			monotonic_ns() + FILE_IDLE_S * 1000ull * NS_PER_MS;
		enum wait_outcome w = wait_agent_or_client(
			dl->d, dl->agent.fd, dl->client_fd, deadline);

		if (w != AGENT_READY) {
			snprintf(
				err, errlen, "%s",
				w == CLIENT_GONE ? "client gone"
				: w == DAEMON_STOPPING
					? "the daemon is shutting down"
					: "the guest stopped sending the file");
			*status = w == GUEST_SILENT ? 504 : 503;
			return -1;
		}
		int ret = agent_next_frame(&dl->agent, &f);
		if (ret < 0) {
			snprintf(err, errlen, "the sandbox's agent went away");
			*status = 500;
			return -1;
		}
	} while (f.h.request_id != FILE_REQUEST_ID);
	if (thaw_parse_type(&m, f.h.type, f.payload, f.payload_len, err,
			    errlen) < 0) {
		*status = 500;
		return -1;
	}
	if (f.h.type == THAW_END)
		return 0;
	if (f.h.type == THAW_ERROR) {
		*status = file_status(agent_error_of(&m, err, errlen));
		return -1;
	}
	if (f.h.type != THAW_DATA) {
		snprintf(err, errlen, "the agent sent %s to READ_FILE",
			 thaw_type_name(f.h.type));
		*status = 500;
		return -1;
	}
	const struct thaw_field *data = thaw_get(&m, THAW_T_DATA);
	uint8_t *copy = realloc(dl->data, data->len ? data->len : 1);
	if (!copy) {
		*status = 500;
		return -1;
	}
	memcpy(copy, data->data, data->len);
	dl->data = copy;
	dl->len = data->len;
	dl->off = 0;
	return 1;
}

static ssize_t download_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct download *dl = cls;
	char err[512];
	int status;

	(void)pos;
	while (dl->off == dl->len) {
		if (dl->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		int got = next_data(dl, err, sizeof(err), &status);
		if (got < 0) {
			/* Headers are out: all we can do is cut the body. */
			fprintf(stderr, "thawd: sandbox %s: download: %s\n",
				dl->clone->id, err);
			return MHD_CONTENT_READER_END_WITH_ERROR;
		}
		dl->done = got == 0;
	}
	size_t n = dl->len - dl->off < max ? dl->len - dl->off : max;
	memcpy(buf, dl->data + dl->off, n);
	dl->off += n;
	return (ssize_t)n;
}

static enum MHD_Result get_file(struct MHD_Connection *conn, struct request *r,
				struct daemon *d)
{
	const char *path;
	uint32_t mode;
	char err[512];
	int status = file_args(conn, &path, &mode, err, sizeof(err));

	if (status)
		return send_error(conn, r, status, "%s", err);
	struct sandbox *c = sandbox_get(d, r->id);
	if (!c)
		return no_sandbox(conn, r);
	struct download *dl = calloc(1, sizeof(*dl));
	if (!dl) {
		sandbox_put(d, c);
		return MHD_NO;
	}
	*dl = (struct download){ .d = d,
				 .clone = c,
				 .agent = { .fd = -1 },
				 .client_fd = client_fd_of(conn) };
	status = connect_agent(c, &dl->agent, err, sizeof(err));
	if (!status && agent_read_file(&dl->agent, FILE_REQUEST_ID, path) < 0) {
		snprintf(err, sizeof(err), "asking the guest for %s failed",
			 path);
		status = 500;
	}
	/* The first answer decides the status: 404 must not be a 200. */
	if (!status) {
		int got = next_data(dl, err, sizeof(err), &status);

		if (got >= 0) {
			status = 0;
			dl->done = got == 0;
		}
	}
	if (status) {
		download_free(dl);
		return send_error(conn, r, status, "%s", err);
	}
	struct MHD_Response *resp = MHD_create_response_from_callback(
		MHD_SIZE_UNKNOWN, 256 * 1024, download_read, dl, download_free);
	if (!resp) {
		download_free(dl);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE,
				"application/octet-stream");
	return send_response(conn, r, 200, resp);
}

/* ---- dispatch ---------------------------------------------------------- */

/* Splits @url into a route and sandbox id. */
static enum route parse_route(const char *url, char *id, size_t idlen)
{
	static const struct {
		const char *path;
		enum route route;
	} fixed[] = {
		{ "/sandboxes", ROUTE_SANDBOXES },
		{ "/templates", ROUTE_TEMPLATES },
		{ "/health", ROUTE_HEALTH },
		{ "/metrics", ROUTE_METRICS },
	};
	static const struct {
		const char *suffix;
		enum route route;
	} sub[] = {
		{ "", ROUTE_SANDBOX },	       { "/exec", ROUTE_EXEC },
		{ "/timeout", ROUTE_TIMEOUT }, { "/ping", ROUTE_PING },
		{ "/files", ROUTE_FILES },
	};

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		if (!strcmp(url, fixed[i].path) ||
		    (url[strlen(fixed[i].path)] == '/' &&
		     !url[strlen(fixed[i].path) + 1] &&
		     !strncmp(url, fixed[i].path, strlen(fixed[i].path))))
			return fixed[i].route;
	if (strncmp(url, "/sandboxes/", 11))
		return ROUTE_NONE;
	url += 11;
	size_t n = strcspn(url, "/");
	if (!n)
		return ROUTE_NONE;
	/* An id too long to be one is still a sandbox route: 404 there. */
	snprintf(id, idlen, "%.*s", (int)n, url);
	for (size_t i = 0; i < sizeof(sub) / sizeof(sub[0]); i++)
		if (!strcmp(url + n, sub[i].suffix))
			return sub[i].route;
	return ROUTE_NONE;
}

/* The methods each route takes, for 405's Allow header. */
static const char *allowed_methods(enum route route)
{
	switch (route) {
	case ROUTE_SANDBOXES:
		return "GET, POST";
	case ROUTE_SANDBOX:
		return "GET, DELETE";
	case ROUTE_EXEC:
	case ROUTE_TIMEOUT:
	case ROUTE_PING:
		return "POST";
	case ROUTE_FILES:
		return "GET, PUT";
	default:
		return "GET";
	}
}

static bool method_allowed(enum route route, const char *method)
{
	const char *allowed = allowed_methods(route);
	size_t n = strlen(method);

	for (const char *p = allowed; (p = strstr(p, method)); p += n)
		if ((p == allowed || p[-1] == ' ') && (!p[n] || p[n] == ','))
			return true;
	return false;
}

static bool authorized(struct MHD_Connection *conn, const struct daemon *d)
{
	const char *token = d->cfg.token;
	const char *given = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
	unsigned char diff = 0;

	if (!token[0])
		return true;
	if (!given || strncmp(given, "Bearer ", 7))
		return false;
	given += 7;
	size_t n = strlen(token);
	if (strlen(given) != n)
		return false;
	/* Constant time: the token is a secret. */
	for (size_t i = 0; i < n; i++)
		diff |= (unsigned char)(given[i] ^ token[i]);
	return diff == 0;
}

/* First call of a request: everything the headers alone decide. */
static enum MHD_Result begin(struct MHD_Connection *conn, struct request *r,
			     struct daemon *d, const char *url,
			     const char *method)
{
	r->route = parse_route(url, r->id, sizeof(r->id));
	if (!authorized(conn, d))
		return send_error(
			conn, r, 401,
			"missing or wrong \"Authorization: Bearer\" token");
	if (r->route == ROUTE_NONE)
		return send_error(conn, r, 404, "no such route: %s %s", method,
				  url);
	if (!method_allowed(r->route, method)) {
		char msg[128];

		snprintf(msg, sizeof(msg), "%s takes %s, not %s", url,
			 allowed_methods(r->route), method);
		return send_error_allow(conn, r, 405, allowed_methods(r->route),
					msg);
	}
	if (r->route == ROUTE_FILES && !strcmp(method, "PUT"))
		return put_file_begin(conn, r, d);
	const char *length = MHD_lookup_connection_value(
		conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (length && strtoull(length, NULL, 10) > d->cfg.max_request_bytes)
		return send_error(
			conn, r, 413,
			"the body is larger than max_request_bytes (%" PRIu64
			")",
			d->cfg.max_request_bytes);
	return MHD_YES;
}

/* A piece of a JSON body. */
static void take_body(struct request *r, struct daemon *d, const char *data,
		      size_t len)
{
	if (r->too_large || r->len + len > d->cfg.max_request_bytes) {
		r->too_large = true;
		return;
	}
	char *grown = realloc(r->body, r->len + len);
	if (!grown) {
		r->too_large = true;
		return;
	}
	memcpy(grown + r->len, data, len);
	r->body = grown;
	r->len += len;
}

static enum MHD_Result answer(struct MHD_Connection *conn, struct request *r,
			      struct daemon *d, const char *method)
{
	bool get = !strcmp(method, "GET");

	if (r->too_large)
		return send_error(
			conn, r, 413,
			"the body is larger than max_request_bytes (%" PRIu64
			")",
			d->cfg.max_request_bytes);
	switch (r->route) {
	case ROUTE_SANDBOXES:
		return get ? list_sandboxes(conn, r, d)
			   : create_sandbox(conn, r, d);
	case ROUTE_SANDBOX:
		if (get)
			return get_sandbox(conn, r, d);
		if (!sandbox_release(d, r->id))
			return no_sandbox(conn, r);
		return send_response(conn, r, 204,
				     MHD_create_response_from_buffer(
					     0, "", MHD_RESPMEM_PERSISTENT));
	case ROUTE_EXEC:
		return exec_sandbox(conn, r, d);
	case ROUTE_TIMEOUT:
		return set_timeout(conn, r, d);
	case ROUTE_PING:
		return ping_sandbox(conn, r, d);
	case ROUTE_FILES:
		return get ? get_file(conn, r, d) : put_file_end(conn, r, d);
	case ROUTE_TEMPLATES:
		return get_templates(conn, r, d);
	case ROUTE_HEALTH:
		return get_health(conn, r, d);
	case ROUTE_METRICS:
		return get_metrics(conn, r, d);
	default:
		return send_error(conn, r, 404, "no such route");
	}
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *conn,
			      const char *url, const char *method,
			      const char *version, const char *upload_data,
			      size_t *upload_data_size, void **con_cls)
{
	struct daemon *d = cls;
	struct request *r = *con_cls;

	(void)version;
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return MHD_NO;
		r->agent.fd = -1;
		r->d = d;
		*con_cls = r;
		return begin(conn, r, d, url, method);
	}
	if (r->answered) {
		/* Answered early (an error): the rest of the body is
		 * dropped. */
		*upload_data_size = 0;
		return MHD_YES;
	}
	if (*upload_data_size) {
		if (r->route == ROUTE_FILES)
			upload_piece(r, d, conn, upload_data,
				     *upload_data_size);
		else
			take_body(r, d, upload_data, *upload_data_size);
		*upload_data_size = 0;
		return MHD_YES;
	}
	return answer(conn, r, d, method);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		      enum MHD_RequestTerminationCode why)
{
	struct request *r = *con_cls;

	(void)conn;
	(void)why;
	if (!r)
		return;
	/* An upload cut short: closing the connection makes the agent drop
	 * the half-written file (PROTOCOL.md). */
	agent_close(&r->agent);
	if (r->clone)
		sandbox_put(cls, r->clone);
	free(r->body);
	free(r);
	*con_cls = NULL;
}

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
	(void)cls;
	fputs("thawd: http: ", stderr);
	vfprintf(stderr, fmt, ap);
}

struct MHD_Daemon *api_start(struct daemon *d, int fd)
{
	struct MHD_Daemon *server = MHD_start_daemon(
		MHD_USE_THREAD_PER_CONNECTION |
			MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
			MHD_USE_ERROR_LOG,
		0, NULL, NULL, handle, d, MHD_OPTION_EXTERNAL_LOGGER, log_mhd,
		NULL, MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT,
		(unsigned)d->cfg.max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
		(unsigned)CONNECTION_TIMEOUT_S, MHD_OPTION_NOTIFY_COMPLETED,
		completed, d, MHD_OPTION_END);

	if (!server)
		fprintf(stderr, "thawd: cannot start the HTTP server\n");
	return server;
}

void api_stop(struct MHD_Daemon *server)
{
	if (server)
		MHD_stop_daemon(server);
}
