// SPDX-License-Identifier: Apache-2.0
/*
 * thawd_client.c - starting thawd for a bench scenario and calling its API.
 *
 * The daemon is a child of the bench (fork + exec of `thaw daemon`), with
 * PR_SET_PDEATHSIG so a bench killed mid-run takes its daemon, and the
 * daemon its clones, along.  HTTP goes through libcurl's Unix-socket
 * support; answers are parsed with jansson.  Times are CLOCK_MONOTONIC.
 */
#include "thawd_client.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

#define START_LIMIT_S 900 /* a first start builds the template's snapshot */
#define STOP_LIMIT_S 120
#define CALL_TIMEOUT_S 600

double bench_now_ms(void)
{
	return monotonic_ms();
}

static void pause_ms(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&t, NULL);
}

void thawd_log_tail(const struct thawd *d, char *out, size_t len)
{
	FILE *f = fopen(d->log, "r");
	size_t n = 0;

	out[0] = '\0';
	if (!f)
		return;
	fseek(f, 0, SEEK_END);
	long size = ftell(f);
	long from = size > (long)len - 1 ? size - (long)len + 1 : 0;
	fseek(f, from, SEEK_SET);
	n = fread(out, 1, len - 1, f);
	out[n] = '\0';
	fclose(f);
}

static int write_config(const struct thawd *d, const char *kernel,
			const char *initrd,
			const struct template_spec *templates, size_t n,
			unsigned max_sandboxes, char *err, size_t errlen)
{
	FILE *f = fopen(d->config, "w");

	if (!f) {
		snprintf(err, errlen, "%s: %s", d->config, strerror(errno));
		return -1;
	}
	fprintf(f, "[daemon]\nstate_dir = %s\nsocket = %s\n", d->state_dir,
		d->socket);
	fprintf(f, "max_sandboxes = %u\nrestore_timeout_s = 600\n",
		max_sandboxes);
	for (size_t i = 0; i < n; i++) {
		const struct template_spec *t = &templates[i];

		fprintf(f, "\n[template %s]\nkernel = %s\ninitrd = %s\n",
			t->name, kernel, initrd);
		/* Idle sandboxes must outlive the longest scenario. */
		fprintf(f, "timeout_s = 7200\n");
		if (t->mem_mib)
			fprintf(f, "mem_mib = %u\n", t->mem_mib);
		fprintf(f, "min_ready = %u\n", t->min_ready);
		if (t->max_total)
			fprintf(f, "max_total = %u\n", t->max_total);
		if (t->restore_parallel)
			fprintf(f, "restore_parallel = %u\n",
				t->restore_parallel);
		if (t->page_in)
			fprintf(f, "page_in = %s\n", t->page_in);
	}
	if (fclose(f)) {
		snprintf(err, errlen, "%s: %s", d->config, strerror(errno));
		return -1;
	}
	return 0;
}

int thawd_start(struct thawd *d, const char *thaw, const char *state_dir,
		const char *kernel, const char *initrd,
		const struct template_spec *templates, size_t n,
		unsigned max_sandboxes, char *err, size_t errlen)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->state_dir, sizeof(d->state_dir), "%s", state_dir);
	snprintf(d->socket, sizeof(d->socket), "%s/thawd.sock", state_dir);
	snprintf(d->config, sizeof(d->config), "%s/bench.ini", state_dir);
	snprintf(d->log, sizeof(d->log), "%s/thawd.log", state_dir);
	if (write_config(d, kernel, initrd, templates, n, max_sandboxes, err,
			 errlen))
		return -1;
	int log = open(d->log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (log < 0) {
		snprintf(err, errlen, "%s: %s", d->log, strerror(errno));
		return -1;
	}
	pid_t parent = getpid();
	d->pid = fork();
	if (d->pid < 0) {
		snprintf(err, errlen, "fork: %s", strerror(errno));
		close(log);
		return -1;
	}
	if (!d->pid) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(127);
		dup2(log, 1);
		dup2(log, 2);
		execl(thaw, thaw, "daemon", "--config", d->config,
		      (char *)NULL);
		fprintf(stderr, "thaw-bench: %s: %s\n", thaw, strerror(errno));
		_exit(127);
	}
	close(log);

	struct thawd_conn c;
	if (thawd_connect(&c, d)) {
		snprintf(err, errlen, "libcurl: no handle");
		thawd_stop(d, NULL, 0);
		return -1;
	}
	double until = bench_now_ms() + START_LIMIT_S * 1e3;
	for (;;) {
		char why[256];
		json_t *reply = NULL;
		int status;

		if (waitpid(d->pid, &status, WNOHANG) == d->pid) {
			char tail[1024];

			d->pid = 0;
			thawd_log_tail(d, tail, sizeof(tail));
			snprintf(err, errlen,
				 "thaw daemon exited (status %d): %s", status,
				 tail);
			break;
		}
		if (!access(d->socket, F_OK) &&
		    thawd_call(&c, "GET", "/health", NULL, &reply, why,
			       sizeof(why)) == 200) {
			json_decref(reply);
			thawd_disconnect(&c);
			return 0;
		}
		json_decref(reply);
		if (bench_now_ms() > until) {
			snprintf(err, errlen,
				 "thaw daemon not serving after %d s (log %s)",
				 START_LIMIT_S, d->log);
			thawd_stop(d, NULL, 0);
			break;
		}
		pause_ms(100);
	}
	thawd_disconnect(&c);
	return -1;
}

