"""The training join: each GPU kernel of a profiled training step to its phase, and a backward
kernel to the forward layer whose gradient it computes (docs/training.md).

Input: a :class:`~benanza.profiles.trace.Trace` of training iterations as
:func:`benanza.profiles.capture.capture_profile` records them with ``train=True`` (and as
``benchmarks/train_step.py`` does): each iteration inside ``record_function("benanza.iteration")``,
its phases inside ``record_function("benanza.phase:NAME")`` (:data:`benanza.spec.PROFILED_STEP_PHASES`), on the main thread.

1. **Phases.** A kernel belongs to the phase whose host range holds the start of the runtime call
   that launched it (the kernel's start when it has none). Autograd runs the backward on its own
   device thread while the main thread waits inside ``loss.backward()``, so the backward phase's
   wall-clock range holds those launches too. A kernel launched outside every phase range of its
   iteration is ``outside``.
2. **Forward kernels to layers.** The inference join (:func:`benanza.profiles.join.join`) on the
   forward phases only (the loss's and the optimizer's ops never take a model layer): framework
   op -> ONNX layer, with module scopes when the trace has them.
3. **Backward kernels to layers, through autograd's sequence numbers.** A forward op dispatched
   with gradients on records the sequence number of the autograd node it creates; the node's op
   in the backward (``ConvolutionBackward0``, under ``autograd::engine::evaluate_function:
   ConvolutionBackward0``) records the same number and the forward thread's RecordFunction id
   (``Fwd thread id``; :class:`~benanza.profiles.trace.CpuOp`). A backward kernel's node is the
   innermost enclosing op with a sequence number; its forward op the last op of that number on the
   forward thread (ops that found no input needing a gradient record the number too, but only the
   op that creates the node advances it, so the creator comes last); the forward op's framework op
   gives the layer (step 2), and its phase says whether the gradient is the model's (``backward``)
   or the loss's (``loss_backward``). Forward threads: a backward ``Fwd thread id`` is mapped to the
   host thread whose forward ops hold the most of its sequence numbers (one forward thread in
   practice).
4. **Roles** (:data:`ROLES`) of every kernel, never dropped: ``forward`` (of a layer, or not
   joined to one: ``layer`` None), ``loss``, ``backward`` (a layer's gradient; ``layer`` None when
   its forward op matched no layer, e.g. a dropout the export removed), ``loss_backward``,
   ``accumulate_grad`` (autograd's ``AccumulateGrad`` nodes: no sequence number), ``optimizer``,
   ``zero_grad``, ``unjoined`` (a backward kernel without a node or whose node has no forward op)
   and ``outside``.

5. **Backward convolutions to their engines** (:func:`conv_backward_engines`): the cuDNN log of the
   profiled run (``cudnn_log`` in profile.json) says which legacy algorithm or graph engine config
   ran each data gradient (``cudnnConvolutionBackwardData`` / ``conv_dgrad``) and filter gradient
   (``cudnnConvolutionBackwardFilter`` / ``conv_wgrad``); a Conv layer's backward call takes the
   choice for its convolution problem and direction, as the inference join does for the forward
   (:func:`benanza.profiles.profile.conv_engines`).

Sums: per iteration, each role's and phase's kernel time (``kind == "kernel"``; memcpys and memsets
apart, as ``benchmarks/train_step.py`` counts), then median and IQR over iterations (ms).
"""
from __future__ import annotations

import bisect
import collections
from dataclasses import dataclass, field, replace

import numpy as np

from benanza.profiles.trace import CpuOp, Iteration, Kernel, Trace
from benanza.spec import PROFILED_STEP_PHASES

PHASE_PREFIX = "benanza.phase:"
#: what a kernel of a training step does (module doc, step 4)
ROLES = ("forward", "loss", "backward", "loss_backward", "accumulate_grad", "optimizer", "zero_grad",
         "unjoined", "outside")
#: the host op autograd's engine opens around each node it runs
EVALUATE_PREFIX = "autograd::engine::evaluate_function: "


