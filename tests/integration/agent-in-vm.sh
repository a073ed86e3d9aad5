#!/bin/sh
# agent-in-vm.sh VMM KERNEL INITRD TEST: boots a microVM whose init is
# thaw-agent, waits until the agent is ready, runs the agent test suite
# TEST against it through the VMM's vsock socket (THAW_AGENT_VSOCK), and
# stops the VM.  Run on a KVM host, i.e. through nested-kvm.sh.
#
# The boot it does anyway is timed, from just before the VMM starts to the
# agent's "ready on" line on the console, and exported to TEST as
# THAW_TEST_BOOT_S (whole seconds, rounded up): the suite scales the
# deadlines that end hung tests by it (harness.h, guest_slowness()), as a
# guest runs natively on one host and in KVM's instruction emulator on
# another (KVM-on-PVM: a fork+exec takes seconds).  The clock is
# /proc/uptime, read by the read builtin: this runs under dash here and
# under busybox sh in nested-kvm.sh's emulated host, with no bc and no
# date +%N.
set -u
vmm=$1 kernel=$2 initrd=$3 test=$4
dir=$(mktemp -d)
# Far above any boot seen (KVM-on-PVM: about a minute); it only ends a
# guest that never gets there.
ready_limit_s=900

# Sets cs to the centiseconds since boot.  /proc/uptime has two decimals;
# "1$frac - 100" keeps a leading 0 from reading as octal.
uptime_cs() {
	read -r up _ </proc/uptime
	cs=$((${up%.*} * 100 + 1${up#*.} - 100))
}

stop_vm() {
	kill "$vmm_pid" 2>/dev/null
	wait "$vmm_pid"
}

show_guest() {
	echo "agent-in-vm: guest console:" >&2
	tail -n 60 "$dir/console.log" >&2
	cat "$dir/vmm.log" >&2
}

not_ready() {
	echo "agent-in-vm: $*" >&2
	stop_vm
	show_guest
	rm -rf "$dir"
	exit 1
}

# One vCPU: with two, about one run in four under nested-kvm.sh's emulator
# lost a guest CPU (an RCU stall, then a triple fault on the NMI sent to
# it).  SMP guests are tested by test_vmm_boot and run by the demo.
uptime_cs
start=$cs
"$vmm" --kernel "$kernel" --initrd "$initrd" --mem 512 --vcpus 1 \
	--vsock "$dir/vsock.sock" --control "$dir/control.sock" \
	--console-log "$dir/console.log" >/dev/null 2>"$dir/vmm.log" &
vmm_pid=$!
# The agent logs "thaw-agent VERSION ready on vsock:PORT" to /dev/kmsg,
# which the guest kernel prints on its console.
until grep -q 'thaw-agent .* ready on' "$dir/console.log" 2>/dev/null; do
	kill -0 "$vmm_pid" 2>/dev/null ||
		not_ready "the VMM exited before the agent was ready"
	uptime_cs
	[ $((cs - start)) -lt $((ready_limit_s * 100)) ] ||
		not_ready "the agent was not ready within $ready_limit_s s"
	sleep 0.1
done
uptime_cs
boot_s=$(((cs - start + 99) / 100))
echo "agent-in-vm: VMM start to agent ready in $boot_s s" \
	"(THAW_TEST_BOOT_S; the suite's deadlines scale by it over 5 s)" >&2
# One test at a time: the claims are each test's own, and on KVM-on-PVM
# guest processes that preempt each other crash (docs/hosts.md, Known limits).
# --verbose: each test's time in the log (ctest shows it on failure).
THAW_TEST_BOOT_S=$boot_s THAW_AGENT_VSOCK=$dir/vsock.sock "$test" --jobs 1 --verbose
status=$?
stop_vm
[ "$status" = 0 ] || show_guest
rm -rf "$dir"
exit "$status"
