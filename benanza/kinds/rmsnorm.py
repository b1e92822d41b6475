"""RMSNorm layers. ONNX RMSNormalization (opset 23; ONNX operator spec), inference, and the decomposed
Pow/ReduceMean/Add/Sqrt/Reciprocal (or Div)/Mul/Mul chain torch.export and TorchScript write for
transformers' ``LlamaRMSNorm`` (a fusion candidate, :func:`find_rmsnorm`); ONNX Runtime's
``SimplifiedLayerNormalization`` (which it registers in the default domain only; docs/ContribOperators.md has
no ``com.microsoft`` one) and ``com.microsoft``
``SkipSimplifiedLayerNormalization`` (the residual Add an Elementwise layer before the RMSNorm).

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from benanza.kinds.base import OPTIONAL, Job, Kind, LayerConfig, RowNorm, Shape, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label, functional
from benanza.kinds.elementwise import ElementwiseConfig
from benanza.kinds.layernorm import find_residual_norm, residual_of_group
from benanza.kinds.onnx_map import MS_DOMAIN, TP, ContribOp, Part, Unsupported, contrib_doc, need
from benanza.kinds.patterns import Graph, Node, Pattern, is_cast
from benanza.kinds.reduce import ReduceConfig, trailing_axis
from benanza.kinds.unary import UnaryConfig


@dataclass(frozen=True)
class RMSNormConfig(RowNorm, LayerConfig):
    """Root-mean-square layer normalisation (Zhang and Sennrich, "Root Mean Square Layer
    Normalization", NeurIPS 2019; ONNX RMSNormalization, opset 23), inference:
    ``y = x / sqrt(mean(x^2 over the dims from axis on) + epsilon) * scale``. No mean is subtracted
    and there is no bias (ONNX's operator has none).

    x: the input shape; axis >= 0; the call sees x as (rows, cols) = (prod(x[:axis]), prod(x[axis:])),
    scale as (cols,) in float32 (as the LayerNorm kind keeps it). scale: the model multiplies by a
    weight (always for ONNX's operator; a decomposed chain may end without one: timed with the weight
    present, the same memory traffic but for cols * 4 bytes, and the measurement says so).
    Timed: the cuDNN graph API's rmsnorm (cudnn-frontend ``Graph::rmsnorm``, forward phase INFERENCE;
    cuDNN developer guide, "RMSNorm"), every engine config of heuristics modes A, B and the fallback
    list; and a benanza CUDA kernel (one block per row, float32 statistics) so a layer always has a
    valid measurement. stats: the training-mode forward of a training step (docs/training.md), which also
    writes the inverse root mean square of every row, ``inv_variance`` (rows,) float32, that the
    backward reads (cuDNN's forward phase TRAINING; PyTorch's ``aten::_fused_rms_norm``, which returns
    it as ``rstd``): :func:`benanza.kinds.rmsnorm_backward.rmsnorm_backward` makes it; never set by a
    model's op (a field added after configs were first stored: keys without it are unchanged).
    residual: the fusion candidate of a residual ``Add(a, b)`` of two tensors of x's shape feeding the
    norm (:func:`benanza.kinds.layernorm.find_residual_norm`): the norm of ``a + b`` (rounded to the storage type, as the Add
    stores it) in one kernel, as TorchInductor and ONNX Runtime's ``SkipSimplifiedLayerNormalization``
    compute it; keep_sum: the sum is read by other layers too, so the call also writes it. Both are left
    out of the key while False; the cuDNN graph (no add before the norm) is not timed for them.
    The benanza kernels: one block per row reading the row twice, and the row held in registers and read
    once (16-byte vector loads; rows of a multiple of 8 fp16/bf16 or 4 fp32 elements, up to 32768 fp16).
    FLOPs: 4 per element (square and sum 2, normalise 1, scale 1), 5 with the residual add; the per-row
    root, its epsilon and reciprocal are not counted.
    """

    kind: ClassVar[str] = "RMSNorm"
    x: Shape
    axis: int
    epsilon: float
    scale: bool = True
    stats: bool = field(default=False, metadata=OPTIONAL)
    residual: bool = field(default=False, metadata=OPTIONAL)
    keep_sum: bool = field(default=False, metadata=OPTIONAL)

    def __post_init__(self):
        if not self.x or not 0 <= self.axis < len(self.x):
            raise ValueError(f"RMSNorm axis {self.axis} out of range for x {list(self.x)}")

    def fusion_label(self) -> str:
        """A residual Add fused into the norm counts as ``Add+RMSNorm``."""
        return f"Add+{self.kind}" if self.residual else self.kind

    def input_shapes(self):
        return [self.x, self.x[self.axis:]] + ([self.x] if self.residual else [])

    def output_shape(self):
        return self.x

    def flops(self):
        return (5 if self.residual else 4) * numel(self.x)

    def describe(self):
        return (f"RMSNorm({'x'.join(map(str, self.x))} axis {self.axis} eps {self.epsilon:g}"
                f"{'' if self.scale else ' no-scale'}{' +stats' if self.stats else ''}"
                f"{' +residual' if self.residual else ''}{' +sum' if self.keep_sum else ''})")


def _map_rmsnorm(node, ctx, attrs):
    """ONNX RMSNormalization: X, Scale (broadcast to x[axis:]) -> Y; attributes axis (default -1),
    epsilon (default 1e-5), stash_type (1: float32 statistics, what both implementations compute)."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    r = len(x)
    if r == 0:
        raise Unsupported("RMSNormalization of a scalar")
    axis = int(attrs.get("axis", -1))
    axis = axis + r if axis < 0 else axis
    if not 0 <= axis < r:
        raise Unsupported(f"axis {attrs.get('axis')} out of range for rank {r}")
    if len(node.input) < 2 or not node.input[1]:
        raise Unsupported("RMSNormalization without its Scale input")
    s = ctx.shape(node.input[1])
    if s is not None and numel(s) != numel(x[axis:]):
        raise Unsupported(f"a Scale of shape {list(s)} that is not one value per normalised element "
                          f"({list(x[axis:])})")
    if int(attrs.get("stash_type", 1)) != 1:
        raise Unsupported(f"stash_type {attrs.get('stash_type')} (only 1: float32 statistics)")
    return RMSNormConfig(x=x, axis=axis, epsilon=float(attrs.get("epsilon", 1e-5)))


#: where ONNX Runtime registers ``SimplifiedLayerNormalization`` (default domain, since version 1; attributes
#: axis = -1 and epsilon = 1e-5 by default, outputs Y and the optional float inv_std_var)
SLN_SPEC = "https://github.com/microsoft/onnxruntime/blob/main/onnxruntime/core/graph/contrib_ops/contrib_defs.cc"

#: SkipSimplifiedLayerNormalization's epsilon when the node gives none (ONNX Runtime's
#: ``kDefaultSkipLayerNormEpsilon``, onnxruntime/core/graph/contrib_ops/contrib_defs.h)
SKIP_EPSILON = 1e-12


def _stats_shape(x: tuple, axis: int) -> tuple:
    """The shape of a saved statistic (inv_std_var, mean): x with the normalised dims 1."""
    return tuple(x[:axis]) + (1,) * (len(x) - axis)


def _map_simplified(node, ctx, attrs):
    """ONNX Runtime's ``SimplifiedLayerNormalization`` (X, scale -> Y [, inv_std_var]; axis, epsilon
    1e-5; :data:`SLN_SPEC`): RMSNormalization by another name. The optional inv_std_var output is the
    per-row statistic the call computes anyway (cuDNN's rmsnorm writes it in training only: timed
    without)."""
    return _map_rmsnorm(node, ctx, {"epsilon": 1e-5, **attrs, "stash_type": 1})


def _simplified_shapes(node, ctx, attrs):
    """Y: X's shape; inv_std_var: X's with the normalised dims 1, float32."""
    x = ctx.shape(node.input[0])
    if x is None:
        return [(None, None)] * len(node.output)
    axis = int(attrs.get("axis", -1))
    axis = axis + len(x) if axis < 0 else axis
    return [(x, None), (_stats_shape(x, axis), TP.FLOAT)][:len(node.output)]


def _skip_add(x: tuple, other: tuple, what: str) -> ElementwiseConfig:
    """The Add of ``other`` (broadcast, dims aligned right) to ``x``, x's shape out."""
    if len(other) > len(x):
        raise Unsupported(f"SkipSimplifiedLayerNormalization {what} {list(other)} of a higher rank than the input {list(x)}")
    o = (1,) * (len(x) - len(other)) + tuple(other)
    if any(d not in (1, e) for d, e in zip(o, x)):
        raise Unsupported(f"SkipSimplifiedLayerNormalization {what} {list(other)} does not broadcast to the input {list(x)}")
    return ElementwiseConfig(op="add", a=tuple(x), b=o)


def _map_skip_simplified(node, ctx, attrs):
    """``com.microsoft`` ``SkipSimplifiedLayerNormalization`` (:func:`benanza.kinds.onnx_map.contrib_doc`):
    input (b, s, hidden) or (tokens, hidden), skip (the same, (1, s, hidden) or (s, hidden)), gamma
    (hidden,), optional bias (hidden,); ``sum = input + skip (+ bias)``, ``output = RMSNorm(sum) * gamma``
    over the last axis; outputs output, mean, inv_std_var (optional, float) and input_skip_bias_sum
    (optional, the residual the next block reads). ONNX Runtime runs it as one kernel; cuDNN's rmsnorm
    and PyTorch's ``rms_norm`` add no residual, so it is timed as the calls that compute it: the
    Elementwise add of the skip (writing input_skip_bias_sum), the Add of the bias when there is one,
    and the RMSNorm of the sum (a bound no lower than the fused kernel's traffic: the sum is written
    and read once more). epsilon: the node's, else ONNX Runtime's 1e-12 (:data:`SKIP_EPSILON`)."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    if len(x) not in (2, 3):
        raise Unsupported(f"SkipSimplifiedLayerNormalization input of rank {len(x)} (2 or 3)")
    if len(node.input) < 3 or not node.input[1] or not node.input[2]:
        raise Unsupported("SkipSimplifiedLayerNormalization without its skip or gamma input")
    parts = [Part(_skip_add(x, need(ctx.shape(node.input[1]), "skip"), "skip"), ())]
    if len(node.input) > 3 and node.input[3]:
        parts.append(Part(_skip_add(x, need(ctx.shape(node.input[3]), "bias"), "bias"), ()))
    parts[-1] = Part(parts[-1].config, (3,))  # input_skip_bias_sum
    g = ctx.shape(node.input[2])
    if g is not None and numel(g) != x[-1]:
        raise Unsupported(f"SkipSimplifiedLayerNormalization gamma {list(g)} is not one value per hidden unit ({x[-1]})")
    norm = RMSNormConfig(x=x, axis=len(x) - 1, epsilon=float(attrs.get("epsilon", SKIP_EPSILON)))
    return tuple(parts) + (Part(norm, (0, 1, 2)),)


def _skip_simplified_shapes(node, ctx, attrs):
    """output and input_skip_bias_sum: input's shape; mean and inv_std_var: input's with the last dim 1,
    float32 (ONNX Runtime's shape inference of the op)."""
    x = ctx.shape(node.input[0])
    if x is None:
        return [(None, None)] * len(node.output)
    st = (_stats_shape(x, len(x) - 1), TP.FLOAT)
    return [(x, None), st, st, (x, None)][:len(node.output)]


@dataclass(frozen=True)
class RMSNormCase(Case):
    """One row of ``templates/rmsnorm.cpp.j2``'s case table: the fields of its C++ ``RMSNormCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    rows: CppValue
    cols: CppValue
    epsilon: CppValue
    stats: CppValue
    residual: CppValue
    keep_sum: CppValue
    note: CppValue


def _rmsnorm_case(cfg: RMSNormConfig, job: Job) -> RMSNormCase:
    note = "" if cfg.scale else "no scale in the model: timed with a scale vector"
    return RMSNormCase(job=job_init(job), rows=cfg.rows, cols=cfg.cols, epsilon=cpp_num(float(cfg.epsilon)),
                       stats=cpp_num(cfg.stats), residual=cpp_num(cfg.residual), keep_sum=cpp_num(cfg.keep_sum),
                       note=cpp_string(note))


def _rmsnorm(c: Ctx) -> Candidate:
    """``torch.nn.functional.rms_norm`` (PyTorch 2.4+; ``aten::rms_norm``, a fused CUDA kernel
    ``aten::_fused_rms_norm`` in recent releases). With ``stats`` (the training forward):
    ``aten::_fused_rms_norm(input, normalized_shape, weight, eps) -> (output, rstd)``, what autograd
    saves for ``aten::_fused_rms_norm_backward`` (native_functions.yaml; PyTorch 2.8+)."""
    cfg, F = c.cfg, functional(c)
    x = c.randn(cfg.x)
    norm = tuple(cfg.x[cfg.axis:])
    w = c.randn(norm)
    if cfg.residual:  # eager PyTorch's block: aten::add, then the norm
        r = c.randn(cfg.x)
        return Candidate("torch:aten::add+aten::rms_norm", algo_label(c),
                         lambda: F.rms_norm(x + r, norm, w, cfg.epsilon), numel(cfg.x))
    if cfg.stats:
        return Candidate("torch:aten::_fused_rms_norm", algo_label(c),
                         lambda: c.torch.ops.aten._fused_rms_norm(x, list(norm), w, cfg.epsilon)[0], numel(cfg.x))
    return Candidate("torch:aten::rms_norm", algo_label(c), lambda: F.rms_norm(x, norm, w, cfg.epsilon),
                     numel(cfg.x))


def _min_bytes(cfg: RMSNormConfig, ib: int, ob: int) -> int:
    """x read once, the scale (float32, 4 bytes) once, y written once, and with ``stats`` the saved
    inv_variance (float32, one per row) written once; with ``residual`` the residual read once and, with
    ``keep_sum``, the sum written once (bytes)."""
    n = numel(cfg.x)
    return (ib * n * (2 if cfg.residual else 1) + 4 * cfg.cols + ob * n * (2 if cfg.keep_sum else 1)
            + (4 * cfg.rows if cfg.stats else 0))


# ------------------------------------------------------------------------ fusion patterns

def find_rmsnorm(pat: Graph, sq: Node):
    """[Cast ->] Pow 2 (or Mul x*x) -> ReduceMean over trailing dims -> Add eps -> Sqrt -> Reciprocal
    (or Div 1/s) -> Mul x [-> Cast] [-> Mul weight], or Sqrt -> Div x/s: RMSNorm as torch.export
    (Reciprocal) and TorchScript (Div) write transformers' ``LlamaRMSNorm``
    (``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``, float32 casts around it)."""
    if not pat.free(sq) or sq.status != "benchmark" or len(sq.inputs) < 1:
        return None
    x = sq.inputs[0]
    if not ((isinstance(sq.config, UnaryConfig) and sq.config.op == "pow" and sq.config.exponent == 2.0)
            or (pat.elementwise(sq, "mul") and sq.inputs == (x, x))):
        return None
    r = pat.sole_user(sq)
    if not pat.free(r) or r.status != "benchmark" or not isinstance(r.config, ReduceConfig) \
            or r.config.op != "mean" or tuple(r.config.x) != tuple(pat.ctx.shape(x) or ()):
        return None
    axis = trailing_axis(r.config)
    if axis is None:
        return None
    add = pat.sole_user(r)
    eps = pat.scalar(add) if pat.free(add) and pat.elementwise(add, "add") else None
    if eps is None or eps < 0:
        return None
    root = pat.sole_user(add)
    if not pat.free(root) or root.status != "benchmark" or not isinstance(root.config, UnaryConfig) \
            or root.config.op != "sqrt":
        return None
    chain = [sq.index, r.index, add.index, root.index]
    nxt = pat.sole_user(root)
    if not pat.free(nxt):
        return None
    inv = None
    if nxt.status == "benchmark" and isinstance(nxt.config, UnaryConfig) and nxt.config.op == "reciprocal":
        inv = nxt
    elif pat.elementwise(nxt, "div") and pat.scalar(nxt) == 1.0 and math.prod(nxt.config.a) == 1:
        inv = nxt  # 1 / sqrt(...)
    if inv is not None:
        chain.append(inv.index)
        mul = pat.sole_user(inv)
        if not pat.free(mul) or not pat.elementwise(mul, "mul") or sorted(mul.inputs) != sorted((x, inv.outputs[0])):
            return None
    else:
        mul = nxt  # x / sqrt(...)
        if not pat.elementwise(mul, "div") or mul.inputs != (x, root.outputs[0]):
            return None
    xshape = tuple(r.config.x)
    if tuple(mul.config.output_shape()) != xshape:
        return None
    chain.append(mul.index)
    head = pat.made_by(x)
    if is_cast(head) and pat.free(head) and x not in pat.graph_outputs \
            and {u.index for u in pat.users(x)} == {sq.index, mul.index}:
        chain.append(head.index)  # the cast to float32 before the statistics
    last, cols = mul, math.prod(xshape[axis:])
    nxt = pat.sole_user(mul)
    if is_cast(nxt) and pat.free(nxt):
        chain.append(nxt.index)  # the cast back to the model's type
        last, nxt = nxt, pat.sole_user(nxt)
    scale = False
    if pat.free(nxt) and pat.elementwise(nxt, "mul") and len(nxt.static_inputs) == 1 \
            and nxt.inputs == (last.outputs[0],):
        w = pat.ctx.shape(nxt.static_inputs[0])
        if w is not None and math.prod(w) == cols and tuple(nxt.config.output_shape()) == xshape:
            chain.append(nxt.index)
            scale = True
    return chain, RMSNormConfig(x=xshape, axis=axis, epsilon=float(np.float32(eps)), scale=scale)


def _find_residual_rmsnorm(pat: Graph, norm: Node):
    """Add -> RMSNorm (:func:`benanza.kinds.layernorm.find_residual_norm`)."""
    return find_residual_norm(pat, norm, RMSNormConfig)


def _residual_rmsnorm_group(pat: Graph, layers: tuple[int, ...], cfg):
    """A decomposed RMSNorm's group and the residual Add before it (:func:`benanza.kinds.layernorm.residual_of_group`)."""
    return residual_of_group(pat, layers, cfg, RMSNormConfig)


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=RMSNormConfig(x=(1, 128, 256), axis=2, epsilon=9.999999974752427e-07),
    name="RMSNorm", config=RMSNormConfig, template="rmsnorm.cpp.j2", case=_rmsnorm_case, min_bytes=_min_bytes,
    torch=_rmsnorm, onnx={"RMSNormalization": _map_rmsnorm},
    typed_ops=(), fused_from=('Pow', 'ReduceMean', 'Add', 'Sqrt', 'Reciprocal', 'Div', 'Mul', 'Cast'),
    aten={"RMSNormalization": ('aten::rms_norm', 'aten::_fused_rms_norm')},
    patterns=(Pattern("decomposed RMSNorm", (50, 0), find_rmsnorm),
              Pattern("Add -> RMSNorm", (130, 1), _find_residual_rmsnorm, extend=_residual_rmsnorm_group)),
    nhwc=False, image=False,
    contrib={("", "SimplifiedLayerNormalization"): ContribOp(_map_simplified, _simplified_shapes, SLN_SPEC,
                                                              ('aten::rms_norm', 'aten::_fused_rms_norm')),
             (MS_DOMAIN, "SkipSimplifiedLayerNormalization"): ContribOp(
                 _map_skip_simplified, _skip_simplified_shapes, contrib_doc("SkipSimplifiedLayerNormalization"),
                 ('aten::rms_norm', 'aten::_fused_rms_norm', 'aten::add'))})
