#!/usr/bin/env bash
# kv._set_updater(fn) on a dist store (MXNet's DMLC_ROLE=server pattern):
# the servers run the workers' own script, which serves inside KVStore();
# the worker's _set_updater sends the updater (by pickle: its module and
# name) to every server's controller, which calls back into Python for
# each aggregate.  Checks the update rule on 2 servers x 2 workers, str
# and int keys as the updater sees them, the errors (a lambda, a
# function the servers cannot find, an updater that raises, an unknown
# command head), going back to the default with None, and ps-server's
# refusal (it has no controller).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/pylib.sh"
cat >"$TMP/upd.py" <<'PY'
import numpy as np, psched
from psched import PSchedError


def half(key, merged, stored):          # module level, before KVStore()
    stored += merged / 2


def tag(key, merged, stored):
    stored[...] = {"w": 100, "v3": 200}.get(key, -1)


def bad(key, merged, stored):
    raise ValueError("boom")


kv = psched.KVStore("dist_sync")        # the servers serve here, then exit


def late(key, merged, stored):          # the servers never get here
    pass


def expect_error(pattern, fn, *args):
    try:
        fn(*args)
    except PSchedError as e:
        assert pattern in str(e), (pattern, str(e))
        return
    raise AssertionError("no error for " + pattern)


kv.init("w", np.zeros(1000, np.float32))
kv.init("v3", np.zeros(4))             # one key kind per store (MXNet)
v, out = np.full(1000, kv.rank + 1.0, np.float32), np.empty(1000, np.float32)
kv._set_updater(half)
for step in (1, 2):
    kv.push("w", v)
    kv.pull("w", out=out)
    assert (out == 1.5 * step).all(), (step, out[:4])
kv._set_updater(tag)                    # the updater sees keys by name
kv.push("w", v); kv.pull("w", out=out)
assert (out == 100).all(), out[:4]
o3 = np.empty(4)
kv.pushpull("v3", np.ones(4), out=o3)
assert (o3 == 200).all(), o3
expect_error("module-level function", kv._set_updater, lambda k, m, s: None)
if kv.rank == 0:                        # rank 0 talks to the servers
    expect_error("Can't get attribute 'late'", kv._set_updater, late)
    expect_error("unknown command head 7", kv._send_command_to_servers, 7, "x")
else:
    kv._set_updater(late)
kv.barrier()
kv._set_updater(bad)                    # raises on the servers: unchanged
kv.push("w", v); kv.pull("w", out=out)
assert (out == 100).all(), out[:4]
kv._set_updater(None)                   # default: the sum replaces
kv.push("w", v); kv.pull("w", out=out)
assert (out == 3).all(), out[:4]
print("updater worker %d done" % kv.rank)
kv.close()
PY
start_scheduler 2 2
for i in 0 1; do
	DMLC_ROLE=server "$PYTHON" "$TMP/upd.py" >"$TMP/srv$i.out" 2>"$TMP/srv$i.err" &
	SRV[$i]=$!; PIDS+=(${SRV[$i]})
done
for i in 0 1; do
	DMLC_ROLE=worker timeout $((90 * MULT)) "$PYTHON" "$TMP/upd.py" >"$TMP/w$i.out" 2>"$TMP/w$i.err" &
	W[$i]=$!
done
for i in 0 1; do
	wait ${W[$i]} || die "worker $i failed: $(cat "$TMP/w$i.err")"
done
for i in 0 1; do
	wait_pid ${SRV[$i]} 30 || die "server $i exited $?: $(cat "$TMP/srv$i.err")"
done
wait_pid "$SCHED_PID" 30 || die "scheduler exited $?"
[ "$(cat "$TMP"/w*.out | grep -c "updater worker . done")" = 2 ] || die "the workers did not finish"
grep -q "the updater failed on key 'w'" "$TMP/srv0.err" "$TMP/srv1.err" ||
	die "no server reported the failing updater: $(cat "$TMP"/srv*.err)"
grep -q "ValueError: boom" "$TMP/srv0.err" "$TMP/srv1.err" || die "the updater's traceback is missing"

# ps-server (no controller) refuses the updater, naming why.
cat >"$TMP/noctl.py" <<'PY'
import numpy as np, psched
def half(key, merged, stored):
    stored += merged / 2
kv = psched.KVStore("dist_sync")
try:
    kv._set_updater(half)
except psched.PSchedError as e:
    assert "has no controller" in str(e) and "DMLC_ROLE=server" in str(e), e
    print("refused:", e)
PY
timeout $((60 * MULT)) "$PYTHON" -m psched.launch -s 1 -w 1 -- "$PYTHON" "$TMP/noctl.py" >"$TMP/noctl.log" 2>&1 ||
	{ cat "$TMP/noctl.log"; die "the ps-server job failed"; }
grep -q "refused:.*has no controller" "$TMP/noctl.log" || die "ps-server did not refuse: $(cat "$TMP/noctl.log")"
echo "ok: Python updaters on servers started from the workers' script"
exit 0
