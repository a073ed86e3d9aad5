#!/usr/bin/env bash
# build.sh - build thaw's guest kernel (an ELF vmlinux) with a content-hash cache.
#
# Usage: guest/kernel/build.sh [--cache-dir DIR]
#
# Source: Debian's linux-source-6.1 package (/usr/src/linux-source-6.1.tar.xz).
# Recipe: unpack, apply guest/kernel/*.patch (sorted, -p1), `make tinyconfig`,
# merge guest/kernel/thaw.config, `make olddefconfig`, check that every option
# of the fragment came out as written, `make vmlinux`.
#
# Cache: DIR defaults to ${THAW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/thaw}.
# The key is a sha256 over the linux-source-6.1 package version, thaw.config,
# every *.patch and this script. The result is DIR/kernel/<key>/vmlinux with
# the final kernel config beside it as DIR/kernel/<key>/.config. On a cache hit
# nothing is built. A per-key flock serialises concurrent builds of one key.
#
# Progress goes to stderr; the last line on stdout is the path of the vmlinux.
set -euo pipefail

SRC_PKG=linux-source-6.1
SRC_TAR=/usr/src/linux-source-6.1.tar.xz

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache=${THAW_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/thaw}

log() { printf 'build.sh: %s\n' "$*" >&2; }
die() { printf 'build.sh: error: %s\n' "$*" >&2; exit 1; }

while (($#)); do
    case $1 in
    --cache-dir) (($# >= 2)) || die "--cache-dir needs a directory"; cache=$2; shift 2 ;;
    --cache-dir=*) cache=${1#*=}; shift ;;
    -h | --help) sed -n '2,17s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (usage: $0 [--cache-dir DIR])" ;;
    esac
done

# --- Prerequisites ---------------------------------------------------------
[[ $(uname -m) == x86_64 ]] || die "the guest kernel is built natively on x86_64 only"
status=$(dpkg-query -W -f='${db:Status-Status}' "$SRC_PKG" 2>/dev/null || true)
[[ $status == installed && -f $SRC_TAR ]] ||
    die "$SRC_PKG is not installed: apt-get install $SRC_PKG"
version=$(dpkg-query -W -f='${Version}' "$SRC_PKG")
for tool in make gcc bc bison flex patch flock sha256sum; do
    command -v "$tool" >/dev/null ||
        die "'$tool' not found: apt-get install build-essential bc bison flex libelf-dev libssl-dev patch"
done

# --- Cache key ---------------------------------------------------------------
shopt -s nullglob
export LC_ALL=C # stable glob order and tool messages

# input_key DIR: sha256 over the source package version and DIR's thaw.config,
# *.patch (sorted) and build.sh.
input_key() {
    {
        printf '%s %s\n' "$SRC_PKG" "$version"
        for f in "$1/thaw.config" "$1"/*.patch "$1/build.sh"; do
            printf '%s %s\n' "${f##*/}" "$(sha256sum <"$f" | cut -d' ' -f1)"
        done
    } | sha256sum | cut -d' ' -f1
}
key=$(input_key "$here")
out=$cache/kernel/$key

if [[ -f $out/vmlinux ]]; then
    echo "$out/vmlinux"
    exit 0
fi

mkdir -p "$cache/kernel"
exec 9>"$cache/kernel/.lock-$key"
if ! flock -n 9; then
    log "another build of $key is running; waiting for it"
    flock 9
fi
if [[ -f $out/vmlinux ]]; then # built by whoever held the lock
    echo "$out/vmlinux"
    exit 0
fi

# --- Build -----------------------------------------------------------------
work=$(mktemp -d "$cache/kernel/.build-$key.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/src
start=$SECONDS
log "building kernel $key ($SRC_PKG $version) in $work"

# Build from a snapshot of the inputs, so that edits made while this runs
# cannot end up in the cache under the old key.
inputs=$work/inputs
mkdir "$inputs"
cp "$here/thaw.config" "$here"/*.patch "$here/build.sh" "$inputs/"
[[ $(input_key "$inputs") == "$key" ]] || die "$here changed while starting the build; run it again"

mkdir "$src"
tar -xf "$SRC_TAR" -C "$src" --strip-components=1

for p in "$inputs"/*.patch; do
    log "applying ${p##*/}"
    patch -d "$src" -p1 --forward --batch --fuzz=0 --no-backup-if-mismatch <"$p" >&2 ||
        die "patch ${p##*/} does not apply to $SRC_PKG $version"
done

# Fixed build identity, so a given key always yields the same `uname -v`.
export KBUILD_BUILD_USER=thaw KBUILD_BUILD_HOST=thaw
KBUILD_BUILD_TIMESTAMP=$(date -u -R -d "@$(stat -c %Y "$SRC_TAR")")
export KBUILD_BUILD_TIMESTAMP
unset KBUILD_OUTPUT KCONFIG_CONFIG CROSS_COMPILE
kmake() { make -C "$src" ARCH=x86_64 "$@" >&2; }

kmake -s tinyconfig
(cd "$src" && scripts/kconfig/merge_config.sh -m .config "$inputs/thaw.config") >/dev/null
kmake -s olddefconfig

# Every option of the fragment must come out exactly as requested: this catches
# typos and options whose dependencies are not met (olddefconfig drops them).
bad=0
while IFS= read -r line; do
    if [[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]]; then
        opt=${BASH_REMATCH[1]} want=${BASH_REMATCH[2]}
    elif [[ $line =~ ^#\ (CONFIG_[A-Za-z0-9_]+)\ is\ not\ set ]]; then
        opt=${BASH_REMATCH[1]} want=n
    else
        continue
    fi
    have=$(sed -n "s/^$opt=//p" "$src/.config")
    [[ -n $have ]] || have=n
    if [[ $have != "$want" ]]; then
        log "config: $opt is '$have' in the final .config, thaw.config asks for '$want'"
        bad=1
    fi
done <"$inputs/thaw.config"
((bad == 0)) || die "thaw.config does not survive olddefconfig (see above)"

kmake -j"$(nproc)" vmlinux

# --- Install (atomically: stage, then rename the directory) -----------------
stage=$work/out
mkdir "$stage"
cp "$src/vmlinux" "$stage/vmlinux"
cp "$src/.config" "$stage/.config"
mv -T "$stage" "$out"
log "built $out/vmlinux in $((SECONDS - start)) s"
echo "$out/vmlinux"
