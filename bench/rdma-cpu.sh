#!/usr/bin/env bash
# Where the CPU goes in an RDMA push, against ib_write_bw, inside ONE
# soft-RoCE VM (booted once for every run).  Soft-RoCE does in the CPU what a NIC does in
# hardware, so on the VM's few vCPUs a push is bound by the CPU time all
# its threads spend per message.  Each round runs ib_write_bw (the whole
# VM's CPU per write), then ps-bench push (the whole VM's CPU per message,
# and each thread's of every node), both read from /proc over the middle
# of the run (threads carry names: ps-sender, ps-van, ps-rdma-poll...).
# Prints per round and the medians:
#   ib_ms   CPU ms of the whole VM (all but idle) per ib_write_bw write
#           of SIZE bytes (its target does nothing)
#   total   CPU ms of the whole VM per pushed message; the rows above it
#           split the ps-* threads' part by process/thread
#   bound   NCPU * ib_ms / total: the most push / ib_write_bw can reach on
#           NCPU vCPUs at that CPU cost, if every vCPU were kept busy
#   ratio   push goodput / ib_write_bw in that round
# and a second table: per thread, ms per message it was runnable but not
# running (schedstat's run-queue wait): CPU the other threads took from it.
#
#   [SIZE=BYTES] bash bench/rdma-cpu.sh [ROUNDS [KEYS [TREE]]]
#     SIZE [65536], ROUNDS [3], KEYS ps-bench --keys [40], TREE [build]
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE=${SIZE:-65536}
ROUNDS=${1:-3}
KEYS=${2:-40}
TREE=${3:-build}
RUNNER=${RDMA_VM_RUNNER:-$(cd .. && pwd)/shared/rdma-vm/run-in-rxe-vm}
[ -x "$RUNNER" ] || { echo "rdma-cpu: no VM runner at $RUNNER (set RDMA_VM_RUNNER)" >&2; exit 2; }
case $ROUNDS in '' | *[!0-9]* | 0) echo "rdma-cpu: ROUNDS must be 1..99, not '$ROUNDS'" >&2; exit 2 ;; esac
case $SIZE in '' | *[!0-9]* | 0) echo "rdma-cpu: SIZE must be a byte count, not '$SIZE'" >&2; exit 2 ;; esac
case $KEYS in '' | *[!0-9]* | 0) echo "rdma-cpu: KEYS must be 1..65536, not '$KEYS'" >&2; exit 2 ;; esac
[ -x "$TREE/bin/ps-bench" ] || { echo "rdma-cpu: no $TREE/bin/ps-bench" >&2; exit 2; }
TREE=$(cd "$TREE" && pwd)
ITERS=$((268435456 / SIZE))
[ $ITERS -gt 5000 ] && ITERS=5000
[ $ITERS -lt 20 ] && ITERS=20

