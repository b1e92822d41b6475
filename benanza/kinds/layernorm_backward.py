"""LayerNorm backward layers: the gradients of a :class:`~benanza.kinds.layernorm.LayerNormConfig` in a
training step (docs/training.md). The LayerNorm kind's backward is two calls:

- phase ``forward``: the layer's training-mode forward, the same LayerNorm config with ``stats``
  (cuDNN's layernorm TRAINING phase, benanza's kernel writing mean and rstd, PyTorch's
  ``aten::native_layer_norm``, which returns them): autograd saves the mean and the inverse standard
  deviation of every row for the backward pass, so in a training step it replaces the inference call;
- phase ``backward_data``: :class:`LayerNormBwdConfig`, one call that gives the data gradient dX
  *and* the weight gradients dScale and dBias (cuDNN's layernorm_backward node outputs the three;
  PyTorch's ``aten::native_layer_norm_backward`` too, with its output mask), so the layer has no
  separate ``backward_weight`` call.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its PyTorch
candidate and its place as the forward kind's backward (:class:`benanza.kinds.base.Kind`). It maps no
ONNX op: processing makes its configs from the forward layers (``Kind.backward`` of LayerNorm).

RMSNorm's backward is its own kind: :mod:`benanza.kinds.rmsnorm_backward`.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, RowNorm, Shape, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label
from benanza.kinds.layernorm import LayerNormConfig

#: floating-point operations per element of the backward (layer_norm_kernel.cu's formulas):
#: xhat = (x - mean) * rstd (2), g = scale * dy (1), the row sums of g and g * xhat (3), dx =
#: rstd * (g - m1 - xhat * m2) (4), dscale += dy * xhat (2), dbias += dy (1)
FLOPS_PER_ELEMENT = 13


@dataclass(frozen=True)
class LayerNormBwdConfig(RowNorm, LayerConfig):
    """The backward of a LayerNorm over ``x`` normalised from ``axis`` on: x viewed as (rows, cols) =
    (prod(x[:axis]), prod(x[axis:])) as the forward kind does.

    Inputs: dy (x's shape), x, scale (cols,) float32, and the forward's saved mean and rstd (rows,)
    float32. Outputs: dx (x's shape, the precision's type), dscale and, with ``bias`` (the forward
    has ONNX's B input), dbias, (cols,) float32: the one call gives the weight gradients with the data
    gradient (its phase is ``backward_data``). No epsilon: the saved rstd carries it.

    Timed: cudnn-frontend ``Graph::layernorm_backward`` (DY, X, SCALE, saved MEAN and INV_VARIANCE ->
    DX, DSCALE, DBIAS; cuDNN developer guide, "Layernorm Backward"), every engine config of heuristics
    modes A, B and the fallback list (cuDNN always writes DBIAS; for a layer without bias it is
    computed and unused, and the records say so); and ``benanza::layernorm_backward_kernel`` (a row
    kernel for dx, a column reduction for dscale and dbias), so the layer always has a measurement.
    FLOPs: :data:`FLOPS_PER_ELEMENT` per element of x.
    """

    kind: ClassVar[str] = "LayerNormBwd"
    x: Shape
    axis: int
    bias: bool = True

    def __post_init__(self):
        if not 0 <= self.axis < len(self.x):
            raise ValueError(f"LayerNorm backward: axis {self.axis} out of range for rank {len(self.x)}")

    @classmethod
    def of(cls, fwd: LayerNormConfig) -> "LayerNormBwdConfig":
        """The backward call of the forward LayerNorm ``fwd``."""
        return cls(x=tuple(fwd.x), axis=fwd.axis, bias=fwd.bias)

    def input_shapes(self):
        norm = tuple(self.x[self.axis:])
        stats = tuple(self.x[:self.axis])
        return [self.x, self.x, norm, stats, stats]  # dy, x, scale, mean, rstd

    def output_shape(self):
        return self.x  # dx (dscale and dbias: (cols,) float32 beside it)

    def flops(self):
        return FLOPS_PER_ELEMENT * numel(self.x)

    def describe(self):
        return f"LayerNormBwd({'x'.join(map(str, self.x))} axis {self.axis}{'' if self.bias else ' no-bias'})"


def layernorm_backward(cfg: LayerNormConfig) -> tuple:
    """``Kind.backward`` of the LayerNorm kind: the training-mode forward (the config with ``stats``:
    it saves mean and rstd) and one ``backward_data`` call that also gives dScale and dBias."""
    return (("forward", dataclasses.replace(cfg, stats=True)), ("backward_data", LayerNormBwdConfig.of(cfg)))


def _min_bytes(cfg: LayerNormBwdConfig, ib: int, ob: int) -> int:
    """dy and x read once (``ib`` bytes per element), scale and the saved mean and rstd (float32) read
    once, dx written once (``ob``), dscale and dbias (float32; dbias with a bias) written once (bytes):
    the compulsory traffic (Williams et al., "Roofline", CACM 2009)."""
    n = numel(cfg.x)
    return 2 * ib * n + 4 * cfg.cols + 2 * 4 * cfg.rows + ob * n + 4 * cfg.cols * (2 if cfg.bias else 1)


@dataclass(frozen=True)
class LayerNormBwdCase(Case):
    """One row of ``templates/layernorm_backward.cpp.j2``'s case table: the fields of its C++
    ``LayerNormBwdCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order
    against the template)."""

    rows: CppValue
    cols: CppValue
    bias: CppValue
    note: CppValue


def _case(cfg: LayerNormBwdConfig, job: Job) -> LayerNormBwdCase:
    note = "" if cfg.bias else "no bias input: cuDNN's dBias is computed and unused"
    return LayerNormBwdCase(job=job_init(job), rows=cfg.rows, cols=cfg.cols, bias=cpp_num(cfg.bias),
                            note=cpp_string(note))


def _torch(c: Ctx) -> Candidate:
    """``aten::native_layer_norm_backward`` (what autograd runs for ``F.layer_norm``; derivatives.yaml:
    native_layer_norm -> native_layer_norm_backward(grad, input, normalized_shape, mean, rstd, weight,
    bias, grad_input_mask)), on the mean and rstd ``aten::native_layer_norm`` saves (computed in the
    set-up); the mask asks for dbias only when the layer has a bias."""
    cfg, torch = c.cfg, c.torch
    norm = list(cfg.x[cfg.axis:])
    x = c.randn(cfg.x)
    dy = c.randn(cfg.x)
    w = c.randn(norm)
    b = c.randn(norm) if cfg.bias else None
    saved = torch.native_layer_norm(x, norm, w, b, 1e-5)  # (y, mean, rstd)
    mean, rstd = saved[1], saved[2]
    mask = [True, True, bool(cfg.bias)]
    return Candidate("torch:aten::native_layer_norm_backward", algo_label(c),
                     lambda: torch.ops.aten.native_layer_norm_backward(dy, x, norm, mean, rstd, w, b, mask)[0],
                     numel(cfg.x))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=LayerNormBwdConfig(x=(32, 197, 768), axis=2, bias=True),
    name="LayerNormBwd", config=LayerNormBwdConfig, template="layernorm_backward.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, backward_of={"LayerNorm": layernorm_backward},
    nhwc=False, image=False)
