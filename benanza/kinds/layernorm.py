"""LayerNorm layers. ONNX LayerNormalization (opset 17; ONNX operator spec), inference:

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from benanza.kinds.base import OPTIONAL, Job, Kind, LayerConfig, RowNorm, Shape, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label, functional
from benanza.kinds.onnx_map import Unsupported, need
from benanza.kinds.patterns import Graph, Node, Pattern
from benanza.kinds.reduce import ReduceConfig, trailing_axis
from benanza.kinds.unary import UnaryConfig


@dataclass(frozen=True)
class LayerNormConfig(RowNorm, LayerConfig):
    """ONNX LayerNormalization (opset 17; ONNX operator spec), inference:
    ``y = (x - mean) / sqrt(var + epsilon) * scale (+ bias)``, mean and (biased) variance over the
    dims from ``axis`` on. Also the fused form of the decomposed ReduceMean/Sub/Pow/ReduceMean/Add/
    Sqrt/Div/Mul/Add chain older exporters emit (a fusion candidate, see :func:`find_layernorm`).

    x: the input shape; axis >= 0; the call sees x as (rows, cols) = (prod(x[:axis]), prod(x[axis:])),
    scale and bias as (cols,) in float32 (as cuDNN's samples and mixed-precision frameworks keep
    them). bias: ONNX's optional B input is present (absent: timed with a zero bias); stats: the
    optional Mean/InvStdDev outputs are used (the call then also writes them, float32, (rows,)).
    residual: the fusion candidate of a residual ``Add(a, b)`` of two tensors of x's shape feeding the
    norm (:func:`find_residual_norm`): the norm of ``a + b`` (the sum rounded to the storage type, as
    the Add stores it), one kernel as TorchInductor's ``fused_add_native_layer_norm`` and ONNX Runtime's
    ``SkipLayerNormalization`` compute it; keep_sum: the sum is read by other layers too, so the call
    also writes it. Both are left out of the key while False.
    Timed: the cuDNN graph API's layernorm (cudnn-frontend ``Graph::layernorm``, forward phase
    INFERENCE, or TRAINING when stats are needed; cuDNN developer guide, "Layernorm"), every engine
    config of heuristics modes A, B and the fallback list (not for residual: the graph has no add
    before the norm); and benanza CUDA kernels, float32 statistics, so a layer always has a valid
    measurement: one block per row reading the row twice, and the row held in registers and read once
    (16-byte vector loads; rows of a multiple of 8 fp16/bf16 or 4 fp32 elements, up to 32768 fp16).
    FLOPs: 8 per element (mean 1, variance 3, normalise 2, scale and shift 2), 9 with the residual add.
    """

    kind: ClassVar[str] = "LayerNorm"
    x: Shape
    axis: int
    epsilon: float
    bias: bool = True
    stats: bool = False
    residual: bool = field(default=False, metadata=OPTIONAL)
    keep_sum: bool = field(default=False, metadata=OPTIONAL)

    def fusion_label(self) -> str:
        """A residual Add fused into the norm counts as ``Add+LayerNorm``."""
        return f"Add+{self.kind}" if self.residual else self.kind

    def input_shapes(self):
        return [self.x, self.x[self.axis:]] + ([self.x] if self.residual else [])

    def output_shape(self):
        return self.x

    def flops(self):
        return (9 if self.residual else 8) * numel(self.x)

    def describe(self):
        return (f"LayerNorm({'x'.join(map(str, self.x))} axis {self.axis} eps {self.epsilon:g}"
                f"{'' if self.bias else ' no-bias'}{' +stats' if self.stats else ''}"
                f"{' +residual' if self.residual else ''}{' +sum' if self.keep_sum else ''})")


def _map_layernorm(node, ctx, attrs):
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    r = len(x)
    if r == 0:
        raise Unsupported("LayerNormalization of a scalar")
    axis = int(attrs.get("axis", -1))
    axis = axis + r if axis < 0 else axis
    if not 0 <= axis < r:
        raise Unsupported(f"axis {attrs.get('axis')} out of range for rank {r}")
    if len(node.input) < 2 or not node.input[1]:
        raise Unsupported("LayerNormalization without its Scale input")
    bias = len(node.input) > 2 and bool(node.input[2])
    stats = any(o for o in node.output[1:])
    return LayerNormConfig(x=x, axis=axis, epsilon=float(attrs.get("epsilon", 1e-5)), bias=bias, stats=stats)


@dataclass(frozen=True)
class LayerNormCase(Case):
    """One row of ``templates/layernorm.cpp.j2``'s case table: the fields of its C++ ``LayerNormCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    rows: CppValue
    cols: CppValue
    epsilon: CppValue
    bias: CppValue
    stats: CppValue
    residual: CppValue
    keep_sum: CppValue
    note: CppValue


