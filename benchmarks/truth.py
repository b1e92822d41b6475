"""The truth benchmark (issue 14, item 6): is benanza's lower bound below what PyTorch runs?

For each selected model of the zoo (``benchmarks/zoo.py``), batch and data type:

(a) the **native module** runs in PyTorch eager on GPU 0 (``torch.inference_mode()``,
    ``cudnn.benchmark=True``, default memory format; fp16 = ``.half()`` model and inputs; fp32 =
    PyTorch's defaults, i.e. cuDNN convolutions in TF32 and matmuls without it, flags left as they
    are and recorded): warm-up, then ``--latency-iters`` iterations timed with CUDA events (wall
    latency of one inference, synchronized before each), then ``--iters`` iterations under
    ``torch.profiler`` (CUDA activity), each inside ``record_function("benanza.iteration")``. The GPU
    kernel time of an iteration is the sum of the durations of the kernels it launched (memcpy and
    memset reported apart); median and IQR over the iterations;
(b) the same module is exported to ONNX with a dynamic batch (zoo), weights deleted;
(c) ``benanza bench MODEL.onnx --batch 1,32 --dtype P --db DB --json`` runs as a subprocess (extra
    arguments after the known ones pass through, e.g. ``--no-cold --max-time-ms 200 --devices
    all``); P is fp16 for fp16, and for fp32 ``tf32`` when cuDNN layers (convolutions, RNNs) hold
    most of the model's FLOPs (the cuDNN-TF32 part of PyTorch's default) else ``fp32``. The headline LBL is
    ``lbl_fused_parallel_ms``; ``lbl_fused_sequential_ms``, ``lbl_sequential_ms``, ``complete``
    and bench's ``stages`` are kept;
(d) the table ``model | batch | dtype | benanza precision | PyTorch kernel ms (median, IQR) |
    LBL ms (fused parallel; fused seq) | ratio | flag`` (ratio = LBL fused parallel / PyTorch kernel
    median; flagged ``LBL>PT`` above 1.00, ``INCOMPLETE`` for a partial LBL) and per-model stage
    times (export, process, generate, compile, run, analyze, PyTorch).

``--train [--optimizer sgd|adam|adamw]`` (issue 26): the **training truth table**. (a) is the
native module's training step in ``train()`` mode (``benchmarks/train_step.py``: zero_grad,
forward, cross-entropy loss, backward, ``optimizer.step()`` with torch.optim's for-each step; the
same data types, and the mixed-precision steps ``amp16`` and ``ampbf16``, held against benanza's fp16
and bf16), its GPU kernel time per step and per phase; (b) exports keep their batch norms
(``NAME_train.onnx``, :func:`zoo.export_model` with ``keep_batch_norms``); (c) bench runs with
``--train --optimizer``; the row's LBL is the analysis's ``training_step`` (critical path; sequential),
its ratio LBL / PyTorch's step kernel time, and the table shows both phase splits (forward, loss,
backward, optimizer).

``--llm`` (issue 27): the **LLM truth table** of decoder configurations in prefill and decode
(``benchmarks/llm_truth.py``: its own options, ``--dry-run`` and ``--merge``).

Everything is written as it comes into ``--out``: ``results.jsonl`` (one record per event:
``env``, ``export``, ``precision``, ``pytorch``, ``bench``, ``analysis``, ``error``, ``skip``),
``table.txt``/``table.md``/``table.json`` (rewritten after each model), ``onnx/`` (the exports,
tens of kB each) and ``logs/`` (bench's stderr, bench's JSON). A run cut by a time limit keeps
everything done; ``--deadline SECONDS`` stops starting models when the time left is shorter than
the slowest model so far, in this run or (with ``--resume``) the earlier ones (or ``--min-model-s``). ``--skip-bench`` does no GPU work: it re-reads the
database with ``benanza analyze`` for the exports and PyTorch numbers of an earlier run (``--from``,
default ``--out``); ``--dry-run`` does everything but GPU work (exports, precision choice, the
commands it would run). torch is imported inside functions: ``--help`` works anywhere.

    python3 benchmarks/truth.py --out OUT --db OUT/truth.db [--models resnet50,vit_b_16]
        [--batch 1,32] [--dtype fp16,fp32] [--deadline 1700] [bench flags: --no-cold ...]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.append(str(HERE.parent))  # the repo's benanza only where none is installed

from json_docs import scenarios_of  # noqa: E402  (benanza --json, this schema and the ones before)

DTYPES = ("fp16", "fp32")
#: the data types of ``--train`` (benchmarks/train_step.py): DTYPES and the mixed-precision steps,
#: fp32 parameters under torch.autocast in float16 (``amp16``) or bfloat16 (``ampbf16``)
TRAIN_DTYPES = DTYPES + ("amp16", "ampbf16")
#: benanza's precision for each mixed-precision step: autocast's type, the one its convolutions and
#: matmuls (the steps' time) run in
AMP_PRECISION = {"amp16": "fp16", "ampbf16": "bf16"}
MARKER = "benanza.iteration"  # the iteration marker benanza.profiles.trace splits a trace by


class TruthError(Exception):
    """A bad argument or an unusable environment: printed as one ``benanza: ...`` line, exit 2."""


# ----------------------------------------------------------------- pure logic (unit-tested)

FP32_MODES = ("auto", "tf32", "fp32", "conv-tf32")


def choose_precision(dtype: str, cudnn_share: float, fp32_mode: str = "auto") -> str:
    """benanza's precision for a PyTorch data type: fp16 for fp16. For fp32 (PyTorch's default:
    ``torch.backends.cudnn.allow_tf32`` True, so cuDNN convolutions and RNNs in TF32;
    ``torch.backends.cuda.matmul.allow_tf32`` False, so matmuls in FP32), by ``fp32_mode``: "auto"
    is ``fp32+tf32conv`` when the model has cuDNN convolution or RNN layers (``cudnn_share`` > 0),
    else ``fp32``: exactly PyTorch's defaults (before 2026-11-27d "auto" took ``tf32`` above half of
    the FLOPs and ``fp32`` below, and ``fp32`` held an LSTM's TF32 cuDNN RNN to FP32 rows); "tf32" /
    "fp32" force one; "conv-tf32" is ``fp32+tf32conv`` always, benanza's ``--dtype fp32
    --conv-tf32`` (convolutions and cuDNN RNNs in TF32, the rest in FP32, as PyTorch).
    A mixed-precision training step (``amp16``, ``ampbf16``: :data:`TRAIN_DTYPES`) is held against
    autocast's type, :data:`AMP_PRECISION` (fp16, bf16). Raises TruthError for another data type."""
    if dtype == "fp16":
        return "fp16"
    if dtype in AMP_PRECISION:
        return AMP_PRECISION[dtype]
    if dtype != "fp32":
        raise TruthError(f"unknown data type {dtype!r} (fp16, fp32; amp16, ampbf16 with --train)")
    if fp32_mode == "auto":
        return "fp32+tf32conv" if cudnn_share > 0 else "fp32"
    if fp32_mode == "conv-tf32":
        return "fp32+tf32conv"
    if fp32_mode in ("tf32", "fp32"):
        return fp32_mode
    raise TruthError(f"unknown --fp32 mode {fp32_mode!r} ({', '.join(FP32_MODES)})")


