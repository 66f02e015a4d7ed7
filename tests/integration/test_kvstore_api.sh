#!/usr/bin/env bash
# The rest of MXNet's KVStore API in Python (tests/python/test_kvstore_api.py):
# broadcast, pushpull(out=), is_capable, num_dead_node, type names, mixed
# key types, string keys, _poll; "local" in process, then "dist" and
# "dist_async" jobs of 2 servers x 2 workers.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
timeout $((400 * MULT)) "$PYTHON" tests/python/test_kvstore_api.py >"$TMP/api.log" 2>&1
rc=$?
tail -n 30 "$TMP/api.log"
[ $rc = 0 ] || die "test_kvstore_api.py exited $rc"
grep -q "== dist: exit 0" "$TMP/api.log" || die "dist suite did not pass"
grep -q "== dist_async: exit 0" "$TMP/api.log" || die "dist_async suite did not pass"
exit 0
