#!/usr/bin/env python3
"""Profile models in PyTorch on the GPU with `benanza profile` and print what the join finds.

For every model x batch x data type: one profile folder (OUT/MODEL-bN-DTYPE: profile.json, the
torch.profiler trace, the cuDNN and cuBLASLt logs), then one line: measured latency (median, IQR),
GPU kernel time, host overhead, kernels per iteration by join category (layer / layout / fill /
copy / unfused_batch_norm / other) with their time, layers joined to a framework op, conv layers
with the cuDNN engine from the log, GEMM layers with the cuBLASLt algorithm, and notices.
`--json FILE` writes the same as a list of records.

  python3 benchmarks/profile_check.py --models ../shared/models --out profiles \\
      --model resnet50_bnkept --model densenet121 --model googlenet --model vit_b_16 \\
      --batch 1,32 --dtype fp32,fp16 [--runs 100] [--json profiles/summary.json]

Needs a CUDA GPU, PyTorch and onnx2torch (pure Python: on a machine without a package index,
carry its wheel and put it on PYTHONPATH; torchvision is optional, see benanza.profiles.capture).
"""
import argparse
import json
import sys
import time
from pathlib import Path


def _ms(v) -> str:
    return "-" if v is None else f"{v:.3f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default="../shared/models", help="folder of the ONNX models")
    ap.add_argument("--model", action="append", required=True, help="model name (file stem), repeatable")
    ap.add_argument("--batch", default="1,32")
    ap.add_argument("--dtype", default="fp32,fp16")
    ap.add_argument("--out", default="profiles", help="folder for the profile folders")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--no-logs", action="store_true", help="skip the cuDNN/cuBLASLt log run")
    ap.add_argument("--channels-last", action="store_true",
                    help="run in torch.channels_last memory format (folders end in -cl)")
    ap.add_argument("--json", help="write the summary records here")
    a = ap.parse_args(argv)

    from benanza.errors import BenanzaError
    from benanza.processing.model import parse_batches
    from benanza.profiles import capture_profile, load_profile

    records = []
    failed = 0
    for name in a.model:
        model = Path(a.models) / f"{name}.onnx"
        for batch in parse_batches(a.batch):
            for dtype in [d.strip() for d in a.dtype.split(",") if d.strip()]:
                folder = Path(a.out) / f"{name}-b{batch}-{dtype}{'-cl' if a.channels_last else ''}"
                t0 = time.perf_counter()
                try:
                    capture_profile(model, batch, dtype, folder, device=a.device, warmup=a.warmup, runs=a.runs,
                            iterations=a.iterations, logs=not a.no_logs, force=True,
                            channels_last=a.channels_last)
                    p = load_profile(folder, model)
                except BenanzaError as e:
                    failed += 1
                    print(f"{name} b{batch} {dtype}: FAILED: {e}", flush=True)
                    records.append({"model": name, "batch": batch, "dtype": dtype, "error": str(e)})
                    continue
                cat_ms, cat_n = p.category_ms(), p.category_counts()
                joined = sum(1 for lp in p.layers if lp.op is not None)
                convs = sum(1 for lp in p.layers if lp.op_type == "Conv")
                rec = {
                    "model": name, "batch": batch, "dtype": dtype, "channels_last": a.channels_last, "gpu": p.settings.gpu_name,
                    "torch": p.settings.framework_version, "cudnn": p.settings.cudnn_version,
                    "latency_ms": p.latency.median_ms, "latency_iqr_ms": p.latency.iqr_ms,
                    "gpu_kernel_ms": p.gpu_kernel_ms, "host_overhead_ms": p.host_overhead_ms,
                    "kernels": cat_n, "kernel_ms": cat_ms, "layers": len(p.layers), "layers_joined": joined,
                    "conv_layers": convs, "conv_engines": len(p.conv_engines), "gemm_algos": len(p.gemm_algos),
                    "engines": sorted({e.engine_config for e in p.conv_engines.values() if e.engine_config}),
                    "unmatched_ops": p.unmatched_ops, "unfused_ms": sum(u.ms for u in p.unfused()),
                    "notices": list(p.notices), "seconds": time.perf_counter() - t0,
                }
                records.append(rec)
                cats = " ".join(f"{c}={cat_n[c]}/{cat_ms[c]:.3f}" for c in cat_n if cat_n[c])
                print(f"{name} b{batch} {dtype}: latency {p.latency.median_ms:.3f} ms (IQR {p.latency.iqr_ms:.3f}), "
                      f"GPU {p.gpu_kernel_ms:.3f} ms, host {_ms(p.host_overhead_ms)} ms; kernels {cats}; "
                      f"joined {joined}/{len(p.layers)} layers; engines {len(p.conv_engines)}/{convs} convs, "
                      f"{len(p.gemm_algos)} GEMM algos; unmatched ops {p.unmatched_ops or '-'}; "
                      f"{rec['seconds']:.0f} s", flush=True)
                for n in p.notices:
                    print(f"  notice: {n}", flush=True)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(records, indent=1, default=str))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
