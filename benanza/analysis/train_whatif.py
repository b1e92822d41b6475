"""The training step's what-if composition (docs/training.md): PyTorch's measured training step,
changed by one optimization after the other in a fixed order, with the step's time after each.

The inference composition's principles (:mod:`benanza.analysis.whatif`), on a profiled training
step (:class:`benanza.profiles.train_compare.TrainComparison`: the training join of PyTorch's trace
and benanza's :class:`~benanza.analysis.training.TrainingStep`).

The **start** is the step's wall time PyTorch took (``run["step_wall_ms"]``, median of CUDA-event
timed steps outside the profiler), or, without it, its GPU busy time. The **timeline** (ms per
step): the GPU busy time ``G`` (the kernels, memcpys and memsets of one profiled iteration, median
over iterations: one stream, so their sum), split into per layer its forward kernel time ``f[i]``
and its backward kernel time ``b[i]`` (:meth:`TrainJoin.layer_ms`, medians), the optimizer
phase's kernels ``o`` (role ``optimizer``, median) and the rest (loss, AccumulateGrad, zero_grad,
unjoined kernels and the difference between medians; signed, so that after step 1 the timeline is
``G`` exactly). The **steps**, in this order (:data:`STEPS`), each on what the ones before left:

1. ``cuda_graphs``: one CUDA graph of the whole step: the wall time becomes ``G`` (no launch gaps,
   no host time). Rests on the wall time; None without it.
2. ``fused_optimizer``: ``o`` -> the database's measurement of PyTorch's fused step
   (``torch:aten::_fused_sgd_`` / ``_fused_adam_`` / ``_fused_adamw_``,
   :func:`benanza.kinds.optimizer._optimizer`, ``torch.optim.X(fused=True)``) over the same
   parameters (the step's optimizer config). None when the database has no valid row of it.
3. ``algorithm_selection``: per convolution backward call (data and filter gradient) the
   database's time of the legacy algorithm or graph engine config the framework ran (the profile's
   cuDNN log, :func:`benanza.profiles.train_join.conv_backward_engines`) minus the fastest valid
   time of the same call, layout and precision (``cudnn.benchmark``), summed per layer as
   :attr:`StepAlternatives.engine` and taken from the layer's backward time first. A call whose
   framework engine has no valid time in the database is not estimated: the step is then
   ``partial`` (:attr:`StepAlternatives.engine_missing`, said in ``rests_on``), and None when no
   call could be costed.
4. ``channels_last``: per layer the framework's own calls (``torch:`` rows) of its forward config
   and its backward calls' configs, NCHW minus NHWC, in the step's precision: the layer's time
   ``f + b`` becomes ``max(0, f + b - d)``, split between ``f`` and ``b`` in proportion. None when
   no layer has both layouts measured.
5. ``amp``: AMP (fp16 autocast) from an fp32 step: per layer the ratio of its fp16 bound to its fp32
   bound (forward layer time plus its backward calls, each step's own best measurements), where the
   database has both, scales ``f`` and ``b``; the optimizer keeps its fp32 time (AMP keeps fp32
   parameters and state, :mod:`benanza.kinds.optimizer`). None when not given.
6. ``fusion``: torch.compile: each fusion group's measured fused call (the forward analysis'
   :class:`~benanza.analysis.analyzer.FusionTime`, inference-only folds excluded as the step's LBL
   excludes them, :func:`benanza.kinds.training_counts_layers`) replaces its members'
   forward times where faster, scaled by the AMP ratio of its members when step 5 was taken.
   None when no group has a fused measurement.
7. ``parallel_execution``: the critical path of the step's DAG
   (:func:`benanza.analysis.training.schedule`: a layer's data and weight gradients independent,
   ``b`` split between them as benanza's calls of the layer split) instead of the sum of the layer
   times. None without the model's layers.

A step whose change would slow the step down saves 0 and leaves the timeline as it was (its signed
:attr:`WhatIfStep.effect_ms` says by how much); a step without the measurement it rests on has
``saving_ms`` None (never 0: nothing was estimated) and changes nothing. The savings that are
numbers add up exactly to ``start - final``. The final figure is never below the step's LBL
(:attr:`TrainingStep.critical_path_ms`): when the steps reach below it, the last steps' savings
are cut (:attr:`StepWhatIf.clamped`). Definitions: Benanza (Li, Dakkak, Xiong, Hwu, IPDPS 2020),
the analysis workflow (Q3-Q6), applied to the training step.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

#: the steps in their fixed order: (kind, title)
STEPS = (
    ("cuda_graphs", "CUDA graph of the whole step: no launch gaps or host time"),
    ("fused_optimizer", "fused optimizer (fused=True) instead of for-each"),
    ("algorithm_selection", "the framework library's fastest engine per call (cudnn.benchmark)"),
    ("channels_last", "channels_last memory format"),
    ("amp", "AMP (fp16 autocast) from fp32"),
    ("fusion", "layer fusion (torch.compile)"),
    ("parallel_execution", "independent layers and gradients in parallel"),
)
#: what the headline calls each step
SHORT = {"cuda_graphs": "CUDA graphs", "fused_optimizer": "fused optimizer", "algorithm_selection": "cudnn.benchmark",
         "channels_last": "channels_last", "amp": "AMP", "fusion": "torch.compile fusion",
         "parallel_execution": "parallel streams"}


@dataclass
class WhatIfStep:
    """One step: ``kind`` (:data:`STEPS`), ``title``, step time before and after (ms per training
    step), ``saving_ms`` (= before - after >= 0; None: not estimated, the measurement it rests on
    is missing), ``effect_ms`` (the signed change the step's change makes on the timeline before
    it, ms, before the LBL floor; None when not estimated), ``rests_on`` (what the estimate rests
    on), ``layers`` it changed, ``evidence``."""

    kind: str
    title: str
    ms_before: float
    ms_after: float
    saving_ms: float | None
    effect_ms: float | None
    rests_on: str
    layers: tuple[int, ...] = ()
    evidence: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        d = asdict(self)
        d["layers"] = list(self.layers)
        d["evidence"] = list(self.evidence)
        return d


@dataclass
class StepWhatIf:
    """The composition: ``start_ms`` (the measured step), ``start_is_wall`` (the start is the wall
    time; False: the GPU busy time), ``steps``, ``final_ms``, ``lbl_ms`` (the floor: the step's
    LBL, critical path), ``lbl_complete`` (False: a partial sum), ``clamped``."""

    start_ms: float
    start_is_wall: bool
    steps: list[WhatIfStep]
    final_ms: float
    lbl_ms: float
    lbl_complete: bool
    clamped: bool
    order: tuple[str, ...] = field(default_factory=lambda: tuple(k for k, _ in STEPS))

    def saving(self, kind: str) -> float | None:
        s = next((s for s in self.steps if s.kind == kind), None)
        return None if s is None else s.saving_ms

    def top(self, n: int = 3) -> list[WhatIfStep]:
        """The ``n`` largest steps with a saving."""
        return sorted((s for s in self.steps if s.saving_ms), key=lambda s: -s.saving_ms)[:n]

    def headline(self, what: str) -> str:
        """One sentence: ``what`` (e.g. ``resnet18 batch 2 fp32``), the measured step, what it
        could be and the three largest steps; the floor is said to be partial when incomplete."""
        top = self.top(3)
        how = ""
        if top:
            parts = [f"{SHORT[s.kind]} (-{s.saving_ms:.2f} ms)" for s in top]
            how = " with " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])
        floor = " (the lower bound)" if self.clamped else f" (lower bound {self.lbl_ms:.2f} ms)"
        if not self.lbl_complete:
            floor = f" (partial lower bound {self.lbl_ms:.2f} ms)"
        none = [SHORT[s.kind] for s in self.steps if s.saving_ms is None]
        rest = f"; not estimated: {', '.join(none)}" if none else ""
        start = "wall time" if self.start_is_wall else "GPU kernel time"
        return (f"{what}: PyTorch's training step takes {self.start_ms:.2f} ms ({start}); it could take "
                f"{self.final_ms:.2f} ms{floor}{how}{rest}.")

    def to_dict(self) -> dict:
        return {"start_ms": self.start_ms, "start_is_wall": self.start_is_wall, "final_ms": self.final_ms,
                "lbl_ms": self.lbl_ms, "lbl_complete": self.lbl_complete, "clamped": self.clamped,
                "order": list(self.order), "steps": [s.to_dict() for s in self.steps]}


@dataclass(frozen=True)
class StepAlternatives:
    """What the framework's switches reach, from the performance database (None: not known, the
    step is then not estimated). ``fused_optimizer_ms``: PyTorch's fused optimizer step over the
    model's parameters (ms) and ``fused_optimizer_call`` its call; ``engine``: layer -> ms the
    framework's engine choices cost over the fastest engine of the same calls (>= 0);
    ``channels_last``: layer -> ms its framework calls (forward and backward) take NCHW minus NHWC;
    ``amp_ratio``: layer -> its fp16 bound / its fp32 bound; ``notes``: what was missing;
    ``engine_calls``: the convolution backward calls whose framework engine was looked up (the
    cuDNN log joined them); ``engine_missing``: those of them not estimated (``layer N phase:
    engine``: the engine has no valid time in the database)."""

    fused_optimizer_ms: float | None = None
    fused_optimizer_call: str = ""
    engine: dict[int, float] | None = None
    channels_last: dict[int, float] | None = None
    amp_ratio: dict[int, float] | None = None
    notes: tuple[str, ...] = ()
    engine_calls: int = 0
    engine_missing: tuple[str, ...] = ()


class _Timeline:
    """The step's timeline while :func:`compose_step` changes it: per layer forward ``f`` and backward
    ``b`` kernel time, the optimizer ``o``, the ``rest`` (ms), the steps so far and the step's time
    ``ms`` after them."""

    def __init__(self, start: float, f: dict, b: dict, o: float, rest: float):
        self.f, self.b, self.o, self.rest, self.start, self.ms = f, b, o, rest, start, start
        self.steps: list[WhatIfStep] = []

    def total(self, layers: float | None = None) -> float:
        return (sum(self.f.values()) + sum(self.b.values()) if layers is None else layers) + self.o + self.rest

    def step(self, kind, after, rests_on, layers=(), evidence=(), estimated=True) -> None:
        title = dict(STEPS)[kind]
        if not estimated:
            self.steps.append(WhatIfStep(kind, title, self.ms, self.ms, None, None, rests_on, (), tuple(evidence)))
            return
        eff = self.ms - after
        after = min(after, self.ms)
        self.steps.append(WhatIfStep(kind, title, self.ms, after, self.ms - after, eff, rests_on, tuple(layers),
                                     tuple(evidence)))
        self.ms = after

    def scale_layers(self, kind: str, new_f: dict, new_b: dict, rests_on: str, layers, ev) -> bool:
        """Take per-layer times ``new_f``/``new_b`` as step ``kind`` when they save, else record it
        as not taken; returns whether it was taken."""
        eff = sum(self.f.values()) + sum(self.b.values()) - sum(new_f.values()) - sum(new_b.values())
        if eff > 0:
            self.f.update(new_f)
            self.b.update(new_b)
            self.step(kind, self.total(), rests_on, layers, ev)
            return True
        _not_taken(self.steps, kind, self.ms, eff, rests_on, ev)
        return False


def compose_step(c, ml=None, alternatives: StepAlternatives | None = None) -> StepWhatIf:
    """The what-if composition (module doc) of ``c`` (a
    :class:`~benanza.profiles.train_compare.TrainComparison`); ``ml``: the export's
    :class:`~benanza.processing.model.ModelLayers` (its edges, for step 7; None: not estimated);
    ``alternatives``: :class:`StepAlternatives` (default: none known). Never raises for missing
    measurements: those steps are None."""
    alt = alternatives or StepAlternatives()
    j, st = c.join, c.step
    busy = j.step_ms(("kernel", "memcpy", "memset"))["median_ms"] or 0.0
    wall = ((c.run or {}).get("step_wall_ms") or {}).get("median_ms")
    f = {r["layer"]: float(r["forward_ms"]) for r in j.layer_ms()}
    b = {r["layer"]: float(r["backward_ms"]) for r in j.layer_ms()}
    o = j.role_ms()["optimizer"]["median_ms"] or 0.0
    t = _Timeline(float(wall) if wall else busy, f, b, o, busy - sum(f.values()) - sum(b.values()) - o)
    # 1. CUDA graphs
    if wall:
        t.step("cuda_graphs", t.total(), "the step's wall time (CUDA events) and the profiled GPU busy time",
               evidence=(f"wall {wall:.4f} ms, GPU kernels+memcpy+memset {busy:.4f} ms per step "
                         f"({len(j.iterations)} profiled iterations)",))
    else:
        t.step("cuda_graphs", t.ms, "the step's wall time", evidence=("no wall time of the step was recorded",),
               estimated=False)
    _fused_optimizer(t, alt)
    _engines(t, alt)
    _channels_last(t, alt)
    before_amp = dict(t.f)
    amp_taken = _amp(t, alt)
    _fusion(t, st, before_amp, amp_taken)
    _parallel(t, st, ml)
    return _clamp(StepWhatIf(t.start, bool(wall), t.steps, t.ms, st.critical_path_ms, st.complete, False))


def _fused_optimizer(t: _Timeline, alt: StepAlternatives) -> None:
    """Step 2: the measured optimizer phase -> the database's fused optimizer step."""
    rests = "the database's fused optimizer measurement"
    if alt.fused_optimizer_ms is None:
        t.step("fused_optimizer", t.ms, rests,
               evidence=("the database has no valid measurement of the fused optimizer step",), estimated=False)
        return
    eff = t.o - alt.fused_optimizer_ms
    ev = (f"optimizer phase {t.o:.4f} ms -> {alt.fused_optimizer_call or 'fused'} {alt.fused_optimizer_ms:.4f} ms",)
    if eff > 0:
        t.o = alt.fused_optimizer_ms
        t.step("fused_optimizer", t.total(), rests, evidence=ev)
    else:
        _not_taken(t.steps, "fused_optimizer", t.ms, eff, rests, ev)


