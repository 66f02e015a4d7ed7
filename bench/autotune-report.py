#!/usr/bin/env python3
"""Report of bench/autotune-bench.sh.

--table CSV: markdown table per model: median total steps per arm over
the rounds, and psched online's ratio to each other arm (ratio of the
medians, and the median of the per-round ratios: arms of one round ran
back to back under the same background load).

--plot STEPS_CSV SWITCHES_CSV PNG PHASE_S "RATES" BG TMPDIR: gnuplot
figure of steps/s over time (round 1) per arm, one panel per model, the
rate phases shaded and the online arm's config switches marked.
"""
import csv
import os
import statistics
import subprocess
import sys


def table(path):
    rows = list(csv.DictReader(open(path)))
    out = []
    for model in dict.fromkeys(r["model"] for r in rows):
        per = {}
        for r in rows:
            if r["model"] != model or r["steps"] == "nan":
                continue
            per.setdefault(r["arm"], {})[int(r["round"])] = int(r["steps"])
        out.append(f"\n**{model}** (total timed steps per run; medians over "
                   f"{max((len(v) for v in per.values()), default=0)} round(s))\n")
        out.append("| arm | steps (median) | runs | online / arm (ratio of medians) "
                   "| online / arm (median of per-round ratios) |")
        out.append("|---|---|---|---|---|")
        on = per.get("online", {})
        for arm, v in per.items():
            med = statistics.median(v.values())
            r1 = r2 = "-"
            if on and arm != "online":
                r1 = f"{statistics.median(on.values()) / med:.3f}"
                pr = [on[k] / v[k] for k in v if k in on and v[k] > 0]
                if pr:
                    r2 = f"{statistics.median(pr):.3f} ({' '.join(f'{x:.2f}' for x in pr)})"
            out.append(f"| {arm} | {med:g} | {' '.join(str(x) for x in v.values())} | {r1} | {r2} |")
    print("\n".join(out))


def plot(steps_csv, sw_csv, png, phase_s, rates, bg, tmp):
    rows = list(csv.DictReader(open(steps_csv)))
    models = list(dict.fromkeys(r["model"] for r in rows))
    arms = list(dict.fromkeys(r["arm"] for r in rows))
    # seconds per phase: one figure for every model, or MODEL=S,...; S
    # is SECONDS or FIRST:SECONDS (a first phase of its own length)
    if "=" not in phase_s:
        phase_s = ",".join(f"{m}={phase_s}" for m in models)
    per = {}
    for k, v in (x.split("=") for x in phase_s.split(",")):
        first, _, rest = v.partition(":")
        per[k] = (float(first), float(rest or first))
    # RATE, or RATE@DELAY (one-way ms, --delays)
    rl = [f"{r.split('@')[0]} Gbit/s, {r.split('@')[1]} ms" if "@" in r else f"{r} Gbit/s"
          for r in rates.split()]
    phases = rl + ([f"{rl[-1]} + traffic"] if bg == "1" else [])
    sw = []
    if os.path.exists(sw_csv):
        sw = [r for r in csv.reader(open(sw_csv)) if len(r) == 5]
    script = [f'set terminal pngcairo size 1100,{380 * len(models)} font ",10"',
              f'set output "{png}"', 'set datafile separator ","',
              f"set multiplot layout {len(models)},1",
              'set xlabel "seconds since the first step"', 'set ylabel "steps/s (worker 0)"',
              "set key outside right", "set grid"]
    for m in models:
        files = []
        for a in arms:
            f = os.path.join(tmp, f"plot-{m}-{a}.dat")
            with open(f, "w") as fh:
                for r in rows:
                    if r["model"] == m and r["arm"] == a:
                        fh.write(f'{r["t_s"]},{r["steps_per_s"]}\n')
            files.append((a, f))
        script.append("unset arrow; unset label; unset object")
        first, ps = per[m]
        for i, name in enumerate(phases):
            x0 = 0 if i == 0 else first + (i - 1) * ps
            x1 = first if i == 0 else x0 + ps
            script.append(f'set object {i + 1} rect from {x0},graph 0 to {x1},graph 1 '
                          f'behind fc rgb "{"#e8e8e8" if i % 2 else "#ffffff"}" fs solid noborder')
            script.append(f'set label "{name}" at {x0 + 1},graph 0.95 font ",8"')
        k = 1
        for s in sw:
            if s[0] != m:
                continue
            dash = 2 if s[1] == "oneshot" else 1
            script.append(f"set arrow {k} from {s[2]},graph 0 to {s[2]},graph 0.85 nohead "
                          f'dt {dash} lc rgb "{"#999999" if s[1] == "oneshot" else "#cc0000"}"')
            k += 1
        script.append(f'set title "{m}: steps/s over time; red lines: online config switches, '
                      f'grey dashed: one-shot BO switches"')
        script.append("plot " + ", ".join(f'"{f}" using 1:2 with linespoints title "{a}"'
                                          for a, f in files))
    script.append("unset multiplot")
    gp = os.path.join(tmp, "autotune.gp")
    open(gp, "w").write("\n".join(script) + "\n")
    subprocess.run(["gnuplot", gp], check=True)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--table":
        table(sys.argv[2])
    elif len(sys.argv) == 9 and sys.argv[1] == "--plot":
        plot(*sys.argv[2:])
    else:
        sys.exit(__doc__)
