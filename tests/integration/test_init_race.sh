#!/usr/bin/env bash
# Two workers init one key with different lengths, and the first one's
# init is split around the second's: its header arrives, then the other
# worker's whole init, then its payload.  Both must be refused with the
# conflict (ESIZE).  Before the fix the split init was answered 0 once its
# payload came in, and that worker then waited in the barrier after init
# until its timeout (seen once in CI as a test_limits failure).
# attack.py plays both workers with the real handshake, so the order of
# the bytes on the server's two connections is forced, not left to chance.
. "$(dirname "$0")/lib.sh"

PY=${PYTHON:-python3}
ATTACK=$(dirname "$0")/attack.py

export PS_VERBOSE=1
start_scheduler 1 2
start_servers 1
out=$(timeout $((60 * MULT)) $PY "$ATTACK" init-split "$DMLC_PS_ROOT_PORT" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 0 ] || die "init-split exited $rc"
grep -q "key 5: .* initialised it as" "$TMP/server1.err" ||
	die "the server did not name the conflict: $(tail -n 5 "$TMP/server1.err")"
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 30 || die "node $p exited $?"
done
echo "ok an init split around another worker's conflicting init is refused"
exit 0
