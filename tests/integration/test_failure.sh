#!/usr/bin/env bash
# A server dies mid-run (kill -9), or hangs (SIGSTOP): every worker call
# fails within the heartbeat timeout with an error naming that server,
# and every process exits in bounded time.  Nothing hangs.
# A worker whose step waits on a push that the other worker will no longer
# make (it gave up first and said goodbye to the servers) fails at once
# too, naming that worker, not at PS_REQUEST_TIMEOUT: no worker error may
# be a timeout.
. "$(dirname "$0")/lib.sh"
export PS_HEARTBEAT_INTERVAL=0.2 PS_HEARTBEAT_TIMEOUT=2 PS_REQUEST_TIMEOUT=8

scenario() { # signal
	local sig=$1 t0 t1 p
	start_scheduler 2 2
	start_servers 2
	start_workers 2 --steps 0 --seconds 120 --keys 2 --sizes 4,64K,1M
	await_server_ports 2
	sleep 1.5
	victim=${SERVER_PIDS[1]}
	id=$(sed -n 's/.* id \([0-9]*\) listening.*/\1/p' "$TMP/server2.out")
	t0=$(date +%s.%N)
	kill -"$sig" "$victim"
	for p in "${WORKER_PIDS[@]}"; do
		wait_pid "$p" 40; rc=$?
		[ $rc = 124 ] && die "$sig: worker $p still running 40 s after the server failed"
		[ $rc != 0 ] || die "$sig: worker $p claims success"
	done
	t1=$(date +%s.%N)
	grep -q "server $id (rank" "$TMP"/worker*.err || die "$sig: no worker error names server $id: $(cat "$TMP"/worker*.err)"
	grep -q "timed out" "$TMP"/worker*.err && die "$sig: a worker waited for its request timeout: $(cat "$TMP"/worker*.err)"
	for p in "${SERVER_PIDS[0]}" "$SCHED_PID"; do
		wait_pid "$p" 20; rc=$?
		[ $rc = 124 ] && die "$sig: node $p did not exit"
	done
	kill -9 "$victim" 2>/dev/null
	echo "ok $sig: workers failed after $(echo "$t1 - $t0" | bc) s: $(head -1 "$TMP/worker1.err")"
}
scenario KILL
scenario STOP

# Serial waits over tcp: the worker's psched_wait() reads its answer on
# its own thread (PS_CALLER_RX), the van loop not polling that
# connection meanwhile.  The server it waits on dies (EOF under the
# caller's poll) or hangs (the heartbeat monitor fails the request on
# another thread, which must wake the caller's poll): the wait still
# ends at once or at the heartbeat timeout, naming the server.
serial() { # signal
	local sig=$1 t0 t1 rc
	export PS_TRANSPORT=tcp
	start_scheduler 1 1
	start_servers 1
	start_workers 1 --steps 0 --seconds 120 --keys 1 --sizes 4K
	await_server_ports 1
	sleep 1.5
	victim=${SERVER_PIDS[0]}
	t0=$(date +%s.%N)
	kill -"$sig" "$victim"
	wait_pid "${WORKER_PIDS[0]}" 40; rc=$?
	t1=$(date +%s.%N)
	[ $rc = 124 ] && die "serial $sig: worker still running 40 s after the server failed"
	[ $rc != 0 ] || die "serial $sig: worker claims success"
	grep -q "server 1 (rank" "$TMP"/worker1.err || die "serial $sig: the worker's error does not name server 1: $(cat "$TMP"/worker1.err)"
	grep -q "timed out" "$TMP"/worker1.err && die "serial $sig: the worker waited for its request timeout: $(cat "$TMP"/worker1.err)"
	wait_pid "$SCHED_PID" 20; [ $? = 124 ] && die "serial $sig: the scheduler did not exit"
	kill -9 "$victim" 2>/dev/null
	unset PS_TRANSPORT
	echo "ok serial $sig over tcp: the worker failed after $(echo "$t1 - $t0" | bc) s: $(tail -1 "$TMP/worker1.err")"
}
serial KILL
serial STOP

# A request with a callback (nobody in psched_wait) is bounded too: a
# pushpull the other worker never matches fails at the request timeout.
cb_timeout() {
	local p rc
	(
		export PS_REQUEST_TIMEOUT=2
		start_scheduler 1 2
		start_servers 1
		pids=()
		for i in 1 2; do
			"$BUILD/tests/helpers/cb_timeout" >"$TMP/cb$i.out" 2>"$TMP/cb$i.err" &
			pids+=($!)
			PIDS+=($!)
		done
		for p in "${pids[@]}"; do
			wait_pid "$p" 40; rc=$?
			[ $rc = 124 ] && die "callback request: worker still running"
			[ $rc = 0 ] || die "callback request: worker exited $rc: $(cat "$TMP"/cb*.out "$TMP"/cb*.err)"
		done
		grep -q "callback result .*timed out" "$TMP"/cb*.out ||
			die "callback request not failed by timeout: $(cat "$TMP"/cb*.out "$TMP"/cb*.err)"
		grep -q "timed out after 2000 ms waiting for server" "$TMP"/cb*.err ||
			die "the timeout does not name the server: $(cat "$TMP"/cb*.err)"
	) || exit 1
	echo "ok callback request bounded by the request timeout"
}
cb_timeout
