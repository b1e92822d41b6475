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

``--train [--optimizer sgd|adam|adamw]`` (issue 26, item 5): the same validation for the training
step (`benanza predict --train`, :func:`benanza.analysis.predict_training.predict_training`) from
`bench --train`'s measurements (benchmarks/gpu_predict.sh with TRAIN=1): per pair, model, batch and
data type the origin's, the target's measured and the predicted step LBL (critical path, ms), the
error and the naive error, each phase (forward, loss, backward data, backward weight, optimizer);
per phase and per layer kind and phase pooled over models; per pair the mean |step error| with its
error bar (median, quartiles, range over configurations) and the goal line "mean step error < 5 %
where the naive error > 10 %: met / not met" (:func:`error_bar`). --dtype takes benanza's precisions
(fp16, bf16, fp32) or benchmarks/train_step.py's mixed-precision names (amp16 -> fp16, ampbf16 ->
bf16, truth.AMP_PRECISION); a model name takes ``NAME_train.onnx`` (batch norms kept) first.
With ``--errors-out FILE`` it writes `benanza predict --train`'s error table
(db/reference/predict_train_errors.json, :func:`train_error_table`); ``--errors-append`` adds to an
existing one, so that one table holds several validations (SM partitions, H100 <-> H200).
``--same-implementation`` also validates the held-apart calls (:func:`unavailable_on_target`) like for
like (:func:`same_implementation`): each predicted from the origin's time of an implementation that runs
on both systems and judged against the target's time of that implementation. ``--launch-shapes``
scales each call whose best implementation on the origin has stored counters (``bench --train
--counters``) by its kernels' waves (:func:`benanza.analysis.predict.launch_units`).

  python3 benchmarks/predict_check.py --db predict.db --partitions --train --models out/onnx \\
      --model resnet18,resnet50,mobilenet_v2,vit_b_16,squeezenet1_1,alexnet --batch 32 --dtype fp16,fp32

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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # truth.py's data types (--train)


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
    ap.add_argument("--errors-out", help="write the per-kind error table here (benanza predict's error bars; with "
                    "--train benanza predict --train's, per call kind and phase)")
    ap.add_argument("--errors-append", action="store_true",
                    help="with --train --errors-out: keep that table's errors and add these (one table over "
                         "several validations, e.g. SM partitions and H100 <-> H200)")
    ap.add_argument("--train", action="store_true",
                    help="validate the training step (benanza predict --train; bench --train's measurements)")
    ap.add_argument("--same-implementation", action="store_true",
                    help="with --train: also validate the held-apart calls like for like, each timed on both systems "
                         "with the origin's fastest implementation of those that run on both")
    ap.add_argument("--launch-shapes", action="store_true",
                    help="with --train: scale each call whose best implementation has stored counters (bench --train "
                         "--counters) by its kernels' waves on the origin (benanza.analysis.predict.launch_units)")
    ap.add_argument("--optimizer", default="sgd",
                    help="with --train: the optimizer of the step (as bench --train --optimizer: sgd, adam, adamw)")
    a = ap.parse_args(argv)
    from benanza.analysis.training import OPTIMIZER_STATE

    if a.optimizer not in OPTIMIZER_STATE:
        ap.error(f"--optimizer must be one of {', '.join(OPTIMIZER_STATE)}, got {a.optimizer!r}")
    return a


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


def _model_path(a, name: str) -> Path:
    """A model's ONNX file: ``name`` itself when it ends in .onnx, else ``--models/NAME.onnx``; with
    --train ``--models/NAME_train.onnx`` first (the export that keeps its batch norms, as
    benchmarks/truth.py --train and gpu_predict.sh TRAIN=1 name it)."""
    if name.endswith(".onnx"):
        return Path(name)
    train = Path(a.models) / f"{name}_train.onnx"
    return train if a.train and train.exists() else Path(a.models) / f"{name}.onnx"


