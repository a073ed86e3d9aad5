// SPDX-License-Identifier: Apache-2.0
/*
 * thaw_client.c - a connection to thawd and thaw_client_call(), the one
 * place that talks to libcurl (the typed helpers are in typed_calls.c).
 *
 * One libcurl easy handle per connection, reset rather than recreated
 * between calls so its connection to the daemon stays open.  libcurl's
 * global state is set up once per process (pthread_once), as threads may
 * open connections at the same time, and never torn down: a library cannot
 * know that its caller is done with libcurl.  libcurl must not touch
 * signals (CURLOPT_NOSIGNAL): the caller's handlers own them, and there is
 * no name to resolve on a Unix socket.  The progress callback runs during
 * waits too, which is how the cancel flag ends even a silent exec.
 */
#include "pool/client/client_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/printable.h"

/* Answers we buffer (JSON, errors) are small; more is a broken daemon. */
#define ANSWER_MAX (16 << 20)
/* A socket path's room in struct sockaddr_un, its NUL included. */
#define SUN_PATH_MAX sizeof(((struct sockaddr_un *)NULL)->sun_path)

struct thaw_client {
	CURL *curl;
	struct curl_slist *headers; /* the token's, or NULL */
	char socket[SUN_PATH_MAX];
	unsigned timeout_s;
	volatile sig_atomic_t *cancel;
	char curl_error[CURL_ERROR_SIZE];
};

/* One exchange: what the callbacks need. */
struct exchange {
	struct thaw_client *c;
	const struct thaw_call *q;
	struct thaw_reply *r;
	int failed; /* a callback's code (its message in @err), or 0 */
	char *err;
	size_t errlen;
};

int client_fail(int code, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	/* It quotes the daemon's text, which its caller prints. */
	if (errlen)
		printable(err);
	return code;
}

