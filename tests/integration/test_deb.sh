#!/usr/bin/env bash
# make deb: the four Debian packages build (scripts/mkdeb.sh), carry the
# files, versions and dependencies they should (dpkg-deb --info/--contents;
# apt-get resolves them against this system's packages, simulated), and a
# job runs from their contents: a C program built with the -dev package's
# pkg-config file, and a 2-server x 2-worker KVStore job started by the
# packaged launcher with the packaged programs, ending with exact sums.
#
# On this (shared) machine the packages are unpacked with dpkg -x into a
# scratch directory, never installed: an installed libpsched.so.1 and
# /usr/bin/ps-* would be found by other trees' tests.  With
# PSCHED_DEB_INSTALL=1 (scripts/test-fresh.sh sets it in its throw-away
# chroot) they are really installed with apt-get, the job runs from /usr,
# and they are purged again.
. "$(dirname "$0")/lib.sh"
PYTHON=/usr/bin/python3
for t in dpkg-deb dpkg-shlibdeps pkg-config gcc; do
	command -v $t >/dev/null || { echo "$t is not installed (dpkg-dev)"; exit 77; }
done
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "python3-numpy is not installed"; exit 77; }
if ldd "$BIN/ps-server" | grep -q 'lib[at]san'; then
	echo "sanitizer build: the packages are built and run from the plain build"
	exit 77
fi
ver=$(cat VERSION)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)

# Build the packages from a copy of the build tree's outputs (make deb
# would rewrite $BUILD/deb under a concurrent make).
bash scripts/mkdeb.sh >"$TMP/mkdeb.log" 2>&1 || { cat "$TMP/mkdeb.log"; die "mkdeb.sh failed"; }
deb() { ls "$BUILD"/deb/"$1"_"$ver"-1_*.deb 2>/dev/null; }
for p in libpsched1 libpsched-dev psched-tools python3-psched; do
	[ -f "$(deb $p)" ] || die "no $p package for $ver in $BUILD/deb"
	info=$(dpkg-deb --info "$(deb $p)")
	echo "$info" | grep -q "^ Version: $ver-1$" || die "$p: version is not $ver-1"
	dpkg-deb --contents "$(deb $p)" >"$TMP/$p.list" || die "dpkg-deb --contents $p failed"
	grep -q "usr/share/doc/$p/copyright" "$TMP/$p.list" || die "$p has no copyright file"
done
grep -q "usr/include/psched.h" "$TMP/libpsched-dev.list" || die "libpsched-dev lacks psched.h"
grep -q "usr/lib/$ma/pkgconfig/psched.pc" "$TMP/libpsched-dev.list" || die "libpsched-dev lacks psched.pc"
field() { dpkg-deb --field "$(deb "$1")" "$2"; }
field libpsched1 Depends | grep -q 'libprotobuf-c1' || die "libpsched1 does not depend on libprotobuf-c1: $(field libpsched1 Depends)"
field libpsched-dev Depends | grep -q "libpsched1 (= $ver-1)" || die "libpsched-dev does not pin libpsched1: $(field libpsched-dev Depends)"
field python3-psched Depends | grep -q 'libpsched1' || die "python3-psched does not depend on libpsched1"
field python3-psched Depends | grep -q 'python3-numpy' || die "python3-psched does not depend on python3-numpy"
[ "$(field python3-psched Architecture)" = all ] || die "python3-psched is not Architecture: all"
for prog in ps-scheduler ps-server ps-worker ps-bench; do
	grep -q "usr/bin/$prog\$" "$TMP/psched-tools.list" || die "psched-tools lacks $prog"
	grep -q "usr/share/man/man1/$prog.1.gz" "$TMP/psched-tools.list" || die "psched-tools lacks the man page of $prog"