@dataclass(frozen=True)
class TrainKernel:
    """One GPU activity of a training trace. ``kernel``: index into :attr:`Trace.kernels`;
    ``kind``: ``kernel``, ``memset`` or ``memcpy``; ``iteration`` (None: outside every iteration);
    ``phase``: one of :data:`benanza.spec.PROFILED_STEP_PHASES` or None (launched outside every phase); ``role``: one of
    :data:`ROLES`; ``layer``: the ONNX layer index it computes (forward) or whose gradient it
    computes (backward), else None; ``node``: the autograd node that launched it
    (``ConvolutionBackward0``) or None; ``sequence``: that node's sequence number; ``forward_op``:
    the framework op of the node's forward op (``aten::conv2d``) or, for a forward kernel, its own
    framework op; ``dur_ms``: ms."""

    kernel: int
    name: str
    kind: str
    iteration: int | None
    phase: str | None
    role: str
    layer: int | None
    node: str | None
    sequence: int | None
    forward_op: str | None
    dur_ms: float


def _stats(xs: list[float]) -> dict:
    """``{"median_ms", "iqr_ms", "q1_ms", "q3_ms", "n"}`` of ``xs`` (ms; numpy's linear percentiles);
    None values without samples."""
    if not xs:
        return {"median_ms": None, "iqr_ms": None, "q1_ms": None, "q3_ms": None, "n": 0}
    q1, med, q3 = np.percentile(np.asarray(xs, dtype=float), [25, 50, 75])
    return {"median_ms": float(med), "iqr_ms": float(q3 - q1), "q1_ms": float(q1), "q3_ms": float(q3), "n": len(xs)}


