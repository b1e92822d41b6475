"""The backward calls of a training step (docs/training.md): which gradient each forward layer needs, from
its kind's :attr:`benanza.kinds.base.Kind.backward`. One plan serves the generator (the backward
jobs of ``benanza bench --train``) and the analysis (the training-step LBL), so both count the same
calls.

A training step is the forward pass, the loss, the backward pass and the optimizer's update
(PyTorch: ``loss.backward()`` then ``optimizer.step()``). Autograd computes, for every layer on the
path from a trainable parameter to the loss, the gradient of its input (``backward_data``) unless
nothing upstream needs it, and the gradient of its weights and bias (``backward_weight``).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path

from benanza import kinds as L
from benanza.processing.model import ModelLayers
from benanza.kinds.onnx_map import TP
from benanza.lazy import LazyModule

onnx = LazyModule("onnx")


@dataclass(frozen=True)
class BackwardCall:
    """One call of a training step that a forward layer adds: the gradient ``phase``
    (``backward_data`` or ``backward_weight``, :data:`benanza.kinds.TRAINING_PHASES`) of forward
    layer ``layer`` (its index in :attr:`ModelLayers.layers`), computed as ``config`` (a layer
    config of a backward kind, or of a forward kind: a GEMM's gradients are GEMMs); or, with phase
    ``forward``, the training-mode forward that replaces the layer's inference call in a training
    step (a BatchNormalization that normalises with the batch's statistics and saves them, a
    Dropout that draws its mask)."""

    layer: int
    phase: str
    config: L.LayerConfig
    #: a gradient accumulation: the sum of the gradients of one of ``layer``'s outputs that several
    #: layers read (autograd's InputBuffer adds each further gradient into the first: one elementwise
    #: add of the tensor's shape per extra consumer; torch/csrc/autograd/input_buffer.cpp)
    accumulation: bool = False
    #: an accumulation's tensor (the output of ``layer`` whose gradients it sums)
    tensor: str = ""
    #: a fused alternative's call (``TrainingPlan.fused``): the layers of its fusion group
    fusion: tuple[int, ...] = ()


@dataclass
class TrainingPlan:
    """The backward pass of one model at one batch.

    - ``calls``: every backward call, in reverse topological order of the forward layers (the order
      autograd runs them), data gradient before weight gradient, a layer's gradient accumulations
      (:func:`gradient_accumulations`) before its own calls; and the training-mode forward
      calls (phase ``forward``) of the layers whose training forward differs from inference
      (:meth:`train_forward`);
    - ``no_backward``: layers whose gradient benanza cannot bound yet (their kind has no backward,
      or the layer itself is unsupported): a training step with any is incomplete;
    - ``pass_through``: layers whose gradient costs nothing (zero-cost layers such as Reshape, and
      kinds whose backward is the identity, such as an Add of two same-shape tensors);
    - ``data_not_needed``: layers whose inputs are all model inputs or constants: autograd computes
      no input gradient for them (the first convolution of a CNN), so their ``backward_data`` calls
      are left out, but for a call whose config says ``computes_weight_gradients`` (one call for the
      input's and the weights' gradients: BatchNormBwd; or one the weight gradient needs: an RNN's
      cudnnRNNBackwardData_v8, RNNTrainConfig.computes_weight_gradients).
    - ``no_gradient``: layer index -> why autograd computes no gradient for it (:func:`no_gradient`): its
      outputs are integers or booleans (a router's expert ids, their sort, the tokens per expert), or it
      is computed from such tensors and constants only, or no gradient reaches its outputs (a top-k
      whose values no one reads). No call, and the step stays complete: unlike ``no_backward``, nothing
      is missing;
    - ``fused``: the training calls of the fusion candidates of :data:`FUSED_BACKWARD_KINDS` (a fused
      attention: its training-mode forward, phase ``forward``, and its one backward call), each with
      ``layer`` the group's first layer and ``fusion`` its layers: the alternative to the group's layers'
      own calls in ``calls`` (:func:`fused_alternatives`), which the step takes where it is faster
      (:func:`benanza.analysis.training.training_step`).
    """

    calls: list[BackwardCall] = field(default_factory=list)
    no_backward: list[int] = field(default_factory=list)
    pass_through: list[int] = field(default_factory=list)
    data_not_needed: list[int] = field(default_factory=list)
    no_gradient: dict[int, str] = field(default_factory=dict)
    fused: list[BackwardCall] = field(default_factory=list)
    #: each fused group (its layers) -> what it is: the fusion's kind, or "erf-GELU" (the GELU of a
    #: GemmAct candidate, :func:`_gelu_of_gemm_act`)
    fused_kinds: dict[tuple[int, ...], str] = field(default_factory=dict)

    def configs(self) -> dict[str, L.LayerConfig]:
        """Each distinct backward (and training-forward) config by key, the fused alternatives' too."""
        return {c.config.key: c.config for c in self.calls + self.fused}

    def train_forward(self) -> dict[int, list[BackwardCall]]:
        """Forward layer index -> its training-mode forward calls (phase ``forward``): in a training
        step they replace the layer's inference-mode forward."""
        out: dict[int, list[BackwardCall]] = {}
        for c in self.calls:
            if c.phase == "forward":
                out.setdefault(c.layer, []).append(c)
        return out


#: fusion kinds whose training calls the plan lists (``TrainingPlan.fused``): fused attention, whose
#: backward reads the forward's softmax statistics instead of the probabilities the unfused layers keep
#: (its alternative includes that training forward), and a decomposed LayerNorm (ReduceMean, Sub, Pow,
#: ReduceMean, Add, Sqrt, Div, Mul, Add: its ReduceMeans have no backward of their own; the fused
#: training forward saves mean and inverse deviation for LayerNormBwd), and a decomposed RMSNorm (Pow,
#: ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul: the same, its training forward saves the inverse root
#: mean square for RMSNormBwd). The erf-GELU inside a GemmAct candidate is a group of its own
#: (:func:`_gelu_of_gemm_act`)
FUSED_BACKWARD_KINDS = ("SDPA", "LayerNorm", "RMSNorm")

#: kinds whose data-gradient call differentiates the layer's data input, which may be a trainable
#: table (a Gather's data: an embedding's weight): when it is one (:func:`training_plan`), the call
#: is that parameter's gradient
TABLE_KINDS = ("Gather",)


def training_plan(ml: ModelLayers) -> TrainingPlan:
    """The backward calls of ``ml``'s layers (:class:`TrainingPlan`). A zero-cost layer is a pass-through
    unless it has a training-mode call (``Layer.train_config``: a Dropout exported for inference),
    which the plan times as the layer's ``forward`` call followed by that config's kind's backward
    calls. A kind's ``backward`` that
    returns None or raises ValueError (a config it cannot differentiate) counts the layer as
    ``no_backward``, never as free. A kind's ``backward`` may return a call of phase ``forward``:
    the layer's training-mode forward, kept whether or not the input gradient is needed. Raises
    ValueError for a call of another phase (``optimizer``: the optimizer is not a layer's).

    A layer of :data:`TABLE_KINDS` whose data is a trainable parameter (an initializer at a
    parameter input of :data:`PARAMETER_INPUTS`: an embedding lookup ``Gather(weight, token_ids)``)
    has its ``backward_data`` calls counted as ``backward_weight`` (the table's gradient, PyTorch's
    embedding_dense_backward), needed whatever its other inputs are; the model is read for its
    parameters' names only when it has such a layer with a static input (ModelError for an
    unreadable file)."""
    plan = TrainingPlan()
    tables_box: list = [None]  # the model's parameter names, read once when a table kind needs them
    grads: dict[int, bool] = {}  # layer index -> its input gradients are computed (or passed through)
    readers = _readers(ml)
    plan.no_gradient = no_gradient(ml, readers)
    for ly in reversed(ml.layers):
        if ly.index in plan.no_gradient:
            grads[ly.index] = False
            continue
        for name, cfg in _accumulations(ml, ly, readers, grads):
            plan.calls.append(BackwardCall(ly.index, "backward_data", cfg, accumulation=True, tensor=name))
        n_before = len(plan.calls)
        _plan_layer(ml, ly, plan, tables_box)
        grads[ly.index] = ly.index not in plan.no_backward and (
            ly.index in plan.pass_through or any(c.phase == "backward_data" for c in plan.calls[n_before:]))
    for f in getattr(ml, "fusions", ()):
        layers, cfg = tuple(f.layers), f.config
        if L.training_counts_layers(cfg):
            if not (getattr(cfg, "residual", False) and len(layers) > 2):
                continue
            # a decomposed norm that took in its residual Add (the group's first layer): the Add counts
            # layer by layer, the norm's layers take the decomposed norm's fused training calls
            layers, cfg = layers[1:], dataclasses.replace(cfg, residual=False, keep_sum=False)
        if cfg.kind not in FUSED_BACKWARD_KINDS and not _is_swiglu(cfg):
            layers, cfg = _gelu_of_gemm_act(ml, f)
        kind = L.REGISTRY.get(cfg.kind) if cfg is not None else None
        if kind is None or kind.backward is None:
            continue
        try:
            fcalls = kind.backward(cfg) or ()
        except (ValueError, NotImplementedError):
            continue
        plan.fused += [BackwardCall(layers[0], phase, c, fusion=layers) for phase, c in fcalls]
        plan.fused_kinds[layers] = ("erf-GELU" if cfg.kind != f.config.kind else "SwiGLU" if _is_swiglu(cfg)
                                    else cfg.kind)
    return plan


def _is_swiglu(cfg) -> bool:
    """SwiGLU's gate (an Elementwise swiglu fusion candidate of Sigmoid -> Mul -> Mul): its backward is
    one call for both gradients (SwiGLUBwd), the alternative to the three layers' own calls."""
    return cfg.kind == "Elementwise" and getattr(cfg, "op", "") == "swiglu"


def _gelu_of_gemm_act(ml: ModelLayers, f) -> tuple[tuple[int, ...], L.LayerConfig | None]:
    """The erf-GELU decomposition inside a GemmAct candidate (GEMM, its bias Add, then Div, Erf, Add,
    Mul, Mul: :func:`benanza.kinds.gemm_act.find_gemm_act`) as its own group with the GELU's
    UnaryConfig, whose backward is one gelu_backward call (PyTorch's nn.GELU); ((), None) for any
    other fusion. Its forward stays the GemmAct's (cuBLASLt's GELU_AUX epilogue keeps the GELU's input
    for a backward)."""
    if f.config.kind != "GemmAct" or getattr(f.config, "activation", "") != "gelu":
        return (), None
    head = ml.layers[f.layers[0]]
    n_gemm = 2 if f.config.gemm.bias != "none" and getattr(head.config, "bias", "none") == "none" else 1
    gelu = tuple(f.layers[n_gemm:])
    last = ml.layers[gelu[-1]] if gelu else None
    if len(gelu) < 2 or "Erf" not in {ml.layers[i].op_type for i in gelu} or not last.output_shapes \
            or last.output_shapes[0] is None:
        return (), None  # a Gelu op is one layer already: its own backward is one call
    return gelu, L.UnaryConfig(shape=tuple(last.output_shapes[0]), op="gelu")


@dataclass
class FusedAlternative:
    """One fusion group's fused training calls against the calls of ``plan.calls`` they replace:
    ``layers`` (the group), ``calls`` (its :attr:`TrainingPlan.fused` calls), ``replaced`` (indices into
    ``plan.calls``: the group's layers' backward calls and the gradient accumulations the fused call
    makes needless) and ``forward`` (True when the alternative has its own training forward, which
    then replaces the group's forward layers too: fused attention's, which saves the softmax
    statistics its backward reads)."""

    layers: tuple[int, ...]
    kind: str
    calls: list[BackwardCall]
    replaced: list[int]
    forward: bool
    #: the group's layers without a backward of their own (``plan.no_backward``): the layer-by-layer
    #: way cannot be bounded, the fused one can
    no_backward: list[int] = field(default_factory=list)


def fused_alternatives(ml: ModelLayers, plan: TrainingPlan) -> list[FusedAlternative]:
    """Each fusion group of ``plan.fused`` as a :class:`FusedAlternative`. An accumulation is
    needless when the fused call reads its tensor where several of the group's layers did (the
    erf-GELU's input, read by its Div and its last Mul: one read, no add), or when the tensor is
    internal to the group."""
    groups: dict[tuple[int, ...], list[BackwardCall]] = {}
    for c in plan.fused:
        groups.setdefault(c.fusion, []).append(c)
    readers = _readers(ml)
    by_tensor: dict[str, list[int]] = {}  # an accumulated tensor -> its accumulations' indices
    for k, c in enumerate(plan.calls):
        if c.accumulation:
            by_tensor.setdefault(c.tensor, []).append(k)
    out = []
    for layers, calls in groups.items():
        members = set(layers)
        replaced = [k for k, c in enumerate(plan.calls)
                    if c.layer in members and c.phase != "forward" and not c.accumulation]
        for name, ks in by_tensor.items():
            rs = {j for j, _ in readers.get(name, ())}
            inside = len(rs & members)
            producer = plan.calls[ks[0]].layer
            if producer in members and producer != layers[-1]:
                replaced += ks  # a tensor inside the group: its gradients never leave the fused call
            elif inside > 1:
                replaced += ks[:inside - 1]  # the group's reads become one
        out.append(FusedAlternative(layers, plan.fused_kinds.get(layers, "?"), calls, sorted(set(replaced)),
                                    any(c.phase == "forward" for c in calls),
                                    [i for i in layers if i in plan.no_backward]))
    return out


def _readers(ml: ModelLayers) -> dict[str, list[tuple[int, int]]]:
    """Tensor name -> the (layer index, input position) pairs that read it."""
    out: dict[str, list[tuple[int, int]]] = {}
    for ly in ml.layers:
        for k, name in enumerate(ly.inputs):
            if name:
                out.setdefault(name, []).append((ly.index, k))
    return out


#: (kind, input position) that carry no gradient: a Gather's indices, a Where's condition
NO_GRADIENT_INPUTS = {("Gather", 1), ("GatherBwd", 1), ("Where", 0)}

#: why :func:`no_gradient` finds a layer without a gradient (``TrainingPlan.no_gradient``'s values)
NO_GRADIENT_REASONS = {
    "integer": "integer or boolean outputs (autograd differentiates floating-point tensors only)",
    "constant": "computed from integer tensors and constants only (none of its inputs requires a gradient)",
    "unread": "no gradient reaches its outputs (only its integer outputs are read, or only by layers "
              "that take no gradient)",
}
#: unary ops whose output is a bool whatever the input (:data:`benanza.kinds.unary.UNARY_OPS`)
_BOOL_UNARY = ("is_inf", "is_nan", "not")


def no_gradient(ml: ModelLayers, readers: dict | None = None) -> dict[int, str]:
    """Layer index -> why autograd computes no gradient for it (a value of :data:`NO_GRADIENT_REASONS`),
    as PyTorch decides which tensors require a gradient (torch/csrc/autograd/function.h,
    ``compute_requires_grad``: an op's output requires one when an input does; only floating-point
    tensors can, and a parameter does): forward, a layer whose outputs are all integers or booleans
    (a mixture of experts' expert ids, their sort, the tokens per expert: int TopK, int Scatter,
    NonZero, OneHot, int Reduce/Clip, comparisons), and one whose inputs carry no gradient (computed
    from such tensors and constants only: torch's ``histc`` of the expert ids, exported as Cast, Mul,
    Floor, Min, Where and a ScatterElements add) unless it may read a parameter (an op of
    :data:`PARAMETER_INPUTS` with a constant input that is not a scalar); backward, a layer whose
    floating-point outputs no layer differentiates (a top-k of which only the indices are read:
    DeepSeek's group-limited router). A model input counts as carrying a gradient unless the layer
    reading it says it is an integer (a Cast from int64): the plan's ``data_not_needed`` leaves out
    what a model input does not need. The model file is read (its outputs) only for a layer whose
    read outputs take no gradient while another of its outputs is read by no layer; ModelError for
    an unreadable file then."""
    readers = _readers(ml) if readers is None else readers
    floats: dict[str, bool] = {}
    carries: dict[str, bool] = {}
    out: dict[int, str] = {}
    for ly in ml.layers:
        kinds = _output_floats(ly, floats)
        fed = _may_read_parameter(ly) or (_reads_floats(ly) and any(carries.get(t, True) for t in ly.inputs if t))
        for t, f in zip(ly.outputs, kinds):
            floats[t], carries[t] = f, f and fed
        if not any(kinds):
            out[ly.index] = NO_GRADIENT_REASONS["integer"]
        elif not fed:
            out[ly.index] = NO_GRADIENT_REASONS["constant"]
    outputs_box: list = [None]
    for ly in reversed(ml.layers):
        live = [t for t in ly.outputs if t and carries.get(t)]
        if ly.index in out or not live:
            continue
        read = [t for t in live if readers.get(t)]
        if any(j not in out and (_kind_of(ml.layers[j]), k) not in NO_GRADIENT_INPUTS
               for t in read for j, k in readers[t]):
            continue
        unread = [t for t in ly.outputs if t and not readers.get(t)]
        if unread and (len(unread) == len([t for t in ly.outputs if t]) or _any_model_output(ml, unread, outputs_box)):
            continue  # a model output: the loss, or an output of the model's that stays conservatively live
        out[ly.index] = NO_GRADIENT_REASONS["unread"]
    return out


def _kind_of(ly) -> str:
    return ly.config.kind if ly.config is not None else ly.op_type


def _output_floats(ly, floats: dict[str, bool]) -> tuple[bool, ...]:
    """Whether each of ``ly``'s outputs is a floating-point tensor, from its config (``floats``: the
    tensors before it): TopK's values (float data) and its int64 indices; a Cast's or an integer unary
    op's destination; a config of an integer element type (``dtype``); NonZero's coordinates; a view
    (no config) its input's type; else :func:`_float_output`."""
    cfg, n = ly.config, len(ly.outputs)
    if cfg is None:
        first = next((t for t in ly.inputs if t), None)
        return (floats.get(first, True) if ly.status == "zero_cost" and first else True,) * n
    if cfg.kind == "TopK":
        return (not cfg.dtype,) + (False,) * (n - 1)
    if cfg.kind == "Unary":
        ints = cfg.dst in L.STORED_TYPES or (cfg.op != "cast" and cfg.src in L.STORED_TYPES)
        return (not ints and cfg.op not in _BOOL_UNARY,) * n
    if cfg.kind == "NonZero" or getattr(cfg, "dtype", "") in L.STORED_TYPES:
        return (False,) * n
    return (_float_output(ly),) * n


def _reads_floats(ly) -> bool:
    """False for a layer whose config says its input is an integer or bool (a Cast from int64, an
    integer unary op): its inputs carry no gradient, a model input's included."""
    cfg = ly.config
    return not (cfg is not None and cfg.kind == "Unary" and cfg.src in L.STORED_TYPES)


def _may_read_parameter(ly) -> bool:
    """An op of :data:`PARAMETER_INPUTS` with a constant input, not a scalar one of an elementwise op
    (:func:`_scalar_constants_only`): the constant may be a trainable parameter, whose gradient the
    layer's output then carries."""
    return bool(ly.static_inputs) and ly.op_type in PARAMETER_INPUTS and not _scalar_constants_only(ly, ly.config)


def _any_model_output(ml: ModelLayers, names: list[str], box: list) -> bool:
    """Is any of ``names`` an output of the model's graph (``box[0]``: the graph's output names once
    read)? True when the file cannot say (no path): an unread output then counts as the model's."""
    if box[0] is None:
        if not ml.path:
            return True
        from benanza.errors import ModelError

        try:
            m = onnx.load(str(ml.path), load_external_data=False)
        except Exception as e:  # onnx raises DecodeError, OSError, ...
            raise ModelError(f"{ml.path}: cannot read the ONNX file ({type(e).__name__})") from None
        box[0] = {o.name for o in m.graph.output}
    return any(n in box[0] for n in names)


def _float_output(ly) -> bool:
    """Can ``ly``'s output carry a gradient (a floating-point tensor)? Not a comparison's or a
    logical op's bool, not an integer elementwise op's, not an arg-max's indices."""
    cfg = ly.config
    if cfg is None:
        return ly.status == "zero_cost"
    if cfg.kind == "Elementwise":
        from benanza.kinds.elementwise import ELEMENTWISE_OPS

        return not ELEMENTWISE_OPS.get(cfg.op, ("", 1, False))[2] and not getattr(cfg, "dtype", "")
    if cfg.kind == "Reduce":
        return not str(getattr(cfg, "op", "")).startswith("arg")
    return True


def gradient_accumulations(ml: ModelLayers, ly, readers: dict, grads: dict[int, bool]) -> list[L.LayerConfig]:
    """:func:`_accumulations`' configs."""
    return [cfg for _, cfg in _accumulations(ml, ly, readers, grads)]


def _accumulations(ml: ModelLayers, ly, readers: dict, grads: dict[int, bool]) -> list[tuple[str, L.LayerConfig]]:
    """(tensor name, config) of the gradient accumulations of layer ``ly``'s outputs: for an output that ``n`` > 1 later
    layers differentiate (``grads``: the layers already planned, True where their input gradients
    are computed or passed through; an input a kind has no gradient for, :data:`NO_GRADIENT_INPUTS`,
    and a layer whose output has none, a comparison's, do not count), ``n - 1`` elementwise adds
    of its shape in the model's float type, as autograd runs them (torch/csrc/autograd/input_buffer.cpp, ``InputBuffer::add``: the second gradient and
    each later one added into the buffer). A residual block's input (read by its first convolution
    and by the shortcut's Add) has one. An output of unknown shape gets none."""
    if ly.status not in ("benchmark", "zero_cost") or not _float_output(ly):
        return []
    out = []
    for name, shape in zip(ly.outputs, ly.output_shapes):
        if not name or shape is None or not all(isinstance(d, int) and d > 0 for d in shape):
            continue
        n = 0
        for j, k in readers.get(name, ()):
            c = ml.layers[j].config
            kind = c.kind if c is not None else ml.layers[j].op_type
            if grads.get(j) and (kind, k) not in NO_GRADIENT_INPUTS and _float_output(ml.layers[j]):
                n += 1
        out += [(name, L.ElementwiseConfig(op="add", a=tuple(shape), b=tuple(shape)))] * max(0, n - 1)
    return out


def _plan_layer(ml: ModelLayers, ly, plan: TrainingPlan, tables_box: list) -> None:
    """:func:`training_plan`'s calls for one layer ``ly`` (``tables_box[0]``: the model's parameter
    names once read, or None; updated when read here)."""
    # a layer free in inference but not in training (Dropout): its training call, then its backward
    train = getattr(ly, "train_config", None) if ly.status == "zero_cost" else None
    if ly.status == "zero_cost" and train is None:
        plan.pass_through.append(ly.index)
        return
    lcfg = train if train is not None else ly.config
    kind = L.REGISTRY.get(lcfg.kind) if lcfg is not None else None
    if (ly.status != "benchmark" and train is None) or kind is None or kind.backward is None:
        plan.no_backward.append(ly.index)
        return
    try:
        calls = kind.backward(lcfg)
    except (ValueError, NotImplementedError):
        calls = None
    if calls is None:  # this config has no backward in benanza (e.g. an elementwise Div)
        plan.no_backward.append(ly.index)
        return
    calls = ((("forward", train),) if train is not None else ()) + tuple(calls)
    if not calls:
        plan.pass_through.append(ly.index)
        return
    needs_data = bool(ml.edges.get(ly.index))  # some input comes from another layer
    table = False
    if lcfg.kind in TABLE_KINDS and ly.static_inputs:
        if tables_box[0] is None:
            tables_box[0] = set(_parameters(ml.path))
        table = any(name in tables_box[0] for name in ly.static_inputs)
    if not needs_data and not table:
        plan.data_not_needed.append(ly.index)
    constants = _scalar_constants_only(ly, lcfg)
    for phase, cfg in calls:
        if phase not in L.TRAINING_PHASES[:3]:
            raise ValueError(f"{lcfg.kind}.backward gave phase {phase!r}")
        if constants and phase == "backward_weight":
            continue  # a scalar constant (GELU's 0.5, an attention's scale) has no gradient
        if table and phase == "backward_data":
            phase = "backward_weight"
        if phase == "backward_data" and not needs_data and not getattr(cfg, "computes_weight_gradients", False):
            continue  # (a call the weight gradients need stays: BatchNormBwd, an RNN's data gradient)
        plan.calls.append(BackwardCall(ly.index, phase, cfg))


def _scalar_constants_only(ly, cfg) -> bool:
    """An Elementwise layer with one constant operand (an initializer, ``Layer.static_inputs``) that
    is a scalar: as :data:`PARAMETER_INPUTS` says, a scalar is a constant of the model's code (GELU's 0.5,
    an attention's scale), not a parameter, and autograd computes no gradient for it; its
    ``backward_weight`` calls (the broadcast operand's gradient) are left out. On an H100, 24 such
    calls (ReduceSum to 1x1x1 and the products before them) would stand in vit_b_16's b32 fp16
    step (docs/training.md)."""
    import math

    if cfg is None or cfg.kind != "Elementwise" or len(ly.static_inputs) != 1:
        return False
    return min(math.prod(cfg.a), math.prod(cfg.b)) <= 1  # (the constant is the broadcast operand)


#: ONNX op type -> the input positions that hold trainable parameters when they are initializers
#: (the ONNX operator spec's names: Conv W and B, Gemm B and C, BatchNormalization scale and B --
#: not its running mean and variance, which are buffers --, the RNNs' W, R and B, Gather's data: an
#: embedding table). Elementwise ops count a constant operand with more than one element (a bias
#: or scale of a decomposed Linear or normalisation; scalars such as GELU's 0.5 are constants).
PARAMETER_INPUTS = {
    "Conv": (1, 2), "ConvTranspose": (1, 2), "Gemm": (0, 1, 2), "MatMul": (0, 1),
    "BatchNormalization": (1, 2), "LayerNormalization": (1, 2), "InstanceNormalization": (1, 2),
    "GroupNormalization": (1, 2), "RMSNormalization": (1,), "SimplifiedLayerNormalization": (1,),
    "SkipSimplifiedLayerNormalization": (2,), "SkipLayerNormalization": (2, 3, 4),
    "LSTM": (1, 2, 3), "GRU": (1, 2, 3), "RNN": (1, 2, 3), "Gather": (0,), "PRelu": (1,),
    "Add": (0, 1), "Sub": (0, 1), "Mul": (0, 1),
    "GroupedMatMul": (1,),  # benanza's export of grouped_mm: the experts' weights (benanza.kinds.grouped_gemm)
    "GatherND": (0,),  # a table read by index tuples: transformers' batched_mm experts gather their weights
}
_ELEMENTWISE = ("Add", "Sub", "Mul")
#: ops that view or broadcast a tensor without changing its values (ONNX operator spec): a parameter
#: read through a chain of them, at a parameter input of :data:`PARAMETER_INPUTS` or by a Concat,
#: is the parameter itself (its gradient is the view's gradient summed back to its shape)
VIEW_OPS = ("Transpose", "Expand", "Reshape", "Unsqueeze", "Squeeze", "Flatten")
_FLOAT_TYPES = (TP.FLOAT, TP.FLOAT16, TP.BFLOAT16, TP.DOUBLE)


def trainable_parameters(model: str | Path) -> list[tuple[int, ...]]:
    """The shapes of the model's trainable parameters: its floating-point initializers at the
    parameter inputs of :data:`PARAMETER_INPUTS` (through Identity nodes, which exporters put
    between a shared weight and its users, and through the view and broadcast ops of
    :data:`VIEW_OPS`: a Linear's Transpose(W), ViT's Expand of its class token), and those a Concat
    reads, through views or as they are, with more than one element (ViT's class token, which a
    fixed-batch export folds with its Expand into one (1, 1, 768) initializer), each tensor once, in
    graph order. What the
    optimizer's update reads and writes. Each tensor name a node reads is one parameter: a name
    read by several nodes (a tied weight) counts once; an Identity output counts apart from its
    source, because torch.onnx's export merges initializers of equal value behind Identity nodes
    (the weight-stripped examples/resnet50.onnx keeps 61 initializers for its 108 parameters). The
    weights themselves are not read. Raises ModelError for an unreadable file.

    A model exported in inference mode may have folded its BatchNormalizations into the
    convolutions (their scale and shift become the convolution's weight and bias): its parameter
    count is then the folded one (torchvision resnet50: 25,557,032 trained, 25,530,472 once
    folded)."""
    return list(_parameters(model).values())


def _parameters(model: str | Path) -> dict[str, tuple[int, ...]]:
    """The trainable parameters of :func:`trainable_parameters` by the tensor name the node reads."""
    from benanza.errors import ModelError

    try:
        m = onnx.load(str(model), load_external_data=False)
    except Exception as e:  # onnx raises DecodeError, OSError, ...
        raise ModelError(f"{model}: cannot read the ONNX file ({type(e).__name__})") from None
    inits = {i.name: tuple(int(d) for d in i.dims) for i in m.graph.initializer if i.data_type in _FLOAT_TYPES}
    alias = {n.output[0]: n.input[0] for n in m.graph.node
             if n.op_type == "Identity" and n.input and n.output and n.input[0] in inits}
    # a parameter reached through view and broadcast ops counts once, by its own name: torch.onnx
    # exports a Linear as MatMul(x, Transpose(W)) (77.9 M of vit_b_16's 86.6 M parameters), and
    # ViT's class token (1, 1, 768) as Concat(Expand(class_token, (N, 1, 768)), patches)
    viewed: dict[str, str] = {}
    for n in m.graph.node:
        if n.op_type in VIEW_OPS and n.input and n.output:
            src = viewed.get(n.input[0], n.input[0])
            if alias.get(src, src) in inits:
                viewed[n.output[0]] = src
    found: dict[str, tuple[int, ...]] = {}
    for n in m.graph.node:
        slots = PARAMETER_INPUTS.get(n.op_type, ())
        if n.op_type == "Concat":  # a parameter concatenated with data (a class token), viewed or as it is
            slots = tuple(k for k, t in enumerate(n.input)
                          if t in viewed or math.prod(inits.get(alias.get(t, t), ())) > 1)
        for k in slots:
            if k >= len(n.input):
                continue
            name = viewed.get(n.input[k], n.input[k])
            shape = inits.get(alias.get(name, name))
            if shape is None or name in found:
                continue
            if n.op_type in _ELEMENTWISE and math.prod(shape) <= 1:
                continue
            found[name] = shape
    return found


def optimizer_config(ml: ModelLayers, algorithm: str = "sgd") -> L.LayerConfig | None:
    """The optimizer step over ``ml``'s trainable parameters (:func:`trainable_parameters`) with
    ``algorithm`` (:data:`benanza.kinds.OPTIMIZER_ALGORITHMS`, torch.optim's defaults:
    :meth:`benanza.kinds.OptimizerConfig.from_parameters`), or None for a model without any.
    Raises ValueError for an unknown algorithm, ModelError for an unreadable model."""
    if algorithm not in L.OPTIMIZER_ALGORITHMS:
        raise ValueError(f"unknown optimizer {algorithm!r} (choose from {', '.join(L.OPTIMIZER_ALGORITHMS)})")
    shapes = trainable_parameters(ml.path)
    return L.OptimizerConfig.from_parameters(shapes, algorithm) if shapes else None


def loss_config(ml: ModelLayers) -> tuple[L.LayerConfig | None, str]:
    """The training step's loss on ``ml``'s output and a note saying what it is taken from, or
    (None, why not): cross-entropy with class indices (:class:`benanza.kinds.CrossEntropyLossConfig`)
    over the model's first floating-point output of rank 2 (an image classifier's logits
    (B, classes)), else its first of rank 3 with the last dim as the classes (a language model's
    logits (B, S, vocab) or (S, B, vocab)), in the graph's output order, at the model's batch (the
    shape its layers give the output). Which output is the logits the graph does not say: a model
    whose outputs are features (a BERT encoder's hidden states) gets the loss of a classifier over
    them, which the note names. Raises ModelError for an unreadable model."""
    from benanza.errors import ModelError

    try:
        m = onnx.load(str(ml.path), load_external_data=False)
    except Exception as e:  # onnx raises DecodeError, OSError, ...
        raise ModelError(f"{ml.path}: cannot read the ONNX file ({type(e).__name__})") from None
    shapes: dict[str, tuple[int, ...]] = {}
    for ly in ml.layers:
        for name, shape in zip(ly.outputs, ly.output_shapes):
            if shape is not None:
                shapes[name] = tuple(shape)
    floats = [(o.name, shapes[o.name]) for o in m.graph.output
              if o.type.tensor_type.elem_type in _FLOAT_TYPES and o.name in shapes]
    for rank in (2, 3):
        for name, shape in floats:
            if len(shape) == rank and shape[-1] > 1 and math.prod(shape) > 0:
                what = "classes" if rank == 2 else "classes (a language model's vocabulary)"
                return (L.CrossEntropyLossConfig(logits=shape),
                        f"the loss: cross-entropy (class indices, mean) over output {name!r} "
                        f"{'x'.join(map(str, shape))} taken as logits, its last dim the {what}")
    return None, ("the loss is not counted: the model has no floating-point output of rank 2 or 3 "
                  "to take as a classifier's logits")
