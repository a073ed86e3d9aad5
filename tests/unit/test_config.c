// SPDX-License-Identifier: Apache-2.0
/*
 * test_config.c - thawd's configuration: the embedded default and its
 * documented values, files overriding them (the log settings and the
 * admission limits too), templates, token_file, and one case per kind of
 * error, each of which must name the file, the line and the key, and leave
 * nothing loaded.
 *
 * The expected values are written out here rather than taken from
 * config_default_text, so a changed default fails a test.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool/host/cgroup.h"
#include "pool/daemon/config.h"

static char path[64];	    /* the config file of a test */
static char token_path[64]; /* a token_file */
static char err[1024];
static struct daemon_config c;

/* Writes @text to a new file under /tmp, whose name goes to @out. */
static void make_file(char *out, const char *text)
{
	FILE *f;
	int fd;

	strcpy(out, "/tmp/thaw-config-test-XXXXXX");
	fd = mkstemp(out);
	cr_assert_geq(fd, 0, "mkstemp: %s", strerror(errno));
	f = fdopen(fd, "w");
	cr_assert_not_null(f);
	cr_assert_geq(fputs(text, f), 0);
	cr_assert_eq(fclose(f), 0);
}

static void remove_file(char *p)
{
	if (*p)
		unlink(p);
	*p = '\0';
}

static void teardown(void)
{
	config_free(&c);
	remove_file(path);
	remove_file(token_path);
}

TestSuite(config, .fini = teardown);

/* config_load() of a file holding @text. */
static int load(const char *text)
{
	remove_file(path);
	make_file(path, text);
	err[0] = '\0';
	return config_load(&c, path, err, sizeof(err));
}

static void load_ok(const char *text)
{
	cr_assert_eq(load(text), 0, "%s", err);
}

static bool is_zero(const struct daemon_config *d)
{
	static const struct daemon_config zero;

	return !memcmp(d, &zero, sizeof(*d));
}

static void expect_default_daemon(const struct daemon_config *d)
{
	cr_expect_str_eq(d->socket, "");
	cr_expect_str_eq(d->socket_group, "");
	cr_expect_str_eq(d->state_dir, "");
	cr_expect_str_eq(d->token, "");
	cr_expect_str_eq(d->cgroup_parent, "thaw");
	cr_expect_eq(d->max_sandboxes, 256);
	cr_expect_eq(d->max_connections, 512);
	cr_expect_eq(d->max_connections_per_uid, 128, "auto: a quarter");
	cr_expect_eq(d->header_timeout_s, 30);
	cr_expect_eq(d->idle_timeout_s, 120);
	cr_expect_eq(d->log_max, 3ull << 20);
	cr_expect_eq(d->max_request_bytes, 2ull << 20);
	cr_expect_eq(d->max_file_bytes, 256ull << 20);
	cr_expect_eq(d->max_exec_output_bytes, 16ull << 20);
	cr_expect_eq(d->api_memory_budget_bytes, 1ull << 30);
	cr_expect_eq(d->e2b_max_processes, 128, "auto: half of 1G at 4M");
	cr_expect_eq(d->restore_timeout_s, 60);
	cr_expect_str_eq(d->log_level, "info");
	cr_expect_str_eq(d->log_format, "text");
	cr_expect_eq(d->admit_cpu_pressure, 90);
	cr_expect_eq(d->admit_memory_pressure, 5);
	cr_expect_eq(d->admit_io_pressure, 20);
	cr_expect_eq(d->admit_min_available_percent, 5);
	cr_expect_eq(d->admit_restore_slowdown, 10);
	cr_expect(d->jail);
	cr_expect(d->require_limits);
	cr_expect_eq(d->jail_ids.first, 1879048192u);
	cr_expect_eq(d->jail_ids.last, 1879113727u);
	cr_expect_eq(d->net.pool.addr, 0x0ac80000u, "10.200.0.0");
	cr_expect_eq(d->net.pool.prefix, 16);
	cr_expect(d->dns_from_host, "dns_servers = \"\": the host's");
	cr_expect_eq(d->net.n_dns, 0, "config_net_host() reads them");
	cr_expect_not(d->net.dns_always);
}

static void expect_default_template(const struct template_config *t,
				    const char *name)
{
	cr_assert_not_null(t);
	cr_expect_str_eq(t->name, name);
	cr_expect_str_eq(t->kernel, "");
	cr_expect_str_eq(t->initrd, "");
	cr_expect_str_eq(t->cmdline, "");
	cr_expect_eq(t->mem_mib, 256);
	cr_expect_eq(t->vcpus, 1);
	cr_expect_eq(t->min_ready, 2);
	cr_expect_eq(t->max_total, 32);
	cr_expect_eq(t->timeout_s, 600);
	cr_expect_eq(t->max_timeout_s, 86400);
	cr_expect_eq(t->cpu_percent, 100, "auto: 100 per vCPU");
	cr_expect_eq(t->memory_limit_mib, 256 + 256);
	cr_expect_eq(t->pids_limit, 256);
	cr_expect_eq(t->restore_parallel, 4);
	cr_expect_not(t->page_in_lazy);
	cr_expect(t->network, "network = nat");
	cr_expect(t->allow_internet);
}