@dataclass(frozen=True)
class TrainJoin:
    """The training join of one trace (module doc). ``kernels``: every GPU activity, trace order;
    ``iterations``: the iteration indices that have phase ranges; ``layer_names``: layer index ->
    name. Sums are per iteration, kernels only (``kind == "kernel"``), then median/IQR (ms)."""

    kernels: tuple[TrainKernel, ...]
    iterations: tuple[int, ...]
    layer_names: dict = field(default_factory=dict)
    notices: tuple[str, ...] = ()
    #: (layer, ``backward_data`` | ``backward_weight``) -> the
    #: :class:`~benanza.profiles.profile.ConvEngine` the framework ran (step 5; empty without a cuDNN log)
    conv_engines: dict = field(default_factory=dict)

    def _per_iteration(self, key, kinds=("kernel",)) -> dict:
        """key(kernel) -> a list of per-iteration sums (ms), one entry per iteration (0 where none)."""
        idx = {it: n for n, it in enumerate(self.iterations)}
        out: dict = collections.defaultdict(lambda: [0.0] * len(self.iterations))
        for k in self.kernels:
            if k.iteration in idx and k.kind in kinds:
                kk = key(k)
                if kk is not None:
                    out[kk][idx[k.iteration]] += k.dur_ms
        return out

    def step_ms(self, kinds=("kernel",)) -> dict:
        """The step's kernel time: the sum over an iteration's activities of ``kinds``, median/IQR."""
        return _stats(self._per_iteration(lambda k: "step", kinds).get("step", [0.0] * len(self.iterations)))

    def kernels_ms(self, select) -> dict:
        """The kernels ``select(kernel)`` keeps (``kind == "kernel"``): their time per iteration,
        median/IQR (ms); ``n`` 0 when the join has no iteration."""
        return _stats(self._per_iteration(lambda k: "x" if select(k) else None).get("x", [0.0] * len(self.iterations)))

    def phase_ms(self) -> dict:
        """Each phase of :data:`benanza.spec.PROFILED_STEP_PHASES` (and ``outside``): kernel time per iteration, median/IQR."""
        per = self._per_iteration(lambda k: k.phase or "outside")
        return {p: _stats(per.get(p, [0.0] * len(self.iterations))) for p in (*PROFILED_STEP_PHASES, "outside")}

    def role_ms(self) -> dict:
        """Each role of :data:`ROLES`: kernel time per iteration, median/IQR."""
        per = self._per_iteration(lambda k: k.role)
        return {r: _stats(per.get(r, [0.0] * len(self.iterations))) for r in ROLES}

    def comparable_ms(self) -> dict:
        """The step split as benanza's training step counts it (:class:`benanza.analysis.training.TrainingStep`):
        ``forward`` (the forward phase), ``loss`` (the loss's forward and its gradient),
        ``backward`` (the model's gradients: the backward phase without the loss's gradient, with
        autograd's AccumulateGrad and unjoined backward kernels), ``optimizer``, and ``other``
        (zero_grad and kernels outside every phase), per iteration, median/IQR."""
        group = {"forward": "forward", "loss": "loss", "loss_backward": "loss", "backward": "backward",
                 "accumulate_grad": "backward", "optimizer": "optimizer", "zero_grad": "other", "outside": "other"}

        def key(k):
            if k.role == "unjoined":
                return "backward" if k.phase == "backward" else "other"
            return group[k.role]
        per = self._per_iteration(key)
        return {g: _stats(per.get(g, [0.0] * len(self.iterations)))
                for g in ("forward", "loss", "backward", "optimizer", "other")}

    def layer_ms(self) -> list[dict]:
        """Per layer joined in the forward or the backward: ``layer``, ``name``, ``forward_ms`` and
        ``backward_ms`` (medians over iterations of the layer's kernel time in each), with the
        backward nodes that launched its gradient kernels; layer order."""
        fwd = self._per_iteration(lambda k: k.layer if k.role == "forward" else None)
        bwd = self._per_iteration(lambda k: k.layer if k.role == "backward" else None)
        nodes: dict = collections.defaultdict(set)
        for k in self.kernels:
            if k.role == "backward" and k.layer is not None and k.node:
                nodes[k.layer].add(k.node)
        out = []
        for i in sorted(set(fwd) | set(bwd)):
            out.append({"layer": i, "name": self.layer_names.get(i, str(i)),
                        "forward_ms": _stats(fwd.get(i, []))["median_ms"] or 0.0,
                        "backward_ms": _stats(bwd.get(i, []))["median_ms"] or 0.0,
                        "backward_nodes": sorted(nodes.get(i, ()))})
        return out

    def unjoined(self) -> list[dict]:
        """The kernels (name, role, phase, node, forward op, kernel time per iteration) that reached
        no layer in the forward or backward phase: forward kernels of no layer, backward kernels
        whose forward op matched no layer, AccumulateGrad's and unjoined ones, heaviest first."""
        n = max(len(self.iterations), 1)
        acc: dict = collections.defaultdict(float)
        for k in self.kernels:
            if k.kind != "kernel" or k.iteration not in self.iterations:
                continue
            if k.role in ("forward", "backward") and k.layer is None or k.role in ("accumulate_grad", "unjoined"):
                acc[(k.name[:120], k.role, k.phase, k.node, k.forward_op)] += k.dur_ms / n
        rows = [{"kernel": a, "role": r, "phase": p, "node": nd, "forward_op": fo, "ms": ms}
                for (a, r, p, nd, fo), ms in acc.items()]
        return sorted(rows, key=lambda d: -d["ms"])

    def to_dict(self) -> dict:
        return {"iterations": len(self.iterations), "step_kernel_ms": self.step_ms(),
                "step_memcpy_ms": self.step_ms(("memcpy",)), "step_memset_ms": self.step_ms(("memset",)),
                "phase_ms": self.phase_ms(), "role_ms": self.role_ms(), "comparable_ms": self.comparable_ms(),
                "layers": self.layer_ms(), "unjoined": self.unjoined(), "notices": list(self.notices),
                "conv_backward_engines": [{"layer": i, "phase": ph, "engine_config": e.engine_config, "api": e.api,
                                           "layout": e.layout, "tf32": e.tf32, "executions": e.executions}
                                          for (i, ph), e in sorted(self.conv_engines.items())]}


# ----------------------------------------------------------------------------------------- phases

def phase_ranges(trace: Trace) -> list[tuple[float, float, str, int | None]]:
    """The ``benanza.phase:NAME`` ranges of the trace: ``(start_ms, end_ms, name, iteration)``
    sorted by start; ``iteration``: the index of the iteration whose range holds its start."""
    starts = [it.start_ms for it in trace.iterations]
    out = []
    for op in trace.cpu_ops:
        if op.name.startswith(PHASE_PREFIX):
            j = bisect.bisect_right(starts, op.start_ms) - 1
            it = trace.iterations[j].index if j >= 0 and op.start_ms <= trace.iterations[j].end_ms else None
            out.append((op.start_ms, op.end_ms, op.name[len(PHASE_PREFIX):], it))
    return sorted(out)


def _launch_ms(trace: Trace, k: Kernel) -> float:
    """When ``k`` was launched: its runtime call's start, else its own start (ms)."""
    call = trace.launch_of(k)
    return call.start_ms if call is not None else k.start_ms


