#!/usr/bin/env bash
# ps-bench as a tool: every bad argument exits 2 with a message naming it,
# --json parses and has every entry, --no-baseline leaves the baseline
# columns '-', and a short real run's table shows Goodput beside the best
# baseline of the same rounds, which one it was and their ratio, with a
# footer line per column.  No timing asserts: only that the figures are
# there and agree with each other.
. "$(dirname "$0")/lib.sh"
B=$BIN/ps-bench

# bad ARG VALUE: exit 2, stderr names --ARG
bad() {
	"$B" "--$1" "$2" >"$TMP/out" 2>"$TMP/err"; rc=$?
	[ $rc = 2 ] || die "ps-bench --$1 '$2' exited $rc: $(cat "$TMP/err")"
	grep -q -- "--$1" "$TMP/err" || die "--$1 '$2': message does not name it: $(cat "$TMP/err")"
	[ -s "$TMP/out" ] && die "--$1 '$2' printed to stdout"
	return 0
}
bad size 12Q
bad size 4K,,1M
bad size 6
bad workers -1
bad workers 2abc
bad workers 65
bad servers 0
bad mode bogus
bad seconds 1x
bad seconds 0
bad runs 0
bad keys -1
bad keys 1x
bad dtype f64
bad rate 0
bad rate 1x
bad rate -2
bad rate 10001
bad rate 1e-300
grep -q "from 1 to 64" <("$B" --workers 2abc 2>&1) || die "no range in the --workers message"
"$B" --csv --json >/dev/null 2>&1; [ $? = 2 ] || die "--csv --json accepted"
"$B" stray >/dev/null 2>&1; [ $? = 2 ] || die "a stray argument accepted"
"$B" --stream --workers 2 >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc = 2 ] && grep -q -- "--stream" "$TMP/err" ||
	die "--stream --workers 2: exit $rc, $(cat "$TMP/err")"
"$B" --stream --mode sparse >/dev/null 2>&1; [ $? = 2 ] || die "--stream --mode sparse accepted"
"$B" --rate 1 --stream >"$TMP/out" 2>"$TMP/err"; rc=$?
[ $rc = 2 ] && grep -q -- "--rate" "$TMP/err" || die "--rate --stream: exit $rc, $(cat "$TMP/err")"
echo "ok bad arguments"

# --stream: every key in flight, no barrier; the run completes requests
# (its iterations are whole rounds' worth) and says so in the table
for m in push pushpull; do
	"$B" --stream --mode $m --size 64K --keys 8 --seconds 0.3 --runs 2 --no-baseline --csv \
		>"$TMP/st" 2>"$TMP/st.err" || die "--stream --mode $m failed: $(tail -n 5 "$TMP/st.err")"
	awk -F, '$1 == 65536 { ok = $2 == 8 && $3 > 0 && $4 > 0 } END { exit !ok }' "$TMP/st" ||
		die "--stream --mode $m: no figures: $(cat "$TMP/st")"
done
echo "ok --stream: $(tail -n 1 "$TMP/st")"

# --rate: Goodput (summed over workers) never above the cap; unpaced, the
# same run moves far more here (a 64 KiB push round of 8 keys takes well
# under a millisecond), so the cap is what holds it
for w in 1 2; do
	"$B" --rate 0.2 --workers $w --mode push --size 64K --keys 8 --seconds 0.5 --runs 2 \
		--no-baseline --csv >"$TMP/rt" 2>"$TMP/rt.err" ||
		die "--rate 0.2 --workers $w failed: $(tail -n 5 "$TMP/rt.err")"
	awk -F, '$1 == 65536 { ok = $4 > 0.02 && $4 <= 0.2 } END { exit !ok }' "$TMP/rt" ||
		die "--rate 0.2 --workers $w: Goodput not within (0.02, 0.2]: $(cat "$TMP/rt")"
done
"$B" --workers 1 --mode push --size 64K --keys 8 --seconds 0.5 --runs 2 --no-baseline --csv \
	>"$TMP/rt0" 2>"$TMP/rt.err" || die "unpaced 64K push failed: $(tail -n 5 "$TMP/rt.err")"
awk -F, '$1 == 65536 { ok = $4 > 0.2 } END { exit !ok }' "$TMP/rt0" ||
	echo "note: unpaced 64K push ran at or below 0.2 Gbit/s, so --rate was not shown to hold anything back: $(cat "$TMP/rt0")"
