"""The terminal tables and report files of the framework commands: ``profile``'s summary, ``torch``'s
per-run reports (HTML beside each ``report-*.json``) and ``torch --train``'s training-step comparisons."""
from __future__ import annotations

import json
from pathlib import Path

from rich.text import Text

from benanza.reports.tables import Col, FitTable, fmt_ms
from benanza.reports.documents import envelope
from benanza.reports.terminal import err, out, print_json
from benanza.versions import version_text

def profile_tables(p) -> list:
    """The summary of a :class:`benanza.profiles.Profile` as rich renderables."""
    from collections import Counter

    s = p.settings
    head = FitTable(f"{p.model} batch {p.batch} {p.dtype or ''}: PyTorch {s.framework_version or '?'}, "
                    f"{s.gpu_name or s.device or '?'}, cuDNN {version_text('cudnn', s.cudnn_version)}, "
                    f"cudnn.benchmark {s.cudnn_benchmark}, TF32 matmul/cuDNN "
                    f"{s.allow_tf32_matmul}/{s.allow_tf32_cudnn}", [Col("measure"), Col("ms", "num"), Col("note")])
    lat = p.latency
    if lat is not None:
        head.add_row("latency (median)", f"{lat.median_ms:.4f}",
                     f"IQR {lat.iqr_ms:.4f} ms, {lat.samples} samples, {lat.method}"
                     + (" (noisy: IQR > 10 % of the median)" if lat.noisy else ""))
    head.add_row("GPU kernel time", f"{p.gpu_kernel_ms:.4f}", f"union of kernel intervals, median of {p.iterations} iterations")
    if p.host_overhead_ms is not None:
        head.add_row("host overhead", f"{p.host_overhead_ms:.4f}", "latency - GPU kernel time: the GPU waits")
    cat_ms, cat_n = p.category_ms(), p.category_counts()
    for c, ms in cat_ms.items():
        if cat_n[c]:
            head.add_row(f"kernels: {c}", f"{ms:.4f}", f"{cat_n[c]} kernels per iteration")
    gaps = p.launch_gaps() if p.trace is not None else []
    if gaps:
        n = max(p.iterations, 1)
        hb = [g for g in gaps if g.host_bound]
        head.add_row("launch gaps", f"{sum(g.gap_ms for g in gaps) / n:.4f}",
                     f"{len(gaps) // n} gaps per iteration, {sum(g.gap_ms for g in hb) / n:.4f} ms host-bound "
                     f"(under the profiler)")
    unf = p.unfused()
    if unf:
        head.add_row("unfused layers", f"{sum(u.ms for u in unf):.4f}",
                     ", ".join(f"{k} x{v}" for k, v in sorted(Counter(u.kind for u in unf).items())))
    joined = sum(1 for lp in p.layers if lp.op is not None)
    head.add_row("layers joined", "", f"{joined} of {len(p.layers)} layers matched a framework op; "
                                      f"{len(p.conv_engines)} conv engines, {len(p.gemm_algos)} GEMM algorithms "
                                      f"from the logs")
    if p.unmatched_ops:
        head.add_row("framework ops without a layer", "",
                     ", ".join(f"{k} x{v:g}" for k, v in p.unmatched_ops.items()))
    return [head]


