#!/usr/bin/env bash
# The GPU check: run from a bundle that `make gpu-bundle` made (it lies
# at the bundle's top as gpu-check.sh), on a machine with a GPU and
# Python with torch; nothing is installed.
#   bash gpu-check.sh OUTDIR [--quick]
# Runs every GPU test of the suite, a psched.torch training on the GPU
# against a one-process reference, and the GPU figures (copy bandwidth,
# the sum kernel against the CPU, device against host tensors at 1, 16
# and 64 MiB); writes OUTDIR/report.txt, OUTDIR/report.json and each
# step's log.  Exit 0 when nothing failed.  Where no GPU answers, every
# GPU step is a skip saying why, and --require-gpu (the default when
# nvidia-smi lists a GPU) makes a skip a failure.  --quick: fewer rounds.
set -u
OUTDIR=${1:?usage: gpu-check.sh OUTDIR [--quick] [--require-gpu|--allow-skip]}
shift
QUICK=0 REQUIRE=auto
for a in "$@"; do
	case $a in
	--quick) QUICK=1 ;;
	--require-gpu) REQUIRE=1 ;;
	--allow-skip) REQUIRE=0 ;;
	*) echo "gpu-check: unknown option $a" >&2; exit 2 ;;
	esac
done
mkdir -p "$OUTDIR" && OUTDIR=$(cd "$OUTDIR" && pwd)
cd "$(dirname "$0")"
ROOT=$PWD
if [ "$REQUIRE" = auto ]; then
	REQUIRE=0
	nvidia-smi -L 2>/dev/null | grep -q GPU && REQUIRE=1
fi

export BUILD=build
export LD_LIBRARY_PATH=$ROOT/build/lib:$ROOT/deps/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export PSCHED_LIBRARY=$ROOT/build/lib/libpsched.so
export PSCHED_BIN_DIR=$ROOT/build/bin
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1 PSCHED_NO_INSTALL=1
PYTHON=${PYTHON:-$(command -v python3)}
export PYTHON
RESULTS=$OUTDIR/results.tsv
: >"$RESULTS"
FIGS=$OUTDIR/figures.txt
: >"$FIGS"

# step NAME LIMIT CMD...: run CMD (at most LIMIT seconds) into
# OUTDIR/NAME.log; record pass (0), skip (77) or fail, and the seconds.
step() {
	local name=$1 limit=$2 t0 rc st why
	shift 2
	t0=$(date +%s%N)
	timeout --kill-after=10 "$limit" "$@" >"$OUTDIR/$name.log" 2>&1
	rc=$?
	case $rc in
	0) st=pass ;;
	77) st=skip ;;
	124 | 137) st=fail; echo "gpu-check: $name ran past ${limit} s" >>"$OUTDIR/$name.log" ;;
	*) st=fail ;;
	esac
	[ "$st" = skip ] && [ "$REQUIRE" = 1 ] && st=fail
	why=$(grep -v '^\[' "$OUTDIR/$name.log" | grep -v '^$' | tail -n 1 | tr '\t' ' ' | cut -c1-200)
	printf '%s\t%s\t%d\t%d\t%s\n' "$name" "$st" "$rc" \
		$((($(date +%s%N) - t0) / 1000000)) "$why" >>"$RESULTS"
	echo "gpu-check: $name: $st (exit $rc)"
}

