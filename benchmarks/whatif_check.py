"""benanza's what-if estimates against PyTorch with each finding applied (issue 15, item 3).

Per model and batch (GPU machine):

1. the **starting run**: the native torchvision module, eager, default memory format, PyTorch's
   fp32 defaults (TF32 convolutions, FP32 matmuls) or fp16, ``cudnn.benchmark`` **off** (so the
   algorithm-selection finding has something to change); benanza profiles it
   (:func:`benanza.profiles.capture_profile` with the native module: module scopes, cuDNN and
   cuBLASLt logs) and joins it with the model's ONNX export (the truth benchmark's exports in
   ``--exports``, whose layers the database ``--db`` holds: no bench here), and the insights'
   what-if composition (:attr:`benanza.analysis.insights.Insights.whatif`) gives each step's estimated
   saving (ms), in its fixed order;
2. the **measured** side: the same changes applied in PyTorch, one after the other in the
   composition's order, each on top of the ones before (so a measured gain is the step's
   marginal effect, as the estimate is): ``cudnn.benchmark = True`` (algorithm selection),
   ``channels_last`` (layout conversions), TF32 matmuls (Tensor Cores, fp32 runs),
   ``torch.compile`` (fusion; ``--compile``), a CUDA graph of the whole inference (launch gaps and
   host overhead); after each, the latency is the median of ``--runs`` inferences timed with CUDA
   events (100 by default) after warm-up;
3. the table: per finding the estimate (the step's signed effect, :attr:`benanza.analysis.whatif.WhatIfStep.effect_ms`:
   a change that slows the model down is estimated as a negative gain), the measured gain (median
   latency before minus after, with the IQRs), and the error |estimate - measured| / max(|measured|,
   noise), where noise = max(IQR before, IQR after, 1 % of the latency before): a change whose
   measured effect is within the noise is judged against the noise, not against a near-zero
   difference of medians. The goal is a median error <= 15 %.

For torch.compile the estimate is the fusion step's plus the unneeded-kernels step's (the batch
norms a folded export does not have, copies, fills): Inductor removes those too, in inference mode.

For the launch-gap step the estimate is what benanza says remains (its GPU busy time per inference,
the latency a CUDA graph leaves) subtracted from the measured starting latency: an eager run's
host-bound latency differs between processes of the same configuration by up to 2x at batch 1 (the
starting latencies' IQRs below), and the step's claim is the timeline after it, not that noise. The
table gives benanza's own latency beside it.

    python benchmarks/whatif_check.py --out DIR --db DB --exports db/reference/truth \\
        --models resnet50,vit_b_16,convnext_tiny,efficientnet_b0,mobilenet_v2 --batch 1,32 --dtype fp32 [--compile]

Writes ``DIR/whatif-check.txt`` and ``.json`` after every model (a cut run keeps what it did).

**``--train``** (issue 26, item 3): the same check over the training step (forward, cross-entropy
loss, ``backward()``, ``optimizer.step()``, ``zero_grad(set_to_none=True)``) and its what-if
(:mod:`benanza.analysis.train_whatif`, :func:`benanza.usecases.torch.train_comparison`). The starting run:
eager, fp32 (PyTorch's defaults), ``cudnn.benchmark`` off, the for-each optimizer (``foreach=True``).
The changes, in the composition's order, each on top of the ones before
(:data:`TRAIN_CHANGES`): a CUDA graph of the whole step with static inputs and targets (PyTorch's
"whole network capture": warm-up on a side stream, ``capturable=True`` for Adam/AdamW), ``fused=True``
optimizer, ``cudnn.benchmark = True``, ``channels_last``, AMP (``torch.autocast`` fp16; no grad
scaler: it adds no kernel the estimate has), ``torch.compile`` of the module (``--compile``). The
step's time is the median of ``--runs`` steps timed with CUDA events. A what-if step without its
measurement (``saving_ms`` None) gives a row with no estimate and no error. ``--dry-run`` prints
the plan (models, batches, the variants measured in order) without a GPU or torch::

    python benchmarks/whatif_check.py --train --out DIR --db DB --models resnet18,resnet50 --batch 32 \\
        --optimizer sgd [--compile] [--dry-run]

Writes ``DIR/whatif-check-train.txt`` and ``.json``.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from truth import software_versions, stats  # noqa: E402

GOAL = 0.15
#: the PyTorch change of each what-if step kind (benanza.analysis.insights) and what it is called in the table
CHANGES = {
    "algorithm_selection": "cudnn.benchmark",
    "layout_conversion": "channels_last",
    "tensor_cores": "TF32 matmuls",
    "layer_fusion": "torch.compile",
    "launch_gaps": "CUDA graph",
}


# ----------------------------------------------------------------------------- PyTorch (GPU)

class Variant:
    """The PyTorch configuration after some changes: which of :data:`CHANGES` are on."""

    def __init__(self, on: set[str]):
        self.on = set(on)

    def label(self) -> str:
        return " + ".join(CHANGES[k] for k in CHANGES if k in self.on) or "start"


def measure(spec: str, batch: int, dtype: str, v: Variant, runs: int, warmup: int = 20) -> dict:
    """Latency (ms per inference, CUDA events) of the module under ``v``: ``stats`` over ``runs``."""
    import torch

    from benanza.processing.modules import resolve

    torch.backends.cudnn.benchmark = "algorithm_selection" in v.on
    torch.backends.cuda.matmul.allow_tf32 = "tensor_cores" in v.on
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default
    torch.manual_seed(0)
    src = resolve(spec)
    model = src.build().cuda()
    cast = torch.float16 if dtype == "fp16" else None
    if cast is not None:
        model = model.to(cast)
    xs = [x.cuda() for x in src.inputs(batch)]
    xs = [x.to(cast) if cast is not None and x.is_floating_point() else x for x in xs]
    if "layout_conversion" in v.on:
        model = model.to(memory_format=torch.channels_last)
        xs = [x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x for x in xs]
    if "layer_fusion" in v.on:
        model = torch.compile(model)
    with torch.inference_mode():
        for _ in range(warmup):
            model(*xs)
        torch.cuda.synchronize()
        run = lambda: model(*xs)  # noqa: E731
        if "launch_gaps" in v.on:
            g = torch.cuda.CUDAGraph()
            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                for _ in range(3):
                    model(*xs)
            torch.cuda.current_stream().wait_stream(s)
            with torch.cuda.graph(g):
                model(*xs)
            run = g.replay
            for _ in range(5):
                run()
            torch.cuda.synchronize()
        samples = []
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(runs):
            torch.cuda.synchronize()
            start.record()
            run()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end))
    model = xs = run = None  # (let the module go before emptying the cache)
    torch.cuda.empty_cache()
    import torch._dynamo

    torch._dynamo.reset()
    return stats(samples)


# ------------------------------------------------------------------------ the training step (GPU)

#: the PyTorch change of each training what-if step (benanza.analysis.train_whatif.STEPS), in its order;
#: parallel execution has none
TRAIN_CHANGES = {
    "cuda_graphs": "CUDA graph of the step",
    "fused_optimizer": "fused=True optimizer",
    "algorithm_selection": "cudnn.benchmark",
    "channels_last": "channels_last",
    "amp": "AMP fp16 autocast",
    "fusion": "torch.compile",
}


def train_plan(steps: list[str], compile_: bool) -> list[tuple[str, set[str]]]:
    """The variants measured in order: ``(the step kind, the changes on)``, each on top of the ones
    before, for the what-if ``steps`` (kinds, in the composition's order) that have a PyTorch change
    (``fusion`` only with ``compile_``)."""
    on: set[str] = set()
    out = []
    for k in steps:
        if k not in TRAIN_CHANGES or (k == "fusion" and not compile_):
            continue
        on = on | {k}
        out.append((k, set(on)))
    return out


def measure_train(spec: str, batch: int, on: set[str], runs: int, optimizer: str = "sgd", warmup: int = 20) -> dict:
    """Time of one training step (ms, CUDA events) of the module under the changes ``on``
    (:data:`TRAIN_CHANGES`): ``stats`` over ``runs``."""
    import torch

    from benanza.processing.modules import resolve

    torch.backends.cudnn.benchmark = "algorithm_selection" in on
    torch.manual_seed(0)
    src = resolve(spec)
    model = src.build().cuda().train()
    xs = [x.cuda() for x in src.inputs(batch)]
    if "channels_last" in on:
        model = model.to(memory_format=torch.channels_last)
        xs = [x.contiguous(memory_format=torch.channels_last) if x.dim() == 4 else x for x in xs]
    fused = "fused_optimizer" in on
    graph = "cuda_graphs" in on
    kw = {"fused": True} if fused else {"foreach": True}
    if graph and optimizer != "sgd":
        kw["capturable"] = True
    opt = {"sgd": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, **kw),
           "adam": lambda p: torch.optim.Adam(p, lr=1e-4, **kw),
           "adamw": lambda p: torch.optim.AdamW(p, lr=1e-4, **kw)}[optimizer](model.parameters())
    fwd = torch.compile(model) if "fusion" in on else model
    with torch.no_grad():
        n_cls = fwd(*xs).shape[-1]
    target = torch.randint(0, n_cls, (batch,), device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled="amp" in on):
            loss = torch.nn.functional.cross_entropy(fwd(*xs), target)
        loss.backward()
        opt.step()

    run, g = step, None
    if graph:  # PyTorch's whole-network capture (CUDA semantics: CUDA graphs)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(g):
            step()
        run = g.replay
    for _ in range(warmup):
        run()
    torch.cuda.synchronize()
    samples = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(runs):
        torch.cuda.synchronize()
        start.record()
        run()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    run = step = g = None  # (the step's closure holds the module: let it go before emptying the cache)
    torch.cuda.empty_cache()
    import torch._dynamo

    torch._dynamo.reset()
    return stats(samples)


def estimates_train(spec: str, batch: int, db: str, folder: Path, runs: int, optimizer: str) -> dict:
    """Profile the starting training run with benanza (``cudnn.benchmark`` off) against the
    database ``db`` (no bench here) and return its ``torch --train`` report document (what-if)."""
    from benanza.spec import TorchRequest
    from benanza.usecases.torch import train_comparison
    from benanza.processing.modules import export_onnx, resolve
    from benanza.profiles import capture_profile
    from benanza.profiles.pytorch import ProfileRun

    src = resolve(spec)
    folder.mkdir(parents=True, exist_ok=True)
    export = folder / f"{src.name}_train.onnx"  # batch norms kept, as benanza torch --train exports
    export_onnx(src, export, keep_batch_norms=True)
    capture_profile(export, batch, "fp32", folder / "profile", warmup=20, runs=runs, iterations=3,
                    cudnn_benchmark=False, force=True, module={"spec": spec}, train=True, optimizer=optimizer)
    c = train_comparison(TorchRequest(spec, (batch,), "fp32", db), export,
                         ProfileRun(batch, False, None, folder / "profile", optimizer))
    return c.to_dict()


def train_rows(spec: str, batch: int, doc: dict, measured: list[tuple[str, dict, dict]]) -> list[dict]:
    """One row per measured change: ``measured`` is ``(step kind, before, after)`` in the plan's
    order (:func:`train_plan`, ``stats`` dicts); the estimate is the what-if step's signed effect
    (the CUDA graph's: the measured start minus the step's time after it, as for inference); a step
    benanza could not estimate has ``estimate_ms`` and ``error`` None."""
    steps = {s["kind"]: s for s in ((doc.get("whatif") or {}).get("steps") or [])}
    rows = []
    for kind, before, after in measured:
        st = steps.get(kind) or {}
        gain = before["median"] - after["median"]
        est = st.get("effect_ms")
        if kind == "cuda_graphs" and st.get("saving_ms") is not None:
            est = before["median"] - float(st["ms_after"])
        noise = max(before["iqr"], after["iqr"], 0.01 * before["median"])
        rows.append({"model": spec, "batch": batch, "dtype": "fp32", "finding": kind, "change": TRAIN_CHANGES[kind],
                     "estimate_ms": est, "benanza_effect_ms": st.get("effect_ms"), "measured_ms": gain,
                     "before": before, "after": after, "noise_ms": noise,
                     "error": None if est is None else abs(est - gain) / max(abs(gain), noise),
                     "rests_on": st.get("rests_on"),
                     "benanza_latency_ms": (doc.get("whatif") or {}).get("final_ms"),
                     "lbl_ms": (doc.get("whatif") or {}).get("lbl_ms")})
    return rows


def check_one_train(spec: str, batch: int, a) -> list[dict]:
    """The training check of one model and batch (module doc, ``--train``)."""
    doc = estimates_train(spec, batch, a.db, a.out / "profiles" / f"{spec}-b{batch}-train", a.runs, a.optimizer)
    kinds = [s["kind"] for s in ((doc.get("whatif") or {}).get("steps") or [])]
    before = measure_train(spec, batch, set(), a.runs, a.optimizer)
    measured = []
    for kind, on in train_plan(kinds, a.compile):
        after = measure_train(spec, batch, on, a.runs, a.optimizer)
        measured.append((kind, before, after))
        before = after
    return train_rows(spec, batch, doc, measured)


# ------------------------------------------------------------------------------- benanza side

def estimates(spec: str, export: Path, batch: int, dtype: str, db: str, folder: Path, runs: int,
              device: str = "cuda") -> dict:
    """Profile the starting run with benanza and return its insights document (what-if steps)."""
    from benanza.analysis.analyzer import analyze, resolve_system
    from benanza.database.store import open_db
    from benanza.analysis.insights import build_insights
    from benanza.processing.model import process
    from benanza.profiles import capture_profile, load_profile

    capture_profile(export, batch, dtype, folder, device=device, warmup=20 if device != "cpu" else 1,
                    runs=runs, iterations=3, cudnn_benchmark=False, logs=device != "cpu", force=True,
                    module={"spec": spec})
    prof = load_profile(folder, export, batch)
    database = open_db(db, create=False)
    system, _ = resolve_system(database, "H200")
    ml = process(export, batch)
    precision, conv = ("fp32", "tf32") if dtype == "fp32" else (dtype, None)
    a = analyze(ml, database, system, precision, "warm", ("NCHW", "NHWC"), conv)
    tc = analyze(ml, database, system, "tf32", "warm", ("NCHW", "NHWC")) if dtype == "fp32" else None
    ins = build_insights(a, prof, database, system.id, tensor_core=tc if tc is not None and tc.complete else None)
    return ins.to_dict()


def check_one(spec: str, export: Path, batch: int, dtype: str, a) -> list[dict]:
    """Steps 1-2 for one model and batch: one row per what-if step that has a PyTorch change."""
    doc = estimates(spec, export, batch, dtype, a.db, a.out / "profiles" / f"{spec}-b{batch}-{dtype}", a.runs)
    steps = (doc.get("whatif") or {}).get("steps") or []
    on: set[str] = set()
    before = measure(spec, batch, dtype, Variant(on), a.runs)
    rows = []
    for st in steps:
        kind = st.get("kind")
        if kind not in CHANGES or (kind == "layer_fusion" and not a.compile) or \
                (kind == "tensor_cores" and dtype != "fp32"):
            continue
        on.add(kind)
        after = measure(spec, batch, dtype, Variant(on), a.runs)
        gain = before["median"] - after["median"]
        effect = st.get("effect_ms")
        est = float(effect if effect is not None else st.get("saving_ms") or 0.0)
        if kind == "launch_gaps":
            est = before["median"] - float(st.get("ms_after"))
        if kind == "layer_fusion":
            # torch.compile (Inductor, inference) reaches the unneeded-kernels step too: it folds the
            # batch norms into pointwise kernels with their neighbours and drops copies
            est += sum(float(x.get("saving_ms") or 0.0) for x in steps if x.get("kind") == "unneeded_kernels")
        noise = max(before["iqr"], after["iqr"], 0.01 * before["median"])
        rows.append({"model": spec, "batch": batch, "dtype": dtype, "finding": kind, "change": CHANGES[kind],
                     "estimate_ms": est, "benanza_effect_ms": effect, "measured_ms": gain, "before": before,
                     "after": after, "noise_ms": noise, "error": abs(est - gain) / max(abs(gain), noise),
                     "benanza_latency_ms": doc.get("latency_ms"), "lbl_ms": doc.get("lbl_fused_parallel_ms")})
        before = after
    return rows


def _f(x, d=3):
    return "-" if x is None else f"{x:.{d}f}"


def table(rows: list[dict], env: dict, command: str) -> str:
    lines = [f"command: {command}",
             "device: " + ", ".join(f"{k} {env.get(k)}" for k in ("gpu", "driver", "cuda_runtime", "cudnn", "torch",
                                                                   "torchvision", "git")), "",
             "model | batch | dtype | finding | PyTorch change | estimate ms | measured gain ms | latency before "
             "(median, IQR) | after (median, IQR) | noise ms | error | benanza latency ms"]
    for r in rows:
        b, a = r["before"], r["after"]
        lines.append(" | ".join([r["model"], str(r["batch"]), r["dtype"], r["finding"], r["change"],
                                 _f(r["estimate_ms"], 4), _f(r["measured_ms"], 4),
                                 f"{_f(b['median'])} ({_f(b['iqr'])})", f"{_f(a['median'])} ({_f(a['iqr'])})",
                                 _f(r.get("noise_ms"), 4), "-" if r["error"] is None else f"{100 * r['error']:.0f} %",
                                 _f(r.get("benanza_latency_ms"))]))
    errs = [r["error"] for r in rows if r["error"] is not None]
    if errs:
        med = statistics.median(errs)
        lines += ["", f"{len(rows)} findings on {len({(r['model'], r['batch']) for r in rows})} model/batch pairs: "
                      f"median |estimate - measured| / max(|measured|, noise) = {100 * med:.0f} % "
                      f"(goal <= {100 * GOAL:.0f} %)"]
        kinds = sorted({r["finding"] for r in rows})
        for k in kinds:
            ek = [r["error"] for r in rows if r["finding"] == k and r["error"] is not None]
            if ek:
                lines.append(f"  {k}: median error {100 * statistics.median(ek):.0f} % over {len(ek)}")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--db", required=True, help="performance database holding the exports' layers")
    ap.add_argument("--exports", type=Path, default=HERE.parent / "db" / "reference" / "truth")
    ap.add_argument("--models", default="resnet50,vit_b_16,convnext_tiny,efficientnet_b0,mobilenet_v2")
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--dtype", default="fp32", choices=("fp32", "fp16"))
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--compile", action="store_true", help="also apply torch.compile for the fusion finding")
    ap.add_argument("--train", action="store_true", help="check the training step's what-if (module doc)")
    ap.add_argument("--optimizer", default="sgd", choices=("sgd", "adam", "adamw"), help="with --train")
    ap.add_argument("--dry-run", action="store_true", help="print the plan; no GPU, no torch")
    a = ap.parse_args(argv)
    command = "python benchmarks/whatif_check.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if a.dry_run:
        print(dry_run(a), end="")
        return 0
    a.out.mkdir(parents=True, exist_ok=True)
    env = software_versions()
    if a.train:
        return _main_train(a, env, command)
    rows: list[dict] = []
    for spec in [m for m in a.models.split(",") if m]:
        export = a.exports / f"{spec}.onnx"
        for b in [int(x) for x in a.batch.split(",")]:
            t = time.perf_counter()
            try:
                rows += check_one(spec, export, b, a.dtype, a)
            except Exception as e:  # noqa: BLE001 - one model's failure is reported, the others go on
                print(f"{spec} b{b}: failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            text = table(rows, env, command)
            (a.out / "whatif-check.txt").write_text(text)
            (a.out / "whatif-check.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
            print(f"{spec} b{b}: {time.perf_counter() - t:.0f} s", flush=True)
    print(table(rows, env, command))
    return 0


def dry_run(a) -> str:
    """The plan of a run (models, batches, the variants measured in order), without a GPU."""
    from benanza.analysis.train_whatif import STEPS as TRAIN_STEPS
    from benanza.analysis.whatif import STEPS as INFERENCE_STEPS

    models = [m for m in a.models.split(",") if m]
    batches = [int(x) for x in a.batch.split(",")]
    if a.train:
        plan = [(k, on) for k, on in train_plan([k for k, _ in TRAIN_STEPS], a.compile)]
        names = TRAIN_CHANGES
        head = f"training step, fp32, optimizer {a.optimizer} (for-each), cudnn.benchmark off at the start"
    else:
        plan, on = [], set()
        for k, _ in INFERENCE_STEPS:
            if k in CHANGES and not (k == "layer_fusion" and not a.compile) and \
                    not (k == "tensor_cores" and a.dtype != "fp32"):
                on = on | {k}
                plan.append((k, set(on)))
        names = CHANGES
        head = f"inference, {a.dtype}, cudnn.benchmark off at the start"
    lines = [f"dry run: {head}; {len(models)} models x {len(batches)} batches, {a.runs} timed runs per variant",
             "variants, each on top of the ones before:", "  0. start"]
    for n, (k, on) in enumerate(plan, 1):
        lines.append(f"  {n}. {k}: " + " + ".join(names[x] for x in names if x in on))
    for m in models:
        for b in batches:
            lines.append(f"{m} batch {b}: profile the start, then {len(plan) + 1} timed variants")
    out = a.out / ("whatif-check-train.txt" if a.train else "whatif-check.txt")
    lines.append(f"would write {out} and .json")
    return "\n".join(lines) + "\n"


def _main_train(a, env: dict, command: str) -> int:
    rows: list[dict] = []
    for spec in [m for m in a.models.split(",") if m]:
        for b in [int(x) for x in a.batch.split(",")]:
            t = time.perf_counter()
            try:
                rows += check_one_train(spec, b, a)
            except Exception as e:  # noqa: BLE001 - one model's failure is reported, the others go on
                print(f"{spec} b{b}: failed: {type(e).__name__}: {str(e)[:300]}", flush=True)
                continue
            (a.out / "whatif-check-train.txt").write_text(table(rows, env, command))
            (a.out / "whatif-check-train.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
            print(f"{spec} b{b}: {time.perf_counter() - t:.0f} s", flush=True)
    print(table(rows, env, command))
    return 0


if __name__ == "__main__":
    sys.exit(main())
