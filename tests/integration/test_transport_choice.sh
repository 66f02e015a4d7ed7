#!/usr/bin/env bash
# Transport choice and agreement at rendezvous:
#  - PS_TRANSPORT=auto picks RDMA when a device has an active port, else
#    TCP, and says which (PS_VERBOSE=1); the cluster then runs;
#  - a node whose transport differs from the job's is rejected with a
#    message naming it and both transports, never a hang;
#  - PS_TRANSPORT=rdma without a device is a clear local error.
# On a host without RDMA this checks the TCP side; test_rdma_vm.sh runs it
# again inside the soft-RoCE VM with PS_TEST_EXPECT_RDMA=1.
. "$(dirname "$0")/lib.sh"
export PS_CONNECT_TIMEOUT=$((20 * MULT))
unset PS_TRANSPORT DMLC_ENABLE_RDMA
if [ "${PS_TEST_EXPECT_RDMA:-0}" = 1 ]; then want=rdma; else want=tcp; fi

# 1. auto: every node picks the same transport, logs it, and the job runs.
PS_TRANSPORT=auto PS_VERBOSE=1 start_scheduler 1 1
PS_TRANSPORT=auto PS_VERBOSE=1 start_servers 1
PS_TRANSPORT=auto PS_VERBOSE=1 start_workers 1 --steps 2 --keys 1 --sizes 4,64K,1M
wait_pid "${WORKER_PIDS[0]}" 120 || die "auto: worker failed"
grep -q "verified" "$TMP/worker1.out" || die "auto: worker did not verify"
grep -q "transport: $want (auto: " "$TMP/server1.err" || die "auto: server did not log choosing $want: $(grep transport "$TMP/server1.err")"
echo "ok auto: $(grep -o "transport: $want (auto: .*" "$TMP/server1.err" | head -1)"
wait_pid "$SCHED_PID" 30 || die "auto: scheduler failed"

# 2. job transport rdma, a server with tcp: rejected by name, quickly.
PS_TRANSPORT=rdma start_scheduler 1 1
PS_TRANSPORT=tcp start_servers 1
wait_pid "${SERVER_PIDS[0]}" 30; rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || die "mismatched server should fail (rc $rc)"
grep -q "server at .* uses transport 'tcp' but the job uses 'rdma'" "$TMP/server1.err" || die "no mismatch message: $(cat "$TMP/server1.err")"
grep -q "uses transport 'tcp' but the job uses 'rdma'" "$TMP/sched.err" || die "scheduler did not log the mismatch"
kill "$SCHED_PID" 2>/dev/null
echo "ok mismatch: $(grep -o "server at .*" "$TMP/server1.err" | head -1)"

# 3. auto job: the first node's choice (tcp) binds the others.
PS_TRANSPORT=auto start_scheduler 1 1
PS_TRANSPORT=tcp start_servers 1
sleep 1
DMLC_ENABLE_RDMA=1 start_workers 1 --steps 1
wait_pid "${WORKER_PIDS[0]}" 30; rc=$?
[ $rc != 0 ] && [ $rc != 124 ] || die "rdma worker in a tcp job should fail (rc $rc)"
if [ "$want" = rdma ]; then
	grep -q "uses transport 'rdma' but the job uses 'tcp' (picked by the first node, server" "$TMP/worker1.err" || die "no mismatch message: $(cat "$TMP/worker1.err")"
else
	grep -q "PS_TRANSPORT=rdma but no RDMA device" "$TMP/worker1.err" || die "no missing-device message: $(cat "$TMP/worker1.err")"
fi
echo "ok rdma worker in a tcp job: $(head -1 "$TMP/worker1.err")"
exit 0
