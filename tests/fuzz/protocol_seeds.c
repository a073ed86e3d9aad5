// SPDX-License-Identifier: Apache-2.0
/*
 * protocol_seeds.c - writes the seed corpora of protocol_host and
 * protocol_guest: real frames, encoded by protocol.c's own writer, in the
 * conversations the host and the agent have (PROTOCOL.md).
 *
 *	protocol_seeds DIR	writes DIR/protocol_host/ and
 *				DIR/protocol_guest/
 *
 * A protocol_host seed starts with the byte that picks its conversation
 * (protocol_host.c's enum); a protocol_guest seed is the bytes a host
 * sends.  Run by hand when the protocol changes; the outputs are
 * committed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "guest/protocol.h"

/* protocol_host.c's conversations */
enum { GREETING, ANSWERS, PING, EXEC_EVENTS, DOWNLOAD, STAT, LIST, WATCH };

struct seed {
	uint8_t buf[8192];
	size_t len;
};

static struct thaw_writer w;
static uint8_t frame[4096];

static void begin(uint32_t id, uint16_t type, uint16_t flags)
{
	thaw_writer_init(&w, frame, sizeof(frame), id, type, flags);
}

static void end(struct seed *s)
{
	int n = thaw_writer_finish(&w);

	if (n < 0 || s->len + (size_t)n > sizeof(s->buf))
		abort();
	memcpy(s->buf + s->len, frame, (size_t)n);
	s->len += (size_t)n;
}

