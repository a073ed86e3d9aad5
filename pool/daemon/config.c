// SPDX-License-Identifier: Apache-2.0
/*
 * config.c - see config.h.
 *
 * inih splits lines into sections, keys and values and strips comments, but
 * Debian's build of it gives the handler no line number, does not report a
 * section that has no keys, cuts section names at 49 characters and reads
 * at most 199 characters a line (a longer one comes back in pieces, each
 * parsed as a line of its own).  So the lines reach inih through read_line(),
 * which counts them, refuses overlong and indented ones (inih would take an
 * indented line for the continuation of the previous value) and parses the
 * [section] headers itself: the handler works on the section read_line()
 * opened and ignores inih's.  read_line() also ends the parse at the first
 * error, so the message is about the first thing wrong.
 *
 * The keys are tables (name, type, offset, range) and one setter serves
 * them all.  The defaults are the embedded text itself: it is parsed first,
 * its [daemon] is the starting point of a file's [daemon] and its [template
 * default] that of each of the file's templates, so the documentation
 * printed by --print-config cannot drift from what runs.  The checks that
 * involve more than one key (check_orders(), check_sum()) run once the whole
 * file is read; they blame the key the file set last, on its line.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <ini.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/host/cgroup.h"
#include "common/capfile.h"
#include "pool/daemon/config.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define BUILTIN "<built-in config>"

/* dns_servers holds this many. */
#define NET_DNS_MAX ((int)ARRAY_SIZE(((struct net_config *)0)->dns_servers))

