#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# shm-ab.sh: builds (or one build with different ps-bench options) against
# each other over shm and tcp on the local host, in one sitting: ROUNDS
# rounds, each runs every CONFIG (order rotating per round) over tcp and
# shm, push and pushpull, at SIZES (1 server x 1 worker, --seconds 1
# --runs 1), then prints per CONFIG the medians of the per-round shm/tcp
# ratios and of its shm goodput over the first CONFIG's in the same round.
#
#   bash bench/shm-ab.sh ROUNDS SIZES LABEL:BUILD[:PS-BENCH OPTIONS] ...
#   e.g. bash bench/shm-ab.sh 5 1M,64M main:../main/build new:build \
#             new-thp:build:--hugepages
set -u
[ $# -ge 3 ] || { sed -n 4,13p "$0"; exit 2; }
ROUNDS=$1
SIZES=$2
shift 2
for spec in "$@"; do
	IFS=: read -r _ dir _ <<<"$spec"
	[ -x "$dir/bin/ps-bench" ] || { echo "shm-ab: no $dir/bin/ps-bench" >&2; exit 2; }
done
FIRST=${1%%:*}
TMP=$(mktemp -d /tmp/psched-shmab.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

for r in $(seq 1 "$ROUNDS"); do
	for spec in "$@"; do
		IFS=: read -r lab dir extra <<<"$spec"
		for t in shm tcp; do
			for m in push pushpull; do
				# shellcheck disable=SC2086
				"$dir/bin/ps-bench" --transport $t --mode $m \
					--size "$SIZES" --seconds 1 --runs 1 \
					--no-baseline --csv $extra 2>/dev/null |
					awk -F, -v r="$r" -v l="$lab" -v t=$t -v m=$m \
						'NR > 1 && $1 ~ /^[0-9]+$/ { print r, l, t, m "@" $1, $4 }'
			done
		done
	done | tee -a "$TMP/all"
	echo "round $r: $(cut -d, -f1 /proc/loadavg | cut -d' ' -f1-3) load" >&2
	set -- "${@:2}" "$1"
done
echo "medians of per-round ratios ($ROUNDS rounds):"
awk -v first="$FIRST" '
	{ g[$1, $2, $3, $4] = $5; labs[$2] = 1; wl[$4] = 1; rounds[$1] = 1 }
	function med(s,    a, n, i, j, t) {
		n = split(s, a, " ")
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
			if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n ? (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2) : 0
	}
	END {
		for (w in wl) for (l in labs) {
			st = ""; sf = ""
			for (r in rounds) {
				s = g[r, l, "shm", w]; t = g[r, l, "tcp", w]
				f = g[r, first, "shm", w]
				if (t > 0) st = st " " sprintf("%.2f", s / t)
				if (f > 0) sf = sf " " sprintf("%.2f", s / f)
			}
			printf "  %-20s %-10s shm/tcp %5.2f  shm vs %s %5.2f  (shm/tcp rounds:%s)\n", w, l, med(st), first, med(sf), st
		}
	}' "$TMP/all" | sort
