"""benanza's own GEMM times against the public table's on the same GPU (issue 55's agreement), on a GPU.

    python3 benchmarks/xgpu_agree.py --out OUT [--shapes 120] [--dtype bf16,fp8] [--timeout 240]

Draws ``--shapes`` (m, n, k) of the shipped sample (db/reference/xgpu/aiconfigurator_gemm_sample.csv.gz) measured
on this GPU (its spec name: H100-SXM or H200), spread over the table's range (stratified by the table's time,
weights of at most 2^26 elements), writes one weight-stripped ONNX model per data type with one ``MatMul(x[1, m, k],
w[k, n])`` per shape (``F.linear`` as torch.onnx exports it), ``benanza bench``es it (warm
measurements, no PyTorch) and compares each layer's time with the table's: per data type the median and the
10th-90th percentile of benanza / table, and the shapes where they differ by more than 10 %, into OUT/agree.txt
(and OUT/agree.json, OUT/xgpu.db). The methods differ (db/reference/xgpu/README.md): the table replays a CUDA
graph over up to 6 copies (no launch gap; a small weight stays in L2 across copies), benanza times each call
with CUDA events on warm buffers and takes the minimum over cuBLAS/cuBLASLt algorithms; the libraries differ too
(SGLang 0.5.10's torch and cuBLAS against this machine's).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "db" / "reference" / "xgpu" / "aiconfigurator_gemm_sample.csv.gz"
TABLE_DTYPE = {"bf16": "bfloat16", "fp8": "fp8"}


def pick(gpu: str, dtype: str, count: int):
    """``count`` shapes of the sample measured on ``gpu`` in the table's ``dtype``: stratified by time."""
    import pandas as pd

    t = pd.read_csv(SAMPLE)
    t = t[(t.gpu == gpu) & (t.dtype == dtype) & (t.n * t.k <= 1 << 26) & (t.m * t.k <= 1 << 26)]
    t = t.sort_values("ms").reset_index(drop=True)
    if len(t) <= count:
        return t
    idx = [round(i * (len(t) - 1) / (count - 1)) for i in range(count)]
    return t.iloc[sorted(set(idx))]


def gemm_model(path: Path, shapes) -> None:
    """One MatMul(x[1, m, k], w[k, n]) per (m, n, k), named ``g_m_n_k``, weights stripped: a leading
    batch of 1 on every input (benanza's batch; a GEMM folds it into m), the weight as ``nn.Linear``'s
    exported by torch.onnx's dynamo path (MatMul with the weight transposed at export)."""
    import onnx
    from onnx import TensorProto, helper

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from moe_gemms import _stripped

    nodes, init, inputs, outputs = [], [], [], []
    for m, n, k in shapes:
        name = f"g_{m}_{n}_{k}"
        nodes.append(helper.make_node("MatMul", [f"x_{name}", f"w_{name}"], [f"y_{name}"], name=name))
        init.append(_stripped(f"w_{name}", [k, n]))
        inputs.append(helper.make_tensor_value_info(f"x_{name}", TensorProto.FLOAT, [1, m, k]))
        outputs.append(helper.make_tensor_value_info(f"y_{name}", TensorProto.FLOAT, [1, m, n]))
    g = helper.make_graph(nodes, path.stem, inputs, outputs, init)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), str(path))


def gpu_name() -> str:
    from benanza.analysis.gpus import find_gpu

    out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True, check=True).stdout.splitlines()[0].strip()
    return find_gpu(out).name


def main(argv=None) -> int:
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--shapes", type=int, default=120)
    ap.add_argument("--dtype", default="bf16,fp8")
    ap.add_argument("--gpu", default=None, help="the table's GPU column (default: this machine's, nvidia-smi)")
    ap.add_argument("--timeout", type=float, default=240)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    gpu = a.gpu or gpu_name()
    db, report, doc = a.out / "xgpu.db", a.out / "agree.txt", {"gpu": gpu, "dtypes": {}}
    for dtype in a.dtype.split(","):
        t = pick(gpu, TABLE_DTYPE[dtype], a.shapes)
        model = a.out / f"gemms_{dtype}.onnx"
        gemm_model(model, list(zip(t.m, t.n, t.k)))
        t0 = time.time()
        bench = [sys.executable, "-m", "benanza", "bench", str(model), "--batch", "1", "--dtype", dtype, "--db", str(db),
                 "--no-cold", "--no-torch", "--quiet"]
        try:
            r = subprocess.run(bench, capture_output=True, text=True, timeout=a.timeout)
            rc, tail = r.returncode, (r.stdout + r.stderr)[-1500:]
        except subprocess.TimeoutExpired:
            rc, tail = 124, f"bench stopped after --timeout {a.timeout:.0f} s"
        print(f"xgpu_agree: bench {dtype} ({len(t)} shapes on {gpu}) exit {rc} in {time.time() - t0:.0f} s", flush=True)
        an = subprocess.run([sys.executable, "-m", "benanza", "analyze", str(model), "--batch", "1", "--dtype", dtype,
                             "--db", str(db), "--json"], capture_output=True, text=True)
        times = {}
        if an.returncode == 0:
            for ly in json.loads(an.stdout)["scenarios"][0].get("layers", []):
                if ly.get("time_ms"):
                    times[ly["name"]] = ly["time_ms"]
        rows = [(m, n, k, ms, times.get(f"g_{m}_{n}_{k}")) for m, n, k, ms in zip(t.m, t.n, t.k, t.ms)]
        got = [(m, n, k, ms, b) for m, n, k, ms, b in rows if b]
        ratio = np.array([b / ms for *_, ms, b in got]) if got else np.array([])
        doc["dtypes"][dtype] = {"shapes": len(rows), "measured": len(got), "bench_exit": rc,
                                "rows": [dict(m=int(m), n=int(n), k=int(k), table_ms=float(ms), benanza_ms=b)
                                         for m, n, k, ms, b in rows]}
        with report.open("a") as f:
            f.write(f"\n## {gpu} {dtype}: {len(got)} of {len(rows)} shapes measured (bench exit {rc})\n")
            if got:
                p10, p50, p90 = np.percentile(ratio, [10, 50, 90])
                f.write(f"benanza / table: median {p50:.3f}, 10th-90th percentile {p10:.3f}-{p90:.3f}, "
                        f"mean |benanza / table - 1| {np.mean(np.abs(ratio - 1)):.1%}\n")
                for m, n, k, ms, b in sorted(got, key=lambda g: -abs(g[4] / g[3] - 1))[:15]:
                    if abs(b / ms - 1) > 0.10:
                        f.write(f"  m={m} n={n} k={k}: table {ms * 1e3:.1f} µs, benanza {b * 1e3:.1f} µs ({b / ms:.2f}x)\n")
            else:
                f.write(tail + "\n")
        (a.out / "agree.json").write_text(json.dumps(doc, indent=1) + "\n")
    print(report.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
