"""The terminal tables of the LBL: ``analyze``'s per-layer tables, findings, summary and training
steps, ``predict``'s and ``roofline``'s outputs, and the insights' HTML and trace files; every one
made from a use case's typed result (:mod:`benanza.usecases`)."""
from __future__ import annotations

from pathlib import Path

from rich.text import Text

from benanza.errors import UsageError, no_space
from benanza.reports.lbl_summary import lbl_summary_table
from benanza.reports.tables import Col, FitTable
from benanza.reports.documents import envelope
from benanza.reports.terminal import err, out, print_json
from benanza.reports.training import phase_cell, training_step_table

#: the per-layer table's columns; in a narrow terminal an all-empty column goes first (the v7 pick
#: without heuristic records), then the v7 pick, IQR, the critical-path mark, config, math and call
#: (layer, algorithm and time stay; an engine config wraps between its knobs, never inside one)
ANALYSIS_COLUMNS = (Col("#", "num"), Col("layer", "name"), Col("config", drop=3), Col("call", "name", drop=1),
                    Col("algorithm", "token"), Col("math", "name", drop=2), Col("µs", "num"), Col("IQR µs", "num", drop=5),
                    Col("v7 pick (µs)", "token", drop=6), Col("crit", "name", drop=4))


def analysis_table(a) -> FitTable:
    part = "" if a.complete_unfused else " (partial sums)"
    t = FitTable(f"{a.model} batch {a.batch} {a.precision_label}: LBL {a.lbl_text()}; "
                 f"unfused sequential {a.lbl_sequential_ms:.4f} ms, parallel {a.lbl_parallel_ms:.4f} ms{part}",
                 ANALYSIS_COLUMNS)
    crit = set(a.critical_path)
    for lt in a.layers:
        ly = lt.layer
        if lt.status == "zero_cost":
            continue
        shapes = ly.config.describe() if ly.config else ",".join(
            "x".join(map(str, s)) for s in ly.input_shapes if s)
        if lt.status == "missing":
            t.add_row(str(ly.index), ly.name, shapes, Text("missing", style="red"), lt.reason, "", "-", "-", "", "")
            continue
        pick = ""
        if lt.heuristic_algorithm:
            pick = lt.heuristic_algorithm + (f" {lt.heuristic_ms * 1e3:.1f}" if lt.heuristic_ms is not None
                                             else " (no valid time)")
        t.add_row(str(ly.index), ly.name, shapes, lt.call, lt.algorithm + (" [layout conversion: not counted]"
                                                                          if lt.conversion else ""), lt.math,
                  f"{lt.time_ms * 1e3:.1f}", f"{lt.iqr_ms * 1e3:.1f}" if lt.iqr_ms is not None else "-", pick,
                  "*" if ly.index in crit else "")
    return t


def print_analyses(results, steps, database, system, json_out: bool, layers_table: bool, llms=()) -> None:
    """``analyze``'s output: JSON (each analysis with its training step, if any, and a decoder's
    step in LLM terms under ``llm``), or the per-layer tables, findings, the summary table, the
    decoder step's table and the training steps."""
    from benanza.reports.report import llm_table

    if json_out:
        docs = [r.to_dict() for r in results]
        for d, t in zip(docs, steps):
            d["training_step"] = t.to_dict()
        for d, lt in zip(docs, llms):
            if lt is not None:
                d["llm"] = lt
        print_json(envelope("analyze", system=system, scenarios=docs))
        return
    for note in dict.fromkeys(r.precision_note for r in results if r.precision_note):
        out.print(f"note: {note}", markup=False)  # first: the figures below are not fp8's
    out.print(f"system: {system.label()}", markup=False)
    if layers_table:
        for r in results:
            out.print(analysis_table(r))
    print_findings(results, database, system)
    out.print(lbl_summary_table(results))
    for lt in llms:
        t = llm_table(lt)
        if t is not None:
            out.print(t)
    if steps:
        print_training(steps, layers_table)


