#!/usr/bin/env bash
# `make bench-sched`: steps/s of a replayed model (ps-worker --model) on a
# cluster in network namespaces joined by shaped veth links, for FIFO (the
# baseline), priority+credit at the default config, and a grid over
# partition size x credit.  Writes a CSV of every run, a summary table
# (medians; ratios vs FIFO) and a gnuplot heat map into $BUILD/bench/
# sched-bench/ (--out DIR: another folder).  See docs/benchmarks.md
# "Scheduling".
#
# Topology: one namespace per node (scheduler, S servers, W workers), each
# with an eth0 veth to a bridge in a "switch" namespace; tbf shapes both
# directions of every link (node egress = upload, switch port egress =
# download), like hosts on a switch with full-duplex links of the given
# rate.  All names carry this script's pid, so parallel runs don't
# collide; everything is removed on exit.  Needs root, ip and tc.
set -euo pipefail
HERE=$PWD # a relative --out is taken from where the script was started
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$(pwd)/$BUILD/bin

usage() {
	cat <<EOF
usage: bench/sched-bench.sh [options]
  --quick             a small grid (4 partition sizes x 3 credits), 1 model
  --full              partition sizes 4K..64M in every power of 2 (default:
                      every power of 4: 4K 16K 64K ... 64M)
  --models "M ..."    models to replay [vgg16 resnet50]
  --servers "S ..."   server counts [1 2]
  --workers W         workers [2]
  --rate GBIT         link rate in Gbit/s (tbf) [$RATE]
  --gpu-tflops X      simulated device speed [$TFLOPS]
  --batch N           images per worker per step [$BATCH]
  --seconds S         timed seconds per run (after 1 warm-up step) [$SECONDS_PER_RUN]
  --runs N            runs per grid point (median) [$GRID_RUNS]
  --final-runs N      rounds of FIFO, default and the best grid points [$FINAL_RUNS]
  --best-points K     grid points re-measured in those rounds [$BEST_POINTS]
  --partitions "..."  partition sizes (bytes, K/M suffix) instead of the grid's
  --credits "..."     credits in partitions instead of [1 2 4 8 16 32]
  --mtu BYTES         MTU of every link (jumbo frames: less CPU per byte) [$MTU]
  --delay-ms D        one-way delay on every server's link (a delay line:
                      worker-server round trips take 2D more) [0]
  --out DIR           where the CSV, table and PNG go [$BUILD/bench/sched-bench]
  --tag NAME          file name stem [sched-bench]
EOF
}

