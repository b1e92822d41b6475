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

from dataclasses import dataclass, field
from pathlib import Path

from benanza.errors import UsageError
from benanza.generation.generator import LAYOUTS, parse_layouts  # LAYOUTS: what a scenario may name, in order
from benanza.kinds.precision import Precision

#: the layouts a layer may run in unless the scenario says otherwise: convolutions and their
#: neighbours may run channels-last, layout conversions reported apart (analyze's default, and so
#: roofline's and predict's)
DEFAULT_LAYOUTS = ("NCHW", "NHWC")
#: which measurements: warm (back-to-back calls, the default) or cold (L2 flushed before each call)
CACHES = ("warm", "cold")
#: what is run: the forward pass (the training step and the decoder phases will join here)
PHASES = ("inference",)


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
