/* SPDX-License-Identifier: Apache-2.0 */
/*
 * daemon_suite.h - what the test_daemon_* suites share: the suite's daemon
 * (its config, its start on pool/client's thawd_process.h, the files by
 * which each test process finds it), HTTP calls through pool/client's raw
 * call with jansson answers, execs and their streams, the pools' counts,
 * the daemon's VMMs and their jails, cgroups found without pool/host's
 * code, and raw socket clients.
 *
 * daemon-in-vm.sh runs each suite on a KVM host with a fresh
 * THAW_STATE_DIR and THAW_TEST_THAW, THAW_TEST_KERNEL and THAW_TEST_INITRD,
 * and with THAW_TEST_BOOT_S, one guest boot's seconds: the deadlines that
 * only end hangs (criterion's .timeout included) and the bounds on how
 * soon the daemon does something are scaled by guest_slowness().  One
 * daemon serves a whole suite file, since building its templates'
 * snapshot is slow: DAEMON_SUITE_HOOKS() writes its config and starts it
 * before the first test and stops it after the last.  Criterion runs each
 * test in a process of its own, so tests find the daemon through files in
 * the state directory (its pid, socket and log); the lifecycle test kills
 * and restarts it and leaves a new one there.
 *
 * Requests go through the client library's raw call (request(); the
 * library is pool/client's, not the daemon's code), answers are parsed
 * with jansson and base64 is nettle's, independent of the daemon's code.
 * Malformed HTTP and stalled or vanishing clients are raw socket writes.
 * Measured numbers go to stderr as "test_daemon: ..." lines.  Helpers
 * assert (cr_assert) unless they say they do not.
 */
#ifndef THAW_TESTS_DAEMON_SUITE_H
#define THAW_TESTS_DAEMON_SUITE_H

#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TOKEN "thaw-test-token-5f1c0a"
#define CGROUP_PARENT "thaw-test-daemon"

/* The templates of the config the suite writes (write_config()). */
#define MIN_READY 2
#define MAX_TOTAL 64
#define MAX_TIMEOUT_S 3600
#define MAX_REQUEST_BYTES 65536
#define MAX_EXEC_OUTPUT 1048576
#define BOMB_MEMORY_MIB 192
#define BOMB_PIDS 64
/* The daemon's restore_timeout_s: also how long past an exec's timeout_s
 * it waits for the guest to report the end (scaled). */
#define RESTORE_TIMEOUT_S 600
/* A bomb's exec answers within its timeout_s plus the daemon's wait plus
 * this, /health within: */
#define BOMB_GRACE_S 120
#define HEALTH_LIMIT_S 10
extern const char *const templates[3];

#define CONCURRENT 50
/*
 * Under nested-kvm.sh's software-emulated host (QEMU TCG), 50 guests at
 * once crashed that host's own kernel (a stack guard hit in kvm_amd's
 * __svm_vcpu_run, seen once at ~40 guests): the emulator's limit, not
 * thaw's.  On KVM-on-PVM, 50 pass but take 15-20 minutes (every guest
 * kernel in KVM's instruction emulator, 2 cores), a fifth of CI's time
 * for the whole suite.  On both the test hands out this many at once, and
 * says so; THAW_TEST_FULL_SIZE=1 asks for 50 anyway.
 */
#define CONCURRENT_EMULATED 16
#define FILE_BYTES (1 << 20)
#define SB_ID_MAX 64
#define START_LIMIT_S 1200 /* the first start builds the snapshot */
#define SETTLE_LIMIT_S 300 /* restores on an emulated host */
#define HTTP_LIMIT_S 900   /* one request, an on-demand restore included */
#define EXPECT_BYTES 1024
#define RAW_HEADERS "Host: thaw\r\nAuthorization: Bearer " TOKEN "\r\n"
/* The suite's jail ids: no other thaw's, so a leftover is ours. */
#define JAIL_FIRST_ID 1879113728u
#define JAIL_LAST_ID 1879114727u
#define JAIL_IDS_LOCK_FILE "/run/thaw/jail-ids.lock"

