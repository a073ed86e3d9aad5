// SPDX-License-Identifier: Apache-2.0
/*
 * init.c - what thaw-agent does because it is the guest's PID 1, CLONE
 * (which changes the whole guest: entropy, clock, hostname, the network's
 * neighbours), and the log.  The kernel hands init an
 * empty system: no /proc, /sys, /dev/pts or /tmp, no PATH and HOME=/.
 * Setup failures are logged, not fatal: a guest with, say, no devpts can
 * still run most commands, and an init that gave up would panic the kernel
 * instead of telling the host why.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <linux/neighbour.h>
#include <linux/netlink.h>
#include <linux/random.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <sys/socket.h>

#include "guest/agent/agent.h"
#include "common/guest_net.h"

static int log_fd = STDERR_FILENO;

int commands_cgroup_fd = -1;

void log_open(bool pid1)
{
	int fd;

	if (!pid1)
		return;
	/* The console may be slow or absent; kmsg always reaches dmesg. */
	fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
	if (fd >= 0)
		log_fd = fd;
}

static void vlog(const char *prefix, const char *fmt, va_list ap)
{
	char line[512];
	int n = snprintf(line, sizeof(line), "%s", prefix);

	n += vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line: kmsg takes each write as one record. */
	if (write(log_fd, line, (size_t)n) < 0 && log_fd != STDERR_FILENO)
		(void)!write(STDERR_FILENO, line, (size_t)n);
}

void log_line(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("", fmt, ap);
	va_end(ap);
}

void agent_log(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vlog("thaw-agent: ", fmt, ap);
	va_end(ap);
}

