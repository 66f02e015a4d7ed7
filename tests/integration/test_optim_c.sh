#!/usr/bin/env bash
# Issue 13's worker paths from C (tests/helpers/optim_c.c) in a 2x2
# dist_sync job: 2bit-compressed multi-key pushpulls against a scalar
# re-derivation, Adam state save/load on the servers, a bad state file
# refused.  Runs under ASan and TSan too (the Python tests cannot load a
# TSan library).
. "$(dirname "$0")/lib.sh"
start_scheduler 2 2
start_servers 2
for i in 1 2; do
	"$BUILD/tests/helpers/optim_c" "$TMP/states" >"$TMP/o$i.out" 2>"$TMP/o$i.err" &
	K[$i]=$!; PIDS+=(${K[$i]})
done
for i in 1 2; do wait_pid "${K[$i]}" $((120 * MULT)) || die "optim_c worker $i exited $?: $(cat "$TMP/o$i.err")"; done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "node $p exited $?"; done
[ "$(cat "$TMP"/o*.out | grep -c ': ok')" = 2 ] || die "not both workers passed"
head -c 8 "$TMP/states" | grep -q PSCHOPTS || die "no state file written"
cat "$TMP"/o*.out
exit 0
