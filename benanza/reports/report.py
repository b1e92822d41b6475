"""Reports of the analysis workflow (:mod:`benanza.analysis.insights`): rich terminal tables, and
self-contained HTML (inline CSS, JS and SVG; no network, no server) rendered with jinja2.

* :func:`terminal_tables` — summary, time breakdown, ranked findings, algorithm selection;
* :func:`render_html` — one analysis: summary, per-layer time bars (framework vs LBL), the
  breakdown of the measured latency (layers / layout / copies / fills / batch norms / gaps /
  host), findings, algorithm selection and the critical path;
* :func:`render_comparison` — several ``benanza analyze --profile --json`` outputs side by side
  (models, batch sizes, data types or GPUs): ``benanza report A.json B.json --html out.html``.

Times are ms per inference; definitions in :mod:`benanza.analysis.insights` (docs/design.md; Benanza IPDPS 2020).
"""
from __future__ import annotations

import json
from pathlib import Path

import jinja2
from rich.text import Text

from benanza.errors import UsageError
from benanza.analysis.insights import FORMAT, FORMAT_VERSION
from benanza.reports.documents import scenarios
from benanza.reports.tables import Col, FitTable

#: breakdown parts in display order, with their colours
PARTS = (("layers", "layers", "#4e79a7"), ("layout", "layout conversions", "#f28e2b"),
         ("copies", "copies", "#e15759"), ("fills", "fills", "#76b7b2"),
         ("unfused_batch_norm", "unfused batch norms", "#edc948"), ("other", "other kernels", "#b07aa1"),
         ("gaps", "launch gaps", "#9c755f"), ("host", "other host time", "#bab0ac"))


def _f(v, digits: int = 4) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


# ---------------------------------------------------------------------------------------- terminal

def terminal_tables(d: dict, top: int = 15) -> list:
    """Rich renderables of one insights document (:meth:`Insights.to_dict`)."""
    fw = d.get("framework") or {}
    head = FitTable(f"{d['model']} batch {d['batch']} {d['precision']} on {d.get('gpu') or '?'}: "
                    f"{fw.get('framework') or 'framework'} {fw.get('version') or ''} vs the lower bound",
                    [Col("measure"), Col("ms", "num"), Col("note")])
    head.add_row("measured latency", _f(d["latency_ms"]), f"IQR {_f(d.get('latency_iqr_ms'))} ms")
    head.add_row("GPU kernel time", _f(d["gpu_kernel_ms"]), "union of kernel intervals (trace)")
    head.add_row("host overhead", _f(d["host_overhead_ms"]), "latency - GPU kernel time")
    part = "" if d.get("complete", True) else f"; {incomplete_note(d)}"
    unfused_part = "" if d.get("complete_unfused", d.get("complete", True)) else "; partial sum"
    head.add_row("LBL", _f(d.get("lbl_ms", d["lbl_fused_parallel_ms"])),
                 (d.get("lbl_name") or "fused, critical path") + part)
    head.add_row("LBL fused sequential", _f(d["lbl_fused_sequential_ms"]), "the fused layers' sum" + part)
    head.add_row("LBL unfused (seq / par)", f"{_f(d['lbl_sequential_ms'])} / {_f(d['lbl_parallel_ms'])}",
                 "each layer alone; sum and critical path" + unfused_part)
    flag = ": ABOVE 1, NOT A BOUND (a defect of benanza)" if above_one(d) else ""
    head.add_row("Benanza ratio", _f(d["benanza_ratio"], 3), "LBL (fused, critical path) / measured latency" + flag
                 + ("; partial: the LBL is incomplete" if part else ""))
    head.add_row("parallel-execution potential", _f(d["parallel_potential_ms"]), "LBL_seq - LBL_par")
    head.add_row("layer fusion profit", _f(d["fusion_profit_ms"]), "LBL_unfused - LBL_fused")
    tc = d.get("tensor_cores")
    if tc:
        head.add_row(f"Tensor Core profit ({tc['precision']})", _f(tc["profit_ms"]),
                     f"LBL fp32 {_f(tc['fp32_lbl_ms'])} vs {tc['precision']} {_f(tc['lbl_ms'])}")
    j = d.get("joint") or {}
    if j.get("speedup"):
        note = j.get("explanation", "")
        if j.get("speedup_tensor_cores"):
            note += f"; with {j['tensor_core_precision']}: x{j['speedup_tensor_cores']:.2f}"
        head.add_row("joint speedup", f"x{j['speedup']:.2f}", note)
    bd = breakdown_table(d)
    fi = FitTable("findings, ranked by estimated saving (alone; in the what-if: after the changes before it)",
                  [Col("#", "num"), Col("Q", "name", drop=1), Col("finding"), Col("saving alone ms", "num"),
                   Col("in the what-if ms", "num", drop=3), Col("evidence", drop=2)])
    for i, f in enumerate(d["findings"][:top], 1):
        fi.add_row(str(i), f["category"], f["title"], _f(f["saving_ms"]),
                   _f(f.get("marginal_ms")) if f.get("additive") else "-", "\n".join(f["evidence"][:3]))
    al = FitTable("algorithm selection (Q3): framework's and cuDNN heuristic's choice vs the best measured",
                  [Col("#", "num"), Col("layer", "name"), Col("framework ran", "name"),
                   Col("its ms (DB)", "num", drop=3), Col("best", "name", drop=2), Col("best ms", "num", drop=4), Col("framework cost", "num"),
                   Col("heuristic", "name", drop=1), Col("heuristic cost", "num", drop=5)])
    for a in d["algorithms"]:
        fw_ms = _f(a["framework_db_ms"]) if a["in_db"] else ("not in DB" if a["framework_engine"] else "")
        al.add_row(str(a["layer"]), a["name"], a["framework_engine"] or "", fw_ms, a["best_algorithm"] or "",
                   _f(a["best_ms"]), _f(a["framework_cost_ms"]), a["heuristic_algorithm"] or "",
                   _f(a["heuristic_cost_ms"]))
    out = [head, bd, fi, al]
    wt = whatif_table(d)
    if wt is not None:
        out.insert(0, wt)
    lt = llm_table(d.get("llm"))
    if lt is not None:
        out.insert(0, lt)
    return [Text(answer(d))] + out