Test(config, builtin_default_has_the_documented_values)
{
	cr_assert_eq(config_load(&c, NULL, err, sizeof(err)), 0, "%s", err);
	expect_default_daemon(&c);
	cr_assert_eq(c.nr_templates, 1);
	expect_default_template(&c.templates[0], "default");
	cr_expect_eq(config_template(&c, "default"), &c.templates[0]);
	cr_expect_null(config_template(&c, "python"));
}

Test(config, default_text_documents_every_key)
{
	static const char *const keys[] = {
		"socket",
		"socket_group",
		"state_dir",
		"token",
		"token_file",
		"max_sandboxes",
		"max_connections",
		"max_connections_per_uid",
		"header_timeout_s",
		"idle_timeout_s",
		"max_request_bytes",
		"max_file_bytes",
		"max_exec_output_bytes",
		"api_memory_budget_bytes",
		"restore_timeout_s",
		"cgroup_parent",
		"log_level",
		"log_format",
		"log_max",
		"admit_cpu_pressure",
		"admit_memory_pressure",
		"admit_io_pressure",
		"admit_min_available_percent",
		"admit_restore_slowdown",
		"jail",
		"jail_ids",
		"require_limits",
		"kernel",
		"initrd",
		"cmdline",
		"mem_mib",
		"vcpus",
		"min_ready",
		"max_total",
		"timeout_s",
		"max_timeout_s",
		"cpu_percent",
		"memory_limit_mib",
		"pids_limit",
		"restore_parallel",
		"page_in",
		"network_cidr",
		"e2b_listen",
		"e2b_max_processes",
		"dns_servers",
		"dns_without_internet",
		"network",
		"allow_internet",
	};
	char line[64];
	size_t i;

	cr_expect_not_null(strstr(config_default_text, "\n[daemon]\n"));
	cr_expect_not_null(
		strstr(config_default_text, "\n[template default]\n"));
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		snprintf(line, sizeof(line), "\n%s =", keys[i]);
		cr_expect_not_null(strstr(config_default_text, line),
				   "no \"%s\" line", keys[i]);
	}
}

/* What --print-config prints, saved as a file, runs the same. */
Test(config, default_text_as_a_file_loads_the_same)
{
	load_ok(config_default_text);
	expect_default_daemon(&c);
	cr_assert_eq(c.nr_templates, 1);
	expect_default_template(&c.templates[0], "default");
}

Test(config, empty_file_is_the_default)
{
	load_ok("");
	expect_default_daemon(&c);
	cr_assert_eq(c.nr_templates, 1);
	expect_default_template(&c.templates[0], "default");
}

Test(config, file_overrides_values)
{
	load_ok("; thawd for the tests\n"
		"# both comment styles\n"
		"[daemon]\n"
		"socket = /run/thaw/api.sock\n"
		"socket_group = thaw\n"
		"state_dir = /var/lib/thaw\n"
		"token = s3cret ; an inline comment\n"
		"max_sandboxes = 10\n"
		"max_request_bytes = 1M\n"
		"max_file_bytes = 1073741824\n"
		"max_exec_output_bytes = 64K\n"
		"api_memory_budget_bytes = 8M\n"
		"restore_timeout_s = 5\n"
		"cgroup_parent = thaw-test.1\n"
		"log_level = debug\n"
		"log_format = json\n"
		"jail = false\n"
		"jail_ids = 100-199\n"
		"require_limits = false\n"
		"admit_cpu_pressure = 0\n"
		"admit_memory_pressure = 100\n"
		"admit_io_pressure = 50\n"
		"admit_min_available_percent = 10\n"
		"admit_restore_slowdown = 1000\n"
		"network_cidr = 192.168.128.0/17\n"
		"dns_servers = 1.1.1.1, 8.8.8.8 ,169.254.169.253,9.9.9.9\n"
		"dns_without_internet = true\n"
		"\n"
		"[template default]\n"
		"kernel = /boot/vmlinux\n"
		"initrd = /boot/initrd.cpio\n"
		"cmdline = console=ttyS0 quiet\n"
		"mem_mib = 1024\n"
		"vcpus = 4\n"
		"min_ready = 3\n"
		"max_total = 8\n"
		"timeout_s = 30\n"
		"max_timeout_s = 3600\n"
		"cpu_percent = 150\n"
		"pids_limit = 0\n"
		"restore_parallel = 2\n"
		"page_in = lazy\n"
		"network = none\n"
		"allow_internet = false\n");
	cr_expect_str_eq(c.socket, "/run/thaw/api.sock");
	cr_expect_str_eq(c.socket_group, "thaw");
	cr_expect_str_eq(c.state_dir, "/var/lib/thaw");
	cr_expect_str_eq(c.token, "s3cret");
	cr_expect_eq(c.max_sandboxes, 10);
	cr_expect_eq(c.max_connections, 512, "not in the file: the default");
	cr_expect_eq(c.max_request_bytes, 1 << 20);
	cr_expect_eq(c.max_file_bytes, 1 << 30);
	cr_expect_eq(c.max_exec_output_bytes, 64 << 10);
	cr_expect_eq(c.api_memory_budget_bytes, 8 << 20);
	cr_expect_eq(c.restore_timeout_s, 5);
	cr_expect_str_eq(c.cgroup_parent, "thaw-test.1");
	cr_expect_str_eq(c.log_level, "debug");
	cr_expect_str_eq(c.log_format, "json");
	cr_expect_not(c.jail);
	cr_expect(c.jail_ids.first == 100 && c.jail_ids.last == 199);
	cr_expect_not(c.require_limits);
	cr_expect_eq(c.admit_cpu_pressure, 0, "0: not watched");
	cr_expect_eq(c.admit_memory_pressure, 100);
	cr_expect_eq(c.admit_io_pressure, 50);
	cr_expect_eq(c.admit_min_available_percent, 10);
	cr_expect_eq(c.admit_restore_slowdown, 1000);
	cr_expect_eq(c.net.pool.addr, 0xc0a88000u);
	cr_expect_eq(c.net.pool.prefix, 17);
	cr_expect_not(c.dns_from_host);
	cr_assert_eq(c.net.n_dns, 4);
	cr_expect_eq(c.net.dns_servers[0], 0x01010101u);
	cr_expect_eq(c.net.dns_servers[1], 0x08080808u);
	cr_expect_eq(c.net.dns_servers[2], 0xa9fea9fdu, "a cloud's resolver");
	cr_expect_eq(c.net.dns_servers[3], 0x09090909u);
	cr_expect(c.net.dns_always);

	cr_assert_eq(c.nr_templates, 1);
	const struct template_config *t = config_template(&c, "default");

	cr_assert_not_null(t);
	cr_expect_str_eq(t->kernel, "/boot/vmlinux");
	cr_expect_str_eq(t->initrd, "/boot/initrd.cpio");
	cr_expect_str_eq(t->cmdline, "console=ttyS0 quiet");
	cr_expect_eq(t->mem_mib, 1024);
	cr_expect_eq(t->vcpus, 4);
	cr_expect_eq(t->min_ready, 3);
	cr_expect_eq(t->max_total, 8);
	cr_expect_eq(t->timeout_s, 30);
	cr_expect_eq(t->max_timeout_s, 3600);
	cr_expect_eq(t->cpu_percent, 150);
	cr_expect_eq(t->memory_limit_mib, 1024 + 256, "0: mem_mib + 256");
	cr_expect_eq(t->pids_limit, 0);
	cr_expect_eq(t->restore_parallel, 2);
	cr_expect(t->page_in_lazy);
	cr_expect_not(t->network);
	cr_expect_not(t->allow_internet);
}

