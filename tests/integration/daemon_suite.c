// SPDX-License-Identifier: Apache-2.0
/*
 * daemon_suite.c - see daemon_suite.h.
 */
#include "tests/integration/daemon_suite.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/magic.h>
#include <math.h>
#include <nettle/base64.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "pool/client/thaw_client.h"
#include "pool/client/thawd_process.h"
#include "tests/integration/harness.h"

const char *const templates[] = { "default", "tight", "bomb" };

struct daemon_files files;

double now_s(void)
{
	return monotonic_ns() / 1e9;
}

double process_cpu_s(pid_t pid)
{
	char path[64], stat[1024];
	unsigned long long user = 0, sys = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	size_t n = fread(stat, 1, sizeof(stat) - 1, f);
	fclose(f);
	stat[n] = '\0';
	/* After the name in parentheses (which may hold spaces): state is
	 * field 3, utime and stime fields 14 and 15. */
	char *after = strrchr(stat, ')');
	if (!after || sscanf(after + 2,
			     "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u "
			     "%llu %llu",
			     &user, &sys) != 2)
		return 0;
	return (double)(user + sys) / (double)sysconf(_SC_CLK_TCK);
}

void sleep_s(double s)
{
	sleep_ms(s * 1e3);
}

char *slurp(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t n = 0, cap = 4096;
	char *buf = fd < 0 ? NULL : malloc(cap);
	ssize_t got;

	if (!buf) {
		if (fd >= 0)
			close(fd);
		return NULL;
	}
	while ((got = read(fd, buf + n, cap - n - 1)) > 0) {
		n += got;
		if (cap - n - 1 == 0) {
			char *grown = realloc(buf, cap *= 2);

			if (!grown)
				break;
			buf = grown;
		}
	}
	close(fd);
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

bool files_in(const char *state)
{
	if (!state || strlen(state) > sizeof(files.socket) - 16)
		return false;
	snprintf(files.state, sizeof(files.state), "%s", state);
	snprintf(files.config, sizeof(files.config), "%s/thawd-test.ini",
		 state);
	snprintf(files.socket, sizeof(files.socket), "%s/thawd.sock", state);
	snprintf(files.log, sizeof(files.log), "%s/thawd.log", state);
	snprintf(files.pid, sizeof(files.pid), "%s/test_daemon.pid", state);
	return true;
}

/* Fills files from THAW_STATE_DIR; false when it is not set. */
static bool find_files(void)
{
	return files_in(getenv("THAW_STATE_DIR"));
}

/* ---- HTTP ---- */

void request(const struct call *q, struct reply *r)
{
	const struct thaw_client_options o = {
		.socket = files.socket,
		.token = q->no_token ? NULL : TOKEN,
		.timeout_s = q->limit_s ? q->limit_s : scaled_s(HTTP_LIMIT_S),
	};
	/* A large body waits for the go-ahead, so that a refusal (413) is
	 * read rather than written into: the daemon may close at once. */
	const struct thaw_call call = { .method = q->method,
					.path = q->path,
					.body = q->body,
					.len = q->len,
					.expect_continue =
						q->len > EXPECT_BYTES };
	struct thaw_reply got = { 0 };
	char err[1024];
	struct thaw_client *c = thaw_client_open(&o, err, sizeof(err));
	int ret = c ? thaw_client_call(c, &call, &got, err, sizeof(err))
		    : THAW_CLIENT_LOCAL;

	memset(r, 0, sizeof(*r));
	r->seconds = got.seconds;
	if (ret == 0 || ret == THAW_CLIENT_STATUS) {
		r->status = got.status;
		r->body = got.body ? got.body : calloc(1, 1);
		r->len = got.len;
		got.body = NULL;
		thaw_reply_header(&got, "Content-Type", r->type,
				  sizeof(r->type));
		thaw_reply_header(&got, "Allow", r->allow, sizeof(r->allow));
		thaw_reply_header(&got, "Retry-After", r->retry_after,
				  sizeof(r->retry_after));
		r->json = json_loadb(r->body, r->len, 0, NULL);
	} else {
		r->body = strdup(err);
		r->len = strlen(r->body);
	}
	thaw_reply_free(&got);
	thaw_client_close(c);
}

void reply_free(struct reply *r)
{
	json_decref(r->json);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

__attribute__((format(printf, 4, 5))) long api(struct reply *r,
					       const char *method,
					       const char *body,
					       const char *path_fmt, ...)
{
	char path[4096];
	va_list ap;

	va_start(ap, path_fmt);
	vsnprintf(path, sizeof(path), path_fmt, ap);
	va_end(ap);
	request(&(struct call){ .method = method,
				.path = path,
				.body = body,
				.len = body ? strlen(body) : 0 },
		r);
	return r->status;
}

const char *jstr(const json_t *o, const char *key)
{
	const char *s = json_string_value(json_object_get(o, key));

	return s ? s : "";
}

double jnum(const json_t *o, const char *key)
{
	json_t *v = json_object_get(o, key);

	return json_is_number(v) ? json_number_value(v) : NAN;
}

void check_restore_phases(const json_t *sb, char *problem, size_t len)
{
	const char *const phases[] = {
		"host_ms",	    "vmm_start_ms",	"page_in_ms",
		"prefetched_pages", "state_restore_ms", "guest_ms",
		"agent_ms",	    "identity_ms",	"network_ms",
	};
	const json_t *p = json_object_get(sb, "restore");
	char *text = json_dumps(sb, JSON_COMPACT);
	const double rounding = 0.02;

	problem[0] = '\0';
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++)
		if (!(jnum(p, phases[i]) >= 0)) {
			snprintf(problem, len, "restore.%s is %f: %.400s",
				 phases[i], jnum(p, phases[i]), text);
			break;
		}
	double host = jnum(p, "host_ms"), guest = jnum(p, "guest_ms");
	if (!problem[0] &&
	    (fabs(jnum(p, "vmm_start_ms") + jnum(p, "state_restore_ms") -
		  host) > rounding ||
	     fabs(jnum(p, "agent_ms") + jnum(p, "identity_ms") - guest) >
		     rounding ||
	     jnum(p, "page_in_ms") > jnum(p, "vmm_start_ms") ||
	     host + guest > jnum(sb, "restore_ms") + rounding || host <= 0 ||
	     jnum(p, "agent_ms") <= 0))
		snprintf(problem, len,
			 "the restore's phases do not add up: %.400s", text);
	free(text);
}

/* Appends base64 @text, decoded, to @buf; false when it is not base64. */
static bool base64_append(char **buf, size_t *len, const char *text)
{
	struct base64_decode_ctx ctx;
	size_t n = strlen(text), out = BASE64_DECODE_LENGTH(n);
	char *grown = realloc(*buf, *len + out + 1);

	if (!grown)
		return false;
	*buf = grown;
	base64_decode_init(&ctx);
	if (!base64_decode_update(&ctx, &out, (uint8_t *)*buf + *len, n,
				  text) ||
	    !base64_decode_final(&ctx))
		return false;
	*len += out;
	(*buf)[*len] = '\0';
	return true;
}

char *base64_encode(const void *data, size_t len)
{
	char *out = malloc(BASE64_ENCODE_RAW_LENGTH(len) + 1);

	base64_encode_raw(out, len, data);
	out[BASE64_ENCODE_RAW_LENGTH(len)] = '\0';
	return out;
}

/* ---- sandboxes and exec ---- */

void create(const char *body, char id[SB_ID_MAX])
{
	struct reply r;

	cr_assert_eq(api(&r, "POST", body, "/sandboxes"), 201,
		     "create %s: %ld %s", body, r.status, r.body);
	cr_assert_gt(strlen(jstr(r.json, "id")), 0, "%s", r.body);
	snprintf(id, SB_ID_MAX, "%s", jstr(r.json, "id"));
	reply_free(&r);
}

void delete_sandbox(const char *id)
{
	struct reply r;

	cr_expect_eq(api(&r, "DELETE", NULL, "/sandboxes/%s", id), 204,
		     "DELETE %s: %ld %s", id, r.status, r.body);
	reply_free(&r);
}

pid_t sandbox_vmm(const char *id)
{
	struct reply r;

	cr_assert_eq(api(&r, "GET", NULL, "/sandboxes/%s", id), 200, "%s",
		     r.body);
	double pid = jnum(r.json, "pid");
	cr_assert(pid > 0, "no pid: %s", r.body);
	reply_free(&r);
	return (pid_t)pid;
}

long exec_json(struct reply *r, const char *id, json_t *body, int limit_s)
{
	char path[128], *text = json_dumps(body, JSON_COMPACT);

	snprintf(path, sizeof(path), "/sandboxes/%s/exec", id);
	request(&(struct call){ .method = "POST",
				.path = path,
				.body = text,
				.len = text ? strlen(text) : 0,
				.limit_s = limit_s },
		r);
	free(text);
	json_decref(body);
	return r->status;
}

static void take_end(struct exec_result *x, const json_t *o)
{
	double code = jnum(o, "exit_code"), sig = jnum(o, "signal");

	x->ended = true;
	x->exit_code = isnan(code) ? -1 : (int)code;
	x->signal = isnan(sig) ? -1 : (int)sig;
	x->timed_out = json_is_true(json_object_get(o, "timed_out"));
	x->truncated = json_is_true(json_object_get(o, "truncated"));
	if (x->exit_code < 0 && x->signal < 0)
		snprintf(x->problem, sizeof(x->problem),
			 "neither exit_code nor signal");
	if (x->exit_code >= 0 && x->signal >= 0)
		snprintf(x->problem, sizeof(x->problem),
			 "both exit_code and signal");
}

static void stream_event(struct exec_result *x, const json_t *o, int line)
{
	const char *type = jstr(o, "type");

	if (x->ended || x->error[0])
		snprintf(x->problem, sizeof(x->problem),
			 "line %d (%s) after the last one", line, type);
	else if (!strcmp(type, "started") && line == 1)
		x->started_pid = (int)jnum(o, "pid");
	else if (!strcmp(type, "stdout") || !strcmp(type, "stderr")) {
		bool out = type[3] == 'o';

		if (!base64_append(out ? &x->out : &x->err,
				   out ? &x->out_len : &x->err_len,
				   jstr(o, "data")))
			snprintf(x->problem, sizeof(x->problem),
				 "line %d: bad base64", line);
	} else if (!strcmp(type, "exit"))
		take_end(x, o);
	else if (!strcmp(type, "error"))
		snprintf(x->error, sizeof(x->error), "%s", jstr(o, "message"));
	else
		snprintf(x->problem, sizeof(x->problem),
			 "line %d: unexpected type '%s'", line, type);
}

void parse_exec(const struct reply *r, bool stream, struct exec_result *x)
{
	memset(x, 0, sizeof(*x));
	x->out = calloc(1, 1);
	x->err = calloc(1, 1);
	x->exit_code = x->signal = x->started_pid = -1;
	if (r->status != 200) {
		snprintf(x->problem, sizeof(x->problem), "status %ld: %.200s",
			 r->status, r->body);
		return;
	}
	if (!stream) {
		if (!r->json ||
		    !base64_append(&x->out, &x->out_len,
				   jstr(r->json, "stdout")) ||
		    !base64_append(&x->err, &x->err_len,
				   jstr(r->json, "stderr")))
			snprintf(x->problem, sizeof(x->problem),
				 "not an exec result: %.200s", r->body);
		else
			take_end(x, r->json);
		return;
	}
	int line = 0;
	for (const char *p = r->body; *p && !x->problem[0]; line++) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		json_t *o = json_loadb(p, len, 0, NULL);

		if (!o || !nl)
			snprintf(x->problem, sizeof(x->problem),
				 "line %d is not a JSON object and newline: "
				 "%.*s",
				 line + 1, (int)(len < 100 ? len : 100), p);
		else
			stream_event(x, o, line + 1);
		json_decref(o);
		p += nl ? len + 1 : len;
	}
	if (!x->problem[0] && x->started_pid <= 0)
		snprintf(x->problem, sizeof(x->problem),
			 "no started event with a pid first");
	if (!x->problem[0] && !x->ended && !x->error[0])
		snprintf(x->problem, sizeof(x->problem), "no exit event");
}