const char config_default_text[] =
	"; thawd's configuration (`thaw daemon --config FILE`).  This text is the\n"
	"; built-in default: `thaw daemon --print-config` prints it, and a daemon\n"
	"; started without --config runs with exactly these values.  Every key is\n"
	"; optional; one left out keeps the value shown here.\n"
	";\n"
	"; Keys (\"key = value\") and [sections] start in the first column; lines\n"
	"; starting with ; or # and anything after \" ;\" are comments; a line holds\n"
	"; at most 198 characters.  Numbers are decimal; the *_bytes keys also take\n"
	"; a K, M or G suffix (KiB, MiB, GiB).  Paths are absolute.\n"
	"\n"
	"[daemon]\n"
	"; The API's Unix socket; \"\" is <state_dir>/thawd.sock.\n"
	"socket =\n"
	"; The group that may use the socket (mode 0660); \"\" is the daemon's own.\n"
	"socket_group =\n"
	"; Snapshots, catalog and run directories; \"\" is $THAW_STATE_DIR, else\n"
	"; $XDG_STATE_HOME/thaw, else ~/.local/state/thaw.\n"
	"state_dir =\n"
	"; Every request must carry \"Authorization: Bearer TOKEN\"; \"\" checks\n"
	"; nothing beyond the socket's permissions.\n"
	"token =\n"
	"; Or the token is the first line of this file (trailing white space\n"
	"; stripped), which keeps it out of a readable config; not with token.\n"
	"token_file =\n"
	"; Sandboxes alive at once, of all templates, warm ones included; at least\n"
	"; the templates' min_ready added up.  1..65536.\n"
	"max_sandboxes = 256\n"
	"; API connections open at once, 1..65536.\n"
	"max_connections = 512\n"
	"; API connections one uid (of the socket's peer, SO_PEERCRED; on the E2B\n"
	"; listener, a local client's uid, a remote one's address) may hold at\n"
	"; once, 1..max_connections; the next is answered 429 and closed.  auto is\n"
	"; a quarter of max_connections (128 of 512): far more than one client\n"
	"; needs (a connection per request in flight), and one uid, however many\n"
	"; it opens, leaves three quarters of the slots to the others.\n"
	"max_connections_per_uid = auto\n"
	"; Seconds a connection has to send a whole request head (request line\n"
	"; and headers) from its accept or its previous reply, 1..3600; past it\n"
	"; the connection is closed, however slowly it trickles bytes in (an idle\n"
	"; one is closed after idle_timeout_s anyway).  nginx's\n"
	"; client_header_timeout is 60.\n"
	"header_timeout_s = 30\n"
	"; Seconds a connection may stay silent inside a request (a client that\n"
	"; stalls sending its body or reading its answer) before it is closed,\n"
	"; 1..3600.  A request waiting on its sandbox's guest (an exec, a file\n"
	"; copied, a ping) is bounded by the guest instead: restore_timeout_s per\n"
	"; step, an exec by its own timeout_s, or by nothing (a command may run\n"
	"; silent for as long as it likes, until its lease ends).\n"
	"idle_timeout_s = 120\n"
	"; Largest JSON request body, base64-encoded exec stdin included: an exec\n"
	"; must fit in one 1M agent frame anyway.  While it is held and parsed a\n"
	"; body takes 33 times its length from api_memory_budget_bytes.  1K..16M.\n"
	"max_request_bytes = 2M\n"
	"; Largest file copied into or out of a sandbox.\n"
	"max_file_bytes = 256M\n"
	"; Output of one exec kept; the rest is cut off.\n"
	"max_exec_output_bytes = 16M\n"
	"; Memory the API's requests may hold at once: 3M per request talking to\n"
	"; a guest (frames on their way), JSON bodies (33 times their length), and\n"
	"; the output execs collect.  A request that does not fit is answered 503\n"
	"; with Retry-After.  At least 8M.\n"
	"api_memory_budget_bytes = 1G\n"
	"; How long a request waits for a sandbox to be restored, 1..86400; also\n"
	"; how long the daemon waits for a guest's agent to answer, and for a\n"
	"; timed-out exec's end to be reported.\n"
	"restore_timeout_s = 60\n"
	"; The cgroup, one name ([A-Za-z0-9_.-]) directly below the hierarchy's\n"
	"; root (/sys/fs/cgroup/NAME on cgroup v2), that daemons share.  Each\n"
	"; daemon keeps its sandboxes' cgroups in a group of its own below it,\n"
	"; state-<hash of its state directory>, and cleans up only that one.\n"
	"cgroup_parent = thaw\n"
	"; The daemon's log, on stderr: error, warning, info or debug, each level\n"
	"; including those before it.  `thaw daemon --log-level` overrides it.\n"
	"log_level = info\n"
	"; text: a line for people; json: a JSON object a line, for collectors.\n"
	"; `thaw daemon --log-format` overrides it.\n"
	"log_format = text\n"
	"; Each sandbox's console.log and vmm.log keep at most about this many\n"
	"; bytes: the head, then a mark and the latest bytes (thaw run\n"
	"; --log-max, thaw-vmm --log-max).  1K..1024G.\n"
	"log_max = 3M\n"
	"; Every sandbox's VMM runs jailed: a uid and gid of its own from\n"
	"; jail_ids, its own mount, PID, IPC, UTS and cgroup namespaces, a root\n"
	"; holding only /dev/kvm and its snapshot, no capabilities, a seccomp\n"
	"; allow-list.  false is for debugging only: a guest that breaks its VMM\n"
	"; then owns the host, and the daemon warns about it.  true or false.\n"
	"jail = true\n"
	"; Sandboxes are limited by the memory and pids cgroup controllers, and\n"
	"; by cpu for a template with a cpu_percent: a daemon that finds one of\n"
	"; them missing refuses to start and names it, since a limit that does\n"
	"; not apply is none.  false starts anyway without it, for debugging\n"
	"; only: a guest can then take the host's memory, processes or CPUs,\n"
	"; and the daemon warns about it.  true or false.\n"
	"require_limits = true\n"
	"; The uids and gids jailed VMMs take, one each while it lives, FIRST-LAST;\n"
	"; no user or group of the host may have one.  Shared with `thaw run`\n"
	"; and other daemons (each takes only free ids).\n"
	"jail_ids = " JAIL_IDS_DEFAULT "\n"
	";\n"
	"; Network (templates with network = nat).  Each sandbox has a network\n"
	"; namespace of its own, reached through a veth whose two ends take the\n"
	"; next /30 of network_cidr: the host's end, and the sandbox's host\n"
	"; address (its guest's servers answer there).  Its traffic leaves the\n"
	"; host masqueraded to the host's own address.  At least a /30; not in\n"
	"; 0.0.0.0/8, 127.0.0.0/8, 169.254.0.0/16 or 224.0.0.0/3; nothing else\n"
	"; on the host may use it.\n"
	"network_cidr = 10.200.0.0/16\n"
	"; The resolvers sandboxes may use (a guest asks its gateway, which\n"
	"; forwards to them): up to 4 IPv4 addresses, comma-separated.  \"\" is\n"
	"; the host's nameservers in /etc/resolv.conf, loopback ones and ones\n"
	"; in network_cidr skipped (the daemon says at start-up when none is\n"
	"; left: sandboxes then have no DNS); none turns DNS off.  Never inside\n"
	"; network_cidr.\n"
	"dns_servers =\n"
	"; DNS even for a sandbox without internet (allow_internet = false):\n"
	"; names then resolve, though their addresses stay out of reach.  A\n"
	"; resolver carries data out of the sandbox in its queries, so it is\n"
	"; off by default.  true or false.\n"
	"dns_without_internet = false\n"
	";\n"
	"; Admission.  While its host is overloaded the daemon starts no restore\n"
	"; (the warm pools are not refilled) and answers a create that would need\n"
	"; one 503 \"overloaded\" with Retry-After (so do waiting creates that\n"
	"; no restore under way serves); a ready clone is still handed out.  It\n"
	"; stops admitting when a signal below reaches its limit, and admits\n"
	"; again once each is under 3/4 of its limit (memory: above 4/3 of its\n"
	"; floor), read once a second.  0 turns a signal off.  Pressure is the\n"
	"; kernel's PSI\n"
	"; (/proc/pressure/), avg10: the percentage of the last 10 s spent\n"
	"; stalled; without PSI (CONFIG_PSI off, psi=0) the daemon says so once\n"
	"; and the other signals still count.\n"
	"; CPU, \"some\": runnable tasks waited for a CPU.  At 90 % the CPUs were\n"
	"; oversubscribed nearly all the time: every guest already runs late and\n"
	"; another VMM only lengthens the queue.  0..100.\n"
	"admit_cpu_pressure = 90\n"
	"; Memory, \"full\": every task stalled on memory (reclaim, swap-in,\n"
	"; refaults) at once, which a healthy host never sustains: thrashing\n"
	"; starts here, hence a low limit.  0..100.\n"
	"admit_memory_pressure = 5\n"
	"; I/O, \"full\": every task waited for I/O at once.  Restores read their\n"
	"; snapshot's pages, so a saturated disk slows every one.  0..100.\n"
	"admit_io_pressure = 20\n"
	"; MemAvailable (/proc/meminfo) under this percentage of MemTotal: more\n"
	"; clones would push the host into reclaim before PSI shows it.  0..100.\n"
	"admit_min_available_percent = 5\n"
	"; A template's recent restores (the median of its last 8, of those in\n"
	"; the last 30 s, at least 4) take this many times as long as its first\n"
	"; 8 since the daemon started: the guests feel the overload.  Restore\n"
	"; times vary 2-4x with the page cache and concurrency; 10x is beyond\n"
	"; that.  0..1000.\n"
	"admit_restore_slowdown = 10\n"
	";\n"
	"; E2B compatibility.  HOST:PORT ([V6]:PORT) of a TCP listener serving\n"
	"; E2B's control-plane API and each sandbox's envd (pool/e2b/e2b.h): an\n"
	"; E2B program with E2B_API_URL and E2B_SANDBOX_URL set to\n"
	"; http://HOST:PORT and E2B_API_KEY to the token drives this daemon's\n"
	"; sandboxes.  Needs token or token_file: unlike the socket, a TCP port\n"
	"; is open to every local user (and beyond loopback to the network).\n"
	"; E2B's Python SDK refuses an API key not shaped e2b_HEX before sending\n"
	"; it (2.25 to 2.29; later ones unless E2B_VALIDATE_API_KEY=false): a\n"
	"; token shaped so (e2b_ and `openssl rand -hex 20`) suits every SDK.\n"
	"; \"\" is off.\n"
	"e2b_listen =\n"
	"; Processes started through envd (the SDK's commands.run) alive at once,\n"
	"; of all sandboxes, 1..65536; at most 64 a sandbox.  Each reserves 4M of\n"
	"; api_memory_budget_bytes (its agent connection and its output queue)\n"
	"; and together they may take half of it, no more: one sandbox's access\n"
	"; token is enough to start them, and thaw's own API keeps the other\n"
	"; half.  auto is as many as that half holds (128 of 1G).  Past it a\n"
	"; start is answered resource_exhausted.\n"
	"e2b_max_processes = auto\n"
	"\n"
	"; One warm pool per [template NAME], NAME being 1 to 63 of A-Z a-z 0-9\n"
	"; _ . - and what a create request asks for.  A file without any template\n"
	"; section gets this one.\n"
	"[template default]\n"
	"; The guest kernel; \"\" is thaw's own.\n"
	"kernel =\n"
	"; The initramfs; \"\" is the one with thaw-agent.\n"
	"initrd =\n"
	"; Appended to the guest kernel's command line.\n"
	"cmdline =\n"
	"; Guest memory, 16..65536.\n"
	"mem_mib = 256\n"
	"; Virtual CPUs, 1..64.\n"
	"vcpus = 1\n"
	"; Sandboxes kept restored and waiting to be handed out.\n"
	"min_ready = 2\n"
	"; Sandboxes of this template alive at once, warm ones included; at least\n"
	"; min_ready.\n"
	"max_total = 32\n"
	"; A sandbox's lifetime when its create request gives none.\n"
	"timeout_s = 600\n"
	"; The longest lifetime a request may ask for; at least timeout_s.\n"
	"max_timeout_s = 86400\n"
	"; CPU time of a sandbox in percent of one CPU, 1..102400; auto is 100\n"
	"; per vCPU (a whole CPU each, no more); 0 is no limit.\n"
	"cpu_percent = auto\n"
	"; Memory of a sandbox's VMM process, the guest's included; at least\n"
	"; mem_mib + 64; 0 is mem_mib + 256.\n"
	"memory_limit_mib = 0\n"
	"; Processes and threads of a sandbox's VMM; 0 is no limit.\n"
	"pids_limit = 256\n"
	"; Restores of this template running at once, 1..64.\n"
	"restore_parallel = 4\n"
	"; prefetch: a restore reads the snapshot's working set in before the\n"
	"; sandbox is handed out; lazy: the guest's pages are read on first touch.\n"
	"page_in = prefetch\n"
	"; nat: each sandbox has a network (the [daemon]'s network_cidr): it\n"
	"; reaches the internet but never the host, other sandboxes or\n"
	"; link-local addresses (cloud metadata), and private ranges only where\n"
	"; its policy opens them (pool/API.md, Network); none: no network\n"
	"; device at all.\n"
	"network = nat\n"
	"; A sandbox's allow_internet when its create request does not say:\n"
	"; whether it reaches public addresses.  true or false.\n"
	"allow_internet = true\n";

