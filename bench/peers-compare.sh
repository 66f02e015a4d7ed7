#!/bin/bash
# SPDX-License-Identifier: MIT
#
# peers-compare.sh: psched (ps-bench, TCP) against dmlc/ps-lite (psl_bench,
# ../shared/peers/ps-lite/) on this machine, in one sitting: ROUNDS rounds,
# each running every workload once with ps-lite and once with ps-bench
# back to back; per-round ratios, medians printed at the end
# (docs/benchmarks.md "Against ps-lite" shows the current table).
#
#   bench/peers-compare.sh PSL_BENCH [ROUNDS] [SECONDS]
#   PSL_RUN=path/to/run.sh  ps-lite's launcher (default: next to PSL_BENCH,
#                           or ../shared/peers/ps-lite/run.sh)
#   BUILD=build             where ps-bench is
#   PSL_KEEP=path           also a psl_bench whose server keeps what is
#                           pushed (by reference); rows push1M-keep and
#                           pushpull1M-keep compare it with the same
#                           round's psched figures.  psl_bench.cc's server
#                           drops every push (it only sizes its store), so
#                           ZeroMQ's next receive reuses the freed, cache-hot
#                           buffer.  Build the variant with build.sh's g++
#                           line on psl_bench.cc after
#     sed 's|if (s.size() != len) s = SArray<Val>(len);.*|s = req.vals.segment(i * len, (i + 1) * len);|'
#
# Workloads (1 server + 1 worker, loopback): push 1 MiB x 40 keys,
# push+pull 1 MiB x 40 (ps-lite: ZPush + ZPull), push 4 KiB x 40, push
# 64 MiB x 4, serial 4 KiB (1 key, one request at a time: microseconds per
# request).  CPU cores = task-clock of the whole run (perf stat; both tools'
# start-up included) / wall time.  Each ps-bench workload runs a second
# time held to the ps-lite run's Goodput (ps-bench --rate), for the cores
# each tool needs for the same work per second (the closed-loop runs
# compare cores at different speeds).  ps-bench's push+pull 1 MiB and push
# 1 MiB are also run once per round with its baselines, for the ratio to
# the best of them (ps-bench's Best column).
set -u
PSL=${1:?usage: peers-compare.sh PSL_BENCH [ROUNDS] [SECONDS]}
ROUNDS=${2:-3}
SECS=${3:-2}
BUILD=${BUILD:-build}
BENCH=$BUILD/bin/ps-bench
RUN=${PSL_RUN:-}
if [ -z "$RUN" ]; then
	for r in "$(dirname "$PSL")/run.sh" \
		"$(dirname "$0")/../../shared/peers/ps-lite/run.sh" \
		/work/shared/peers/ps-lite/run.sh; do
		[ -x "$r" ] && RUN=$r && break
	done
