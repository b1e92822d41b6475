"""The LBL schedule as a Chrome/Perfetto trace (``analyze --trace FILE``): open it in
https://ui.perfetto.dev or chrome://tracing beside the framework's torch.profiler trace.

The schedule is the one the headline LBL assumes (:attr:`benanza.analysis.analyzer.Analysis.lbl_ms`,
fused, critical path; Benanza, IPDPS 2020: the critical path of the layer DAG with each layer at its
best measured time, each fusion group the headline takes fused as one call): every layer starts as
soon as its producers have finished (as-soon-as-possible), the layers of the critical path on stream
0, the others on the first stream free at their start (greedy), so the number of streams is what that
schedule needs. One complete event (``ph: "X"``) per layer, and one per fusion group taken fused
(named ``fused: ...``, its member layers in ``args.layers``; the members get no slice of their own);
``ts``/``dur`` in µs (the Trace Event Format's unit), its layer index, ONNX op, kind, library call,
algorithm or engine config and layout in ``args``. The last event ends at the LBL. A layer without a
valid measurement is never drawn with a duration: it is an instant event named ``missing: ...``, and
the trace's ``metadata`` says ``complete: false`` with the count of missing layers and the LBL's
``incomplete_note``. Layout conversions left out of the bound and zero-cost layers take 0 µs.

Format: Trace Event Format (Google, "Trace Event Format" document; the JSON object form with
``traceEvents`` and ``displayTimeUnit``), which Perfetto's UI imports.
"""
from __future__ import annotations

import os
from pathlib import Path


def schedule(a, edges: dict[int, list[int]]) -> list[dict]:
    """Per layer of analysis ``a`` (:class:`benanza.analysis.analyzer.Analysis`), in the headline
    (fused) schedule: ``{"index", "start_ms", "dur_ms" (None: no valid measurement), "stream",
    "member"}``; a fusion group's time sits on its last layer, ``member`` marks the others (0 ms,
    drawn inside the group's slice); ``edges[i]``: the layers i consumes."""
    crit = set(a.fused_critical_path)
    groups = a.fused_groups()
    members = {i for f in groups.values() for i in f.layers[:-1]}
    finish: dict[int, float] = {}
    free: list[float] = [0.0]  # per stream, when it is free again (stream 0: the critical path)
    out = []
    for t in sorted(a.layers, key=lambda t: t.layer.index):
        i = t.layer.index
        start = max((finish.get(p, 0.0) for p in edges.get(i, ())), default=0.0)
        missing = t.status == "missing" and not t.covered
        dur = None if missing else (a.fused_weight[i] if a.fused_weight else t.bound_ms)
        d = dur or 0.0
        if i in crit:
            stream = 0
        else:
            stream = next((s for s in range(1, len(free)) if free[s] <= start + 1e-12), None)
            if stream is None:
                free.append(0.0)
                stream = len(free) - 1
        free[stream] = max(free[stream], start + d)
        finish[i] = start + d
        out.append({"index": i, "start_ms": start, "dur_ms": dur, "stream": stream, "member": i in members})
    return out


def trace(a, edges: dict[int, list[int]]) -> dict:
    """The Trace Event Format document of ``a``'s headline LBL schedule (module doc)."""
    by = {t.layer.index: t for t in a.layers}
    crit = set(a.fused_critical_path)
    groups = a.fused_groups()
    ev = []
    sched = schedule(a, edges)
    pid = 1
    label = f"benanza LBL {a.model} batch {a.batch} {a.precision_label}: {a.lbl_text()}"
    ev.append({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}})
    for s in sorted({x["stream"] for x in sched}):
        ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": s,
                   "args": {"name": "stream 0 (critical path)" if s == 0 else f"stream {s}"}})
    for x in sched:
        if x["member"]:
            continue
        t = by[x["index"]]
        args = {"layer": x["index"], "op": t.layer.op_type, "kind": t.layer.config.kind if t.layer.config else "",
                "status": t.status, "call": t.call, "algorithm": t.algorithm, "layout": t.layout,
                "critical": x["index"] in crit, "ms": x["dur_ms"]}
        name = t.layer.name or f"{t.layer.op_type} {x['index']}"
        f = groups.get(x["index"])
        if f is not None:
            args.update(kind=f.key.split("-")[0], status="fused", call=f.call, algorithm=f.algorithm,
                        layers=list(f.layers), what=f.description, unfused_ms=f.unfused_ms)
            name = f"fused: {f.description or f.key}"
        if x["dur_ms"] is None:
            ev.append({"ph": "i", "s": "t", "name": f"missing: {name}", "pid": pid, "tid": x["stream"],
                       "ts": x["start_ms"] * 1e3, "args": {**args, "reason": t.reason}})
        else:
            ev.append({"ph": "X", "name": name, "cat": args["kind"] or "layer", "pid": pid, "tid": x["stream"],
                       "ts": x["start_ms"] * 1e3, "dur": x["dur_ms"] * 1e3, "args": args})
    return {"traceEvents": ev, "displayTimeUnit": "ms",
            "metadata": {"model": a.model, "batch": a.batch, "precision": a.precision_label,
                         "gpu": a.system.get("gpu_name"), "lbl_ms": a.lbl_ms, "lbl_name": a.lbl_name,
                         "lbl_parallel_ms": a.lbl_parallel_ms, "lbl_sequential_ms": a.lbl_sequential_ms,
                         "complete": a.complete, "missing_layers": len(a.missing),
                         "incomplete_note": a.incomplete_note or None, "fused_groups": len(groups),
                         "streams": len({x["stream"] for x in sched})}}


def write_trace(a, edges: dict[int, list[int]], path: str | os.PathLike) -> Path:
    """Write :func:`trace` to ``path`` as JSON (:func:`benanza.database.exports.write_json`: no partial file
    on failure); returns the path."""
    from benanza.database.exports import write_json

    return write_json(trace(a, edges), path)
