// SPDX-License-Identifier: Apache-2.0
/*
 * test_vcpu_stats.c - vcpu_stats.h: the reader on statistics files built
 * here byte by byte in KVM's layout (linux/kvm.h), well formed and broken
 * in each way the reader checks, then on a real vCPU of this host's KVM
 * (skipped without /dev/kvm; the vCPU never runs); and the watch's answers
 * look by look on a simulated clock.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vmm/vcpu_stats.h"

#define NAME_SIZE 48 /* what Linux 6.1 to 6.18 use */
#define DESC_SIZE (sizeof(struct kvm_stats_desc) + NAME_SIZE)
#define DESC_OFFSET 64
#define MS 1000000ULL
#define BASE (250 * MS)
#define CAP (8000 * MS)

struct fake_stat {
	const char *name;
	uint32_t type;
	uint64_t value;
};

/* Descriptors at DESC_OFFSET, the values right after, in the order given. */
static const struct fake_stat usual[] = {
	{ "halt_wakeup", KVM_STATS_TYPE_CUMULATIVE, 7 },
	{ VCPU_STAT_BLOCKING, KVM_STATS_TYPE_INSTANT, 1 },
	{ "exits", KVM_STATS_TYPE_CUMULATIVE, 1234 },
	{ VCPU_STAT_HALTS, KVM_STATS_TYPE_CUMULATIVE, 42 },
};

static char err[256];

static uint32_t data_offset(size_t nr)
{
	return DESC_OFFSET + nr * DESC_SIZE;
}

/*
 * A statistics file of @nr stats, cut to @len bytes (0: whole); @name_size
 * is what the header claims.
 */
static int stats_file(const struct fake_stat *stats, size_t nr,
		      uint32_t name_size, size_t len)
{
	size_t whole = data_offset(nr) + nr * sizeof(uint64_t);
	uint8_t *file = calloc(1, whole);
	struct kvm_stats_header h = {
		.name_size = name_size,
		.num_desc = nr,
		.id_offset = sizeof(h),
		.desc_offset = DESC_OFFSET,
		.data_offset = data_offset(nr),
	};

	cr_assert_not_null(file);
	memcpy(file, &h, sizeof(h));
	for (size_t i = 0; i < nr; i++) {
		struct kvm_stats_desc *d =
			(void *)(file + DESC_OFFSET + i * DESC_SIZE);

		d->flags = stats[i].type;
		d->size = 1;
		d->offset = i * sizeof(uint64_t);
		strncpy(d->name, stats[i].name, NAME_SIZE);
		memcpy(file + h.data_offset + d->offset, &stats[i].value,
		       sizeof(uint64_t));
	}
	int fd = memfd_create("vcpu-stats", MFD_CLOEXEC);
	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, file, len ? len : whole),
		     (ssize_t)(len ? len : whole));
	free(file);
	return fd;
}

static void set_value(int fd, size_t nr, size_t index, uint64_t value)
{
	cr_assert_eq(pwrite(fd, &value, sizeof(value),
			    data_offset(nr) + index * sizeof(uint64_t)),
		     sizeof(value));
}

#define NR(stats) (sizeof(stats) / sizeof(stats[0]))

