#!/usr/bin/env bash
# `make bench-autotune`: does online tuning pay when conditions change?
# A replayed model (ps-worker --model) runs on a cluster in network
# namespaces while the link rate follows a schedule (default 5 -> 1 ->
# 3 Gbit/s, then 3 Gbit/s with background traffic), under four arms, in
# the same sitting and interleaved round by round:
#
#   default  the library's default config (no partition/credit set)
#   static   the best config of a small grid measured at the first rate
#   oneshot  --autotune that never reopens its search (tune once, lock
#            forever: ByteScheduler's way)
#   online   --autotune --autotune-conditions (psched: reopens when the
#            score or the measured conditions move)
#
# Output (--out DIR, default $BUILD/bench/autotune-bench):
# autotune-bench.csv (one row per run: total timed steps),
# autotune-bench.md.table (medians, ratios),
# autotune-bench-steps.csv (steps/s over time, round 1) and
# autotune-bench.png (that, with the phases and the online arm's config
# switches marked), autotune-bench-logs.tar.gz (the scheduler's log of
# every run: the tuners' samples and lock-ins).  See
# docs/benchmarks.md "Online tuning".
#
# Topology: one namespace per node (scheduler, server, 2 workers, and a
# traffic node) joined by veth links to a bridge in a switch namespace;
# tbf shapes both directions of every link.  This kernel has no netem:
# a delay line (tests/helpers/delayline.c) on the server's link adds a
# delay, fixed (--delay-ms) or one per rate phase (--delays, a path that
# changes: bench/ns-lib.sh ns_delay_set); the background traffic
# (a python3 TCP blaster from the traffic node to the server's node)
# competes with the workers' pushes on the server's link.  All names
# carry this script's pid; everything is removed on exit.  Needs root.
set -euo pipefail
HERE=$PWD # a relative --out is taken from where the script was started
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
BIN=$(pwd)/$BUILD/bin

MODELS="vgg16 resnet50"
RATES="5 1 3"
BG=1         # one more phase at the last rate with background traffic
PHASE_ARG="" # --phase, seconds per phase (default per model: model_phase)
FIRST_ARG="" # --first-phase, seconds of the first phase (default: --phase)
ROUNDS=3
GRID_PARTS="256K 1M 4M 16M"
GRID_CREDITS="1 4 16"
GRID_ARG=""  # --grid-seconds, per grid point (default per model: model_phase)
TFLOPS=1.25
BATCH=32
MTU=9000
OUT=""
TAG=autotune-bench
ARMS="default static oneshot online"
DELAY_MS=0
DELAYS=""    # --delays, one-way ms per rate phase (a path that changes)
WLEN=""      # --min-rtt-wlen, net.ipv4.tcp_min_rtt_wlen in every namespace
TCPMEM=""    # --tcp-mem, the largest TCP send and receive buffer (bytes)
BIN_ARG=""   # --bin, plot bins, seconds (default: the phase / 12, at least 2)
SPS=2        # --autotune-steps-per-sample
MAXS=12      # --autotune-max-samples
RETUNE=6     # --autotune-retune-max-samples

