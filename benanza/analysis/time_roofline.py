"""The time-based roofline of a model, computed: every measured implementation of every layer as a
point of run time against the layer's FLOPs and against its bytes, under ceilings as lines of time
(Wang, Yang, Farrell, Zhang, Kurth and Williams, "Time-Based Roofline for Deep Learning Performance
Analysis", 2020, arXiv:2009.04598; :mod:`benanza.reports.time_chart` draws and prints it, and says
the method in full)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from benanza import kinds as L
from benanza.analysis import roofline
from benanza.analysis.analyzer import Analysis
from benanza.analysis.gpus import GpuSpec
from benanza.analysis.layer_roofline import LAUNCH_FLOOR_US
from benanza.analysis.predict import math_peak_key
from benanza.database.counters import read_counters, summarize
from benanza.database.query import Serves
from benanza.database.records import ESTIMATED_STATUSES, estimated_ms

#: measurement statuses drawn: valid ones, and those with an estimate only: screened (one replay) and
#: raced out (the race's screen samples), their time read from the harness's message
DRAWN_STATUSES = ("ok", *ESTIMATED_STATUSES)


def row_time(m) -> float | None:
    """A drawn row's time (ms): a valid row's median, a screened or raced-out row's estimate."""
    return m.median_ms if m.status == "ok" else estimated_ms(m.status, m.message)


@dataclass(frozen=True)
class ImplPoint:
    """One measured implementation of a layer config: its call, algorithm, math mode and layout,
    its median time (ms), its status (``ok``, ``screened``, ``raced_out``, or ``rejected``: an fp32 GEMM faster
    than FMA math allows) and whether it is the layer's chosen implementation."""

    call: str
    algorithm: str
    math: str
    layout: str
    time_ms: float
    status: str
    chosen: bool = False

    @property
    def valid(self) -> bool:
        return self.status == "ok"

    def to_dict(self) -> dict:
        return {"call": self.call, "algorithm": self.algorithm, "math": self.math, "layout": self.layout,
                "time_ms": self.time_ms, "status": self.status, "chosen": self.chosen}


@dataclass
class LayerPoints:
    """A unique layer config of the model: the layers that have it (index, name), its FLOPs and
    minimum bytes, and every implementation measured for it."""

    key: str
    kind: str
    what: str
    precision: str
    layers: tuple[tuple[int, str], ...]
    flops: int
    bytes: int
    points: list[ImplPoint] = field(default_factory=list)
    counters: dict | None = None  # the chosen implementation's hardware counters, when profiled

    @property
    def chosen(self) -> ImplPoint | None:
        return next((p for p in self.points if p.chosen), None)

    @property
    def best_ms(self) -> float | None:
        """The fastest valid time (ms), None when no implementation is valid."""
        return min((p.time_ms for p in self.points if p.valid), default=None)

    def to_dict(self) -> dict:
        return {"key": self.key, "kind": self.kind, "description": self.what, "precision": self.precision,
                "layers": [{"index": i, "name": n} for i, n in self.layers], "flops": self.flops,
                "bytes": self.bytes, "best_ms": self.best_ms, "points": [p.to_dict() for p in self.points],
                "counters": self.counters}


@dataclass(frozen=True)
class TimeRoof:
    """A ceiling as a line of time: ``t = work / rate``; ``axis`` is ``flops`` (rate in FLOP/s) or
    ``bytes`` (bytes/s)."""

    name: str
    axis: str
    rate: float
    label: str

    def time_ms(self, work: float) -> float:
        """The ceiling's time (ms) for ``work`` FLOPs or bytes."""
        return work / self.rate * 1e3


@dataclass
class TimeRoofline:
    """The time-based roofline of one analysis: its roofs and its layer configs' points."""

    model: str
    batch: int
    precision: str
    gpu: GpuSpec
    ceilings: str
    roofs: list[TimeRoof]
    layers: list[LayerPoints]
    launch_floor_ms: float = LAUNCH_FLOOR_US * 1e-3

    def roof(self, name: str) -> TimeRoof:
        return next(r for r in self.roofs if r.name == name)

    def to_dict(self) -> dict:
        return {"model": self.model, "batch": self.batch, "precision": self.precision, "gpu": self.gpu.name,
                "ceilings": self.ceilings, "launch_floor_ms": self.launch_floor_ms,
                "roofs": [{"name": r.name, "axis": r.axis, "rate": r.rate, "label": r.label} for r in self.roofs],
                "layers": [x.to_dict() for x in self.layers]}


def _accepts(m, precision: str, cache: str, layouts: tuple[str, ...]) -> bool:
    """Whether measurement row ``m`` is an implementation of its config in ``precision``: the one
    rule (:class:`benanza.database.query.Serves`), widened to the rows drawn with an estimate."""
    t = row_time(m)
    return t is not None and t > 0 and Serves(precision, cache, tuple(layouts), statuses=DRAWN_STATUSES)(m)


