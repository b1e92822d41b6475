"""The terminal tables and JSON documents of the GPU-side commands: ``layers``, ``generate``, ``run``,
``bench``, ``ceilings`` and ``system``."""
from __future__ import annotations

from benanza.reports.tables import Col, FitTable
from benanza.reports.documents import envelope
from benanza.reports.terminal import err, out, print_json
from benanza.usecases.bench import run_line

def run_doc(s) -> dict:
    return {"system_id": s.system_id, "gpu": s.system.get("gpu_name"), "run_id": s.run_id, "planned": s.planned,
            "skipped": s.skipped, "ok": s.ok, "failed": s.failed, "measurements": s.measurements,
            "restarts": s.restarts, "wall_s": s.wall_s, "failures": [{"job": j, "reason": r} for j, r in s.failures],
            **({"timeline": s.timeline} if getattr(s, "timeline", None) else {}),
            **({"prior": {**s.prior, "candidates": s.candidates, "skipped": s.prior_skipped}}
               if getattr(s, "prior", None) else {})}


def print_bench_json(r, counters_doc: dict | None, cluster: bool) -> None:
    """``bench --json``: the model, stages, counters, the runs (each cluster kind's too) and, as
    ``scenarios``, each analysis with its training step, as ``analyze --json`` gives them."""
    docs = [a.to_dict() for a in r.analyses]
    for d, t in zip(docs, r.training):
        d["training_step"] = t.to_dict()
    print_json(envelope("bench", system=r.analyses[0].system if r.analyses else None, model=r.model,
                        stages=r.stages, counters=counters_doc, run=run_doc(r.run),
                        framework_run=run_doc(r.framework_run) if r.framework_run is not None else None,
                        cluster_runs=[run_doc(s) for s in r.runs] if cluster else None, scenarios=docs))


def print_layers(mls, json_out: bool, details: bool) -> None:
    """``layers``: per processed model (:class:`benanza.processing.model.ModelLayers`) its summary and
    layer list as JSON, or the table by op type, unsupported ops, coverage, fusion candidates and,
    with ``details``, every layer."""
    if json_out:
        docs = []
        for ml in mls:
            d = ml.summary()
            d["layer_list"] = [ly.to_dict() for ly in ml.layers]
            docs.append(d)
        print_json(envelope("layers", scenarios=docs))
        return
    for ml in mls:
        s = ml.summary()
        t = FitTable(f"{ml.model} batch {ml.batch}: {s['layers']} layers, {s['unique_layers']} unique; "
                     f"{s['benchmarked_layers']} benchmarked ({s['unique_benchmarked']} unique), "
                     f"{s['zero_cost_layers']} zero-cost, {sum(s['unsupported'].values())} unsupported",
                     [Col("op", "name"), Col("layers", "num"), Col("unique", "num"), Col("status")])
        status = {}
        for ly in ml.layers:
            status.setdefault(ly.op_type, set()).add(ly.status)
        for op, c in s["by_type"].items():
            t.add_row(op, str(c["count"]), str(c["unique"]), ", ".join(sorted(status[op])))
        out.print(t)
        if s["unsupported"]:
            reasons = {}
            for ly in ml.layers:
                if ly.status == "unsupported":
                    reasons.setdefault(ly.op_type, ly.reason)
            for op, n in s["unsupported"].items():
                out.print(f"unsupported: {op} x{n}: {reasons[op]}", markup=False)
        cov = s["coverage"]
        out.print(f"coverage: {cov['percent']:g}% of compute layers benchmarked ({cov['benchmarked']} of "
                  f"{cov['compute_layers']}, {cov['unsupported']} unsupported; {s['zero_cost_layers']} zero-cost "
                  f"layers)", markup=False)
        kinds = ", ".join(f"{k} {v}" for k, v in s["fusions_by_kind"].items())
        out.print(f"fusion candidates: {s['fusion_candidates']}{f' ({kinds})' if kinds else ''}; folded nodes: "
                  f"{sum(s['folded'].values())} ({', '.join(f'{k} {v}' for k, v in s['folded'].items()) or 'none'})",
                  markup=False)
        if details:
            d = FitTable(None, [Col("#", "num"), Col("name", "name"), Col("op", "name", drop=2),
                                Col("status", "name", drop=3), Col("config"), Col("output", "name", drop=1)])
            for ly in ml.layers:
                d.add_row(str(ly.index), ly.name, ly.op_type, ly.status,
                          ly.config.describe() if ly.config else ly.reason,
                          "x".join(map(str, ly.output_shapes[0])) if ly.output_shapes and ly.output_shapes[0] else "?")
            out.print(d)


