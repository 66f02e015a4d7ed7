#!/usr/bin/env bash
# MXNet's KVStore rules in the Python package (tests/python/test_kvstore_mx.py):
# row-sparse keys in local and device stores, init with rows, row-sparse
# pushes into dense keys, one value per device, row_sparse_pull into one
# out per device, ignore_sparse, mixed key types, the 'test' optimizer,
# device-store gradient compression; "local" and "device" in process,
# then dist_sync and dist_async jobs of 2 servers x 2 workers.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
timeout $((400 * MULT)) "$PYTHON" tests/python/test_kvstore_mx.py >"$TMP/mx.log" 2>&1
rc=$?
tail -n 30 "$TMP/mx.log"
[ $rc = 0 ] || die "test_kvstore_mx.py exited $rc"
grep -q "== dist_sync: exit 0" "$TMP/mx.log" || die "dist_sync suite did not pass"
grep -q "== dist_async: exit 0" "$TMP/mx.log" || die "dist_async suite did not pass"
# the two workers of a dist job share the log: their lines may interleave
! grep -q "FAILED (" "$TMP/mx.log" || die "a suite failed"
[ "$(grep -o 'OK' "$TMP/mx.log" | wc -l)" -ge 5 ] || die "not every suite (local, 2 x 2 workers) said OK"
exit 0
