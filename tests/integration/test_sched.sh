#!/usr/bin/env bash
# Issue 3's scheduling rules on real clusters over loopback, checked from
# the worker's own per-chunk timeline (tests/integration/timeline_check.py)
# and from exact sums:
#   ordering   with a backlog, a higher-priority tensor pushed later
#              starts before the lower-priority chunks already queued;
#   credit     bytes in flight never exceed the credit (one oversized
#              chunk alone is the exception); credit = 1 chunk is
#              stop-and-wait;
#   FIFO       arrival order, one chunk per server range;
#   sums       identical for FIFO and for any partition/credit, odd sizes
#              (1 byte, primes, partitions larger than the tensor).
# PS_TEST_LITE=1 (the TSan build): the sums over 2 steps, not 6.
. "$(dirname "$0")/lib.sh"
PROBE=$BUILD/tests/helpers/sched_probe
CHECK="python3 $(dirname "$0")/timeline_check.py"

# probe S W ENV... -- PROBE-ARGS: cluster with W sched_probe workers;
# timelines in $TMP/tl<i>.json, stats in $TMP/probe<i>.out
probe() {
	local s=$1 w=$2 envs=() i p
	shift 2
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	(
		export "${envs[@]}"
		start_scheduler "$s" "$w"
		start_servers "$s"
		pids=()
		for i in $(seq 1 "$w"); do
			"$PROBE" --out "$TMP/tl$i.json" "$@" >"$TMP/probe$i.out" \
				2>"$TMP/probe$i.err" &
			pids+=($!)
			PIDS+=($!)
		done
		for p in "${pids[@]}"; do
			wait_pid "$p" 120 || die "sched_probe exited $?: $(cat "$TMP"/probe*.err)"
		done
		for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
			wait_pid "$p" 30 || die "node $p exited $?"
		done
	) || exit 1
}

stat_of() { # FILE FIELD
	sed -n "s/.*$2=\([0-9]*\).*/\1/p" "$1"
}

# 1. Ordering + stop-and-wait: 64 chunks of key 1 (priority 10) queued,
# then key 2 (priority 0): once key 2 is queued, no chunk of key 1 starts
# before all of key 2's have.
probe 1 1 PS_PARTITION_BYTES=64K PS_CREDIT_BYTES=64K -- 1:4M:10 2:256K:0
$CHECK "$TMP/tl1.json" chunks 1 64 65536 || die "partitioning"
t2=$(sed -n 's/^issued key=2 us=//p' "$TMP/probe1.out")
$CHECK "$TMP/tl1.json" before 2 1 "$t2" || die "priority order"
$CHECK "$TMP/tl1.json" credit 65536 || die "stop-and-wait"
mif=$(stat_of "$TMP/probe1.out" max_in_flight)
[ "$mif" = 65536 ] || die "stats: max in flight $mif, want 65536"

# 2. Credit of 4 chunks, push+pull, 2 servers x 2 workers: the credit is
# held from push start until the pull answer.
probe 2 2 PS_PARTITION_BYTES=64K PS_CREDIT_BYTES=256K -- --pushpull --steps 3 \
	1:3M:2 2:1M:1 3:100K:0
for i in 1 2; do
	$CHECK "$TMP/tl$i.json" credit 262144 || die "credit 256K (worker $i)"
	mif=$(stat_of "$TMP/probe$i.out" max_in_flight)
	[ "$mif" -le 262144 ] || die "stats: max in flight $mif > 256K"
done

# 3. Oversized chunks (1 MiB partitions, 64 KiB credit) go one at a time.
probe 1 1 PS_PARTITION_BYTES=1M PS_CREDIT_BYTES=64K -- 1:4M:0 2:2M:1
$CHECK "$TMP/tl1.json" credit 65536 || die "oversized chunk alone"
mif=$(stat_of "$TMP/probe1.out" max_in_flight)
[ "$mif" = 1048576 ] || die "stats: oversized max in flight $mif"

# 4. FIFO: arrival order, whole ranges, priorities ignored.
probe 1 1 PS_SCHEDULING=fifo PS_PARTITION_BYTES=64K PS_CREDIT_BYTES=64K -- \
	1:4M:10 2:256K:0
$CHECK "$TMP/tl1.json" chunks 1 1 4194304 || die "fifo partitioned"
$CHECK "$TMP/tl1.json" order 1 2 || die "fifo order"

# 5. Exact sums for FIFO and many partition/credit pairs, odd sizes, both
# API paths (ps-worker alternates pushpull and push+pull), 2x2.
SUM_STEPS=6
[ "${PS_TEST_LITE:-0}" = 1 ] && SUM_STEPS=2
sums() { # label ENV...
	local label=$1 p i
	shift
	(
		export "$@"
		start_scheduler 2 2
		start_servers 2
		start_workers 2 --steps "$SUM_STEPS" --keys 2 --sizes "$SIZES"
		for p in "${WORKER_PIDS[@]}"; do
			wait_pid "$p" 120 || die "$label: worker exited $?"
		done
		for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
			wait_pid "$p" 30 || die "$label: node $p exited $?"
		done
		for i in 1 2; do
			grep -q verified "$TMP/worker$i.out" || die "$label: worker $i"
		done
	) || exit 1
	echo "ok sums $label"
}
SIZES=1,7,12,4099,16K,65540 sums "part 1 B, credit 1 B" \
	PS_PARTITION_BYTES=1 PS_CREDIT_BYTES=1
SIZES=1,7,4099,65540,1M,3M sums fifo PS_SCHEDULING=fifo
SIZES=1,7,4099,65540,1M,3M sums "part 4K, credit 16K" \
	PS_PARTITION_BYTES=4K PS_CREDIT_BYTES=16K
SIZES=3,4099,200K,1M sums "part 8191 (prime), credit 24573" \
	PS_PARTITION_BYTES=8191 PS_CREDIT_BYTES=24573
SIZES=1,4K,1M sums "part 1G (larger than any tensor), unlimited credit" \
	PS_PARTITION_BYTES=1G PS_CREDIT_BYTES=0
echo "ok scheduling rules"
exit 0
