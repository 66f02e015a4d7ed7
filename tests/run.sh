#!/usr/bin/env bash
# Run the psched test suite against $BUILD (default build/).
#   unit + transport binaries (TAP), tests/*/test_*.sh scripts
#   (exit 0 pass, 77 skip, else fail), then — for the full suite — the
#   ASan and TSan builds of the quick suite.
# PS_SUITE=full (make test): every test but those marked "# long", then
#   the sanitizer builds;
# PS_SUITE=quick (make asan, make tsan): also without those marked
#   "# slow", no sanitizer builds;
# PS_SUITE=long (make test-long): only the tests marked "# long".
# A script marked "# once" checks the tree, not a build (layout, docs,
# formatting, manifests): the sanitizer builds' runs of the full suite
# skip it, as it ran against the main build (PS_TREE_CHECKED=1).
# PS_TEST_ONLY=REGEX runs only the tests whose names match (grep -E).
# PS_TEST_JOBS tests run at once (default: the number of CPUs); a script
# marked "# serial" (it shapes links, measures, or boots a VM) runs alone.
# Ends with the slowest 15 tests and the line "N passed, N failed, N
# skipped", which counts the sanitizer builds' tests too.
set -u
BUILD=${BUILD:-build}
SUITE=${PS_SUITE:-full}
JOBS=${PS_TEST_JOBS:-$(nproc 2>/dev/null || echo 2)}
export BUILD
# The builds that tests start (sanitizer trees, make install) take as
# many jobs, not the jobserver of a make that may have called this script.
unset MFLAGS MAKELEVEL
export MAKEFLAGS=-j$JOBS
cd "$(dirname "$0")/.."
logs=$BUILD/test-logs
mkdir -p "$logs"
rm -f "$logs"/*.res
pass=0 fail=0 skip=0
failed_names=()
running=()
# Seconds per binary, script and sanitizer build, wall-clock and CPU
# (user + system of what it ran and waited for): the slowest are listed
# at the end (where the suite's time goes; a test whose CPU seconds are
# far below its wall-clock ones waits more than it works).
times=$logs/times.txt
: >"$times"
suite_start=$SECONDS

took() { # name start cpu-seconds
	printf '%s %s %s\n' "$((SECONDS - $2))" "$3" "$1" >>"$times"
}

# cpu_of FILE: the CPU seconds bash's `time` wrote to FILE as "user sys".
cpu_of() {
	awk '{ printf "%d\n", $1 + $2 + 0.5 }' "$1" 2>/dev/null || echo 0
}

# A job writes its counts and what to print to $logs/NAME.res as its last
# act; the parent reads them once the job is gone (collect).
tap_job() { # res-file log name binary
	local res=$1 log=$2 name=$3 bin=$4 rc p f s t0=$SECONDS TIMEFORMAT='%U %S'
	{ time timeout 900 "$bin" >"$log" 2>&1; } 2>"$res.cpu"
	rc=$?
	p=$(grep -c '^ok ' "$log" | tr -d ' ')
	s=$(grep -c '^ok .*# SKIP' "$log" | tr -d ' ')
	f=$(grep -c '^not ok ' "$log" | tr -d ' ')
	p=$((p - s))
	if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ "$f" = 0 ]; then
		f=1 # crashed or timed out outside a test
	fi
	{
		echo "$p $f $s $((SECONDS - t0)) $(cpu_of "$res.cpu")"
		if [ "$f" != 0 ]; then
			echo "FAIL $name (exit $rc)"
			grep -A3 '^not ok' "$log" | head -40
			tail -n 15 "$log"
		elif [ "$p" = 0 ] && [ "$s" != 0 ]; then
			echo "skip $name ($s skipped: $(grep -m1 '# SKIP' "$log" | sed 's/.*# SKIP //'))"
		else
			echo "ok   $name ($p passed, $s skipped)"
		fi
	} >"$res.tmp" && mv "$res.tmp" "$res"
}

script_job() { # res-file log name script
	local res=$1 log=$2 name=$3 sc=$4 rc limit t0=$SECONDS TIMEFORMAT='%U %S' t
	# 20 minutes, or what a "# timeout: SECONDS" line of the script says
	limit=$(sed -n 's/^# timeout: \([0-9][0-9]*\)$/\1/p' "$sc" | head -n 1)
	{ time timeout "${limit:-1200}" bash "$sc" >"$log" 2>&1; } 2>"$res.cpu"
	rc=$?
	t="$((SECONDS - t0)) $(cpu_of "$res.cpu")"
	{
		case $rc in
		0) echo "1 0 0 $t"; echo "ok   $name" ;;
		77) echo "0 0 1 $t"; echo "skip $name: $(tail -n 1 "$log")" ;;
		*) echo "0 1 0 $t"; echo "FAIL $name (exit $rc)"; tail -n 40 "$log" ;;
		esac
	} >"$res.tmp" && mv "$res.tmp" "$res"
}

# logbase NAME: where NAME's log and result go ("integration/test_x" ->
# $logs/integration_test_x).
logbase() {
	echo "$logs/${1//\//_}"
}

# collect: report every finished job and drop it from $running.
collect() {
	local left=() name res p f s t c
	for name in "${running[@]}"; do
		res=$(logbase "$name").res
		if [ ! -f "$res" ]; then
			left+=("$name")
			continue
		fi
		read -r p f s t c <"$res"
		pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
		[ "$f" != 0 ] && failed_names+=("$name")
		printf '%s %s %s\n' "$t" "${c:-0}" "$name" >>"$times"
		tail -n +2 "$res"
		rm -f "$res" "$res.cpu"
	done
	running=("${left[@]}")
}

# wait_slots N: until at most N jobs run.
wait_slots() {
	while [ "${#running[@]}" -gt "$1" ]; do
		wait -n 2>/dev/null
		collect
	done
}

# picked NAME: false when PS_TEST_ONLY leaves NAME out.
picked() {
	[ -z "${PS_TEST_ONLY:-}" ] || grep -qE "$PS_TEST_ONLY" <<<"$1"
}

start() { # kind name serial arg
	local kind=$1 name=$2 serial=$3 arg=$4 file
	file=$(logbase "$name")
	if [ "$serial" = 1 ]; then
		wait_slots 0
	else
		wait_slots $((JOBS - 1))
	fi
	"${kind}_job" "$file.res" "$file.log" "$name" "$arg" &
	running+=("$name")
	[ "$serial" = 1 ] && wait_slots 0
	return 0
}

run_tap() { # binary [name suffix]
	local name
	name=$(basename "$1")${2:+-$2}
	picked "$name" || return 0
	start tap "$name" 0 "$1"
}

run_script() { # script
	local sc=$1 name serial=0
	name=$(basename "$(dirname "$sc")")/$(basename "$sc" .sh)
	picked "$name" || return 0
	if grep -q '^# long' "$sc"; then
		[ "$SUITE" = long ] || return 0
	elif [ "$SUITE" = long ]; then
		return 0
	fi
	if [ "$SUITE" = quick ] && grep -q '^# slow' "$sc"; then
		echo "skip $name (slow; full suite only)"
		skip=$((skip + 1))
		return
	fi
	if [ -n "${PS_TREE_CHECKED:-}" ] && grep -q '^# once' "$sc"; then
		echo "skip $name (checks the tree: ran in the main build)"
		skip=$((skip + 1))
		return
	fi
	grep -q '^# serial' "$sc" && serial=1
	start script "$name" "$serial" "$sc"
}

echo "== psched tests: $BUILD ($SUITE, $JOBS at once)"
if [ "$SUITE" != long ]; then
	for bin in "$BUILD"/tests/unit/test_*; do
		[ -x "$bin" ] && [ -f "$bin" ] && run_tap "$bin"
	done
	# The transport conformance suite, once per transport (loop is
	# in-process, shm links processes of one host; rdma skips without a
	# device; test_rdma_vm.sh runs it in a soft-RoCE VM).
	for bin in "$BUILD"/tests/transport/test_*; do
		[ -x "$bin" ] && [ -f "$bin" ] || continue
		for t in tcp loop shm rdma; do PS_TEST_TRANSPORT=$t run_tap "$bin" "$t"; done
	done
fi
for sc in tests/static/test_*.sh tests/ref/test_*.sh tests/integration/test_*.sh; do
	[ -f "$sc" ] && run_script "$sc"
done
wait_slots 0

if [ "$SUITE" = full ]; then
	for san in asan tsan; do
		echo "== make $san"
		t0=$SECONDS
		{ time PS_TREE_CHECKED=1 make --no-print-directory "$san" >"$logs/make-$san.log" 2>&1; } 2>"$logs/make-$san.cpu"
		rc=$?
		counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed, [0-9]+ skipped$' "$logs/make-$san.log" | tail -n 1)
		if [ -n "$counts" ]; then
			read -r p _ f _ s _ <<<"$counts"
			pass=$((pass + p)) fail=$((fail + f)) skip=$((skip + s))
		fi
		if [ "$rc" = 0 ] && [ -n "$counts" ]; then
			echo "ok   make $san ($counts)"
		else
			[ -n "$counts" ] && [ "$f" != 0 ] || fail=$((fail + 1))
			failed_names+=("make $san")
			echo "FAIL make $san (exit $rc${counts:+; $counts})"
			grep -E 'FAIL|not ok|ERROR|Sanitizer|error:' "$logs/make-$san.log" | head -40
			tail -n 30 "$logs/make-$san.log"
		fi
		took "make $san" "$t0" "$(cpu_of "$logs/make-$san.cpu")"
	done
fi
echo "== slowest 15 of $(wc -l <"$times") (seconds: wall-clock, CPU; $((SECONDS - suite_start)) s in all)"
sort -rn "$times" | head -n 15 | sed 's/^/  /'
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
