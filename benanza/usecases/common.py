"""Every analysis starts here: a scenario's lower bound (:func:`lower_bound`) and training step
(:func:`training`), from the performance database.

Every command that prints an LBL for one scenario prints this figure: the headline LBL,
:attr:`benanza.analysis.analyzer.Analysis.lbl_ms` (fused, critical path, in every layout the scenario
allows), said with :meth:`Analysis.lbl_text`, which marks a partial sum ``INCOMPLETE`` with the one
count of missing layers."""
from __future__ import annotations

from dataclasses import dataclass, field

from benanza.analysis.analyzer import Analysis
from benanza.analysis.training import TrainingStep, training_step
from benanza.database.store import System
from benanza.errors import UsageError
from benanza.processing.model import ModelLayers
from benanza.spec import DEFAULT_OPTIMIZER, Scenario


@dataclass
class LowerBound:
    """One scenario's analysis (:class:`benanza.analysis.analyzer.Analysis`), the system it was
    measured on (:class:`benanza.database.store.System`), the processed model
    (:class:`benanza.processing.model.ModelLayers`) and the notices met on the way (the model's,
    when processed here, and the system resolver's)."""

    scenario: Scenario
    analysis: Analysis
    system: System
    layers: ModelLayers
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


def training(s: Scenario, db=None, layers=None, fingerprint: str | None = None,
             optimizer: str = DEFAULT_OPTIMIZER) -> tuple[LowerBound, TrainingStep]:
    """The scenario's training step (:func:`benanza.analysis.training.training_step`): its
    forward :func:`lower_bound` and the backward calls' measurements. Returns (the lower bound,
    the :class:`benanza.analysis.training.TrainingStep`). Raises as :func:`lower_bound`."""
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
