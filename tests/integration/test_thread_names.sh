#!/usr/bin/env bash
# A node's threads carry names (docs/configuration.md "Latency and threads"): while a 1x1 cluster
# runs, the server has ps-van and ps-heartbeat, the worker ps-van,
# ps-sender and ps-heartbeat, read from /proc/PID/task/*/comm.
. "$(dirname "$0")/lib.sh"

names() { cat /proc/"$1"/task/*/comm 2>/dev/null | sort -u | tr '\n' ' '; }
has_all() { # PID NAME...: every NAME among the process's threads
	local pid=$1 n have
	shift
	have=" $(names "$pid")"
	for n in "$@"; do
		case $have in *" $n "*) ;; *) return 1 ;; esac
	done
}

start_scheduler 1 1
start_servers 1
start_workers 1 --steps 0 --seconds 6 --keys 2 --sizes 4K,1M
srv=${SERVER_PIDS[0]} wrk=${WORKER_PIDS[0]}
ok=0
for i in $(seq 1 $((100 * MULT))); do
	if has_all "$srv" ps-van ps-heartbeat && has_all "$wrk" ps-van ps-sender ps-heartbeat; then
		ok=1
		break
	fi
	kill -0 "$wrk" 2>/dev/null || break
	sleep 0.1
done
[ $ok = 1 ] || die "thread names: server has '$(names "$srv")', worker has '$(names "$wrk")'"
echo "server threads: $(names "$srv")"
echo "worker threads: $(names "$wrk")"
wait_pid "$wrk" 120 || die "worker exited $?"
for p in "$srv" "$SCHED_PID"; do
	wait_pid "$p" 30 || die "node $p exited $? after the worker finished"
done
grep -q "verified" "$TMP/worker1.out" || die "worker did not verify"
echo "ok thread names"
