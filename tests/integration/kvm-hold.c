// SPDX-License-Identifier: Apache-2.0
/*
 * kvm-hold.c - holds one empty KVM VM open until it is killed.
 *
 * nested-kvm.sh starts it in its emulated host right after loading KVM.
 * Linux 6.1's KVM turns virtualisation on in every CPU when the first VM
 * is created and off again when the last one goes, each time with an
 * interrupt to every other CPU; with two emulated CPUs that round trip now
 * and then never completes and the emulated host wedges (soft lockups on
 * both CPUs, seen when VMs come and go one at a time: restores on demand,
 * thaw-bench-floor, test_snapshot's clones).  A VM that lives as long as
 * the host keeps virtualisation on, so those interrupts are never sent.
 */
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

int main(void)
{
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (kvm < 0) {
		perror("kvm-hold: /dev/kvm");
		return 1;
	}
	if (ioctl(kvm, KVM_CREATE_VM, 0) < 0) {
		perror("kvm-hold: KVM_CREATE_VM");
		return 1;
	}
	for (;;)
		pause();
}