def _engines(t: _Timeline, alt: StepAlternatives) -> None:
    """Step 3: cudnn.benchmark, each layer's engine cost taken from its backward time first."""
    if alt.engine is None:
        why = (f"none of the {alt.engine_calls} convolution backward calls' framework engines has a valid time "
               f"in the database (first: {alt.engine_missing[0]})" if alt.engine_missing else
               "the training profile's engine choices are not joined to the database (no cuDNN log of "
               "backward convolutions)")
        t.step("algorithm_selection", t.ms, "the framework's engine configs per call", evidence=(why,),
               estimated=False)
        return
    n_miss = len(alt.engine_missing)
    partial = (f"partial: {n_miss} of {alt.engine_calls} convolution backward calls not estimated (their "
               f"framework engine has no valid time in the database); ") if n_miss else ""
    changed, ev = [], []
    for i, cost in sorted(alt.engine.items()):
        if i in t.f and cost > 0:
            take_b = min(cost, t.b[i])
            take_f = min(cost - take_b, t.f[i])
            t.b[i] -= take_b
            t.f[i] -= take_f
            changed.append(i)
            ev.append(f"layer {i}: -{take_b + take_f:.4f} ms")
    t.step("algorithm_selection", t.total(), partial + "the framework's engine configs (cuDNN log) against the "
           "fastest of the same calls", changed, (ev[:8] + [f"not estimated: {m}" for m in alt.engine_missing[:4]]))


