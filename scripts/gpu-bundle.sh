#!/usr/bin/env bash
# make gpu-bundle: one directory holding everything tests/gpu/gpu-check.sh
# needs on a machine that has a GPU, CUDA's driver and Python with torch
# but none of psched's Debian packages (docs/gpu.md "Checking a GPU").
#   scripts/gpu-bundle.sh BUILD OUT
# BUILD is a CUDA build (make with nvcc found); OUT is made afresh.  The
# shared libraries the programs need beyond glibc come from Debian's
# packages, unpacked with dpkg -x into OUT/deps (never into /); where a
# package cannot be downloaded the installed file is copied instead.
set -euo pipefail
BUILD=${1:?usage: gpu-bundle.sh BUILD OUT}
OUT=${2:?usage: gpu-bundle.sh BUILD OUT}
cd "$(dirname "$0")/.."

if ! grep -q PSCHED_HAVE_CUDA=1 "$BUILD/.flags" 2>/dev/null; then
	echo "gpu-bundle: $BUILD is not a CUDA build (no nvcc or g++ when it was made; docs/gpu.md \"Build\")" >&2
	exit 1
fi
rm -rf "$OUT"
mkdir -p "$OUT"/{build/bin,build/lib,build/tests/unit,build/tests/helpers,deps/lib,tests/integration,tests/python,tests/gpu,scripts}

# The programs, the library and the GPU test binaries, stripped.
for p in ps-scheduler ps-server ps-worker ps-bench; do
	cp "$BUILD/bin/$p" "$OUT/build/bin/"
done
cp -P "$BUILD"/lib/libpsched.so "$OUT/build/lib/"
cp "$BUILD"/lib/libpsched.so.[0-9]* "$OUT/build/lib/"
for t in test_gpu test_gpu_device test_kv_worker_gpu; do
	cp "$BUILD/tests/unit/$t" "$OUT/build/tests/unit/"
done
for h in gpu_probe gpu_worker gpu_bench; do
	cp "$BUILD/tests/helpers/$h" "$OUT/build/tests/helpers/"
done
find "$OUT/build" -type f -perm -u+x -exec strip --strip-unneeded {} +
cp "$BUILD/.flags" "$OUT/build/.flags"

# The scripts and the Python package, as they lie in the tree.
cp tests/integration/{lib.sh,pylib.sh,test_gpu_pull.sh,test_gpu_refused.sh,test_python_gpu.sh} \
	"$OUT/tests/integration/"
cp tests/python/{gpu_kvstore.py,gpu_torch.py} "$OUT/tests/python/"
cp tests/gpu/gpu-check.sh "$OUT/"
cp scripts/install-deps.sh "$OUT/scripts/"
mkdir -p "$OUT/python"
cp -r python/psched "$OUT/python/"
find "$OUT/python" -name __pycache__ -prune -exec rm -rf {} +
cp VERSION "$OUT/"
git rev-parse HEAD >"$OUT/COMMIT" 2>/dev/null || echo unknown >"$OUT/COMMIT"

# Shared libraries beyond glibc's own and the compiler's runtime.
base='^(libc|libm|libdl|librt|libpthread|ld-linux-x86-64|libgcc_s|libstdc\+\+|linux-vdso)\.'
libs=$(find "$OUT/build" -type f -perm -u+x -exec ldd {} + 2>/dev/null |
	awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for lib in $libs; do
	name=$(basename "$lib")
	[[ $name =~ $base ]] && continue
	# dpkg knows each file by one of its paths (/usr/lib under merged /usr).
	pkg=
	for f in "$lib" "/usr$lib" "$(readlink -f "$lib")"; do
		pkg=$(dpkg -S "$f" 2>/dev/null | head -n 1 | cut -d: -f1) && [ -n "$pkg" ] && break
	done
	got=
	if [ -n "$pkg" ] && (cd "$tmp" && apt-get download -qq "$pkg" >/dev/null 2>&1); then
		deb=$(ls "$tmp"/"${pkg}"_*.deb 2>/dev/null | head -n 1)
		if [ -n "$deb" ]; then
			dpkg -x "$deb" "$tmp/x"
			f=$(find "$tmp/x" -name "$name" | head -n 1)
			[ -n "$f" ] && cp -L "$f" "$OUT/deps/lib/$name" && got="$pkg (dpkg -x)"
		fi
	fi
	if [ -z "$got" ]; then
		cp -L "$lib" "$OUT/deps/lib/$name"
		got="copied from ${pkg:-the system}"
	fi
	echo "$name: $got" >>"$OUT/deps/SOURCES"
done
du -sh "$OUT" | awk '{print "gpu-bundle: " $2 " (" $1 ")"}'
