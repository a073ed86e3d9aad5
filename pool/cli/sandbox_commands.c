// SPDX-License-Identifier: Apache-2.0
/*
 * sandbox_commands.c - `thaw sandbox create|ls|rm|network|checkpoint|fork|
 * rollback|pause|resume`, `thaw exec` and `thaw cp`: the daemon's HTTP API
 * (API.md) as commands.
 *
 * The requests are the client library's (pool/client/thaw_client.h); this
 * file parses options, finds the daemon's socket, and prints.  A call that
 * fails is one line on stderr, the command's name then the library's
 * message: the daemon's own status, code and message, or why its socket
 * could not be reached.  Output and downloads go out as they arrive, so a
 * long command's output shows as it is written and a large file never
 * sits in memory; a ^C (thaw_interrupted, the library's cancel flag) ends
 * the transfer at once: the daemon kills a command whose client went away.
 * A network policy's CIDRs are checked here with the daemon's own parser
 * (net_cidr_parse), so a typo is a usage error naming the option before
 * any request.
 *
 * Exit status: thaw exec exits with the command's own status (128 + signal
 * when a signal killed it, 124 when its --timeout passed, as timeout(1)),
 * so its own failures, usage errors included, are 125 as for thaw run.
 * sandbox and cp exit 1 when a request failed and 2 on a usage error.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pool/host/interrupt.h"
#include "common/io.h"
#include "pool/host/paths.h"
#include "bpf/policy.h"
#include "pool/cli/thaw.h"
#include "pool/client/thaw_client.h"

#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_TIMED_OUT 124 /* as timeout(1) */

#define SANDBOX "thaw sandbox "

/* Room for a message naming a path in the guest (at most 4095 bytes). */
#define ERR_MAX 8192

struct options {
	const char *socket, *template, *snapshot, *cwd;
	long count;	  /* fork -n; 0: not given */
	long timeout_s;	  /* 0: not given */
	const char **env; /* --env K=V..., NULL-terminated; or NULL */
	size_t nr_env;
	/* --allow-out, --deny-out: NULL-terminated; or NULL */
	const char **allow_out, **deny_out;
	size_t nr_allow_out, nr_deny_out;
	int internet; /* -1: --no-internet, 1: --internet, 0: neither */
	bool send_stdin, json;
};

struct client;

/* One command: how its options are parsed, what it does with them. */
struct command {
	const char *name; /* "thaw sandbox create": every message's prefix */
	const char *usage;
	const char *accepts;  /* its option letters, besides socket and help */
	bool stop_at_operand; /* what follows ID are CMD's own options */
	int usage_status, fail_status;
	/* Runs with the operands left after the options. */
	int (*run)(struct client *c, const struct options *o, int argc,
		   char **argv);
};

/* A command's connection to the daemon, opened by its first request. */
struct client {
	const struct command *cmd;
	const struct options *opts;
	struct thaw_client *conn;
};

/* The usage error's line, then the usage; returns the exit status. */
__attribute__((format(printf, 2, 3))) static int
usage_error(const struct command *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", cmd->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n%s", cmd->usage);
	return cmd->usage_status;
}

/*
 * The connection, opened once: the daemon's socket is --socket, else
 * $THAW_SOCKET, else the state directory's.  NULL after a message.
 */
static struct thaw_client *connection(struct client *c, const char *who)
{
	const char *socket = c->opts->socket, *env = getenv("THAW_SOCKET");
	char state[PATH_MAX], path[PATH_MAX + 16], err[PATH_MAX + 128];

	if (c->conn)
		return c->conn;
	if (!socket && env && *env)
		socket = env;
	if (!socket) {
		if (thaw_state_dir(state, sizeof(state), err, sizeof(err))) {
			fprintf(stderr, "%s: %s\n", who, err);
			return NULL;
		}
		snprintf(path, sizeof(path), "%s/thawd.sock", state);
		socket = path;
	}
	c->conn = thaw_client_open(
		&(struct thaw_client_options){ .socket = socket,
					       .token = getenv("THAW_TOKEN"),
					       .cancel = &thaw_interrupted },
		err, sizeof(err));
	if (!c->conn)
		fprintf(stderr, "%s: %s\n", who, err);
	return c->conn;
}

/* Says why a call failed (a ^C needs no word); returns @ret. */
static int report(const char *who, int ret, const char *err)
{
	if (ret == THAW_CLIENT_UNREACHABLE)
		fprintf(stderr, "%s: %s (is 'thaw daemon' running?)\n", who,
			err);
	else if (ret && ret != THAW_CLIENT_CANCELED)
		fprintf(stderr, "%s: %s\n", who, err);
	return ret;
}

static const char *or_dash(const char *s)
{
	return *s ? s : "-";
}

