"""``benanza predict`` and ``benanza roofline``: a scenario's measurements carried to another GPU (Habitat
wave scaling, USENIX ATC 2021, with datasheet figures), and held against the measured GPU's roofs."""
from __future__ import annotations

from dataclasses import dataclass

from benanza.analysis.gpus import GpuSpec, find_gpu, with_measured_ceilings
from benanza.analysis.layer_counters import counter_rows
from benanza.analysis.layer_roofline import ModelRoofline, model_roofline
from benanza.analysis.predict import (MEMORY_MODELS, ErrorBar, Prediction, error_bar, load_error_table,
                                      predict as do_predict)
from benanza.analysis.predict_training import (TrainingPrediction, load_train_error_table,
                                               predict_training as do_predict_training, training_error_bar)
from benanza.analysis.roofline import l2_roof
from benanza.analysis.time_roofline import TimeRoofline, time_roofline
from benanza.errors import UsageError
from benanza.spec import PredictRequest, RooflineRequest
from benanza.usecases.common import LowerBound, lower_bound, open_database, spec_of, training


@dataclass
class PredictResult:
    """A prediction: the scenario's :class:`~benanza.usecases.common.LowerBound` on the origin, the
    :class:`~benanza.analysis.predict.Prediction` (or, with ``train``, the
    :class:`~benanza.analysis.predict_training.TrainingPrediction`) and its error bar (None without a
    validation table)."""

    request: PredictRequest
    lower_bound: LowerBound
    prediction: Prediction | TrainingPrediction
    error_bar: ErrorBar | None

    def __iter__(self):
        """``lb, prediction = api.predict(...)``, as scripts unpacked it."""
        return iter((self.lower_bound, self.prediction))

    def document(self) -> dict:
        """The JSON document (``predict --json``): the prediction, its ``error_bar`` and, to another
        architecture, ``cross_gpu`` (:func:`benanza.analysis.xarch.cross_gpu_lines`: the GEMMs' public ratio
        grid and the error measured for it, or "never validated")."""
        from benanza.analysis.xarch import cross_gpu_lines, training_cross_gpu_lines

        p = self.prediction
        cross = training_cross_gpu_lines(p.origin, p.target, p.step.forward.precision) if self.request.train \
            else cross_gpu_lines(p)
        return {**self.prediction.to_dict(), "error_bar": self.error_bar.to_dict() if self.error_bar else None,
                "cross_gpu": cross}


def _memory(memory: str) -> str:
    if memory not in MEMORY_MODELS:
        raise UsageError(f"--memory must be one of {', '.join(MEMORY_MODELS)}, not {memory!r}")
    return memory


def predict(req: PredictRequest) -> PredictResult:
    """The scenario's LBL (or with ``train`` its training step) predicted on ``req.target`` from its
    measurements: :func:`benanza.analysis.predict.predict` from the headline LBL
    (``Prediction.origin_lbl_ms``), or :func:`benanza.analysis.predict_training.predict_training`.
    Raises UsageError for an unknown GPU, memory model or optimizer, and as
    :func:`~benanza.usecases.common.lower_bound`."""
    dest = find_gpu(req.target)
    memory = _memory(req.memory)
    database = open_database(req.db)
    if req.train:
        lb, step = training(req.scenario, database, optimizer=req.optimizer)
    else:
        lb = lower_bound(req.scenario, database)
    spec, notice = spec_of(lb.system)
    if notice:
        lb.notices.append(notice)
    if req.train:
        tp = do_predict_training(lb.layers, step, spec, dest, memory=memory)
        table = load_train_error_table()
        return PredictResult(req, lb, tp, training_error_bar(tp, table) if table else None)
    p = do_predict(lb.analysis, spec, dest, req.scenario.precision.name, memory=memory)
    table = load_error_table()
    return PredictResult(req, lb, p, error_bar(p, table) if table else None)


@dataclass
class RooflineResult:
    """A roofline: the scenario's lower bound, the ceilings' :class:`~benanza.analysis.gpus.GpuSpec`,
    the :class:`~benanza.analysis.layer_roofline.ModelRoofline`, with ``kind="time"`` the
    :class:`~benanza.analysis.time_roofline.TimeRoofline`, and the hardware counters' rows
    (:func:`benanza.analysis.layer_counters.counter_rows`)."""

    request: RooflineRequest
    lower_bound: LowerBound
    spec: GpuSpec
    roofline: ModelRoofline
    time: TimeRoofline | None
    counters: list[dict]

    def __iter__(self):
        """``lb, roofline, spec = api.roofline(...)``, as scripts unpacked it."""
        return iter((self.lower_bound, self.roofline, self.spec))

    def document(self, charts=()) -> dict:
        """The classic roofline's JSON document (``roofline --json``) with the ``charts`` written and
        the hardware counters' rows."""
        return {**self.roofline.to_dict(), "charts": [str(p) for p in charts], "counters": self.counters}


def roofline(req: RooflineRequest) -> RooflineResult:
    """The roofline of the scenario's layers on the measured GPU's ``ceilings`` (``spec``: datasheet;
    ``measured``: ``benanza ceilings``' rows). Raises UsageError as :func:`~benanza.usecases.common.lower_bound`,
    and for a GPU the spec table lacks."""
    database = open_database(req.db)
    lb = lower_bound(req.scenario, database)
    spec, notice = spec_of(lb.system)
    if notice:
        lb.notices.append(notice)
    measured = database.ceilings(lb.system.id)
    if req.ceilings == "measured":
        spec = with_measured_ceilings(spec, measured)
    l2 = l2_roof(spec.sm_count, spec.boost_clock_mhz, measured)
    mr = model_roofline(lb.analysis, spec, req.ceilings, l2)
    tr = time_roofline(lb.analysis, database, lb.system, spec, l2, req.ceilings) if req.kind == "time" else None
    rows = counter_rows(lb.analysis, database, lb.system) if req.kind == "classic" else []
    return RooflineResult(req, lb, spec, mr, tr, rows)
