// SPDX-License-Identifier: Apache-2.0
/*
 * test_control.c - thaw-vmm's control socket, served against a VM that is
 * not running guest code: the line protocol, stop, bad input, clean-up,
 * and a restored clone's status, and its ready record as its supervisor
 * reads it.
 */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "vmm/builder.h"
#include "vmm/control.h"
#include "vmm/vm.h"
#include "vmm/vmm_report.h"
#include "pool/host/vmm_process.h"

static struct vm vm;
static struct control control;
static char path[64];

static void setup(void)
{
	sigset_t stop;

	/* vm_stop() signals the main thread; keep that signal pending. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGUSR2);
	pthread_sigmask(SIG_BLOCK, &stop, NULL);
	memset(&vm, 0, sizeof(vm));
	vm.nr_vcpus = 2;
	vm.mem.size = 256 * MIB;
	vm.running_ns = monotonic_ns();
	vm.main_thread = pthread_self();
	vm.main_thread_known = true;
	pthread_mutex_init(&vm.stop_lock, NULL);
	pthread_mutex_init(&vm.pause_lock, NULL);
	pthread_cond_init(&vm.pause_cond, NULL);
	snprintf(path, sizeof(path), "/tmp/thaw-control-test-%d.sock",
		 (int)getpid());
	cr_assert_eq(control_init(&control, &vm, path, -1), 0);
	cr_assert_eq(control_start(&control), 0);
}

static void teardown(void)
{
	control_stop(&control);
	cr_expect_neq(access(path, F_OK), 0, "socket file left behind");
}

static int connect_control(void)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);
	struct timeval limit = { 10, 0 };

	strcpy(addr.sun_path, path);
	cr_assert_eq(connect(fd, (struct sockaddr *)&addr, sizeof(addr)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
	return fd;
}

/* Sends @request and returns the one answer line (without '\n'). */
static const char *ask(int fd, const char *request)
{
	static char line[512];
	size_t len = 0;

	cr_assert_eq(write(fd, request, strlen(request)),
		     (ssize_t)strlen(request));
	while (len < sizeof(line) - 1) {
		ssize_t n = read(fd, line + len, 1);

		if (n <= 0)
			break;
		if (line[len] == '\n')
			break;
		len++;
	}
	line[len] = '\0';
	return line;
}

TestSuite(control, .init = setup, .fini = teardown);

Test(control, ping_and_status)
{
	int fd = connect_control();

	cr_expect_str_eq(ask(fd, "ping\n"), "ok pong");
	const char *status = ask(fd, "status\r\n");
	cr_expect_not_null(strstr(status, "ok running vcpus=2 mem_mib=256 "),
			   "%s", status);
	close(fd);
}

Test(control, unknown_command_is_an_error_and_the_client_goes_on)
{
	int fd = connect_control();

	cr_expect_str_eq(
		ask(fd, "reboot now\n"),
		"error unknown command 'reboot now' (ping, status, pause, resume, snapshot DIR, checkpoint DIR, working-set FILE, stop)");
	cr_expect_str_eq(ask(fd, "ping\n"), "ok pong");
	close(fd);
}

Test(control, stop_stops_the_vm_once)
{
	int fd = connect_control();

	cr_expect_str_eq(ask(fd, "stop\n"), "ok stopping");
	cr_expect(atomic_load(&vm.stopping));
	cr_expect_eq(vm.status, VM_GUEST_STOPPED);
	cr_expect_str_eq(vm.reason, "stopped through the control socket");
	cr_expect_eq(strncmp(ask(fd, "status\n"), "ok stopping ", 12), 0);
	close(fd);
}

/* The fixture's VM never started its vCPUs: nothing to pause or save. */
Test(control, pause_and_snapshot_need_a_running_vm)
{
	int fd = connect_control();

	cr_expect_str_eq(ask(fd, "pause\n"),
			 "error cannot pause (see the VMM log)");
	cr_expect_str_eq(ask(fd, "snapshot /tmp\n"),
			 "error snapshot to /tmp failed (see the VMM log)");
	cr_expect_str_eq(
		ask(fd, "snapshot\n"),
		"error unknown command 'snapshot' (ping, status, pause, resume, snapshot DIR, checkpoint DIR, working-set FILE, stop)");
	cr_expect(strstr(ask(fd, "status\n"), "ok running "));
	close(fd);
}

/* Sends @request with @n descriptors (copies of stdin) attached. */
static void send_with_fds(int fd, const char *request, int n)
{
	union {
		char space[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} u;
	struct iovec iov = { (void *)request, strlen(request) };
	struct msghdr msg = { .msg_iov = &iov, .msg_iovlen = 1 };
	int fds[8];

	for (int i = 0; i < n; i++)
		fds[i] = STDIN_FILENO;
	if (n) {
		msg.msg_control = u.space;
		msg.msg_controllen = CMSG_SPACE(n * sizeof(int));
		struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(n * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, n * sizeof(int));
	}
	cr_assert_eq(sendmsg(fd, &msg, 0), (ssize_t)strlen(request));
}

/* Open descriptors of this process: the VMM's share of them. */
static int open_fds(void)
{
	int n = 0;

	for (int fd = 0; fd < 1024; fd++)
		n += fcntl(fd, F_GETFD) >= 0;
	return n;
}

/*
 * A checkpoint takes exactly its four files with its line; any other
 * count, or descriptors sent with another command, are refused and
 * closed, and a VM that cannot pause answers an error.
 */
Test(control, checkpoint_takes_four_descriptors_and_leaks_none)
{
	int fd = connect_control();

	/* Answered: the control thread has accepted (its fd counts). */
	cr_assert_str_eq(ask(fd, "ping\n"), "ok pong");
	int before = open_fds();

	send_with_fds(fd, "checkpoint /tmp/x\n", 3);
	cr_expect_str_eq(
		ask(fd, ""),
		"error checkpoint takes 4 descriptors with its line (state.bin, memory.diff, memory.img, pages.xxh3), got 3");
	send_with_fds(fd, "checkpoint /tmp/x\n", 5);
	cr_expect_eq(strncmp(ask(fd, ""), "error checkpoint takes 4", 24), 0);
	send_with_fds(fd, "ping\n", 2);
	cr_expect_str_eq(ask(fd, ""), "ok pong");
	send_with_fds(fd, "checkpoint /tmp/x\n", 4);
	cr_expect_str_eq(ask(fd, ""),
			 "error checkpoint to /tmp/x failed (see the VMM log)");
	cr_expect_eq(open_fds(), before, "descriptors were kept");
	close(fd);
}

Test(control, overlong_line_closes_only_that_client)
{
	char big[CONTROL_LINE_MAX + 10];
	int fd = connect_control(), other = connect_control();

	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cr_expect_not_null(strstr(ask(fd, big), "error line longer than"));
	char c;
	cr_expect_leq(read(fd, &c, 1), 0, "client not closed");
	cr_expect_str_eq(ask(other, "ping\n"), "ok pong");
	close(fd);
	close(other);
}

/*
 * A restored clone's status says where its restore's time went, for
 * people; its ready record (vmm/vmm_report.h) says the same numbers in the
 * words its supervisor reads (pool/host/vmm_process.h): the two ends of
 * the report channel, checked against each other.
 */
Test(control, a_restored_vms_status_and_ready_record_split_its_restore)
{
	struct vmm_restore_phases p;
	struct vmm_report report;
	char err[512], bytes[VMM_REPORT_LINE_MAX];
	int fd = connect_control(), pipefd[2];

	vm.created_ns = 5000 * NS_PER_MS;
	vm.prefetch_ns = 1200 * 1000;
	vm.prefetched_pages = 5376;
	vm.restore_start_ns = vm.created_ns + 3500 * 1000;
	vm.restored_ns = vm.restore_start_ns + 400 * 1000;
	const char *status = ask(fd, "status\n");
	cr_expect_not_null(strstr(status, " setup_us=3500 restore_us=400 "
					  "prefetched_pages=5376 "
					  "prefetch_us=1200 "
					  "started_at_us=5000000"),
			   "%s", status);
	close(fd);

	cr_assert_eq(pipe(pipefd), 0);
	cr_assert_eq(builder_report_ready(&vm, pipefd[1]), 0);
	close(pipefd[1]);
	ssize_t n = read(pipefd[0], bytes, sizeof(bytes));
	close(pipefd[0]);
	cr_assert_gt(n, 0);
	vmm_report_init(&report);
	vmm_report_feed(&report, bytes, (size_t)n);
	vmm_report_end(&report);
	cr_expect_str_eq(report.problem, "");
	cr_expect_str_eq(report.ready,
			 "ready started_at_us=5000000 setup_us=3500 "
			 "restore_us=400 prefetched_pages=5376 "
			 "prefetch_us=1200");
	/* Forked 1 ms before its main(); the agent answered 40 ms after the
	 * state was loaded. */
	cr_assert_eq(vmm_restore_phases_parse(report.ready, 4999, 5003.9 + 40,
					      &p, err, sizeof(err)),
		     0, "%s", err);
	cr_expect_float_eq(p.process_start_ms, 1, 1e-6);
	cr_expect_float_eq(p.setup_ms, 3.5, 1e-6);
	cr_expect_float_eq(p.page_in_ms, 1.2, 1e-6);
	cr_expect_eq(p.prefetched_pages, 5376);
	cr_expect_float_eq(p.state_restore_ms, 0.4, 1e-6);
	cr_expect_float_eq(p.agent_ms, 40, 1e-6);
	cr_expect_float_eq(vmm_restore_host_ms(&p), 4.9, 1e-6);
}