done
grep -q "usr/bin/psched-launch\$" "$TMP/python3-psched.list" || die "python3-psched lacks psched-launch"
grep -q "usr/share/man/man1/psched-launch.1.gz" "$TMP/python3-psched.list" || die "python3-psched lacks the man page of psched-launch"
# Every package's dependencies resolve on this system (nothing installed).
apt-get install -s -o DPkg::Lock::Timeout=120 "$PWD"/"$BUILD"/deb/*.deb >"$TMP/apt-sim.log" 2>&1 ||
	{ cat "$TMP/apt-sim.log"; die "apt-get cannot resolve the packages' dependencies"; }
grep -q '^Conf python3-psched' "$TMP/apt-sim.log" || { cat "$TMP/apt-sim.log"; die "apt-get would not configure python3-psched"; }

if [ "${PSCHED_DEB_INSTALL:-0}" = 1 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y -qq -o DPkg::Lock::Timeout=600 "$PWD"/"$BUILD"/deb/*.deb >"$TMP/apt.log" 2>&1 ||
		{ cat "$TMP/apt.log"; die "apt-get install of the packages failed"; }
	trap 'apt-get purge -y -qq libpsched1 libpsched-dev psched-tools python3-psched >/dev/null 2>&1; cleanup' EXIT
	R=""
	unset PSCHED_LIBRARY PSCHED_BIN_DIR PYTHONPATH
	export PATH=/usr/bin:/bin
	cc_env=()
	man -w ps-worker >/dev/null 2>&1 || [ ! -x /usr/bin/man ] || die "man does not find ps-worker(1)"
else
	R=$TMP/root
	for p in libpsched1 libpsched-dev psched-tools python3-psched; do
		dpkg-deb -x "$(deb $p)" "$R"
	done
	export PSCHED_LIBRARY=$R/usr/lib/$ma/libpsched.so.1
	export PSCHED_BIN_DIR=$R/usr/bin
	export PYTHONPATH=$R/usr/lib/python3/dist-packages
	export PATH=$R/usr/bin:$PATH
	cc_env=(PKG_CONFIG_SYSROOT_DIR="$R" PKG_CONFIG_LIBDIR="$R/usr/lib/$ma/pkgconfig:/usr/lib/$ma/pkgconfig:/usr/share/pkgconfig")
fi
lib=$R/usr/lib/$ma/libpsched.so.1
[ -f "$lib" ] || die "no $lib"
objdump -p "$lib" | grep -q 'SONAME *libpsched.so.1$' || die "SONAME of the packaged library is not libpsched.so.1"
for prog in ps-scheduler ps-server ps-worker ps-bench; do
	v=$("$R/usr/bin/$prog" --version) || die "$prog --version failed"
	[ "$v" = "$prog $ver" ] || die "$prog --version says '$v', want '$prog $ver'"
done
v=$(cd "$TMP" && "$PYTHON" -c 'import psched; print(psched.__version__)') || die "import psched from the package failed"
[ "$v" = "$ver" ] || die "psched.__version__ is '$v', want $ver"

# A C program built only from the -dev package: psched_version() and a
# config from the environment.
cat >"$TMP/use.c" <<'C'
#include <stdio.h>
#include <string.h>
#include <psched.h>
int main(int argc, char **argv)
{
	struct psched_cfg *cfg;
	char nw[16];

	if (psched_cfg_create(&cfg) || psched_cfg_from_env(cfg) ||
	    psched_cfg_get(cfg, "num-worker", nw, sizeof(nw))) {
		printf("env: %s\n", psched_errmsg());
		return 1;
	}
	psched_cfg_destroy(cfg);
	printf("%s %s\n", psched_version(), nw);
	return argc > 1 && strcmp(argv[1], psched_version());
}
C
flags=$(env "${cc_env[@]}" pkg-config --cflags --libs psched) || die "pkg-config psched failed"
gcc -o "$TMP/use" "$TMP/use.c" $flags 2>"$TMP/cc.err" || { cat "$TMP/cc.err"; die "cannot build against the -dev package ($flags)"; }
out=$(LD_LIBRARY_PATH=$R/usr/lib/$ma DMLC_NUM_WORKER=5 "$TMP/use" "$ver") || die "program built against the package: $out"
[ "$out" = "$ver 5" ] || die "program built against the package printed '$out'"
[ -n "$R" ] && { LD_LIBRARY_PATH=$R/usr/lib/$ma ldd "$TMP/use" | grep -q "$R/usr/lib/$ma/libpsched.so.1" || die "not linked to the packaged libpsched.so.1"; }

# The job: the packaged psched-launch, programs and Python package.
cat >"$TMP/job.py" <<'PY'
import numpy as np, psched, sys
kv = psched.KVStore("dist_sync")
W, r = kv.num_workers, kv.rank
kv.init(1, np.zeros(1000, np.float32))
kv.init(2, np.zeros(300000, np.float32))  # keys all ints (MXNet)
for step in range(5):
    for key, n in ((1, 1000), (2, 300000)):
        out = np.empty(n, np.float32)
        kv.pushpull(key, np.full(n, (r + 1) * (step + 1), np.float32), out=out)
        want = (step + 1) * W * (W + 1) / 2
        if not (out == want).all():
            print("rank %d step %d key %s: got %s want %s" % (r, step, key, out[:3], want))
            sys.exit(1)
# One write per line: the two workers share the log, and print() may write
# the text and its newline separately (CI once saw both lines run together).
import os
sys.stdout.flush()
os.write(1, ("rank %d sums exact, psched %s from %s\n" % (r, psched.__version__, psched.__file__)).encode())
PY
(cd "$TMP" && timeout $((120 * MULT)) env PSCHED_PYTHON="$PYTHON" "$R/usr/bin/psched-launch" -s 2 -w 2 -- "$PYTHON" "$TMP/job.py") >"$TMP/job.log" 2>&1
rc=$?
[ $rc = 0 ] || { cat "$TMP/job.log"; die "job from the packages exited $rc"; }
n=$(grep -o "sums exact, psched $ver from $R/usr/lib/python3/dist-packages/psched/" "$TMP/job.log" | wc -l)
[ "$n" = 2 ] || { cat "$TMP/job.log"; die "$n of 2 workers ran the packaged psched with exact sums"; }
echo "ok: packages of $ver built, checked, and a 2x2 job ran from them ($([ -n "$R" ] && echo unpacked || echo installed))"
