#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# snapshot-cost.sh: what periodic snapshots (docs/snapshots.md) cost the
# job, as the ratio of steps/s of ps-worker's VGG-16 replay (528 MB of
# parameters) with PS_SNAPSHOT_STEPS=EVERY against without, in
# interleaved rounds (the order alternates), the median of the per-round
# ratios.
#
#   bash bench/snapshot-cost.sh [ROUNDS [EVERY [BUILD]]]   (3, 100, build)
#
# Snapshots go to a directory under /tmp (files of every server, removed
# after each run).  The replay is 2 servers x 2 workers, vgg16, 2 x EVERY
# timed steps, so that two snapshots fall inside them.
set -u
ROUNDS=${1:-3}
EVERY=${2:-100}
BUILD=${3:-build}
BIN=$BUILD/bin
export BUILD
[ -x "$BIN/ps-worker" ] || { echo "snapshot-cost: no $BIN/ps-worker (make first)" >&2; exit 2; }
TMP=$(mktemp -d /tmp/psched-snapcost.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
export PS_JOB_TOKEN=snapshot-cost-bench-secret-0123456789

# run CONFIG: one replay, a line "CONFIG WHAT VALUE".
run() {
	local cfg=$1
	if [ "$cfg" = on ]; then
		export PS_SNAPSHOT_DIR=$TMP/snap PS_SNAPSHOT_STEPS=$EVERY
	else
		unset PS_SNAPSHOT_DIR PS_SNAPSHOT_STEPS
	fi
	bash -c '. tests/integration/lib.sh
		start_scheduler 2 2 >/dev/null
		start_servers 2
		start_workers 2 --model vgg16 --steps '$((2 * EVERY))' --warmup 2
		for p in "${WORKER_PIDS[@]}"; do wait_pid "$p" 600 || exit 1; done
		cat "$TMP"/worker*.out' 2>/dev/null |
		sed -n 's/.*steps_per_s=\([0-9.]*\).*/\1/p' |
		awk -v c="$cfg" '{ s += $1; n++ } END { if (n) print c, "vgg16-steps/s", s / n }'
	rm -rf "$TMP/snap"
}

for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then order="off on"; else order="on off"; fi
	for cfg in $order; do
		run "$cfg" | sed "s/^/$r /"
	done
done | tee "$TMP/all"

echo
echo "snapshots every $EVERY steps vs none, median of $ROUNDS interleaved rounds:"
awk '{ v[$1, $2, $3] = $4; w[$3] = 1; R[$1] = 1 }
END {
	for (x in w) {
		n = 0
		for (r in R)
			if (((r, "on", x) in v) && ((r, "off", x) in v) && v[r, "off", x] > 0)
				a[++n] = v[r, "on", x] / v[r, "off", x]
		for (i = 1; i <= n; i++)
			for (j = i + 1; j <= n; j++)
				if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		if (n) printf "  %-16s on/off %.3f (rounds: %d)\n", x, (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2), n
	}
}' "$TMP/all" | sort