usage() {
	cat <<EOF
usage: bench/autotune-bench.sh [options]
  --smoke            a short run: resnet50, 12 s phases, 1 round, 2x2 grid
  --models "M ..."   models [$MODELS]
  --rates "R ..."    rate schedule, Gbit/s [$RATES]
  --no-background    no background-traffic phase
  --phase S          seconds per phase [per model: vgg16 240, others 60]
  --first-phase S    seconds of the first phase only [--phase]: long
                     enough for a first search to lock in under the
                     first condition (VGG-16's takes about 420 s)
  --rounds N         interleaved rounds (medians) [$ROUNDS]
  --grid-seconds S   seconds per grid point [vgg16 24, others 8]
  --grid-parts "P ..."    the static arm's grid: partitions [$GRID_PARTS]
  --grid-credits "N ..."  and credits, in partitions [$GRID_CREDITS]
  --arms "A ..."     arms [$ARMS]
  --bin S            seconds per bin of the steps/s plot [phase / 12, at
                     least 2: VGG-16's steps take up to 15 s]
  --delay-ms D       one-way delay on the server's link (a delay line;
                     worker-server round trips take 2D more) [0]
  --delays "D ..."   one delay per rate phase instead (ms, 0 allowed):
                     the path changes with the rate; the traffic phase
                     keeps the last
  --min-rtt-wlen S   net.ipv4.tcp_min_rtt_wlen in every node's namespace
                     (the kernel's window of a connection's least round
                     trip, 300 s by default; docs/tuner.md: shorter where paths
                     change)
  --tcp-mem SIZE     the largest TCP send and receive buffer in every
                     node's namespace (net.ipv4.tcp_wmem and tcp_rmem's
                     maximum, e.g. 32M, as hosts on long fast paths set
                     it) [the kernel's: 4 MiB send, 32 MiB receive here]
  --tag NAME         file name stem [$TAG]
  --out DIR          where the CSVs, table, plot and logs go
                     [$BUILD/bench/autotune-bench]
EOF
}

while [ $# -gt 0 ]; do
	case $1 in
	--smoke) MODELS=resnet50; PHASE_ARG=12; ROUNDS=1; GRID_PARTS="1M 4M"
		 GRID_CREDITS="1 4"; GRID_ARG=3 ;;
	--models) MODELS=$2; shift ;;
	--rates) RATES=$2; shift ;;
	--no-background) BG=0 ;;
	--phase) PHASE_ARG=$2; shift ;;
	--first-phase) FIRST_ARG=$2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--grid-seconds) GRID_ARG=$2; shift ;;
	--grid-parts) GRID_PARTS=$2; shift ;;
	--grid-credits) GRID_CREDITS=$2; shift ;;
	--arms) ARMS=$2; shift ;;
	--out) OUT=$2; shift
	       case $OUT in /*) ;; *) OUT=$HERE/$OUT ;; esac ;;
	--delay-ms) DELAY_MS=$2; shift ;;
	--delays) DELAYS=$2; shift ;;
	--min-rtt-wlen) WLEN=$2; shift ;;
	--tcp-mem) TCPMEM=$2; shift ;;
	--bin) BIN_ARG=$2; shift ;;
	--tag) TAG=$2; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "autotune-bench: unknown option '$1' (see --help)" >&2; exit 2 ;;
	esac
	shift
done

OUT=${OUT:-$BUILD/bench/autotune-bench}

if [ -n "$DELAYS" ]; then
	[ "$DELAY_MS" = 0 ] || { echo "autotune-bench: --delay-ms and --delays are exclusive" >&2; exit 2; }
	for d in $DELAYS; do
		awk -v d="$d" 'BEGIN { exit !(d ~ /^[0-9]+(\.[0-9]+)?$/ && d <= 10000) }' ||
			{ echo "autotune-bench: --delays takes milliseconds 0..10000, not '$d'" >&2; exit 2; }
	done
	[ "$(echo $DELAYS | wc -w)" = "$(echo $RATES | wc -w)" ] ||
		{ echo "autotune-bench: --delays needs one delay per rate ('$RATES'), got '$DELAYS'" >&2; exit 2; }
fi

case ${WLEN:-300} in
*[!0-9]*) echo "autotune-bench: --min-rtt-wlen takes whole seconds, not '$WLEN'" >&2; exit 2 ;;
esac

# whole_secs OPTION VALUE: exit 2 unless VALUE (given) is whole seconds > 0
whole_secs() {
	case $2 in
	"") ;;
	*[!0-9]* | 0) echo "autotune-bench: $1 takes whole seconds > 0, not '$2'" >&2; exit 2 ;;
	esac
}
whole_secs --bin "$BIN_ARG"
whole_secs --phase "$PHASE_ARG"
whole_secs --first-phase "$FIRST_ARG"

# size_arg OPTION WHAT VALUE: exit 2 unless VALUE is a size like 64K or 1M
size_arg() {
	[[ "$3" =~ ^[1-9][0-9]*[KM]?$ ]] ||
		{ echo "autotune-bench: $1 takes $2, not '$3'" >&2; exit 2; }
}
for p in $GRID_PARTS; do size_arg --grid-parts "sizes like 64K or 1M" "$p"; done
[ -z "$TCPMEM" ] || size_arg --tcp-mem "a size like 512K or 32M" "$TCPMEM"
for c in $GRID_CREDITS; do
	[[ "$c" =~ ^[1-9][0-9]*$ ]] ||
		{ echo "autotune-bench: --grid-credits takes whole numbers of partitions > 0, not '$c'" >&2; exit 2; }
done

# model_phase MODEL: PHASE_S, FIRST_S, GRID_S, BIN_S and TOTAL for MODEL:
# the options' values, else seconds that give the tuners enough samples.
# VGG-16 moves 553 MB of gradients per worker each way a step (9-15 s a
# step at 1 Gbit/s): a 12-sample search of 2 steps a sample takes 3-6
# minutes there, so 60 s phases end before it does.
model_phase() {
	case $1 in
	vgg16) PHASE_S=${PHASE_ARG:-240} GRID_S=${GRID_ARG:-24} ;;
	*) PHASE_S=${PHASE_ARG:-60} GRID_S=${GRID_ARG:-8} ;;
	esac
	FIRST_S=${FIRST_ARG:-$PHASE_S}
	BIN_S=${BIN_ARG:-$((PHASE_S / 12 > 2 ? PHASE_S / 12 : 2))}
	TOTAL=$((FIRST_S + (nphases - 1) * PHASE_S))
}

bytes() { # 4K -> 4096
	case $1 in
	*K) echo $((${1%K} * 1024)) ;;
	*M) echo $((${1%M} * 1024 * 1024)) ;;
	*) echo "$1" ;;
	esac
}

# --- namespaces -------------------------------------------------------

DELAYLINE=$(pwd)/$BUILD/tests/helpers/delayline
. "$(dirname "$0")/ns-lib.sh"
ns_init pat autotune-bench # NODES: 0 scheduler, 1 server, 2-3 workers, 4 traffic

set_rate() { ns_set_rate "$1"; } # every link, both directions

# topology N: the nodes, the server's link (node 1) delayed by $DELAY_MS
# (with --delays a line from the start, whose delay each run sets)
topology() {
	ns_topology "$1" 10.78.0 || return 1
	local nn
	for nn in ${WLEN:+"${NODES[@]}"}; do
		ip netns exec "$nn" sysctl -qw net.ipv4.tcp_min_rtt_wlen="$WLEN" || return 1
	done
	for nn in ${TCPMEM:+"${NODES[@]}"}; do
		ip netns exec "$nn" sysctl -qw net.ipv4.tcp_wmem="4096 16384 $(bytes "$TCPMEM")" \
			net.ipv4.tcp_rmem="4096 131072 $(bytes "$TCPMEM")" || return 1
	done
	if [ -n "$DELAYS" ]; then
		ns_delay 1 "${DELAYS%% *}" line
	else
		ns_delay 1 "$DELAY_MS"
	fi
}

# phase_delay K: the server link's delay in phase K (1-based) of --delays
phase_delay() { echo $DELAYS | cut -d' ' -f"$1"; }

# Background traffic: a sink on the server's node, one blasting sender on
# the traffic node (TCP: it backs off like any other flow).
BG_PIDS=()
bg_start() {
	ip netns exec "${NODES[1]}" python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.78.0.2", 5999)); s.listen(4)
while True:
    c, _ = s.accept()
    while c.recv(1 << 20):
        pass
' >/dev/null 2>&1 &
	BG_PIDS+=($!)
	RUN_PIDS+=($!)
	sleep 0.3
	ip netns exec "${NODES[4]}" python3 -c '
import socket, time
for _ in range(50):
    try:
        c = socket.create_connection(("10.78.0.2", 5999)); break
    except OSError:
        time.sleep(0.1)
buf = b"x" * (1 << 20)
while True:
    c.sendall(buf)
' >/dev/null 2>&1 &
	BG_PIDS+=($!)
	RUN_PIDS+=($!)
}
bg_stop() {
	local p
	for p in "${BG_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
	for p in "${BG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	BG_PIDS=()
}

timeout_wait() { # PID SECONDS -> exit status, or 124 after killing it
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

# run MODEL SECONDS SCHEDULE-RATES BG PART CREDIT SCHED-ARGS...: one job;
# the rate follows the schedule (one phase per rate, FIRST_S the first,
# PHASE_S each after it, from the first step on), BG=1 adds a phase with
# traffic.  Sets STEPS (timed
# steps, or nan) and leaves the logs in $TMP/{sched,worker*}.{out,err},
# the progress files in $TMP/prog*.csv.
run() {
	local model=$1 secs=$2 rates=$3 bg=$4 part=$5 credit=$6
	shift 6
	local env port="" i p rc status=ok limit r
	env=(DMLC_PS_ROOT_URI=10.78.0.1 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=2
	     PS_CONNECT_TIMEOUT=30 PS_REQUEST_TIMEOUT=300 PS_HEARTBEAT_TIMEOUT=60)
	[ -n "$part" ] && env+=(PS_PARTITION_BYTES="$part")
	[ -n "$credit" ] && env+=(PS_CREDIT_BYTES="$credit")
	# (not *.err: the delay line writes $TMP/delayline1.err for the
	# topology's life)
	rm -f "$TMP"/{sched,server,worker1,worker2}.{out,err} "$TMP"/prog*.csv
	set_rate "${rates%% *}"
	if [ -n "$DELAYS" ] && ! ns_delay_set 1 "$(phase_delay 1)"; then
		STEPS=nan
		return
	fi
	ip netns exec "${NODES[0]}" env "${env[@]}" DMLC_NODE_HOST=10.78.0.1 \
		PS_VERBOSE=1 "$BIN/ps-scheduler" --root-port 0 "$@" >"$TMP/sched.out" 2>"$TMP/sched.err" &
	RUN_PIDS+=($!)
	port=$(ns_sched_port "$TMP/sched.out" 200)
	[ -n "$port" ] || { ns_kill_nodes; STEPS=nan; return; }
	env+=(DMLC_PS_ROOT_PORT="$port")
	ip netns exec "${NODES[1]}" env "${env[@]}" DMLC_NODE_HOST=10.78.0.2 \
		"$BIN/ps-server" >"$TMP/server.out" 2>"$TMP/server.err" &
	RUN_PIDS+=($!)
	local wpids=()
	ns_line_mark
	for i in 1 2; do
		ip netns exec "${NODES[$((1 + i))]}" env "${env[@]}" \
			DMLC_NODE_HOST="10.78.0.$((2 + i))" "$BIN/ps-worker" \
			--model "$model" --gpu-tflops "$TFLOPS" --batch "$BATCH" \
			--steps 0 --seconds "$secs" --warmup 1 \
			--progress "$TMP/prog$i.csv" \
			>"$TMP/worker$i.out" 2>"$TMP/worker$i.err" &
		wpids+=($!)
		RUN_PIDS+=($!)
	done
	# the schedule starts with the first step
	for i in $(seq 1 1200); do
		[ -s "$TMP/prog1.csv" ] && break
		kill -0 "${wpids[0]}" 2>/dev/null || break
		sleep 0.05
	done
	local rest="" k=1 len=$FIRST_S
	[[ "$rates" == *" "* ]] && rest=${rates#* }
	for r in $rest; do
		sleep "$len"
		len=$PHASE_S
		k=$((k + 1))
		# the path first: a rate over the old delay is a mixed phase
		[ -z "$DELAYS" ] || ns_delay_set 1 "$(phase_delay "$k")" || status=delay
		set_rate "$r"
	done
	if [ "$bg" = 1 ]; then
		sleep "$len"
		bg_start
	fi
	limit=$((120 + 2 * ${secs%.*}))
	for p in "${wpids[@]}"; do
		rc=0
		timeout_wait "$p" "$limit" || rc=$?
		[ "$rc" = 0 ] || status=fail$rc
	done
	LINE_CPU=$(ns_line_cpu)
	bg_stop
	ns_kill_nodes
	if [ "$status" != ok ]; then
		tail -n 3 "$TMP"/worker*.err | sed 's/^/    /' >&2
		STEPS=nan
		return
	fi
	STEPS=$(sed -n 's/.* steps=\([0-9]*\) .*/\1/p' "$TMP/worker1.out")
	[ -n "$STEPS" ] || STEPS=nan
}

