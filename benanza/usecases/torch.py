"""``benanza torch`` and :func:`benanza.api.analyze_module`: a PyTorch module in, benanza's answer out.

Export the module to ONNX, bench its layers in this process (:func:`benanza.usecases.bench.bench`,
PyTorch's ``--dtype`` mapped onto benanza's precisions by :data:`benanza.spec.FRAMEWORK_DTYPES`: fp32
is PyTorch's default, TF32 convolutions and FP32 matmuls), profile the module itself
(:func:`benanza.profiles.pytorch.prepare`) and analyze each profiled run against the LBL
(:func:`run_report`: the insights document, the same for the CLI and the API), or with a training
phase hold each profiled training step against benanza's (:func:`train_comparison`)."""
from __future__ import annotations

import contextlib
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from benanza.analysis.analyzer import Analysis
from benanza.analysis.train_whatif import compose_step, step_alternatives
from benanza.database.store import Database, System
from benanza.errors import BenanzaError, UsageError
from benanza.processing import modules
from benanza.profiles import load_profile
from benanza.profiles import pytorch as pt
from benanza.profiles.profile import Latency
from benanza.profiles.pytorch import ProfileRun
from benanza.profiles.train_compare import TrainComparison
from benanza.profiles.train_join import load_train_join
from benanza.spec import DEFAULT_LAYOUTS, MLA_FORMS, BenchRequest, Scenario, TorchRequest, framework_dtype
from benanza.usecases.analyze import insight_docs
from benanza.usecases.bench import bench
from benanza.usecases.common import current_fingerprint, lower_bound, open_database, training
from benanza.usecases.progress import SILENT, Progress


@dataclass
class TorchReport:
    """One profiled run's report: the run, its insights ``document`` (written to ``path``,
    ``report-*.json`` beside its profile folder), and the analysis, system and database it came from
    (for the HTML report's roofline)."""

    run: ProfileRun
    document: dict
    analysis: Analysis
    system: System
    database: Database
    path: Path


@dataclass
class TorchResult:
    """What ``benanza torch`` did: the working folder, the export, one :class:`TorchReport` per
    profiled run (inference), or one :class:`~benanza.profiles.train_compare.TrainComparison` per
    profiled training step (training)."""

    request: TorchRequest
    folder: Path
    onnx: Path | None = None
    reports: list[TorchReport] = field(default_factory=list)
    comparisons: list[TrainComparison] = field(default_factory=list)

    @property
    def documents(self) -> list[dict]:
        return [r.document for r in self.reports]

    @property
    def system(self) -> System | None:
        """The system benanza's figures were measured on (the first report's or comparison's)."""
        return (self.reports[0].system if self.reports
                else self.comparisons[0].system if self.comparisons else None)


def bench_runner(req: TorchRequest, progress: Progress, train: str | None = None) -> Callable:
    """What :func:`benanza.profiles.pytorch.prepare` calls to bench the export: the bench use case
    in this process (no child command), quiet but for its stage lines, with the request's timing;
    ``train``: an optimizer's name, the training step too."""
    fd = framework_dtype(req.dtype, "torch")

    def run(onnx_path, batches):
        bench(BenchRequest((Path(onnx_path),), tuple(batches), (fd.precision,), DEFAULT_LAYOUTS, req.timing, req.db,
                           torch=None, conv_tf32=fd.conv_precision is not None, train=bool(train),
                           optimizer=train or "sgd", quiet=True), progress)
    return run


def profile_seconds(folder: Path) -> dict:
    """The ``seconds`` profile.json records (log run, timed run, the module's build; empty when absent)."""
    try:
        return dict(json.loads((folder / "profile.json").read_text()).get("seconds") or {})
    except (OSError, ValueError, AttributeError):
        return {}


def run_report(req: TorchRequest, database: Database, folder: Path, onnx_path: Path, r: ProfileRun,
               fingerprint: str | None, steps: dict | None = None, attention: str | None = None) -> TorchReport:
    """One profiled run ``r``'s analysis and insights document (with the decoder's physical bound
    where the phase is decode, or the export is found causal), written as ``report-*.json`` in
    ``folder``; ``fingerprint``: this GPU's (the database's system the analysis reads). ``steps``:
    the command's export and bench seconds, in the document's ``run.command_seconds`` beside the run's
    own ``run.seconds``. ``attention``: an MLA decoder's decode step, the form it was exported in
    (:data:`benanza.spec.MLA_FORMS`), which the LLM terms name as the form the LBL is of (``llm.mla``)."""
    fd = framework_dtype(req.dtype, "torch")
    prof = load_profile(r.folder, onnx_path, r.batch)
    lb = lower_bound(Scenario(onnx_path, r.batch, fd.precision, DEFAULT_LAYOUTS, conv_precision=fd.conv_precision),
                     database, fingerprint=fingerprint)
    a, ml, system = lb.analysis, lb.layers, lb.system
    d = insight_docs(prof, [a], ml, database, system, "warm", DEFAULT_LAYOUTS,
                     phase="decode" if req.phase.decoder == "decode" else None)[0]  # prefill: if causal
    if attention and d.get("llm"):
        d["llm"]["mla"] = {"form": attention, "what": MLA_FORMS[attention]}
    d["run"] = {"spec": req.spec, "label": r.label, "folder": str(r.folder), "export": str(onnx_path),
                "seconds": profile_seconds(r.folder), "command_seconds": dict(steps or {})}
    path = folder / (r.folder.name.replace("profile-", "report-") + ".json")
    from benanza.database.exports import write_atomic

    write_atomic(json.dumps(d, indent=1, default=str).encode(), path)  # whole or not at all
    return TorchReport(r, d, a, system, database, path)