def _phase_at(ranges, starts, t: float) -> str | None:
    """The name of the phase range holding host time ``t`` (ms), None outside every range (the
    ranges of one thread do not overlap)."""
    j = bisect.bisect_right(starts, t) - 1
    if j >= 0 and ranges[j][0] <= t <= ranges[j][1]:
        return ranges[j][2]
    return None


def _forward_iterations(trace: Trace, ranges, launch: dict) -> tuple[Iteration, ...]:
    """One :class:`Iteration` per forward phase range: its host range and the kernels launched in it."""
    fw = [r for r in ranges if r[2] == "forward"]
    fstarts = [r[0] for r in fw]
    members: list[list[int]] = [[] for _ in fw]
    for k in trace.kernels:
        t = launch[k.index]
        j = bisect.bisect_right(fstarts, t) - 1
        if j >= 0 and t <= fw[j][1]:
            members[j].append(k.index)
    return tuple(Iteration(index=it if it is not None else n, name="forward", start_ms=s, end_ms=e,
                           kernels=tuple(members[n])) for n, (s, e, _, it) in enumerate(fw))


# ----------------------------------------------------------------------------- autograd's numbers

def _is_backward_op(trace: Trace, op: CpuOp) -> bool:
    """A backward node's op: it records a forward thread (>= 1), or runs under the engine's
    ``evaluate_function`` op."""
    if op.fwd_thread:
        return True
    return any(a.name.startswith(EVALUATE_PREFIX) for a in trace.ancestors(op)[1:])


def _node_of(trace: Trace, op: CpuOp | None) -> tuple[CpuOp | None, CpuOp | None]:
    """(the backward node's op around ``op``, the enclosing ``evaluate_function`` op); None where
    there is none. The node's op is the outermost op with a sequence number inside the engine's
    ``evaluate_function`` op (ops inside the node that record numbers of their own, as under
    ``create_graph=True``, are not it); for a kernel launched by that op outside the node (PyTorch
    2.11 records the node's number and forward thread on it too), the ``evaluate_function`` op;
    without that op, the innermost one recording a forward thread."""
    if op is None:
        return None, None
    node = ev = None
    for a in trace.ancestors(op):  # innermost first
        if a.name.startswith(EVALUATE_PREFIX):
            ev = a
            break
        if a.sequence is not None:
            node = a
    if ev is None:
        node = next((a for a in trace.ancestors(op) if a.sequence is not None and a.fwd_thread), None)
    elif node is None and ev.sequence is not None:
        node = ev  # PyTorch 2.11 records the node's number on the evaluate_function op too
    return node, ev


def forward_ops_by_sequence(trace: Trace) -> dict[tuple[str, int], CpuOp]:
    """(host thread, sequence number) -> the op that created that autograd node: of the forward
    ops (with a sequence number, not a backward node's) sharing a number on a thread, the last to
    start (module doc, step 3)."""
    out: dict[tuple[str, int], CpuOp] = {}
    for op in trace.cpu_ops:  # in start order: a later op replaces an earlier one
        if op.sequence is not None and not _is_backward_op(trace, op):
            out[(op.thread, op.sequence)] = op
    return out


def _thread_map(trace: Trace, fwd: dict[tuple[str, int], CpuOp]) -> dict[int | None, str]:
    """Backward ``Fwd thread id`` -> the host thread of the forward ops holding the most of its
    sequence numbers (module doc)."""
    seqs: dict = collections.defaultdict(set)
    for op in trace.cpu_ops:
        if op.sequence is not None and _is_backward_op(trace, op):
            seqs[op.fwd_thread].add(op.sequence)
    by_thread: dict = collections.defaultdict(set)
    for th, s in fwd:
        by_thread[th].add(s)
    out = {}
    for t, ss in seqs.items():
        best = max(by_thread, key=lambda th: (len(ss & by_thread[th]), th), default=None)
        if best is not None and ss & by_thread[best]:
            out[t] = best
    return out


# ------------------------------------------------------------------------------------------ join

