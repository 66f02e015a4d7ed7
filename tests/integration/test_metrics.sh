#!/usr/bin/env bash
# slow
# The scheduler's metrics port (docs/metrics.md) under the real Prometheus:
# a 2x2 job on loopback with --metrics-port; `promtool check metrics`
# accepts the exposition; Prometheus (its own config, port and storage,
# started and stopped here) scrapes it and a query of its HTTP API returns
# both workers' step rate, and every query of the Grafana dashboard
# (deploy/grafana/) runs; malformed, slow and many scrapers at once do
# not disturb the job (every worker verifies every step, the port answers
# after them); the JSON lines file has the same figures.  Then a second
# job with a Python worker: KVStore.stats() and the scheduler's figures
# agree, KVStore.timeline_write() has its chunks; a server is killed, every scrape is answered, and the scheduler
# shows the server dead and the worker's failed request.
set -u
cd "$(dirname "$0")/../.."
. tests/integration/lib.sh

for t in prometheus promtool curl python3; do
	command -v $t >/dev/null ||
		{ echo "skip: $t not installed (scripts/install-deps.sh installs prometheus)"; exit 77; }
done
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
scrape() { # PORT FILE: 0 and the body in FILE on a 200
	curl -s -f --max-time $((10 * MULT)) -o "$2" "http://127.0.0.1:$1/metrics"
}
# prom_query EXPR: the API's JSON answer
prom_query() {
	curl -s --max-time 5 -G "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1"
}
# series_above EXPR MIN: how many series of the answer have a value > MIN
series_above() {
	prom_query "$1" | python3 -c '
import json, sys
d = json.load(sys.stdin)
r = d.get("data", {}).get("result", []) if d.get("status") == "success" else []
print(sum(1 for x in r if float(x["value"][1]) > float(sys.argv[1])))' "$2" 2>/dev/null || echo 0
}

MPORT=$(free_port)
start_scheduler 2 2 --metrics-port "$MPORT" --metrics-file "$TMP/metrics.jsonl" \
	--metrics-interval 1
start_servers 2
start_workers 2 --steps 0 --seconds $((20 * MULT)) --sizes 4K,256K,1M

# Prometheus, scraping the job every second.
PPORT=$(free_port)
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: psched
    static_configs:
      - targets: ['127.0.0.1:$MPORT']
EOF
promtool check config "$TMP/prometheus.yml" >"$TMP/promtool-config.out" 2>&1 ||
	die "promtool rejects the test's config: $(cat "$TMP/promtool-config.out")"
prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
	--web.listen-address="127.0.0.1:$PPORT" >"$TMP/prometheus.out" 2>&1 &
PROM_PID=$!
PIDS+=("$PROM_PID")

# The job is up and both workers reported a step.
for i in $(seq 1 $((100 * MULT))); do
	scrape "$MPORT" "$TMP/expo.txt" &&
		[ "$(grep -c '^psched_worker_steps_per_second{' "$TMP/expo.txt")" = 2 ] &&
		[ "$(grep -c '^psched_node_sent_bytes_total{role="server",.*} [1-9]' "$TMP/expo.txt")" = 2 ] &&
		[ "$(grep -c '^psched_worker_request_latency_seconds_count{.*} [1-9]' "$TMP/expo.txt")" = 2 ] &&
		break
	sleep 0.1
done
[ "$(grep -c '^psched_worker_steps_per_second{' "$TMP/expo.txt")" = 2 ] ||
	die "no step rate of both workers in the exposition: $(head -c 2000 "$TMP/expo.txt")"
promtool check metrics <"$TMP/expo.txt" >"$TMP/promtool.out" 2>&1 ||
	die "promtool check metrics: $(cat "$TMP/promtool.out")"
grep -q '^psched_job_nodes{role="worker",state="live"} 2$' "$TMP/expo.txt" ||
	die "not 2 live workers: $(grep psched_job_nodes "$TMP/expo.txt")"
grep -q '^psched_node_sent_bytes_total{role="server",rank="1",host="127.0.0.1"} [1-9]' "$TMP/expo.txt" ||
	die "no bytes sent by server rank 1: $(grep sent_bytes "$TMP/expo.txt")"
grep -q '^psched_worker_request_latency_seconds_count{role="worker",rank="0",host="127.0.0.1"} [1-9]' "$TMP/expo.txt" ||
	die "no request latency of worker 0: $(grep latency_seconds_count "$TMP/expo.txt")"