static void save(const char *dir, const char *harness, const char *name,
		 const struct seed *s)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s/%s", dir, harness, name);
	f = fopen(path, "wb");
	if (!f || fwrite(s->buf, 1, s->len, f) != s->len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

static void host_seeds(const char *dir)
{
	struct seed s = { .buf = { GREETING }, .len = 1 };

	begin(0, THAW_HELLO, 0);
	thaw_put_u32(&w, THAW_T_VERSION, THAW_PROTOCOL_VERSION);
	thaw_put_str(&w, THAW_T_AGENT_VERSION, "0.1.0");
	thaw_put_str(&w, THAW_T_BOOT_ID,
		     "6f1c2d0e-5b7a-4c1e-9d3f-2a8b7c6d5e4f");
	thaw_put_str(&w, THAW_T_SANDBOX_ID, "sb-0123456789abcdef");
	end(&s);
	save(dir, "protocol_host", "hello", &s);

	s = (struct seed){ .buf = { ANSWERS }, .len = 1 };
	begin(1, THAW_OK, 0);
	end(&s);
	begin(1, THAW_ERROR, 0);
	thaw_put_u32(&w, THAW_T_ERRNO, 2);
	thaw_put_str(&w, THAW_T_MESSAGE, "/tmp/a.txt: No such file");
	end(&s);
	save(dir, "protocol_host", "ok-error", &s);

	s = (struct seed){ .buf = { PING }, .len = 1 };
	begin(1, THAW_PONG, 0);
	thaw_put_bytes(&w, THAW_T_DATA, "ping", 4);
	end(&s);
	save(dir, "protocol_host", "pong", &s);

	s = (struct seed){ .buf = { EXEC_EVENTS }, .len = 1 };
	begin(1, THAW_EXEC_STARTED, 0);
	thaw_put_u32(&w, THAW_T_PID, 42);
	end(&s);
	begin(1, THAW_STDOUT, 0);
	thaw_put_bytes(&w, THAW_T_DATA, "Linux thaw 6.1.0\n", 17);
	end(&s);
	begin(1, THAW_STDERR, 0);
	thaw_put_bytes(&w, THAW_T_DATA, "warning\n", 8);
	end(&s);
	begin(1, THAW_EXIT, THAW_FLAG_FINAL);
	thaw_put_u32(&w, THAW_T_EXIT_CODE, 0);
	thaw_put_u8(&w, THAW_T_TIMED_OUT, 0);
	end(&s);
	save(dir, "protocol_host", "exec", &s);

	s = (struct seed){ .buf = { EXEC_EVENTS }, .len = 1 };
	begin(1, THAW_EXIT, THAW_FLAG_FINAL);
	thaw_put_u32(&w, THAW_T_SIGNAL, 9);
	thaw_put_u8(&w, THAW_T_TIMED_OUT, 1);
	end(&s);
	save(dir, "protocol_host", "exec-killed", &s);

	s = (struct seed){ .buf = { DOWNLOAD }, .len = 1 };
	begin(1, THAW_DATA, 0);
	thaw_put_bytes(&w, THAW_T_DATA, "hello\n", 6);
	end(&s);
	begin(1, THAW_END, THAW_FLAG_FINAL);
	end(&s);
	save(dir, "protocol_host", "download", &s);

	s = (struct seed){ .buf = { STAT }, .len = 1 };
	begin(1, THAW_STAT_RESULT, 0);
	thaw_put_u8(&w, THAW_T_FILE_TYPE, THAW_FT_SYMLINK);
	thaw_put_u32(&w, THAW_T_MODE, 0777);
	thaw_put_u64(&w, THAW_T_SIZE, 9);
	thaw_put_u64(&w, THAW_T_MTIME_NS, 1764670000000000000ull);
	thaw_put_str(&w, THAW_T_OWNER, "user");
	thaw_put_str(&w, THAW_T_GROUP, "1000");
	thaw_put_str(&w, THAW_T_SYMLINK_TARGET, "/no/where");
	end(&s);
	save(dir, "protocol_host", "stat", &s);

	s = (struct seed){ .buf = { LIST }, .len = 1 };
	begin(1, THAW_ENTRIES, 0);
	for (int i = 0; i < 2; i++) {
		size_t mark = thaw_put_nested_begin(&w, THAW_T_ENTRY);

		thaw_put_str(&w, THAW_T_NAME, i ? "b" : "a");
		thaw_put_u8(&w, THAW_T_FILE_TYPE, THAW_FT_DIR);
		thaw_put_u32(&w, THAW_T_MODE, 0755);
		thaw_put_u64(&w, THAW_T_SIZE, 4096);
		thaw_put_u64(&w, THAW_T_MTIME_NS, 1764670000000000000ull);
		thaw_put_str(&w, THAW_T_OWNER, "root");
		thaw_put_str(&w, THAW_T_GROUP, "root");
		thaw_put_str(&w, THAW_T_PATH, i ? "a/b" : "a");
		thaw_put_nested_end(&w, mark);
	}
	end(&s);
	begin(1, THAW_END, 0);
	thaw_put_u64(&w, THAW_T_SIZE, 2);
	end(&s);
	save(dir, "protocol_host", "list", &s);

	s = (struct seed){ .buf = { WATCH }, .len = 1 };
	begin(1, THAW_WATCHING, 0);
	end(&s);
	begin(1, THAW_FS_EVENT, 0);
	thaw_put_str(&w, THAW_T_PATH, "d/f");
	thaw_put_u8(&w, THAW_T_EVENT, THAW_EV_CREATE);
	end(&s);
	begin(1, THAW_FS_EVENT, 0);
	thaw_put_str(&w, THAW_T_PATH, "");
	thaw_put_u8(&w, THAW_T_EVENT, THAW_EV_OVERFLOW);
	end(&s);
	begin(1, THAW_END, 0);
	end(&s);
	save(dir, "protocol_host", "watch", &s);
}

static void guest_seeds(const char *dir)
{
	struct seed s = { 0 };

	begin(1, THAW_PING, 0);
	thaw_put_bytes(&w, THAW_T_DATA, "ping", 4);
	end(&s);
	save(dir, "protocol_guest", "ping", &s);

	s = (struct seed){ 0 };
	begin(1, THAW_EXEC, 0);
	thaw_put_str(&w, THAW_T_ARGV, "/bin/sh");
	thaw_put_str(&w, THAW_T_ARGV, "-c");
	thaw_put_str(&w, THAW_T_ARGV, "uname -a");
	thaw_put_str(&w, THAW_T_ENV, "PATH=/usr/bin:/bin");
	thaw_put_str(&w, THAW_T_ENV, "HOME=/root");
	thaw_put_str(&w, THAW_T_CWD, "/tmp");
	thaw_put_bytes(&w, THAW_T_STDIN, "input\n", 6);
	thaw_put_u32(&w, THAW_T_TIMEOUT_MS, 30000);
	end(&s);
	begin(2, THAW_KILL, 0);
	thaw_put_u32(&w, THAW_T_TARGET, 1);
	thaw_put_u32(&w, THAW_T_SIGNAL, 9);
	end(&s);
	save(dir, "protocol_guest", "exec-kill", &s);

	s = (struct seed){ 0 };
	begin(3, THAW_WRITE_FILE, 0);
	thaw_put_str(&w, THAW_T_PATH, "/tmp/a.txt");
	thaw_put_u32(&w, THAW_T_MODE, 0644);
	thaw_put_bytes(&w, THAW_T_DATA, "hello\n", 6);
	end(&s);
	begin(3, THAW_WRITE_FILE, THAW_FLAG_FINAL);
	thaw_put_bytes(&w, THAW_T_DATA, "world\n", 6);
	end(&s);
	begin(4, THAW_READ_FILE, 0);
	thaw_put_str(&w, THAW_T_PATH, "/tmp/a.txt");
	end(&s);
	save(dir, "protocol_guest", "files", &s);

	s = (struct seed){ 0 };
	begin(5, THAW_STAT, 0);
	thaw_put_str(&w, THAW_T_PATH, "/etc");
	end(&s);
	begin(6, THAW_LIST, 0);
	thaw_put_str(&w, THAW_T_PATH, "/etc");
	end(&s);
	begin(7, THAW_MKDIR, 0);
	thaw_put_str(&w, THAW_T_PATH, "/tmp/x/y");
	thaw_put_u32(&w, THAW_T_MODE, 0755);
	thaw_put_u8(&w, THAW_T_PARENTS, 1);
	end(&s);
	begin(8, THAW_REMOVE, 0);
	thaw_put_str(&w, THAW_T_PATH, "/tmp/x");
	thaw_put_u8(&w, THAW_T_RECURSIVE, 1);
	end(&s);
	save(dir, "protocol_guest", "fs", &s);

	s = (struct seed){ 0 };
	uint8_t entropy[64];
	for (size_t i = 0; i < sizeof(entropy); i++)
		entropy[i] = (uint8_t)(i * 37 + 11);
	begin(9, THAW_CLONE, 0);
	thaw_put_bytes(&w, THAW_T_ENTROPY, entropy, sizeof(entropy));
	thaw_put_u64(&w, THAW_T_REALTIME_NS, 1764670000000000000ull);
	thaw_put_str(&w, THAW_T_HOSTNAME, "sb-0123");
	thaw_put_str(&w, THAW_T_SANDBOX_ID, "sb-0123456789abcdef");
	end(&s);
	save(dir, "protocol_guest", "clone", &s);

	s = (struct seed){ 0 };
	begin(10, THAW_EXEC, 0);
	thaw_put_str(&w, THAW_T_ARGV, "cat");
	thaw_put_str(&w, THAW_T_USER, "user");
	thaw_put_u8(&w, THAW_T_KEEP_STDIN, 1);
	end(&s);
	begin(11, THAW_STDIN, 0);
	thaw_put_u32(&w, THAW_T_TARGET, 10);
	thaw_put_bytes(&w, THAW_T_DATA, "more\n", 5);
	end(&s);
	begin(12, THAW_STDIN, THAW_FLAG_FINAL);
	thaw_put_u32(&w, THAW_T_TARGET, 10);
	end(&s);
	save(dir, "protocol_guest", "stdin", &s);

	s = (struct seed){ 0 };
	begin(13, THAW_MKDIR, 0);
	thaw_put_str(&w, THAW_T_PATH, "/home/user/a/b");
	thaw_put_u8(&w, THAW_T_PARENTS, 1);
	thaw_put_str(&w, THAW_T_USER, "1000");
	end(&s);
	begin(14, THAW_WRITE_FILE, THAW_FLAG_FINAL);
	thaw_put_str(&w, THAW_T_PATH, "/home/user/a/f");
	thaw_put_str(&w, THAW_T_USER, "user");
	thaw_put_bytes(&w, THAW_T_DATA, "x", 1);
	end(&s);
	begin(15, THAW_RENAME, 0);
	thaw_put_str(&w, THAW_T_PATH, "/home/user/a/f");
	thaw_put_str(&w, THAW_T_NEW_PATH, "/home/user/a/b/g");
	end(&s);
	begin(16, THAW_LIST, 0);
	thaw_put_str(&w, THAW_T_PATH, "/home/user");
	thaw_put_u32(&w, THAW_T_DEPTH, 3);
	end(&s);
	begin(17, THAW_WATCH, 0);
	thaw_put_str(&w, THAW_T_PATH, "/home/user");
	thaw_put_u8(&w, THAW_T_RECURSIVE, 1);
	end(&s);
	begin(18, THAW_KILL, 0);
	thaw_put_u32(&w, THAW_T_TARGET, 17);
	end(&s);
	save(dir, "protocol_guest", "envd", &s);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s DIR\n", argv[0]);
		return 2;
	}
	host_seeds(argv[1]);
	guest_seeds(argv[1]);
	return 0;
}
