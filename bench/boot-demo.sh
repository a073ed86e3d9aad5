#!/bin/sh
# The main job, end to end: thaw's guest kernel (built on first use, then
# cached), the default initramfs, a microVM that runs one command and powers
# off, and thaw-vmm's timings (VMM setup, kernel start, time to /init).
# On a host without /dev/kvm it runs inside nested-kvm.sh's emulated KVM
# host, which says so: its timings are then those of an emulator.
set -eu
vmm=$1 mkinitramfs=$2 src=$3
kernel=$("$src/guest/kernel/build.sh")
initrd=$("$mkinitramfs" --init "$src/guest/initramfs/init")
echo "kernel: $kernel" >&2
echo "initrd: $initrd" >&2
exec "$src/tests/integration/nested-kvm.sh" "$vmm" --kernel "$kernel" --initrd "$initrd" --vcpus 2 --mem 256 \
	--cmdline 'thaw_run="uname -a; echo cpus: $(nproc); head -c 8 /dev/urandom | od -An -tx1"'