Test(config, dns_servers_none_is_no_dns)
{
	load_ok("[daemon]\ndns_servers = none\n");
	cr_expect_not(c.dns_from_host);
	cr_expect_eq(c.net.n_dns, 0);
	config_net_host(&c, "/var/lib/thaw", "/nonexistent");
	cr_expect_eq(c.net.n_dns, 0, "none: the host's are not read");
}

/* resolv.conf's IPv4 nameservers a sandbox can reach, at most 4. */
Test(config, dns_servers_default_to_the_hosts)
{
	make_file(token_path, "# generated\n"
			      "search example.com\n"
			      "nameserver 127.0.0.53\n"
			      "nameserver ::1\n"
			      "; nameserver 9.9.9.9\n"
			      "nameserver\t10.0.0.2\n"
			      "nameserver 10.200.0.1\n"
			      "nameserver 0.0.0.0\n"
			      "nameserver 1.1.1.1 # trailing\n"
			      "nameserver 1.0.0.1\n"
			      "nameserver 8.8.8.8\n"
			      "nameserver 8.8.4.4\n");
	load_ok("");
	config_net_host(&c, "/var/lib/thaw", token_path);
	cr_assert_eq(c.net.n_dns, 4);
	cr_expect_eq(c.net.dns_servers[0], 0x0a000002u);
	cr_expect_eq(c.net.dns_servers[1], 0x01010101u);
	cr_expect_eq(c.net.dns_servers[2], 0x01000001u);
	cr_expect_eq(c.net.dns_servers[3], 0x08080808u);

	/* Only loopback ones (systemd-resolved): none, which the daemon says;
	 * 10.200.0.1, inside network_cidr, was left out above. */
	remove_file(token_path);
	make_file(token_path, "nameserver 127.0.0.53\n");
	config_net_host(&c, "/var/lib/thaw", token_path);
	cr_expect_eq(c.net.n_dns, 0);
	config_net_host(&c, "/var/lib/thaw", "/nonexistent");
	cr_expect_eq(c.net.n_dns, 0);

	/* A list in the file: resolv.conf is not read. */
	config_free(&c);
	load_ok("[daemon]\ndns_servers = 9.9.9.9\n");
	config_net_host(&c, "/var/lib/thaw", token_path);
	cr_assert_eq(c.net.n_dns, 1);
	cr_expect_eq(c.net.dns_servers[0], 0x09090909u);
}

/* The state directory's names: cgroup.h's hash, so a restarted daemon
 * finds its veths and table; another directory has others. */
Test(config, network_names_follow_the_state_directory)
{
	char prefix[16], table[40];
	uint64_t h = cgroup_owner_hash("/var/lib/thaw");

	load_ok("");
	config_net_host(&c, "/var/lib/thaw", "/nonexistent");
	snprintf(prefix, sizeof(prefix), "th%05x", (unsigned)(h & 0xfffff));
	snprintf(table, sizeof(table), "thaw_%016llx", (unsigned long long)h);
	cr_expect_str_eq(c.net.ifname_prefix, prefix);
	cr_expect_str_eq(c.net.nft_table, table);
	cr_expect_eq(strlen(c.net.ifname_prefix), 7);
	cr_expect_eq(strlen(c.net.nft_table), 21);
	config_net_host(&c, "/var/lib/thaw2", "/nonexistent");
	cr_expect_str_neq(c.net.ifname_prefix, prefix);
	cr_expect_str_neq(c.net.nft_table, table);
}