def print_findings(results, database, system) -> None:
    """Under the per-layer tables: layout conversions left out of the bound, layers where the
    framework's own kernel beats every library call, and layers far above their roofline bound."""
    from benanza.reports.chart import roofline_outliers as outliers

    for r in results:
        head = f"{r.model} batch {r.batch} {r.precision_label}"
        if r.conversion_layers:
            out.print(f"{head}: {len(r.conversion_layers)} layout-conversion Transposes left out of the bound "
                      f"(measured {r.conversion_ms:.4f} ms; layers {ranges([t.layer.index for t in r.conversion_layers])})",
                      markup=False)
        sw = r.layout_switches
        if sw["count"]:
            out.print(f"{head}: {sw['count']} edges between layers whose best layouts differ "
                      f"({sw['bytes'] / 1e6:.2f} MB to convert; not counted)", markup=False)
        fast = r.framework_faster()
        if fast:
            t = FitTable(f"{head}: the framework's kernel beats every library call",
                         [Col("layers"), Col("what"), Col("framework call", "name"), Col("µs", "num"),
                          Col("best library call", "name", drop=1), Col("library µs", "num")])
            for f in sorted(fast, key=lambda f: -((f["library_ms"] or f["framework_ms"]) - f["framework_ms"])):
                t.add_row(ranges(f["layers"]), f["what"], f["framework_call"], f"{f['framework_ms'] * 1e3:.1f}",
                          f["library_call"] or "none valid",
                          f"{f['library_ms'] * 1e3:.1f}" if f["library_ms"] is not None else "-")
            out.print(t)
        far = outliers(r, database, system)
        if far:
            t = FitTable(f"{head}: layers above {far[0]['factor']:g}x their roofline bound ({far[0]['ceilings']})",
                         [Col("#", "num"), Col("layer", "name"), Col("what", drop=2), Col("call", "name", drop=1),
                          Col("µs", "num"), Col("bound µs", "num"), Col("x bound", "num"),
                          Col("share of LBL", "num", drop=3)])
            for f in far[:15]:
                t.add_row(str(f["index"]), f["name"], f["what"], f["call"], f"{f['time_ms'] * 1e3:.1f}",
                          f"{f['bound_ms'] * 1e3:.2f}", f"{f['ratio']:.1f}", f"{100 * f['share']:.1f} %")
            out.print(t)
        from benanza.reports.counters import counters_table

        ct = counters_table(r, database, system)
        if ct is not None:
            out.print(ct)


def ranges(ix: list[int]) -> str:
    """``[1, 2, 3, 7]`` -> ``1-3,7``."""
    out, ix = [], sorted(ix)
    i = 0
    while i < len(ix):
        j = i
        while j + 1 < len(ix) and ix[j + 1] == ix[j] + 1:
            j += 1
        out.append(str(ix[i]) if i == j else f"{ix[i]}-{ix[j]}")
        i = j + 1
    return ",".join(out)


def roofline_svg(analysis, system, database) -> tuple[str, str]:
    """The roofline chart of an analysis as inline SVG and where its roofs come from (the ceilings
    measured on the system when there are, else the spec table); ("", why) when the GPU is not in
    the spec table."""
    from benanza.reports.chart import model_roofline, svg_text
    from benanza.analysis.gpus import find_gpu, with_measured_ceilings

    try:
        spec = find_gpu(system.gpu_name)
    except UsageError as e:
        return "", str(e)
    measured = database.ceilings(system.id)
    kind, label = "spec", f"the {spec.name} datasheet figures (benanza/analysis/gpus.py)"
    if "dram_bandwidth" in measured:
        spec, kind = with_measured_ceilings(spec, measured), "measured"
        label = f"the ceilings `benanza ceilings` measured on this {spec.name}"
    return svg_text(model_roofline(analysis, spec, kind)), label


