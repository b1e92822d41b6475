"""The time-based roofline of a model: every measured implementation of every layer as a point of
run time against the layer's FLOPs and against its bytes, under ceilings drawn as lines of time.

Method: Wang, Yang, Farrell, Zhang, Kurth and Williams, "Time-Based Roofline for Deep Learning
Performance Analysis" (2020, arXiv:2009.04598): a kernel of F FLOPs moving B bytes takes at least
``F / peak`` (the compute ceiling) and ``B / bandwidth`` (a memory ceiling); on log-log axes of time
against F (or B) each ceiling is a line of slope 1, and a point's height above its line is how far
it is from that roof. benanza plots, per unique layer config of the model, every implementation the
database holds for it (each library call, algorithm, engine config, cuBLASLt config, benanza and
framework kernel, in the layouts the analysis allows) at the config's FLOPs
(:meth:`benanza.kinds.LayerConfig.flops`) and minimum bytes (:func:`benanza.analysis.roofline.min_bytes`):
the points of one config stand in a column, the chosen one (the fastest valid, the analysis's pick)
at its foot. Ceilings: the math peaks of the implementations' math modes (fp32 CUDA cores, the
precision's Tensor Cores), DRAM bandwidth, and the L2 roof
(:func:`benanza.analysis.roofline.l2_roof`: measured by ``benanza ceilings`` or an estimate).

Rows drawn: warm (or cold, as analysed) measurements with a time: ``ok`` (valid, sampled to the
stopping rule) and, hollow, ``screened`` (one graph replay, slower than 1.5x the job's best) and
``raced_out`` (left the race after its screen samples; the time is its screen median).
An fp32 GEMM row faster than FP32 FMA allows is not valid in an fp32 analysis
(:func:`benanza.analysis.roofline.implausible_fma`). The launch floor
(:data:`benanza.reports.chart.LAUNCH_FLOOR_US`) is one thin grey line, not a shaded region: calls
replayed back to back in a CUDA graph (tiny copies) are timed below it.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from benanza import kinds as L
from benanza.analysis import roofline
from benanza.analysis.analyzer import Analysis
from benanza.analysis.gpus import GpuSpec
from benanza.analysis.predict import math_peak_key
from benanza.database.counters import read_counters, summarize
from benanza.database.query import Serves
from benanza.reports.chart import LAUNCH_FLOOR_US, save_figure
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


def point_title(x: LayerPoints, p: ImplPoint) -> str:
    """The tooltip of one point: layers, call, algorithm, time, FLOPs, bytes, and for the chosen
    point its hardware counters when stored (plain text; the SVG writer escapes it)."""
    names = ", ".join(f"#{i} {n}" for i, n in x.layers[:4]) + (f" (+{len(x.layers) - 4} more)" if len(x.layers) > 4 else "")
    tag = {"ok": "", "screened": " [screened: one replay, not sampled]",
           "raced_out": " [raced out: screen samples, not sampled further]",
           "rejected": " [not FMA math: rejected in fp32]"}[p.status]
    text = (f"{names}: {x.what}\n{p.call} / {p.algorithm} ({p.math}, {p.layout})"
            f"{' [CHOSEN]' if p.chosen else ''}{tag}\n{p.time_ms * 1e3:.2f} µs, {x.flops / 1e9:.4g} GFLOP, "
            f"{x.bytes / 1e6:.4g} MB")
    c = x.counters if p.chosen else None
    if c:
        pct = lambda v: f"{v:.0f} %" if v is not None else "-"  # noqa: E731
        text += (f"\nncu: {c['bound']}-bound ({c['why']}); DRAM {pct(c['dram_pct'])}, SM {pct(c['sm_pct'])}, "
                 f"occupancy {pct(c['occupancy_pct'])}; {len(c['kernels'])} kernels: {', '.join(c['kernels'])[:200]}")
    return text


def _draw_panel(ax, tr: TimeRoofline, axis: str, titles: dict, colours: dict) -> None:
    """One panel: time against FLOPs (``axis="flops"``) or bytes, points per kind, roofs, floor band."""
    import numpy as np

    work = (lambda x: x.flops) if axis == "flops" else (lambda x: x.bytes)
    layers = [x for x in tr.layers if work(x) > 0 and x.points]
    xs = [work(x) for x in layers] or [1.0]
    lo, hi = min(xs) / 3, max(xs) * 3
    times = [p.time_ms for x in layers for p in x.points] or [1.0]
    bottom = min(tr.launch_floor_ms / 3, min(times) / 2)
    grid = np.logspace(np.log10(lo), np.log10(hi), 50)
    styles = {"dram": ("k", "--"), "l2": ("0.35", ":")}
    for i, r in enumerate(r for r in tr.roofs if r.axis == axis):
        colour, ls = styles.get(r.name, (("crimson", "navy", "darkgreen", "purple")[i % 4], "-"))
        ax.plot(grid, grid / r.rate * 1e3, color=colour, ls=ls, lw=1.3, label=r.label)
    ax.axhline(tr.launch_floor_ms, color="0.6", lw=0.6, ls="-.", zorder=0,
               label=f"launch floor {tr.launch_floor_ms * 1e3:g} µs (one launch; graph replays of tiny calls go below)")
    for kind in sorted({x.kind for x in layers}):
        sel = [x for x in layers if x.kind == kind]
        for style, pick in (("valid", lambda p: p.valid and not p.chosen), ("other", lambda p: not p.valid),
                            ("chosen", lambda p: p.chosen)):
            pts = [(x, p) for x in sel for p in x.points if pick(p)]
            if not pts:
                continue
            gid = f"bz-{axis}-{len(titles)}"
            titles[gid] = [point_title(x, p) for x, p in pts]
            kw = {"valid": dict(s=14, alpha=0.45, color=colours[kind], linewidths=0),
                  "other": dict(s=14, facecolors="none", edgecolors=colours[kind], linewidths=0.6, alpha=0.6),
                  "chosen": dict(s=70, marker="*", color=colours[kind], edgecolors="k", linewidths=0.5,
                                 zorder=3)}[style]
            sc = ax.scatter([work(x) for x, _ in pts], [p.time_ms for _, p in pts],
                            label=kind if style == "chosen" else None, **kw)
            sc.set_gid(gid)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(bottom=bottom)
    ax.set_xlabel("FLOPs of the layer" if axis == "flops" else "bytes of the layer (minimum: inputs read once, output written once)")
    ax.set_ylabel("time (ms)")
    ax.grid(True, which="both", lw=0.3, alpha=0.5)


def render_time(tr: TimeRoofline, png: Path | None = None, svg: Path | None = None) -> list[Path]:
    """Draw ``tr`` (matplotlib, Agg): left, time against FLOPs under the compute roofs; right, time
    against bytes under the DRAM and L2 roofs; filled dots are valid implementations, hollow ones
    screened or rejected, a star the chosen one; every point has an SVG ``<title>`` tooltip
    (:func:`point_title`). Writes ``png`` and/or ``svg``; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(15, 7))
    cmap = plt.get_cmap("tab10")
    colours = {k: cmap(i % 10) for i, k in enumerate(sorted({x.kind for x in tr.layers}))}
    titles: dict[str, list[str]] = {}
    _draw_panel(axes[0], tr, "flops", titles, colours)
    _draw_panel(axes[1], tr, "bytes", titles, colours)
    n = sum(len(x.points) for x in tr.layers)
    skipped = sum(1 for x in tr.layers if x.flops <= 0)
    fig.suptitle(f"time-based roofline (Wang et al. 2020): {tr.model} batch {tr.batch} {tr.precision} on {tr.gpu.name} "
                 f"({tr.ceilings} ceilings); {len(tr.layers)} layer configs, {n} implementations; star: chosen"
                 + (f"; {skipped} configs without FLOPs only on the right" if skipped else ""), fontsize=9)
    handles: dict = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.14, 1, 0.96))
    written = save_figure(fig, png, svg, titles)
    plt.close(fig)
    return written


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


