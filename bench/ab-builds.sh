#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# ab-builds.sh: two builds of psched against each other over TCP on this
# host, in one sitting: ROUNDS rounds, each runs every workload once with
# build A and once with build B (the order alternates per round), then
# prints medians of the per-round goodput ratios B/A, CPU milliseconds
# per GiB moved and context switches per request (perf stat of the whole
# ps-bench run, start-up included), which a loaded machine disturbs much
# less than goodput.
#
#   bash bench/ab-builds.sh BUILD_A BUILD_B [ROUNDS] [SECONDS] [WORKLOAD...]
#
# Workloads (1 server + 1 worker, loopback, PS_TRANSPORT=tcp):
#   MODESIZE for MODE push, pull or pushpull and SIZE 4K, 64K, 1M or 64M
#   (push1M, pull4K, pushpull64M ...: 40 keys, 4 at 64M)
#   serial4K (push, 1 key: one request at a time) serialpp4K (pushpull)
#   keylist (--keys-per-request 200000: the goodput column is keys pushed
#     and pulled per microsecond, from the warm median push + pull time)
#   sparse (--mode sparse --rows 1000000: the row-sparse Gbit/s)
#   families: every MODESIZE of the three sizes 4K 1M 64M, keylist, sparse
# Default: push1M pushpull1M push4K serial4K push64M.
set -u
A=${1:?usage: ab-builds.sh BUILD_A BUILD_B [ROUNDS] [SECONDS] [WORKLOAD...]}
B=${2:?usage: ab-builds.sh BUILD_A BUILD_B [ROUNDS] [SECONDS] [WORKLOAD...]}
ROUNDS=${3:-3}
SECS=${4:-1}
shift $(($# < 4 ? $# : 4))
WLS=${*:-push1M pushpull1M push4K serial4K push64M}
if [ "$WLS" = families ]; then
	WLS=
	for m in push pull pushpull; do
		for z in 4K 1M 64M; do WLS="$WLS $m$z"; done
	done
	WLS="$WLS keylist sparse"
fi
for d in "$A" "$B"; do
	[ -x "$d/bin/ps-bench" ] || { echo "ab-builds: no $d/bin/ps-bench" >&2; exit 2; }
done
command -v perf >/dev/null || { echo "ab-builds: needs perf (linux-perf)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/psched-ab.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

# workload name -> "mode size keys"
wl() {
	case $1 in
	push64M | pull64M | pushpull64M) echo "${1%64M} 64M 4" ;;
	push4K | push64K | push1M | pull4K | pull64K | pull1M | \
		pushpull4K | pushpull64K | pushpull1M)
		echo "${1%%[0-9]*[KM]} ${1##*[a-z]} 40" ;;
	keylist | sparse) echo "$1 - -" ;;
	serial4K) echo "push 4K 1" ;;
	serialpp4K) echo "pushpull 4K 1" ;;
	*) echo "ab-builds: unknown workload $1" >&2; exit 2 ;;
	esac
}

# one ROUND WORKLOAD LABEL BUILD: a line "round wl label gbps reqs cpu_ms cs"
one() {
	local out args pick
	set -- "$1" "$2" "$3" "$4" $(wl "$2")
	case $5 in
	keylist)
		args="--keys-per-request 200000 --runs 9"
		pick='/^warm median/ { t = $4 + $7; print 400 / t, 2000 / t }' ;;
	sparse)
		args="--mode sparse --rows 1000000 --runs 3 --no-baseline"
		pick='/^median/ { print $2, 0 }' ;;
	*)
		args="--mode $5 --size $6 --keys $7 --seconds $SECS --runs 1 --no-baseline"
		pick='$1 ~ /^[0-9]+$/ && NF >= 10 { print $4, $8 }' ;;
	esac
	# shellcheck disable=SC2086 # args is a list of flags
	out=$(env PS_TRANSPORT=tcp perf stat -x, -e task-clock,context-switches \
		-o "$TMP/stat" timeout -k 5 $((SECS * 5 + 60)) \
		"$4/bin/ps-bench" $args 2>/dev/null | awk "$pick")
	echo "$1 $2 $3 ${out:-0 0}" \
		"$(awk -F, '/task-clock/{print $1}' "$TMP/stat")" \
		"$(awk -F, '/context-switches/{print $1}' "$TMP/stat")"
}

echo "# round workload build gbps reqs_per_s cpu_ms context_switches"
for ((r = 1; r <= ROUNDS; r++)); do
	for w in $WLS; do
		wl "$w" >/dev/null || exit 2
		if ((r % 2)); then one $r $w A "$A"; one $r $w B "$B"
		else one $r $w B "$B"; one $r $w A "$A"; fi
	done
done | tee "$TMP/rounds"

python3 - "$TMP/rounds" "$SECS" <<'EOF'
import statistics as st, sys
secs = float(sys.argv[2])
runs = {}
for line in open(sys.argv[1]):
    f = line.split()
    if not f or f[0].startswith('#') or len(f) < 7:
        continue
    runs.setdefault(f[1], {}).setdefault(f[0], {})[f[2]] = [float(x) for x in f[3:7]]
med = lambda xs: st.median(xs) if xs else float('nan')
print("\n| workload | A Gbit/s | B Gbit/s | B/A goodput | A / B us per request | A / B CPU ms per GiB | A / B context switches per request |")
print("|---|---|---|---|---|---|---|")
for w, rs in runs.items():
    pairs = [v for v in rs.values() if 'A' in v and 'B' in v and v['A'][0] > 0 and v['B'][0] > 0]
    col = lambda b, f: med([f(p[b]) for p in pairs])
    gb = lambda v: v[0]
    nan = float('nan')
    us = lambda v: 1e6 / v[1] if v[1] else nan
    # CPU of the whole run over the bytes of the measured window
    msg = lambda v: v[2] / (v[0] * secs / 8 / 1.073741824)
    csr = lambda v: v[3] / (v[1] * secs) if v[1] else nan
    print(f"| {w} | {col('A', gb):.2f} | {col('B', gb):.2f} | "
          f"{med([p['B'][0] / p['A'][0] for p in pairs]):.2f} (n={len(pairs)}) | "
          f"{col('A', us):.1f} / {col('B', us):.1f} | {col('A', msg):.0f} / {col('B', msg):.0f} | "
          f"{col('A', csr):.2f} / {col('B', csr):.2f} |")
EOF
