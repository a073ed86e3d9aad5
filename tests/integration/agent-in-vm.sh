#!/bin/sh
# agent-in-vm.sh VMM KERNEL INITRD TEST: boots a microVM whose init is
# thaw-agent, runs the agent test suite TEST against it through the VMM's
# vsock socket (THAW_AGENT_VSOCK), and stops the VM through its control
# socket.  Run on a KVM host, i.e. through nested-kvm.sh.
set -u
vmm=$1 kernel=$2 initrd=$3 test=$4
dir=$(mktemp -d)
# One vCPU: with two, about one run in four under nested-kvm.sh's emulator
# lost a guest CPU (an RCU stall, then a triple fault on the NMI sent to
# it).  SMP guests are tested by test_vmm_boot and run by the demo.
"$vmm" --kernel "$kernel" --initrd "$initrd" --mem 512 --vcpus 1 \
	--vsock "$dir/vsock.sock" --control "$dir/control.sock" \
	--console-log "$dir/console.log" >/dev/null 2>"$dir/vmm.log" &
vmm_pid=$!
THAW_AGENT_VSOCK=$dir/vsock.sock "$test" --jobs 2
status=$?
kill "$vmm_pid"
wait "$vmm_pid"
if [ "$status" != 0 ]; then
	echo "agent-in-vm: guest console:" >&2
	tail -n 40 "$dir/console.log" >&2
	cat "$dir/vmm.log" >&2
fi
rm -rf "$dir"
exit "$status"
