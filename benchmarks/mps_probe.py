"""What a process sees and how fast it runs under CUDA MPS with an active thread percentage (issue 26:
can MPS stand in for a smaller GPU where a green context cannot, for cuDNN's persistent batch norms?).

Prints one line per check, for the process's own GPU (run it under a client's CUDA_MPS_* environment,
benchmarks/gpu_mps.sh): the SM count PyTorch and benanza's native module report, a bf16 GEMM's
time (8192^3, CUDA events, median of 20), and PyTorch's training batch norm, forward and backward
(32x256x56x56 bf16 channels_last: cuDNN's SPATIAL_PERSISTENT mode) with its kernel names.
  python3 benchmarks/mps_probe.py LABEL
"""
from __future__ import annotations

import os
import statistics
import sys

import torch


def timed(fn, n=20):
    fn(); torch.cuda.synchronize()
    out = []
    for _ in range(n):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        out.append(a.elapsed_time(b))
    return statistics.median(out), min(out), max(out)


def main() -> None:
    label = sys.argv[1] if len(sys.argv) > 1 else "?"
    pct = os.environ.get("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "-")
    props = torch.cuda.get_device_properties(0)
    try:
        from benanza import _native
        nat = [d.get("sm_count") for d in _native.query_devices()]
    except Exception as e:  # the probe reports, it does not stop
        nat = f"error: {e}"
    print(f"mps_probe {label}: pct {pct}, torch SMs {props.multi_processor_count}, benanza._native SMs {nat}")
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    med, lo, hi = timed(lambda: x @ x)
    print(f"mps_probe {label}: GEMM bf16 8192^3 {med:.3f} ms (min {lo:.3f}, max {hi:.3f}), "
          f"{2 * 8192 ** 3 / med / 1e9:.0f} TFLOP/s")
    bn = torch.nn.BatchNorm2d(256).cuda()
    inp = torch.randn(32, 256, 56, 56, device="cuda", dtype=torch.bfloat16).to(memory_format=torch.channels_last)
    inp.requires_grad_(True)
    g = torch.randn_like(inp)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        med, lo, hi = timed(lambda: bn(inp))
        print(f"mps_probe {label}: BN train fwd 32x256x56x56 bf16 NHWC {med * 1e3:.1f} us (min {lo * 1e3:.1f}, max {hi * 1e3:.1f})")
        med, lo, hi = timed(lambda: torch.autograd.grad(bn(inp), (inp,), g))
        print(f"mps_probe {label}: BN train fwd+bwd {med * 1e3:.1f} us (min {lo * 1e3:.1f}, max {hi * 1e3:.1f})")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            torch.autograd.grad(bn(inp), (inp,), g); torch.cuda.synchronize()
    names = sorted({e.name[:70] for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
    print(f"mps_probe {label}: kernels {names}")


if __name__ == "__main__":
    main()
