#!/usr/bin/env bash
# once
# CUDA in the build (docs/gpu.md): with nvcc in CUDA_HOME (default
# /usr/local/cuda) the library holds the GPU kernels and the CUDA runtime
# (linked statically: no libcudart.so needed at run time) and still runs on
# a machine without GPU or driver; CUDA=0, or no nvcc, builds without CUDA
# (the stubs compile and call no CUDA); CUDA=1 without nvcc is an error.
set -eu
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
lib=$BUILD/lib/libpsched.so.1
[ -e "$lib" ] || { echo "no $lib: run make first"; exit 1; }
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# 1. This build: CUDA exactly when nvcc is there (and not turned off).
if grep -q PSCHED_HAVE_CUDA "$BUILD/.flags"; then
	[ -x "$CUDA_HOME/bin/nvcc" ] || echo "note: CUDA build, but no nvcc in $CUDA_HOME now"
	readelf -S "$lib" | grep -q '\.nv_fatbin' ||
		{ echo "FAIL: CUDA build without GPU code (.nv_fatbin) in $lib"; fail=1; }
	if ldd "$lib" | grep -q libcudart; then
		echo "FAIL: $lib needs libcudart.so at run time"; fail=1
	fi
	echo "CUDA build: GPU code in $lib, CUDA runtime linked statically"
elif [ -x "$CUDA_HOME/bin/nvcc" ]; then
	echo "note: nvcc is in $CUDA_HOME but $BUILD was built with CUDA=0"
else
	echo "no nvcc in $CUDA_HOME: $BUILD is built without CUDA"
fi
# Whatever the build and the machine: the probe runs and says what it found.
out=$("$BUILD/tests/helpers/gpu_probe" 2>&1) && rc=0 || rc=$?
case $rc in
0) echo "probe: $out" ;;
1) echo "$out" | grep -qE "no CUDA device|built without CUDA|does not exist" ||
	{ echo "FAIL: probe gave no reason: $out"; fail=1; }
   echo "probe: $(echo "$out" | tail -n 1)" ;;
*) echo "FAIL: gpu_probe exited $rc: $out"; fail=1 ;;
esac

# 2. The switch: dry runs of make in a scratch build dir.
dry() { make --no-print-directory -n BUILD="$tmp/b" "$@" all 2>&1; }
for args in "CUDA=0" "CUDA_HOME=$tmp/none"; do
	if dry $args | grep -qE 'nvcc|PSCHED_HAVE_CUDA|cudart'; then
		echo "FAIL: make $args still builds CUDA parts"; fail=1
	fi
done
if dry CUDA=1 CUDA_HOME="$tmp/none" | grep -q "CUDA=1 but no nvcc"; then :; else
	echo "FAIL: make CUDA=1 without nvcc is not an error"; fail=1
fi
if [ -x "$CUDA_HOME/bin/nvcc" ]; then
	dry | grep -q "nvcc.*common/gpu/sum.cu" ||
		{ echo "FAIL: nvcc found but make would not build common/gpu/sum.cu"; fail=1; }
fi

# 3. Without CUDA the GPU module compiles (-Werror) and calls no CUDA.
objs="$tmp/b/obj/common/gpu/cuda.o $tmp/b/obj/common/gpu/gdr.o $tmp/b/obj/common/gpu/stage.o"
if make --no-print-directory BUILD="$tmp/b" CUDA=0 $objs >"$tmp/cc.log" 2>&1; then
	if nm -u $objs | grep -q ' cuda'; then
		echo "FAIL: CUDA=0 objects call CUDA:"; nm -u $objs | grep ' cuda' | head -3; fail=1
	else
		echo "CUDA=0: common/gpu compiles and calls no CUDA"
	fi
else
	echo "FAIL: common/gpu does not compile with CUDA=0:"; tail -n 20 "$tmp/cc.log"; fail=1
fi
[ $fail = 0 ] && echo "ok: CUDA build switch"
exit $fail
