#!/usr/bin/env bash
# A member of the job (it has the secret and is a worker) tries to make a
# server spend memory its bytes did not pay for (attack.py member-limits):
# bookkeeping per declared element of a key declared for free, a parked
# budget inflated by such a key, pulls queued for steps far ahead.  Each
# is refused or held within its budget; the server's RSS stays bounded
# and it names every refusal in its log.
. "$(dirname "$0")/lib.sh"

PY=${PYTHON:-python3}
ATTACK=$(dirname "$0")/attack.py

export PS_VERBOSE=1
# TSan's calloc writes what it returns: the keys declared below (2.3 GiB)
# would be written whole, for seconds; the TSan build runs the second
# part only (the first is the van thread alone, ASan checks it).
tsan=0
case $BUILD in *tsan*) tsan=1 ;; esac
if [ $tsan = 1 ]; then
	echo "skip the memory part under TSan (its calloc writes every declared byte)"
else
start_scheduler 1 1
start_servers 1
out=$(timeout $((120 * MULT)) $PY "$ATTACK" member-limits \
	"$DMLC_PS_ROOT_PORT" "${SERVER_PIDS[0]}" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 0 ] || die "member-limits exited $rc"
err=$TMP/server1.err
grep -q "not the layout of step 1" "$err" ||
	die "the server did not name the bad layout"
grep -q "no room to hold" "$err" ||
	die "the server did not name the parked budget"
grep -q "steps beyond the version applied here" "$err" ||
	die "the server did not name the far-future pull"
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 60 || die "node $p exited $?"
done
# 226 refusals in about a second: the log stays small (50 lines at once,
# then one a second).
size=$(wc -c <"$err")
[ "$size" -lt 30000 ] || die "the server logged $size bytes for the attack"
grep -q "refusals before it not logged" "$err" ||
	die "the server did not say it left refusals out"
echo "ok a member cannot make a server hold what it did not send (log $size bytes)"
fi

# A member that joins and never pushes: the real worker's request times
# out naming it, not only the server (the server tells waiting requests,
# after half of PS_REQUEST_TIMEOUT, which workers their step lacks).
export PS_HEARTBEAT_TIMEOUT=60 PS_REQUEST_TIMEOUT=4
start_scheduler 1 2
start_servers 1
$PY "$ATTACK" withhold "$DMLC_PS_ROOT_PORT" 2 $((30 * MULT)) >"$TMP/withhold.out" 2>&1 &
ATT=$!
PIDS+=("$ATT")
start_workers 1 --sizes 64K --keys 1 --steps 3
wait_pid "${WORKER_PIDS[0]}" $((30 * MULT))
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || die "the worker did not fail its step (exit $rc)"
id=$(sed -n 's/^withholding worker id //p' "$TMP/withhold.out")
[ -n "$id" ] || die "the withholding member did not join: $(cat "$TMP/withhold.out")"
grep "timed out" "$TMP/worker1.err" | head -n 2
grep -q "timed out.*lacks the pushes of 1 worker: worker $id (rank" "$TMP/worker1.err" ||
	die "the timeout does not name the withholding worker $id"
echo "ok a request that times out names the worker its step lacks"
exit 0