void exec_result_free(struct exec_result *x)
{
	free(x->out);
	free(x->err);
}

void run_cmd(const char *id, const char *cmd, int timeout_s,
	     struct exec_result *x)
{
	struct reply r;

	exec_json(&r, id,
		  json_pack("{s:s, s:b, s:i}", "cmd", cmd, "stream", 0,
			    "timeout_s", timeout_s),
		  0);
	parse_exec(&r, false, x);
	cr_assert_str_empty(x->problem, "exec '%s': %s", cmd, x->problem);
	reply_free(&r);
}

void expect_echo(const char *id, const char *word)
{
	struct exec_result x;
	char cmd[128], want[128];

	snprintf(cmd, sizeof(cmd), "echo %s", word);
	snprintf(want, sizeof(want), "%s\n", word);
	run_cmd(id, cmd, scaled_s(60), &x);
	cr_expect_eq(x.exit_code, 0, "%s in %s: exit %d", cmd, id, x.exit_code);
	cr_expect_str_eq(x.out, want, "%s in %s", cmd, id);
	exec_result_free(&x);
}

/* ---- pools ---- */

void pool_counts(const char *name, struct pool_counts *c)
{
	struct reply r;
	json_t *t;
	size_t i;
	bool found = false;

	cr_assert_eq(api(&r, "GET", NULL, "/templates"), 200, "%s", r.body);
	json_array_foreach(json_object_get(r.json, "templates"), i, t)
	{
		if (strcmp(jstr(t, "name"), name))
			continue;
		found = true;
		*c = (struct pool_counts){ jnum(t, "min_ready"),
					   jnum(t, "max_total"),
					   jnum(t, "ready"),
					   jnum(t, "restoring"),
					   jnum(t, "leased") };
	}
	cr_assert(found, "no template %s in %s", name, r.body);
	reply_free(&r);
}