def _channels_last(t: _Timeline, alt: StepAlternatives) -> None:
    """Step 4: each layer's framework calls NCHW - NHWC, split between its forward and backward time."""
    rests = "the framework's calls timed NCHW and NHWC"
    if not alt.channels_last:
        t.step("channels_last", t.ms, rests, evidence=("no layer has its framework calls timed in both layouts",),
               estimated=False)
        return
    new_f, new_b = dict(t.f), dict(t.b)
    for i, d in alt.channels_last.items():
        tot = t.f.get(i, 0.0) + t.b.get(i, 0.0)
        if tot > 0:
            k = max(0.0, tot - d) / tot
            new_f[i], new_b[i] = t.f[i] * k, t.b[i] * k
    ev = (f"{len(alt.channels_last)} layers' framework calls timed in both memory formats: "
          f"{sum(alt.channels_last.values()):+.4f} ms (NCHW - NHWC)", *alt.notes)
    t.scale_layers("channels_last", new_f, new_b, rests, sorted(alt.channels_last), ev)


def _amp(t: _Timeline, alt: StepAlternatives) -> bool:
    """Step 5: each layer scaled by its fp16 over fp32 bound; returns whether it was taken."""
    rests = "fp16 and fp32 bounds per layer"
    if not alt.amp_ratio:
        t.step("amp", t.ms, rests, evidence=("no fp16 step to hold against this fp32 step (or not an fp32 step)",),
               estimated=False)
        return False
    new_f = {i: t.f[i] * alt.amp_ratio.get(i, 1.0) for i in t.f}
    new_b = {i: t.b[i] * alt.amp_ratio.get(i, 1.0) for i in t.b}
    return t.scale_layers("amp", new_f, new_b, rests, sorted(alt.amp_ratio),
                          (f"{len(alt.amp_ratio)} layers with both precisions' bounds",))


