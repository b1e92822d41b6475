"""One what-if model: the framework's measured timeline, changed by one optimization after the
other in a fixed order, with the latency after each step.

The **start** is what the framework measured (a :class:`benanza.profiles.Profile`): the latency
``L`` (median, CUDA events), the GPU busy time ``G`` (union of kernel intervals per iteration), per
layer its kernel time (a group of layers one framework op computed counts on the group's first
layer), and the kernels that compute no layer by category (layout conversions, copies, fills, batch
norms the model folded, other). The **steps**, in this order (the ones a user applies without
touching the model come first; each works on the timeline the ones before left):

1. ``launch_gaps``: launch gaps and host time removed, as a CUDA graph of the inference (or a
   compiled runtime) does: the latency becomes the GPU busy time, ``L -> G``;
2. ``layout_conversion``: the model run ``channels_last``. With the framework's own calls timed in
   both memory formats (:class:`Alternatives`: the database's ``torch:`` rows of each layer's
   config, e.g. ``torch:aten::conv2d`` NCHW and NHWC in the precision PyTorch runs it, and the
   batch norm PyTorch runs after each convolution of a model whose export folded them) each such
   layer's time changes by its NHWC minus NCHW time, and its layout-conversion kernels go (the NCHW
   call's time holds them); the step's effect is signed (``channels_last`` can be slower, at batch
   1 often) and the composition takes it only when it saves. Without those rows: the
   layout-conversion kernels removed;
3. ``unneeded_kernels``: copies, fills, batch norms the model folded and kernels that compute no
   layer removed;
4. ``algorithm_selection``: what autotuning in the framework's own library reaches
   (``torch.backends.cudnn.benchmark``): per convolution, the time of the engine config the
   framework ran (its cuDNN log) minus the fastest engine config of the same call, layout and
   precision, both from the database (like with like; :attr:`Alternatives.engine`);
5. ``implementation``: per layer the fastest implementation measured in any library or the
   framework's own kernels (the analysis' precision and layouts), ``min(current time, best time)``;
   a framework group against the sum of its layers' best times; a layer without a valid measurement
   keeps the framework's time (never 0 ms);
6. ``layer_fusion``: each fusion candidate measured faster than its members' current times
   replaces them;
7. ``tensor_cores``: an fp32 run's layers in the Tensor Core precision (when that analysis is
   given), where faster;
8. ``parallel_execution``: independent layers on streams: the longest path of the layer DAG with
   the current per-layer times instead of their sum (the kernels outside layers stay serial).

Each step's saving is its marginal effect in this order; a step that would raise the latency saves
0 and leaves the timeline as it was (its signed :attr:`WhatIfStep.effect_ms` says by how much it
would have changed it). The savings add up exactly to ``L - final``. The final figure is never below the LBL (the
analysis' headline, fused parallel): when the steps reach below it, the last steps' savings are
cut until the final figure is the LBL, and :attr:`WhatIf.clamped` says so. Definitions: Benanza
(Li, Dakkak, Xiong, Hwu, IPDPS 2020), sections on the analysis workflow (Q3-Q6).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

#: the steps in their fixed order: (kind, title)
STEPS = (
    ("launch_gaps", "CUDA graphs: no launch gaps or host time"),
    ("layout_conversion", "no layout conversions (channels_last)"),
    ("unneeded_kernels", "no copies, fills or folded batch norms"),
    ("algorithm_selection", "the framework library's fastest engine per layer (cudnn.benchmark)"),
    ("implementation", "the fastest implementation per layer (any library)"),
    ("layer_fusion", "layer fusion"),
    ("tensor_cores", "Tensor Cores"),
    ("parallel_execution", "independent layers in parallel"),
)
#: what the headline calls each step
SHORT = {"launch_gaps": "CUDA graphs", "layout_conversion": "channels_last",
         "unneeded_kernels": "no copies, fills or folded batch norms",
         "algorithm_selection": "cudnn.benchmark", "implementation": "the fastest implementation per layer",
         "layer_fusion": "layer fusion",
         "tensor_cores": "Tensor Cores", "parallel_execution": "parallel streams"}
UNNEEDED = ("copy", "fill", "unfused_batch_norm", "other")


@dataclass
class WhatIfStep:
    """One step: ``kind`` (:data:`STEPS`), ``title``, latency before and after (ms per
    inference), ``saving_ms`` (= before - after, >= 0), ``layers`` it changed, ``evidence``;
    ``effect_ms``: the signed change of the latency the step's change makes on the timeline before
    it (ms; negative: slower, then not taken and ``saving_ms`` is 0), before the LBL floor."""

    kind: str
    title: str
    ms_before: float
    ms_after: float
    saving_ms: float
    layers: tuple[int, ...] = ()
    evidence: tuple[str, ...] = ()
    effect_ms: float | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["layers"] = list(self.layers)
        d["evidence"] = list(self.evidence)
        return d


@dataclass
class WhatIf:
    """The composition: ``start_ms`` (the measured latency), ``steps``, ``final_ms``, ``lbl_ms``
    (the floor), ``clamped`` (the floor cut the last steps), ``unmeasured`` (layers that kept the
    framework's time: no valid measurement), ``order`` (the steps' kinds)."""

    start_ms: float
    steps: list[WhatIfStep]
    final_ms: float
    lbl_ms: float
    clamped: bool
    unmeasured: int
    order: tuple[str, ...] = field(default_factory=lambda: tuple(k for k, _ in STEPS))

    def saving(self, kind: str) -> float:
        return sum(s.saving_ms for s in self.steps if s.kind == kind)

    def top(self, n: int = 3) -> list[WhatIfStep]:
        """The ``n`` largest steps with a saving."""
        return sorted((s for s in self.steps if s.saving_ms > 0), key=lambda s: -s.saving_ms)[:n]

    def to_dict(self) -> dict:
        return {"start_ms": self.start_ms, "final_ms": self.final_ms, "lbl_ms": self.lbl_ms, "clamped": self.clamped,
                "unmeasured": self.unmeasured, "order": list(self.order), "steps": [s.to_dict() for s in self.steps]}


@dataclass(frozen=True)
class Alternatives:
    """What the framework's own switches reach per layer (layer index of the profile's layer or
    group anchor -> ms per inference), from the performance database:

    ``channels_last``: the layer's framework calls (``torch:`` rows: ATen op as PyTorch eager runs
    it, ``cudnn.benchmark`` on) timed NCHW minus NHWC, in the precision the framework ran it
    (positive: channels_last is faster); ``layout_ms``: the layout-conversion kernels the profile
    attributes to those layers (the NCHW call's time includes them; they go with the step);
    ``engine``: the engine config the framework ran (cuDNN log) minus the fastest engine config
    of the same call, layout and precision (>= 0); ``notes``: what was missing;
    ``batch_norm_ms``: the batch norms the framework runs apart from the convolutions (the export
    folded them; the profile's ``unfused_batch_norm`` kernels), their ``torch:`` rows NCHW minus
    NHWC summed (ms per inference): channels_last changes those kernels, not the layers' own, so
    the step takes it from that category, and step 3 removes what is left of it."""

    channels_last: dict[int, float] = field(default_factory=dict)
    layout_ms: dict[int, float] = field(default_factory=dict)
    engine: dict[int, float] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    batch_norm_ms: float = 0.0


def _longest_path(times: dict[int, float], producers: dict[int, tuple[int, ...]]) -> float:
    """Longest path (ms) through the layer DAG (layers in topological order = index order)."""
    finish: dict[int, float] = {}
    for i in sorted(times):
        finish[i] = times[i] + max((finish.get(p, 0.0) for p in producers.get(i, ())), default=0.0)
    return max(finish.values(), default=0.0)


def _layer_state(a, p) -> tuple[dict, dict, dict, int]:
    """Per layer (or framework group anchor): current time (framework kernel ms), its best time
    (None: unmeasured), and the members of each group."""
    best = {t.layer.index: t.time_ms for t in a.layers}
    status = {t.layer.index: t.status for t in a.layers}
    cur, lbl, members = {}, {}, {}
    unmeasured = 0
    for lp in p.layers:
        if lp.covered_by is not None:
            continue
        group = tuple(lp.covers) or (lp.layer,)
        members[lp.layer] = group
        cur[lp.layer] = lp.kernel_ms
        times = [best.get(i) for i in group if status.get(i) != "zero_cost"]
        if any(x is None for x in times):
            lbl[lp.layer] = None
            if lp.kernel_ms > 0:
                unmeasured += 1
        else:
            lbl[lp.layer] = sum(times)
    return cur, lbl, members, unmeasured


def compose(a, p, tensor_core=None, gap_ms: float | None = None, alternatives: Alternatives | None = None) -> WhatIf:
    """The what-if composition of analysis ``a`` (:class:`benanza.analysis.analyzer.Analysis`) against profile
    ``p`` (module doc); ``tensor_core``: the Tensor Core analysis of an fp32 run (step 7);
    ``gap_ms``: the launch gaps and host time to remove in step 1 (default latency - GPU busy time);
    ``alternatives``: the framework's own calls per layer (steps 2 and 4; without them step 2
    removes the layout-conversion kernels and step 4 saves nothing)."""
    lat = p.latency.median_ms if p.latency is not None else p.gpu_kernel_ms
    n_it = max(p.iterations, 1)
    cat = p.category_ms()
    alt = alternatives or Alternatives()
    cur, lbl, members, unmeasured = _layer_state(a, p)
    layer_sum0 = sum(cur.values())
    # what the busy time holds beyond the layers and the removable kernels (per-layer medians vs
    # per-category means, kernels that overlap): signed, so that after step 1 the timeline is the
    # GPU busy time exactly
    rest = p.gpu_kernel_ms - layer_sum0 - cat["layout"] - sum(cat[c] for c in UNNEEDED)
    nonlayer = {"layout": cat["layout"], **{c: cat[c] for c in UNNEEDED}}
    steps: list[WhatIfStep] = []
    ms = lat

    def total(parallel: float | None = None) -> float:
        return (sum(cur.values()) if parallel is None else parallel) + sum(nonlayer.values()) + rest

    def step(kind, after, layers=(), evidence=(), effect=None):
        nonlocal ms
        title = dict(STEPS)[kind]
        eff = ms - after if effect is None else effect
        after = min(after, ms)
        steps.append(WhatIfStep(kind, title, ms, after, ms - after, tuple(layers), tuple(evidence), eff))
        ms = after

    # 1. launch gaps and host time
    busy = total()
    step("launch_gaps", busy if gap_ms is None else lat - gap_ms,
         evidence=(f"latency {lat:.4f} ms, GPU kernels {busy:.4f} ms per inference ({n_it} profiled iterations)",))
    _channels_last(cur, nonlayer, alt, step, total)
    # 3. unneeded kernels
    gone = {c: nonlayer[c] for c in UNNEEDED}
    for c in UNNEEDED:
        nonlayer[c] = 0.0
    step("unneeded_kernels", ms - sum(gone.values()),
         evidence=tuple(f"{c.replace('_', ' ')} kernels {v:.4f} ms" for c, v in gone.items() if v > 0))
    # 4. the framework library's fastest engine (cudnn.benchmark)
    changed, ev = [], []
    for i, cost in alt.engine.items():
        if i in cur and cost > 0:
            take = min(cost, cur[i])
            cur[i] -= take
            changed.append(i)
            ev.append((take, f"layer {i}: -{take:.4f} ms"))
    step("algorithm_selection", total(), changed, [e for _, e in sorted(ev, reverse=True)[:8]])
    # 5. the fastest implementation per layer
    changed, ev = [], []
    for i, t in list(cur.items()):
        b = lbl.get(i)
        if b is not None and b < t:
            changed.append(i)
            ev.append((t - b, f"layer {i}: {t:.4f} -> {b:.4f} ms"))
            cur[i] = b
    step("implementation", total(), changed, [e for _, e in sorted(ev, reverse=True)[:8]])
    anchor_of = _fusion_step(a, cur, members, step, total)
    # 7. Tensor Cores
    if tensor_core is not None:
        tc = {t.layer.index: t.time_ms for t in tensor_core.layers}
        changed = []
        for i in list(cur):
            times = [tc.get(m) for m in members[i]]
            if cur[i] > 0 and times and all(x is not None for x in times) and sum(times) < cur[i]:
                cur[i] = sum(times)
                changed.append(i)
        step("tensor_cores", total(), changed, (f"{tensor_core.precision} where faster",))
    # 8. parallel execution
    producers = {lp.layer: lp.inputs_from for lp in p.layers}
    crit = _longest_path(cur, {i: tuple(anchor_of.get(x, x) for x in producers.get(i, ())) for i in cur})
    step("parallel_execution", total(crit), evidence=(f"sum of layer times {sum(cur.values()):.4f} ms, "
                                                     f"longest path {crit:.4f} ms",))
    return _clamp(WhatIf(lat, steps, ms, a.lbl_ms, False, unmeasured))


def _channels_last(cur: dict, nonlayer: dict, alt: Alternatives, step, total) -> None:
    """Step 2 on the timeline (``cur``: per layer ms, ``nonlayer``: per kernel category ms)."""
    if not alt.channels_last:
        lay = nonlayer["layout"]
        nonlayer["layout"] = 0.0
        step("layout_conversion", total(), evidence=(f"layout-conversion kernels {lay:.4f} ms",))
        return
    new = dict(cur)
    layout_gone = 0.0
    for i, d in alt.channels_last.items():
        if i in new:
            tr = alt.layout_ms.get(i, 0.0)
            new[i] = max(0.0, new[i] + tr - d)
            layout_gone += tr
    before = total()
    bn = min(alt.batch_norm_ms, nonlayer["unfused_batch_norm"])
    after = before - sum(cur.values()) + sum(new.values()) - min(layout_gone, nonlayer["layout"]) - bn
    effect = before - after
    ev = [f"{len(alt.channels_last)} layers timed as the framework runs them in both memory formats: "
          f"{sum(alt.channels_last.values()):+.4f} ms (NCHW - NHWC), their layout conversions {layout_gone:.4f} ms",
          *((f"the batch norms the framework runs apart: {alt.batch_norm_ms:+.4f} ms (NCHW - NHWC)",)
            if alt.batch_norm_ms else ()),
          *alt.notes]
    if effect > 0:
        cur.update(new)
        nonlayer["layout"] = max(0.0, nonlayer["layout"] - layout_gone)
        nonlayer["unfused_batch_norm"] -= bn
        step("layout_conversion", total(), sorted(alt.channels_last), ev, effect)
    else:
        step("layout_conversion", before, (), [f"not taken: channels_last would be {-effect:.4f} ms slower", *ev],
             effect)


def _fusion_step(a, cur: dict, members: dict, step, total) -> dict:
    """Step 6: each fusion candidate measured faster than its members' current times replaces them;
    returns each member layer's anchor."""
    anchor_of = {m: anc for anc, grp in members.items() for m in grp}
    changed, ev = [], []
    for f in a.fusions:
        if f.fused_ms is None:
            continue
        anchors = sorted({anchor_of[i] for i in f.layers if i in anchor_of})
        # a framework group that computes more than the fusion (an attention op with its
        # projections) is not replaced by the fused measurement
        inside = all(set(members[x]) <= set(f.layers) for x in anchors)
        now = sum(cur[x] for x in anchors)
        if anchors and inside and f.fused_ms < now:
            for x in anchors:
                cur[x] = 0.0
            cur[anchors[0]] = f.fused_ms
            changed += list(f.layers)
            ev.append((now - f.fused_ms, f"layers {f.layers[0]}..{f.layers[-1]} ({f.key.split('-')[0]}): "
                                         f"{now:.4f} -> {f.fused_ms:.4f} ms"))
    step("layer_fusion", total(), changed, [e for _, e in sorted(ev, reverse=True)[:8]])
    return anchor_of


def _clamp(w: WhatIf) -> WhatIf:
    """Cut the last steps' savings so that the final figure is never below the LBL."""
    short = w.lbl_ms - w.final_ms
    if short <= 0:
        return w
    for s in reversed(w.steps):
        cut = min(short, s.saving_ms)
        s.saving_ms -= cut
        short -= cut
        if short <= 1e-15:
            break
    ms = w.start_ms
    for s in w.steps:
        s.ms_before, s.ms_after = ms, ms - s.saving_ms
        ms = s.ms_after
    return WhatIf(w.start_ms, w.steps, ms, w.lbl_ms, True, w.unmeasured, w.order)


def headline(model: str, batch: int, precision: str, gpu: str, run_label: str, w: WhatIf,
             incomplete: str = "") -> str:
    """One sentence: measured latency, what it could be, and the three largest steps;
    ``incomplete``: the LBL's :attr:`benanza.analysis.analyzer.Analysis.incomplete_note` (the
    floor is then said to be partial)."""
    top = w.top(3)
    how = ""
    if top:
        parts = [f"{SHORT[s.kind]} (-{s.saving_ms:.2f} ms)" for s in top]
        how = " with " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])
    floor = " (the lower bound)" if w.clamped else f" (lower bound {w.lbl_ms:.2f} ms)"
    if incomplete:
        floor = f" (partial lower bound {w.lbl_ms:.2f} ms, {incomplete})"
    return (f"{model} batch {batch} {precision} on {gpu or 'the GPU'}: {run_label} runs in {w.start_ms:.2f} ms; "
            f"it could run in {w.final_ms:.2f} ms{floor}{how}.")
