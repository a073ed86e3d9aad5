#!/bin/sh
# The main job, end to end: thaw's guest kernel (built on first use, then
# cached), the default guest (thaw-agent as init), a microVM that runs a
# few commands through `thaw run`, and the timings (VMM setup, boot to
# agent ready, command).  On a host without /dev/kvm it runs inside
# nested-kvm.sh's emulated KVM host, which says so: its timings are then
# an emulator's.
set -eu
thaw=$1 vmm=$2 agent=$3 mkinitramfs=$4 src=$5
kernel=$("$src/guest/kernel/build.sh")
initrd=$("$mkinitramfs" --init "$agent")
echo "kernel: $kernel" >&2
echo "initrd: $initrd" >&2
NESTED_KVM_PROGRAMS=$vmm exec "$src/tests/integration/nested-kvm.sh" \
	"$thaw" run --kernel "$kernel" --initrd "$initrd" --vcpus 2 -- \
	sh -c 'uname -a; echo "cpus: $(nproc)"; head -c 8 /dev/urandom | od -An -tx1'
