#!/usr/bin/env bash
# Runs INSIDE the soft-RoCE VM (see run-bench-rdma.sh).  The host is
# shared and emulation is noisy, so the measurements are interleaved: each
# round runs ib_write_bw, then ps-bench RDMA push/pull and TCP push/pull
# once for every size; the table gives medians over the rounds of each
# figure and of each round's ratios.
#   PS_BENCH_BASE  another build tree (e.g. of main): its ps-bench RDMA
#                  push/pull run in the same rounds, as a before/after
set -euo pipefail
BUILD=${BUILD:-build}
BASE=${PS_BENCH_BASE:-}
SECS=${PS_BENCH_SECONDS:-3}
ROUNDS=${PS_BENCH_ROUNDS:-3}
SIZES=(65536 1048576 16777216)
declare -A IB_ITERS=([65536]=2000 [1048576]=300 [16777216]=20)
dev=${RDMA_VM_DEV:?not in the VM} gid=${RDMA_VM_GID_INDEX:-1} addr=$RDMA_VM_ADDR
out=$(mktemp -d /tmp/bench-rdma.XXXXXX)
# Emulation on a shared host can stall a node for seconds.
export PS_HEARTBEAT_TIMEOUT=${PS_HEARTBEAT_TIMEOUT:-60}

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "nan"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.3f\n", a / b; else print "nan"}'; }

# ib_write_bw SIZE: average Gb/s of one loopback pair on rxe0 (the client
# retries while the server is not listening yet)
ib_bw() {
	local s=$1 n=${IB_ITERS[$1]} port=$((18515 + RANDOM % 1000)) srv try bw=""
	ib_write_bw -d "$dev" -x "$gid" -F -p "$port" -s "$s" -n "$n" --report_gbits >/dev/null 2>&1 &
	srv=$!
	for try in 1 2 3 4 5; do
		sleep 1
		bw=$(ib_write_bw -d "$dev" -x "$gid" -F -p "$port" -s "$s" -n "$n" --report_gbits "$addr" 2>/dev/null |
			awk -v s="$s" '$1 == s {print $4}') || true
		[ -n "$bw" ] && break
	done
	wait "$srv" 2>/dev/null || true
	echo "${bw:-nan}"
}

# psb TRANSPORT MODE [BUILD [ARGS...]]: one ps-bench run over all sizes, CSV
psb() {
	local t=$1 m=$2 b=${3:-$BUILD}
	shift 2; [ $# -gt 0 ] && shift
	"$b/bin/ps-bench" --transport "$t" --root-uri "$addr" --mode "$m" \
		--size "$(IFS=,; echo "${SIZES[*]}")" --seconds "$SECS" --runs 1 \
		--dtype raw --no-baseline --csv "$@" 2>"$out/err" ||
		{ echo "ps-bench --transport $t --mode $m $* failed:" >&2; tail -n 20 "$out/err" >&2; exit 1; }
}

echo "# soft-RoCE VM: $(uname -r), $(nproc) vCPUs, device $dev, addr $addr"
echo "# $ROUNDS rounds of: ib_write_bw (-F; 2000, 300, 20 iterations), ps-bench rdma/tcp push/pull (--dtype raw: the server stores, no sum; ${SECS}s window, 40 keys, fewer above 1 MiB; rounds of all keys, each waited for), ps-bench rdma push --stream (each key issued again as it completes, no wait between rounds, as ib_write_bw streams)"
for r in $(seq "$ROUNDS"); do
	for s in "${SIZES[@]}"; do echo "$s $(ib_bw "$s")"; done >"$out/ib.$r"
	for t in rdma tcp; do
		for m in push pull; do psb "$t" "$m" >"$out/$t.$m.$r"; done
	done
	psb rdma push "$BUILD" --stream >"$out/rdma.spush.$r"
	if [ -n "$BASE" ]; then
		for m in push pull; do psb rdma "$m" "$BASE" >"$out/base.$m.$r"; done
	fi
	echo "# round $r: ib $(awk '{printf "%s=%s ", $1, $2}' "$out/ib.$r")" >&2
done
col() { # FILE-PREFIX SIZE ROUND: goodput
	case $1 in
	ib) awk -v s="$2" '$1 == s {print $2}' "$out/ib.$3" ;;
	*) awk -F, -v s="$2" '$1 == s {print $4}' "$out/$1.$3" ;;
	esac
}
med() { local r; for r in $(seq "$ROUNDS"); do col "$1" "$2" "$r"; done | median; }
medratio() { local r; for r in $(seq "$ROUNDS"); do ratio "$(col "$1" "$3" "$r")" "$(col "$2" "$3" "$r")"; done | median; }
printf '\n%10s %11s %10s %6s %11s %6s %10s %6s %10s %10s %9s %9s\n' "#bytes" "ib_write_bw" \
	"rdma_push" "/ib" "push_stream" "/ib" "rdma_pull" "/ib" "tcp_push" "tcp_pull" "push r/t" "pull r/t"
for s in "${SIZES[@]}"; do
	printf '%10s %11s %10s %6.2f %11s %6.2f %10s %6.2f %10s %10s %9.2f %9.2f\n' "$s" \
		"$(med ib "$s")" "$(med rdma.push "$s")" "$(medratio rdma.push ib "$s")" \
		"$(med rdma.spush "$s")" "$(medratio rdma.spush ib "$s")" \
		"$(med rdma.pull "$s")" "$(medratio rdma.pull ib "$s")" \
		"$(med tcp.push "$s")" "$(med tcp.pull "$s")" \
		"$(medratio rdma.push tcp.push "$s")" "$(medratio rdma.pull tcp.pull "$s")"
done
if [ -n "$BASE" ]; then
	printf '\n# the same rounds, RDMA with ps-bench of %s (before):\n' "$BASE"
	printf '%10s %10s %6s %10s %6s %11s %11s\n' "#bytes" "base_push" "/ib" \
		"base_pull" "/ib" "push new/b" "pull new/b"
	for s in "${SIZES[@]}"; do
		printf '%10s %10s %6.2f %10s %6.2f %11.2f %11.2f\n' "$s" \
			"$(med base.push "$s")" "$(medratio base.push ib "$s")" \
			"$(med base.pull "$s")" "$(medratio base.pull ib "$s")" \
			"$(medratio rdma.push base.push "$s")" "$(medratio rdma.pull base.pull "$s")"
	done
fi
echo "# Gb/s of payload (goodput); ratios are medians of per-round ratios"
