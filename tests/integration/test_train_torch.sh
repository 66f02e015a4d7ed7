#!/usr/bin/env bash
# examples/train_torch.py: a PyTorch MLP (CPU) trained data parallel on 2
# workers through psched.torch (ServerOptimizer: autograd hooks push each
# gradient by layer priority, forward pre-hooks wait for each layer's new
# parameters, SGD on the servers; and --worker-side: DistributedOptimizer
# around torch.optim.SGD) ends with the parameters of torch.optim.SGD on the
# concatenated batches in one process (float32: within 1e-5 + 1e-4 rel),
# and its loss drops.  Skipped without python3-torch.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
[ -z "${PY_SANITIZED:-}" ] || { echo "sanitizer build: torch is not run under ASan (the numpy example is)"; exit 77; }
have_torch || { echo "python3-torch is not installed and could not be (scripts/install-deps.sh --for torch)"; exit 77; }
ex=examples/train_torch.py
"$PYTHON" $ex --reference --steps 40 --out "$TMP/ref.npz" || die "reference run failed"
timeout $((180 * MULT)) "$PYTHON" -m psched.launch -s 2 -w 2 -- \
	"$PYTHON" $ex --steps 40 --out "$TMP/dist.npz" >"$TMP/dist.log" 2>&1 ||
	{ cat "$TMP/dist.log"; die "distributed run failed"; }
"$PYTHON" tests/python/compare_params.py "$TMP/ref.npz" "$TMP/dist.npz" 1e-4 1e-5 ||
	die "distributed parameters differ from the reference"
timeout $((180 * MULT)) "$PYTHON" -m psched.launch -s 2 -w 2 -- \
	"$PYTHON" $ex --steps 40 --worker-side --out "$TMP/wdist.npz" >"$TMP/wdist.log" 2>&1 ||
	{ cat "$TMP/wdist.log"; die "distributed run (--worker-side) failed"; }
"$PYTHON" tests/python/compare_params.py "$TMP/ref.npz" "$TMP/wdist.npz" 1e-4 1e-5 ||
	die "distributed parameters (--worker-side) differ from the reference"
exit 0
