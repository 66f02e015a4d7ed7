#!/usr/bin/env bash
# serial
# The delay line (tests/helpers/delayline, bench/ns-lib.sh ns_delay) that
# gives the namespace benches a round-trip time without netem.  Two
# nodes on a bridge, node 1's link through the line:
#  - TCP round trips (1 byte each way) take 2 x the delay more than
#    without the line, and not much more (the line is on time); after
#    ns_delay_set to 1 ms, 2 ms more; a bad delay file is refused and
#    the delay kept;
#  - 48 MiB over a 1 Gbit/s tbf link through the line arrive intact
#    (sha256 on both ends: GSO frames pass whole through the virtio-net
#    headers) at a rate near the link's, and the line dropped nothing;
#  - bad arguments and a missing device are refused with a message;
#  - the tap goes away with the line.
# Needs root, ip, tc; exits 77 without them.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
DELAYLINE=$(pwd)/$BUILD/tests/helpers/delayline
[ -x "$DELAYLINE" ] || { echo "FAIL: $DELAYLINE missing (make tests)"; exit 1; }
[ "$(id -u)" = 0 ] || { echo "needs root (network namespaces)"; exit 77; }
for t in ip tc python3; do
	command -v "$t" >/dev/null || { echo "needs $t"; exit 77; }
done

. bench/ns-lib.sh
ns_init pdl delayline

# bad input first (no namespaces needed)
out=$("$DELAYLINE" --dev lo --tap x --delay-us -5 2>&1); rc=$?
[ $rc = 2 ] && [[ $out == *"--delay-us '-5'"* ]] || ns_die "negative delay: rc $rc, '$out'"
out=$("$DELAYLINE" --dev lo 2>&1); rc=$?
[ $rc = 2 ] && [[ $out == *usage* ]] || ns_die "missing --tap: rc $rc, '$out'"

if ! ns_topology 2 10.79.0 2>"$TMP/topology.err"; then
	echo "cannot build namespaces: $(cat "$TMP/topology.err")"
	exit 77
fi
out=$(ip netns exec "$SW" "$DELAYLINE" --dev nosuchdev --tap dz --delay-us 10 2>&1); rc=$?
[ $rc = 1 ] && [[ $out == *nosuchdev* ]] || ns_die "missing device: rc $rc, '$out'"
ip -n "$SW" link show dz >/dev/null 2>&1 && ns_die "tap dz left behind after a failed start"

# rtt PORT -> median of 21 one-byte round trips from node 0 to node 1, ms
rtt() {
	ip netns exec "${NODES[1]}" python3 -c '
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.79.0.2", int(sys.argv[1]))); s.listen(1); s.settimeout(20)
c, _ = s.accept(); c.settimeout(20)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
while True:
    d = c.recv(16)
    if not d:
        break
    c.sendall(d)
' "$1" 2>"$TMP/echo.err" &
	local srv=$!
	ip netns exec "${NODES[0]}" python3 -c '
import socket, sys, time
for _ in range(100):
    try:
        c = socket.create_connection(("10.79.0.2", int(sys.argv[1])), timeout=20); break
    except OSError:
        time.sleep(0.05)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
t = []
for _ in range(21):
    a = time.perf_counter(); c.sendall(b"x")
    if c.recv(16) != b"x":
        sys.exit("echo lost")
    t.append((time.perf_counter() - a) * 1e3)
t.sort(); print("%.3f" % t[10])
' "$1" 2>"$TMP/ping.err"
	wait "$srv" 2>/dev/null
}

base=$(rtt 7101) || ns_die "round trips without the line"
DELAY_MS=5
ns_delay 1 "$DELAY_MS" || ns_die "ns_delay"
lined=$(rtt 7102) || ns_die "round trips through the line"
echo "round trip: ${base} ms direct, ${lined} ms through a ${DELAY_MS} ms line"
awk -v b="$base" -v l="$lined" -v d="$DELAY_MS" 'BEGIN {
	add = l - b; want = 2 * d
	exit !(add >= want - 0.2 && add <= want + 3) }' ||
	ns_die "the line added $(awk -v b="$base" -v l="$lined" 'BEGIN { print l - b }') ms, want ~$((2 * DELAY_MS))"

