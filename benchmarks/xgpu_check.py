"""Cross-architecture GEMM prediction checked against public measurements, without a GPU.

    python benchmarks/xgpu_check.py [--sample db/reference/xgpu/aiconfigurator_gemm_sample.csv.gz]
        [--neusight db/reference/xgpu/neusight_fp32_linear_bmm.csv.gz] [--write]

For every shape of the public tables (db/reference/xgpu/README.md: their sources, methods and licences) measured
on an origin GPU benanza runs on (H100-SXM, H200) and on another GPU, the other GPU's time is predicted from the
origin's and compared with the table's; per method, data type, origin and target it prints the number of shapes
and the mean, median and 90th percentile of |predicted / measured - 1|:

* ``naive``: the roofline ratio, max(F / peak, B / DRAM bandwidth) on each GPU (the datasheets; B the fewest
  bytes: both operands once, the output once);
* ``habitat``: ``benanza predict``'s wave scaling of a GEMM layer (benanza/analysis/predict.py: L2 residency,
  busy SMs, 2 µs fixed part, Tensor Core peaks), what a GPU outside the tables gets;
* ``grid``: the ratio grids (benanza/analysis/xarch.py) built from the whole table with the sample's shapes
  left out (benchmarks/xgpu_grid.py), so these are shapes the grids never saw.

fp32 (NeuSight's table, eager-timed: each time includes a launch gap of about 0.05 ms) is judged on the shapes
whose time on both GPUs is at least 10 x that floor (0.5 ms), with ``naive``, ``habitat`` and ``model``: the fp32
model (benanza/analysis/xarch.py, fitted per op and target on the table) judged by 5-fold cross-validation over
shapes (each shape predicted by the model fitted on the other four folds; folds from numpy ``default_rng(55)``);
its rows ``fp32 linear all`` / ``fp32 bmm all`` judge it on every shape (the model's ratio is of kernel times:
the launch gap, the same on both GPUs, taken off before and added back after). ``--write`` stores the rows in db/reference/xgpu/xgpu_errors.json, which ``benanza predict``
prints as the error of a prediction to that GPU.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

REF = ROOT / "db" / "reference" / "xgpu"
ORIGINS = ("H100-SXM", "H200")
#: table dtype -> (benanza precision, math of the measurement, operand bytes)
DTYPES = {"bfloat16": ("bf16", "tensor_op", 2), "fp8": ("fp8", "fp8", 1), "fp8_block": ("fp8", "fp8_block128", 1)}
EAGER_FLOOR_MS = 0.05
FOLDS = 5


class _Layer:
    def __init__(self, config):
        self.config = config


class _Timed:
    """What predict.scale_layer reads of a measured layer."""

    def __init__(self, config, math_mode: str, ms: float):
        self.layer, self.math, self.time_ms = _Layer(config), math_mode, ms


def habitat(origin, target, precision: str, math_mode: str, m: int, n: int, k: int, ms: float,
            bias: str = "none", batch: int = 1) -> float:
    """``benanza predict``'s predicted time (ms) of one GEMM measured at ``ms`` on ``origin``."""
    from benanza.analysis.predict import FIXED_US, LayerPrediction, scale_layer
    from benanza.kinds.gemm import GemmConfig

    cfg = GemmConfig(m=m, n=n, k=k, batch_count=batch, trans_b=True, bias=bias)
    lp = LayerPrediction(0, "gemm", "MatMul", "Gemm", "measured", ms, None)
    scale_layer(lp, _Timed(cfg, math_mode, ms), origin, target, precision, "l2", "warm")
    fixed = min(ms, FIXED_US * 1e-3)
    return fixed + (ms - fixed) * lp.factor


def naive(origin, target, key: str, m, n, k, es: int, ms, out_bytes: int = 2, batch=1):
    f = 2.0 * m * n * k * batch
    b = ((m * k + n * k) * es + m * n * out_bytes) * batch
    ro = np.maximum(f / origin.peak_flops(key), b / origin.bandwidth)
    rd = np.maximum(f / target.peak_flops(key), b / target.bandwidth)
    return ms * rd / ro