def _dtypes(a) -> list[tuple[str, str]]:
    """(label, benanza precision) per --dtype: itself, or with --train a mixed-precision step of
    benchmarks/train_step.py (amp16, ampbf16) as the precision benchmarks/truth.py holds it against
    (truth.AMP_PRECISION). Two labels of one precision would be the same measurements twice: refused."""
    from truth import AMP_PRECISION

    out = []
    for d in (x.strip() for x in a.dtype.split(",") if x.strip()):
        p = AMP_PRECISION.get(d, d) if a.train else d
        twin = next((lab for lab, q in out if q == p), None)
        if twin is not None:
            raise SystemExit(f"benanza: --dtype {twin} and {d} are both benanza's {p}: the same measurements")
        out.append((d, p))
    return out


def load(a, db, systems) -> tuple[dict, dict]:
    """Every model, batch and data type analysed on every system: ({(model, batch, dtype label):
    {system id: Analysis, or with --train its TrainingStep}}, {same key: the processed model})."""
    from benanza.analysis.analyzer import analyze
    from benanza.analysis.training import training_step
    from benanza.processing.model import parse_batches, process

    names = [n.strip() for m in a.model for n in m.split(",") if n.strip()]
    analyses, mls = {}, {}
    for name in names:
        for batch in parse_batches(a.batch):
            ml = process(_model_path(a, name), batch)
            for label, precision in _dtypes(a):
                an = {s.id: analyze(ml, db, s, precision) for s in systems}
                if a.train:
                    an = {sid: training_step(ml, x, db, next(s for s in systems if s.id == sid), a.optimizer)
                          for sid, x in an.items()}
                analyses[(ml.model, batch, label)] = an
                mls[(ml.model, batch, label)] = ml
    return analyses, mls


def main(argv=None) -> int:
    a = _args(argv)
    from benanza.database.store import open_db

    if a.launch_shapes and not a.train:
        raise SystemExit("benanza: --launch-shapes goes with --train (the training step's calls)")
    if a.errors_append and not (a.train and a.errors_out):
        raise SystemExit("benanza: --errors-append goes with --train --errors-out (it adds to a training error table)")
    db = open_db(a.db, create=False)
    pairs = _pairs(a, db.systems())
    systems = list({s.id: s for p in pairs for s in p}.values())
    specs = _specs(db, systems, a.ceilings)
    analyses, mls = load(a, db, systems)
    launch = _launch_shapes(db, systems, analyses) if a.launch_shapes else None
    out = {"command": " ".join(sys.argv), "ceilings": a.ceilings, "fixed_us": a.fixed_us, "span": not a.no_span}
    if a.train:
        out["optimizer"] = a.optimizer
    for memory in [m.strip() for m in a.memory.split(",") if m.strip()]:
        out[memory] = (report_train(analyses, mls, pairs, specs, memory, a.fixed_us, not a.no_span, db,
                                    a.same_implementation, launch) if a.train
                       else report(analyses, pairs, specs, memory, a.fixed_us, not a.no_span))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    if a.errors_out:
        first = next(m for m in out if m in ("l2", "dram"))
        archs = sorted({sp.architecture for sp in specs.values()})
        if a.train:
            before = None
            if a.errors_append and Path(a.errors_out).is_file():
                before = json.loads(Path(a.errors_out).read_text())
            table = train_error_table(out[first], out["command"], a, archs, before)
        else:
            table = error_table(out[first], out["command"], a, archs)
        Path(a.errors_out).write_text(json.dumps(table, indent=1) + "\n")
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


#: the training step's phases (benanza.analysis.training.TrainingStep.phase_ms), in step order
PHASES = ("forward", "loss", "backward_data", "backward_weight", "optimizer")
GOAL_ERROR, GOAL_NAIVE = 0.05, 0.10  # issue 26: mean step error < 5 % where the naive error is > 10 %


def _calls(step) -> list:
    """The step's calls other than the forward pass's inference layers, in the order
    predict_training predicts them: the backward (and training-forward) calls, the loss, the optimizer."""
    return list(step.calls) + [c for c in (step.loss_call, step.optimizer_call) if c is not None]


