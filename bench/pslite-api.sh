#!/usr/bin/env bash
# pslite-api.sh [ROUNDS]: ps-lite's own benchmark program,
# tests/test_kv_app_benchmark.cc (10M keys of one float: a push, then a
# pull, per worker; its server answers pushes at once and pulls with
# zeros), compiled twice from the same source: against ps-lite
# (libps.a, ZeroMQ) and against psched's include/ps/ (libpsched.a).  Both
# run as ps-lite's launcher starts them, at 1+1 and 2+2 on loopback,
# interleaved, ROUNDS rounds (default 3).  Once as ps-lite ships it
# (one push, one pull: every buffer touched for the first time) and once
# with its `repeat` raised to 10 (a training loop's steady state; the
# program prints the time of all 10, divided here).  Beside them, in the
# same rounds, psched's own key-list API on the same workload
# (ps-bench --keys-per-request 10000000): its cold round against one push,
# the median of its warm rounds against ten.
#   PSLITE  a checkout of dmlc/ps-lite with build/libps.a built
#           (../shared/peers/ps-lite/build.sh PSLITE OUT builds it)
#   BUILD   psched build tree (default build; make all first)
# Times are the slowest worker's.  Prints per-round lines and the medians
# of the per-round ratios ps-lite time / psched time (>1: psched faster).
set -u
ROUNDS=${1:-3}
BUILD=${BUILD:-build}
PSLITE=${PSLITE:-}
[ -n "$PSLITE" ] && [ -f "$PSLITE/build/libps.a" ] || {
	echo "pslite-api: set PSLITE to a ps-lite checkout with build/libps.a" >&2
	exit 77
}
[ -f "$BUILD/lib/libpsched.a" ] || { echo "pslite-api: no $BUILD/lib/libpsched.a (make)" >&2; exit 1; }
OUT=$BUILD/bench-pslite
mkdir -p "$OUT"
SRC=$PSLITE/tests/test_kv_app_benchmark.cc
sed 's/int repeat = 1;/int repeat = 10;/' "$SRC" >"$OUT/bench10.cc"
grep -q 'int repeat = 10;' "$OUT/bench10.cc" || { echo "pslite-api: no 'int repeat = 1;' in $SRC" >&2; exit 1; }
PS_LIBS=$(make -s --no-print-directory print-libs 2>/dev/null) || PS_LIBS=""
[ -n "$PS_LIBS" ] || { echo "pslite-api: make print-libs printed nothing" >&2; exit 1; }
for rep in 1 10; do
	src=$SRC
	[ "$rep" = 10 ] && src=$OUT/bench10.cc
	g++ -std=c++11 -O3 -I"$PSLITE/include" -o "$OUT/psl$rep" "$src" \
		"$PSLITE/build/libps.a" -lprotobuf-lite -lzmq -pthread || exit 1
	# shellcheck disable=SC2086
	g++ -std=c++11 -O3 -Iinclude -o "$OUT/psa$rep" "$src" \
		"$BUILD/lib/libpsched.a" $PS_LIBS -pthread || exit 1
done

TOOL=pslite-api
. "$(dirname "$0")/pslite-lib.sh"

declare -A R
echo "# load: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
printf "%-4s %-6s %-5s %9s %9s | %9s %9s | %9s %9s\n" cfg repeat round psl_push psl_pull psa_push psa_pull kl_push kl_pull
for r in $(seq 1 "$ROUNDS"); do
	for cfg in "1 1" "2 2"; do
		read -r cp cl wp wl <<<"$(kl_job $cfg 10000000)"
		positive "ps-bench --keys-per-request (${cfg/ /+}) printed no timing" "$cp" "$cl" "$wp" "$wl"
		for rep in 1 10; do
			read -r lp ll <<<"$(dmlc_job "$OUT/psl$rep" "$rep" $cfg)"
			read -r ap al <<<"$(dmlc_job "$OUT/psa$rep" "$rep" $cfg)"
			positive "ps-lite's benchmark (${cfg/ /+}, repeat $rep) printed no timing" "$lp" "$ll"
			positive "the benchmark on psched (${cfg/ /+}, repeat $rep) printed no timing" "$ap" "$al"
			# the key-list API's cold round against one push, its warm
			# median against ten
			kp=$cp kq=$cl
			[ "$rep" = 10 ] && kp=$wp kq=$wl
			printf "%-4s %-6s %-5s %9s %9s | %9s %9s | %9s %9s\n" "${cfg/ /+}" "$rep" "$r" "$lp" "$ll" "$ap" "$al" "$kp" "$kq"
			R["$cfg $rep"]+="$lp $ll $ap $al $kp $kq"$'\n'
		done
	done
done
for cfg in "1 1" "2 2"; do
	for rep in 1 10; do
		rows=$(printf "%s" "${R["$cfg $rep"]}")
		echo "${cfg/ /+} repeat $rep: medians of per-round ratios: ps-lite / psched" \
		     "push $(awk '{print $1/$3}' <<<"$rows" | med) pull $(awk '{print $2/$4}' <<<"$rows" | med);" \
		     "key-list API / psched push $(awk '{print $5/$3}' <<<"$rows" | med) pull $(awk '{print $6/$4}' <<<"$rows" | med);" \
		     "psched push $(awk '{print $3}' <<<"$rows" | med) ms, pull $(awk '{print $4}' <<<"$rows" | med) ms"
	done
done
