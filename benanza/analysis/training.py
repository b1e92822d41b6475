"""The training step's lower-bound latency (docs/training.md): the forward pass, the backward pass and the
optimizer's update, from the measured best of each call.

The forward pass is the inference analysis (:func:`benanza.analysis.analyzer.analyze`) with the
fusions that a training step cannot use undone: a Conv -> BatchNormalization [-> Relu] group folds
the normalisation into the convolution with running statistics, which training does not have (it
normalises with the batch's statistics), so its layers count one by one. A layer whose kind gives a
training-mode forward (a ``forward`` call of :func:`benanza.processing.training.training_plan`:
BatchNormalization with the batch's statistics, Dropout drawing its mask) counts that call's time
in place of its inference call; when that call has no measurement the step is incomplete.

The loss: cross-entropy with class indices on the model's output taken as logits
(:func:`benanza.processing.training.loss_config`: its first floating-point output of rank 2, else
of rank 3 with the vocabulary last), forward and backward timed as one call of the
``CrossEntropyLoss`` kind (phase ``loss`` of :data:`benanza.kinds.STEP_PHASES`). On the critical
path it runs after the forward pass ends and before any gradient: the backward pass starts when
the loss's gradient is done. Unmeasured, the step is incomplete and says so. A model without such an
output (no classifier's logits) has no loss the step can know: the loss is then not counted,
``phase_ms["loss"]`` is None, a note says so and why, and the step stays complete (its LBL is a
bound of the model's own layers, as a training step of such a model runs a loss benanza cannot
see).

The backward calls come from :func:`benanza.processing.training.training_plan`, each timed by the
fastest valid measurement of its config (:func:`benanza.database.query.best_per_config`, the same
rule as the forward). The step's critical path follows autograd's dependencies: a layer's gradient
calls start when the gradients of every layer that consumes its output are done (the model's
outputs: when the forward pass ends), its data and weight gradients run concurrently, and the
optimizer's update follows the last gradient (PyTorch: ``loss.backward()`` then
``optimizer.step()``).
"""
from __future__ import annotations

import collections
from dataclasses import dataclass, field

from benanza import kinds as L
from benanza.analysis.analyzer import Analysis, critical_path
from benanza.database import query
from benanza.database.store import Database, System
from benanza.kinds.backend import Backend
from benanza.processing.model import ModelLayers
from benanza.processing.training import loss_config, optimizer_config, training_plan
from benanza.spec import OPTIMIZERS


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
    workspace_bytes: int = 0
    #: the call's config (:class:`benanza.kinds.base.LayerConfig`), for its FLOPs and bytes
    config: object = field(default=None, repr=False, compare=False)
    #: the runtime of the measurement (:class:`benanza.kinds.backend.Backend`); its call's name shows it
    backend: Backend = Backend.SUITE

    def to_dict(self) -> dict:
        return {"layer": self.layer, "layer_name": self.layer_name, "phase": self.phase, "kind": self.kind,
                "description": self.description, "key": self.key, "time_ms": self.time_ms, "call": self.call,
                "algorithm": self.algorithm, "math": self.math, "layout": self.layout,
                "workspace_bytes": self.workspace_bytes}


#: optimizer -> its state per parameter element, in parameter-sized tensors (torch/optim/sgd.py:
#: one momentum buffer; adam.py and adamw.py: exp_avg and exp_avg_sq)
OPTIMIZER_STATE = {o.name: o.state for o in OPTIMIZERS.values()}