struct daemon_files {
	char state[PATH_MAX];
	char config[PATH_MAX + 32];
	char socket[108];
	char log[PATH_MAX + 32];
	char pid[PATH_MAX + 32];
};
extern struct daemon_files files;

double now_s(void);

/* CPU seconds (user + system, all threads) process @pid has used; 0 if
 * it cannot be read. */
double process_cpu_s(pid_t pid);

/* Sleeps @s seconds; none when @s <= 0. */
void sleep_s(double s);

/* The whole file, NUL-terminated (@len: its length), or NULL. */
char *slurp(const char *path, size_t *len);

/* The files of a daemon whose state directory is @state, into files;
 * false when @state is unset or too long. */
bool files_in(const char *state);

struct reply {
	long status; /* 0: no answer, and body is the client's error */
	char *body;  /* NUL-terminated */
	size_t len;
	json_t *json; /* the body, when it is a JSON object */
	char type[128];
	char allow[128];
	char retry_after[32];
	double seconds;
};

/* One request; only method and path are required. */
struct call {
	const char *method, *path;
	const void *body; /* @len bytes; NULL: no body */
	size_t len;
	bool no_token;
	int limit_s; /* for the whole exchange; 0: HTTP_LIMIT_S */
};

/*
 * Sends @q and fills @r.  Asserts nothing, so threads may call it: each
 * request has a connection of its own, as a connection is one thread's.
 */
void request(const struct call *q, struct reply *r);

void reply_free(struct reply *r);

/*
 * An authenticated request with the JSON text @body (or none) to the path
 * @path_fmt formats; returns the status.  Thread-safe like request().
 */
__attribute__((format(printf, 4, 5))) long api(struct reply *r,
					       const char *method,
					       const char *body,
					       const char *path_fmt, ...);

/* @key of object @o as a string, "" when it is not one. */
const char *jstr(const json_t *o, const char *key);

/* @key of object @o as a number, NAN when it is not one. */
double jnum(const json_t *o, const char *key);

/*
 * What is wrong with sandbox object @sb's "restore" (API.md) into
 * @problem, "" when nothing: every phase there and >= 0, each side the sum
 * of its phases, page-in inside the VMM's start, the two sides adding up to
 * no more than restore_ms (each figure is rounded to 0.01 ms), and neither
 * the host's work nor the agent's answer taking no time at all.
 */
void check_restore_phases(const json_t *sb, char *problem, size_t len);

char *base64_encode(const void *data, size_t len);

/* POST /sandboxes with @body: asserts 201 and returns the id in @id. */
void create(const char *body, char id[SB_ID_MAX]);

void delete_sandbox(const char *id);

/* GET /sandboxes/@id's "pid": its VMM. */
pid_t sandbox_vmm(const char *id);

/*
 * POST /sandboxes/@id/exec with @body (consumed), waiting at most @limit_s
 * (0: HTTP_LIMIT_S); returns the status.
 */
long exec_json(struct reply *r, const char *id, json_t *body, int limit_s);

struct exec_result {
	char *out, *err; /* decoded */
	size_t out_len, err_len;
	bool ended; /* an exit event (or the stream:false object) came */
	int exit_code, signal; /* -1 when absent */
	bool timed_out, truncated;
	int started_pid;   /* stream: the started event's, else -1 */
	char error[256];   /* stream: an error event's message */
	char problem[256]; /* what was wrong with the answer, "" if nothing */
};

/*
 * Decodes an exec answer: NDJSON events when @stream, else one object.
 * Asserts nothing (threads use it); x->problem says what was wrong.
 */
void parse_exec(const struct reply *r, bool stream, struct exec_result *x);

void exec_result_free(struct exec_result *x);

