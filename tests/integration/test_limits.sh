#!/usr/bin/env bash
# Limits after authentication and mismatches between workers (issue 17):
# each offending request is refused on its own, quickly, with a message
# naming the key, the step or both lengths, and the server; the worker's
# connection and the job go on (tests/helpers/limits.c checks the
# messages and then runs exact pushpull steps on the same connections).
#  - an early-push flood (12 x 16 MiB ahead of a step another worker holds
#    back) is held up to PS_MAX_PARKED_BYTES, then refused; the server's
#    RSS, sampled all along, stays within the budget plus the key itself;
#  - the same flood against PS_MAX_STEPS_AHEAD;
#  - a tensor over the servers' PS_MAX_TENSOR_BYTES (workers allow it);
#  - two workers initialising one key with different lengths both fail at
#    once (not one after its barrier timeout);
#  - a first pushpull with two lengths fails both at once.
. "$(dirname "$0")/lib.sh"
export PS_REQUEST_TIMEOUT=$((60 * MULT))
HELPER=$BUILD/tests/helpers/limits

# ThreadSanitizer's shadow memory is a multiple of the heap: no RSS bound
# means anything there (ASan's shadow is an eighth, counted below).
TSAN=0
ldd "$BIN/ps-server" 2>/dev/null | grep -q libtsan && TSAN=1
# check_rss NAME: server RSS growth under the bound (see case 1)
check_rss() {
	growth=$(((MAX_RSS_KB - BASE_RSS_KB) / 1024))
	if [ "$TSAN" = 1 ]; then
		echo "note: $1: RSS bound not checked under ThreadSanitizer (grew by $growth MiB)"
		return
	fi
	[ "$growth" -lt 190 ] || die "$1: server RSS grew by $growth MiB (bound 190 MiB)"
}

rss_kb() { sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/$1/status" 2>/dev/null; }

# run_case NAME NSERVER ARGS...: one cluster, two helper workers (with
# $WORKER_ENV added to their environment); sets
# MAX_RSS_KB (server 1's largest RSS while the workers ran) and BASE_RSS_KB
run_case() {
	local name=$1 ns=$2 i rc r p nreg
	shift 2
	PS_VERBOSE=1 start_scheduler "$ns" 2
	start_servers "$ns"
	# The baseline once every server registered (a server prints its
	# port only when the workers have joined too).
	for i in $(seq 1 $((300 * MULT))); do
		nreg=$(grep -c "registered server" "$TMP/sched.err")
		[ "$nreg" = "$ns" ] && break
		sleep 0.1
	done
	[ "$nreg" = "$ns" ] ||
		die "$name: $ns servers did not register: $(tail -n 5 "$TMP/sched.err")"
	BASE_RSS_KB=$(rss_kb "${SERVER_PIDS[0]}")
	MAX_RSS_KB=$BASE_RSS_KB
	H=()
	for i in 1 2; do
		env ${WORKER_ENV:-} "$HELPER" "$@" >"$TMP/$name$i.out" 2>"$TMP/$name$i.err" &
		H+=($!); PIDS+=($!)
	done
	for i in $(seq 1 $((600 * MULT))); do
		r=$(rss_kb "${SERVER_PIDS[0]}")
		[ -n "$r" ] && [ "$r" -gt "$MAX_RSS_KB" ] && MAX_RSS_KB=$r
		kill -0 "${H[0]}" 2>/dev/null || kill -0 "${H[1]}" 2>/dev/null || break
		sleep 0.1
	done
	for i in 0 1; do
		wait_pid "${H[$i]}" 10; rc=$?
		[ $rc = 0 ] || die "$name: worker $((i + 1)) exited $rc: $(cat "$TMP/$name$((i + 1)).err")"
	done
	cat "$TMP/$name"1.out "$TMP/$name"2.out
	for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
		kill "$p" 2>/dev/null
		wait_pid "$p" 10 >/dev/null
	done
}

# 1. Byte budget: 64 MiB holds 4 of the 16 MiB pushes (steps 2..5).
PS_MAX_PARKED_BYTES=64M run_case flood 1 flood 4 "key 5 step 6 PS_MAX_PARKED_BYTES server"
grep -q "no room to hold" "$TMP/server1.err" || die "flood: the server did not log the refusal"
# Legitimately: the key (value + merge, 32 MiB), 64 MiB held, each
# worker connection's 16 MiB receive buffer (32 MiB), ASan's shadow in a
# sanitizer build: about 140 MiB.  Without the budget 176 MiB are held:
# about 250 MiB.
check_rss flood
echo "ok flood refused beyond PS_MAX_PARKED_BYTES=64M; server RSS grew by $growth MiB"

# 2. Steps ahead: 3 steps beyond the open one are held, the rest refused.
PS_MAX_STEPS_AHEAD=3 run_case ahead 1 flood 3 "key 5 step 5 steps ahead PS_MAX_STEPS_AHEAD=3 server"
check_rss ahead
echo "ok flood refused beyond PS_MAX_STEPS_AHEAD=3; server RSS grew by $growth MiB"

# 3. Over-size tensor: refused, and the same connection serves the next
#    requests (the helper's exact steps).
WORKER_ENV=PS_MAX_TENSOR_BYTES=64M PS_MAX_TENSOR_BYTES=1M run_case oversize 2 oversize
grep -q "dropping connection" "$TMP"/server*.err && die "oversize: a server dropped a connection"
grep -q "exact steps" "$TMP/oversize1.out" || die "oversize: no exact steps after the refusal"
echo "ok over-size tensor refused, connection kept"

# 4. Init with two lengths: both workers fail, well before the timeout.
run_case initconflict 2 initconflict
for i in 1 2; do
	t=$(sed -n 's/.*conflict failed after \([0-9.]*\) s.*/\1/p' "$TMP/initconflict$i.out")
	[ -n "$t" ] || die "initconflict: worker $i printed no time"
	[ "$(echo "$t < $PS_REQUEST_TIMEOUT / 2" | bc)" = 1 ] || die "initconflict: worker $i failed only after $t s"
done
echo "ok init length conflict failed both workers"

# 5. First pushpull with two lengths: both fail, then exact steps.
run_case ppconflict 2 ppconflict
grep -q "exact steps" "$TMP/ppconflict1.out" || die "ppconflict: no exact steps after"
echo "ok pushpull length conflict failed both workers, job went on"
