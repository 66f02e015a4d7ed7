#!/usr/bin/env bash
# A worker's link reading says when it is only a floor (the autotuner's
# conditions, docs/tuner.md "Floors and probes").  Four namespaces
# (scheduler, server, two workers) on a bridge, tbf on every link, the
# server's link through a 2 ms delay line (round trips 4 ms longer);
# two workers replay ResNet-50 for 8 s (15 s in a sanitizer build)
# with a fixed config:
#  - 5 Gbit/s, 64 KiB partitions, 128 KiB of credit (far below the
#    bandwidth-delay product, ~2.5 MB): the workers read about their
#    credit per round trip, a fraction of the link, and must say the
#    reading is a floor in most reports;
#  - 1 Gbit/s, 256 KiB x 32 = 8 MiB of credit (far above it): the link
#    is full, the reading near the link's rate, and no report may say
#    floor.
# In both, the reports carry the path's minimum round trip (the tuner's
# bandwidth-delay product): about 4 ms.
# Needs root, ip, tc; exits 77 without them.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
BIN=$(pwd)/$BUILD/bin
DELAYLINE=$(pwd)/$BUILD/tests/helpers/delayline
[ -x "$DELAYLINE" ] || { echo "FAIL: $DELAYLINE missing (make tests)"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
for t in ip tc; do
	command -v "$t" >/dev/null || { echo "needs $t"; exit 77; }
done

ID=plf$$
SW=$ID-sw
NODES=()
RUN_PIDS=()
MTU=9000
TMP=$(mktemp -d /tmp/psched-link-floor.XXXXXX)
. bench/ns-lib.sh
trap ns_cleanup EXIT
die() {
	echo "FAIL: $*"
	for f in "$TMP"/*.err; do [ -s "$f" ] && { echo "== $f"; tail -n 5 "$f"; }; done
	exit 1
}

if ! ns_topology 4 10.81.0 2>"$TMP/topology.err"; then
	echo "cannot build namespaces: $(cat "$TMP/topology.err")"
	exit 77
fi
ns_delay 1 2 || die "ns_delay"
# A sanitizer build's workers step more slowly (TSan: 2 reports in 6 s
# of the credit-bound job): longer jobs there.
SECS=8
SAN=0
ldd "$BIN/ps-worker" 2>/dev/null | grep -q 'libtsan\|libasan' && SECS=15 SAN=1

# job GBIT PART CREDIT: one job of $SECS s; leaves the workers' logs in $TMP
job() {
	local env port="" i p w=()
	ns_set_rate "$1"
	env=(DMLC_PS_ROOT_URI=10.81.0.1 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=2
	     PS_CONNECT_TIMEOUT=30 PS_REQUEST_TIMEOUT=120 PS_HEARTBEAT_TIMEOUT=60
	     PS_TRANSPORT=tcp PS_PARTITION_BYTES="$2" PS_CREDIT_BYTES="$3")
	rm -f "$TMP"/*.out "$TMP"/*.err
	ip netns exec "${NODES[0]}" env "${env[@]}" DMLC_NODE_HOST=10.81.0.1 \
		"$BIN/ps-scheduler" --root-port 0 >"$TMP/sched.out" 2>"$TMP/sched.err" &
	RUN_PIDS+=($!)
	port=$(ns_sched_port "$TMP/sched.out" 200)
	[ -n "$port" ] || die "the scheduler printed no port"
	env+=(DMLC_PS_ROOT_PORT="$port")
	ip netns exec "${NODES[1]}" env "${env[@]}" DMLC_NODE_HOST=10.81.0.2 \
		"$BIN/ps-server" >"$TMP/server.out" 2>"$TMP/server.err" &
	RUN_PIDS+=($!)
	for i in 1 2; do
		ip netns exec "${NODES[$((1 + i))]}" env "${env[@]}" PS_VERBOSE=2 \
			DMLC_NODE_HOST="10.81.0.$((2 + i))" "$BIN/ps-worker" \
			--model resnet50 --gpu-tflops 1.25 --batch 32 --steps 0 \
			--seconds "$SECS" --warmup 1 >"$TMP/worker$i.out" 2>"$TMP/worker$i.err" &
		w+=($!)
		RUN_PIDS+=($!)
	done
	for p in "${w[@]}"; do
		wait "$p" || die "a worker failed ($1 Gbit/s, $2 B x $3 B)"
	done
	ns_kill_nodes
}

# reports FILE: "N F RATE": metrics reports, how many said floor, and
# the median link reading (B/s)
reports() {
	sed -n 's/.*metrics: link \([0-9.e+]*\) B\/s.*/\1/p' "$1" | sort -g |
		awk -v f="$(grep -c 'metrics: link .*: a floor' "$1")" \
			'{ v[NR] = $1 } END { printf "%d %d %g\n", NR, f, NR ? v[int((NR + 1) / 2)] : 0 }'
}

# rtt FILE: the median minimum round trip the reports gave (us; 0: none)
rtt() {
	sed -n 's/.*metrics: link .*; min rtt \([0-9]*\) us.*/\1/p' "$1" | sort -n |
		awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : 0 }'
}

# check_rtt I: worker I's reports carry the path's round trip, 4 ms of
# delay line and a little more
check_rtt() {
	local r
	r=$(rtt "$TMP/worker$1.err")
	echo "worker $1: median minimum round trip reported $r us"
	[ "$r" -ge 3900 ] && [ "$r" -lt 40000 ] ||
		die "worker $1 reported a minimum round trip of $r us behind a 4 ms delay line"
}

job 5 65536 131072
for i in 1 2; do
	check_rtt "$i"
	set -- $(reports "$TMP/worker$i.err")
	echo "5 Gbit/s, 64 KiB x 2: worker $i: $1 reports, $2 floors, median link reading $3 B/s"
	[ "$1" -ge 2 ] || die "worker $i sent $1 metrics reports"
	awk -v r="$3" 'BEGIN { exit !(r < 0.5 * 625e6) }' ||
		die "worker $i read $3 B/s on a 625 MB/s link with 128 KiB of credit (not credit-bound?)"
	[ $(($2 * 3)) -ge $(($1 * 2)) ] || die "worker $i: only $2 of $1 credit-bound reports said floor"
done

job 1 262144 8388608
for i in 1 2; do
	check_rtt "$i"
	set -- $(reports "$TMP/worker$i.err")
	echo "1 Gbit/s, 256 KiB x 32: worker $i: $1 reports, $2 floors, median link reading $3 B/s"
	[ "$1" -ge 2 ] || die "worker $i sent $1 metrics reports"
	# A sanitizer build's workers cannot fill the link on every host
	# (TSan on an AMD EPYC host read 30-54 MB/s, stop 36): the rate is
	# asserted in the plain build only.
	[ "$SAN" = 1 ] || awk -v r="$3" 'BEGIN { exit !(r > 0.6 * 125e6) }' ||
		die "worker $i read $3 B/s on a 125 MB/s link with 8 MiB of credit (not link-bound?)"
	[ "$2" = 0 ] || die "worker $i: $2 of $1 reports of a full link said floor"
done
echo "ok: credit-bound readings are floors, a full link's are not; reports carry the round trip"