double wait_settled(const char *name, struct pool_counts *c)
{
	double start = now_s();

	for (;;) {
		pool_counts(name, c);
		if (c->ready == c->min_ready && c->restoring == 0)
			return now_s() - start;
		if (now_s() - start > scaled_s(SETTLE_LIMIT_S))
			return -1;
		sleep_s(0.2);
	}
}

/* ---- processes, cgroups, run directories ---- */

bool vmm_alive(pid_t pid)
{
	char path[64], *stat;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	stat = slurp(path, NULL);
	if (!stat)
		return false;
	char *close_paren = strrchr(stat, ')');
	bool alive = close_paren && strstr(stat, " (thaw-vmm) ") &&
		     close_paren[1] == ' ' && close_paren[2] != 'Z' &&
		     close_paren[2] != 'X';
	free(stat);
	return alive;
}

/*
 * Whether VMM @pid is one of the suite's daemons' (its run directory is
 * in THAW_STATE_DIR/run), not another test's on the same host.
 */
static bool daemon_vmm(pid_t pid)
{
	static char real[PATH_MAX];
	char dir[PATH_MAX], sock[64], run[PATH_MAX + 8];

	if (!real[0] && !realpath(files.state, real))
		snprintf(real, sizeof(real), "%s", files.state);
	if (!vmm_run_dir(pid, dir, sizeof(dir), sock, sizeof(sock)))
		return false;
	for (int i = 0; i < 2; i++) {
		snprintf(run, sizeof(run), "%s/run/", i ? real : files.state);
		if (!strncmp(dir, run, strlen(run)))
			return true;
	}
	return false;
}

