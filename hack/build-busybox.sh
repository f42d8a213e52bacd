#!/usr/bin/env bash
# build-busybox.sh OUT: build upstream busybox, statically linked, into OUT, for the e2e
# suite's busybox image (images/e2eimages).
#
# Why not Debian's busybox-static: Debian patches ash to drop environment variables whose
# names are not shell identifiers (debian/patches/revert-9c143ce5…), which upstream
# busybox, and so upstream's busybox test image, passes on to children; Kubernetes allows
# such names (envFrom a ConfigMap key "data-1"), and the suite's "consumable via the
# environment" tests read them from `sh -c env`. Bash as /bin/sh keeps them but prints
# other error messages than ash, which other tests compare word for word.
#
# The source is upstream's tarball as Debian ships it (the .orig.tar of this machine's
# release's busybox source package, fetched with apt from Debian's archive through a
# private apt state under the build directory: the machine's apt configuration is not
# touched), built with busybox's defconfig and no Debian patch.
set -euo pipefail

out=${1:?usage: $0 OUT}
for t in gcc make tar bzip2 apt-get; do
	command -v "$t" >/dev/null || { echo "build-busybox: $t not found (Debian packages gcc, make, tar, bzip2, apt)" >&2; exit 1; }
done
. /etc/os-release
codename=${VERSION_CODENAME:?build-busybox: no VERSION_CODENAME in /etc/os-release}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial"
echo "deb-src [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian $codename main" >"$work/apt/sources.list"
apt=(apt-get -q -o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
	-o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache" -o APT::Sandbox::User=root)
"${apt[@]}" update >"$work/apt.log" 2>&1 || { cat "$work/apt.log" >&2; exit 1; }
(cd "$work" && "${apt[@]}" source --download-only busybox >>"$work/apt.log" 2>&1) || { cat "$work/apt.log" >&2; exit 1; }
orig=$(ls "$work"/busybox_*.orig.tar.* 2>/dev/null | head -1)
test -n "$orig" || { echo "build-busybox: no upstream tarball among $(ls "$work")" >&2; exit 1; }
tar -xf "$orig" -C "$work"
src=$(find "$work" -maxdepth 1 -type d -name 'busybox-*' | head -1)

cd "$src"
make -s defconfig >/dev/null
# Static, so the image needs no libraries; tc needs kernel headers' CBQ, gone since 6.3.
sed -i -e 's/^# CONFIG_STATIC is not set/CONFIG_STATIC=y/' -e 's/^CONFIG_TC=y/# CONFIG_TC is not set/' .config
make -s oldconfig </dev/null >/dev/null
make -s -j"$(nproc)" busybox >"$work/build.log" 2>&1 || { tail -40 "$work/build.log" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
install -m 0755 busybox "$out"
# It runs: its first line names the version. sed reads to the end: with head, busybox could
# write into a closed pipe and die of SIGPIPE, which pipefail makes the script's failure.
"$out" --help | sed -n 1p
