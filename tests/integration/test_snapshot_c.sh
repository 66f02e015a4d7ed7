#!/usr/bin/env bash
# Snapshots under ps-worker's exact-sum workload (docs/snapshots.md), a
# C-only job so that the sanitizer builds run it too (TSan: the writer
# thread beside the van thread): a 2x2 job of 9 steps with a snapshot
# every 3 must still verify every sum, leave steps 6 and 9 (step 3
# removed), and ps-server must read them back.
. "$(dirname "$0")/lib.sh"

SNAP=$TMP/snap
export PS_SNAPSHOT_DIR=$SNAP PS_SNAPSHOT_STEPS=3
start_scheduler 2 2
start_servers 2
start_workers 2 --steps 9 --keys 3 --sizes 4,1001,8K,1M
for p in "${WORKER_PIDS[@]}"; do
	wait_pid "$p" $((300 * MULT)) || die "worker $p exited $?"
done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" $((60 * MULT)) || die "node $p exited $? after the workers finished"
done
for i in 1 2; do
	grep -q "verified" "$TMP/worker$i.out" || die "worker $i did not verify"
done
have=$(cd "$SNAP" && echo step-*)
[ "$have" = "step-6 step-9" ] || die "snapshot steps: $have (want step-6 step-9)"
for st in step-6 step-9; do
	n=$(ls "$SNAP/$st" | grep -c '^server-[01]-of-2\.psnap$')
	[ "$n" = 2 ] || die "$st holds $(ls "$SNAP/$st")"
done
unset PS_SNAPSHOT_DIR PS_SNAPSHOT_STEPS
PS_RESTORE=$SNAP PS_VERBOSE=1 DMLC_PS_ROOT_PORT=1 PS_CONNECT_TIMEOUT=1 \
	timeout $((30 * MULT)) "$BIN/ps-server" >"$TMP/restore.log" 2>&1
grep -q "restoring the snapshot of step 9 (2 servers)" "$TMP/restore.log" ||
	{ cat "$TMP/restore.log"; die "ps-server did not read step 9 back"; }
echo "ok: 2x2 exact sums with a snapshot every 3 steps; steps 6 and 9 kept and read back"
exit 0
