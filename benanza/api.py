"""The library API: one scenario value, and the analyses that take it.

The CLI (``benanza analyze``, ``roofline``, ``predict``) and Python callers go through the same
functions, so every command that prints an LBL for one scenario prints the same figure: the
headline LBL, :attr:`benanza.analysis.analyzer.Analysis.lbl_ms` (fused, critical path, in every
layout the scenario allows; ../shared/DESIGN.md), said with :meth:`Analysis.lbl_text`, which marks
a partial sum ``INCOMPLETE`` with the one count of missing layers.

A :class:`Scenario` is frozen and validated field by field (one validator per field: a string never
reaches a stage unchecked); ``phase`` is there for the training-step and decoder phases that come
next (only ``inference`` today).

    from benanza import api
    s = api.Scenario.of("resnet50.onnx", batch=32, dtype="fp16")
    r = api.lower_bound(s, db="perf.db")
    print(r.analysis.lbl_text())       # 1.2304 ms (fused, critical path, nchw+nhwc)
"""
from __future__ import annotations

import dataclasses
import hashlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from benanza.errors import BenanzaError, LibraryError, UsageError
from benanza.generation.generator import LAYOUTS, parse_layouts  # LAYOUTS: what a scenario may name, in order
from benanza.kinds.precision import Precision

#: the layouts a layer may run in unless the scenario says otherwise: convolutions and their
#: neighbours may run channels-last, layout conversions reported apart (analyze's default, and so
#: roofline's and predict's)
DEFAULT_LAYOUTS = ("NCHW", "NHWC")
#: which measurements: warm (back-to-back calls, the default) or cold (L2 flushed before each call)
CACHES = ("warm", "cold")
#: what is run: the forward pass (the training step and the decoder phases will join here)
PHASES = ("inference", "train")


def batch_size(value) -> int:
    """A batch size: a positive integer (or its decimal text). Raises UsageError otherwise."""
    try:
        b = int(str(value).strip()) if not isinstance(value, (bool, float)) else None
    except ValueError:
        b = None
    if b is None or b <= 0:
        raise UsageError(f"--batch must be a positive integer, got {value!r}")
    return b


def precision(value) -> Precision:
    """A :class:`Precision` from itself or its name (``fp16``; case-insensitive). Raises UsageError
    naming the valid ones."""
    if isinstance(value, Precision):
        return value
    return Precision.of(str(value).strip().lower())


def layouts(value) -> tuple[str, ...]:
    """Layouts from ``"nchw,nhwc"`` or a sequence of names, through the one parser of layouts
    (:func:`benanza.generation.generator.parse_layouts`): upper-case, in :data:`LAYOUTS` order, no
    repeats, at least one. Raises UsageError naming the valid ones."""
    names = parse_layouts(value if isinstance(value, str) else ",".join(map(str, value)))
    return tuple(x for x in LAYOUTS if x in names)


def cache(value: str) -> str:
    """``warm`` or ``cold``. Raises UsageError otherwise."""
    if value not in CACHES:
        raise UsageError(f"--cache must be warm or cold, got {value!r}")
    return value


def phase(value: str) -> str:
    """A phase of :data:`PHASES`. Raises UsageError otherwise."""
    if value not in PHASES:
        raise UsageError(f"unknown phase {value!r} (choose from {', '.join(PHASES)})")
    return value


def model_path(value) -> Path:
    """An existing ONNX file. Raises UsageError naming the path when it is missing or a folder."""
    p = Path(value)
    if not p.exists():
        raise UsageError(f"{p}: no such model file")
    if p.is_dir():
        raise UsageError(f"{p}: is a folder, not an ONNX model file")
    return p


@dataclass(frozen=True)
class Scenario:
    """What one LBL is of: ``model`` (an ONNX file) at ``batch`` in ``precision``, each layer
    allowed ``layouts`` (tensor layouts), ``cache`` (warm or cold measurements), measured on
    ``system`` (an id, fingerprint prefix or GPU name; None: this GPU if the database has it, else
    the latest), ``conv_precision`` (the convolutions in another precision: PyTorch's fp32 default
    runs them in tf32), ``dims`` (symbolic dimensions bound, ``((name, size), ...)``), ``batch_dim``
    (the input axis that is the batch) and ``phase``. Every field is validated when the value is made
    (:meth:`__post_init__`); raises UsageError for a bad one."""

    model: Path
    batch: int = 1
    precision: Precision = field(default_factory=lambda: Precision.of("fp32"))
    layouts: tuple[str, ...] = DEFAULT_LAYOUTS
    cache: str = "warm"
    system: str | None = None
    conv_precision: Precision | None = None
    dims: tuple[tuple[str, int], ...] = ()
    batch_dim: int | None = None
    phase: str = "inference"

    def __post_init__(self):
        set_ = object.__setattr__
        set_(self, "model", model_path(self.model))
        set_(self, "batch", batch_size(self.batch))
        set_(self, "precision", precision(self.precision))
        set_(self, "layouts", layouts(self.layouts))
        set_(self, "cache", cache(self.cache))
        set_(self, "phase", phase(self.phase))
        if self.conv_precision is not None:
            cp = precision(self.conv_precision)
            if cp.name != self.precision.name and (self.precision.name, cp.name) != ("fp32", "tf32"):
                raise UsageError("--conv-tf32 goes with --dtype fp32 only (PyTorch's fp32 default: TF32 convolutions)")
            set_(self, "conv_precision", None if cp.name == self.precision.name else cp)
        set_(self, "dims", tuple(sorted(dict(self.dims).items())))

    @classmethod
    def of(cls, model, batch=1, dtype="fp32", layout="nchw,nhwc", cache: str = "warm", system: str | None = None,
           conv_tf32: bool = False, dims: dict | None = None, batch_dim: int | None = None,
           phase: str = "inference") -> "Scenario":
        """A scenario from the command line's words (``dtype="fp16"``, ``layout="nchw,nhwc"``)."""
        return cls(model, batch, dtype, layout, cache, system, "tf32" if conv_tf32 else None,
                   tuple((dims or {}).items()), batch_dim, phase)

    def label(self) -> str:
        """``resnet50.onnx batch 32 fp16 nchw+nhwc warm``."""
        p = self.precision.name + (f"+{self.conv_precision.name}conv" if self.conv_precision else "")
        return f"{self.model.name} batch {self.batch} {p} {'+'.join(x.lower() for x in self.layouts)} {self.cache}"


