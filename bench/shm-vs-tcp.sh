#!/usr/bin/env bash
# shm against TCP on the local host, in one sitting: ROUNDS rounds, each runs
# ps-bench over tcp and over shm (order alternating per round) for push
# and pushpull at SIZES, and prints per-round goodput and shm/tcp ratios,
# then the medians of the per-round ratios (issue 12's shm target: >= 2x).
#   bash bench/shm-vs-tcp.sh [ROUNDS] [SIZES] [RUNS]      (BUILD=build)
# BENCH_ARGS: more ps-bench options for both, e.g. "--hugepages".
set -u
ROUNDS=${1:-3}
SIZES=${2:-1M,64M}
RUNS=${3:-3}
BENCH=${BUILD:-build}/bin/ps-bench
[ -x "$BENCH" ] || { echo "no $BENCH (make first)"; exit 2; }
TMP=$(mktemp -d /tmp/psched-shmbench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# run T M R: goodput per size into $TMP/T.M.R (lines "bytes gbps")
run() {
	"$BENCH" --transport "$1" --mode "$2" --size "$SIZES" --seconds 1 \
		--runs "$RUNS" --no-baseline --csv ${BENCH_ARGS:-} 2>/dev/null |
		awk -F, 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1, $4 }' >"$TMP/$1.$2.$3"
}

for r in $(seq 1 "$ROUNDS"); do
	for m in push pushpull; do
		if [ $((r % 2)) = 1 ]; then run tcp $m $r; run shm $m $r
		else run shm $m $r; run tcp $m $r; fi
		join "$TMP/tcp.$m.$r" "$TMP/shm.$m.$r" |
			awk -v r="$r" -v m="$m" '{ printf "round %s %-8s %9s B  tcp %7.2f  shm %7.2f Gb/s  shm/tcp %.2f\n", r, m, $1, $2, $3, ($2 > 0 ? $3 / $2 : 0) }' |
			tee -a "$TMP/all"
	done
done
echo "medians of per-round shm/tcp ratios ($ROUNDS rounds):"
awk '{ k = $3 " " $4; v[k] = v[k] " " $NF } END { for (k in v) print k, v[k] }' "$TMP/all" |
	sort | while read -r m b rest; do
	med=$(echo "$rest" | tr ' ' '\n' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }')
	printf "  %-8s %9s B  %s  (rounds: %s)\n" "$m" "$b" "$med" "$rest"
done