def _pool_train_kinds(tp, so, st, dtype, pooled) -> int:
    """Add one configuration's layers and calls to ``pooled[(kind, phase, dtype)]`` = [predicted,
    measured on the target, origin (ms), count]: the forward pass's inference layers measured on both
    systems (as the inference validation pools them), and every other call matched on the target by
    layer, phase and config key. Returns how many predicted calls have no such match there (a fused
    alternative taken on one system only): left out of the pooling, counted in the row."""
    for lp, lt, lo in zip(tp.forward.layers, st.forward.layers, so.forward.layers):
        if lp.status == "measured" and lt.status == "measured" and lt.time_ms:
            k = pooled[(lp.kind or lp.op, "forward", dtype)]
            k[0] += lp.predicted_ms
            k[1] += lt.time_ms
            k[2] += lo.time_ms
            k[3] += 1
    target = {(c.layer, c.phase, c.key): c for c in _calls(st)}
    unmatched = 0
    for oc, pc in zip(_calls(so), tp.calls):
        tc = target.get((oc.layer, oc.phase, oc.key))
        if pc.predicted_ms is None or tc is None or not tc.time_ms:
            unmatched += 1
            continue
        k = pooled[(oc.kind, oc.phase, dtype)]
        k[0] += pc.predicted_ms
        k[1] += tc.time_ms
        k[2] += oc.time_ms
        k[3] += 1
    return unmatched


def error_bar(rows: list[dict]) -> dict:
    """The spread of the step error over ``rows`` (configurations): mean, median and quartiles of
    |error| (``statistics.quantiles``, exclusive method; one row: its own), min and max of the signed
    error, the naive mean |error|, and the issue-26 goal: mean |error| < 5 % over the rows whose naive
    |error| > 10 % (``goal``: "met", "not met", or "not assessable" when no row has such a naive error)."""
    import statistics

    errs = sorted(abs(r["error"]) for r in rows)
    q1, _, q3 = statistics.quantiles(errs, n=4) if len(errs) > 1 else (errs[0], errs[0], errs[0])
    hard = [r for r in rows if abs(r["naive_error"]) > GOAL_NAIVE]
    hard_mean = sum(abs(r["error"]) for r in hard) / len(hard) if hard else None
    return {"configurations": len(rows), "mean_abs_error": sum(errs) / len(errs),
            "median_abs_error": statistics.median(errs), "q1_abs_error": q1, "q3_abs_error": q3,
            "min_error": min(r["error"] for r in rows), "max_error": max(r["error"] for r in rows),
            "naive_mean_abs_error": sum(abs(r["naive_error"]) for r in rows) / len(rows),
            "goal_configurations": len(hard), "goal_mean_abs_error": hard_mean,
            "goal": "not assessable" if hard_mean is None else ("met" if hard_mean < GOAL_ERROR else "not met")}


def _cannot_run(db, system_id: int, key: str, precision: str, layout: str, cache: str, call: str,
                algorithm: str) -> bool:
    """Does the implementation ``call`` / ``algorithm`` of config ``key`` fail on ``system_id``:
    a row of it failed or was refused there and none is valid, or that system has no row of the
    call at all (a graph no engine config took)? One left unrun by ``--max-engines`` while others
    of its call ran does not count."""
    rows = [m for m in db.measurements(system_id, [key], cache=cache) if m.precision == precision and m.layout == layout]
    same = [m for m in rows if m.call == call and m.algorithm == algorithm]
    return (any(m.status in ("failed", "not_supported") for m in same) and not any(m.status == "ok" for m in same)) \
        or not any(m.call == call for m in rows)