int live_vmms(pid_t *pids, int max)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d))) {
		long pid = strtol(e->d_name, NULL, 10);

		if (pid <= 0 || !vmm_alive(pid) || !daemon_vmm(pid))
			continue;
		if (n < max)
			pids[n] = pid;
		n++;
	}
	closedir(d);
	return n;
}

double wait_no_vmms(double limit_s)
{
	double start = now_s();

	while (live_vmms(NULL, 0) > 0 && now_s() - start < limit_s)
		sleep_s(0.1);
	return now_s() - start;
}

bool wait_gone(pid_t pid, double limit_s)
{
	double start = now_s();

	while (vmm_alive(pid) && now_s() - start < limit_s)
		sleep_s(0.1);
	return !vmm_alive(pid);
}

const char *const cg_name[CG_NR] = { "cpu", "memory", "pids" };

struct cg_hierarchies hier;

struct cg_dirs parent;

/* @parent/state-<hash> of the state directory, as cgroup.h says. */
static void daemon_group(const char *parent, char *out, size_t len)
{
	char state[PATH_MAX];
	uint64_t h = 0xcbf29ce484222325ULL;

	cr_assert_not_null(realpath(files.state, state), "%s: %s", files.state,
			   strerror(errno));
	for (const char *p = state; *p; p++)
		h = (h ^ (unsigned char)*p) * 0x100000001b3ULL;
	snprintf(out, len, "%s/state-%016" PRIx64, parent, h);
}

/* Whether controller @c's directory is one an earlier controller has. */
static bool cg_repeat(const struct cg_dirs *d, int c)
{
	for (int k = 0; k < c; k++)
		if (!strcmp(d->dir[k], d->dir[c]))
			return true;
	return false;
}

/*
 * Whether @list, words separated by one of @seps ("," for the controllers
 * of /proc/PID/cgroup and mount options, " \n" for cgroup.controllers),
 * has @word.
 */
static bool in_list(const char *list, const char *seps, const char *word)
{
	size_t len = strlen(word);

	for (const char *p = list; *p; p += strcspn(p, seps), p += !!*p)
		if (strcspn(p, seps) == len && !strncmp(p, word, len))
			return true;
	return false;
}

/* A mountinfo field with its octal escapes ("\040": space) undone. */
static void unescape(char *s)
{
	char *out = s;

	for (; *s; out++)
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' &&
		    s[2] <= '7' && s[3] >= '0' && s[3] <= '7') {
			*out = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 +
				      (s[3] - '0'));
			s += 4;
		} else {
			*out = *s++;
		}
	*out = '\0';
}

/*
 * Splits a /proc/self/mountinfo @line ("id parent maj:min root mountpoint
 * options [tags...] - type source superoptions") into the fields this
 * needs, unescaped; false when it is not such a line.
 */
static bool mount_fields(char *line, char **root, char **point, char **type,
			 char **super)
{
	char *sep = strstr(line, " - "), *save = NULL, *f[5];
	int n = 0;

	if (!sep)
		return false;
	*sep = '\0';
	for (char *w = strtok_r(line, " ", &save); w && n < 5;
	     w = strtok_r(NULL, " ", &save))
		f[n++] = w;
	*type = strtok_r(sep + 3, " ", &save);
	if (n < 5 || !*type || !strtok_r(NULL, " ", &save) ||
	    !(*super = strtok_r(NULL, " ", &save)))
		return false;
	unescape(*root = f[3]);
	unescape(*point = f[4]);
	return true;
}

