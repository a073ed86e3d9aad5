// SPDX-License-Identifier: Apache-2.0
/*
 * test_vmm_cli.c - thaw-vmm's answer to bad input: one line on stderr that
 * names the problem, the documented exit status, no hang.  thaw-vmm checks
 * every input before it opens /dev/kvm, so these run on any host.
 */
#include <criterion/criterion.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/integration/harness.h"

#define EXIT_ERROR 1
#define EXIT_USAGE 2
#define TIMEOUT_S 30

static char dir[] = "/tmp/thaw-cli-test-XXXXXX";

static void make_dir(void)
{
	cr_assert_not_null(mkdtemp(dir));
}

static void remove_dir(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	cr_assert_eq(system(cmd), 0);
}

/* Paths live in a small static ring: a test makes at most a few files. */
static char *file_in_dir(const char *name, const void *data, size_t len,
			 off_t size)
{
	static char paths[4][256];
	static int next;
	char *path = paths[next++ % 4];

	snprintf(path, sizeof(paths[0]), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, data, len), (ssize_t)len);
	if (size > (off_t)len)
		cr_assert_eq(ftruncate(fd, size), 0);
	close(fd);
	return path;
}

/* The smallest ELF thaw-vmm accepts: one loadable segment, entry inside. */
static char *fake_elf_kernel(uint64_t memsz)
{
	static char path[256];
	static const uint8_t hlt = 0xf4;

	snprintf(path, sizeof(path), "%s/vmlinux", dir);
	cr_assert_eq(write_tiny_kernel(path, &hlt, 1, memsz), 0);
	return path;
}

static char *small_initrd(void)
{
	return file_in_dir("initrd", "070701", 6, 4096);
}

/* Runs thaw-vmm with @args and checks the status and the one error line. */
static void expect_error(int status, const char *needle, char **args)
{
	char *argv[32] = { THAW_VMM };
	struct run_result r;
	int n = 1;

	while (*args)
		argv[n++] = *args++;
	argv[n] = NULL;
	cr_assert_eq(run_command(argv, TIMEOUT_S, &r), 0);
	cr_expect_not(r.timed_out, "thaw-vmm hung");
	cr_expect_eq(r.status, status, "exit status %d, want %d; stderr: %s",
		     r.status, status, r.err);
	cr_expect_eq(count_lines(r.err), 1, "want one error line, got: %s",
		     r.err);
	cr_expect_not_null(strstr(r.err, needle), "stderr lacks '%s': %s",
			   needle, r.err);
	cr_expect_eq(r.out_len, 0, "stdout not empty: %s", r.out);
	run_result_free(&r);
}

#define ARGS(...) ((char *[]){ __VA_ARGS__, NULL })

TestSuite(cli, .init = make_dir, .fini = remove_dir);

Test(cli, unknown_flag)
{
	expect_error(EXIT_USAGE, "unknown option '--frobnicate'",
		     ARGS("--frobnicate"));
}

Test(cli, flag_without_value)
{
	expect_error(EXIT_USAGE, "option '--mem' needs a value",
		     ARGS("--initrd", "x", "--mem"));
}

Test(cli, initrd_required)
{
	expect_error(EXIT_USAGE, "--initrd is required",
		     ARGS("--kernel", "/nonexistent"));
}

Test(cli, memory_below_minimum)
{
	expect_error(EXIT_USAGE, "--mem 16 is outside 64..",
		     ARGS("--mem", "16", "--initrd", "x"));
}

Test(cli, memory_not_a_number)
{
	expect_error(EXIT_USAGE, "--mem '1G' is not a number",
		     ARGS("--mem", "1G", "--initrd", "x"));
}

Test(cli, too_many_vcpus)
{
	expect_error(EXIT_USAGE, "--vcpus 9 is outside 1..8",
		     ARGS("--vcpus", "9", "--initrd", "x"));
}

