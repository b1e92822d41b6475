"""GEMM times across GPU architectures from public measurements: the ratio grids.

Wave scaling (:mod:`benanza.analysis.predict`) was validated between Hopper GPUs only; across
architectures a GEMM's time changes with the kernels the library picks, the Tensor Core generation,
the L2 and the clock under the power limit, none of which a datasheet gives. Where a public table
measured the same GEMM shapes on both GPUs, the measured ratio says it.

**The ratio grid.** For one data type the public table ``aiconfigurator_gemm_sglang0.5.10``
(``ai-dynamo/aiconfigurator``, Apache-2.0: ``F.linear(a[m, k], w[n, k])`` as SGLang 0.5.10 runs it,
CUDA-graph replay, no launch gap; db/reference/xgpu/README.md) measured one grid of (m, n, k) on each
GPU (74 m from 1 to 32,768; 22 n and k from 32 to 65,536). The grid stores, per GPU g, ``log(T_g /
T_H100-SXM)`` at every grid point; a GEMM measured at T_o on the origin o is predicted on the
destination d as::

    T_d = T_o * exp(r_d(m, n, k) - r_o(m, n, k))

with r interpolated multilinearly in (log m, log n, log k) between grid points and clamped at the
grid's edges. benanza's own measurement T_o keeps what its minimum over algorithms and its method
found on the origin; the ratio carries what the other GPU's kernels, L2 and clocks do to that shape.

**Validation** (``benchmarks/xgpu_check.py``): the shapes of the shipped sample
(db/reference/xgpu/aiconfigurator_gemm_sample.csv.gz) are left out of the grids when they are built
(``benchmarks/xgpu_grid.py``: their points are interpolated from their neighbours), so the sample is
a held-out test of the grid on shapes it never saw; the errors per GPU and data type are in
``db/reference/xgpu/xgpu_errors.json``, which :func:`validated_error` reads and ``benanza predict``
prints. A GPU outside the tables has no grid: its GEMMs are wave-scaled, whose error across
architectures the same table measures (``habitat`` rows of the error file).

Data types: ``bf16`` uses the table's bfloat16 grid, and so does ``fp16`` (the same Tensor Core rate
on every GPU of the table: their datasheets); ``fp8`` with per-tensor scales the fp8 grid, with
``fp8_block128`` math (1x128 / 128x128 block scales) the fp8_block grid. fp32 on CUDA cores (TF32 off)
has no grid: NeuSight's table measured scattered shapes, eager, on H100-SXM, A100-PCIe-80GB,
V100-PCIe-32GB and T4; a model fitted on it per op and target (the fp32 section below:
:func:`fit_fp32`, :func:`fp32_factor`) gives those GEMMs' ratio from H100-SXM, with the error a 5-fold
cross-validation over its shapes measured (``model`` rows of the error file). tf32 has neither.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

#: the GPU every grid's ratios are relative to
BASE_GPU = "H100-SXM"
#: the public table the grids come from (db/reference/xgpu/README.md)
SOURCE = ("ai-dynamo/aiconfigurator@095f58a51c4ca8e61b66ec108d86f223f8d559ce, "
          "systems/data/<system>/gemm/sglang/0.5.10/gemm_perf.parquet (Apache-2.0): F.linear as SGLang 0.5.10 "
          "runs it, CUDA-graph replay")
GRID_FILE = "ratio_grids.npz"
ERRORS_FILE = "xgpu_errors.json"


def reference_dir() -> Path | None:
    """The folder of the grids and their errors: ``benanza/_data/xgpu`` inside the installed package
    (setup.py copies it), else ``db/reference/xgpu`` of a source checkout; None when neither has them."""
    pkg = Path(__file__).resolve().parents[1]
    for d in (pkg / "_data" / "xgpu", pkg.parent / "db" / "reference" / "xgpu"):
        if (d / GRID_FILE).is_file():
            return d
    return None


def grid_dtype(precision: str, math_mode: str) -> str | None:
    """The grid of a GEMM measured in ``precision`` with ``math_mode``: ``bfloat16`` (bf16, fp16 on
    Tensor Cores), ``fp8``, ``fp8_block`` (math ``fp8_block128``) or None (fp32, tf32, CUDA-core math)."""
    if math_mode == "fp8_block128":
        return "fp8_block"
    if precision == "fp8" and math_mode.startswith("fp8"):
        return "fp8"
    if precision in ("fp16", "bf16") and math_mode == "tensor_op":
        return "bfloat16"
    return None


@dataclass(frozen=True)
class Grid:
    """One data type's ratio grid: axes ``m``, ``n``, ``k`` (ascending sizes) and per GPU the array
    ``log(T_gpu / T_BASE_GPU)`` of shape (len(m), len(n), len(k))."""

    dtype: str
    m: tuple
    n: tuple
    k: tuple
    ratios: dict  # GPU spec name -> numpy array

    @property
    def gpus(self) -> tuple[str, ...]:
        return (BASE_GPU,) + tuple(sorted(self.ratios))

    def log_ratio(self, gpu: str, m: float, n: float, k: float) -> float | None:
        """r_gpu(m, n, k) (module docstring), multilinear in (log m, log n, log k), clamped at the
        grid's edges; 0 for :data:`BASE_GPU`; None for a GPU the table did not measure."""
        if gpu == BASE_GPU:
            return 0.0
        a = self.ratios.get(gpu)
        if a is None:
            return None
        idx = []
        for axis, v in ((self.m, m), (self.n, n), (self.k, k)):
            x = math.log(min(max(v, axis[0]), axis[-1]))
            hi = next((i for i, s in enumerate(axis) if math.log(s) >= x), len(axis) - 1)
            lo = max(hi - 1, 0)
            w = 0.0 if hi == lo else (x - math.log(axis[lo])) / (math.log(axis[hi]) - math.log(axis[lo]))
            idx.append(((lo, 1.0 - w), (hi, w)))
        total = 0.0
        for i, wi in idx[0]:
            for j, wj in idx[1]:
                for l, wl in idx[2]:
                    if wi * wj * wl:
                        total += wi * wj * wl * float(a[i, j, l])
        return total


