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

from pathlib import Path

from benanza.analysis import roofline
from benanza.reports.safe_text import mpl_text, xml_text
from benanza.analysis.layer_roofline import (FAR_FACTOR, LAUNCH_FLOOR_US, LayerRoofline,  # noqa: F401
                                             ModelRoofline, model_roofline, roofline_outliers)


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
                        linewidths=[1.6 if x.measured_ms < 2 * floor_ms else 0.3 for x in sel], label=mpl_text(kind))
        gid = f"bz-classic-{i}"
        sc.set_gid(gid)
        titles[gid] = [_layer_title(mr, x) for x in sel]
    near = sum(1 for x in pts if x.measured_ms < 2 * floor_ms)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_xlabel("arithmetic intensity (FLOP/byte, minimum bytes)")
    ax.set_ylabel("achieved FLOP/s (FLOPs / best measured time)")
    ax.set_title(mpl_text(f"{mr.model} batch {mr.batch} {mr.precision} on {mr.gpu.name} ({mr.ceilings} ceilings): "
                 f"LBL {mr.lbl_text or f'{mr.lbl_ms:.3f} ms'}; roofline {mr.bound_sequential_ms:.3f} ms against "
                 f"the layers' {mr.lbl_sequential_ms:.3f} ms, efficiency {mr.efficiency:.0%}" + (f"; {skipped} layers without FLOPs not drawn" if skipped else "")),
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
    are untrusted) after :func:`~benanza.reports.safe_text.xml_text` (a control character, which
    XML 1.0 forbids even escaped, becomes U+FFFD). Raises ValueError when a group is missing or its marker count differs."""
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
            t.text = xml_text(text)
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