@dataclass
class MemoryBound:
    """A lower bound of a training step's peak GPU memory (bytes): ``parameters``, their
    ``gradients`` and the ``optimizer_state`` (:data:`OPTIMIZER_STATE`), in the precision's element
    size (pure fp16/bf16 training; PyTorch's AMP keeps fp32 parameters, which needs more), the
    ``activations`` the backward calls read (each layer input a weight gradient reads, each input or
    output an activation's gradient reads: every such tensor once; a dropout's mask at one byte per
    element; frameworks keep more), and the
    largest ``workspace`` of a chosen backward call. Every term is memory the step must hold at its
    peak (the last backward calls run while the gradients and saved activations are alive), so
    their sum bounds ``torch.cuda.max_memory_allocated`` from below."""

    parameters: int
    gradients: int
    optimizer_state: int
    activations: int
    workspace: int
    parameter_count: int
    optimizer: str

    @property
    def total(self) -> int:
        return self.parameters + self.gradients + self.optimizer_state + self.activations + self.workspace

    def fits(self, memory_bytes: int) -> bool:
        """Can the step fit a GPU of ``memory_bytes``? False means it cannot (a bound); True that
        it may."""
        return self.total <= memory_bytes

    def cannot_fit(self, gpus=None) -> list:
        """The GPUs of ``gpus`` (default: every GPU ``benanza predict`` knows,
        :data:`benanza.analysis.gpus.GPUS`, with their datasheet memory) whose memory is below this
        bound: the step cannot run on them as it is (batch, precision, optimizer), whatever the
        framework does. The others may fit (the bound leaves out what frameworks add)."""
        from benanza.analysis.gpus import GPUS

        return [g for g in (GPUS if gpus is None else gpus) if not self.fits(g.memory_bytes)]

    def to_dict(self) -> dict:
        return {"total_bytes": self.total, "parameters_bytes": self.parameters, "gradients_bytes": self.gradients,
                "optimizer_state_bytes": self.optimizer_state, "activations_bytes": self.activations,
                "workspace_bytes": self.workspace, "parameter_count": self.parameter_count,
                "optimizer": self.optimizer, "cannot_fit": [g.name for g in self.cannot_fit()]}


@dataclass
class TrainingStep:
    """The training step's LBL of one model, batch and precision (ms).

    ``phase_ms``: the sum of each phase of :data:`benanza.kinds.STEP_PHASES` (``forward``: the
    forward pass's fused sequential sum with inference-only fusions undone; ``loss``: the loss's
    forward and backward, None when the model has no output to take as logits (not counted,
    ``loss_note`` says why) or while it is unmeasured; ``backward_data``/``backward_weight``: None
    while none of the phase's calls is measured (a partial sum while some are); ``optimizer``: None
    until the optimizer's update is measured); ``sequential_ms``: every call one after another;
    ``critical_path_ms``: the longest chain of dependent calls (module docstring), the headline.
    ``calls``: each backward call's time; ``no_backward``: (layer index, name, kind) of the layers
    whose gradient benanza cannot bound yet. Incomplete (:attr:`complete` False) while any backward
    call, any forward layer, any layer's backward, the loss of a model that has one
    (``loss_measured`` False) or the optimizer is missing."""

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
    optimizer_note: str = "the optimizer's update has no valid measurement"
    notes: list[str] = field(default_factory=list)
    memory: MemoryBound | None = None
    #: False when the model has a loss (a classifier's logits) whose call has no valid measurement
    loss_measured: bool = True
    loss_note: str = ""
    #: the loss's and the optimizer's calls (None: the model has no loss, or no parameter)
    loss_call: BackwardTime | None = None
    optimizer_call: BackwardTime | None = None
    #: the fused groups with a training forward of their own (fused attention, LayerNorm): (their
    #: layers, taken fused), whose forward weights :func:`apply_forward_groups` sets
    forward_groups: list = field(default_factory=list)

    @property
    def missing_calls(self) -> list[BackwardTime]:
        return [c for c in self.calls if c.time_ms is None]

    @property
    def forward_missing(self) -> list:
        """The forward pass's layers without a measurement that the step counts: those of
        ``forward.missing`` without a training-mode ``forward`` call of their own. A layer whose
        training-mode call stands in for its inference call (BatchNormalization with the batch's
        statistics) does not need the inference measurement: cuDNN's inference batch norm failing
        where its training one runs (a cooperative launch in an SM partition) leaves the step
        complete. The training-mode call itself, unmeasured, is in :attr:`missing_calls`."""
        replaced = {c.layer for c in self.calls if c.phase == "forward"}
        return [t for t in self.forward.missing if t.layer.index not in replaced]

    @property
    def missing_count(self) -> int:
        """Forward layers, backward calls and layers without a backward that have no time, plus
        one for an unmeasured optimizer update: the one count every output gives."""
        return (len(self.forward_missing) + len(self.missing_calls) + len(self.no_backward)
                + (0 if self.loss_measured else 1) + (1 if self.phase_ms.get("optimizer") is None else 0))

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
        if self.forward_missing:
            parts.append(f"{len(self.forward_missing)} forward layers without a measurement")
        fwd = sum(1 for c in self.missing_calls if c.phase == "forward")
        if len(self.missing_calls) > fwd:
            parts.append(f"{len(self.missing_calls) - fwd} backward calls without a measurement")
        if fwd:
            parts.append(f"{fwd} training-mode forward calls without a measurement")
        if self.no_backward:
            kinds = sorted({k for _, _, k in self.no_backward})
            parts.append(f"{len(self.no_backward)} layers whose backward benanza cannot bound yet "
                         f"({', '.join(kinds)})")
        if not self.loss_measured:
            parts.append(self.loss_note)
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
                "phase_ms": dict(self.phase_ms), "complete": self.complete, "missing_layers": self.missing_count,
                "incomplete_note": self.incomplete_note or None,
                "no_backward": [{"layer": i, "name": n, "kind": k} for i, n, k in self.no_backward],
                "calls": [c.to_dict() for c in self.calls], "notes": list(self.notes),
                "memory": self.memory.to_dict() if self.memory is not None else None}


