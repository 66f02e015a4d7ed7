#!/usr/bin/env bash
# GPU test: two real workers pushpull the same values from host memory and
# from CUDA device memory (small staging slots and partitions, so chunks
# span several slots and the copy-ahead path runs); the device pull must
# equal the host pull at every step, then a plain device pull too.  Skips
# (77) with the reason when there is no CUDA device.
. "$(dirname "$0")/lib.sh"
if ! "$BUILD/tests/helpers/gpu_probe" >"$TMP/probe.out" 2>&1; then
	echo "skip: $(tail -n 1 "$TMP/probe.out")"
	exit 77
fi
export PS_GPU_STAGE_BYTES=64K PS_GPU_STAGE_BUFS=16 PS_PARTITION_BYTES=256K
start_scheduler 2 2
start_servers 2
for i in 1 2; do
	"$BUILD/tests/helpers/gpu_worker" compare >"$TMP/g$i.out" 2>"$TMP/g$i.err" &
	G[$i]=$!; PIDS+=(${G[$i]})
done
for i in 1 2; do wait_pid "${G[$i]}" 120 || die "gpu_worker $i exited $?: $(cat "$TMP/g$i.err")"; done
grep -q "device pull == host pull" "$TMP/g1.out" || die "no comparison seen"
cat "$TMP/g1.out"
