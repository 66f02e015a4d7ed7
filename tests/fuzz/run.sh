#!/usr/bin/env bash
# Build the libFuzzer harnesses (clang; ASan + UBSan; the library built in
# its own tree, $BUILD_FUZZ) and run each over its corpus in
# tests/fuzz/corpus/<harness>/ for its share of FUZZ_SECONDS.  New inputs
# libFuzzer finds go to $BUILD_FUZZ/fuzz/new/<harness>/ (merge them into
# the corpus with FUZZ_MERGE=1).  A crash, leak or sanitizer report fails
# the run; the reproducer is left in $BUILD_FUZZ/fuzz/ and named in the
# output.
#   FUZZ_SECONDS   total fuzzing time [120]
#   FUZZ_TARGETS   harnesses to run [wire server worker node sched]
#   FUZZ_MERGE=1   merge the new inputs into the corpus (minimised)
set -euo pipefail
cd "$(dirname "$0")/../.."
BF=${BUILD_FUZZ:-build-fuzz}
SECONDS_TOTAL=${FUZZ_SECONDS:-120}
TARGETS=${FUZZ_TARGETS:-wire server worker node sched}
CC_FUZZ=${CC_FUZZ:-clang}
command -v "$CC_FUZZ" >/dev/null || { echo "fuzz: $CC_FUZZ not installed (scripts/install-deps.sh)"; exit 77; }

SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# clang's warnings differ from gcc's; the gcc build is the one that gates.
# No CUDA here: the harnesses never reach a device.
make --no-print-directory -j"${FUZZ_JOBS:-2}" BUILD="$BF" CC="$CC_FUZZ" CUDA=0 OPT="-O1 -g" \
	EXTRA_CFLAGS="-fsanitize=fuzzer-no-link $SAN -Wno-error -Wno-unknown-warning-option" \
	EXTRA_LDFLAGS="$SAN" "$BF/lib/libpsched.a" >&2
LIBS="$(pkg-config --libs libprotobuf-c gsl nettle zlib) -lm -pthread"
# rdma-core, where the library was built with it (as the Makefile decides)
[ -f /usr/include/rdma/rdma_cma.h ] && [ -f /usr/include/infiniband/verbs.h ] && LIBS="$LIBS -lrdmacm -libverbs"
mkdir -p "$BF/fuzz"
n=$(echo $TARGETS | wc -w)
per=$((SECONDS_TOTAL / n)); [ "$per" -ge 1 ] || per=1
fail=0
for t in $TARGETS; do
	bin=$BF/fuzz/fuzz_$t
	src=tests/fuzz/fuzz_$t.c
	if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ] || [ tests/fuzz/fuzz_util.h -nt "$bin" ] ||
		[ "$BF/lib/libpsched.a" -nt "$bin" ]; then
		"$CC_FUZZ" -std=gnu11 -O1 -g -D_GNU_SOURCE -fsanitize=fuzzer $SAN \
			-Iinclude -Icommon -isystem "$BF/gen" $(pkg-config --cflags libprotobuf-c) \
			"$src" "$BF/lib/libpsched.a" $LIBS -o "$bin"
	fi
	corpus=tests/fuzz/corpus/$t
	new=$BF/fuzz/new/$t
	mkdir -p "$corpus" "$new"
	echo "== fuzz_$t: $per s over $(ls "$corpus" | wc -l) corpus inputs"
	log=$BF/fuzz/fuzz_$t.log
	if (cd "$BF/fuzz" && ASAN_OPTIONS=detect_leaks=1 "./fuzz_$t" -max_total_time="$per" \
		-max_len=20000 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
		"new/$t" "$OLDPWD/$corpus") >"$log" 2>&1; then
		grep -E "^stat::number_of_executed_runs|^#[0-9]+.*DONE" "$log" | tail -2
	else
		fail=1
		echo "FAIL fuzz_$t: crash or sanitizer report; reproducer:"
		grep -E "Test unit written to|ERROR: |SUMMARY: " "$log" | head -5
		tail -n 40 "$log"
	fi
	if [ "${FUZZ_MERGE:-0}" = 1 ]; then
		"$bin" -merge=1 "$corpus" "$new" >/dev/null 2>&1 || true
	fi
done
exit $fail
