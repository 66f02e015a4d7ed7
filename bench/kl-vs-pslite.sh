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

psl() { # S W -> "push_ms pull_ms" (slowest worker)
	local port out pids=() i
	port=$(python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
	out=$(mktemp)
	export DMLC_NUM_SERVER=$1 DMLC_NUM_WORKER=$2 DMLC_PS_ROOT_URI=127.0.0.1 \
		DMLC_PS_ROOT_PORT=$port DMLC_NODE_HOST=127.0.0.1
	DMLC_ROLE=scheduler "$PSL_BIN" >/dev/null 2>&1 & pids+=($!)
	for ((i = 0; i < $1; i++)); do DMLC_ROLE=server "$PSL_BIN" >/dev/null 2>&1 & pids+=($!); done
	for ((i = 0; i < $2; i++)); do DMLC_ROLE=worker "$PSL_BIN" >>"$out" 2>&1 & pids+=($!); done
	for p in "${pids[@]}"; do timeout 300 tail --pid="$p" -f /dev/null; done
	kill "${pids[@]}" 2>/dev/null
	unset DMLC_NUM_SERVER DMLC_NUM_WORKER DMLC_PS_ROOT_URI DMLC_PS_ROOT_PORT DMLC_NODE_HOST
	awk '/Push average/ {v=$(NF)+0; if (v>pu) pu=v} /Pull average/ {v=$(NF)+0; if (v>pl) pl=v}
	     END {printf "%.1f %.1f\n", pu, pl}' FS='cost: ' "$out"
	rm -f "$out"
}

psb() { # S W [env...] -> "cold_push cold_pull warm_push warm_pull"
	local s=$1 w=$2
	shift 2
	env "$@" "$BUILD/bin/ps-bench" --servers "$s" --workers "$w" --keys-per-request "$N" --runs 4 2>&1 |
		awk '$1 == "0" {cp=$2; cl=$3} /^warm median/ {wp=$4; wl=$7} END {print cp, cl, wp, wl}'
}

timed() { # MESSAGE VALUE...: every value a positive number, else stop
	local msg=$1 v
	shift
	for v; do
		awk -v v="$v" 'BEGIN {exit !(v > 0)}' || { echo "kl-vs-pslite: $msg (got '$v')" >&2; exit 1; }
	done
}

med() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }

declare -A R
for cfg in "1 1" "2 2"; do R[$cfg]=""; done
echo "# $(date -u +%FT%TZ) load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
printf "%-4s %-5s %9s %9s | %9s %9s %9s %9s | %9s %9s\n" cfg round psl_push psl_pull cold_push cold_pull warm_push warm_pull unc_push unc_pull
for r in $(seq 1 "$ROUNDS"); do
	for cfg in "1 1" "2 2"; do
		read -r lp ll <<<"$(psl $cfg)"
		read -r cp cl wp wl <<<"$(psb $cfg)"
		read -r _ _ up ul <<<"$(psb $cfg PS_KEYLIST_CACHE=0)"
		# a figure that could not be read is an error, not a ratio of 0
		timed "no 'Push/Pull average' timing from $PSL_BIN (${cfg/ /+}); it must be ps-lite's test_kv_app_benchmark (PSL_BIN)" "$lp" "$ll"
		timed "ps-bench (${cfg/ /+}) printed no timing where one was expected; run it by hand: $BUILD/bin/ps-bench --servers ${cfg% *} --workers ${cfg#* } --keys-per-request $N --runs 4" \
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
