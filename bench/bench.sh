#!/bin/sh
# bench.sh THAW VMM BENCH FLOOR AGENT MKINITRAMFS SRC [SCENARIO...]: thaw-bench
# on thaw's guest (kernel built on first use, then cached; the default
# initramfs), results into SRC/bench/results/DATE.  On a host without
# /dev/kvm it runs inside nested-kvm.sh's emulated KVM host, which says so,
# and the bench scales itself down: its timings are then an emulator's.
set -eu
thaw=$1 vmm=$2 bench=$3 floor=$4 agent=$5 mkinitramfs=$6 src=$7
shift 7
[ $# -gt 0 ] || set -- all
kernel=$("$src/guest/kernel/build.sh")
initrd=$("$mkinitramfs" --init "$agent")
out=$src/bench/results/$(date -u +%Y-%m-%d)
peers=
for p in bwrap runsc; do
	p=$(command -v "$p") && peers="$peers $p"
done
# The results come back as a tar stream on stdout (the emulated host has
# no shared disk); the table is in it.
stream=$(mktemp)
trap 'rm -f "$stream"' EXIT
NESTED_KVM_PROGRAMS="$thaw $vmm $bench $floor$peers" NESTED_KVM_TIMEOUT=14400 \
	NESTED_KVM_MEM=6144 NESTED_KVM_SMP=2 \
	"$src/tests/integration/nested-kvm.sh" \
	"$src/bench/bench-on-kvm-host.sh" "$bench" "$kernel" "$initrd" "$@" \
	>"$stream" || true
if ! grep -q '^THAW-BENCH-RESULTS$' "$stream"; then
	echo "thaw-bench did not finish: no results (its output is above)" >&2
	exit 1
fi
mkdir -p "$out"
sed -n '/^THAW-BENCH-RESULTS$/,$p' "$stream" | sed 1d | base64 -d |
	tar -x -C "$out"
# The emulated host has no gnuplot: the plots are drawn here, from the
# script and data the bench wrote, and results.md then shows them.
if grep -q '^Plots were not made' "$out/results.md" &&
	[ -f "$out/plots.gp" ] && command -v gnuplot >/dev/null &&
	(cd "$out" && gnuplot plots.gp); then
	sed -i '/^Plots were not made/d' "$out/results.md"
	rm -f "$out/gnuplot.log"
	printf '\n## Plots\n' >>"$out/results.md"
	for png in "$out"/*.png; do
		name=$(basename "$png" .png)
		printf '\n![%s](%s.png)\n' "$name" "$name" >>"$out/results.md"
	done
fi
cat "$out/results.md"
echo "thaw-bench: results in $out" >&2
