#!/usr/bin/env python3
"""Why PyTorch's AMP-bf16 training step is slower than its AMP-fp16 step, from training truth runs
(``benchmarks/truth.py --train``'s ``truth-results.tgz`` or folders): per model and batch with both
steps measured, the two steps' kernel time, and the batch-norm kernels among each step's heaviest
kernels (the records' ``top_kernels``, the 10 heaviest per step): cuDNN's (``cudnn::bn_...``) in
fp16, ATen's own (``at::native::batch_norm_...<c10::BFloat16...>``) in bf16. ATen takes cuDNN's batch
norm only for fp16 and fp32 input (``_select_batch_norm_backend``,
``aten/src/ATen/native/Normalization.cpp``). The batch-norm sums cover the heaviest kernels only:
lower bounds of the batch norms' whole time. No GPU.

    python3 benchmarks/amp_bf16_gap.py RUN/truth-results.tgz ... [--batch 32]

(the training truth runs of benchmarks/results/2026-11-27h/README.md are in the git history:
``git show 8281073:benchmarks/results/2026-11-27h/train/call1-g0/truth-results.tgz``; their table is
benchmarks/results/2026-11-27h/amp-bf16-gap.txt)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # truth.py beside it


def records(src: Path) -> list[dict]:
    """The records of one run (a ``truth.py --out`` folder or a ``truth-results.tgz``:
    :func:`truth.run_records`). Raises SystemExit (one line) for a path that is neither."""
    import truth

    try:
        return truth.run_records(src)
    except truth.TruthError as e:
        raise SystemExit(f"benanza: {e}") from None


def is_cudnn_bn(name: str) -> bool:
    return "cudnn::bn_" in name


def rows(sources: list[Path], batches: set[int] | None = None) -> list[dict]:
    """One row per (model, batch) with both an ``amp16`` and an ``ampbf16`` PyTorch record (a later
    source's record replaces an earlier one's): the steps' kernel time (median, ms), the change, and
    the batch-norm kernels among their heaviest (ms)."""
    from benanza.profiles.train_compare import is_native_bf16_batch_norm

    seen: dict = {}
    for src in sources:
        for r in records(src):
            if r.get("kind") == "pytorch" and r.get("dtype") in ("amp16", "ampbf16") and (r.get("kernel_ms") or {}).get("median"):
                if batches is None or r.get("batch") in batches:
                    seen[(r["model"], r["batch"], r["dtype"])] = r
    out = []
    for (model, batch, dtype), b in sorted(seen.items()):
        a = seen.get((model, batch, "amp16"))
        if dtype != "ampbf16" or a is None:
            continue
        fp16, bf16 = a["kernel_ms"]["median"], b["kernel_ms"]["median"]
        out.append({"model": model, "batch": batch, "amp16_ms": fp16, "ampbf16_ms": bf16, "change": bf16 / fp16 - 1,
                    "cudnn_bn_fp16_ms": sum(t["ms"] for t in a.get("top_kernels") or [] if is_cudnn_bn(t["name"])),
                    "native_bn_bf16_ms": sum(t["ms"] for t in b.get("top_kernels") or [] if is_native_bf16_batch_norm(t["name"]))})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="truth-results.tgz archives or truth --out folders")
    ap.add_argument("--batch", default=None, help="batch sizes to keep, comma-separated (default: all)")
    a = ap.parse_args(argv)
    try:
        batches = {int(x) for x in a.batch.split(",")} if a.batch else None
    except ValueError:
        raise SystemExit(f"benanza: --batch {a.batch!r}: batch sizes must be integers") from None
    rs = rows(a.runs, batches)
    if not rs:
        raise SystemExit("benanza: no model has both an amp16 and an ampbf16 PyTorch measurement in these runs")
    print("model | batch | AMP-fp16 step ms | AMP-bf16 step ms | change | cuDNN batch-norm kernels, fp16 (ms, "
          "of the 10 heaviest) | ATen batch-norm kernels, bf16 (ms, of the 10 heaviest)")
    print("|".join(["---"] * 7))
    for r in rs:
        print(f"{r['model']} | {r['batch']} | {r['amp16_ms']:.3f} | {r['ampbf16_ms']:.3f} | {100 * r['change']:+.0f} % | "
              f"{r['cudnn_bn_fp16_ms']:.3f} | {r['native_bn_bf16_ms']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
