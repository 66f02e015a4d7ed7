#!/usr/bin/env bash
# psched.torch and nn.Embedding(sparse=True) (tests/python/
# test_torch_sparse.py): sparse gradients averaged through row-sparse
# keys in a 2-server x 2-worker job, against a dense reference.  Skipped
# without python3-torch.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
[ -z "${PY_SANITIZED:-}" ] || { echo "sanitizer build: torch is not run under ASan (the numpy tests are)"; exit 77; }
have_torch || { echo "python3-torch is not installed and could not be (scripts/install-deps.sh --for torch)"; exit 77; }
timeout $((300 * MULT)) "$PYTHON" tests/python/test_torch_sparse.py >"$TMP/ts.log" 2>&1
rc=$?
tail -n 20 "$TMP/ts.log"
[ $rc = 0 ] || die "test_torch_sparse.py exited $rc"
[ "$(grep -o 'torch sparse worker: ok' "$TMP/ts.log" | wc -l)" = 2 ] || die "not both workers passed"
exit 0
