#!/usr/bin/env bash
# psched_wait()'s and the van loop's busy-poll (PS_POLL_US) and the
# caller's own receive (PS_CALLER_RX) under concurrency:
# tests/helpers/wait_poll.c, 4 threads of serial pushpulls checked value
# by value plus a thread of callback requests, then one thread alone (so
# every wait polls, and over tcp reads its answer itself), in a 1x1 job;
# over shm (the default here) with the poll at its largest, at 50 us and
# off, then over tcp with and without the caller's receive, and with it
# over a split pair (PS_TCP_SPLIT=1: the caller reads the answers
# connection).  Runs under ASan and TSan too.
. "$(dirname "$0")/lib.sh"
for run in "1000 1 auto" "50 1 auto" "0 1 auto" "0 1 tcp" "50 1 tcp" "0 0 tcp" "0 1 tcp 1"; do
	set -- $run
	poll=$1
	export PS_POLL_US=$poll PS_CALLER_RX=$2 PS_TRANSPORT=$3 PS_TCP_SPLIT=${4:-0}
	start_scheduler 1 1
	start_servers 1
	t="PS_POLL_US=$poll PS_CALLER_RX=$2 PS_TRANSPORT=$3 PS_TCP_SPLIT=${4:-0}"; f="$TMP/w$poll-$2-$3-${4:-0}"
	"$BUILD/tests/helpers/wait_poll" >"$f.out" 2>"$f.err" &
	W=$!; PIDS+=($W)
	wait_pid "$W" $((120 * MULT)) || die "wait_poll ($t) exited $?: $(cat "$f.err")"
	for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "node $p exited $?"; done
	grep -q "^wait_poll: ok 1800 (PS_POLL_US=$poll)" "$f.out" || die "$t: $(cat "$f.out" "$f.err")"
	echo "$t: $(cat "$f.out")"
	SERVER_PIDS=()
done
exit 0
