#!/usr/bin/env bash
# slow
# serial
# bench/sched-bench.sh end to end on a tiny grid: namespaces + veth +
# bridge + tbf-shaped links (1 Gbit/s), 1 server and 2 workers replaying
# a small CSV profile, FIFO vs priority+credit at one grid point.  Checks
# that every run succeeded, the CSV has one row per run, the summary table
# has its row, the namespaces are gone afterwards, and (with gnuplot) the
# PNG exists.  Exits 77 when namespaces cannot be made (not root, no ip/tc).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD
TMP=$(mktemp -d /tmp/psched-nsbench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
die() { echo "FAIL: $*"; [ -f "$TMP/log" ] && tail -n 30 "$TMP/log"; exit 1; }

cat >"$TMP/small.csv" <<EOF
name,params,fwd_us,bwd_us
conv1,20000,2000,4000
conv2,300000,3000,6000
fc1,2000000,1000,2000
fc2,100000,500,1000
EOF

bash bench/sched-bench.sh --models "$TMP/small.csv" --servers 1 --rate 1 \
	--partitions 256K --credits 4 --final-runs 2 --seconds 0.5 \
	--out "$TMP/out" --tag smoke >"$TMP/log" 2>&1
rc=$?
if [ $rc = 77 ]; then
	echo "network namespaces unavailable: $(tail -n 1 "$TMP/log")"
	exit 77
fi
[ $rc = 0 ] || die "sched-bench exited $rc"
csv=$TMP/out/smoke.csv
[ -f "$csv" ] || die "no CSV"
# FIFO 1 + grid 1, then 2 rounds of FIFO, default and best
rows=$(($(wc -l <"$csv") - 1))
[ "$rows" = 8 ] || die "CSV has $rows runs, want 8"
bad=$(awk -F, 'NR > 1 && $NF != "ok"' "$csv")
[ -z "$bad" ] || die "failed runs: $bad"
awk -F, 'NR > 1 && !($13 > 0) { exit 1 }' "$csv" || die "a run without steps/s"
grep -q "^| $TMP/small.csv | 1 | " "$TMP/out/smoke.md.table" || die "no summary row"
if command -v gnuplot >/dev/null; then
	[ -s "$TMP/out/smoke.png" ] || die "no plot"
fi
pid=$(sed -n 's/.*namespaces psb\([0-9]*\)-.*/\1/p' "$TMP/log" | head -n 1)
if ip netns list | grep -q "^psb[0-9]*-" && [ -n "$pid" ] &&
	ip netns list | grep -q "^psb$pid-"; then
	die "namespaces left behind: $(ip netns list | grep "^psb$pid-")"
fi
cat "$TMP/out/smoke.md.table"
exit 0