def forward_weights(ml: ModelLayers, a: Analysis, fused: list[float] | None = None,
                    layer_ms: list[float | None] | None = None) -> list[float]:
    """Each forward layer's share (ms) of the training step's forward pass: the fused LBL's
    weights, with the groups of :func:`benanza.kinds.training_counts_layers` counted layer by layer (a missing
    layer counts 0 here; :attr:`TrainingStep.complete` says so). ``fused`` and ``layer_ms``: the
    fused weights and per-layer times to use in place of ``a``'s measured ones (a prediction's,
    :mod:`benanza.analysis.predict_training`)."""
    weight = list(a.fused_weight if fused is None else fused)
    for f in ml.fusions:
        if L.training_counts_layers(f.config):
            for i in f.layers:
                weight[i] = (a.layers[i].bound_ms if layer_ms is None else layer_ms[i]) or 0.0
    return weight


def training_step(ml: ModelLayers, a: Analysis, db: Database, system: System, optimizer: str = "sgd"
                  ) -> TrainingStep:
    """The training step of ``ml`` from the forward analysis ``a`` (same model, batch, precision,
    cache, layouts) and the backward calls' measurements in ``db`` on ``system``, its memory bound
    with ``optimizer`` (:func:`memory_bound`). Never raises for missing data: the result says what
    is missing."""
    plan = training_plan(ml)
    layouts = tuple(a.layouts)
    keys_by_prec: dict[str, list[str]] = collections.defaultdict(list)
    for c in plan.calls:
        keys_by_prec[a.kind_precision(c.config.kind)].append(c.config.key)
    best: dict = {}
    for p, keys in keys_by_prec.items():
        best.update(query.best_per_config(db, system.id, p, a.cache, sorted(set(keys)), layouts))
    calls = []
    for c in plan.calls:
        ly = ml.layers[c.layer]
        b = best.get(c.config.key)
        calls.append(_call_time(c.layer, ly.name, c.phase, c.config, b, accumulation=c.accumulation))
    fwd_weights = forward_weights(ml, a)
    calls, fused_note, fused_layers, forward_groups = _take_fused(ml, a, plan, calls, fwd_weights, db, system)
    loss_cfg, loss_about = loss_config(ml)
    loss_ms, loss_measured, loss_note, loss_time = None, True, "", None
    if loss_cfg is not None:
        b = query.best_per_config(db, system.id, a.precision, a.cache, [loss_cfg.key], layouts).get(loss_cfg.key)
        loss_ms = b.median_ms if b is not None else None
        loss_measured = b is not None
        loss_time = _call_time(-1, "", "loss", loss_cfg, b)
        if b is None:
            loss_note = f"the loss ({loss_cfg.describe()}) has no valid measurement (`benanza bench --train`)"
    opt_cfg = optimizer_config(ml, optimizer)  # reads the model's parameters once for the step
    opt_ms, opt_note, opt_time = _optimizer_time(opt_cfg, a, db, system, optimizer)
    phase_ms, sequential, critical = schedule(ml, fwd_weights,
                                              [(c.layer, c.phase, c.time_ms) for c in calls], loss_ms, opt_ms)
    no_bw = [(i, ml.layers[i].name, ml.layers[i].config.kind if ml.layers[i].config is not None
              else ml.layers[i].op_type) for i in sorted(plan.no_backward) if i not in fused_layers]
    notes = [loss_about] + ([fused_note] if fused_note else [])
    if plan.no_gradient:
        notes.append(f"{len(plan.no_gradient)} layers take no gradient (integer or boolean outputs, such as a "
                     f"router's expert ids and counts, or computed from them and constants only): autograd runs "
                     f"no backward for them")
    if any(f.config.kind in L.INFERENCE_ONLY_FUSIONS for f in ml.fusions):
        notes.append("Conv -> BatchNormalization groups counted layer by layer (training normalises with the "
                     "batch's statistics; the fused call folds running statistics)")
    if any(getattr(f.config, "residual", False) for f in ml.fusions):
        notes.append("residual Adds fused into the norm after them counted layer by layer (the fused add + norm's "
                     "training forward and backward are not built)")
    memory = memory_bound(ml, plan, calls, a.precision, optimizer,
                          opt_cfg.parameter_count if opt_cfg is not None else 0,
                          _taken_groups(plan, fused_layers))
    return TrainingStep(model=ml.model, batch=ml.batch, precision_label=a.precision_label, layouts=layouts,
                        forward=a, phase_ms=phase_ms, sequential_ms=sequential, critical_path_ms=critical,
                        calls=calls, no_backward=no_bw, optimizer_note=opt_note, notes=notes, memory=memory,
                        loss_measured=loss_measured, loss_note=loss_note, loss_call=loss_time,
                        optimizer_call=opt_time, forward_groups=forward_groups)


