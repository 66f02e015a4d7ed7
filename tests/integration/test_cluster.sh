#!/usr/bin/env bash
# Real clusters on loopback: 1x1, 2x2, 3 servers x 4 workers.  Every
# worker pushes random float data for many keys (1 B .. 64 MiB) over many
# steps and checks each pulled aggregate exactly against the sum of what
# all workers pushed; raw (non-multiple-of-4) keys must equal one
# worker's push.  Every process must exit 0.  PS_TEST_LITE=1: smaller
# runs; PS_TRANSPORT and PS_TEST_ROOT_URI pick the transport (see
# test_rdma_vm.sh).
. "$(dirname "$0")/lib.sh"

run_cluster() { # S W worker-args...
	local s=$1 w=$2 p i
	shift 2
	start_scheduler "$s" "$w"
	start_servers "$s"
	start_workers "$w" "$@"
	for p in "${WORKER_PIDS[@]}"; do
		wait_pid "$p" 300 || die "${s}x${w}: worker $p exited $?"
	done
	for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
		wait_pid "$p" 30 || die "${s}x${w}: node $p exited $? after the workers finished"
	done
	for i in $(seq 1 "$w"); do
		grep -q "verified" "$TMP/worker$i.out" || die "${s}x${w}: worker $i did not verify"
	done
	echo "ok ${s}x${w}: $(cat "$TMP"/worker1.out)"
}

if [ "${PS_TEST_LITE:-0}" = 1 ]; then
	# Fewer steps and bytes for slow hosts (the soft-RoCE VM under
	# emulation, sanitizer builds); 64 MiB once.
	run_cluster 1 1 --steps 3 --keys 1 --sizes 1,3,4,1000,4K,64K,1M,64M
	run_cluster 2 2 --steps 4 --keys 2 --sizes 1,4,7,4K,65536,1M,4M
	run_cluster 3 4 --steps 3 --keys 2 --sizes 4,1001,8K,128K,1M
	exit 0
fi
run_cluster 1 1 --steps 8 --keys 2 --sizes 1,3,4,1000,4K,64K,1M,16M,64M
run_cluster 2 2 --steps 10 --keys 3 --sizes 1,4,7,4K,65536,1M,4M,64M
run_cluster 3 4 --steps 12 --keys 4 --sizes 4,1001,8K,128K,1M,3M
exit 0