def print_train_comparisons(comps, spec: str, json_out: bool) -> None:
    """``torch --train``: per profiled run, write ``report-...-train-OPT.json`` beside its profile
    folder and print the step's PyTorch kernel time per phase, benanza's training-step LBL and the
    Benanza ratios (INCOMPLETE marked), or the ``torch`` envelope of the documents."""
    docs = []
    for c in comps:
        c.run["spec"] = spec  # (the headline names it)
        d = c.to_dict()
        folder = Path(c.run["folder"])
        from benanza.database.exports import write_atomic

        write_atomic(json.dumps(d, indent=1, default=str).encode(),
                     folder.parent / (folder.name.replace("profile-", "report-") + ".json"))
        docs.append(d)
    if json_out:
        print_json(envelope("torch", system=comps[0].system if comps else None, scenarios=docs), default=str)
        return
    for c, d in zip(comps, docs):
        pt, r = d["pytorch"], d["ratios"]
        for n in d["run"].get("notices") or []:
            err.print(f"notice: {n}", markup=False, soft_wrap=True)
        for n in pt["notices"]:
            err.print(f"notice: {n}", markup=False, soft_wrap=True)
        out.print(d["headline"], markup=False, soft_wrap=True)
        st = pt["step_kernel_ms"]
        t = FitTable(f"{spec} batch {c.run['batch']} {c.run['dtype']}, {c.run['label']}: PyTorch's training step "
                     f"(GPU kernel time, median of {pt['iterations']} iterations) against benanza's",
                     [Col("phase", "name"), Col("PyTorch", "num"), Col("IQR", "num", drop=2),
                      Col("benanza LBL", "num"), Col("ratio", "num"), Col("complete")])
        for p in ("forward", "loss", "backward", "optimizer"):
            q = pt["comparable_ms"][p]
            x = r[p]
            t.add_row(p, fmt_ms(q["median_ms"]), fmt_ms(q["iqr_ms"]),
                      fmt_ms(x["lbl_ms"]) if x["lbl_ms"] is not None else "not measured",
                      f"{x['ratio']:.3f}" if x["ratio"] is not None else "-",
                      "yes" if x["complete"] else Text("INCOMPLETE", style="red"))
        q = pt["comparable_ms"]["other"]
        t.add_row("other (zero_grad, outside)", fmt_ms(q["median_ms"]), fmt_ms(q["iqr_ms"]), "-", "-", "")
        x = r["step"]
        t.add_row("step", fmt_ms(st["median_ms"]), fmt_ms(st["iqr_ms"]), fmt_ms(x["lbl_ms"]),
                  f"{x['ratio']:.3f}" if x["ratio"] is not None else "-",
                  "yes" if x["complete"] else Text("INCOMPLETE", style="red"))
        out.print(t)
        ph = pt["phase_ms"]
        out.print("PyTorch phases (kernel ms, median): " + ", ".join(
            f"{p} {ph[p]['median_ms']:.4f}" for p in ph if ph[p]["median_ms"] is not None)
            + f"; memcpy {pt['step_memcpy_ms']['median_ms'] or 0:.4f}, memset {pt['step_memset_ms']['median_ms'] or 0:.4f}",
            markup=False)
        if d["run"].get("step_wall_ms"):
            w = d["run"]["step_wall_ms"]
            out.print(f"PyTorch step wall time ({w.get('method') or 'timed'}, outside the profiler): {w['median_ms']:.4f} ms "
                      f"(IQR {w['iqr_ms']:.4f})", markup=False)
        out.print(f"benanza training step: {c.step.lbl_text()}; sequential {c.step.sequential_ms:.4f} ms",
                  markup=False)
        out.print(c.ratio_text(), markup=False)
        for fc in d["framework_choices"]:
            out.print(f"framework: {fc['text']} ({fc['source']})", markup=False, soft_wrap=True)
        from benanza.reports.report import train_whatif_table

        wt = train_whatif_table(d)
        if wt is not None:
            out.print(wt)
        lt = FitTable("layers by PyTorch's kernel time (forward + backward, the 12 heaviest; all in the report)",
                      [Col("layer", "name"), Col("PyTorch fwd", "num"), Col("PyTorch bwd", "num"),
                       Col("benanza bwd", "num"), Col("backward nodes", "name", drop=1)])
        for row in sorted(d["layers"], key=lambda x: -(x["forward_ms"] + x["backward_ms"]))[:12]:
            lt.add_row(row["name"], fmt_ms(row["forward_ms"]), fmt_ms(row["backward_ms"]),
                       fmt_ms(row["lbl_backward_ms"]) if row["lbl_backward_ms"] is not None else "-",
                       ", ".join(row["backward_nodes"]))
        out.print(lt)
        un = pt["unjoined"]
        if un:
            tot = sum(u["ms"] for u in un)
            out.print(f"kernels joined to no layer: {len(un)} kinds, {tot:.4f} ms per step (heaviest: "
                      + "; ".join(f"{u['role']} {u['node'] or u['forward_op'] or ''} {u['ms']:.4f} ms" for u in un[:3])
                      + ")", markup=False)
        f = Path(c.run["folder"])
        out.print(f"report in {f.parent / (f.name.replace('profile-', 'report-') + '.json')}", markup=False)


def print_torch_reports(spec: str, dtype: str, folder: Path, docs: list[dict], json_out: bool, system=None) -> None:
    """``torch``: the reports' terminal tables, each run's after the path of its HTML report (or the
    ``torch`` envelope of the documents, :mod:`benanza.reports.documents`)."""
    from benanza.reports.report import terminal_tables

    if json_out:
        print_json(envelope("torch", system=system, scenarios=docs), default=str)
        return
    for d in docs:
        stem = Path(d["run"]["folder"]).name.replace("profile-", "report-")
        out.print(f"{spec} batch {d['batch']} {dtype}, {d['run']['label']}: report in {folder / (stem + '.html')}",
                  markup=False)
        for n in d["notices"]:
            err.print(f"notice: {n}", markup=False, soft_wrap=True)
        for t in terminal_tables(d):
            out.print(t)


def print_profile(r, json_out: bool) -> None:
    """``profile``: where the profile was written, then its JSON or its notices and tables."""
    if r.captured and not json_out:
        err.print(f"profile written to {r.folder}", markup=False, highlight=False)
    p = r.profile
    if json_out:
        print_json(envelope("profile", **p.to_dict()), default=str)
        return
    for n in p.notices:
        err.print(f"notice: {n}", markup=False, soft_wrap=True)
    for t in profile_tables(p):
        out.print(t)


def write_html(rep) -> None:
    """``torch``: a run's HTML report (``report-*.html``, with its roofline chart) beside its JSON
    (a :class:`benanza.usecases.torch.TorchReport`)."""
    from benanza.reports.lbl import roofline_svg
    from benanza.reports.report import render_html

    svg, source = roofline_svg(rep.analysis, rep.system, rep.database)
    from benanza.database.exports import write_atomic

    write_atomic(render_html(rep.document, svg, source).encode("utf-8"), rep.path.with_suffix(".html"))


def print_torch(r, json_out: bool) -> None:
    """``torch``: a :class:`benanza.usecases.torch.TorchResult`: the reports' tables (or the JSON
    list), or with a training phase the step comparisons."""
    q = r.request
    if q.phase.training:
        return print_train_comparisons(r.comparisons, q.spec, json_out)
    print_torch_reports(q.spec, q.dtype, r.folder, r.documents, json_out, r.system)
