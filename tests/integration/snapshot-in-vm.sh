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
if ! id=$("$thaw" snapshot create --kernel "$kernel" --initrd "$initrd" \
	--mem 128 | tail -n 1); then
	echo "snapshot-in-vm: thaw snapshot create failed" >&2
	exit 1
fi
THAW_TEST_SNAPSHOT=$id THAW_TEST_KERNEL=$kernel THAW_TEST_INITRD=$initrd \
	"$test" --jobs 1 "$@"
status=$?
rm -rf "$THAW_STATE_DIR"
exit "$status"