enum key_type {
	KEY_STRING,
	KEY_PATH,	/* "" or absolute */
	KEY_NAME,	/* valid_name() */
	KEY_TOKEN,	/* a secret: never shown in a message */
	KEY_TOKEN_FILE, /* sets the token from a file */
	KEY_U32,
	KEY_BYTES,    /* uint64_t; K, M, G suffixes */
	KEY_SWITCH,   /* bool: key->choices[1] (true) or [0] (false) */
	KEY_CHOICE,   /* a string, one of key->choices */
	KEY_BOOL,     /* true or false */
	KEY_ID_RANGE, /* struct jail_ids, "FIRST-LAST" */
	KEY_LISTEN,   /* "" or HOST:PORT, [V6]:PORT: listen_valid() */
	KEY_U32_AUTO, /* KEY_U32, or "auto": CONFIG_AUTO, which finish() sets */
	KEY_NET_POOL, /* struct net_cidr: network_cidr */
	KEY_DNS,      /* daemon_config's net.dns_servers and dns_from_host */
};

struct key {
	const char *name;
	enum key_type type;
	size_t offset, size; /* of the field the key sets */
	uint64_t min, max;
	const char *const *choices; /* KEY_CHOICE: NULL-terminated */
};

/* clang-format off */
#define FIELD(s, f) offsetof(struct s, f), sizeof(((struct s *)0)->f)
#define DAEMON(f, type, min, max) { #f, type, FIELD(daemon_config, f), min, max, NULL }
#define TEMPLATE(f, type, min, max) { #f, type, FIELD(template_config, f), min, max, NULL }
#define DAEMON_CHOICE(f, ...) { #f, KEY_CHOICE, FIELD(daemon_config, f), 0, 0, (const char *const[]){ __VA_ARGS__, NULL } }
#define TEMPLATE_SWITCH(name, f, off, on) { name, KEY_SWITCH, FIELD(template_config, f), 0, 0, (const char *const[]){ off, on, NULL } }
/* clang-format on */

/*
 * The *_bytes keys start at 1 KiB: a limit of a few bytes only ever means a
 * forgotten suffix.
 */
static const struct key daemon_keys[] = {
	DAEMON(socket, KEY_PATH, 0, 0),
	DAEMON(socket_group, KEY_STRING, 0, 0),
	DAEMON(state_dir, KEY_PATH, 0, 0),
	DAEMON(token, KEY_TOKEN, 0, 0),
	{ "token_file", KEY_TOKEN_FILE, FIELD(daemon_config, token), 0, 0,
	  NULL },
	DAEMON(max_sandboxes, KEY_U32, 1, 65536),
	DAEMON(max_connections, KEY_U32, 1, 65536),
	DAEMON(max_connections_per_uid, KEY_U32_AUTO, 1, 65536),
	DAEMON(header_timeout_s, KEY_U32, 1, 3600),
	DAEMON(idle_timeout_s, KEY_U32, 1, 3600),
	DAEMON(max_request_bytes, KEY_BYTES, 1 << 10, 16 << 20),
	DAEMON(max_file_bytes, KEY_BYTES, 1 << 10, 1ull << 40),
	DAEMON(max_exec_output_bytes, KEY_BYTES, 1 << 10, 1ull << 40),
	DAEMON(api_memory_budget_bytes, KEY_BYTES, 8 << 20, 1ull << 40),
	DAEMON(restore_timeout_s, KEY_U32, 1, 86400),
	DAEMON(cgroup_parent, KEY_NAME, 0, 0),
	/* common/log.h's levels and formats */
	DAEMON_CHOICE(log_level, "error", "warning", "info", "debug"),
	DAEMON_CHOICE(log_format, "text", "json"),
	DAEMON(log_max, KEY_BYTES, CAPFILE_MIN_MAX, CAPFILE_MAX_MAX),
	DAEMON(admit_cpu_pressure, KEY_U32, 0, 100),
	DAEMON(admit_memory_pressure, KEY_U32, 0, 100),
	DAEMON(admit_io_pressure, KEY_U32, 0, 100),
	DAEMON(admit_min_available_percent, KEY_U32, 0, 100),
	DAEMON(admit_restore_slowdown, KEY_U32, 0, 1000),
	DAEMON(jail, KEY_BOOL, 0, 0),
	DAEMON(require_limits, KEY_BOOL, 0, 0),
	DAEMON(jail_ids, KEY_ID_RANGE, 0, 0),
	{ "network_cidr", KEY_NET_POOL, FIELD(daemon_config, net.pool), 0, 0,
	  NULL },
	{ "dns_servers", KEY_DNS, FIELD(daemon_config, net), 0, 0, NULL },
	{ "dns_without_internet", KEY_BOOL,
	  FIELD(daemon_config, net.dns_always), 0, 0, NULL },
	DAEMON(e2b_listen, KEY_LISTEN, 0, 0),
	DAEMON(e2b_max_processes, KEY_U32_AUTO, 1, 65536),
};

/* pids_limit stops at PID_MAX_LIMIT (4 Mi), the kernel's own ceiling. */
static const struct key template_keys[] = {
	TEMPLATE(kernel, KEY_PATH, 0, 0),
	TEMPLATE(initrd, KEY_PATH, 0, 0),
	TEMPLATE(cmdline, KEY_STRING, 0, 0),
	TEMPLATE(mem_mib, KEY_U32, 16, 65536),
	TEMPLATE(vcpus, KEY_U32, 1, 64),
	TEMPLATE(min_ready, KEY_U32, 0, 65536),
	TEMPLATE(max_total, KEY_U32, 1, 65536),
	TEMPLATE(timeout_s, KEY_U32, 1, 365 * 86400),
	TEMPLATE(max_timeout_s, KEY_U32, 1, 365 * 86400),
	TEMPLATE(cpu_percent, KEY_U32_AUTO, 0, 100 * 1024),
	TEMPLATE(memory_limit_mib, KEY_U32, 0, 1 << 20),
	TEMPLATE(pids_limit, KEY_U32, 0, 1 << 22),
	TEMPLATE(restore_parallel, KEY_U32, 1, 64),
	TEMPLATE_SWITCH("page_in", page_in_lazy, "prefetch", "lazy"),
	TEMPLATE_SWITCH("network", network, "none", "nat"),
	TEMPLATE(allow_internet, KEY_BOOL, 0, 0),
};