Test(vcpu_stats, finds_both_values_among_others_and_reads_them_anew)
{
	int fd = stats_file(usual, NR(usual), NAME_SIZE, 0);
	struct vcpu_stats s;
	struct vcpu_activity a;

	cr_assert_eq(vcpu_stats_adopt(&s, fd, &a, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect(a.blocking);
	cr_expect_eq(a.halts, 42);
	cr_expect_eq(a.wakeups, 7);

	set_value(fd, NR(usual), 0, 8);
	set_value(fd, NR(usual), 1, 0);
	set_value(fd, NR(usual), 3, 43);
	cr_assert_eq(vcpu_stats_read(&s, &a), 0);
	cr_expect_not(a.blocking);
	cr_expect_eq(a.halts, 43);
	cr_expect_eq(a.wakeups, 8);
	vcpu_stats_close(&s);
	cr_expect_eq(s.fd, -1);
}

static void expect_refused(const struct fake_stat *stats, size_t nr,
			   uint32_t name_size, size_t len, int expected_ret,
			   const char *expected_msg)
{
	int fd = stats_file(stats, nr, name_size, len);
	struct vcpu_stats s;
	struct vcpu_activity a;

	cr_expect_eq(vcpu_stats_adopt(&s, fd, &a, err, sizeof(err)),
		     expected_ret, "message: %s", err);
	cr_expect_not_null(strstr(err, expected_msg), "message: %s", err);
	cr_expect_eq(s.fd, -1);
	/* The file was closed with the failure. */
	cr_expect_eq(fcntl(fd, F_GETFD), -1);
}

Test(vcpu_stats, a_kernel_without_blocking_is_refused)
{
	static const struct fake_stat old[] = {
		{ "halt_wakeup", KVM_STATS_TYPE_CUMULATIVE, 7 },
		{ VCPU_STAT_HALTS, KVM_STATS_TYPE_CUMULATIVE, 42 },
	};

	expect_refused(old, NR(old), NAME_SIZE, 0, -ENOENT,
		       "no \"blocking\" among 2");
}

Test(vcpu_stats, a_value_of_another_type_is_refused)
{
	static const struct fake_stat odd[] = {
		{ VCPU_STAT_BLOCKING, KVM_STATS_TYPE_INSTANT, 1 },
		{ VCPU_STAT_HALTS, KVM_STATS_TYPE_PEAK, 42 },
		{ VCPU_STAT_WAKEUPS, KVM_STATS_TYPE_CUMULATIVE, 7 },
	};

	expect_refused(odd, NR(odd), NAME_SIZE, 0, -EINVAL,
		       "\"halt_exits\": flags 0x2");
}

Test(vcpu_stats, a_short_file_is_refused)
{
	expect_refused(usual, NR(usual), NAME_SIZE, 10, -EINVAL,
		       "header: file too short");
	expect_refused(usual, NR(usual), NAME_SIZE, data_offset(2), -EINVAL,
		       "descriptors at 64: file too short");
	/* Descriptors whole, the values missing. */
	expect_refused(usual, NR(usual), NAME_SIZE, data_offset(NR(usual)),
		       -EINVAL, "values: file too short");
}

Test(vcpu_stats, names_without_their_nul_are_refused)
{
	static const struct fake_stat long_name[] = {
		{ "halt_wakeup_", KVM_STATS_TYPE_CUMULATIVE, 7 },
	};

	/* The header claims shorter names than "halt_wakeup_" and its NUL. */
	expect_refused(long_name, NR(long_name), 12, 0, -EINVAL,
		       "descriptor 0: name without its NUL in 12 bytes");
}

Test(vcpu_stats, an_absurd_header_is_refused)
{
	expect_refused(usual, NR(usual), 0, 0, -EINVAL,
		       "4 descriptors with 0-byte names");
	expect_refused(usual, NR(usual), 1 << 20, 0, -EINVAL,
		       "4 descriptors with 1048576-byte names");
}

Test(vcpu_stats, a_real_vcpu_that_never_ran_is_neither_blocking_nor_halted)
{
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (kvm < 0)
		cr_skip_test("no /dev/kvm: %s", strerror(errno));
	int vm = ioctl(kvm, KVM_CREATE_VM, 0);
	cr_assert_geq(vm, 0, "KVM_CREATE_VM: %s", strerror(errno));
	int vcpu = ioctl(vm, KVM_CREATE_VCPU, 0);
	cr_assert_geq(vcpu, 0, "KVM_CREATE_VCPU: %s", strerror(errno));

	struct vcpu_stats s;
	struct vcpu_activity a = { .blocking = true,
				   .halts = 99,
				   .wakeups = 9 };

	cr_assert_eq(vcpu_stats_open(&s, vcpu, &a, err, sizeof(err)), 0, "%s",
		     err);
	cr_expect_not(a.blocking);
	cr_expect_eq(a.halts, 0);
	cr_expect_eq(a.wakeups, 0);
	vcpu_stats_close(&s);
	close(vcpu);
	close(vm);
	close(kvm);
}

Test(vcpu_stats, an_fd_that_is_no_vcpu_has_no_statistics)
{
	struct vcpu_stats s;
	struct vcpu_activity a;
	int fd = memfd_create("not-a-vcpu", MFD_CLOEXEC);

	cr_expect_eq(vcpu_stats_open(&s, fd, &a, err, sizeof(err)), -ENOTTY);
	cr_expect_not_null(strstr(err, "KVM_GET_STATS_FD: "), "%s", err);
	cr_expect_eq(s.fd, -1);
	close(fd);
}

/*
 * Looks every BASE from 1 to @looks at a vCPU that stays in one halt with
 * interrupts on; @sampled[k] says whether look k kicked.
 */
static void idle_looks(struct vcpu_watch *w, const struct vcpu_activity *a,
		       uint64_t start, int looks, bool *sampled)
{
	for (int k = 1; k <= looks; k++)
		sampled[k] = vcpu_watch_look(w, a, false, start + k * BASE) ==
			     VCPU_SAMPLE;
}

Test(watch, a_halt_with_interrupts_on_is_sampled_ever_less_often_up_to_the_cap)
{
	struct vcpu_activity halted = { .blocking = true, .halts = 5 };
	struct vcpu_watch w;
	bool sampled[200] = { false };
	/* Gaps of 500, 1000, 2000, 4000 ms, then 8000 ms (32 looks) on. */
	static const int expected[] = { 1, 3, 7, 15, 31, 63, 95, 127, 159 };
	size_t next = 0;

	vcpu_watch_start(&w, &halted, BASE, CAP);
	idle_looks(&w, &halted, 0, 159, sampled);
	for (int k = 1; k <= 159; k++) {
		bool want = next < NR(expected) && expected[next] == k;

		cr_expect_eq(sampled[k], want, "look %d: %s", k,
			     sampled[k] ? "sampled" : "not sampled");
		next += want;
	}
}

Test(watch, a_vcpu_that_ran_is_not_parked_and_starts_over)
{
	struct vcpu_activity halted = { .blocking = true, .halts = 5 };
	struct vcpu_activity again = { .blocking = true, .halts = 6 };
	struct vcpu_activity running = { .blocking = false, .halts = 6 };
	struct vcpu_activity woken = { .blocking = true,
				       .halts = 6,
				       .wakeups = 1 };
	struct vcpu_watch w;
	bool sampled[40];

	vcpu_watch_start(&w, &halted, BASE, CAP);
	idle_looks(&w, &halted, 0, 39, sampled);
	/* A new HLT: it ran, even if the last sample said parked. */
	cr_expect_eq(vcpu_watch_look(&w, &again, true, 40 * BASE), VCPU_RAN);
	cr_expect_eq(vcpu_watch_look(&w, &running, false, 41 * BASE), VCPU_RAN);
	/* In a wait again: sampled at the next look, then after 500 ms. */
	cr_expect_eq(vcpu_watch_look(&w, &again, false, 42 * BASE),
		     VCPU_SAMPLE);
	cr_expect_eq(vcpu_watch_look(&w, &again, false, 43 * BASE), VCPU_WAIT);
	/* A wakeup without a HLT (an INIT) is a new wait too. */
	cr_expect_eq(vcpu_watch_look(&w, &woken, false, 44 * BASE), VCPU_RAN);
	cr_expect_eq(vcpu_watch_look(&w, &woken, false, 45 * BASE),
		     VCPU_SAMPLE);
	cr_expect_eq(vcpu_watch_look(&w, &woken, false, 46 * BASE), VCPU_WAIT);
	cr_expect_eq(vcpu_watch_look(&w, &woken, false, 47 * BASE),
		     VCPU_SAMPLE);
}

Test(watch, a_vcpu_sampled_parked_is_sampled_at_every_look)
{
	struct vcpu_activity halted = { .blocking = true, .halts = 5 };
	struct vcpu_watch w;
	bool sampled[40];

	vcpu_watch_start(&w, &halted, BASE, CAP);
	idle_looks(&w, &halted, 0, 39, sampled);
	/* Backed off to 8 s by now; a parked sample is confirmed at once. */
	for (int k = 40; k < 44; k++)
		cr_expect_eq(vcpu_watch_look(&w, &halted, true, k * BASE),
			     VCPU_SAMPLE, "look %d", k);
	/* Were it ever not parked again, its halt would start over. */
	cr_expect_eq(vcpu_watch_look(&w, &halted, false, 44 * BASE),
		     VCPU_SAMPLE);
	cr_expect_eq(vcpu_watch_look(&w, &halted, false, 45 * BASE), VCPU_WAIT);
	cr_expect_eq(vcpu_watch_look(&w, &halted, false, 46 * BASE),
		     VCPU_SAMPLE);
}
