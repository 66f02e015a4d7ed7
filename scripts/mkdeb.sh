#!/usr/bin/env bash
# make deb: Debian packages of this tree, built with dpkg-deb (no
# debhelper), into $BUILD/deb:
#   libpsched1      the shared library (SONAME libpsched.so.1)
#   libpsched-dev   headers, libpsched.so, libpsched.a, psched.pc
#   psched-tools    ps-scheduler, ps-server, ps-worker, ps-bench, man pages
#   python3-psched  the Python package (KVStore, launcher), psched-launch
# Files come from `make install DESTDIR=... PREFIX=/usr` (library in the
# multiarch directory); shared-library dependencies from dpkg-shlibdeps.
# Needs dpkg-dev (dpkg-shlibdeps, dpkg-architecture).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
VERSION=${VERSION:-$(cat VERSION)}
# A Debian revision: the packaging of this upstream version.
DEBVER=${DEBVER:-$VERSION-1}
arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
out=$BUILD/deb
stage=$out/stage
rm -rf "$out" && mkdir -p "$out"
out=$(cd "$out" && pwd)
stage=$out/stage

# A CUDA build links NVIDIA's static runtime into libpsched and names
# /usr/local/cuda in psched.pc: fine for one site, not for Debian.
if grep -q PSCHED_HAVE_CUDA "$BUILD/.flags" 2>/dev/null; then
	echo "mkdeb: note: $BUILD is a CUDA build (libcudart_static inside" \
		"libpsched, /usr/local/cuda in psched.pc); packages without" \
		"CUDA: make deb CUDA=0 BUILD=build-deb" >&2
fi
make --no-print-directory -s BUILD="$BUILD" DESTDIR="$stage" PREFIX=/usr \
	LIBDIR="/usr/lib/$ma" install >"$out/install.log" 2>&1 ||
	{ tail -20 "$out/install.log" >&2; exit 1; }

# DEB_MAINTAINER: who signs for the packages (lintian wants a real address).
maint=${DEB_MAINTAINER:-"psched developers <dev@psched.local>"}
pkgdir() { echo "$out/pkg/$1"; }

# move PKG PATH...: move staged files into the package's tree.
move() {
	local pkg=$1 p
	shift
	for p in "$@"; do
		mkdir -p "$(pkgdir "$pkg")/$(dirname "$p")"
		mv "$stage/$p" "$(pkgdir "$pkg")/$p"
	done
}
move libpsched1 "usr/lib/$ma/libpsched.so.1"
move libpsched-dev "usr/lib/$ma/libpsched.so" "usr/lib/$ma/libpsched.a" \
	"usr/lib/$ma/pkgconfig/psched.pc" usr/include
# The launcher is Python: it goes with the package it runs.
move python3-psched usr/bin/psched-launch usr/share/man/man1/psched-launch.1
move psched-tools usr/bin usr/share/man
move python3-psched usr/lib/python3
left=$(cd "$stage" && find . -type f -o -type l)
if [ -n "$left" ]; then
	echo "mkdeb: staged files in no package: $left" >&2
	exit 1