# a path that changes during a run: 5 -> 1 ms, and a bad value refused
ns_delay_set 1 1 || ns_die "ns_delay_set 1 ms"
cut=$(rtt 7104) || ns_die "round trips after the change"
echo "round trip: ${cut} ms after the line went to 1 ms"
awk -v b="$base" -v l="$cut" 'BEGIN { add = l - b; exit !(add >= 1.8 && add <= 4) }' ||
	ns_die "after the change to 1 ms the line added $(awk -v b="$base" -v l="$cut" 'BEGIN { print l - b }') ms, want ~2"
echo "12ms" >"$TMP/delayline1.us"
kill -HUP "${DL_PIDS[0]}"
for ((k = 0; k < 40; k++)); do
	grep -q "delay-file '12ms'" "$TMP/delayline1.err" && break
	sleep 0.05
done
grep -q "delay-file '12ms': want 0\.\.10000000" "$TMP/delayline1.err" ||
	ns_die "a bad delay file was not refused: $(tail -n 2 "$TMP/delayline1.err")"
kept=$(rtt 7105) || ns_die "round trips after a bad delay file"
awk -v b="$base" -v l="$kept" 'BEGIN { add = l - b; exit !(add >= 1.8 && add <= 4) }' ||
	ns_die "after a bad delay file the line added $(awk -v b="$base" -v l="$kept" 'BEGIN { print l - b }') ms, want ~2 (kept)"

# 48 MiB at 1 Gbit/s through the line, checked end to end
ns_set_rate 1
ip netns exec "${NODES[1]}" python3 -c '
import hashlib, socket
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.79.0.2", 7103)); s.listen(1); s.settimeout(30)
c, _ = s.accept(); c.settimeout(30)
h = hashlib.sha256(); n = 0
while True:
    d = c.recv(1 << 20)
    if not d:
        break
    h.update(d); n += len(d)
print(n, h.hexdigest())
' >"$TMP/sink.out" 2>"$TMP/sink.err" &
sink=$!
sent=$(ip netns exec "${NODES[0]}" python3 -c '
import hashlib, os, socket, time
for _ in range(100):
    try:
        c = socket.create_connection(("10.79.0.2", 7103), timeout=30); break
    except OSError:
        time.sleep(0.05)
h = hashlib.sha256(); n = 0; t = time.perf_counter()
for i in range(48):
    b = os.urandom(1 << 20); h.update(b); c.sendall(b); n += len(b)
c.shutdown(socket.SHUT_WR); c.recv(1)
dt = time.perf_counter() - t
print(n, h.hexdigest(), "%.3f" % (n * 8 / dt / 1e9))
' 2>"$TMP/source.err") || ns_die "sending through the line"
wait "$sink" || ns_die "the sink failed"
got=$(cat "$TMP/sink.out")
set -- $sent
[ "$got" = "$1 $2" ] || ns_die "sent '$1 $2', received '$got'"
echo "48 MiB intact through the line at $3 Gbit/s (link 1 Gbit/s)"
awk -v g="$3" 'BEGIN { exit !(g >= 0.5 && g <= 1.1) }' || ns_die "rate $3 Gbit/s over a 1 Gbit/s link"

dl=${DL_PIDS[0]}
kill "$dl" && wait "$dl"
rc=$?
[ $rc = 0 ] || ns_die "the line exited $rc on SIGTERM"
DL_PIDS=()
cat "$TMP/delayline1.err"
# A frame or two the node sends before the tap is up (IPv6 neighbour
# discovery as eth0 comes up) is refused by the down tap and counted.
awk '{ for (i = 1; i <= NF; i++) if ($(i) == "dropped") d += $(i - 1) } END { exit !(d <= 2) }' \
	"$TMP/delayline1.err" || ns_die "the line dropped frames"
grep -q 'bridge->node [1-9][0-9]* frames' "$TMP/delayline1.err" || ns_die "no frames counted toward the node"
ip -n "$SW" link show d1 >/dev/null 2>&1 && ns_die "tap d1 still there after the line exited"
exit 0