def unavailable_on_target(db, origin_id: int, target_id: int, so, st) -> dict[int, float]:
    """The calls of the step whose fastest implementation on one system cannot run on the other
    (:func:`_cannot_run`): the origin's (``so``) fastest on the target (``st``; the same model's step
    there), or the target's fastest on the origin. Returns index in ``so.calls`` -> the target's
    measured time of the call (ms). Such a call's prediction scales an implementation the target did
    not run, or misses a faster one the origin could not run: an SM partition of a green context
    cannot launch cuDNN's persistent batch norm sized for the whole GPU
    (benchmarks/results/2026-11-27c/), so a validation can hold those calls apart
    (:func:`benanza.analysis.predict_training.predict_training`'s ``known_ms``)."""
    target = {(c.layer, c.phase, c.key): c for c in st.calls}
    cache = so.forward.cache
    out: dict[int, float] = {}
    for i, oc in enumerate(so.calls):
        tc = target.get((oc.layer, oc.phase, oc.key))
        if oc.time_ms is None or tc is None or tc.time_ms is None or oc.config is None:
            continue
        if (tc.call, tc.algorithm, tc.layout) == (oc.call, oc.algorithm, oc.layout):
            continue
        prec = so.forward.kind_precision(oc.kind)
        if _cannot_run(db, target_id, oc.key, prec, oc.layout, cache, oc.call, oc.algorithm) or \
                _cannot_run(db, origin_id, tc.key, prec, tc.layout, cache, tc.call, tc.algorithm):
            out[i] = tc.time_ms
    return out


def _launch_shapes(db, systems, steps) -> dict:
    """--launch-shapes: each system's stored kernels (:func:`benanza.database.counters.read_counters`) of
    every layer and call of the training ``steps`` ({(model, batch, dtype): {system id: step}}), by
    system id; prints how many implementations have them."""
    from benanza.database.counters import read_counters

    keys: dict[int, set] = {s.id: set() for s in systems}
    for by_system in steps.values():
        for sid, st in by_system.items():
            keys[sid] |= {lt.layer.key for lt in st.forward.layers if lt.status == "measured"}
            keys[sid] |= {c.key for c in list(st.calls) + [st.loss_call, st.optimizer_call] if c is not None}
    out = {sid: read_counters(db, sid, sorted(k)) for sid, k in keys.items()}
    for s in systems:
        print(f"launch shapes, {s.gpu_name}: {len(out[s.id])} implementations with stored counters")
    return out


def _serving(db, system_id: int, key: str, rule) -> dict[tuple[str, str, str], tuple[float, str]]:
    """Each implementation (call, algorithm, layout) of config ``key`` that serves on ``system_id`` by
    ``rule`` (:class:`benanza.database.query.Serves`, the LBL's own rule): its fastest median (ms)
    and math mode."""
    out: dict = {}
    for m in db.measurements(system_id, [key], cache=rule.cache):
        if rule(m):
            k = (m.call, m.algorithm, m.layout)
            if k not in out or m.median_ms < out[k][0]:
                out[k] = (m.median_ms, m.math)
    return out


def same_implementation(db, origin_id: int, target_id: int, so, st, held: dict[int, float]):
    """The like-for-like validation of the calls ``held`` (:func:`unavailable_on_target`, index in
    ``so.calls``): each timed on both systems with one implementation, the fastest on the origin of
    those that serve on both (:func:`_serving`), as Habitat predicts a kernel it profiled, never a
    change of algorithm. Returns (the origin's step with those calls' times and implementations
    replaced, {index in ``st.calls``: the target's time of that implementation (ms)}, how many calls
    found no shared implementation: those keep the origin's fastest and the target's fastest), or
    None when nothing is replaced."""
    import dataclasses

    from benanza.database.query import Serves

    cache = so.forward.cache
    layouts = tuple(so.forward.layouts)
    tindex = {(c.layer, c.phase, c.key): j for j, c in enumerate(st.calls)}
    calls, target_ms, unshared = list(so.calls), {}, 0
    for i in held:
        oc = so.calls[i]
        j = tindex.get((oc.layer, oc.phase, oc.key))
        rule = Serves(so.forward.kind_precision(oc.kind), cache, layouts)
        o, t = _serving(db, origin_id, oc.key, rule), _serving(db, target_id, oc.key, rule)
        shared = sorted((o[k][0], k) for k in o.keys() & t.keys())
        if j is None or not shared:
            unshared += 1
            continue
        ms, (call, algorithm, layout) = shared[0]
        calls[i] = dataclasses.replace(oc, time_ms=ms, call=call, algorithm=algorithm, layout=layout,
                                       math=o[(call, algorithm, layout)][1])
        target_ms[j] = t[(call, algorithm, layout)][0]
    if not target_ms:
        return None
    return dataclasses.replace(so, calls=calls), target_ms, unshared


