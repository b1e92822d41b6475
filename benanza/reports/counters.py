"""The hardware counters of each layer's best implementation, as `benanza bench --counters` stored
them (:mod:`benanza.database.counters`), beside the layer's roofline: how far the layer is from its
roof and why (memory-, compute- or latency-bound, after Nsight Compute's SOLBottleneck rule:
:func:`benanza.database.counters.summarize`)."""
from __future__ import annotations

from benanza.analysis.layer_counters import counter_rows  # noqa: F401 (computed in analysis)


def _pct(v) -> str:
    return f"{v:.0f}" if v is not None else "-"


def counters_table(analysis, database, system):
    """A rich table of :func:`counter_rows` (None when no layer has counters): per layer its best
    call, time, x its roofline bound, the kernels, DRAM MB measured against the minimum, DRAM %, SM %,
    occupancy % and the verdict with its reason."""
    return rows_table(analysis, counter_rows(analysis, database, system))


def rows_table(analysis, rows: list[dict]):
    """The table of ``rows`` (:func:`benanza.analysis.layer_counters.counter_rows` of ``analysis``);
    None when there are none."""
    from benanza.reports.tables import Col, FitTable

    if not rows:
        return None
    # in a narrow terminal (benanza.reports.tables) the kernels go first, then occupancy, the byte
    # counts, the call, the reason, x bound, SM % and DRAM %; #, layer, time and verdict stay
    t = FitTable(f"{analysis.model} batch {analysis.batch} {analysis.precision_label}: hardware counters of "
                 f"the best implementations (Nsight Compute; x bound: time over the roofline bound on datasheet "
                 f"ceilings; bound by the unit at >= 60 % of its peak, else latency)",
                 [Col("#", "num"), Col("layer", "name"), Col("call / algorithm", drop=6), Col("µs", "num"),
                  Col("x bound", "num", drop=4), Col("kernels", "name", drop=10), Col("DRAM MB", "num", drop=7),
                  Col("min MB", "num", drop=8), Col("DRAM %", "num", drop=2), Col("SM %", "num", drop=3),
                  Col("occ. %", "num", drop=9), Col("bound by", "name"), Col("why", drop=5)])
    for r in rows:
        names = r["kernels"]
        t.add_row(str(r["index"]), r["name"], f"{r['call']} / {r['algorithm']}", f"{r['time_ms'] * 1e3:.1f}",
                  f"{r['x_bound']:.1f}" if r["x_bound"] else "-",
                  names[0][:48] + (f" +{len(names) - 1}" if len(names) > 1 else ""),
                  f"{r['dram_bytes'] / 1e6:.2f}" if r["dram_bytes"] is not None else "-", f"{r['min_bytes'] / 1e6:.2f}",
                  _pct(r["dram_pct"]), _pct(r["sm_pct"]), _pct(r["occupancy_pct"]), r["bound"], r["why"])
    return t