/* Where each key of one section was set: 0 for not in this file. */
#define SECTION_KEYS_MAX 32
struct section_src {
	unsigned header, key[SECTION_KEYS_MAX];
};
_Static_assert(ARRAY_SIZE(daemon_keys) <= SECTION_KEYS_MAX, "section_src");
_Static_assert(ARRAY_SIZE(template_keys) <= SECTION_KEYS_MAX, "section_src");

/* The pairs lo + slack <= hi each template must hold. */
static const struct order {
	const char *lo, *hi;
	uint32_t slack;
} orders[] = {
	{ "min_ready", "max_total", 0 },
	{ "timeout_s", "max_timeout_s", 0 },
	/* The VMM's own page tables, device state and heap. */
	{ "mem_mib", "memory_limit_mib", 64 },
};

/* What memory_limit_mib = 0 adds to mem_mib. */
#define MEMORY_OVERHEAD_MIB 256

struct parser {
	const char *src; /* the file name in messages */
	FILE *f;
	unsigned line; /* the line inih is on */
	struct daemon_config *c;
	const struct template_config *tdefault; /* NULL: all fields 0 */

	enum { SEC_NONE, SEC_DAEMON, SEC_TEMPLATE } sec;
	size_t cur; /* SEC_TEMPLATE: index in c->templates */
	struct section_src daemon_src;
	struct section_src *tsrc; /* one per c->templates */
	unsigned token_line;	  /* of a non-empty token or token_file */

	int rc; /* the first error, whose line is err_line */
	unsigned err_line;
	char *err;
	size_t errlen;
};

/* Records the first error as "SRC:LINE: message" (line 0: "SRC: ..."). */
__attribute__((format(printf, 4, 5))) static int
fail(struct parser *p, unsigned line, int rc, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (p->rc)
		return p->rc;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line)
		snprintf(p->err, p->errlen, "%s:%u: %s", p->src, line, msg);
	else
		snprintf(p->err, p->errlen, "%s: %s", p->src, msg);
	p->rc = rc;
	p->err_line = line;
	return rc;
}

/* fail() for a key of template @t, or of [daemon] when @t is NULL. */
__attribute__((format(printf, 7, 8))) static int
fail_key(struct parser *p, unsigned line, const struct template_config *t,
	 const char *key, const char *value, int rc, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	return fail(p, line, rc, "[%s%s] %s = \"%s\": %s",
		    t ? "template " : "daemon", t ? t->name : "", key, value,
		    why);
}

/* Template names and cgroup_parent: one path component, no "." or "..". */
static bool valid_name(const char *s, size_t len)
{
	size_t i;

	if (!len || len >= CONFIG_NAME_MAX ||
	    (len <= 2 && !strncmp(s, "..", len)))
		return false;
	for (i = 0; i < len; i++) {
		char ch = s[i];

		if (!(ch >= 'a' && ch <= 'z') && !(ch >= 'A' && ch <= 'Z') &&
		    !(ch >= '0' && ch <= '9') && !strchr("_.-", ch))
			return false;
	}
	return true;
}

#define NAME_RULE "1 to 63 of A-Z a-z 0-9 _ . - (not . or ..)"

/* Decimal digits only; @suffix allows one K, M or G.  0 or -EINVAL, -ERANGE. */
static int parse_number(const char *s, bool suffix, uint64_t *out)
{
	unsigned shift = 0;
	uint64_t v;
	char *end;

	/* strtoull() alone would take white space, a sign and "". */
	if (*s < '0' || *s > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno)
		return -ERANGE;
	if (suffix && *end && strchr("KMG", *end))
		shift = 10 * (unsigned)(strchr("KMG", *end++) - "KMG" + 1);
	if (*end)
		return -EINVAL;
	if (v > UINT64_MAX >> shift)
		return -ERANGE;
	*out = v << shift;
	return 0;
}

/* The token is the first line of @path, trailing white space stripped. */
static int read_token_file(struct parser *p, const struct key *k,
			   const char *path, char *token)
{
	char *line = NULL;
	size_t cap = 0;
	ssize_t len;
	FILE *f;
	int rc = 0;

	f = fopen(path, "re");
	if (!f)
		return fail_key(p, p->line, NULL, k->name, path, -errno, "%s",
				strerror(errno));
	len = getline(&line, &cap, f);
	if (len < 0 && ferror(f)) {
		rc = fail_key(p, p->line, NULL, k->name, path, -errno, "%s",
			      strerror(errno));
	} else {
		while (len > 0 && isspace((unsigned char)line[len - 1]))
			len--;
		if (len <= 0)
			rc = fail_key(p, p->line, NULL, k->name, path, -EINVAL,
				      "the file's first line is empty");
		else if ((size_t)len >= k->size)
			rc = fail_key(p, p->line, NULL, k->name, path, -EINVAL,
				      "the token is longer than %zu bytes",
				      k->size - 1);
		else
			memcpy(token, line, len);
		token[rc ? 0 : len] = '\0';
	}
	if (line)
		explicit_bzero(line, cap);
	free(line);
	fclose(f);
	return rc;
}

/* One of k->choices, or an error listing them: "expected a, b or c". */
static int set_choice(struct parser *p, const struct key *k,
		      const struct template_config *t, const char *value,
		      char *field)
{
	char expected[128];
	size_t n = 0;

	for (const char *const *c = k->choices; *c; c++) {
		if (!strcmp(value, *c)) {
			snprintf(field, k->size, "%s", value);
			return 0;
		}
		n += snprintf(expected + n, sizeof(expected) - n, "%s%s",
			      c == k->choices ? ""
			      : c[1]	      ? ", "
					      : " or ",
			      *c);
	}
	return fail_key(p, p->line, t, k->name, value, -EINVAL, "expected %s",
			expected);
}

/*
 * Addresses a sandbox's network may not use: "this network", the host's
 * loopback, link-local (the guest side of every sandbox, guest_net.h, and
 * cloud metadata), multicast and the reserved 240/4 with broadcast.  A
 * resolver may be link-local (a cloud's, such as 169.254.169.253): the
 * host routes a sandbox's queries there as its own.
 */
static const struct {
	struct net_cidr net;
	const char *text, *what;
	bool dns_ok;
} reserved_nets[] = {
	{ { 0x00000000, 8 }, "0.0.0.0/8", "this network", false },
	{ { 0x7f000000, 8 }, "127.0.0.0/8", "loopback", false },
	{ { 0xa9fe0000, 16 }, "169.254.0.0/16", "link-local", true },
	{ { 0xe0000000, 3 }, "224.0.0.0/3", "multicast and reserved", false },
};