[ "$(id -u)" = 0 ] || { echo "autotune-bench: needs root (network namespaces, tc)" >&2; exit 77; }
for t in ip tc awk python3; do
	command -v "$t" >/dev/null || { echo "autotune-bench: needs $t" >&2; exit 77; }
done
[ -x "$BIN/ps-worker" ] || { echo "autotune-bench: build first (make)" >&2; exit 2; }
if ! topology 5 2>"$TMP/topology.err"; then
	echo "autotune-bench: cannot build the namespaces: $(cat "$TMP/topology.err")" >&2
	exit 77
fi

mkdir -p "$OUT"
CSV=$OUT/$TAG.csv
STEPCSV=$OUT/$TAG-steps.csv
echo "model,arm,round,steps,partition_bytes,credit_bytes" >"$CSV"
echo "model,arm,t_s,steps_per_s" >"$STEPCSV"
: >"$TMP/switches.csv"
nphases=$(echo $RATES | wc -w)
[ "$BG" = 1 ] && nphases=$((nphases + 1))
echo "autotune-bench: rates $RATES Gbit/s, server link delayed ${DELAYS:-$DELAY_MS} ms each way$([ "$BG" = 1 ] && echo " + background traffic"), $nphases phases, $ROUNDS round(s), arms: $ARMS${TCPMEM:+, TCP buffers up to $TCPMEM}" >&2
# phase labels of the plot: RATE, or RATE@DELAY with --delays
LABELS=$RATES
[ -z "$DELAYS" ] || LABELS=$(paste -d@ <(echo $RATES | tr ' ' '\n') <(echo $DELAYS | tr ' ' '\n') | xargs)
PHASES=""    # MODEL=FIRST:SECONDS,... for the plot
start=$(date +%s)