def llm_table(llm: dict | None) -> FitTable | None:
    """A decoder step in LLM terms (:func:`benanza.analysis.llm.llm_terms`): the time to first token
    (prefill) or per output token (decode) measured, at the lower bound and at the physical
    (bandwidth or Tensor Core) limit, with the share of that limit each reaches, and for an MLA decoder's
    decode step the form the LBL is of (``llm.mla``); None for no decoder."""
    if not llm:
        return None
    t = FitTable(f"{llm['phase']}: {llm['metric']}, ms per step of {llm.get('batch', '?')} sequence(s)",
                 [Col("step"), Col("ms", "num"), Col("of the physical limit", "num"), Col("note")])
    if llm.get("error"):
        t.add_row("physical limit", "-", "-", llm["error"])
        return t
    b = llm["bound"]
    part = "" if llm.get("lbl_complete", True) else "; INCOMPLETE: a partial sum, not a bound"
    if llm.get("measured_ms") is not None:
        t.add_row("measured", _f(llm["measured_ms"]), _pct(llm.get("measured_fraction")), "the framework's latency")
    if llm.get("kernel_ms") is not None:
        t.add_row("measured GPU kernel time", _f(llm["kernel_ms"]), _pct(llm.get("kernel_fraction")), "")
    t.add_row("lower bound (LBL)", _f(llm["lbl_ms"]), _pct(llm.get("lbl_fraction")), "best measured kernels" + part)
    if llm.get("mla"):
        t.add_row(f"  of MLA's {llm['mla']['form']} form", "-", "-", llm["mla"]["what"])
    ex = llm.get("experts")
    if ex:
        share = "not measured" if ex["lbl_ms"] is None else f"{100 * ex['share']:.1f} % of the layers' sum"
        t.add_row(f"  the experts ({ex['layers']} grouped GEMMs)", _f(ex["lbl_ms"]), "-",
                  f"{share}; {ex['routing']} routing, {ex['active']} of {ex['experts']} experts given rows")
        wi = ex.get("whatif")
        if wi:
            part = "" if wi.get("lbl_complete", True) else "; INCOMPLETE: a partial sum"
            t.add_row("what-if: balanced routing (LBL)", _f(wi["lbl_ms"]), _pct(_share_of(wi.get("bound_ms"), wi["lbl_ms"])),
                      f"the experts {_f(wi['experts_ms'])} ms, {wi['active']} of {wi['experts']} experts given "
                      f"rows; physical limit {_f(wi['bound_ms'])} ms" + part)
    why = (f"{b['bytes'] / 1e6:.3f} MB (weights {b['weight_bytes'] / 1e6:.3f} + KV cache {b['kv_cache_bytes'] / 1e6:.3f})"
           f" / DRAM" if b["limit"] == "memory" else f"{b['flops'] / 1e9:.3f} GFLOP / {b['precision']} peak")
    t.add_row(f"physical limit ({b['limit']})", _f(b["bound_ms"]), "100.0 %", why)
    t.caption = "roofs: " + b["ceilings_text"] + (f"; experts' routing: {ex['routing_note']}"
                                                   if ex and ex.get("routing_note") else "")
    return t


def _pct(v) -> str:
    return "-" if v is None else f"{100 * v:.1f} %"


def _share_of(bound, ms) -> float | None:
    """bound / ms: the share of a physical limit a time reaches (None without either)."""
    return bound / ms if bound is not None and ms else None


def llm_answer(d: dict) -> str | None:
    """The first sentence of a decoder step's report: TTFT or time per output token, measured vs
    lower bound vs physical limit; None when the document has no LLM terms."""
    llm = d.get("llm")
    if not llm or llm.get("error"):
        return None
    name = "time to first token" if llm["phase"] == "prefill" else "time per output token"
    lbl = f"{llm['lbl_ms']:.4f} ms" + ("" if llm.get("lbl_complete", True) else " (INCOMPLETE: a partial sum)")
    meas = f"measured {llm['measured_ms']:.4f} ms, " if llm.get("measured_ms") is not None else ""
    b = llm["bound"]
    lim = "DRAM bandwidth" if b["limit"] == "memory" else f"{b['precision']} peak"
    src = "measured" if b["ceilings"] == "measured" else "datasheet"
    ex = llm.get("experts")
    experts = ""
    if ex and ex["lbl_ms"] is not None:
        experts = (f" The experts' grouped GEMMs take {ex['lbl_ms']:.4f} ms of it ({100 * ex['share']:.1f} % of the "
                   f"layers' sum, {ex['routing']} routing).")
    wi = (ex or {}).get("whatif")
    if wi and wi.get("lbl_ms") is not None:
        experts += (f" Under balanced routing (what-if) the lower bound is {wi['lbl_ms']:.4f} ms"
                    + (f", the experts {wi['experts_ms']:.4f} ms" if wi.get("experts_ms") is not None else "") + ".")
    form = f" The lower bound is of MLA's {llm['mla']['form']} form (--mla)." if llm.get("mla") else ""
    return (f"{d.get('model', '')} {llm['phase']} batch {llm.get('batch')} {b['precision']} on {d.get('gpu') or b['gpu']}: "
            f"{name} {meas}lower bound {lbl}, physical limit {b['bound_ms']:.4f} ms ({lim}, {src})." + experts + form)


