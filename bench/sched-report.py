#!/usr/bin/env python3
"""Summaries of a bench/sched-bench.sh CSV (one row per run).

  sched-report.py --best CSV MODEL SERVERS K   the K best grid points as
                                               "partition_bytes:credit_partitions"
  sched-report.py --table CSV                  the summary table (Markdown)
  sched-report.py --plot CSV PNG TMPDIR        gnuplot heat maps of the grid
  sched-report.py --rounds CSV...              per-round ratios to FIFO of the
                                               default and the best grid point,
                                               per (model, servers, rate), and
                                               their median over all of them
"""
import csv
import math
import os
import statistics
import subprocess
import sys


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def sps(row):
    try:
        v = float(row["steps_per_s"])
    except ValueError:
        return math.nan
    return v if row["status"] == "ok" else math.nan


def median(vals):
    """Median of the successful runs (nan if none).  Failed runs (a node
    declared dead on the overloaded machine, a run over its time limit) are
    left out here and counted in the table's "failed runs" column."""
    ok = [v for v in vals if not math.isnan(v)]
    if not ok:
        return math.nan
    return statistics.median(ok)


def failed(pts):
    return sum(1 for v in pts.values() for x in v if math.isnan(x))


def points(rows, model, servers, phases):
    """{(scheduling, partition, credit): [steps/s of each run]}"""
    out = {}
    for r in rows:
        if r["model"] != model or r["servers"] != servers:
            continue
        if r["phase"] not in phases:
            continue
        key = (r["scheduling"], r["partition_bytes"], r["credit_partitions"])
        out.setdefault(key, []).append(sps(r))
    return out


def human(b):
    b = int(b)
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d%s" % (b // div, unit)
    return str(b)


def configs(rows):
    seen = []
    for r in rows:
        k = (r["model"], r["servers"])
        if k not in seen:
            seen.append(k)
    return seen


def best_grid(rows, model, servers, k):
    pts = points(rows, model, servers, {"grid"})
    ranked = sorted(
        ((median(v), key) for key, v in pts.items() if not math.isnan(median(v))),
        reverse=True)
    return ["%s:%s" % (key[1], key[2]) for _, key in ranked[:k]]


def summary(rows, model, servers):
    base = points(rows, model, servers, {"baseline"})
    dflt = points(rows, model, servers, {"default"})
    best = points(rows, model, servers, {"best"})
    grid = points(rows, model, servers, {"grid"})
    fifo = median(next(iter(base.values()), [math.nan]))
    dfl = median(next(iter(dflt.values()), [math.nan]))
    cand = best or grid
    bkey, bval = None, math.nan
    for key, v in cand.items():
        m = median(v)
        if not math.isnan(m) and (math.isnan(bval) or m > bval):
            bkey, bval = key, m
    nfail = failed(base) + failed(dflt) + failed(best)
    nruns = sum(len(v) for d in (base, dflt, best) for v in d.values())
    return fifo, dfl, bkey, bval, len(grid), "%d/%d" % (nfail, nruns), failed(grid)


def rounds(rows, model, servers, bkey):
    """[(fifo, default, best)] of each final round, in run order: a round
    is a FIFO run after the grid and the default and best runs after it."""
    out, cur, seen_grid = [], None, False
    for r in rows:
        if r["model"] != model or r["servers"] != servers:
            continue
        ph = r["phase"]
        if ph == "grid":
            seen_grid = True
        elif ph == "baseline" and seen_grid:
            cur = [sps(r), math.nan, math.nan]
            out.append(cur)
        elif ph == "default" and cur:
            cur[1] = sps(r)
        elif ph == "best" and cur and bkey and \
                (r["scheduling"], r["partition_bytes"],
                 r["credit_partitions"]) == bkey:
            cur[2] = sps(r)
    return out


def round_table(paths):
    """Medians of per-round ratios (the figure issue 16's replay target is
    about: priority+credit at its best grid point vs FIFO)."""
    print("| model | servers | rate Gbit/s | best grid point | default / FIFO "
          "(rounds) | best / FIFO (rounds) |")
    print("|---|---|---|---|---|---|")
    allbest, alldef = [], []
    for path in paths:
        rows = load(path)
        for model, servers in configs(rows):
            bkey = summary(rows, model, servers)[2]
            rs = rounds(rows, model, servers, bkey)
            d = [x[1] / x[0] for x in rs if x[0] > 0]
            b = [x[2] / x[0] for x in rs if x[0] > 0]
            fmt = lambda v: " ".join("%.2f" % x for x in v)
            md, mb = median(d), median(b)
            alldef.append(md)
            allbest.append(mb)
            rate = next(r["rate_gbit"] for r in rows if r["model"] == model)
            print("| %s | %s | %s | %s | **%.2f** (%s) | **%.2f** (%s) |" %
                  (model, servers, rate,
                   "%s x %s" % (human(bkey[1]), bkey[2]) if bkey else "-",
                   md, fmt(d), mb, fmt(b)))
    print("\nmedian over the %d points: default / FIFO %.2f, best / FIFO %.2f"
          % (len(allbest), median(alldef), median(allbest)))