@dataclass
class LowerBound:
    """One scenario's analysis (:class:`benanza.analysis.analyzer.Analysis`), the system it was
    measured on (:class:`benanza.database.store.System`), the processed model
    (:class:`benanza.processing.model.ModelLayers`) and the notices met on the way (the model's,
    when processed here, and the system resolver's)."""

    scenario: Scenario
    analysis: object
    system: object
    layers: object
    notices: list[str] = field(default_factory=list)


def current_fingerprint() -> str | None:
    """Fingerprint of GPU 0 here, when there is one and the native module can see it."""
    try:
        from benanza.runner import system as sysq

        return sysq.current_fingerprint()
    except Exception:
        return None


def open_database(db=None):
    """An open :class:`benanza.database.store.Database` from itself, a URL, a path (str or Path; a
    ``.gz`` reference database opens read-only) or None (``$BENANZA_DB`` or the default file). Never
    creates one: raises DatabaseError with one line when it cannot be opened."""
    from benanza.database.store import Database, open_db

    if isinstance(db, Database):
        return db
    return open_db(None if db is None else str(db), create=False)


def process(s: Scenario):
    """The scenario's model processed at its batch (:func:`benanza.processing.model.process`,
    through the processed-model cache :mod:`benanza.processing.cache`)."""
    from benanza.processing.cache import process as do_process

    return do_process(s.model, s.batch, dict(s.dims), s.batch_dim)


def lower_bound(s: Scenario, db=None, layers=None, fingerprint: str | None = None) -> LowerBound:
    """The scenario's LBL from database ``db`` (an open :class:`benanza.database.store.Database`,
    a URL or SQLite path, or None: ``$BENANZA_DB`` or the default file). ``layers``: the model
    already processed at this batch (else processed here); ``fingerprint``: this GPU's (else asked
    of the native module). Raises UsageError for an unknown system or a database without one, and
    when not one benchmarkable layer is measured (an LBL without measurements is never a number);
    ModelError for an unreadable model. A partial LBL is returned, marked (``analysis.complete``)."""
    from benanza.analysis.analyzer import analyze, resolve_system

    database = open_database(db)
    ml = layers if layers is not None else process(s)
    system, notice = resolve_system(database, s.system, fingerprint or current_fingerprint())
    a = analyze(ml, database, system, s.precision.name, s.cache, s.layouts,
                s.conv_precision.name if s.conv_precision else None)
    if a.measured_layers == 0 and a.missing:
        raise UsageError(f"{a.model} batch {a.batch} {a.precision_label}: no layer is measured on {system.gpu_name} "
                         f"(system {system.id}) in {database.safe_url}; run `benanza bench` for this batch "
                         f"and data type")
    return LowerBound(s, a, system, ml, (list(ml.notices) if layers is None else []) + ([notice] if notice else []))


def training(s: Scenario, db=None, layers=None, fingerprint: str | None = None, optimizer: str = "sgd"):
    """The scenario's training step (:func:`benanza.analysis.training.training_step`): its
    forward :func:`lower_bound` and the backward calls' measurements. Returns (the lower bound,
    the :class:`benanza.analysis.training.TrainingStep`). Raises as :func:`lower_bound`."""
    from benanza.analysis.training import training_step

    database = open_database(db)
    lb = lower_bound(s, database, layers, fingerprint)
    return lb, training_step(lb.layers, lb.analysis, database, lb.system, optimizer)


def spec_of(system):
    """The spec-table entry (:class:`benanza.analysis.gpus.GpuSpec`) of a measured system, and a
    notice when the two disagree on SMs or clock (empty when they agree). Raises UsageError for a
    GPU the table lacks."""
    from benanza.analysis.gpus import find_gpu

    spec = find_gpu(system.gpu_name)
    if system.sm_count != spec.sm_count or (system.max_sm_clock_mhz and system.max_sm_clock_mhz != spec.boost_clock_mhz):
        return spec, (f"{system.gpu_name} reports {system.sm_count} SMs at {system.max_sm_clock_mhz} MHz; "
                      f"the spec table says {spec.sm_count} at {spec.boost_clock_mhz} MHz (spec used)")
    return spec, ""


def predict(s: Scenario, target: str, db=None, memory: str = "l2") -> tuple[LowerBound, object]:
    """The scenario's LBL predicted on GPU ``target`` (a spec-table name) from its measurements
    (:func:`benanza.analysis.predict.predict`: Habitat wave scaling); the prediction starts from
    :func:`lower_bound`'s headline LBL (``Prediction.origin_lbl_ms``). Returns (the lower bound,
    the :class:`benanza.analysis.predict.Prediction`). Raises UsageError for an unknown GPU or
    memory model, and as :func:`lower_bound`."""
    from benanza.analysis.gpus import find_gpu
    from benanza.analysis.predict import MEMORY_MODELS, predict as do_predict

    dest = find_gpu(target)
    if memory not in MEMORY_MODELS:
        raise UsageError(f"--memory must be one of {', '.join(MEMORY_MODELS)}, not {memory!r}")
    lb = lower_bound(s, db)
    spec, notice = spec_of(lb.system)
    if notice:
        lb.notices.append(notice)
    return lb, do_predict(lb.analysis, spec, dest, s.precision.name, memory=memory)


def predict_training(s: Scenario, target: str, db=None, memory: str = "l2", optimizer: str = "sgd"):
    """The scenario's training step (:func:`training`, with ``optimizer``'s update and state)
    predicted on GPU ``target`` (a spec-table name) from its measurements
    (:func:`benanza.analysis.predict_training.predict_training`: each call by Habitat wave scaling,
    the step's schedule on the target, and whether its peak-memory bound fits the target's memory).
    Returns (the lower bound, the :class:`benanza.analysis.predict_training.TrainingPrediction`).
    Raises UsageError for an unknown GPU, memory model or optimizer, and as :func:`lower_bound`."""
    from benanza.analysis.gpus import find_gpu
    from benanza.analysis.predict import MEMORY_MODELS
    from benanza.analysis.predict_training import predict_training as do_predict
    from benanza.analysis.training import OPTIMIZER_STATE

    dest = find_gpu(target)
    if memory not in MEMORY_MODELS:
        raise UsageError(f"--memory must be one of {', '.join(MEMORY_MODELS)}, not {memory!r}")
    if optimizer not in OPTIMIZER_STATE:
        raise UsageError(f"--optimizer must be one of {', '.join(OPTIMIZER_STATE)}, got {optimizer!r}")
    database = open_database(db)
    lb, step = training(s, database, optimizer=optimizer)
    spec, notice = spec_of(lb.system)
    if notice:
        lb.notices.append(notice)
    return lb, do_predict(lb.layers, step, spec, dest, memory=memory)


