"""Predict a model's training step (docs/prediction.md) on a GPU benanza has not measured: `benanza predict
MODEL --train --to GPU`.

Each measured call of the step (:func:`benanza.analysis.training.training_step`) is scaled from the
origin GPU to the target as :func:`benanza.analysis.predict.predict` scales a layer (Habitat's wave
scaling with benanza's changes, :mod:`benanza.analysis.predict`'s docstring): the forward pass's
layers through :func:`benanza.analysis.predict.predict` itself (fused groups by their own factor,
:func:`benanza.analysis.predict.fused_weights`), and every other call -- training-mode forwards,
data and weight gradients, the loss, the optimizer's update -- by the same per-call factor
(:func:`benanza.analysis.predict.scale_layer`) from its own config and precision: a backward
kind's FLOPs, fewest bytes and units of parallel work come from its kind
(:func:`benanza.analysis.roofline.intensity`, :func:`benanza.analysis.predict.work_units`), its
compute peak from the math of its best measurement on the origin, the fixed part (launch and ramp)
kept as measured. The step's phases, sequential sum and critical path on the target follow the same
schedule and edges as the measured step (:func:`benanza.analysis.training.schedule`).

A call without a measurement on the origin has no prediction: the predicted step is a partial sum,
marked incomplete as the measured one is (the same missing count and note), never a 0 ms call.

Does it fit: the step's peak-memory lower bound (:class:`benanza.analysis.training.MemoryBound`:
parameters, gradients, optimizer state, saved activations, the largest workspace of the calls
chosen on the origin) against the target's datasheet memory (:attr:`GpuSpec.memory_bytes`). Above
it, the step cannot run as it is on the target; below it, it may (the bound leaves out what
frameworks add).

Limits: those of :mod:`benanza.analysis.predict` (no change of algorithm between GPUs). Validated
on Hopper only (benchmarks/predict_check.py --train; docs/prediction.md, "Validation"): one H100 at
132, 64 and 32 SMs (fp16, with the measured gamma of :mod:`benanza.analysis.predict`: mean |step
error| 6.84 %, 5.64 % with the calls whose implementation cannot run in the partition held apart,
measured ceilings), one H200 at 132, 64 and 32 SMs (green contexts: fp32 2.56 %, fp16 3.91 %, bf16
5.26 %, datasheet ceilings; as CUDA MPS clients, whose libraries see the partition's SM count as on a
smaller GPU: bf16 2.65 %, fp16 4.72 %) and H100 <-> H200 (fp16, bf16, fp32: 1.95 %). Those errors (measured ceilings; the H200's bf16 and fp16 partitions from MPS),
per call kind and phase, are the error bar :func:`training_error_bar` attaches to a prediction
(db/reference/predict_train_errors.json); other architectures are extrapolations, and it says so.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

from benanza.analysis.gpus import GpuSpec
from benanza.analysis.predict import (FIXED_US, ErrorBar, LayerPrediction, Prediction, check_precision, error_table_path,
                                      fused_weights, load_error_table, predict,
                                      scale_layer, weighted_error_bar)
from benanza.errors import UsageError
from benanza.analysis.training import BackwardTime, TrainingStep, apply_forward_groups, forward_weights, schedule
from benanza.database.counters import implementation_key
from benanza.processing.model import ModelLayers


@dataclass
class CallPrediction(LayerPrediction):
    """One call of the step other than the forward pass's inference layers: its phase
    (``forward`` for a training-mode forward, ``backward_data``, ``backward_weight``, ``loss``,
    ``optimizer``), origin and predicted time (ms; None when it has no measurement) and the scaling
    figures of :class:`benanza.analysis.predict.LayerPrediction` (``index``: the layer, -1 for the
    loss and the optimizer)."""

    phase: str = ""
    description: str = ""
    precision: str = ""


@dataclass
class TrainingPrediction:
    """A training step measured on ``origin`` and predicted on ``target`` (ms): ``phase_ms`` per
    phase (:attr:`benanza.analysis.training.TrainingStep.phase_ms`; None where the measured step
    has none), ``sequential_ms`` and ``critical_path_ms`` (the headline), beside the origin's
    (``origin_*``); ``calls`` each non-inference call's prediction; ``forward`` the forward pass's
    :class:`benanza.analysis.predict.Prediction`; ``memory_bytes`` the step's peak-memory lower
    bound, ``fits`` False when it exceeds the target's memory (True: it may fit)."""

    step: TrainingStep
    origin: GpuSpec
    target: GpuSpec
    forward: Prediction
    calls: list[CallPrediction]
    phase_ms: dict[str, float | None]
    sequential_ms: float
    critical_path_ms: float
    memory_bytes: int | None
    fits: bool | None
    memory: str = "l2"
    fixed_us: float = FIXED_US
    span: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.step.complete

    @property
    def incomplete_note(self) -> str:
        """The measured step's ``INCOMPLETE: ...`` note (empty when complete): the same calls miss."""
        return self.step.incomplete_note

    @property
    def optimizer(self) -> str:
        return self.step.memory.optimizer if self.step.memory is not None else ""

    def to_dict(self) -> dict:
        s = self.step
        return {"model": s.model, "batch": s.batch, "precision": s.precision_label, "origin": self.origin.name,
                "target": self.target.name, "method": "habitat-wave-scaling", "memory_model": self.memory,
                "fixed_us": self.fixed_us, "span": self.span, "optimizer": self.optimizer,
                "lbl_name": s.lbl_name, "origin_phase_ms": dict(s.phase_ms), "phase_ms": dict(self.phase_ms),
                "origin_sequential_ms": s.sequential_ms, "sequential_ms": self.sequential_ms,
                "origin_critical_path_ms": s.critical_path_ms, "critical_path_ms": self.critical_path_ms,
                "complete": self.complete, "missing_layers": s.missing_count,
                "incomplete_note": self.incomplete_note or None,
                "memory": {"lower_bound_bytes": self.memory_bytes, "target_memory_bytes": self.target.memory_bytes,
                           "fits": self.fits, "bound": s.memory.to_dict() if s.memory is not None else None},
                "calls": [c.to_dict() for c in self.calls], "notes": list(self.notes) + list(s.notes)}