# Misbehaving scrapers while the job runs; a stalled one in the background.
python3 tests/integration/metrics_scrape.py "$MPORT" slow 6 &
SLOW_PID=$!
PIDS+=("$SLOW_PID")
python3 tests/integration/metrics_scrape.py "$MPORT" bad || die "malformed scrapers"
python3 tests/integration/metrics_scrape.py "$MPORT" many 40 || die "40 scrapers at once"
wait "$SLOW_PID" || die "the slow scrapers failed"

# Prometheus has the step rate of both workers.
for i in $(seq 1 $((150 * MULT))); do
	[ "$(series_above 'psched_worker_steps_per_second{job="psched"}' 0)" = 2 ] && break
	sleep 0.2
done
[ "$(series_above 'psched_worker_steps_per_second{job="psched"}' 0)" = 2 ] ||
	die "Prometheus has no step rate of 2 workers: $(prom_query psched_worker_steps_per_second) $(tail -5 "$TMP/prometheus.out")"
for i in $(seq 1 $((100 * MULT))); do
	[ "$(series_above 'rate(psched_worker_step[5s])' 0)" = 2 ] && break
	sleep 0.2
done
[ "$(series_above 'rate(psched_worker_step[5s])' 0)" = 2 ] ||
	die "rate(psched_worker_step[5s]) not above 0 for 2 workers: $(prom_query 'rate(psched_worker_step[5s])')"
[ "$(series_above 'up{job="psched"}' 0)" = 1 ] || die "Prometheus's scrape target is not up"
echo "ok: Prometheus: $(prom_query 'psched_worker_steps_per_second' | head -c 300)"
# Every query of the Grafana dashboard is valid PromQL for this Prometheus.
python3 - "$PPORT" deploy/grafana/psched-dashboard.json <<'EOF' || die "dashboard queries"
import json, sys, urllib.parse, urllib.request
port, path = sys.argv[1], sys.argv[2]
d = json.load(open(path))
n = 0
for p in d["panels"]:
    for t in p["targets"]:
        q = t["expr"].replace('job=~"$job"', 'job=~"psched"')
        url = "http://127.0.0.1:%s/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": q}))
        ans = json.load(urllib.request.urlopen(url, timeout=5))
        assert ans["status"] == "success", (q, ans)
        n += 1
print("ok: the dashboard's %d queries run" % n)
EOF
kill "$PROM_PID" 2>/dev/null
wait "$PROM_PID" 2>/dev/null

job_verified "job under scrapers" $((60 * MULT))
grep -qi 'error\|warn' "$TMP/sched.err" &&
	die "the scheduler complained: $(grep -i 'error\|warn' "$TMP/sched.err" | head -5)"
[ "$(grep -c . "$TMP/metrics.jsonl")" -ge 3 ] || die "fewer than 3 JSON lines"
python3 - "$TMP/metrics.jsonl" <<'EOF' || die "JSON lines"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
last = lines[-1]
ws = [n for n in last["nodes"] if n["role"] == "worker"]
assert len(ws) == 2 and all(n["step"] > 0 and n["tx_bytes"] > 0 for n in ws), ws
assert last["nodes"][0]["role"] == "scheduler"
assert all(l["time"] >= p["time"] for p, l in zip(lines, lines[1:]))
EOF
echo "ok: job verified under malformed, slow and 40 concurrent scrapers; JSON lines"

# Second job: a Python worker (KVStore.stats() gives the figures the
# scheduler exports for it), then a server dies while scrapes go on.
# The rest needs Python with numpy and a library it can load (not TSan's).
if ! (. tests/integration/pylib.sh) >"$TMP/pylib.out" 2>&1; then
	echo "ok: (Python part skipped: $(tail -1 "$TMP/pylib.out"))"
	exit 0
