"""Roofline of a model's layers: the table (roofline bound and library efficiency per layer and per
model) and the chart (matplotlib, Agg backend; PNG and SVG).

Per layer (Williams, Waterman, Patterson, CACM 2009; :func:`benanza.analysis.roofline.bound`): arithmetic
intensity x = FLOPs / minimum bytes (FLOP/byte); achieved rate = FLOPs / best measured time
(FLOP/s); the roofline bound = max(FLOPs / peak, bytes / bandwidth) with the peak of the math the
best measurement used (Tensor Core peak of the precision for ``tensor_op``/``tf32``/``fp8`` math,
the FP32 CUDA-core peak otherwise); library efficiency = bound / best measured time (1 = at the roof).

Launch-overhead floor: no kernel launch takes less than :data:`LAUNCH_FLOOR_US` (2 µs) on current
NVIDIA GPUs with a CUDA-graph or back-to-back launch, so a layer's achieved rate is at most
FLOPs / 2 µs, wherever the roofs lie. It depends on the layer's FLOPs, not only on x, so the chart
draws it as a short grey bar above each layer's point; ``attainable_ms`` = max(bound, floor).

Ceilings: the spec table's datasheet figures (:mod:`benanza.analysis.gpus`) until benanza measures the
GPU's own ceilings; every output says which were used.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from benanza.analysis import roofline
from benanza.analysis.analyzer import Analysis, critical_path
from benanza.analysis.gpus import GpuSpec
from benanza.analysis.predict import edges_of, math_peak_key

#: minimum time of one kernel (µs): the launch-overhead floor
LAUNCH_FLOOR_US = 2.0


@dataclass
class LayerRoofline:
    """A measured layer on the roofline: FLOPs, bytes, intensity (FLOP/byte), achieved FLOP/s, the
    roof it sits under (``compute``/``memory``), the math peak used, bound and attainable (ms), best
    measured (ms), library efficiency (bound / measured) and its share of the LBL."""

    index: int
    name: str
    kind: str
    flops: int
    bytes: int
    intensity: float
    achieved_flops_per_s: float
    peak: str
    limit: str
    bound_ms: float
    attainable_ms: float
    measured_ms: float
    efficiency: float
    lbl_share: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class ModelRoofline:
    """The model's roofline bound (sum and critical path of the layer bounds, ms) against its LBL."""

    model: str
    batch: int
    precision: str
    gpu: GpuSpec
    ceilings: str
    layers: list[LayerRoofline]
    bound_sequential_ms: float
    bound_parallel_ms: float
    attainable_sequential_ms: float
    lbl_sequential_ms: float
    lbl_parallel_ms: float

    @property
    def efficiency(self) -> float:
        """Library efficiency of the model: roofline bound / LBL (sequential)."""
        return self.bound_sequential_ms / self.lbl_sequential_ms if self.lbl_sequential_ms else 0.0

    def to_dict(self) -> dict:
        return {"model": self.model, "batch": self.batch, "precision": self.precision, "gpu": self.gpu.name,
                "ceilings": self.ceilings, "ceilings_source": self.gpu.source,
                "launch_floor_us": LAUNCH_FLOOR_US,
                "roofline_bound_sequential_ms": self.bound_sequential_ms,
                "roofline_bound_parallel_ms": self.bound_parallel_ms,
                "attainable_sequential_ms": self.attainable_sequential_ms,
                "lbl_sequential_ms": self.lbl_sequential_ms, "lbl_parallel_ms": self.lbl_parallel_ms,
                "library_efficiency": self.efficiency, "layers": [x.to_dict() for x in self.layers]}


def model_roofline(analysis: Analysis, gpu: GpuSpec, ceilings: str = "spec") -> ModelRoofline:
    """Roofline bound and library efficiency of every measured layer of ``analysis`` on ``gpu``'s
    ceilings: ``ceilings`` names where they come from (``spec``: the datasheet table of
    :mod:`benanza.analysis.gpus`; ``measured``: :func:`benanza.analysis.gpus.with_measured_ceilings`)."""
    p = analysis.precision
    out: list[LayerRoofline] = []
    weights = [0.0] * len(analysis.layers)
    total = analysis.lbl_sequential_ms or 1.0
    for lt in analysis.layers:
        if lt.status != "measured" or lt.conversion:
            continue
        ly = lt.layer
        key = math_peak_key(lt.math, p) or "fp32"
        rp = roofline.bound(ly.config, p, roofline.Ceilings(gpu.peak_flops(key), gpu.bandwidth))
        att = max(rp.bound_ms, LAUNCH_FLOOR_US * 1e-3)
        weights[ly.index] = rp.bound_ms
        out.append(LayerRoofline(ly.index, ly.name, ly.config.kind, rp.flops, rp.bytes, rp.intensity,
                                 rp.flops / (lt.time_ms * 1e-3), key, rp.limit, rp.bound_ms, att, lt.time_ms,
                                 rp.bound_ms / lt.time_ms, lt.time_ms / total))
    par, _ = critical_path(edges_of(analysis), weights)
    return ModelRoofline(analysis.model, analysis.batch, p, gpu, ceilings, out, sum(weights), par,
                         sum(x.attainable_ms for x in out), analysis.lbl_sequential_ms, analysis.lbl_parallel_ms)


#: a layer whose best time exceeds this many times its attainable roofline time is listed by
#: ``analyze`` (issue 14: "far from the roofline")
FAR_FACTOR = 4.0


