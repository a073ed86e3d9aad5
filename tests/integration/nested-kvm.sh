#!/bin/bash
# nested-kvm.sh COMMAND [ARG...]: runs COMMAND on a KVM host and behaves
# like it (its stdout, its stderr, its exit status).
#
# With a usable /dev/kvm that is this machine.  Without one (CI and the
# development machines are themselves PVM guests whose kvm_pvm refuses to
# bind), it is an "L1" Linux VM run by QEMU's software emulator with an
# emulated AMD CPU that has SVM, so L1's kvm_amd gives a real /dev/kvm:
# thaw-vmm then runs against genuine KVM, only slower (~12 s to boot L1,
# ~10k exits/s).
#
# Into L1's initramfs go: Debian's stock kernel modules for KVM (the kernel
# package is downloaded once and cached), COMMAND with the shared libraries
# ldd lists, and every ARG that names an existing file, at the same paths, so
# the arguments need no rewriting; NESTED_KVM_PROGRAMS names more programs
# COMMAND runs (space-separated paths), copied the same way;
# NESTED_KVM_MODULES names more of the kernel's modules L1 loads after KVM's
# and the network's (paths under its kernel/ without .ko, space-separated:
# "net/sched/sch_netem"); NESTED_KVM_MEM
# is L1's memory in MiB (default 2048), NESTED_KVM_SMP its CPUs (default
# 1, see below); NESTED_KVM_FORWARD=PORT makes TCP PORT on this machine's
# loopback reach PORT in L1 (QEMU's user networking, restricted: L1 reaches
# nothing out there; its e1000 is 10.0.2.15), for a client here talking to
# a server COMMAND runs (test_e2b: node here, the daemon's e2b_listen in
# L1).  L1 has cgroup v2 at /sys/fs/cgroup.  L1 writes COMMAND's
# stdout and stderr to its 2nd and 3rd serial ports (files on this side) and
# its exit status to the console, with a heartbeat.
set -euo pipefail

