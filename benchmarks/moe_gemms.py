"""The experts' grouped GEMMs and block-scaled FP8 GEMMs at deployment widths, on a GPU.

Writes one-node ONNX models (weights stripped: benanza reads the shapes) of the products a mixture of
experts runs per layer, as benanza's export writes them (``benanza.GroupedMatMul``: x [S, K], w [E, K, N],
offs [E]):

* Mixtral-8x7B: hidden 4096, expert intermediate 14336, 8 experts, top-2 (gate/up n = 2 x 14336, down);
* Qwen3-30B-A3B: hidden 2048, expert intermediate 768, 128 experts, top-8;
* DeepSeek-V2-Lite: hidden 2048, expert intermediate 1408, 64 experts, top-6;

and Llama-3.1-8B's dense projections (MatMul, for the FP8 per-tensor vs block-scaled comparison), then
```benanza bench`` them at the token counts given (decode of 1, 8, 64 sequences, a prefill chunk of 512;
an MoE model's batch is its rows, tokens x top-k) in bf16 and fp8 into one database and prints ``benanza analyze``'s per-layer table
for each. Runs on the lent GPU machine after benchmarks/gpu_install.sh::

    python3 benchmarks/moe_gemms.py --out OUT [--tokens 1,8,64,512] [--dtype bf16,fp8]

Writes OUT/moe.db, OUT/onnx/*.onnx and OUT/moe-table.txt (appended as each model finishes).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

#: name -> (hidden, expert intermediate, experts, top-k)
MOE = {"mixtral-8x7b": (4096, 14336, 8, 2), "qwen3-30b-a3b": (2048, 768, 128, 8),
       "deepseek-v2-lite": (2048, 1408, 64, 6)}
#: Llama-3.1-8B's projections (k, n): q/k/v/o and the MLP's gate+up and down
DENSE = {"llama-3.1-8b": ((4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096))}  # qkv, o, gate+up, down


def _stripped(name: str, dims):
    """A float initializer with its shape and no data (weight-stripped, as benanza's exports are)."""
    from onnx import TensorProto

    t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=list(dims))
    t.data_location = TensorProto.EXTERNAL
    for key, value in (("location", "stripped.bin"), ("length", "0")):
        e = t.external_data.add()
        e.key, e.value = key, value
    return t


def moe_model(path: Path, hidden: int, inter: int, experts: int) -> None:
    """One MoE layer's experts as benanza's export writes them (gate/up product, SwiGLU, down product), the
    rows symbolic (``rows`` = tokens x top-k)."""
    import onnx
    from onnx import TensorProto, helper

    s = "rows"
    nodes = [helper.make_node("GroupedMatMul", ["x", "w_up", "offs"], ["h"], domain="benanza", name="experts_up"),
             helper.make_node("Slice", ["h", "zero", "half", "axis1"], ["g"], name="gate"),
             helper.make_node("Slice", ["h", "half", "full", "axis1"], ["u"], name="up"),
             helper.make_node("Sigmoid", ["g"], ["sg"]), helper.make_node("Mul", ["g", "sg"], ["silu"]),
             helper.make_node("Mul", ["silu", "u"], ["a"]),
             helper.make_node("GroupedMatMul", ["a", "w_down", "offs"], ["y"], domain="benanza", name="experts_down")]
    init = [_stripped("w_up", [experts, hidden, 2 * inter]), _stripped("w_down", [experts, inter, hidden]),
            helper.make_tensor("zero", TensorProto.INT64, [1], [0]),
            helper.make_tensor("half", TensorProto.INT64, [1], [inter]),
            helper.make_tensor("full", TensorProto.INT64, [1], [2 * inter]),
            helper.make_tensor("axis1", TensorProto.INT64, [1], [1])]
    g = helper.make_graph(nodes, path.stem,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [s, hidden]),
                           helper.make_tensor_value_info("offs", TensorProto.INT32, [experts])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [s, hidden])], init,
                          value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, [s, 2 * inter]),
                                      helper.make_tensor_value_info("a", TensorProto.FLOAT, [s, inter])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("benanza", 1)])
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(path))


def dense_model(path: Path, shapes) -> None:
    """One MatMul per (k, n) of ``shapes`` on ``batch`` tokens, weights stripped."""
    import onnx
    from onnx import TensorProto, helper

    nodes, init, inputs, outputs = [], [], [], []
    for i, (k, n) in enumerate(shapes):
        nodes.append(helper.make_node("MatMul", [f"x{i}", f"w{i}"], [f"y{i}"]))
        init.append(_stripped(f"w{i}", [k, n]))
        inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, ["batch", k]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, ["batch", n]))
    g = helper.make_graph(nodes, path.stem, inputs, outputs, init)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)]), str(path))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--tokens", default="1,8,64,512", help="tokens per step (the models' batch)")
    ap.add_argument("--dtype", default="bf16,fp8")
    ap.add_argument("--models", default=",".join([*MOE, *DENSE]))
    ap.add_argument("--timeout", type=float, default=240, help="seconds one bench may take (then an error row)")
    ap.add_argument("--deadline", type=float, default=None, help="seconds after which no bench starts")
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    table, db = a.out / "moe-table.txt", a.out / "moe.db"
    start = time.time()
    for name in a.models.split(","):
        path = a.out / "onnx" / f"{name}.onnx"
        if name in MOE:
            hidden, inter, experts, k = MOE[name]
            moe_model(path, hidden, inter, experts)
            # rows = tokens x top-k, the model's batch dimension
            batch = ",".join(str(int(t) * k) for t in a.tokens.split(","))
        else:
            dense_model(path, DENSE[name])
            batch = a.tokens
        for dtype in a.dtype.split(","):
            t0 = time.time()
            if a.deadline is not None and t0 - start > a.deadline:
                print(f"{name} {dtype}: not started, past --deadline {a.deadline:.0f} s", flush=True)
                continue
            extra = ["--batch", batch]
            bench = [sys.executable, "-m", "benanza", "bench", str(path), "--dtype", dtype, "--db", str(db),
                     "--no-cold", *extra]
            try:
                r = subprocess.run(bench, capture_output=True, text=True, timeout=a.timeout)
            except subprocess.TimeoutExpired as e:
                r = subprocess.CompletedProcess(bench, 124, e.stdout or "", (e.stderr or "") +
                                                f"\nmoe_gemms: bench stopped after --timeout {a.timeout:.0f} s\n")
                r.stdout = r.stdout.decode() if isinstance(r.stdout, bytes) else r.stdout
                r.stderr = r.stderr.decode() if isinstance(r.stderr, bytes) else r.stderr
            with table.open("a") as f:
                f.write(f"\n## {name} {dtype} {' '.join(extra)} (bench exit {r.returncode}, "
                        f"{time.time() - t0:.0f} s)\n")
                f.write((r.stdout or "")[-6000:] + (r.stderr or "")[-2000:])
            print(f"{name} {dtype} {' '.join(extra)}: exit {r.returncode} in {time.time() - t0:.0f} s", flush=True)
    print(table.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
