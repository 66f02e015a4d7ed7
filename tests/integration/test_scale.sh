#!/usr/bin/env bash
# serial
# Scale on one machine: a job of 8 servers and 64 workers (small tensors,
# 4 B .. 16 KiB: every worker checks each element against the sum of all
# 64 workers' values, 64x the work of the push, so larger ones only cost
# CPU; ps-worker keeps 64-way float32 sums exact) forms, runs 5 steps and
# ends with every aggregate exact and every process exiting 0.  Prints how long the job
# took to form (scheduler start to the last server's "listening" line,
# printed once every node passed the first barrier); a figure, not a
# limit.  Then sched_load drives a real scheduler with 300 simulated
# nodes (register, barriers, heartbeats, shutdown; docs/benchmarks.md
# "Scale" has the 1,000-node run) and must pass its own checks.
. "$(dirname "$0")/lib.sh"
S=8 W=64
t0=$(date +%s%N)
start_scheduler $S $W
start_servers $S
start_workers $W --steps 5 --keys 2 --sizes 4,1001,4K,16K
# Formed: every server printed its line (after the first all-node barrier).
for _ in $(seq 1 $((600 * MULT))); do
	[ "$(cat "$TMP"/server*.out 2>/dev/null | grep -c listening)" = $S ] && break
	sleep 0.1
done
[ "$(cat "$TMP"/server*.out | grep -c listening)" = $S ] || die "the ${S}x${W} job did not form within $((60 * MULT)) s"
t1=$(date +%s%N)
for i in $(seq 1 $W); do
	wait_pid "${WORKER_PIDS[$((i - 1))]}" $((300)) || die "worker $i exited $?: $(tail -n 3 "$TMP/worker$i.err")"
done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 60 || die "node $p exited $? after the workers finished"
done
t2=$(date +%s%N)
for i in $(seq 1 $W); do
	grep -q "verified" "$TMP/worker$i.out" || die "worker $i did not verify: $(cat "$TMP/worker$i.out")"
done
! grep -l MISMATCH "$TMP"/worker*.err || die "a worker saw a wrong sum"
printf 'ok %dx%d: formed in %.2f s, ran and shut down in %.2f s; %s\n' $S $W \
	"$(awk "BEGIN { print ($t1 - $t0) / 1e9 }")" "$(awk "BEGIN { print ($t2 - $t1) / 1e9 }")" \
	"$(cat "$TMP/worker1.out")"

out=$("$BUILD/tests/helpers/sched_load" --scheduler "$BIN/ps-scheduler" --nodes 300 --servers 8 \
	--barriers 10 --window-s 1 --timeout-s $((60 * MULT)) 2>&1) || die "sched_load: $out"
echo "$out"
echo "$out" | grep -q '^RESULT nodes=300 ' || die "sched_load printed no result"