def stats(pred, meas) -> dict:
    e = np.abs(np.asarray(pred) / np.asarray(meas) - 1.0)
    return {"n": int(e.size), "mean": float(e.mean()), "median": float(np.median(e)),
            "p90": float(np.percentile(e, 90))}


def gemm_rows(sample: Path) -> list[dict]:
    import pandas as pd

    from benanza.analysis import xarch
    from benanza.analysis.gpus import find_gpu

    t = pd.read_csv(sample)
    grids = xarch.load_grids(str(REF / xarch.GRID_FILE))
    rows = []
    for dt, (precision, math_mode, es) in DTYPES.items():
        p = t[t.dtype == dt].pivot_table(index=["m", "n", "k"], columns="gpu", values="ms").dropna().reset_index()
        key = "fp8" if precision == "fp8" else precision
        for o in ORIGINS:
            if o not in p.columns:
                continue
            for d in [g for g in p.columns if g not in ("m", "n", "k", o)]:
                so, sd = find_gpu(o), find_gpu(d)
                m, n, k, to, td = (p[c].to_numpy() for c in ("m", "n", "k", o, d))
                base = {"dtype": dt, "origin": o, "target": d, "architecture": sd.architecture,
                        "table": "aiconfigurator sglang 0.5.10 (CUDA graph)"}
                rows.append({"method": "naive", **base,
                             **stats(naive(so, sd, key, m.astype(float), n.astype(float), k.astype(float), es, to), td)})
                hab = [habitat(so, sd, precision, math_mode, int(a), int(b), int(c), float(x))
                       for a, b, c, x in zip(m, n, k, to)]
                rows.append({"method": "habitat", **base, **stats(hab, td)})
                grid = [x * xarch.gemm_factor(o, d, precision, math_mode, int(a), int(b), int(c), grids)
                        for a, b, c, x in zip(m, n, k, to)]
                rows.append({"method": "grid", **base, **stats(grid, td)})
    return rows


def fp32_rows(table: Path) -> list[dict]:
    import pandas as pd

    from benanza.analysis.gpus import find_gpu
    from benanza.errors import UsageError

    t = pd.read_csv(table)
    rows = []
    for op, sub in t.groupby("op"):
        p = sub.pivot_table(index=["B", "M", "N", "K"], columns="gpu", values="ms").reset_index()
        o = "H100-SXM"
        for d in [g for g in p.columns if g not in ("B", "M", "N", "K", o)]:
            q = p[[c for c in ("B", "M", "N", "K", o, d)]].dropna()
            q = q[(q[o] >= 10 * EAGER_FLOOR_MS) & (q[d] >= 10 * EAGER_FLOOR_MS)]
            try:
                so, sd = find_gpu(o), find_gpu(d)
            except UsageError:
                continue  # a GPU the spec table does not have: no prediction
            if q.empty:
                continue
            base = {"dtype": f"fp32 {op}", "origin": o, "target": d, "architecture": sd.architecture,
                    "table": "NeuSight (eager, launch gap; shapes >= 0.5 ms)"}
            if op == "linear":  # (B, M, N) x (N, K) + bias: one product of m = B x M
                args = [(int(b * mm), int(kk), int(nn), 1) for b, mm, nn, kk in zip(q.B, q.M, q.N, q.K)]
            else:  # bmm: B products of (M, N) x (N, K)
                args = [(int(mm), int(kk), int(nn), int(b)) for b, mm, nn, kk in zip(q.B, q.M, q.N, q.K)]
            m, n, k, batch = (np.array([a[i] for a in args], dtype=float) for i in range(4))
            rows.append({"method": "naive", **base,
                         **stats(naive(so, sd, "fp32", m, n, k, 4, q[o].to_numpy(), 4, batch), q[d])})
            hab = [habitat(so, sd, "fp32", "fma", a[0], a[1], a[2], float(x), "c" if op == "linear" else "none", a[3])
                   for a, x in zip(args, q[o])]
            rows.append({"method": "habitat", **base, **stats(hab, q[d])})
            pred, meas, big = fp32_cross_validated(op, d)
            rows.append({"method": "model", **base, **stats(pred[big], meas[big])})
            rows.append({"method": "model", **base, "dtype": f"fp32 {op} all",
                         "table": "NeuSight (eager; launch gap modelled; all shapes)", **stats(pred, meas)})
    return rows