echo "ok --rate 0.2: $(tail -n 1 "$TMP/rt"), unpaced $(tail -n 1 "$TMP/rt0")"

# --json: one object, config + one entry per size with every field
"$B" --size 4K,8K --seconds 0.2 --runs 1 --json >"$TMP/json" 2>"$TMP/json.err" ||
	die "--json run failed: $(tail -n 5 "$TMP/json.err")"
python3 - "$TMP/json" <<'PY' || die "--json output: $(cat "$TMP/json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["config"]["mode"] == "pushpull", d["config"]
r = d["results"]
assert [e["bytes"] for e in r] == [4096, 8192], r
for e in r:
    for k in ("bytes", "keys", "iters", "goodput_gbps", "req_per_s", "p50_us",
              "p99_us", "raw_gbps", "ratio", "tcpmax_gbps", "vs_raw"):
        assert k in e, (k, e)
    assert e["goodput_gbps"] > 0 and e["iters"] > 0, e
    assert e["tcpmax_gbps"] > 0 and e["raw_gbps"] > 0, e
    assert abs(e["ratio"] - e["goodput_gbps"] / e["tcpmax_gbps"]) < 0.05 * e["ratio"] + 0.01, e
PY
echo "ok --json"

# --no-baseline: blanks in the table, empty CSV fields, nulls in JSON
"$B" --size 4K --seconds 0.2 --runs 1 --no-baseline >"$TMP/nb" 2>"$TMP/nb.err" ||
	die "--no-baseline run failed: $(tail -n 5 "$TMP/nb.err")"
row=$(awk '$1 == 4096' "$TMP/nb")
echo "$row" | awk 'NF == 10 && $5 == "-" && $6 == "-" && $7 == "-" && $8 > 0 { ok = 1 } END { exit !ok }' ||
	die "--no-baseline row is not 10 fields with Best, base, vsBest '-': '$row'"
grep -q "^# -  *= not measured" "$TMP/nb" || die "--no-baseline: no footer line for '-': $(cat "$TMP/nb")"
"$B" --size 4K --seconds 0.2 --runs 1 --no-baseline --csv >"$TMP/nbc" 2>/dev/null || die "csv failed"
grep -q '^4096,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,,,,,$' "$TMP/nbc" || die "csv blanks: $(cat "$TMP/nbc")"
"$B" --size 4K --seconds 0.2 --runs 1 --no-baseline --json 2>/dev/null |
	python3 -c 'import json,sys; e=json.load(sys.stdin)["results"][0]; assert e["raw_gbps"] is None and e["ratio"] is None and e["tcpmax_gbps"] is None, e' ||
	die "--no-baseline --json: not null"
echo "ok --no-baseline"

# A short real run, 3 rounds: the header; Best > 0 beside Goodput, base
# one of the three baselines, vsBest = Goodput / Best (as printed, within
# rounding); a footer line per column; nothing on stderr (not a terminal)
hdr='#bytes #keys #iters Goodput[Gb/s] Best[Gb/s] base vsBest Req/s p50[usec] p99[usec]'
"$B" --size 4K,64K --seconds 0.2 --runs 3 >"$TMP/t" 2>"$TMP/t.err" ||
	die "short run failed: $(tail -n 5 "$TMP/t.err")"
[ "$(awk '/^ *#bytes/ { $1 = $1; print }' "$TMP/t")" = "$hdr" ] || die "table header: $(cat "$TMP/t")"
awk '$1 == 4096 || $1 == 65536 { n++; g = $4; b = $5
		if (!(b > 0 && $6 ~ /^(tcp1|tcp2|raw)$/ && $8 > 0)) bad = 1
		# each figure is rounded to 0.0005: so much off, and a bit
		tol = 0.0005 + 0.0005 / b + 0.0005 * $7 / b + 1e-6
		if ((g / b - $7) ^ 2 > tol ^ 2) bad = 1 }
	END { exit !(n == 2 && !bad) }' "$TMP/t" ||
	die "Best, base or vsBest wrong: $(cat "$TMP/t")"
for c in "#bytes" "#keys" "#iters" Goodput Best base vsBest Req/s "p50 p99"; do
	grep -q "^# $c *= " "$TMP/t" || die "no footer line for $c: $(cat "$TMP/t")"
done
grep -q "^# base *= tcp1: one stream; tcp2: 2 streams; raw: " "$TMP/t" ||
	die "base's footer does not name the baselines: $(cat "$TMP/t")"
