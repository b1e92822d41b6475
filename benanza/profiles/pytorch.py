"""The PyTorch entry point: a module in, benanza's answer out (``benanza torch SPEC``,
:func:`analyze_module`).

Steps, for a module spec (:mod:`benanza.processing.modules`) or a module object:

1. **export** the module to ONNX with a dynamic batch (``OUT/MODEL.onnx``, weights stripped, the
   nodes' module names kept; ``OUT/MODEL.export.json`` holds its key,
   :func:`benanza.processing.modules.export_key`). An export already in ``OUT`` is kept when its key
   is the model's, and a torchvision or transformers model's export is taken from the export cache
   (:mod:`benanza.processing.cache`) when another folder made it before;
2. **bench** its layers in this process (the bench use case, :func:`benanza.usecases.torch.bench_runner`:
   every cuDNN/cuBLAS implementation and the framework's own kernels, into the performance
   database); PyTorch's fp32 is benched as benanza's fp32 with TF32 convolutions (FP32 matmuls:
   PyTorch's defaults, ``torch.backends.cudnn.allow_tf32 = True``,
   ``torch.backends.cuda.matmul.allow_tf32 = False``; :data:`benanza.spec.FRAMEWORK_DTYPES`);
3. **profile the module itself** per batch (:func:`benanza.profiles.capture_profile` with the
   native module: eager, ``cudnn.benchmark`` on, a log run with cuDNN/cuBLASLt logging and a timed
   run under torch.profiler with a ``record_function`` scope around every submodule), into
   ``OUT/profile-bB-D[-cl][-compile-MODE]``; also in ``channels_last`` and under ``torch.compile``
   when asked;
4. the use case then joins kernels to layers (through the scopes and the export's module names),
   analyzes and reports (:func:`benanza.usecases.torch.torch`); :func:`benanza.api.analyze_module` does
   the same for a module object.

With ``train`` (``benanza torch SPEC --train``): the bench times the training step too (the
backward calls, the loss and the optimizer's step), the profiled runs are training iterations
(:func:`benanza.profiles.capture._train_child`) into ``OUT/profile-bB-D-train-OPT``, and
:func:`benanza.usecases.torch.torch_train` joins and reports the step (:mod:`benanza.profiles.train_join`).
"""
from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benanza.errors import BenanzaError  # noqa: F401 (what the steps raise)
from benanza.processing.cache import cached_export, export_cache_dir, store_export
from benanza.processing.modules import ModuleSource, export_key, export_onnx
from benanza.spec import framework_dtype



@dataclass(frozen=True)
class ProfileRun:
    """One framework run to profile: ``batch``, ``channels_last``, ``compile`` (a torch.compile
    mode or None) and the folder it goes to."""

    batch: int
    channels_last: bool
    compile: str | None
    folder: Path
    train: str | None = None  # the optimizer of a training step's run, None for inference

    @property
    def label(self) -> str:
        return ", ".join(["eager" if not self.compile else f"torch.compile({self.compile})"]
                         + (["channels_last"] if self.channels_last else [])
                         + ([f"training step ({self.train})"] if self.train else []))


def profile_runs(out: Path, batches: list[int], dtype: str, channels_last: bool, compile: str | None,
                 train: str | None = None) -> list[ProfileRun]:
    """The runs ``benanza torch`` profiles: per batch eager (default memory format), and eager
    channels_last / compiled when asked; ``train``: an optimizer's name, the runs are then training
    steps (folders ``profile-bB-D[-cl][-compile-MODE]-train-OPT``)."""
    tail = f"-train-{train}" if train else ""
    runs = []
    for b in batches:
        runs.append(ProfileRun(b, False, None, out / f"profile-b{b}-{dtype}{tail}", train))
        if channels_last:
            runs.append(ProfileRun(b, True, None, out / f"profile-b{b}-{dtype}-cl{tail}", train))
        if compile:
            runs.append(ProfileRun(b, False, compile, out / f"profile-b{b}-{dtype}-compile-{compile}{tail}", train))
    return runs


def export_stamp(onnx_path: Path) -> str | None:
    """The export key (:func:`benanza.processing.modules.export_key`) recorded beside an export in a
    working folder (``NAME.export.json``), or None when there is none."""
    try:
        return json.loads(onnx_path.with_suffix(".export.json").read_text()).get("key")
    except (OSError, ValueError, AttributeError):
        return None


