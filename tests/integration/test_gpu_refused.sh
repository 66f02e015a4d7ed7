#!/usr/bin/env bash
# Device (CUDA) buffers where they cannot be used: two real workers ask
# for device pushes and pulls and get a clear error (here, with a CUDA
# build and no GPU: "no CUDA device: ..."; with a GPU, device 9999 and a
# host pointer are refused instead); the same workers' host pushpulls then
# sum exactly.  The library logs the missing GPU once per process.  A
# server asked for PS_SERVER_GPU_SUM=1 without a GPU refuses to start,
# naming the knob.
. "$(dirname "$0")/lib.sh"
export PS_VERBOSE=1
start_scheduler 2 2
start_servers 2
for i in 1 2; do
	"$BUILD/tests/helpers/gpu_worker" refused >"$TMP/g$i.out" 2>"$TMP/g$i.err" &
	G[$i]=$!; PIDS+=(${G[$i]})
done
for i in 1 2; do wait_pid "${G[$i]}" 90 || die "gpu_worker $i exited $?: $(cat "$TMP/g$i.err")"; done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "node $p exited $?"; done
grep -q "refused as expected" "$TMP/g1.out" || die "no refusal seen"
grep -q "host pushpull exact" "$TMP/g1.out" || die "host path not checked"
cat "$TMP/g1.out"
if grep -q "no CUDA device" "$TMP/g1.out"; then
	n=$(grep -c "cuda: no CUDA device" "$TMP/g1.err")
	[ "$n" = 1 ] || die "want one log line about the missing GPU, got $n"
	# The server-side knob, without a GPU: refused at start.
	start_scheduler 1 1
	PS_SERVER_GPU_SUM=1 "$BIN/ps-server" >"$TMP/gs.out" 2>"$TMP/gs.err" &
	GS=$!; PIDS+=($GS)
	wait_pid "$GS" 60; rc=$?
	[ "$rc" != 0 ] && [ "$rc" != 124 ] || die "ps-server with PS_SERVER_GPU_SUM=1 and no GPU exited $rc"
	grep -q "PS_SERVER_GPU_SUM=1 but" "$TMP/gs.err" || die "server did not name the knob: $(cat "$TMP/gs.err")"
	grep -m1 "PS_SERVER_GPU_SUM=1 but" "$TMP/gs.err"
fi
echo "ok: device buffers refused clearly, host tensors unaffected"