@lru_cache(maxsize=4)
def load_grids(path: str | None = None) -> dict[str, Grid]:
    """The shipped ratio grids (``db/reference/xgpu/ratio_grids.npz``, written by
    benchmarks/xgpu_grid.py) by data type; {} when none is installed."""
    import numpy as np

    if path is None:
        d = reference_dir()
        if d is None:
            return {}
        path = str(d / GRID_FILE)
    z = np.load(path, allow_pickle=False)
    out = {}
    for dt in sorted({key.split("/")[0] for key in z.files}):
        ratios = {key.split("/", 1)[1]: z[key].astype("float32") for key in z.files
                  if key.startswith(dt + "/") and key.split("/", 1)[1] not in ("m", "n", "k")}
        out[dt] = Grid(dt, tuple(int(v) for v in z[f"{dt}/m"]), tuple(int(v) for v in z[f"{dt}/n"]),
                       tuple(int(v) for v in z[f"{dt}/k"]), ratios)
    return out


def gemm_factor(origin: str, target: str, precision: str, math_mode: str, m: int, n: int, k: int,
                grids: dict | None = None) -> float | None:
    """T_target / T_origin of one GEMM C[m, n] = A[m, k] B[k, n] (module docstring), or None when no
    grid holds both GPUs (spec names, :mod:`benanza.analysis.gpus`) for this precision and math."""
    dt = grid_dtype(precision, math_mode)
    g = (load_grids() if grids is None else grids).get(dt) if dt else None
    if g is None:
        return None
    ro, rd = g.log_ratio(origin, m, n, k), g.log_ratio(target, m, n, k)
    if ro is None or rd is None:
        return None
    return math.exp(rd - ro)