/* Runs @cmd in sandbox @id (stream:false): asserts a well-formed answer. */
void run_cmd(const char *id, const char *cmd, int timeout_s,
	     struct exec_result *x);

/* Asserts that sandbox @id runs `echo @word`. */
void expect_echo(const char *id, const char *word);

struct pool_counts {
	double min_ready, max_total, ready, restoring, leased;
};

void pool_counts(const char *name, struct pool_counts *c);

/*
 * Waits until template @name has min_ready clones ready and none
 * restoring; returns the seconds that took, or -1 after SETTLE_LIMIT_S.
 */
double wait_settled(const char *name, struct pool_counts *c);

/* Whether @pid is a live (not zombie) process named thaw-vmm. */
bool vmm_alive(pid_t pid);

/* The daemon's live VMMs (at most @max in @pids); their number. */
int live_vmms(pid_t *pids, int max);

/* Waits (at most @limit_s) until no VMM of the daemon's runs; returns how
 * long. */
double wait_no_vmms(double limit_s);

/* Waits (at most @limit_s) until process @pid is gone; false if not. */
bool wait_gone(pid_t pid, double limit_s);

/*
 * Cgroups, found the way pool/cgroup.h documents and read without its
 * code: v2 when /sys/fs/cgroup is a cgroup2 mount that offers any of the
 * controllers, where one directory holds them all; otherwise v1, where
 * each controller has a hierarchy of its own (/proc/self/mountinfo says
 * where), possibly shared with others ("cpu,cpuacct").  The daemons'
 * parent cgroup is CGROUP_PARENT directly below each hierarchy's root, this
 * daemon's group "state-<FNV-1a 64 of its state directory's real path>"
 * below that, and a sandbox is one directory of the same name below the
 * group in each.
 */
enum { CG_CPU, CG_MEMORY, CG_PIDS, CG_NR };
extern const char *const cg_name[CG_NR];

/* A sandbox's (or the parent's) directory per controller; "" for none. */
struct cg_dirs {
	char dir[CG_NR][PATH_MAX];
};

struct cg_hierarchies {
	bool v2;
	/* Where each controller's hierarchy is mounted ("" when nowhere),
	 * and which of its cgroups is the mount's root ("/" normally). */
	char mount[CG_NR][PATH_MAX];
	char root[CG_NR][PATH_MAX];
};
extern struct cg_hierarchies hier;

/* The daemon's group in each hierarchy (connect_daemon() fills it in). */
extern struct cg_dirs parent;

/*
 * The cgroups of VMM @pid: in every hierarchy one directly below the
 * parent, and on v1 the same name in each.
 */
void vmm_cgroup(pid_t pid, struct cg_dirs *d);

/* The number in cgroup file @dir/@name ("max": UINT64_MAX); false if
 * unreadable. */
bool cgroup_value(const char *dir, const char *name, uint64_t *v);

/*
 * empty_below() for the parent in every hierarchy (once per directory):
 * the empty ones in all of them; @all: the cgroups in all of them.
 */
int empty_cgroups(int *all);

/* "dir, dir, dir" of @d without repeats, for messages. */
const char *cg_list(const struct cg_dirs *d, char *out, size_t len);

/*
 * Run directory of VMM @pid: where its --control socket is (into @dir),
 * and that socket's file name (into @sock).  False when it has none.
 */
bool vmm_run_dir(pid_t pid, char *dir, size_t len, char *sock, size_t sock_len);

/* Directories in @base holding a file called @sock: VMM run directories. */
int run_dirs(const char *base, const char *sock);

/*
 * The suite's daemon does not watch CPU pressure or restore slowdown:
 * the suite's own guests (50 at once, bombs) load this host for tens of
 * seconds, and on a host whose guest kernel is emulated that is enough
 * for admission to refuse the next test's creates, which would then test
 * the host's load, not what they are about.  Admission has its own test
 * (overloaded_host_refuses_new_restores).
 */