def _call_precision(cfg, step: TrainingStep) -> str:
    """The precision a call was measured in: the convolutions' (:data:`benanza.kinds.CUDNN_TF32_KINDS`)
    in an analysis with ``--conv-tf32``, else the analysis's (as :func:`training_step` looks it up)."""
    return step.forward.kind_precision(cfg.kind)


def predict_call(c: BackwardTime, step: TrainingStep, origin: GpuSpec, target: GpuSpec, memory: str = "l2",
                 fixed_us: float = FIXED_US, span: bool = True, launch: dict | None = None) -> CallPrediction:
    """One call of the step predicted on ``target`` (module docstring): ``fixed + (origin - fixed) x
    factor`` with the wave-scaling factor of its config, precision and math; no prediction (None)
    when it has no origin time. Raises UsageError when a GPU lacks the call's Tensor Cores."""
    precision = _call_precision(c.config, step)
    cp = CallPrediction(c.layer, c.layer_name, c.phase, c.kind, "measured" if c.time_ms is not None else "missing",
                        c.time_ms, None, phase=c.phase, description=c.description, precision=precision)
    if c.time_ms is None:
        return cp
    check_precision(origin, precision)
    check_precision(target, precision)
    lt = SimpleNamespace(layer=SimpleNamespace(config=c.config), math=c.math, call=c.call)
    scale_layer(cp, lt, origin, target, precision, memory, step.forward.cache, span, c.time_ms, fixed_us,
                (launch or {}).get(implementation_key(c, precision)))
    cp.fixed_ms = min(c.time_ms, fixed_us * 1e-3)
    cp.predicted_ms = cp.fixed_ms + (c.time_ms - cp.fixed_ms) * cp.factor
    cp.method = "wave"  # the training step's calls are wave-scaled (the public grids hold forward GEMMs)
    return cp