def _points(config, rows, precision: str, system, chosen_lt) -> list[ImplPoint]:
    """The implementation points of one config from its accepted rows, the chosen one marked: the
    analysis's pick (same call, algorithm, math, layout and time)."""
    pts = []
    for m in sorted(rows, key=lambda m: (row_time(m), m.id)):
        status, t = m.status, row_time(m)
        if status == "ok" and precision == "fp32" and roofline.implausible_fma(
                config, m.median_ms, system.sm_count, system.max_sm_clock_mhz):
            status = "rejected"
        pick = (chosen_lt is not None and status == "ok" and (m.call, m.algorithm, m.math, m.layout) ==
                (chosen_lt.call, chosen_lt.algorithm, chosen_lt.math, chosen_lt.layout)
                and abs(t - chosen_lt.time_ms) <= 1e-12 * max(1.0, t))
        pts.append(ImplPoint(m.call, m.algorithm, m.math, m.layout, float(t), status, pick))
    if sum(p.chosen for p in pts) > 1:  # equal rows twice: keep the first
        first = next(i for i, p in enumerate(pts) if p.chosen)
        pts = [p if i == first else dataclasses.replace(p, chosen=False) for i, p in enumerate(pts)]
    return pts


def _roofs(gpu: GpuSpec, precision: str, maths: set[str], l2: roofline.L2Roof) -> list[TimeRoof]:
    """Compute roofs for the math peaks the points use (fp32 CUDA cores always) and the DRAM and L2 roofs."""
    keys = {math_peak_key(m, precision) or "fp32" for m in maths} | {"fp32"}
    out = []
    for k in sorted(keys, key=gpu.peak_flops):
        pk = gpu.peak_flops(k)
        out.append(TimeRoof(f"compute_{k}", "flops", pk, f"{k} peak {pk / 1e12:.0f} TFLOP/s" +
                            ("" if k == "fp32" else " (Tensor Cores, dense)")))
    out.append(TimeRoof("dram", "bytes", gpu.bandwidth, f"DRAM {gpu.bandwidth / 1e12:.2f} TB/s"))
    out.append(TimeRoof("l2", "bytes", l2.bytes_per_s, l2.label))
    return out


def time_roofline(analysis: Analysis, database, system, gpu: GpuSpec, l2: roofline.L2Roof,
                  ceilings: str = "spec") -> TimeRoofline:
    """The time-based roofline of ``analysis`` (see the module docstring): one :class:`LayerPoints`
    per unique config among its measured layers (layout conversions left out), in model order,
    with every accepted measurement row of ``database`` on ``system`` as a point; the roofs of
    ``gpu`` (``ceilings`` names where its figures come from: ``spec`` or ``measured``) and ``l2``."""
    conv_p = analysis.conv_precision or analysis.precision
    by_key: dict[str, LayerPoints] = {}
    picks = {}
    for lt in analysis.layers:
        if lt.status != "measured" or lt.conversion:
            continue
        ly = lt.layer
        if ly.key in by_key:
            x = by_key[ly.key]
            x.layers = x.layers + ((ly.index, ly.name),)
            continue
        p = conv_p if ly.config.kind in L.CUDNN_TF32_KINDS else analysis.precision
        by_key[ly.key] = LayerPoints(ly.key, ly.config.kind, ly.config.describe(), p, ((ly.index, ly.name),),
                                     ly.config.flops(), roofline.min_bytes(ly.config, p))
        picks[ly.key] = (lt, ly.config)
    rows: dict[str, list] = {k: [] for k in by_key}
    for m in database.measurements(system.id, list(by_key), cache=analysis.cache) if by_key else []:
        x = by_key[m.layer_key]
        if _accepts(m, x.precision, analysis.cache, tuple(analysis.layouts)):
            rows[m.layer_key].append(m)
    maths = set()
    stored = read_counters(database, system.id, list(by_key)) if by_key else {}
    for k, x in by_key.items():
        lt, config = picks[k]
        x.points = _points(config, rows[k], x.precision, system, lt)
        maths |= {p.math for p in x.points}
        c = x.chosen
        kernels = stored.get((k, x.precision, c.call, c.algorithm, c.math, c.layout)) if c else None
        x.counters = summarize(kernels).to_dict() if kernels else None
    return TimeRoofline(analysis.model, analysis.batch, analysis.precision, gpu, ceilings,
                        _roofs(gpu, analysis.precision, maths, l2), list(by_key.values()))


def roof_times(tr: TimeRoofline, x: LayerPoints) -> dict:
    """The ceilings' times (ms) of config ``x``: ``compute`` (the peak of its chosen implementation's
    math; fp32 CUDA cores when none), ``dram`` and ``l2``, and ``x_roof``: the chosen time over the
    higher of compute and DRAM (1 = on the roof; None without a chosen implementation)."""
    ch = x.chosen
    key = (math_peak_key(ch.math, x.precision) if ch else None) or "fp32"
    roof = next((r for r in tr.roofs if r.name == f"compute_{key}"), tr.roof("compute_fp32"))
    t = {"compute": roof.time_ms(x.flops), "dram": tr.roof("dram").time_ms(x.bytes), "l2": tr.roof("l2").time_ms(x.bytes)}
    bound = max(t["compute"], t["dram"])
    t["x_roof"] = ch.time_ms / bound if ch and bound > 0 else None
    return t
