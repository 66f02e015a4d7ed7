#!/usr/bin/env bash
# ps-worker model replay (--model) on loopback clusters: 2 workers with 1
# and 2 servers replay a small CSV profile under FIFO and under priority +
# partitions + credit; every worker must exit 0, print a parseable
# steps/s line and have verified every pulled layer of every step.  A
# worker with another --seed must make both workers report a MISMATCH
# (the replay is a correctness check).  --timeline must write a Chrome
# trace that parses as JSON and holds push and pull events of the
# profile's keys.  Bad models fail before joining a cluster.
. "$(dirname "$0")/lib.sh"

command -v python3 >/dev/null || { echo "python3 missing: cannot check the timeline JSON"; exit 77; }

# 6 layers with parameters (one of 600 KB: cut into many chunks) and one
# compute-only layer; measured-time columns so no device speed applies.
PROFILE=$TMP/tiny.csv
cat >"$PROFILE" <<EOF
# tiny test profile
name,params,fwd_us,bwd_us
conv1,1000,300,600
conv2,25000,200,400
relu,0,50,50
conv3,150000,400,800
fc1,7,100,200
fc2,3,100,200
fc3,1,50,100
EOF
NKEYS=6
STEPS=4
WARMUP=1

# run S W ENV... -- worker args: starts a cluster, waits for every node
run() {
	local s=$1 w=$2 p
	shift 2
	start_scheduler "$s" "$w"
	start_servers "$s"
	start_workers "$w" "$@"
	RCS=()
	for p in "${WORKER_PIDS[@]}"; do
		wait_pid "$p" 120
		RCS+=($?)
	done
	for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
		wait_pid "$p" 30 || die "node $p exited $? after the workers"
	done
}

check_ok() { # label S W
	local i line
	for i in $(seq 1 "$3"); do
		[ "${RCS[$((i - 1))]}" = 0 ] || die "$1: worker $i exited ${RCS[$((i - 1))]}"
		line=$(grep 'replay model=tiny' "$TMP/worker$i.out") ||
			die "$1: worker $i printed no replay line"
		echo "$line" | grep -Eq "steps_per_s=[0-9]+\.[0-9]+ " ||
			die "$1: no steps_per_s in '$line'"
		echo "$line" | grep -q "workers=$3 servers=$2 steps=$STEPS " ||
			die "$1: wrong cluster or step count in '$line'"
		echo "$line" | grep -q "keys=$NKEYS verified=$(((STEPS + WARMUP) * NKEYS))$" ||
			die "$1: not every layer of every step verified: '$line'"
	done
	echo "ok $1: $(cat "$TMP/worker1.out")"
}

# FIFO, 1 server; --batch adds images/s
PS_SCHEDULING=fifo run 1 2 --model "$PROFILE" --steps $STEPS --batch 8
check_ok "fifo 1x2" 1 2
grep -Eq "batch=8 images_per_s=[0-9.]+ " "$TMP/worker1.out" || die "no images_per_s with --batch"

# priority + small partitions + credit, 2 servers, timelines
PS_SCHEDULING=priority PS_PARTITION_BYTES=4K PS_CREDIT_BYTES=16K \
	run 2 2 --model "$PROFILE" --steps $STEPS --timeline "$TMP/timeline-%r.json"
check_ok "priority 4K/16K 2x2" 2 2
python3 - "$TMP/timeline-0.json" "$TMP/timeline-1.json" <<'EOF' || die "bad timeline"
import json, sys
for path in sys.argv[1:]:
    with open(path) as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    keys = set()
    cats = set()
    for e in ev:
        if e.get("ph") == "X":
            cats.add(e.get("cat"))
            keys.add(e.get("args", {}).get("key"))
    want = {0, 1, 3, 4, 5, 6}  # layer 2 (relu) has no parameters, no key
    assert want <= keys, "%s: keys %s, want %s" % (path, sorted(keys), sorted(want))
    assert len(ev) > 20, "%s: only %d events" % (path, len(ev))
    print("%s: %d events, categories %s" % (path, len(ev), sorted(c for c in cats if c)))
EOF