/*
 * Fills @hier.  v2: /sys/fs/cgroup (its last mount, the one seen there)
 * for every controller.  v1: each controller's hierarchy at its first
 * mount in /proc/self/mountinfo that shows the hierarchy's root (where
 * the daemon's parent is), else at its first.
 */
static void find_hierarchies(void)
{
	char *info = slurp("/proc/self/mountinfo", NULL), *save = NULL;
	char *avail = slurp("/sys/fs/cgroup/cgroup.controllers", NULL);
	char *root, *point, *type, *super;
	bool whole[CG_NR] = { false };
	struct statfs fs;

	memset(&hier, 0, sizeof(hier));
	if (avail && statfs("/sys/fs/cgroup", &fs) == 0 &&
	    (unsigned long)fs.f_type == CGROUP2_SUPER_MAGIC)
		for (int c = 0; c < CG_NR; c++)
			hier.v2 |= in_list(avail, " \n", cg_name[c]);
	free(avail);
	for (char *line = info ? strtok_r(info, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		if (!mount_fields(line, &root, &point, &type, &super))
			continue;
		for (int c = 0; c < CG_NR; c++) {
			bool is_root = !strcmp(root, "/");

			if (hier.v2 ? strcmp(type, "cgroup2") ||
					      strcmp(point, "/sys/fs/cgroup")
				    : strcmp(type, "cgroup") ||
					      !in_list(super, ",",
						       cg_name[c]) ||
					      whole[c] ||
					      (hier.mount[c][0] && !is_root))
				continue;
			snprintf(hier.mount[c], PATH_MAX, "%s", point);
			snprintf(hier.root[c], PATH_MAX, "%s", root);
			whole[c] = is_root;
		}
	}
	free(info);
}

/*
 * The directory, below @c's mount, of the cgroup that /proc/PID/cgroup
 * names @path; false when that mount does not show it.
 */
static bool cg_dir(int c, const char *path, char *dir)
{
	const char *root = hier.root[c];
	size_t len = strcmp(root, "/") ? strlen(root) : 0;

	if (!hier.mount[c][0] || strncmp(path, root, len) ||
	    (path[len] && path[len] != '/'))
		return false;
	snprintf(dir, PATH_MAX, "%s%s", hier.mount[c],
		 strcmp(path + len, "/") ? path + len : "");
	return true;
}

/*
 * The cgroup directories of process @pid, from /proc/PID/cgroup: its
 * "0::PATH" line on v2, its "N:CONTROLLER[,...]:PATH" lines on v1.  False
 * when a controller that has a hierarchy is not found.
 */
static bool process_cgroup(pid_t pid, struct cg_dirs *d)
{
	char path[64], *save = NULL;
	bool ok = true;

	memset(d, 0, sizeof(*d));
	snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
	char *text = slurp(path, NULL);
	for (char *line = text ? strtok_r(text, "\n", &save) : NULL; line;
	     line = strtok_r(NULL, "\n", &save)) {
		char *list = strchr(line, ':'), *where;

		if (!list || !(where = strchr(list + 1, ':')))
			continue;
		*list++ = '\0';
		*where++ = '\0';
		for (int c = 0; c < CG_NR; c++)
			if (hier.v2 ? !strcmp(line, "0") && !list[0]
				    : in_list(list, ",", cg_name[c]))
				ok &= cg_dir(c, where, d->dir[c]);
	}
	ok &= text != NULL;
	free(text);
	for (int c = 0; c < CG_NR; c++)
		ok &= !hier.mount[c][0] || d->dir[c][0];
	return ok;
}

void vmm_cgroup(pid_t pid, struct cg_dirs *d)
{
	const char *name = NULL;

	cr_assert(process_cgroup(pid, d), "VMM %d: no cgroup in %s", (int)pid,
		  hier.v2 ? "cgroup v2" : "some v1 hierarchy");
	for (int c = 0; c < CG_NR; c++) {
		size_t len = strlen(parent.dir[c]);
		const char *own = d->dir[c] + len;

		if (!parent.dir[c][0])
			continue;
		cr_assert(!strncmp(d->dir[c], parent.dir[c], len) &&
				  own[0] == '/' && own[1] &&
				  !strchr(own + 1, '/'),
			  "VMM %d is in %s cgroup %s, not one directly "
			  "below %s",
			  (int)pid, cg_name[c], d->dir[c], parent.dir[c]);
		cr_assert(!name || !strcmp(name, own + 1),
			  "VMM %d is in cgroup %s in one hierarchy, %s in "
			  "another",
			  (int)pid, name, own + 1);
		name = own + 1;
	}
	cr_assert_not_null(name, "no cpu, memory or pids hierarchy");
}

bool cgroup_value(const char *dir, const char *name, uint64_t *v)
{
	char path[PATH_MAX + 64], *text;

	if (!dir[0])
		return false;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	text = slurp(path, NULL);
	if (!text)
		return false;
	bool ok = !strncmp(text, "max", 3) || sscanf(text, "%" SCNu64, v) == 1;
	if (!strncmp(text, "max", 3))
		*v = UINT64_MAX;
	free(text);
	return ok;
}

/*
 * Counts the cgroups below @dir (recursively) in @all, and returns how
 * many of them are leaves without a process: what a dead sandbox leaves.
 * @top: the directory the count started from, which is not counted.
 */
static int empty_below(const char *top, const char *dir, int *all)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	int empty = 0, children = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char sub[PATH_MAX];

		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name);
		children++;
		(*all)++;
		empty += empty_below(top, sub, all);
	}
	closedir(d);
	if (!children && strcmp(dir, top)) {
		char path[PATH_MAX + 16], *procs;

		snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
		procs = slurp(path, NULL);
		empty += !procs || !procs[0];
		free(procs);
	}
	return empty;
}

