#!/usr/bin/env bash
# Server-side optimizers (issue 13): tests/python/test_optim.py checks
# every optimizer step by step against numpy references in a "local"
# store, state files (save, load, bad files), bfloat16; then jobs of
# 2 servers x 2 workers: bfloat16 sums, and Adam / centered RMSProp /
# momentum SGD saved mid-way on 2 servers and loaded on 3 servers with
# another partition size, continuing exactly as the uninterrupted run.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"

timeout $((600 * MULT)) "$PYTHON" tests/python/test_optim.py >"$TMP/optim.log" 2>&1
rc=$?
grep -E "^(==|FAIL|ERROR|Ran|OK)" "$TMP/optim.log"
[ $rc = 0 ] || { tail -n 40 "$TMP/optim.log"; die "test_optim.py exited $rc"; }
grep -q "== bf16 sums, 2 servers x 2 workers: exit 0" "$TMP/optim.log" || die "bf16 job did not pass"
n=$(grep -c "save (2 servers) / load (3 servers): ok" "$TMP/optim.log")
[ "$n" = 3 ] || die "only $n of 3 save/load jobs passed"
echo "ok: optimizers vs numpy, state files, bfloat16, save/load across server counts"
exit 0