@dataclass
class _Context:
    """What the join of one trace needs: phase ranges, the forward join's op -> layer and kernel ->
    layer, the forward ops by (thread, sequence number) and the forward threads."""

    trace: Trace
    ranges: list
    starts: list
    op_layer: dict
    kernel_layer: dict
    fwd_ops: dict
    threads: dict
    launch: dict
    forward_phase: dict = field(default_factory=dict)

    def forward_of(self, node: CpuOp) -> tuple[str, str | None, int | None] | None:
        """(the framework op of the forward op that created ``node``, the phase it ran in, its
        layer (forward phase only)), or None when the trace has no such forward op."""
        from benanza.profiles.join import framework_op

        th = self.threads.get(node.fwd_thread)
        f = self.fwd_ops.get((th, node.sequence)) if th is not None else None
        if f is None:
            return None
        ffop = framework_op(self.trace, f)
        fph = self.forward_phase.get(f.index)
        if fph is None:
            fph = self.forward_phase[f.index] = _phase_at(self.ranges, self.starts, f.start_ms)
        return ffop.name, fph, self.op_layer.get(ffop.index) if fph == "forward" else None


def _context(trace: Trace, ml, paths) -> _Context:
    from benanza.profiles.join import join

    ranges = phase_ranges(trace)
    starts = [r[0] for r in ranges]
    launch = {k.index: _launch_ms(trace, k) for k in trace.kernels}
    jr = join(replace(trace, iterations=_forward_iterations(trace, ranges, launch)), ml, paths)
    fwd_ops = forward_ops_by_sequence(trace)
    return _Context(trace, ranges, starts, {om.op: om.layer for om in jr.ops if om.layer is not None},
                    {kj.kernel: kj.layer for kj in jr.kernels}, fwd_ops, _thread_map(trace, fwd_ops), launch)


def backward_nodes(trace: Trace, ml, paths: dict[int, str] | None = None) -> list[dict]:
    """Every backward node the trace ran (the op with a sequence number directly inside an
    ``evaluate_function`` op), with what step 3 of the module doc joins it to: ``node`` (its
    name), ``sequence``, ``forward_op`` (the framework op that created it, None when the trace has
    none), ``forward_phase`` and ``layer`` (None unless a forward-phase op matched a layer), in
    trace order. What :func:`train_join` gives each backward kernel, without kernels (a CPU trace)."""
    ctx = _context(trace, ml, paths)
    out = []
    for op in trace.cpu_ops:
        par = trace.cpu_ops[op.parent] if op.parent is not None else None
        if op.sequence is None or par is None or not par.name.startswith(EVALUATE_PREFIX):
            continue
        f = ctx.forward_of(op)
        out.append({"node": op.name, "sequence": op.sequence, "forward_op": f[0] if f else None,
                    "forward_phase": f[1] if f else None, "layer": f[2] if f else None})
    return out


def train_join(trace: Trace, ml, paths: dict[int, str] | None = None) -> TrainJoin:
    """Join every GPU activity of a training ``trace`` (module doc) with the layers of ``ml`` (a
    :class:`benanza.processing.model.ModelLayers` at the profiled batch; ``paths``: layer index ->
    module, as for :func:`benanza.profiles.join.join`). Never raises for a trace that does not fit:
    unjoined kernels stay, as such, and a notice says when the trace has no phase ranges or no
    sequence numbers."""
    from benanza.profiles.join import framework_op

    ctx = _context(trace, ml, paths)
    phase_of = {i: _phase_at(ctx.ranges, ctx.starts, t) for i, t in ctx.launch.items()}
    it_of = {i: it.index for it in trace.iterations for i in it.kernels}
    notices = []
    if not ctx.ranges:
        notices.append("the trace has no benanza.phase:NAME ranges: not a training step recorded by "
                       "benanza torch --train (every kernel is outside a phase)")
    if ctx.ranges and not any(op.sequence is not None for op in trace.cpu_ops):
        notices.append("the trace has no autograd sequence numbers: backward kernels cannot be joined to layers")
    out = []
    for k in trace.kernels:
        ph = phase_of[k.index]
        op = trace.op_of(k)
        layer = node_name = seq = fwd_name = None
        if ph in ("forward", "loss", "optimizer", "zero_grad"):
            role = ph
            fop = framework_op(trace, op)
            fwd_name = fop.name if fop is not None else None
            if ph == "forward":
                layer = ctx.kernel_layer.get(k.index)
        elif ph == "backward":
            node, ev = _node_of(trace, op)
            f = None
            if node is not None:
                node_name, seq = node.name.removeprefix(EVALUATE_PREFIX), node.sequence
                f = ctx.forward_of(node)
            if f is not None:
                fwd_name, fph, layer = f
                role = "loss_backward" if fph == "loss" else "backward"
            elif node is None and ev is not None and "AccumulateGrad" in ev.name:
                role, node_name = "accumulate_grad", ev.name.removeprefix(EVALUATE_PREFIX)
            else:
                role = "unjoined"
                if node_name is None and ev is not None:
                    node_name = ev.name.removeprefix(EVALUATE_PREFIX)
        else:
            role = "outside"
        out.append(TrainKernel(kernel=k.index, name=k.name, kind=k.kind, iteration=it_of.get(k.index), phase=ph,
                               role=role, layer=layer, node=node_name, sequence=seq, forward_op=fwd_name,
                               dur_ms=k.dur_ms))
    its = tuple(sorted({r[3] for r in ctx.ranges if r[3] is not None}))
    return TrainJoin(kernels=tuple(out), iterations=its, layer_names={ly.index: ly.name for ly in ml.layers},
                     notices=tuple(notices))


