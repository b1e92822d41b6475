"""What PyTorch runs for one training step of a native module (issue 26): the GPU kernel time of
forward, loss, backward and optimizer step, to hold ``benanza bench --train``'s training-step LBL
against.

For each model of the zoo (``benchmarks/zoo.py``; the native module, in ``train()`` mode: batch
normalisation with the batch's statistics, dropout active), batch and data type:

- ``fp16``: the module and its inputs cast with ``.half()`` (pure fp16 training, as benanza's
  ``--dtype fp16`` times every call in fp16); ``fp32``: PyTorch's defaults (cuDNN convolutions in
  TF32, matmuls without); ``amp16``: fp32 parameters under ``torch.autocast(dtype=float16)``
  (the usual mixed-precision recipe: its optimizer updates fp32 parameters); ``ampbf16``: the same
  under ``torch.autocast(dtype=bfloat16)`` (:data:`AUTOCAST`);
- one iteration = ``optimizer.zero_grad(set_to_none=True)``, forward, cross-entropy loss against
  random class indices (the model's first output; a tuple's first element; a ``last_hidden_state``
  is reduced by ``.float().mean()`` as the loss), ``loss.backward()``, ``optimizer.step()``
  (torch.optim's ``foreach`` implementation, the default on CUDA; ``--fused`` for ``fused=True``);
- ``cudnn.benchmark=True``; ``--warmup`` iterations, then ``--iters`` under ``torch.profiler``
  (CUDA activity), each inside ``record_function("benanza.iteration")`` with the phases in
  ``record_function("benanza.phase:NAME")`` ranges. A kernel belongs to the phase whose host range
  holds its launch (autograd's thread launches the backward's kernels while the main thread waits
  inside ``backward()``, so the wall-clock range holds them).

Printed and written to ``OUT/train_step.json``: per model, batch and dtype the median and IQR over
iterations of the step's kernel time (ms; memcpy and memset apart) and of each phase, the kernel
count and the top kernels; with ``--trace-dir`` the Chrome traces are kept (gzip).

    python3 benchmarks/train_step.py --out OUT [--models resnet50] [--batch 32] [--dtype fp16,fp32]
        [--optimizer sgd|adam|adamw] [--trace-dir DIR]
"""
from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent))

ITERATION = "benanza.iteration"
PHASES = ("zero_grad", "forward", "loss", "backward", "optimizer")
DTYPES = ("fp16", "fp32", "amp16", "ampbf16")
#: the autocast data type (a ``torch`` attribute name) of each mixed-precision data type: fp32
#: parameters and optimizer, autocast's op list (torch/amp/autocast_mode.py) in this type
AUTOCAST = {"amp16": "float16", "ampbf16": "bfloat16"}


def stats(xs: list[float]) -> dict:
    """Median, IQR (ms) and n of ``xs``."""
    import numpy as np

    if not xs:
        return {"median": None, "iqr": None, "n": 0}
    q1, med, q3 = np.percentile(xs, [25, 50, 75])
    return {"median": float(med), "iqr": float(q3 - q1), "n": len(xs)}


def _loss_of(out, torch, classes: int | None):
    """Cross-entropy against random classes for logits ``[B, C]`` (``[S, B, V]`` / ``[B, S, V]``:
    over the last dim); any other output: its mean (a stand-in the backward starts from)."""
    if isinstance(out, (tuple, list)):
        out = out[0]
    if hasattr(out, "last_hidden_state"):
        out = out.last_hidden_state
    if out.dim() >= 2 and out.is_floating_point() and out.shape[-1] >= 2 and classes != 0:
        logits = out.reshape(-1, out.shape[-1]).float()
        target = torch.randint(0, out.shape[-1], (logits.shape[0],), device=out.device)
        return torch.nn.functional.cross_entropy(logits, target)
    return out.float().mean()