def predict_training(ml: ModelLayers, step: TrainingStep, origin: GpuSpec, target: GpuSpec, memory: str = "l2",
                     fixed_us: float = FIXED_US, span: bool = True,
                     known_ms: dict[int, float] | None = None, launch: dict | None = None) -> TrainingPrediction:
    """``step`` (of ``ml``, measured on ``origin``) predicted on ``target`` (module docstring);
    ``memory``, ``fixed_us``, ``span`` as :func:`benanza.analysis.predict.predict`. ``known_ms``:
    call index in ``step.calls`` -> its time on the target (ms), used as it is instead of a
    prediction (a validation that holds apart the calls whose origin implementation cannot run on
    the target: benchmarks/predict_check.py); those calls' status is ``given``. ``launch``: the
    origin's measured kernels by implementation (``bench --train --counters``), as
    :func:`benanza.analysis.predict.predict` takes them. Raises UsageError as
    :func:`benanza.analysis.predict.predict` does."""
    a = step.forward
    fwd = predict(a, origin, target, a.precision, memory, fixed_us, span, launch)
    # the forward pass's weights on the target, as the measured step weighs them: layout
    # conversions left out, inference-only fusions undone layer by layer
    layer_ms = [0.0 if lt.conversion else lp.predicted_ms for lt, lp in zip(a.layers, fwd.layers)]
    fused = fused_weights(a, fwd.layers)
    for i, lt in enumerate(a.layers):
        if lt.conversion:
            fused[i] = 0.0
    weights = forward_weights(ml, a, fused, layer_ms)
    apply_forward_groups(weights, step.forward_groups, layer_ms)  # as the measured step counts them
    calls = [predict_call(c, step, origin, target, memory, fixed_us, span, launch) for c in step.calls]
    for i, ms in (known_ms or {}).items():
        calls[i].predicted_ms, calls[i].status = ms, "given"
    extra = {}
    for name, c in (("loss", step.loss_call), ("optimizer", step.optimizer_call)):
        if c is not None:
            extra[name] = predict_call(c, step, origin, target, memory, fixed_us, span, launch)
            calls.append(extra[name])
    loss_ms = extra["loss"].predicted_ms if "loss" in extra else None
    opt_ms = extra["optimizer"].predicted_ms if "optimizer" in extra else step.phase_ms.get("optimizer")
    phase_ms, seq, cp = schedule(ml, weights, [(c.index, c.phase, c.predicted_ms) for c in calls
                                               if c.phase not in ("loss", "optimizer")], loss_ms, opt_ms)
    m = step.memory
    notes = []
    if m is not None and m.workspace:
        notes.append("the memory bound's workspace is that of the calls chosen on the origin")
    return TrainingPrediction(step, origin, target, fwd, calls, phase_ms, seq, cp,
                              m.total if m is not None else None,
                              m.fits(target.memory_bytes) if m is not None else None, memory, fixed_us, span, notes)


def load_train_error_table(path: str | Path | None = None) -> dict | None:
    """The training validation's error table (``benchmarks/predict_check.py --train --errors-out``;
    by default ``predict_train_errors.json``, :func:`benanza.analysis.predict.error_table_path`), None
    when there is none. Raises UsageError naming the file when it is not a training error table."""
    path = Path(path) if path else error_table_path("predict_train_errors.json")
    if path is None:
        return None
    table = load_error_table(path)
    if table.get("what_kind") != "training" or not isinstance(table.get("step"), dict):
        raise UsageError(f"prediction error table {path}: not a training error table (benchmarks/predict_check.py "
                         "--train --errors-out)")
    return table


def training_error_bar(tp: TrainingPrediction, table: dict) -> ErrorBar:
    """The :class:`benanza.analysis.predict.ErrorBar` of a predicted training step from the training
    validation's ``table`` (:func:`load_train_error_table`): each call kind and phase (the forward
    pass's layers as ``KIND forward``, every other call as ``KIND PHASE``) weighted by its predicted
    time, in the step's precision; ``relative`` the time-weighted mean |error| of the keys the
    validation covered, ``worst`` the same with their 90th percentiles, ``unvalidated`` the keys it
    never covered and their share of the predicted time, ``model_mean_abs_error`` the validation's
    mean |step error| in that precision. ``extrapolated`` when either GPU is of an architecture the
    validation did not run on."""
    precision = tp.step.forward.precision
    times: dict[str, float] = collections.defaultdict(float)
    for lp in tp.forward.layers:
        if lp.status == "measured" and lp.predicted_ms:
            times[f"{lp.kind or lp.op} forward"] += lp.predicted_ms
    for c in tp.calls:
        if c.predicted_ms:
            times[f"{c.kind} {c.phase}"] += c.predicted_ms
    return weighted_error_bar(times, table, precision, (tp.origin, tp.target),
                              f"{len(table.get('commands') or [])} validation run(s), {table.get('date', '')}",
                              (table["step"].get(precision) or {}).get("mean_abs_error"))