def _take_fused(ml: ModelLayers, a: Analysis, plan, calls: list[BackwardTime], fwd_weights: list[float],
                db: Database, system: System) -> tuple[list[BackwardTime], str, set[int], list]:
    """The step's calls with each fusion group's fused training calls
    (:func:`benanza.processing.training.fused_alternatives`) in place of the calls they replace where
    all are measured and their sum is the smaller, as a lower bound takes the fastest measured way to
    compute the same gradients (PyTorch's own step runs fused attention and one gelu_backward). Groups
    are taken by largest saving first, one taken group's layers never in another's. An alternative with
    its own training forward (fused attention) counts it against the group's forward layers one by one
    (the unfused backward reads the probabilities the fused inference call never writes): when it is
    taken those layers' weights in ``fwd_weights`` become 0 and its forward call stands for them, else
    the layers count one by one. ``fwd_weights`` is changed in place. Returns (calls, a note naming
    how many groups of each kind were taken fused, "" when the model has none; the layers of the groups
    taken, whose own backward the step no longer needs; :attr:`TrainingStep.forward_groups`)."""
    from benanza.processing.training import fused_alternatives

    alts = fused_alternatives(ml, plan)
    if not alts:
        return calls, "", set(), []
    keys: dict[str, list[str]] = collections.defaultdict(list)
    for alt in alts:
        for c in alt.calls:
            keys[a.kind_precision(c.config.kind)].append(c.config.key)
    best: dict = {}
    for p, ks in keys.items():
        best.update(query.best_per_config(db, system.id, p, a.cache, sorted(set(ks)), tuple(a.layouts)))
    options = []
    for alt in alts:
        fused = [best.get(c.config.key) for c in alt.calls]
        parts = [a.layers[i].bound_ms for i in alt.layers] if alt.forward else []
        if any(b is None for b in fused) or any(x is None for x in parts):
            continue  # an unmeasured alternative is never taken (nor are its layers recounted)
        old = [calls[k].time_ms for k in alt.replaced]
        unfused = None if any(x is None for x in old) or alt.no_backward else sum(old) + sum(parts)
        cost = sum(b.median_ms for b in fused)
        options.append(((unfused - cost) if unfused is not None else float("inf"), alt, fused, parts))
    taken: set[int] = set()  # (the caller drops their layers from ``no_backward``)
    groups: list[tuple[tuple[int, ...], bool]] = []
    removed: set[int] = set()
    extra: list[BackwardTime] = []
    counts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for alt in alts:
        counts[alt.kind][1] += 1
    for saving, alt, fused, parts in sorted(options, key=lambda o: -o[0]):
        if saving > 0 and not taken & set(alt.layers):
            taken |= set(alt.layers)
            removed |= set(alt.replaced)
            counts[alt.kind][0] += 1
            if alt.forward:
                groups.append((alt.layers, True))
            last = alt.layers[-1]
            extra += [_call_time(last, ml.layers[last].name, c.phase, c.config, b, fused=True)
                      for c, b in zip(alt.calls, fused)]
        elif alt.forward:
            groups.append((alt.layers, False))
    apply_forward_groups(fwd_weights, groups, [lt.bound_ms for lt in a.layers])
    kept = [c for k, c in enumerate(calls) if k not in removed]
    note = "fused training calls: " + "; ".join(
        f"{kind} {n} of {m} groups taken fused" for kind, (n, m) in sorted(counts.items())) if counts else ""
    return kept + extra, note, taken, groups