[ $# -ge 1 ] || { echo "usage: nested-kvm.sh COMMAND [ARG...]" >&2; exit 2; }
if [ -n "${THAW_FORCE_NESTED:-}" ]; then
	:
elif [ -c /dev/kvm ] && { exec 3<>/dev/kvm; } 2>/dev/null; then
	exec 3>&-
	exec "$@"
fi

say() { echo "nested-kvm: $*" >&2; }
command -v qemu-system-x86_64 >/dev/null ||
	{
		# A skip (77) for want of KVM, a failure where KVM is required.
		say "no /dev/kvm and no qemu-system-x86_64 (apt-get install qemu-system-x86)"
		[ "${THAW_REQUIRE_KVM:-}" = 1 ] && exit 1
		exit 77
	}

# The L1 kernel: Debian's current amd64 kernel, which builds KVM as modules.
kdir=$("$(dirname "$0")/debian-kernel.sh" amd64)
mods=$(echo "$kdir"/lib/modules/*/kernel)

say "no usable /dev/kvm here: running $(basename "$1") on the real KVM of a" \
	"QEMU-emulated Linux host (slow; timings are the emulator's)"
work=$(mktemp -d)
qemu_pid=
cleanup() {
	[ -n "$qemu_pid" ] && kill "$qemu_pid" 2>/dev/null
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 143' TERM INT HUP

root=$work/root
mkdir -p "$root"/{bin,dev,proc,sys,tmp,lib/modules}
mknod "$root/dev/console" c 5 1
cp /bin/busybox "$root/bin/busybox"
cc -static -O2 -o "$root/bin/kvm-hold" "$(dirname "$0")/kvm-hold.c"
# What a daemon's sandbox networks need (every daemon's default template
# has one), in load order: TAPs and veths, nftables' masquerade and
# conntrack match (the host's input filter), TC's
# clsact and BPF classifier.  A stock host loads them on demand; L1 has no
# modprobe.
network_modules="drivers/net/tun drivers/net/veth crypto/crc32c_generic
	lib/libcrc32c net/netfilter/nfnetlink net/netfilter/nf_tables
	net/ipv4/netfilter/nf_defrag_ipv4 net/ipv6/netfilter/nf_defrag_ipv6
	net/netfilter/nf_conntrack net/netfilter/nf_nat
	net/netfilter/nft_chain_nat net/netfilter/nft_masq net/netfilter/nft_ct
	net/sched/sch_ingress net/sched/cls_bpf"
forward_args=()
if [ -n "${NESTED_KVM_FORWARD:-}" ]; then
	port=$NESTED_KVM_FORWARD
	network_modules="$network_modules drivers/net/ethernet/intel/e1000/e1000"
	forward_args=(-netdev "user,id=forward,restrict=on,hostfwd=tcp:127.0.0.1:$port-:$port"
		-device e1000,netdev=forward)
fi
modules="$network_modules ${NESTED_KVM_MODULES:-}"
for m in virt/lib/irqbypass drivers/crypto/ccp/ccp arch/x86/kvm/kvm \
	arch/x86/kvm/kvm-amd $modules; do
	src=$(ls "$mods/$m".ko* | head -n 1)
	case $src in
	*.xz) xz -dc "$src" >"$root/lib/modules/$(basename "$m").ko" ;;
	*) cp "$src" "$root/lib/modules/" ;;
	esac
done

add_file() { # same path inside L1, content of the (symlink-resolved) file
	mkdir -p "$root$(dirname "$1")"
	cp -L "$1" "$root$1"
}
add_program() { # the file and the shared libraries it needs
	add_file "$1"
	for lib in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*'); do
		add_file "$lib"
	done
}
cmd=$(command -v "$1")
add_program "$cmd"
for extra in ${NESTED_KVM_PROGRAMS:-}; do
	add_program "$extra"
done
shift
for arg in "$@"; do
	case $arg in /*) [ -f "$arg" ] && add_file "$arg" ;; esac
done
quote() { printf "'%s' " "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"; }
{
	# Tests that load a host hard scale down on this one (test_daemon_pool).
	printf 'export THAW_EMULATED_HOST=1\n'
	for m in $modules; do
		printf 'insmod /lib/modules/%s.ko || echo "nested-kvm: insmod %s failed"\n' \
			"$(basename "$m")" "$m"
	done
	if [ -n "${NESTED_KVM_FORWARD:-}" ]; then
		printf 'ip link set lo up; ip link set eth0 up\n'
		printf 'ip addr add 10.0.2.15/24 dev eth0 || echo "nested-kvm: no eth0 for NESTED_KVM_FORWARD"\n'
	fi
	printf 'exec '
	for word in "$cmd" "$@"; do quote "$word"; done
	printf '</dev/null >/dev/ttyS1 2>/dev/ttyS2\n'
} >"$root/run.sh"

cat >"$root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
echo "THAW-L1-UP"
# A heartbeat on the console: the other side tells a wedged host from a
# busy one by it, and the last beat says how much memory was left.
(while sleep 20; do
	echo "THAW-L1-ALIVE $(cut -d' ' -f1 /proc/uptime) s, $(grep MemAvailable /proc/meminfo | tr -s ' ')"
done) &
mkdir -p /dev/shm && mount -t tmpfs tmpfs /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup
for m in irqbypass ccp kvm kvm-amd; do
	insmod /lib/modules/$m.ko || echo "nested-kvm: insmod $m failed"
done
kvm-hold &
stty -F /dev/ttyS1 raw -echo
stty -F /dev/ttyS2 raw -echo
sh /run.sh
echo "THAW-L1-EXIT $?"
poweroff -f
INIT
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet) >"$work/l1.cpio"

# Seen here: with two CPUs the emulated host wedges or crashes now and
# then, always around an interrupt between its CPUs: a lost one leaves both
# CPUs in soft lockups (half of the bench's runs, CI's test_snapshot), and a
# reschedule interrupt taken right after VMRUN, before KVM restored the
# host's state, overflows L1's stack ("TASK stack guard page was hit" in
# kvm_amd's __svm_vcpu_run) under many guests.  One CPU has no such
# interrupts, so it is the default (NESTED_KVM_SMP); many guests at once
# crawl on it (16 restores at once took minutes each), so test_daemon_pool and the
# bench ask for two.  There, kvm-hold (kvm-hold.c) keeps one empty VM for
# L1's lifetime: Linux 6.1's KVM turns virtualisation on and off across all
# CPUs by such interrupts whenever the VM count leaves or reaches zero, and
# with it no bench run wedged.
# What may be left is caught here.  A host that does not reach its init in
# L1_BOOT_LIMIT s (2 of ~40 boots) is started again (COMMAND has not run
# yet); one whose heartbeat stops for L1_SILENCE_LIMIT s is killed, and
# COMMAND is run once more from the start, saying so, after that or after a
# host that ended without reporting COMMAND's exit status (seen once: L1
# gone after 34 s, nothing on its console).  A host that reports COMMAND's
# exit status is never retried.
L1_BOOT_LIMIT=120
L1_SILENCE_LIMIT=300
stop_l1() {
	kill "$qemu_pid" 2>/dev/null # timeout(1) passes SIGTERM on to QEMU
	wait "$qemu_pid" 2>/dev/null || true
	qemu_pid=
}
show_console() { # its messages, and the last heartbeats only
	grep -v THAW-L1-ALIVE "$work/console" >&2 || true
	grep THAW-L1-ALIVE "$work/console" | tail -n 3 >&2 || true
}
boot_attempts=0
wedged_runs=0
while :; do
	: >"$work/console"
	: >"$work/out"
	: >"$work/err"
	# A wedged emulator must not outlive its caller's patience.
	timeout -s KILL "${NESTED_KVM_TIMEOUT:-900}" \
		qemu-system-x86_64 -accel tcg,thread=multi -cpu max -smp "${NESTED_KVM_SMP:-1}" \
		-m "${NESTED_KVM_MEM:-2048}" -display none -monitor none -no-reboot -nodefaults \
		-serial "file:$work/console" -serial "file:$work/out" \
		-serial "file:$work/err" "${forward_args[@]}" \
		-kernel "$kdir/vmlinuz" -initrd "$work/l1.cpio" \
		-append "console=ttyS0 loglevel=4 panic=-1" &
	qemu_pid=$!
	waited=0
	while ! grep -q THAW-L1-UP "$work/console" &&
		kill -0 "$qemu_pid" 2>/dev/null && [ $waited -lt $L1_BOOT_LIMIT ]; do
		sleep 1
		waited=$((waited + 1))
	done
	if ! grep -q THAW-L1-UP "$work/console"; then
		stop_l1
		why="did not reach its init in $L1_BOOT_LIMIT s"
		boot_attempts=$((boot_attempts + 1))
		say "the L1 host $why (attempt $boot_attempts of 3)"
		[ $boot_attempts -lt 3 ] && continue
		break
	fi
	# Kernel messages (soft lockups) are no sign of life: count beats.
	silent=0
	beats=0
	while kill -0 "$qemu_pid" 2>/dev/null && [ $silent -lt $L1_SILENCE_LIMIT ]; do
		sleep 5
		now=$(grep -c THAW-L1-ALIVE "$work/console" || true)
		if [ "$now" = "$beats" ]; then
			silent=$((silent + 5))
		else
			silent=0
			beats=$now
		fi
	done
	if [ $silent -lt $L1_SILENCE_LIMIT ]; then
		wait "$qemu_pid" || true
		qemu_pid=
		grep -q THAW-L1-EXIT "$work/console" && break
		why="ended without reporting an exit status"
	else
		stop_l1
		why="stopped (no heartbeat for $L1_SILENCE_LIMIT s)"
	fi
	wedged_runs=$((wedged_runs + 1))
	[ $wedged_runs -ge 2 ] && break # reported below
	say "the L1 host $why; its console, then $(basename "$cmd")'s" \
		"output so far:"
	show_console
	cat "$work/out" "$work/err" >&2
	say "running $(basename "$cmd") again on a fresh L1 host"
done

cat "$work/out"
cat "$work/err" >&2
status=$(sed -n 's/.*THAW-L1-EXIT \([0-9]*\).*/\1/p' "$work/console" | tail -n 1)
if [ -z "$status" ]; then
	say "no exit status from the L1 host: it $why (its limit:" \
		"${NESTED_KVM_TIMEOUT:-900} s); its console:"
	show_console
	exit 1
fi
exit "$status"
