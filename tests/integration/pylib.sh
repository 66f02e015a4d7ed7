# Shared set-up of the Python tests (sourced after lib.sh): Debian's
# python3 with numpy, this tree's package, $BUILD's library and programs.
# A sanitizer build's library needs its runtime loaded first: ASan's is
# preloaded (leak checks off: the interpreter keeps its memory); a TSan
# library cannot be loaded into an uninstrumented python3, so TSan builds
# skip (the same code runs under TSan in the C tests).
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "python3-numpy is not installed"; exit 77; }
PSLIB=$PWD/$BUILD/lib/libpsched.so
export PYTHONPATH=$PWD/python PSCHED_LIBRARY=$PSLIB PSCHED_BIN_DIR=$PWD/$BUILD/bin
export PS_REQUEST_TIMEOUT=$((60 * MULT))
if ldd "$PSLIB" | grep -q libtsan; then
	echo "TSan build: python3 cannot load a TSan library"
	exit 77
fi
if ldd "$PSLIB" | grep -q libasan; then
	export LD_PRELOAD="$(gcc -print-file-name=libasan.so) $(gcc -print-file-name=libubsan.so)"
	export ASAN_OPTIONS=detect_leaks=0
	PY_SANITIZED=1
fi

# have_torch: python3-torch importable, installed first if missing (it is
# heavy, so only the tests that use it ask: scripts/install-deps.sh --for
# torch).  PSCHED_NO_INSTALL=1 only checks.
have_torch() {
	"$PYTHON" -c 'import torch' 2>/dev/null && return 0
	bash "$(dirname "${BASH_SOURCE[0]}")/../../scripts/install-deps.sh" --for torch >&2 ||
		echo "install-deps --for torch failed (see above)" >&2
	"$PYTHON" -c 'import torch' 2>/dev/null
}
