#!/bin/sh
# The main job, end to end: thaw's guest kernel (built on first use, then
# cached), the default guest (thaw-agent as init), then `thaw daemon` on a
# template of them (booted and snapshotted once, restored into a warm pool)
# handing out sandboxes that each run a command (`thaw sandbox create`,
# `thaw exec`), with handout and restore timings.  On a host without /dev/kvm it all runs inside nested-kvm.sh's emulated
# KVM host, which says so: its timings are then an emulator's.
set -eu
thaw=$1 vmm=$2 agent=$3 mkinitramfs=$4 src=$5
kernel=$("$src/guest/kernel/build.sh")
initrd=$("$mkinitramfs" --init "$agent")
echo "kernel: $kernel" >&2
echo "initrd: $initrd" >&2
# Two CPUs for the emulated host, like the template's guests have.
NESTED_KVM_SMP=2 NESTED_KVM_PROGRAMS="$thaw $vmm" exec "$src/tests/integration/nested-kvm.sh" \
	"$src/bench/demo-on-kvm-host.sh" "$thaw" "$kernel" "$initrd"