int empty_cgroups(int *all)
{
	int empty = 0;

	for (int c = 0; c < CG_NR; c++)
		if (parent.dir[c][0] && !cg_repeat(&parent, c))
			empty += empty_below(parent.dir[c], parent.dir[c], all);
	return empty;
}

const char *cg_list(const struct cg_dirs *d, char *out, size_t len)
{
	size_t n = 0;

	out[0] = '\0';
	for (int c = 0; c < CG_NR; c++)
		if (d->dir[c][0] && !cg_repeat(d, c) && n < len)
			n += snprintf(out + n, len - n, "%s%s", n ? ", " : "",
				      d->dir[c]);
	return out;
}

bool vmm_run_dir(pid_t pid, char *dir, size_t len, char *sock, size_t sock_len)
{
	char path[64];
	size_t n;

	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	char *args = slurp(path, &n), *found = NULL;
	for (size_t i = 0; args && i < n; i += strlen(args + i) + 1)
		if (!strcmp(args + i, "--control") && i + 10 < n)
			found = args + i + 10;
	char *slash = found ? strrchr(found, '/') : NULL;
	if (slash) {
		snprintf(sock, sock_len, "%s", slash + 1);
		*slash = '\0';
		snprintf(dir, len, "%s", found);
	}
	free(args);
	return slash != NULL;
}

int run_dirs(const char *base, const char *sock)
{
	DIR *d = opendir(base);
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		char path[PATH_MAX * 2];

		snprintf(path, sizeof(path), "%s/%s/%s", base, e->d_name, sock);
		n += e->d_name[0] != '.' && access(path, F_OK) == 0;
	}
	closedir(d);
	return n;
}

/* ---- the daemon process ---- */

void write_config(const char *daemon_keys)
{
	const char *kernel = getenv("THAW_TEST_KERNEL"),
		   *initrd = getenv("THAW_TEST_INITRD");
	FILE *f = fopen(files.config, "w");
	/* A sandbox's default lifetime outlasts the slowest test. */
	int lifetime =
		scaled_s(600) < MAX_TIMEOUT_S ? scaled_s(600) : MAX_TIMEOUT_S;

	if (!f)
		return;
	fprintf(f,
		"; written by test_daemon\n"
		"[daemon]\n"
		"token = " TOKEN "\n"
		"cgroup_parent = " CGROUP_PARENT "\n"
		"max_sandboxes = 100\n"
		"max_connections = 256\n"
		"max_request_bytes = %d\n"
		"max_file_bytes = %d\n"
		"max_exec_output_bytes = %d\n"
		"restore_timeout_s = %d\n"
		"jail_ids = %u-%u\n"
		"%s",
		MAX_REQUEST_BYTES, 4 * FILE_BYTES, MAX_EXEC_OUTPUT,
		scaled_s(RESTORE_TIMEOUT_S), JAIL_FIRST_ID, JAIL_LAST_ID,
		daemon_keys);
	for (size_t i = 0; i < sizeof(templates) / sizeof(templates[0]); i++) {
		fprintf(f,
			"\n[template %s]\n"
			"kernel = %s\n"
			"initrd = %s\n"
			"mem_mib = 128\n"
			"vcpus = 1\n"
			"timeout_s = %d\n"
			"max_timeout_s = %d\n",
			templates[i], kernel, initrd, lifetime, MAX_TIMEOUT_S);
		if (!strcmp(templates[i], "default"))
			fprintf(f, "min_ready = %d\nmax_total = %d\n",
				MIN_READY, MAX_TOTAL);
		else if (!strcmp(templates[i], "tight"))
			fprintf(f, "min_ready = 0\nmax_total = 2\n");
		else
			fprintf(f,
				"min_ready = 0\nmax_total = 4\n"
				"memory_limit_mib = %d\npids_limit = %d\n",
				BOMB_MEMORY_MIB, BOMB_PIDS);
	}
	fclose(f);
}

