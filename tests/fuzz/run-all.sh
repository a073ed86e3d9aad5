#!/bin/sh
# Runs every libFuzzer harness of tests/fuzz over its seed corpus.
#
#   tests/fuzz/run-all.sh [--runs N | --seconds S] [--build DIR] [NAME...]
#
# Configures and builds DIR (default: build-fuzz beside the sources) with
# clang and THAW_FUZZ=ON when needed, then runs each harness (or each NAME)
# one after another for N executions or S seconds (default: 10 s), and
# prints per harness its executions, executions per second and crashes.
# New inputs go to DIR/tests/fuzz/work/NAME, never into the committed
# corpus; a crashing input is saved under DIR/tests/fuzz/crashes/NAME/.
# Exits 1 if any harness crashed (or leaked, or hung), 77 when clang is
# missing (ctest's skip), 2 on bad usage or a failed build.
set -eu

src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/build-fuzz
limit=-max_total_time=10
names=

while [ $# -gt 0 ]; do
	case $1 in
	--runs) limit=-runs=${2:?--runs needs a number}; shift 2 ;;
	--seconds) limit=-max_total_time=${2:?--seconds needs a number}; shift 2 ;;
	--build) build=${2:?--build needs a directory}; shift 2 ;;
	-h | --help) sed -n '2,14s/^# \{0,1\}//p' "$0"; exit 0 ;;
	-*) echo "run-all.sh: unknown option $1" >&2; exit 2 ;;
	*) names="$names $1"; shift ;;
	esac
done
[ -n "$names" ] || names=$(cd "$src/tests/fuzz/corpus" && ls)
for name in $names; do
	if [ ! -d "$src/tests/fuzz/corpus/$name" ]; then
		echo "run-all.sh: no harness called $name (tests/fuzz/corpus/$name)" >&2
		exit 2
	fi
done

if ! command -v clang >/dev/null 2>&1; then
	echo "run-all.sh: clang is not installed (.ci/install-deps installs it); skipped" >&2
	exit 77
fi
if [ ! -f "$build/CMakeCache.txt" ]; then
	mkdir -p "$build"
	cmake -S "$src" -B "$build" -DCMAKE_C_COMPILER=clang -DTHAW_FUZZ=ON \
		-DBUILD_TESTING=OFF >"$build/configure.log" 2>&1 || {
		cat "$build/configure.log" >&2
		echo "run-all.sh: configuring $build failed" >&2
		exit 2
	}
fi
cmake --build "$build" --target fuzzers -j"$(nproc)" >"$build/fuzzers.log" 2>&1 || {
	tail -n 40 "$build/fuzzers.log" >&2
	echo "run-all.sh: building the harnesses in $build failed" >&2
	exit 2
}

out=$build/tests/fuzz
failed=0
printf '%-18s %12s %10s %8s\n' harness executions exec/s crashes
for name in $names; do
	corpus=$src/tests/fuzz/corpus/$name
	work=$out/work/$name
	crashes=$out/crashes/$name
	log=$out/logs/$name.log
	if [ ! -x "$out/$name" ]; then
		echo "run-all.sh: $out/$name was not built" >&2
		exit 2
	fi
	mkdir -p "$work" "$crashes" "$(dirname "$log")"
	before=$(ls "$crashes" | grep -vc '^slow-unit-' || true)
	# One worker, no forks: deterministic, and other work keeps a core.
	status=0
	"$out/$name" "$limit" -timeout=25 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$crashes/" \
		"$work" "$corpus" >"$log" 2>&1 </dev/null || status=$?
	runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
	speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
	found=$(($(ls "$crashes" | grep -vc '^slow-unit-' || true) - before))
	if [ "$status" -ne 0 ] && [ "$found" -eq 0 ]; then
		found=1 # died before libFuzzer could save the input
	fi
	printf '%-18s %12s %10s %8s\n' "$name" "${runs:-?}" "${speed:-?}" "$found"
	if [ "$found" -ne 0 ]; then
		failed=1
		grep -m 3 -E 'ERROR|SUMMARY|^==' "$log" | sed 's/^/    /' >&2 || true
		echo "    log: $log; inputs: $crashes" >&2
	fi
done
exit $failed