def print_time_roofline(tr: TimeRoofline, written: list[Path], console, json_out: bool) -> None:
    """Print ``tr`` on ``console``: its JSON (with the charts written) or one table row per layer
    config: its layers, implementations, the chosen one, the ceilings' times and how far above
    the roof it is (x roof: chosen time / max(compute, DRAM))."""
    import json

    from benanza.reports.tables import Col, FitTable

    if json_out:
        d = tr.to_dict()
        for x, row in zip(tr.layers, d["layers"]):
            row["roof_ms"] = roof_times(tr, x)
        d["charts"] = [str(p) for p in written]
        console.print_json(json.dumps(d))
        return
    # in a narrow terminal (benanza.reports.tables) impl., L2, GFLOP, MB, kind, compute and DRAM go, in that order
    t = FitTable(f"{tr.model} batch {tr.batch} {tr.precision} on {tr.gpu.name}: time-based roofline "
                 f"({tr.ceilings} ceilings; {tr.roof('l2').label})",
                 [Col("layers", "name"), Col("kind", "name", drop=4), Col("GFLOP", "num", drop=6),
                  Col("MB", "num", drop=5), Col("impl.", "num", drop=8), Col("best µs", "num"), Col("chosen"),
                  Col("compute µs", "num", drop=3), Col("DRAM µs", "num", drop=2), Col("L2 µs", "num", drop=7),
                  Col("x roof", "num")])
    for x in tr.layers:
        r, ch = roof_times(tr, x), x.chosen
        t.add_row(f"#{x.layers[0][0]} {x.layers[0][1]}" + (f" +{len(x.layers) - 1}" if len(x.layers) > 1 else ""),
                  x.kind, f"{x.flops / 1e9:.3f}", f"{x.bytes / 1e6:.2f}",
                  f"{sum(p.valid for p in x.points)}/{len(x.points)}",
                  f"{x.best_ms * 1e3:.1f}" if x.best_ms is not None else "-",
                  f"{ch.call} / {ch.algorithm}" if ch else "-", f"{r['compute'] * 1e3:.2f}", f"{r['dram'] * 1e3:.2f}",
                  f"{r['l2'] * 1e3:.2f}", f"{r['x_roof']:.1f}" if r["x_roof"] is not None else "-")
    console.print(t)
    console.print(f"impl.: valid / drawn implementations; ceilings: {tr.gpu.source}", markup=False, highlight=False)
    for p in written:
        console.print(f"wrote {p}", markup=False)