grep -q "TCPmax\|RawTCP\|vsRaw" "$TMP/t" && die "the table still names TCPmax, RawTCP or vsRaw: $(cat "$TMP/t")"
[ -s "$TMP/t.err" ] && die "stderr not a terminal, yet: $(cat "$TMP/t.err")"
cat "$TMP/t"
echo "ok table"

# The same run's rounds (stderr a terminal: one progress line per round
# with each baseline; 1 server x 2 workers, so tcpN is tcp2): Best is the
# median of the rounds' fastest, base the fastest of the median round
if command -v script >/dev/null; then
	script -qec "$B --workers 2 --size 4K --seconds 0.2 --runs 3 >$TMP/tt" /dev/null \
		</dev/null >"$TMP/tty" || die "run under a terminal failed: $(cat "$TMP/tty")"
	python3 - "$TMP/tty" "$TMP/tt" <<'PY' || die "Best or base differ from the rounds: $(cat "$TMP/tty" "$TMP/tt")"
import re, sys
rounds = []
for line in open(sys.argv[1]):
    m = re.search(r"run \d+/3: psched [\d.]+ Gb/s; tcp1 ([\d.]+), tcp2 ([\d.]+), raw ([\d.]+)", line)
    if m:
        rounds.append(dict(zip(("tcp1", "tcp2", "raw"), map(float, m.groups()))))
assert len(rounds) == 3, rounds
row = [l.split() for l in open(sys.argv[2]) if l.split()[:1] == ["4096"]][0]
best, base = float(row[4]), row[5]
# the fastest per round; a tie goes to tcp1, then raw
order = ("tcp1", "raw", "tcp2")
fast = [max(order, key=lambda k: (r[k], -order.index(k))) for r in rounds]
mid = sorted(range(3), key=lambda i: rounds[i][fast[i]])[1]
assert abs(best - rounds[mid][fast[mid]]) < 0.0015, (best, rounds)
assert base == fast[mid] or rounds[mid][base] == rounds[mid][fast[mid]], (base, fast, rounds)
PY
	echo "ok Best $(awk '$1 == 4096 { print $5, $6 }' "$TMP/tt") from the rounds: $(grep -c 'run ./3' "$TMP/tty")"
else
	echo "note: no script(1): Best not checked against the rounds"
fi

# --mode sparse, short, both row choices: the table's figures are there,
# and the servers' memory before the rows and their growth (no thresholds)
for sc in "" --scatter; do
	"$B" --mode sparse --servers 2 --rows 100000 --batch-rows 512 --seconds 0.2 --runs 2 $sc \
		>"$TMP/sp" 2>"$TMP/sp.err" || die "sparse $sc run failed: $(tail -n 5 "$TMP/sp.err")"
	awk '$1 == "median" { ok = $2 > 0 && $4 > 0 && $5 > 0 } END { exit !ok }' "$TMP/sp" ||
		die "sparse $sc: no median figures: $(cat "$TMP/sp")"
	want=hottest; [ -n "$sc" ] && want=scattered
	grep -q "zipf(1.10) $want" "$TMP/sp" || die "sparse $sc: row choice not named: $(cat "$TMP/sp")"
	awk '/before the first row/ { b = $(NF - 12) + 0 }
		/without RssShmem/ { g = $NF + 0 }
		END { exit !(b > 0 && g > 0) }' "$TMP/sp" ||
		die "sparse $sc: no memory figures: $(cat "$TMP/sp")"
done
cat "$TMP/sp"
echo "ok sparse"

# Cluster flags reach the nodes ps-bench starts (they once applied to the
# launcher alone): a server started with --max-tensor-bytes 1K refuses a
# 4 KiB key, so the run fails and says why; the same run without the flag
# passes.
"$B" --size 4K --seconds 0.2 --runs 1 --no-baseline >"$TMP/cf" 2>"$TMP/cf.err" ||
	die "plain 4K run failed: $(tail -n 5 "$TMP/cf.err")"
"$B" --max-tensor-bytes 1K --size 4K --seconds 0.2 --runs 1 --no-baseline \
	>"$TMP/cf" 2>"$TMP/cf.err" && die "--max-tensor-bytes 1K did not reach the nodes"
grep -q "PS_MAX_TENSOR_BYTES" "$TMP/cf.err" ||
	die "--max-tensor-bytes 1K: no reason given: $(tail -n 5 "$TMP/cf.err")"
echo "ok cluster flags reach the nodes: $(grep -m1 PS_MAX_TENSOR_BYTES "$TMP/cf.err")"
