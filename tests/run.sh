#!/usr/bin/env bash
# Run the psched test suite against $BUILD (default build/).
#   unit + transport binaries (TAP), tests/*/test_*.sh scripts
#   (exit 0 pass, 77 skip, else fail), then — for the full suite — the
#   ASan and TSan builds of the quick suite.
# PS_SUITE=full (make test): every test but those marked "# long", and
#   the quick suite of the ASan and TSan builds (build-asan/, build-tsan/,
#   built by the first job, beside the main build's tests; their tests
#   are named asan:NAME and tsan:NAME);
# PS_SUITE=quick (make unit, make asan, make tsan): also without those
#   marked "# slow", one build only;
# The TSan build's scripts run with PS_TEST_LITE=1: those with a lite
#   mode run their smaller clusters (a race needs the threads and the
#   paths, not the volume; TSan runs nodes 5-15 times slower);
# PS_SUITE=long (make test-long): only the tests marked "# long".
# A script marked "# once" checks the tree, not a build (layout, docs,
# formatting, manifests): the sanitizer builds skip it, as it ran against
# the main build (and so does any run with PS_TREE_CHECKED=1).
# PS_TEST_ONLY=REGEX runs only the tests whose names match (grep -E).
# PS_TEST_JOBS tests run at once (default: the number of CPUs), of every
# build.  Most tests mostly wait on their nodes (see the CPU column of the
# slowest-tests list), but more at once than CPUs makes the TSan build's
# nodes, 5-15 times slower, miss their timeouts.  Scripts marked "# serial"
# (they shape links, measure, boot a VM or start 72 processes) run last,
# one at a time, each alone.
# Ends with the slowest 15 tests and the line "N passed, N failed, N
# skipped", which counts the sanitizer builds' tests too.
set -u
BUILD=${BUILD:-build}
SUITE=${PS_SUITE:-full}
CPUS=$(nproc 2>/dev/null || echo 2)
JOBS=${PS_TEST_JOBS:-$CPUS}
export BUILD
# The builds that tests start (sanitizer trees, make install) take a job
# per CPU, not the jobserver of a make that may have called this script.
unset MFLAGS MAKELEVEL
export MAKEFLAGS=-j$CPUS
cd "$(dirname "$0")/.."
logs=$BUILD/test-logs
mkdir -p "$logs"
rm -f "$logs"/*.res
pass=0 fail=0 skip=0
failed_names=()
running=() # jobs in the PS_TEST_JOBS slots
beside=()  # jobs beside them (the sanitizer builds' compile)
# Seconds per binary, script and sanitizer build, wall-clock and CPU
# (user + system of what it ran and waited for): the slowest are listed
# at the end (where the suite's time goes; a test whose CPU seconds are
# far below its wall-clock ones waits more than it works).
times=$logs/times.txt
: >"$times"
suite_start=$SECONDS

# run_timed RES LOG CMD...: CMD's status; its output to LOG, the user and
# system seconds of it and what it waited for to RES.cpu.
run_timed() {
	local res=$1 log=$2 TIMEFORMAT='%U %S'
	shift 2
	{ time "$@" >"$log" 2>&1; } 2>"$res.cpu"
}

# took_of RES T0: "wall-clock CPU" seconds of a job started at T0 whose
# run_timed wrote RES.cpu.
took_of() {
	printf '%s %s\n' "$((SECONDS - $2))" \
		"$(awk '{ printf "%d", $1 + $2 + 0.5 }' "$1.cpu" 2>/dev/null || echo 0)"
}

# A job writes its counts and what to print to $logs/NAME.res as its last
# act; the parent reads them once the job is gone (collect).
tap_job() { # res-file log name binary
	local res=$1 log=$2 name=$3 bin=$4 rc p f s t0=$SECONDS
	run_timed "$res" "$log" timeout 900 "$bin"
	rc=$?
	p=$(grep -c '^ok ' "$log" | tr -d ' ')
	s=$(grep -c '^ok .*# SKIP' "$log" | tr -d ' ')
	f=$(grep -c '^not ok ' "$log" | tr -d ' ')
	p=$((p - s))
	if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ "$f" = 0 ]; then
		f=1 # crashed or timed out outside a test
	fi
	{
		echo "$p $f $s $(took_of "$res" "$t0")"
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
	local res=$1 log=$2 name=$3 sc=$4 rc limit t0=$SECONDS t
	# 20 minutes, or what a "# timeout: SECONDS" line of the script says
	limit=$(sed -n 's/^# timeout: \([0-9][0-9]*\)$/\1/p' "$sc" | head -n 1)
	run_timed "$res" "$log" timeout "${limit:-1200}" bash "$sc"
	rc=$?
	t=$(took_of "$res" "$t0")
	{
		case $rc in
		0) echo "1 0 0 $t"; echo "ok   $name" ;;
		77) echo "0 0 1 $t"; echo "skip $name: $(tail -n 1 "$log")" ;;
		*) echo "0 1 0 $t"; echo "FAIL $name (exit $rc)"; tail -n 40 "$log" ;;
		esac
	} >"$res.tmp" && mv "$res.tmp" "$res"
}

# The sanitizer trees' compile, beside the main build's tests, at a lower
# priority than theirs (it fills the CPU they leave, and does not slow
# the nodes whose timeouts they test).
make_job() { # res-file log name targets
	local res=$1 log=$2 name=$3 rc t0=$SECONDS t
	# shellcheck disable=SC2086 # targets are words
	run_timed "$res" "$log" nice -n 10 make --no-print-directory $4
	rc=$?
	t=$(took_of "$res" "$t0")
	{
		if [ "$rc" = 0 ]; then
			echo "0 0 0 $t"; echo "ok   $name"
		else
			echo "0 1 0 $t"; echo "FAIL $name (exit $rc)"
			grep -E 'error:|Error ' "$log" | head -20; tail -n 30 "$log"
		fi
	} >"$res.tmp" && mv "$res.tmp" "$res"
}

# A "# serial" script marked "# prepare" readies what its run needs
# (packages, a VM's boot image) with --prepare, beside the slots from the
# start, so that its turn at the end only runs.  It counts for nothing:
# if it failed, the script's own run says why.
prep_job() { # res-file log name script
	local res=$1 log=$2 name=$3 rc t0=$SECONDS
	run_timed "$res" "$log" timeout 1200 nice -n 10 bash "$4" --prepare
	rc=$?
	{
		echo "0 0 0 $(took_of "$res" "$t0")"
		echo "ok   $name (exit $rc)"
	} >"$res.tmp" && mv "$res.tmp" "$res"
}

# logbase NAME: where NAME's log and result go ("integration/test_x" ->
# $logs/integration_test_x, "asan:test_bo" -> $logs/asan_test_bo).
logbase() {
	local n=${1//\//_}
	echo "$logs/${n//:/_}"
}

# reap LIST: report every finished job of array LIST and drop it there.
reap() {
	local -n jobs=$1
	local left=() name res p f s t c
	for name in "${jobs[@]}"; do
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
	jobs=("${left[@]}")
}

# collect: report every finished job, in the slots or beside them.
collect() {
	reap running
	reap beside
}

# wait_slots N: until at most N jobs run in the slots.
wait_slots() {
	while [ "${#running[@]}" -gt "$1" ]; do
		wait -n 2>/dev/null
		collect
	done
}

# wait_beside: until the jobs beside the slots are done.
wait_beside() {
	while [ "${#beside[@]}" -gt 0 ]; do
		wait -n 2>/dev/null
		collect
	done
}

# wait_all: until no job runs, those beside the slots included.
wait_all() {
	wait_slots 0
	wait_beside
}

# picked NAME: false when PS_TEST_ONLY leaves NAME out.
picked() {
	[ -z "${PS_TEST_ONLY:-}" ] || grep -qE "$PS_TEST_ONLY" <<<"$1"
}

start() { # kind name mode(slot, serial, beside) arg
	local kind=$1 name=$2 mode=$3 arg=$4 file
	file=$(logbase "$name")
	case $mode in
	serial) wait_all ;;
	slot) wait_slots $((JOBS - 1)) ;;
	esac
	(
		export BUILD=$B
		[ -n "$LITE" ] && export PS_TEST_LITE=1
		"${kind}_job" "$file.res" "$file.log" "$name" "$arg"
	) &
	if [ "$mode" = beside ]; then
		beside+=("$name")
	else
		running+=("$name")
	fi
	[ "$mode" = serial ] && wait_all
	return 0
}

# What run_taps and run_scripts enqueue: build B's tests, named with
# prefix PRE, of suite S, skipping "# once" scripts when ONCE_DONE is set,
# with PS_TEST_LITE=1 when LITE is set.
B=$BUILD PRE= S=$SUITE ONCE_DONE=${PS_TREE_CHECKED:-} LITE=

run_tap() { # binary [name suffix]
	local name
	name=$PRE$(basename "$1")${2:+-$2}
	picked "$name" || return 0
	start tap "$name" slot "$1"
}

# run_taps: the unit and transport binaries of B.
run_taps() {
	local bin t
	for bin in "$B"/tests/unit/test_*; do
		[ -x "$bin" ] && [ -f "$bin" ] && run_tap "$bin"
	done
	# The transport conformance suite, once per transport (loop is
	# in-process, shm links processes of one host; rdma skips without a
	# device; test_rdma_vm.sh runs it in a soft-RoCE VM).
	for bin in "$B"/tests/transport/test_*; do
		[ -x "$bin" ] && [ -f "$bin" ] || continue
		for t in tcp loop shm rdma; do PS_TEST_TRANSPORT=$t run_tap "$bin" "$t"; done
	done
}

# script_mode SCRIPT: how it runs (see the top): serial or slot.
script_mode() {
	if grep -q '^# serial' "$1"; then
		echo serial
	else
		echo slot
	fi
}

run_script() { # script mode: run SCRIPT if its mode is MODE
	local sc=$1 name mode=$2
	[ "$(script_mode "$sc")" = "$mode" ] || return 0
	name=$PRE$(basename "$(dirname "$sc")")/$(basename "$sc" .sh)
	picked "$name" || return 0
	if grep -q '^# long' "$sc"; then
		[ "$S" = long ] || return 0
	elif [ "$S" = long ]; then
		return 0
	fi
	if [ "$S" = quick ] && grep -q '^# slow' "$sc"; then
		echo "skip $name (slow; full suite only)"
		skip=$((skip + 1))
		return
	fi
	if [ -n "$ONCE_DONE" ] && grep -q '^# once' "$sc"; then
		echo "skip $name (checks the tree: ran in the main build)"
		skip=$((skip + 1))
		return
	fi
	start script "$name" "$mode" "$sc"
}

# run_scripts MODE: every script of MODE.
run_scripts() {
	local sc
	for sc in tests/static/test_*.sh tests/ref/test_*.sh tests/integration/test_*.sh; do
		[ -f "$sc" ] && run_script "$sc" "$1"
	done
}

# The builds of this run: "dir|prefix|suite|once-done|lite" each.
builds=("$BUILD||$SUITE|${PS_TREE_CHECKED:-}|")
sanitized=0
if [ "$SUITE" = full ] && [ "${PS_TEST_SANITIZERS:-1}" = 1 ]; then
	builds+=("build-asan|asan:|quick|1|" "build-tsan|tsan:|quick|1|1")
	sanitized=1
fi
use_build() { # "dir|prefix|suite|once-done|lite"
	IFS='|' read -r B PRE S ONCE_DONE LITE <<<"$1"
}

echo "== psched tests: $BUILD ($SUITE, $JOBS at once)"
if [ "$sanitized" = 1 ]; then
	# The sanitizer trees compile beside the main build's tests.
	start make sanitizer-builds beside "asan-build tsan-build"
fi
use_build "${builds[0]}"
if [ "$S" = full ]; then
	for sc in tests/integration/test_*.sh; do
		name=integration/$(basename "$sc" .sh)
		grep -q '^# prepare$' "$sc" && picked "$name" &&
			start prep "prepare:$name" beside "$sc"
	done
fi
[ "$S" != long ] && run_taps
run_scripts slot
if [ "$sanitized" = 1 ]; then
	wait_beside
	if [[ " ${failed_names[*]} " != *" sanitizer-builds "* ]]; then
		for b in "${builds[@]:1}"; do
			use_build "$b"
			run_taps
			run_scripts slot
		done
	else
		echo "(the sanitizer builds failed: their tests do not run)"
	fi
fi
for b in "${builds[@]}"; do
	use_build "$b"
	run_scripts serial
done
wait_all

echo "== slowest 15 of $(wc -l <"$times") (seconds: wall-clock, CPU; $((SECONDS - suite_start)) s in all)"
sort -rn "$times" | head -n 15 | sed 's/^/  /'
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