def apply_forward_groups(weights: list[float], groups: list[tuple[tuple[int, ...], bool]],
                         layer_ms: list[float | None]) -> None:
    """The forward weights (ms, changed in place) of the fused groups whose alternative has its own
    training forward (:attr:`TrainingStep.forward_groups`): a group taken fused counts 0 for its
    layers (its training forward call stands for them), one not taken counts each layer's own time
    ``layer_ms`` (measured, or predicted on another GPU)."""
    for layers, taken in groups:
        for i in layers:
            weights[i] = 0.0 if taken else (layer_ms[i] or 0.0)


def schedule(ml: ModelLayers, forward: list[float], calls: list[tuple[int, str, float | None]],
             loss_ms: float | None, optimizer_ms: float | None) -> tuple[dict[str, float | None], float, float]:
    """The step's phases, sequential sum and critical path (ms) (module docstring) from each forward
    layer's weight ``forward`` (:func:`forward_weights`; a layer with a training-mode ``forward`` call
    counts that call instead), the ``calls`` (layer index, phase, ms; None counts 0 in the sums: the
    caller marks the step incomplete), the loss's and the optimizer's time (None: not counted). Returns
    (``phase_ms`` as :attr:`TrainingStep.phase_ms`: a backward phase whose calls have not one
    measurement is None, not 0; sequential, critical path)."""
    fwd = list(forward)
    for i in {layer for layer, phase, _ in calls if phase == "forward"}:
        fwd[i] = 0.0  # training-mode forwards replace the inference calls
    d_ms: dict[int, float] = collections.defaultdict(float)
    w_ms: dict[int, float] = collections.defaultdict(float)
    for layer, phase, ms in calls:
        if phase == "forward":
            fwd[layer] += ms or 0.0
        else:
            (d_ms if phase == "backward_data" else w_ms)[layer] += ms or 0.0
    fwd_seq = sum(fwd)
    fwd_end = critical_path(ml.edges, fwd)[0]
    bwd_start = fwd_end + (loss_ms or 0.0)  # the loss's forward and backward, then the gradients
    consumers: dict[int, list[int]] = collections.defaultdict(list)
    for i, preds in ml.edges.items():
        for p in preds:
            consumers[p].append(i)
    done_d: dict[int, float] = {}  # when layer i's input gradient is ready
    last = bwd_start
    for ly in reversed(ml.layers):
        i = ly.index
        ready = max((done_d[j] for j in consumers.get(i, ())), default=bwd_start)
        done_d[i] = ready + d_ms.get(i, 0.0)
        last = max(last, done_d[i], ready + w_ms.get(i, 0.0))
    phase_ms = {"forward": fwd_seq, "loss": loss_ms, "backward_data": sum(d_ms.values()),
                "backward_weight": sum(w_ms.values()), "optimizer": optimizer_ms}
    sequential = fwd_seq + (loss_ms or 0.0) + phase_ms["backward_data"] + phase_ms["backward_weight"] \
        + (optimizer_ms or 0.0)
    for ph in ("backward_data", "backward_weight"):  # calls and not one measured: no figure, never 0 ms
        times = [ms for _, p, ms in calls if p == ph]
        if times and all(ms is None for ms in times):
            phase_ms[ph] = None
    return phase_ms, sequential, last + (optimizer_ms or 0.0)


def _call_time(layer: int, layer_name: str, phase: str, cfg, b, accumulation: bool = False,
               fused: bool = False) -> BackwardTime:
    """One call's :class:`BackwardTime` from its best measurement ``b`` (None: no valid one);
    ``accumulation``: a gradient accumulation, ``fused``: a fusion group's call (the description
    says so)."""
    desc = ("gradient accumulation: " if accumulation else "fused: " if fused else "") + cfg.describe()
    return BackwardTime(layer, layer_name, phase, cfg.kind, desc, cfg.key,
                        b.median_ms if b is not None else None,
                        *((b.call, b.algorithm, b.math, b.layout, b.workspace_bytes or 0) if b is not None else ()),
                        config=cfg, backend=b.backend if b is not None else Backend.SUITE)


def _optimizer_time(cfg, a: Analysis, db: Database, system: System, optimizer: str
                    ) -> tuple[float | None, str, BackwardTime | None]:
    """The best measurement (ms) of optimizer step ``cfg`` (0 and no call: the model has no
    parameter), or None with why; and the call's :class:`BackwardTime`."""
    if cfg is None:
        return 0.0, "", None  # no trainable parameter: nothing to update
    b = query.best_per_config(db, system.id, a.precision, a.cache, [cfg.key], tuple(a.layouts)).get(cfg.key)
    t = _call_time(-1, "", "optimizer", cfg, b)
    if b is None:
        return None, (f"the {optimizer} step over {cfg.parameter_count:,} parameters has no valid measurement "
                      f"(`benanza bench --train --optimizer {optimizer}`)"), t
    return b.median_ms, "", t


