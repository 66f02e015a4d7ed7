#!/usr/bin/env bash
# slow
# serial
# bench/autotune-bench.sh end to end, shortened: the namespace cluster
# with a link whose rate follows a schedule (5 -> 1 -> 3 Gbit/s, then
# background traffic) and 1 ms of delay each way on the server's link
# (the delay line), the 2x2 grid and the four arms in one round, the
# first phase longer than the others (--first-phase), the grid's
# partitions given (--grid-parts), every namespace's TCP buffers raised
# (--tcp-mem: a failing sysctl fails the run).
# Checks that every arm ran (numeric steps, not nan: the bench once failed
# every run unnoticed, its clusters having no job secret), the CSV has one
# row per arm, the static arm names its grid best, the online arm
# switched configs, the steps/s series has every arm in its bins, every
# run line gives the delay line's CPU share, a bad --bin is refused, and
# the namespaces and the delay line are gone afterwards.  Figures are
# not judged here (make bench-autotune).  77 without namespaces.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
export BUILD
TMP=$(mktemp -d /tmp/psched-atbench.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
die() { echo "FAIL: $*"; [ -f "$TMP/log" ] && tail -n 30 "$TMP/log"; exit 1; }

# refused WANT ARGS...: the bench refuses ARGS with exit 2 and a message
# containing WANT, before any namespace is made
refused() {
	local want=$1
	shift
	bash bench/autotune-bench.sh "$@" >"$TMP/bad.log" 2>&1
	[ $? = 2 ] && grep -q -- "$want" "$TMP/bad.log" ||
		die "$* not refused: $(cat "$TMP/bad.log")"
}
refused "--bin takes whole seconds" --bin 0
refused "--first-phase takes whole seconds > 0, not '2m'" --first-phase 2m
refused "--grid-credits takes whole numbers of partitions > 0, not '0'" --grid-credits "1 0"
refused "--tcp-mem takes a size like 512K or 32M, not '8Q'" --tcp-mem 8Q
before=$(ls /var/run/netns 2>/dev/null | grep "^pat" | sort)
lines_before=$(pgrep -c -f "helpers/delayline --dev p1 --tap d1" || true)
bash bench/autotune-bench.sh --smoke --phase 5 --first-phase 7 --grid-seconds 2 \
	--grid-parts "512K 2M" --delay-ms 1 --tcp-mem 8M --out "$TMP/out" >"$TMP/log" 2>&1
rc=$?
if [ $rc = 77 ]; then
	echo "network namespaces unavailable: $(tail -n 1 "$TMP/log")"
	exit 77
fi
[ $rc = 0 ] || die "autotune-bench exited $rc"
grep -q "TCP buffers up to 8M" "$TMP/log" || die "no --tcp-mem in the run's header"
csv=$TMP/out/autotune-bench.csv
[ -f "$csv" ] || die "no CSV"
grep -q "nan" "$TMP/log" && die "a run failed (nan steps)"
for arm in default static oneshot online; do
	n=$(awk -F, -v a=$arm 'NR > 1 && $2 == a && $4 ~ /^[0-9]+$/ && $4 > 0' "$csv" | wc -l)
	[ "$n" = 1 ] || die "arm $arm: $n rows with steps, want 1: $(cat "$csv")"
done
# from the grid asked for: 512K or 2M partitions, 1 or 4 of them
awk -F, 'NR > 1 && $2 == "static" { p = $5; c = $6 / $5
	exit !((p == 524288 || p == 2097152) && (c == 1 || c == 4)) }' "$csv" ||
	die "the static arm names no config of its grid: $(cat "$csv")"
[ "$(grep -c "^  grid " "$TMP/log")" = 4 ] || die "not a 2x2 grid: $(grep "^  grid " "$TMP/log")"
# the steps/s series: every arm, in bins of phase / 12 seconds, at least
# 2 (5 s phases: 2 s, centred at 1, 3, 5, ...)
st=$TMP/out/autotune-bench-steps.csv
for arm in default static oneshot online; do
	awk -F, -v a=$arm 'NR > 1 && $2 == a { n++; if ($3 != 2 * n - 1) bad = 1 }
		END { exit !(n > 0 && !bad) }' "$st" ||
		die "arm $arm: no steps/s series in 2 s bins: $(grep ",$arm," "$st" | head -5)"
done
sw=$TMP/out/autotune-bench-switches.csv
[ -s "$sw" ] || die "no switches CSV"
grep -q online "$sw" || die "the online arm switched no config: $(cat "$sw")"
# the scheduler's log of every run, packed: the tuners' lock-ins in it
logs=$TMP/out/autotune-bench-logs.tar.gz
packed=$(tar -tzf "$logs" 2>&1)
for arm in default static oneshot online; do
	grep -q "^runs/.*-$arm-1.sched.err$" <<<"$packed" ||
		die "no scheduler log of the $arm run in $logs: $(head -5 <<<"$packed")"
done
tar -xzOf "$logs" --wildcards 'runs/*-online-1.sched.err' | grep -q "tuner " ||
	die "the online run's log in $logs has no tuner line"
after=$(ls /var/run/netns 2>/dev/null | grep "^pat" | sort)
left=$(comm -13 <(echo "$before") <(echo "$after"))
[ -z "$left" ] || die "namespaces left behind: $left"
grep -q "server link delayed 1 ms" "$TMP/log" || die "the delay was not applied"
# --first-phase: 7 s, then 5 s for each of the other three phases
grep -q "5s per phase, the first 7s (22s per run)" "$TMP/log" ||
	die "the first phase's length is not in the run: $(grep "per phase" "$TMP/log")"
awk -F, 'NR > 1 && $2 == "default" && $3 > m { m = $3 } END { exit !(m >= 19) }' "$st" ||
	die "the default run's steps end before 19 s of its 22: $(grep ",default," "$st" | tail -n 2)"
# every run line says how busy the delay line was (a busy line, not the
# link's rate, may have set the speed: docs/benchmarks.md "The delay line")
for arm in default static oneshot online; do
	grep -Eq "round 1 $arm: [0-9]+ steps \(delay line: [0-9]+ % of a CPU\)" "$TMP/log" ||
		die "the $arm run's line gives no delay-line CPU share: $(grep "round 1 $arm" "$TMP/log")"
done
lines_after=$(pgrep -c -f "helpers/delayline --dev p1 --tap d1" || true)
[ "$lines_after" -le "$lines_before" ] || die "a delay line left running"
echo "ok four arms ran: $(awk -F, 'NR > 1 { printf "%s %s; ", $2, $4 }' "$csv")"
exit 0
