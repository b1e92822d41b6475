#!/usr/bin/env python3
"""Validate `benanza predict` on real hardware: a database holding measurements of the same models
on several systems -- two GPUs (an H100 and an H200, merged with `benanza db import`), or one GPU
confined to several SM counts (`BENANZA_SM_COUNT`, benchmarks/gpu_predict.sh) -- each predicted
from the other by wave scaling and compared with what was measured there.

Prints, per system pair (both directions), model, batch and data type: the origin's LBL, the
measured and the predicted LBL on the target, the error and the error of the naive prediction
"same time as on the origin"; then per layer kind and data type (sum of the kind's predicted layer
times over the sum of the measured ones, all models pooled) the error and the naive error; then the
mean absolute model error per pair. `--json FILE` writes every validation; `--errors-out FILE` the
error table `benanza predict` attaches to its predictions (db/reference/predict_errors.json).

  python3 benchmarks/predict_check.py --db predict.db --partitions \\
      --model resnet50,mobilenet_v2,vit_b_16,resnet18,squeezenet1_1,convnext_tiny,bert_base,alexnet \\
      --batch 32 --dtype fp16,fp32 --ceilings measured --errors-out db/reference/predict_errors.json
  python3 benchmarks/predict_check.py --db both.db --models tests/data/zoo/models \\
      --model resnet50_bnkept,googlenet --batch 1,32 --dtype fp16 --a H200 --b H100

A model is a file stem in --models (default db/reference/truth) or a path to an ONNX file.
Configurations not complete on both systems of a pair are listed and left out. `--fixed-us 0
--no-span --ceilings spec` is the model before the SM-count validation (pure Habitat scaling,
datasheets).
"""
import argparse
import collections
import itertools
import json
import sys
from datetime import date
from pathlib import Path


def _system(systems, spec):
    """The system whose GPU name is ``spec`` (exactly, else as a part), or whose fingerprint starts so."""
    exact = [s for s in systems if (s.gpu_name or "").lower() == spec.lower()]
    hits = exact or [s for s in systems if spec.lower() in (s.gpu_name or "").lower() or s.fingerprint.startswith(spec)]
    if len(hits) != 1:
        raise SystemExit(f"--a/--b {spec!r}: matches {len(hits)} systems "
                         f"({', '.join(s.gpu_name for s in systems)})")
    return hits[0]


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--db", required=True)
    ap.add_argument("--models", default="db/reference/truth")
    ap.add_argument("--model", action="append", required=True, help="model names, repeated or comma-separated")
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--a", help="first system (GPU name or part, or fingerprint prefix)")
    ap.add_argument("--b", help="second system")
    ap.add_argument("--partitions", action="store_true",
                    help="every pair of the database's systems (one GPU at several SM counts)")
    ap.add_argument("--memory", default="l2", help="memory models to validate: l2 (benanza's), dram (Habitat's)")
    ap.add_argument("--ceilings", default="spec", choices=("spec", "measured"),
                    help="GPU figures: the spec table's, or the ceilings measured on each system (benanza ceilings)")
    ap.add_argument("--fixed-us", type=float, default=None, help="the fixed part per layer (default: predict's)")
    ap.add_argument("--no-span", action="store_true", help="Habitat's SM ratio instead of the SMs each layer keeps busy")
    ap.add_argument("--json", help="write the validations here")
    ap.add_argument("--errors-out", help="write the per-kind error table here (benanza predict's error bars)")
    return ap.parse_args(argv)


def _pairs(a, systems):
    if a.partitions:
        return list(itertools.permutations(systems, 2))
    if a.a and a.b:
        sa, sb = _system(systems, a.a), _system(systems, a.b)
    elif len(systems) == 2:
        sa, sb = systems
    else:
        raise SystemExit(f"the database holds {len(systems)} systems: name two with --a and --b, or --partitions")
    return [(sa, sb), (sb, sa)]


def _specs(db, systems, ceilings):
    from benanza.analysis.gpus import find_gpu, with_measured_ceilings

    out = {}
    for s in systems:
        spec = find_gpu(s.gpu_name)
        if ceilings == "measured":
            spec = with_measured_ceilings(spec, db.ceilings(s.id))
        out[s.id] = spec
        print(f"system {s.id}: {s.gpu_name} -> {spec.name}, {spec.bandwidth / 1e12:.2f} TB/s, {spec.sm_count} SMs, "
              f"fp16 {spec.peak['fp16'] / 1e12:.0f} TFLOP/s ({ceilings})")
    return out


