#!/bin/sh
# daemon-in-vm.sh THAW KERNEL INITRD TEST [ARG...]: runs the daemon test
# suite TEST (with ARGs, e.g. --verbose) in a fresh state directory.  TEST
# writes the daemon's config and starts, kills and restarts `THAW daemon`
# itself (THAW_TEST_THAW, with templates of KERNEL and INITRD); the daemon's
# VMMs need KVM, so run it through nested-kvm.sh.  Its cgroups are v2 or v1,
# whichever the host has.
#
# First it times one boot of KERNEL and INITRD (`THAW run -- true`) and
# exports the whole seconds, rounded up, as THAW_TEST_BOOT_S: the suite
# scales its hang-only deadlines by it (harness.h, guest_slowness()).
#
# THAW_TEST_CATALOG_CACHE (optional) is a directory the test_daemon_*
# suites share, one at a time: the first to pass leaves its state
# directory there (the templates' snapshots its daemon built), and each
# later one starts with a copy of its catalog, so that the suites together
# build the templates once.  In nested-kvm.sh's emulated host the
# directory is that host's own, so there each suite builds them.
# POSIX sh: this runs under dash and under busybox sh in nested-kvm.sh's
# emulated host, so no bc and no date +%N; /proc/uptime has centiseconds.
set -u
thaw=$1 kernel=$2 initrd=$3 test=$4
shift 4
export THAW_STATE_DIR THAW_TEST_THAW THAW_TEST_KERNEL THAW_TEST_INITRD
THAW_STATE_DIR=$(mktemp -d)
THAW_TEST_THAW=$thaw THAW_TEST_KERNEL=$kernel THAW_TEST_INITRD=$initrd

# Centiseconds since boot.
uptime_cs() {
	read -r up _ </proc/uptime
	s=${up%.*} cs=${up#*.}
	cs=${cs#0} # "07" would be octal
	echo $((s * 100 + ${cs:-0}))
}

# A daemon the suite in state directory $1 did not stop (it failed on the
# way, or this script was killed) goes; its VMMs die with it.
stop_daemon() {
	if pid=$(cat "$1/test_daemon.pid" 2>/dev/null); then
		kill -9 "$pid" 2>/dev/null
		rm -f "$1/test_daemon.pid"
	fi
}
trap 'stop_daemon "$THAW_STATE_DIR"; rm -rf "$THAW_STATE_DIR"; exit 143' \
	TERM INT HUP

cache=${THAW_TEST_CATALOG_CACHE:-} keep=

# The suites sharing a cache share its timing boot too: one per ctest run
# (daemon_catalog_reset empties the cache), not one per suite.
start=$(uptime_cs)
if [ -n "$cache" ] && read -r THAW_TEST_BOOT_S <"$cache/boot_s" 2>/dev/null; then
	export THAW_TEST_BOOT_S
	echo "daemon-in-vm: THAW_TEST_BOOT_S=$THAW_TEST_BOOT_S, timed by an" \
		"earlier suite ($cache/boot_s)" >&2
elif "$thaw" run --kernel "$kernel" --initrd "$initrd" --mem 128 -- true \
	>/dev/null; then
	export THAW_TEST_BOOT_S
	THAW_TEST_BOOT_S=$((($(uptime_cs) - start + 99) / 100))
	echo "daemon-in-vm: one guest boot (thaw run -- true) took" \
		"$THAW_TEST_BOOT_S s: THAW_TEST_BOOT_S=$THAW_TEST_BOOT_S" >&2
	if [ -n "$cache" ] && mkdir -p "$cache"; then
		echo "$THAW_TEST_BOOT_S" >"$cache/boot_s"
	fi
else
	echo "daemon-in-vm: thaw run -- true failed; deadlines unscaled" >&2
fi

# The shared templates (THAW_TEST_CATALOG_CACHE, above): a catalog records
# each snapshot's directory by its path, so the suite that builds them
# runs in $cache/state, which stays once it passed; the later ones start
# with a copy of its catalog, whose templates are its snapshots there.
if [ -n "$cache" ] && [ -e "$cache/state/.built" ] &&
	[ -d "$cache/state/catalog" ]; then
	cp -a "$cache/state/catalog" "$THAW_STATE_DIR/" &&
		echo "daemon-in-vm: templates' snapshots from $cache/state" >&2
elif [ -n "$cache" ] && mkdir -p "$cache" && stop_daemon "$cache/state" &&
	rm -rf "$cache/state" && mkdir "$cache/state"; then
	rm -rf "$THAW_STATE_DIR"
	THAW_STATE_DIR=$cache/state keep=1
fi

"$test" --jobs 1 "$@"
status=$?
stop_daemon "$THAW_STATE_DIR"
if [ -n "$keep" ] && [ "$status" -eq 0 ]; then
	touch "$THAW_STATE_DIR/.built"
else
	rm -rf "$THAW_STATE_DIR"
fi
exit "$status"
