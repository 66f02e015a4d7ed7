#!/usr/bin/env bash
# delayline-bench.sh [DELAY_MS] [RATE_GBIT] [SECONDS]: how fast one TCP
# flow crosses the delay line (tests/helpers/delayline, bench/ns-lib.sh
# ns_delay) on this machine: two namespaces on a bridge, node 1's link
# through a line of DELAY_MS (default 2) each way, every link shaped to
# RATE_GBIT (default 5) with tbf; a python3 sender writes 4 MiB blocks
# for SECONDS (default 5) to a sink on node 1.  Prints the flow's Gbit/s,
# the line's share of a CPU and its counters.  DELAY_MS "none": the same
# without a line (what the sender and the links alone reach).
# DL_BIN: another delayline binary (a before/after).  Needs root.
set -u
cd "$(dirname "$0")/.."
DELAY=${1:-2} RATE=${2:-5} SECS=${3:-5}
BUILD=${BUILD:-build}
DELAYLINE=${DL_BIN:-$(pwd)/$BUILD/tests/helpers/delayline}
[ "$(id -u)" = 0 ] || { echo "delayline-bench: needs root (network namespaces)" >&2; exit 77; }
[ "$DELAY" = none ] || [ -x "$DELAYLINE" ] ||
	{ echo "delayline-bench: no delay line at $DELAYLINE (make tests)" >&2; exit 1; }
. bench/ns-lib.sh
ns_init pdb delayline-bench
ns_topology 2 10.81.0 2>"$TMP/topology.err" ||
	{ echo "delayline-bench: namespaces: $(cat "$TMP/topology.err")" >&2; exit 1; }
if [ "$DELAY" != none ]; then
	ns_delay 1 "$DELAY" line || exit 1
fi
ns_set_rate "$RATE" || exit 1
ip netns exec "${NODES[1]}" timeout $((SECS + 60)) python3 -c '
import socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.81.0.2", 7103)); s.listen(1); s.settimeout(30)
c, _ = s.accept(); c.settimeout(30)
while c.recv(1 << 20):
    pass' 2>"$TMP/sink.err" &
sink=$!
ns_line_mark
ip netns exec "${NODES[0]}" timeout $((SECS + 60)) python3 -c '
import socket, sys, time
for _ in range(100):
    try:
        c = socket.create_connection(("10.81.0.2", 7103), timeout=30); break
    except OSError:
        time.sleep(0.05)
else:
    sys.exit("no sink")
b = bytes(4 << 20); n = 0; t = time.perf_counter()
while time.perf_counter() - t < float(sys.argv[1]):
    c.sendall(b); n += len(b)
c.close()
print("%.2f Gbit/s" % (n * 8 / (time.perf_counter() - t) / 1e9))' "$SECS" ||
	{ echo "delayline-bench: the flow failed" >&2; exit 1; }
cpu=$(ns_line_cpu)
wait "$sink"
if [ "$DELAY" != none ]; then
	echo "delay line: ${cpu} % of a CPU"
	kill "${DL_PIDS[0]}" 2>/dev/null
	wait "${DL_PIDS[0]}" 2>/dev/null
	tail -n 1 "$TMP/delayline1.err"
fi
