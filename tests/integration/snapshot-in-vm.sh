#!/bin/sh
# snapshot-in-vm.sh THAW KERNEL INITRD TEST [ARG...]: takes one snapshot of
# thaw's guest with `thaw snapshot create` in a fresh state directory, then
# runs the snapshot test suite TEST (with ARGs, e.g. --verbose) against it
# (THAW_TEST_SNAPSHOT names it).  All of
# it on one KVM host, so run it through nested-kvm.sh: the snapshot lives on
# that host's disk.
set -u
thaw=$1 kernel=$2 initrd=$3 test=$4
shift 4
export THAW_STATE_DIR
THAW_STATE_DIR=$(mktemp -d)
# The boot it does anyway is timed and exported as THAW_TEST_BOOT_S: the
# suite scales the deadlines that end hung tests by it (harness.h).  The
# clock is /proc/uptime read by the read builtin (dash here, busybox sh in
# nested-kvm.sh's emulated host).
uptime_cs() {
	read -r up _ </proc/uptime
	cs=$((${up%.*} * 100 + 1${up#*.} - 100))
}
uptime_cs
start=$cs
if ! id=$("$thaw" snapshot create --kernel "$kernel" --initrd "$initrd" \
	--mem 128 | tail -n 1); then
	echo "snapshot-in-vm: thaw snapshot create failed" >&2
	exit 1
fi
uptime_cs
boot_s=$(((cs - start + 99) / 100))
echo "snapshot-in-vm: boot and snapshot in $boot_s s (THAW_TEST_BOOT_S)" >&2
THAW_TEST_BOOT_S=$boot_s THAW_TEST_SNAPSHOT=$id THAW_TEST_KERNEL=$kernel \
	THAW_TEST_INITRD=$initrd "$test" --jobs 1 "$@"
status=$?
rm -rf "$THAW_STATE_DIR"
exit "$status"