def _fusion(t: _Timeline, st, before_amp: dict, amp_taken: bool) -> None:
    """Step 6: measured fused calls replace their members' forward times where faster."""
    from benanza.kinds import INFERENCE_ONLY_FUSIONS

    groups = [g for g in st.forward.fusions if g.fused_ms is not None and not g.training_layers
              and g.key.split("-")[0] not in INFERENCE_ONLY_FUSIONS and all(i in t.f for i in g.layers)]
    if not groups:
        t.step("fusion", t.ms, "the forward analysis' fused measurements",
               evidence=("no fusion group has a fused measurement",), estimated=False)
        return
    changed, ev = [], []
    used: set[int] = set()
    for g in groups:
        if used & set(g.layers):
            continue
        now = sum(t.f[i] for i in g.layers)
        was = sum(before_amp[i] for i in g.layers)
        fused = g.fused_ms * (now / was if amp_taken and was > 0 else 1.0)
        if fused < now:
            for i in g.layers:
                t.f[i] = 0.0
            t.f[g.layers[-1]] = fused
            used |= set(g.layers)
            changed += list(g.layers)
            ev.append(f"layers {g.layers[0]}..{g.layers[-1]} ({g.key.split('-')[0]}): {now:.4f} -> {fused:.4f} ms")
    t.step("fusion", t.total(), "the forward analysis' fused measurements", changed, ev[:8])