static const struct {
	const char *source, *target, *type;
	unsigned long flags;
	const char *data;
} mounts[] = {
	{ "proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL },
	{ "sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL },
	{ "devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755" },
	{ "devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	  "mode=0620,ptmxmode=0666" },
	{ "tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777" },
};

/* Writes @value to the cgroup file @path; false (logged) on failure. */
static bool cgroup_write(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	bool ok = fd >= 0 && write(fd, value, strlen(value)) >= 0;

	if (!ok)
		agent_log("%s = %s: %s", path, value, strerror(errno));
	if (fd >= 0)
		close(fd);
	return ok;
}

/* The guest's memory, from /proc/meminfo's MemTotal; 0 when unknown. */
static unsigned long long mem_total_bytes(void)
{
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kib = 0;
	char line[128];

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "MemTotal: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return kib * 1024;
}

/*
 * Every command runs in one cgroup, COMMANDS_CGROUP, that holds at most
 * COMMANDS_PIDS_MAX tasks and all of the guest's memory but a reserve for
 * the kernel and us.  A fork or memory bomb then exhausts that cgroup, not
 * the guest: the kernel's OOM killer and fork() fail inside it while the
 * agent, outside, keeps answering, can still kill the command at its
 * timeout, and the guest stays usable.
 */
static void setup_commands_cgroup(void)
{
	unsigned long long total = mem_total_bytes();
	unsigned long long reserve = total / 8 > COMMANDS_MEM_RESERVE_MIN
					     ? total / 8
					     : COMMANDS_MEM_RESERVE_MIN;
	char value[32];

	if (mount("cgroup2", "/sys/fs/cgroup", "cgroup2",
		  MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		agent_log("mount cgroup2 on /sys/fs/cgroup: %s",
			  strerror(errno));
		return;
	}
	if (!cgroup_write("/sys/fs/cgroup/cgroup.subtree_control",
			  "+pids +memory") ||
	    (mkdir(COMMANDS_CGROUP, 0755) < 0 && errno != EEXIST))
		return;
	snprintf(value, sizeof(value), "%d", COMMANDS_PIDS_MAX);
	if (!cgroup_write(COMMANDS_CGROUP "/pids.max", value))
		return;
	if (total > reserve) {
		snprintf(value, sizeof(value), "%llu", total - reserve);
		if (!cgroup_write(COMMANDS_CGROUP "/memory.max", value))
			return;
	}
	/* Kept open: a forked command writes "0" to it to move itself in. */
	commands_cgroup_fd =
		open(COMMANDS_CGROUP "/cgroup.procs", O_WRONLY | O_CLOEXEC);
	if (commands_cgroup_fd < 0)
		agent_log("%s/cgroup.procs: %s", COMMANDS_CGROUP,
			  strerror(errno));
}

void pid1_setup(void)
{
	for (size_t i = 0; i < sizeof(mounts) / sizeof(mounts[0]); i++) {
		if (mkdir(mounts[i].target, 0755) < 0 && errno != EEXIST)
			agent_log("mkdir %s: %s", mounts[i].target,
				  strerror(errno));
		/* EBUSY: CONFIG_DEVTMPFS_MOUNT already mounted /dev. */
		if (mount(mounts[i].source, mounts[i].target, mounts[i].type,
			  mounts[i].flags, mounts[i].data) < 0 &&
		    errno != EBUSY)
			agent_log("mount %s on %s: %s", mounts[i].type,
				  mounts[i].target, strerror(errno));
	}
	setup_commands_cgroup();
	/* Without devtmpfs /dev is the initramfs's; CLONE needs urandom. */
	if (mknod("/dev/urandom", S_IFCHR | 0666, makedev(1, 9)) < 0 &&
	    errno != EEXIST)
		agent_log("mknod /dev/urandom: %s", strerror(errno));
	if (sethostname("thaw", 4) < 0)
		agent_log("sethostname thaw: %s", strerror(errno));
	setenv("PATH",
	       "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
	       "/sbin:/bin",
	       0);
	setenv("HOME", "/root", 1);
	umask(022);
	if (chdir("/") < 0)
		agent_log("chdir /: %s", strerror(errno));
}

void read_boot_id(char *out, size_t len)
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "re");

	snprintf(out, len, "unknown");
	if (!f) {
		agent_log("boot id: /proc/sys/kernel/random/boot_id: %s",
			  strerror(errno));
		return;
	}
	if (fgets(out, (int)len, f))
		out[strcspn(out, "\n")] = '\0';
	fclose(f);
}

/*
 * Crediting the entropy lets the forced reseed draw on it at once, so the
 * clones' CRNG outputs part ways from their next read, not only at the
 * kernel's next scheduled reseed.  Returns 0 or a negative errno with the
 * failed step in @what.
 */
static int reseed_rng(const struct thaw_field *entropy, const char **what)
{
	struct rand_pool_info *pool = malloc(sizeof(*pool) + entropy->len);
	int fd, ret = 0;

	*what = "RNDADDENTROPY";
	if (!pool)
		return -ENOMEM;
	pool->entropy_count = (int)entropy->len * 8;
	pool->buf_size = (int)entropy->len;
	memcpy(pool->buf, entropy->data, entropy->len);
	fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC);
	if (fd < 0) {
		*what = "open /dev/urandom";
		ret = -errno;
	} else if (ioctl(fd, RNDADDENTROPY, pool) < 0) {
		ret = -errno;
	} else if (ioctl(fd, RNDRESEEDCRNG) < 0) {
		*what = "RNDRESEEDCRNG";
		ret = -errno;
	}
	if (fd >= 0)
		close(fd);
	free(pool);
	return ret;
}

/*
 * A clone's eth0 (thaw-vmm --net-tap) is on another host's TAP than the
 * template's: forget what the snapshot's neighbour table knew of the
 * gateway, the only neighbour a /30 has, so the first packet asks anew
 * instead of trusting an entry from before.  The TAP's MAC is the same in
 * every sandbox (guest_net.h), so this costs at most one ARP exchange; a
 * guest without eth0, or with no entry, has nothing to forget.  One
 * RTM_DELNEIGH and its acknowledgement, both inside the guest.
 */
static void forget_gateway(void)
{
	struct {
		struct nlmsghdr nh;
		struct ndmsg ndm;
		struct rtattr rta;
		uint32_t dst;
	} req = {
		.nh = { .nlmsg_len = sizeof(req),
			.nlmsg_type = RTM_DELNEIGH,
			.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK },
		.ndm = { .ndm_family = AF_INET },
		.rta = { .rta_len = RTA_LENGTH(sizeof(uint32_t)),
			 .rta_type = NDA_DST },
		.dst = htonl(GUEST_NET_GATEWAY_ADDR),
	};
	struct {
		struct nlmsghdr nh;
		struct nlmsgerr err;
	} ack;
	unsigned int ifindex = if_nametoindex("eth0");
	int fd, err = 0;

	if (!ifindex)
		return;
	req.ndm.ndm_ifindex = (int)ifindex;
	fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0 || send(fd, &req, sizeof(req), 0) < 0 ||
	    recv(fd, &ack, sizeof(ack), 0) < (ssize_t)sizeof(ack))
		err = errno;
	else if (ack.nh.nlmsg_type == NLMSG_ERROR)
		err = -ack.err.error;
	if (fd >= 0)
		close(fd);
	if (err && err != ENOENT)
		agent_log("CLONE: forgetting eth0's gateway neighbour: %s",
			  strerror(err));
}

void clone_apply(struct conn *c, uint32_t req, const struct thaw_msg *m)
{
	const struct thaw_field *host = thaw_get(m, THAW_T_HOSTNAME);
	uint64_t ns = thaw_get_u64(m, THAW_T_REALTIME_NS, 0);
	struct timespec now = { .tv_sec = (time_t)(ns / 1000000000u),
				.tv_nsec = (long)(ns % 1000000000u) };
	const char *what;
	int ret;

	if (!agent.pid1) {
		conn_error(c, req, EPERM,
			   "thaw-agent is not init: CLONE applies only in a "
			   "guest");
		return;
	}
	ret = reseed_rng(thaw_get(m, THAW_T_ENTROPY), &what);
	if (!ret && clock_settime(CLOCK_REALTIME, &now) < 0) {
		what = "clock_settime";
		ret = -errno;
	}
	if (!ret && sethostname((const char *)host->data, host->len) < 0) {
		what = "sethostname";
		ret = -errno;
	}
	if (ret) {
		conn_error(c, req, -ret, "CLONE: %s: %s", what, strerror(-ret));
		return;
	}
	forget_gateway();
	/* The schema bounds SANDBOX_ID to fit. */
	thaw_get_str(m, THAW_T_SANDBOX_ID, agent.sandbox_id,
		     sizeof(agent.sandbox_id));
	agent_log("cloned: sandbox %s, hostname %.*s", agent.sandbox_id,
		  (int)host->len, (const char *)host->data);
	conn_ok(c, req);
}
