#!/usr/bin/env bash
# --autotune end to end on loopback: 2 workers x 1 server push and pull
# (ps-worker check mode: every pulled aggregate verified exactly) while
# the scheduler collects their metrics, samples, proposes configs through
# the two-phase switch and locks one in.  The CSV log must have its
# header, one numbered row per sample with the config that ran it, at
# least one config committed besides the first, and a last row marking
# the chosen config; the progress line must appear on stderr, with the
# conditions the workers measured (--autotune-conditions).
. "$(dirname "$0")/lib.sh"

CSV=$TMP/tune.csv
export DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=2 PS_VERBOSE=1

# Bad autotune settings: a clear error naming the problem, exit 1.
bad() { # expected-message args...
	local want=$1 out rc
	shift
	out=$(timeout 10 "$BIN/ps-scheduler" --root-port 0 --autotune "$@" 2>&1)
	rc=$?
	[ "$rc" = 1 ] || die "ps-scheduler --autotune $*: exit $rc, want 1"
	echo "$out" | grep -q -- "$want" ||
		die "ps-scheduler --autotune $*: '$out' does not say '$want'"
}
bad "partition range 3000" --autotune-partition-min 3000
bad "max samples 0" --autotune-max-samples 0
bad "nothing left to tune" --partition-bytes 1M --credit-bytes 4M
bad "autotune log '/nonexistent/x.csv'" --autotune-log-file /nonexistent/x.csv
bad "use one" --config-cycle 4K:4K

start_scheduler 1 2 --autotune --autotune-warmup-samples 1 \
	--autotune-steps-per-sample 3 --autotune-max-samples 6 \
	--autotune-partition-min 16K --autotune-partition-max 1M \
	--autotune-log-file "$CSV" --autotune-conditions

start_servers 1
# --steps, not --seconds: with --seconds each worker stops on its own
# clock and the other may push one step more than the job will complete.
start_workers 2 --steps 150 --keys 2 --sizes 4K,100K,1M
for p in "${WORKER_PIDS[@]}"; do
	wait_pid "$p" 120 || die "worker $p exited $?"
done
for p in "${SERVER_PIDS[@]}" "$SCHED_PID"; do
	wait_pid "$p" 30 || die "node $p exited $?"
done
for i in 1 2; do
	grep -q verified "$TMP/worker$i.out" || die "worker $i did not verify"
done
if grep -E "another config epoch|refused|already pushed step|ERROR" "$TMP"/*.err; then
	die "a chunk was cut with the wrong config"
fi
[ -s "$CSV" ] || die "no CSV log written"
head -n 1 "$CSV" | grep -qx \
	"sample,step,epoch,partition_bytes,credit_bytes,score_steps_per_s,predicted_mean,predicted_sd,phase" ||
	die "bad CSV header: $(head -n 1 "$CSV")"
# The CSV is checked by an independent reader: rows numbered 1..N
# (chosen rows repeat the sample they follow), steps non-decreasing,
# scores positive, configs valid, phases known, last row chosen and equal
# to the last lock-in; 1 warmup, then at least 3 search samples before
# the first lock-in, 2 configs.
python3 - "$CSV" <<'EOF' || die "CSV check failed: $(cat "$CSV")"
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert rows, "no rows"
prev_sample, prev_step = 0, 0
configs, phases = set(), []
for r in rows:
    s, st = int(r["sample"]), int(r["step"])
    p, c = int(r["partition_bytes"]), int(r["credit_bytes"])
    ph = r["phase"]
    assert ph in ("warmup", "explore", "locked", "retune", "chosen", "kept"), ph
    if ph in ("chosen", "kept"):
        assert s == prev_sample, f"chosen row {s} after sample {prev_sample}"
    else:
        assert s == prev_sample + 1, f"sample {s} after {prev_sample}"
        configs.add((p, c))
    assert st >= prev_step, f"step {st} after {prev_step}"
    assert p & (p - 1) == 0 and 16384 <= p <= 1 << 20, f"partition {p}"
    assert c % p == 0 and 1 <= c // p <= 32, f"credit {c} for {p}"
    assert float(r["score_steps_per_s"]) > 0
    prev_sample, prev_step = s, st
    phases.append(ph)
assert phases.count("warmup") == 1 and phases[0] == "warmup", phases
# the first search: explore rows, or retune rows once a faster link
# reading started it over (tuner_rise_search; on loopback the warmup's
# cold reading can be the slow one); at least 3 samples before a lock-in
first = phases[1:phases.index("chosen")]
assert first and first[0] == "explore", phases
assert sum(ph in ("explore", "retune") for ph in first) >= 3, phases
assert len(configs) >= 2, configs
assert phases[-1] == "chosen", phases[-1]
locks = [r for r in rows[:-1] if r["phase"] == "chosen"]
if locks:
    key = lambda r: (r["partition_bytes"], r["credit_bytes"])
    assert key(locks[-1]) == key(rows[-1]), "final row is not the lock-in"
print(f"{len(rows)} rows, {len(configs)} configs, phases {' '.join(phases)}")
EOF
# Configs were committed through the switch (the first one included),
# and the scheduler printed its progress per sample.
commits=$(grep -c "config epoch [0-9]*: partition" "$TMP/sched.err")
[ "$commits" -ge 2 ] || die "only $commits config switches committed"
grep -q "tuner explore: sample" "$TMP/sched.err" || die "no progress line"
grep -q "autotune: chosen config" "$TMP/sched.err" || die "no chosen line"
# every search reopened says why, once per search (a retune row of a new
# search: its first row, or the first after a lock-in or another search)
reopens=$(grep -c "autotune: search reopened at sample [0-9]*: [a-z]" "$TMP/sched.err")
opened=$(awk -F, 'NR > 1 && $9 == "retune" && prev != "retune" { n++ } { prev = $9 } END { print n + 0 }' "$CSV")
[ "$reopens" -ge "$opened" ] ||
	die "$opened retunes in the CSV, $reopens reasons on stderr: $(grep reopened "$TMP/sched.err")"
# --autotune-conditions: the workers' metrics carried a link bandwidth and
# a compute time, and the scheduler counted both workers (the round trip
# is shown too: 0 where the transport cannot tell)
cond=$(grep -o "link [0-9.e+]* MB/s, rtt [0-9.e+-]* ms, compute [0-9.e+-]* ms, [0-9]* workers" "$TMP/sched.err" | tail -n 1)
echo "$cond" | awk '{ exit !($2 > 0 && $5 >= 0 && $8 > 0 && $10 == 2) }' ||
	die "no measured conditions in the progress lines: '$cond'"
echo "ok conditions reported: $cond"
echo "ok $commits configs committed, sums exact: $(cat "$TMP/worker1.out")"
exit 0