# ------------------------------------------------------------------------- backward engines

#: the training step's backward phase (:class:`benanza.analysis.training.BackwardTime`) of each
#: backward direction of a convolution in the cuDNN log (:attr:`benanza.profiles.cudnn_log.Execution.direction`)
BACKWARD_PHASES = {"backward_data": "backward_data", "backward_filter": "backward_weight"}


def conv_backward_engines(ml, log) -> dict:
    """(layer index, phase) -> the :class:`~benanza.profiles.profile.ConvEngine` the framework ran
    for that Conv layer's data gradient (phase ``backward_data``) or filter gradient
    (``backward_weight``), from the cuDNN log ``log`` (a :class:`~benanza.profiles.cudnn_log.CudnnLog`)
    of the training run; matched by the layer's convolution problem (x, w, pads, strides,
    dilations, groups) and the call's direction, the choice being the config run most often
    (module doc, step 5). Layers whose problem the log does not have are left out."""
    from benanza.profiles.profile import conv_engines

    out = {}
    for direction, phase in BACKWARD_PHASES.items():
        for i, e in conv_engines(ml, log, direction).items():
            out[(i, phase)] = e
    return out


# ------------------------------------------------------------------------------- profile folder

def load_train_join(folder, ml, model=None) -> tuple[TrainJoin, dict]:
    """Read a training profile folder (``benanza torch SPEC --train``; format in
    :mod:`benanza.profiles`, with ``train`` in profile.json) and join its trace with ``ml`` (the
    export processed at the profile's batch; ``model``: the ONNX file for the module names, default
    ``ml.path``). Returns the join and profile.json's document. Raises
    :class:`~benanza.errors.ProfileError` for a bad folder or trace, a profile taken at another
    batch or of another model (its ``model_sha256``), or one that is not of training steps."""
    from pathlib import Path

    from benanza.errors import ProfileError
    from benanza.profiles.join import layer_paths, trace_has_scopes
    from benanza.profiles.profile import read_profile_json
    from benanza.profiles.trace import read_trace

    p = Path(folder)
    d = read_profile_json(p)
    f = p / "profile.json"
    if d["batch"] != ml.batch:
        raise ProfileError(f"{f}: the profile was taken at batch {d['batch']}, not {ml.batch}")
    if not d.get("train"):
        raise ProfileError(f"{f}: not a profile of training steps (no \"train\"): profile with benanza torch --train")
    want = d.get("model_sha256")
    if want and want != ml.sha256:
        raise ProfileError(f"{f}: the profile was taken of another model (its model_sha256 {str(want)[:12]}... "
                           f"is not {Path(ml.path).name}'s {ml.sha256[:12]}...)")
    tname = (d.get("files") or {}).get("trace") or "trace.json.gz"
    trace = read_trace(p / tname)
    paths = layer_paths(ml, model) if trace_has_scopes(trace) else None
    tj = train_join(trace, ml, paths)
    lname = (d.get("files") or {}).get("cudnn_log")
    if lname and (p / lname).is_file():
        from benanza.profiles.cudnn_log import read_cudnn_log

        log = read_cudnn_log(p / lname)
        eng = conv_backward_engines(ml, log)
        notes = [f"{log.path}: the cuDNN log is truncated (last record dropped); backward engines found for "
                 f"{len(eng)} convolution gradients"] if log.truncated else []
        tj = replace(tj, conv_engines=eng, notices=tj.notices + tuple(notes))
    elif lname:
        tj = replace(tj, notices=tj.notices + (f"{p / lname}: no such file: the backward convolutions' engines "
                                               f"are not known (cudnn.benchmark not estimated)",))
    return tj, d