def _parallel(t: _Timeline, st, ml) -> None:
    """Step 7: the critical path of the step's DAG, data and weight gradients independent."""
    from benanza.analysis.training import schedule

    if ml is None:
        t.step("parallel_execution", t.ms, "the step's DAG", evidence=("the model's layers were not given",),
               estimated=False)
        return
    split = _data_share(st)
    fw = [t.f.get(ly.index, 0.0) for ly in ml.layers]
    calls = [(i, "backward_data", x * split.get(i, 1.0)) for i, x in t.b.items() if i < len(fw)] + \
            [(i, "backward_weight", x * (1.0 - split.get(i, 1.0))) for i, x in t.b.items() if i < len(fw)]
    _, seq, crit = schedule(ml, fw, calls, None, None)
    t.step("parallel_execution", t.total(crit), "the step's DAG (data and weight gradients independent)",
           evidence=(f"sum of layer times {seq:.4f} ms, critical path {crit:.4f} ms",))


def _not_taken(steps: list, kind: str, ms: float, eff: float, rests_on: str, ev) -> None:
    steps.append(WhatIfStep(kind, dict(STEPS)[kind], ms, ms, 0.0, eff, rests_on, (),
                            (f"not taken: it would be {-eff:.4f} ms slower", *ev)))


def _data_share(st) -> dict[int, float]:
    """Per layer the share of its backward calls' time that is the data gradient (benanza's
    measured calls; layers without a measured weight gradient: 1)."""
    d: dict[int, float] = {}
    w: dict[int, float] = {}
    for call in st.calls:
        if call.time_ms is None:
            continue
        if call.phase == "backward_data":
            d[call.layer] = d.get(call.layer, 0.0) + call.time_ms
        elif call.phase == "backward_weight":
            w[call.layer] = w.get(call.layer, 0.0) + call.time_ms
    return {i: d.get(i, 0.0) / (d.get(i, 0.0) + w[i]) for i in w if d.get(i, 0.0) + w[i] > 0}