fi
gzip -9n "$(pkgdir psched-tools)"/usr/share/man/man1/*.1 \
	"$(pkgdir python3-psched)"/usr/share/man/man1/*.1
# As dh_strip and dh_fixperms would: no debug symbols in the packages
# (the build tree keeps them), shared library not executable.
strip --remove-section=.comment --remove-section=.note --strip-unneeded \
	"$(pkgdir libpsched1)/usr/lib/$ma/libpsched.so.1"
chmod 644 "$(pkgdir libpsched1)/usr/lib/$ma/libpsched.so.1"
strip --remove-section=.comment --remove-section=.note \
	"$(pkgdir psched-tools)"/usr/bin/ps-*
strip --strip-debug --enable-deterministic-archives \
	"$(pkgdir libpsched-dev)/usr/lib/$ma/libpsched.a"
# The date of the last commit, so that rebuilding the same tree gives the
# same changelog.
when=$(date -R -d "@$(git log -1 --format=%ct 2>/dev/null || date +%s)")

# Dependencies on shared libraries, as debhelper would compute them.
shlibdeps() { # files... -> "pkg (>= v), ..."
	local d=$out/shlibdeps
	mkdir -p "$d/debian"
	printf 'Source: psched\n\nPackage: x\nArchitecture: any\n' >"$d/debian/control"
	(cd "$d" && dpkg-shlibdeps -O -l"$(pkgdir libpsched1)/usr/lib/$ma" "$@" 2>"$d/err") |
		sed -n 's/^shlibs:Depends=//p'
}

# control PKG ARCH DEPENDS SECTION DESCRIPTION-LINES...
control() {
	local pkg=$1 a=$2 deps=$3 sec=$4 d
	d=$(pkgdir "$pkg")
	shift 4
	mkdir -p "$d/DEBIAN" "$d/usr/share/doc/$pkg"
	{
		echo "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
		echo "Upstream-Name: psched"
		echo
		echo "Files: *"
		echo "Copyright: 2026 The psched authors"
		echo "License: MIT"
		sed 's/^$/./; s/^/ /' LICENSE
	} >"$d/usr/share/doc/$pkg/copyright"
	printf '%s\n' "psched ($DEBVER) unstable; urgency=medium" "" \
		"  * psched $VERSION, packaged by scripts/mkdeb.sh." "" \
		" -- $maint  $when" |
		gzip -9n >"$d/usr/share/doc/$pkg/changelog.Debian.gz"
	{
		echo "Package: $pkg"
		echo "Version: $DEBVER"
		echo "Architecture: $a"
		echo "Maintainer: $maint"
		echo "Installed-Size: $(du -sk --exclude=DEBIAN "$d" | cut -f1)"
		[ -n "$deps" ] && echo "Depends: $deps"
		echo "Section: $sec"
		echo "Priority: optional"
		echo "Homepage: https://psched.local/"
		echo "Description: $1"
		shift
		for l in "$@"; do echo " $l"; done
		[ -n "${EXTRA_FIELDS:-}" ] && printf '%s\n' "$EXTRA_FIELDS"
	} >"$d/DEBIAN/control"
	(cd "$d" && find usr -type f -exec md5sum {} +) >"$d/DEBIAN/md5sums"
}

lib_deps=$(shlibdeps "$(pkgdir libpsched1)/usr/lib/$ma/libpsched.so.1")
control libpsched1 "$arch" "$lib_deps" libs \
	"parameter-server communication library" \
	"psched moves partitioned tensors between the workers and servers of a" \
	"parameter-server job (TCP, shared memory, RDMA) with priority- and" \
	"credit-scheduled transfers, a scheduler node with an online tuner and" \
	"an MXNet-style KVStore.  This package has the shared library."
d=$(pkgdir libpsched1)
echo "libpsched 1 libpsched1 (>= $VERSION)" >"$d/DEBIAN/shlibs"
echo "activate-noawait ldconfig" >"$d/DEBIAN/triggers"

dev_deps="libpsched1 (= $DEBVER), libprotobuf-c-dev, libgsl-dev, nettle-dev, zlib1g-dev"
# psched.pc names the RDMA libraries for static links when built with them.
if grep -q -- -lrdmacm "$(pkgdir libpsched-dev)/usr/lib/$ma/pkgconfig/psched.pc"; then
	dev_deps="$dev_deps, libibverbs-dev, librdmacm-dev"
fi
control libpsched-dev "$arch" "$dev_deps" libdevel \
	"parameter-server communication library - development files" \
	"Headers (psched.h, psched/kvstore.h), the static library, the" \
	"libpsched.so link and psched.pc for pkg-config."

tools_deps=$(shlibdeps "$(pkgdir psched-tools)"/usr/bin/*)
control psched-tools "$arch" "$tools_deps" net \
	"parameter-server programs: scheduler, server, worker, benchmark" \
	"ps-scheduler, ps-server and ps-worker run the nodes of a psched job" \
	"(ps-lite DMLC_* environment); ps-bench measures push/pull throughput" \
	"against plain TCP."

EXTRA_FIELDS="Recommends: psched-tools (= $DEBVER)
Suggests: python3-torch" \
control python3-psched all \
	"python3:any, python3-numpy, libpsched1 (>= $VERSION)" python \
	"parameter-server communication library - Python 3 package" \
	"MXNet-style KVStore (psched.kv.create('dist_sync')) over libpsched," \
	"and the job launcher (psched-launch: local, ssh, Slurm, mpirun)."

for pkg in libpsched1 libpsched-dev psched-tools python3-psched; do
	d=$(pkgdir "$pkg")
	a=$(sed -n 's/^Architecture: //p' "$d/DEBIAN/control")
	# Owned by root in the archive without needing root here.
	dpkg-deb --root-owner-group -Zxz --build "$d" "$out/${pkg}_${DEBVER}_$a.deb" >/dev/null
	echo "mkdeb: $out/${pkg}_${DEBVER}_$a.deb"
done
rm -rf "$stage" "$out/shlibdeps"
