#!/usr/bin/env bash
# examples/train_numpy.py: an MLP trained data parallel on 2 workers (2
# servers, server-side SGD with momentum, gradients pushed per parameter
# by layer priority) ends with the parameters of single-process training on
# the concatenated batches (float64, within 1e-10), and its loss drops;
# also with partitioned tensors (per-chunk server updates).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
ex=examples/train_numpy.py
"$PYTHON" $ex --reference --steps 40 --out "$TMP/ref.npz" || die "reference run failed"
timeout $((120 * MULT)) "$PYTHON" -m psched.launch -s 2 -w 2 -- \
	"$PYTHON" $ex --steps 40 --out "$TMP/dist.npz" >"$TMP/dist.log" 2>&1 ||
	{ cat "$TMP/dist.log"; die "distributed run failed"; }
"$PYTHON" tests/python/compare_params.py "$TMP/ref.npz" "$TMP/dist.npz" 1e-10 1e-10 ||
	die "distributed parameters differ from the reference"
# Again with tensors cut into 1 KiB chunks and 8 KiB of credit: the
# servers apply SGD chunk by chunk (momentum kept per byte range).
PS_PARTITION_BYTES=1024 PS_CREDIT_BYTES=8192 timeout $((120 * MULT)) \
	"$PYTHON" -m psched.launch -s 2 -w 2 -- \
	"$PYTHON" $ex --steps 40 --out "$TMP/chunked.npz" >"$TMP/chunked.log" 2>&1 ||
	{ cat "$TMP/chunked.log"; die "chunked distributed run failed"; }
"$PYTHON" tests/python/compare_params.py "$TMP/ref.npz" "$TMP/chunked.npz" 1e-10 1e-10 ||
	die "chunked distributed parameters differ from the reference"
exit 0