def analysis_label(an: dict) -> str:
    """An analysis's precision as :func:`choose_precision` names it (``fp32+tf32conv`` when its
    convolutions ran in another precision)."""
    p, cp = an.get("precision"), an.get("conv_precision")
    return p if cp in (None, "", p) else f"{p}+{cp}conv"


def bench_calls(precisions: list[str]) -> list[tuple[str, list[str]]]:
    """``(--dtype value, extra flags)`` per benanza invocation: the plain precisions together, and
    ``fp32+tf32conv`` apart as ``--dtype fp32 --conv-tf32`` (that flag takes fp32 alone)."""
    plain = sorted(p for p in set(precisions) if p != "fp32+tf32conv")
    calls = [(",".join(plain), [])] if plain else []
    if "fp32+tf32conv" in precisions:
        calls.append(("fp32", ["--conv-tf32"]))
    return calls


def cudnn_flop_share(layers) -> float:
    """FLOPs of the layers PyTorch runs through cuDNN with TF32 allowed by default (convolutions and
    RNNs: :data:`benanza.kinds.CUDNN_TF32_KINDS`) / FLOPs of every benchmarked layer (0 when there
    are none); ``layers``: :attr:`benanza.processing.model.ModelLayers.layers`."""
    from benanza.kinds import CUDNN_TF32_KINDS

    total = conv = 0
    for ly in layers:
        if ly.config is None:
            continue
        f = ly.config.flops()
        total += f
        if ly.config.kind in CUDNN_TF32_KINDS:
            conv += f
    return conv / total if total else 0.0


def stats(samples: list[float]) -> dict:
    """``{"median", "q1", "q3", "iqr", "n"}`` of ``samples`` (ms; quartiles by linear interpolation)."""
    if not samples:
        return {"median": None, "q1": None, "q3": None, "iqr": None, "n": 0}
    xs = sorted(samples)
    if len(xs) == 1:
        q1 = q3 = xs[0]
    else:
        q1, _, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return {"median": statistics.median(xs), "q1": q1, "q3": q3, "iqr": q3 - q1, "n": len(xs)}


def make_row(model: str, batch: int, dtype: str, precision: str, pytorch: dict | None, analysis: dict | None,
             cudnn_share: float | None = None, train: bool = False) -> dict:
    """One table row from a ``pytorch`` record (``kernel_ms`` stats) and a benanza analysis dict
    (``lbl_fused_parallel_ms``, ``lbl_fused_sequential_ms``, ``lbl_sequential_ms``, ``complete``).
    ``train`` (``--train``): the PyTorch record is a training step's (``benchmarks/train_step.py``:
    ``kernel_ms`` of the whole step, ``phase_ms`` per phase) and the LBL the analysis's
    ``training_step`` (``lbl_ms``: the critical path; ``sequential_ms``; ``phase_ms``; ``complete``);
    the row keeps both phase splits (``pytorch_phase_ms``: forward, loss, backward, optimizer;
    ``lbl_phase_ms``: forward, loss, backward (data + weight), optimizer)."""
    pt = (pytorch or {}).get("kernel_ms") or {}
    step = (analysis or {}).get("training_step") if train else None
    if train:
        analysis = {"lbl_fused_parallel_ms": step.get("lbl_ms"), "lbl_fused_sequential_ms": step.get("sequential_ms"),
                    "lbl_sequential_ms": step.get("sequential_ms"), "complete": step.get("complete")} if step else None
    lbl = analysis.get("lbl_fused_parallel_ms") if analysis else None
    ratio = lbl / pt["median"] if lbl is not None and pt.get("median") else None
    complete = analysis.get("complete") if analysis else None
    row = {"model": model, "batch": batch, "dtype": dtype, "precision": precision, "cudnn_share": cudnn_share,
           "pytorch_ms": pt.get("median"), "pytorch_iqr_ms": pt.get("iqr"),
           "pytorch_wall_ms": ((pytorch or {}).get("wall_ms") or {}).get("median"),
           "lbl_ms": lbl, "lbl_fused_seq_ms": analysis.get("lbl_fused_sequential_ms") if analysis else None,
           "lbl_seq_ms": analysis.get("lbl_sequential_ms") if analysis else None, "complete": complete,
           "ratio": ratio}
    if train:
        pph = (pytorch or {}).get("phase_ms") or {}
        row["pytorch_phase_ms"] = {p: (pph.get(p) or {}).get("median") for p in ("forward", "loss", "backward", "optimizer")}
        lph = (step or {}).get("phase_ms") or {}
        bwd = [lph.get("backward_data"), lph.get("backward_weight")]
        row["lbl_phase_ms"] = {"forward": lph.get("forward"), "loss": lph.get("loss"),
                               "backward": sum(bwd) if None not in bwd and step else None,
                               "optimizer": lph.get("optimizer")}
    row["flags"] = flags(row)
    return row