def table(rows):
    if not rows:
        print("no runs")
        return
    r0 = rows[0]
    print("Link %s Gbit/s per node (tbf), %s workers, --gpu-tflops %s, "
          "--batch %s; steps/s are medians of the runs (each run: the mean "
          "over the workers).\n" % (r0["rate_gbit"], r0["workers"],
                                    r0["gpu_tflops"], r0["batch"]))
    print("| model | servers | FIFO steps/s | priority+credit default | "
          "ratio | best grid point (partition, credit) | steps/s | ratio | "
          "grid points (failed) | failed runs of FIFO/default/best |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for model, servers in configs(rows):
        fifo, dfl, bkey, bval, n, nfail, gfail = summary(rows, model, servers)
        ratio = (lambda x: "%.2fx" % (x / fifo)
                 if fifo and not math.isnan(fifo) and not math.isnan(x)
                 else "-")
        where = ("%s, %s x %s = %s" % (human(bkey[1]), bkey[2], human(bkey[1]),
                                      human(int(bkey[1]) * int(bkey[2])))
                 if bkey else "-")
        print("| %s | %s | %.3f | %.3f | %s | %s | %.3f | %s | %d (%d) | %s |" %
              (model, servers, fifo, dfl, ratio(dfl), where, bval,
               ratio(bval), n, gfail, nfail))


def plot(rows, png, tmp):
    cfgs = configs(rows)
    if not cfgs:
        return
    script = []
    cols = 2 if len(cfgs) > 1 else 1
    nrows = (len(cfgs) + cols - 1) // cols
    script.append('set terminal pngcairo size %d,%d font ",10"' %
                  (760 * cols, 520 * nrows))
    script.append('set output "%s"' % png)
    script.append('set multiplot layout %d,%d title "steps/s of priority+'
                  'credit over the grid, as a ratio to FIFO (tbf %s Gbit/s, '
                  '%s workers)"' % (nrows, cols, rows[0]["rate_gbit"],
                                    rows[0]["workers"]))
    script.append("set palette defined (0 '#b2182b', 1 '#f7f7f7', 2 '#2166ac')")
    script.append("set xlabel 'partition size'")
    script.append("set ylabel 'credit (partitions)'")
    script.append("set cblabel 'steps/s / FIFO'")
    script.append("unset key")
    for i, (model, servers) in enumerate(cfgs):
        fifo = summary(rows, model, servers)[0]
        grid = points(rows, model, servers, {"grid"})
        parts = sorted({int(k[1]) for k in grid})
        creds = sorted({int(k[2]) for k in grid})
        dat = os.path.join(tmp, "grid%d.dat" % i)
        with open(dat, "w") as f:
            for xi, p in enumerate(parts):
                for yi, c in enumerate(creds):
                    m = median(grid.get(("priority", str(p), str(c)), [math.nan]))
                    z = m / fifo if fifo and not math.isnan(m) else math.nan
                    f.write("%d %d %s %s\n" % (xi, yi, "NaN" if math.isnan(z)
                                               else "%.3f" % z,
                                               "x" if math.isnan(z)
                                               else "%.2f" % z))
                f.write("\n")
        script.append("set xtics (%s)" % ", ".join(
            '"%s" %d' % (human(p), xi) for xi, p in enumerate(parts)))
        script.append("set ytics (%s)" % ", ".join(
            '"%d" %d' % (c, yi) for yi, c in enumerate(creds)))
        script.append("set xrange [-0.5:%f]" % (len(parts) - 0.5))
        script.append("set yrange [-0.5:%f]" % (len(creds) - 0.5))
        script.append("set cbrange [0:2]")
        script.append('set title "%s, %s server(s): FIFO %.3f steps/s"' %
                      (model, servers, fifo))
        script.append("plot '%s' using 1:2:3 with image, '' using 1:2:4 "
                      "with labels font ',8'" % dat)
    script.append("unset multiplot")
    gp = os.path.join(tmp, "plot.gp")
    with open(gp, "w") as f:
        f.write("\n".join(script) + "\n")
    subprocess.run(["gnuplot", gp], check=True)


def main(argv):
    if len(argv) >= 6 and argv[1] == "--best":
        print(" ".join(best_grid(load(argv[2]), argv[3], argv[4], int(argv[5]))))
    elif len(argv) == 3 and argv[1] == "--table":
        table(load(argv[2]))
    elif len(argv) == 5 and argv[1] == "--plot":
        plot(load(argv[2]), argv[3], argv[4])
    elif len(argv) >= 3 and argv[1] == "--rounds":
        round_table(argv[2:])
    else:
        sys.stderr.write(__doc__)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