def roofline(s: Scenario, db=None, ceilings: str = "spec") -> tuple[LowerBound, object, object]:
    """The roofline of the scenario's layers (:func:`benanza.reports.chart.model_roofline`) on the
    measured GPU's ``ceilings`` (``spec``: datasheet; ``measured``: ``benanza ceilings``' rows).
    Returns (the lower bound, the :class:`benanza.reports.chart.ModelRoofline`, the ceilings'
    :class:`benanza.analysis.gpus.GpuSpec`). Raises UsageError for unknown ceilings, and as
    :func:`lower_bound`."""
    from benanza.analysis.roofline import l2_roof
    from benanza.reports.chart import model_roofline

    if ceilings not in ("spec", "measured"):
        raise UsageError(f"--ceilings must be spec or measured, got {ceilings!r}")
    database = open_database(db)
    lb = lower_bound(s, database)
    spec, notice = spec_of(lb.system)
    if notice:
        lb.notices.append(notice)
    measured = database.ceilings(lb.system.id)
    if ceilings == "measured":
        from benanza.analysis.gpus import with_measured_ceilings

        spec = with_measured_ceilings(spec, measured)
    l2 = l2_roof(spec.sm_count, spec.boost_clock_mhz, measured)
    return lb, model_roofline(lb.analysis, spec, ceilings, l2), spec


# ------------------------------------------------------------------------------------------- bench

@dataclass(frozen=True)
class Timing:
    """How layers are timed: the one home of the timing defaults (``benanza bench`` and ``run``
    declare their options from :data:`TIMING`). Units: ms, MB, s. ``cold``: contenders, all or none
    (:data:`benanza.runner.run.COLD_POLICIES`); ``devices``: ``all`` or ``0,1,...`` (None: ``device``).
    :meth:`run_options` validates every field (UsageError naming the option)."""

    warmup_ms: float = 0.25
    rse: float = 0.01
    min_samples: int = 10
    max_samples: int = 2000
    max_time_ms: float = 1000.0
    workspace_mb: float = 4096.0
    cold: str = "contenders"
    no_cold: bool = False
    exhaustive: bool = False
    workers_per_gpu: int = 3  # benanza.runner.run.RunOptions.workers_per_gpu
    screen: float = 0.0
    max_engines: int = 0
    device: int = 0
    devices: str | None = None
    job_timeout: float = 300.0
    force: bool = False
    retry_failed: bool = False

    def run_options(self):
        """The runner's :class:`benanza.runner.run.RunOptions`; raises UsageError for a bad field."""
        import os

        from benanza.runner.run import COLD_POLICIES, RunOptions

        if self.cold not in COLD_POLICIES:
            raise UsageError(f"--cold must be one of {', '.join(COLD_POLICIES)}, got {self.cold!r}")
        cold = "none" if self.no_cold else ("all" if self.exhaustive and self.cold == "contenders" else self.cold)
        if not 0 < self.rse < 1:
            raise UsageError(f"--rse must be in (0, 1), got {self.rse}")
        if self.min_samples < 1 or self.max_samples < self.min_samples:
            raise UsageError("--min-samples must be >= 1 and <= --max-samples")
        if self.job_timeout <= 0:
            raise UsageError("--job-timeout must be positive")
        if self.screen != 0 and self.screen < 1:
            raise UsageError(f"--screen must be 0 (off) or >= 1, got {self.screen}")
        if not 1 <= self.workers_per_gpu <= 8:
            raise UsageError(f"--workers-per-gpu must be 1 to 8, got {self.workers_per_gpu}")
        if self.max_engines < 0:
            raise UsageError(f"--max-engines must be 0 (all) or positive, got {self.max_engines}")
        log = os.environ.get("BENANZA_PHASES_LOG")
        return RunOptions(device=self.device, warmup_ms=self.warmup_ms, rse=self.rse, min_samples=self.min_samples,
                          max_samples=self.max_samples, max_time_ms=self.max_time_ms,
                          workspace_limit_mb=self.workspace_mb, cold=cold, job_timeout_s=self.job_timeout,
                          force=self.force, retry_failed=self.retry_failed,
                          devices=parse_devices(self.devices, self.device), screen=self.screen,
                          max_engines=self.max_engines, race=not self.exhaustive,
                          workers_per_gpu=self.workers_per_gpu, phases_log=Path(log) if log else None)


#: the timing defaults
TIMING = Timing()


@dataclass
class BenchResult:
    """What :func:`bench` did: the model's name, the stages' wall times (``*_s``, s), the suite's run
    and the framework kernels' run (:class:`benanza.runner.run.RunSummary`, or None), the system
    measured, one :class:`benanza.analysis.analyzer.Analysis` per batch and data type, the suite."""

    model: str
    stages: dict
    run: object
    framework_run: object
    system: object
    analyses: list
    suite: object
    database: object
    #: with ``train``: one :class:`benanza.analysis.training.TrainingStep` per analysis
    training: list = field(default_factory=list)
    #: every run summary: the suite's run, or one per GPU kind on a cluster (``run`` is the first)
    runs: list = field(default_factory=list)


