"""Record a small training-step profile of a native PyTorch module with benanza's capture code, for
the training join's tests (issue 26; run on a GPU machine).

It runs exactly what ``benanza torch SPEC --train --no-bench`` profiles
(:func:`benanza.profiles.pytorch.prepare` with ``train``: the ONNX export, a log run with cuDNN and
cuBLASLt logging, and a timed run of training iterations under torch.profiler with
``record_shapes=True``, each iteration in ``record_function("benanza.iteration")`` and its phases
in ``benanza.phase:NAME`` ranges), no bench, into ``WORK``; then copies into ``--dest`` the files
the tests read:

    DEST/NAME_train_bB_DTYPE.json.gz        the Chrome trace (gzip)
    DEST/NAME_train_bB_DTYPE.profile.json   profile.json (settings, train, latency)
    DEST/NAME_train.onnx                    the export the trace is joined with (weights stripped)

(``_cpu`` after DTYPE for a CPU run.)

and prints the training join's summary (phases, roles, layers joined in the backward).

    python3 benchmarks/record_train_trace.py --spec resnet18 --batch 2 --dtype fp32 --iterations 2 \\
        --dest tests/data/traces
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--spec", default="resnet18", help="a benanza torch module spec (default resnet18)")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--dtype", default="fp32", choices=("fp32", "tf32", "fp16", "bf16"))
    ap.add_argument("--optimizer", default="sgd", choices=("sgd", "adam", "adamw"))
    ap.add_argument("--iterations", type=int, default=2, help="training iterations recorded (keep it small)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--runs", type=int, default=10, help="steps timed with CUDA events (the profile's latency)")
    ap.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu (a CPU trace has no kernels: "
                    "autograd's sequence numbers only)")
    ap.add_argument("--input-shape", help="per-sample input shape of an image model, e.g. 3x16x16")
    ap.add_argument("--dest", type=Path, default=HERE.parent / "tests" / "data" / "traces")
    ap.add_argument("--work", type=Path, help="the working folder (default: a temporary one, removed)")
    a = ap.parse_args(argv)

    from benanza.processing.model import process
    from benanza.processing.modules import resolve
    from benanza.profiles.pytorch import prepare
    from benanza.profiles.train_join import load_train_join

    shape = tuple(int(x) for x in a.input_shape.lower().split("x")) if a.input_shape else None
    src = resolve(a.spec, 128, shape)
    tmp = None
    work = a.work
    if work is None:
        tmp = tempfile.TemporaryDirectory(prefix="benanza-train-trace-")
        work = Path(tmp.name)
    try:
        ref = {"spec": a.spec, "seq": 128, "input_shape": list(shape) if shape else None}
        onnx_path, runs = prepare(src, work, [a.batch], a.dtype, None, a.device, bench=False, warmup=a.warmup,
                                  runs=a.runs, iterations=a.iterations, module_ref=ref, force=True,
                                  say=lambda m: print(m, flush=True), train=a.optimizer)
        folder = runs[0].folder
        stem = f"{src.name}_train_b{a.batch}_{a.dtype}" + ("_cpu" if a.device == "cpu" else "")
        a.dest.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(folder / "trace.json.gz", a.dest / f"{stem}.json.gz")
        shutil.copyfile(folder / "profile.json", a.dest / f"{stem}.profile.json")
        shutil.copyfile(onnx_path, a.dest / f"{src.name}_train.onnx")
        ml = process(onnx_path, a.batch)
        tj, _ = load_train_join(folder, ml, onnx_path)
        d = tj.to_dict()
        print(f"wrote {a.dest / (stem + '.json.gz')} ({(a.dest / (stem + '.json.gz')).stat().st_size / 1e3:.0f} kB), "
              f"{stem}.profile.json, {src.name}_train.onnx")
        print(f"{d['iterations']} iterations; step kernels {d['step_kernel_ms']['median_ms'] or 0:.4f} ms")
        print("phases: " + ", ".join(f"{p} {v['median_ms']:.4f}" for p, v in d["phase_ms"].items()))
        print("roles: " + ", ".join(f"{r} {v['median_ms']:.4f}" for r, v in d["role_ms"].items()))
        lys = d["layers"]
        print(f"layers: {len(lys)} joined, {sum(1 for x in lys if x['backward_ms'] > 0)} with backward kernels")
        from benanza.profiles.join import layer_paths, trace_has_scopes
        from benanza.profiles.trace import read_trace
        from benanza.profiles.train_join import backward_nodes

        tr = read_trace(folder / "trace.json.gz")
        nodes = backward_nodes(tr, ml, layer_paths(ml, onnx_path) if trace_has_scopes(tr) else None)
        print(f"backward nodes: {len(nodes)}, {sum(1 for x in nodes if x['forward_op'])} with their forward op, "
              f"{sum(1 for x in nodes if x['layer'] is not None)} with a layer")
        for n in d["notices"]:
            print("notice:", n)
    finally:
        if tmp is not None:
            tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