# steps/s over time from a progress file, $BIN_S s bins from its first step
rate_series() { # MODEL ARM
	awk -F, -v m="$1" -v a="$2" -v w="$BIN_S" -v first="$(head -n 1 "$TMP/prog1.csv" | cut -d, -f1)" '
		{ b = int(($1 - first) / w); n[b]++; if (b > max) max = b }
		END { for (i = 0; i <= max; i++) printf "%s,%s,%g,%.4f\n", m, a, w * (i + 0.5), n[i] / w }' \
		"$TMP/prog1.csv" >>"$STEPCSV"
}

# config switches of the online arm: time of the step each took effect
switches() { # MODEL ARM
	local s
	{ grep -o "config epoch [0-9]*: partition [0-9]* bytes, credit [0-9]* bytes, from step [0-9]*" \
		"$TMP/sched.err" || true; } | awk '{ print $5, $8, $12 }' | while read -r p c s; do
		awk -F, -v s="$s" -v m="$1" -v a="$2" -v p="$p" -v c="$c" \
			'NR == 1 { f = $1 } $2 == s { printf "%s,%s,%.1f,%s,%s\n", m, a, $1 - f, p, c; exit }' \
			"$TMP/prog1.csv"
	done >>"$TMP/switches.csv"
}

for model in $MODELS; do
	model_phase "$model"
	PHASES=${PHASES:+$PHASES,}$model=$FIRST_S:$PHASE_S
	echo "== $model: ${PHASE_S}s per phase$([ "$FIRST_S" = "$PHASE_S" ] || echo ", the first ${FIRST_S}s") (${TOTAL}s per run), grid points ${GRID_S}s" >&2
	# the static arm's config: the best of a small grid at the first rate
	best="" bestv=0
	if [[ " $ARMS " == *" static "* ]]; then
		first=${RATES%% *}
		for part in $GRID_PARTS; do
			for cn in $GRID_CREDITS; do
				pb=$(bytes "$part")
				run "$model" "$GRID_S" "$first" 0 "$pb" $((pb * cn))
				echo "  grid $part x $cn at $first Gbit/s: $STEPS steps in ${GRID_S}s${LINE_CPU:+ (delay line: $LINE_CPU % of a CPU)}" >&2
				ns_line_warn autotune-bench "${LINE_CPU:-}"
				if [ "$STEPS" != nan ] && [ "$STEPS" -gt "$bestv" ]; then
					bestv=$STEPS best="$pb $((pb * cn))"
				fi
			done
		done
		echo "  static config: ${best:-none}" >&2
	fi
	for ((round = 1; round <= ROUNDS; round++)); do
		for arm in $ARMS; do
			part="" credit="" args=()
			case $arm in
			default) ;;
			static) [ -n "$best" ] || continue
				part=${best% *} credit=${best#* } ;;
			oneshot) args=(--autotune --autotune-warmup-samples 1
				       --autotune-steps-per-sample "$SPS"
				       --autotune-max-samples "$MAXS"
				       --autotune-retune-threshold 1000) ;;
			online) args=(--autotune --autotune-conditions
				      --autotune-warmup-samples 1
				      --autotune-steps-per-sample "$SPS"
				      --autotune-max-samples "$MAXS"
				      --autotune-retune-max-samples "$RETUNE"
				      --autotune-retune-threshold 0.15) ;;
			esac
			run "$model" "$TOTAL" "$RATES" "$BG" "$part" "$credit" "${args[@]}"
			echo "  round $round $arm: $STEPS steps${LINE_CPU:+ (delay line: $LINE_CPU % of a CPU)}" >&2
			ns_line_warn autotune-bench "${LINE_CPU:-}"
			# the tuners' logs of every run (packed into the output
			# at the end; KEEP_TMP=1 keeps them unpacked too)
			mkdir -p "$TMP/runs"
			cp "$TMP/sched.err" "$TMP/runs/$model-$arm-$round.sched.err" 2>/dev/null || true
			echo "$model,$arm,$round,$STEPS,$part,$credit" >>"$CSV"
			if [ "$round" = 1 ] && [ "$STEPS" != nan ]; then
				rate_series "$model" "$arm"
				[ "$arm" = online ] || [ "$arm" = oneshot ] && switches "$model" "$arm"
			fi
		done
	done
done
cp "$TMP/switches.csv" "$OUT/$TAG-switches.csv"
tar -czf "$OUT/$TAG-logs.tar.gz" -C "$TMP" runs ||
	echo "autotune-bench: could not pack the runs' logs into $OUT/$TAG-logs.tar.gz" >&2
echo "autotune-bench: measured in $(($(date +%s) - start)) s" >&2
python3 bench/autotune-report.py --table "$CSV" | tee "$OUT/$TAG.md.table"
if command -v gnuplot >/dev/null; then
	python3 bench/autotune-report.py --plot "$STEPCSV" "$OUT/$TAG-switches.csv" \
		"$OUT/$TAG.png" "$PHASES" "$LABELS" "$BG" "$TMP"
	echo "plot: $OUT/$TAG.png"
fi
echo "csv: $CSV"