def torch(req: TorchRequest, progress: Progress = SILENT,
          on_report: Callable[[TorchReport], None] | None = None) -> TorchResult:
    """``benanza torch``: the module of ``req.spec`` (:func:`benanza.processing.modules.resolve`)
    exported, benched, profiled and analyzed; with a training phase, :func:`torch_train`. Each run's
    report is written (and given to ``on_report``) as soon as its profile is taken, so a command cut
    short keeps the reports of the runs it finished; a working folder the command made is removed when
    it fails before the first profile (:func:`_removed_on_failure`). Raises UsageError and the stages'
    errors."""
    if req.phase.training:
        return torch_train(req, progress)
    src = modules.resolve(req.spec, req.seq, req.input_shape, req.phase.decoder, req.kv_len, mla_form=req.mla)
    ref = {"spec": req.spec, "seq": req.seq, "input_shape": list(req.input_shape) if req.input_shape else None,
           "phase": req.phase.decoder, "kv_len": req.kv_len, "mla": req.mla}
    return torch_source(req, src, ref, progress, on_report)


def working_folder(req: TorchRequest, src) -> Path:
    """The command's working folder: ``-o``, else ``./benanza-torch-NAME``."""
    return Path(req.output) if req.output is not None else Path(f"benanza-torch-{src.name}")


@contextlib.contextmanager
def _removed_on_failure(folder: Path):
    """Around the steps that make ``folder`` (the export, bench, profiles): when they fail and the
    folder was not there before and holds no profile yet, it is removed (a refused factory or a
    failed export leaves no empty or half-made folder; a profile taken stays, and the reports of
    finished runs)."""
    existed = folder.exists()
    try:
        yield
    except BaseException:
        if not existed and folder.is_dir() and not any(folder.rglob("profile.json")):
            shutil.rmtree(folder, ignore_errors=True)
        raise


def torch_source(req: TorchRequest, src, ref: dict, progress: Progress = SILENT,
                 on_report: Callable[[TorchReport], None] | None = None) -> TorchResult:
    """The inference runs of ``src`` (a :class:`benanza.processing.modules.ModuleSource`; ``ref``: how
    the profiling process rebuilds the module): what :func:`torch` and :func:`analyze_module` share."""
    folder = working_folder(req, src)
    result = TorchResult(req, folder)
    steps: dict = {}
    opened: dict = {}  # the database and this GPU's fingerprint, at the first report

    def report(onnx_path, r):
        if not opened:
            opened.update(db=open_database(req.db), fingerprint=current_fingerprint())
        rep = run_report(req, opened["db"], folder, onnx_path, r, opened["fingerprint"], steps, src.attention)
        result.reports.append(rep)
        if on_report is not None:
            on_report(rep)

    how = bench_runner(req, progress) if req.bench else False
    with _removed_on_failure(folder):
        result.onnx, _ = pt.prepare(src, folder, list(req.batches), req.dtype, req.db, req.device, req.channels_last,
                                    req.compile, how, req.warmup, req.runs, req.iterations, ref, req.force,
                                    progress.say, seconds=steps, logs=req.logs, on_run=report)
    return result