/* The entry of reserved_nets @net overlaps, or -1. */
static int reserved_net(struct net_cidr net)
{
	for (size_t i = 0; i < ARRAY_SIZE(reserved_nets); i++) {
		uint8_t prefix = net.prefix < reserved_nets[i].net.prefix
					 ? net.prefix
					 : reserved_nets[i].net.prefix;
		uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;

		if (!((net.addr ^ reserved_nets[i].net.addr) & mask))
			return (int)i;
	}
	return -1;
}

/* network_cidr: room for one sandbox's /30 at least, nothing reserved. */
static int set_net_pool(struct parser *p, const struct key *k,
			const char *value, struct net_cidr *out)
{
	struct net_cidr net;
	char why[160];
	int r;

	if (net_cidr_parse(value, &net, why, sizeof(why)) < 0)
		return fail_key(p, p->line, NULL, k->name, value, -EINVAL, "%s",
				why);
	if (net.prefix > 30)
		return fail_key(p, p->line, NULL, k->name, value, -EINVAL,
				"smaller than a /30, which each sandbox takes");
	r = reserved_net(net);
	if (r >= 0)
		return fail_key(p, p->line, NULL, k->name, value, -EINVAL,
				"overlaps %s (%s)", reserved_nets[r].text,
				reserved_nets[r].what);
	*out = net;
	return 0;
}

/* Whether resolver @a is one a sandbox's queries can go to. */
static bool dns_reachable(uint32_t a)
{
	int r = reserved_net((struct net_cidr){ a, 32 });

	return r < 0 || reserved_nets[r].dns_ok;
}

/* "A.B.C.D" (nothing around it) into @out, host order. */
static bool parse_ipv4(const char *s, uint32_t *out)
{
	struct in_addr in;

	if (inet_pton(AF_INET, s, &in) != 1)
		return false;
	*out = ntohl(in.s_addr);
	return true;
}

/*
 * dns_servers: "" (the host's: config_net_host() reads them), "none", or
 * up to NET_DNS_MAX addresses a sandbox's namespace can reach.
 */
static int set_dns(struct parser *p, const struct key *k, const char *value,
		   struct daemon_config *c)
{
	struct net_config *net = &c->net;
	char list[256], *rest = list, *item;

	net->n_dns = 0;
	c->dns_from_host = !*value;
	if (!*value || !strcmp(value, "none"))
		return 0;
	snprintf(list, sizeof(list), "%s",
		 value); /* inih's lines are shorter */
	while ((item = strsep(&rest, ","))) {
		size_t len;
		uint32_t a;
		int r;

		item += strspn(item, " \t");
		len = strlen(item);
		while (len && isspace((unsigned char)item[len - 1]))
			item[--len] = '\0';
		if (!parse_ipv4(item, &a))
			return fail_key(
				p, p->line, NULL, k->name, value, -EINVAL,
				"'%s' is not an IPv4 address (A.B.C.D), "
				"nor is the value \"\" or none",
				item);
		r = reserved_net((struct net_cidr){ a, 32 });
		if (!dns_reachable(a))
			return fail_key(p, p->line, NULL, k->name, value,
					-EINVAL,
					"'%s' is in %s (%s): a sandbox cannot "
					"reach it",
					item, reserved_nets[r].text,
					reserved_nets[r].what);
		if (net->n_dns == NET_DNS_MAX)
			return fail_key(p, p->line, NULL, k->name, value,
					-EINVAL, "more than %d addresses",
					NET_DNS_MAX);
		net->dns_servers[net->n_dns++] = a;
	}
	return 0;
}

/* "HOST:PORT" or "[V6]:PORT": a host of name or address characters, a
 * port of 1..65535; the host is resolved when the listener starts. */
static bool listen_valid(const char *value)
{
	const char *colon = strrchr(value, ':');
	size_t host = colon ? (size_t)(colon - value) : 0;
	uint64_t port;

	if (!host || parse_number(colon + 1, false, &port) < 0 || !port ||
	    port > 65535)
		return false;
	if (value[0] == '[')
		return host > 2 && value[host - 1] == ']' &&
		       strspn(value + 1, "0123456789abcdefABCDEF:.") ==
			       host - 2;
	return strspn(value,
		      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
		      "0123456789.-") == host;
}

static int set_key(struct parser *p, const struct key *k, void *base,
		   const struct template_config *t, const char *value)
{
	const char *shown = k->type == KEY_TOKEN ? "..." : value;
	char *field = (char *)base + k->offset;
	uint64_t v;
	int rc;

	switch (k->type) {
	case KEY_TOKEN:
	case KEY_TOKEN_FILE:
		/* "" is how the default text leaves both unset. */
		if (!*value)
			return 0;
		if (p->token_line)
			return fail_key(
				p, p->line, t, k->name, shown, -EINVAL,
				"the token is already set on line %u: give token or token_file, not both",
				p->token_line);
		p->token_line = p->line;
		if (k->type == KEY_TOKEN_FILE)
			return read_token_file(p, k, value, field);
		/* fall through */
	case KEY_STRING:
	case KEY_PATH:
	case KEY_NAME:
		if (strlen(value) >= k->size)
			return fail_key(p, p->line, t, k->name, shown, -EINVAL,
					"longer than %zu bytes", k->size - 1);
		if (k->type == KEY_PATH && *value && *value != '/')
			return fail_key(p, p->line, t, k->name, shown, -EINVAL,
					"not an absolute path");
		if (k->type == KEY_NAME && !valid_name(value, strlen(value)))
			return fail_key(p, p->line, t, k->name, shown, -EINVAL,
					"not a name: " NAME_RULE);
		strcpy(field, value);
		return 0;
	case KEY_U32_AUTO:
		if (!strcmp(value, "auto")) {
			*(uint32_t *)field = CONFIG_AUTO;
			return 0;
		}
		/* fall through */
	case KEY_U32:
	case KEY_BYTES:
		rc = parse_number(value, k->type == KEY_BYTES, &v);
		if (rc == -ERANGE)
			return fail_key(p, p->line, t, k->name, shown, -EINVAL,
					"too large");
		if (rc)
			return fail_key(
				p, p->line, t, k->name, shown, -EINVAL,
				"not a number%s",
				k->type == KEY_BYTES
					? " (with an optional K, M or G)"
				: k->type == KEY_U32_AUTO ? " or auto"
							  : "");
		if (v < k->min || v > k->max)
			return fail_key(p, p->line, t, k->name, shown, -EINVAL,
					"out of range %llu..%llu",
					(unsigned long long)k->min,
					(unsigned long long)k->max);
		if (k->type != KEY_BYTES)
			*(uint32_t *)field = (uint32_t)v;
		else
			*(uint64_t *)field = v;
		return 0;
	case KEY_CHOICE:
		return set_choice(p, k, t, value, field);
	case KEY_BOOL:
		if (strcmp(value, "true") && strcmp(value, "false"))
			return fail_key(p, p->line, t, k->name, value, -EINVAL,
					"expected true or false");
		*(bool *)field = !strcmp(value, "true");
		return 0;
	case KEY_ID_RANGE: {
		char why[256];

		if (jail_ids_parse(value, (struct jail_ids *)field, why,
				   sizeof(why)) < 0)
			return fail_key(p, p->line, t, k->name, value, -EINVAL,
					"%s", why);
		return 0;
	}
	case KEY_NET_POOL:
		return set_net_pool(p, k, value, (struct net_cidr *)field);
	case KEY_DNS:
		return set_dns(p, k, value, base);
	case KEY_LISTEN:
		if (*value && !listen_valid(value))
			return fail_key(p, p->line, t, k->name, value, -EINVAL,
					"expected HOST:PORT or [IPV6]:PORT, "
					"PORT from 1 to 65535");
		if (strlen(value) >= k->size)
			return fail_key(p, p->line, t, k->name, value, -EINVAL,
					"longer than %zu bytes", k->size - 1);
		strcpy(field, value);
		return 0;
	case KEY_SWITCH:
		break;
	}
	if (strcmp(value, k->choices[0]) && strcmp(value, k->choices[1]))
		return fail_key(p, p->line, t, k->name, shown, -EINVAL,
				"neither %s nor %s", k->choices[0],
				k->choices[1]);
	*(bool *)field = !strcmp(value, k->choices[1]);
	return 0;
}