def _clamp(w: StepWhatIf) -> StepWhatIf:
    """Cut the last steps' savings so that the final figure is never below the step's LBL."""
    short = w.lbl_ms - w.final_ms
    if short <= 0:
        return w
    for s in reversed(w.steps):
        if not s.saving_ms:
            continue
        cut = min(short, s.saving_ms)
        s.saving_ms -= cut
        short -= cut
        if short <= 1e-15:
            break
    ms = w.start_ms
    for s in w.steps:
        s.ms_before, s.ms_after = ms, ms - (s.saving_ms or 0.0)
        ms = s.ms_after
    return StepWhatIf(w.start_ms, w.start_is_wall, w.steps, ms, w.lbl_ms, w.lbl_complete, True, w.order)


# ------------------------------------------------------------------------- from the database

def step_alternatives(step, db, system_id: int, fp16_step=None, layouts=("NCHW", "NHWC"),
                      engines: dict | None = None) -> StepAlternatives:
    """:class:`StepAlternatives` of training step ``step`` (a
    :class:`~benanza.analysis.training.TrainingStep`) from the performance database ``db`` on
    ``system_id``: the fused optimizer's fastest valid ``torch:aten::_fused_ALG_`` row of the step's
    optimizer config (in the step's precision's accepted data types), ``channels_last`` from the
    ``torch:`` rows of each layer's forward config and backward calls' configs in both layouts (a
    layer counts where every one of them has both), and, with ``fp16_step`` (the same model's fp16
    step; only for an fp32 step), each layer's fp16 / fp32 bound (forward bound plus backward calls,
    where both steps measure all of them); with ``engines`` ((layer, phase) -> the framework's
    :class:`~benanza.profiles.profile.ConvEngine`, :attr:`TrainJoin.conv_engines
    <benanza.profiles.train_join.TrainJoin.conv_engines>`), each convolution backward call's
    engine cost (:func:`engine_costs`; module doc, step 3). ``engine`` stays None without them."""
    from benanza import kinds as L
    from benanza.analysis.insights import framework_rows

    a = step.forward
    notes: list[str] = []
    fused_ms, fused_call = None, ""
    oc = step.optimizer_call
    if oc is not None and oc.config is not None:
        call = f"torch:aten::_fused_{oc.config.algorithm}_"
        ok = [m.median_ms for m in db.measurements(system_id, [oc.key], cache=a.cache)
              if m.call == call and m.status == "ok" and m.median_ms is not None
              and m.dtype in L.ACCEPTED_DTYPES[a.precision] and m.layout in layouts]
        if ok:
            fused_ms, fused_call = min(ok), call
    # each layer's calls as the step runs them: its forward config (or its training-mode forward
    # call in its place: BatchNormalization with the batch's statistics) and its backward calls,
    # each in the precision PyTorch runs it (an fp32 step's cuDNN convolutions in TF32,
    # torch.backends.cudnn.allow_tf32; the FMA rows would say NHWC is slower where PyTorch's TF32
    # convolutions gain, as resnet18's do)
    replaced = {c.layer for c in step.calls if c.phase == "forward"}
    kind_of: dict[str, str] = {}
    keys_of: dict[int, set] = {}
    for t in a.layers:
        if t.layer.key and t.layer.index not in replaced:
            keys_of[t.layer.index] = {t.layer.key}
            kind_of[t.layer.key] = getattr(t.layer.config, "kind", "")
    for call in step.calls:
        keys_of.setdefault(call.layer, set()).add(call.key)
        kind_of[call.key] = call.kind
    rows = framework_rows(db, system_id, sorted({k for ks in keys_of.values() for k in ks}), a.cache)
    cl: dict[int, float] = {}
    for i, ks in keys_of.items():
        pairs = [tuple(rows.get((k, a.kind_precision(kind_of[k]), lay)) for lay in ("NCHW", "NHWC")) for k in ks]
        if pairs and all(x is not None and y is not None for x, y in pairs):
            cl[i] = sum(x - y for x, y in pairs)
    if not cl:
        notes.append("no layer has its framework calls timed in both layouts")
    amp = _amp_ratio(step, fp16_step) if fp16_step is not None and a.precision == "fp32" else None
    eng, n_calls, missing = engine_costs(step, db, system_id, engines) if engines else (None, 0, ())
    return StepAlternatives(fused_ms, fused_call, eng, cl or None, amp or None, tuple(notes), n_calls, missing)


