#!/usr/bin/env bash
# Application commands (psched_servers_command) reach each server's
# controller (psched_kvstore_run_server_from_env): the controller installs
# an updater that then runs on both servers' ranges of a key, and its
# refusal comes back to the worker with the controller's reason
# (tests/helpers/srvctl.c).  This is the C path under the Python
# package's kv._set_updater on dist stores.
. "$(dirname "$0")/lib.sh"
H=$BUILD/tests/helpers/srvctl
start_scheduler 2 1
for i in 1 2; do
	DMLC_ROLE=server "$H" server >"$TMP/server$i.out" 2>"$TMP/server$i.err" &
	S[$i]=$!; PIDS+=(${S[$i]})
done
DMLC_ROLE=worker "$H" worker >"$TMP/worker.out" 2>"$TMP/worker.err" &
WP=$!; PIDS+=($WP)
wait_pid $WP 60 || die "worker exited $?: $(cat "$TMP/worker.err")"
for i in 1 2; do
	wait_pid ${S[$i]} 30 || die "server $i exited $?: $(cat "$TMP/server$i.out" "$TMP/server$i.err")"
done
wait_pid "$SCHED_PID" 30 || die "scheduler exited $?"
cat "$TMP/worker.out" "$TMP"/server*.out
grep -q "controller commands ok" "$TMP/worker.out" || die "worker did not finish"
[ "$(cat "$TMP"/server*.out | grep -c "controller got 2 commands, updater ran [1-9]")" = 2 ] ||
	die "not both servers ran the controller and its updater"
exit 0