def main(argv=None) -> int:
    a = _args(argv)
    from benanza.analysis.analyzer import analyze
    from benanza.database.store import open_db
    from benanza.processing.model import parse_batches, process

    db = open_db(a.db, create=False)
    pairs = _pairs(a, db.systems())
    systems = list({s.id: s for p in pairs for s in p}.values())
    specs = _specs(db, systems, a.ceilings)
    names = [n.strip() for m in a.model for n in m.split(",") if n.strip()]
    dtypes = [d.strip() for d in a.dtype.split(",") if d.strip()]
    analyses = {}
    for name in names:
        path = Path(name) if name.endswith(".onnx") else Path(a.models) / f"{name}.onnx"
        for batch in parse_batches(a.batch):
            ml = process(path, batch)
            for dtype in dtypes:
                analyses[(ml.model, batch, dtype)] = {s.id: analyze(ml, db, s, dtype) for s in systems}
    out = {"command": " ".join(sys.argv), "ceilings": a.ceilings, "fixed_us": a.fixed_us, "span": not a.no_span}
    for memory in [m.strip() for m in a.memory.split(",") if m.strip()]:
        out[memory] = report(analyses, pairs, specs, memory, a.fixed_us, not a.no_span)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    if a.errors_out:
        first = next(m for m in out if m in ("l2", "dram"))
        archs = sorted({sp.architecture for sp in specs.values()})
        Path(a.errors_out).write_text(json.dumps(error_table(out[first], out["command"], a, archs), indent=1) + "\n")
        print(f"wrote {a.errors_out}")
    return 0 if any(out[m]["rows"] for m in out if m in ("l2", "dram")) else 1


def _validate_pair(analyses, o, t, specs, memory, fixed_us, span, rows, kinds, skipped):
    """Predict every configuration from system ``o`` to ``t``; append model rows and pool per-kind sums."""
    from benanza.analysis.predict import predict, validate

    pair = f"{o.gpu_name} -> {t.gpu_name}"
    for (model, batch, dtype), an in analyses.items():
        if not (an[o.id].complete and an[t.id].complete):
            skipped.append(f"{pair}: {model} b{batch} {dtype} (incomplete)")
            continue
        kw = {"span": span} if fixed_us is None else {"fixed_us": fixed_us, "span": span}
        p = predict(an[o.id], specs[o.id], specs[t.id], dtype, memory=memory, **kw)
        v = validate(p, an[t.id])
        rows.append({"pair": pair, "origin": o.gpu_name, "target": t.gpu_name, "model": model, "batch": batch,
                     "dtype": dtype, "origin_ms": an[o.id].lbl_sequential_ms, "measured_ms": an[t.id].lbl_sequential_ms,
                     "predicted_ms": p.lbl_sequential_ms, "error": v.lbl_sequential_error,
                     "parallel_error": v.lbl_parallel_error,
                     "naive_error": an[o.id].lbl_sequential_ms / an[t.id].lbl_sequential_ms - 1.0,
                     "mean_abs_layer_error": v.mean_abs_layer_error, "by_kind": v.by_kind})
        for lp, lt, lo in zip(p.layers, an[t.id].layers, an[o.id].layers):
            if lp.status == "measured" and lt.status == "measured" and lt.time_ms:
                k = kinds[pair][f"{lp.kind or lp.op} {dtype}"]
                k[0] += lp.predicted_ms
                k[1] += lt.time_ms
                k[2] += lo.time_ms
                k[3] += 1


