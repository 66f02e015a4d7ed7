#!/usr/bin/env bash
# Real workers misusing the API: local refusals (unknown key, bad length,
# bogus request id) and a server refusal (a push whose size differs from
# the key's) come back as clear errors; the same connections then keep
# aggregating exactly.
. "$(dirname "$0")/lib.sh"
start_scheduler 2 2
start_servers 2
for i in 1 2; do
	"$BUILD/tests/helpers/misuse" >"$TMP/m$i.out" 2>"$TMP/m$i.err" &
	M[$i]=$!; PIDS+=(${M[$i]})
done
for i in 1 2; do wait_pid "${M[$i]}" 60 || die "misuse worker $i exited $?: $(cat "$TMP/m$i.err")"; done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "node $p exited $?"; done
grep -q "refused as expected" "$TMP"/m*.out || die "no refusal seen"
grep -q "key 2: .* used it as 8 bytes .* created it on this server as 16 bytes" "$TMP"/server*.err || die "server did not log the refusal"
cat "$TMP"/m*.out