def proxy_gpu(target, precision: str, math_mode: str, grids: dict | None = None) -> str | None:
    """For a GPU (a :class:`benanza.analysis.gpus.GpuSpec`) the grid of this precision and math does not
    hold: the grid's GPU of the same architecture closest to it (in SM count, then DRAM bandwidth), from
    which ``predict`` wave-scales to it (wave scaling within an architecture: docs/prediction.md); None
    when the grid holds no GPU of its architecture."""
    from benanza.analysis.gpus import find_gpu

    dt = grid_dtype(precision, math_mode)
    g = (load_grids() if grids is None else grids).get(dt) if dt else None
    if g is None or target.name in g.gpus:
        return None
    same = [find_gpu(name) for name in g.gpus]
    same = [s for s in same if s.architecture == target.architecture]
    if not same:
        return None
    return min(same, key=lambda s: (abs(s.sm_count - target.sm_count), abs(s.bandwidth - target.bandwidth))).name


@lru_cache(maxsize=2)
def load_errors(path: str | None = None) -> dict:
    """The validation's errors (``db/reference/xgpu/xgpu_errors.json``, benchmarks/xgpu_check.py
    --write): {"rows": [{"method", "dtype", "origin", "target", "architecture", "n", "mean", "median",
    "p90"}], ...}; {} when not installed."""
    if path is None:
        d = reference_dir()
        if d is None or not (d / ERRORS_FILE).is_file():
            return {}
        path = str(d / ERRORS_FILE)
    return json.loads(Path(path).read_text())


def validated_error(origin: str, target: str, dtype: str, method: str, table: dict | None = None) -> dict | None:
    """The measured error row of ``method`` (``grid``, ``model``, ``habitat``) from ``origin`` to ``target``
    in the grid data type ``dtype`` (or the fp32 model's ``fp32 linear`` / ``fp32 bmm``); for ``habitat`` and a target outside the tables, the row of the
    table's GPU of the same architecture if any, else None ("never validated")."""
    from benanza.analysis.gpus import find_gpu

    rows = (load_errors() if table is None else table).get("rows", [])
    same = [r for r in rows if r["method"] == method and r["dtype"] == dtype and r["origin"] == origin]
    for r in same:
        if r["target"] == target:
            return r
    if method != "habitat":
        return None
    try:
        arch = find_gpu(target).architecture
    except Exception:  # noqa: BLE001 - a target outside the spec table: never validated
        return None
    return next((r for r in same if r["architecture"] == arch), None)


def cross_gpu_lines(prediction) -> list[str]:
    """What ``benanza predict`` says of a prediction to another architecture (``prediction``: a
    :class:`benanza.analysis.predict.Prediction`): the share of the predicted time its GEMMs took from the
    public ratio grid with the error measured for that GPU and data type on held-out shapes, and the error
    the same table measured for wave scaling to that GPU's architecture, or "never validated"."""
    o, d = prediction.origin, prediction.target
    if o.architecture == d.architecture:
        return []
    lps = [lp for lp in prediction.layers if lp.status == "measured" and lp.predicted_ms is not None]
    total = sum(lp.predicted_ms for lp in lps) or 1.0
    out = []
    by_grid: dict[tuple, float] = {}
    for lp in lps:
        if lp.method.startswith(("grid", "model", "wave+")):
            key = (lp.grid, lp.via, lp.method.startswith("wave+"))
            by_grid[key] = by_grid.get(key, 0.0) + lp.predicted_ms
    for (dt, via, first), ms in sorted(by_grid.items()):
        to = via or d.name
        if dt.startswith("fp32"):
            frm = FP32_ORIGIN if first else o.name
            r = validated_error(frm, to, dt, "model")
            err = (f"measured error by {_folds()}-fold cross-validation over the table's shapes of 0.5 ms and more: "
                   f"mean {r['mean']:.1%}, median {r['median']:.1%}, 90th percentile {r['p90']:.1%} ({r['n']} "
                   f"shapes)") if r else "its error never validated"
            hop = (f"{o.name} -> {FP32_ORIGIN} by wave scaling within {o.architecture} (validated between Hopper "
                   f"GPUs: docs/prediction.md), then ") if first else ""
            line = (f"GEMMs ({ms / total:.1%} of the predicted time): {hop}{frm} -> {to} by the fp32 model of public "
                    f"measurements ({dt}, {FP32_SOURCE.split(',')[0]}); {err}")
        else:
            r = validated_error(o.name, to, dt, "grid")
            err = (f"measured error on shapes the grid never saw: mean {r['mean']:.1%}, median {r['median']:.1%}, "
                   f"90th percentile {r['p90']:.1%} ({r['n']} shapes)") if r else "its error never validated"
            line = (f"GEMMs ({ms / total:.1%} of the predicted time): {o.name} -> {to} ratio of public "
                    f"measurements ({dt} grid, {SOURCE.split(',')[0]}); {err}")
        if via:
            w = next((x for x in load_errors().get("rows", []) if x["method"] == "habitat" and x["dtype"] == dt
                      and {x["origin"], x["target"]} <= {"H100-SXM", "H200"}), None)
            line += (f"; then {via} -> {d.name} by wave scaling within {d.architecture} (per GEMM between H100-SXM "
                     f"and H200 on the public table: mean {w['mean']:.1%}; never validated on "
                     f"{d.architecture})" if w else f"; then {via} -> {d.name} by wave scaling, never validated")
        out.append(line)
    dt = _headline_grid(prediction.precision)
    wave = sum(lp.predicted_ms for lp in lps if lp.method == "wave")
    if wave:
        r, frm = _wave_error(o, d, dt)
        what = (f"measured across architectures on GEMMs only, to {r['target']} ({r['architecture']}) on the public "
                f"table{frm}: mean {r['mean']:.1%}, 90th percentile {r['p90']:.1%}") if r else \
            f"never validated from {o.architecture} to {d.architecture} in {prediction.precision}"
        out.append(f"other layers ({wave / total:.1%} of the predicted time): wave scaling across architectures; "
                   f"{what}")
    return out


