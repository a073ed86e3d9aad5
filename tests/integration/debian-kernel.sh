#!/bin/bash
# debian-kernel.sh FLAVOUR: fetches Debian's current kernel image package of
# FLAVOUR ("amd64", "cloud-amd64"), unpacks it once into the thaw cache and
# prints that directory, which holds vmlinuz and lib/modules/<version>/.
# The tests use it for the stock guest kernel thaw-vmm must still boot and
# for the L1 host of nested-kvm.sh.
set -euo pipefail
flavour=${1:?usage: debian-kernel.sh amd64|cloud-amd64}
cache=${THAW_CACHE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/thaw}/debian-kernel
pkg=$(apt-cache depends "linux-image-$flavour" 2>/dev/null |
	sed -n "s/.*Depends: \(linux-image-[0-9].*-$flavour\)\$/\1/p" | head -n 1)
if [ -z "$pkg" ]; then
	echo "debian-kernel: cannot resolve linux-image-$flavour (run apt-get update)" >&2
	exit 1
fi
dir=$cache/$pkg
if [ ! -f "$dir/vmlinuz" ]; then
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	(cd "$tmp" && apt-get download -q "$pkg" >download.log 2>&1) ||
		{ cat "$tmp/download.log" >&2; exit 1; }
	dpkg-deb -x "$tmp"/*.deb "$tmp/x"
	mkdir -p "$cache"
	rm -rf "$dir"
	mkdir "$dir"
	cp -L "$tmp/x/boot"/vmlinuz-* "$dir/vmlinuz.tmp"
	mv "$tmp/x/lib" "$dir/lib"
	mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"
fi
echo "$dir"