def fp32_cross_validated(op: str, target: str, path: Path | None = None, folds: int = FOLDS):
    """The fp32 model (benanza/analysis/xarch.py) judged by ``folds``-fold cross-validation over the shapes of
    ``op`` measured on H100-SXM and ``target``: each shape's kernel time predicted by the model fitted on the
    other folds' kernel times (each eager time less the launch gap, xarch.FP32_GAP_MS), the gap added back.
    Returns (predicted ms, measured ms, mask of the shapes of >= 10 x the launch floor on both GPUs)."""
    from benanza.analysis import xarch

    table = xarch.load_fp32_table(str(path or REF / xarch.FP32_FILE))
    m, n, k, b, t_o, t_d = xarch.fp32_training_set(table, op, target)
    k_o, k_d = xarch.fp32_kernel_ms(op, t_o), xarch.fp32_kernel_ms(op, t_d)  # less the launch gap
    fold = np.random.default_rng(55).permutation(len(m)) % folds
    pred = np.zeros_like(t_d)
    for f in range(folds):
        tr, te = fold != f, fold == f
        model = xarch.fit_fp32(op, target, m[tr], n[tr], k[tr], b[tr], k_o[tr], k_d[tr])
        pred[te] = (t_o[te] - k_o[te]) + k_o[te] * np.exp(model.log_ratio(m[te], n[te], k[te], b[te], k_o[te]))
    return pred, t_d, (t_o >= 10 * EAGER_FLOOR_MS) & (t_d >= 10 * EAGER_FLOOR_MS)


def _blend_fit(pairs: list) -> np.ndarray:
    """Least-squares weights (a, b) of log(T_d / T_o) = a log(wave factor) + b log(naive factor) over the
    training pairs' shapes (``pairs``: (wave log ratios, naive log ratios, measured log ratios))."""
    x = np.concatenate([np.stack([w, nv], 1) for w, nv, _ in pairs])
    y = np.concatenate([y for _, _, y in pairs])
    return np.linalg.lstsq(x, y, rcond=None)[0]


def logo_rows(sample: Path | None, table32: Path) -> list[dict]:
    """Leave-one-GPU-out: for each GPU of a table in turn, a model from the GPUs' datasheet figures (a blend
    a x log(wave factor) + b x log(naive factor), fitted on every ordered pair of the other GPUs) predicts it
    from H100-SXM (from H200 when H100-SXM is the one left out; fp32: from A100-PCIe-80GB), compared with wave
    scaling and the naive ratio. bf16/fp8 (the shipped sample): fitted on the odd-numbered shapes, judged on
    the even ones; fp32 linear (NeuSight, shapes >= 0.5 ms on both GPUs). ``sample`` None: fp32 alone."""
    import pandas as pd

    from benanza.analysis.gpus import find_gpu

    rows = []
    t = pd.read_csv(sample) if sample else pd.DataFrame({"dtype": []})
    for dt, (precision, math_mode, es) in DTYPES.items():
        if not (t.dtype == dt).any():
            continue
        p = t[t.dtype == dt].pivot_table(index=["m", "n", "k"], columns="gpu", values="ms").dropna().reset_index()
        gpus = [g for g in p.columns if g not in ("m", "n", "k")]
        key = "fp8" if precision == "fp8" else precision
        spec = {g: find_gpu(g) for g in gpus}

        def ratios(o, d, q):
            m, n, k = (q[c].to_numpy() for c in ("m", "n", "k"))
            w = np.log([habitat(spec[o], spec[d], precision, math_mode, int(a), int(b), int(c), float(x))
                        for a, b, c, x in zip(m, n, k, q[o])]) - np.log(q[o].to_numpy())
            nv = np.log(naive(spec[o], spec[d], key, m.astype(float), n.astype(float), k.astype(float), es,
                              q[o].to_numpy()) / q[o].to_numpy())
            return w, nv, np.log(q[d].to_numpy() / q[o].to_numpy())

        fit, judge = p.iloc[1::2], p.iloc[0::2]
        rows += _logo(dt, gpus, ratios, fit, judge, "aiconfigurator sample: fitted on odd shapes, judged on even")
    t = pd.read_csv(table32)
    p = t[t.op == "linear"].pivot_table(index=["B", "M", "N", "K"], columns="gpu", values="ms").reset_index()
    p["m"], p["n"], p["k"] = p.B * p.M, p.K, p.N
    gpus = [g for g in ("H100-SXM", "A100-PCIe-80GB", "V100-PCIe-32GB", "T4") if g in p.columns]
    spec = {g: find_gpu(g) for g in gpus}

    def ratios32(o, d, q):
        q = q[(q[o] >= 10 * EAGER_FLOOR_MS) & (q[d] >= 10 * EAGER_FLOOR_MS)]
        m, n, k = (q[c].to_numpy() for c in ("m", "n", "k"))
        w = np.log([habitat(spec[o], spec[d], "fp32", "fma", int(a), int(b), int(c), float(x), "c")
                    for a, b, c, x in zip(m, n, k, q[o])]) - np.log(q[o].to_numpy())
        nv = np.log(naive(spec[o], spec[d], "fp32", m.astype(float), n.astype(float), k.astype(float), 4,
                          q[o].to_numpy(), 4) / q[o].to_numpy())
        return w, nv, np.log(q[d].to_numpy() / q[o].to_numpy())

    rows += _logo("fp32 linear", gpus, ratios32, p, p, "NeuSight, shapes >= 0.5 ms (every shape, both roles)")
    return rows


