#!/bin/bash
# SPDX-License-Identifier: MIT
#
# serial-cmp.sh [ROUNDS] [SECONDS]: serial 4 KiB push latency over
# loopback TCP, 1 server + 1 worker, interleaved per round: ps-lite
# (psl_bench via ../shared/peers/ps-lite/run.sh), then ps-bench with
# PS_CALLER_RX=0, then with PS_CALLER_RX=1 (docs/c-api.md "Waiting and completion").
# Prints microseconds per request and the ratio to ps-lite per round.
#   PSL_BENCH  ps-lite's bench (default /work/pslite-build/psl_bench)
#   PSL_RUN    its launcher (default ../shared/peers/ps-lite/run.sh)
#   BUILD      where ps-bench is (default build)
set -u
ROUNDS=${1:-5}
SECS=${2:-2}
BUILD=${BUILD:-build}
PSL=${PSL_BENCH:-/work/pslite-build/psl_bench}
RUN=${PSL_RUN:-$(cd "$(dirname "$0")/../.." && pwd)/shared/peers/ps-lite/run.sh}
[ -x "$PSL" ] && [ -x "$RUN" ] || { echo "serial-cmp: no ps-lite bench ($PSL) or run.sh ($RUN)" >&2; exit 2; }
[ -x "$BUILD/bin/ps-bench" ] || { echo "serial-cmp: no $BUILD/bin/ps-bench (make first)" >&2; exit 2; }
us() { # PS_CALLER_RX value
	PS_CALLER_RX=$1 PS_TRANSPORT=tcp timeout 60 "$BUILD/bin/ps-bench" \
		--mode push --size 4096 --keys 1 --seconds "$SECS" --runs 1 \
		--no-baseline 2>/dev/null |
		awk '$1 ~ /^[0-9]+$/ && NF >= 10 && $8 > 0 {printf "%.2f", 1e6/$8}'
}
echo "# round ps-lite_us rx0_us rx0/ps-lite rx1_us rx1/ps-lite"
for ((r = 1; r <= ROUNDS; r++)); do
	pl=$(timeout 60 "$RUN" "$PSL" 1 1 push 4096 1 "$SECS" 1 2>/dev/null |
		awk '/^RUN/{print $8}' | head -1)
	b0=$(us 0)
	b1=$(us 1)
	awk -v r="$r" -v p="${pl:-0}" -v a="${b0:-0}" -v b="${b1:-0}" 'BEGIN {
		printf "%d %.2f %.2f %.3f %.2f %.3f\n", r, p, a,
			(p > 0 ? a / p : 0), b, (p > 0 ? b / p : 0) }'
done
