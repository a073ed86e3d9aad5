#!/bin/sh
# network-world.sh up|down DIR: the world test_network's sandboxes reach,
# made of network namespaces on this host (only hosts the test makes
# itself; nothing goes through the host's default route):
#   thawtest-inet  198.51.100.10 (a public documentation address): busybox
#                  httpd saying "internet", and dnsmasq answering
#                  internet.thaw.test with that address;
#   thawtest-meta  169.254.169.254 (the clouds' metadata address): httpd
#                  saying "metadata";
#   thawtest-priv  10.99.0.10 (a private network's host): httpd saying
#                  "private".
# Each is one veth pair: the host's end (tw-inet, tw-meta, tw-priv) holds
# .1 of a /24 (169.254.169.0/24 for metadata), the namespace's end the
# host, with a default route back through the host's end.  The host routes
# to them over those links alone.  Web roots, pid files and dnsmasq's
# config live in DIR.  `down` removes it all, also after a failed `up`.
set -u
action=$1 dir=$2
# nested-kvm.sh's L1 has PATH=/bin; the host's programs keep their paths.
# Its sh (busybox's) runs its own applets before any in PATH, and its ip
# has no netns: iproute2's, by its path (a function wins over an applet;
# the servers' background commands name it themselves, as a background
# function's shell would hold the caller's output open as long as they run).
PATH=/usr/sbin:/usr/bin:/sbin:$PATH
ip() { /usr/sbin/ip "$@"; }

# name, host end's address, namespace's address, marker
hosts="inet:198.51.100.1:198.51.100.10:internet
meta:169.254.169.1:169.254.169.254:metadata
priv:10.99.0.1:10.99.0.10:private"

down() {
	for pid in "$dir"/*.pid; do
		[ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null
	done
	for h in $hosts; do
		name=${h%%:*}
		ip link del "tw-$name" 2>/dev/null
		ip netns del "thawtest-$name" 2>/dev/null
	done
	rm -rf "$dir"
}

up() {
	mkdir -p "$dir" /run/netns || return 1
	# dnsmasq looks its user up (L1 has no /etc/passwd).
	[ -e /etc/passwd ] || { mkdir -p /etc &&
		echo "root:x:0:0:root:/:/bin/sh" >/etc/passwd; }
	for h in $hosts; do
		IFS=: read -r name host_end addr marker <<EOF
$h
EOF
		ns=thawtest-$name
		ip netns add "$ns" &&
			ip link add "tw-$name" type veth peer name eth0 \
				netns "$ns" &&
			ip addr add "$host_end/24" dev "tw-$name" &&
			ip link set "tw-$name" up &&
			ip -n "$ns" addr add "$addr/24" dev eth0 &&
			ip -n "$ns" link set eth0 up &&
			ip -n "$ns" link set lo up &&
			ip -n "$ns" route add default via "$host_end" || return 1
		mkdir -p "$dir/www-$name" &&
			echo "$marker" >"$dir/www-$name/index.html" || return 1
		/usr/sbin/ip netns exec "$ns" busybox httpd -f -p 80 \
			-h "$dir/www-$name" </dev/null >/dev/null 2>&1 &
		echo $! >"$dir/httpd-$name.pid"
	done
	# The link to 169.254.169.0/24 is the host's only way there; make
	# sure it is this one (the host may route link-local elsewhere).
	ip route replace 169.254.169.254/32 dev tw-meta || return 1
	/usr/sbin/ip netns exec thawtest-inet dnsmasq --keep-in-foreground \
		--user=root \
		--no-resolv --no-hosts --listen-address=198.51.100.10 \
		--bind-interfaces --address=/internet.thaw.test/198.51.100.10 \
		--pid-file="$dir/dnsmasq.pidfile" </dev/null >/dev/null 2>&1 &
	echo $! >"$dir/dnsmasq.pid"
	# Up once each server answers from the host.
	for try in $(seq 20); do
		if curl -s -m 1 http://198.51.100.10/ | grep -q internet &&
			curl -s -m 1 http://169.254.169.254/ | grep -q metadata &&
			curl -s -m 1 http://10.99.0.10/ | grep -q private &&
			[ -s "$dir/dnsmasq.pidfile" ]; then
			return 0
		fi
		sleep 0.2
	done
	echo "network-world.sh: the world's servers do not answer" >&2
	ip -br addr >&2
	ip route >&2
	curl -sS -m 1 -o /dev/null http://198.51.100.10/ >&2
	ls "$dir" >&2
	return 1
}

case $action in
up)
	down
	up || {
		down
		exit 1
	}
	;;
down) down ;;
*)
	echo "usage: network-world.sh up|down DIR" >&2
	exit 2
	;;
esac