def report_train(steps, mls, pairs, specs, memory, fixed_us, span=True, db=None, same=False, launch=None) -> dict:
    """--train: every configuration's training step (``steps[(model, batch, dtype)][system id]``, a
    :class:`benanza.analysis.training.TrainingStep`; ``mls`` its processed model) predicted from each
    pair's origin to its target (:func:`benanza.analysis.predict_training.predict_training`) and
    compared with the step measured there. The step LBL is the critical path (ms; ``benanza analyze
    --train``'s headline); error = predicted / measured - 1, naive error = origin / measured - 1 (the
    same time as on the origin). A configuration whose step is incomplete on either system is listed
    in ``skipped`` and left out (never a 0 ms call). Prints and returns the rows (with each phase's
    origin, measured and predicted ms), the phases and the layer kinds pooled per pair (summed
    times), the layer kinds pooled over every configuration's calls measured on both systems
    (``by_kind_all_configurations``: an incomplete step's measured calls are predictions too), and
    per pair and over all pairs :func:`error_bar`. With the database ``db``, each row also has
    ``held_error``: the step error with the calls whose fastest implementation on one system cannot
    run on the other (:func:`unavailable_on_target`, ``held_calls`` of them) taken at their time on
    the target, so that what remains is the scaling's error; summarised per pair as
    ``held`` (:func:`error_bar` of those errors)."""
    from benanza.analysis.predict_training import predict_training

    same_impl = same
    rows, skipped = [], []
    phases = collections.defaultdict(lambda: {ph: [0.0, 0.0, 0.0, 0] for ph in PHASES})
    kinds = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0]))
    calls_all = collections.defaultdict(lambda: collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0]))
    kw = {"span": span} if fixed_us is None else {"fixed_us": fixed_us, "span": span}
    for o, t in pairs:
        pair = f"{o.gpu_name} -> {t.gpu_name}"
        for (model, batch, dtype), st in steps.items():
            so, stt = st[o.id], st[t.id]
            kwo = dict(kw, launch=launch.get(o.id)) if launch else kw  # the origin's launch shapes
            tp = predict_training(mls[(model, batch, dtype)], so, specs[o.id], specs[t.id], memory, **kwo)
            # every call measured on both systems, complete steps or not (a step missing calls gives
            # no step error, but its measured calls are predicted like any other)
            _pool_train_kinds(tp, so, stt, dtype, calls_all[pair])
            if not (so.complete and stt.complete):
                why = "; ".join(f"{s.gpu_name}: {x.incomplete_note}" for s, x in ((o, so), (t, stt)) if not x.complete)
                skipped.append(f"{pair}: {model} b{batch} {dtype} ({why})")
                continue
            ph = {p: {"origin_ms": so.phase_ms.get(p), "measured_ms": stt.phase_ms.get(p),
                      "predicted_ms": tp.phase_ms.get(p)} for p in PHASES}
            for p, v in ph.items():
                if None not in v.values():
                    acc = phases[pair][p]
                    acc[0] += v["predicted_ms"]
                    acc[1] += v["measured_ms"]
                    acc[2] += v["origin_ms"]
                    acc[3] += 1
            own = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0])
            unmatched = _pool_train_kinds(tp, so, stt, dtype, own)
            for key, (pr, me, orig, n) in own.items():
                acc = kinds[pair][key]
                acc[0] += pr
                acc[1] += me
                acc[2] += orig
                acc[3] += n
            held, held_error, same_error, same_calls, same_unshared = {}, None, None, 0, 0
            if db is not None:
                held = unavailable_on_target(db, o.id, t.id, so, stt)
                tph = predict_training(mls[(model, batch, dtype)], so, specs[o.id], specs[t.id], memory,
                                       known_ms=held, **kwo) if held else tp
                held_error = tph.critical_path_ms / stt.critical_path_ms - 1
                same = same_implementation(db, o.id, t.id, so, stt, held) if held and same_impl else None
                if same is not None:
                    # the target's step with those calls at the shared implementation's time there: the
                    # target "predicted" from itself (every factor 1) with those times given
                    so2, tms, unshared = same
                    ident = predict_training(mls[(model, batch, dtype)], stt, specs[t.id], specs[t.id], memory, **kw)
                    if abs(ident.critical_path_ms / stt.critical_path_ms - 1) > 1e-9:
                        raise SystemExit(f"benanza: {pair} {model}: the target's step from itself is not its own "
                                         f"({ident.critical_path_ms} against {stt.critical_path_ms} ms)")
                    meas2 = predict_training(mls[(model, batch, dtype)], stt, specs[t.id], specs[t.id], memory,
                                             known_ms=tms, **kw).critical_path_ms
                    pred2 = predict_training(mls[(model, batch, dtype)], so2, specs[o.id], specs[t.id], memory,
                                             **kwo).critical_path_ms
                    same_error, same_calls, same_unshared = pred2 / meas2 - 1, len(tms), unshared
                elif same_impl:  # nothing held apart, or no shared implementation: as held
                    same_error, same_calls, same_unshared = held_error, 0, 0
            rows.append({"pair": pair, "origin": o.gpu_name, "target": t.gpu_name, "model": model, "batch": batch,
                         "dtype": dtype, "precision": so.precision_label,
                         "origin_ms": so.critical_path_ms, "measured_ms": stt.critical_path_ms,
                         "predicted_ms": tp.critical_path_ms, "error": tp.critical_path_ms / stt.critical_path_ms - 1,
                         "naive_error": so.critical_path_ms / stt.critical_path_ms - 1,
                         "sequential_error": tp.sequential_ms / stt.sequential_ms - 1,
                         "sequential_naive_error": so.sequential_ms / stt.sequential_ms - 1,
                         "phases": ph, "calls_unmatched": unmatched, "fits": tp.fits,
                         "by_kind": {f"{k} {p}": pr / me - 1 for (k, p, _d), (pr, me, _o, _n) in own.items() if me > 0},
                         "held_calls": len(held), "held_error": held_error,
                         "held_kinds": sorted({so.calls[i].kind for i in held}),
                         "same_error": same_error, "same_calls": same_calls, "same_unshared": same_unshared})
    print(f"\n=== training step, memory model {memory}, fixed part "
          f"{'default' if fixed_us is None else f'{fixed_us:g} us'}, {'span (busy SMs)' if span else 'Habitat SM ratio'}"
          " (step LBL: critical path, ms) ===")
    print(f"{'origin -> target':<58}{'model':<18}{'b':>4} {'dtype':<8}{'origin ms':>10}{'measured':>10}"
          f"{'predicted':>11}{'error':>8}{'naive':>8}{'seq err':>9}")
    for r in rows:
        print(f"{r['pair']:<58}{r['model']:<18}{r['batch']:>4} {r['dtype']:<8}{r['origin_ms']:>10.4f}"
              f"{r['measured_ms']:>10.4f}{r['predicted_ms']:>11.4f}{r['error']:>+8.1%}{r['naive_error']:>+8.1%}"
              f"{r['sequential_error']:>+9.1%}")
    for pair, ps in phases.items():
        print(f"\nper phase, {pair} (summed over models; error of summed times; naive = origin time)")
        print(f"{'phase':<18}{'configs':>8}{'origin ms':>12}{'measured ms':>13}{'predicted ms':>14}{'error':>9}{'naive':>9}")
        for p, (pr, me, orig, n) in ps.items():
            if n and me:
                print(f"{p:<18}{n:>8}{orig:>12.4f}{me:>13.4f}{pr:>14.4f}{pr / me - 1:>+9.1%}{orig / me - 1:>+9.1%}")
    for pair, ks in kinds.items():
        print(f"\nper layer kind and phase, {pair} (pooled over models; error of summed times; naive = origin time)")
        print(f"{'kind':<22}{'phase':<17}{'dtype':<7}{'calls':>7}{'measured ms':>13}{'predicted ms':>14}"
              f"{'error':>9}{'naive':>9}")
        for (k, p, d), (pr, me, orig, n) in sorted(ks.items(), key=lambda kv: -kv[1][1]):
            print(f"{k:<22}{p:<17}{d:<7}{n:>7}{me:>13.4f}{pr:>14.4f}{pr / me - 1:>+9.1%}{orig / me - 1:>+9.1%}")
    for pair, ks in calls_all.items():
        print(f"\nper layer kind and phase, every configuration, complete or not, {pair} (the calls measured on both "
              "systems; error of summed times; naive = origin time)")
        print(f"{'kind':<22}{'phase':<17}{'dtype':<7}{'calls':>7}{'measured ms':>13}{'predicted ms':>14}"
              f"{'error':>9}{'naive':>9}")
        for (k, p, d), (pr, me, orig, n) in sorted(ks.items(), key=lambda kv: -kv[1][1]):
            print(f"{k:<22}{p:<17}{d:<7}{n:>7}{me:>13.4f}{pr:>14.4f}{pr / me - 1:>+9.1%}{orig / me - 1:>+9.1%}")
    print()
    summary = {}
    for pair in list(dict.fromkeys(f"{o.gpu_name} -> {t.gpu_name}" for o, t in pairs)) + [None]:
        sel = [r for r in rows if pair is None or r["pair"] == pair]
        if not sel:
            continue
        e = summary[pair or "all"] = error_bar(sel)
        goal = (f"{e['goal']}: {e['goal_mean_abs_error']:.2%} over {e['goal_configurations']}" if e["goal_mean_abs_error"]
                is not None else "not assessable: no configuration")
        print(f"mean |step error| {pair or 'all pairs'}: {e['mean_abs_error']:.2%} over {e['configurations']} "
              f"configurations (median {e['median_abs_error']:.2%}, IQR {e['q1_abs_error']:.2%}..{e['q3_abs_error']:.2%}, "
              f"range {e['min_error']:+.1%}..{e['max_error']:+.1%}; naive {e['naive_mean_abs_error']:.2%}); goal "
              f"(mean |step error| < {GOAL_ERROR:.0%} where |naive error| > {GOAL_NAIVE:.0%}) {goal} "
              f"with a naive error > {GOAL_NAIVE:.0%}")
    def what_held(sel, label):
        kinds_ = sorted({k for r in sel for k in r["held_kinds"]})
        return (f"held apart, {label}: {sum(r['held_calls'] for r in sel)} calls whose fastest implementation on one "
                f"system cannot run on the other taken at their time on the target ({', '.join(kinds_) or 'none'})")

    def what_same(sel, label):
        return (f"same implementation, {label}: those calls timed on both systems with the origin's fastest "
                f"implementation of those that run on both ({sum(r['same_calls'] for r in sel)} calls; "
                f"{sum(r['same_unshared'] for r in sel)} without one, left as measured)")

    for field, name, what in (("held_error", "held", what_held), ("same_error", "same", what_same)):
        for pair in list(dict.fromkeys(f"{o.gpu_name} -> {t.gpu_name}" for o, t in pairs)) + [None]:
            sel = [dict(r, error=r[field]) for r in rows if (pair is None or r["pair"] == pair)
                   and r.get(field) is not None]
            if not sel:
                continue
            e = summary.setdefault(pair or "all", {})[name] = error_bar(sel)
            print(what(sel, pair or "all pairs") + f": mean |step error| {e['mean_abs_error']:.2%} "
                  f"(median {e['median_abs_error']:.2%}, range {e['min_error']:+.1%}..{e['max_error']:+.1%}); "
                  f"goal {e['goal']}")
    for s_ in skipped:
        print(f"left out: {s_}")
    return {"rows": rows, "summary": summary, "skipped": skipped,
            "by_phase": {p: {k: list(v) for k, v in ps.items()} for p, ps in phases.items()},
            "by_kind": {p: {" ".join(k): list(v) for k, v in ks.items()} for p, ks in kinds.items()},
            "by_kind_all_configurations": {p: {" ".join(k): list(v) for k, v in ks.items()} for p, ks in calls_all.items()}}



