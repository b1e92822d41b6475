"""The roofline of a model's layers, computed (Williams, Waterman, Patterson, CACM 2009;
:func:`benanza.analysis.roofline.bound`): per measured layer its arithmetic intensity (FLOP/byte),
achieved rate (FLOP/s), roofline bound (ms) and library efficiency (bound / best measured time), and
the model's bound; the layers far above their roofline. Drawn by :mod:`benanza.reports.chart`.

Launch-overhead floor: no kernel launch takes less than :data:`LAUNCH_FLOOR_US` (2 µs) on current
NVIDIA GPUs with a CUDA-graph or back-to-back launch; ``attainable_ms`` = max(bound, floor).
"""
from __future__ import annotations

from dataclasses import dataclass

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
    #: layers without a valid measurement (Analysis.missing): the LBL is a partial sum when above 0
    missing_layers: int = 0

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
                "missing_layers": self.missing_layers, "lbl_sequential_ms": self.lbl_sequential_ms, "lbl_parallel_ms": self.lbl_parallel_ms,
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
                         analysis.lbl_ms, analysis.lbl_text(3), analysis.complete, analysis.cache,
                         len(analysis.missing))


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