#define SUITE_DAEMON_KEYS "admit_cpu_pressure = 0\nadmit_restore_slowdown = 0\n"

/* The suite's config, with @daemon_keys (lines) added to its [daemon]. */
void write_config(const char *daemon_keys);

/* The last 2000 bytes of file @path, from offset @from on. */
void tail_of(const char *path, off_t from, char *out, size_t len);

/* Copies the daemon's log lines that mention @needle to stderr. */
void print_log_lines(const char *needle);

/*
 * Waits (at most @limit_s) for process @pid to end: 1 with its wait
 * @status when it is our child, 0 when it is gone (or a zombie) but not
 * ours, -1 when it still runs.
 */
int wait_exit(pid_t pid, double limit_s, int *status);

/* The next daemon_start()'s daemon logs JSON lines (--log-format json),
 * debug ones too: each restore it makes is one, naming its sandbox. */
extern bool log_json;

/*
 * Starts `thaw daemon` on files.config and waits until its socket
 * answers; records its pid in files.pid.  @own: our child, whose exit
 * status we see; else detached (thawd_process.h says why a test's runner
 * needs that).  Returns the pid, or -1 with the reason in @err.  Asserts
 * nothing: suite_daemon_start() calls it too.
 */
pid_t daemon_start(bool own, char *err, size_t len);

/* The serving daemon's pid (from files.pid), or -1. */
pid_t daemon_pid(void);

/* The group of the daemon with cgroup_parent @name and files.state in
 * every hierarchy, into parent. */
void find_parent_cgroups(const char *name);

/* Each test's start: the suite's daemon must be up. */
void connect_daemon(void);

/*
 * Before a suite file's first test: scales its timeouts, writes the
 * suite's config and starts its daemon; a failed start is left in a file
 * for connect_daemon() to report in every test.  After its last test:
 * SIGTERM to the daemon serving then (a test may have replaced it).
 */
struct criterion_test_set;
struct criterion_global_stats;
void suite_daemon_start(struct criterion_test_set *set);
void suite_daemon_stop(struct criterion_global_stats *stats);

/*
 * Makes suite_daemon_start() and suite_daemon_stop() a suite file's
 * PRE_ALL and POST_ALL hooks, registered as criterion's ReportHook() does,
 * under names of their own (ReportHook() names its functions by line
 * number, so two of them in one macro would clash).
 */
#define DAEMON_SUITE_HOOKS()                                          \
	CR_SECTION_("cr_pra")                                         \
	f_report_hook daemon_suite_pre_all_hook =                     \
		(f_report_hook)suite_daemon_start CR_SECTION_SUFFIX_; \
	CR_SECTION_("cr_poa")                                         \
	f_report_hook daemon_suite_post_all_hook =                    \
		(f_report_hook)suite_daemon_stop CR_SECTION_SUFFIX_

/* The number after "@key:" in /proc/@pid/status (the first of several). */
bool status_field(pid_t pid, const char *key, unsigned long long *v, int base);

bool zombie(pid_t pid);

/*
 * @method @path with @body (@len bytes) expects @status and error @code;
 * on a 405, @allow lists (space-separated) methods the Allow header names.
 */
void expect_error(const char *method, const char *path, const char *body,
		  size_t len, bool auth, long status, const char *code,
		  const char *allow);

/* expect_error() with an authenticated JSON @body (or none). */
void expect_json_error(const char *method, const char *path, const char *body,
		       long status, const char *code);

/* A raw connection to the daemon. */
int raw_connect(void);

__attribute__((format(printf, 2, 3))) void raw_write(int fd, const char *fmt,
						     ...);

/*
 * Reads from @fd into @buf until @needle arrives, the peer closes or
 * @timeout_s pass; whether @needle came.
 */
bool raw_wait_for(int fd, const char *needle, double timeout_s, char *buf,
		  size_t size);

/* The value of counter thaw_handouts_total{template="default"}, or -1. */
double handouts(void);

#endif