void tail_of(const char *path, off_t from, char *out, size_t len)
{
	size_t n = 0;
	char *log = slurp(path, &n);
	size_t start = (size_t)from < n ? (size_t)from : n;

	if (n - start > 2000)
		start = n - 2000;
	snprintf(out, len, "%s", log ? log + start : "(no file)");
	free(log);
}

void print_log_lines(const char *needle)
{
	char *log = slurp(files.log, NULL);

	for (char *line = log, *end; line && *line; line = end + !!*end) {
		end = line + strcspn(line, "\n");
		if (memmem(line, end - line, needle, strlen(needle)))
			fprintf(stderr, "%.*s\n", (int)(end - line), line);
	}
	free(log);
}

int wait_exit(pid_t pid, double limit_s, int *status)
{
	int st = 0;
	pid_t got = waitpid(pid, &st, WNOHANG);
	struct thawd_process p = { .pid = pid, .child = got >= 0 };

	if (got == pid) {
		if (status)
			*status = st;
		return 1;
	}
	if (thawd_process_wait(&p, limit_s))
		return -1;
	if (p.child && status)
		*status = p.status;
	return p.child;
}

bool log_json;

pid_t daemon_start(bool own, char *err, size_t len)
{
	static const char *const text_log[] = { "--log-format", "text",
						"--log-level", "info", NULL };
	static const char *const json_log[] = { "--log-format", "json",
						"--log-level", "debug", NULL };
	const struct thawd_process_spec s = {
		.thaw = getenv("THAW_TEST_THAW"),
		.config = files.config,
		.log = files.log,
		.state = files.state,
		.socket = files.socket,
		.token = TOKEN,
		.args = log_json ? json_log : text_log,
		.start_limit_s = scaled_s(START_LIMIT_S),
		.detached = !own,
		.own_process_group = true,
	};
	struct thawd_process d;

	if (thawd_process_start(&d, &s, err, len))
		return -1;
	FILE *f = fopen(files.pid, "w");
	if (f) {
		fprintf(f, "%d\n", (int)d.pid);
		fclose(f);
	}
	fprintf(stderr, "test_daemon: daemon %d serving after %.1f s\n",
		(int)d.pid, d.serving_s);
	return d.pid;
}

pid_t daemon_pid(void)
{
	char *text = slurp(files.pid, NULL);
	pid_t pid = text ? (pid_t)strtol(text, NULL, 10) : -1;

	free(text);
	return pid > 0 ? pid : -1;
}

/* The PRE_ALL start's failure, where the tests report it. */
static const char *start_failure_file(char *buf, size_t len)
{
	snprintf(buf, len, "%s/test_daemon.failed", files.state);
	return buf;
}

void suite_daemon_start(struct criterion_test_set *set)
{
	char err[4096], path[PATH_MAX + 32];

	scale_criterion_timeouts(set);
	if (!find_files() || !getenv("THAW_TEST_THAW") ||
	    !getenv("THAW_TEST_KERNEL") || !getenv("THAW_TEST_INITRD"))
		return; /* the tests say how to run them */
	write_config(SUITE_DAEMON_KEYS);
	if (daemon_start(false, err, sizeof(err)) < 0) {
		FILE *f = fopen(start_failure_file(path, sizeof(path)), "w");

		fprintf(stderr, "test_daemon: %s\n", err);
		if (f) {
			fputs(err, f);
			fclose(f);
		}
	}
}

void suite_daemon_stop(struct criterion_global_stats *stats)
{
	pid_t pid;
	int status = 0;

	(void)stats;
	if (!find_files() || (pid = daemon_pid()) < 0)
		return;
	kill(pid, SIGTERM);
	int how = wait_exit(pid, scaled_s(120), &status);
	if (how < 0)
		fprintf(stderr, "test_daemon: daemon %d ignores SIGTERM\n",
			(int)pid);
	else if (how == 1 && status)
		fprintf(stderr, "test_daemon: daemon %d ended with %#x\n",
			(int)pid, status);
	if (how >= 0)
		unlink(files.pid);
}

void find_parent_cgroups(const char *name)
{
	char group[128]; /* a name and "/state-" 16 hex digits */

	daemon_group(name, group, sizeof(group));
	find_hierarchies();
	memset(&parent, 0, sizeof(parent));
	for (int c = 0; c < CG_NR; c++) {
		if (!hier.mount[c][0])
			continue;
		snprintf(parent.dir[c], PATH_MAX, "%.*s/%s",
			 PATH_MAX - 2 - (int)sizeof(group), hier.mount[c],
			 group);
		cr_assert_eq(access(parent.dir[c], F_OK), 0,
			     "cgroup %s: %s (the daemon makes it)",
			     parent.dir[c], strerror(errno));
	}
}