def _wave_error(origin, target, dt: str | None) -> tuple[dict | None, str]:
    """The ``habitat`` (wave scaling) error row for ``origin`` -> ``target`` in table ``dt`` and how it is
    named: the origin's own row, else, for an origin of the architecture of the fp32 table's only origin
    (H100-SXM: an H200's fp32 GEMMs), that GPU's row, said so (wave scaling within Hopper was validated
    apart, docs/prediction.md); (None, "") where neither exists."""
    if not dt:
        return None, ""
    r = validated_error(origin.name, target.name, dt, "habitat")
    if r is not None or not dt.startswith("fp32") or origin.name == FP32_ORIGIN:
        return r, ""
    from benanza.analysis.gpus import find_gpu

    if find_gpu(FP32_ORIGIN).architecture != origin.architecture:
        return None, ""
    r = validated_error(FP32_ORIGIN, target.name, dt, "habitat")
    return r, (f", from {FP32_ORIGIN}, the table's GPU of the origin's architecture ({origin.architecture})"
               if r else "")


def _folds() -> int:
    """The number of cross-validation folds the error file's fp32 model rows were judged with."""
    return int(load_errors().get("fp32_folds", 5))


def _headline_grid(precision: str) -> str | None:
    """The table whose wave-scaling (``habitat``) row stands for a prediction in ``precision``: its Tensor
    Core GEMMs' grid (:func:`grid_dtype` of the precision's own math), ``fp32 linear`` (NeuSight's table,
    CUDA-core GEMMs) for fp32, None for tf32."""
    if precision == "fp32":
        return "fp32 linear"
    return grid_dtype(precision, "fp8" if precision == "fp8" else "tensor_op")


def training_cross_gpu_lines(origin, target, precision: str) -> list[str]:
    """What ``benanza predict --train`` says of a training step predicted to another architecture
    (``origin``, ``target``: :class:`benanza.analysis.gpus.GpuSpec`): its forward pass is ``predict``'s (its
    GEMMs from the public grid where it holds the GPUs), every other call is wave-scaled (the tables hold no
    gradients), with the GEMM error the table measured for wave scaling to that architecture, or "never
    validated"."""
    if origin.architecture == target.architecture:
        return []
    dt = _headline_grid(precision)
    r, frm = _wave_error(origin, target, dt)
    what = (f"measured across architectures on forward GEMMs only, to {r['target']} ({r['architecture']}) on the "
            f"public table{frm}: mean {r['mean']:.1%}, 90th percentile {r['p90']:.1%}") if r else \
        f"never validated from {origin.architecture} to {target.architecture} in {precision}"
    return [f"the step's calls after the forward pass (loss, gradients, optimizer): wave scaling across "
            f"architectures; {what}"]


