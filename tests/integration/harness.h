/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harness.h - runs a thaw command the way a user would and captures what
 * it did: exit status, stdout, stderr, wall time.  A command that outlives
 * its time limit is killed and reported as timed out, so a hang fails the
 * test instead of stalling the suite.
 */
#ifndef THAW_TESTS_HARNESS_H
#define THAW_TESTS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct run_result {
	int status; /* exit code, or 128 + signal number */
	bool timed_out;
	double seconds;
	char *out;
	size_t out_len;
	char *err;
	size_t err_len;
};

/* argv[0] is a path.  Returns 0 when the command ran (whatever its status). */
int run_command(char *const argv[], int timeout_s, struct run_result *r);
void run_result_free(struct run_result *r);

/*
 * Writes to @path an ELF "kernel" of one loadable segment at 16 MiB whose
 * entry point runs @code (at most 16 bytes) and whose memory footprint is
 * @memsz bytes.  thaw-vmm enters it in long mode with an empty IDT, so any
 * exception there becomes a triple fault.  Returns 0 or -1 (errno).
 */
int write_tiny_kernel(const char *path, const void *code, size_t len,
		      uint64_t memsz);

/*
 * How many times slower than a reference host this one runs guests, for
 * the deadlines that only end hung tests (never for a claim about speed).
 * A suite's script times one guest boot it does anyway and exports the
 * seconds as THAW_TEST_BOOT_S; the factor is that over REFERENCE_BOOT_S
 * (at least 1).  Guest kernels run emulated on some hosts (KVM-on-PVM:
 * a fork+exec takes seconds) and natively on others, so a fixed deadline
 * is either useless on one or wrong on the other.
 */
double guest_slowness(void);

/* @base_s seconds, scaled by guest_slowness(). */
int scaled_s(int base_s);

/*
 * Multiplies every test's .timeout by guest_slowness(), from a
 * ReportHook(PRE_ALL): they only end hangs.  Criterion 2.4.1 reads them
 * when it starts each test, after PRE_ALL (its --timeout can only lower
 * them).
 */
struct criterion_test_set;
void scale_criterion_timeouts(struct criterion_test_set *set);

/*
 * True when thaw runs guests on this machine's own /dev/kvm; false when
 * nested-kvm.sh runs them in its emulated host (no usable /dev/kvm, or
 * THAW_FORCE_NESTED set).
 */
bool kvm_usable(void);

/*
 * True when this machine's /dev/kvm is KVM-on-PVM (module kvm_pvm bound),
 * where guest kernels run in KVM's instruction emulator, and kvm_usable().
 */
bool kvm_is_pvm(void);

/*
 * Sends @command (one line) to the thaw-vmm control socket at @path and
 * reads its answer line into @answer ("" when it hung up first).  0, or -1
 * (errno) when the socket cannot be reached or written.
 */
int control_command(const char *path, const char *command, char *answer,
		    size_t size);

/* Number of '\n'-terminated lines in @s. */
int count_lines(const char *s);

#endif
