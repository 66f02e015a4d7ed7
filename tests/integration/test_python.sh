#!/usr/bin/env bash
# Python package (python/psched): the KVStore tests of
# tests/python/test_kvstore.py ("local" in process, then dist_sync and
# dist_async jobs of 2 servers x 2 workers started by psched.launch), and
# the launcher's exit status and signal forwarding.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"

timeout $((400 * MULT)) "$PYTHON" tests/python/test_kvstore.py >"$TMP/kvstore.log" 2>&1
rc=$?
tail -n 30 "$TMP/kvstore.log"
[ $rc = 0 ] || die "test_kvstore.py exited $rc"
grep -q "== dist_sync: exit 0" "$TMP/kvstore.log" || die "dist_sync suite did not pass"
grep -q "== dist_async: exit 0" "$TMP/kvstore.log" || die "dist_async suite did not pass"

# The launcher exits with the first non-zero status and stops the rest.
cat >"$TMP/fail.py" <<'PY'
import os, sys, time, psched
kv = psched.KVStore("dist_sync")
if kv.rank == 1:
    os._exit(3)
time.sleep(60)  # the launcher must stop us
PY
start=$(date +%s)
timeout $((60 * MULT)) "$PYTHON" -m psched.launch -s 1 -w 2 --grace 2 -- "$PYTHON" "$TMP/fail.py" >"$TMP/fail.log" 2>&1
rc=$?
[ $rc = 3 ] || { cat "$TMP/fail.log"; die "launcher exited $rc, want 3 (the failing worker's status)"; }
[ $(($(date +%s) - start)) -lt 50 ] || die "launcher waited for the sleeping worker"
grep -q "exited with status 3" "$TMP/fail.log" || die "launcher did not name the failed process"

# SIGTERM to the launcher reaches every process of the job.
cat >"$TMP/sleep.py" <<'PY'
import os, signal, sys, time
open(sys.argv[1] + "/pid.%d" % os.getpid(), "w").close()
signal.signal(signal.SIGTERM, lambda *a: sys.exit(42))
time.sleep(120)
PY
"$PYTHON" -m psched.launch -s 1 -w 2 --grace 5 -- "$PYTHON" "$TMP/sleep.py" "$TMP" >"$TMP/sig.log" 2>&1 &
lpid=$!
for _ in $(seq 1 $((100 * MULT))); do
	[ "$(ls "$TMP"/pid.* 2>/dev/null | wc -l)" = 2 ] && break
	sleep 0.1
done
[ "$(ls "$TMP"/pid.* 2>/dev/null | wc -l)" = 2 ] || die "workers did not start"
kill -TERM $lpid
wait_pid $lpid 20
rc=$?
[ $rc = $((128 + 15)) ] || die "launcher exited $rc after SIGTERM, want 143"
for f in "$TMP"/pid.*; do
	p=${f##*.}
	! kill -0 "$p" 2>/dev/null || die "worker $p survived the launcher's SIGTERM"
done
# make install into a staging root: the installed package finds the
# installed library and programs by itself (no PYTHONPATH tricks).
# dmlc-tracker style: the same script in every role; as a server it
# serves inside KVStore() and exits, as MXNet does.
cat >"$TMP/allroles.py" <<'PY'
import numpy as np, psched
kv = psched.KVStore("dist_sync")  # servers serve here, then exit 0
kv.init("w", np.zeros(4, np.float32))
v = np.full(4, 2, np.float32)
kv.pushpull("w", v)
assert (v == 2).all(), v
print("worker done")
PY
start_scheduler 1 1
DMLC_ROLE=server "$PYTHON" "$TMP/allroles.py" >"$TMP/pyserver.out" 2>"$TMP/pyserver.err" &
ps_pid=$!; PIDS+=($ps_pid)
DMLC_ROLE=worker timeout $((60 * MULT)) "$PYTHON" "$TMP/allroles.py" >"$TMP/pyworker.out" 2>"$TMP/pyworker.err" ||
	die "worker of the all-roles script failed: $(cat "$TMP/pyworker.err")"
wait_pid $ps_pid 30 || die "the script as a server exited $?: $(cat "$TMP/pyserver.err")"
wait_pid "$SCHED_PID" 30 || die "scheduler exited $?"
grep -q "worker done" "$TMP/pyworker.out" || die "all-roles worker did not finish"
! grep -q "worker done" "$TMP/pyserver.out" || die "the server ran the worker's code"

if [ -n "${PY_SANITIZED:-}" ]; then
	echo "ok: kvstore tests, launcher (make install is checked in the plain build)"
	exit 0
fi
root=$TMP/root
make --no-print-directory -s install BUILD="$BUILD" DESTDIR="$root" PREFIX=/usr/local >"$TMP/install.log" 2>&1 ||
	{ cat "$TMP/install.log"; die "make install failed"; }
cat >"$TMP/inst.py" <<'PY'
import numpy as np, psched, psched._lib as L
assert str(L.path()).startswith(__import__("sys").argv[1]), L.path()
kv = psched.KVStore("dist_sync")
kv.init(1, np.zeros(3))
v = np.ones(3)
kv.pushpull(1, v)
assert (v == 1).all(), v
print("installed package ok:", L.path())
PY
(cd / && env -u PSCHED_LIBRARY -u PSCHED_BIN_DIR PYTHONPATH="$root/usr/local/lib/python3/dist-packages" \
	timeout $((60 * MULT)) "$PYTHON" -m psched.launch -s 1 -w 1 -- "$PYTHON" "$TMP/inst.py" "$root") >"$TMP/inst.log" 2>&1 ||
	{ cat "$TMP/inst.log"; die "the installed package did not run a job"; }
grep -q "installed package ok" "$TMP/inst.log" || die "installed package check did not run"
echo "ok: kvstore tests, launcher exit status and signal forwarding, make install"
exit 0