Test(cli, bad_pvm_mode)
{
	expect_error(EXIT_USAGE, "--pvm takes auto, on or off, not 'maybe'",
		     ARGS("--pvm", "maybe", "--initrd", "x"));
}

Test(cli, bad_log_level)
{
	expect_error(EXIT_USAGE,
		     "log level 'loud': expected error, warning, info or debug",
		     ARGS("--log-level", "loud", "--initrd", "x"));
}

Test(cli, bad_log_format)
{
	expect_error(EXIT_USAGE, "log format 'xml': expected text or json",
		     ARGS("--log-format", "xml", "--initrd", "x"));
}

Test(cli, ready_fd_not_a_number)
{
	expect_error(EXIT_USAGE, "--ready-fd 'three' is not a number",
		     ARGS("--ready-fd", "three", "--initrd", "x"));
}

/* A supervisor's pipe that is not there: refused before any VM exists,
 * not a write into some other file later. */
Test(cli, ready_fd_not_open)
{
	expect_error(EXIT_USAGE,
		     "--ready-fd 999 is not an open file descriptor",
		     ARGS("--ready-fd", "999", "--initrd", "x"));
}

/* Errors too are lines of the format asked, naming the sandbox. */
Test(cli, json_lines_name_the_sandbox)
{
	expect_error(
		EXIT_USAGE,
		"\"sandbox\":\"sb-1\",\"msg\":\"unexpected argument 'extra'",
		ARGS("--log-format", "json", "--sandbox-id", "sb-1", "--initrd",
		     "x", "extra"));
}

Test(cli, stray_argument)
{
	expect_error(EXIT_USAGE, "unexpected argument 'extra'",
		     ARGS("--initrd", "x", "extra"));
}

Test(cli, missing_kernel)
{
	expect_error(EXIT_ERROR,
		     "kernel /nonexistent/vmlinux: No such file or directory",
		     ARGS("--kernel", "/nonexistent/vmlinux", "--initrd",
			  small_initrd()));
}

Test(cli, missing_initrd)
{
	expect_error(EXIT_ERROR,
		     "initrd /nonexistent/initrd: No such file or directory",
		     ARGS("--kernel", fake_elf_kernel(4096), "--initrd",
			  "/nonexistent/initrd"));
}

Test(cli, corrupt_kernel)
{
	char garbage[65536];

	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (char)(i * 2654435761u >> 24);
	expect_error(EXIT_ERROR, "neither an ELF vmlinux nor a bzImage",
		     ARGS("--kernel",
			  file_in_dir("garbage", garbage, sizeof(garbage), 0),
			  "--initrd", small_initrd()));
}

Test(cli, truncated_elf_kernel)
{
	Elf64_Ehdr eh = { .e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3,
				       ELFCLASS64, ELFDATA2LSB, EV_CURRENT },
			  .e_type = ET_EXEC,
			  .e_machine = EM_X86_64,
			  .e_phoff = 4096,
			  .e_phentsize = sizeof(Elf64_Phdr),
			  .e_phnum = 3 };

	expect_error(EXIT_ERROR, "program header table",
		     ARGS("--kernel",
			  file_in_dir("truncated", &eh, sizeof(eh), 0),
			  "--initrd", small_initrd()));
}

Test(cli, user_program_is_not_a_kernel)
{
	expect_error(EXIT_ERROR, "not a 64-bit x86-64 kernel image",
		     ARGS("--kernel", "/bin/sh", "--initrd", small_initrd()));
}

Test(cli, kernel_larger_than_memory)
{
	expect_error(EXIT_ERROR, "does not fit in 64 MiB of guest memory",
		     ARGS("--kernel", fake_elf_kernel(1ULL << 30), "--mem",
			  "64", "--initrd", small_initrd()));
}