static const struct key *find_key(const struct key *keys, size_t n,
				  const char *name)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (!strcmp(keys[i].name, name))
			return &keys[i];
	return NULL;
}

static const struct key *template_key(const char *name)
{
	return find_key(template_keys, ARRAY_SIZE(template_keys), name);
}

static int on_key(void *user, const char *section, const char *name,
		  const char *value)
{
	struct parser *p = user;
	const struct template_config *t = NULL;
	const struct key *keys, *k;
	struct section_src *src;
	void *base;
	size_t n;

	(void)section; /* inih's, possibly cut short: read_line() has ours */
	if (p->sec == SEC_NONE)
		return !fail(
			p, p->line, -EINVAL,
			"%s = \"%s\": before any [daemon] or [template NAME]",
			name, value);
	if (p->sec == SEC_TEMPLATE) {
		t = base = &p->c->templates[p->cur];
		src = &p->tsrc[p->cur];
		keys = template_keys;
		n = ARRAY_SIZE(template_keys);
	} else {
		base = p->c;
		src = &p->daemon_src;
		keys = daemon_keys;
		n = ARRAY_SIZE(daemon_keys);
	}
	k = find_key(keys, n, name);
	if (!k)
		return !fail_key(p, p->line, t, name, value, -EINVAL,
				 "unknown key");
	if (src->key[k - keys])
		return !fail_key(p, p->line, t, name,
				 k->type == KEY_TOKEN ? "..." : value, -EINVAL,
				 "already set on line %u", src->key[k - keys]);
	src->key[k - keys] = p->line;
	return !set_key(p, k, base, t, value);
}

static int add_template(struct parser *p, const char *name, size_t len,
			unsigned line)
{
	struct daemon_config *c = p->c;
	size_t n = c->nr_templates;
	struct template_config *t;
	struct section_src *src;

	t = reallocarray(c->templates, n + 1, sizeof(*t));
	if (!t)
		return fail(p, line, -ENOMEM, "out of memory");
	c->templates = t;
	src = reallocarray(p->tsrc, n + 1, sizeof(*src));
	if (!src)
		return fail(p, line, -ENOMEM, "out of memory");
	p->tsrc = src;

	if (p->tdefault)
		t[n] = *p->tdefault;
	else
		memset(&t[n], 0, sizeof(t[n]));
	memcpy(t[n].name, name, len);
	t[n].name[len] = '\0';
	memset(&src[n], 0, sizeof(src[n]));
	src[n].header = line;
	c->nr_templates = n + 1;
	return 0;
}

/* @s is a line starting with '['. */
static void open_section(struct parser *p, const char *s)
{
	const char *end = strchr(s, ']'), *name;
	size_t len, i;

	if (!end) {
		fail(p, p->line, -EINVAL, "%.*s: no ']'",
		     (int)strcspn(s, "\r\n"), s);
		return;
	}
	name = end + 1 + strspn(end + 1, " \t\r\n\v\f");
	if (*name && *name != ';' && *name != '#') {
		fail(p, p->line, -EINVAL, "%.*s: text after ']'",
		     (int)(end + 1 - s), s);
		return;
	}
	s++;
	len = end - s;

	if (len == 6 && !memcmp(s, "daemon", 6)) {
		if (p->daemon_src.header)
			fail(p, p->line, -EINVAL,
			     "[daemon]: a second [daemon] (the first is on line %u)",
			     p->daemon_src.header);
		p->daemon_src.header = p->line;
		p->sec = SEC_DAEMON;
		return;
	}
	if (len < 8 || memcmp(s, "template", 8) || (len > 8 && s[8] != ' ')) {
		fail(p, p->line, -EINVAL,
		     "[%.*s]: unknown section (not [daemon] or [template NAME])",
		     (int)len, s);
		return;
	}

	name = s + 8 + strspn(s + 8, " ");
	len = end - name;
	if (!valid_name(name, len)) {
		fail(p, p->line, -EINVAL,
		     "[template %.*s]: bad template name: " NAME_RULE, (int)len,
		     name);
		return;
	}
	for (i = 0; i < p->c->nr_templates; i++) {
		if (strlen(p->c->templates[i].name) == len &&
		    !memcmp(p->c->templates[i].name, name, len)) {
			fail(p, p->line, -EINVAL,
			     "[template %.*s]: a second [template %.*s] (the first is on line %u)",
			     (int)len, name, (int)len, name, p->tsrc[i].header);
			return;
		}
	}
	if (!add_template(p, name, len, p->line)) {
		p->sec = SEC_TEMPLATE;
		p->cur = p->c->nr_templates - 1;
	}
}

/* After a line without '\n': is that the file's last line? */
static bool at_eof(FILE *f)
{
	int ch = getc(f);

	if (ch == EOF)
		return true;
	ungetc(ch, f);
	return false;
}

/* The ini_reader: fgets() that counts lines, see the top of the file. */
static char *read_line(char *buf, int size, void *stream)
{
	struct parser *p = stream;
	const char *s = buf;
	size_t len;

	if (p->rc)
		return NULL;
	if (!fgets(buf, size, p->f)) {
		int e = errno ? errno : EIO;

		if (ferror(p->f))
			fail(p, 0, -e, "cannot read: %s", strerror(e));
		return NULL;
	}
	p->line++;
	len = strlen(buf);
	if ((!len || buf[len - 1] != '\n') && !at_eof(p->f)) {
		fail(p, p->line, -EINVAL, "line longer than %d characters",
		     size - 2);
		return NULL;
	}
	if (p->line == 1 && !strncmp(s, "\xEF\xBB\xBF", 3))
		s += 3; /* a UTF-8 byte order mark, which inih skips too */

	if (isspace((unsigned char)*s)) {
		while (isspace((unsigned char)*s))
			s++;
		if (*s && *s != ';' && *s != '#')
			fail(p, p->line, -EINVAL,
			     "indented line: keys and sections start in the first column");
	} else if (*s == '[') {
		open_section(p, s);
	}
	return p->rc ? NULL : buf;
}

