#!/usr/bin/env bash
# Soak (make soak; not in make test): a 2-server, 2-worker cluster runs
# checking ps-workers (every pulled aggregate verified exactly) for
# SOAK_SECONDS [300] over keys of 4 B .. 4 MiB, with config switches
# (PS_CONFIG_CYCLE) on the way, while the RSS of every
# node is sampled every 2 s.  After a warm-up (the first fifth), RSS must
# stay flat on every node: neither the mean of the last quarter of samples
# over the mean of the second quarter, nor the last sample over the
# warm-up level, may grow by more than SOAK_RSS_SLACK_MB [16] MiB (a leak
# of 8 MiB a minute fails a 5-minute soak).  Samples go to
# $SOAK_LOG [soak-rss.tsv in the log dir] (time, pid, role, RSS kB).
. "$(dirname "$0")/integration/lib.sh"
SECS=${SOAK_SECONDS:-300}
SLACK=${SOAK_RSS_SLACK_MB:-16}
LOG=${SOAK_LOG:-$BUILD/test-logs/soak-rss.tsv}
mkdir -p "$(dirname "$LOG")"
export PS_HEARTBEAT_INTERVAL=1 PS_HEARTBEAT_TIMEOUT=$((20 * MULT)) PS_REQUEST_TIMEOUT=$((120 * MULT))
export PS_PARTITION_BYTES=256K PS_CREDIT_BYTES=1M

start_scheduler 2 2 --config-cycle 256K:1M,64K:512K --config-interval 15
start_servers 2
start_workers 2 --steps 0 --seconds "$SECS" --keys 3 --sizes 4,4K,256K,4M
for i in $(seq 1 $((100 * MULT))); do
	[ "$(server_ports | wc -l)" = 2 ] && break
	sleep 0.1
done
NODES=("$SCHED_PID" "${SERVER_PIDS[@]}" "${WORKER_PIDS[@]}")
ROLES=(scheduler server server worker worker)
: >"$LOG"
t0=$(date +%s)
while kill -0 "${WORKER_PIDS[0]}" 2>/dev/null || kill -0 "${WORKER_PIDS[1]}" 2>/dev/null; do
	now=$(($(date +%s) - t0))
	[ "$now" -gt $((SECS + 120 * MULT)) ] && die "soak: workers still running $now s after a $SECS s run"
	for i in "${!NODES[@]}"; do
		r=$(sed -n 's/^VmRSS:[[:space:]]*\([0-9]*\).*/\1/p' "/proc/${NODES[$i]}/status" 2>/dev/null)
		[ -n "$r" ] && printf '%s\t%s\t%s\t%s\n' "$now" "${NODES[$i]}" "${ROLES[$i]}" "$r" >>"$LOG"
	done
	sleep 2
done
for p in "${WORKER_PIDS[@]}"; do
	wait_pid "$p" 30 || die "soak: worker $p failed: $(tail -3 "$TMP"/worker*.err)"
done
grep -q verified "$TMP/worker1.out" && grep -q verified "$TMP/worker2.out" || die "soak: workers did not verify"
cat "$TMP"/worker*.out
# Per node: mean RSS of the second quarter (after warm-up) vs the last
# quarter, and the last sample vs the warm-up level.
python3 - "$LOG" "$SECS" "$SLACK" <<'PY' || die "soak: RSS not flat (samples in $LOG)"
import collections, sys
log, secs, slack = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]) * 1024
rows = collections.defaultdict(list)
for line in open(log):
    t, pid, role, kb = line.split()
    rows[(pid, role)].append((float(t), float(kb)))
bad = False
for (pid, role), s in sorted(rows.items()):
    q2 = [kb for t, kb in s if secs * 0.25 <= t < secs * 0.5]
    q4 = [kb for t, kb in s if secs * 0.75 <= t <= secs]
    warm = [kb for t, kb in s if secs * 0.2 <= t < secs * 0.25] or q2[:1]
    if not q2 or not q4 or not warm:
        print("soak: %s %s: too few samples" % (role, pid)); bad = True; continue
    m2, m4, last = sum(q2) / len(q2), sum(q4) / len(q4), s[-1][1]
    grow = max(m4 - m2, last - max(warm))
    ok = grow <= slack
    bad |= not ok
    print("%s %s %s: RSS %.1f MiB after warm-up, %.1f MiB mean of 2nd quarter, "
          "%.1f MiB mean of last quarter, %.1f MiB last: growth %.1f MiB (limit %.0f)"
          % ("ok  " if ok else "FAIL", role, pid, max(warm) / 1024, m2 / 1024, m4 / 1024,
             last / 1024, grow / 1024, slack / 1024))
sys.exit(1 if bad else 0)
PY
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do wait_pid "$p" 30 || die "soak: node $p exited $?"; done
echo "ok soak: $SECS s, RSS flat on every node"