def _layernorm_case(cfg: LayerNormConfig, job: Job) -> LayerNormCase:
    note = "" if cfg.bias else "no bias input: the cuDNN graph adds a zero bias"
    return LayerNormCase(job=job_init(job), rows=cfg.rows, cols=cfg.cols, epsilon=cpp_num(float(cfg.epsilon)),
                         bias=cpp_num(cfg.bias), stats=cpp_num(cfg.stats), residual=cpp_num(cfg.residual),
                         keep_sum=cpp_num(cfg.keep_sum), note=cpp_string(note))


def _layernorm(c: Ctx) -> Candidate:
    """``F.layer_norm`` (``aten::layer_norm``), or ``aten::native_layer_norm`` with stats; with
    ``residual``, ``x + r`` first, as eager PyTorch runs the block: two kernels (``aten::add``, then
    the norm)."""
    cfg, F, torch = c.cfg, functional(c), c.torch
    x = c.randn(cfg.x)
    norm = tuple(cfg.x[cfg.axis:])
    w = c.randn(norm)
    b = c.randn(norm) if cfg.bias else None
    if cfg.residual:
        r = c.randn(cfg.x)
        return Candidate("torch:aten::add+aten::layer_norm", algo_label(c),
                         lambda: F.layer_norm(x + r, norm, w, b, cfg.epsilon), numel(cfg.x))
    if cfg.stats:
        return Candidate("torch:aten::native_layer_norm", algo_label(c),
                         lambda: torch.native_layer_norm(x, norm, w, b, cfg.epsilon)[0], numel(cfg.x))
    return Candidate("torch:aten::layer_norm", algo_label(c), lambda: F.layer_norm(x, norm, w, b, cfg.epsilon),
                     numel(cfg.x))


def _min_bytes(cfg: LayerNormConfig, ib: int, ob: int) -> int:
    """x read once, scale and bias (float32, 4 bytes each) once, y written once; with ``residual`` the
    residual read once and, with ``keep_sum``, the sum written once (bytes)."""
    n = numel(cfg.x)
    return ib * n * (2 if cfg.residual else 1) + 4 * 2 * cfg.cols + ob * n * (2 if cfg.keep_sum else 1)


# ------------------------------------------------------------------------ fusion patterns

def find_layernorm(pat: Graph, r1: Node):
    """ReduceMean -> Sub -> Pow 2 (or Mul d*d) -> ReduceMean -> Add eps -> Sqrt -> Div [-> Mul scale]
    [-> Add bias]: LayerNormalization as exporters before opset 17 write it."""
    if not pat.free(r1) or r1.status != "benchmark" or not isinstance(r1.config, ReduceConfig) \
            or r1.config.op != "mean" or len(r1.inputs) != 1:
        return None
    axis = trailing_axis(r1.config)
    if axis is None:
        return None
    x = r1.inputs[0]
    sub = pat.sole_user(r1)
    if not pat.free(sub) or not pat.elementwise(sub, "sub") or sub.inputs != (x, r1.outputs[0]):
        return None
    d = sub.outputs[0]
    users = pat.users(d)
    if len(users) != 2 or d in pat.graph_outputs:
        return None
    sq = next((u for u in users if (u.status == "benchmark" and isinstance(u.config, UnaryConfig)
                                    and u.config.op == "pow" and u.config.exponent == 2.0)
               or (pat.elementwise(u, "mul") and u.inputs == (d, d))), None)
    div = next((u for u in users if u is not sq), None)
    if sq is None or not pat.free(sq) or not pat.free(div) or not pat.elementwise(div, "div"):
        return None
    r2 = pat.sole_user(sq)
    if not pat.free(r2) or r2.status != "benchmark" or not isinstance(r2.config, ReduceConfig) \
            or r2.config.op != "mean" or r2.config.x != r1.config.x or r2.config.y != r1.config.y:
        return None
    add = pat.sole_user(r2)
    eps = pat.scalar(add) if pat.free(add) and pat.elementwise(add, "add") else None
    if eps is None or eps < 0:
        return None
    root = pat.sole_user(add)
    if not pat.free(root) or root.status != "benchmark" or not isinstance(root.config, UnaryConfig) \
            or root.config.op != "sqrt" or pat.sole_user(root) is not div or div.inputs != (d, root.outputs[0]):
        return None
    chain = [r1.index, sub.index, sq.index, r2.index, add.index, root.index, div.index]
    norm = tuple(r1.config.x[axis:])
    last = div
    nxt = pat.sole_user(div)
    for op in ("mul", "add"):  # the optional scale, then the optional bias (constants of the normalised shape)
        if pat.free(nxt) and pat.elementwise(nxt, op) and len(nxt.static_inputs) == 1 and len(nxt.inputs) == 1:
            w = pat.ctx.shape(nxt.static_inputs[0])
            if w is not None and math.prod(w) == math.prod(norm) and nxt.config.output_shape() == tuple(r1.config.x):
                chain.append(nxt.index)
                last = nxt
                nxt = pat.sole_user(nxt)
    has_bias = pat.elementwise(last, "add") and last is not div
    cfg = LayerNormConfig(x=tuple(r1.config.x), axis=axis, epsilon=float(np.float32(eps)), bias=has_bias)
    return chain, cfg


