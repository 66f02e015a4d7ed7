#!/usr/bin/env bash
# kl-vs-pslite.sh [ROUNDS] [KEYS]: dmlc ps-lite's test_kv_app_benchmark
# (10M keys x 1 float, one push then one pull per worker) against
# ps-bench --keys-per-request, interleaved, 1+1 and 2+2 on loopback.
#   PSL_BIN   ps-lite's benchmark built against libps.a
#             (default /work/pslite-build/test_kv_app_benchmark; build it
#             with: g++ -std=c++11 -O3 -I$PSLITE/include -o $PSL_BIN
#             $PSLITE/tests/test_kv_app_benchmark.cc $PSLITE/build/libps.a
#             -lprotobuf-lite -lzmq -pthread)
#   BUILD     psched build tree (default build)
# ps-lite's benchmark pushes once (its server stores nothing) and pulls
# once: compared with psched's cold round (keys created on the servers)
# and with the median of its warm rounds, both with the worker's key-list
# cache on (a repeated list travels as values only) and off
# (PS_KEYLIST_CACHE=0: every list carries its keys, the same bytes as
# ps-lite's).  Times: the slowest worker.
# Prints per-round lines and the medians of the per-round ratios.
set -u
ROUNDS=${1:-3} N=${2:-10000000}
PSL_BIN=${PSL_BIN:-/work/pslite-build/test_kv_app_benchmark}
BUILD=${BUILD:-build}
[ -x "$PSL_BIN" ] || { echo "no ps-lite benchmark at $PSL_BIN" >&2; exit 77; }
[ "$N" = 10000000 ] || echo "note: ps-lite's benchmark always uses 10000000 keys" >&2

TOOL=kl-vs-pslite
. "$(dirname "$0")/pslite-lib.sh"

declare -A R
for cfg in "1 1" "2 2"; do R[$cfg]=""; done
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
printf "%-4s %-5s %9s %9s | %9s %9s %9s %9s | %9s %9s\n" cfg round psl_push psl_pull cold_push cold_pull warm_push warm_pull unc_push unc_pull
for r in $(seq 1 "$ROUNDS"); do
	for cfg in "1 1" "2 2"; do
		read -r lp ll <<<"$(dmlc_job "$PSL_BIN" 1 $cfg)"
		read -r cp cl wp wl <<<"$(kl_job $cfg "$N")"
		read -r _ _ up ul <<<"$(kl_job $cfg "$N" PS_KEYLIST_CACHE=0)"
		# a figure that could not be read is an error, not a ratio of 0
		positive "no 'Push/Pull average' timing from $PSL_BIN (${cfg/ /+}); it must be ps-lite's test_kv_app_benchmark (PSL_BIN)" "$lp" "$ll"
		positive "ps-bench (${cfg/ /+}) printed no timing where one was expected; run it by hand: $BUILD/bin/ps-bench --servers ${cfg% *} --workers ${cfg#* } --keys-per-request $N --runs 4" \
			"$cp" "$cl" "$wp" "$wl" "$up" "$ul"
		printf "%-4s %-5s %9s %9s | %9s %9s %9s %9s | %9s %9s\n" "${cfg/ /+}" "$r" "$lp" "$ll" "$cp" "$cl" "$wp" "$wl" "$up" "$ul"
		R[$cfg]+="$lp $ll $cp $cl $wp $wl $up $ul"$'\n'
	done
done
for cfg in "1 1" "2 2"; do
	rows=$(printf "%s" "${R[$cfg]}")
	echo "${cfg/ /+}: medians of per-round ratios (ps-lite time / psched time; >1 = psched faster):"
	echo "  push cold $(awk '{print $1/$3}' <<<"$rows" | med)  pull cold $(awk '{print $2/$4}' <<<"$rows" | med)" \
	     " push warm $(awk '{print $1/$5}' <<<"$rows" | med)  pull warm $(awk '{print $2/$6}' <<<"$rows" | med)" \
	     " push uncached $(awk '{print $1/$7}' <<<"$rows" | med)  pull uncached $(awk '{print $2/$8}' <<<"$rows" | med)"
done
