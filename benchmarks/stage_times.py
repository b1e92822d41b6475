#!/usr/bin/env python3
"""Speed of the benchmarking cycle and run-to-run agreement.

Times every stage of `benanza bench` (process, generate, compile, run, analyze) on fresh databases
and fresh suite folders, `--runs` times; then once more on the first database (must do no GPU work);
then compares the fresh runs measurement by measurement. Prints the tables. Targets (issue
"Measurements you can trust"): whole bench under 120 s on one H100/H200, compile under 60 s on a
2-core machine, every measurement converged at <= 1 %, second bench a few seconds, two fresh runs
agree within 2 % (median of the per-measurement differences).

  python3 benchmarks/stage_times.py --model examples/resnet50.onnx --batch 1,32 --dtype fp32,tf32,fp16 \\
      --runs 2 --out /tmp/stages
  python3 benchmarks/stage_times.py --model examples/resnet50.onnx --compile-only --jobs 2   # no GPU
"""
import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_docs import scenarios_of  # noqa: E402  (bench --json: its scenarios, schema 1 or before)


def bench(model, batch, dtype, db, suite, extra=()):
    cmd = [sys.executable, "-c", "from benanza.cli import main; main()", "bench", str(model), "--batch", batch,
           "--dtype", dtype, "--db", str(db), "-o", str(suite), "--json", *extra]
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=tempfile.gettempdir())
    wall = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"bench failed ({p.returncode}): {p.stderr.strip().splitlines()[-1:]}")
    doc = json.loads(p.stdout)
    doc["wall_s"] = wall
    return doc


def compile_only(model, batch, dtype, jobs, out):
    from benanza.build.builder import build
    from benanza.generation.generator import generate, parse_precisions
    from benanza.processing.model import parse_batches, process

    t0 = time.perf_counter()
    mls = [process(model, b) for b in parse_batches(batch)]
    t1 = time.perf_counter()
    suite = generate(mls, parse_precisions(dtype), out)
    t2 = time.perf_counter()
    r = build(out, jobs=jobs)
    print(f"{model} batch {batch} {dtype}: {len(suite.jobs)} jobs; process {t1 - t0:.2f} s, generate {t2 - t1:.2f} s, "
          f"configure {r.configure_s:.1f} s, compile {r.compile_s:.1f} s with {jobs} jobs on {os.cpu_count()} cores")


def agreement(db_a, db_b):
    """Relative differences |a - b| / min(a, b) of the medians of the valid measurements both runs have."""
    a, b = sqlite3.connect(db_a), sqlite3.connect(db_b)
    q = ("select layer_key, precision, call, algorithm, math, dtype, cache, median_ms from measurements "
         "where status = 'ok'")
    ra = {r[:7]: r[7] for r in a.execute(q)}
    rb = {r[:7]: r[7] for r in b.execute(q)}
    common = sorted(set(ra) & set(rb))
    out = {}
    for cache in ("warm", "cold"):
        d = np.array([abs(ra[k] - rb[k]) / min(ra[k], rb[k]) for k in common if k[6] == cache])
        if len(d):
            out[cache] = {"n": len(d), "median": float(np.median(d)), "p90": float(np.percentile(d, 90)),
                          "within_2pct": float(np.mean(d <= 0.02))}
    # the measurements that decide the LBL: the best per (layer, precision)
    best = {}
    for k, v in ra.items():
        if k[6] != "warm":
            continue
        g = (k[0], k[1])
        if g not in best or v < ra[best[g]]:
            best[g] = k
    d = np.array([abs(ra[k] - rb[k]) / min(ra[k], rb[k]) for k in best.values() if k in rb])
    out["best_per_layer"] = {"n": len(d), "median": float(np.median(d)), "p90": float(np.percentile(d, 90)),
                             "within_2pct": float(np.mean(d <= 0.02))}
    out["only_in_one_run"] = len(set(ra) ^ set(rb))
    return out