/* The policy options of @o into @n; false when none was given. */
static bool network_options(const struct options *o, struct thaw_network *n)
{
	*n = (struct thaw_network){ .allow_internet =
					    o->internet ? o->internet > 0 : -1,
				    .allow_out = o->allow_out,
				    .deny_out = o->deny_out };
	return o->internet || o->allow_out || o->deny_out;
}

static int sandbox_create(struct client *c, const struct options *o, int argc,
			  char **argv)
{
	struct thaw_network net;
	const struct thaw_create spec = {
		.template = o->template,
		.snapshot = o->snapshot,
		.timeout_s = o->timeout_s,
		.env = o->env,
		.network = network_options(o, &net) ? &net : NULL,
	};
	const char *who = c->cmd->name;
	struct thaw_client *conn;
	struct thaw_sandbox s;
	char err[ERR_MAX];

	if (argc > 0)
		return usage_error(c->cmd, "unexpected argument '%s'", argv[0]);
	if (o->template && !thaw_client_is_text(o->template))
		return usage_error(c->cmd, "--template '%s' is not UTF-8 text",
				   o->template);
	if (o->template && o->snapshot)
		return usage_error(c->cmd,
				   "--template or --snapshot, not both");
	if (!(conn = connection(c, who)) ||
	    report(who, thaw_client_create(conn, &spec, &s, err, sizeof(err)),
		   err))
		return c->cmd->fail_status;
	fprintf(stderr,
		"thaw: sandbox of template %s (snapshot %s), restore %.1f ms (host side %.1f ms, guest side %.1f ms), handout %.2f ms%s%s\n",
		or_dash(s.template), or_dash(s.snapshot), s.restore_ms,
		s.restore.host_ms, s.restore.guest_ms, s.handout_ms,
		s.host_address[0] ? ", host address " : "", s.host_address);
	printf("%s\n", s.id);
	return 0;
}

/* `thaw sandbox network ID [policy options]`: without them shows the
 * sandbox's network, with them replaces its policy, then shows it. */
static int sandbox_network(struct client *c, const struct options *o, int argc,
			   char **argv)
{
	const char *who = c->cmd->name;
	struct thaw_sandbox_network n;
	struct thaw_network policy;
	struct thaw_client *conn;
	char err[ERR_MAX];
	int ret;

	if (argc < 1)
		return usage_error(c->cmd, "no sandbox id given");
	if (argc > 1)
		return usage_error(c->cmd, "unexpected argument '%s'", argv[1]);
	if (!(conn = connection(c, who)))
		return c->cmd->fail_status;
	if (network_options(o, &policy))
		ret = thaw_client_set_network(conn, argv[0], &policy, &n, err,
					      sizeof(err));
	else
		ret = thaw_client_get_network(conn, argv[0], &n, err,
					      sizeof(err));
	if (report(who, ret, err))
		return c->cmd->fail_status;
	if (!n.present) {
		printf("network none\n");
		return 0;
	}
	printf("host_address %s\nallow_internet %s\nallow_out %s\n"
	       "deny_out %s\n",
	       or_dash(n.host_address), n.allow_internet ? "true" : "false",
	       or_dash(n.allow_out), or_dash(n.deny_out));
	return 0;
}

/* The operand ID of a command that takes exactly @n operands; -1 to go
 * on, or the status of a usage error. */
static int operands(struct client *c, int argc, char **argv, int n)
{
	if (argc < 1)
		return usage_error(c->cmd, "no sandbox id given");
	if (argc < n)
		return usage_error(c->cmd, "no snapshot id given");
	if (argc > n)
		return usage_error(c->cmd, "unexpected argument '%s'", argv[n]);
	return -1;
}

static void print_checkpoint(const char *what, const struct thaw_checkpoint *ck)
{
	fprintf(stderr,
		"thaw: %s checkpoint %s (parent %s, depth %ld%s): %.1f MiB "
		"written, paused %.1f ms, %.1f ms in all\n",
		what, ck->snapshot, or_dash(ck->parent), ck->depth,
		ck->full ? ", full" : "", ck->dirty_bytes / (1024.0 * 1024.0),
		ck->pause_ms, ck->total_ms);
}

/*
 * `thaw sandbox checkpoint ID` and `thaw sandbox pause ID`: both write a
 * checkpoint, whose id they print.
 */
static int sandbox_checkpoint(struct client *c, const struct options *o,
			      int argc, char **argv)
{
	bool pause = !strcmp(c->cmd->name, SANDBOX "pause");
	struct thaw_checkpoint ck;
	struct thaw_client *conn;
	char err[ERR_MAX];
	int status = operands(c, argc, argv, 1);

	(void)o;
	if (status >= 0)
		return status;
	if (!(conn = connection(c, c->cmd->name)) ||
	    report(c->cmd->name,
		   (pause ? thaw_client_pause : thaw_client_checkpoint)(
			   conn, argv[0], &ck, err, sizeof(err)),
		   err))
		return c->cmd->fail_status;
	print_checkpoint(pause ? "paused at" : "sandbox", &ck);
	printf("%s\n", ck.snapshot);
	return 0;
}

