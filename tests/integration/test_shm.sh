#!/usr/bin/env bash
# The shared-memory transport (PS_TRANSPORT=shm) in real clusters:
#  - 2 servers x 2 workers, exact sums checked by ps-worker (sizes on both
#    sides of the ring/process_vm_readv threshold, 64 MiB included); the
#    servers really listen on shm names ("@psched-shm-<uid>-<port>");
#    PS_TEST_LITE=1 (the TSan build): 3 steps of one key per size;
#  - a worker SIGKILLed mid-run: the other worker fails with an error
#    naming the dead worker, servers and scheduler exit, nothing hangs.
. "$(dirname "$0")/lib.sh"
export PS_TRANSPORT=shm

# wait_ports N: until N servers printed their port
wait_ports() {
	await_server_ports "$1" || die "servers did not come up"
}

# 1. Exact sums over shm.
start_scheduler 2 2
start_servers 2
if [ "${PS_TEST_LITE:-0}" = 1 ]; then
	start_workers 2 --steps 3 --keys 1 --sizes 1,4,7,4K,32K,65536,1M,4M,64M
else
	start_workers 2 --steps 6 --keys 3 --sizes 1,4,7,4K,32K,65536,1M,4M,64M
fi
wait_ports 2
for port in $(server_ports); do
	grep -q "@psched-shm-$(id -u)-$port\$" /proc/net/unix ||
		die "server port $port is not an shm listener"
done
for p in "${WORKER_PIDS[@]}"; do
	wait_pid "$p" 300 || die "2x2: worker $p exited $?"
done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 30 || die "2x2: node $p exited $? after the workers finished"
done
for i in 1 2; do
	grep -q "verified" "$TMP/worker$i.out" || die "2x2: worker $i did not verify"
done
echo "ok 2x2 over shm: $(cat "$TMP/worker1.out")"

# 2. A worker dies mid-run (kill -9, mid-message with large keys).
export PS_HEARTBEAT_INTERVAL=0.2 PS_HEARTBEAT_TIMEOUT=2 PS_REQUEST_TIMEOUT=8
start_scheduler 2 2
start_servers 2
start_workers 2 --steps 0 --seconds 120 --keys 2 --sizes 4,64K,1M,16M
wait_ports 2
sleep 1.5
victim=${WORKER_PIDS[1]}
kill -0 "$victim" 2>/dev/null || die "worker 2 ended before the kill: $(cat "$TMP/worker2.err")"
t0=$(date +%s.%N)
kill -9 "$victim"
wait_pid "${WORKER_PIDS[0]}" 40
rc=$?
[ $rc = 124 ] && die "surviving worker still running 40 s after the kill"
[ $rc != 0 ] || die "surviving worker claims success"
t1=$(date +%s.%N)
grep -Eq "worker [0-9]+ \(rank [0-9]+.*(dead|died)" "$TMP/worker1.err" ||
	die "the surviving worker's error does not name the dead worker: $(cat "$TMP/worker1.err")"
grep -q "timed out" "$TMP/worker1.err" &&
	die "the surviving worker waited for a timeout: $(cat "$TMP/worker1.err")"
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 30
	[ $? = 124 ] && die "node $p did not exit after the worker died"
done
echo "ok worker killed: the other failed after $(echo "$t1 - $t0" | bc) s: $(tail -n 1 "$TMP/worker1.err")"
exit 0
