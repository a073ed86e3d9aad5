#!/bin/sh
# daemon-in-vm.sh THAW KERNEL INITRD TEST [ARG...]: runs the daemon test
# suite TEST (with ARGs, e.g. --verbose) in a fresh state directory.  TEST
# writes the daemon's config and starts, kills and restarts `THAW daemon`
# itself (THAW_TEST_THAW, with templates of KERNEL and INITRD); the daemon's
# VMMs need KVM and its cgroups cgroup v2, so run it through nested-kvm.sh.
set -u
thaw=$1 kernel=$2 initrd=$3 test=$4
shift 4
export THAW_STATE_DIR THAW_TEST_THAW THAW_TEST_KERNEL THAW_TEST_INITRD
THAW_STATE_DIR=$(mktemp -d)
THAW_TEST_THAW=$thaw THAW_TEST_KERNEL=$kernel THAW_TEST_INITRD=$initrd
"$test" --jobs 1 "$@"
status=$?
# A daemon the suite did not stop (it failed on the way) goes now; its VMMs
# die with it.
if pid=$(cat "$THAW_STATE_DIR/test_daemon.pid" 2>/dev/null); then
	kill -9 "$pid" 2>/dev/null
fi
rm -rf "$THAW_STATE_DIR"
exit "$status"
