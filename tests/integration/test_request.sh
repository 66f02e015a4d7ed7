#!/usr/bin/env bash
# psched_request(), the one request entry point, in a real job of 2
# workers and 2 servers (tests/helpers/request.c): push, pull and
# pushpull of dense keys, key lists and row-sparse rows with exact sums;
# malformed requests (unknown op or family, buffers missing or of another
# family or op, bad device, wrong lengths, unsorted keys, row ids out of
# range, unknown keys) refused with a clear error; the connections still
# sum exactly after them.
. "$(dirname "$0")/lib.sh"
start_scheduler 2 2
start_servers 2
for i in 1 2; do
	"$BUILD/tests/helpers/request" >"$TMP/r$i.out" 2>"$TMP/r$i.err" &
	R[$i]=$!; PIDS+=(${R[$i]})
done
for i in 1 2; do wait_pid "${R[$i]}" 60 || die "request worker $i exited $?: $(cat "$TMP/r$i.err")"; done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "node $p exited $?"; done
for i in 1 2; do
	grep -q "verified$" "$TMP/r$i.out" || die "worker $i did not verify"
	[ "$(grep -c "refused:" "$TMP/r$i.out")" -ge 24 ] || die "worker $i: too few refusals seen: $(cat "$TMP/r$i.out")"
done
cat "$TMP"/r1.out
