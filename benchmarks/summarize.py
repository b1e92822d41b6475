#!/usr/bin/env python3
"""Print the evidence tables of a GPU run: per model and (batch, dtype) the LBL, per model the
stage times and failures, and the measurement quality in the database (convergence, spread,
timing method). Usage: summarize.py DB.sqlite BENCH.json [BENCH.json ...] (from `benanza bench --json`)."""
import collections
import json
import sqlite3
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from json_docs import scenarios_of  # noqa: E402  (bench --json: its scenarios, schema 1 or the recorded runs' before)


def lbl_table(files):
    """[{model, batch, precision, lbl_sequential_ms, lbl_parallel_ms, lbl_fused_sequential_ms, complete}] of
    the bench JSON outputs: what `benanza analyze` must reproduce from the database."""
    rows = []
    for f in files:
        if Path(f).stem.endswith("_again"):
            continue
        try:
            doc = json.loads(Path(f).read_text())
        except (OSError, json.JSONDecodeError):
            continue
        for a in scenarios_of(doc, f):
            rows.append({k: a[k] for k in ("model", "batch", "precision", "lbl_sequential_ms", "lbl_parallel_ms",
                                           "lbl_fused_sequential_ms", "complete")})
    return sorted(rows, key=lambda r: (r["model"], r["batch"], r["precision"]))


def main(db_path, files):
    print("\n## LBL per model, batch and data type (ms)")
    print(f"{'model':<18}{'batch':>6} {'dtype':<6}{'layers':>7}{'uniq':>6}{'LBL seq':>11}{'LBL par':>11}"
          f"{'fused seq':>11} complete")
    stages = []
    for f in files:
        try:
            doc = json.loads(Path(f).read_text())
        except (OSError, json.JSONDecodeError):
            print(f"{Path(f).name}: no JSON (see the .err file)")
            continue
        stages.append((Path(f).stem, doc["stages"], doc["run"]))
        if Path(f).stem.endswith("_again"):
            continue
        for a in scenarios_of(doc, f):
            n_layers = len(a["layers"])
            uniq = len({l["key"] or (l["op"], str(l["input_shapes"])) for l in a["layers"]})
            miss = ",".join(f"{k}x{v}" for k, v in a["missing_by_op"].items())
            print(f"{a['model']:<18}{a['batch']:>6} {a['precision']:<6}{n_layers:>7}{uniq:>6}"
                  f"{a['lbl_sequential_ms']:>11.4f}{a['lbl_parallel_ms']:>11.4f}{a['lbl_fused_sequential_ms']:>11.4f} "
                  f"{'yes' if a['complete'] else 'NO ' + miss}")
    print("\n## stage wall times (s) and jobs")
    print(f"{'run':<24}{'process':>8}{'generate':>9}{'compile':>8}{'run':>8}{'analyze':>8}{'jobs':>6}{'failed':>7}{'skipped':>8}")
    for name, st, run in stages:
        print(f"{name:<24}{st['process_s']:>8.2f}{st['generate_s']:>9.2f}{st['compile_s']:>8.1f}{st['run_s']:>8.1f}"
              f"{st['analyze_s']:>8.2f}{run['ok'] + run['failed']:>6}{run['failed']:>7}{run['skipped']:>8}")
        for fl in run["failures"][:5]:
            print(f"    failed {fl['job']}: {fl['reason'][:150]}")
    con = sqlite3.connect(db_path)
    print("\n## measurements by kind, cache and status")
    rows = con.execute("select c.kind, m.cache, m.status, count(*) from measurements m join layer_configs c "
                       "on c.key = m.layer_key group by 1, 2, 3 order by 1, 2, 3").fetchall()
    for r in rows:
        print(f"  {r[0]:<12} {r[1]:<5} {r[2]:<14} {r[3]:>6}")
    print("\n## why measurements did not run (top messages)")
    for msg, n in con.execute("select substr(message, 1, 110), count(*) from measurements where status != 'ok' "
                              "group by 1 order by 2 desc limit 12"):
        print(f"  {n:>5}  {msg}")
    print("\n## quality of valid measurements")
    for cache in ("warm", "cold"):
        rs = con.execute("select rse, converged, samples, method, (q3_ms - q1_ms) / median_ms, dropped from "
                         "measurements where status = 'ok' and cache = ?", (cache,)).fetchall()
        if not rs:
            continue
        rse = np.array([r[0] for r in rs if r[0] is not None])
        conv = sum(1 for r in rs if r[1])
        iqr = np.array([r[4] for r in rs if r[4] is not None])
        methods = collections.Counter(r[3] for r in rs)
        print(f"  {cache}: {len(rs)} valid, converged {conv / len(rs):.1%}, RSE of median: median "
              f"{np.median(rse):.4f}, p90 {np.percentile(rse, 90):.4f}; IQR/median: median {np.median(iqr):.4f}; "
              f"samples median {int(np.median([r[2] for r in rs]))}; dropped (throttled) {sum(r[5] or 0 for r in rs)}; "
              f"methods {dict(methods)}")
    sysrow = con.execute("select gpu_name, sm_count, max_sm_clock_mhz, driver_version, runtime_version, "
                         "cudnn_version, cublas_version from systems").fetchall()
    print("\n## systems:", sysrow)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--write-lbl":
        Path(args[1]).write_text(json.dumps(lbl_table(args[2:]), indent=1) + "\n")
    else:
        main(args[0], args[1:])
