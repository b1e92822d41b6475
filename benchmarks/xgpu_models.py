"""Models, not only GEMMs: each model's LBL predicted on the GPUs of the public tables from a database measured
on a GPU benanza runs on, and how much of each prediction rests on a validated cross-architecture term.
No GPU.

    python benchmarks/xgpu_models.py [--db db/reference/h200_truth.sqlite.gz] [--from H200]
        [--models resnet50,vit_b_16,...] [--batch 1,32] [--dtype fp16,fp32]
        [--to A100-SXM4-80GB,L40S,B200,A100-PCIe-80GB,V100-PCIe-32GB,T4] [--train]

For every model (the ONNX files of db/reference/truth/, the same scenarios the database measured), batch, data
type and target it prints the LBL measured on the origin, the LBL predicted on the target
(``benanza predict``: benanza/analysis/predict.py) (each the headline LBL ``benanza predict`` prints: fused, critical path; a training step's critical path)
and the share of the predicted time by how each layer was predicted (:attr:`benanza.analysis.predict.LayerPrediction.method`):

* ``grid``: a GEMM through the public ratio grid (aiconfigurator's bf16/fp8 table; the error on shapes the grid
  never saw is in db/reference/xgpu/xgpu_errors.json, ``benchmarks/xgpu_check.py``), ``grid+wave`` through the
  grid to the table's GPU of the target's architecture, then wave scaling;
* ``model``: an fp32 GEMM through the model fitted on NeuSight's fp32 table (its cross-validated error, same file);
* ``wave``: wave scaling alone (every other layer: convolutions, normalisations, elementwise, attention), whose
  error across architectures was measured on GEMMs only (the public tables hold no other op) and on Hopper
  GPUs for every kind (db/reference/predict_errors.json).

The ``validated`` column is the share of the predicted time predicted by ``grid`` or ``model``, the terms
whose error was measured on the target; the rest rests on wave scaling. ``--train`` predicts the training step
of the ``*_train.onnx`` models instead (its forward GEMMs through the grid, the rest wave-scaled).
"""
from __future__ import annotations

import argparse
import collections
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TRUTH = ROOT / "db" / "reference" / "truth"
TARGETS = ("A100-SXM4-80GB", "L40S", "B200", "A100-PCIe-80GB", "V100-PCIe-32GB", "T4")
VALIDATED = ("grid", "grid+wave", "model", "model+wave", "wave+model", "wave+model+wave")


def shares(layers) -> dict[str, float]:
    """The share of the predicted time (sum over the layers with a prediction) by method family:
    grid, model, wave."""
    by = collections.Counter()
    for ly in layers:
        if ly.predicted_ms is None or not ly.method:
            continue
        fam = "grid" if "grid" in ly.method else "model" if "model" in ly.method else "wave"
        by[fam] += ly.predicted_ms
    total = sum(by.values())
    return {k: (v / total if total else 0.0) for k, v in by.items()}


def one(api, model: Path, batch: int, dtype: str, origin: str, target: str, db, train: bool):
    """(origin LBL ms, predicted LBL ms, shares, complete) of one scenario, or a one-line reason."""
    from benanza.errors import BenanzaError

    s = api.Scenario.of(str(model), batch=batch, dtype=dtype, system=origin)
    try:
        r = api.predict_training(s, target, db) if train else api.predict(s, target, db)
    except BenanzaError as e:
        return str(e).splitlines()[0]
    p = r.prediction
    if train:  # the step's LBL as `predict --train` heads it (critical path); shares over all its calls
        return p.step.critical_path_ms, p.critical_path_ms, shares([*p.forward.layers, *p.calls]), p.complete
    return p.origin_lbl_ms, p.lbl_ms, shares(p.layers), p.lbl_complete


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", default=str(ROOT / "db" / "reference" / "h200_truth.sqlite.gz"))
    ap.add_argument("--from", dest="origin", default="H200")
    ap.add_argument("--models", default="", help="comma-separated model names (default: every model of the truth set)")
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--dtype", default="fp16,fp32")
    ap.add_argument("--to", default=",".join(TARGETS))
    ap.add_argument("--train", action="store_true", help="the training step of the *_train.onnx models")
    args = ap.parse_args(argv)
    os.environ.setdefault("BENANZA_MODEL_CACHE", str(Path.home() / ".cache" / "benanza" / "models"))
    from benanza import api

    names = [m for m in args.models.split(",") if m]
    files = sorted(p for p in TRUTH.glob("*.onnx") if p.stem.endswith("_train") == args.train)
    if names:
        files = [p for p in files if p.stem.removesuffix("_train") in names]
    targets = [t for t in args.to.split(",") if t]
    db = api.open_database(args.db)  # once: a .gz reference database is unpacked at each open
    print(f"{'model':22} {'b':>3} {'dtype':5} {'target':15} {args.origin + ' ms':>10} {'pred. ms':>10} "
          f"{'ratio':>6} {'grid':>6} {'model':>6} {'wave':>6}  validated")
    summary = collections.defaultdict(list)
    for f in files:
        for batch in (int(b) for b in args.batch.split(",")):
            for dtype in args.dtype.split(","):
                for target in targets:
                    got = one(api, f, batch, dtype, args.origin, target, db, args.train)
                    if isinstance(got, str):
                        if "no measurement" in got or "not measured" in got or "no system" in got:
                            continue
                        print(f"{f.stem:22} {batch:>3} {dtype:5} {target:15} {'-':>10} {'-':>10}  {got[:60]}")
                        continue
                    o, t, sh, complete = got
                    val = sh.get("grid", 0.0) + sh.get("model", 0.0)
                    summary[(dtype, target)].append(val)
                    flag = "" if complete else "  INCOMPLETE"
                    print(f"{f.stem:22} {batch:>3} {dtype:5} {target:15} {o:10.4f} {t:10.4f} {t / o:6.2f} "
                          f"{100 * sh.get('grid', 0):5.1f}% {100 * sh.get('model', 0):5.1f}% "
                          f"{100 * sh.get('wave', 0):5.1f}%  {100 * val:5.1f}%{flag}")
    print()
    print("validated share of the predicted time (grid or fp32 model), median over the scenarios:")
    import statistics

    for (dtype, target), vals in sorted(summary.items()):
        print(f"  {dtype:5} {target:15} {len(vals):3} scenarios  median {100 * statistics.median(vals):5.1f}%  "
              f"max {100 * max(vals):5.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
