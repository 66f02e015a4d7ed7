#!/usr/bin/env bash
# serial
# Nothing a peer does on a server's shared-memory listener before it
# authenticates may hold up the server (docs/security.md, "Before
# authentication"):
#  1. four connections that send nothing, renewed every half second
#     (shm_attack.py silent), beside a 1x1 job under PS_TRANSPORT=auto:
#     the worker keeps >= 0.8 of its undisturbed steps/s (best of three
#     interleaved runs each, up to six while the bar is not met; 0.5 in
#     the sanitizer builds, whose nodes are slow and noisy; the I/O thread used to wait up to 2 s per
#     connection for its hello, which cost 0.001-0.2 of the rate);
#  2. connections opened and closed as fast as a process can, on the shm
#     listener and the TCP port (shm_attack.py flood): the server logs
#     under 100 KB per minute of it (the shm refusals used to log a line
#     each), and the job still verifies.
. "$(dirname "$0")/lib.sh"
export PS_TRANSPORT=auto PS_VERBOSE=1
unset DMLC_ENABLE_RDMA
ATTACK="$(dirname "$0")/shm_attack.py"
SECS=3

# start_1x1 WHAT: a scheduler and one server; sets SHM_PORT and TCP_PORT
# from the new server's log (the old one's is removed first: its ports
# must not be read back).
start_1x1() {
	local i log="$TMP/server1.err"
	rm -f "$TMP"/server*.err
	start_scheduler 1 1
	start_servers 1
	for i in $(seq 1 $((100 * MULT))); do
		SHM_PORT=$(sed -n 's/.*transport auto: shm port \([0-9]*\) .*/\1/p' "$log" 2>/dev/null)
		TCP_PORT=$(sed -n 's/.*transport auto: shm port [0-9]* .*, tcp port \([0-9]*\) .*/\1/p' "$log" 2>/dev/null)
		[ -n "$SHM_PORT" ] && [ -n "$TCP_PORT" ] && return
		sleep 0.1
	done
	die "$1: no ports in the server's log"
}

# job RUN ATTACK: a 1x1 job for SECS seconds; with ATTACK=silent the
# stranger holds silent shm connections meanwhile.  Sets RATE (steps/s).
job() {
	start_1x1 "run $1"
	if [ "$2" = silent ]; then
		python3 "$ATTACK" silent "$SHM_PORT" $((SECS + 3)) &
		PIDS+=($!)
		sleep 0.5
	fi
	start_workers 1 --steps 0 --seconds "$SECS" --keys 2 --sizes 4K,64K
	job_verified "run $1 ($2)" 60
	RATE=$(sed -n 's/.* \([0-9.]*\) steps\/s$/\1/p' "$TMP/worker1.out")
	[ -n "$RATE" ] || die "run $1: no steps/s in '$(cat "$TMP/worker1.out")'"
}

calm=0 hit=0 bar=0.8
case $BUILD in *asan* | *tsan*) bar=0.5 ;; esac
# Three pairs of runs; on a noisy machine up to three more while the bar
# is not met (a stalled server stays some hundred times below it).
for r in 1 2 3 4 5 6; do
	if [ "$r" -gt 3 ] && python3 -c "import sys; sys.exit(0 if $hit >= $bar * $calm else 1)"; then
		break
	fi
	job "$r" calm
	a=$RATE
	job "$r" silent
	b=$RATE
	echo "# run $r: undisturbed $a steps/s, beside silent shm connections $b"
	calm=$(python3 -c "print(max($calm, $a))")
	hit=$(python3 -c "print(max($hit, $b))")
done
python3 -c "import sys; sys.exit(0 if $hit >= $bar * $calm else 1)" ||
	die "silent shm connections: $hit steps/s against $calm undisturbed (< $bar)"
echo "ok silent shm connections: $hit steps/s against $calm undisturbed"

# 2. A connect/close flood on both listeners.
start_1x1 flood
before=$(stat -c %s "$TMP/server1.err")
made=$(python3 "$ATTACK" flood 127.0.0.1 "$TCP_PORT" "$SHM_PORT" 6) ||
	die "flood: the attacker failed: $made"
after=$(stat -c %s "$TMP/server1.err")
logged=$((after - before))
echo "# $made in 6 s; the server logged $logged bytes"
# 100 KB per minute is 10 KB in 6 s
[ "$logged" -le 10240 ] ||
	die "flood: the server logged $logged bytes in 6 s: $(tail -n 5 "$TMP/server1.err")"
start_workers 1 --steps 5 --keys 2 --sizes 4,64K
job_verified "after the flood" 60
echo "ok connect/close flood on shm and tcp: $logged bytes of log in 6 s, the job ran"