def flags(row: dict) -> list[str]:
    """``LBL>PT`` for a ratio above 1.00, ``INCOMPLETE`` for a partial LBL, ``NO-LBL`` / ``NO-PYTORCH``
    for a missing side."""
    out = []
    if row.get("ratio") is not None and row["ratio"] > 1.0:
        out.append("LBL>PT")
    if row.get("complete") is False:
        out.append("INCOMPLETE")
    if row.get("lbl_ms") is None:
        out.append("NO-LBL")
    if row.get("pytorch_ms") is None:
        out.append("NO-PYTORCH")
    return out


def _f(x, digits=3) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def table_lines(rows: list[dict]) -> list[str]:
    """The truth table as aligned text (one line per row, a header and a rule)."""
    train = any("lbl_phase_ms" in r for r in rows)
    head = ["model", "batch", "dtype", "benanza precision", "PyTorch kernel ms (median, IQR)",
            "step LBL ms (critical path; sequential)" if train else "LBL ms (fused parallel; fused seq)", "ratio", "flag"]
    if train:
        head.insert(6, "fwd / loss / bwd / opt ms: PyTorch | LBL")
    cells = []
    for r in rows:
        prec = r["precision"] + (f" (cuDNN {r['cudnn_share']:.0%})" if r.get("cudnn_share") is not None else "")
        cells.append([r["model"], str(r["batch"]), r["dtype"], prec,
                      f"{_f(r['pytorch_ms'])} ({_f(r['pytorch_iqr_ms'])})",
                      f"{_f(r['lbl_ms'])}; {_f(r['lbl_fused_seq_ms'])}" + ("" if r.get("complete") is not False else " partial"),
                      _f(r["ratio"]), " ".join(r["flags"]) or "ok"])
        if train:
            pt, lb = r.get("pytorch_phase_ms") or {}, r.get("lbl_phase_ms") or {}
            order = ("forward", "loss", "backward", "optimizer")
            cells[-1].insert(6, " / ".join(_f(pt.get(p)) for p in order) + " | "
                             + " / ".join(_f(lb.get(p)) for p in order))
    widths = [max(len(x) for x in col) for col in zip(head, *cells)]
    line = lambda c: " | ".join(x.ljust(w) for x, w in zip(c, widths)).rstrip()  # noqa: E731
    return [line(head), "-+-".join("-" * w for w in widths)] + [line(c) for c in cells]


def table_markdown(rows: list[dict]) -> str:
    """The truth table as a Markdown table."""
    lines = table_lines(rows)
    out = ["| " + lines[0].replace(" | ", " | ") + " |", "|" + "|".join("---" for _ in lines[0].split(" | ")) + "|"]
    out += ["| " + ln + " |" for ln in lines[2:]]
    return "\n".join(out) + "\n"


STAGES = ("export_s", "process_s", "generate_s", "compile_s", "run_s", "torch_s", "analyze_s", "pytorch_s")


def stage_lines(stages: dict[str, dict]) -> list[str]:
    """Per-model stage times (s): ``stages[model]`` maps the names of :data:`STAGES` to seconds."""
    head = "model".ljust(20) + "".join(s[:-2].rjust(10) for s in STAGES) + "total".rjust(10)
    out = [head]
    for model, st in stages.items():
        vals = [st.get(s) for s in STAGES]
        out.append(model.ljust(20) + "".join(_f(v, 1).rjust(10) for v in vals)
                   + _f(sum(v for v in vals if v is not None), 1).rjust(10))
    return out


def summary_line(rows: list[dict]) -> str:
    """How many rows are at or below 1.00, above, incomplete, missing."""
    n = len(rows)
    above = sum(1 for r in rows if "LBL>PT" in r["flags"])
    inc = sum(1 for r in rows if "INCOMPLETE" in r["flags"])
    ok = sum(1 for r in rows if not r["flags"])
    miss = sum(1 for r in rows if "NO-LBL" in r["flags"] or "NO-PYTORCH" in r["flags"])
    return f"{n} rows: {ok} ok (LBL <= PyTorch kernel time, complete), {above} above 1.00, {inc} incomplete, {miss} missing a side"


# --------------------------------------------------------------------------- environment