void connect_daemon(void)
{
	char path[PATH_MAX + 32], *failure;
	struct reply r;

	cr_assert(find_files() && getenv("THAW_TEST_THAW") &&
			  getenv("THAW_TEST_KERNEL") &&
			  getenv("THAW_TEST_INITRD"),
		  "run through daemon-in-vm.sh");
	json_object_seed(0);
	failure = slurp(start_failure_file(path, sizeof(path)), NULL);
	cr_assert_null(failure, "the daemon did not start: %s", failure);
	cr_assert_gt(daemon_pid(), 0, "no daemon");
	cr_assert_eq(api(&r, "GET", NULL, "/health"), 200,
		     "the daemon does not answer: %s", r.body);
	reply_free(&r);
	find_parent_cgroups(CGROUP_PARENT);
}

bool status_field(pid_t pid, const char *key, unsigned long long *v, int base)
{
	char path[64], want[64];
	bool found = false;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	snprintf(want, sizeof(want), "\n%s:", key);
	char *text = slurp(path, NULL), *at = text ? strstr(text, want) : NULL;
	if (at) {
		*v = strtoull(at + strlen(want), NULL, base);
		found = true;
	}
	free(text);
	return found;
}

bool zombie(pid_t pid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	char *text = slurp(path, NULL),
	     *state = text ? strstr(text, "\nState:") : NULL;
	bool z = state && strchr(state + 7, 'Z') &&
		 strchr(state + 7, 'Z') < strchr(state + 7, '\n');
	free(text);
	return z;
}

void expect_error(const char *method, const char *path, const char *body,
		  size_t len, bool auth, long status, const char *code,
		  const char *allow)
{
	char want[64], *save;
	json_t *e;
	struct reply r;

	request(&(struct call){ .method = method,
				.path = path,
				.body = body,
				.len = len,
				.no_token = !auth },
		&r);
	e = json_object_get(r.json, "error");
	cr_expect_eq(r.status, status, "%s %s: %ld, want %ld: %.300s", method,
		     path, r.status, status, r.body);
	cr_expect_str_eq(jstr(e, "code"), code, "%s %s: %.300s", method, path,
			 r.body);
	cr_expect_str_neq(jstr(e, "message"), "", "%s %s: no message", method,
			  path);
	snprintf(want, sizeof(want), "%s", allow ? allow : "");
	for (char *m = strtok_r(want, " ", &save); m;
	     m = strtok_r(NULL, " ", &save))
		cr_expect_not_null(strstr(r.allow, m),
				   "%s %s: Allow '%s' lacks %s", method, path,
				   r.allow, m);
	reply_free(&r);
}

void expect_json_error(const char *method, const char *path, const char *body,
		       long status, const char *code)
{
	expect_error(method, path, body, body ? strlen(body) : 0, true, status,
		     code, NULL);
}

int raw_connect(void)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(a.sun_path, sizeof(a.sun_path), "%s", files.socket);
	cr_assert(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0,
		  "connect %s: %s", files.socket, strerror(errno));
	return fd;
}

__attribute__((format(printf, 2, 3))) void raw_write(int fd, const char *fmt,
						     ...)
{
	char buf[8192];
	va_list ap;

	va_start(ap, fmt);
	int len = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	cr_assert(len > 0 && (size_t)len < sizeof(buf));
	cr_assert_eq(send(fd, buf, len, MSG_NOSIGNAL), len, "send: %s",
		     strerror(errno));
}

bool raw_wait_for(int fd, const char *needle, double timeout_s, char *buf,
		  size_t size)
{
	double start = now_s();
	size_t n = 0;

	buf[0] = '\0';
	while (!strstr(buf, needle) && n < size - 1) {
		struct pollfd p = { fd, POLLIN, 0 };
		int left = (int)((start + timeout_s - now_s()) * 1000);

		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		ssize_t got = read(fd, buf + n, size - 1 - n);
		if (got <= 0)
			break;
		n += got;
		buf[n] = '\0';
	}
	return strstr(buf, needle) != NULL;
}

double handouts(void)
{
	const char *name = "thaw_handouts_total{template=\"default\"}";
	struct reply r;
	double v = -1;

	cr_assert_eq(api(&r, "GET", NULL, "/metrics"), 200, "%s", r.body);
	for (char *line = r.body; line; line = strchr(line, '\n')) {
		line += *line == '\n';
		if (!strncmp(line, name, strlen(name)))
			sscanf(line + strlen(name), "%lf", &v);
	}
	reply_free(&r);
	return v;
}
