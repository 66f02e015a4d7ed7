#!/usr/bin/env bash
# Run the psched test suite against $BUILD (default build/).
#   unit + transport binaries (TAP), tests/*/test_*.sh scripts
#   (exit 0 pass, 77 skip, else fail), then — for the full suite — the
#   ASan and TSan builds of the quick suite.
# PS_SUITE=quick skips the sanitizer builds and tests marked "slow".
# Ends with the line "N passed, N failed, N skipped".
set -u
BUILD=${BUILD:-build}
SUITE=${PS_SUITE:-full}
export BUILD
cd "$(dirname "$0")/.."
logs=$BUILD/test-logs
mkdir -p "$logs"
pass=0 fail=0 skip=0
failed_names=()
# Seconds per binary, script and sanitizer build: the slowest are listed
# at the end (where the suite's time goes).
times=$logs/times.txt
: >"$times"
suite_start=$SECONDS

took() { # name start
	printf '%s %s\n' "$((SECONDS - $2))" "$1" >>"$times"
}

run_tap() { # binary [name suffix]
	local bin=$1 name log rc p f s
	name=$(basename "$bin")${2:+-$2}
	log=$logs/$name.log
	t0=$SECONDS
	timeout 900 "$bin" >"$log" 2>&1
	rc=$?
	took "$name" "$t0"
	p=$(grep -c '^ok ' "$log" | tr -d ' ')
	s=$(grep -c '^ok .*# SKIP' "$log" | tr -d ' ')
	f=$(grep -c '^not ok ' "$log" | tr -d ' ')
	p=$((p - s))
	if [ "$rc" != 0 ] && [ "$rc" != 77 ] && [ "$f" = 0 ]; then
		f=1 # crashed or timed out outside a test
	fi
	pass=$((pass + p)) skip=$((skip + s)) fail=$((fail + f))
	if [ "$f" != 0 ]; then
		failed_names+=("$name")
		echo "FAIL $name (exit $rc)"
		grep -A3 '^not ok' "$log" | head -40
		tail -n 15 "$log"
	elif [ "$p" = 0 ] && [ "$s" != 0 ]; then
		echo "skip $name ($s skipped: $(grep -m1 '# SKIP' "$log" | sed 's/.*# SKIP //'))"
	else
		echo "ok   $name ($p passed, $s skipped)"
	fi
}

run_script() { # script
	local sc=$1 name log rc limit
	name=$(basename "$(dirname "$sc")")/$(basename "$sc" .sh)
	# 20 minutes, or what a "# timeout: SECONDS" line of the script says
	limit=$(sed -n 's/^# timeout: \([0-9][0-9]*\)$/\1/p' "$sc" | head -n 1)
	log=$logs/$(echo "$name" | tr / _).log
	if [ "$SUITE" = quick ] && grep -q '^# slow' "$sc"; then
		echo "skip $name (slow; full suite only)"
		skip=$((skip + 1))
		return
	fi
	t0=$SECONDS
	timeout "${limit:-1200}" bash "$sc" >"$log" 2>&1
	rc=$?
	took "$name" "$t0"
	case $rc in
	0) pass=$((pass + 1)); echo "ok   $name" ;;
	77) skip=$((skip + 1)); echo "skip $name: $(tail -n 1 "$log")" ;;
	*) fail=$((fail + 1)); failed_names+=("$name")
	   echo "FAIL $name (exit $rc)"; tail -n 40 "$log" ;;
	esac
}

echo "== psched tests: $BUILD ($SUITE)"
for bin in "$BUILD"/tests/unit/test_*; do
	[ -x "$bin" ] && [ -f "$bin" ] && run_tap "$bin"
done
# The transport conformance suite, once per transport (loop is in-process,
# shm links processes of one host;
# rdma skips without
# a device; test_rdma_vm.sh runs it in a soft-RoCE VM).
for bin in "$BUILD"/tests/transport/test_*; do
	[ -x "$bin" ] && [ -f "$bin" ] || continue
	for t in tcp loop shm rdma; do PS_TEST_TRANSPORT=$t run_tap "$bin" "$t"; done
done
for sc in tests/static/test_*.sh tests/ref/test_*.sh tests/integration/test_*.sh; do
	[ -f "$sc" ] && run_script "$sc"
done

if [ "$SUITE" = full ]; then
	for san in asan tsan; do
		echo "== make $san"
		t0=$SECONDS
		if make --no-print-directory "$san" >"$logs/make-$san.log" 2>&1; then
			pass=$((pass + 1)); echo "ok   make $san"
		else
			fail=$((fail + 1)); failed_names+=("make $san")
			echo "FAIL make $san"; grep -E 'FAIL|not ok|ERROR|Sanitizer|error:' "$logs/make-$san.log" | head -40
			tail -n 30 "$logs/make-$san.log"
		fi
		took "make $san" "$t0"
	done
fi
echo "== slowest 15 of $(wc -l <"$times") (seconds; $((SECONDS - suite_start)) s in all)"
sort -rn "$times" | head -n 15 | sed 's/^/  /'
[ ${#failed_names[@]} -gt 0 ] && echo "failed: ${failed_names[*]}"
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
