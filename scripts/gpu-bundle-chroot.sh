#!/usr/bin/env bash
# make gpu-bundle-check: the GPU bundle's check in a Debian 12 chroot
# that has none of psched's packages (debootstrap's minimal base, plus
# python3 and python3-numpy, as the GPU machine has Python): the bundle
# must run there from its own files, as far as "no CUDA device".
#   scripts/gpu-bundle-chroot.sh BUNDLE
# Root only (debootstrap, chroot, mounts); downloads ~60 MB.
#   FRESH_MIRROR  Debian mirror (default http://deb.debian.org/debian)
#   FRESH_DIR     the chroot (default /var/tmp/psched-gpu-chroot; kept and
#                 reused: a second run only copies the bundle and runs)
# Exit status: gpu-check.sh's, its report printed.
set -euo pipefail
bundle=$(cd "${1:?usage: gpu-bundle-chroot.sh BUNDLE}" && pwd)
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
root=${FRESH_DIR:-/var/tmp/psched-gpu-chroot}

if [ "$(id -u)" != 0 ]; then
	echo "gpu-bundle-chroot: needs root (debootstrap, chroot, mount)" >&2
	exit 1
fi
command -v debootstrap >/dev/null ||
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		-o DPkg::Lock::Timeout=600 --no-install-recommends debootstrap

mounted=()
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -l "${mounted[i]}" 2>/dev/null || true
	done
}
trap cleanup EXIT
mnt() { # fstype-or-bind source target
	mkdir -p "$3"
	if [ "$1" = bind ]; then mount --bind "$2" "$3"; else mount -t "$1" "$2" "$3"; fi
	mounted+=("$3")
}

if [ ! -x "$root/usr/bin/python3" ]; then
	echo "gpu-bundle-chroot: debootstrap bookworm (minbase) into $root"
	debootstrap --variant=minbase --include=python3,python3-numpy \
		--arch="$(dpkg --print-architecture)" bookworm "$root" "$mirror" \
		>"$root.log" 2>&1 || {
		tail -n 30 "$root.log" >&2
		echo "gpu-bundle-chroot: debootstrap failed (log $root.log)" >&2
		exit 1
	}
fi
# What the base has of psched's libraries: nothing may be found there.
for l in libprotobuf-c.so.1 libgsl.so.27 libibverbs.so.1 librdmacm.so.1; do
	if [ -n "$(find "$root/usr/lib" -name "$l" 2>/dev/null)" ]; then
		echo "gpu-bundle-chroot: the chroot has $l already; not a bare system" >&2
		exit 1
	fi
done
mnt proc proc "$root/proc"
mnt bind /dev "$root/dev"
mnt tmpfs tmpfs "$root/dev/shm"
rm -rf "$root/bundle" "$root/out"
cp -a "$bundle" "$root/bundle"
rc=0
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	bash /bundle/gpu-check.sh /out --allow-skip >"$root.check.log" 2>&1 || rc=$?
cat "$root/out/report.txt" 2>/dev/null || tail -n 40 "$root.check.log"
echo "gpu-bundle-chroot: gpu-check.sh exited $rc in $root"
exit $rc