def bench(model, batches=(1,), dtypes="fp32", layouts_=DEFAULT_LAYOUTS, timing: Timing = TIMING, db=None,
          output=None, kinds=None, torch: bool | None = None, conv_tf32: bool = False, dims: dict | None = None,
          batch_dim: int | None = None, quiet: bool = False, say=None, train: bool = False,
          optimizer: str = "sgd", cluster: str | None = None, gpu_kinds: list[str] | None = None) -> BenchResult:
    """The main job, in this process: process ``model`` (a path, or several: a zoo) at ``batches``,
    generate and compile one suite of their unique jobs (a job several models share is measured once), time every implementation of each unique layer (and the framework's own kernels, unless
    ``torch`` is False) into database ``db`` (created if missing), and analyze every batch and data
    type (``dtypes``: names or ``"fp32,fp16"``). ``say``: a callable for the stage lines (None:
    silent); ``quiet``: no progress bars; ``train``: the backward calls of a training step too
    (:func:`benanza.processing.training.training_plan`), and the training step's LBL of each
    analysis (:attr:`BenchResult.training`), its memory bound with ``optimizer``'s state.
    ``cluster``: run the jobs on a Dask cluster (``tcp://HOST:PORT`` or ``local``;
    :func:`benanza.runner.cluster.run_cluster`) on each of its GPU kinds ``gpu_kinds`` (None: all), and
    analyze on each kind's system (the framework's kernels are not timed there). Raises UsageError, ModelError, DatabaseError, DeviceError,
    LibraryError as the stages do."""
    import time

    from benanza.generation.generator import parse_kinds, parse_precisions
    from benanza.processing.cache import process as process_model

    say = say or (lambda m: None)
    stages: dict = {}
    precisions = parse_precisions(dtypes if isinstance(dtypes, str) else ",".join(dtypes))
    lays = list(layouts(layouts_))
    kind_list = parse_kinds(kinds) if isinstance(kinds, (str, type(None))) else list(kinds)
    opts = timing.run_options()
    conv_p = "tf32" if conv_tf32 else None
    if cluster and torch:
        raise UsageError("--torch with --cluster: the framework's kernels are timed on this machine's GPU "
                         "(run without --cluster)")
    if conv_tf32 and precisions != ["fp32"]:
        raise UsageError("--conv-tf32 goes with --dtype fp32 only (PyTorch's fp32 default: TF32 convolutions)")
    t = time.perf_counter()
    paths = [model] if isinstance(model, (str, Path)) else list(dict.fromkeys(model))
    if not paths:
        raise UsageError("bench: no model given")
    mls = [process_model(m, batch_size(b), dims or {}, batch_dim) for m in paths for b in batches]
    stages["process_s"] = time.perf_counter() - t
    if not quiet:
        for n in dict.fromkeys(n for ml in mls for n in ml.notices):
            _err().print(f"notice: {n}", markup=False)
    # the cluster opens while the suite is generated and compiled (run_cluster closes it)
    conn = open_cluster(cluster, timing.devices, opts.workers_per_gpu) if cluster else None
    try:
        database, suite = _bench_suite(mls, precisions, lays, kind_list, conv_p, db, output, quiet, say, stages,
                                       compile_now=bool(cluster), train=train, optimizer=optimizer)
    except BaseException:
        if conn is not None:
            conn.close()
        raise
    if cluster:
        t = time.perf_counter()
        runs, ts = run_cluster(suite, database, opts, conn, gpu_kinds, quiet), None
        stages["run_s"] = time.perf_counter() - t
        for s in runs:
            say(f"[4/5] {run_line(s)}")
    else:
        runs = [None]
        runs[0], ts = _bench_measure(suite, database, opts, quiet, torch, say, stages)
    system, results, steps = None, [], []
    for rs in runs:  # one system per GPU kind on a cluster
        sys_rs, res = _bench_analyze(mls, precisions, lays, conv_p, database, rs, say, stages)
        system, results = system or sys_rs, results + res
        if train:
            from benanza.analysis.training import training_step

            steps += [training_step(ml, a, database, sys_rs, optimizer) for ml in mls for a in res
                      if a.batch == ml.batch]
    return BenchResult(", ".join(dict.fromkeys(ml.model for ml in mls)), stages, runs[0], ts, system, results, suite,
                       database, steps, runs)


def _err():
    """The stderr console of progress and notices (a terminal's width, else plain)."""
    from benanza.reports.tables import console

    global _ERR
    if _ERR is None:
        _ERR = console(stderr=True)
    return _ERR


_ERR = None


def parse_devices(text: str | None, device: int) -> tuple[int, ...]:
    """``--devices all`` (every GPU here) or ``0,1,...``; none: ``(device,)``."""
    if not text:
        return (device,)
    if text.strip().lower() == "all":
        from benanza.runner import system as sysq

        n = sysq.device_count()
        if n < 1:
            raise UsageError("--devices all: no CUDA device here")
        return tuple(range(n))
    try:
        out = tuple(dict.fromkeys(int(p) for p in text.split(",") if p.strip()))
    except ValueError:
        raise UsageError(f"--devices {text!r}: expected 'all' or GPU indices like 0,1") from None
    if not out or min(out) < 0:
        raise UsageError(f"--devices {text!r}: expected 'all' or GPU indices like 0,1")
    return out