# ---------------------------------------------------------------------- fp32: a model of NeuSight's table
#
# NeuSight's fp32 table (sitar-lab/NeuSight, MIT; db/reference/xgpu/README.md) measured scattered shapes of
# ``nn.Linear`` and ``torch.bmm`` with TF32 off (the SIMT sgemm kernels) on H100-SXM and on A100-PCIe-80GB,
# V100-PCIe-32GB and T4: no grid to interpolate. Per op and target GPU a model of y = log(T_target / T_H100)
# is fitted on the table's shapes: a ridge regression on the shape's log sizes, the H100's log time, the tile
# quantization of the sgemm tiles (128x128, 128x64, 64x64, 256x128, as the table's ``kernel`` column names
# them) on both GPUs' SMs and the arithmetic intensity, with their pairwise products, plus the mean of the
# regression's residuals at the shape's 8 nearest table shapes (inverse-distance weights in (log2 m, n, k,
# batch, H100 time)), all of it on kernel times: each eager time less the launch gap (FP32_GAP_MS).
# benchmarks/xgpu_check.py judges it by 5-fold cross-validation over shapes, on the eager times (gap added back).

FP32_FILE = "neusight_fp32_linear_bmm.csv.gz"
#: the fp32 table's source (db/reference/xgpu/README.md)
FP32_SOURCE = ("sitar-lab/NeuSight@6945927d9afcca2b9daf021f8395e53edc5b4eef, scripts/asplos/data/dataset/test "
               "(MIT): nn.Linear and torch.bmm in fp32, TF32 off, eager")
#: the GPU the fp32 model's ratios are relative to (the table's only Hopper GPU)
FP32_ORIGIN = "H100-SXM"
#: the host launch gap inside each eager time of the table (ms): the H100's floor the README gives (about
#: 0.05 ms for linear, 0.02 ms for bmm; db/reference/xgpu/README.md), linear's kept 15 % under the H100's
#: fastest call (0.053 ms) so that its kernel keeps a time, and taken as the same on every GPU of the table
#: (one PyTorch eager path). :func:`fp32_kernel_ms` takes it off both times before the model is fitted, so
#: the model's ratio is of kernel times and applies to benanza's launch-free times as they are.
FP32_GAP_MS = {"linear": 0.045, "bmm": 0.02}
#: the SIMT sgemm tiles (m x n) whose quantization the model sees (the table's ``kernel`` column)
FP32_TILES = ((128, 128), (128, 64), (64, 64), (256, 128))
FP32_NEIGHBOURS = 8
FP32_RIDGE = 1e-3


def fp32_shape(op: str, b, m, n, k):
    """The GEMM (m, n, k, batch) of one row of NeuSight's table: ``linear`` ``nn.Linear(N, K)`` on (B, M, N)
    is one product of m = B x M, n = K, k = N; ``bmm`` (B, M, N) x (B, N, K) is B products of (M, K, N)."""
    if op == "linear":
        return b * m, k, n, b * 0 + 1
    return m, k, n, b


def _fp32_linear(m, n, k, b, t_o, sms_o: int, sms_d: int):
    """The regression's linear features (rows of numpy arrays; t_o the H100's time, ms)."""
    import numpy as np

    m, n, k, b = (np.asarray(x, dtype=float) for x in (m, n, k, b))
    lm, ln, lk, lb = np.log2(m), np.log2(n), np.log2(k), np.log2(b)
    cols = [lm, ln, lk, lb, np.log2(np.asarray(t_o, dtype=float))]
    for tm, tn in FP32_TILES:
        tiles = np.ceil(m / tm) * np.ceil(n / tn) * b
        eff_o = tiles / (np.ceil(tiles / sms_o) * sms_o)
        eff_d = tiles / (np.ceil(tiles / sms_d) * sms_d)
        cols += [np.log2(eff_o / eff_d), np.log2(np.minimum(tiles / sms_d, 64.0))]
    cols.append(lm + ln + lk + lb - np.log2((m * k + n * k + m * n) * b * 4.0))  # FLOP per byte, log2
    return np.stack(cols, 1)