fi
. tests/integration/pylib.sh
# An ASan build's runtime is preloaded for python3 only: curl and promtool
# hang or fail with it.
PY_PRELOAD=${LD_PRELOAD:-}
unset LD_PRELOAD
py() { LD_PRELOAD=$PY_PRELOAD "$PYTHON" "$@"; }
# A local store has no node: every figure is 0.
py -c '
import psched
st = psched.KVStore("local").stats()
assert st["tx_bytes"] == 0 and st["requests_ok"] == 0 and st["errors"]["timeout"] == 0, st
assert len(st["latency_buckets"]) == 20 and st["latency_buckets"][-1][0] == float("inf"), st
' || die "KVStore(local).stats()"
MPORT=$(free_port)
rm -f "$TMP"/*.out "$TMP"/*.err
cat >"$TMP/worker.py" <<'PY'
import json, os, sys, time, numpy as np, psched
d = sys.argv[1]
kv = psched.KVStore("dist_sync")
kv.init(1, np.zeros(1 << 16, np.float32))
out = np.zeros(1 << 16, np.float32)
kv.timeline_start()
for _ in range(20):
    kv.pushpull(1, np.ones(1 << 16, np.float32), out=out)
kv.timeline_write(d + "/timeline.json")
tl = json.load(open(d + "/timeline.json"))
pushes = [e for e in tl["traceEvents"] if e.get("ph") == "X" and e["cat"] == "push"]
assert len(pushes) >= 20 and all(e["args"]["key"] == 1 for e in pushes), tl
st = kv.stats()
assert st["requests_ok"] >= 20 and st["tx_bytes"] > 0, st
assert sum(c for _, c in st["latency_buckets"]) == st["requests_ok"], st
assert st["requests_in_flight"] == 0 and st["errors"]["timeout"] == 0, st
json.dump(st, open(d + "/stats.json.tmp", "w"))
os.rename(d + "/stats.json.tmp", d + "/stats.json")
deadline = time.monotonic() + 60
while not os.path.exists(d + "/go") and time.monotonic() < deadline:
    time.sleep(0.02)
try:
    while time.monotonic() < deadline:
        kv.pushpull(1, np.ones(1 << 16, np.float32), out=out)
except psched.PSchedError as e:
    print("failed as expected:", e)
print("after: " + json.dumps(kv.stats()["errors"]))
sys.stdout.flush()
while not os.path.exists(d + "/done") and time.monotonic() < deadline:
    time.sleep(0.05)
os._exit(0)
PY
start_scheduler 2 1 --metrics-port "$MPORT" --heartbeat-timeout 2
start_servers 2
DMLC_ROLE=worker LD_PRELOAD=$PY_PRELOAD "$PYTHON" "$TMP/worker.py" "$TMP" >"$TMP/pyworker.out" 2>"$TMP/pyworker.err" &
PYW=$!
PIDS+=("$PYW")
for _ in $(seq 1 $((600 * MULT))); do [ -e "$TMP/stats.json" ] && break; sleep 0.05; done
[ -e "$TMP/stats.json" ] || die "the Python worker did not report: $(cat "$TMP/pyworker.err")"
ok=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["requests_ok"])' "$TMP/stats.json")
lat='^psched_worker_request_latency_seconds_count{role="worker",rank="0",host="127.0.0.1"} '
same=0
for i in $(seq 1 $((100 * MULT))); do
	scrape "$MPORT" "$TMP/expo.txt" &&
		grep -q "^psched_worker_requests_ok_total{role=\"worker\",rank=\"0\",host=\"127.0.0.1\"} $ok\$" "$TMP/expo.txt" &&
		grep -q "$lat$ok\$" "$TMP/expo.txt" && { same=1; break; }
	sleep 0.1
done
[ $same = 1 ] || die "KVStore.stats() says $ok requests, the scheduler: $(grep 'requests_ok\|latency_seconds_count' "$TMP/expo.txt")"
echo "ok: KVStore.stats() and the scheduler agree: $ok requests"
touch "$TMP/go"
sleep 0.5
kill -9 "${SERVER_PIDS[1]}"
dead=0
for i in $(seq 1 $((100 * MULT))); do
	scrape "$MPORT" "$TMP/expo.txt" || die "scrape $i after the server's death not answered"
	grep -q '^psched_job_nodes{role="server",state="dead"} 1$' "$TMP/expo.txt" &&
		grep -q '^psched_worker_request_errors_total{.*kind="node_dead"} [1-9]' "$TMP/expo.txt" &&
		{ dead=1; break; }
	sleep 0.1
done
[ $dead = 1 ] || die "the scheduler does not show the server dead and the worker's error: $(grep 'psched_job_nodes\|errors_total' "$TMP/expo.txt")"
grep -q '^psched_node_up{role="server",rank="[01]",host="127.0.0.1"} 0$' "$TMP/expo.txt" ||
	die "no server with psched_node_up 0"
grep -q '^psched_job_nodes_declared_dead_total 1$' "$TMP/expo.txt" || die "declared_dead_total is not 1"
promtool check metrics <"$TMP/expo.txt" >"$TMP/promtool.out" 2>&1 ||
	die "promtool after the failure: $(cat "$TMP/promtool.out")"
grep -q '"node_dead": [1-9]' "$TMP/pyworker.out" || die "KVStore.stats() after the failure: $(cat "$TMP/pyworker.out")"
touch "$TMP/done"
wait_pid "$PYW" 30 || die "the Python worker exited $?"
echo "ok: scrapes answered through a server's death; it shows dead"
