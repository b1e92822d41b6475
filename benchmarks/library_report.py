"""What the modern library surface adds, from a performance database (SQLite file) that `benanza bench`
filled: engine configs per convolution layer, best cuDNN engine config vs best legacy algorithm,
best cuBLASLt algorithm vs cublasGemmEx's CUBLAS_GEMM_DEFAULT, benanza's own kernels (pointwise,
strided and batched copies) vs the best cuDNN/CUDA call, and the outcome of every layer kind's
implementations (timed, screened, not supported, failed) with its reasons.

  python3 benchmarks/library_report.py run.db [--json out.json]

Ratios are of warm medians (ms) of valid measurements of the same layer config and precision.
"""
from __future__ import annotations

import argparse
import collections
import json
import sqlite3
import sys

import numpy as np

ENGINE_CALLS = ("cudnnBackendExecute", "cudnnBackendExecute+cudnnAddTensor")
LEGACY_CALLS = ("cudnnConvolutionForward", "cudnnConvolutionForward+cudnnAddTensor",
                "cudnnConvolutionBiasActivationForward", "cudnnConvolutionBiasActivationForward(IDENTITY)")


def _stats(v) -> str:
    a = np.asarray(v, dtype=float)
    if not len(a):
        return "n=0"
    return (f"n={len(a)} median {np.median(a):.3f} p10 {np.percentile(a, 10):.3f} p90 {np.percentile(a, 90):.3f} "
            f"range {a.min():.3f}-{a.max():.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("db")
    ap.add_argument("--json")
    args = ap.parse_args()
    c = sqlite3.connect(args.db)
    rows = c.execute("select m.layer_key, l.kind, l.description, m.precision, m.call, m.algorithm, m.status, "
                     "m.median_ms, m.message, m.layout from measurements m join layer_configs l on l.key = m.layer_key "
                     "where m.cache = 'warm'").fetchall()
    by_job = collections.defaultdict(list)
    for r in rows:
        by_job[(r[0], r[3], r[9])].append(r)
    doc: dict = {}

    # 1. engine configs per convolution layer (job: config x precision x layout)
    counts = collections.defaultdict(list)
    for (key, prec, lay), rs in by_job.items():
        if rs[0][1] not in ("Conv", "ConvBiasAct"):
            continue
        eng = [r for r in rs if r[4] in ENGINE_CALLS and r[5] != "*"]
        if not eng:
            continue
        st = collections.Counter(r[6] for r in eng)
        counts["configs"].append(len(eng))
        for s in ("ok", "screened", "not_supported", "skipped", "failed"):
            counts[s].append(st.get(s, 0))
    print("## cuDNN engine configs per convolution job (layer config x precision x layout)")
    for k, v in counts.items():
        print(f"  {k:<14} {_stats(v)}")
    doc["engine_configs_per_conv_job"] = {k: [int(x) for x in v] for k, v in counts.items()}

    # 2. best engine config vs best legacy algorithm, per conv layer config and precision (NCHW)
    ratio = collections.defaultdict(list)
    for (key, prec, lay), rs in by_job.items():
        if rs[0][1] not in ("Conv", "ConvBiasAct") or lay != "NCHW":
            continue
        e = [r[7] for r in rs if r[4] in ENGINE_CALLS and r[6] == "ok"]
        g = [r[7] for r in rs if r[4] in LEGACY_CALLS and r[6] == "ok"]
        if e and g:
            ratio[prec].append(min(e) / min(g))
            ratio["all"].append(min(e) / min(g))
    print("\n## best engine config / best legacy algorithm per convolution layer (< 1: the engine is faster)")
    for k, v in sorted(ratio.items()):
        print(f"  {k:<6} {_stats(v)}  engine faster: {np.mean(np.asarray(v) < 1):.0%}")
    doc["engine_vs_legacy"] = {k: v for k, v in ratio.items()}

    # 3. cuBLASLt best vs cuBLAS default per GEMM job
    lt = collections.defaultdict(list)
    detail = []
    for (key, prec, lay), rs in by_job.items():
        if rs[0][1] != "Gemm":
            continue
        d = [r[7] for r in rs if r[4].startswith("cublasGemm") and r[6] == "ok"]
        b = [r[7] for r in rs if r[4].startswith("cublasLt") and r[6] == "ok"]
        if d and b:
            lt[prec].append(min(b) / min(d))
            lt["all"].append(min(b) / min(d))
            detail.append((prec, rs[0][2], min(d) * 1e3, min(b) * 1e3))
    print("\n## best cuBLASLt algorithm / cublasGemmEx CUBLAS_GEMM_DEFAULT per GEMM (< 1: cuBLASLt search found faster)")
    for k, v in sorted(lt.items()):
        print(f"  {k:<6} {_stats(v)}")
    for prec, desc, dm, bm in sorted(detail, key=lambda t: t[3] / t[2])[:6]:
        print(f"    {prec:<5} {desc}: default {dm:.1f} us, cuBLASLt best {bm:.1f} us")
    doc["cublaslt_vs_default"] = {k: v for k, v in lt.items()}

    # 4. benanza's own kernels (what a framework runs) vs the best library call, per job
    own = collections.defaultdict(list)
    for (key, prec, lay), rs in by_job.items():
        if rs[0][1] not in ("Activation", "Elementwise", "Copy"):
            continue
        k = [r[7] for r in rs if r[4].split("+")[-1].startswith(("benanza::", "strided_copy")) and r[6] == "ok"]
        lib = [r[7] for r in rs if not r[4].split("+")[-1].startswith(("benanza::", "strided_copy")) and r[6] == "ok"]
        if k and lib:
            own[(rs[0][1], prec)].append(min(k) / min(lib))
    print("\n## best benanza kernel / best library call per job (< 1: the harness's kernel is faster)")
    for (kind, prec), v in sorted(own.items()):
        print(f"  {kind:<12}{prec:<6} {_stats(v)}  kernel faster: {np.mean(np.asarray(v) < 1):.0%}")
    doc["own_kernel_vs_library"] = {f"{k[0]}/{k[1]}": v for k, v in own.items()}

    # 5. every kind: outcome of its implementations, and the most common reasons
    print("\n## outcome per layer kind and precision (warm records)")
    out = collections.defaultdict(collections.Counter)
    reasons = collections.defaultdict(collections.Counter)
    valid = collections.defaultdict(set)
    jobs = collections.defaultdict(set)
    for r in rows:
        k = (r[1], r[3])
        out[k][r[6]] += 1
        jobs[k].add(r[0])
        if r[6] == "ok":
            valid[k].add(r[0])
        elif r[6] in ("not_supported", "failed", "skipped"):
            reasons[r[1]][f"{r[4]}: {r[8][:90]}"] += 1
    for (kind, prec), st in sorted(out.items()):
        print(f"  {kind:<12}{prec:<6} configs {len(jobs[(kind, prec)]):>3}, with a valid time "
              f"{len(valid[(kind, prec)]):>3}; " + ", ".join(f"{s} {n}" for s, n in st.most_common()))
    for kind, rc in sorted(reasons.items()):
        for msg, n in rc.most_common(2):
            print(f"    {kind}: {n} x {msg}")
    doc["outcome"] = {f"{k[0]}/{k[1]}": dict(v) for k, v in out.items()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