#: the database's call (before any ``+``: a bias gradient timed with it) of a convolution
#: gradient's graph execution, by phase (cpp/src/engines.cpp, run_conv_grad_engines)
_GRAPH_CALLS = {"backward_data": "cudnnBackendExecute(conv_dgrad)", "backward_weight": "cudnnBackendExecute(conv_wgrad)"}


def _precisions(precision: str, tf32: bool | None) -> list[str]:
    """The database precisions that match what the framework ran, preferred first: a TF32 cuDNN
    call of an fp32 step is a tf32 measurement (``enable_tf32`` of the cuDNN log)."""
    return ["tf32", "fp32"] if precision == "fp32" and tf32 else [precision]


def engine_costs(step, db, system_id: int, engines: dict) -> tuple[dict[int, float] | None, int, tuple[str, ...]]:
    """Per layer of ``step`` (a :class:`~benanza.analysis.training.TrainingStep`) the ms its
    convolution backward calls' framework engines cost over the fastest of the same call:
    for each backward call with an engine in ``engines`` ((layer, phase) ->
    :class:`~benanza.profiles.profile.ConvEngine`), the fastest valid database row of the call's
    config whose algorithm is the framework's (graph: :func:`benanza.analysis.insights.engine_key`
    of the engine config, call ``cudnnBackendExecute(conv_dgrad|conv_wgrad)``; legacy:
    the engine's ``algorithm``, call the legacy function), in the
    engine's layout and precision, minus the fastest valid row of that same call, layout and
    precision (>= 0, ms). Returns (layer -> ms, None when no call was costed; the calls looked up;
    the calls not estimated, ``layer N phase: engine``). Raises nothing for missing rows."""
    from benanza.analysis.insights import engine_key

    a = step.forward
    calls = [(c, engines[(c.layer, c.phase)]) for c in step.calls
             if (c.layer, c.phase) in engines and engines[(c.layer, c.phase)].engine_config]
    keys = sorted({c.key for c, _ in calls})
    rows: dict[str, list] = {}
    for m in (db.measurements(system_id, keys, cache=a.cache) if keys else ()):
        if m.status == "ok" and m.median_ms is not None and math.isfinite(m.median_ms):
            rows.setdefault(m.layer_key, []).append(m)
    out: dict[int, float] = {}
    missing: list[str] = []
    for c, e in calls:
        if e.api == "graph":
            base, algo = _GRAPH_CALLS[c.phase], engine_key(e.engine_config)
        else:
            base, algo = e.api, e.algorithm
        want = _precisions(a.precision, e.tf32)
        same = [m for m in rows.get(c.key, []) if m.call.split("+")[0] == base and m.layout == e.layout
                and m.precision in want]
        fw = [m for m in same if engine_key(m.algorithm) == algo]
        if not fw:
            missing.append(f"layer {c.layer} {c.phase}: {e.engine_config}")
            continue
        pick = min(fw, key=lambda m: (want.index(m.precision), m.median_ms))
        best = min(m.median_ms for m in same if m.call == pick.call and m.precision == pick.precision)
        out[c.layer] = out.get(c.layer, 0.0) + max(0.0, pick.median_ms - best)
    return (out if len(missing) < len(calls) else None), len(calls), tuple(missing)


def layer_bounds(step) -> dict[int, float]:
    """Per layer of ``step`` its bound (ms): the forward layer's measured time plus its backward
    calls; layers with a missing forward or backward measurement are left out."""
    out: dict[int, float] = {t.layer.index: t.time_ms for t in step.forward.layers if t.time_ms is not None}
    bad = {t.layer.index for t in step.forward.layers if t.time_ms is None}
    for call in step.calls:
        if call.layer < 0:
            continue
        if call.time_ms is None:
            bad.add(call.layer)
        else:
            out[call.layer] = out.get(call.layer, 0.0) + call.time_ms
    return {i: t for i, t in out.items() if i not in bad}


def _amp_ratio(fp32_step, fp16_step) -> dict[int, float]:
    """Per layer measured in both steps: fp16 bound / fp32 bound (:func:`layer_bounds`)."""
    a, h = layer_bounds(fp32_step), layer_bounds(fp16_step)
    return {i: h[i] / a[i] for i in a if i in h and a[i] > 0}
