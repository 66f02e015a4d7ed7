#!/usr/bin/env bash
# The C KVStore as two dist_sync workers of a 2x2 job (tests/helpers/
# kvstore_c.c): sums of multi-key asynchronous calls, concurrent waits,
# refusals, server-side sgd, clean exit.  Runs under ASan and TSan too.
. "$(dirname "$0")/lib.sh"
start_scheduler 2 2
start_servers 2
for i in 1 2; do
	"$BUILD/tests/helpers/kvstore_c" >"$TMP/k$i.out" 2>"$TMP/k$i.err" &
	K[$i]=$!; PIDS+=(${K[$i]})
done
for i in 1 2; do wait_pid "${K[$i]}" 120 || die "kvstore worker $i exited $?: $(cat "$TMP/k$i.err")"; done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "node $p exited $?"; done
[ "$(cat "$TMP"/k*.out | grep -c ': ok')" = 2 ] || die "not both workers passed"
cat "$TMP"/k*.out
exit 0