def _fp32_features(m, n, k, b, t_o, sms_o: int, sms_d: int):
    import numpy as np

    x = _fp32_linear(m, n, k, b, t_o, sms_o, sms_d)
    base = x[:, :5]
    quad = [base[:, i] * base[:, j] for i in range(5) for j in range(i, 5)]
    return np.concatenate([x, np.stack(quad, 1)], 1), x[:, :5]


@dataclass(frozen=True)
class Fp32Model:
    """y = log(T_target / T_H100) of one op (``linear``, ``bmm``) and target GPU: ridge weights ``w`` on
    standardized features (mean ``mu``, deviation ``sd``), the training shapes ``points`` (log2 m, n, k,
    batch, H100 time) and the regression's residuals there, ``resid``; ``y_range``: the lowest and highest y
    the table measured, which bound the model's y (no extrapolation past them)."""

    op: str
    target: str
    sms_o: int
    sms_d: int
    mu: object
    sd: object
    w: object
    points: object
    resid: object
    y_range: tuple = (-math.inf, math.inf)

    def _ridge(self, x):
        import numpy as np

        z = np.concatenate([np.ones((len(x), 1)), (x - self.mu) / self.sd], 1)
        return z @ self.w

    def log_ratio(self, m, n, k, b, t_o):
        """y at the shapes (numpy arrays or scalars; t_o the H100's time, ms, as the model was fitted)."""
        import numpy as np

        x, p = _fp32_features(np.atleast_1d(m), np.atleast_1d(n), np.atleast_1d(k), np.atleast_1d(b),
                              np.atleast_1d(t_o), self.sms_o, self.sms_d)
        d2 = ((p[:, None, :] - self.points[None, :, :]) ** 2).sum(-1)
        idx = np.argsort(d2, 1)[:, :FP32_NEIGHBOURS]
        wt = 1.0 / (np.sqrt(np.take_along_axis(d2, idx, 1)) + 0.05)
        y = self._ridge(x) + (self.resid[idx] * wt).sum(1) / wt.sum(1)
        return np.clip(y, *self.y_range)


def fit_fp32(op: str, target: str, m, n, k, b, t_o, t_d) -> Fp32Model:
    """The model (module section above) of ``op`` to ``target`` fitted on shapes (numpy arrays) with the
    H100's times ``t_o`` and the target's ``t_d`` (ms; :func:`load_fp32_models` gives kernel times)."""
    import numpy as np

    from benanza.analysis.gpus import find_gpu

    so, sd = find_gpu(FP32_ORIGIN).sm_count, find_gpu(target).sm_count
    x, p = _fp32_features(m, n, k, b, t_o, so, sd)
    y = np.log(np.asarray(t_d, dtype=float) / np.asarray(t_o, dtype=float))
    mu, dev = x.mean(0), x.std(0) + 1e-9
    z = np.concatenate([np.ones((len(x), 1)), (x - mu) / dev], 1)
    a = z.T @ z + FP32_RIDGE * len(y) * np.eye(z.shape[1])
    a[0, 0] -= FP32_RIDGE * len(y)  # the intercept is not shrunk
    w = np.linalg.solve(a, z.T @ y)
    model = Fp32Model(op, target, so, sd, mu, dev, w, p, np.zeros(len(y)))
    return Fp32Model(op, target, so, sd, mu, dev, w, p, y - model._ridge(x), (float(y.min()), float(y.max())))


def load_fp32_table(path: str | None = None) -> dict:
    """NeuSight's table (``db/reference/xgpu/neusight_fp32_linear_bmm.csv.gz``) as {op: {(B, M, N, K):
    {gpu: ms}}}; {} when not installed."""
    import csv
    import gzip

    if path is None:
        d = reference_dir()
        if d is None or not (d / FP32_FILE).is_file():
            return {}
        path = str(d / FP32_FILE)
    out: dict = {}
    with gzip.open(path, "rt", newline="") as f:
        for r in csv.DictReader(f):
            if r["gpu"]:
                key = (int(r["B"]), int(r["M"]), int(r["N"]), int(r["K"]))
                out.setdefault(r["op"], {}).setdefault(key, {})[r["gpu"]] = float(r["ms"])
    return out


