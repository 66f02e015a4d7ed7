#!/usr/bin/env bash
# Row-sparse keys (issue 18 part B) in a real 2-server x 3-worker
# dist_sync job on loopback (tests/helpers/rows_c.c): exact sums over
# several steps with duplicate ids, an empty push and rows on both
# servers, in float32 / float64 / bfloat16; pushpulls; refusals; lazy
# sgd, adagrad and adam against a reference.  Small partitions cut each
# server's rows into many pieces.  A second job runs the same with 256 bytes
# of credit, so a pushpull's pieces must give their credit back while
# their answers wait for the other workers (or the job hangs).  Then
# the same with one worker, then a dist_async job: unsorted pushes with duplicates from 3 workers, exact
# totals.  Runs under ASan and TSan too.
. "$(dirname "$0")/lib.sh"
export PS_PARTITION_BYTES=256
for credit in 0 256; do
	export PS_CREDIT_BYTES=$credit
	start_scheduler 2 3
	start_servers 2
	for i in 1 2 3; do
		"$BUILD/tests/helpers/rows_c" >"$TMP/r$i.out" 2>"$TMP/r$i.err" &
		K[$i]=$!; PIDS+=(${K[$i]})
	done
	for i in 1 2 3; do wait_pid "${K[$i]}" $((120 * MULT)) || die "credit $credit: rows_c worker $i exited $?: $(tail -5 "$TMP/r$i.err")"; done
	for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "credit $credit: node $p exited $?"; done
	[ "$(cat "$TMP"/r*.out | grep -c ': ok')" = 3 ] || die "credit $credit: not every worker passed"
	echo "credit $credit:"; cat "$TMP"/r*.out
done
# One worker: every pushpull piece completes its step with no other
# piece's rows, so the servers fold and answer it in one pass.
export PS_CREDIT_BYTES=0
start_scheduler 2 1
start_servers 2
"$BUILD/tests/helpers/rows_c" >"$TMP/o1.out" 2>"$TMP/o1.err" &
K[1]=$!; PIDS+=(${K[1]})
wait_pid "${K[1]}" $((120 * MULT)) || die "one worker: rows_c exited $?: $(tail -5 "$TMP/o1.err")"
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "one worker: node $p exited $?"; done
grep -q ': ok' "$TMP/o1.out" || die "one worker: rows_c did not pass"
echo "one worker:"; cat "$TMP/o1.out"
# dist_async: each push applied at once (over shm the servers read the
# packed rows in place); exact totals after a barrier.
export PS_CREDIT_BYTES=0 PS_PARTITION_BYTES=0
start_scheduler 2 3
start_servers 2
for i in 1 2 3; do
	"$BUILD/tests/helpers/rows_c" async >"$TMP/a$i.out" 2>"$TMP/a$i.err" &
	K[$i]=$!; PIDS+=(${K[$i]})
done
for i in 1 2 3; do wait_pid "${K[$i]}" $((120 * MULT)) || die "async: rows_c worker $i exited $?: $(tail -5 "$TMP/a$i.err")"; done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "async: node $p exited $?"; done
[ "$(cat "$TMP"/a*.out | grep -c ': ok')" = 3 ] || die "async: not every worker passed"
echo "async:"; cat "$TMP"/a*.out
exit 0
