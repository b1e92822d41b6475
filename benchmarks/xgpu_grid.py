"""Build the cross-architecture GEMM ratio grids (benanza/analysis/xarch.py) from the whole public table.

    python benchmarks/xgpu_grid.py --table aiconfigurator_gemm_sglang0.5.10.csv.gz [--out db/reference/xgpu]

``--table``: the whole long table of ``ai-dynamo/aiconfigurator``'s SGLang 0.5.10 GEMM measurements (columns
device, dtype, m, n, k, ms, gpu; db/reference/xgpu/README.md gives its source; not shipped: 5.4 MB). Per data
type (bfloat16, fp8, fp8_block; nvfp4 is B200's alone) and GPU it stores ``log(T_gpu / T_H100-SXM)`` on the
table's (m, n, k) grid as float16 into OUT/ratio_grids.npz. The shapes of the shipped sample
(OUT/aiconfigurator_gemm_sample.csv.gz) are left out, their points filled from their grid neighbours, so that
benchmarks/xgpu_check.py judges the grids on shapes they never saw. Needs numpy and pandas, no GPU.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

BASE = "H100-SXM"


def fill(a: np.ndarray, rounds: int = 200) -> np.ndarray:
    """Each missing point (NaN) of a 3-D grid: the mean of its present axis neighbours, repeated until
    every point has a value (a held-out point between measured ones is their interpolation)."""
    a = a.copy()
    for _ in range(rounds):
        miss = np.isnan(a)
        if not miss.any():
            return a
        total, count = np.zeros_like(a), np.zeros_like(a)
        for ax in range(3):
            for s in (-1, 1):
                b = np.roll(a, s, axis=ax)
                edge = [slice(None)] * 3
                edge[ax] = 0 if s == 1 else -1
                b[tuple(edge)] = np.nan  # no wrap-around
                ok = ~np.isnan(b)
                total[ok] += b[ok]
                count[ok] += 1
        new = miss & (count > 0)
        a[new] = total[new] / count[new]
    raise ValueError("grid has points with no measured neighbour")


def build(table: Path, sample: Path | None) -> dict[str, np.ndarray]:
    import pandas as pd

    t = pd.read_csv(table)
    held = pd.read_csv(sample)[["dtype", "m", "n", "k"]].drop_duplicates() if sample and sample.is_file() else None
    out: dict[str, np.ndarray] = {}
    for dt in ("bfloat16", "fp8", "fp8_block"):
        p = t[t.dtype == dt].pivot_table(index=["m", "n", "k"], columns="gpu", values="ms").dropna()
        if BASE not in p.columns:
            continue
        p = p.reset_index()
        if held is not None:
            h = held[held.dtype == dt][["m", "n", "k"]].assign(_held=True)
            p = p.merge(h, on=["m", "n", "k"], how="left")
            p = p[p._held.isna()].drop(columns="_held")
        ms, ns, ks = (np.sort(t[t.dtype == dt][c].unique()) for c in "mnk")
        ix = (np.searchsorted(ms, p.m), np.searchsorted(ns, p.n), np.searchsorted(ks, p.k))
        out[f"{dt}/m"], out[f"{dt}/n"], out[f"{dt}/k"] = ms, ns, ks
        for gpu in p.columns:
            if gpu in ("m", "n", "k", BASE):
                continue
            a = np.full((len(ms), len(ns), len(ks)), np.nan)
            a[ix] = np.log(p[gpu].values / p[BASE].values)
            out[f"{dt}/{gpu}"] = fill(a).astype(np.float16)
            print(f"{dt} {gpu}: {len(p)} measured points of {a.size}", flush=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, required=True, help="the whole aiconfigurator long table (.csv.gz)")
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "db" / "reference" / "xgpu")
    a = ap.parse_args(argv)
    grids = build(a.table, a.out / "aiconfigurator_gemm_sample.csv.gz")
    np.savez_compressed(a.out / "ratio_grids.npz", **grids)
    print(f"wrote {a.out / 'ratio_grids.npz'} ({(a.out / 'ratio_grids.npz').stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
