#!/usr/bin/env bash
# docs/c-api.md's first ```c block is examples/hello.c, byte for byte;
# it builds against $BUILD's library with the flags the page gives and,
# run as the worker of a 1-scheduler, 1-server, 1-worker job on
# loopback, pulls back what it pushed and exits 0.
. "$(dirname "$0")/lib.sh"
CC=${CC:-gcc}
PAGE=docs/c-api.md
EXAMPLE=examples/hello.c
[ -f "$PAGE" ] || die "$PAGE is missing"
awk '/^```c$/ { on = 1; next } on && /^```$/ { exit } on' "$PAGE" >"$TMP/block.c"
[ -s "$TMP/block.c" ] || die "no \`\`\`c block in $PAGE"
diff -u "$EXAMPLE" "$TMP/block.c" >"$TMP/block.diff" ||
	{ cat "$TMP/block.diff"; die "the first c block of $PAGE differs from $EXAMPLE"; }

# A sanitizer build's library needs its runtime linked into the program.
LIB=$PWD/$BUILD/lib/libpsched.so
SAN=
if ldd "$LIB" | grep -q libasan; then
	SAN=-fsanitize=address,undefined
elif ldd "$LIB" | grep -q libtsan; then
	SAN=-fsanitize=thread
fi
# shellcheck disable=SC2086 # $SAN is empty or one flag
"$CC" -std=c11 -Wall -Wextra -Werror $SAN -Iinclude "$TMP/block.c" "$LIB" \
	-Wl,-rpath,"$PWD/$BUILD/lib" -o "$TMP/hello" 2>"$TMP/cc.err" ||
	{ cat "$TMP/cc.err"; die "$EXAMPLE does not build"; }

start_scheduler 1 1
start_servers 1
"$TMP/hello" >"$TMP/hello.out" 2>"$TMP/hello.err" &
HELLO=$!
PIDS+=("$HELLO")
wait_pid "$HELLO" 60
rc=$?
cat "$TMP/hello.out"
[ $rc = 0 ] || die "hello exited $rc"
grep -qx "worker 0 of 1: pulled 1, want 1" "$TMP/hello.out" ||
	die "hello printed: $(cat "$TMP/hello.out")"
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 30 || die "node $p exited $?"
done
echo "ok: $PAGE's example built and ran as a worker"
