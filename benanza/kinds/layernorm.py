"""LayerNorm layers. ONNX LayerNormalization (opset 17; ONNX operator spec), inference:

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from benanza.kinds.base import OPTIONAL, Job, Kind, LayerConfig, RowNorm, Shape, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label, functional
from benanza.kinds.onnx_map import Unsupported, need


@dataclass(frozen=True)
class LayerNormConfig(RowNorm, LayerConfig):
    """ONNX LayerNormalization (opset 17; ONNX operator spec), inference:
    ``y = (x - mean) / sqrt(var + epsilon) * scale (+ bias)``, mean and (biased) variance over the
    dims from ``axis`` on. Also the fused form of the decomposed ReduceMean/Sub/Pow/ReduceMean/Add/
    Sqrt/Div/Mul/Add chain older exporters emit (a fusion candidate, see ``model._find_layernorms``).

    x: the input shape; axis >= 0; the call sees x as (rows, cols) = (prod(x[:axis]), prod(x[axis:])),
    scale and bias as (cols,) in float32 (as cuDNN's samples and mixed-precision frameworks keep
    them). bias: ONNX's optional B input is present (absent: timed with a zero bias); stats: the
    optional Mean/InvStdDev outputs are used (the call then also writes them, float32, (rows,)).
    residual: the fusion candidate of a residual ``Add(a, b)`` of two tensors of x's shape feeding the
    norm (``model._find_residual_norms``): the norm of ``a + b`` (the sum rounded to the storage type, as
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


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=LayerNormConfig(x=(1, 1, 1, 768), axis=3, epsilon=9.999999974752427e-07, bias=True, stats=False),
    name="LayerNorm", config=LayerNormConfig, template="layernorm.cpp.j2", case=_layernorm_case, min_bytes=_min_bytes,
    torch=_layernorm, onnx={"LayerNormalization": _map_layernorm},
    typed_ops=(), fused_from=('ReduceMean', 'Sub', 'Pow', 'Sqrt', 'Div', 'Mul', 'Add'),
    aten={"LayerNormalization": ('aten::layer_norm', 'aten::native_layer_norm')},
    nhwc=False, image=False)
