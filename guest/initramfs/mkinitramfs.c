// SPDX-License-Identifier: Apache-2.0
/*
 * mkinitramfs.c - thaw-mkinitramfs: packs a guest's initramfs.
 *
 * The archive is the kernel's "newc" cpio format, uncompressed: a guest
 * kernel under emulation (KVM on PVM) spends seconds inflating gzip, while
 * an uncompressed archive only costs memory that clones share anyway.
 *
 * It always contains the directory skeleton, /dev/console (the kernel opens
 * it for init's stdio before anything can mount devtmpfs), /etc/resolv.conf
 * as a link to /proc/net/pnp (where the kernel's ip= configuration writes
 * the resolver, thaw-vmm --net-tap), /etc/passwd and /etc/group with root
 * and `user` (uid and gid 1000, home /home/user owned by it: E2B's default
 * user, whom thaw-agent runs commands as when asked), busybox with a
 * link for each of its applets (/bin/sh among them), and the given /init;
 * --file adds more (the guest agent, test scripts).  Entries have fixed owners
 * (root's but for /home/user), times and inode numbers, so the same inputs give
 * the same bytes.  The archive is stored in the cache under its own XXH3-128
 * hash and that path is printed: callers and later snapshot records name an
 * initramfs by content, and equal content is stored once.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#define MAX_FILES 64

static const char *const skeleton[] = {
	"bin",	"dev", "etc", "proc", "sys",	 "tmp",	     "root", "run",
	"sbin", "usr", "mnt", "var",  "usr/bin", "usr/sbin", "home",
};

/* The guest's users: root, and E2B's default user. */
#define GUEST_USER_ID 1000
#define GUEST_USER_HOME "home/user"
static const char passwd[] = "root:x:0:0:root:/root:/bin/sh\n"
			     "user:x:1000:1000:user:/home/user:/bin/sh\n";
static const char group[] = "root:x:0:\n"
			    "user:x:1000:\n";

struct buffer {
	uint8_t *data;
	size_t len, cap;
};

struct archive {
	struct buffer buf;
	uint32_t next_ino;
	char *dirs[128]; /* directories already emitted, to add parents once */
	int nr_dirs;
};

static int buffer_append(struct buffer *b, const void *p, size_t len)
{
	if (len == 0)
		return 0;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 1 << 20;

		while (cap < b->len + len)
			cap *= 2;
		uint8_t *data = realloc(b->data, cap);
		if (!data) {
			fprintf(stderr, "thaw-mkinitramfs: out of memory\n");
			return -1;
		}
		b->data = data;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, len);
	b->len += len;
	return 0;
}

static int pad4(struct buffer *b)
{
	static const uint8_t zeros[4];

	return buffer_append(b, zeros, (4 - b->len % 4) % 4);
}

static int add_owned_entry(struct archive *a, const char *name, uint32_t mode,
			   uint32_t owner, uint32_t rdev_major,
			   uint32_t rdev_minor, const void *data, size_t size)
{
	char header[128];

	/* newc stores sizes in 8 hex digits */
	if (size > UINT32_MAX) {
		fprintf(stderr, "thaw-mkinitramfs: %s: larger than 4 GiB\n",
			name);
		return -1;
	}
	snprintf(header, sizeof(header),
		 "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		 a->next_ino++, mode, owner, owner, S_ISDIR(mode) ? 2 : 1, 0,
		 (uint32_t)size, 0, 0, rdev_major, rdev_minor,
		 (uint32_t)strlen(name) + 1, 0);
	if (buffer_append(&a->buf, header, 110) < 0 ||
	    buffer_append(&a->buf, name, strlen(name) + 1) < 0 ||
	    pad4(&a->buf) < 0 || buffer_append(&a->buf, data, size) < 0 ||
	    pad4(&a->buf) < 0)
		return -1;
	return 0;
}

static int add_entry(struct archive *a, const char *name, uint32_t mode,
		     uint32_t rdev_major, uint32_t rdev_minor, const void *data,
		     size_t size)
{
	return add_owned_entry(a, name, mode, 0, rdev_major, rdev_minor, data,
			       size);
}

/* /etc/passwd, /etc/group and the user's home. */
static int add_users(struct archive *a)
{
	if (add_entry(a, "etc/passwd", S_IFREG | 0644, 0, 0, passwd,
		      strlen(passwd)) < 0 ||
	    add_entry(a, "etc/group", S_IFREG | 0644, 0, 0, group,
		      strlen(group)) < 0)
		return -1;
	/* Emitted once: a --file below it must not add it again as root's. */
	a->dirs[a->nr_dirs++] = strdup(GUEST_USER_HOME);
	return add_owned_entry(a, GUEST_USER_HOME, S_IFDIR | 0755,
			       GUEST_USER_ID, 0, 0, NULL, 0);
}

