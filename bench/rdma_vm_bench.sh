#!/usr/bin/env bash
# Runs INSIDE the soft-RoCE VM (see run-bench-rdma.sh).
set -euo pipefail
BUILD=${BUILD:-build}
SECS=${PS_BENCH_SECONDS:-3}
RUNS=${PS_BENCH_RUNS:-3}
IB_RUNS=${PS_BENCH_IB_RUNS:-3}
SIZES=(65536 1048576 16777216)
declare -A IB_ITERS=([65536]=2000 [1048576]=300 [16777216]=20)
dev=${RDMA_VM_DEV:?not in the VM} gid=${RDMA_VM_GID_INDEX:-1} addr=$RDMA_VM_ADDR
out=$(mktemp -d /tmp/bench-rdma.XXXXXX)

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "nan"}'; }

# ib_write_bw SIZE: average Gb/s of one loopback pair on rxe0
ib_bw() {
	local s=$1 n=${IB_ITERS[$1]} port=$((18515 + RANDOM % 1000))
	ib_write_bw -d "$dev" -x "$gid" -F -p "$port" -s "$s" -n "$n" --report_gbits >/dev/null 2>&1 &
	local srv=$!
	sleep 1
	ib_write_bw -d "$dev" -x "$gid" -F -p "$port" -s "$s" -n "$n" --report_gbits "$addr" 2>/dev/null |
		awk -v s="$s" '$1 == s {print $4}'
	wait "$srv" || true
}

echo "# soft-RoCE VM: $(uname -r), $(nproc) vCPUs, device $dev, addr $addr"
echo "# ib_write_bw: $IB_RUNS runs per size; ps-bench: --dtype raw (server stores, no sum), ${SECS}s windows x $RUNS runs, medians"
for s in "${SIZES[@]}"; do
	for r in $(seq "$IB_RUNS"); do ib_bw "$s"; done | median >"$out/ib.$s"
done
sizes_arg=$(IFS=,; echo "${SIZES[*]}")
for t in rdma tcp; do
	for m in push pull; do
		"$BUILD/bin/ps-bench" --transport "$t" --root-uri "$addr" --mode "$m" \
			--size "$sizes_arg" --seconds "$SECS" --runs "$RUNS" --dtype raw \
			--no-baseline --csv >"$out/$t.$m.csv" 2>"$out/$t.$m.err" ||
			{ echo "ps-bench --transport $t --mode $m failed:"; tail -n 20 "$out/$t.$m.err"; exit 1; }
	done
done
gbps() { awk -F, -v s="$2" '$1 == s {print $4}' "$out/$1.csv"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "-"}'; }
printf '\n%10s %12s %12s %7s %12s %7s %12s %12s %9s %9s\n' "#bytes" "ib_write_bw" \
	"rdma_push" "ratio" "rdma_pull" "ratio" "tcp_push" "tcp_pull" "push r/t" "pull r/t"
printf '%10s %12s %12s %7s %12s %7s %12s %12s %9s %9s\n' "" "[Gb/s]" "[Gb/s]" "/ib" \
	"[Gb/s]" "/ib" "[Gb/s]" "[Gb/s]" "rdma/tcp" "rdma/tcp"
for s in "${SIZES[@]}"; do
	ib=$(cat "$out/ib.$s")
	rp=$(gbps rdma.push "$s") rl=$(gbps rdma.pull "$s")
	tp=$(gbps tcp.push "$s") tl=$(gbps tcp.pull "$s")
	printf '%10s %12s %12s %7s %12s %7s %12s %12s %9s %9s\n' "$s" "$ib" "$rp" \
		"$(ratio "$rp" "$ib")" "$rl" "$(ratio "$rl" "$ib")" "$tp" "$tl" \
		"$(ratio "$rp" "$tp")" "$(ratio "$rl" "$tl")"
done
echo
echo "# raw ps-bench output: $out (inside the VM; lost when it stops)"
for f in "$out"/*.csv; do echo "## $(basename "$f")"; cat "$f"; done