def print_generate(suite, output, note: str) -> None:
    """``generate``: the jobs per kind and where the suite went."""
    kinds = {}
    for j in suite.jobs:
        kinds[j.kind] = kinds.get(j.kind, 0) + 1
    out.print(f"{len(suite.jobs)} jobs ({', '.join(f'{k} {n}' for k, n in sorted(kinds.items()))}) in {output}"
              f"{note}", markup=False)


def print_run(r, json_out: bool) -> None:
    """``run``: a :class:`benanza.usecases.bench.RunResult` as JSON or its summary lines."""
    if r.cluster:
        if json_out:
            print_json(envelope("run", cluster=r.cluster, records=[run_doc(s) for s in r.runs]))
        else:
            for s in r.runs:
                out.print(run_line(s), markup=False)
        return
    s, ts = r.runs[0], r.framework
    doc = run_doc(s)
    if ts is not None:
        doc["framework"] = run_doc(ts)
    if json_out:
        print_json(envelope("run", system=s.system or None, **doc))
        return
    out.print(run_line(s), markup=False)
    if ts is not None:
        out.print("framework kernels: " + run_line(ts), markup=False)


def print_bench(r, json_out: bool, layers_table: bool, cluster: bool) -> None:
    """``bench``: a :class:`benanza.usecases.bench.BenchResult` as JSON (:func:`print_bench_json`), or
    the per-layer tables and findings, the summary, the training steps and the stages' times."""
    from benanza.reports.lbl import analysis_table, print_findings, print_training
    from benanza.reports.lbl_summary import lbl_summary_table

    if json_out:
        return print_bench_json(r, r.counters, cluster)
    if layers_table:
        for a in r.analyses:
            out.print(analysis_table(a))
        print_findings(r.analyses, r.database, r.system)
    out.print(lbl_summary_table(r.analyses))
    if r.training:
        print_training(r.training, layers_table)
    out.print("stages: " + ", ".join(f"{k[:-2]} {v:.2f} s" for k, v in r.stages.items()), markup=False)


def print_ceilings(r, json_out: bool) -> None:
    """``ceilings``: a :class:`benanza.usecases.bench.CeilingsResult` as JSON or a table."""
    from benanza.runner.ceilings import CEILINGS

    if json_out:
        print_json(envelope("ceilings", system=r.system, failed=r.failed, records=[x.to_row() for x in r.rows]))
        return
    t = FitTable(f"ceilings, {r.system.get('gpu_name')}", [Col("ceiling", "name"), Col("value", "num"),
                                                            Col("median ms", "num", drop=1), Col("rse", "num", drop=2),
                                                            Col("what")])
    for x in r.rows:
        scale, unit = (1e12, "TB/s") if x.unit == "bytes/s" else (1e12, "TFLOP/s")
        t.add_row(x.name, f"{x.value / scale:.2f} {unit}", f"{x.median_ms:.4f}",
                  f"{x.rse:.2%}" if x.rse is not None else "-", CEILINGS.get(x.name, ""))
    out.print(t)
    for f in r.failed:
        err.print(f"failed: {f}", markup=False)


def print_system(info: dict, json_out: bool) -> None:
    """``system``: the devices and libraries (:func:`benanza.runner.system.describe`)."""
    from benanza.versions import version_text

    if json_out:
        print_json(envelope("system", **info))
        return
    for d in info["devices"]:
        out.print(f"GPU {d['index']}: {d['gpu_name']}, sm_{d['compute_capability'].replace('.', '')}, "
                  f"{d['sm_count']} SMs, {d['memory_bytes'] / 2**30:.1f} GiB, max SM clock {d['max_sm_clock_mhz']} MHz, "
                  f"driver {d['driver_version'] or d['driver_cuda_version']}", markup=False)
    if info.get("device_error"):
        out.print(info["device_error"], markup=False, soft_wrap=True)
    for k, lib in (("cudnn_library", ""), ("cudnn_version", "cudnn"), ("cublas_library", ""),
                   ("cublas_version", "cublas"), ("nvcc", "")):
        v = info.get(k)
        out.print(f"{k}: {version_text(lib, v) if lib else v}", markup=False, soft_wrap=True)