def train_comparison(req: TorchRequest, onnx_path: Path, run: ProfileRun,
                     fingerprint: str | None = None) -> TrainComparison:
    """One profiled training step (``run``: a :class:`benanza.profiles.pytorch.ProfileRun` with
    ``train``) against benanza's training step (:func:`~benanza.usecases.common.training` with the
    run's optimizer). Raises as :func:`~benanza.usecases.common.lower_bound` and
    :func:`benanza.profiles.train_join.load_train_join`."""
    fd = framework_dtype(req.dtype, "torch")
    database = open_database(req.db)
    lb, step = training(Scenario(onnx_path, run.batch, fd.precision, DEFAULT_LAYOUTS, conv_precision=fd.conv_precision),
                        database, fingerprint=fingerprint, optimizer=run.train or "sgd")
    tj, doc = load_train_join(run.folder, lb.layers, onnx_path)
    info = {"label": run.label, "folder": str(run.folder), "export": str(onnx_path), "batch": run.batch,
            "dtype": req.dtype, "optimizer": run.train, "train": doc.get("train"), "gpu": lb.system.gpu_name,
            "settings": doc.get("settings"), "notices": list(doc.get("notices") or []) + list(lb.notices),
            "seconds": dict(doc.get("seconds") or {})}
    lat = doc.get("latency") or {}
    if lat.get("samples_ms"):
        la = Latency.from_samples(lat["samples_ms"], str(lat.get("method", "")))
        info["step_wall_ms"] = {"median_ms": la.median_ms, "iqr_ms": la.iqr_ms, "samples": la.samples,
                                "method": la.method}
    c = TrainComparison(tj, step, info, system=lb.system)
    fp16 = None  # for an fp32 run, the fp16 step of the same model for AMP (step 5 of the what-if)
    if req.dtype == "fp32":
        try:
            _, fp16 = training(Scenario(onnx_path, run.batch, "fp16", DEFAULT_LAYOUTS), database, layers=lb.layers,
                               fingerprint=fingerprint, optimizer=run.train or "sgd")
        except BenanzaError:
            fp16 = None
    alt = step_alternatives(c.step, database, lb.system.id, fp16, DEFAULT_LAYOUTS, engines=c.join.conv_engines)
    c.whatif = compose_step(c, lb.layers, alt)
    return c


def torch_train(req: TorchRequest, progress: Progress = SILENT) -> TorchResult:
    """``benanza torch SPEC --train``: export the module, bench its training step in this process,
    profile training steps of the native module with ``req.optimizer`` and hold each against
    benanza's step (:func:`train_comparison`). Each comparison's ``run`` holds the profile's
    ``seconds`` and the command's export and bench ``command_seconds``."""
    src = modules.resolve(req.spec, req.seq, req.input_shape, train=True)
    folder = working_folder(req, src)
    ref = {"spec": req.spec, "seq": req.seq, "input_shape": list(req.input_shape) if req.input_shape else None,
           "train": True}
    how = bench_runner(req, progress, train=req.optimizer) if req.bench else False
    steps: dict = {}
    with _removed_on_failure(folder):
        onnx_path, runs_done = pt.prepare(src, folder, list(req.batches), req.dtype, req.db, req.device,
                                          req.channels_last, req.compile, how, req.warmup, req.runs, req.iterations,
                                          ref, req.force, progress.say, train=req.optimizer, seconds=steps,
                                          logs=req.logs)
    fp = current_fingerprint()
    comps = [train_comparison(req, onnx_path, r, fingerprint=fp) for r in runs_done]
    for c in comps:  # where the command's time went, as `benanza torch`'s reports say it
        c.run["command_seconds"] = dict(steps)
    return TorchResult(req, folder, onnx_path, comparisons=comps)


def analyze_module(module, example_inputs, req: TorchRequest, batch_dims: tuple[int, ...] | None = None,
                   name: str | None = None, progress: Progress = SILENT) -> TorchResult:
    """:func:`torch` for a module object: saved with ``torch.save`` for the profiling process (its
    class must be importable), then the same steps and the same documents as ``benanza torch``.
    ``example_inputs``: a tensor or tuple of tensors (their batch dim, ``batch_dims`` or 0, is resized
    to each of ``req.batches``). Raises UsageError for a module torch.save cannot write."""
    import torch as th

    src = modules.from_module(module, example_inputs, batch_dims, name)
    xs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    dims = tuple(batch_dims) if batch_dims is not None else (0,) * len(xs)
    o = Path(req.output) if req.output is not None else Path(f"benanza-torch-{src.name}")
    o.mkdir(parents=True, exist_ok=True)
    try:
        th.save(module, o / "module.pt")
        th.save(tuple(x.detach().cpu() for x in xs), o / "inputs.pt")
    except Exception as e:  # noqa: BLE001 - pickling errors come in many types
        raise UsageError(f"cannot save the module for the profiling process (torch.save: {type(e).__name__}: "
                         f"{str(e)[:200]}): define its class in an importable module") from None
    ref = {"pickle": str((o / "module.pt").resolve()), "inputs": str((o / "inputs.pt").resolve()),
           "batch_dims": list(dims), "spec": f"{type(module).__module__}.{type(module).__qualname__} object"}
    return torch_source(req, src, ref, progress)


def example_batches(example_inputs, batch, batch_dims) -> tuple[int, ...]:
    """The batch sizes of :func:`analyze_module`: ``batch`` (one or several), else the example's."""
    xs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    dims = tuple(batch_dims) if batch_dims is not None else (0,) * len(xs)
    return (batch,) if isinstance(batch, int) else tuple(batch or [int(xs[0].shape[dims[0]])])

