#!/bin/sh
# The main job, end to end: thaw's guest kernel (built on first use, then
# cached), the default initramfs, a microVM that runs one command and powers
# off, and thaw-vmm's timings (VMM setup, kernel start, time to /init).
set -eu
vmm=$1 mkinitramfs=$2 src=$3
kernel=$("$src/guest/kernel/build.sh")
initrd=$("$mkinitramfs" --init "$src/guest/initramfs/init")
echo "kernel: $kernel" >&2
echo "initrd: $initrd" >&2
exec "$vmm" --kernel "$kernel" --initrd "$initrd" --vcpus 2 --mem 256 \
	--cmdline 'thaw_run="uname -a; echo cpus: $(nproc); head -c 8 /dev/urandom | od -An -tx1"'