static bool dir_emitted(const struct archive *a, const char *dir)
{
	for (int i = 0; i < a->nr_dirs; i++)
		if (!strcmp(a->dirs[i], dir))
			return true;
	return false;
}

static int add_dir(struct archive *a, const char *dir)
{
	if (dir_emitted(a, dir))
		return 0;
	if (a->nr_dirs == (int)(sizeof(a->dirs) / sizeof(a->dirs[0]))) {
		fprintf(stderr, "thaw-mkinitramfs: too many directories\n");
		return -1;
	}
	a->dirs[a->nr_dirs++] = strdup(dir);
	return add_entry(a, dir, S_IFDIR | 0755, 0, 0, NULL, 0);
}

/* Emits every missing parent directory of @path, outermost first. */
static int add_parents(struct archive *a, const char *path)
{
	char dir[4096];

	for (const char *slash = strchr(path, '/'); slash;
	     slash = strchr(slash + 1, '/')) {
		size_t len = slash - path;

		if (len >= sizeof(dir))
			return -1;
		memcpy(dir, path, len);
		dir[len] = '\0';
		if (add_dir(a, dir) < 0)
			return -1;
	}
	return 0;
}

static int add_host_file(struct archive *a, const char *guest_path,
			 const char *host_path)
{
	struct stat st;
	int fd = open(host_path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		fprintf(stderr, "thaw-mkinitramfs: %s: %s\n", host_path,
			fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			close(fd);
		return -1;
	}
	uint8_t *data = malloc(st.st_size ? st.st_size : 1);
	size_t got = 0;

	while (data && got < (size_t)st.st_size) {
		ssize_t n = read(fd, data + got, st.st_size - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += n;
	}
	close(fd);
	if (!data || got != (size_t)st.st_size) {
		fprintf(stderr, "thaw-mkinitramfs: %s: short read\n",
			host_path);
		free(data);
		return -1;
	}
	int ret = add_parents(a, guest_path);
	if (ret == 0)
		ret = add_entry(a, guest_path, S_IFREG | (st.st_mode & 0777), 0,
				0, data, got);
	free(data);
	return ret;
}

/*
 * A symlink to /bin/busybox for every applet it has, where its own
 * `--install` would put them, so commands resolve through PATH without
 * an init script installing them first (the agent is PID 1 directly).
 */
static int add_applet_links(struct archive *a, const char *busybox)
{
	char cmd[4200], line[256];
	int ret = 0, links = 0;

	if (snprintf(cmd, sizeof(cmd), "'%s' --list-full", busybox) >=
		    (int)sizeof(cmd) ||
	    strchr(busybox, '\'')) {
		fprintf(stderr, "thaw-mkinitramfs: unusable busybox path %s\n",
			busybox);
		return -1;
	}
	FILE *list = popen(cmd, "r");
	if (!list) {
		fprintf(stderr, "thaw-mkinitramfs: cannot run %s: %s\n",
			busybox, strerror(errno));
		return -1;
	}
	while (!ret && fgets(line, sizeof(line), list)) {
		line[strcspn(line, "\n")] = '\0';
		if (!line[0] || !strcmp(line, "bin/busybox"))
			continue;
		ret = add_parents(a, line);
		if (!ret)
			ret = add_entry(a, line, S_IFLNK | 0777, 0, 0,
					"/bin/busybox", strlen("/bin/busybox"));
		links++;
	}
	if (pclose(list) != 0 || links == 0) {
		fprintf(stderr,
			"thaw-mkinitramfs: %s --list-full failed; is it "
			"busybox?\n",
			busybox);
		return -1;
	}
	return ret;
}

static int write_atomically(const char *path, const struct buffer *b)
{
	char tmp[4200];
	int fd;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >=
	    (int)sizeof(tmp)) {
		fprintf(stderr, "thaw-mkinitramfs: path too long: %s\n", path);
		return -1;
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		fprintf(stderr, "thaw-mkinitramfs: %s: %s\n", tmp,
			strerror(errno));
		return -1;
	}
	size_t done = 0;
	while (done < b->len) {
		ssize_t n = write(fd, b->data + done, b->len - done);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		done += n;
	}
	if (done != b->len || fsync(fd) < 0 || close(fd) < 0 ||
	    rename(tmp, path) < 0) {
		fprintf(stderr, "thaw-mkinitramfs: cannot write %s: %s\n", path,
			strerror(errno));
		unlink(tmp);
		return -1;
	}
	return 0;
}

/* mkdir -p for the cache directory. */
static int make_dirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		int ret = mkdir(path, 0755);
		*p = '/';
		if (ret < 0 && errno != EEXIST)
			return -1;
	}
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

