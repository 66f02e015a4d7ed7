#!/usr/bin/env bash
# Push-only traffic from several workers (no pulls pace them): every
# key's steps must keep opening on the server.  A push whose header came
# in while its step was still ahead, but whose payload completed after
# that step opened, used to be parked for a step that could not finish
# without it: the key stalled, later pushes piled up until
# PS_MAX_STEPS_AHEAD or PS_MAX_PARKED_BYTES refused them and ps-bench
# failed.  Several rounds, since it depends on how payloads interleave
# (PS_TEST_LITE=1, the TSan build: one).
. "$(dirname "$0")/lib.sh"
rounds=3
[ "${PS_TEST_LITE:-0}" = 1 ] && rounds=1
for round in $(seq 1 $rounds); do
	for shape in "1 256K" "2 64K,1M"; do
		set -- $shape
		"$BIN/ps-bench" --mode push --workers 2 --servers "$1" --size "$2" \
			--runs 1 --seconds 1 --no-baseline --csv \
			>"$TMP/out" 2>"$TMP/err" ||
			die "round $round, $1 server(s), sizes $2: ps-bench failed: $(grep -m3 -E 'ERROR|failed' "$TMP/err")"
		grep -q 'steps ahead of the open step' "$TMP/err" &&
			die "round $round: a push was refused as too far ahead: $(grep -m1 ahead "$TMP/err")"
	done
done
echo "ok push-only from 2 workers: every step opened ($rounds rounds)"