def breakdown_table(d: dict) -> FitTable:
    """Where the measured latency goes: one row per part of the breakdown (:data:`PARTS`), ms per
    inference and its share of the measured latency."""
    bd = FitTable("where the measured latency goes (ms per inference)",
                  [Col("part"), Col("ms", "num"), Col("share", "num")])
    lat = d.get("latency_ms")
    for k, label, _c in PARTS:
        v = (d.get("breakdown") or {}).get(k)
        bd.add_row(label, _f(v), f"{100 * v / lat:.1f} %" if v is not None and lat else "-")
    return bd


def answer(d: dict) -> str:
    """The report's first sentence: the document's headline (the what-if composition's: measured
    latency, what it could be, the three largest steps), else one composed from the older fields."""
    la = llm_answer(d)
    if la:
        return la + (" " + d["headline"] if d.get("headline") else "")
    if d.get("headline"):
        return d["headline"]
    lat, lbl = d.get("latency_ms"), d.get("lbl_fused_parallel_ms")
    if not d.get("complete", True):
        how = f" ({incomplete_note(d)})"
        return (f"{d['model']} batch {d['batch']} {d['precision']}: partial lower bound {_f(lbl, 2)} ms{how}"
                + (f"; measured {lat:.2f} ms." if lat is not None else "."))
    top = [f for f in d.get("findings") or [] if f.get("saving_ms")][:3]
    how = ", ".join(f"{f['title']} (-{f['saving_ms']:.2f} ms, overlapping)" for f in top)
    if lat is None:
        return f"{d['model']} batch {d['batch']} {d['precision']}: lower bound {_f(lbl, 2)} ms (no measured latency)."
    return (f"{d['model']} batch {d['batch']} {d['precision']} on {d.get('gpu') or 'the GPU'}: measured {lat:.2f} ms, "
            f"lower bound {_f(lbl, 2)} ms" + (f"; largest findings: {how}." if how else "."))


def whatif_table(d: dict) -> FitTable | None:
    """The what-if composition (benanza.analysis.whatif) as a table: latency after each step, its saving."""
    w = d.get("whatif") or {}
    if not w.get("steps"):
        return None
    t = FitTable("what-if: each change applied to the measured timeline in this order (ms per inference)",
                 [Col("#", "num"), Col("step"), Col("latency after ms", "num"), Col("saving ms", "num")])
    t.add_row("", "measured", _f(w["start_ms"]), "")
    for i, st in enumerate(w["steps"], 1):
        t.add_row(str(i), st["title"], _f(st["ms_after"]), _f(st["saving_ms"]))
    note = " (clamped at the lower bound)" if w.get("clamped") else ""
    part = "" if d.get("complete", True) else " (partial: the LBL is incomplete)"
    t.add_row("", f"final{note}; lower bound {_f(w['lbl_ms'])} ms{part}", _f(w["final_ms"]),
              _f(w["start_ms"] - w["final_ms"]))
    return t


def train_whatif_table(d: dict) -> FitTable | None:
    """The training step's what-if (benanza.analysis.train_whatif) of a ``torch --train`` report
    document ``d`` as a table: the step's time after each change, its saving ("not estimated" where
    the measurement it rests on is missing), what it rests on."""
    w = d.get("whatif") or {}
    if not w.get("steps"):
        return None
    t = FitTable("what-if over the training step: each change applied in this order (ms per step)",
                 [Col("#", "num"), Col("step"), Col("step after ms", "num"), Col("saving ms", "num"),
                  Col("rests on", "text", drop=1)])
    t.add_row("", "measured (" + ("wall time" if w.get("start_is_wall") else "GPU kernel time") + ")",
              _f(w["start_ms"]), "", "")
    for i, st in enumerate(w["steps"], 1):
        t.add_row(str(i), st["title"], _f(st["ms_after"]),
                  _f(st["saving_ms"]) if st["saving_ms"] is not None else "not estimated", st["rests_on"])
    note = " (clamped at the lower bound)" if w.get("clamped") else ""
    part = "" if w.get("lbl_complete", True) else " (partial: the step's LBL is incomplete)"
    t.add_row("", f"final{note}; step lower bound {_f(w['lbl_ms'])} ms{part}", _f(w["final_ms"]),
              _f(w["start_ms"] - w["final_ms"]), "")
    return t