Test(cli, truncated_bzimage)
{
	uint8_t image[0x400] = { 0 };

	image[0x1f1] = 60; /* setup_sects: far more than the file holds */
	image[0x201] = 0x6a;
	memcpy(image + 0x202, "HdrS", 4);
	image[0x206] = 0x0f; /* protocol 2.15 */
	image[0x207] = 0x02;
	image[0x236] = 1; /* XLF_KERNEL_64 */
	expect_error(EXIT_ERROR, "truncated bzImage",
		     ARGS("--kernel",
			  file_in_dir("bzImage", image, sizeof(image), 0),
			  "--initrd", small_initrd()));
}

Test(cli, initrd_too_large_for_memory)
{
	char *initrd = file_in_dir("big-initrd", "070701", 6, 100 << 20);

	expect_error(EXIT_ERROR, "does not fit in guest memory",
		     ARGS("--kernel", fake_elf_kernel(4096), "--mem", "64",
			  "--initrd", initrd));
}

Test(cli, command_line_too_long)
{
	static char extra[3000];

	memset(extra, 'x', sizeof(extra) - 1);
	expect_error(EXIT_ERROR, "kernel command line is",
		     ARGS("--kernel", fake_elf_kernel(4096), "--initrd",
			  small_initrd(), "--cmdline", extra));
}

Test(cli, jail_needs_uid_and_gid)
{
	expect_error(EXIT_USAGE, "--jail needs --uid and --gid",
		     ARGS("--jail", dir, "--uid", "1879048192", "--kernel", "k",
			  "--initrd", "i"));
}

Test(cli, uid_needs_jail)
{
	expect_error(EXIT_USAGE,
		     "--uid, --gid, --writable and --netns need --jail",
		     ARGS("--uid", "1879048192", "--gid", "1879048192",
			  "--initrd", "i"));
}

Test(cli, jail_as_root_is_refused)
{
	expect_error(EXIT_USAGE, "--uid 0 is outside 1..4294967294",
		     ARGS("--jail", dir, "--uid", "0", "--gid", "0", "--initrd",
			  "i"));
}

Test(cli, jail_needs_a_kernel_path)
{
	expect_error(EXIT_USAGE, "--jail needs --kernel",
		     ARGS("--jail", dir, "--uid", "1879048192", "--gid",
			  "1879048192", "--initrd", "i"));
}

/* The jail binds what the VM reads: a missing file is named as unjailed. */
Test(cli, jailed_missing_kernel)
{
	if (geteuid() != 0)
		cr_skip_test("a jail needs root");
	expect_error(EXIT_ERROR,
		     "kernel /nonexistent/vmlinux: No such file or directory",
		     ARGS("--jail", dir, "--uid", "1879048192", "--gid",
			  "1879048192", "--kernel", "/nonexistent/vmlinux",
			  "--initrd", small_initrd()));
}

Test(cli, restore_takes_no_boot_flags)
{
	expect_error(EXIT_USAGE,
		     "--restore takes the machine from the snapshot",
		     ARGS("--restore", dir, "--mem", "128"));
}

Test(cli, bad_page_in_mode)
{
	expect_error(EXIT_USAGE,
		     "--page-in takes prefetch or lazy, not 'eager'",
		     ARGS("--restore", dir, "--page-in", "eager"));
}

/* Snapshot files are checked before /dev/kvm is opened. */
Test(cli, restore_without_snapshot_names_the_state_file)
{
	expect_error(EXIT_ERROR, "state.bin", ARGS("--restore", dir));
}

Test(cli, restore_of_a_foreign_file)
{
	file_in_dir("state.bin", "not a snapshot", 14, 4096);
	expect_error(EXIT_ERROR, "state.bin", ARGS("--restore", dir));
}

/* A jail without --netns has a namespace of its own, with no TAP in it. */
Test(cli, net_tap_in_a_jail_needs_netns)
{
	expect_error(EXIT_USAGE, "--net-tap with --jail needs --netns",
		     ARGS("--jail", dir, "--uid", "1879048192", "--gid",
			  "1879048192", "--kernel", "k", "--initrd", "i",
			  "--net-tap", "tap0"));
}