fi
[ -x "$PSL" ] || { echo "peers-compare: no ps-lite bench at $PSL" >&2; exit 2; }
[ -n "$RUN" ] && [ -x "$RUN" ] || { echo "peers-compare: no ps-lite run.sh (PSL_RUN)" >&2; exit 2; }
[ -x "$BENCH" ] || { echo "peers-compare: no $BENCH (make first)" >&2; exit 2; }
command -v perf >/dev/null || { echo "peers-compare: needs perf (linux-perf) for CPU time" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# cpu CMD...: run CMD, its stdout to $TMP/out; prints "cores cpu_seconds".
cpu() {
	local t0 t1 ms
	t0=$(date +%s.%N)
	# ps-lite now and then hangs at start-up or shutdown: bounded.
	perf stat -x, -e task-clock -o "$TMP/stat" \
		timeout -k 5 $((SECS * 5 + 60)) "$@" >"$TMP/out" 2>/dev/null
	t1=$(date +%s.%N)
	ms=$(awk -F, '/task-clock/{print $1}' "$TMP/stat")
	awk -v ms="$ms" -v a="$t0" -v b="$t1" \
		'BEGIN{printf "%.2f %.3f", ms/1000/(b-a), ms/1000}'
}

# msgib CPU_SECONDS BYTES: CPU milliseconds per GiB moved.
msgib() {
	awk -v c="$1" -v b="$2" 'BEGIN{printf "%.0f", (b > 0 ? c*1000/(b/1073741824) : 0)}'
}

# psb_gbps: Goodput of the ps-bench run in $TMP/out (its table's row).
psb_gbps() {
	awk '$1 ~ /^[0-9]+$/ && NF >= 10 {print $4}' "$TMP/out"
}

# psl BIN MODE SIZE KEYS: one ps-lite run (1+1); sets pc pcs (cores, CPU
# seconds), pg (Gbit/s), pus (us per request), pb (bytes moved).
psl() {
	set -- $(cpu "$RUN" "$1" 1 1 "$2" "$3" "$4" "$SECS" 1)
	pc=$1 pcs=$2
	pg=$(awk '/^RUN/{print $7}' "$TMP/out" | head -1)
	pus=$(awk '/^RUN/{print $8}' "$TMP/out" | head -1)
	pb=$(awk '/^RUN/{print $5 * $3 * $4}' "$TMP/out" | head -1)
}

# workload name, ps-lite mode, ps-bench mode, size in bytes, keys
WL=("push1M push push 1048576 40"
    "pushpull1M pushpull pushpull 1048576 40"
    "push4K push push 4096 40"
    "push64M push push 67108864 4"
    "serial4K push push 4096 1")

echo "# round workload psl_gbps psl_cores psched_gbps psched_cores psl_us psched_us psl_ms_per_GiB psched_ms_per_GiB psched_at_psl_rate_gbps psched_at_psl_rate_cores"
for ((r = 1; r <= ROUNDS; r++)); do
	for w in "${WL[@]}"; do
		set -- $w
		name=$1 pm=$2 bm=$3 size=$4 keys=$5
		psl "$PSL" "$pm" "$size" "$keys"
		set -- $(cpu env PS_TRANSPORT=tcp "$BENCH" --mode "$bm" \
			--size "$size" --keys "$keys" --seconds "$SECS" --runs 1 \
			--no-baseline)
		bc=$1 bcs=$2
		bg=$(psb_gbps)
		bus=$(awk '$1 ~ /^[0-9]+$/ && NF >= 10 && $8 > 0 {printf "%.2f", 1e6/$8}' "$TMP/out")
		bb=$(awk '$1 ~ /^[0-9]+$/ && NF >= 10 {print $1 * $2 * $3}' "$TMP/out")
		# the same workload held to ps-lite's Goodput (--rate): the
		# cores each tool needs for the same work per second
		rg=0 rc=0
		if awk -v g="${pg:-0}" 'BEGIN{exit !(g > 0)}'; then
			set -- $(cpu env PS_TRANSPORT=tcp "$BENCH" --mode "$bm" \
				--size "$size" --keys "$keys" --seconds "$SECS" --runs 1 \
				--no-baseline --rate "$pg")
			rc=$1
			rg=$(psb_gbps)
		fi
		echo "$r $name ${pg:-0} $pc ${bg:-0} $bc ${pus:-0} ${bus:-0}" \
			"$(msgib "$pcs" "${pb:-0}") $(msgib "$bcs" "${bb:-0}") ${rg:-0} $rc"
		case "${PSL_KEEP:-}:$name" in
		:*|*:push4K|*:push64M|*:serial4K) continue ;;
		esac
		psl "$PSL_KEEP" "$pm" "$size" "$keys"
		echo "$r $name-keep ${pg:-0} $pc ${bg:-0} $bc 0 0" \
			"$(msgib "$pcs" "${pb:-0}") $(msgib "$bcs" "${bb:-0}") 0 0"
	done
	for m in pushpull push; do
		env PS_TRANSPORT=tcp "$BENCH" --mode $m --size 1M --keys 40 \
			--seconds "$SECS" --runs 1 2>/dev/null |
			awk -v r="$r" -v m="$m" '$1 ~ /^[0-9]+$/ && $5 > 0 {print r, "best1M", m, $5, $4}'
	done
done | tee "$TMP/rounds"

python3 - "$TMP/rounds" <<'EOF'
import statistics as st, sys
rows = {}
tmax = {}
for line in open(sys.argv[1]):
    f = line.split()
    if not f or f[0].startswith('#'):
        continue
    if f[1] == 'best1M':
        tmax.setdefault(f[2], []).append((float(f[3]), float(f[4])))
        continue
    rows.setdefault(f[1], []).append([float(x) for x in f[2:]])
def med(xs):
    return st.median(xs) if xs else float('nan')
print()
print("| workload | ps-lite | psched | psched / ps-lite | cores ps-lite / psched | cores at ps-lite's Goodput: ps-lite / psched (psched's Gbit/s) | CPU ms per GiB ps-lite / psched |")
print("|---|---|---|---|---|---|---|")
for name, rs in rows.items():
    if name == 'serial4K':
        pl, ps = med([r[4] for r in rs]), med([r[5] for r in rs])
        ratio = med([r[5] / r[4] for r in rs if r[4] > 0])
        unit = "us per request"
    else:
        pl, ps = med([r[0] for r in rs]), med([r[2] for r in rs])
        ratio = med([r[2] / r[0] for r in rs if r[0] > 0])
        unit = "Gbit/s"
    paced = [r for r in rs if len(r) > 9 and r[9] > 0]
    at = (f"{med([r[1] for r in paced]):.2f} / {med([r[9] for r in paced]):.2f} "
          f"({med([r[8] for r in paced]):.2f}); psched fewer in "
          f"{sum(r[9] < r[1] for r in paced)} of {len(paced)}" if paced else "")
    print(f"| {name} ({unit}) | {pl:.2f} | {ps:.2f} | {ratio:.2f} | "
          f"{med([r[1] for r in rs]):.2f} / {med([r[3] for r in rs]):.2f} | {at} | "
          f"{med([r[6] for r in rs]):.0f} / {med([r[7] for r in rs]):.0f} |")
for m, ts in tmax.items():
    print(f"\n{m} 1 MiB vs the best plain-socket baseline (same ps-bench run): Best "
          f"{med([t for t, g in ts]):.2f} Gbit/s, psched {med([g for t, g in ts]):.2f}, "
          f"ratio {med([g / t for t, g in ts if t > 0]):.2f} (median of {len(ts)} rounds)")
EOF
