#!/usr/bin/env bash
# A config switch still open when the last worker leaves is called off,
# never committed blind.  The only worker (attack.py, speaking the real
# handshake) receives a PREPARE from --config-cycle, does not answer and
# finalizes.  A commit then would know no worker's step: it started at
# the step after the previous switch, below steps the departed workers
# had pushed (the TSan failure of test_autotune_quick: "config epoch N
# starts at step 148, but this worker already pushed step 150").  The
# scheduler must send ABORT for that epoch, log why, and still shut the
# job down cleanly.
. "$(dirname "$0")/lib.sh"

PY=${PYTHON:-python3}
ATTACK=$(dirname "$0")/attack.py

export PS_VERBOSE=1
start_scheduler 1 1 --config-cycle "64K:64K,128K:256K" --config-interval 0.2
start_servers 1
out=$(timeout $((60 * MULT)) $PY "$ATTACK" leave-mid-switch "$DMLC_PS_ROOT_PORT" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 0 ] || die "leave-mid-switch exited $rc"
epoch=$(echo "$out" | sed -n 's/^got PREPARE of config epoch \([0-9]*\).*/\1/p')
[ -n "$epoch" ] || die "no PREPARE seen"
grep -q "config epoch $epoch called off: no worker is left" "$TMP/sched.err" ||
	die "the scheduler did not say why epoch $epoch was called off: $(tail -n 5 "$TMP/sched.err")"
if grep -q "config epoch $epoch: partition" "$TMP/sched.err"; then
	die "the scheduler committed epoch $epoch with no worker left"
fi
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 30 || die "node $p exited $?"
done
echo "ok epoch $epoch called off when its only worker left; the job shut down"
exit 0