def write_export_stamp(onnx_path: Path, key: str | None) -> None:
    """Record ``key`` beside ``onnx_path``, so that a later command in the same folder keeps the export
    only when it is the same model (a prefill export's file name does not hold its sequence length,
    nor a torchvision model's its input shape)."""
    stamp = onnx_path.with_suffix(".export.json")
    if key is None:
        stamp.unlink(missing_ok=True)
    else:
        stamp.write_text(json.dumps({"key": key}))


def record_routing(src: ModuleSource, onnx_path: Path, batches: list[int], dtype: str, device: str = "cpu",
                   say=lambda m: None) -> dict | None:
    """The router's choice on the run's own inputs, recorded in the export (a mixture-of-experts model
    in transformers' default ``grouped_mm`` form: an export with ``GroupedMatMul`` nodes; else nothing is
    run and None returned). For each batch of ``batches`` not yet recorded, the module is built and its
    inputs drawn as the profiled run builds and draws them (:func:`benanza.profiles.capture.native_module`:
    on ``device``, seeded, in ``dtype``'s cast), one forward counts each experts module's (token, expert)
    pairs per expert (:func:`benanza.processing.modules.expert_counts`), and the counts are stored in
    the export's metadata (:func:`benanza.processing.routing.write_routing`), where every later step
    reads them (:func:`benanza.processing.routing.read_routing`). The same weights and inputs give
    the profiled run the same top-k, except where two experts' router scores tie to the last bit (a
    top-k among equal scores is the kernel's choice). Returns the document stored (or found)."""
    import onnx
    from google.protobuf.message import DecodeError

    from benanza.processing.routing import routing_doc, stored_routing, write_routing

    try:
        model = onnx.load(str(onnx_path), load_external_data=False)
    except (OSError, DecodeError):  # no ONNX graph to read: the bench says why
        return None
    if not any(n.op_type == "GroupedMatMul" for n in model.graph.node):
        return None
    old = stored_routing(model)
    same = isinstance(old, dict) and old.get("device") == device and old.get("dtype") == dtype \
        and isinstance(old.get("batches"), dict)
    have = {int(b): e for b, e in old["batches"].items() if str(b).isdigit()} if same else {}
    todo = [b for b in batches if b not in have]
    if not todo:
        return old
    import torch

    from benanza.processing.modules import expert_counts
    from benanza.profiles.capture import native_module

    cast = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(dtype)
    dev = torch.device(device)
    from benanza.runner.run import shared_gpu_turn

    for b in todo:
        spec = _RoutingRun(b)
        torch.manual_seed(spec.seed)
        # the GPU's turn (BENANZA_GPU_LOCK_SHARED) as the profiling children take it: nothing measures beside it
        with shared_gpu_turn((dev.index or 0) if dev.type == "cuda" else None, torch.cuda.synchronize):
            module, xs, _ = native_module(torch, spec, dev, cast, src)
            have[b] = expert_counts(module, tuple(xs))
            del module, xs
        say(f"routing: batch {b}: {len(have[b])} MoE layers' per-expert counts recorded on {device} {dtype}")
    if dev.type == "cuda":
        torch.cuda.empty_cache()
    doc = routing_doc(have, device, dtype)
    write_routing(onnx_path, doc)
    return doc


@dataclass(frozen=True)
class _RoutingRun:
    """What :func:`benanza.profiles.capture.native_module` reads of a run: an eager forward at ``batch``,
    default memory format, the profiled runs' seed."""

    batch: int
    seed: int = 0
    channels_last: bool = False
    compile: str | None = None


def check_dtype(dtype: str) -> None:
    """Raises UsageError unless ``dtype`` is a framework data type (:data:`benanza.spec.FRAMEWORK_DTYPES`)."""
    framework_dtype(dtype, "torch")


