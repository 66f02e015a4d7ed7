#!/usr/bin/env bash
# serial
# PS_TRANSPORT=auto picks shared memory per connection for peers on one
# host (same boot id, network namespace and uid) and the job's transport
# for the others (docs/transports.md "Shared memory"):
#  1. 2 servers x 2 workers on loopback under auto: every worker->server
#     link is shm (logged per server, PS_VERBOSE=1), the servers listen on
#     an shm name besides their TCP port, exact sums on both sides of the
#     ring/process_vm_readv threshold; the links authenticated (the job
#     secret is on, as always); a stranger's push on the shm listener
#     before authenticating is dropped (shm_attack.py);
#  2. the same cluster with one worker at PS_TRANSPORT=tcp: that worker
#     uses TCP to both servers (explicit means exactly that), the other shm;
#  3. network namespaces joined by a veth pair: scheduler, server and one
#     worker in one namespace, a second worker in another: the first
#     worker links by shm, the second by TCP, sums exact (skipped, saying
#     why, without root or ip).
. "$(dirname "$0")/lib.sh"
export PS_TRANSPORT=auto PS_VERBOSE=1
unset DMLC_ENABLE_RDMA

# links LOG: "shm" / "tcp" per server link, sorted, on one line (a split
# TCP pair, PS_TCP_SPLIT's default, also logs its second connection)
links() {
	sed -n '/: tcp split in two connections/d; s/.*transport to server [0-9]* (.*): \(shm\|tcp\|rdma\) .*/\1/p' "$1" | sort | tr '\n' ' '
}

# 1. Local 2x2 under auto: shm everywhere, exact sums.
start_scheduler 2 2
start_servers 2
start_workers 2 --steps 4 --keys 3 --sizes 1,4,4K,32K,65536,1M,4M,64M
for p in "${WORKER_PIDS[@]}"; do
	wait_pid "$p" 300 || die "auto 2x2: worker $p exited $?"
done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 30 || die "auto 2x2: node $p exited $? after the workers finished"
done
for i in 1 2; do
	grep -q "verified" "$TMP/worker$i.out" || die "auto 2x2: worker $i did not verify"
	[ "$(links "$TMP/worker$i.err")" = "shm shm " ] ||
		die "auto 2x2: worker $i links are '$(links "$TMP/worker$i.err")', want shm to both servers: $(grep 'transport' "$TMP/worker$i.err")"
	grep -q "transport to server .*: shm port [0-9]* (auto: same host: boot id, network namespace and uid match)" "$TMP/worker$i.err" ||
		die "auto 2x2: worker $i does not say why it chose shm"
	grep -Eq "transport auto: shm port [0-9]+ for workers on the same host" "$TMP/server$i.err" ||
		die "auto 2x2: server $i has no shm listener: $(grep transport "$TMP/server$i.err")"
done
grep -q "transport: tcp (auto: " "$TMP/server1.err" || die "auto 2x2: the job transport is not tcp"
echo "ok auto 2x2 links shm, sums exact: $(cat "$TMP/worker1.out")"

# 1b. A stranger on a server's shm listener is held to the same
# authentication as on TCP: a push before it is refused, the job runs.
rm -f "$TMP"/server*.err # the port read below must be the new server's
start_scheduler 1 1
start_servers 1
for i in $(seq 1 $((100 * MULT))); do
	shm_port=$(sed -n 's/.*transport auto: shm port \([0-9]*\) .*/\1/p' "$TMP/server1.err")
	[ -n "$shm_port" ] && break
	sleep 0.1
done
[ -n "$shm_port" ] || die "auth: the server logged no shm port"
python3 "$(dirname "$0")/shm_attack.py" shm-push "$shm_port" || die "auth: the stranger's shm push was not refused"
start_workers 1 --steps 3 --keys 2 --sizes 4,64K,1M
wait_pid "${WORKER_PIDS[0]}" 120 || die "auth: worker exited $?"
grep -q "verified" "$TMP/worker1.out" || die "auth: worker did not verify"
[ "$(links "$TMP/worker1.err")" = "shm " ] || die "auth: worker links '$(links "$TMP/worker1.err")'"
wait_pid "${SERVER_PIDS[0]}" 30 || die "auth: server exited $?"
grep -q "push message before authenticating" "$TMP/server1.err" ||
	die "auth: the server did not log the stranger's push: $(grep -i shm "$TMP/server1.err")"
echo "ok shm stranger: push before authenticating dropped, the job ran over shm"

# 2. One worker with an explicit PS_TRANSPORT=tcp keeps TCP.
start_scheduler 2 2
start_servers 2
start_workers 1 --steps 3 --keys 2 --sizes 4,64K,1M
PS_TRANSPORT=tcp "$BIN/ps-worker" --steps 3 --keys 2 --sizes 4,64K,1M \
	>"$TMP/worker2.out" 2>"$TMP/worker2.err" &