def print_training(steps, calls_table: bool) -> None:
    """``--train``: each training step's backward calls (with ``calls_table``), its phases, and its
    headline (:meth:`benanza.analysis.training.TrainingStep.lbl_text`), INCOMPLETE marked."""
    for t in steps:
        if calls_table and t.calls:
            ct = FitTable(f"{t.model} batch {t.batch} {t.precision_label}: backward calls (ms)",
                          [Col("layer", "name"), Col("phase", "name"), Col("kind", "name"),
                           Col("config", "text", drop=3), Col("ms", "num"), Col("call", "name", drop=2),
                           Col("algorithm", "token", drop=1)])
            for c in t.calls:
                ct.add_row(c.layer_name, c.phase.replace("backward_", ""), c.kind, c.description,
                           f"{c.time_ms:.4f}" if c.time_ms is not None else Text("missing", style="red"),
                           c.call, c.algorithm)
            out.print(ct)
    st = training_step_table(steps)
    out.print(st)
    for t in steps:
        out.print(f"training step {t.model} batch {t.batch} {t.precision_label}: {t.lbl_text()}", markup=False)
        if t.memory is not None:
            m, gib = t.memory, 2 ** 30
            out.print(f"  peak memory >= {m.total / gib:.2f} GiB: parameters {m.parameters / gib:.2f} "
                      f"({m.parameter_count:,} elements), gradients {m.gradients / gib:.2f}, {m.optimizer} state "
                      f"{m.optimizer_state / gib:.2f}, saved activations {m.activations / gib:.2f}, workspace "
                      f"{m.workspace / gib:.2f} GiB", markup=False)
            no = m.cannot_fit()
            out.print("  cannot fit on: " + ", ".join(f"{g.name} ({g.memory_bytes / gib:.0f} GiB)" for g in no)
                      if no else "  may fit on every GPU `benanza predict` knows (the bound is below each one's memory)",
                      markup=False)
        for n in t.notes:
            out.print(f"  note: {n}", markup=False)


def print_notices(lb, json_out: bool) -> None:
    """A lower bound's notices (the model's, the system resolver's, the spec table's) on stderr."""
    if not json_out:
        for n in lb.notices:
            err.print(f"notice: {n}", markup=False)


def print_training_prediction(tp, eb, memory: str) -> None:
    """``predict --train``: per phase the origin's measured and the target's predicted time, the
    step's sequential and critical-path totals (INCOMPLETE marked), whether its memory fits, and the
    error bar its calls' kinds and phases were measured to (db/reference/predict_train_errors.json)."""
    s, o, d = tp.step, tp.origin.name, tp.target.name
    mark = "" if tp.complete else " incomplete"
    t = FitTable(f"{s.model} batch {s.batch} {s.precision_label} training step ({tp.optimizer}): {o} (measured) -> "
                 f"{d} (predicted)", [Col("phase", "name"), Col(f"{o} ms", "num"), Col(f"{d} ms", "num"),
                                      Col("ratio", "num")])

    def cell(v, why):
        return phase_cell(v, why)

    partial = {c.phase for c in tp.calls if c.predicted_ms is None} | ({"forward"} if s.forward_missing else set())
    for ph in ("forward", "loss", "backward_data", "backward_weight", "optimizer"):
        mo, md = s.phase_ms.get(ph), tp.phase_ms.get(ph)
        why = "not counted" if ph == "loss" and s.loss_measured else "not measured"
        pm = " incomplete" if ph in partial and mo is not None else ""
        t.add_row(ph, cell(mo, why) + pm, cell(md, why) + pm, f"{md / mo:.3f}" if mo and md is not None else "-")
    for name, mo, md in (("sequential", s.sequential_ms, tp.sequential_ms),
                         ("critical path (LBL)", s.critical_path_ms, tp.critical_path_ms)):
        t.add_row(name, f"{mo:.4f}{mark}", f"{md:.4f}{mark}", f"{md / mo:.3f}" if mo else "-")
    out.print(t)
    note = f" {tp.incomplete_note}" if tp.incomplete_note else ""
    out.print(f"training step ({s.lbl_name}): {s.critical_path_ms:.4f} ms measured on {o} -> "
              f"{tp.critical_path_ms:.4f} ms predicted on {d}{note}", markup=False)
    if tp.memory_bytes is not None:
        gib = 2 ** 30
        verdict = ("may fit (the bound leaves out what frameworks add)" if tp.fits
                   else "does NOT fit: the step cannot run as it is (batch, precision, optimizer)")
        out.print(f"memory: peak >= {tp.memory_bytes / gib:.2f} GiB against {d}'s {tp.target.memory_bytes / gib:.1f} "
                  f"GiB: {verdict}", markup=False)
    for n in tp.notes:
        out.print(f"note: {n}", markup=False)
    out.print(error_bar_line(eb, tp.step.forward.precision, "its call kinds and phases", "predict_train_errors.json",
                              "step"), markup=False, highlight=False)
    from benanza.analysis.xarch import training_cross_gpu_lines

    for line in training_cross_gpu_lines(tp.origin, tp.target, tp.step.forward.precision):
        out.print(line, markup=False, highlight=False)
    grid = "; forward GEMMs to another architecture: the public ratio grid" if any(
        lp.method.startswith(("grid", "model", "wave+")) for lp in tp.forward.layers) else ""
    out.print(f"method: Habitat wave scaling of every call of the step, {memory} memory term{grid}; figures from the "
              f"spec table ({tp.target.source})", markup=False, highlight=False)