def roofline_outliers(analysis: Analysis, database, system, factor: float = FAR_FACTOR) -> list[dict]:
    """The measured layers of ``analysis`` whose best time is above ``factor`` x their attainable
    roofline time (the bound of :func:`benanza.analysis.roofline.bound`, or the launch floor when higher), on
    the ceilings ``benanza ceilings`` measured on ``system`` or else its datasheet figures, largest
    share of the LBL first. Each: index, name, what, call, time_ms, bound_ms, ratio, share,
    factor, ceilings. [] when the GPU is not in the spec table (benanza/analysis/gpus.py)."""
    from benanza.errors import UsageError
    from benanza.analysis.gpus import find_gpu, with_measured_ceilings

    try:
        spec = find_gpu(system.gpu_name)
    except UsageError:
        return []
    measured = database.ceilings(system.id)
    kind = "spec"
    if "dram_bandwidth" in measured:
        spec, kind = with_measured_ceilings(spec, measured), "measured"
    mr = model_roofline(analysis, spec, kind)
    total = analysis.lbl_sequential_ms or 1.0
    by_index = {t.layer.index: t for t in analysis.layers}
    out = []
    for x in mr.layers:
        ratio = x.measured_ms / x.attainable_ms if x.attainable_ms > 0 else float("inf")
        if ratio > factor:
            t = by_index[x.index]
            out.append({"index": x.index, "name": x.name, "what": t.layer.config.describe(), "call": t.call,
                        "time_ms": x.measured_ms, "bound_ms": x.attainable_ms, "ratio": ratio,
                        "share": x.measured_ms / total, "factor": factor,
                        "ceilings": f"{kind} ceilings of the {spec.name}"})
    return sorted(out, key=lambda r: -r["share"])


def render(mr: ModelRoofline, png: Path | None = None, svg: Path | None = None) -> list[Path]:
    """Draw ``mr`` as a log-log roofline (x: FLOP/byte, y: FLOP/s): the bandwidth roof, one flat
    roof per math peak used, each layer a point sized by its share of the LBL and coloured by kind,
    its launch floor a grey bar. Layers without FLOPs (copies) cannot sit on a log axis: counted in
    the title. Writes ``png`` and/or ``svg``; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = [x for x in mr.layers if x.flops > 0 and x.bytes > 0]
    skipped = len(mr.layers) - len(pts)
    fig, ax = plt.subplots(figsize=(9, 6))
    xs = [x.intensity for x in pts] or [1.0]
    lo, hi = min(xs) / 4, max(max(xs) * 4, 4 * mr.gpu.ridge("fp32"))
    peaks = sorted({x.peak for x in pts} | {"fp32"}, key=lambda k: mr.gpu.peak_flops(k))
    import numpy as np

    grid = np.logspace(np.log10(lo), np.log10(hi), 200)
    for k in peaks:
        pk = mr.gpu.peak_flops(k)
        ax.plot(grid, np.minimum(pk, mr.gpu.bandwidth * grid), lw=1.5, color=("crimson", "navy", "darkgreen", "purple")[peaks.index(k) % 4],
                label=f"{k} peak {pk / 1e12:.0f} TFLOP/s" + ("" if k == "fp32" else " (Tensor Cores, dense)"))
    ax.plot(grid, mr.gpu.bandwidth * grid, "k--", lw=0.8, label=f"DRAM {mr.gpu.bandwidth / 1e12:.2f} TB/s")
    kinds = sorted({x.kind for x in pts})
    cmap = plt.get_cmap("Set2")
    for i, kind in enumerate(kinds):
        sel = [x for x in pts if x.kind == kind]
        ax.scatter([x.intensity for x in sel], [x.achieved_flops_per_s for x in sel],
                   s=[20 + 2000 * x.lbl_share for x in sel], color=cmap(i % 8), alpha=0.6,
                   edgecolors="k", linewidths=0.3, label=kind)
    floor = [(x.intensity, x.flops / (LAUNCH_FLOOR_US * 1e-6)) for x in pts]
    if floor:
        ax.scatter(*zip(*floor), marker="_", color="0.5", s=60,
                   label=f"launch floor: FLOPs / {LAUNCH_FLOOR_US:g} µs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, minimum bytes)")
    ax.set_ylabel("achieved FLOP/s (FLOPs / best measured time)")
    ax.set_title(f"{mr.model} batch {mr.batch} {mr.precision} on {mr.gpu.name} ({mr.ceilings} ceilings): "
                 f"LBL {mr.lbl_sequential_ms:.3f} ms, roofline {mr.bound_sequential_ms:.3f} ms, "
                 f"efficiency {mr.efficiency:.0%}" + (f"; {skipped} layers without FLOPs not drawn" if skipped else ""),
                 fontsize=9)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    written = []
    for fmt, path in (("png", png), ("svg", svg)):
        if path is not None:
            fig.savefig(Path(path), format=fmt, dpi=120)
            written.append(Path(path))
    plt.close(fig)
    return written


def svg_text(mr: ModelRoofline) -> str:
    """The roofline chart of ``mr`` as an inline ``<svg>`` element (for the HTML report): the
    SVG matplotlib writes, without its XML prolog."""
    import re
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "roofline.svg"
        render(mr, svg=path)
        text = path.read_text(encoding="utf-8")
    start = text.find("<svg")
    text = text[start:] if start >= 0 else ""
    # the RDF metadata block names external vocabularies; the chart needs none of it
    return re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.S)