Test(config, templates_each_start_from_the_defaults)
{
	load_ok("[template py]\n"
		"mem_mib = 512\n"
		"memory_limit_mib = 576\n"
		"\n"
		"[template node-20.x_1]\n"
		"vcpus = 2\n"
		"[template empty]\n");
	cr_assert_eq(c.nr_templates, 3);
	cr_expect_str_eq(c.templates[0].name, "py");
	cr_expect_str_eq(c.templates[1].name, "node-20.x_1");
	cr_expect_str_eq(c.templates[2].name, "empty");

	const struct template_config *py = config_template(&c, "py");
	const struct template_config *node = config_template(&c, "node-20.x_1");

	cr_assert_not_null(py);
	cr_assert_not_null(node);
	cr_expect_eq(py->mem_mib, 512);
	cr_expect_eq(py->memory_limit_mib, 576);
	cr_expect_eq(py->vcpus, 1);
	cr_expect_eq(node->mem_mib, 256);
	cr_expect_eq(node->memory_limit_mib, 512);
	cr_expect_eq(node->vcpus, 2);
	cr_expect_eq(py->cpu_percent, 100, "auto, 1 vCPU");
	cr_expect_eq(node->cpu_percent, 200, "auto, 2 vCPUs");
	/* A section without keys is a template all the same. */
	expect_default_template(config_template(&c, "empty"), "empty");
	cr_expect_null(config_template(&c, "default"),
		       "the file has templates: no implicit default");
	cr_expect_null(config_template(&c, "py "));
}

Test(config, file_without_template_gets_default)
{
	load_ok("[daemon]\nmax_sandboxes = 8\n");
	cr_expect_eq(c.max_sandboxes, 8);
	cr_assert_eq(c.nr_templates, 1);
	expect_default_template(&c.templates[0], "default");
}

/* A CPU quota by default, of the template's own vCPUs; 0 only when said. */
Test(config, cpu_percent_is_auto_unless_set)
{
	load_ok("[template four]\n"
		"vcpus = 4\n"
		"[template auto]\n"
		"vcpus = 64\n"
		"cpu_percent = auto\n"
		"[template unlimited]\n"
		"vcpus = 2\n"
		"cpu_percent = 0\n"
		"[template half]\n"
		"vcpus = 2\n"
		"cpu_percent = 50\n");
	cr_expect_eq(config_template(&c, "four")->cpu_percent, 400);
	cr_expect_eq(config_template(&c, "auto")->cpu_percent, 6400);
	cr_expect_eq(config_template(&c, "unlimited")->cpu_percent, 0);
	cr_expect_eq(config_template(&c, "half")->cpu_percent, 50);
}

/*
 * config_load() leaks nothing on any path, good or bad, called over and
 * over (as the fuzz harness does): LeakSanitizer checks at exit.
 */
Test(config, loads_in_a_loop_leak_nothing)
{
	static const char *const texts[] = {
		"",
		"[template a]\n[template b]\nvcpus = 2\n[template c]\n",
		"[template a]\n[template a]\n",
		"[template a]\nvcpus = 65\n",
		"[daemon]\nmax_sandboxes = 1\n[template a]\n[template b]\n",
		"[template a]\ncpu_percent = autox\n",
		"[daemon]\ntoken_file = /nonexistent/token\n",
		"\xEF\xBB\xBF[daemon]\r\njail = true\r\n",
	};

	for (int round = 0; round < 50; round++)
		for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
			load(texts[i]);
			config_free(&c);
			cr_assert(is_zero(&c));
		}
}

/* Longer than the 49 characters inih keeps of a section name. */
Test(config, template_name_of_63_characters)
{
	char text[256], name[64];

	memset(name, 'n', 63);
	name[63] = '\0';
	snprintf(text, sizeof(text), "[template %s]\nvcpus = 3\n", name);
	load_ok(text);
	cr_assert_eq(c.nr_templates, 1);
	cr_expect_str_eq(c.templates[0].name, name);
	cr_expect_eq(c.templates[0].vcpus, 3);
}

Test(config, crlf_and_byte_order_mark)
{
	load_ok("\xEF\xBB\xBF[daemon]\r\nmax_sandboxes = 7\r\n\r\n"
		"[template a]\r\ncmdline = quiet\r\n");
	cr_expect_eq(c.max_sandboxes, 7);
	cr_assert_eq(c.nr_templates, 1);
	cr_expect_str_eq(c.templates[0].cmdline, "quiet");
}

Test(config, token_file_first_line_is_the_token)
{
	char text[128];

	make_file(token_path, "t0k3n \t\r\nsecond line\n");
	snprintf(text, sizeof(text), "[daemon]\ntoken =\ntoken_file = %s\n",
		 token_path);
	load_ok(text);
	cr_expect_str_eq(c.token, "t0k3n");
}

