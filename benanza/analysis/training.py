"""The training step's lower-bound latency (issue 26): the forward pass, the backward pass and the
optimizer's update, from the measured best of each call.

The forward pass is the inference analysis (:func:`benanza.analysis.analyzer.analyze`) with the
fusions that a training step cannot use undone: a Conv -> BatchNormalization [-> Relu] group folds
the normalisation into the convolution with running statistics, which training does not have (it
normalises with the batch's statistics), so its layers count one by one. A BatchNormalization
measured in inference mode is a lower bound of its training-mode forward (which reads the batch
twice to compute the statistics), so the forward stays a bound.

The backward calls come from :func:`benanza.processing.training.training_plan`, each timed by the
fastest valid measurement of its config (:func:`benanza.database.query.best_per_config`, the same
rule as the forward). The step's critical path follows autograd's dependencies: a layer's gradient
calls start when the gradients of every layer that consumes its output are done (the model's
outputs: when the forward pass ends), its data and weight gradients run concurrently, and the
optimizer's update follows the last gradient (PyTorch: ``loss.backward()`` then
``optimizer.step()``). The loss (outside the ONNX model) is not counted: the bound is of the
model's own layers.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from benanza import kinds as L
from benanza.analysis.analyzer import Analysis
from benanza.database import query
from benanza.database.store import Database, System
from benanza.processing.model import ModelLayers
from benanza.processing.training import training_plan

#: fusion kinds a training step cannot use (inference-only folding), counted layer by layer
INFERENCE_ONLY_FUSIONS = ("ConvBnAct",)


@dataclass
class BackwardTime:
    """One backward call's bound: ``time_ms`` (None when it has no valid measurement), the call,
    algorithm and math of the measurement it comes from."""

    layer: int
    layer_name: str
    phase: str
    kind: str
    description: str
    key: str
    time_ms: float | None
    call: str = ""
    algorithm: str = ""
    math: str = ""
    layout: str = ""

    def to_dict(self) -> dict:
        return {"layer": self.layer, "layer_name": self.layer_name, "phase": self.phase, "kind": self.kind,
                "description": self.description, "key": self.key, "time_ms": self.time_ms, "call": self.call,
                "algorithm": self.algorithm, "math": self.math, "layout": self.layout}


@dataclass
class TrainingStep:
    """The training step's LBL of one model, batch and precision (ms).

    ``phase_ms``: the sum of each phase of :data:`benanza.kinds.TRAINING_PHASES` (``forward``: the
    forward pass's fused sequential sum with inference-only fusions undone; ``optimizer``: None
    until the optimizer's update is measured); ``sequential_ms``: every call one after another;
    ``critical_path_ms``: the longest chain of dependent calls (module docstring), the headline.
    ``calls``: each backward call's time; ``no_backward``: (layer index, name, kind) of the layers
    whose gradient benanza cannot bound yet. Incomplete (:attr:`complete` False) while any backward
    call, any forward layer, any layer's backward or the optimizer is missing."""

    model: str
    batch: int
    precision_label: str
    layouts: tuple[str, ...]
    forward: Analysis
    phase_ms: dict[str, float | None]
    sequential_ms: float
    critical_path_ms: float
    calls: list[BackwardTime] = field(default_factory=list)
    no_backward: list[tuple[int, str, str]] = field(default_factory=list)
    optimizer_note: str = "the optimizer's update is not measured yet"
    notes: list[str] = field(default_factory=list)

    @property
    def missing_calls(self) -> list[BackwardTime]:
        return [c for c in self.calls if c.time_ms is None]

    @property
    def missing_count(self) -> int:
        """Forward layers, backward calls and layers without a backward that have no time, plus
        one for an unmeasured optimizer update: the one count every output gives."""
        return (len(self.forward.missing) + len(self.missing_calls) + len(self.no_backward)
                + (1 if self.phase_ms.get("optimizer") is None else 0))

    @property
    def complete(self) -> bool:
        return self.missing_count == 0

    @property
    def lbl_name(self) -> str:
        return "training step, critical path, " + "+".join(x.lower() for x in self.layouts)

    @property
    def incomplete_note(self) -> str:
        """Empty when complete; else ``INCOMPLETE: ...`` naming what is missing (a partial sum, not
        a bound)."""
        if self.complete:
            return ""
        parts = []
        if self.forward.missing:
            parts.append(f"{len(self.forward.missing)} forward layers without a measurement")
        if self.missing_calls:
            parts.append(f"{len(self.missing_calls)} backward calls without a measurement")
        if self.no_backward:
            kinds = sorted({k for _, _, k in self.no_backward})
            parts.append(f"{len(self.no_backward)} layers whose backward benanza cannot bound yet "
                         f"({', '.join(kinds)})")
        if self.phase_ms.get("optimizer") is None:
            parts.append(self.optimizer_note)
        return "INCOMPLETE: " + "; ".join(parts) + " (a partial sum, not a bound)"

    def lbl_text(self, digits: int = 4) -> str:
        note = f" {self.incomplete_note}" if self.incomplete_note else ""
        return f"{self.critical_path_ms:.{digits}f} ms ({self.lbl_name}){note}"

    def to_dict(self) -> dict:
        return {"model": self.model, "batch": self.batch, "precision": self.precision_label,
                "lbl_ms": self.critical_path_ms, "lbl_name": self.lbl_name,
                "critical_path_ms": self.critical_path_ms, "sequential_ms": self.sequential_ms,
                "phase_ms": dict(self.phase_ms), "complete": self.complete, "missing": self.missing_count,
                "incomplete_note": self.incomplete_note or None,
                "no_backward": [{"layer": i, "name": n, "kind": k} for i, n, k in self.no_backward],
                "calls": [c.to_dict() for c in self.calls], "notes": list(self.notes)}


def forward_weights(ml: ModelLayers, a: Analysis) -> list[float]:
    """Each forward layer's share (ms) of the training step's forward pass: the fused LBL's
    weights, with the groups of :data:`INFERENCE_ONLY_FUSIONS` counted layer by layer (a missing
    layer counts 0 here; :attr:`TrainingStep.complete` says so)."""
    weight = list(a.fused_weight)
    for f in ml.fusions:
        if f.config.kind in INFERENCE_ONLY_FUSIONS:
            for i in f.layers:
                weight[i] = a.layers[i].bound_ms or 0.0
    return weight


def training_step(ml: ModelLayers, a: Analysis, db: Database, system: System) -> TrainingStep:
    """The training step of ``ml`` from the forward analysis ``a`` (same model, batch, precision,
    cache, layouts) and the backward calls' measurements in ``db`` on ``system``. Never raises for
    missing data: the result says what is missing."""
    plan = training_plan(ml)
    layouts = tuple(a.layouts)
    keys_by_prec: dict[str, list[str]] = collections.defaultdict(list)
    for c in plan.calls:
        p = a.conv_precision if c.config.kind in L.CUDNN_TF32_KINDS else a.precision
        keys_by_prec[p].append(c.config.key)
    best: dict = {}
    for p, keys in keys_by_prec.items():
        best.update(query.best_per_config(db, system.id, p, a.cache, sorted(set(keys)), layouts))
    calls = []
    for c in plan.calls:
        ly = ml.layers[c.layer]
        b = best.get(c.config.key)
        calls.append(BackwardTime(c.layer, ly.name, c.phase, c.config.kind, c.config.describe(), c.config.key,
                                  b.median_ms if b is not None else None,
                                  *((b.call, b.algorithm, b.math, b.layout) if b is not None else ())))
    fwd = forward_weights(ml, a)
    fwd_seq = sum(fwd)
    fwd_end = _forward_critical_path(ml, fwd)
    d_ms: dict[int, float] = collections.defaultdict(float)
    w_ms: dict[int, float] = collections.defaultdict(float)
    for c in calls:
        (d_ms if c.phase == "backward_data" else w_ms)[c.layer] += c.time_ms or 0.0
    consumers: dict[int, list[int]] = collections.defaultdict(list)
    for i, preds in ml.edges.items():
        for p in preds:
            consumers[p].append(i)
    done_d: dict[int, float] = {}  # when layer i's input gradient is ready
    last = fwd_end
    for ly in reversed(ml.layers):
        i = ly.index
        ready = max((done_d[j] for j in consumers.get(i, ())), default=fwd_end)
        done_d[i] = ready + d_ms.get(i, 0.0)
        last = max(last, done_d[i], ready + w_ms.get(i, 0.0))
    phase_ms = {"forward": fwd_seq, "backward_data": sum(d_ms.values()), "backward_weight": sum(w_ms.values()),
                "optimizer": None}
    no_bw = [(i, ml.layers[i].name, ml.layers[i].config.kind if ml.layers[i].config is not None
              else ml.layers[i].op_type) for i in sorted(plan.no_backward)]
    notes = []
    if any(f.config.kind in INFERENCE_ONLY_FUSIONS for f in ml.fusions):
        notes.append("Conv -> BatchNormalization groups counted layer by layer (training normalises with the "
                     "batch's statistics; the fused call folds running statistics)")
    return TrainingStep(model=ml.model, batch=ml.batch, precision_label=a.precision_label, layouts=layouts,
                        forward=a, phase_ms=phase_ms,
                        sequential_ms=fwd_seq + phase_ms["backward_data"] + phase_ms["backward_weight"],
                        critical_path_ms=last, calls=calls, no_backward=no_bw, notes=notes)


def _forward_critical_path(ml: ModelLayers, weight: list[float]) -> float:
    from benanza.analysis.analyzer import critical_path

    return critical_path(ml.edges, weight)[0]
