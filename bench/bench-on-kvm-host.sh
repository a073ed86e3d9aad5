#!/bin/sh
# bench-on-kvm-host.sh BENCH KERNEL INITRD [SCENARIO...]: the part of
# bench.sh that needs KVM.  Runs thaw-bench into a scratch directory and
# prints the results as a base64 tar stream after a THAW-BENCH-RESULTS line,
# which bench.sh unpacks on the other side.
set -eu
bench=$1 kernel=$2 initrd=$3
shift 3
# nested-kvm.sh's host has only /bin on its PATH; the peers are in /usr/bin.
PATH=$PATH:/usr/local/bin:/usr/bin
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$bench" --kernel "$kernel" --initrd "$initrd" --out "$out" "$@" >&2
echo THAW-BENCH-RESULTS
tar -c -C "$out" . | base64
