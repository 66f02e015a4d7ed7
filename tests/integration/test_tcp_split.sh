#!/usr/bin/env bash
# The split TCP pair (PS_TCP_SPLIT, common/po_dial.c): a worker's link to
# each server is a request connection and an answers connection.
#  1. split_attack.py, an authenticated worker of the job, against the
#     server: an answers connection for a request connection that has not
#     authenticated, answers hellos proved for another channel, channel 7
#     and a second answers connection are refused with a reason in the
#     server's log; a request is answered on the answers connection; data
#     on the answers connection drops both.
#  2. Exact sums, 2 servers x 3 workers over TCP, split on and off (the
#     worker logs which).
#  3. ss -K kills one connection of a pair (the answers one, then the
#     request one) mid-run: the worker fails, naming the server, within
#     seconds; nothing hangs.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
[ -x $PY ] || { echo "no /usr/bin/python3"; exit 77; }
export PS_TRANSPORT=tcp

stop_all() {
	local p
	for p in "${WORKER_PIDS[@]}" "${SERVER_PIDS[@]}" "$SCHED_PID"; do
		kill -9 "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
}

# ---- 1. the handshake and the binding, against a live server --------------
start_scheduler 1 1
start_servers 1
WORKER_PIDS=()
timeout $((60 * MULT)) $PY tests/integration/split_attack.py "$DMLC_PS_ROOT_PORT" \
	>"$TMP/attack.out" 2>&1 || die "split_attack.py: $(cat "$TMP/attack.out")"
for msg in \
	"answers connection (PS_TCP_SPLIT) for a worker with no authenticated request connection to this server" \
	"hello failed authentication: its proof does not match" \
	"its hello opens channel 7" \
	"a second answers connection for one worker" \
	"message on the answers connection of a split pair"; do
	grep -qF "$msg" "$TMP/server1.err" || die "server log does not say '$msg': $(cat "$TMP/server1.err")"
done
[ "$(grep -c "hello failed authentication" "$TMP/server1.err")" -ge 2 ] ||
	die "the two answers hellos proved for other channels were not both refused for their proofs"
stop_all
echo "ok refusals: $(grep -c '^ok' "$TMP/attack.out") checks, each refusal logged with its reason"

# ---- 2. exact sums, split on and off --------------------------------------
for split in 1 0; do
	PS_TCP_SPLIT=$split PS_VERBOSE=1 start_scheduler 2 3
	PS_TCP_SPLIT=$split PS_VERBOSE=1 start_servers 2
	PS_TCP_SPLIT=$split PS_VERBOSE=1 start_workers 3 --steps 6 --keys 6 --sizes 4,4K,1M,3M
	job_verified "split=$split" 300
	n=$(cat "$TMP"/worker*.err | grep -c "tcp split in two connections")
	if [ "$split" = 1 ]; then
		[ "$n" = 6 ] || die "split=1: $n of 6 worker-server links split"
	else
		[ "$n" = 0 ] || die "split=0: $n links split"
	fi
	echo "ok split=$split: 2x3 exact sums ($(head -1 "$TMP/worker1.out"))"
done

# ---- 3. one connection of a pair killed mid-run ---------------------------
kill_one() { # answers|requests
	local which=$1 line port t0 rc
	export PS_HEARTBEAT_INTERVAL=0.2 PS_HEARTBEAT_TIMEOUT=2 PS_REQUEST_TIMEOUT=30
	export PS_TCP_SPLIT=1
	PS_VERBOSE=1 start_scheduler 1 1
	PS_VERBOSE=1 start_servers 1
	# The last scenario's log must not be read for this worker's ports.
	rm -f "$TMP"/worker*.err
	PS_VERBOSE=1 start_workers 1 --steps 0 --seconds 120 --keys 4 --sizes 64K,4M
	for i in $(seq 1 $((200 * MULT))); do
		line=$(grep -h "tcp split in two connections" "$TMP/worker1.err")
		[ -n "$line" ] && break
		sleep 0.05
	done
	[ -n "$line" ] || die "$which: the worker never split its connection: $(cat "$TMP/worker1.err")"
	if [ "$which" = answers ]; then
		port=$(echo "$line" | sed -n 's/.*answers to local port \([0-9]*\).*/\1/p')
	else
		port=$(echo "$line" | sed -n 's/.*requests from local port \([0-9]*\).*/\1/p')
	fi
	sleep 1 # requests in flight
	kill -0 "${WORKER_PIDS[0]}" 2>/dev/null || die "$which: the worker ended before the kill"
	t0=$(date +%s.%N)
	ss -K src 127.0.0.1 sport = ":$port" >"$TMP/ss.out" 2>&1
	grep -q "127.0.0.1:$port " "$TMP/ss.out" ||
		{ stop_all; echo "skip: ss -K cannot destroy sockets here (needs root and CONFIG_INET_DIAG_DESTROY): $(cat "$TMP/ss.out")"; exit 77; }
	wait_pid "${WORKER_PIDS[0]}" 20; rc=$?
	[ $rc = 124 ] && die "$which: worker still running 20 s after its $which connection was killed"
	[ $rc != 0 ] || die "$which: worker claims success: $(cat "$TMP/worker1.out")"
	grep -q "server 1 (rank 0" "$TMP/worker1.err" || die "$which: the worker's error names no server: $(cat "$TMP/worker1.err")"
	grep -q "connection closed" "$TMP/worker1.err" || die "$which: the worker does not say its connection closed: $(cat "$TMP/worker1.err")"
	grep -q "timed out" "$TMP/worker1.err" && die "$which: the worker waited for a timeout: $(cat "$TMP/worker1.err")"
	for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
		wait_pid "$p" 20; rc=$?
		[ $rc = 124 ] && die "$which: node $p did not exit after the worker failed"
	done
	echo "ok $which connection killed: worker failed after $(echo "$(date +%s.%N) - $t0" | bc | cut -c1-4) s: $(grep -m1 "connection closed" "$TMP/worker1.err" | cut -c1-240)"
	stop_all
}
kill_one answers
kill_one requests