WORKER_PIDS+=($!)
PIDS+=($!)
for p in "${WORKER_PIDS[@]}"; do
	wait_pid "$p" 120 || die "mixed: worker $p exited $?"
done
for i in 1 2; do
	grep -q "verified" "$TMP/worker$i.out" || die "mixed: worker $i did not verify"
done
[ "$(links "$TMP/worker1.err")" = "shm shm " ] || die "mixed: auto worker links '$(links "$TMP/worker1.err")'"
[ "$(links "$TMP/worker2.err")" = "tcp tcp " ] || die "mixed: tcp worker links '$(links "$TMP/worker2.err")'"
grep -q "transport to server .*: tcp (PS_TRANSPORT is explicit)" "$TMP/worker2.err" ||
	die "mixed: the tcp worker does not say why"
wait_pid "$SCHED_PID" 30 || die "mixed: scheduler exited $?"
echo "ok explicit tcp worker beside an auto one: tcp and shm links, sums exact"

# 3. Two network namespaces: shm inside one, TCP between them.
if ! command -v ip >/dev/null || [ "$(id -u)" != 0 ]; then
	echo "ok # SKIP namespaces: needs root and ip"
	exit 0
fi
NS_A=psshm$$a
NS_B=psshm$$b
VA=pshm$$a
VB=pshm$$b
ADDR_A=10.232.$(($$ % 200 + 20)).1
ADDR_B=10.232.$(($$ % 200 + 20)).2
ns_cleanup() {
	ip netns del "$NS_A" 2>/dev/null
	ip netns del "$NS_B" 2>/dev/null
	cleanup
}
trap ns_cleanup EXIT
if ! ip netns add "$NS_A" 2>/dev/null || ! ip netns add "$NS_B" 2>/dev/null; then
	echo "ok # SKIP namespaces: cannot create network namespaces"
	exit 0
fi
ip link add "$VA" type veth peer name "$VB" &&
	ip link set "$VA" netns "$NS_A" && ip link set "$VB" netns "$NS_B" &&
	ip -n "$NS_A" addr add "$ADDR_A/24" dev "$VA" &&
	ip -n "$NS_B" addr add "$ADDR_B/24" dev "$VB" &&
	ip -n "$NS_A" link set "$VA" up && ip -n "$NS_B" link set "$VB" up &&
	ip -n "$NS_A" link set lo up && ip -n "$NS_B" link set lo up ||
	die "cannot set up the veth pair"
export DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=2 DMLC_PS_ROOT_URI=$ADDR_A
rm -f "$TMP/sched.out"
ip netns exec "$NS_A" "$BIN/ps-scheduler" --root-port 0 >"$TMP/sched.out" 2>"$TMP/sched.err" &
SCHED_PID=$!
PIDS+=($!)
for i in $(seq 1 $((600 * MULT))); do
	grep -q PS_ROOT_PORT= "$TMP/sched.out" 2>/dev/null && break
	sleep 0.05
done
DMLC_PS_ROOT_PORT=$(sed -n 's/^PS_ROOT_PORT=//p' "$TMP/sched.out")
[ -n "$DMLC_PS_ROOT_PORT" ] || die "namespaces: scheduler did not start"
export DMLC_PS_ROOT_PORT
ip netns exec "$NS_A" "$BIN/ps-server" >"$TMP/server1.out" 2>"$TMP/server1.err" &
PIDS+=($!)
SPID=$!
WORKER_PIDS=()
for i in 1 2; do
	ns=$NS_A
	[ $i = 2 ] && ns=$NS_B
	DMLC_NODE_HOST=$([ $i = 1 ] && echo "$ADDR_A" || echo "$ADDR_B") \
		ip netns exec "$ns" "$BIN/ps-worker" --steps 3 --keys 2 --sizes 4,64K,1M,4M \
		>"$TMP/worker$i.out" 2>"$TMP/worker$i.err" &
	WORKER_PIDS+=($!)
	PIDS+=($!)
done
for p in "${WORKER_PIDS[@]}"; do
	wait_pid "$p" 120 || die "namespaces: worker $p exited $?"
done
wait_pid "$SPID" 30 || die "namespaces: server exited $?"
for i in 1 2; do
	grep -q "verified" "$TMP/worker$i.out" || die "namespaces: worker $i did not verify"
done
[ "$(links "$TMP/worker1.err")" = "shm " ] || die "namespaces: worker in the server's namespace links '$(links "$TMP/worker1.err")'"
[ "$(links "$TMP/worker2.err")" = "tcp " ] || die "namespaces: worker in the other namespace links '$(links "$TMP/worker2.err")'"
grep -q "transport to server .*: tcp (other host, network namespace or user)" "$TMP/worker2.err" ||
	die "namespaces: the other worker does not say why it chose tcp"
echo "ok namespaces: shm inside one, tcp across the veth pair, sums exact"
exit 0