static int check_orders(struct parser *p, size_t i)
{
	const struct template_config *t = &p->c->templates[i];
	const struct section_src *src = &p->tsrc[i];
	size_t j;

	for (j = 0; j < ARRAY_SIZE(orders); j++) {
		const struct order *o = &orders[j];
		const struct key *lo = template_key(o->lo);
		const struct key *hi = template_key(o->hi);
		uint32_t lv = *(const uint32_t *)((const char *)t + lo->offset);
		uint32_t hv = *(const uint32_t *)((const char *)t + hi->offset);
		unsigned lline = src->key[lo - template_keys];
		unsigned hline = src->key[hi - template_keys];
		bool blame_hi = hline >= lline;
		char value[16], slack[16] = "";

		if ((uint64_t)lv + o->slack <= hv)
			continue;
		if (o->slack)
			snprintf(slack, sizeof(slack), " %c %u",
				 blame_hi ? '+' : '-', o->slack);
		snprintf(value, sizeof(value), "%u", blame_hi ? hv : lv);
		if (blame_hi)
			return fail_key(p, hline ? hline : src->header, t,
					hi->name, value, -EINVAL,
					"less than %s (%u)%s", lo->name, lv,
					slack);
		return fail_key(p, lline, t, lo->name, value, -EINVAL,
				"more than %s (%u)%s", hi->name, hv, slack);
	}
	return 0;
}

/* The warm sandboxes of all templates must fit in max_sandboxes. */
static int check_sum(struct parser *p)
{
	const struct daemon_config *c = p->c;
	const struct key *max_sandboxes =
		find_key(daemon_keys, ARRAY_SIZE(daemon_keys), "max_sandboxes");
	unsigned dline = p->daemon_src.key[max_sandboxes - daemon_keys];
	size_t min_ready = template_key("min_ready") - template_keys;
	uint64_t sum = 0;
	char value[16];
	size_t i;

	for (i = 0; i < c->nr_templates; i++) {
		const struct template_config *t = &c->templates[i];
		unsigned tline = p->tsrc[i].key[min_ready];

		sum += t->min_ready;
		if (sum <= c->max_sandboxes)
			continue;
		if (tline >= dline) {
			snprintf(value, sizeof(value), "%u", t->min_ready);
			return fail_key(
				p, tline ? tline : p->tsrc[i].header, t,
				"min_ready", value, -EINVAL,
				"the templates' min_ready add up to %llu, more than max_sandboxes (%u)",
				(unsigned long long)sum, c->max_sandboxes);
		}
		snprintf(value, sizeof(value), "%u", c->max_sandboxes);
		return fail_key(
			p, dline, NULL, "max_sandboxes", value, -EINVAL,
			"less than the templates' min_ready added up (at least %llu)",
			(unsigned long long)sum);
	}
	return 0;
}

/*
 * A KEY_U32_AUTO [daemon] key, *@value, whose auto is @auto_value and
 * whose number must not exceed @bound, which the key @bound_name decides
 * (its value @bound_value, as the file wrote it or not).  The key set last
 * is blamed: @name as "more than @over (@bound)", @bound_name as "less
 * than @under (*@value)".
 */
struct bounded_key {
	const char *name, *bound_name, *over, *under;
	uint32_t *value;
	uint32_t auto_value, bound;
	const char *bound_value;
};

static int check_bounded(struct parser *p, const struct bounded_key *b)
{
	const struct key *k =
		find_key(daemon_keys, ARRAY_SIZE(daemon_keys), b->name);
	const struct key *bk =
		find_key(daemon_keys, ARRAY_SIZE(daemon_keys), b->bound_name);
	unsigned line = p->daemon_src.key[k - daemon_keys];
	unsigned bline = p->daemon_src.key[bk - daemon_keys];
	char value[16];

	if (*b->value == CONFIG_AUTO)
		*b->value = b->auto_value;
	if (*b->value <= b->bound)
		return 0;
	snprintf(value, sizeof(value), "%u", *b->value);
	if (line >= bline)
		return fail_key(p, line, NULL, k->name, value, -EINVAL,
				"more than %s (%u)", b->over, b->bound);
	return fail_key(p, bline, NULL, bk->name, b->bound_value, -EINVAL,
			"less than %s (%s)", b->under, value);
}

/*
 * max_connections_per_uid: auto is a quarter of max_connections, and a
 * number must not exceed it.
 */
static int check_per_uid(struct parser *p)
{
	struct daemon_config *c = p->c;
	char total[16];

	snprintf(total, sizeof(total), "%u", c->max_connections);
	return check_bounded(
		p, &(struct bounded_key){
			   .name = "max_connections_per_uid",
			   .bound_name = "max_connections",
			   .over = "max_connections",
			   .under = "max_connections_per_uid",
			   .value = &c->max_connections_per_uid,
			   .auto_value = c->max_connections / 4
						 ? c->max_connections / 4
						 : 1,
			   .bound = c->max_connections,
			   .bound_value = total,
		   });
}

/*
 * e2b_max_processes: each reserves CONFIG_E2B_PROCESS_BYTES of
 * api_memory_budget_bytes, and together they may hold half of it, no
 * more (auto is that many), so that a client of the E2B port, which needs
 * only one sandbox's access token to start processes, always leaves the
 * other half to thaw's own API and to envd's other requests.
 */
static int check_e2b_processes(struct parser *p)
{
	struct daemon_config *c = p->c;
	/* At least 1 (the budget is at least 8M), at most 2^17. */
	uint32_t fit = (uint32_t)(c->api_memory_budget_bytes / 2 /
				  CONFIG_E2B_PROCESS_BYTES);
	char budget[24];

	snprintf(budget, sizeof(budget), "%llu",
		 (unsigned long long)c->api_memory_budget_bytes);
	return check_bounded(
		p, &(struct bounded_key){
			   .name = "e2b_max_processes",
			   .bound_name = "api_memory_budget_bytes",
			   .over = "half of api_memory_budget_bytes holds, at "
				   "4M a process",
			   .under = "what e2b_max_processes needs at 4M a "
				    "process in its half",
			   .value = &c->e2b_max_processes,
			   .auto_value = fit,
			   .bound = fit,
			   .bound_value = budget,
		   });
}

/*
 * A resolver inside network_cidr would be a sandbox's or the host's veth
 * end: the DNS redirect would carry queries there, past rule 1.  The key
 * set last is blamed.
 */
