#!/usr/bin/env python3
"""Validate `benanza predict` on real hardware: a database holding measurements of the same models
on two GPUs (e.g. an H100 and an H200, merged with `benanza db import`), each predicted from the
other by wave scaling and compared with what was measured there.

Prints, per model x batch x data type and direction: the measured LBL on both GPUs, the predicted
LBL and its error; then the error per layer kind (sum of that kind's predicted layer times over the
sum of the measured ones, all models pooled, per direction); then the mean absolute model-level
error per direction and over both (issue 6's target: under 8 %), next to the error of the naive
prediction "same time as on the origin GPU", which shows what the scaling adds. `--json FILE`
writes every validation.

  python3 benchmarks/predict_check.py --db both.db --models ../shared/models \\
      --model resnet50_bnkept --model googlenet --model densenet121 --model vit_b_16_dyn.onnx \\
      --batch 1,32 --dtype fp16 [--a "H100"] [--b "H200"]

A model is a file stem in --models or a path to an ONNX file. Model configurations that are not
complete on both GPUs are listed and left out.
"""
import argparse
import collections
import json
import sys
from pathlib import Path


def _system(systems, spec):
    hits = [s for s in systems if spec.lower() in (s.gpu_name or "").lower() or s.fingerprint.startswith(spec)]
    if len(hits) != 1:
        raise SystemExit(f"--a/--b {spec!r}: matches {len(hits)} systems "
                         f"({', '.join(s.gpu_name for s in systems)})")
    return hits[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--models", default="../shared/models")
    ap.add_argument("--model", action="append", required=True)
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--a", help="first system (GPU name part or fingerprint prefix); default: the first of two")
    ap.add_argument("--b", help="second system; default: the second of two")
    ap.add_argument("--memory", default="l2,dram",
                    help="memory models to validate: l2 (L2-aware, benanza's default), dram (Habitat's)")
    ap.add_argument("--json", help="write the validations here")
    a = ap.parse_args(argv)

    from benanza.analysis.analyzer import analyze
    from benanza.database.store import open_db
    from benanza.analysis.gpus import find_gpu
    from benanza.processing.model import parse_batches, process
    from benanza.analysis.predict import predict, validate

    db = open_db(a.db, create=False)
    systems = db.systems()
    if a.a and a.b:
        sa, sb = _system(systems, a.a), _system(systems, a.b)
    elif len(systems) == 2:
        sa, sb = systems
    else:
        raise SystemExit(f"the database holds {len(systems)} systems: name two with --a and --b")
    spec = {sa.id: find_gpu(sa.gpu_name), sb.id: find_gpu(sb.gpu_name)}
    print(f"A: {sa.gpu_name} (spec {spec[sa.id].name}, {spec[sa.id].bandwidth / 1e12:.2f} TB/s, "
          f"{spec[sa.id].sm_count} SMs at {spec[sa.id].boost_clock_mhz} MHz)")
    print(f"B: {sb.gpu_name} (spec {spec[sb.id].name}, {spec[sb.id].bandwidth / 1e12:.2f} TB/s, "
          f"{spec[sb.id].sm_count} SMs at {spec[sb.id].boost_clock_mhz} MHz)")
    analyses, skipped = [], []
    for name in a.model:
        path = Path(name) if name.endswith(".onnx") else Path(a.models) / f"{name}.onnx"
        for batch in parse_batches(a.batch):
            ml = process(path, batch)
            for dtype in [d.strip() for d in a.dtype.split(",") if d.strip()]:
                an = {s.id: analyze(ml, db, s, dtype) for s in (sa, sb)}
                if not all(x.complete for x in an.values()):
                    skipped.append(f"{ml.model} b{batch} {dtype}: " + ", ".join(
                        f"{s.gpu_name} {'complete' if an[s.id].complete else 'incomplete'}" for s in (sa, sb)))
                    continue
                analyses.append((ml, dtype, an))
    out = {"skipped": skipped}
    for memory in [m.strip() for m in a.memory.split(",") if m.strip()]:
        out[memory] = report(analyses, memory, sa, sb, spec, predict, validate)
    for s_ in skipped:
        print(f"left out (incomplete): {s_}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0 if analyses else 1


def report(analyses, memory, sa, sb, spec, predict, validate) -> dict:
    """Validate every configuration in both directions with one memory model and print the tables."""
    rows = []
    kinds = {d: collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0]) for d in ("A->B", "B->A")}
    for ml, dtype, an in analyses:
        batch = ml.batch
        for d, o, t in (("A->B", sa, sb), ("B->A", sb, sa)):
            p = predict(an[o.id], spec[o.id], spec[t.id], dtype, memory=memory)
            v = validate(p, an[t.id])
            naive = an[o.id].lbl_sequential_ms / an[t.id].lbl_sequential_ms - 1.0
            rows.append({"model": ml.model, "batch": batch, "dtype": dtype, "direction": d,
                         "origin": o.gpu_name, "target": t.gpu_name,
                         "origin_ms": an[o.id].lbl_sequential_ms, "measured_ms": an[t.id].lbl_sequential_ms,
                         "predicted_ms": p.lbl_sequential_ms, "error": v.lbl_sequential_error,
                         "parallel_error": v.lbl_parallel_error, "naive_error": naive,
                         "mean_abs_layer_error": v.mean_abs_layer_error, "by_kind": v.by_kind})
            for lp, lt, lo in zip(p.layers, an[t.id].layers, an[o.id].layers):
                if lp.status == "measured" and lt.status == "measured" and lt.time_ms:
                    k = kinds[d][lp.kind or lp.op]
                    k[0] += lp.predicted_ms
                    k[1] += lt.time_ms
                    k[2] += lo.time_ms
                    k[3] += 1
    print(f"\n=== memory model {memory} ===")
    print(f"{'model':<22}{'batch':>6} {'dtype':<6}{'dir':<6}{'origin ms':>11}{'measured ms':>13}"
          f"{'predicted ms':>14}{'error':>9}{'naive':>9}{'layer |err|':>13}")
    for r in rows:
        print(f"{r['model']:<22}{r['batch']:>6} {r['dtype']:<6}{r['direction']:<6}{r['origin_ms']:>11.4f}"
              f"{r['measured_ms']:>13.4f}{r['predicted_ms']:>14.4f}{r['error']:>+9.1%}{r['naive_error']:>+9.1%}"
              f"{r['mean_abs_layer_error']:>13.1%}")
    for d in ("A->B", "B->A"):
        print(f"\nper layer kind, {d} (pooled over models; error of summed times; naive = origin time)")
        print(f"{'kind':<16}{'layers':>8}{'measured ms':>13}{'error':>9}{'naive':>9}")
        for k, (pr, me, orig, n) in sorted(kinds[d].items(), key=lambda kv: -kv[1][1]):
            print(f"{k:<16}{n:>8}{me:>13.4f}{pr / me - 1:>+9.1%}{orig / me - 1:>+9.1%}")
    for d in ("A->B", "B->A", None):
        sel = [r for r in rows if d is None or r["direction"] == d]
        if sel:
            m = sum(abs(r["error"]) for r in sel) / len(sel)
            nv = sum(abs(r["naive_error"]) for r in sel) / len(sel)
            mx = max(sel, key=lambda r: abs(r["error"]))
            print(f"mean |model error| {d or 'both directions'}: {m:.2%} over {len(sel)} configurations "
                  f"(naive {nv:.2%}; worst {mx['model']} b{mx['batch']} {mx['dtype']} {mx['error']:+.1%})")
    return {"rows": rows, "by_kind": {d: {k: list(v) for k, v in kinds[d].items()} for d in kinds}}


if __name__ == "__main__":
    sys.exit(main())
