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

# num_dead_node counts a server that died (its connection dropped).
cat >"$TMP/dead.py" <<'PY'
import os, sys, time, numpy as np, psched
kv = psched.KVStore("dist_sync")
assert kv.num_dead_node(2) == 0 and kv.num_dead_node(7) == 0
open(sys.argv[1] + "/ready", "w").close()
deadline = time.monotonic() + 30
while kv.num_dead_node(2) == 0 and time.monotonic() < deadline:
    time.sleep(0.05)
print("dead servers %d, dead workers %d, dead (all) %d"
      % (kv.num_dead_node(2), kv.num_dead_node(4), kv.num_dead_node(7)))
sys.stdout.flush()
os._exit(0)   # the job is broken: no clean goodbye
PY
start_scheduler 2 1
start_servers 2
DMLC_ROLE=worker timeout $((60 * MULT)) "$PYTHON" "$TMP/dead.py" "$TMP" >"$TMP/dead.out" 2>"$TMP/dead.err" &
wpid=$!
for _ in $(seq 1 $((600 * MULT))); do [ -e "$TMP/ready" ] && break; sleep 0.05; done
[ -e "$TMP/ready" ] || die "the num_dead_node worker did not start: $(cat "$TMP/dead.err")"
kill -KILL "${SERVER_PIDS[1]}"
wait $wpid || die "the num_dead_node worker failed: $(cat "$TMP/dead.err")"
grep -q "dead servers 1, dead workers 0, dead (all) 1" "$TMP/dead.out" ||
	die "num_dead_node after killing a server: $(cat "$TMP/dead.out")"
exit 0
