#!/usr/bin/env python3
"""Fidelity of benanza's measurements against PyTorch.

For the convolution and GEMM layers of the given models at the given batch sizes and precisions,
run the same layer in PyTorch (torch.backends.cudnn.benchmark=True; the same data type; TF32 allowed
only for tf32) under torch.profiler and compare its kernel time with benanza's best measurement of
that layer config in the database (`benanza bench` must have measured the model on this GPU).
ratio = benanza best / PyTorch kernel time: <= 1 means benanza found an implementation at least as
fast as what PyTorch ran. PyTorch's time per call is the median over `--windows` profiler windows of
the kernel time of `--iters` back-to-back calls (the sum of its kernels' durations: launch gaps
excluded); its noise is the windows' spread. Because benanza's time per call is the device time of
back-to-back calls replayed from a CUDA graph, which includes the gaps between kernels (about a
microsecond each, a large share of a 5 us layer at batch 1), PyTorch's call is also timed with
benanza's own method: the same call captured `reps` times in a torch.cuda.CUDAGraph and replayed
between CUDA events, median of 30 samples (ratio_graph = benanza best / that time).

  python3 benchmarks/fidelity.py --db run.db --model resnet50.onnx --model vit_dyn.onnx --batch 1,32 \\
      --dtype fp32,tf32,fp16 [--json out.json]
  python3 benchmarks/fidelity.py --export-vit vit_b_16_dyn.onnx     # torchvision vit_b_16, dynamic batch
"""
import argparse
import json
import math
import statistics
import sys
from pathlib import Path

import numpy as np


def export_vit(path: Path) -> Path:
    """torchvision's vit_b_16 (random weights) exported with a dynamic batch; weights stored apart."""
    import onnx
    import torch
    import torchvision

    m = torchvision.models.vit_b_16().eval()
    x = torch.randn(1, 3, 224, 224)
    tmp = path.with_suffix(".tmp.onnx")
    torch.onnx.export(m, (x,), str(tmp), input_names=["input"], output_names=["output"], opset_version=17,
                      dynamic_axes={"input": {0: "N"}, "output": {0: "N"}}, dynamo=False)
    model = onnx.load(str(tmp))
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=path.name + ".data", size_threshold=1024)
    tmp.unlink()
    return path


def torch_call(cfg, precision: str):
    """A closure running ``cfg`` (benanza ConvConfig or GemmConfig) in PyTorch on the GPU."""
    import torch
    import torch.nn.functional as F

    dt = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(precision, torch.float32)
    dev = "cuda"
    g = torch.Generator(device=dev).manual_seed(0)

    def rnd(*shape, scale=1.0):
        return (torch.rand(*shape, device=dev, generator=g, dtype=torch.float32) * 2 - 1).mul_(scale).to(dt)

    if cfg.kind == "Conv":
        nsp = len(cfg.x) - 2
        begin, end = cfg.pads[:nsp], cfg.pads[nsp:]
        x = rnd(*cfg.x)
        pad = list(begin)
        if tuple(begin) != tuple(end):  # what benanza times: the conv on an input padded beforehand
            flat = []
            for b, e in zip(reversed(begin), reversed(end)):
                flat += [b, e]
            x = F.pad(x, flat)
            pad = [0] * nsp
        w = rnd(*cfg.w, scale=1.0 / math.sqrt(cfg.w[1] * math.prod(cfg.w[2:])))
        b = rnd(cfg.w[0]) if cfg.bias else None
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nsp]
        return lambda: conv(x, w, b, cfg.strides, pad, cfg.dilations, cfg.group)
    if cfg.kind == "Gemm":
        s = 1.0 / math.sqrt(cfg.k)
        if cfg.batch_count > 1:
            a, bm = rnd(cfg.batch_count, cfg.m, cfg.k), rnd(cfg.batch_count, cfg.k, cfg.n, scale=s)
            return lambda: torch.bmm(a, bm)
        a = rnd(cfg.k, cfg.m).t() if cfg.trans_a else rnd(cfg.m, cfg.k)
        if cfg.trans_b and not cfg.trans_a:
            w = rnd(cfg.n, cfg.k, scale=s)
            bias = rnd(cfg.n) if cfg.bias != "none" else None
            return lambda: F.linear(a, w, bias)
        bm = rnd(cfg.n, cfg.k, scale=s).t() if cfg.trans_b else rnd(cfg.k, cfg.n, scale=s)
        if cfg.bias != "none":
            bias = rnd(cfg.n)
            return lambda: torch.addmm(bias, a, bm)
        return lambda: a @ bm
    raise ValueError(cfg.kind)