def prepare(src: ModuleSource, out: Path, batches: list[int], dtype: str, db: str | None, device: str = "cuda",
            channels_last: bool = False, compile: str | None = None, bench: Callable | bool = False,
            warmup: int = 20, runs: int = 100, iterations: int = 5, module_ref: dict | None = None,
            force: bool = False, say=lambda m: None, train: str | None = None,
            seconds: dict | None = None, logs: bool = True,
            on_run: Callable[[Path, ProfileRun], None] | None = None) -> tuple[Path, list[ProfileRun]]:
    """Steps 1-3 of the module doc for ``src``: returns the ONNX export and the profiled runs.
    ``bench``: False (none), or a callable ``bench(onnx_path, batches)`` that benches in this process
    (:func:`benanza.usecases.torch.bench_runner`: the bench use case, no child command).
    ``module_ref``: how the profiling child rebuilds the module (default ``{"spec": src.spec}``);
    ``train``: an optimizer's name: profile training steps (module doc; a callable ``bench`` must
    bench the training step itself); ``seconds``: a dict that receives the export's and the bench's
    wall time (``export``, ``bench``; s to the ms; absent for a step not run), where the command's time goes;
    ``logs``: each eager run also runs with cuDNN and cuBLASLt logging (its own child process; a
    torch.compile run never does); ``on_run(onnx_path, run)``: called after each run's profile, before
    the next run starts (``benanza torch`` writes that run's report there, so that a command cut by a
    timeout keeps the reports of the runs it finished).
    Raises :class:`UsageError`, :class:`~benanza.errors.ModelError` (export), the bench's errors,
    :class:`~benanza.errors.ProfileError`/:class:`~benanza.errors.DeviceError` (profiling)."""
    from benanza.profiles import capture_profile

    check_dtype(dtype)
    out.mkdir(parents=True, exist_ok=True)
    # a training step's export keeps its batch norms (modules.export_onnx): its own file
    onnx_path = out / (f"{src.name}_train.onnx" if train else f"{src.name}.onnx")
    key = export_key(src, keep_batch_norms=bool(train))
    if onnx_path.exists() and not force and (key is None or export_stamp(onnx_path) == key):
        say(f"export: {onnx_path} exists, kept (--force exports again)")
    else:
        t0 = time.perf_counter()
        ex = cached_export(key, onnx_path) if src.cacheable and not force else None
        if ex is not None:
            if seconds is not None:
                seconds["export"] = round(time.perf_counter() - t0, 3)
            say(f"export: {src.spec or src.name} from the export cache ({export_cache_dir()}), made in "
                f"{ex.seconds:.1f} s by the {ex.exporter} exporter, opset {ex.opset}")
        else:
            if onnx_path.exists():
                say(f"export: {onnx_path} was exported from another model, length or benanza version: exported again")
            say(f"export: {src.spec or src.name} to {onnx_path} (dynamic batch)")
            ex = export_onnx(src, onnx_path, keep_batch_norms=bool(train))
            if seconds is not None:
                seconds["export"] = round(ex.seconds, 3)
            say(f"export: {ex.exporter} exporter, opset {ex.opset}, {ex.size / 1e3:.0f} kB, {ex.seconds:.1f} s"
                + "".join(f"; {n}" for n in ex.notes))
            if src.cacheable:
                store_export(key, ex)
        write_export_stamp(onnx_path, key)
    if not train:  # the router's choice on the profiled run's inputs, before the bench reads the export
        try:
            record_routing(src, onnx_path, batches, dtype, device, say)
        except Exception as e:  # noqa: BLE001 - the module's own forward failed: its experts stay balanced
            say(f"routing: not recorded ({type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}): "
                f"the experts are timed under balanced routing")
    t0 = time.perf_counter()
    if bench:  # in this process (benanza.usecases.bench), through the caller
        bench(onnx_path, batches)
    if bench and seconds is not None:
        seconds["bench"] = round(time.perf_counter() - t0, 3)
    ref = module_ref or {"spec": src.spec}
    profile_dtype = dtype  # capture's fp32 for a native module is PyTorch's default (TF32 convolutions)
    runs_done = []
    for r in profile_runs(out, batches, dtype, channels_last, compile, train):
        say(f"profile: {src.spec or src.name} batch {r.batch} {dtype}, {r.label} -> {r.folder}")
        capture_profile(onnx_path, r.batch, profile_dtype, r.folder, device=device, warmup=warmup, runs=runs,
                        iterations=iterations, cudnn_benchmark=True, logs=logs and not r.compile, force=True,
                        say=say, channels_last=r.channels_last, module=ref, compile=r.compile,
                        train=bool(train), optimizer=train or "sgd")
        runs_done.append(r)
        if on_run is not None:
            on_run(onnx_path, r)
    return onnx_path, runs_done
