"""Roofline of a model's layers: the table (roofline bound and library efficiency per layer and per
model) and the chart (matplotlib, Agg backend; PNG and SVG).

Per layer (Williams, Waterman, Patterson, CACM 2009; :func:`benanza.analysis.roofline.bound`): arithmetic
intensity x = FLOPs / minimum bytes (FLOP/byte); achieved rate = FLOPs / best measured time
(FLOP/s); the roofline bound = max(FLOPs / peak, bytes / bandwidth) with the peak of the math the
best measurement used (Tensor Core peak of the precision for ``tensor_op``/``tf32``/``fp8`` math,
the FP32 CUDA-core peak otherwise); library efficiency = bound / best measured time (1 = at the roof).

Launch-overhead floor: no kernel launch takes less than :data:`LAUNCH_FLOOR_US` (2 µs) on current
NVIDIA GPUs with a CUDA-graph or back-to-back launch, so a layer's achieved rate is at most
FLOPs / 2 µs, wherever the roofs lie; ``attainable_ms`` = max(bound, floor). It depends on the
layer's FLOPs, not only on x, so the chart does not draw it in the plot area: layers whose best time
is within 2x the floor get a grey ring, and a note under the axes says what the ring means.

L2 roof: :func:`benanza.analysis.roofline.l2_roof` (``benanza ceilings``' measured L2 bandwidth when
stored, else an estimate; the legend says which). Every point carries an SVG ``<title>`` tooltip
(layer, call, algorithm, time, FLOPs, bytes; :func:`add_svg_titles`).

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
    #: a memory-bound layer whose working set stays in L2 between warm calls: its DRAM bound is no bound
    #: (:func:`benanza.analysis.roofline.l2_resident`; ``limit`` says ``memory, L2-resident``)
    l2_resident: bool = False

    @property
    def above_roof(self) -> bool:
        """Faster than its roofline bound (efficiency above 100 %): a bound that does not hold."""
        return self.efficiency > 1.0

    def to_dict(self) -> dict:
        return {**self.__dict__, "above_roof": self.above_roof}


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
    l2: roofline.L2Roof | None = None
    calls: dict | None = None  # layer index -> (call, algorithm, math, layout) of its best measurement
    #: the headline LBL (Analysis.lbl_ms: fused, critical path), what it is, and whether it is whole
    lbl_ms: float = 0.0
    lbl_text: str = ""
    complete: bool = True
    #: the measurements' cache state (warm: back-to-back calls; cold: L2 flushed before each call)
    cache: str = "warm"

    @property
    def efficiency(self) -> float:
        """Library efficiency of the model's layers: their roofline bounds' sum / their measured
        times' sum (the unfused sequential sum, :attr:`lbl_sequential_ms`: each layer against its own
        bound, so fused calls do not enter)."""
        return self.bound_sequential_ms / self.lbl_sequential_ms if self.lbl_sequential_ms else 0.0

    def to_dict(self) -> dict:
        return {"model": self.model, "batch": self.batch, "precision": self.precision, "gpu": self.gpu.name,
                "ceilings": self.ceilings, "ceilings_source": self.gpu.source,
                "launch_floor_us": LAUNCH_FLOOR_US,
                "roofline_bound_sequential_ms": self.bound_sequential_ms,
                "roofline_bound_parallel_ms": self.bound_parallel_ms,
                "attainable_sequential_ms": self.attainable_sequential_ms,
                "lbl_ms": self.lbl_ms, "lbl_text": self.lbl_text, "complete": self.complete,
                "lbl_sequential_ms": self.lbl_sequential_ms, "lbl_parallel_ms": self.lbl_parallel_ms,
                "l2_bytes_per_s": self.l2.bytes_per_s if self.l2 else None,
                "l2_source": self.l2.source if self.l2 else None,
                "library_efficiency": self.efficiency, "cache": self.cache,
                "l2_resident_layers": sum(1 for x in self.layers if x.l2_resident),
                "above_roof_layers": sum(1 for x in self.layers if x.above_roof),
                "layers": [x.to_dict() for x in self.layers]}


def model_roofline(analysis: Analysis, gpu: GpuSpec, ceilings: str = "spec",
                   l2: roofline.L2Roof | None = None) -> ModelRoofline:
    """Roofline bound and library efficiency of every measured layer of ``analysis`` on ``gpu``'s
    ceilings: ``ceilings`` names where they come from (``spec``: the datasheet table of
    :mod:`benanza.analysis.gpus`; ``measured``: :func:`benanza.analysis.gpus.with_measured_ceilings`).
    ``l2``: the L2 roof drawn (default: :func:`benanza.analysis.roofline.l2_roof`'s estimate for ``gpu``)."""
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
        resident = rp.limit == "memory" and roofline.l2_resident(rp.bytes, gpu.l2_bytes, analysis.cache)
        out.append(LayerRoofline(ly.index, ly.name, ly.config.kind, rp.flops, rp.bytes, rp.intensity,
                                 rp.flops / (lt.time_ms * 1e-3), key, roofline.roof_label(rp.limit, resident),
                                 rp.bound_ms, att, lt.time_ms, rp.bound_ms / lt.time_ms, lt.time_ms / total,
                                 resident))
    par, _ = critical_path(edges_of(analysis), weights)
    calls = {lt.layer.index: (lt.call, lt.algorithm, lt.math, lt.layout) for lt in analysis.layers
             if lt.status == "measured"}
    return ModelRoofline(analysis.model, analysis.batch, p, gpu, ceilings, out, sum(weights), par,
                         sum(x.attainable_ms for x in out), analysis.lbl_sequential_ms, analysis.lbl_parallel_ms,
                         l2 or roofline.l2_roof(gpu.sm_count, gpu.boost_clock_mhz), calls,
                         analysis.lbl_ms, analysis.lbl_text(3), analysis.complete, analysis.cache)


#: a layer whose best time exceeds this many times its attainable roofline time is listed by
#: ``analyze`` ("far from the roofline", docs/timing.md)
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


def _layer_title(mr: ModelRoofline, x: LayerRoofline) -> str:
    """The tooltip of a layer's point on the classic chart."""
    call, algo, math, layout = (mr.calls or {}).get(x.index, ("?", "?", "?", "?"))
    return (f"#{x.index} {x.name} ({x.kind})\n{call} / {algo} ({math}, {layout})\n"
            f"{x.measured_ms * 1e3:.2f} µs (bound {x.bound_ms * 1e3:.2f} µs, {x.limit}), "
            f"{x.flops / 1e9:.4g} GFLOP, {x.bytes / 1e6:.4g} MB, {x.intensity:.3g} FLOP/B")


def render(mr: ModelRoofline, png: Path | None = None, svg: Path | None = None) -> list[Path]:
    """Draw ``mr`` as a log-log roofline (x: FLOP/byte, y: FLOP/s): the DRAM and L2 roofs, one flat
    roof per math peak used, each layer a point sized by its share of the LBL and coloured by kind,
    with an SVG ``<title>`` tooltip; layers within 2x the launch floor ringed in grey (the floor
    itself is explained under the axes, not drawn in them). Layers without FLOPs (copies) cannot
    sit on a log axis: counted in the title. Writes ``png`` and/or ``svg``; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    pts = [x for x in mr.layers if x.flops > 0 and x.bytes > 0]
    skipped = len(mr.layers) - len(pts)
    fig, ax = plt.subplots(figsize=(9, 6.6))
    xs = [x.intensity for x in pts] or [1.0]
    lo, hi = min(xs) / 4, max(max(xs) * 4, 4 * mr.gpu.ridge("fp32"))
    peaks = sorted({x.peak for x in pts} | {"fp32"}, key=lambda k: mr.gpu.peak_flops(k))
    grid = np.logspace(np.log10(lo), np.log10(hi), 200)
    for k in peaks:
        pk = mr.gpu.peak_flops(k)
        ax.plot(grid, np.minimum(pk, mr.gpu.bandwidth * grid), lw=1.5, color=("crimson", "navy", "darkgreen", "purple")[peaks.index(k) % 4],
                label=f"{k} peak {pk / 1e12:.0f} TFLOP/s" + ("" if k == "fp32" else " (Tensor Cores, dense)"))
    top = max(mr.gpu.peak_flops(k) for k in peaks)
    ax.plot(grid, np.minimum(top, mr.gpu.bandwidth * grid), "k--", lw=0.8, label=f"DRAM {mr.gpu.bandwidth / 1e12:.2f} TB/s")
    l2 = mr.l2 or roofline.l2_roof(mr.gpu.sm_count, mr.gpu.boost_clock_mhz)
    ax.plot(grid, np.minimum(top, l2.bytes_per_s * grid), color="0.35", ls=":", lw=1.0, label=l2.label)
    kinds = sorted({x.kind for x in pts})
    cmap = plt.get_cmap("Set2")
    titles: dict[str, list[str]] = {}
    floor_ms = LAUNCH_FLOOR_US * 1e-3
    for i, kind in enumerate(kinds):
        sel = [x for x in pts if x.kind == kind]
        sc = ax.scatter([x.intensity for x in sel], [x.achieved_flops_per_s for x in sel],
                        s=[20 + 2000 * x.lbl_share for x in sel], color=cmap(i % 8), alpha=0.6,
                        edgecolors=["0.45" if x.measured_ms < 2 * floor_ms else "k" for x in sel],
                        linewidths=[1.6 if x.measured_ms < 2 * floor_ms else 0.3 for x in sel], label=kind)
        gid = f"bz-classic-{i}"
        sc.set_gid(gid)
        titles[gid] = [_layer_title(mr, x) for x in sel]
    near = sum(1 for x in pts if x.measured_ms < 2 * floor_ms)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, minimum bytes)")
    ax.set_ylabel("achieved FLOP/s (FLOPs / best measured time)")
    ax.set_title(f"{mr.model} batch {mr.batch} {mr.precision} on {mr.gpu.name} ({mr.ceilings} ceilings): "
                 f"LBL {mr.lbl_text or f'{mr.lbl_ms:.3f} ms'}; roofline {mr.bound_sequential_ms:.3f} ms against "
                 f"the layers' {mr.lbl_sequential_ms:.3f} ms, efficiency {mr.efficiency:.0%}" + (f"; {skipped} layers without FLOPs not drawn" if skipped else ""),
                 fontsize=9)
    ax.grid(True, which="both", lw=0.3, alpha=0.5)
    ax.legend(fontsize=7, loc="upper left")
    fig.text(0.01, 0.01, f"launch floor: no kernel takes under {LAUNCH_FLOOR_US:g} µs, so a layer's rate is at most "
                         f"FLOPs / {LAUNCH_FLOOR_US:g} µs; grey ring: best time within 2x the floor ({near} layers)",
             fontsize=7, color="0.3")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    written = save_figure(fig, png, svg, titles)
    plt.close(fig)
    return written


SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"


def add_svg_titles(svg: str, titles: dict[str, list[str]]) -> str:
    """``svg`` (as matplotlib writes it, less its RDF ``<metadata>``) with a ``<title>`` child in each marker of every group whose
    id is a key of ``titles``, the i-th marker (``<use>`` or ``<path>`` outside ``<defs>``, in
    drawing order) getting the i-th text. The texts are escaped by the XML writer (model strings
    are untrusted). Raises ValueError when a group is missing or its marker count differs."""
    import xml.etree.ElementTree as ET

    ET.register_namespace("", SVG_NS)
    ET.register_namespace("xlink", XLINK_NS)
    root = ET.fromstring(svg)
    for meta in root.findall(f"{{{SVG_NS}}}metadata"):
        root.remove(meta)  # matplotlib's RDF block names external vocabularies; a chart needs none of it
    groups = {g.get("id"): g for g in root.iter(f"{{{SVG_NS}}}g") if g.get("id") in titles}
    for gid, texts in titles.items():
        g = groups.get(gid)
        if g is None:
            raise ValueError(f"SVG group {gid} not found")
        defs = {id(e) for d in g.iter(f"{{{SVG_NS}}}defs") for e in d.iter()}
        marks = [e for e in g.iter() if e.tag in (f"{{{SVG_NS}}}use", f"{{{SVG_NS}}}path") and id(e) not in defs]
        if len(marks) != len(texts):
            raise ValueError(f"SVG group {gid}: {len(marks)} markers for {len(texts)} titles")
        for e, text in zip(marks, texts):
            t = ET.Element(f"{{{SVG_NS}}}title")
            t.text = text
            e.insert(0, t)
    return '<?xml version="1.0" encoding="utf-8" standalone="no"?>\n' + ET.tostring(root, encoding="unicode")


def save_figure(fig, png: Path | None, svg: Path | None, titles: dict[str, list[str]] | None = None) -> list[Path]:
    """Write ``fig`` as PNG and/or SVG (the SVG with the point ``titles`` of :func:`add_svg_titles`);
    each file is written whole or not at all (a temporary file renamed). Returns the paths written."""
    import io

    from benanza.database.exports import write_atomic

    written = []
    for fmt, path in (("png", png), ("svg", svg)):
        if path is None:
            continue
        path = Path(path)
        buf = io.BytesIO() if fmt == "png" else io.StringIO()
        fig.savefig(buf, format=fmt, dpi=120, metadata={"Date": None} if fmt == "svg" else None)
        data = buf.getvalue() if fmt == "png" else add_svg_titles(buf.getvalue(), titles or {}).encode("utf-8")
        written.append(write_atomic(data, path))
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