def software_versions() -> dict:
    """torch, CUDA, cuDNN, GPU name, driver, and the other packages (None where absent)."""
    import importlib
    import platform

    env = {"python": platform.python_version(), "host": platform.node()}
    for mod in ("torch", "torchvision", "transformers", "onnx", "onnxscript", "onnxruntime", "benanza"):
        try:
            env[mod] = getattr(importlib.import_module(mod), "__version__", "?")
        except Exception:
            env[mod] = None
    try:
        import torch

        env["cuda_runtime"] = torch.version.cuda
        env["cudnn"] = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        env["gpu"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
        env["allow_tf32_cudnn"] = torch.backends.cudnn.allow_tf32
        env["allow_tf32_matmul"] = torch.backends.cuda.matmul.allow_tf32
    except Exception as e:
        env["torch_error"] = str(e).splitlines()[0] if str(e) else type(e).__name__
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
        env["driver"] = out.stdout.strip().splitlines()[0].split(",")[-1].strip() if out.returncode == 0 and out.stdout.strip() else None
    except (OSError, subprocess.SubprocessError):
        env["driver"] = None
    try:
        env["git"] = subprocess.run(["git", "-C", str(HERE.parent), "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True, timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        env["git"] = None
    return env


class Recorder:
    """Appends JSON records to ``out/results.jsonl`` (flushed and synced: a run killed at its time
    limit keeps every record written) and rewrites the tables."""

    def __init__(self, out: Path):
        self.out = out
        self.path = out / "results.jsonl"

    def write(self, kind: str, **rec) -> dict:
        """Append one record of ``kind`` (with a timestamp); return it."""
        rec = {"kind": kind, "time": time.strftime("%Y-%m-%dT%H:%M:%S"), **rec}
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(rec, default=str) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return rec

    def tables(self, rows: list[dict], stages: dict, env: dict, command: str) -> str:
        """Write table.txt, table.md and table.json; return the text table."""
        text = "\n".join([f"command: {command}", "device: " + _env_line(env), ""] + table_lines(rows)
                         + ["", summary_line(rows), "", "stage times (s)"] + stage_lines(stages)) + "\n"
        (self.out / "table.txt").write_text(text, encoding="utf-8")
        (self.out / "table.md").write_text(f"`{command}`\n\n{_env_line(env)}\n\n" + table_markdown(rows),
                                           encoding="utf-8")
        (self.out / "table.json").write_text(json.dumps({"env": env, "command": command, "rows": rows,
                                                         "stages": stages}, indent=1, default=str), encoding="utf-8")
        return text


def read_records(path: Path) -> list[dict]:
    """The records of a ``results.jsonl`` (a truncated last line, from a killed run, is skipped)."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def _env_line(env: dict) -> str:
    return (f"{env.get('gpu') or 'no GPU'}, driver {env.get('driver')}, CUDA {env.get('cuda_runtime')}, "
            f"cuDNN {env.get('cudnn')}, torch {env.get('torch')}, torchvision {env.get('torchvision')}, "
            f"transformers {env.get('transformers')}, onnx {env.get('onnx')}, onnxscript {env.get('onnxscript')}, "
            f"benanza {env.get('benanza')} ({env.get('git') or 'no git'})")


# ------------------------------------------------------------------------ PyTorch (GPU)

def _to_device(inputs: tuple, dtype: str):
    import torch

    out = []
    for t in inputs:
        t = t.cuda()
        out.append(t.half() if dtype == "fp16" and t.is_floating_point() else t)
    return tuple(out)


def profile_pytorch(entry, batch: int, dtype: str, warmup: int, iters: int, latency_iters: int,
                    trace_path: Path) -> dict:
    """Run ``entry``'s native module in eager PyTorch on GPU 0 (see the module docstring); return
    ``{"kernel_ms", "memcpy_ms", "memset_ms", "wall_ms"}`` (stats over iterations, ms), the kernel
    count per iteration, the top kernels and the settings."""
    import torch

    from benanza.profiles.trace import read_trace

    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    model = entry.build().cuda()
    if dtype == "fp16":
        model = model.half()
    inputs = _to_device(entry.inputs(batch), dtype)
    with torch.inference_mode():
        for _ in range(warmup):
            model(*inputs)
        torch.cuda.synchronize()
        wall = []
        for _ in range(latency_iters):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize()
            start.record()
            model(*inputs)
            end.record()
            end.synchronize()
            wall.append(start.elapsed_time(end))
        acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
        with torch.profiler.profile(activities=acts) as prof:
            for _ in range(iters):
                with torch.profiler.record_function(MARKER):
                    model(*inputs)
            torch.cuda.synchronize()
    prof.export_chrome_trace(str(trace_path))
    settings = {"cudnn_benchmark": True, "allow_tf32_cudnn": torch.backends.cudnn.allow_tf32,
                "allow_tf32_matmul": torch.backends.cuda.matmul.allow_tf32, "memory_format": "contiguous"}
    del model, inputs
    torch.cuda.empty_cache()
    return {**_trace_stats(read_trace(trace_path)), "wall_ms": stats(wall), "settings": settings}


def _trace_stats(trace) -> dict:
    """Per-iteration sums of kernel, memcpy and memset durations (ms) and the top kernels."""
    per = {"kernel": [], "memcpy": [], "memset": []}
    counts, names = [], {}
    iterations = [it for it in trace.iterations if it.name == MARKER] or list(trace.iterations)
    for it in iterations:
        ks = trace.kernels_of(it)
        for kind in per:
            per[kind].append(sum(k.dur_ms for k in ks if k.kind == kind))
        counts.append(sum(1 for k in ks if k.kind == "kernel"))
        for k in ks:
            if k.kind == "kernel":
                names[k.name] = names.get(k.name, 0.0) + k.dur_ms / len(iterations)
    top = sorted(names.items(), key=lambda kv: -kv[1])[:8]
    return {"kernel_ms": stats(per["kernel"]), "memcpy_ms": stats(per["memcpy"]), "memset_ms": stats(per["memset"]),
            "kernels_per_iteration": statistics.median(counts) if counts else 0,
            "top_kernels": [{"name": n[:160], "ms": round(t, 5)} for n, t in top]}


# ----------------------------------------------------------------------- benanza (subprocess)

ANALYSIS_KEYS = ("model", "batch", "precision", "conv_precision", "layouts", "lbl_sequential_ms", "lbl_parallel_ms",
                 "lbl_fused_sequential_ms", "lbl_fused_parallel_ms", "complete", "missing_by_op", "measured_layers",
                 "zero_cost_layers", "nhwc_best_layers")


def benanza_command(*args: str) -> list[str]:
    """``python -m benanza ARGS`` with this interpreter (works where the console script is not on PATH)."""
    return [sys.executable, "-m", "benanza", *args]


TRAINING_KEYS = ("lbl_ms", "lbl_name", "critical_path_ms", "sequential_ms", "phase_ms", "complete", "missing",
                 "incomplete_note")


def _slim(a: dict) -> dict:
    out = {k: a.get(k) for k in ANALYSIS_KEYS if k in a}
    if isinstance(a.get("training_step"), dict):
        out["training_step"] = {k: a["training_step"].get(k) for k in TRAINING_KEYS}
    return out


def run_benanza(cmd: list[str], timeout: float, log: Path) -> dict | list:
    """Run a benanza command with ``--json``; its stderr and stdout go to ``LOG.err`` / ``LOG.json``. Returns
    the parsed JSON; raises RuntimeError with the last stderr line when there is none, and
    :class:`TruthError` for a command line benanza rejects (a wrong pass-through flag)."""
    try:
        # from a neutral folder: `python -m benanza` in the repository would import its source tree
        # (without the native module) instead of the installed package
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=tempfile.gettempdir(),
                           timeout=None if math.isinf(timeout) else max(1.0, timeout))
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"timed out after {timeout:.0f} s (the --deadline)") from None
    Path(f"{log}.err").write_text(p.stderr, encoding="utf-8")
    Path(f"{log}.json").write_text(p.stdout, encoding="utf-8")
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError:
        last = next((ln for ln in reversed(p.stderr.strip().splitlines()) if ln.strip()), f"exit {p.returncode}")
        if p.returncode == 2 and ("No such option" in p.stderr or "Usage:" in p.stderr):
            raise TruthError(f"benanza rejected the command line {shlex.join(cmd[3:])}: {last.strip()}") from None
        raise RuntimeError(f"{shlex.join(cmd[3:5])} exited {p.returncode}: {last.strip()[:300]}") from None


# --------------------------------------------------------------------------- one model

class Run:
    """The state of one truth run: arguments, the recorder, the measurements so far, stage times."""

    def __init__(self, args, rec: Recorder, env: dict, command: str):
        self.a, self.rec, self.env, self.command = args, rec, env, command
        self.t0 = time.monotonic()
        self.pytorch: dict = {}     # (model, batch, dtype) -> pytorch record
        self.analyses: dict = {}    # (model, batch, precision) -> analysis dict
        self.precisions: dict = {}  # model -> {"share": cuDNN FLOP share, dtype: precision}
        self.earlier_precisions: dict = {}  # (model, dtype) -> precisions earlier merged runs chose (newest last)
        self.stages: dict = {}      # model -> stage -> seconds
        self.systems: dict = {}     # model -> benanza's system dict (for --skip-bench)
        self.durations: list = []

    def left(self) -> float:
        """Seconds left of --deadline (infinite without one)."""
        return self.a.deadline - (time.monotonic() - self.t0) if self.a.deadline else math.inf

    def rows(self) -> list[dict]:
        """The table's rows: the selected models (every model of the merged runs with --merge)."""
        out = []
        chosen = None if self.a.merge else {e.name for e in self.a.entries}
        for model, pr in self.precisions.items():
            if chosen is not None and model not in chosen:
                continue
            for b in self.a.batches:
                for d in self.a.dtypes:
                    p = pr.get(d)
                    if p is None:
                        continue
                    an = self.analyses.get((model, b, p))
                    if an is None:  # --merge: a row an earlier run measured under the precision it chose then
                        for old in reversed(self.earlier_precisions.get((model, d), [])):
                            if (model, b, old) in self.analyses:
                                p, an = old, self.analyses[(model, b, old)]
                                break
                    out.append(make_row(model, b, d, p, self.pytorch.get((model, b, d)), an, pr["share"],
                                        train=self.a.train))
        return out

    def save(self) -> str:
        """Rewrite the tables from everything measured so far; return the text table."""
        return self.rec.tables(self.rows(), self.stages, self.env, self.command)


def export_stage(run: Run, entry) -> Path:
    """The model's dynamic-batch ONNX file: exported into OUT/onnx (the earlier run's with --skip-bench)."""
    a, name = run.a, entry.name
    file = f"{name}_train.onnx" if a.train else f"{name}.onnx"  # a training export keeps its batch norms
    if a.skip_bench:
        path = a.from_dir / "onnx" / file
        if not path.exists():
            raise RuntimeError(f"{path}: no export from the earlier run")
        return path
    ex = entry.export(a.out / "onnx" / file, keep_batch_norms=a.train)
    run.stages[name]["export_s"] = ex.seconds
    run.rec.write("export", model=name, path=str(ex.path), exporter=ex.exporter, opset=ex.opset,
                  seconds=ex.seconds, bytes=ex.size, notes=ex.notes)
    return ex.path


def precision_stage(run: Run, entry, path: Path) -> dict:
    """benanza's precision per data type, from the cuDNN FLOP share of the export (CPU only)."""
    from benanza.processing.model import process

    ml = process(path, max(run.a.batches))
    share = cudnn_flop_share(ml.layers)
    pr = {"share": share, **{d: choose_precision(d, share, run.a.fp32) for d in run.a.dtypes}}
    run.precisions[entry.name] = pr
    run.rec.write("precision", model=entry.name, cudnn_flop_share=share, precisions=pr,
                  unsupported=ml.unsupported(), notices=ml.notices)
    return pr


def pytorch_stage(run: Run, entry) -> None:
    """:func:`profile_pytorch` at every batch and data type; a failure (an OOM) is recorded, the rest runs."""
    a, name = run.a, entry.name
    t = time.perf_counter()
    (a.out / "traces").mkdir(exist_ok=True)
    for d in a.dtypes:
        for b in a.batches:
            if a.resume and (name, b, d) in run.pytorch:  # measured by the earlier run into this --out
                print(f"  pytorch {name} b{b} {d}: measured in the earlier run (--resume)", flush=True)
                continue
            trace = a.out / "traces" / f"{name}-b{b}-{d}.json"
            try:
                with _gpu_turn():
                    if a.train:
                        import train_step

                        res = train_step.profile_step(entry, b, d, a.optimizer, a.warmup, a.iters, False, trace)
                    else:
                        res = profile_pytorch(entry, b, d, a.warmup, a.iters, a.latency_iters, trace)
            except Exception as e:  # an OOM or an unsupported op on this GPU: recorded, the rest goes on
                run.rec.write("error", model=name, stage="pytorch", batch=b, dtype=d, message=_line(e))
                _free_gpu()
                continue
            finally:
                if not a.keep_traces and trace.exists():
                    trace.unlink()
            run.pytorch[(name, b, d)] = run.rec.write("pytorch", model=name, batch=b, dtype=d, **res)
            print(f"  pytorch {name} b{b} {d}: kernel {_f(res['kernel_ms']['median'])} ms "
                  f"(IQR {_f(res['kernel_ms']['iqr'])}), wall {_f(res['wall_ms']['median'])} ms", flush=True)
    run.stages[name]["pytorch_s"] = time.perf_counter() - t


def bench_stage(run: Run, entry, path: Path, pr: dict) -> None:
    """``benanza bench`` (``analyze`` with --skip-bench) of the export at every batch, one call per
    :func:`bench_calls` group; the analyses go into ``run`` and a record, bench's stages are summed."""
    a, name = run.a, entry.name
    (a.out / "logs").mkdir(exist_ok=True)
    if a.skip_bench:
        run.stages[name]["analyze_s"] = 0.0  # this re-analysis only
    for k, (dtype_arg, flags) in enumerate(bench_calls([pr[d] for d in a.dtypes])):
        verb = "analyze" if a.skip_bench else "bench"
        common = [str(path), "--batch", ",".join(map(str, a.batches)), "--dtype", dtype_arg, "--db", a.db, "--json", *flags,
                  *(["--train", "--optimizer", a.optimizer] if a.train else [])]
        if a.skip_bench:
            system = run.systems.get(name) or {}
            sys_arg = ["--system", str(system.get("fingerprint") or system.get("id"))] if system else []
            cmd = benanza_command("analyze", *common, *sys_arg, *a.analyze_args)
        else:
            cmd = benanza_command("bench", *common, *a.bench_args)
        if a.dry_run:
            run.rec.write("dry_run", model=name, command=shlex.join(cmd))
            print(f"  would run: {shlex.join(cmd)}", flush=True)
            continue
        t = time.perf_counter()
        doc = run_benanza(cmd, run.left() - 15, a.out / "logs" / f"{name}.{verb}{k or ''}")
        analyses = scenarios_of(doc, f"benanza {verb} --json of {name}")  # bench's "scenarios" (before: "analyses")
        for an in analyses:
            run.analyses[(name, an["batch"], analysis_label(an))] = _slim(an)
        st = run.stages[name]
        for key, v in ((doc.get("stages") if isinstance(doc, dict) else None) or {"analyze_s": time.perf_counter() - t}).items():
            st[key] = st.get(key, 0.0) + v
        if isinstance(doc, dict) and doc.get("system"):
            run.systems[name] = doc["system"]
        run.rec.write("bench" if not a.skip_bench else "analysis", model=name, command=shlex.join(cmd),
                      seconds=time.perf_counter() - t, stages=doc.get("stages") if isinstance(doc, dict) else None,
                      system=run.systems.get(name), analyses=[_slim(x) for x in analyses])


def _line(e: BaseException) -> str:
    s = str(e).strip().splitlines()
    return s[0][:400] if s else type(e).__name__


def _gpu_turn():
    """The shared GPU lock of ``BENANZA_GPU_LOCK_SHARED`` for GPU 0 (this process's), held while the
    PyTorch side runs, so that another command on this GPU (benchmarks/gpu_pair.sh with more commands
    than GPUs) neither measures meanwhile nor runs beside it; nothing without the variable."""
    from benanza.runner.run import shared_gpu_turn

    return shared_gpu_turn(0, lambda: __import__("torch").cuda.synchronize())


def _free_gpu() -> None:
    try:
        import gc

        import torch

        gc.collect()
        torch.cuda.empty_cache()
    except Exception:
        pass


def run_model(run: Run, entry) -> None:
    """Export, precision, PyTorch and benanza for one model; every failure is recorded and the
    stages after it that still make sense run."""
    name = entry.name
    run.stages.setdefault(name, {})
    t = time.monotonic()
    print(f"== {name}", flush=True)
    try:
        path = export_stage(run, entry)
        pr = precision_stage(run, entry, path)
    except Exception as e:
        run.rec.write("error", model=name, stage="export", message=_line(e))
        print(f"  error: {_line(e)}", flush=True)
        return
    if not (run.a.skip_bench or run.a.dry_run):
        pytorch_stage(run, entry)
        _free_gpu()
    try:
        bench_stage(run, entry, path, pr)
    except TruthError:
        raise
    except Exception as e:
        run.rec.write("error", model=name, stage="analyze" if run.a.skip_bench else "bench", message=_line(e))
        print(f"  error: {_line(e)}", flush=True)
        return
    run.durations.append(time.monotonic() - t)
    if not run.a.dry_run:
        run.rec.write("model_done", model=name, seconds=run.durations[-1], stages=run.stages[name])


# ---------------------------------------------------------------------------------- main

def parse_args(argv: list[str]):
    """Known options, and the rest passed through to ``benanza bench``. Raises :class:`TruthError`."""
    ap = argparse.ArgumentParser(
        description="Truth benchmark: benanza's LBL against the GPU kernel time of the native module in PyTorch.",
        epilog="Unknown options pass through to `benanza bench` (e.g. --no-cold --max-time-ms 200 --devices all).")
    ap.add_argument("--out", type=Path, required=True, help="results folder (created; results.jsonl, table.*, onnx/, logs/)")
    ap.add_argument("--db", help="benanza performance database (default: OUT/truth.db)")
    ap.add_argument("--models", help="comma-separated zoo models (default: all; see benchmarks/zoo.py list)")
    ap.add_argument("--batch", default="1,32", help="batch sizes (default 1,32)")
    ap.add_argument("--dtype", default="fp16,fp32", help="PyTorch data types: fp16, fp32 (PyTorch's defaults); "
                    "with --train also amp16, ampbf16 (fp32 parameters under autocast float16 / bfloat16)")
    ap.add_argument("--fp32", default="auto", choices=FP32_MODES, help="benanza precision for PyTorch's fp32: auto "
                    "(conv-tf32 when the model has cuDNN convolutions or RNNs, else fp32: PyTorch's defaults), tf32, fp32, "
                    "or conv-tf32 (benanza's --dtype fp32 --conv-tf32: those layers in TF32, the rest in FP32)")
    ap.add_argument("--deadline", type=float, help="seconds for the whole run: no model starts when less is left "
                    "than the slowest model so far (at least --min-model-s)")
    ap.add_argument("--min-model-s", type=float, default=120.0, help="time a model needs at least (default 120)")
    ap.add_argument("--warmup", type=int, default=10, help="PyTorch warm-up iterations (default 10)")
    ap.add_argument("--iters", type=int, default=30, help="profiled PyTorch iterations (default 30)")
    ap.add_argument("--latency-iters", type=int, default=50, help="PyTorch iterations timed with CUDA events (default 50)")
    ap.add_argument("--keep-traces", action="store_true", help="keep the torch.profiler traces in OUT/traces")
    ap.add_argument("--train", action="store_true", help="the training step (issue 26): PyTorch's step of the native "
                    "module in train() mode (benchmarks/train_step.py) against `benanza bench --train`'s "
                    "training-step LBL, on exports that keep their batch norms")
    ap.add_argument("--optimizer", default="sgd", choices=("sgd", "adam", "adamw"),
                    help="with --train: the optimizer of both sides (default sgd, momentum 0.9)")
    ap.add_argument("--skip-bench", action="store_true", help="no GPU work: re-read the database with `benanza "
                    "analyze` for the exports and PyTorch numbers of an earlier run (--from)")
    ap.add_argument("--from", dest="from_dir", type=Path, help="the earlier run's folder for --skip-bench (default OUT)")
    ap.add_argument("--analyze-args", default="", help="extra `benanza analyze` arguments for --skip-bench, one string")
    ap.add_argument("--dry-run", action="store_true", help="everything but GPU work: exports, precision choice, commands")
    ap.add_argument("--resume", action="store_true", help="skip the models an earlier run into the same --out finished "
                    "(at every --batch and --dtype), and the PyTorch measurements it made; its bench results are "
                    "in --db already")
    ap.add_argument("--pack", type=Path, help="after each model, copy table.txt, truth-results.tgz and the database "
                    "(gzip) into this folder, in pieces of 15 MiB at most (e.g. $OUT on a lent GPU machine)")
    ap.add_argument("--merge", nargs="+", type=Path, metavar="RUN", help="no GPU work: one table from earlier runs' "
                    "--out folders or truth-results.tgz archives")
    a, extra = ap.parse_known_args(argv)
    return _validate(a, extra)


def _validate(a, extra: list[str]):
    import zoo

    try:
        a.entries = zoo.select(a.models)
        a.batches = [int(b) for b in a.batch.split(",") if b.strip()]
    except ValueError as e:
        raise TruthError(str(e).replace("invalid literal for int() with base 10", "batch sizes must be integers")) from None
    a.dtypes = [d.strip() for d in a.dtype.split(",") if d.strip()]
    if not a.batches or any(b <= 0 for b in a.batches):
        raise TruthError(f"--batch {a.batch!r}: batch sizes must be positive integers")
    if not a.dtypes or any(d not in (TRAIN_DTYPES if a.train else DTYPES) for d in a.dtypes):
        raise TruthError(f"--dtype {a.dtype!r}: data types are fp16 and fp32"
                         + (", amp16 and ampbf16" if a.train else " (amp16 and ampbf16 with --train)"))
    if a.deadline is not None and a.deadline <= 0:
        raise TruthError("--deadline must be positive (seconds)")
    if min(a.warmup, a.iters, a.latency_iters) < 1:
        raise TruthError("--warmup, --iters and --latency-iters must be at least 1")
    if sum(map(bool, (a.skip_bench, a.dry_run, a.merge))) > 1:
        raise TruthError("--skip-bench, --dry-run and --merge exclude each other")
    if extra and a.skip_bench:
        raise TruthError(f"bench options {' '.join(extra)} do nothing with --skip-bench (use --analyze-args)")
    try:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / "onnx").mkdir(exist_ok=True)
    except OSError as e:
        raise TruthError(f"--out {a.out}: {e.strerror or e}") from None
    a.out = a.out.resolve()
    a.from_dir = (a.from_dir or a.out).resolve()
    if a.skip_bench and not (a.from_dir / "results.jsonl").exists():
        raise TruthError(f"--skip-bench: {a.from_dir / 'results.jsonl'} not found (the earlier run's --out, or --from)")
    a.db = a.db or str(a.out / "truth.db")
    if "://" not in a.db:
        a.db = str(Path(a.db).expanduser().resolve())
    a.bench_args = extra
    a.analyze_args = shlex.split(a.analyze_args)
    return a


def load_records(run: Run, path: Path | list, analyses: bool = True) -> set[str]:
    """Load an earlier run's records (``path``: its ``results.jsonl``, or the records already read) into
    ``run``: PyTorch measurements,
    precisions, stage times, benanza systems and (with ``analyses``) its LBLs. Returns the models
    it finished."""
    done = set()
    for r in path if isinstance(path, list) else read_records(path):
        kind, model = r.get("kind"), r.get("model")
        if kind == "pytorch":
            run.pytorch[(model, r["batch"], r["dtype"])] = r
        elif kind == "precision":  # a later run's data types add to an earlier run's (--merge of runs by dtype)
            before = run.precisions.get(model, {})
            for d, p in r["precisions"].items():  # a rule changed between runs (fp32 -> fp32+tf32conv, 2026-11-27d)
                if d != "share" and before.get(d) not in (None, p):
                    seen = run.earlier_precisions.setdefault((model, d), [])
                    seen[:] = [q for q in seen if q != before[d]] + [before[d]]
            run.precisions[model] = {**before, **r["precisions"]}
        elif kind in ("bench", "analysis"):
            if r.get("system"):
                run.systems[model] = r["system"]
            for an in (r.get("analyses") or []) if analyses else []:
                run.analyses[(model, an["batch"], analysis_label(an))] = an
        elif kind == "model_done":
            run.stages[model] = {**run.stages.get(model, {}), **(r.get("stages") or {})}
            done.add(model)
            if r.get("seconds"):  # --deadline after --resume: the slowest model of the earlier runs counts too
                run.durations.append(float(r["seconds"]))
        elif kind == "export":
            run.stages.setdefault(model, {})["export_s"] = r.get("seconds")
    return done


def run_records(src: Path) -> list[dict]:
    """The records of an earlier run: its ``--out`` folder's ``results.jsonl``, or the one packed in a
    ``truth-results.tgz``. Raises TruthError naming ``src`` when it is neither."""
    import tarfile

    if src.is_dir():
        return read_records(src / "results.jsonl")
    if not src.is_file():
        raise TruthError(f"{src}: no such folder or archive")
    try:
        with tarfile.open(src) as tar:
            member = next((m for m in tar.getmembers() if m.name.endswith("results.jsonl")), None)
            if member is None:
                raise TruthError(f"{src}: the archive has no results.jsonl")
            with tempfile.TemporaryDirectory() as tmp:
                target = Path(tmp) / "results.jsonl"
                target.write_bytes(tar.extractfile(member).read())
                return read_records(target)
    except tarfile.TarError as e:
        raise TruthError(f"{src}: not a readable archive ({e})") from None


def merge_sources(run: Run, sources: list[Path]) -> None:
    """--merge: the records of several runs' folders or packed ``truth-results.tgz`` archives."""
    for src in sources:
        try:
            recs = run_records(src)
        except TruthError as e:
            raise TruthError(f"--merge {e}") from None
        trained = _train_run(recs)
        if trained is not None and trained != bool(run.a.train):
            raise TruthError(f"--merge {src}: {'a training' if trained else 'an inference'} run (its command "
                             f"{'has' if trained else 'lacks'} --train); merge it with{'' if trained else 'out'} --train")
        load_records(run, recs)


def _train_run(records: list[dict]) -> bool | None:
    """Whether the run whose ``records`` these are was a ``--train`` run (its env records'
    commands), None when it has no env record."""
    flags = {"--train" in str(r["command"]).split() for r in records
             if isinstance(r, dict) and r.get("kind") == "env" and r.get("command")}
    return None if not flags else any(flags)


class Packer:
    """--pack DIR: after each model, ``table.txt``, ``truth-results.tgz`` (the --out folder but the
    database and traces) and the database gzip-compressed (``truth-db.sqlite.gz``), each split into
    ``.partNN`` pieces of 15 MiB when larger (the lent GPU machines send back few files of 16 MiB at
    most); written to a temporary name and renamed, so a run killed while packing keeps the last pack."""

    PART = 15 << 20

    def __init__(self, folder: Path | None, out: Path, db: str):
        self.folder, self.out, self.db = folder, out, db

    def pack(self) -> None:
        """Copy the table, the results archive and the database into the pack folder (if any)."""
        if self.folder is None:
            return
        import gzip
        import shutil
        import tarfile

        self.folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.out / "table.txt", self.folder / "table.txt")
        tmp = self.folder / "truth-results.tgz.tmp"
        with tarfile.open(tmp, "w:gz") as tar:
            for name in ("results.jsonl", "table.txt", "table.md", "table.json", "onnx", "logs"):
                if (self.out / name).exists():
                    tar.add(self.out / name, arcname=f"truth/{name}")
        self._place(tmp, "truth-results.tgz")
        db = Path(self.db)
        if "://" not in self.db and db.is_file():
            tmp = self.folder / "truth-db.sqlite.gz.tmp"
            if db.suffix == ".gz":
                shutil.copy(db, tmp)
            else:
                with open(db, "rb") as src, gzip.open(tmp, "wb", compresslevel=6) as dst:
                    shutil.copyfileobj(src, dst)
            self._place(tmp, "truth-db.sqlite.gz")

    def _place(self, tmp: Path, name: str) -> None:
        for old in self.folder.glob(name + ".part*"):
            old.unlink()
        size = tmp.stat().st_size
        if size <= self.PART:
            tmp.replace(self.folder / name)
            return
        with open(tmp, "rb") as f:
            for k in range(math.ceil(size / self.PART)):
                (self.folder / f"{name}.part{k:02d}").write_bytes(f.read(self.PART))
        tmp.unlink()
        (self.folder / name).unlink(missing_ok=True)


def _check_gpu(a) -> None:
    if a.skip_bench or a.dry_run or a.merge:
        return
    try:
        import torch
    except ImportError:
        raise TruthError("torch is not importable here: run with --dry-run or --skip-bench") from None
    if not torch.cuda.is_available():
        raise TruthError("no CUDA GPU visible to PyTorch: run on the GPU machine, or with --dry-run / --skip-bench")


def run_all(run: Run, packer: Packer) -> None:
    """Every selected model in turn, within the --deadline; tables (and the pack) after each."""
    a, rec = run.a, run.rec
    done = load_records(run, a.out / "results.jsonl") if a.resume else set()
    for k, entry in enumerate(a.entries):
        # done: finished by an earlier run, at every batch and data type asked now
        if entry.name in done and all((entry.name, b, d) in run.pytorch for b in a.batches for d in a.dtypes):
            print(f"== {entry.name}: done in the earlier run (--resume)", flush=True)
            continue
        need = max([a.min_model_s] + run.durations)
        if run.left() < need:
            for e in a.entries[k:]:
                rec.write("skip", model=e.name, reason=f"{run.left():.0f} s left of --deadline, a model needs ~{need:.0f} s")
            print(f"deadline: {len(a.entries) - k} models not started", flush=True)
            break
        run_model(run, entry)
        run.save()
        packer.pack()


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit status (2 with one ``benanza: ...`` line for a bad argument)."""
    argv = sys.argv[1:] if argv is None else argv
    if "--llm" in argv:  # the LLM truth (issue 27): decoder phases, its own options (benchmarks/llm_truth.py)
        import llm_truth

        return llm_truth.main(argv)
    try:
        a = parse_args(argv)
        _check_gpu(a)
        env = software_versions()
        command = "python3 benchmarks/truth.py " + shlex.join(argv)
        rec = Recorder(a.out)
        mode = "merge" if a.merge else "skip-bench" if a.skip_bench else "dry-run" if a.dry_run else "full"
        rec.write("env", command=command, mode=mode, bench_args=a.bench_args, **env)
        print(_env_line(env), flush=True)
        run = Run(a, rec, env, command)
        packer = Packer(a.pack, a.out, a.db)
        if a.merge:
            merge_sources(run, a.merge)
        else:
            if a.skip_bench:
                load_records(run, a.from_dir / "results.jsonl", analyses=False)
                # the PyTorch side measured by the earlier run goes into this run's records too, so
                # that a re-read folder is whole on its own (--merge reads it like any run)
                for r in list(run.pytorch.values()):
                    rec.write("pytorch", **{k: v for k, v in r.items() if k not in ("kind", "time")},
                              reread_from=str(a.from_dir))
            run_all(run, packer)
        print(run.save(), flush=True)
        packer.pack()
    except TruthError as e:
        print(f"benanza: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("benanza: interrupted (the results so far are in --out)", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
