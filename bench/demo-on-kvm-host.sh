#!/bin/sh
# demo-on-kvm-host.sh THAW KERNEL INITRD: the part of demo.sh that needs
# KVM.  Starts thawd on a template of thaw's guest (booted and snapshotted
# once, then restored into a warm pool), hands out three sandboxes over its
# API with the thaw client, runs a command in each, and stops the daemon.
set -eu
thaw=$1 kernel=$2 initrd=$3
export THAW_STATE_DIR THAW_SOCKET
THAW_STATE_DIR=$(mktemp -d)
THAW_SOCKET=$THAW_STATE_DIR/thawd.sock
cat >"$THAW_STATE_DIR/thawd.ini" <<INI
[template default]
kernel = $kernel
initrd = $initrd
vcpus = 2
min_ready = 3
INI
echo "== thaw daemon: build the template's snapshot, fill the pool" >&2
"$thaw" daemon --config "$THAW_STATE_DIR/thawd.ini" &
daemon=$!
trap 'kill "$daemon" 2>/dev/null; wait "$daemon"; rm -rf "$THAW_STATE_DIR"' EXIT
while [ ! -S "$THAW_SOCKET" ]; do
	kill -0 "$daemon" || exit 1
	sleep 0.2
done
# Let the pool fill: handouts then come from warm clones.
sleep 5
for i in 1 2 3; do
	echo "== sandbox $i: thaw sandbox create; thaw exec" >&2
	id=$("$thaw" sandbox create | tail -n 1)
	"$thaw" exec "$id" -- sh -c \
		'echo "$(hostname): $(uname -r), $(nproc) cpus, random $(head -c 8 /dev/urandom | od -An -tx1 | tr -d " ")"'
done
"$thaw" sandbox ls
