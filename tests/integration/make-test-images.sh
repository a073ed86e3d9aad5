#!/bin/sh
# CTest fixture: puts the guest images the integration tests boot into
# $2 (a directory in the build tree) as stable names: thaw's guest kernel
# (built once per machine and cached by guest/kernel/build.sh), Debian's
# stock cloud kernel (a bzImage thaw-vmm must keep booting), and one
# initramfs per test /init (packed by thaw-mkinitramfs, cached by content),
# plus agent.cpio, the default guest of thaw run (thaw-agent as /init), and
# hostile.cpio, a guest whose /init misbehaves on purpose (hostile_agent.c).
set -eu
mkinitramfs=$1 out=$2 src=$3 agent=$4 hostile=$5
mkdir -p "$out"
ln -sfn "$("$src/guest/kernel/build.sh")" "$out/vmlinux"
ln -sfn "$("$src/tests/integration/debian-kernel.sh" cloud-amd64)/vmlinuz" \
	"$out/stock-vmlinuz"
for init in "$src"/tests/integration/init-*; do
	name=$(basename "$init")
	ln -sfn "$("$mkinitramfs" --init "$init")" "$out/${name#init-}.cpio"
done
ln -sfn "$("$mkinitramfs" --init "$agent")" "$out/agent.cpio"
ln -sfn "$("$mkinitramfs" --init "$hostile")" "$out/hostile.cpio"
echo "test images ready in $out"
