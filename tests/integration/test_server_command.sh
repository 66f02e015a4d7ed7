#!/usr/bin/env bash
# Server commands (set_optimizer, KVStore type) on a real server embedded
# with psched_node_create() + psched_server_set_updater(): garbage
# commands are refused with a clear reason and the server keeps serving;
# the custom updater, the mode-switch refusal, SGD and the reset to the
# default rule all take effect (tests/helpers/servercmd.c).
. "$(dirname "$0")/lib.sh"
H=$BUILD/tests/helpers/servercmd
start_scheduler 1 1
"$H" server >"$TMP/server1.out" 2>"$TMP/server1.err" &
SP=$!; PIDS+=($SP)
"$H" worker >"$TMP/worker.out" 2>"$TMP/worker.err" &
WP=$!; PIDS+=($WP)
wait_pid $WP 60 || die "worker exited $?: $(cat "$TMP/worker.err")"
wait_pid $SP 30 || die "server exited $?: $(cat "$TMP/server1.err")"
wait_pid "$SCHED_PID" 30 || die "scheduler exited $?"
cat "$TMP/worker.out" "$TMP/server1.out"
[ "$(grep -c 'refused as expected' "$TMP/worker.out")" = 8 ] || die "not every refusal seen"
grep -q "server commands ok" "$TMP/worker.out" || die "worker did not finish"
grep -q "custom updater ran" "$TMP/server1.out" || die "server did not report its updater"
grep -q "refusing the command" "$TMP/server1.err" || die "server did not log the refusals"
exit 0