def convergence(db):
    c = sqlite3.connect(db)
    out = {}
    for cache in ("warm", "cold"):
        rows = c.execute("select converged, rse from measurements where status = 'ok' and cache = ?", (cache,)).fetchall()
        if rows:
            rse = np.array([r[1] for r in rows])
            out[cache] = {"n": len(rows), "converged": float(np.mean([bool(r[0]) for r in rows])),
                          "median_rse": float(np.median(rse)), "p90_rse": float(np.percentile(rse, 90)),
                          "max_rse": float(rse.max())}
    out["screened"] = c.execute("select count(*) from measurements where status = 'screened'").fetchone()[0]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--dtype", default="fp32,tf32,fp16")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--out", default=None)
    ap.add_argument("--compile-only", action="store_true", help="time generate + compile only (no GPU)")
    ap.add_argument("--jobs", type=int, default=2, help="compile jobs for --compile-only")
    ap.add_argument("--extra", default="", help="more `benanza bench` options, e.g. '--no-cold'")
    args = ap.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="benanza-stages-"))
    out.mkdir(parents=True, exist_ok=True)
    model = Path(args.model).resolve()
    if args.compile_only:
        compile_only(model, args.batch, args.dtype, args.jobs, out / "suite")
        return
    docs = []
    for r in range(1, args.runs + 1):
        docs.append((f"fresh run {r}", bench(model, args.batch, args.dtype, out / f"run{r}.db", out / f"suite{r}",
                                             args.extra.split())))
    docs.append(("again (run 1's db)", bench(model, args.batch, args.dtype, out / "run1.db", out / "suite1",
                                             args.extra.split())))
    print(f"\n## stage wall times (s): {model.name}, batch {args.batch}, {args.dtype}, GPU "
          f"{docs[0][1]['system']['gpu_name']}")
    print(f"{'':<20}{'process':>8}{'generate':>9}{'compile':>8}{'run':>8}{'analyze':>8}{'total':>8}{'jobs':>6}"
          f"{'failed':>7}{'measurements':>13}")
    for name, d in docs:
        st, run = d["stages"], d["run"]
        print(f"{name:<20}{st['process_s']:>8.2f}{st['generate_s']:>9.2f}{st['compile_s']:>8.1f}{st['run_s']:>8.1f}"
              f"{st['analyze_s']:>8.2f}{d['wall_s']:>8.1f}{run['ok'] + run['failed']:>6}{run['failed']:>7}"
              f"{run['measurements']:>13}")
    print("\n## LBL of run 1 (ms): sequential / parallel / fused sequential, complete")
    for a in scenarios_of(docs[0][1]):
        print(f"  b{a['batch']:<3} {a['precision']:<5} {a['lbl_sequential_ms']:.4f} / {a['lbl_parallel_ms']:.4f} / "
              f"{a['lbl_fused_sequential_ms']:.4f}  {'yes' if a['complete'] else 'no'}")
    print("\n## convergence (run 1)")
    conv = convergence(out / "run1.db")
    print(f"  screened (first replay > --screen x the job's best, not sampled further): {conv.pop('screened')}")
    for cache, c in conv.items():
        print(f"  {cache}: {c['n']} valid measurements, converged {c['converged']:.1%}, RSE of the median: median "
              f"{c['median_rse']:.4f}, p90 {c['p90_rse']:.4f}, max {c['max_rse']:.4f}")
    if args.runs >= 2:
        ag = agreement(out / "run1.db", out / "run2.db")
        print("\n## run-to-run agreement (fresh run 1 vs fresh run 2): |a-b|/min(a,b) of the medians")
        for k in ("warm", "cold", "best_per_layer"):
            if k in ag:
                a = ag[k]
                print(f"  {k:<15} n={a['n']:<6} median {a['median']:.2%}  p90 {a['p90']:.2%}  within 2 %: "
                      f"{a['within_2pct']:.1%}")
        print(f"  valid in one run only: {ag['only_in_one_run']}")
        lbl = {(a["batch"], a["precision"]): a["lbl_sequential_ms"] for a in scenarios_of(docs[0][1])}
        lbl2 = {(a["batch"], a["precision"]): a["lbl_sequential_ms"] for a in scenarios_of(docs[1][1])}
        print("  LBL sequential, run 1 vs run 2 (ms): " + "; ".join(
            f"b{b} {p} {lbl[(b, p)]:.4f} / {lbl2[(b, p)]:.4f}" for b, p in sorted(lbl)))
        (out / "agreement.json").write_text(json.dumps(ag, indent=1))


if __name__ == "__main__":
    main()
