"""SwiGLU gate backward layers: both gradients of SwiGLU's gating ``y = silu(a) * b`` (the Elementwise kind's
``swiglu`` op, a fusion candidate of an exported Sigmoid -> Mul -> Mul; Llama's MLP
``act_fn(gate_proj(x)) * up_proj(x)``) in a training step (docs/training.md), as one call that reads a, b and dy
and writes da and db.

With s = sigmoid(a), silu(a) = a * s and silu'(a) = s * (1 + a * (1 - s)) (PyTorch's ``silu_backward``,
aten/src/ATen/native/cuda/ActivationSiluKernel.cu), the product rule gives
``da = dy * b * s * (1 + a * (1 - s))`` and ``db = dy * silu(a)`` (tools/autograd/derivatives.yaml:
``mul.Tensor: self: mul_tensor_backward(grad, other)``, ``silu: self: silu_backward(grad, self)``).

cuDNN and cuBLAS have no such call (cuDNN's graph API could chain pointwise nodes, but benanza's
pointwise backward calls are its own kernels, :mod:`benanza.kinds.unary_backward`), so the library
side is benanza's kernel ``benanza::swiglu_backward_kernel`` (``cpp/src/unary_backward_kernels.cu``:
one pass, 16-byte vectors, float32 math) and the framework side what eager autograd runs for
``F.silu(a) * b``: ``aten::mul`` (dy * b), ``aten::silu_backward`` and ``aten::mul`` (dy * silu(a),
silu(a) saved by the forward's mul), three kernels timed as one candidate.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its PyTorch
candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`). It maps no ONNX op and
is no forward kind's ``backward_of``: the Elementwise kind's backward
(:func:`benanza.kinds.elementwise_backward.elementwise_backward`) returns it for a ``swiglu`` config,
which only the training plan's fusion groups hold (:func:`benanza.processing.training.training_plan`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, functional

#: FLOPs per element: sigmoid (exp, add, divide: 3), silu = a * s (1), 1 - s, a * (1 - s), 1 + that
#: (3), s * that (1), dy * b (1), da (1), db = dy * silu (1)
FLOPS_PER_ELEMENT = 11


@dataclass(frozen=True)
class SwiGLUBwdConfig(LayerConfig):
    """The gradients of ``y = silu(a) * b`` over same-shape a, b (``shape``, the gate and up projections,
    e.g. (batch, seq, intermediate)): ``da = dy * b * s * (1 + a * (1 - s))``, ``db = dy * a * s`` with
    s = sigmoid(a) (module docstring for the source). Inputs: a, b, dy; outputs: da, db (both
    ``shape``; :meth:`output_shape` is da's). FLOPs: :data:`FLOPS_PER_ELEMENT` per element.
    Raises ValueError for an empty shape."""

    kind: ClassVar[str] = "SwiGLUBwd"
    shape: Shape

    def __post_init__(self):
        if not self.shape or numel(self.shape) < 1:
            raise ValueError(f"SwiGLUBwdConfig: shape {self.shape} has no elements")

    def input_shapes(self):
        return [self.shape, self.shape, self.shape]  # a, b, dy

    def output_shape(self):
        return self.shape  # da (db has the same shape)

    def flops(self):
        return FLOPS_PER_ELEMENT * numel(self.shape)

    def describe(self):
        return f"SwiGLUBwd({'x'.join(map(str, self.shape))})"


def _min_bytes(cfg: SwiGLUBwdConfig, ib: int, ob: int) -> int:
    """a, b and dy read once (``ib`` bytes an element), da and db written once (``ob``): bytes; Williams
    et al., "Roofline", CACM 2009: compulsory traffic."""
    return (3 * ib + 2 * ob) * numel(cfg.shape)


@dataclass(frozen=True)
class SwiGLUBwdCase(Case):
    """One row of ``templates/swiglu_backward.cpp.j2``'s case table: the fields of its C++
    ``SwiGLUBwdCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order
    against the template)."""

    n: CppValue
    label: CppValue


def _case(cfg: SwiGLUBwdConfig, job: Job) -> SwiGLUBwdCase:
    return SwiGLUBwdCase(job=job_init(job), n=numel(cfg.shape), label=cpp_string("da, db of silu(a) * b"))


def _torch(c: Ctx) -> Candidate:
    """What eager autograd runs for ``F.silu(a) * b``: mul's backward ``dy * b`` (the gate's incoming
    gradient) and ``dy * silu(a)`` (silu(a) saved by the forward: computed once here), and
    ``silu_backward(dy * b, a)``; three kernels, (da, db) returned."""
    cfg, torch = c.cfg, c.torch
    a, b, dy = c.randn(cfg.shape), c.randn(cfg.shape), c.randn(cfg.shape)
    silu = functional(c).silu(a)
    aten = torch.ops.aten

    def run():
        return aten.silu_backward(torch.mul(dy, b), a), torch.mul(dy, silu)
    return Candidate("torch:aten::silu_backward+aten::mul", "eager autograd", run, numel(cfg.shape),
                     "the backward eager autograd runs for F.silu(a) * b: aten::mul (dy * b), "
                     "aten::silu_backward, aten::mul (dy * silu(a)); three kernels")


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=SwiGLUBwdConfig(shape=(1, 128, 11008)),
    name="SwiGLUBwd", config=SwiGLUBwdConfig, template="swiglu_backward.cpp.j2", case=_case, min_bytes=_min_bytes,
    torch=_torch, aten={"Sigmoid": ("aten::silu_backward",)}, nhwc=False, image=False)