inner=$(
	cat <<'EOF'
set -u
dev=$RDMA_VM_DEV gid=${RDMA_VM_GID_INDEX:-1} addr=$RDMA_VM_ADDR
export PS_HEARTBEAT_TIMEOUT=60
hz=$(getconf CLK_TCK)
ncpu=$(nproc)
up() { read -r u _ </proc/uptime; echo "$u"; }
# busy: CPU ticks of the whole VM but idle and iowait (rxe also works in
# softirq and kernel threads, for ib_write_bw as for psched)
busy() { awk '$1 == "cpu" {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
# msgs GBPS T0 T1: SIZE-byte messages moved at GBPS Gbit/s from T0 to T1
msgs() { awk -v g="$1" -v s="$SIZE" -v a="$2" -v b="$3" 'BEGIN {print g * 1e9 / 8 / s * (b - a)}'; }
# per_msg COUNT MSGS [PER_S]: ms per message of COUNT units of time,
# PER_S of them a second (CPU ticks by default)
per_msg() { awk -v d="$1" -v hz="${3:-$hz}" -v m="$2" 'BEGIN {if (m > 0) printf "%.3f", d / hz / m * 1000; else print "nan"}'; }
# ticks: utime+stime of every thread of the ps-* processes and its
# run-queue wait in ns (schedstat; 0 without it), "proc/thread:tid ticks ns"
ticks() {
	local t l n r c w
	for t in /proc/[0-9]*/task/[0-9]*; do
		read -r c <"${t%/task/*}/comm" 2>/dev/null || continue
		case $c in ps-*) ;; *) continue ;; esac
		read -r l <"$t/stat" 2>/dev/null || continue
		read -r _ w _ <"$t/schedstat" 2>/dev/null || w=0
		n=${l#*(}; n=${n%%)*}; r=${l##*) }
		set -- $r
		echo "$c/${n// /_}:${t##*/} $((${12} + ${13})) $w"
	done
}
for r in $(seq "$ROUNDS"); do
	port=$((18515 + RANDOM % 1000))
	ib_write_bw -d "$dev" -x "$gid" -F -p $port -s "$SIZE" -n "$ITERS" --report_gbits >/dev/null 2>&1 &
	srv=$!
	sleep 1
	ib_write_bw -d "$dev" -x "$gid" -F -p $port -s "$SIZE" -n "$ITERS" --report_gbits "$addr" >/tmp/ib.out 2>&1 &
	cli=$!
	sleep 1
	a=$(busy); t0=$(up)
	sleep 2
	b=$(busy); t1=$(up)
	wait $cli; wait $srv
	ib=$(awk -v s="$SIZE" '$1 == s {print $4}' /tmp/ib.out)
	ib_ms=$(per_msg $((b - a)) "$(msgs "${ib:-0}" "$t0" "$t1")")
	"$TREE/bin/ps-bench" --transport rdma --root-uri "$addr" --mode push --size "$SIZE" \
		--seconds 20 --runs 1 --dtype raw --no-baseline --csv --keys "$KEYS" >/tmp/psb.out 2>/tmp/psb.err &
	psb=$!
	sleep 6
	ticks >/tmp/ta; a=$(busy); t0=$(up)
	sleep 5
	b=$(busy); t1=$(up); ticks >/tmp/tb
	wait $psb || { echo "ps-bench failed:"; tail -5 /tmp/psb.err; exit 1; }
	g=$(awk -F, -v s="$SIZE" '$1 == s {print $4}' /tmp/psb.out)
	m=$(msgs "${g:-0}" "$t0" "$t1")
	sort /tmp/ta >/tmp/ta2; sort /tmp/tb >/tmp/tb2
	join /tmp/ta2 /tmp/tb2 | while read -r th d0 w0 d1 w1; do
		[ "$d1" -gt "$d0" ] && echo "thread $r $th $(per_msg $((d1 - d0)) "$m") $(per_msg $((w1 - w0)) "$m" 1e9)"
	done
	echo "round $r ib $ib ib_ms $ib_ms push $g msgs $m total $(per_msg $((b - a)) "$m")"
done
echo "ncpu $ncpu"
EOF
)
log=$(mktemp /tmp/rdma-cpu.XXXXXX)
trap 'rm -f "$log"' EXIT
SIZE=$SIZE ITERS=$ITERS ROUNDS=$ROUNDS KEYS=$KEYS TREE=$TREE RDMA_VM_RW_DIRS="" \
	"$RUNNER" bash -c "$inner" >"$log"
# One row per process/thread (the thread id dropped): field 4 CPU ms, 5
# run-queue wait ms, per message.
threads() {
	printf '%-30s' "$1"
	for r in $(seq "$ROUNDS"); do printf ' %8s' "round $r"; done
	echo
	awk -v nr="$ROUNDS" -v f="$2" '
		$1 == "thread" { n = $3; sub(/:[0-9]+$/, "", n); ms[$2, n] += $f; names[n] = 1 }
		END {
			for (n in names) {
				printf "%-30s", n
				for (r = 1; r <= nr; r++) printf " %8.3f", ms[r, n]
				printf "\n"
			}
		}' "$log" | sort
}
threads "CPU ms per message" 4
awk -v nr="$ROUNDS" '
	function med(v,   a, i, j, t, n) {
		n = 0
		for (i = 1; i <= nr; i++) a[++n] = v[i]
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return a[int((n + 1) / 2)]
	}
	function row(name, v, fmt,   r) {
		printf "%-30s", name
		for (r = 1; r <= nr; r++) printf " " fmt, v[r]
		printf "   median " fmt "\n", med(v)
	}
	$1 == "ncpu" { ncpu = $2 }
	$1 == "round" { ib[$2] = $4; ibms[$2] = $6; push[$2] = $8; tot[$2] = $12 }
	END {
		for (r = 1; r <= nr; r++) {
			bound[r] = tot[r] > 0 ? ncpu * ibms[r] / tot[r] : 0
			ratio[r] = ib[r] > 0 ? push[r] / ib[r] : 0
		}
		row("all vCPUs, per message", tot, "%8.3f")
		row("ib_write_bw, all vCPUs/write", ibms, "%8.3f")
		row("bound = " ncpu " * ib_ms / total", bound, "%8.2f")
		row("push / ib_write_bw", ratio, "%8.2f")
		row("ib_write_bw Gbit/s", ib, "%8.3f")
		row("push Gbit/s", push, "%8.3f")
	}' "$log"
echo
threads "runnable, not running, ms/msg" 5
