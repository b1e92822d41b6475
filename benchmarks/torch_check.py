"""Check ``benanza torch`` end to end against a plain torch.profiler run of the same module
(issue 15, "Done when": the report's framework kernel time within 3 % of a plain profile).

Per model spec, batch and data type:

1. ``benanza torch SPEC --batch B --dtype D -o OUT/NAME --json`` (export, bench, profile the
   module with module scopes and library logging, join, analyze; extra ``--bench-args`` pass
   through), its stage times measured here;
2. a plain profile of the same module in a fresh process: eager, ``cudnn.benchmark=True``,
   ``torch.inference_mode()``, no hooks, no ``record_shapes``, ``--iters`` iterations under
   torch.profiler (``benchmarks/truth.py``'s :func:`profile_pytorch`);
3. the table: the report's GPU kernel time (union of kernel intervals, median over its profiled
   iterations) and the sum of its kernels' durations, the plain run's kernel sum (median, IQR),
   their difference (%), the layers the join gave framework time to, the LBL and the Benanza ratio.

    python benchmarks/torch_check.py --out DIR --models resnet50,vit_b_16,transformers:bert --batch 32 \\
        --dtype fp16 [--db DB] [--bench-args '--no-cold --max-engines 3'] [--iterations 5]

With ``--train [--optimizer sgd|adam|adamw]`` (issue 26, "Done when": the step kernel time within 3 %
of a plain torch.profiler run of the same step) step 1 is ``benanza torch SPEC --train`` and step 2
profiles the same training step without benanza (:func:`train_step.profile_step`: ``train()`` mode,
``zero_grad(set_to_none=True)``, forward, cross-entropy (or mean) loss, ``backward()``, the
optimizer's ``foreach`` step; no hooks, no library logging) in a fresh process; the compared figure
is the step's kernel-duration sum per iteration (median, memcpy and memset apart) from the report's
``pytorch.step_kernel_ms`` and from the plain trace.

    python benchmarks/torch_check.py --out DIR --models resnet50,vit_b_16,transformers:bert --batch 32 \
        --dtype fp16 --train [--optimizer sgd]

Writes ``DIR/torch-check.txt`` (and ``.json``) after every model, so a cut run keeps what it did.
GPU machine only.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from json_docs import scenarios_of  # noqa: E402
from truth import profile_pytorch, software_versions, stats  # noqa: E402

GOAL = 0.03  # |report - plain| / plain


def report_kernel_sums(folder: Path) -> dict:
    """Per-iteration sums of kernel durations (ms) of a profile folder's trace: ``stats`` dict."""
    from benanza.profiles.trace import read_trace

    tr = read_trace(folder / "trace.json.gz")
    sums = [sum(tr.kernels[i].dur_ms for i in it.kernels if tr.kernels[i].kind == "kernel") for it in tr.iterations]
    return stats(sums)


def plain_profile(spec: str, batch: int, dtype: str, iters: int, trace: Path) -> dict:
    """Step 2 in a child process (a clean CUDA context, as a user's own profile)."""
    code = ("import json,sys; sys.path.insert(0, %r); from truth import profile_pytorch; "
            "from benanza.processing.modules import resolve; "
            "r = profile_pytorch(resolve(%r), %d, %r, 10, %d, 20, __import__('pathlib').Path(%r)); "
            "print('RESULT ' + json.dumps(r))") % (str(HERE), spec, batch, dtype, iters, str(trace))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"plain profile of {spec} failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")


def plain_train_profile(spec: str, batch: int, dtype: str, optimizer: str, iters: int, trace: Path) -> dict:
    """Step 2 of ``--train`` in a child process: :func:`train_step.profile_step` on the resolved
    module spec (10 warm-up steps, ``iters`` profiled)."""
    code = ("import json,sys; sys.path.insert(0, %r); from train_step import profile_step; "
            "from benanza.processing.modules import resolve; "
            "r = profile_step(resolve(%r), %d, %r, %r, 10, %d, False, __import__('pathlib').Path(%r)); "
            "print('RESULT ' + json.dumps(r))") % (str(HERE), spec, batch, dtype, optimizer, iters, str(trace))
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=900)
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"plain training profile of {spec} failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")


def train_row_of(spec: str, batch: int, dtype: str, doc: dict, plain: dict, seconds: float) -> dict:
    """One ``--train`` row: the report's step kernel time against the plain step's (module doc)."""
    pt = doc.get("pytorch") or {}
    st = pt.get("step_kernel_ms") or {}
    mine = {"median": st.get("median_ms"), "iqr": st.get("iqr_ms"), "n": pt.get("iterations")}
    ref = plain["kernel_ms"]["median"]
    diff = (mine["median"] - ref) / ref if ref and mine["median"] is not None else None
    layers = doc.get("layers") or []
    step = (doc.get("ratios") or {}).get("step") or {}
    return {"model": spec, "batch": batch, "dtype": dtype, "report_gpu_kernel_ms": mine["median"],
            "report_kernel_sum": mine, "plain_kernel_sum": plain["kernel_ms"], "diff": diff,
            "within_goal": diff is not None and abs(diff) <= GOAL,
            "layers_with_time": sum(1 for r in layers if (r.get("forward_ms") or 0) + (r.get("backward_ms") or 0) > 0),
            "layers": len(layers), "lbl_ms": step.get("lbl_ms"), "latency_ms": None, "ratio": step.get("ratio"),
            "complete": step.get("complete"), "plain_phase_ms": {k: v["median"] for k, v in plain["phase_ms"].items()},
            "run_label": (doc.get("run") or {}).get("label"), "benanza_torch_s": seconds}


