// SPDX-License-Identifier: Apache-2.0
/*
 * harness.c - see harness.h.
 */
#include "tests/integration/harness.h"

#include <criterion/criterion.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

extern char **environ;

static double now_s(void)
{
	return monotonic_ns() / 1e9;
}

static int append(char **buf, size_t *len, int fd)
{
	char chunk[65536];
	ssize_t n = read(fd, chunk, sizeof(chunk));

	if (n <= 0)
		return n < 0 && errno == EINTR ? 1 : 0;
	char *grown = realloc(*buf, *len + n + 1);
	if (!grown)
		return 0;
	memcpy(grown + *len, chunk, n);
	*len += n;
	grown[*len] = '\0';
	*buf = grown;
	return 1;
}

int run_command(char *const argv[], int timeout_s, struct run_result *r)
{
	int out[2], err[2], status;
	pid_t pid;
	posix_spawn_file_actions_t fa;
	posix_spawnattr_t attr;

	memset(r, 0, sizeof(*r));
	r->out = calloc(1, 1);
	r->err = calloc(1, 1);
	if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0)
		return -1;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
	posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
	posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null",
					 O_RDONLY, 0);
	/* Its own process group, so a time-out kills what it started too. */
	posix_spawnattr_init(&attr);
	posix_spawnattr_setpgroup(&attr, 0);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
	double start = now_s();
	int e = posix_spawn(&pid, argv[0], &fa, &attr, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	posix_spawnattr_destroy(&attr);
	close(out[1]);
	close(err[1]);
	if (e) {
		close(out[0]);
		close(err[0]);
		errno = e;
		return -1;
	}

	struct pollfd fds[2] = { { out[0], POLLIN, 0 }, { err[0], POLLIN, 0 } };
	int open_fds = 2;
	while (open_fds > 0) {
		int left_ms = (int)((start + timeout_s - now_s()) * 1000);

		if (left_ms <= 0) {
			r->timed_out = true;
			kill(-pid, SIGKILL);
			break;
		}
		if (poll(fds, 2, left_ms) < 0 && errno != EINTR)
			break;
		for (int i = 0; i < 2; i++) {
			if (fds[i].fd < 0 || !fds[i].revents)
				continue;
			if (!append(i ? &r->err : &r->out,
				    i ? &r->err_len : &r->out_len, fds[i].fd)) {
				close(fds[i].fd);
				fds[i].fd = -1;
				open_fds--;
			}
		}
	}
	for (int i = 0; i < 2; i++)
		if (fds[i].fd >= 0)
			close(fds[i].fd);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	r->seconds = now_s() - start;
	r->status = WIFEXITED(status) ? WEXITSTATUS(status)
				      : 128 + WTERMSIG(status);
	return 0;
}

void run_result_free(struct run_result *r)
{
	free(r->out);
	free(r->err);
	memset(r, 0, sizeof(*r));
}

int count_lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

#define TINY_KERNEL_ADDR 0x1000000
#define TINY_KERNEL_CODE 16

int write_tiny_kernel(const char *path, const void *code, size_t len,
		      uint64_t memsz)
{
	struct {
		Elf64_Ehdr eh;
		Elf64_Phdr ph;
		uint8_t code[TINY_KERNEL_CODE];
	} k = {
		.eh = { .e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3,
				     ELFCLASS64, ELFDATA2LSB, EV_CURRENT },
			.e_type = ET_EXEC,
			.e_machine = EM_X86_64,
			.e_version = EV_CURRENT,
			.e_entry = TINY_KERNEL_ADDR,
			.e_phoff = sizeof(Elf64_Ehdr),
			.e_ehsize = sizeof(Elf64_Ehdr),
			.e_phentsize = sizeof(Elf64_Phdr),
			.e_phnum = 1 },
		.ph = { .p_type = PT_LOAD,
			.p_offset = sizeof(Elf64_Ehdr) + sizeof(Elf64_Phdr),
			.p_vaddr = TINY_KERNEL_ADDR,
			.p_paddr = TINY_KERNEL_ADDR,
			.p_filesz = TINY_KERNEL_CODE,
			.p_memsz = memsz },
	};

	if (len > TINY_KERNEL_CODE) {
		errno = EINVAL;
		return -1;
	}
	memcpy(k.code, code, len);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, &k, sizeof(k));
	close(fd);
	return n == (ssize_t)sizeof(k) ? 0 : -1;
}

#define REFERENCE_BOOT_S 5.0 /* thaw's guest to agent ready, emulated host */

double guest_slowness(void)
{
	const char *boot = getenv("THAW_TEST_BOOT_S");
	double s = boot ? strtod(boot, NULL) / REFERENCE_BOOT_S : 1;

	return s > 1 ? s : 1;
}

int scaled_s(int base_s)
{
	return (int)(base_s * guest_slowness() + 0.5);
}

int control_command(const char *path, const char *command, char *answer,
		    size_t size)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	size_t len = 0;
	ssize_t n;

	answer[0] = '\0';
	if (fd < 0)
		return -1;
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    write(fd, command, strlen(command)) != (ssize_t)strlen(command)) {
		int saved = errno;

		close(fd);
		errno = saved;
		return -1;
	}
	while (len < size - 1 &&
	       (n = read(fd, answer + len, size - 1 - len)) > 0) {
		len += n;
		if (answer[len - 1] == '\n')
			break;
	}
	answer[len] = '\0';
	close(fd);
	return 0;
}

bool kvm_usable(void)
{
	int fd;

	if (getenv("THAW_FORCE_NESTED"))
		return false;
	fd = open("/dev/kvm", O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

bool kvm_is_pvm(void)
{
	return access("/sys/module/kvm_pvm", F_OK) == 0 && kvm_usable();
}

void scale_criterion_timeouts(struct criterion_test_set *set)
{
	double k = guest_slowness();

	for (struct criterion_ordered_set_node *ns = set->suites->first; ns;
	     ns = ns->next) {
		struct criterion_suite_set *suite = (void *)(ns + 1);

		if (suite->suite.data)
			suite->suite.data->timeout *= k;
		for (struct criterion_ordered_set_node *nt =
			     suite->tests ? suite->tests->first : NULL;
		     nt; nt = nt->next) {
			struct criterion_test *t = (void *)(nt + 1);

			t->data->timeout *= k;
		}
	}
}