static const char usage[] =
	"usage: thaw-mkinitramfs --init PATH [--file GUEST=HOST]...\n"
	"                        [--busybox PATH] [--cache-dir DIR]\n"
	"Packs an uncompressed newc initramfs, stores it in the cache as\n"
	"initramfs/<xxh3-128>.cpio and prints that path.\n";

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "init", required_argument, NULL, 'i' },
		{ "file", required_argument, NULL, 'f' },
		{ "busybox", required_argument, NULL, 'b' },
		{ "cache-dir", required_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *init = NULL, *busybox = "/bin/busybox", *cache = NULL;
	char *files[MAX_FILES];
	int nr_files = 0, opt;
	char cache_buf[4096];

	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":", options, NULL)) != -1) {
		switch (opt) {
		case 'i':
			init = optarg;
			break;
		case 'f':
			if (nr_files == MAX_FILES || !strchr(optarg, '=') ||
			    optarg[0] == '/' || optarg[0] == '=') {
				fprintf(stderr,
					"thaw-mkinitramfs: --file '%s': want "
					"GUEST=HOST with a relative guest path "
					"(at most %d files)\n",
					optarg, MAX_FILES);
				return 2;
			}
			files[nr_files++] = optarg;
			break;
		case 'b':
			busybox = optarg;
			break;
		case 'c':
			cache = optarg;
			break;
		case 'h':
			fputs(usage, stdout);
			return 0;
		default:
			fprintf(stderr, "thaw-mkinitramfs: bad option '%s'\n%s",
				argv[optind - 1], usage);
			return 2;
		}
	}
	if (!init || optind < argc) {
		fprintf(stderr, "thaw-mkinitramfs: --init is required\n%s",
			usage);
		return 2;
	}
	if (!cache) {
		const char *env = getenv("THAW_CACHE_DIR");
		const char *xdg = getenv("XDG_CACHE_HOME");
		const char *home = getenv("HOME");

		int n;

		if (env)
			n = snprintf(cache_buf, sizeof(cache_buf), "%s", env);
		else if (xdg)
			n = snprintf(cache_buf, sizeof(cache_buf), "%s/thaw",
				     xdg);
		else
			n = snprintf(cache_buf, sizeof(cache_buf),
				     "%s/.cache/thaw", home ? home : "/tmp");
		if (n >= (int)sizeof(cache_buf)) {
			fprintf(stderr, "thaw-mkinitramfs: cache directory "
					"path too long\n");
			return 2;
		}
		cache = cache_buf;
	}

	struct archive a = { .next_ino = 1 };
	int ret = 0;
	for (size_t i = 0; i < sizeof(skeleton) / sizeof(*skeleton); i++)
		ret = ret ? ret : add_dir(&a, skeleton[i]);
	if (!ret)
		ret = add_entry(&a, "dev/console", S_IFCHR | 0600, 5, 1, NULL,
				0);
	if (!ret)
		ret = add_entry(&a, "etc/resolv.conf", S_IFLNK | 0777, 0, 0,
				"/proc/net/pnp", strlen("/proc/net/pnp"));
	if (!ret)
		ret = add_users(&a);
	if (!ret)
		ret = add_host_file(&a, "bin/busybox", busybox);
	if (!ret)
		ret = add_applet_links(&a, busybox);
	if (!ret)
		ret = add_host_file(&a, "init", init);
	for (int i = 0; !ret && i < nr_files; i++) {
		char *eq = strchr(files[i], '=');

		*eq = '\0';
		ret = add_host_file(&a, files[i], eq + 1);
	}
	if (!ret)
		ret = add_entry(&a, "TRAILER!!!", 0, 0, 0, NULL, 0);
	if (ret) {
		free(a.buf.data);
		return 1;
	}

	XXH128_hash_t h = XXH3_128bits(a.buf.data, a.buf.len);
	char dir[4200], path[4300];
	if (snprintf(dir, sizeof(dir), "%s/initramfs", cache) >=
		    (int)sizeof(dir) ||
	    snprintf(path, sizeof(path), "%s/%016llx%016llx.cpio", dir,
		     (unsigned long long)h.high64,
		     (unsigned long long)h.low64) >= (int)sizeof(path)) {
		fprintf(stderr, "thaw-mkinitramfs: cache path too long: %s\n",
			cache);
		ret = 1;
	} else if (make_dirs(dir) < 0) {
		fprintf(stderr, "thaw-mkinitramfs: cannot create %s: %s\n", dir,
			strerror(errno));
		ret = 1;
	} else if (access(path, F_OK) != 0) {
		ret = write_atomically(path, &a.buf) < 0;
	}
	if (!ret)
		printf("%s\n", path);
	free(a.buf.data);
	for (int i = 0; i < a.nr_dirs; i++)
		free(a.dirs[i]);
	return ret;
}
