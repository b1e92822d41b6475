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

from pathlib import Path

from benanza.analysis.time_roofline import (DRAWN_STATUSES, ImplPoint, LayerPoints, TimeRoof,  # noqa: F401
                                            TimeRoofline, roof_times, row_time, time_roofline)
from benanza.reports.chart import LAUNCH_FLOOR_US, save_figure  # noqa: F401
from benanza.reports.safe_text import mpl_text

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
    fig.suptitle(mpl_text(f"time-based roofline (Wang et al. 2020): {tr.model} batch {tr.batch} {tr.precision} on "
                          f"{tr.gpu.name} ({tr.ceilings} ceilings); {len(tr.layers)} layer configs, {n} "
                          f"implementations; star: chosen"
                          + (f"; {skipped} configs without FLOPs only on the right" if skipped else "")), fontsize=9)
    handles: dict = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    fig.legend(list(handles.values()), list(handles), loc="lower center", ncol=4, fontsize=7, frameon=False)
    fig.tight_layout(rect=(0, 0.14, 1, 0.96))
    written = save_figure(fig, png, svg, titles)
    plt.close(fig)
    return written


def print_time_roofline(tr: TimeRoofline, written: list[Path], console, json_out: bool, emit) -> None:
    """Print ``tr`` on ``console``: its JSON scenario (with the charts written; given to ``emit``,
    which prints the command's envelope, :mod:`benanza.reports.documents`) or one table row per layer
    config: its layers, implementations, the chosen one, the ceilings' times and how far above
    the roof it is (x roof: chosen time / max(compute, DRAM))."""
    from benanza.reports.tables import Col, FitTable

    if json_out:
        d = tr.to_dict()
        for x, row in zip(tr.layers, d["layers"]):
            row["roof_ms"] = roof_times(tr, x)
        d["charts"] = [str(p) for p in written]
        emit(d)
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