def fp32_kernel_ms(op: str, eager_ms):
    """The kernel's part of the table's eager times (numpy array, ms): less the launch gap
    :data:`FP32_GAP_MS`, and never under a tenth of the eager time."""
    import numpy as np

    t = np.asarray(eager_ms, dtype=float)
    return np.maximum(t - FP32_GAP_MS[op], 0.1 * t)


def fp32_training_set(table: dict, op: str, target: str):
    """The shapes of ``op`` measured on both H100-SXM and ``target``: arrays (m, n, k, batch, t_H100,
    t_target)."""
    import numpy as np

    rows = [(key, v[FP32_ORIGIN], v[target]) for key, v in sorted(table.get(op, {}).items())
            if FP32_ORIGIN in v and target in v]
    if not rows:
        return None
    bmnk = np.array([r[0] for r in rows], dtype=float)
    m, n, k, b = fp32_shape(op, bmnk[:, 0], bmnk[:, 1], bmnk[:, 2], bmnk[:, 3])
    return m, n, k, b, np.array([r[1] for r in rows]), np.array([r[2] for r in rows])


@lru_cache(maxsize=2)
def load_fp32_models(path: str | None = None) -> dict:
    """The fp32 models fitted on the whole shipped table's kernel times (:func:`fp32_kernel_ms`), by (op,
    target GPU); {} when not installed."""
    table = load_fp32_table(path)
    out = {}
    for op in sorted(table):
        gpus = sorted({g for v in table[op].values() for g in v} - {FP32_ORIGIN})
        for g in gpus:
            s = fp32_training_set(table, op, g)
            if s is not None and len(s[0]) >= 2 * FP32_NEIGHBOURS:
                m, n, k, b, t_o, t_d = s
                out[(op, g)] = fit_fp32(op, g, m, n, k, b, fp32_kernel_ms(op, t_o), fp32_kernel_ms(op, t_d))
    return out


def fp32_op(config) -> str:
    """The table op a GEMM layer stands for: ``bmm`` for batched products, else ``linear``."""
    return "bmm" if getattr(config, "batch_count", 1) > 1 else "linear"


def fp32_factor(origin: str, target: str, precision: str, math_mode: str, config, time_ms: float,
                models: dict | None = None) -> float | None:
    """T_target / T_origin of one fp32 CUDA-core GEMM layer (``GemmConfig``; ``time_ms`` its launch-free
    time on the origin, ms) from the fp32 model (a ratio of kernel times: :func:`load_fp32_models`), or None
    when the origin is not H100-SXM, the layer is not fp32 on CUDA cores (math ``fma`` / ``none``) or no
    model holds the target."""
    if origin != FP32_ORIGIN or precision != "fp32" or math_mode not in ("fma", "none") or not time_ms:
        return None
    op = fp32_op(config)
    model = (load_fp32_models() if models is None else models).get((op, target))
    if model is None:
        return None
    return math.exp(float(model.log_ratio(config.m, config.n, config.k, getattr(config, "batch_count", 1),
                                          time_ms)[0]))


def fp32_proxy(target, models: dict | None = None, op: str = "linear") -> str | None:
    """For a GPU (``GpuSpec``) no fp32 model holds: the model's target of the same architecture closest in
    SMs (then DRAM bandwidth), or None."""
    from benanza.analysis.gpus import find_gpu

    have = sorted({g for (o, g) in (load_fp32_models() if models is None else models) if o == op})
    if target.name in have:
        return None
    same = [s for s in (find_gpu(g) for g in have) if s.architecture == target.architecture]
    if not same:
        return None
    return min(same, key=lambda s: (abs(s.sm_count - target.sm_count), abs(s.bandwidth - target.bandwidth))).name
