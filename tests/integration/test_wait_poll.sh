#!/usr/bin/env bash
# psched_wait()'s and the van loop's busy-poll (PS_POLL_US) under
# concurrency: tests/helpers/wait_poll.c, 4 threads of serial pushpulls
# checked value by value plus a thread of callback requests, then one
# thread alone (so every wait polls), in a 1x1 job; with the poll at its
# largest, at the default and off.  Runs under ASan and TSan too.
. "$(dirname "$0")/lib.sh"
for poll in 1000 50 0; do
	export PS_POLL_US=$poll
	start_scheduler 1 1
	start_servers 1
	"$BUILD/tests/helpers/wait_poll" >"$TMP/w$poll.out" 2>"$TMP/w$poll.err" &
	W=$!; PIDS+=($W)
	wait_pid "$W" $((120 * MULT)) || die "wait_poll (PS_POLL_US=$poll) exited $?: $(cat "$TMP/w$poll.err")"
	for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "node $p exited $?"; done
	grep -q "^wait_poll: ok 1800 (PS_POLL_US=$poll)" "$TMP/w$poll.out" || die "PS_POLL_US=$poll: $(cat "$TMP/w$poll.out" "$TMP/w$poll.err")"
	cat "$TMP/w$poll.out"
	SERVER_PIDS=()
done
exit 0