static int check_dns_outside_pool(struct parser *p)
{
	const struct daemon_config *c = p->c;
	const struct key *dns =
		find_key(daemon_keys, ARRAY_SIZE(daemon_keys), "dns_servers");
	const struct key *pool =
		find_key(daemon_keys, ARRAY_SIZE(daemon_keys), "network_cidr");
	unsigned dline = p->daemon_src.key[dns - daemon_keys];
	unsigned pline = p->daemon_src.key[pool - daemon_keys];
	char addr[INET_ADDRSTRLEN], cidr[INET_ADDRSTRLEN + 4];

	for (uint32_t i = 0; i < c->net.n_dns; i++) {
		struct in_addr in = { htonl(c->net.dns_servers[i]) };
		struct in_addr net = { htonl(c->net.pool.addr) };

		if (!net_cidr_contains(c->net.pool, c->net.dns_servers[i]))
			continue;
		inet_ntop(AF_INET, &in, addr, sizeof(addr));
		inet_ntop(AF_INET, &net, cidr, sizeof(cidr));
		snprintf(cidr + strlen(cidr), sizeof(cidr) - strlen(cidr),
			 "/%u", c->net.pool.prefix);
		if (dline >= pline)
			return fail_key(p, dline, NULL, dns->name, addr,
					-EINVAL,
					"inside network_cidr (%s), the "
					"sandboxes' and the host's veth "
					"addresses",
					cidr);
		return fail_key(p, pline, NULL, pool->name, cidr, -EINVAL,
				"holds dns_servers' %s: the sandboxes' and "
				"the host's veth addresses must not include "
				"a resolver",
				addr);
	}
	return 0;
}

/* A TCP listener is open to every local user: never without a token. */
static int check_e2b_token(struct parser *p)
{
	const struct key *listen =
		find_key(daemon_keys, ARRAY_SIZE(daemon_keys), "e2b_listen");

	if (!p->c->e2b_listen[0] || p->c->token[0])
		return 0;
	return fail_key(p, p->daemon_src.key[listen - daemon_keys], NULL,
			listen->name, p->c->e2b_listen, -EINVAL,
			"needs token or token_file: unlike the Unix socket, "
			"a TCP port is open to every local user");
}

/* What needs the whole file: the default template, derived values, checks. */
static int finish(struct parser *p)
{
	struct daemon_config *c = p->c;
	size_t i;
	int rc;

	if (!c->nr_templates) {
		rc = add_template(p, "default", strlen("default"), 0);
		if (rc)
			return rc;
	}
	for (i = 0; i < c->nr_templates; i++) {
		struct template_config *t = &c->templates[i];

		if (!t->memory_limit_mib)
			t->memory_limit_mib = t->mem_mib + MEMORY_OVERHEAD_MIB;
		if (t->cpu_percent == CONFIG_AUTO)
			t->cpu_percent = 100 * t->vcpus;
		rc = check_orders(p, i);
		if (rc)
			return rc;
	}
	rc = check_per_uid(p);
	if (!rc)
		rc = check_e2b_processes(p);
	if (!rc)
		rc = check_dns_outside_pool(p);
	if (!rc)
		rc = check_e2b_token(p);
	return rc ? rc : check_sum(p);
}

/*
 * Parses @text, or the file @src when @text is NULL, into @c, starting from
 * @def (the parsed default text) or from all zeros when @def is NULL.
 * @complete: add the default template, derive values and check; not for
 * the default text parsed only to be the starting point of a file.
 */
static int load(struct daemon_config *c, const struct daemon_config *def,
		const char *src, const char *text, bool complete, char *err,
		size_t errlen)
{
	struct parser p = {
		.src = src,
		.c = c,
		.err = err,
		.errlen = errlen,
	};
	int ret, rc;

	memset(c, 0, sizeof(*c));
	if (def) {
		*c = *def;
		c->templates = NULL;
		c->nr_templates = 0;
		p.tdefault = config_template(def, "default");
	}

	if (text)
		p.f = fmemopen((void *)text, strlen(text), "r");
	else
		p.f = fopen(src, "re");
	if (p.f) {
		ret = ini_parse_stream(read_line, &p, on_key, &p);
		fclose(p.f);
		/* inih's own errors: neither a key nor a section. */
		if (ret > 0 && (!p.rc || (unsigned)ret < p.err_line)) {
			p.rc = 0;
			fail(&p, ret, -EINVAL,
			     "neither \"key = value\" nor [section]");
		}
	} else {
		fail(&p, 0, -errno, "cannot open: %s", strerror(errno));
	}
	rc = p.rc;
	if (!rc && complete)
		rc = finish(&p);
	free(p.tsrc);
	if (rc)
		config_free(c);
	return rc;
}

int config_load(struct daemon_config *c, const char *path, char *err,
		size_t errlen)
{
	struct daemon_config def;
	int rc;

	rc = load(&def, NULL, BUILTIN, config_default_text, !path, err, errlen);
	if (rc || !path) {
		*c = def;
		return rc;
	}
	rc = load(c, &def, path, NULL, true, err, errlen);
	config_free(&def);
	return rc;
}

void config_free(struct daemon_config *c)
{
	free(c->templates);
	explicit_bzero(c, sizeof(*c)); /* the token */
}

const struct template_config *config_template(const struct daemon_config *c,
					      const char *name)
{
	size_t i;

	for (i = 0; i < c->nr_templates; i++)
		if (!strcmp(c->templates[i].name, name))
			return &c->templates[i];
	return NULL;
}

/*
 * The "nameserver A.B.C.D" lines of @path (resolv.conf(5)), IPv4 ones a
 * sandbox can reach (not loopback: a stub resolver on the host, such as
 * systemd-resolved's 127.0.0.53; nor inside network_cidr), the first
 * NET_DNS_MAX of them.
 * An unreadable file has none.
 */
static void host_nameservers(struct net_config *net, const char *path)
{
	FILE *f = fopen(path, "re");
	char line[256];

	net->n_dns = 0;
	while (f && fgets(line, sizeof(line), f) && net->n_dns < NET_DNS_MAX) {
		char word[16], addr[64];
		uint32_t a;

		if (sscanf(line, "%15s %63s", word, addr) == 2 &&
		    !strcmp(word, "nameserver") && parse_ipv4(addr, &a) &&
		    dns_reachable(a) && !net_cidr_contains(net->pool, a))
			net->dns_servers[net->n_dns++] = a;
	}
	if (f)
		fclose(f);
}

void config_net_host(struct daemon_config *c, const char *state_dir,
		     const char *resolv_conf)
{
	uint64_t h = cgroup_owner_hash(state_dir);

	snprintf(c->net.ifname_prefix, sizeof(c->net.ifname_prefix),
		 "th%05" PRIx64, h & 0xfffff);
	snprintf(c->net.nft_table, sizeof(c->net.nft_table), "thaw_%016" PRIx64,
		 h);
	if (c->dns_from_host)
		host_nameservers(&c->net, resolv_conf);
}

void config_net_policy(const struct template_config *t, struct net_policy *out)
{
	*out = (struct net_policy){ .allow_internet = t->allow_internet };
}