def error_bar_line(eb, dtype: str, what: str = "its layer kinds", table: str = "predict_errors.json",
                    mean_of: str | None = None) -> str:
    """The error bar of a prediction in one line (benanza.analysis.predict.error_bar,
    benanza.analysis.predict_training.training_error_bar): ``what`` the prediction's parts the
    table's errors are per, ``table`` the validation table's file name under db/reference,
    ``mean_of``: say the validation's mean |error| of this (``step``), None: not said."""
    if eb is None:
        return f"error bar: none (no validation table, db/reference/{table}, in this install)"
    never = f"; never validated in {dtype}: {', '.join(eb.unvalidated)} ({eb.unvalidated_share:.0%} of the time)" \
        if eb.unvalidated else ""
    if eb.relative is None:
        return f"error bar: none -- none of {what} was validated in {dtype}{never}"
    scope = (f"; validated on {', '.join(eb.architectures)} GPUs only: this prediction leaves them, so the error "
             "can be larger") if eb.extrapolated else ""
    step = (f"; the validation's mean |{mean_of} error| in {dtype}: {eb.model_mean_abs_error:.1%}"
            if mean_of and eb.model_mean_abs_error is not None else "")
    return (f"error bar: +/-{eb.relative:.1%} (the errors measured for {what} in {dtype}, weighted by time; "
            f"90th percentile +/-{eb.worst:.1%}){step}{never}{scope}; validation: {eb.source}")


#: the roofline table's columns; in a narrow terminal the peak goes first, then roof, kind, MB and GFLOP
ROOFLINE_COLUMNS = (Col("#", "num"), Col("layer", "name"), Col("kind", "name", drop=4), Col("GFLOP", "num", drop=2),
                    Col("MB", "num", drop=3), Col("FLOP/B", "num"), Col("roof", "name", drop=5),
                    Col("peak", "name", drop=6), Col("bound µs", "num"), Col("best µs", "num"),
                    Col("efficiency", "num"))


def write_trace(r, path: Path, json_out: bool) -> None:
    """``analyze --trace``: the first scenario's parallel LBL schedule as a Chrome/Perfetto trace."""
    from benanza.reports.lbl_trace import write_trace as do_write

    do_write(r.analyses[0], r.models[0].edges, path)
    if not json_out:
        err.print(f"wrote {path} (the LBL schedule; open it in ui.perfetto.dev)", markup=False)


