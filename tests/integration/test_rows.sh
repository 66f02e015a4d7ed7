#!/usr/bin/env bash
# Row-sparse keys (issue 18 part B) in a real 2-server x 3-worker
# dist_sync job on loopback (tests/helpers/rows_c.c): exact sums over
# several steps with duplicate ids, an empty push and rows on both
# servers, in float32 / float64 / bfloat16; refusals; lazy sgd, adagrad
# and adam against a reference.  Small partitions cut each server's rows
# into many pieces.  Runs under ASan and TSan too.
. "$(dirname "$0")/lib.sh"
export PS_PARTITION_BYTES=256
start_scheduler 2 3
start_servers 2
for i in 1 2 3; do
	"$BUILD/tests/helpers/rows_c" >"$TMP/r$i.out" 2>"$TMP/r$i.err" &
	K[$i]=$!; PIDS+=(${K[$i]})
done
for i in 1 2 3; do wait_pid "${K[$i]}" $((120 * MULT)) || die "rows_c worker $i exited $?: $(tail -5 "$TMP/r$i.err")"; done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "node $p exited $?"; done
[ "$(cat "$TMP"/r*.out | grep -c ': ok')" = 3 ] || die "not every worker passed"
cat "$TMP"/r*.out
exit 0