int thawd_stop(struct thawd *d, char *err, size_t errlen)
{
	int status;

	if (d->pid <= 0)
		return 0;
	kill(d->pid, SIGTERM);
	double until = bench_now_ms() + STOP_LIMIT_S * 1e3;
	while (waitpid(d->pid, &status, WNOHANG) == 0) {
		if (bench_now_ms() > until) {
			kill(d->pid, SIGKILL);
			waitpid(d->pid, &status, 0);
			d->pid = 0;
			if (err)
				snprintf(err, errlen,
					 "thaw daemon ignored SIGTERM for %d s",
					 STOP_LIMIT_S);
			return -1;
		}
		pause_ms(50);
	}
	d->pid = 0;
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		if (err)
			snprintf(err, errlen,
				 "thaw daemon ended with status %d", status);
		return -1;
	}
	return 0;
}

int thawd_connect(struct thawd_conn *c, const struct thawd *d)
{
	c->d = d;
	c->curl = curl_easy_init();
	return c->curl ? 0 : -1;
}

void thawd_disconnect(struct thawd_conn *c)
{
	if (c->curl)
		curl_easy_cleanup(c->curl);
	c->curl = NULL;
}

struct body {
	char *data;
	size_t len;
};

static size_t collect(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	char *more = realloc(b->data, b->len + size * n + 1);

	if (!more)
		return 0;
	memcpy(more + b->len, p, size * n);
	b->data = more;
	b->len += size * n;
	b->data[b->len] = '\0';
	return size * n;
}

/* One request; the answer's body (NUL-terminated, or NULL) into @body. */
static long call(struct thawd_conn *c, const char *method, const char *path,
		 const char *body, struct body *got, char *err, size_t errlen)
{
	char url[512];
	long status = -1;
	CURL *h = c->curl;

	snprintf(url, sizeof(url), "http://thaw%s", path);
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->d->socket);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)CALL_TIMEOUT_S);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, got);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	} else if (!strcmp(method, "POST")) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
	}
	CURLcode rc = curl_easy_perform(h);
	if (rc != CURLE_OK)
		snprintf(err, errlen, "%s %s: %s", method, path,
			 curl_easy_strerror(rc));
	else
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	return status;
}

long thawd_call(struct thawd_conn *c, const char *method, const char *path,
		const char *body, json_t **reply, char *err, size_t errlen)
{
	struct body got = { 0 };
	long status = call(c, method, path, body, &got, err, errlen);

	*reply = NULL;
	if (status > 0 && got.len)
		*reply = json_loadb(got.data, got.len, 0, NULL);
	if (status >= 300) {
		json_t *e = json_object_get(*reply, "error");
		const char *m =
			json_string_value(json_object_get(e, "message"));

		snprintf(err, errlen, "%s %s: %ld %s", method, path, status,
			 m ? m : (got.data ? got.data : ""));
	}
	free(got.data);
	return status;
}

