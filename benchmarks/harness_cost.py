"""Where a suite's run time goes: the harness's own wall time per phase, from a built suite run with
``--profile`` (no database): first call + output check, warm-up, CUDA-graph capture, warm samples,
cold samples, engine plan builds (build_ms), and what is left (descriptor set-up, heuristics queries,
engine-config enumeration, records). Prints a table per library call and the totals.

  python3 benchmarks/harness_cost.py SUITE_DIR [--kind Conv] [--limit 24] [--extra '--no-cold']

Runs the suite's executable (SUITE_DIR/build/benanza-suite) on the GPU for the selected jobs.
"""
from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

PHASES = ("first", "warmup", "capture", "warm", "cold")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("suite", type=Path)
    ap.add_argument("--kind", default=None, help="only jobs of this layer kind (e.g. Conv)")
    ap.add_argument("--limit", type=int, default=0, help="at most this many jobs (spread over the list)")
    ap.add_argument("--extra", default="", help="more suite options, e.g. '--no-cold --sample-ms 0.3'")
    args = ap.parse_args()
    manifest = json.loads((args.suite / "suite.json").read_text())
    jobs = [j for j in manifest["jobs"] if args.kind is None or j["kind"] == args.kind]
    if args.limit and len(jobs) > args.limit:
        step = len(jobs) / args.limit
        jobs = [jobs[int(i * step)] for i in range(args.limit)]
    exe = args.suite / "build" / "benanza-suite"
    if not exe.exists():
        print(f"{exe}: not built (run `benanza build {args.suite}`)", file=sys.stderr)
        return 1
    with tempfile.NamedTemporaryFile("w", suffix=".jobs", delete=False) as f:
        f.write("\n".join(j["job"] for j in jobs) + "\n")
    t0 = time.perf_counter()
    proc = subprocess.Popen([str(exe), "--jobs", f.name, "--profile"] + args.extra.split(), stdout=subprocess.PIPE,
                            text=True)
    job_wall: dict[str, float] = {}
    started = 0.0
    by_call: dict[str, dict] = collections.defaultdict(lambda: {"n": 0, "status": collections.Counter(),
                                                                 "build_ms": 0.0, **{p: 0.0 for p in PHASES}})
    for line in proc.stdout:
        rec = json.loads(line)
        typ = rec.get("type")
        if typ == "job_start":
            started = time.perf_counter()
        elif typ == "job_end":
            job_wall[rec["job"]] = (time.perf_counter() - started) * 1e3
        elif typ == "measurement":
            c = by_call[rec["call"]]
            if rec.get("cache", "warm") == "warm":
                c["n"] += 1
                c["status"][rec["status"]] += 1
                c["build_ms"] += rec.get("build_ms") or 0.0
            for p, v in (rec.get("cost_ms") or {}).items():
                c[p] += v
    proc.wait()
    wall = (time.perf_counter() - t0) * 1e3
    total_job = sum(job_wall.values())
    print(f"## harness cost: {len(job_wall)} jobs of {args.suite.name} ({args.kind or 'all kinds'}), "
          f"wall {wall / 1e3:.1f} s (jobs {total_job / 1e3:.1f} s) {args.extra}")
    print(f"{'call':<44}{'records':>8}{'timed':>7}" + "".join(f"{p:>9}" for p in PHASES) + f"{'build':>9}"
          f"{'ms/timed':>10}")
    acc = collections.Counter()
    for call, c in sorted(by_call.items(), key=lambda kv: -sum(kv[1][p] for p in PHASES)):
        timed = c["status"].get("ok", 0)
        spent = sum(c[p] for p in PHASES) + c["build_ms"]
        for p in PHASES + ("build_ms",):
            acc[p] += c[p]
        print(f"{call[:43]:<44}{c['n']:>8}{timed:>7}" + "".join(f"{c[p] / 1e3:>8.1f}s" for p in PHASES)
              + f"{c['build_ms'] / 1e3:>8.1f}s{spent / max(timed, 1):>10.1f}")
    other = total_job - sum(acc.values())
    print(f"{'all calls':<59}" + "".join(f"{acc[p] / 1e3:>8.1f}s" for p in PHASES)
          + f"{acc['build_ms'] / 1e3:>8.1f}s")
    print(f"outside measurements and builds (set-up, heuristics, enumeration, records): {other / 1e3:.1f} s")
    if job_wall:
        w = np.array(list(job_wall.values()))
        print(f"job wall ms: median {np.median(w):.0f}, p90 {np.percentile(w, 90):.0f}, max {w.max():.0f}")
    return proc.returncode


if __name__ == "__main__":
    sys.exit(main())