def _taken_groups(plan, taken: set[int]) -> list[tuple[tuple[int, ...], bool]]:
    """(layers, has its own training forward) of each fused group of ``plan`` the step took."""
    out: dict[tuple[int, ...], bool] = {}
    for c in plan.fused:
        if c.fusion and set(c.fusion) <= taken:
            out[c.fusion] = out.get(c.fusion, False) or c.phase == "forward"
    return list(out.items())


def memory_bound(ml: ModelLayers, plan, calls: list[BackwardTime], precision: str, optimizer: str = "sgd",
                 parameter_count: int | None = None,
                 fused: list[tuple[tuple[int, ...], bool]] = ()) -> MemoryBound:
    """:class:`MemoryBound` of ``ml``'s training step with ``optimizer`` (:data:`OPTIMIZER_STATE`);
    ``parameter_count``: the model's parameter elements when known (else read from the model,
    :func:`benanza.processing.training.trainable_parameters`). ``fused``: the fused groups the step
    took ((layers, with a training forward of their own)): their layers' own calls save nothing; the
    group saves the tensors it reads from outside (an attention's Q, K, V; a GELU's input) and, with a
    training forward, its output (an attention's O: its statistics are a row each, left out). Raises
    ValueError for an unknown optimizer."""
    import math

    from benanza.processing.training import trainable_parameters

    if optimizer not in OPTIMIZER_STATE:
        raise ValueError(f"unknown optimizer {optimizer!r} (choose from {', '.join(OPTIMIZER_STATE)})")
    elem = L.DTYPE_BYTES[L.PRECISION_DTYPE[precision]]
    count = parameter_count if parameter_count is not None else \
        sum(math.prod(s) for s in trainable_parameters(ml.path))
    shapes: dict[str, tuple] = {}
    for ly in ml.layers:
        for name, shape in zip(ly.outputs, ly.output_shapes):
            if shape is not None:
                shapes[name] = tuple(shape)
    saved: dict[str, int] = {}

    def keep(ly, names, inputs: bool = True) -> None:
        # tensors ``ly`` reads (or writes), saved for the backward; a shape the graph does not give is
        # the layer's k-th input's (an activation's output has its input's shape)
        for k, name in enumerate(names):
            shape = shapes.get(name) or (ly.input_shapes[k] if inputs and k < len(ly.input_shapes) else None)
            if name and shape is not None:
                saved[name] = math.prod(shape) * elem

    in_fused = {i for layers, _ in fused for i in layers}
    for layers, forward in fused:
        made = {name for i in layers for name in ml.layers[i].outputs}
        for i in layers:
            ly = ml.layers[i]
            keep(ly, [n if n not in made and n not in ly.static_inputs else "" for n in ly.inputs])
        if forward:
            keep(ml.layers[layers[-1]], ml.layers[layers[-1]].outputs, inputs=False)
    for c in plan.calls:
        # a training-mode forward: what it saves, its backward call reads; an accumulation reads
        # gradients only; a fused group's layers: the group saves (above)
        if c.phase == "forward" or c.accumulation or c.layer in in_fused:
            continue
        ly = ml.layers[c.layer]
        if c.config.kind in _READS_MASK:  # a dropout's gradient reads its mask (one byte per element)
            saved[f"mask of layer {c.layer}"] = math.prod(c.config.shape)
            continue
        keep(ly, ly.inputs if c.phase == "backward_weight" or c.config.kind not in _READS_OUTPUT else ly.outputs)
    return MemoryBound(parameters=count * elem, gradients=count * elem,
                       optimizer_state=count * elem * OPTIMIZER_STATE[optimizer], activations=sum(saved.values()),
                       workspace=max((c.workspace_bytes for c in calls if c.time_ms is not None), default=0),
                       parameter_count=count, optimizer=optimizer)


#: backward kinds whose gradient reads the forward's output rather than its input (ReLU's
#: threshold_backward, sigmoid's and tanh's backward read y)
_READS_OUTPUT = ("ActivationBwd",)
#: backward kinds that read a mask their forward saved, one byte per element (PyTorch's bool dropout
#: mask), instead of a forward tensor
_READS_MASK = ("DropoutBwd",)