def _logo(dt: str, gpus: list, ratios, fit, judge, what: str) -> list[dict]:
    """The leave-one-GPU-out rows of one table (:func:`logo_rows`)."""
    import itertools

    rows = []
    for out in gpus:
        o = "H100-SXM" if out != "H100-SXM" else ("H200" if "H200" in gpus else "A100-PCIe-80GB")
        train = [g for g in gpus if g != out]
        ab = _blend_fit([ratios(a, b, fit) for a, b in itertools.permutations(train, 2)])
        w, nv, y = ratios(o, out, judge)
        base = {"dtype": dt, "origin": o, "target": out, "trained_on": train, "table": what}
        for method, pred in (("naive", nv), ("wave", w), ("spec-blend", ab[0] * w + ab[1] * nv)):
            rows.append({"method": method, **base, **stats(np.exp(pred - y), np.ones_like(y)),
                         **({"weights": [float(ab[0]), float(ab[1])]} if method == "spec-blend" else {})})
    return rows


def table(rows: list[dict]) -> str:
    lines = [f"{'dtype':<15} {'origin':<14} {'target':<15} {'method':<10} {'shapes':>6} {'mean':>7} {'median':>7} {'p90':>7}"]
    for r in rows:
        lines.append(f"{r['dtype']:<15} {r['origin']:<14} {r['target']:<15} {r['method']:<10} {r['n']:>6} "
                     f"{100 * r['mean']:>6.1f}% {100 * r['median']:>6.1f}% {100 * r['p90']:>6.1f}%")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sample", type=Path, default=REF / "aiconfigurator_gemm_sample.csv.gz")
    ap.add_argument("--neusight", type=Path, default=REF / "neusight_fp32_linear_bmm.csv.gz")
    ap.add_argument("--write", action="store_true", help="store the rows in db/reference/xgpu/xgpu_errors.json")
    a = ap.parse_args(argv)
    rows = gemm_rows(a.sample) + fp32_rows(a.neusight)
    print("|predicted / measured - 1| per GEMM shape (benchmarks/xgpu_check.py)")
    print(table(rows))
    logo = logo_rows(a.sample, a.neusight)
    print("\nleave one GPU out: a datasheet model fitted on the other GPUs against wave scaling (the target left out)")
    print(table(logo))
    if a.write:
        doc = {"what": "per-GEMM |predicted / measured - 1| of benanza's cross-GPU prediction against public tables "
                       "(benchmarks/xgpu_check.py); grid rows: shapes left out of the grids",
               "sources": "db/reference/xgpu/README.md", "fp32_folds": FOLDS, "rows": rows,
               "leave_one_gpu_out": logo}
        (REF / "xgpu_errors.json").write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {REF / 'xgpu_errors.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