def report(analyses, pairs, specs, memory, fixed_us, span=True) -> dict:
    """Validate every configuration on every ordered pair with one memory model and print the tables."""
    rows, skipped = [], []
    kinds = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0]))
    for o, t in pairs:
        _validate_pair(analyses, o, t, specs, memory, fixed_us, span, rows, kinds, skipped)
    print(f"\n=== memory model {memory}, fixed part {'default' if fixed_us is None else f'{fixed_us:g} us'}, "
          f"{'span (busy SMs)' if span else 'Habitat SM ratio'} ===")
    print(f"{'origin -> target':<58}{'model':<16}{'b':>4} {'dtype':<6}{'origin ms':>10}{'measured':>10}"
          f"{'predicted':>11}{'error':>8}{'naive':>8}{'layer|e|':>9}")
    for r in rows:
        print(f"{r['pair']:<58}{r['model']:<16}{r['batch']:>4} {r['dtype']:<6}{r['origin_ms']:>10.4f}"
              f"{r['measured_ms']:>10.4f}{r['predicted_ms']:>11.4f}{r['error']:>+8.1%}{r['naive_error']:>+8.1%}"
              f"{r['mean_abs_layer_error']:>9.1%}")
    for pair, ks in kinds.items():
        print(f"\nper layer kind, {pair} (pooled over models; error of summed times; naive = origin time)")
        print(f"{'kind':<22}{'layers':>8}{'measured ms':>13}{'predicted ms':>14}{'error':>9}{'naive':>9}")
        for k, (pr, me, orig, n) in sorted(ks.items(), key=lambda kv: -kv[1][1]):
            print(f"{k:<22}{n:>8}{me:>13.4f}{pr:>14.4f}{pr / me - 1:>+9.1%}{orig / me - 1:>+9.1%}")
    print()
    summary = {}
    for pair in [f"{o.gpu_name} -> {t.gpu_name}" for o, t in pairs] + [None]:
        sel = [r for r in rows if pair is None or r["pair"] == pair]
        if sel:
            m = sum(abs(r["error"]) for r in sel) / len(sel)
            nv = sum(abs(r["naive_error"]) for r in sel) / len(sel)
            mx = max(sel, key=lambda r: abs(r["error"]))
            summary[pair or "all"] = {"mean_abs_error": m, "naive_mean_abs_error": nv, "configurations": len(sel)}
            print(f"mean |model error| {pair or 'all pairs'}: {m:.2%} over {len(sel)} configurations (naive {nv:.2%}; "
                  f"{'meets' if m < 0.05 and (nv <= 0.10 or m * 3 <= nv) else 'misses'} the goal; "
                  f"worst {mx['model']} b{mx['batch']} {mx['dtype']} {mx['error']:+.1%})")
    for batch in sorted({r["batch"] for r in rows}):
        for pair in [f"{o.gpu_name} -> {t.gpu_name}" for o, t in pairs] + [None]:
            sel = [r for r in rows if r["batch"] == batch and (pair is None or r["pair"] == pair)]
            if not sel:
                continue
            m, nv = (sum(abs(r[k]) for r in sel) / len(sel) for k in ("error", "naive_error"))
            key = f"batch {batch}" + (f", {pair}" if pair else "")
            summary[key] = {"mean_abs_error": m, "naive_mean_abs_error": nv, "configurations": len(sel)}
            print(f"mean |model error| {key}{'' if pair else ', all pairs'}: {m:.2%} over {len(sel)} configurations "
                  f"(naive {nv:.2%})")
    for s_ in skipped:
        print(f"left out: {s_}")
    return {"rows": rows, "summary": summary, "skipped": skipped,
            "by_kind": {p: {k: list(v) for k, v in ks.items()} for p, ks in kinds.items()}}


def error_table(result: dict, command: str, a, architectures: list[str]) -> dict:
    """Per layer kind and data type over every validated configuration and pair: the mean and the
    90th percentile of |error| of the kind's summed predicted time in one model (what
    benanza.analysis.predict.error_bar reads)."""
    per = collections.defaultdict(list)
    for r in result["rows"]:
        for kind, e in r["by_kind"].items():
            per[(kind, r["dtype"])].append(abs(e))
    layers = collections.Counter()
    for ks in result["by_kind"].values():
        for key, (_pr, _me, _orig, n) in ks.items():
            layers[tuple(key.rsplit(" ", 1))] += n
    kinds: dict = {}
    for (kind, dtype), errs in sorted(per.items()):
        errs.sort()
        kinds.setdefault(kind, {})[dtype] = {"mean_abs_error": sum(errs) / len(errs),
                                             "p90_abs_error": errs[min(len(errs) - 1, int(0.9 * len(errs)))],
                                             "configurations": len(errs), "layers": layers[(kind, dtype)]}
    models = result["summary"].get("all", {})
    return {"what": "benanza predict's measured error per layer kind and data type: |predicted / measured - 1| of "
                    "the kind's summed layer times in one model, over every configuration and ordered pair of "
                    "systems validated (mean and 90th percentile)",
            "date": date.today().isoformat(), "command": command, "ceilings": a.ceilings, "span": not a.no_span,
            "architectures": architectures,
            "pairs": sorted(k for k in result["summary"] if "->" in k and not k.startswith("batch")),
            "model_mean_abs_error": models.get("mean_abs_error"), "configurations": models.get("configurations"),
            "kinds": kinds}


if __name__ == "__main__":
    sys.exit(main())