double thawd_metric(struct thawd_conn *c, const char *metric,
		    const char *template)
{
	struct body got = { 0 };
	char err[256], line[256];
	double value = -1;

	snprintf(line, sizeof(line), "%s{template=\"%s\"} ", metric, template);
	if (call(c, "GET", "/metrics", NULL, &got, err, sizeof(err)) == 200 &&
	    got.data) {
		const char *at = strstr(got.data, line);

		if (at)
			value = strtod(at + strlen(line), NULL);
	}
	free(got.data);
	return value;
}

int thawd_pool(struct thawd_conn *c, const char *name, struct pool_state *p,
	       char *err, size_t errlen)
{
	json_t *reply, *t;
	size_t i;

	if (thawd_call(c, "GET", "/templates", NULL, &reply, err, errlen) !=
	    200) {
		json_decref(reply);
		return -1;
	}
	json_array_foreach(json_object_get(reply, "templates"), i, t)
	{
		const char *n = json_string_value(json_object_get(t, "name"));
		const char *s =
			json_string_value(json_object_get(t, "snapshot"));

		if (!n || strcmp(n, name))
			continue;
		snprintf(p->snapshot, sizeof(p->snapshot), "%s", s ? s : "");
		p->ready = json_integer_value(json_object_get(t, "ready"));
		p->restoring =
			json_integer_value(json_object_get(t, "restoring"));
		p->leased = json_integer_value(json_object_get(t, "leased"));
		json_decref(reply);
		return 0;
	}
	json_decref(reply);
	snprintf(err, errlen, "GET /templates: no template \"%s\"", name);
	return -1;
}

int thawd_wait_ready(struct thawd_conn *c, const char *name, long ready,
		     double limit_s, char *err, size_t errlen)
{
	double until = bench_now_ms() + limit_s * 1e3;
	struct pool_state p = { 0 };

	for (;;) {
		if (thawd_pool(c, name, &p, err, errlen))
			return -1;
		if (p.ready >= ready && !p.restoring)
			return 0;
		if (bench_now_ms() > until) {
			snprintf(err, errlen,
				 "template %s: %ld ready, %ld restoring after "
				 "%.0f s, want %ld ready",
				 name, p.ready, p.restoring, limit_s, ready);
			return -1;
		}
		pause_ms(20);
	}
}

int thawd_handout(struct thawd_conn *c, const char *template, struct handout *h,
		  char *err, size_t errlen)
{
	char body[128], path[96];
	json_t *reply;
	double start = bench_now_ms();

	snprintf(body, sizeof(body), "{\"template\":\"%s\"}", template);
	long status =
		thawd_call(c, "POST", "/sandboxes", body, &reply, err, errlen);
	const char *got = json_string_value(json_object_get(reply, "id"));
	if (status != 201 || !got) {
		if (status == 201)
			snprintf(err, errlen, "POST /sandboxes: no id");
		json_decref(reply);
		return -1;
	}
	snprintf(h->id, sizeof(h->id), "%s", got);
	h->restore_ms = json_number_value(json_object_get(reply, "restore_ms"));
	json_decref(reply);
	snprintf(path, sizeof(path), "/sandboxes/%s/ping", h->id);
	status = thawd_call(c, "POST", path, NULL, &reply, err, errlen);
	h->ms = bench_now_ms() - start;
	json_decref(reply);
	return status == 200 ? 0 : -1;
}

int thawd_exec_true(struct thawd_conn *c, const char *id, double *ms, char *err,
		    size_t errlen)
{
	char path[96];
	json_t *reply;
	double start = bench_now_ms();

	snprintf(path, sizeof(path), "/sandboxes/%s/exec", id);
	long status = thawd_call(c, "POST", path,
				 "{\"argv\":[\"true\"],\"stream\":false}",
				 &reply, err, errlen);
	*ms = bench_now_ms() - start;
	json_t *code = json_object_get(reply, "exit_code");
	int ok = status == 200 && json_integer_value(code) == 0 && code;
	if (status == 200 && !ok)
		snprintf(err, errlen, "%s: `true` did not exit 0", path);
	json_decref(reply);
	return ok ? 0 : -1;
}

int thawd_release(struct thawd_conn *c, const char *id, char *err,
		  size_t errlen)
{
	char path[96];
	json_t *reply;

	snprintf(path, sizeof(path), "/sandboxes/%s", id);
	long status = thawd_call(c, "DELETE", path, NULL, &reply, err, errlen);
	json_decref(reply);
	return status == 204 ? 0 : -1;
}