static bool canceled(const struct thaw_client *c)
{
	return c->cancel && *c->cancel;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void)
{
	curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

struct thaw_client *thaw_client_open(const struct thaw_client_options *o,
				     char *err, size_t errlen)
{
	struct thaw_client *c = calloc(1, sizeof(*c));
	char *header = NULL;

	if (!c)
		goto oom;
	if (!o->socket) {
		client_fail(THAW_CLIENT_LOCAL, err, errlen,
			    "no socket for the daemon");
		free(c);
		return NULL;
	}
	/* libcurl would say so too, but as if the daemon had been lost. */
	if (snprintf(c->socket, sizeof(c->socket), "%s", o->socket) >=
	    (int)sizeof(c->socket)) {
		client_fail(THAW_CLIENT_LOCAL, err, errlen,
			    "the daemon's socket path is over %zu bytes: %s",
			    SUN_PATH_MAX - 1, o->socket);
		free(c);
		return NULL;
	}
	c->timeout_s = o->timeout_s;
	c->cancel = o->cancel;
	pthread_once(&curl_once, curl_init);
	if (curl_init_result != CURLE_OK || !(c->curl = curl_easy_init())) {
		client_fail(THAW_CLIENT_LOCAL, err, errlen,
			    "cannot start libcurl");
		free(c);
		return NULL;
	}
	if (o->token && *o->token) {
		if (asprintf(&header, "Authorization: Bearer %s", o->token) <
			    0 ||
		    !(c->headers = curl_slist_append(NULL, header)))
			goto oom;
		free(header);
	}
	return c;
oom:
	free(header);
	thaw_client_close(c);
	client_fail(THAW_CLIENT_LOCAL, err, errlen, "out of memory");
	return NULL;
}

void thaw_client_close(struct thaw_client *c)
{
	if (!c)
		return;
	if (c->curl)
		curl_easy_cleanup(c->curl);
	curl_slist_free_all(c->headers);
	free(c);
}

char *client_escape(struct thaw_client *c, const char *s, size_t len)
{
	char *escaped = curl_easy_escape(c->curl, s, len);
	char *copy = escaped ? strdup(escaped) : NULL;

	/* curl_free() is not free(): callers get a plain malloc'd string. */
	curl_free(escaped);
	return copy;
}

/* Appends @len bytes to a NUL-terminated buffer; false when out of room. */
static bool append(char **buf, size_t *buf_len, const void *data, size_t len)
{
	char *grown;

	if (*buf_len + len > ANSWER_MAX ||
	    !(grown = realloc(*buf, *buf_len + len + 1)))
		return false;
	memcpy(grown + *buf_len, data, len);
	*buf_len += len;
	grown[*buf_len] = '\0';
	*buf = grown;
	return true;
}

static size_t on_body(char *data, size_t size, size_t n, void *arg)
{
	struct exchange *x = arg;
	size_t len = size * n;

	if (!x->r->status)
		curl_easy_getinfo(x->c->curl, CURLINFO_RESPONSE_CODE,
				  &x->r->status);
	/* An error answer is the daemon's JSON message, never the sink's. */
	if (x->q->sink && x->r->status / 100 == 2) {
		x->failed = x->q->sink(data, len, x->q->sink_arg, x->err,
				       x->errlen);
		return x->failed ? 0 : len;
	}
	if (append(&x->r->body, &x->r->len, data, len))
		return len;
	if (x->r->len + len > ANSWER_MAX)
		x->failed = client_fail(THAW_CLIENT_ANSWER, x->err, x->errlen,
					"the daemon's answer is over %d MiB",
					ANSWER_MAX >> 20);
	else
		x->failed =
			client_fail(THAW_CLIENT_LOCAL, x->err, x->errlen,
				    "out of memory for the daemon's answer");
	return 0;
}

/* Keeps the final answer's header lines only (not a 100 Continue's). */
static size_t on_header(char *data, size_t size, size_t n, void *arg)
{
	struct thaw_reply *r = arg;
	size_t len = size * n;

	if (len >= 5 && !memcmp(data, "HTTP/", 5))
		r->headers_len = 0;
	/* A header over the cap is dropped: none the API sends is. */
	append(&r->headers, &r->headers_len, data, len);
	return len;
}

static size_t on_upload(char *buf, size_t size, size_t n, void *arg)
{
	struct exchange *x = arg;

	for (;;) {
		ssize_t got = read(x->q->upload->fd, buf, size * n);

		if (got >= 0)
			return got;
		if (errno == EINTR && !canceled(x->c))
			continue;
		if (!canceled(x->c))
			x->failed = client_fail(THAW_CLIENT_LOCAL, x->err,
						x->errlen, "cannot read %s: %s",
						x->q->upload->name,
						strerror(errno));
		return CURL_READFUNC_ABORT;
	}
}

static int on_progress(void *arg, curl_off_t dltotal, curl_off_t dlnow,
		       curl_off_t ultotal, curl_off_t ulnow)
{
	struct exchange *x = arg;

	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return canceled(x->c);
}

/* "<status> <code>: <message>" from an error answer (API.md). */
static int status_error(const struct thaw_reply *r, char *err, size_t errlen)
{
	json_t *j = json_loadb(r->body ? r->body : "", r->len, 0, NULL);
	json_t *e = json_object_get(j, "error");
	const char *code = json_string_value(json_object_get(e, "code"));
	const char *message = json_string_value(json_object_get(e, "message"));

	if (code && message)
		client_fail(THAW_CLIENT_STATUS, err, errlen, "%ld %s: %s",
			    r->status, code, message);
	else
		client_fail(THAW_CLIENT_STATUS, err, errlen,
			    "%ld from the daemon, without an error message",
			    r->status);
	json_decref(j);
	return THAW_CLIENT_STATUS;
}

static int transport_error(struct thaw_client *c, CURLcode rc, char *err,
			   size_t errlen)
{
	long os_errno = 0;
	const char *reason =
		c->curl_error[0] ? c->curl_error : curl_easy_strerror(rc);

	if (rc != CURLE_COULDNT_CONNECT)
		return client_fail(THAW_CLIENT_TRANSPORT, err, errlen,
				   "lost the daemon at %s: %s", c->socket,
				   reason);
	/* The socket's own errno says more than curl's "Couldn't connect". */
	curl_easy_getinfo(c->curl, CURLINFO_OS_ERRNO, &os_errno);
	return client_fail(THAW_CLIENT_UNREACHABLE, err, errlen,
			   "cannot reach the daemon at %s: %s", c->socket,
			   os_errno ? strerror(os_errno) : reason);
}

/* @line added to *@list; false when out of memory, *@list (the caller's
 * to free) unchanged, not lost as curl_slist_append()'s NULL would. */
static bool add_header(struct curl_slist **list, const char *line)
{
	struct curl_slist *l = curl_slist_append(*list, line);

	if (l)
		*list = l;
	return l != NULL;
}

/* The handle set up for @x; false after @err when a header will not fit. */
static bool prepare(struct exchange *x, char *url, struct curl_slist **extra)
{
	struct thaw_client *c = x->c;
	const struct thaw_call *q = x->q;
	CURL *h = c->curl;
	unsigned timeout_s = q->timeout_s ? q->timeout_s : c->timeout_s;
	struct curl_slist *headers = c->headers;

	if (q->expect_continue) {
		/* The token's list, plus one line, without touching it. */
		for (struct curl_slist *l = c->headers; l; l = l->next)
			if (!add_header(extra, l->data))
				return false;
		if (!add_header(extra, "Expect: 100-continue"))
			return false;
		headers = *extra;
	}
	c->curl_error[0] = '\0';
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->socket);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, c->curl_error);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)timeout_s);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, x->r);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, x);
	if (q->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
				 (curl_off_t)q->len);
	}
	if (q->upload) {
		curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(h, CURLOPT_READFUNCTION, on_upload);
		curl_easy_setopt(h, CURLOPT_READDATA, x);
		curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE,
				 (curl_off_t)q->upload->size);
	}
	return true;
}

