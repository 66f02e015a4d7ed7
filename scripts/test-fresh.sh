#!/usr/bin/env bash
# make test-fresh: the README's two commands on a bare Debian 12.
#
# Builds a Debian 12 (bookworm) chroot with debootstrap (default variant:
# what a fresh minimal install has; no make, no compiler), copies this
# source tree into it (tracked and untracked-but-not-ignored files, as
# they are in the work tree), and runs there, as root, exactly
#     sh make.sh run
#     sh make.sh test
# PSCHED_DEB_INSTALL=1 there: tests/integration/test_deb.sh really
# installs the .debs (apt-get) and runs a job from /usr, then purges them.
# Root only (debootstrap, chroot, mounts).  Downloads ~150 MB for the base
# system and several hundred MB more for the build and test packages;
# takes a long time (the whole test suite runs).  Not part of `make test`.
#
#   FRESH_MIRROR  Debian mirror (default http://deb.debian.org/debian)
#   FRESH_DIR     where the chroot goes (default /var/tmp/psched-fresh.PID);
#                 removed at the end unless FRESH_KEEP=1
#   FRESH_CMDS    the commands, ';'-separated (default the README's two),
#                 e.g. FRESH_CMDS='sh make.sh run' for the first one only
# Exit status: 0 when every command passed; the log of each is printed.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
mirror=${FRESH_MIRROR:-http://deb.debian.org/debian}
root=${FRESH_DIR:-/var/tmp/psched-fresh.$$}
cmds=${FRESH_CMDS:-sh make.sh run; sh make.sh test}

if [ "$(id -u)" != 0 ]; then
	echo "test-fresh: needs root (debootstrap, chroot, mount)" >&2
	exit 1
fi
if ! command -v debootstrap >/dev/null; then
	echo "test-fresh: installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		-o DPkg::Lock::Timeout=600 --no-install-recommends debootstrap
fi

mounted=()
cleanup() {
	local i
	for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
		umount -l "${mounted[i]}" 2>/dev/null || true
	done
	if [ "${FRESH_KEEP:-0}" != 1 ] && [ -d "$root" ]; then
		# Never follow into anything still mounted.
		if ! grep -q " $root/" /proc/mounts; then
			rm -rf --one-file-system "$root"
		else
			echo "test-fresh: $root still has mounts; left in place" >&2
		fi
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(date +%s)
if [ ! -x "$root/bin/sh" ]; then
	echo "test-fresh: debootstrap bookworm into $root from $mirror"
	debootstrap --arch="$(dpkg --print-architecture)" bookworm "$root" "$mirror" \
		>"$root.debootstrap.log" 2>&1 || {
		tail -n 30 "$root.debootstrap.log" >&2
		echo "test-fresh: debootstrap failed (log $root.debootstrap.log)" >&2
		exit 1
	}
	rm -f "$root.debootstrap.log"
fi
echo "test-fresh: base system ready after $(($(date +%s) - t0)) s;" \
	"make in the chroot: $(chroot "$root" sh -c 'command -v make || echo none')"

# The chroot's apt reaches the same mirror; daemons that packages would
# start (sshd, munge, slurm for the launcher tests) must not start here.
printf 'deb %s bookworm main\n' "$mirror" >"$root/etc/apt/sources.list"
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"

mnt() { # fstype-or-bind source target
	mkdir -p "$3"
	if [ "$1" = bind ]; then mount --bind "$2" "$3"; else mount -t "$1" "$2" "$3"; fi
	mounted+=("$3")
}
# The chroot's / must be a mount point: ip netns exec (the launcher's ssh
# test) makes / a slave mount in each namespace it enters.
mnt bind "$root" "$root"
mount --make-private "$root"
mnt proc proc "$root/proc"
mnt sysfs sysfs "$root/sys"
mnt bind /dev "$root/dev"
mnt devpts devpts "$root/dev/pts"
mnt tmpfs tmpfs "$root/run"
mnt tmpfs tmpfs "$root/dev/shm"

dst=$root/root/psched
rm -rf "$dst" && mkdir -p "$dst"
git ls-files -co --exclude-standard -z | tar --null -T - -cf - | tar -xf - -C "$dst"

rc=0 i=0
IFS=';' read -ra list <<<"$cmds"
for c in "${list[@]}"; do
	c=$(echo "$c" | sed 's/^ *//; s/ *$//')
	[ -n "$c" ] || continue
	i=$((i + 1))
	log=$src/build/test-fresh.$i.log
	mkdir -p "$src/build"
	echo "test-fresh: [$i] $c (log $log)"
	t1=$(date +%s)
	if chroot "$root" /usr/bin/env -i HOME=/root TERM=dumb PSCHED_DEB_INSTALL=1 \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		sh -c "cd /root/psched && $c" >"$log" 2>&1; then
		echo "test-fresh: [$i] passed in $(($(date +%s) - t1)) s; last lines:"
	else
		r=$?
		echo "test-fresh: [$i] FAILED (exit $r) after $(($(date +%s) - t1)) s; last lines:"
		rc=1
	fi
	tail -n 25 "$log" | sed 's/^/    /'
done
echo "test-fresh: total $(($(date +%s) - t0)) s"
exit $rc
