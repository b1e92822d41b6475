"""RMSNorm backward layers: the gradients of a :class:`~benanza.kinds.rmsnorm.RMSNormConfig` in a
training step (docs/training.md). The RMSNorm kind's backward is three calls:

- phase ``forward``: the layer's training-mode forward, the same RMSNorm config with ``stats``
  (cuDNN's rmsnorm TRAINING phase, benanza's kernel writing r, PyTorch's ``aten::_fused_rms_norm``,
  which returns ``rstd``): autograd saves the inverse root mean square ``r`` of every row for the
  backward pass, so in a training step it replaces the inference call;
- phase ``backward_data``: :class:`RMSNormBwdConfig` with ``grad="dx"``, the data gradient dX;
- phase ``backward_weight``: :class:`RMSNormBwdConfig` with ``grad="dscale"``, the scale's gradient.

cuDNN's ``rmsnorm_backward`` node writes dX and dScale in one call, so it is timed in the dX job only
(a call that computes dX, and more, is a valid measurement of it); the dScale job has benanza's column
reduction and PyTorch's backward with ``output_mask=[False, True]``. Autograd asks for both in one
``aten::_fused_rms_norm_backward``, whose CUDA implementation runs a row kernel for dX and a column
reduction for dScale: the two jobs are those two kernels.

The decomposed chain (Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul, Mul: a fusion candidate) is taken
as one group in a training step (``benanza.processing.training.FUSED_BACKWARD_KINDS``): its
ReduceMean has no backward of its own.

Formulas, with ``g = scale * dy``, ``xhat = x * r``, ``r = 1 / sqrt(mean(x^2) + epsilon)`` over a row:
``dx = r * (g - xhat * mean(g * xhat))`` and ``dscale = sum over rows of dy * xhat`` (the derivative of
``y = x * r * scale``; Zhang and Sennrich, "Root Mean Square Layer Normalization", NeurIPS 2019, sec. 3;
the same as PyTorch's layer_norm_kernel.cu without the mean terms).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, RowNorm, Shape, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label
from benanza.kinds.rmsnorm import RMSNormConfig

#: the gradients this kind computes: the data gradient (phase ``backward_data``) and the scale's
#: (phase ``backward_weight``)
GRADS = ("dx", "dscale")

#: floating-point operations per element of x (the formulas above): dx: g = scale * dy (1), the row sum
#: of g * xhat with xhat = x * r (3), dx = r * (g - xhat * m) (4, xhat again 1); dscale: dy * x * r
#: summed (3)
FLOPS_PER_ELEMENT = {"dx": 8, "dscale": 3}


@dataclass(frozen=True)
class RMSNormBwdConfig(RowNorm, LayerConfig):
    """One gradient of an RMSNorm over ``x`` normalised from ``axis`` on: x viewed as (rows, cols) =
    (prod(x[:axis]), prod(x[axis:])) as the forward kind does.

    grad ``dx``: inputs dy (x's shape), x, scale (cols,) float32 and the forward's saved r (rows,)
    float32; output dx (x's shape, the precision's type). grad ``dscale``: inputs dy, x and r; output
    dscale (cols,) float32. No epsilon: the saved r carries it.

    Timed: ``benanza::rmsnorm_backward_dx_kernel`` (one block per row) or
    ``benanza::rmsnorm_backward_dscale_kernel`` (a column reduction), so the layer always has a
    measurement; for dx, cudnn-frontend ``Graph::rmsnorm_backward`` (DY, X, SCALE, INV_VARIANCE -> DX,
    DSCALE; cuDNN developer guide, "RMSNorm Backward"), every engine config of heuristics modes A, B and
    the fallback list. FLOPs: :data:`FLOPS_PER_ELEMENT` per element of x. Raises ValueError for an axis
    out of range or a grad not in :data:`GRADS`.
    """

    kind: ClassVar[str] = "RMSNormBwd"
    x: Shape
    axis: int
    grad: str = "dx"

    def __post_init__(self):
        if not 0 <= self.axis < len(self.x):
            raise ValueError(f"RMSNorm backward: axis {self.axis} out of range for rank {len(self.x)}")
        if self.grad not in GRADS:
            raise ValueError(f"RMSNorm backward: grad {self.grad!r} is not one of {GRADS}")

    @classmethod
    def of(cls, fwd: RMSNormConfig, grad: str) -> "RMSNormBwdConfig":
        """The ``grad`` call of the forward RMSNorm ``fwd``."""
        return cls(x=tuple(fwd.x), axis=fwd.axis, grad=grad)

    def input_shapes(self):
        norm, stats = tuple(self.x[self.axis:]), tuple(self.x[:self.axis])
        if self.grad == "dx":
            return [self.x, self.x, norm, stats]  # dy, x, scale, r
        return [self.x, self.x, stats]  # dy, x, r

    def output_shape(self):
        return self.x if self.grad == "dx" else tuple(self.x[self.axis:])

    def flops(self):
        return FLOPS_PER_ELEMENT[self.grad] * numel(self.x)

    def describe(self):
        return f"RMSNormBwd({self.grad} of {'x'.join(map(str, self.x))} axis {self.axis})"


def rmsnorm_backward(cfg: RMSNormConfig) -> tuple:
    """``Kind.backward`` of the RMSNorm kind: the training-mode forward (the config with ``stats``: it
    saves r), the data gradient and the scale's gradient."""
    return (("forward", dataclasses.replace(cfg, stats=True)),
            ("backward_data", RMSNormBwdConfig.of(cfg, "dx")),
            ("backward_weight", RMSNormBwdConfig.of(cfg, "dscale")))


def _min_bytes(cfg: RMSNormBwdConfig, ib: int, ob: int) -> int:
    """The compulsory traffic (bytes; Williams et al., "Roofline", CACM 2009): dy and x read once
    (``ib`` bytes per element) and the saved r (float32) read once; for dx, the scale (float32) read
    and dx written once (``ob``); for dscale, dscale (float32) written once."""
    n = numel(cfg.x)
    common = 2 * ib * n + 4 * cfg.rows
    return common + (4 * cfg.cols + ob * n if cfg.grad == "dx" else 4 * cfg.cols)


@dataclass(frozen=True)
class RMSNormBwdCase(Case):
    """One row of ``templates/rmsnorm_backward.cpp.j2``'s case table: the fields of its C++
    ``RMSNormBwdCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order
    against the template)."""

    rows: CppValue
    cols: CppValue
    dscale: CppValue
    note: CppValue


def _case(cfg: RMSNormBwdConfig, job: Job) -> RMSNormBwdCase:
    return RMSNormBwdCase(job=job_init(job), rows=cfg.rows, cols=cfg.cols, dscale=cpp_num(cfg.grad == "dscale"),
                          note=cpp_string(""))


def _torch(c: Ctx) -> Candidate:
    """``aten::_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask)``
    (PyTorch 2.8+, what autograd runs for ``F.rms_norm`` on CUDA; derivatives.yaml), on the ``rstd``
    ``aten::_fused_rms_norm`` saves (computed in the set-up); the mask asks for this config's gradient
    only: [True, False] for dx, [False, True] for dscale."""
    cfg, torch = c.cfg, c.torch
    norm = list(cfg.x[cfg.axis:])
    x, dy, w = c.randn(cfg.x), c.randn(cfg.x), c.randn(norm)
    rstd = torch.ops.aten._fused_rms_norm(x, norm, w, 1e-6)[1]
    dx = cfg.grad == "dx"
    out = 0 if dx else 1
    return Candidate("torch:aten::_fused_rms_norm_backward", algo_label(c),
                     lambda: torch.ops.aten._fused_rms_norm_backward(dy, x, norm, rstd, w, [dx, not dx])[out],
                     numel(cfg.output_shape()))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=RMSNormBwdConfig(x=(1, 128, 256), axis=2, grad="dx"),
    name="RMSNormBwd", config=RMSNormBwdConfig, template="rmsnorm_backward.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, backward_of={"RMSNorm": rmsnorm_backward},
    nhwc=False, image=False)