Test(config, token_file_missing_is_named)
{
	char text[128], want[256];

	snprintf(token_path, sizeof(token_path), "/tmp/thaw-config-none-%d",
		 getpid());
	snprintf(text, sizeof(text), "[daemon]\ntoken_file = %s\n", token_path);
	cr_expect_eq(load(text), -ENOENT, "%s", err);
	snprintf(want, sizeof(want),
		 "%s:2: [daemon] token_file = \"%s\": ", path, token_path);
	cr_expect(!strncmp(err, want, strlen(want)), "%s", err);
	cr_expect(is_zero(&c));
}

Test(config, e2b_listen_takes_host_and_port)
{
	load_ok("[daemon]\ntoken = t\ne2b_listen = 127.0.0.1:49999\n");
	cr_expect_str_eq(c.e2b_listen, "127.0.0.1:49999");
	config_free(&c);
	load_ok("[daemon]\ntoken = t\ne2b_listen = [::1]:8080\n");
	cr_expect_str_eq(c.e2b_listen, "[::1]:8080");
	config_free(&c);
	load_ok("[daemon]\ne2b_listen =\n");
	cr_expect_str_eq(c.e2b_listen, "");
}

Test(config, token_file_empty_is_an_error)
{
	char text[128];

	make_file(token_path, "\n");
	snprintf(text, sizeof(text), "[daemon]\ntoken_file = %s\n", token_path);
	cr_expect_eq(load(text), -EINVAL);
	cr_expect_not_null(strstr(err, ":2: [daemon] token_file"), "%s", err);
	cr_expect_not_null(strstr(err, "empty"), "%s", err);
	cr_expect(is_zero(&c));
}

Test(config, token_after_token_file_is_an_error)
{
	char text[128];

	make_file(token_path, "t0k3n\n");
	snprintf(text, sizeof(text), "[daemon]\ntoken_file = %s\ntoken = x\n",
		 token_path);
	cr_expect_eq(load(text), -EINVAL);
	cr_expect_not_null(strstr(err, ":3: [daemon] token = "), "%s", err);
	cr_expect_not_null(strstr(err, "line 2"), "%s", err);
	cr_expect(is_zero(&c));
}

Test(config, messages_do_not_show_the_token)
{
	cr_expect_eq(load("[daemon]\ntoken = topsecret\n"
			  "token = othersecret\n"),
		     -EINVAL);
	cr_expect_not_null(strstr(err, ":3: [daemon] token = "), "%s", err);
	cr_expect_null(strstr(err, "secret"), "%s", err);
}

Test(config, missing_file_is_named)
{
	snprintf(path, sizeof(path), "/tmp/thaw-config-none-%d", getpid());
	cr_expect_eq(config_load(&c, path, err, sizeof(err)), -ENOENT);
	cr_expect(!strncmp(err, path, strlen(path)), "%s", err);
	cr_expect_not_null(strstr(err, strerror(ENOENT)), "%s", err);
	cr_expect(is_zero(&c));
	path[0] = '\0';
}

Test(config, directory_is_a_read_error)
{
	cr_expect_eq(config_load(&c, "/tmp", err, sizeof(err)), -EISDIR);
	cr_expect(!strncmp(err, "/tmp: ", 6), "%s", err);
	cr_expect(is_zero(&c));
}

/* A file that must fail with -EINVAL at @line, with @message in err. */
struct bad_case {
	const char *text;
	unsigned line;
	const char *message;
};

