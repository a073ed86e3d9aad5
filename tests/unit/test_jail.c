// SPDX-License-Identifier: Apache-2.0
/*
 * test_jail.c - the jail's pure parts: the supervisor's id ranges, claims
 * (real OFD locks on the real lock file, on a range no thaw uses) and
 * taking back a jail's files; the VMM's mapping of host paths to its one
 * writable directory.  Entering a jail is tested on real VMMs
 * (test_daemon's jail suite, test_vmm_cli).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pool/host/jail_ids.h"
#include "vmm/jail.h"

/* Three ids no other test or thaw on this host takes. */
static const struct jail_ids three = { 1879114728u, 1879114730u };

Test(jail_ids, parses_a_range)
{
	struct jail_ids ids;
	char err[256] = "";

	cr_assert_eq(jail_ids_parse("10-20", &ids, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(ids.first, 10);
	cr_expect_eq(ids.last, 20);
	cr_assert_eq(jail_ids_parse(JAIL_IDS_DEFAULT, &ids, err, sizeof(err)),
		     0);
	cr_expect_eq(ids.last - ids.first, 65535);
}

Test(jail_ids, bad_ranges_are_named)
{
	static const char *const bad[] = {
		"",    "5",   "0-10", "10-5", "a-b",
		"10-", "-10", "1-2x", "1 -2", "1-4294967295"
	};
	struct jail_ids ids;
	char err[256];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char want[64];

		cr_expect_eq(jail_ids_parse(bad[i], &ids, err, sizeof(err)),
			     -EINVAL, "'%s' was taken", bad[i]);
		snprintf(want, sizeof(want), "jail ids '%s'", bad[i]);
		cr_expect_not_null(strstr(err, want), "%s", err);
	}
}

Test(jail_ids, the_environment_names_itself)
{
	struct jail_ids ids;
	char err[256] = "";

	setenv(JAIL_IDS_ENV, "7-3", 1);
	cr_expect_eq(jail_ids_from_env(&ids, err, sizeof(err)), -EINVAL);
	cr_expect_not_null(strstr(err, "$" JAIL_IDS_ENV), "%s", err);
	setenv(JAIL_IDS_ENV, "7-9", 1);
	cr_assert_eq(jail_ids_from_env(&ids, err, sizeof(err)), 0, "%s", err);
	cr_expect(ids.first == 7 && ids.last == 9);
	unsetenv(JAIL_IDS_ENV);
}

Test(jail_ids, each_id_once_until_released)
{
	struct jail_id held[3], extra;
	char err[256] = "";

	if (geteuid() != 0)
		cr_skip_test("the lock file is in /run/thaw: root's");
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(jail_id_claim(&three, &held[i], err, sizeof(err)),
			     0, "%s", err);
		cr_expect(held[i].id >= three.first &&
			  held[i].id <= three.last);
		for (int j = 0; j < i; j++)
			cr_expect_neq(held[i].id, held[j].id,
				      "id %u handed out twice", held[i].id);
	}
	cr_assert_eq(jail_id_claim(&three, &extra, err, sizeof(err)), -EAGAIN);
	cr_expect_not_null(strstr(err, "every jail id of 1879114728-1879114730 "
				       "is taken"),
			   "%s", err);
	uint32_t freed = held[1].id;
	jail_id_release(&held[1]);
	cr_assert_eq(jail_id_claim(&three, &extra, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_eq(extra.id, freed);
	jail_id_release(&extra);
	jail_id_release(&held[0]);
	jail_id_release(&held[2]);
}

/* Another process's claims count: the locks are the kernel's. */
Test(jail_ids, a_claim_holds_against_other_processes)
{
	struct jail_id mine, theirs;
	char err[256] = "";

	if (geteuid() != 0)
		cr_skip_test("the lock file is in /run/thaw: root's");
	struct jail_ids one = { three.first, three.first };
	cr_assert_eq(jail_id_claim(&one, &mine, err, sizeof(err)), 0, "%s",
		     err);
	pid_t child = fork();
	if (child == 0) {
		int ret = jail_id_claim(&one, &theirs, err, sizeof(err));
		_exit(ret == -EAGAIN ? 0 : 1);
	}
	int status;
	cr_assert_eq(waitpid(child, &status, 0), child);
	cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "another process got a held id");
	jail_id_release(&mine);
}

/* @name in @dir: its owner and mode, or -1 when it is not there. */
static long owner_of(const char *dir, const char *name, mode_t *mode)
{
	char path[128];
	struct stat st;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (lstat(path, &st) < 0)
		return -1;
	*mode = st.st_mode;
	return st.st_uid;
}

/* What a broken VMM may leave in its writable directory, made as root
 * and handed to its uid: reclaim keeps plain files only, ours and 0600. */
Test(jail_reclaim, keeps_plain_files_removes_the_rest)
{
	char dir[] = "/tmp/thaw-jail-test-XXXXXX", path[128], err[256] = "";
	const uid_t jail = 1879114729;
	mode_t mode;

	if (geteuid() != 0)
		cr_skip_test("chown needs root");
	cr_assert_not_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/memory.img", dir);
	int fd = open(path, O_WRONLY | O_CREAT, 0666);
	cr_assert_geq(fd, 0);
	cr_assert_eq(fchmod(fd, 04777), 0);
	cr_assert_eq(fchown(fd, jail, jail), 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/state.bin", dir);
	cr_assert_eq(symlink("/etc/hostname", path), 0);
	snprintf(path, sizeof(path), "%s/workingset.bin", dir);
	cr_assert_eq(mkfifo(path, 0666), 0);
	snprintf(path, sizeof(path), "%s/sub", dir);
	cr_assert_eq(mkdir(path, 0777), 0);
	/* A root file elsewhere on the same file system, linked in. */
	char victim[64];
	snprintf(victim, sizeof(victim), "%s.victim", dir);
	fd = open(victim, O_WRONLY | O_CREAT, 0600);
	cr_assert_geq(fd, 0);
	close(fd);
	snprintf(path, sizeof(path), "%s/pages.xxh3", dir);
	cr_assert_eq(link(victim, path), 0);
	cr_assert_eq(chown(dir, jail, jail), 0);
	cr_assert_eq(chmod(dir, 0777), 0);
	struct stat target;
	cr_assert_eq(stat(victim, &target), 0);

	cr_assert_eq(jail_reclaim(dir, err, sizeof(err)), 0, "%s", err);
	cr_expect_eq(owner_of(dir, ".", &mode), (long)getuid());
	cr_expect_eq(mode & 07777, 0700, "the directory is %o", mode);
	cr_expect_eq(owner_of(dir, "memory.img", &mode), (long)getuid());
	cr_expect_eq(mode & 07777, 0600, "memory.img is %o", mode);
	cr_expect_eq(owner_of(dir, "state.bin", &mode), -1, "a link is left");
	cr_expect_eq(owner_of(dir, "workingset.bin", &mode), -1,
		     "a FIFO is left");
	cr_expect_eq(owner_of(dir, "sub", &mode), -1, "a directory is left");
	cr_expect_eq(owner_of(dir, "pages.xxh3", &mode), -1,
		     "a hard link to another file is left");
	struct stat after;
	cr_assert_eq(stat(victim, &after), 0);
	cr_expect(after.st_uid == target.st_uid &&
			  after.st_mode == target.st_mode,
		  "reclaim changed what a link pointed at");
	unlink(victim);

	snprintf(path, sizeof(path), "%s/memory.img", dir);
	unlink(path);
	rmdir(dir);
	cr_expect_lt(jail_reclaim(dir, err, sizeof(err)), 0);
	cr_expect_not_null(strstr(err, dir), "%s", err);
}

static const char *inside(const char *writable, const char *path)
{
	static char out[512];
	char err[256];

	if (jail_inside_path(writable, path, out, sizeof(out), err,
			     sizeof(err)) < 0)
		snprintf(out, sizeof(out), "error: %s", err);
	return out;
}

Test(jail_path, only_the_writable_directory_is_reachable)
{
	cr_expect_str_eq(inside(NULL, "/any/path"), "/any/path");
	cr_expect_str_eq(inside("/s/new", "/s/new"), "/out");
	cr_expect_str_eq(inside("/s/new", "/s/new/workingset.bin"),
			 "/out/workingset.bin");
	cr_expect_str_eq(
		inside("/s/new", "/s/newer"),
		"error: /s/newer is outside the jail's writable directory /s/new");
	cr_expect_str_eq(
		inside("/s/new", "/s/new/../../etc"),
		"error: /s/new/../../etc is outside the jail's writable directory /s/new");
	cr_expect_str_eq(
		inside("/s/new", "/etc/passwd"),
		"error: /etc/passwd is outside the jail's writable directory /s/new");
}
