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
echo "ok a member cannot make a server hold what it did not send"
exit 0