def row_of(spec: str, batch: int, dtype: str, doc: dict, folder: Path, plain: dict, seconds: float) -> dict:
    mine = report_kernel_sums(folder)
    ref = plain["kernel_ms"]["median"]
    diff = (mine["median"] - ref) / ref if ref else None
    layers = doc.get("layers") or []
    joined = sum(1 for r in layers if r.get("framework_kernel_ms"))
    return {"model": spec, "batch": batch, "dtype": dtype, "report_gpu_kernel_ms": doc.get("gpu_kernel_ms"),
            "report_kernel_sum": mine, "plain_kernel_sum": plain["kernel_ms"], "diff": diff,
            "within_goal": diff is not None and abs(diff) <= GOAL, "layers_with_time": joined, "layers": len(layers),
            "lbl_ms": doc.get("lbl_fused_parallel_ms"), "latency_ms": doc.get("latency_ms"),
            "ratio": doc.get("benanza_ratio"), "run_label": (doc.get("framework") or {}).get("run_label"),
            "benanza_torch_s": seconds}


def _f(x, d=3):
    return "-" if x is None else f"{x:.{d}f}"


def table(rows: list[dict], env: dict, command: str) -> str:
    lines = [f"command: {command}",
             "device: " + ", ".join(f"{k} {env.get(k)}" for k in ("gpu", "driver", "cuda_runtime", "cudnn", "torch",
                                                                   "torchvision", "transformers", "onnx", "git")),
             "",
             "model | batch | dtype | report GPU kernel ms (union) | report kernel sum ms (median, IQR) | "
             "plain torch.profiler kernel sum ms (median, IQR) | diff | layers with framework time | "
             "latency ms | LBL ms | Benanza ratio | benanza torch s"]
    for r in rows:
        rs, ps = r["report_kernel_sum"], r["plain_kernel_sum"]
        lines.append(" | ".join([r["model"], str(r["batch"]), r["dtype"], _f(r["report_gpu_kernel_ms"]),
                                 f"{_f(rs['median'])} ({_f(rs['iqr'])})", f"{_f(ps['median'])} ({_f(ps['iqr'])})",
                                 "-" if r["diff"] is None else f"{100 * r['diff']:+.2f} %",
                                 f"{r['layers_with_time']}/{r['layers']}", _f(r["latency_ms"]), _f(r["lbl_ms"]),
                                 _f(r["ratio"]), f"{r['benanza_torch_s']:.0f}"]))
    ok = sum(r["within_goal"] for r in rows)
    lines += ["", f"{ok} of {len(rows)} within {100 * GOAL:.0f} % of the plain profile's kernel time"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", default="resnet50,vit_b_16,transformers:bert")
    ap.add_argument("--batch", default="32")
    ap.add_argument("--dtype", default="fp16")
    ap.add_argument("--db", default=None)
    ap.add_argument("--bench-args", default="")
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--train", action="store_true", help="the training step (module doc)")
    ap.add_argument("--optimizer", default="sgd", choices=("sgd", "adam", "adamw"))
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    env = software_versions()
    command = "python benchmarks/torch_check.py " + " ".join(sys.argv[1:] if argv is None else argv)
    rows = []
    for spec in [m for m in a.models.split(",") if m]:
        for b in [int(x) for x in a.batch.split(",")]:
            for dt in a.dtype.split(","):
                name = spec.replace(":", "_").replace("/", "_")
                folder = a.out / f"{name}-b{b}-{dt}"
                cmd = [sys.executable, "-m", "benanza", "torch", spec, "--batch", str(b), "--dtype", dt, "-o",
                       str(folder), "--json", "--iterations", str(a.iterations), "--runs", str(a.runs), "--force"]
                if a.db:
                    cmd += ["--db", a.db]
                if a.bench_args:
                    cmd += ["--bench-args", a.bench_args]
                if a.no_bench:
                    cmd.append("--no-bench")
                if a.train:
                    cmd += ["--train", "--optimizer", a.optimizer]
                t = time.perf_counter()
                p = subprocess.run(cmd, capture_output=True, text=True)
                secs = time.perf_counter() - t
                (a.out / f"{name}-b{b}-{dt}.log").write_text(p.stderr[-20000:])
                if p.returncode != 0:
                    print(f"{spec} b{b} {dt}: benanza torch failed (exit {p.returncode}): "
                          f"{p.stderr.strip().splitlines()[-1:] if p.stderr.strip() else ''}", flush=True)
                    continue
                doc = scenarios_of(json.loads(p.stdout), f"benanza torch {spec} --json")[0]  # the first run's
                if a.train:
                    plain = plain_train_profile(spec, b, dt, a.optimizer, 10, a.out / f"{name}-b{b}-{dt}-plain.json")
                    rows.append(train_row_of(spec, b, dt, doc, plain, secs))
                else:
                    plain = plain_profile(spec, b, dt, 10, a.out / f"{name}-b{b}-{dt}-plain.json")
                    rows.append(row_of(spec, b, dt, doc, folder / f"profile-b{b}-{dt}", plain, secs))
                text = table(rows, env, command)
                (a.out / "torch-check.txt").write_text(text)
                (a.out / "torch-check.json").write_text(json.dumps({"env": env, "rows": rows}, indent=1))
                print(text.splitlines()[-3], flush=True)
    print(table(rows, env, command))
    return 0 if rows and all(r["within_goal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
