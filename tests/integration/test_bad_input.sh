#!/usr/bin/env bash
# Bad peers against a running 2x2 cluster: garbage, truncated frames, a
# header claiming 2^40 bytes, garbage protobuf, data before hello, hellos
# and registrations that fail authentication or carry the old token, an
# unknown key, a wrong-size push, a peer dying mid-message, sent to both
# servers and the scheduler.  Each gets a clear error (logged by the node,
# and an error status where a reply is possible) and costs only its own
# connection: the real workers' aggregates must stay exact throughout.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x $PY ] || { echo "no /usr/bin/python3"; exit 77; }

export PS_JOB_TOKEN="bad-input-test-$$"
start_scheduler 2 2
start_servers 2
# Key 2000 = the first 1 MiB key of ps-worker (size index 2): on both servers.
start_workers 2 --seconds $((12 * MULT)) --steps 0 --keys 2 --sizes 4,4K,1M
await_server_ports 2
ports=$(server_ports | tr '\n' ' ')
[ -n "$ports" ] || die "servers never came up"
sleep 1
# Worker ids are S+1..S+W = 3, 4.
$PY tests/integration/attack.py "$DMLC_PS_ROOT_PORT" 3 2000 1048576 $ports || die "attack checks failed"
for p in "${WORKER_PIDS[@]}"; do
	wait_pid "$p" 120 || die "worker $p exited $? (aggregates disturbed?)"
done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 30 || die "node $p exited $? after the attack"
done
grep -q verified "$TMP/worker1.out" && grep -q verified "$TMP/worker2.out" || die "workers did not verify"
cat "$TMP"/server*.err "$TMP"/sched.err >"$TMP/all.err"
# (A request over PS_MAX_TENSOR_BYTES is well framed now: refused on its
# own from a worker, test_limits.sh; before hello it is a push before
# authenticating.)
for msg in "malformed header: bad magic" "not a valid psched.Control protobuf" \
	"push message before authenticating" "hello failed authentication: its proof does not match" \
	"already connected" "no worker of this job" \
	"control message larger than 1 MiB" "65536-byte control message before authenticating" \
	"message 5 before authenticating" "message 20 before authenticating" \
	"without a 32-byte nonce" "registration failed authentication: its proof does not match"; do
	grep -q "$msg" "$TMP/all.err" || die "no log line with '$msg'"
done
echo "ok cluster exact after the attack: $(cat "$TMP/worker1.out")"