static const struct bad_case bad_cases[] = {
	/* A TCP listener without a token; malformed addresses. */
	{ "[daemon]\ne2b_listen = 127.0.0.1:49999\n", 2,
	  "[daemon] e2b_listen = \"127.0.0.1:49999\": needs token" },
	{ "[daemon]\ntoken = t\ne2b_listen = 127.0.0.1\n", 3,
	  "e2b_listen = \"127.0.0.1\": expected HOST:PORT" },
	{ "[daemon]\ntoken = t\ne2b_listen = :80\n", 3, "expected HOST:PORT" },
	{ "[daemon]\ntoken = t\ne2b_listen = h:65536\n", 3,
	  "expected HOST:PORT" },
	{ "[daemon]\ntoken = t\ne2b_listen = h:0\n", 3, "expected HOST:PORT" },
	{ "[daemon]\ntoken = t\ne2b_listen = a/b:80\n", 3,
	  "expected HOST:PORT" },
	{ "[daemon]\ntoken = t\ne2b_listen = [::1:80\n", 3,
	  "expected HOST:PORT" },
	/* Unknown sections and keys. */
	{ "[daemon]\nmax_sandbox = 3\n", 2,
	  "[daemon] max_sandbox = \"3\": unknown key" },
	{ "[template a]\npage_in_lazy = 1\n", 2,
	  "[template a] page_in_lazy = \"1\": unknown key" },
	{ "[daemon]\n[demon]\n", 2, "[demon]: unknown section" },
	{ "[templates x]\n", 1, "[templates x]: unknown section" },
	{ "vcpus = 2\n", 1, "vcpus = \"2\": before any [daemon]" },
	/* Numbers: decimal digits only. */
	{ "[template default]\nmem_mib = 12x\n", 2,
	  "[template default] mem_mib = \"12x\": not a number" },
	{ "[template a]\nvcpus = +2\n", 2, "vcpus = \"+2\": not a number" },
	{ "[template a]\nvcpus = -1\n", 2, "vcpus = \"-1\": not a number" },
	{ "[template a]\nvcpus = 0x10\n", 2, "vcpus = \"0x10\": not a number" },
	{ "[template a]\nvcpus = 1.5\n", 2, "vcpus = \"1.5\": not a number" },
	{ "[template a]\nvcpus =\n", 2, "vcpus = \"\": not a number" },
	{ "[template a]\nmem_mib = 1K\n", 2, "mem_mib = \"1K\": not a number" },
	{ "[daemon]\nmax_file_bytes = 1T\n", 2,
	  "max_file_bytes = \"1T\": not a number" },
	{ "[daemon]\nmax_file_bytes = 1 M\n", 2,
	  "max_file_bytes = \"1 M\": not a number" },
	/* Overflow. */
	{ "[daemon]\nmax_file_bytes = 99999999999999999999\n", 2,
	  "max_file_bytes = \"99999999999999999999\": too large" },
	{ "[daemon]\nmax_file_bytes = 17179869184G\n", 2,
	  "max_file_bytes = \"17179869184G\": too large" },
	{ "[template a]\nmem_mib = 4294967312\n", 2,
	  "mem_mib = \"4294967312\": out of range 16..65536" },
	/* Ranges. */
	{ "[template a]\nmem_mib = 8\n", 2,
	  "mem_mib = \"8\": out of range 16..65536" },
	{ "[template a]\nvcpus = 65\n", 2,
	  "vcpus = \"65\": out of range 1..64" },
	{ "[template a]\ncpu_percent = 102401\n", 2,
	  "cpu_percent = \"102401\": out of range 0..102400" },
	{ "[template a]\ncpu_percent = automatic\n", 2,
	  "[template a] cpu_percent = \"automatic\": not a number or auto" },
	{ "[template a]\ncpu_percent = -1\n", 2,
	  "cpu_percent = \"-1\": not a number or auto" },
	{ "[daemon]\nrequire_limits = off\n", 2,
	  "[daemon] require_limits = \"off\": expected true or false" },
	{ "[template a]\nrestore_parallel = 0\n", 2,
	  "restore_parallel = \"0\": out of range 1..64" },
	{ "[template a]\nmax_total = 0\n", 2,
	  "max_total = \"0\": out of range" },
	{ "[template a]\ntimeout_s = 0\n", 2,
	  "timeout_s = \"0\": out of range" },
	{ "[daemon]\nmax_request_bytes = 100\n", 2,
	  "max_request_bytes = \"100\": out of range 1024.." },
	{ "[daemon]\nadmit_cpu_pressure = 101\n", 2,
	  "[daemon] admit_cpu_pressure = \"101\": out of range 0..100" },
	{ "[daemon]\nadmit_memory_pressure = 101\n", 2,
	  "admit_memory_pressure = \"101\": out of range 0..100" },
	{ "[daemon]\nadmit_io_pressure = 2.5\n", 2,
	  "admit_io_pressure = \"2.5\": not a number" },
	{ "[daemon]\nadmit_min_available_percent = 101\n", 2,
	  "admit_min_available_percent = \"101\": out of range 0..100" },
	{ "[daemon]\nadmit_restore_slowdown = 1001\n", 2,
	  "admit_restore_slowdown = \"1001\": out of range 0..1000" },
	{ "[template a]\nadmit_cpu_pressure = 50\n", 2,
	  "[template a] admit_cpu_pressure = \"50\": unknown key" },
	/* Other values. */
	{ "[template a]\npage_in = eager\n", 2,
	  "page_in = \"eager\": neither prefetch nor lazy" },
	/* The network. */
	{ "[template a]\nnetwork = bridge\n", 2,
	  "[template a] network = \"bridge\": neither none nor nat" },
	{ "[template a]\nallow_internet = yes\n", 2,
	  "[template a] allow_internet = \"yes\": expected true or false" },
	{ "[daemon]\nnetwork_cidr = 10.200.0.0\n", 2,
	  "[daemon] network_cidr = \"10.200.0.0\": smaller than a /30" },
	{ "[daemon]\nnetwork_cidr = 10.200.0.0/31\n", 2,
	  "network_cidr = \"10.200.0.0/31\": smaller than a /30" },
	{ "[daemon]\nnetwork_cidr = 10.200.0.1/16\n", 2,
	  "network_cidr = \"10.200.0.1/16\": '10.200.0.1/16' is not a CIDR: address bits past /16 are set" },
	{ "[daemon]\nnetwork_cidr = 10.200.0.0/33\n", 2,
	  "network_cidr = \"10.200.0.0/33\": '10.200.0.0/33' is not a CIDR" },
	{ "[daemon]\nnetwork_cidr = tenish\n", 2,
	  "network_cidr = \"tenish\": 'tenish' is not a CIDR" },
	{ "[daemon]\nnetwork_cidr =\n", 2, "network_cidr = \"\": '' is not" },
	{ "[daemon]\nnetwork_cidr = 127.0.0.0/16\n", 2,
	  "network_cidr = \"127.0.0.0/16\": overlaps 127.0.0.0/8 (loopback)" },
	{ "[daemon]\nnetwork_cidr = 169.254.0.0/30\n", 2,
	  "network_cidr = \"169.254.0.0/30\": overlaps 169.254.0.0/16 (link-local)" },
	{ "[daemon]\nnetwork_cidr = 168.0.0.0/6\n", 2,
	  "overlaps 169.254.0.0/16 (link-local)" },
	{ "[daemon]\nnetwork_cidr = 0.0.0.0/0\n", 2,
	  "network_cidr = \"0.0.0.0/0\": overlaps 0.0.0.0/8" },
	{ "[daemon]\nnetwork_cidr = 224.0.0.0/24\n", 2,
	  "overlaps 224.0.0.0/3 (multicast and reserved)" },
	{ "[daemon]\nnetwork_cidr = 255.255.255.252/30\n", 2,
	  "overlaps 224.0.0.0/3" },
	{ "[daemon]\ndns_servers = 127.0.0.53\n", 2,
	  "[daemon] dns_servers = \"127.0.0.53\": '127.0.0.53' is in 127.0.0.0/8 (loopback): a sandbox cannot reach it" },
	/* A resolver among the sandboxes' addresses: the key set last. */
	{ "[daemon]\ndns_servers = 8.8.8.8, 10.200.3.1\n", 2,
	  "[daemon] dns_servers = \"10.200.3.1\": inside network_cidr "
	  "(10.200.0.0/16)" },
	{ "[daemon]\ndns_servers = 10.9.0.53\nnetwork_cidr = 10.9.0.0/24\n", 3,
	  "[daemon] network_cidr = \"10.9.0.0/24\": holds dns_servers' "
	  "10.9.0.53" },
	{ "[daemon]\ndns_servers = 1.1.1.1,x\n", 2,
	  "dns_servers = \"1.1.1.1,x\": 'x' is not an IPv4 address" },
	{ "[daemon]\ndns_servers = 1.1.1.0/24\n", 2,
	  "'1.1.1.0/24' is not an IPv4 address" },
	{ "[daemon]\ndns_servers = 1.1.1.1 8.8.8.8\n", 2,
	  "'1.1.1.1 8.8.8.8' is not an IPv4 address" },
	{ "[daemon]\ndns_servers = 1.1.1.1,,8.8.8.8\n", 2,
	  "'' is not an IPv4 address" },
	{ "[daemon]\ndns_servers = ,\n", 2, "'' is not an IPv4 address" },
	{ "[daemon]\ndns_servers = 224.0.0.251\n", 2,
	  "'224.0.0.251' is in 224.0.0.0/3" },
	{ "[daemon]\ndns_servers = 1.1.1.1,1.0.0.1,8.8.8.8,8.8.4.4,9.9.9.9\n",
	  2, "more than 4 addresses" },
	{ "[daemon]\ndns_without_internet = 1\n", 2,
	  "[daemon] dns_without_internet = \"1\": expected true or false" },
	{ "[template a]\nnetwork_cidr = 10.0.0.0/8\n", 2,
	  "[template a] network_cidr = \"10.0.0.0/8\": unknown key" },
	{ "[daemon]\nlog_level = verbose\n", 2,
	  "[daemon] log_level = \"verbose\": expected error, warning, info or debug" },
	{ "[daemon]\nlog_level = INFO\n", 2, "log_level = \"INFO\": expected" },
	{ "[daemon]\nlog_level =\n", 2, "log_level = \"\": expected" },
	{ "[daemon]\nlog_format = yaml\n", 2,
	  "[daemon] log_format = \"yaml\": expected text or json" },
	{ "[daemon]\njail = no\n", 2,
	  "[daemon] jail = \"no\": expected true or false" },
	{ "[daemon]\njail_ids = 10-5\n", 2,
	  "[daemon] jail_ids = \"10-5\": jail ids '10-5': want FIRST-LAST" },
	{ "[daemon]\njail_ids = 0-5\n", 2, "jail_ids = \"0-5\": jail ids" },
	{ "[template a]\nlog_level = info\n", 2,
	  "[template a] log_level = \"info\": unknown key" },
	{ "[template a]\nkernel = vmlinux\n", 2,
	  "kernel = \"vmlinux\": not an absolute path" },
	{ "[daemon]\ncgroup_parent = a/b\n", 2,
	  "cgroup_parent = \"a/b\": not a name" },
	{ "[daemon]\ncgroup_parent =\n", 2,
	  "cgroup_parent = \"\": not a name" },
	{ "[daemon]\ncgroup_parent = ..\n", 2,
	  "cgroup_parent = \"..\": not a name" },
	{ "[daemon]\nsocket = /"
	  "123456789012345678901234567890123456789012345678901234567890"
	  "123456789012345678901234567890123456789012345678901234567890\n",
	  2, "longer than 107 bytes" },
	/* Keys and values that do not fit together. */
	{ "[template default]\nmin_ready = 40\n", 2,
	  "[template default] min_ready = \"40\": more than max_total (32)" },
	{ "[template a]\nmin_ready = 5\nmax_total = 4\n", 3,
	  "[template a] max_total = \"4\": less than min_ready (5)" },
	{ "[template a]\nmax_timeout_s = 60\n", 2,
	  "max_timeout_s = \"60\": less than timeout_s (600)" },
	{ "[template a]\nmem_mib = 1024\nmemory_limit_mib = 1000\n", 3,
	  "memory_limit_mib = \"1000\": less than mem_mib (1024) + 64" },
	{ "[template a]\nmemory_limit_mib = 300\nmem_mib = 512\n", 3,
	  "mem_mib = \"512\": more than memory_limit_mib (300) - 64" },
	{ "[template a]\nmin_ready = 200\nmax_total = 200\n"
	  "[template b]\nmin_ready = 100\nmax_total = 100\n",
	  5,
	  "[template b] min_ready = \"100\": the templates' min_ready add up to 300, more than max_sandboxes (256)" },
	{ "[daemon]\nmax_sandboxes = 3\n[template a]\n[template b]\n", 2,
	  "[daemon] max_sandboxes = \"3\": less than the templates' min_ready" },
	{ "[daemon]\ntoken = x\ntoken_file = /nonexistent\n", 3,
	  "[daemon] token_file = \"/nonexistent\": the token is already set on line 2" },
	/* Twice. */
	{ "[template a]\nvcpus = 2\n[template b]\n[template a]\n", 4,
	  "[template a]: a second [template a] (the first is on line 1)" },
	{ "[daemon]\n[template a]\n[daemon]\n", 3,
	  "[daemon]: a second [daemon] (the first is on line 1)" },
	{ "[daemon]\nmax_connections = 5\nmax_connections = 6\n", 3,
	  "max_connections = \"6\": already set on line 2" },
	/* log_max takes --log-max's syntax and range (capfile.h). */
	{ "[daemon]\nlog_max = 1023\n", 2,
	  "log_max = \"1023\": out of range 1024..1099511627776" },
	{ "[daemon]\nlog_max = 2T\n", 2, "log_max = \"2T\": not a number" },
	{ "[daemon]\nlog_max = 2048G\n", 2, "out of range" },
	/* One uid may not be allowed every connection slot and more. */
	{ "[daemon]\nmax_connections_per_uid = 513\n", 2,
	  "max_connections_per_uid = \"513\": more than max_connections (512)" },
	{ "[daemon]\nmax_connections_per_uid = 8\nmax_connections = 4\n", 3,
	  "max_connections = \"4\": less than max_connections_per_uid (8)" },
	{ "[daemon]\nmax_connections_per_uid = 0\n", 2,
	  "out of range 1..65536" },
	/* envd's processes may hold half of the API's memory, no more. */
	{ "[daemon]\ne2b_max_processes = 129\n", 2,
	  "e2b_max_processes = \"129\": more than half of "
	  "api_memory_budget_bytes holds, at 4M a process (128)" },
	{ "[daemon]\ne2b_max_processes = 3\napi_memory_budget_bytes = 16M\n", 3,
	  "api_memory_budget_bytes = \"16777216\": less than what "
	  "e2b_max_processes needs at 4M a process in its half (3)" },
	{ "[daemon]\nheader_timeout_s = 0\n", 2,
	  "header_timeout_s = \"0\": out of range 1..3600" },
	/* Template names. */
	{ "[template a/b]\n", 1, "[template a/b]: bad template name" },
	{ "[template a b]\n", 1, "[template a b]: bad template name" },
	{ "[template]\n", 1, "[template ]: bad template name" },
	{ "[template ..]\n", 1, "[template ..]: bad template name" },
	{ "[template "
	  "1234567890123456789012345678901234567890123456789012345678901234]\n",
	  1, "bad template name" },
	/* Lines. */
	{ "[daemon]\njunk\n", 2, "neither \"key = value\" nor [section]" },
	{ "[daemon]\njunk\nmax_sandbox = 3\n", 2, "neither" },
	{ "[template a]\nvcpus = 2\n  mem_mib = 512\n", 3, "indented line" },
	{ "[daemon\n", 1, "no ']'" },
	{ "[daemon] x\n", 1, "[daemon]: text after ']'" },
	{ "[template a]\ncmdline = "
	  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	  "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
	  " a=b\n",
	  2, "line longer than" },
};