def write_html(docs: list[dict], analysis, system, database, path: Path, json_out: bool) -> None:
    """``analyze --profile --html``: one insights document with its roofline chart, or several side by
    side, written whole or not at all."""
    from benanza.database.exports import write_atomic
    from benanza.reports.report import render_comparison, render_html

    if len(docs) == 1:
        svg, source = roofline_svg(analysis, system, database)
        text = render_html(docs[0], svg, source)
    else:
        text = render_comparison(docs)
    try:
        write_atomic(text.encode("utf-8"), path)  # whole or not at all
    except OSError as e:
        if no_space(e):
            raise  # the one line of every full disk (benanza.cli.app)
        raise UsageError(f"{path}: cannot write the HTML report: {e.strerror or e}") from None
    if not json_out:
        err.print(f"HTML report written to {path}", markup=False)


def print_insights(docs: list[dict], system, json_out: bool) -> None:
    """``analyze --profile``: the insights documents as JSON, or the system and their tables."""
    from benanza.reports.report import terminal_tables

    if json_out:
        print_json(envelope("analyze", system=system, scenarios=docs), default=str)
        return
    out.print(f"system: {system.label()}", markup=False)
    for d in docs:
        for n in d["notices"]:
            err.print(f"notice: {n}", markup=False, soft_wrap=True)
        for t in terminal_tables(d):
            out.print(t)


def print_analyze(r, json_out: bool, layers_table: bool) -> None:
    """``analyze``'s output from an :class:`benanza.usecases.analyze.AnalyzeResult`: the files it
    asked for (trace, HTML), then the insights or the analyses."""
    req = r.request
    if req.trace is not None:
        write_trace(r, req.trace, json_out)
    if r.profile is not None:
        if req.html is not None:
            write_html(r.insights, r.analyses[0], r.system, r.database, req.html, json_out)
        return print_insights(r.insights, r.system, json_out)
    if json_out:
        return print_json(envelope("analyze", system=r.system, scenarios=r.documents()))
    print_analyses(r.analyses, r.steps, r.database, r.system, json_out, layers_table, r.llms)


def print_predict(r, json_out: bool) -> None:
    """``predict``'s output from a :class:`benanza.usecases.predict.PredictResult`: JSON (the
    prediction with its error bar), or the table per layer kind, the LBL line, the error bar and
    the method."""
    print_notices(r.lower_bound, json_out)
    p, eb, memory = r.prediction, r.error_bar, r.request.memory
    if json_out:
        print_json(envelope("predict", system=r.lower_bound.system, scenarios=[r.document()]))
        return
    if r.request.train:
        return print_training_prediction(p, eb, memory)
    a, dtype = r.lower_bound.analysis, r.request.scenario.precision.name
    t = FitTable(f"{a.model} batch {a.batch} {dtype}: {p.origin.name} (measured) -> {p.target.name} (predicted)",
                 [Col("layer kind", "name"), Col("layers", "num"), Col(f"{p.origin.name} ms", "num"),
                  Col(f"{p.target.name} ms", "num"), Col("ratio", "num")])
    for kind, v in p.by_kind().items():
        t.add_row(kind, str(v["layers"]), f"{v['origin_ms']:.4f}", f"{v['predicted_ms']:.4f}",
                  f"{v['ratio']:.3f}" if v["ratio"] else "-")
    out.print(t)
    note = f" {a.incomplete_note}" if a.incomplete_note else ""
    out.print(f"LBL ({a.lbl_name}): {p.origin_lbl_ms:.4f} ms measured on {p.origin.name} -> {p.lbl_ms:.4f} ms "
              f"predicted on {p.target.name}{note}", markup=False)
    out.print(f"unfused, per layer: sequential {p.origin_lbl_sequential_ms:.4f} -> {p.lbl_sequential_ms:.4f} ms, "
              f"critical path {p.origin_lbl_parallel_ms:.4f} -> {p.lbl_parallel_ms:.4f} ms"
              + ("" if p.complete else " (partial sums: layers without a measurement)"), markup=False)
    out.print(error_bar_line(eb, dtype), markup=False, highlight=False)
    from benanza.analysis.xarch import cross_gpu_lines

    for line in cross_gpu_lines(p):
        out.print(line, markup=False, highlight=False)
    grid = "; GEMMs to another architecture: the public ratio grid" if any(lp.method.startswith("grid")
                                                                           for lp in p.layers) else ""
    if any("model" in lp.method for lp in p.layers):
        grid += "; fp32 GEMMs to another architecture: the fp32 model of public measurements"
    out.print(f"method: Habitat wave scaling, {memory} memory term{grid}; figures from the spec table "
              f"({p.target.source})", markup=False, highlight=False)