/* `thaw sandbox fork ID [-n N]`: prints each fork's id, a line each;
 * those that failed say why on stderr, and the status is then 1. */
static int sandbox_fork(struct client *c, const struct options *o, int argc,
			char **argv)
{
	struct thaw_fork_entry *list;
	struct thaw_checkpoint ck;
	struct thaw_client *conn;
	char err[ERR_MAX];
	size_t n;
	int status = operands(c, argc, argv, 1);

	if (status >= 0)
		return status;
	if (!(conn = connection(c, c->cmd->name)) ||
	    report(c->cmd->name,
		   thaw_client_fork(conn, argv[0], o->count ? o->count : 1, &ck,
				    &list, &n, err, sizeof(err)),
		   err))
		return c->cmd->fail_status;
	print_checkpoint("forked from", &ck);
	status = 0;
	for (size_t i = 0; i < n; i++) {
		if (list[i].id[0]) {
			printf("%s\n", list[i].id);
			continue;
		}
		fprintf(stderr, "%s: fork %zu: %s\n", c->cmd->name, i + 1,
			list[i].error);
		status = c->cmd->fail_status;
	}
	free(list);
	return status;
}

/*
 * `thaw sandbox rollback ID SNAP` and `thaw sandbox resume ID`: both
 * restore the sandbox's VM under its id.
 */
static int sandbox_restore(struct client *c, const struct options *o, int argc,
			   char **argv)
{
	bool resume = !strcmp(c->cmd->name, SANDBOX "resume");
	struct thaw_client *conn;
	struct thaw_sandbox s;
	char err[ERR_MAX];
	int status = operands(c, argc, argv, resume ? 1 : 2);
	int ret;

	(void)o;
	if (status >= 0)
		return status;
	if (!resume && !thaw_client_is_text(argv[1]))
		return usage_error(c->cmd, "snapshot '%s' is not UTF-8 text",
				   argv[1]);
	if (!(conn = connection(c, c->cmd->name)))
		return c->cmd->fail_status;
	ret = resume ? thaw_client_resume(conn, argv[0], &s, err, sizeof(err))
		     : thaw_client_rollback(conn, argv[0], argv[1], &s, err,
					    sizeof(err));
	if (report(c->cmd->name, ret, err))
		return c->cmd->fail_status;
	fprintf(stderr, "thaw: sandbox %s %s %s in %.1f ms\n", s.id,
		resume ? "resumed from" : "rolled back to", s.snapshot,
		s.restore_ms);
	return 0;
}

/* The table of GET /sandboxes; 0, or -1 after a message. */
static int print_sandboxes(struct client *c, struct thaw_client *conn)
{
	const char *who = c->cmd->name;
	struct thaw_sandbox *list;
	char err[ERR_MAX];
	size_t n;

	if (report(who, thaw_client_list(conn, &list, &n, err, sizeof(err)),
		   err))
		return -1;
	printf("%-20s %-16s %-8s %-24s %-24s %10s\n", "ID", "TEMPLATE", "STATE",
	       "CREATED", "EXPIRES", "RESTORE_MS");
	for (size_t i = 0; i < n; i++)
		printf("%-20s %-16s %-8s %-24s %-24s %10.1f\n",
		       or_dash(list[i].id), or_dash(list[i].template),
		       or_dash(list[i].state), or_dash(list[i].created),
		       or_dash(list[i].expires), list[i].restore_ms);
	free(list);
	return 0;
}

/* The daemon's JSON as it is. */
static int print_json(struct client *c, struct thaw_client *conn)
{
	const struct thaw_call q = { .method = "GET", .path = "/sandboxes" };
	struct thaw_reply r;
	char err[ERR_MAX];
	int ret = report(c->cmd->name,
			 thaw_client_call(conn, &q, &r, err, sizeof(err)), err);

	if (ret == 0) {
		fwrite(r.body, 1, r.len, stdout);
		if (!r.len || r.body[r.len - 1] != '\n')
			putchar('\n');
	}
	thaw_reply_free(&r);
	return ret;
}

static int sandbox_ls(struct client *c, const struct options *o, int argc,
		      char **argv)
{
	struct thaw_client *conn;
	int ret;

	if (argc > 0)
		return usage_error(c->cmd, "unexpected argument '%s'", argv[0]);
	if (!(conn = connection(c, c->cmd->name)))
		return c->cmd->fail_status;
	ret = o->json ? print_json(c, conn) : print_sandboxes(c, conn);
	return ret == 0 ? 0 : c->cmd->fail_status;
}

