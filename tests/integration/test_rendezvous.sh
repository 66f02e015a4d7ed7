#!/usr/bin/env bash
# Rendezvous failures end with a clear message, never a hang:
#  - a server never arrives: the scheduler and the nodes that came name
#    the missing roles and where they were expected;
#  - a node started for a different cluster size is rejected by name;
#  - no scheduler at all: a node says where it looked.
. "$(dirname "$0")/lib.sh"
export PS_CONNECT_TIMEOUT=3

# 1. 2 servers expected, 1 comes.  The nodes wait longer than the
# scheduler so its verdict (Abort) reaches them before they give up.
start_scheduler 2 1
PS_CONNECT_TIMEOUT=15 start_servers 1
PS_CONNECT_TIMEOUT=15 start_workers 1 --steps 1
wait_pid "$SCHED_PID" 20; rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || die "scheduler should fail (rc $rc)"
grep -q "missing 1 server(s) and 0 worker(s)" "$TMP/sched.err" || die "scheduler message does not name the missing server"
wait_pid "${WORKER_PIDS[0]}" 20; rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || die "worker should fail (rc $rc)"
grep -q "missing 1 server" "$TMP/worker1.err" || die "worker message does not name the missing server: $(cat "$TMP/worker1.err")"
wait_pid "${SERVER_PIDS[0]}" 20; rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || die "server should fail (rc $rc)"
echo "ok missing server named: $(grep -o 'rendezvous timed out.*' "$TMP/sched.err" | head -1)"

# 2. a worker started for another cluster size.
start_scheduler 1 1
DMLC_NUM_SERVER=3 "$BIN/ps-worker" --steps 1 >"$TMP/bad.out" 2>"$TMP/bad.err" &
bad=$!; PIDS+=($bad)
wait_pid $bad 20; rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || die "mismatched worker should fail (rc $rc)"
grep -q "started for 3 servers" "$TMP/bad.err" || die "no size-mismatch message: $(cat "$TMP/bad.err")"
kill "$SCHED_PID" 2>/dev/null
echo "ok size mismatch: $(head -1 "$TMP/bad.err")"

# 3. nobody listening.
DMLC_PS_ROOT_PORT=1 PS_CONNECT_TIMEOUT=1 "$BIN/ps-worker" --steps 1 >"$TMP/none.out" 2>"$TMP/none.err"; rc=$?
[ $rc != 0 ] || die "worker without scheduler should fail"
grep -q "cannot reach the scheduler at 127.0.0.1:1" "$TMP/none.err" || die "no clear message: $(cat "$TMP/none.err")"
echo "ok no scheduler: $(head -1 "$TMP/none.err")"
exit 0