# honest timing: the timed window holds exactly one step's communication
# wait per timed step (comm_steps = steps) and no stop vote was waited
# while a gradient of its step was still unwaited (vote_absorbed = 0;
# under FIFO such a vote queues behind the gradients and its wait would
# hide that step's communication from the count)
check_honest() { # label worker-out
	local line n c a
	line=$(grep 'replay model=' "$2") || die "$1: no replay line in $2"
	n=$(echo "$line" | sed -n 's/.* steps=\([0-9]*\) .*/\1/p')
	c=$(echo "$line" | sed -n 's/.* comm_steps=\([0-9]*\) .*/\1/p')
	a=$(echo "$line" | sed -n 's/.* vote_absorbed=\([0-9]*\) .*/\1/p')
	[ -n "$n" ] && [ "$c" = "$n" ] && [ "$a" = 0 ] ||
		die "$1: timed window not honest: steps=$n comm_steps=$c vote_absorbed=$a in '$line'"
}
check_honest "fifo 1x2 (steps)" "$TMP/worker1.out"

# timed by seconds: the workers must agree on the step count (a worker
# that runs one step more than the other would wait forever); under FIFO
# and priority, and with --warmup 0 (runs as 1)
for sched in fifo priority; do
	PS_SCHEDULING=$sched run 1 2 --model "$PROFILE" --steps 0 --seconds 0.5
	for i in 1 2; do
		[ "${RCS[$((i - 1))]}" = 0 ] || die "--seconds $sched: worker $i exited ${RCS[$((i - 1))]}"
		check_honest "--seconds $sched worker $i" "$TMP/worker$i.out"
	done
	n1=$(sed -n 's/.* steps=\([0-9]*\) .*/\1/p' "$TMP/worker1.out")
	n2=$(sed -n 's/.* steps=\([0-9]*\) .*/\1/p' "$TMP/worker2.out")
	[ -n "$n1" ] && [ "$n1" -ge 2 ] && [ "$n1" = "$n2" ] || die "--seconds $sched: workers ran $n1 and $n2 steps"
	echo "ok --seconds $sched: both workers ran $n1 steps, each with its communication in the window"
done
PS_SCHEDULING=fifo run 1 2 --model "$PROFILE" --steps 3 --warmup 0
check_honest "--warmup 0" "$TMP/worker1.out"
grep -q " steps=3 " "$TMP/worker1.out" || die "--warmup 0: not 3 timed steps: $(cat "$TMP/worker1.out")"
grep -q "verified=$((4 * NKEYS))$" "$TMP/worker1.out" || die "--warmup 0 did not run as 1: $(cat "$TMP/worker1.out")"
echo "ok --warmup 0 runs one untimed step"

# a worker with another seed: both must see a wrong sum
start_scheduler 1 2
start_servers 1
"$BIN/ps-worker" --model "$PROFILE" --steps 2 --seed 1 >"$TMP/seed1.out" 2>"$TMP/seed1.err" &
p1=$!
PIDS+=($p1)
"$BIN/ps-worker" --model "$PROFILE" --steps 2 --seed 2 >"$TMP/seed2.out" 2>"$TMP/seed2.err" &
p2=$!
PIDS+=($p2)
wait_pid $p1 60
rc1=$?
wait_pid $p2 60
rc2=$?
[ $rc1 = 1 ] && [ $rc2 = 1 ] || die "seeds differ: workers exited $rc1 and $rc2, want 1 and 1"
grep -q "MISMATCH layer 0 (conv1) step 1" "$TMP/seed1.err" || die "no MISMATCH message: $(cat "$TMP/seed1.err")"
echo "ok wrong sum detected: $(grep MISMATCH "$TMP/seed1.err")"
kill -9 "${SERVER_PIDS[@]}" "$SCHED_PID" 2>/dev/null
wait 2>/dev/null

# bad models fail fast (exit 2), before any cluster exists
"$BIN/ps-worker" --model nosuch >"$TMP/bad.out" 2>&1 && die "unknown model accepted"
grep -q "built-in: resnet50" "$TMP/bad.out" || die "unknown model: no list of built-ins"
printf 'name,params,fwd_us,bwd_us\nx,12,1\n' >"$TMP/bad.csv"
"$BIN/ps-worker" --model "$TMP/bad.csv" >"$TMP/bad.out" 2>&1 && die "bad CSV accepted"
grep -q "bad.csv:2:" "$TMP/bad.out" || die "bad CSV: message names no line: $(cat "$TMP/bad.out")"
"$BIN/ps-worker" --model vgg16 --gpu-tflops -1 >"$TMP/bad.out" 2>&1 && die "negative TFLOP/s accepted"
grep -q "gpu-tflops" "$TMP/bad.out" || die "bad --gpu-tflops: no message"
echo "ok bad models rejected"
exit 0