RATE=${PS_BENCH_RATE:-5}
TFLOPS=1.25
BATCH=32
SECONDS_PER_RUN=2
GRID_RUNS=1
FINAL_RUNS=3
BEST_POINTS=1
WORKERS=2
MTU=9000
MODELS="vgg16 resnet50"
SERVERS="1 2"
OUT=""
TAG=sched-bench
PARTS=""
CREDITS="1 2 4 8 16 32"
GRID=pow4
DELAY_MS=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) GRID=quick ;;
	--full) GRID=pow2 ;;
	--models) MODELS=$2; shift ;;
	--servers) SERVERS=$2; shift ;;
	--workers) WORKERS=$2; shift ;;
	--rate) RATE=$2; shift ;;
	--gpu-tflops) TFLOPS=$2; shift ;;
	--batch) BATCH=$2; shift ;;
	--seconds) SECONDS_PER_RUN=$2; shift ;;
	--runs) GRID_RUNS=$2; shift ;;
	--final-runs) FINAL_RUNS=$2; shift ;;
	--best-points) BEST_POINTS=$2; shift ;;
	--partitions) PARTS=$2; shift ;;
	--credits) CREDITS=$2; shift ;;
	--mtu) MTU=$2; shift ;;
	--delay-ms) DELAY_MS=$2; shift ;;
	--out) OUT=$2; shift
	       case $OUT in /*) ;; *) OUT=$HERE/$OUT ;; esac ;;
	--tag) TAG=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "sched-bench: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done
OUT=${OUT:-$BUILD/bench/sched-bench}
if [ -z "$PARTS" ]; then
	case $GRID in
	quick) PARTS="256K 1M 4M 16M"; CREDITS="1 4 16"
	       [ "$MODELS" = "vgg16 resnet50" ] && MODELS=vgg16 ;;
	pow2) PARTS="4K 8K 16K 32K 64K 128K 256K 512K 1M 2M 4M 8M 16M 32M 64M" ;;
	*) PARTS="4K 16K 64K 256K 1M 4M 16M 64M" ;;
	esac
fi

bytes() { # 4K -> 4096
	local v=$1
	case $v in
	*K) echo $((${v%K} * 1024)) ;;
	*M) echo $((${v%M} * 1024 * 1024)) ;;
	*G) echo $((${v%G} * 1024 * 1024 * 1024)) ;;
	*) echo "$v" ;;
	esac
}

# --- namespaces -------------------------------------------------------

DELAYLINE=$(pwd)/$BUILD/tests/helpers/delayline
. "$(dirname "$0")/ns-lib.sh"
ns_init psb sched-bench # NODES: 0 scheduler, then servers, then workers

# topology NNODES NSERVERS: node i at 10.77.0.(i+1), every link shaped
# at $RATE Gbit/s both ways, the servers' links (nodes 1..NSERVERS)
# delayed by $DELAY_MS.
topology() {
	local i
	ns_topology "$1" 10.77.0 && ns_set_rate "$RATE" || return 1
	for ((i = 1; i <= $2; i++)); do
		ns_delay "$i" "$DELAY_MS" || return 1
	done
}

# --- one run ----------------------------------------------------------

# run_point MODEL S SCHED PART CREDIT_BYTES: sets RESULT to "steps_per_s
# images_per_s compute_ms wait_ms status" (means over the workers), or
# "nan nan nan nan <why>".  Runs in this shell (not a $(...) subshell) so
# that the EXIT trap knows the pids to kill.
run_point() {
	local model=$1 s=$2 sched=$3 part=$4 credit=$5
	local i port="" env rc status=ok limit p out
	env=(DMLC_PS_ROOT_URI=10.77.0.1 DMLC_NUM_SERVER="$s"
	     DMLC_NUM_WORKER="$WORKERS" PS_SCHEDULING="$sched"
	     PS_CONNECT_TIMEOUT=30 PS_REQUEST_TIMEOUT=120
	     PS_HEARTBEAT_TIMEOUT=60) # 10 s proved too short on a loaded machine
	[ -n "$part" ] && env+=(PS_PARTITION_BYTES="$part")
	[ -n "$credit" ] && env+=(PS_CREDIT_BYTES="$credit")
	rm -f "$TMP"/*.out "$TMP"/*.err
	ip netns exec "${NODES[0]}" env "${env[@]}" DMLC_NODE_HOST=10.77.0.1 \
		"$BIN/ps-scheduler" --root-port 0 >"$TMP/sched.out" 2>"$TMP/sched.err" &
	RUN_PIDS+=($!)
	port=$(ns_sched_port "$TMP/sched.out" 100)
	if [ -z "$port" ]; then
		ns_kill_nodes
		RESULT="nan nan nan nan no-scheduler"
		return
	fi
	env+=(DMLC_PS_ROOT_PORT="$port")
	for ((i = 1; i <= s; i++)); do
		ip netns exec "${NODES[$i]}" env "${env[@]}" \
			DMLC_NODE_HOST="10.77.0.$((i + 1))" "$BIN/ps-server" \
			>"$TMP/server$i.out" 2>"$TMP/server$i.err" &
		RUN_PIDS+=($!)
	done
	local wpids=()
	ns_line_mark
	for ((i = 1; i <= WORKERS; i++)); do
		ip netns exec "${NODES[$((s + i))]}" env "${env[@]}" \
			DMLC_NODE_HOST="10.77.0.$((s + i + 1))" "$BIN/ps-worker" \
			--model "$model" --gpu-tflops "$TFLOPS" --batch "$BATCH" \
			--steps 0 --seconds "$SECONDS_PER_RUN" --warmup 1 \
			>"$TMP/worker$i.out" 2>"$TMP/worker$i.err" &
		wpids+=($!)
		RUN_PIDS+=($!)
	done
	# A run may not take longer than: start-up + warm-up + timed part +
	# one slow step; a point this slow is recorded as a timeout.
	limit=$((60 + 3 * ${SECONDS_PER_RUN%.*}))
	for p in "${wpids[@]}"; do
		rc=0
		timeout_wait "$p" "$limit" || rc=$?
		if [ "$rc" != 0 ] && [ "$status" = ok ]; then
			if [ "$rc" = 124 ]; then status=timeout; else status=exit$rc; fi
		fi
	done
	LINE_CPU=$(ns_line_cpu)
	ns_kill_nodes
	if [ "$status" != ok ]; then
		for i in "$TMP"/worker*.err; do
			[ -s "$i" ] && tail -n 3 "$i" | sed 's/^/    /' >&2
		done
		RESULT="nan nan nan nan $status"
		return
	fi
	RESULT=$(cat "$TMP"/worker*.out | awk -v st="$status" '
		/replay model=/ {
			for (i = 1; i <= NF; i++) {
				split($i, kv, "=")
				v[kv[1]] += kv[2]
			}
			n++
		}
		END {
			if (n == 0) { print "nan nan nan nan noline"; exit }
			printf "%.4f %.2f %.1f %.1f %s\n", v["steps_per_s"] / n,
				v["images_per_s"], v["compute_ms"] / n,
				v["wait_ms"] / n, st
		}')
}

# timeout_wait PID SECONDS: the exit status, or 124 (after killing it)
timeout_wait() {
	local pid=$1 i
	for ((i = 0; i < $2 * 10; i++)); do
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			return $?
		fi
		sleep 0.1
	done
	kill -9 "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	return 124
}

# --- the grid -----------------------------------------------------------

[ "$(id -u)" = 0 ] || { echo "sched-bench: needs root (network namespaces, tc)" >&2; exit 77; }
for t in ip tc awk python3; do
	command -v "$t" >/dev/null || { echo "sched-bench: needs $t" >&2; exit 77; }
done
[ -x "$BIN/ps-worker" ] || { echo "sched-bench: build first (make)" >&2; exit 2; }

maxs=0
for s in $SERVERS; do [ "$s" -gt "$maxs" ] && maxs=$s; done
if ! topology $((1 + maxs + WORKERS)) "$maxs" 2>"$TMP/topology.err"; then
	echo "sched-bench: cannot build the namespaces: $(cat "$TMP/topology.err")" >&2
	exit 77
fi

mkdir -p "$OUT"
CSV=$OUT/$TAG.csv
echo "model,servers,workers,rate_gbit,gpu_tflops,batch,scheduling,partition_bytes,credit_partitions,credit_bytes,phase,run,steps_per_s,images_per_s,compute_ms,wait_ms,status" >"$CSV"

# measure MODEL S SCHED PART CREDITN PHASE RUNS [FIRST-RUN-NUMBER]
measure() {
	local model=$1 s=$2 sched=$3 part=$4 cn=$5 phase=$6 runs=$7 r pb="" cb=""
	local first=${8:-1}
	[ -n "$part" ] && pb=$(bytes "$part")
	[ -n "$cn" ] && cb=$((pb * cn))
	for ((r = first; r < first + runs; r++)); do
		run_point "$model" "$s" "$sched" "$pb" "$cb"
		set -- $RESULT
		printf '  %-8s %-7s part=%-5s credit=%-3s run %d: %s steps/s (compute %s ms, fwd wait %s ms) %s%s\n' \
			"$phase" "$sched" "${part:--}" "${cn:--}" "$r" "$1" "$3" "$4" "$5" \
			"${LINE_CPU:+ (delay lines: $LINE_CPU % of a CPU)}" >&2
		ns_line_warn sched-bench "${LINE_CPU:-}"
		echo "$model,$s,$WORKERS,$RATE,$TFLOPS,$BATCH,$sched,$pb,$cn,$cb,$phase,$r,$1,$2,$3,$4,$5" >>"$CSV"
	done
}

echo "sched-bench: rate ${RATE} Gbit/s per link (MTU $MTU, servers' links delayed ${DELAY_MS} ms each way), ${WORKERS} workers, --gpu-tflops $TFLOPS --batch $BATCH, ${SECONDS_PER_RUN}s per run, namespaces $ID-*" >&2
echo "  partitions: $PARTS; credits (partitions): $CREDITS" >&2
start=$(date +%s)
for model in $MODELS; do
	for s in $SERVERS; do
		echo "== $model, $s server(s)" >&2
		# One FIFO run first: the grid's heat map is relative to FIFO.
		measure "$model" "$s" fifo "" "" baseline 1
		for part in $PARTS; do
			for cn in $CREDITS; do
				measure "$model" "$s" priority "$part" "$cn" grid "$GRID_RUNS"
			done
		done
		# Then FIFO, the default config and the best grid points again,
		# interleaved round by round so that a change in the machine's
		# load hits all of them alike; the best point is re-measured
		# because the maximum of noisy single runs is biased upwards.
		best=$(python3 bench/sched-report.py --best "$CSV" "$model" "$s" "$BEST_POINTS")
		for ((r = 1; r <= FINAL_RUNS; r++)); do
			measure "$model" "$s" fifo "" "" baseline 1 $((r + 1))
			measure "$model" "$s" priority "" "" default 1 "$r"
			for pc in $best; do
				measure "$model" "$s" priority "${pc%:*}" "${pc#*:}" best 1 "$r"
			done
		done
	done
done
echo "sched-bench: measured in $(($(date +%s) - start)) s" >&2
python3 bench/sched-report.py --table "$CSV" >"$OUT/$TAG.md.table"
cat "$OUT/$TAG.md.table"
if command -v gnuplot >/dev/null; then
	python3 bench/sched-report.py --plot "$CSV" "$OUT/$TAG.png" "$TMP"
	echo "plot: $OUT/$TAG.png"
else
	echo "sched-bench: gnuplot not found (scripts/install-deps.sh installs gnuplot-nox); no plot" >&2
fi
echo "csv: $CSV"
