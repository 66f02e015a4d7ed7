#!/usr/bin/env bash
# RDMA push against ib_write_bw for one or two builds, inside ONE
# soft-RoCE VM (booted once for every run), with the host's noise taken
# out as far as a shared host allows: every round runs ib_write_bw, then
# each build, then ib_write_bw again, then the builds in reverse order
# (ABBA), and each ps-bench run is divided by the mean of the ib_write_bw
# runs just before and just after it.  Prints every ratio and their median per build, and
# the range ib_write_bw ran in, flagged when it moved more than 20%
# within the VM's run (a busy host: the ratios are noisy then).
#
#   [SIZE=BYTES] bash bench/rdma-ab.sh [ROUNDS [KEYS [TREE...]]]
#     SIZE    bytes per push and per ib_write_bw write [65536]
#     ROUNDS  rounds [5]; each build runs twice per round
#     KEYS    keys in flight per round (ps-bench --keys) [40]
#     TREE    build trees (default: build); e.g. build /work/old/build;
#             TREE+ARG adds one ps-bench argument, last, to that entry's
#             runs (build+--stream, build+--keys=128), so one tree can
#             run two ways in one boot
#
# ps-bench runs --mode push --size SIZE --dtype raw (the server stores,
# as ib_write_bw's target does nothing) --seconds 3 --runs 1.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-65536}
ROUNDS=${1:-5}
KEYS=${2:-40}
shift 2 2>/dev/null || shift $#
TREES=("$@")
[ ${#TREES[@]} -gt 0 ] || TREES=(build)
RUNNER=${RDMA_VM_RUNNER:-$(cd .. && pwd)/shared/rdma-vm/run-in-rxe-vm}
[ -x "$RUNNER" ] || { echo "rdma-ab: no VM runner at $RUNNER (set RDMA_VM_RUNNER)" >&2; exit 2; }
case $ROUNDS in '' | *[!0-9]* | 0) echo "rdma-ab: ROUNDS must be 1..99, not '$ROUNDS'" >&2; exit 2 ;; esac
case $SIZE in '' | *[!0-9]* | 0) echo "rdma-ab: SIZE must be a byte count, not '$SIZE'" >&2; exit 2 ;; esac
case $KEYS in '' | *[!0-9]* | 0) echo "rdma-ab: KEYS must be 1..65536, not '$KEYS'" >&2; exit 2 ;; esac
for t in "${TREES[@]}"; do
	[ -x "${t%%+*}/bin/ps-bench" ] || { echo "rdma-ab: no ${t%%+*}/bin/ps-bench" >&2; exit 2; }
done
log=$(mktemp /tmp/rdma-ab.XXXXXX)
# ib_write_bw iterations: about 128 MiB a run, 20..2000
ITERS=$((134217728 / SIZE))
[ $ITERS -gt 2000 ] && ITERS=2000
[ $ITERS -lt 20 ] && ITERS=20
trap 'rm -f "$log"' EXIT

# Inside the VM: one line per run, "ib GBPS" or "psb TREE GBPS".
inner=$(
	cat <<'EOF'
set -u
dev=$RDMA_VM_DEV gid=${RDMA_VM_GID_INDEX:-1} addr=$RDMA_VM_ADDR
export PS_HEARTBEAT_TIMEOUT=60
ib() {
	local port=$((18515 + RANDOM % 1000)) bw="" try
	ib_write_bw -d "$dev" -x "$gid" -F -p $port -s "$SIZE" -n "$ITERS" --report_gbits >/dev/null 2>&1 &
	local srv=$!
	for try in 1 2 3 4 5; do
		sleep 1
		bw=$(ib_write_bw -d "$dev" -x "$gid" -F -p $port -s "$SIZE" -n "$ITERS" --report_gbits "$addr" 2>/dev/null |
			awk -v s="$SIZE" '$1 == s {print $4}') || true
		[ -n "$bw" ] && break
	done
	wait $srv 2>/dev/null || true
	[ -n "$bw" ] && echo "ib $bw"
}
psb() {
	local extra=()
	case $1 in *+*) extra=("${1#*+}") ;; esac
	"${1%%+*}/bin/ps-bench" --transport rdma --root-uri "$addr" --mode push --size "$SIZE" \
		--seconds 3 --runs 1 --dtype raw --no-baseline --csv --keys "$KEYS" "${extra[@]}" 2>/dev/null |
		awk -F, -v t="$1" -v s="$SIZE" '$1 == s {print "psb", t, $4}'
}
for r in $(seq "$ROUNDS"); do
	ib
	for t in $TREES; do psb "$t"; done
	ib
	for t in $(printf '%s\n' $TREES | tac); do psb "$t"; done
done
ib
EOF
)
SIZE=$SIZE ITERS=$ITERS ROUNDS=$ROUNDS KEYS=$KEYS TREES="${TREES[*]}" RDMA_VM_RW_DIRS="" \
	"$RUNNER" bash -c "$inner" | tee "$log"
# A busy host shows as ib_write_bw moving within the VM's run; say so,
# since the ratios are then worth little (docs/transports.md).
awk '$1 == "ib" { if (!n++ || $2 < lo) lo = $2; if ($2 > hi) hi = $2 }
	END {
		if (!n) { print "# no ib_write_bw run gave a figure"; exit }
		printf "# ib_write_bw %s-%s Gbit/s over %d runs", lo, hi, n
		if (lo > 0 && hi / lo > 1.2)
			printf ": it moved %.0f%% within this boot, so the host was busy and the ratios below are noisy", (hi / lo - 1) * 100
		printf "\n"
	}' "$log"
echo "# ps-bench push $SIZE bytes, $KEYS keys / mean of the neighbouring ib_write_bw runs:"
awk '
	{ line[NR] = $0; kind[NR] = $1; if ($1 == "ib") ib[NR] = $2 }
	END {
		for (i = 1; i <= NR; i++) {
			if (kind[i] != "psb") continue
			split(line[i], f, " ")
			s = 0; n = 0
			for (j = i - 1; j >= 1; j--) if (kind[j] == "ib") { s += ib[j]; n++; break }
			for (j = i + 1; j <= NR; j++) if (kind[j] == "ib") { s += ib[j]; n++; break }
			if (n && s > 0) r[f[2]] = r[f[2]] " " sprintf("%.2f", f[3] / (s / n))
		}
		for (t in r) print t ":" r[t]
	}' "$log" | while IFS=: read -r t rs; do
	med=$(printf '%s\n' $rs | sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]}')
	echo "$t: median ${med:-nan} of$rs"
done
