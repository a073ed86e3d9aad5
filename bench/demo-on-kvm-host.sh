#!/bin/sh
# demo-on-kvm-host.sh THAW KERNEL INITRD: the part of demo.sh that needs
# KVM.  Boots and snapshots a 2-vCPU template, then runs three clones.
set -eu
thaw=$1 kernel=$2 initrd=$3
echo "== thaw snapshot create: boot the template once, snapshot it" >&2
id=$("$thaw" snapshot create --kernel "$kernel" --initrd "$initrd" \
	--vcpus 2 | tail -n 1)
"$thaw" snapshot ls
for i in 1 2 3; do
	echo "== clone $i: thaw run --from $id" >&2
	"$thaw" run --from "$id" -- sh -c \
		'echo "$(hostname): $(uname -r), $(nproc) cpus, random $(head -c 8 /dev/urandom | od -An -tx1 | tr -d " ")"'
done