# Device against host tensors, each size in a cluster of its own: one
# scheduler (its port read back), one server, gpu_bench as the worker.
net_figures() {
	local op mib steps rounds tmp sched srv rc
	rounds=$([ "$QUICK" = 1 ] && echo 3 || echo 5)
	tmp=$(mktemp -d)
	export DMLC_PS_ROOT_URI=127.0.0.1 DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1
	export PS_JOB_TOKEN=${PS_JOB_TOKEN:-$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')}
	for op in push pull pushpull; do
		for mib in 1 16 64; do
			steps=$((mib >= 64 ? 4 : mib >= 16 ? 10 : 40))
			build/bin/ps-scheduler --root-port 0 >"$tmp/s.out" 2>"$tmp/s.err" &
			sched=$!
			for _ in $(seq 1 200); do grep -q PS_ROOT_PORT= "$tmp/s.out" && break; sleep 0.05; done
			export DMLC_PS_ROOT_PORT=$(sed -n 's/^PS_ROOT_PORT=//p' "$tmp/s.out")
			build/bin/ps-server >"$tmp/v.out" 2>"$tmp/v.err" &
			srv=$!
			timeout 120 build/tests/helpers/gpu_bench net "$op" "$mib" "$steps" "$rounds"
			rc=$?
			wait "$srv" "$sched" 2>/dev/null
			[ "$rc" = 0 ] || { tail -n 5 "$tmp"/*.err; rm -rf "$tmp"; return "$rc"; }
		done
	done
	rm -rf "$tmp"
}

# Every line "NAME k=v ..." of a figures step, into figures.txt.
collect() { grep -E '^(copy|sum|net) ' "$OUTDIR/$1.log" >>"$FIGS" 2>/dev/null || :; }

{
	echo "commit $(cat COMMIT) version $(cat VERSION)"
	uname -a
	nvidia-smi -L 2>&1 | head -n 4
	"$PYTHON" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1
	echo "require_gpu=$REQUIRE"
} >"$OUTDIR/env.txt"

# The probe says whether a device answers (a skip, saying why, if not).
step probe 60 sh -c 'build/tests/helpers/gpu_probe || exit 77'
for t in test_gpu test_gpu_device test_kv_worker_gpu; do
	step "$t" 180 "build/tests/unit/$t"
done
for t in test_gpu_refused test_gpu_pull test_python_gpu; do
	step "$t" 240 bash "tests/integration/$t.sh"
done
# The same training on the CPU: the script's own check, and a baseline.
step torch_cpu 300 "$PYTHON" tests/python/gpu_torch.py --device cpu --servers 2
step torch_s1 300 "$PYTHON" tests/python/gpu_torch.py --device cuda --servers 1
step torch_s2 300 "$PYTHON" tests/python/gpu_torch.py --device cuda --servers 2
step fig_copy 120 build/tests/helpers/gpu_bench copy 64
collect fig_copy
step fig_sum 120 build/tests/helpers/gpu_bench sum 64
collect fig_sum
if build/tests/helpers/gpu_probe >/dev/null 2>&1; then
	export QUICK
	export -f net_figures
	step fig_net 400 bash -c net_figures
	collect fig_net
else
	step fig_net 30 build/tests/helpers/gpu_bench net push 1 1 1
fi

# The reports: a table and JSON of every step, and the figures.
"$PYTHON" - "$OUTDIR" <<'EOF'
import json, sys
out = sys.argv[1]
steps = []
for line in open(out + "/results.tsv"):
    name, st, rc, sec, why = (line.rstrip("\n").split("\t") + [""])[:5]
    steps.append({"name": name, "status": st, "exit": int(rc),
                  "seconds": int(sec) / 1000.0, "last_line": why})
figs = []
for line in open(out + "/figures.txt"):
    kind, *kv = line.split()
    d = {"kind": kind}
    for f in kv:
        k, _, v = f.partition("=")
        try:
            d[k] = float(v)
        except ValueError:
            d[k] = v
    figs.append(d)
env = open(out + "/env.txt").read()
failed = [s["name"] for s in steps if s["status"] == "fail"]
json.dump({"env": env, "steps": steps, "figures": figs, "failed": failed},
          open(out + "/report.json", "w"), indent=1)
with open(out + "/report.txt", "w") as f:
    f.write(env + "\n")
    f.write("%-20s %-5s %5s %8s  %s\n" % ("step", "", "exit", "seconds",
                                           "last line"))
    for s in steps:
        f.write("%-20s %-5s %5d %8.1f  %s\n" % (s["name"], s["status"],
                s["exit"], s["seconds"], s["last_line"]))
    f.write("\nfigures\n")
    for d in figs:
        f.write("  " + " ".join("%s=%s" % kv for kv in d.items()) + "\n")
    f.write("\nfailed: %s\n" % (", ".join(failed) or "none"))
print(open(out + "/report.txt").read())
sys.exit(1 if failed else 0)
EOF