int thaw_client_call(struct thaw_client *c, const struct thaw_call *q,
		     struct thaw_reply *r, char *err, size_t errlen)
{
	struct exchange x = {
		.c = c, .q = q, .r = r, .err = err, .errlen = errlen
	};
	struct curl_slist *extra = NULL;
	char *url = NULL;
	int ret;

	memset(r, 0, sizeof(*r));
	if (asprintf(&url, "http://thaw%s", q->path) < 0) {
		url = NULL;
		ret = client_fail(THAW_CLIENT_LOCAL, err, errlen,
				  "out of memory for the request");
		goto out;
	}
	if (!prepare(&x, url, &extra)) {
		ret = client_fail(THAW_CLIENT_LOCAL, err, errlen,
				  "out of memory for the request");
		goto out;
	}
	CURLcode rc = curl_easy_perform(c->curl);
	curl_easy_getinfo(c->curl, CURLINFO_TOTAL_TIME, &r->seconds);
	if (rc == CURLE_OK)
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &r->status);
	if (canceled(c))
		ret = client_fail(THAW_CLIENT_CANCELED, err, errlen,
				  "interrupted");
	else if (x.failed)
		ret = x.failed;
	else if (rc != CURLE_OK)
		ret = transport_error(c, rc, err, errlen);
	else if (r->status / 100 != 2)
		ret = status_error(r, err, errlen);
	else
		ret = 0;
out:
	curl_slist_free_all(extra);
	free(url);
	return ret;
}

void thaw_reply_free(struct thaw_reply *r)
{
	free(r->body);
	free(r->headers);
	memset(r, 0, sizeof(*r));
}

bool thaw_reply_header(const struct thaw_reply *r, const char *name, char *out,
		       size_t len)
{
	size_t name_len = strlen(name);
	const char *line = r->headers, *end = line + r->headers_len;

	while (line && line < end) {
		const char *eol = memchr(line, '\n', end - line);
		const char *next = eol ? eol + 1 : end;

		if (next - line > (long)name_len &&
		    !strncasecmp(line, name, name_len) &&
		    line[name_len] == ':') {
			const char *v = line + name_len + 1;

			while (v < next && (*v == ' ' || *v == '\t'))
				v++;
			while (next > v &&
			       (next[-1] == '\r' || next[-1] == '\n' ||
				next[-1] == ' '))
				next--;
			snprintf(out, len, "%.*s", (int)(next - v), v);
			return true;
		}
		line = next;
	}
	return false;
}

bool thaw_client_is_text(const char *s)
{
	json_t *j = json_string(s);

	json_decref(j);
	return j != NULL;
}