/* Every ID is tried: one that fails does not keep the others alive. */
static int sandbox_rm(struct client *c, const struct options *o, int argc,
		      char **argv)
{
	int status = 0;

	(void)o;
	if (argc == 0)
		return usage_error(c->cmd, "no sandbox id given");
	for (int i = 0; i < argc; i++) {
		char who[256], err[ERR_MAX];
		struct thaw_client *conn;
		int ret = THAW_CLIENT_LOCAL;

		snprintf(who, sizeof(who), "%s: %s", c->cmd->name, argv[i]);
		if ((conn = connection(c, who)))
			ret = report(who,
				     thaw_client_delete(conn, argv[i], err,
							sizeof(err)),
				     err);
		if (ret != 0)
			status = c->cmd->fail_status;
		/* Without the daemon the other IDs would only say so again. */
		if (ret != 0 && ret != THAW_CLIENT_STATUS)
			break;
	}
	return status;
}

/* What thaw exec makes of its command's events. */
struct exec_state {
	const char *who, *cmd;
	int status; /* ours to exit with; -1 until the last event */
};

static int exec_event(const struct thaw_exec_event *e, void *arg, char *err,
		      size_t errlen)
{
	struct exec_state *s = arg;

	(void)err;
	(void)errlen;
	switch (e->type) {
	case THAW_EXEC_STDOUT:
	case THAW_EXEC_STDERR:
		/* A closed stdout must not stop the command. */
		write_full(e->type == THAW_EXEC_STDOUT ? STDOUT_FILENO
						       : STDERR_FILENO,
			   e->data, e->len);
		break;
	case THAW_EXEC_EXIT:
		if (e->timed_out) {
			fprintf(stderr, "%s: %s timed out\n", s->who, s->cmd);
			s->status = EXIT_TIMED_OUT;
		} else if (e->signal) {
			s->status = 128 + e->signal;
		} else {
			s->status = e->exit_code & 0xff;
		}
		break;
	case THAW_EXEC_ERROR:
		fprintf(stderr, "%s: %s\n", s->who, or_dash(e->message));
		s->status = EXIT_THAW_ERROR;
		break;
	case THAW_EXEC_STARTED:
		break;
	}
	return 0;
}

/* All of our stdin into @spec's input; 0, or -1 after a message (none
 * when ^C ended it). */
static int read_stdin(const char *who, struct thaw_exec *spec)
{
	char *input = NULL;
	size_t len = 0;
	ssize_t n = 1;

	while (n != 0) {
		char *grown = realloc(input, len + 65536);

		if (!grown) {
			fprintf(stderr, "%s: out of memory for stdin\n", who);
			free(input);
			return -1;
		}
		input = grown;
		n = read(STDIN_FILENO, input + len, 65536);
		if (n > 0)
			len += n;
		else if (n < 0 && (errno != EINTR || thaw_interrupted))
			break;
	}
	if (n < 0) {
		if (!thaw_interrupted)
			fprintf(stderr, "%s: cannot read stdin: %s\n", who,
				strerror(errno));
		free(input);
		return -1;
	}
	spec->input = input;
	spec->input_len = len;
	return 0;
}

/* The exec of @o; -1 to go on, or the status of a usage error. */
static int exec_spec(const struct command *cmd, const struct options *o,
		     char **argv, struct thaw_exec *spec)
{
	for (char **a = argv; *a; a++)
		if (!thaw_client_is_text(*a))
			return usage_error(
				cmd, "argument '%s' is not UTF-8 text", *a);
	if (o->cwd && !thaw_client_is_text(o->cwd))
		return usage_error(cmd, "--cwd '%s' is not UTF-8 text", o->cwd);
	*spec = (struct thaw_exec){ .argv = (const char *const *)argv,
				    .env = o->env,
				    .cwd = o->cwd,
				    .timeout_s = o->timeout_s };
	if (o->send_stdin && read_stdin(cmd->name, spec) < 0)
		return cmd->fail_status;
	return -1;
}

static int exec_run(struct client *c, const struct options *o, int argc,
		    char **argv)
{
	struct exec_state s = { .who = c->cmd->name, .status = -1 };
	struct thaw_client *conn;
	struct thaw_exec spec;
	char err[ERR_MAX];
	int status;

	if (argc < 1)
		return usage_error(c->cmd, "no sandbox id given");
	const char *id = argv[0];
	argc--, argv++;
	if (argc > 0 && !strcmp(argv[0], "--"))
		argc--, argv++;
	if (argc < 1)
		return usage_error(c->cmd,
				   "no command given (thaw exec ID -- CMD)");
	s.cmd = argv[0];
	if ((status = exec_spec(c->cmd, o, argv, &spec)) >= 0)
		return status;
	if ((conn = connection(c, s.who)))
		report(s.who,
		       thaw_client_exec(conn, id, &spec, exec_event, &s, err,
					sizeof(err)),
		       err);
	free((void *)spec.input);
	return s.status < 0 ? EXIT_THAW_ERROR : s.status;
}