def residual_add(pat: Graph, x: str, shape: tuple, readers: set[int]):
    """The free Add(a, b) of two activations of ``shape`` that writes ``x``, and whether layers other
    than ``readers`` (or the graph's outputs) read its sum; None when ``x`` comes from no such Add."""
    add = pat.made_by(x)
    if not pat.free(add) or not pat.elementwise(add, "add") or len(add.inputs) != 2 or add.static_inputs \
            or len(add.outputs) != 1:
        return None
    if tuple(add.config.a) != shape or tuple(add.config.b) != shape or tuple(add.config.output_shape()) != shape:
        return None
    out = add.outputs[0]
    return add, out in pat.graph_outputs or any(u.index not in readers for u in pat.users(out))


def find_residual_norm(pat: Graph, norm: Node, config: type):
    """Add(a, b) -> a norm layer whose config is a ``config`` (LayerNormConfig or RMSNormConfig: a layer
    of the ONNX op, or of ONNX Runtime's SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization),
    a and b activations of the norm's input shape: a transformer block's residual add and the norm after
    it, which fusing compilers run as one kernel (TorchInductor's ``fused_add_native_layer_norm``, ONNX
    Runtime's SkipLayerNormalization); the config is the norm's with ``residual`` (and ``keep_sum`` where
    other layers, or the graph's outputs, read the sum: the next residual add). The decomposed norms'
    groups take their residual Add in after every pass (:func:`residual_of_group`)."""
    cfg = norm.config
    if not pat.free(norm) or norm.status != "benchmark" or not isinstance(cfg, config) \
            or cfg.residual or not norm.inputs:
        return None
    hit = residual_add(pat, norm.inputs[0], tuple(cfg.x), {norm.index})
    if hit is None:
        return None
    add, keep = hit
    return [add.index, norm.index], dataclasses.replace(cfg, residual=True, keep_sum=keep)


def residual_of_group(pat: Graph, layers: tuple[int, ...], cfg, config: type):
    """A decomposed norm's group (its ``layers``, its config a ``config``) whose one data input is written
    by a residual Add (:func:`residual_add`): (that Add, the group's config with ``residual`` and
    ``keep_sum``), else None."""
    if not isinstance(cfg, config) or cfg.residual:
        return None
    inside = set(layers)
    made = {o for i in inside for o in pat.layers[i].outputs}
    xs = {t for i in inside for t in pat.layers[i].inputs if t not in made}
    if len(xs) != 1:
        return None
    hit = residual_add(pat, xs.pop(), tuple(cfg.x), inside)
    if hit is None:
        return None
    add, keep = hit
    return add, dataclasses.replace(cfg, residual=True, keep_sum=keep)


def _find_residual_layernorm(pat: Graph, norm: Node):
    return find_residual_norm(pat, norm, LayerNormConfig)


def _residual_layernorm_group(pat: Graph, layers: tuple[int, ...], cfg):
    return residual_of_group(pat, layers, cfg, LayerNormConfig)


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=LayerNormConfig(x=(1, 1, 1, 768), axis=3, epsilon=9.999999974752427e-07, bias=True, stats=False),
    name="LayerNorm", config=LayerNormConfig, template="layernorm.cpp.j2", case=_layernorm_case, min_bytes=_min_bytes,
    torch=_layernorm, onnx={"LayerNormalization": _map_layernorm},
    typed_ops=(), fused_from=('ReduceMean', 'Sub', 'Pow', 'Sqrt', 'Div', 'Mul', 'Add'),
    aten={"LayerNormalization": ('aten::layer_norm', 'aten::native_layer_norm')},
    patterns=(Pattern("decomposed LayerNorm", (40, 0), find_layernorm),
              Pattern("Add -> LayerNorm", (130, 0), _find_residual_layernorm, extend=_residual_layernorm_group)),
    nhwc=False, image=False)
