#!/usr/bin/env bash
# Faults of workers and of the scheduler, and pauses (issue 17); a
# server's kill -9 and a SIGSTOP without SIGCONT are in test_failure.sh.
# What users can expect, and what this checks:
#  - kill -9 of a worker: the other worker's call fails naming the dead
#    worker, within the heartbeat timeout; every node exits, none hangs.
#  - kill -9 of the scheduler: every node exits with an error within the
#    heartbeat timeout; the servers name the scheduler, each worker the
#    scheduler or a server that left because of it.
#  - SIGSTOP then SIGCONT shorter than PS_HEARTBEAT_TIMEOUT (a server, a
#    worker): nothing is reported, the job goes on and verifies exactly.
#  - a pause longer than PS_HEARTBEAT_TIMEOUT (a server, a worker): the node
#    is declared dead, the other workers fail naming it; when it resumes
#    it finds itself out of the job and exits with an error (it does not
#    carry on with stale state).  Everything exits in bounded time.
. "$(dirname "$0")/lib.sh"
HB=$((3 * MULT))
export PS_HEARTBEAT_INTERVAL=0.2 PS_HEARTBEAT_TIMEOUT=$HB PS_REQUEST_TIMEOUT=$((30 * MULT))

# cluster SECONDS: 2 servers, 2 checking ps-workers running SECONDS
cluster() {
	start_scheduler 2 2
	start_servers 2
	start_workers 2 --steps 0 --seconds "$1" --keys 2 --sizes 4,64K,1M
	await_server_ports 2
	sleep 1
}

# node_id FILE: the id a node printed when it came up
node_id() { sed -n 's/.* id \([0-9]*\) listening.*/\1/p' "$1"; }

# all_exit LIMIT NAME: every node gone within LIMIT s; sets RCS
all_exit() {
	local p rc
	RCS=()
	for p in "${WORKER_PIDS[@]}" "${SERVER_PIDS[@]}" "$SCHED_PID"; do
		wait_pid "$p" "$1"; rc=$?
		[ $rc = 124 ] && die "$2: node $p still running $1 s after the fault"
		RCS+=("$rc")
	done
}

# dead_worker: id of the worker the scheduler declared dead
dead_worker() { sed -n 's/.*declaring worker \([0-9]*\) (rank.*/\1/p' "$TMP/sched.err" | head -1; }

elapsed() { echo "$(date +%s.%N) - $1" | bc; }

# 1. kill -9 of a worker.
cluster 60
t0=$(date +%s.%N)
kill -9 "${WORKER_PIDS[1]}"
wait_pid "${WORKER_PIDS[0]}" $((HB + 10)); rc=$?
[ $rc = 124 ] && die "kill worker: the other worker still runs"
[ $rc != 0 ] || die "kill worker: the other worker claims success"
t=$(elapsed "$t0")
# Ids are given at rendezvous, not in start order: the scheduler's verdict
# names the one killed; the survivor's failure must name that worker.
id=$(dead_worker)
[ -n "$id" ] || die "kill worker: the scheduler declared no worker dead"
grep "^ps-worker:" "$TMP/worker1.err" | grep -q "worker $id (rank" ||
	die "kill worker: the surviving worker's error does not name worker $id"
all_exit 20 "kill worker"
echo "ok kill -9 worker: reported after $t s: $(grep "^ps-worker:" "$TMP/worker1.err" | cut -c1-200)"

# 2. kill -9 of the scheduler.
cluster 60
t0=$(date +%s.%N)
kill -9 "$SCHED_PID"
all_exit $((HB + 15)) "kill scheduler"
t=$(elapsed "$t0")
for i in 0 1 2 3; do [ "${RCS[$i]}" != 0 ] || die "kill scheduler: a node exited 0"; done
for f in "$TMP"/server1.err "$TMP"/server2.err; do
	grep -q "lost the scheduler" "$f" || die "kill scheduler: $f does not name the scheduler"
done
# A worker may see a server leave before its own scheduler connection
# breaks: then its failure names that server (leaving, or gone).
for f in "$TMP"/worker1.err "$TMP"/worker2.err; do
	grep "^ps-worker:" "$f" | grep -Eq "lost the scheduler|server [0-9]+ \(rank .*(leaving the job|died)" ||
		die "kill scheduler: $f: the worker's failure names neither the scheduler nor a leaving server"
done
grep "^ps-worker:" "$TMP"/worker*.err | grep -q "lost the scheduler" || echo "note: both workers saw a server leave first"
echo "ok kill -9 scheduler: every node exited with an error within $t s"

# 3, 4. Short pauses: the job goes on.
short_pause() { # server|worker
	local victim
	cluster 6
	if [ "$1" = server ]; then victim=${SERVER_PIDS[1]}; else victim=${WORKER_PIDS[1]}; fi
	kill -STOP "$victim"
	sleep 1
	kill -CONT "$victim"
	all_exit 40 "short $1 pause"
	for i in 0 1 2 3 4; do [ "${RCS[$i]}" = 0 ] || die "short $1 pause: a node exited ${RCS[$i]}"; done
	grep -q verified "$TMP/worker1.out" && grep -q verified "$TMP/worker2.out" ||
		die "short $1 pause: workers did not verify"
	grep -q "dead" "$TMP"/*.err && die "short $1 pause: a node was declared dead"
	echo "ok SIGSTOP/SIGCONT of a $1 for 1 s (heartbeat timeout $HB s): the job went on and verified"
}
short_pause server
short_pause worker

# 5, 6. Long pauses: reported, and the resumed node leaves.
long_pause() { # server|worker
	local victim id t0 t other
	cluster 60
	if [ "$1" = server ]; then
		victim=${SERVER_PIDS[1]}
		id=$(node_id "$TMP/server2.out")
		other=("$TMP"/worker1.err "$TMP"/worker2.err)
	else
		victim=${WORKER_PIDS[1]}
		other=("$TMP"/worker1.err)
	fi
	t0=$(date +%s.%N)
	kill -STOP "$victim"
	sleep $((HB + 2))
	kill -CONT "$victim"
	all_exit $((HB + 20)) "long $1 pause"
	[ "$1" = worker ] && id=$(dead_worker)
	t=$(elapsed "$t0")
	for i in 0 1; do [ "${RCS[$i]}" != 0 ] || die "long $1 pause: a worker claims success"; done
	# The paused node must be named: in the final error, or in the
	# error the worker logged when the scheduler declared it dead (the
	# final error may instead blame a worker that left after it failed
	# the same way first).
	for f in "${other[@]}"; do
		grep -E "^ps-worker:|ERROR\]" "$f" | grep -q "$1 $id (rank" ||
			die "long $1 pause: $f does not name $1 $id"
	done
	grep -q "declaring $1 $id (rank .* no heartbeat" "$TMP/sched.err" ||
		die "long $1 pause: the scheduler did not declare $1 $id dead"
	echo "ok SIGSTOP of a $1 for $((HB + 2)) s, then SIGCONT: declared dead, reported, all exited within $t s"
}
long_pause server
long_pause worker