def print_roofline(r, json_out: bool) -> None:
    """``roofline``'s output from a :class:`benanza.usecases.predict.RooflineResult`: the charts
    asked for, then JSON or the table per layer, the bounds, the ceilings and the counters."""
    from benanza.reports.chart import LAUNCH_FLOOR_US, render
    from benanza.reports.counters import rows_table

    req, mr, a = r.request, r.roofline, r.lower_bound.analysis
    print_notices(r.lower_bound, json_out)
    if r.time is not None:
        from benanza.reports.time_chart import print_time_roofline, render_time

        return print_time_roofline(r.time, render_time(r.time, req.png, req.svg) if (req.png or req.svg) else [],
                                   out, json_out, lambda d: print_json(envelope("roofline", system=r.lower_bound.system,
                                                                                 scenarios=[d])))
    written = render(mr, req.png, req.svg) if (req.png or req.svg) else []
    if json_out:
        print_json(envelope("roofline", system=r.lower_bound.system, scenarios=[r.document(written)]))
        return
    what = "datasheet figures, not measured on this GPU" if req.ceilings == "spec" else "measured by `benanza ceilings`"
    t = FitTable(f"{a.model} batch {a.batch} {req.scenario.precision.name} on {mr.gpu.name}: roofline "
                 f"({req.ceilings} ceilings: {what})", ROOFLINE_COLUMNS)
    for x in mr.layers:
        t.add_row(str(x.index), x.name, x.kind, f"{x.flops / 1e9:.3f}", f"{x.bytes / 1e6:.2f}", f"{x.intensity:.1f}",
                  x.limit, x.peak, f"{x.bound_ms * 1e3:.1f}", f"{x.measured_ms * 1e3:.1f}",
                  f"{x.efficiency:.0%}" + ("*" if x.above_roof else ""))
    out.print(t)
    above = [x for x in mr.layers if x.above_roof]
    if above:
        resident = sum(1 for x in above if x.l2_resident)
        out.print(f"* {len(above)} layers measured faster than their roofline bound (efficiency above 100 %): "
                  f"{resident} of them memory-bound with a working set that stays in L2 between warm calls "
                  "(limit 'memory, L2-resident'), for which the DRAM roof is no bound", markup=False)
    out.print(f"LBL {a.lbl_text()}", markup=False)
    out.print(f"roofline bound of the layers: {mr.bound_sequential_ms:.4f} ms sequential, {mr.bound_parallel_ms:.4f} ms "
              f"parallel; with the {LAUNCH_FLOOR_US:g} µs launch floor {mr.attainable_sequential_ms:.4f} ms; library "
              f"efficiency {mr.efficiency:.1%} (bound / the layers' measured sum, {mr.lbl_sequential_ms:.4f} ms "
              f"unfused)", markup=False)
    out.print(f"ceilings: {mr.gpu.source}", markup=False, highlight=False)
    ct = rows_table(a, r.counters)
    if ct is not None:
        out.print(ct)
    for p in written:
        out.print(f"wrote {p}", markup=False)


def print_report(docs: list[dict], html_out: Path | None) -> None:
    """``report``: the side-by-side table of insights documents, and their HTML comparison."""
    from benanza.reports.report import comparison_table, render_comparison

    out.print(comparison_table(docs))
    if html_out is not None:  # whole or not at all: an OSError (a full disk...) names the file
        from benanza.database.exports import write_atomic

        write_atomic(render_comparison(docs).encode("utf-8"), html_out)
        err.print(f"HTML report written to {html_out}", markup=False)
