#!/usr/bin/env bash
# examples/train_torch.py: a PyTorch MLP (CPU) trained data parallel on 2
# workers through psched (autograd hooks push each gradient by layer
# priority, forward pre-hooks wait for each layer's new parameters, SGD on
# the servers) ends with the parameters of torch.optim.SGD on the
# concatenated batches in one process (float32: within 1e-5 + 1e-4 rel),
# and its loss drops.  Skipped without python3-torch.
. "$(dirname "$0")/lib.sh"
PYTHON=${PYTHON:-/usr/bin/python3}
"$PYTHON" -c 'import torch, numpy' 2>/dev/null || { echo "python3-torch is not installed (apt-get install python3-torch)"; exit 77; }
export PYTHONPATH=$PWD/python PSCHED_LIBRARY=$PWD/$BUILD/lib/libpsched.so
export PSCHED_BIN_DIR=$PWD/$BUILD/bin PS_REQUEST_TIMEOUT=$((60 * MULT))
ex=examples/train_torch.py
"$PYTHON" $ex --reference --steps 40 --out "$TMP/ref.npz" || die "reference run failed"
timeout $((180 * MULT)) "$PYTHON" -m psched.launch -s 2 -w 2 -- \
	"$PYTHON" $ex --steps 40 --out "$TMP/dist.npz" >"$TMP/dist.log" 2>&1 ||
	{ cat "$TMP/dist.log"; die "distributed run failed"; }
"$PYTHON" tests/python/compare_params.py "$TMP/ref.npz" "$TMP/dist.npz" 1e-4 1e-5 ||
	die "distributed parameters differ from the reference"
exit 0
