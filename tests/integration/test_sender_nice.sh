#!/usr/bin/env bash
# PS_SENDER_NICE (docs/configuration.md "Latency and threads"): a worker's ps-sender thread runs at
# the niceness asked for while its other threads keep the process's,
# read from /proc/PID/task/*/stat during a running 1x1 job:
#  1. 5 (any user may raise it);
#  2. -5 as root;
#  3. -5 without CAP_SYS_NICE (dropped with capsh as root; a plain user
#     lacks it anyway): a warning naming PS_SENDER_NICE, the thread at
#     the process's niceness, and the job still verified.
. "$(dirname "$0")/lib.sh"

# thread_nice PID NAME: niceness of PID's first thread called NAME
thread_nice() {
	local t
	for t in /proc/"$1"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = "$2" ] || continue
		sed 's/^.*) //' "$t/stat" | awk '{print $17}'
		return 0
	done
	return 1
}

# run_job TAG NICE [WRAPPER...]: a 1x1 job whose worker has
# PS_SENDER_NICE=NICE, started under WRAPPER; SENDER_NICE, VAN_NICE
run_job() {
	local tag=$1 nice=$2 i wrk srv
	shift 2
	start_scheduler 1 1
	start_servers 1
	srv=${SERVER_PIDS[0]}
	PS_SENDER_NICE=$nice "$@" "$BIN/ps-worker" --steps 0 --seconds 4 \
		--keys 2 --sizes 4K,256K >"$TMP/$tag.out" 2>"$TMP/$tag.err" &
	wrk=$!
	PIDS+=("$wrk")
	SENDER_NICE= VAN_NICE=
	for i in $(seq 1 $((100 * MULT))); do
		SENDER_NICE=$(thread_nice "$wrk" ps-sender) &&
			VAN_NICE=$(thread_nice "$wrk" ps-van) && break
		kill -0 "$wrk" 2>/dev/null || break
		sleep 0.1
	done
	wait_pid "$wrk" 60 || die "$tag: worker exited $?: $(tail -n 5 "$TMP/$tag.err")"
	for i in "$srv" "$SCHED_PID"; do
		wait_pid "$i" 30 || die "$tag: node $i exited $? after the worker"
	done
	grep -q verified "$TMP/$tag.out" || die "$tag: worker did not verify"
	[ -n "$SENDER_NICE" ] && [ -n "$VAN_NICE" ] ||
		die "$tag: no ps-sender or ps-van thread seen"
	echo "$tag: PS_SENDER_NICE=$nice: ps-sender at $SENDER_NICE, ps-van at $VAN_NICE"
}

base=$(nice)
[ "$base" -lt 15 ] || { echo "this shell runs at niceness $base: cannot test above it"; exit 77; }
up=$((base + 5)) down=$((base - 5))

run_job raise "$up"
[ "$SENDER_NICE" = "$up" ] || die "raise: ps-sender at $SENDER_NICE, want $up"
[ "$VAN_NICE" = "$base" ] || die "raise: ps-van at $VAN_NICE, want the process's $base"
grep -q "PS_SENDER_NICE" "$TMP/raise.err" && die "raise: a warning: $(cat "$TMP/raise.err")"

if [ "$down" -lt -20 ]; then
	echo "this shell runs at niceness $base: $down is out of range; the lower and refused cases are not run"
	nocap=()
elif [ "$(id -u)" = 0 ]; then
	run_job lower "$down"
	[ "$SENDER_NICE" = "$down" ] || die "lower: ps-sender at $SENDER_NICE, want $down"
	[ "$VAN_NICE" = "$base" ] || die "lower: ps-van at $VAN_NICE, want $base"
	if command -v capsh >/dev/null; then
		nocap=(capsh --drop=cap_sys_nice -- -c 'exec "$@"' capsh)
	else
		echo "capsh missing: the refused case is not run as root"
		nocap=()
	fi
else
	nocap=(env)
fi
# RLIMIT_NICE lets anyone go down to 20 - its value
rlim=$(ulimit -e)
if [ ${#nocap[@]} -gt 0 ] && { [ "$rlim" = unlimited ] || [ "$rlim" -ge $((20 - down)) ]; }; then
	echo "RLIMIT_NICE is $rlim: niceness $down is allowed without CAP_SYS_NICE; the refused case is not run"
	nocap=()
fi
if [ ${#nocap[@]} -gt 0 ]; then
	run_job refused "$down" "${nocap[@]}"
	grep -q "PS_SENDER_NICE=$down: cannot set the sender thread's niceness" \
		"$TMP/refused.err" ||
		die "refused: no warning naming PS_SENDER_NICE: $(cat "$TMP/refused.err")"
	[ "$SENDER_NICE" = "$base" ] || die "refused: ps-sender at $SENDER_NICE, want the process's $base"
	grep "PS_SENDER_NICE" "$TMP/refused.err" | head -n 1
fi
echo "ok sender nice"