Test(config, each_error_names_file_line_and_key)
{
	char want[128];
	size_t i;

	for (i = 0; i < sizeof(bad_cases) / sizeof(bad_cases[0]); i++) {
		const struct bad_case *b = &bad_cases[i];

		cr_expect_eq(load(b->text), -EINVAL, "case %zu: %s", i, err);
		snprintf(want, sizeof(want), "%s:%u: ", path, b->line);
		cr_expect(!strncmp(err, want, strlen(want)),
			  "case %zu: \"%s\" does not start with \"%s\"", i, err,
			  want);
		cr_expect_not_null(strstr(err, b->message),
				   "case %zu: \"%s\" lacks \"%s\"", i, err,
				   b->message);
		cr_expect(is_zero(&c), "case %zu: left loaded", i);
		config_free(&c);
	}
}

Test(config, connection_limits_and_log_max)
{
	load_ok("[daemon]\nmax_connections = 10\nlog_max = 16K\n");
	cr_expect_eq(c.max_connections_per_uid, 2, "auto: a quarter of 10");
	cr_expect_eq(c.log_max, 16 << 10);
	config_free(&c);
	load_ok("[daemon]\nmax_connections = 3\nheader_timeout_s = 5\n");
	cr_expect_eq(c.max_connections_per_uid, 1, "auto: never 0");
	cr_expect_eq(c.header_timeout_s, 5);
	config_free(&c);
	load_ok("[daemon]\napi_memory_budget_bytes = 8M\n");
	cr_expect_eq(c.e2b_max_processes, 1, "auto: half of 8M at 4M");
	config_free(&c);
	load_ok("[daemon]\nmax_connections_per_uid = 512\nlog_max = 1G\n");
	cr_expect_eq(c.max_connections_per_uid, 512,
		     "all: the operator's call");
	cr_expect_eq(c.log_max, 1ull << 30);
}