class _Progress:
    """A rich progress bar over jobs: counts, ETA, failures so far; on a terminal only (a pipe or a
    log gets the run's summary line)."""

    def __init__(self, quiet: bool, label: str = "measuring"):
        self.quiet = quiet or not _err().is_terminal
        self.label = label
        self.bar = None  # a rich Progress while jobs run
        self.task = None

    def __call__(self, event: str, info: dict) -> None:
        if self.quiet:
            return
        if event == "start":
            from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                       TimeRemainingColumn)

            self.bar = Progress(TextColumn(f"[bold]{self.label}"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("jobs  failed {task.fields[failed]}"), TimeElapsedColumn(),
                                TextColumn("eta"), TimeRemainingColumn(), console=_err(), transient=False)
            self.bar.start()
            self.task = self.bar.add_task("jobs", total=info["total"], failed=0)
        elif event == "job" and self.bar is not None:
            self.bar.update(self.task, completed=info["done"], failed=info["failed"])
        elif event == "end":
            self.close()

    def close(self):
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def run_suite(suite, db, opts, quiet, on_system=None):
    from benanza.runner.run import run_suite

    prog = _Progress(quiet)
    try:
        return run_suite(suite, db, opts, progress=prog, on_system=on_system)
    finally:
        prog.close()


def model_list(models, models_file=None) -> list[Path]:
    """``bench``'s models: the paths given, then those of ``models_file`` (one per line, relative to
    the file's folder; empty lines and lines starting with ``#`` skipped), each once, in order. Raises
    UsageError when the file cannot be read or no model is given."""
    paths = [Path(m) for m in models or []]
    if models_file:
        f = Path(models_file)
        try:
            text = f.read_text()
        except OSError as e:
            raise UsageError(f"--models-file {f}: {(e.strerror or type(e).__name__).lower()}") from None
        for ln in text.splitlines():
            ln = ln.strip()
            if ln and not ln.startswith("#"):
                p = Path(ln).expanduser()
                paths.append(p if p.is_absolute() else f.parent / p)
    if not paths:
        raise UsageError("bench: give a model (MODEL ... or --models-file FILE)")
    return list(dict.fromkeys(paths))


def cluster_kinds(address: str | None, text: str | None) -> list[str] | None:
    """``--gpu-kinds K1,K2`` (Dask resource names, :func:`benanza.runner.cluster.gpu_kind`); None: all.
    Checked before any work: with ``--cluster`` (``address``) Dask must be installed
    (:class:`UsageError` with :data:`benanza.runner.cluster.MISSING`); without, no kinds may be named."""
    kinds = [k.strip() for k in (text or "").split(",") if k.strip()]
    if address:
        from benanza.runner.cluster import require_distributed

        require_distributed()
    elif kinds:
        raise UsageError("--gpu-kinds goes with --cluster")
    return kinds or None


def open_cluster(address: str, devices: str | None, slots: int = 3):
    """:class:`benanza.runner.cluster.ClusterConnection` to ``address`` opened in the background;
    ``devices`` (``--devices``): the GPUs of ``--cluster local`` (None: all). Raises UsageError
    without Dask distributed or for a bad ``devices``."""
    from benanza.runner.cluster import ClusterConnection, require_distributed

    require_distributed()  # before the devices are looked up
    local = () if address != "local" or not devices or devices.strip().lower() == "all" else \
        parse_devices(devices, 0)
    return ClusterConnection(address, local, slots)


def run_cluster(suite, db, opts, address, kinds: list[str] | None, quiet: bool, devices: str | None = None):
    """The suite's jobs on a Dask cluster (:func:`benanza.runner.cluster.run_cluster`), once per GPU
    kind, with a progress bar over all workers; ``address``: a scheduler's address, ``local``, or a
    connection from :func:`open_cluster` (closed here); ``devices`` (``--devices``): the GPUs of
    ``--cluster local`` (None: all). Returns one run summary per kind."""
    from benanza.runner.cluster import run_cluster

    conn = open_cluster(address, devices, opts.workers_per_gpu) if isinstance(address, str) else address
    prog = _Progress(quiet, "measuring (cluster)")
    try:
        return run_cluster(suite, db, conn, opts, kinds, progress=prog)
    finally:
        prog.close()


def serve_workers(scheduler: str, devices: str | None, slots: int = 3) -> None:
    """``benanza worker``: a Dask worker per GPU here (``devices``: ``all``/None or ``0,1,...``),
    connected to ``scheduler``, ``slots`` suite processes sharing each GPU, until Ctrl-C
    (:func:`benanza.runner.cluster.serve_workers`). Raises UsageError for ``slots`` < 1."""
    from benanza.runner import cluster as C

    C.require_distributed()
    if slots < 1:
        raise UsageError(f"--workers-per-gpu {slots}: give at least 1")
    chosen = () if not devices or devices.strip().lower() == "all" else parse_devices(devices, 0)
    specs = C.local_specs(chosen, slots)
    _err().print(f"benanza worker: {len(specs)} GPU worker(s) for {scheduler}, {slots} suite process(es) each: "
                 + ", ".join(f"{s.name} ({s.kind})" for s in specs), markup=False)
    C.serve_workers(scheduler, specs)


def run_framework(suite, db, system_id, opts, quiet, torch: bool | None, stop=None):
    """The framework's kernels after the suite's (``torch``: None = when available). Returns the
    run summary, or None (with the reason printed unless quiet) when they are not timed.
    ``stop``: a threading.Event (:func:`benanza.runner.run.run_framework_jobs`)."""
    from benanza.runner.run import framework_available, framework_pending, run_framework_jobs
    from benanza.runner.system import partition_excludes_framework

    if torch is False or not framework_pending(suite, db, system_id, opts):
        return None  # (nothing to time: PyTorch is not even imported)
    why = partition_excludes_framework() or framework_available()
    if why:
        if torch:
            raise LibraryError(f"--torch: {why}")
        if not quiet:
            _err().print(f"notice: the framework's kernels are not timed: {why}", markup=False)
        return None
    prog = _Progress(quiet, "framework kernels")
    try:
        return run_framework_jobs(suite, db, system_id, opts, progress=prog, stop=stop)
    finally:
        prog.close()


def run_line(s) -> str:
    line = (f"{s.system.get('gpu_name')}: {s.ok + s.failed} jobs run ({s.failed} failed), {s.skipped} already in "
            f"the database, {s.measurements} measurement records, {s.wall_s:.1f} s")
    for j, r in s.failures[:10]:
        line += f"\n  failed {j}: {r}"
    return line


def _bench_measure(suite, database, opts, quiet: bool, torch: bool | None, say, stages: dict):
    """``bench``'s stages 3-4: compile, run the suite, time the framework's kernels, on one GPU.
    Where the framework's kernels go (``benchmarks/results/2026-11-26g``, one H100, resnet50 and resnet18):

    * harness to compile: beside the compile (:func:`_compile_beside_framework`), and the run waits
      for them. Fresh quick start 75.3-91.0 s (four benches); letting them go on beside the run
      instead took 89.6 and 93.5 s (the run stage 45.8-52.6 -> 63.2-64.6 s: both sides' lock waits
      doubled);
    * harness cached (nothing to overlap): beside the suite's run, both taking turns on one GPU lock
      (``RunOptions.gpu_lock``). resnet18: 48.3 s with them after the run, 38.7 s beside it, LBLs
      within 1.42 % (median 0.58 %).

    ``BENANZA_FRAMEWORK_BESIDE_RUN``: ``1`` puts them beside the run in both cases, ``0`` never (after
    the run when the harness is cached). Returns the run summaries (suite, framework or None)."""
    from concurrent.futures import ThreadPoolExecutor

    from benanza.runner.run import framework_pending

    beside = _compile_beside_framework(suite, database, opts, quiet, torch, say, stages)
    ts = None
    mode = os.environ.get("BENANZA_FRAMEWORK_BESIDE_RUN", "")
    beside_run = mode != "0"
    if beside is not None and mode != "1":  # the compile stage lasts until they are done too
        t = time.perf_counter()
        ts = beside.finish(opts)
        stages["compile_s"] += time.perf_counter() - t
        stages["torch_s"] = beside.wall_s()
        beside = None
        beside_run = False  # nothing left to time beside the run
    t = time.perf_counter()
    started: list[_Beside] = [beside] if beside is not None else []
    lock = beside.lock if beside is not None else _gpu_lock_prefix(suite)
    pool = ThreadPoolExecutor(1)

    def on_system(system_id: int) -> None:
        # the framework's kernels beside the suite's run (both on one GPU lock), when still to time
        if not started and torch is not False and framework_pending(suite, database, system_id, opts):
            started.append(_start_framework(pool, suite, database, system_id, opts, torch, lock))
            say("[4/5] the framework's kernels beside the suite's run (they take turns on the GPU)")

    try:
        rs = run_suite(suite, database, dataclasses.replace(opts, gpu_lock=lock) if beside_run else opts, quiet,
                       on_system=on_system if beside_run else None)
    except BaseException:
        for b in started:
            b.cancel(opts)
        raise
    finally:
        pool.shutdown(wait=False)
    stages["run_s"] = time.perf_counter() - t
    if started:
        ts = started[0].finish(opts)
        stages["torch_s"] = started[0].wall_s()
        if ts is not None:
            say(f"[4/5] framework kernels (beside the run): {run_line(ts)}")
    elif ts is not None:
        say(f"[4/5] framework kernels (beside the compile): {run_line(ts)}")
    say(f"[4/5] {run_line(rs)}")
    if ts is None or ts.system_id != rs.system_id:  # not timed beside (or for another system): after
        t = time.perf_counter()
        ts = run_framework(suite, database, rs.system_id, opts, quiet, torch)
        if ts is not None:
            stages["torch_s"] = time.perf_counter() - t
            say(f"[4/5] framework kernels: {run_line(ts)}")
    return rs, ts


@dataclasses.dataclass
class _Beside:
    """The framework's kernels being timed beside the compile or beside the suite's run
    (:func:`_bench_measure`): their run's future (its summary or
    None), its stop event, the GPU lock prefix both runs take (``RunOptions.gpu_lock``), when it
    started and ended (``time.perf_counter``)."""

    future: object
    stop: object
    lock: str
    t0: float
    t1: float | None = None

    def wall_s(self) -> float:
        return (self.t1 if self.t1 is not None else time.perf_counter()) - self.t0

    def finish(self, opts):
        """Wait for the run: its summary or None (raises what it raised); the lock files removed."""
        try:
            return self.future.result()
        finally:
            _unlink_locks(self.lock, opts)

    def cancel(self, opts) -> None:
        """Stop the run (its jobs in flight finish, the rest stay pending) and wait for it."""
        self.stop.set()
        self.future.exception()
        _unlink_locks(self.lock, opts)


def _gpu_lock_prefix(suite) -> str:
    import tempfile

    return str(Path(tempfile.gettempdir()) / f"benanza-{os.getpid()}-{id(suite)}")


def _start_framework(pool, suite, database, system_id: int, opts, torch: bool | None, lock: str = "") -> _Beside:
    """The framework's kernels (:func:`run_framework`, quiet) on ``pool``, taking the GPU lock
    ``lock`` (a new one when empty) that the suite's run shares."""
    import threading

    out = _Beside(future=None, stop=threading.Event(), lock=lock or _gpu_lock_prefix(suite), t0=time.perf_counter())
    fw_opts = dataclasses.replace(opts, gpu_lock=out.lock)

    def framework():
        try:
            return run_framework(suite, database, system_id, fw_opts, True, torch, stop=out.stop)
        finally:
            out.t1 = time.perf_counter()

    out.future = pool.submit(framework)
    return out


def _unlink_locks(prefix: str, opts) -> None:
    from benanza.runner.run import gpu_lock_files, shared_gpu_lock

    if shared_gpu_lock():  # the runs took the shared lock (another command may hold it): never removed
        return
    for f in gpu_lock_files(prefix, opts.gpus()).values():
        Path(f).unlink(missing_ok=True)


def _compile_beside_framework(suite, database, opts, quiet: bool, torch: bool | None, say, stages: dict):
    """``bench``'s stage 3 with the framework's kernels (which need PyTorch, not the suite) timed on
    the GPU from the start of the compile, when they are to be timed and pending: their system is
    the GPU as benanza's native module sees it (``runner.system.local_system``, the suite's
    fingerprint); they take a GPU lock (``RunOptions.gpu_lock``) that the suite's run shares when
    they go on beside it (``BENANZA_FRAMEWORK_BESIDE_RUN=1``, :func:`_bench_measure`), so no two
    processes time on the GPU at once. Their cold policy is the run's; a job's library best is
    looked up when the job is handed out (:func:`benanza.runner.run.run_framework_jobs`), unknown
    (cold figures taken) while the suite has not measured it. Returns a :class:`_Beside`, or None when the
    suite was compiled alone (the framework's kernels follow the suite's run, or are not timed).
    Raises BuildError as the build does."""
    from concurrent.futures import ThreadPoolExecutor

    from benanza.build.builder import harness_cached
    from benanza.runner.system import local_system, partition_excludes_framework

    t = time.perf_counter()
    beside = torch is not False and not harness_cached(suite.root) and not partition_excludes_framework()
    system = local_system(opts.device) if beside else None
    pool = ThreadPoolExecutor(2)
    jobs = max(1, (os.cpu_count() or 2) - 1) if system is not None else None  # a core for the framework
    build = pool.submit(build_with_progress, suite.root, jobs, quiet or system is not None)
    out = None
    if system is not None:
        say("[3/5] compiling, and timing the framework's kernels meanwhile")
        out = _start_framework(pool, suite, database, database.upsert_system(system), opts, torch)
    pool.shutdown(wait=False)
    try:
        br = build.result()
    except BaseException:
        if out is not None:
            out.cancel(opts)
        raise
    stages["compile_s"] = time.perf_counter() - t
    say(f"[3/5] compiled {br.executable} in {stages['compile_s']:.1f} s")
    return out


def _bench_suite(mls, precisions, layouts, kind_list, conv_p, db, output, quiet: bool, say, stages: dict,
                 compile_now: bool = True, train: bool = False, optimizer: str = "sgd"):
    """``bench``'s stages 1-3: open the database (a bad URL fails before the long stages; nothing is
    created when no layer can be benchmarked), generate the suite into ``output`` (default: a
    cache folder per model) and compile it (unless ``compile_now`` is false), with a progress bar on
    a terminal unless ``quiet``. Returns (database, suite); the stages' wall times (s) go into ``stages``."""
    from benanza.database.store import open_db
    from benanza.generation.generator import generate as gen, plan_jobs, training_folds_note

    if not plan_jobs(mls, precisions):  # fail before creating anything
        raise UsageError(f"{mls[0].model}: no benchmarkable layer (every layer is zero-cost or unsupported)")
    database = open_db(db)  # before the long stages: a bad URL fails now
    if not quiet:
        for n in database.notices:
            _err().print(f"notice: {n}", markup=False, soft_wrap=True)
    for ml in mls:
        s = ml.summary()
        say(f"[1/5] {ml.model} batch {ml.batch}: {s['layers']} layers, {s['unique_layers']} unique, "
            f"{s['unique_benchmarked']} unique to benchmark, unsupported: "
            f"{', '.join(f'{k} x{v}' for k, v in s['unsupported'].items()) or 'none'}")
    t = time.perf_counter()
    shas = sorted({ml.sha256 for ml in mls})
    name = f"{mls[0].model}-{mls[0].sha256[:12]}" if len(shas) == 1 else \
        f"zoo-{len(shas)}-{hashlib.sha256(''.join(shas).encode()).hexdigest()[:12]}"
    folder = output or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "benanza" / "suites" / name
    suite = gen(mls, precisions, folder, layouts, kind_list, conv_p, train=train, optimizer=optimizer)
    stages["generate_s"] = time.perf_counter() - t
    say(f"[2/5] generated {len(suite.jobs)} jobs in {folder}{training_folds_note(mls, train)}")
    if compile_now:
        t = time.perf_counter()
        br = build_with_progress(folder, None, quiet)
        stages["compile_s"] = time.perf_counter() - t
        say(f"[3/5] compiled {br.executable} in {stages['compile_s']:.1f} s")
    return database, suite


def build_with_progress(folder: Path, jobs: int | None, quiet: bool):
    """:func:`benanza.build.builder.build` with a bar per build (ninja's ``[n/m]``) on a terminal."""
    from benanza.build.builder import build as do_build
    from benanza.reports.progress import BuildProgress

    with BuildProgress(_err(), enabled=not quiet) as progress:
        return do_build(folder, jobs=jobs, progress=progress)


def _bench_analyze(mls, precisions, layouts, conv_p, database, rs, say, stages: dict):
    """``bench``'s stage 5: the LBL of every batch and data type on the system just measured ->
    (system, analyses); :class:`UsageError` when a layer table has no measurement at all."""
    from benanza.database.store import system_fingerprint

    t = time.perf_counter()
    fingerprint = system_fingerprint(rs.system)
    lbs = [lower_bound(Scenario(ml.path, ml.batch, p, tuple(layouts), conv_precision=conv_p),
                           database, ml, fingerprint) for ml in mls for p in precisions]
    system, results = lbs[0].system, [lb.analysis for lb in lbs]
    stages["analyze_s"] = time.perf_counter() - t
    say(f"[5/5] analyzed in {stages['analyze_s']:.2f} s")
    return system, results


# ---------------------------------------------------------------------------------- a module object

def torch_bench(dtype: str, db=None, bench_args: str = "", timing: Timing = TIMING, quiet: bool = False, say=None,
                train: str | None = None):
    """What ``benanza torch`` and :func:`analyze_module` give :func:`benanza.profiles.pytorch.prepare`
    to bench the export: :func:`bench` in this process (PyTorch's ``dtype`` as benanza's precision:
    fp32 is PyTorch's default, TF32 convolutions and FP32 matmuls), or True (a ``benanza bench``
    child) when ``bench_args`` gives extra bench flags, which only the command line reads.
    ``train``: an optimizer's name: bench the training step too (``bench --train --optimizer``)."""
    from benanza.profiles.pytorch import DTYPES

    if bench_args.strip():
        return True
    bd, flags, _, _ = DTYPES[dtype]

    def run(onnx_path, batches):
        bench(onnx_path, batches, bd, timing=timing, db=db, torch=None, conv_tf32="--conv-tf32" in flags,
              quiet=quiet, say=say, train=bool(train), optimizer=train or "sgd")
    return run


def insights(onnx_path, run, dtype: str, db=None, layouts_=DEFAULT_LAYOUTS, fingerprint: str | None = None):
    """The :class:`benanza.analysis.insights.Insights` of one profiled run (``run``: a
    :class:`benanza.profiles.pytorch.ProfileRun`) against the scenario's LBL (:func:`lower_bound`)."""
    from benanza.analysis.insights import build_insights
    from benanza.profiles import load_profile
    from benanza.profiles.pytorch import DTYPES

    _, _, precision_, conv = DTYPES[dtype]
    prof = load_profile(run.folder, onnx_path, run.batch)
    database = open_database(db)
    lb = lower_bound(Scenario(onnx_path, run.batch, precision_, layouts_, conv_precision=conv), database,
                     fingerprint=fingerprint)
    return build_insights(lb.analysis, prof, database, lb.system.id)


def train_comparison(onnx_path, run, dtype: str, db=None, layouts_=DEFAULT_LAYOUTS,
                     fingerprint: str | None = None):
    """One profiled training step (``run``: a :class:`benanza.profiles.pytorch.ProfileRun` with
    ``train``, its folder written by :func:`benanza.profiles.capture_profile` with ``train=True``)
    against benanza's training step (:func:`training` with the run's optimizer): a
    :class:`benanza.profiles.train_compare.TrainComparison`. Raises as :func:`lower_bound` and
    :func:`benanza.profiles.train_join.load_train_join`."""
    from benanza.profiles.train_compare import TrainComparison
    from benanza.profiles.pytorch import DTYPES
    from benanza.profiles.train_join import load_train_join

    _, _, precision_, conv = DTYPES[dtype]
    database = open_database(db)
    lb, step = training(Scenario(onnx_path, run.batch, precision_, layouts_, conv_precision=conv), database,
                        fingerprint=fingerprint, optimizer=run.train or "sgd")
    tj, doc = load_train_join(run.folder, lb.layers, onnx_path)
    info = {"label": run.label, "folder": str(run.folder), "export": str(onnx_path), "batch": run.batch,
            "dtype": dtype, "optimizer": run.train, "train": doc.get("train"), "gpu": lb.system.gpu_name,
            "settings": doc.get("settings"), "notices": list(doc.get("notices") or []) + list(lb.notices),
            "seconds": dict(doc.get("seconds") or {})}
    lat = doc.get("latency") or {}
    if lat.get("samples_ms"):
        from benanza.profiles.profile import Latency

        la = Latency.from_samples(lat["samples_ms"], str(lat.get("method", "")))
        info["step_wall_ms"] = {"median_ms": la.median_ms, "iqr_ms": la.iqr_ms, "samples": la.samples,
                                "method": la.method}
    c = TrainComparison(tj, step, info)
    c.whatif = _step_whatif(c, lb, database, onnx_path, run, dtype, layouts_, fingerprint)
    return c


def _step_whatif(c, lb, database, onnx_path, run, dtype: str, layouts_, fingerprint):
    """The training step's what-if (:func:`benanza.analysis.train_whatif.compose_step`) of ``c``,
    with the database's alternatives; for an fp32 run the fp16 step of the same model for AMP
    (None when the database cannot give it: step 5 is then not estimated)."""
    from benanza.analysis.train_whatif import compose_step, step_alternatives

    fp16 = None
    if dtype == "fp32":
        try:
            _, fp16 = training(Scenario(onnx_path, run.batch, "fp16", layouts_), database, layers=lb.layers,
                               fingerprint=fingerprint, optimizer=run.train or "sgd")
        except BenanzaError:
            fp16 = None
    alt = step_alternatives(c.step, database, lb.system.id, fp16, tuple(layouts_), engines=c.join.conv_engines)
    return compose_step(c, lb.layers, alt)


def torch_train(spec: str, batches: list[int], dtype: str = "fp32", optimizer: str = "sgd", db=None, out=None,
                device: str = "cuda", bench: bool = True, bench_args: str = "", seq: int = 128,
                input_shape: tuple[int, ...] | None = None, warmup: int = 20, runs: int = 100,
                iterations: int = 5, force: bool = False, channels_last: bool = False, compile: str | None = None,
                say=None, logs: bool = True) -> list:
    """``benanza torch SPEC --train``: export the module of ``spec`` (:func:`benanza.processing.modules.resolve`)
    to ONNX, bench its training step (:func:`bench` with ``train``; a ``benanza bench --train`` child
    when ``bench_args`` gives extra flags), profile training steps of the native module with
    ``optimizer`` (:func:`benanza.profiles.pytorch.prepare`; ``logs``: with a log run) and hold each against benanza's step
    (:func:`train_comparison`). ``out``: the working folder (default ``./benanza-torch-NAME``).
    Returns one :class:`benanza.profiles.train_compare.TrainComparison` per profiled run (its ``run``
    holds the profile's ``seconds`` and the command's export and bench ``command_seconds``). Raises
    UsageError for bad arguments, and the errors of the stages."""
    from benanza.processing.modules import resolve
    from benanza.profiles.capture import OPTIMIZERS
    from benanza.profiles.pytorch import check_dtype, prepare

    check_dtype(dtype)
    if optimizer not in OPTIMIZERS:
        raise UsageError(f"unknown optimizer {optimizer!r} (choose from {', '.join(OPTIMIZERS)})")
    say = say or (lambda m: None)
    src = resolve(spec, seq, input_shape)
    folder = Path(out) if out is not None else Path(f"benanza-torch-{src.name}")
    ref = {"spec": spec, "seq": seq, "input_shape": list(input_shape) if input_shape else None}
    how = torch_bench(dtype, db, bench_args, quiet=True, say=say, train=optimizer) if bench else False
    steps: dict = {}
    onnx_path, runs_done = prepare(src, folder, list(batches), dtype, db, device, channels_last, compile, how,
                                   bench_args, warmup, runs, iterations, ref, force, say, train=optimizer,
                                   seconds=steps, logs=logs)
    fp = current_fingerprint()
    comps = [train_comparison(onnx_path, r, dtype, db, fingerprint=fp) for r in runs_done]
    for c in comps:  # where the command's time went, as `benanza torch`'s reports say it
        c.run["command_seconds"] = dict(steps)
    return comps


def analyze_module(module, example_inputs, *, batch: int | list[int] | None = None, dtype: str = "fp16",
                   db: str | None = None, out: str | os.PathLike | None = None, device: str = "cuda",
                   batch_dims: tuple[int, ...] | None = None, channels_last: bool = False, compile: str | None = None,
                   bench: bool = True, bench_args: str = "", name: str | None = None, timing: Timing = TIMING) -> list:
    """benanza for a module object, in this process: export it to ONNX, bench its layers
    (:func:`bench`, with ``timing``; a ``benanza bench`` child only when ``bench_args`` gives extra
    command-line flags), profile the module itself in a child process and analyze each run against
    the LBL. ``example_inputs``: a tensor or tuple of tensors (their batch dim, ``batch_dims`` or 0,
    is resized to each batch); ``batch``: one or several batch sizes (default: the example's);
    ``dtype``: fp16, bf16, fp32 (PyTorch's default math) or tf32; ``db``: the performance database
    (default benanza's); ``out``: the working folder (default ``./benanza-torch-NAME``).

    The profiling child loads the module with ``torch.load`` from ``OUT/module.pt`` (written with
    ``torch.save``): its class must be importable (not defined in ``__main__``). Returns one
    :class:`benanza.analysis.insights.Insights` per profiled run. Raises UsageError for bad
    arguments or a module torch.save cannot write, and the errors of the stages."""
    import torch

    from benanza.processing.modules import from_module
    from benanza.profiles.pytorch import check_dtype, prepare

    check_dtype(dtype)
    src = from_module(module, example_inputs, batch_dims, name)
    xs = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    dims = tuple(batch_dims) if batch_dims is not None else (0,) * len(xs)
    batches = [batch] if isinstance(batch, int) else list(batch or [int(xs[0].shape[dims[0]])])
    o = Path(out) if out is not None else Path(f"benanza-torch-{src.name}")
    o.mkdir(parents=True, exist_ok=True)
    try:
        torch.save(module, o / "module.pt")
        torch.save(tuple(x.detach().cpu() for x in xs), o / "inputs.pt")
    except Exception as e:  # noqa: BLE001 - pickling errors come in many types
        raise UsageError(f"cannot save the module for the profiling process (torch.save: {type(e).__name__}: "
                         f"{str(e)[:200]}): define its class in an importable module") from None
    ref = {"pickle": str((o / "module.pt").resolve()), "inputs": str((o / "inputs.pt").resolve()),
           "batch_dims": list(dims), "spec": f"{type(module).__module__}.{type(module).__qualname__} object"}
    how = torch_bench(dtype, db, bench_args, timing, quiet=True) if bench else False
    onnx_path, runs = prepare(src, o, batches, dtype, db, device, channels_last, compile, how, bench_args,
                              module_ref=ref, force=True)
    fp = current_fingerprint()
    return [insights(onnx_path, r, dtype, db, fingerprint=fp) for r in runs]