/* The local end of a download. */
struct download {
	const char *name;
	int fd;
};

static int download_data(const void *data, size_t len, void *arg, char *err,
			 size_t errlen)
{
	struct download *d = arg;
	int ret = write_full(d->fd, data, len);

	if (ret == 0)
		return 0;
	snprintf(err, errlen, "cannot write %s: %s", d->name, strerror(-ret));
	return THAW_CLIENT_LOCAL;
}

/* Where a download lands: @local, or in it when it is a directory. */
static int download_target(const char *who, const char *local,
			   const char *remote, char *out, size_t len)
{
	const char *base = strrchr(remote, '/') + 1;
	struct stat st;
	int n;

	if (stat(local, &st) == 0 && S_ISDIR(st.st_mode)) {
		if (!*base) {
			fprintf(stderr,
				"%s: %s names no file to copy into %s\n", who,
				remote, local);
			return -1;
		}
		n = snprintf(out, len, "%s/%s", local, base);
	} else {
		n = snprintf(out, len, "%s", local);
	}
	if (n < 0 || (size_t)n >= len) {
		fprintf(stderr, "%s: %s: path too long\n", who, local);
		return -1;
	}
	return 0;
}

/* Gives the finished temporary file @d its mode and @target's name. */
static int download_finish(const char *who, struct download *d, const char *tmp,
			   const char *target)
{
	mode_t mask = umask(0);
	struct stat st;
	int err = 0;

	umask(mask);
	/* Like a plain create, or keeping the mode of the file replaced. */
	if (fchmod(d->fd, stat(target, &st) == 0 ? st.st_mode & 07777
						 : 0666 & ~mask) < 0)
		err = errno;
	if (close(d->fd) < 0 && !err)
		err = errno;
	d->fd = -1;
	if (!err && rename(tmp, target) < 0)
		err = errno;
	if (err)
		fprintf(stderr, "%s: cannot write %s: %s\n", who, target,
			strerror(err));
	return err ? -1 : 0;
}

/*
 * GET into a temporary file beside the target, renamed over it once the
 * whole file arrived: an error answer, a broken transfer or a ^C leave the
 * target as it was.
 */