def kernel_ms(fn, iters: int, windows: int) -> tuple[float, float, list]:
    """(median, relative spread) over profiler windows of the device time per call (ms), and the
    kernels of the last window as [(name, ms per call)], longest first."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    for _ in range(10):  # cudnn.benchmark autotunes on the first call of a shape
        fn()
    torch.cuda.synchronize()
    per_call = []
    for _ in range(windows):
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(iters):
                fn()
            torch.cuda.synchronize()
        total_us = 0.0
        kernels = []
        for e in prof.key_averages():
            t = getattr(e, "self_device_time_total", None)
            if t is None:
                t = getattr(e, "self_cuda_time_total", 0.0)
            total_us += t
            if t:
                kernels.append((e.key[:90], t / iters / 1000.0))
        per_call.append(total_us / iters / 1000.0)
    med = statistics.median(per_call)
    spread = (max(per_call) - min(per_call)) / med if med > 0 else float("inf")
    return med, spread, sorted(kernels, key=lambda k: -k[1])


def graph_ms(fn, samples: int = 30, sample_ms: float = 0.25) -> float:
    """PyTorch's device time per call with benanza's method: ``reps`` calls captured in a CUDA graph,
    the replay timed with CUDA events; median over ``samples`` replays (ms per call)."""
    import torch

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(20):
        fn()
    b.record()
    b.synchronize()
    reps = max(1, min(1000, math.ceil(sample_ms / max(a.elapsed_time(b) / 20, 1e-6))))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    out = []
    for _ in range(samples):
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) / reps)
    return statistics.median(out)


def compare(db_url: str, models: list[str], batches: list[int], precisions: list[str], iters: int, windows: int):
    import torch

    from benanza.analysis.analyzer import analyze, resolve_system
    from benanza.database.store import open_db
    from benanza.processing.model import process
    from benanza.runner.system import current_fingerprint

    torch.backends.cudnn.benchmark = True
    db = open_db(db_url, create=False)
    system, _ = resolve_system(db, None, current_fingerprint())
    rows = []
    for model in models:
        for batch in batches:
            ml = process(model, batch)
            for p in precisions:
                torch.backends.cudnn.allow_tf32 = p == "tf32"
                torch.backends.cuda.matmul.allow_tf32 = p == "tf32"
                a = analyze(ml, db, system, p)
                seen = set()
                for lt in a.layers:
                    cfg = lt.layer.config
                    if cfg is None or cfg.kind not in ("Conv", "Gemm") or cfg.key in seen:
                        continue
                    seen.add(cfg.key)
                    count = sum(1 for t in a.layers if t.layer.key == cfg.key)
                    row = {"model": Path(model).stem, "batch": batch, "precision": p, "kind": cfg.kind,
                           "key": cfg.key, "layers": count, "description": cfg.describe(),
                           "benanza_ms": lt.time_ms, "benanza_call": f"{lt.call} {lt.algorithm} {lt.math}",
                           "benanza_iqr_ms": lt.iqr_ms}
                    fn = torch_call(cfg, p)
                    t_ms, spread, kernels = kernel_ms(fn, iters, windows)
                    g_ms = graph_ms(fn)
                    row.update(torch_ms=t_ms, torch_spread=spread, torch_kernels=kernels[:4], torch_graph_ms=g_ms,
                               ratio=lt.time_ms / t_ms if lt.time_ms and t_ms > 0 else None,
                               ratio_graph=lt.time_ms / g_ms if lt.time_ms and g_ms > 0 else None)
                    rows.append(row)
    return rows, system.label()


def report(rows, label):
    for key, title in (("ratio", "PyTorch kernel time (profiler, sum of kernels)"),
                       ("ratio_graph", "PyTorch device time per call (CUDA graph + events: benanza's method)")):
        report_one(rows, label, key, title)


def report_one(rows, label, key, title):
    print(f"\n## fidelity: benanza best / {title} per layer config ({label})")
    print(f"{'model':<14}{'batch':>6} {'dtype':<6}{'kind':<6}{'n':>4}{'median':>8}{'p10':>7}{'p90':>7}{'max':>7}"
          f"{'<=1.05':>8}  missing")
    groups = {}
    for r in rows:
        groups.setdefault((r["model"], r["batch"], r["precision"], r["kind"]), []).append(r)
    for (m, b, p, k), rs in sorted(groups.items()):
        ratios = np.array([r[key] for r in rs if r[key] is not None])
        missing = sum(1 for r in rs if r[key] is None)
        if len(ratios):
            print(f"{m:<14}{b:>6} {p:<6}{k:<6}{len(ratios):>4}{np.median(ratios):>8.3f}{np.percentile(ratios, 10):>7.3f}"
                  f"{np.percentile(ratios, 90):>7.3f}{ratios.max():>7.3f}{np.mean(ratios <= 1.05):>8.0%}  {missing}")
    allr = np.array([r[key] for r in rows if r[key] is not None])
    if len(allr):
        print(f"all: {len(allr)} layer configs, median ratio {np.median(allr):.3f}, p90 {np.percentile(allr, 90):.3f}, "
              f"share <= 1.05: {np.mean(allr <= 1.05):.1%}; median PyTorch window spread "
              f"{np.median([r['torch_spread'] for r in rows]):.1%}")
    worst = sorted((r for r in rows if r[key] is not None), key=lambda r: -r[key])[:6]
    print("worst ratios:")
    for r in worst:
        print(f"  {r[key]:.2f}  {r['model']} b{r['batch']} {r['precision']} {r['description']}: benanza "
              f"{r['benanza_ms'] * 1e3:.1f} us ({r['benanza_call']}) vs PyTorch {r['torch_ms'] * 1e3:.1f} us "
              f"(graph {r['torch_graph_ms'] * 1e3:.1f} us): "
              + ", ".join(f"{n} {t * 1e3:.1f}" for n, t in r["torch_kernels"]))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db")
    ap.add_argument("--model", action="append", default=[])
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--dtype", default="fp32,tf32,fp16")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--windows", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--export-vit", help="write torchvision vit_b_16 with a dynamic batch to this path and exit")
    args = ap.parse_args()
    if args.export_vit:
        print(export_vit(Path(args.export_vit)))
        return
    if not args.db or not args.model:
        sys.exit("fidelity.py: --db and --model are required")
    rows, label = compare(args.db, args.model, [int(b) for b in args.batch.split(",")], args.dtype.split(","),
                          args.iters, args.windows)
    report(rows, label)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
