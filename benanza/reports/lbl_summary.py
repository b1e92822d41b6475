"""The LBL summary table of `benanza analyze`: one row per analysis, headed by the system it was
measured on (a partition's ``[N SMs]`` name included), so no figure is read without its GPU."""
from __future__ import annotations

from rich.text import Text

from benanza.reports.tables import Col, FitTable


def system_name(system: dict) -> str:
    """``NVIDIA H100 80GB HBM3 (system 1, 132 SMs)`` from an analysis' ``system`` record
    (:func:`benanza.analysis.analyzer.system_dict`)."""
    return f"{system.get('gpu_name')} (system {system.get('id')}, {system.get('sm_count')} SMs)"


def lbl_summary_table(results) -> FitTable:
    """One row per analysis (:class:`benanza.analysis.analyzer.Analysis`): the headline LBL (fused,
    critical path, ms) first, then the fused sequential and the unfused figures; an incomplete
    analysis shows partial sums, marked; the layouts as :attr:`Analysis.layouts_label` (a layout
    asked for and not measured is said). The heading names the system when every row shares it,
    else a ``system`` column does, and says cold cache when the figures are cold measurements."""
    systems = {system_name(r.system) for r in results}
    one = len(systems) == 1
    on = f" on {next(iter(systems))}" if one else ""
    caches = sorted({r.cache for r in results})
    on += ", cold cache" if caches == ["cold"] else ", warm and cold cache" if len(caches) > 1 else ""
    cols = [Col("model", "name"), Col("batch", "num"), Col("dtype", "name"), Col("layouts", "name", drop=4),
            Col("LBL ms", "num"), Col("fused seq ms", "num", drop=3), Col("unfused par ms", "num", drop=2),
            Col("unfused seq ms", "num", drop=1), Col("layers measured", drop=5), Col("complete")]
    if not one:
        cols.insert(1, Col("system", "name"))
    t = FitTable(f"lower-bound latency (LBL), ms{on}: fused, critical path; partial sums marked incomplete", cols)
    for r in results:
        d = r.to_dict()
        miss = ", ".join(f"{op} x{n}" for op, n in d["missing_by_op"].items())
        mark = "" if r.complete else " incomplete"
        umark = "" if r.complete_unfused else " incomplete"
        cells = [r.model, str(r.batch), r.precision_label, r.layouts_label,
                 f"{r.lbl_ms:.4f}{mark}", f"{r.lbl_fused_sequential_ms:.4f}{mark}",
                 f"{r.lbl_parallel_ms:.4f}{umark}", f"{r.lbl_sequential_ms:.4f}{umark}",
                 f"{d['measured_layers']} (+{d['zero_cost_layers']} zero-cost)",
                 "yes" if r.complete else Text(f"no: {miss}", style="red")]
        if not one:
            cells.insert(1, system_name(r.system))
        t.add_row(*cells)
    return t