static int cp_download(struct client *c, const char *id, const char *remote,
		       const char *local)
{
	const char *who = c->cmd->name;
	char target[PATH_MAX], tmp[PATH_MAX + 16], err[ERR_MAX];
	struct download d = { .name = "stdout", .fd = STDOUT_FILENO };
	bool to_stdout = !strcmp(local, "-");
	struct thaw_client *conn;
	int ret = -1;

	if (!to_stdout) {
		if (download_target(who, local, remote, target,
				    sizeof(target)) < 0)
			return c->cmd->fail_status;
		snprintf(tmp, sizeof(tmp), "%s.thaw-XXXXXX", target);
		if ((d.fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
			fprintf(stderr, "%s: cannot create %s: %s\n", who,
				target, strerror(errno));
			return c->cmd->fail_status;
		}
		d.name = target;
	}
	if ((conn = connection(c, who)))
		ret = report(who,
			     thaw_client_download(conn, id, remote,
						  download_data, &d, err,
						  sizeof(err)),
			     err);
	if (ret == 0 && !to_stdout)
		ret = download_finish(who, &d, tmp, target);
	if (!to_stdout && ret != 0) {
		if (d.fd >= 0)
			close(d.fd);
		unlink(tmp);
	}
	return ret == 0 ? 0 : c->cmd->fail_status;
}

/* PUT from the local file (or stdin), with its permission bits. */
static int cp_upload(struct client *c, const char *local, const char *id,
		     const char *remote)
{
	const char *who = c->cmd->name;
	bool from_stdin = !strcmp(local, "-");
	struct thaw_upload up = { .fd = STDIN_FILENO,
				  .name = "stdin",
				  .size = -1 };
	struct thaw_client *conn;
	char err[ERR_MAX];
	int ret = -1;
	struct stat st;

	if (!from_stdin && (up.fd = open(local, O_RDONLY | O_CLOEXEC)) < 0) {
		fprintf(stderr, "%s: cannot open %s: %s\n", who, local,
			strerror(errno));
		return c->cmd->fail_status;
	}
	if (!from_stdin)
		up.name = local;
	if (fstat(up.fd, &st) < 0)
		fprintf(stderr, "%s: cannot read %s: %s\n", who, up.name,
			strerror(errno));
	else if (S_ISDIR(st.st_mode))
		fprintf(stderr, "%s: %s is a directory\n", who, up.name);
	else
		ret = 0;
	/* A pipe's length is known at its end only: it goes chunked. */
	if (ret == 0 && S_ISREG(st.st_mode))
		up.size = st.st_size;
	if (ret == 0)
		ret = (conn = connection(c, who))
			      ? report(who,
				       thaw_client_upload(
					       conn, id, remote,
					       from_stdin ? -1
							  : (int)(st.st_mode &
								  0777),
					       &up, err, sizeof(err)),
				       err)
			      : -1;
	if (!from_stdin)
		close(up.fd);
	return ret == 0 ? 0 : c->cmd->fail_status;
}

/*
 * The length of the sandbox id in "ID:/path", read as scp reads a remote
 * name (a colon before any slash), or 0 for a local path: "./a:b" is local.
 */
static size_t remote_id_len(const char *arg)
{
	size_t n = strcspn(arg, ":/");

	return arg[n] == ':' ? n : 0;
}

static int cp_run(struct client *c, const struct options *o, int argc,
		  char **argv)
{
	(void)o;
	if (argc != 2)
		return usage_error(c->cmd, "takes a SRC and a DST");
	size_t src_id = remote_id_len(argv[0]);
	size_t dst_id = remote_id_len(argv[1]);
	if (src_id && dst_id)
		return usage_error(
			c->cmd,
			"SRC and DST are both in sandboxes: one must be local");
	if (!src_id && !dst_id)
		return usage_error(
			c->cmd,
			"neither SRC nor DST is in a sandbox (ID:/path)");
	char *remote = src_id ? argv[0] : argv[1];
	size_t id_len = src_id ? src_id : dst_id;
	if (remote[id_len + 1] != '/')
		return usage_error(
			c->cmd,
			"'%s': the path in the sandbox must be absolute",
			remote);
	/* "ID:/path" becomes "ID" and "/path". */
	remote[id_len] = '\0';
	if (src_id)
		return cp_download(c, remote, remote + id_len + 1, argv[1]);
	return cp_upload(c, argv[0], remote, remote + id_len + 1);
}

/* One table for every command; struct command says which takes what. */
static const struct option long_options[] = {
	{ "socket", required_argument, NULL, 'S' },
	{ "help", no_argument, NULL, 'h' },
	{ "template", required_argument, NULL, 'T' },
	{ "snapshot", required_argument, NULL, 'P' },
	{ "count", required_argument, NULL, 'n' },
	{ "timeout", required_argument, NULL, 't' },
	{ "env", required_argument, NULL, 'e' },
	{ "cwd", required_argument, NULL, 'C' },
	{ "stdin", no_argument, NULL, 'i' },
	{ "json", no_argument, NULL, 'j' },
	{ "allow-out", required_argument, NULL, 'a' },
	{ "deny-out", required_argument, NULL, 'd' },
	{ "internet", no_argument, NULL, 'I' },
	{ "no-internet", no_argument, NULL, 'N' },
	{ NULL, 0, NULL, 0 },
};

/* Appends @arg to the NULL-terminated *@v of *@n; false without memory
 * (after a message). */
static bool append(const struct command *cmd, const char ***v, size_t *n,
		   const char *arg)
{
	const char **grown = realloc(*v, (*n + 2) * sizeof(**v));

	if (!grown) {
		fprintf(stderr, "%s: out of memory\n", cmd->name);
		return false;
	}
	grown[(*n)++] = arg;
	grown[*n] = NULL;
	*v = grown;
	return true;
}

/* --allow-out or --deny-out @arg onto its list: a CIDR, at most the
 * daemon's NET_POLICY_MAX_CIDRS; -1 to go on, or an exit status. */
static int add_cidr(const struct command *cmd, const char *option,
		    const char ***v, size_t *n, const char *arg)
{
	struct net_cidr cidr;
	char why[160];

	if (net_cidr_parse(arg, &cidr, why, sizeof(why)) < 0)
		return usage_error(cmd, "--%s: %s", option, why);
	if (*n == NET_POLICY_MAX_CIDRS)
		return usage_error(cmd, "--%s: more than %d CIDRs", option,
				   NET_POLICY_MAX_CIDRS);
	return append(cmd, v, n, arg) ? -1 : cmd->fail_status;
}

/* Takes option @opt; -1 to go on, or the exit status of a usage error. */
static int take_option(const struct command *cmd, struct options *o, int opt,
		       const char *arg)
{
	const char *eq;
	char *end;

	switch (opt) {
	case 'S':
		o->socket = arg;
		break;
	case 'T':
		o->template = arg;
		break;
	case 'P':
		if (!thaw_client_is_text(arg))
			return usage_error(
				cmd, "--snapshot '%s' is not UTF-8 text", arg);
		o->snapshot = arg;
		break;
	case 'n':
		errno = 0;
		o->count = strtol(arg, &end, 10);
		if (errno || *end || end == arg || o->count < 1 ||
		    o->count > 64)
			return usage_error(
				cmd, "-n '%s' is not a count from 1 to 64",
				arg);
		break;
	case 'C':
		o->cwd = arg;
		break;
	case 'i':
		o->send_stdin = true;
		break;
	case 'j':
		o->json = true;
		break;
	case 't':
		errno = 0;
		o->timeout_s = strtol(arg, &end, 10);
		if (errno || *end || end == arg || o->timeout_s < 1 ||
		    o->timeout_s > UINT32_MAX)
			return usage_error(
				cmd,
				"--timeout '%s' is not a number of seconds (1 or more)",
				arg);
		break;
	case 'e':
		eq = strchr(arg, '=');
		if (!eq || eq == arg)
			return usage_error(
				cmd, "--env takes KEY=VALUE, not '%s'", arg);
		if (!thaw_client_is_text(arg))
			return usage_error(cmd, "--env '%s' is not UTF-8 text",
					   arg);
		if (!append(cmd, &o->env, &o->nr_env, arg))
			return cmd->fail_status;
		break;
	case 'a':
		return add_cidr(cmd, "allow-out", &o->allow_out,
				&o->nr_allow_out, arg);
	case 'd':
		return add_cidr(cmd, "deny-out", &o->deny_out, &o->nr_deny_out,
				arg);
	case 'I':
		o->internet = 1;
		break;
	case 'N':
		o->internet = -1;
		break;
	}
	return -1;
}

/* -1 to go on, or the exit status (0 after --help). */
static int parse_options(const struct command *cmd, int argc, char **argv,
			 struct options *o)
{
	int opt, index = 0;

	opterr = 0;
	optind = 1;
	while ((opt = getopt_long(argc, argv,
				  cmd->stop_at_operand ? "+:h" : ":hn:",
				  long_options, &index)) != -1) {
		if (opt == 'h') {
			fputs(cmd->usage, stdout);
			return 0;
		}
		if (opt == ':')
			return usage_error(cmd, "option '%s' needs a value",
					   argv[optind - 1]);
		if (opt == '?' && optopt)
			return usage_error(cmd, "unknown option '-%c'", optopt);
		if (opt == '?')
			return usage_error(cmd, "unknown option '%s'",
					   argv[optind - 1]);
		if (opt != 'S' && !strchr(cmd->accepts, opt))
			return usage_error(cmd, "unknown option '--%s'",
					   long_options[index].name);
		int status = take_option(cmd, o, opt, optarg);
		if (status >= 0)
			return status;
	}
	return -1;
}

static int client_main(const struct command *cmd, int argc, char **argv)
{
	struct options o = { 0 };
	struct client c = { .cmd = cmd, .opts = &o };
	int status = parse_options(cmd, argc, argv, &o);

	if (status < 0) {
		thaw_catch_signals();
		status = cmd->run(&c, &o, argc - optind, argv + optind);
		if (thaw_interrupted) {
			fprintf(stderr, "%s: interrupted\n", cmd->name);
			status = 128 + thaw_interrupted;
		}
	}
	thaw_client_close(c.conn);
	free(o.env);
	free(o.allow_out);
	free(o.deny_out);
	return status;
}

#define SOCKET_HELP                                                           \
	"Every command takes --socket PATH, the daemon's socket (default\n"   \
	"$THAW_SOCKET, else thawd.sock in the state directory,\n"             \
	"~/.local/state/thaw unless $THAW_STATE_DIR or $XDG_STATE_HOME say\n" \
	"otherwise), and sends $THAW_TOKEN as the bearer token when it is set.\n"

static const char sandbox_usage[] =
	"usage: thaw sandbox create [--template T | --snapshot SNAP] [--timeout S]\n"
	"                           [--env K=V]... [--allow-out CIDR]...\n"
	"                           [--deny-out CIDR]... [--no-internet]\n"
	"       thaw sandbox ls [--json]\n"
	"       thaw sandbox rm ID...\n"
	"       thaw sandbox network ID [--allow-out CIDR]... [--deny-out CIDR]...\n"
	"                               [--internet | --no-internet]\n"
	"       thaw sandbox checkpoint ID\n"
	"       thaw sandbox fork ID [-n N]\n"
	"       thaw sandbox rollback ID SNAP\n"
	"       thaw sandbox pause ID\n"
	"       thaw sandbox resume ID\n"
	"Sandboxes are clones thawd (thaw daemon) hands out from its warm pools.\n"
	"create prints the new sandbox's id; the daemon removes it --timeout\n"
	"seconds later (the template's default when not given) unless rm does\n"
	"first.  Its --env is set for every thaw exec in it.  --snapshot\n"
	"restores it from snapshot SNAP (a template's or a checkpoint) instead.\n"
	"checkpoint writes a snapshot of running sandbox ID (only the memory it\n"
	"changed since the last one) and prints its id; fork checkpoints ID and\n"
	"restores N sandboxes of it (default 1), printing their ids; rollback\n"
	"replaces ID's VM with a restore of SNAP (any snapshot of its template),\n"
	"keeping its id, lease and host address; pause checkpoints ID and stops\n"
	"its VM (printing the checkpoint's id), resume restores it.  The\n"
	"daemon's snapshots are thaw snapshot ls's: the same catalog.\n"
	"A sandbox reaches the internet but not the host, other sandboxes,\n"
	"link-local addresses (cloud metadata) or private ranges (10/8,\n"
	"172.16/12, 192.168/16, 100.64/10).  --allow-out opens a CIDR\n"
	"(A.B.C.D/N; link-local and the host stay closed), --deny-out closes one,\n"
	"--no-internet closes the rest.  network shows sandbox ID's network;\n"
	"given any of these options it replaces its policy, what is not given\n"
	"being the template's default again.\n" SOCKET_HELP;

static const char exec_usage[] =
	"usage: thaw exec [--env K=V]... [--cwd DIR] [--timeout S] [--stdin]\n"
	"                 ID -- CMD [ARG...]\n"
	"Runs CMD in sandbox ID (see thaw sandbox create), copying its stdout\n"
	"and stderr as they come; --stdin sends all of our stdin to it.  Exits\n"
	"with CMD's exit status (128+signal if killed, 124 if --timeout passed,\n"
	"125 if thaw failed); ^C kills CMD.\n" SOCKET_HELP;

static const char cp_usage[] =
	"usage: thaw cp SRC DST\n"
	"Copies a file into or out of a sandbox: one of SRC and DST is\n"
	"ID:/abs/path, the other a local path, or - for stdin or stdout.  An\n"
	"upload keeps the local file's permission bits; a download replaces\n"
	"DST only once the whole file has arrived.\n" SOCKET_HELP;

static const struct command sandbox_commands[] = {
	{ .name = SANDBOX "create",
	  .usage = sandbox_usage,
	  .accepts = "TPteadN",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_create },
	{ .name = SANDBOX "ls",
	  .usage = sandbox_usage,
	  .accepts = "j",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_ls },
	{ .name = SANDBOX "rm",
	  .usage = sandbox_usage,
	  .accepts = "",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_rm },
	{ .name = SANDBOX "network",
	  .usage = sandbox_usage,
	  .accepts = "adIN",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_network },
	{ .name = SANDBOX "checkpoint",
	  .usage = sandbox_usage,
	  .accepts = "",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_checkpoint },
	{ .name = SANDBOX "fork",
	  .usage = sandbox_usage,
	  .accepts = "n",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_fork },
	{ .name = SANDBOX "rollback",
	  .usage = sandbox_usage,
	  .accepts = "",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_restore },
	{ .name = SANDBOX "pause",
	  .usage = sandbox_usage,
	  .accepts = "",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_checkpoint },
	{ .name = SANDBOX "resume",
	  .usage = sandbox_usage,
	  .accepts = "",
	  .usage_status = EXIT_USAGE,
	  .fail_status = EXIT_FAILED,
	  .run = sandbox_restore },
};

int thaw_sandbox(int argc, char **argv)
{
	const char *sub = argc > 1 ? argv[1] : NULL;
	size_t n = sizeof(sandbox_commands) / sizeof(sandbox_commands[0]);

	if (!sub || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
		fputs(sandbox_usage, sub ? stdout : stderr);
		return sub ? 0 : EXIT_USAGE;
	}
	for (size_t i = 0; i < n; i++)
		if (!strcmp(sandbox_commands[i].name + strlen(SANDBOX), sub))
			return client_main(&sandbox_commands[i], argc - 1,
					   argv + 1);
	fprintf(stderr, "thaw sandbox: unknown command '%s'\n%s", sub,
		sandbox_usage);
	return EXIT_USAGE;
}

int thaw_exec(int argc, char **argv)
{
	static const struct command exec = {
		.name = "thaw exec",
		.usage = exec_usage,
		.accepts = "eCti",
		.stop_at_operand = true,
		.usage_status = EXIT_THAW_ERROR,
		.fail_status = EXIT_THAW_ERROR,
		.run = exec_run,
	};

	return client_main(&exec, argc, argv);
}

int thaw_cp(int argc, char **argv)
{
	static const struct command cp = {
		.name = "thaw cp",
		.usage = cp_usage,
		.accepts = "",
		.usage_status = EXIT_USAGE,
		.fail_status = EXIT_FAILED,
		.run = cp_run,
	};

	return client_main(&cp, argc, argv);
}