def comparison_table(docs: list[dict]) -> FitTable:
    """One row per insights document: the headline numbers side by side."""
    t = FitTable("comparison", [Col("model", "name"), Col("batch", "num"), Col("dtype", "name"),
                                Col("GPU", "name", drop=5), Col("latency ms", "num"), Col("LBL seq ms", "num", drop=3),
                                Col("LBL par ms", "num", drop=2), Col("LBL fused ms", "num"),
                                Col("Benanza ratio", "num"), Col("joint speedup", "num", drop=4),
                                Col("top finding", drop=1)])
    flagged = 0
    for d in docs:
        j = (d.get("joint") or {}).get("speedup")
        top = d["findings"][0] if d.get("findings") else None
        ratio = _f(d.get("benanza_ratio"), 3)
        if above_one(d):
            ratio, flagged = Text(f"{ratio} > 1: not a bound", style="bold red"), flagged + 1
        part = "" if d.get("complete", True) else " incomplete"
        t.add_row(d["model"], str(d["batch"]), d["precision"], d.get("gpu") or "", _f(d.get("latency_ms")),
                  _f(d["lbl_sequential_ms"]) + part, _f(d["lbl_parallel_ms"]) + part,
                  _f(d["lbl_fused_parallel_ms"]) + part, ratio, f"x{j:.2f}" if j else "-",
                  f"{top['title']} ({top['saving_ms']:.4f} ms)" if top else "")
    if flagged:
        t.caption = (f"{flagged} analysis(es) have a Benanza ratio above 1: the framework ran faster than the "
                     f"lower bound, a defect of benanza (see the notices of each analysis)")
    return t


def incomplete_note(d: dict) -> str:
    """The document's ``incomplete_note`` (``INCOMPLETE: N layers without ...``), or one from its
    ``missing_layers`` count for documents written before it; empty for a complete LBL."""
    if d.get("complete", True):
        return ""
    n = d.get("missing_layers")
    return d.get("incomplete_note") or f"INCOMPLETE: {n if n is not None else 'some'} layers without a valid measurement"


def above_one(doc: dict) -> bool:
    """The document's Benanza ratio (headline LBL / measured latency) is above 1."""
    r = doc.get("benanza_ratio")
    return r is not None and r > 1.0


# -------------------------------------------------------------------------------------------- HTML

_CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:1.5em auto;max-width:1200px;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}td,th{padding:2px 8px;border-bottom:1px solid #eee;
text-align:left;vertical-align:top}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}
.alg{max-width:28em;overflow-wrap:anywhere}.crit{font-weight:bold}.muted{color:#777}.ev{font-family:ui-monospace,monospace;font-size:.9em;white-space:pre-wrap}
.answer{font-size:1.15em;font-weight:600;margin:.6em 0}.legend span{display:inline-block;margin-right:1em}.sw{display:inline-block;width:.9em;height:.9em;margin-right:.3em;
vertical-align:middle}.notice{background:#fff6d6;padding:.3em .6em;margin:.2em 0}
"""

_JS = """
function bzFilter(inp, id){var q=inp.value.toLowerCase();var rows=document.getElementById(id).tBodies[0].rows;
for(var i=0;i<rows.length;i++){rows[i].style.display=rows[i].textContent.toLowerCase().indexOf(q)<0?'none':'';}}
"""

_MACROS = r"""
{% macro stacked(bd, width=900) -%}
{%- set total = namespace(v=0) -%}
{%- for k, label, colour in parts %}{% set total.v = total.v + (bd[k] or 0) %}{% endfor -%}
<svg xmlns="http://www.w3.org/2000/svg" width="{{ width + 40 }}" height="50" role="img" aria-label="time breakdown (ms)">
{%- for k in range(6) %}{% set tx = (k / 5 * width) %}
<line x1="{{ '%.2f'|format(tx) }}" y1="27" x2="{{ '%.2f'|format(tx) }}" y2="32" stroke="#555"/><text x="{{ '%.2f'|format(tx) }}" y="44" font-size="10" text-anchor="{{ 'start' if k == 0 else 'middle' }}">{{ '%.3g'|format(total.v * k / 5) }}{% if k == 5 %} ms{% endif %}</text>
{%- endfor %}
<line x1="0" y1="27" x2="{{ width }}" y2="27" stroke="#555"/>
{%- set x = namespace(v=0) -%}
{%- for k, label, colour in parts %}{% set w = ((bd[k] or 0) / total.v * width) if total.v > 0 else 0 %}
<rect x="{{ '%.2f'|format(x.v) }}" y="2" width="{{ '%.2f'|format(w) }}" height="24" fill="{{ colour }}"><title>{{ label }}: {{ '%.4f'|format(bd[k] or 0) }} ms</title></rect>
{%- set x.v = x.v + w %}{% endfor %}
</svg>
<div class="legend">{% for k, label, colour in parts %}<span><span class="sw" style="background:{{ colour }}"></span>{{ label }} {{ fmt(bd[k]) }} ms</span>{% endfor %}</div>
{%- endmacro %}
{% macro findings_table(fs) -%}
<p class="muted">"Saving alone": the finding's own estimate, as if it were the only change. "In the what-if": what
it saves applied after the changes above it in the what-if order; the two differ where changes overlap (once
CUDA graphs have removed the launch gaps, or channels_last the conversions, the time a later change could save
is partly gone), and only the what-if savings add up.</p>
<table><thead><tr><th class="n">#</th><th>Q</th><th>finding</th><th class="n">saving alone (ms)</th><th class="n">in the what-if (ms)</th><th>layers</th><th>evidence</th></tr></thead><tbody>
{% for f in fs %}<tr><td class="n">{{ loop.index }}</td><td>{{ f.category }}</td><td>{{ f.title }}<div class="muted">{{ f.detail }}</div></td>
<td class="n">{{ fmt(f.saving_ms) }}</td><td class="n">{% if f.additive %}{{ fmt(f.marginal_ms) }}{% else %}-{% endif %}</td><td>{{ f.layers|length }}</td><td class="ev">{{ f.evidence|join('\n') }}</td></tr>
{% endfor %}</tbody></table>
{%- endmacro %}
"""

_SINGLE = _MACROS + r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>benanza: {{ d.model }} batch {{ d.batch }} {{ d.precision }}</title>
<style>{{ css|safe }}</style><script>{{ js|safe }}</script></head><body>
<h1>benanza: {{ d.model }}, batch {{ d.batch }}, {{ d.precision }} on {{ d.gpu or '?' }}</h1>
<p class="answer" id="answer">{{ answer }}</p>
{% if d.llm and not d.llm.error %}<h2 id="llm">{{ d.llm.phase }}: {{ d.llm.metric }}</h2>
<table id="llm-table"><thead><tr><th>step of {{ d.llm.batch }} sequence(s)</th><th class="n">ms</th><th class="n">of the physical limit</th></tr></thead><tbody>
{% if d.llm.measured_ms is not none %}<tr><td>measured (framework latency)</td><td class="n">{{ fmt(d.llm.measured_ms) }}</td><td class="n">{{ pct(d.llm.measured_fraction) }}</td></tr>{% endif %}
{% if d.llm.kernel_ms is not none %}<tr><td>measured GPU kernel time</td><td class="n">{{ fmt(d.llm.kernel_ms) }}</td><td class="n">{{ pct(d.llm.kernel_fraction) }}</td></tr>{% endif %}
<tr><td>lower bound (LBL){% if not d.llm.lbl_complete %} <strong>INCOMPLETE: a partial sum</strong>{% endif %}</td><td class="n">{{ fmt(d.llm.lbl_ms) }}</td><td class="n">{{ pct(d.llm.lbl_fraction) }}</td></tr>
<tr><td>physical limit ({{ d.llm.bound.limit }}: {{ '%.3f'|format(d.llm.bound.bytes / 1e6) }} MB weights + KV cache over DRAM, or {{ '%.3f'|format(d.llm.bound.flops / 1e9) }} GFLOP over the {{ d.llm.bound.precision }} peak)</td><td class="n">{{ fmt(d.llm.bound.bound_ms) }}</td><td class="n">100.0 %</td></tr>
</tbody></table><p class="muted">Roofs: {{ d.llm.bound.ceilings_text }}. Physical limit = max(bytes / bandwidth, FLOPs / peak) of the step (roofline, Williams et al. 2009).</p>
{% elif d.llm and d.llm.error %}<p class="notice">{{ d.llm.phase }}: no physical limit: {{ d.llm.error }}</p>{% endif %}
{% if d.whatif and d.whatif.steps %}<h2 id="whatif">What-if: the changes in order</h2>
<p class="muted">Each change applied to the framework's measured timeline after the ones above it; the savings add up to
the measured latency minus the final figure, which is never below the lower bound.</p>
<table id="whatif-table"><thead><tr><th class="n">#</th><th>step</th><th class="n">latency after (ms)</th><th class="n">saving (ms)</th></tr></thead><tbody>
<tr><td></td><td>measured</td><td class="n">{{ fmt(d.whatif.start_ms) }}</td><td></td></tr>
{% for st in d.whatif.steps %}<tr><td class="n">{{ loop.index }}</td><td>{{ st.title }}</td><td class="n">{{ fmt(st.ms_after) }}</td><td class="n">{{ fmt(st.saving_ms) }}</td></tr>
{% endfor %}<tr><td></td><td><strong>final</strong>{% if d.whatif.clamped %} (clamped at the lower bound){% endif %}; lower bound {{ fmt(d.whatif.lbl_ms) }} ms{% if not d.complete %} (partial: {{ incomplete }}){% endif %}</td><td class="n"><strong>{{ fmt(d.whatif.final_ms) }}</strong></td><td class="n">{{ fmt(d.whatif.start_ms - d.whatif.final_ms) }}</td></tr>
</tbody></table>{% endif %}
<p class="muted">Compared with: {{ d.framework.run_label or ((d.framework.framework or '?') ~ ' ' ~ (d.framework.version or '')) }}; cudnn.benchmark {{ d.framework.cudnn_benchmark }},
TF32 cuDNN/matmul {{ d.framework.allow_tf32_cudnn }}/{{ d.framework.allow_tf32_matmul }}. Times in ms per inference.
Lower-bound latency (LBL): the sum (sequential) or critical path (parallel) of each layer's fastest measured
implementation; Benanza ratio = LBL / measured latency (Li, Dakkak, Xiong, Hwu, "Benanza", IPDPS 2020).</p>
{% for n in d.notices %}<div class="notice">{{ n }}</div>{% endfor %}
<h2 id="summary">Summary</h2>
<table><tbody>
<tr><td>measured latency</td><td class="n">{{ fmt(d.latency_ms) }}</td></tr>
<tr><td>GPU kernel time</td><td class="n">{{ fmt(d.gpu_kernel_ms) }}</td></tr>
<tr><td>host overhead</td><td class="n">{{ fmt(d.host_overhead_ms) }}</td></tr>
<tr><td>LBL ({{ d.lbl_name or 'fused, critical path' }})</td><td class="n">{{ fmt(d.lbl_fused_parallel_ms) }}{% if not d.complete %} <strong>{{ incomplete }}</strong>{% endif %}</td></tr>
<tr><td>LBL fused sequential</td><td class="n">{{ fmt(d.lbl_fused_sequential_ms) }}{% if not d.complete %} (partial){% endif %}</td></tr>
<tr><td>LBL unfused sequential / parallel</td><td class="n">{{ fmt(d.lbl_sequential_ms) }} / {{ fmt(d.lbl_parallel_ms) }}{% if not d.complete %} (partial){% endif %}</td></tr>
<tr><td>Benanza ratio (LBL fused parallel / latency)</td><td class="n">{{ fmt(d.benanza_ratio, 3) }}{% if d.benanza_ratio and d.benanza_ratio > 1 %} <strong>above 1: not a bound</strong>{% endif %}{% if not d.complete %} (partial: the LBL is incomplete){% endif %}</td></tr>
<tr><td>parallel-execution potential</td><td class="n">{{ fmt(d.parallel_potential_ms) }}</td></tr>
<tr><td>layer fusion profit</td><td class="n">{{ fmt(d.fusion_profit_ms) }}</td></tr>
{% if d.tensor_cores %}<tr><td>Tensor Core profit (fp32 → {{ d.tensor_cores.precision }})</td><td class="n">{{ fmt(d.tensor_cores.profit_ms) }}</td></tr>{% endif %}
{% if d.joint.speedup %}<tr><td>joint speedup</td><td class="n">x{{ '%.2f'|format(d.joint.speedup) }}{% if d.joint.speedup_tensor_cores %} (x{{ '%.2f'|format(d.joint.speedup_tensor_cores) }} with {{ d.joint.tensor_core_precision }}){% endif %}</td></tr>{% endif %}
</tbody></table>
{% if d.joint.steps %}<p class="muted">{{ d.joint.explanation }}</p><table><tbody>
{% for s in d.joint.steps %}<tr><td>{{ s.step }}</td><td class="n">{{ fmt(s.ms) }}</td></tr>{% endfor %}</tbody></table>{% endif %}
<h2 id="breakdown">Time breakdown</h2>
{{ stacked(d.breakdown) }}
<h2 id="findings">Findings (ranked by estimated saving)</h2>
{{ findings_table(d.findings) }}
<h2 id="algorithms">Algorithm selection (Q3)</h2>
{% if not d.algorithms %}<p class="notice">No layer's algorithm choice is compared here: the engines and algorithms the framework ran are
read from its cuDNN and cuBLASLt logs, and this profile has none for its convolutions and GEMMs (taken without logs,
or the logs were left out); profile again with logs to see them.</p>{% else %}
<table><thead><tr><th class="n">#</th><th>layer</th><th>framework ran</th><th class="n">its ms in the DB</th><th class="n">trace ms</th><th>best</th><th class="n">best ms</th><th class="n">framework cost</th><th>heuristic</th><th class="n">heuristic cost</th></tr></thead><tbody>
{% for a in d.algorithms %}<tr><td class="n">{{ a.layer }}</td><td>{{ a.name }}</td><td>{{ a.framework_engine or '' }}</td>
<td class="n">{% if a.in_db %}{{ fmt(a.framework_db_ms) }}{% elif a.framework_engine %}not in DB{% endif %}</td><td class="n">{{ fmt(a.framework_trace_ms) }}</td>
<td class="alg">{{ a.best_algorithm|wbr }} <span class="muted">{{ a.best_call }}</span></td><td class="n">{{ fmt(a.best_ms) }}</td><td class="n">{{ fmt(a.framework_cost_ms) }}</td>
<td>{{ a.heuristic_algorithm or '' }}</td><td class="n">{{ fmt(a.heuristic_cost_ms) }}</td></tr>{% endfor %}</tbody></table>{% endif %}
<h2 id="layers">Per-layer time: framework vs LBL</h2>
<p><span class="sw" style="background:#e15759"></span>framework (kernels + helpers) <span class="sw" style="background:#4e79a7"></span>LBL (best measured);
bar scale: the full width ({{ barw }} px) is {{ fmt(maxms) }} ms, the slowest layer; bold: on the critical path. Filter: <input oninput="bzFilter(this,'layertab')" placeholder="layer name or op"></p>
<table id="layertab"><thead><tr><th class="n">#</th><th>layer</th><th>op</th><th class="n">framework ms</th><th class="n">LBL ms</th><th>bars (0 to {{ fmt(maxms) }} ms)</th><th>best algorithm</th></tr></thead><tbody>
{% for r in d.layers %}<tr{% if r.critical %} class="crit"{% endif %}><td class="n">{{ r.index }}</td><td>{{ r.name }}</td><td>{{ r.op }}</td>
<td class="n">{{ fmt(r.framework_ms) }}</td><td class="n">{{ fmt(r.lbl_ms) }}</td><td>
<svg xmlns="http://www.w3.org/2000/svg" width="{{ barw }}" height="14"><rect x="0" y="0" height="6" width="{{ '%.2f'|format((r.framework_ms or 0) / maxms * barw) }}" fill="#e15759"><title>framework {{ fmt(r.framework_ms) }} ms: {{ r.framework_kernels|join(', ') }}</title></rect><rect x="0" y="7" height="6" width="{{ '%.2f'|format((r.lbl_ms or 0) / maxms * barw) }}" fill="#4e79a7"><title>LBL {{ fmt(r.lbl_ms) }} ms</title></rect></svg>
</td><td class="alg">{{ (r.algorithm or r.status)|wbr }}</td></tr>{% endfor %}</tbody></table>
<h2 id="critical-path">Critical path of the LBL ({{ d.critical_path|length }} steps, {{ fmt(d.lbl_fused_parallel_ms) }} ms{% if not d.complete %}, partial{% endif %})</h2>
<p class="ev">{% for c in d.critical_path %}{{ c.index }} {{ c.name }} ({% if c.fused %}fused group of layers {{ c.fused|join(', ') }}{% else %}{{ c.op }}{% endif %}, {{ fmt(c.lbl_ms) }} ms){% if not loop.last %} → {% endif %}{% endfor %}</p>
{% if roofline_svg %}<h2 id="roofline">Roofline</h2>
<p>Each layer at its arithmetic intensity and achieved rate (FLOPs / best measured time), sized by its share of the LBL, under the roofs of {{ roofline_source }}.</p>
<div class="roofline">{{ roofline_svg|safe }}</div>{% endif %}
</body></html>
"""

_COMPARE = _MACROS + r"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>benanza comparison</title><style>{{ css|safe }}</style></head><body>
<h1>benanza: {{ docs|length }} analyses side by side</h1>
<p class="muted">Times in ms per inference. Benanza ratio = LBL / measured latency; joint speedup = latency / LBL fused parallel.</p>
<h2 id="summary">Summary</h2>
<table><thead><tr><th>metric</th>{% for d in docs %}<th class="n">{{ d.model }}<br>b{{ d.batch }} {{ d.precision }}<br>{{ d.gpu }}<br><span class="muted">{{ run_label(d) }}</span></th>{% endfor %}</tr></thead><tbody>
{% for key, label, digits in rows %}<tr><td>{{ label }}</td>{% for d in docs %}<td class="n">{{ fmt(d[key], digits) }}</td>{% endfor %}</tr>{% endfor %}
<tr><td>joint speedup</td>{% for d in docs %}<td class="n">{% if d.joint and d.joint.speedup %}x{{ '%.2f'|format(d.joint.speedup) }}{% else %}-{% endif %}</td>{% endfor %}</tr>
</tbody></table>
<h2 id="latency">Latency vs LBL</h2>
<svg xmlns="http://www.w3.org/2000/svg" width="{{ 160 * docs|length + 40 }}" height="240" role="img" aria-label="latency vs LBL">
{% for d in docs %}{% set x0 = 40 + loop.index0 * 160 %}
{% for key, colour in (('latency_ms', '#e15759'), ('lbl_sequential_ms', '#4e79a7'), ('lbl_fused_parallel_ms', '#59a14f')) %}
{% set h = ((d[key] or 0) / maxms * 190) %}<rect x="{{ x0 + loop.index0 * 34 }}" y="{{ '%.2f'|format(200 - h) }}" width="30" height="{{ '%.2f'|format(h) }}" fill="{{ colour }}"><title>{{ key }} {{ fmt(d[key]) }} ms</title></rect>{% endfor %}
<text x="{{ x0 }}" y="216" font-size="11">{{ d.model[:18] }}</text><text x="{{ x0 }}" y="230" font-size="11">b{{ d.batch }} {{ d.precision }}</text>
{% endfor %}</svg>
<div class="legend"><span><span class="sw" style="background:#e15759"></span>measured latency</span><span><span class="sw" style="background:#4e79a7"></span>LBL sequential</span><span><span class="sw" style="background:#59a14f"></span>LBL fused parallel</span></div>
<h2 id="breakdown">Time breakdown</h2>
{% for d in docs %}<h3>{{ d.model }} b{{ d.batch }} {{ d.precision }} {{ d.gpu }}</h3>{% if d.breakdown %}{{ stacked(d.breakdown) }}{% else %}<p class="muted">no profile</p>{% endif %}{% endfor %}
<h2 id="findings">Findings</h2>
{% for d in docs %}<h3>{{ d.model }} b{{ d.batch }} {{ d.precision }} {{ d.gpu }}</h3>{{ findings_table(d.findings[:10]) }}{% endfor %}
</body></html>
"""


def _env() -> jinja2.Environment:
    # autoescape: every value is HTML-escaped; finalize: and holds no character HTML and XML (the
    # inline SVG) forbid (a control character in a layer name; benanza.reports.safe_text.xml_text)
    env = jinja2.Environment(autoescape=True, undefined=jinja2.ChainableUndefined, trim_blocks=False,
                             finalize=html_value)
    env.globals.update(fmt=lambda v, digits=4: _f(v, digits), pct=_pct, parts=PARTS, css=_CSS, js=_JS)
    env.filters["wbr"] = wbr
    return env


def html_value(value):
    """A value the HTML templates print: a string (plain or ``Markup``, kept so) with the
    characters XML 1.0 and HTML forbid replaced by U+FFFD
    (:func:`benanza.reports.safe_text.xml_text`); any other value as it is."""
    import markupsafe

    from benanza.reports.safe_text import xml_text

    if isinstance(value, markupsafe.Markup):
        return markupsafe.Markup(xml_text(value))
    return xml_text(value) if isinstance(value, str) else value


def wbr(text):
    """``text`` escaped for HTML with a line-break opportunity (``<wbr>``) after each ``_``, ``,``
    and ``=``: an engine config (``eng41_k2=1_k13=0...``) wraps between its knobs in a narrow
    column instead of running past the page."""
    import markupsafe

    s = str(markupsafe.escape("" if text is None else text))
    for ch in ("_", ",", "="):
        s = s.replace(ch, ch + "<wbr>")
    return markupsafe.Markup(s)


def render_html(d: dict, roofline_svg: str = "", roofline_source: str = "") -> str:
    """Self-contained HTML of one insights document (inline CSS/JS/SVG only); with
    ``roofline_svg`` (:func:`benanza.reports.chart.svg_text`) a roofline section whose roofs come from
    ``roofline_source``."""
    maxms = max([r.get("framework_ms") or 0 for r in d["layers"]] + [r.get("lbl_ms") or 0 for r in d["layers"]]
                + [1e-9])
    return _env().from_string(_SINGLE).render(d=d, maxms=maxms, barw=260, roofline_svg=roofline_svg,
                                              roofline_source=roofline_source, answer=answer(d), incomplete=incomplete_note(d))


_ROWS = (("latency_ms", "measured latency", 4), ("gpu_kernel_ms", "GPU kernel time", 4),
         ("host_overhead_ms", "host overhead", 4), ("lbl_sequential_ms", "LBL sequential", 4),
         ("lbl_parallel_ms", "LBL parallel", 4), ("lbl_fused_sequential_ms", "LBL fused sequential", 4),
         ("lbl_fused_parallel_ms", "LBL fused parallel", 4), ("benanza_ratio", "Benanza ratio", 3),
         ("parallel_potential_ms", "parallel-execution potential", 4), ("fusion_profit_ms", "layer fusion profit", 4))


def render_comparison(docs: list[dict]) -> str:
    """Self-contained HTML comparing several insights documents side by side."""
    maxms = max([d.get(k) or 0 for d in docs for k in ("latency_ms", "lbl_sequential_ms")] + [1e-9])
    return _env().from_string(_COMPARE).render(docs=docs, rows=_ROWS, maxms=maxms, run_label=run_label)


def run_label(d: dict) -> str:
    """What the framework side of a document was, to tell runs apart: the run kind and memory
    format (native module / onnx2torch conversion, channels_last, torch.compile) and the profile folder."""
    fw = d.get("framework") or {}
    label = fw.get("run_label") or " ".join(x for x in (fw.get("framework"), fw.get("version")) if x) or "no profile"
    folder = fw.get("folder")
    return label + (f"; {Path(folder).name}" if folder else "")


# ------------------------------------------------------------------------------------------ inputs

def _from_analysis(d: dict) -> dict:
    """An insights-shaped document from a plain ``benanza analyze --json`` (no profile)."""
    return {"format": FORMAT, "version": FORMAT_VERSION, "model": d["model"], "batch": d["batch"],
            "precision": d["precision"], "gpu": (d.get("system") or {}).get("gpu_name") or "",
            "framework": {}, "latency_ms": None, "gpu_kernel_ms": None, "host_overhead_ms": None,
            "lbl_sequential_ms": d["lbl_sequential_ms"], "lbl_parallel_ms": d["lbl_parallel_ms"],
            "lbl_fused_sequential_ms": d["lbl_fused_sequential_ms"],
            "lbl_fused_parallel_ms": d["lbl_fused_parallel_ms"], "complete": d.get("complete", True),
            "benanza_ratio": None, "parallel_potential_ms": d["lbl_sequential_ms"] - d["lbl_parallel_ms"],
            "fusion_profit_ms": d["lbl_sequential_ms"] - d["lbl_fused_sequential_ms"], "joint": {},
            "breakdown": None, "findings": [], "algorithms": [], "critical_path": [], "layers": [], "notices": []}


def load_documents(paths: list[Path]) -> list[dict]:
    """Read ``benanza analyze --json`` or ``benanza torch --json`` outputs (with or without
    ``--profile``), or the ``report-*.json`` files ``torch`` writes: each an envelope's scenarios
    (:func:`benanza.reports.documents.scenarios`), or as an older benanza wrote them, one document
    or a list. Raises :class:`UsageError` naming the file for anything else."""
    if not paths:
        raise UsageError("give at least one JSON file written by `benanza analyze --json`")
    docs: list[dict] = []
    for p in paths:
        try:
            data = json.loads(Path(p).read_text())
        except FileNotFoundError:
            raise UsageError(f"{p}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"{p}: cannot read: {e}") from None
        except json.JSONDecodeError as e:
            raise UsageError(f"{p}: line {e.lineno} column {e.colno}: not valid JSON ({e.msg})") from None
        for d in scenarios(data, str(p)):
            if d.get("format") == FORMAT:
                if not isinstance(d.get("version"), int) or d["version"] > FORMAT_VERSION:
                    raise UsageError(f"{p}: insights version {d.get('version')!r} is newer than this benanza reads")
                missing = [k for k in ("model", "batch", "precision", "lbl_sequential_ms", "findings") if k not in d]
                if missing:
                    raise UsageError(f"{p}: not a complete benanza insights document (no {', '.join(missing)})")
                docs.append(d)
            elif all(k in d for k in ("model", "batch", "precision", "lbl_sequential_ms",
                                                                "lbl_parallel_ms", "lbl_fused_sequential_ms",
                                                                "lbl_fused_parallel_ms")):
                docs.append(_from_analysis(d))
            else:
                raise UsageError(f"{p}: not the output of `benanza analyze --json`")
    return docs