def _spread(errs: list[float]) -> dict:
    """``mean_abs_error``, ``p90_abs_error`` (the sorted list's element at 90 %) and ``configurations``
    of the |errors| ``errs`` (fractions)."""
    errs = sorted(errs)
    return {"mean_abs_error": sum(errs) / len(errs), "p90_abs_error": errs[min(len(errs) - 1, int(0.9 * len(errs)))],
            "configurations": len(errs)}


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
        kinds.setdefault(kind, {})[dtype] = {**_spread(errs), "layers": layers[(kind, dtype)]}
    models = result["summary"].get("all", {})
    return {"what": "benanza predict's measured error per layer kind and data type: |predicted / measured - 1| of "
                    "the kind's summed layer times in one model, over every configuration and ordered pair of "
                    "systems validated (mean and 90th percentile)",
            "date": date.today().isoformat(), "command": command, "ceilings": a.ceilings, "span": not a.no_span,
            "architectures": architectures,
            "pairs": sorted(k for k in result["summary"] if "->" in k and not k.startswith("batch")),
            "model_mean_abs_error": models.get("mean_abs_error"), "configurations": models.get("configurations"),
            "kinds": kinds}


def train_error_table(result: dict, command: str, a, architectures: list[str], before: dict | None = None) -> dict:
    """The training prediction's error table (what :func:`benanza.analysis.predict_training.training_error_bar`
    reads): per call kind and phase (``"ConvBwdFilter backward_weight"``; the forward pass's layers
    as ``"KIND forward"``) and data type, the |error| of the key's summed predicted time in one
    configuration (complete steps only), over every configuration and ordered pair (``abs_errors``,
    their mean and 90th percentile), and the mean |step error| (``step``: plain and held apart, per
    data type). ``before``: an earlier table of this kind (``--errors-append``) whose errors and
    commands are kept beside these."""
    per: dict = collections.defaultdict(list)
    steps: dict = collections.defaultdict(list)
    held: dict = collections.defaultdict(list)
    if before:
        if before.get("what_kind") != "training":
            raise SystemExit(f"benanza: {a.errors_out}: not a training error table (--errors-append)")
        for key, by in before["kinds"].items():
            for dtype, e in by.items():
                per[(key, dtype)].extend(e["abs_errors"])
        for dtype, e in before["step"].items():
            steps[dtype].extend(e["abs_errors"])
            held[dtype].extend(e.get("held_abs_errors", []))
    for r in result["rows"]:
        for key, e in r["by_kind"].items():
            per[(key, r["dtype"])].append(abs(e))
        steps[r["dtype"]].append(abs(r["error"]))
        if r.get("held_error") is not None:
            held[r["dtype"]].append(abs(r["held_error"]))

    def stats(errs: list[float]) -> dict:
        return {**_spread(errs), "abs_errors": [round(x, 6) for x in sorted(errs)]}

    kinds: dict = {}
    for (key, dtype), errs in sorted(per.items()):
        kinds.setdefault(key, {})[dtype] = stats(errs)
    step = {d: {**stats(e), "held_abs_errors": [round(x, 6) for x in sorted(held.get(d, []))],
                "held_mean_abs_error": (sum(held[d]) / len(held[d])) if held.get(d) else None}
            for d, e in sorted(steps.items())}
    commands = list((before or {}).get("commands", [])) + [command]
    archs = sorted(set(architectures) | set((before or {}).get("architectures", [])))
    pairs = sorted(set((before or {}).get("pairs", [])) | {k for k in result["summary"] if "->" in k})
    return {"what": "benanza predict --train's measured error per call kind, phase and data type: |predicted / "
                    "measured - 1| of the key's summed call times in one training step, over every complete "
                    "configuration and ordered pair of systems validated (mean and 90th percentile), and the step's",
            "what_kind": "training", "date": date.today().isoformat(), "commands": commands, "ceilings": a.ceilings,
            "span": not a.no_span, "architectures": archs, "pairs": pairs, "step": step, "kinds": kinds}


def _main() -> int:
    """main(), with benanza's errors (a missing model file, a database that is not one) as one line."""
    from benanza.errors import BenanzaError

    try:
        return main()
    except BenanzaError as e:
        raise SystemExit(f"benanza: {e}") from None


if __name__ == "__main__":
    sys.exit(_main())