def profile_step(entry, batch: int, dtype: str, optimizer: str, warmup: int, iters: int, fused: bool,
                 trace_path: Path) -> dict:
    """Profile ``iters`` training steps of ``entry``'s native module (module docstring); return the
    stats of the step's kernel time and of each phase (ms)."""
    import torch

    from benanza.profiles.trace import read_trace

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = entry.build().cuda().train()
    if dtype == "fp16":
        model = model.half()
    inputs = []
    for t in entry.inputs(batch):
        t = t.cuda()
        inputs.append(t.half() if dtype == "fp16" and t.is_floating_point() else t)
    params = [p for p in model.parameters() if p.requires_grad]
    kw = {"fused": True} if fused else {"foreach": True}
    opt = {"sgd": lambda: torch.optim.SGD(params, lr=1e-3, momentum=0.9, **kw),
           "adam": lambda: torch.optim.Adam(params, lr=1e-4, **kw),
           "adamw": lambda: torch.optim.AdamW(params, lr=1e-4, **kw)}[optimizer]()
    amp = torch.autocast("cuda", dtype=getattr(torch, AUTOCAST[dtype])) if dtype in AUTOCAST else None

    def step(mark: bool):
        def ph(name):
            return torch.profiler.record_function(f"benanza.phase:{name}") if mark else _Null()
        with ph("zero_grad"):
            opt.zero_grad(set_to_none=True)
        with ph("forward"):
            if amp is not None:
                with amp:
                    out = model(*inputs)
            else:
                out = model(*inputs)
        with ph("loss"):
            loss = _loss_of(out, torch, None)
        with ph("backward"):
            loss.backward()
        with ph("optimizer"):
            opt.step()

    for _ in range(warmup):
        step(False)
    torch.cuda.synchronize()
    wall = []
    for _ in range(max(3, iters)):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        step(False)
        b.record()
        b.synchronize()
        wall.append(a.elapsed_time(b))
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts) as prof:
        for _ in range(iters):
            with torch.profiler.record_function(ITERATION):
                step(True)
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(trace_path))
    peak = torch.cuda.max_memory_allocated()
    n_params = sum(p.numel() for p in params)
    model = inputs = opt = params = None  # freed before the next model
    torch.cuda.empty_cache()
    tr = read_trace(trace_path)
    return {**phase_stats(tr), "wall_ms": stats(wall), "max_memory_allocated": peak, "parameters": n_params,
            "settings": {"cudnn_benchmark": True, "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32,
                         "allow_tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
                         "optimizer": optimizer, "fused": fused, "foreach": not fused}}


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def phase_stats(tr) -> dict:
    """Per iteration (``benanza.iteration`` ranges of trace ``tr``): the kernel, memcpy and memset
    sums (ms), each phase's kernel sum (a kernel belongs to the ``benanza.phase:NAME`` range that
    holds its launch), the kernel count and the top kernels."""
    its = [it for it in tr.iterations if it.name == ITERATION] or list(tr.iterations)
    ranges = sorted((op.start_ms, op.end_ms, op.name.split(":", 1)[1]) for op in tr.cpu_ops
                    if op.name.startswith("benanza.phase:"))
    per = {"kernel": [], "memcpy": [], "memset": []}
    phase = {p: [] for p in PHASES}
    counts, names = [], {}
    for it in its:
        ks = tr.kernels_of(it)
        for kind in per:
            per[kind].append(sum(k.dur_ms for k in ks if k.kind == kind))
        sums = dict.fromkeys(PHASES, 0.0)
        for k in ks:
            if k.kind != "kernel":
                continue
            call = tr.launch_of(k)
            t = call.start_ms if call is not None else k.start_ms
            for s, e, name in ranges:
                if s <= t <= e:
                    sums[name] = sums.get(name, 0.0) + k.dur_ms
                    break
            names[k.name] = names.get(k.name, 0.0) + k.dur_ms / len(its)
        for p in PHASES:
            phase[p].append(sums.get(p, 0.0))
        counts.append(sum(1 for k in ks if k.kind == "kernel"))
    top = sorted(names.items(), key=lambda kv: -kv[1])[:10]
    return {"kernel_ms": stats(per["kernel"]), "memcpy_ms": stats(per["memcpy"]), "memset_ms": stats(per["memset"]),
            "phase_ms": {p: stats(v) for p, v in phase.items()},
            "kernels_per_iteration": statistics.median(counts) if counts else 0,
            "top_kernels": [{"name": n[:160], "ms": round(t, 5)} for n, t in top]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="resnet50")
    ap.add_argument("--batch", default="32")
    ap.add_argument("--dtype", default="fp16,fp32")
    ap.add_argument("--optimizer", default="sgd", choices=("sgd", "adam", "adamw"))
    ap.add_argument("--fused", action="store_true", help="torch.optim's fused=True instead of foreach")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--trace-dir", type=Path, help="keep the Chrome traces here (gzip)")
    a = ap.parse_args(argv)
    import zoo

    dtypes = a.dtype.split(",")
    for d in dtypes:
        if d not in DTYPES:
            ap.error(f"--dtype {d}: choose from {', '.join(DTYPES)}")
    a.out.mkdir(parents=True, exist_ok=True)
    rows = []
    out_json = a.out / "train_step.json"
    for entry in zoo.select(a.models):
        name = entry.name
        for d in dtypes:
            for b in (int(x) for x in a.batch.split(",")):
                trace = a.out / f"{name}-b{b}-{d}.trace.json"
                t0 = time.perf_counter()
                try:
                    r = profile_step(entry, b, d, a.optimizer, a.warmup, a.iters, a.fused, trace)
                except Exception as e:  # an OOM: recorded, the rest runs
                    rows.append({"model": name, "batch": b, "dtype": d, "error": f"{type(e).__name__}: {e}"[:300]})
                    print(f"{name} b{b} {d}: {rows[-1]['error']}", flush=True)
                    continue
                if a.trace_dir:
                    a.trace_dir.mkdir(parents=True, exist_ok=True)
                    with open(trace, "rb") as src, gzip.open(a.trace_dir / (trace.name + ".gz"), "wb") as dst:
                        shutil.copyfileobj(src, dst)
                trace.unlink()
                rows.append({"model": name, "batch": b, "dtype": d, "seconds": time.perf_counter() - t0, **r})
                ph = r["phase_ms"]
                print(f"{name} b{b} {d}: step kernels {r['kernel_ms']['median']:.3f} ms (IQR "
                      f"{r['kernel_ms']['iqr']:.3f}); forward {ph['forward']['median']:.3f}, loss "
                      f"{ph['loss']['median']:.3f}, backward {ph['backward']['median']:.3f}, optimizer "
                      f"{ph['optimizer']['median']:.3f}, zero_grad {ph['zero_grad']['median']:.3f}; wall "
                      f"{r['wall_ms']['median']:.3f} ms; peak {r['max_memory_allocated'] / 2**30:.2f} GiB", flush=True)
                out_json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
