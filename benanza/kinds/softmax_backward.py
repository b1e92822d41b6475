"""Softmax backward layers: the data gradient of a :class:`~benanza.kinds.softmax.SoftmaxConfig` in a
training step (docs/training.md), cudnnSoftmaxBackward (ACCURATE or LOG, CHANNEL mode) on the tensor viewed as
(outer, axis, inner) as the forward kind.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its PyTorch
candidate (the ATen backward op autograd runs) and its place as the forward kind's backward call
(:class:`benanza.kinds.base.Kind`). It maps no ONNX op: processing makes its configs from the forward
layers (``Kind.backward`` of the Softmax kind).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, c_array, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label
from benanza.kinds.softmax import SoftmaxConfig


@dataclass(frozen=True)
class SoftmaxBwdConfig(LayerConfig):
    """The data gradient of a softmax over dim 1 of ``shape`` (outer, axis, inner): from the forward's
    output y and dy, dx = y * (dy - sum_axis(dy * y)); of a log-softmax dx = dy - exp(y) * sum_axis(dy)
    (PyTorch's _softmax_backward_data and _log_softmax_backward_data, aten/src/ATen/native/SoftMax.cpp;
    cuDNN's cudnnSoftmaxBackward ACCURATE / LOG). Inputs: y and dy; output: dx, all of ``shape``.
    FLOPs: 4 per element (softmax: the product dy * y and its sum, the difference, the product with y;
    log-softmax: the sum of dy, exp(y), its product and the difference)."""

    kind: ClassVar[str] = "SoftmaxBwd"
    shape: Shape
    log: bool = False

    @classmethod
    def of(cls, fwd: SoftmaxConfig) -> "SoftmaxBwdConfig":
        """The backward call of the forward softmax ``fwd``."""
        return cls(shape=tuple(fwd.shape), log=fwd.log)

    def input_shapes(self):
        return [self.shape, self.shape]  # y, dy

    def output_shape(self):
        return self.shape

    def flops(self):
        return 4 * numel(self.shape)

    def describe(self):
        return f"SoftmaxBwd({'log ' if self.log else ''}{'x'.join(map(str, self.shape))})"


def softmax_backward(cfg: SoftmaxConfig) -> tuple:
    """``Kind.backward`` of the Softmax kind: one data-gradient call."""
    return (("backward_data", SoftmaxBwdConfig.of(cfg)),)


@dataclass(frozen=True)
class SoftmaxBwdCase(Case):
    """One row of ``templates/softmax_backward.cpp.j2``'s case table: the fields of its C++
    ``SoftmaxBwdCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order
    against the template)."""

    dims: CppValue
    algo: CppValue


def _case(cfg: SoftmaxBwdConfig, job: Job) -> SoftmaxBwdCase:
    return SoftmaxBwdCase(job=job_init(job), dims=c_array(list(cfg.shape) + [1], 4),
                          algo="CUDNN_SOFTMAX_LOG" if cfg.log else "CUDNN_SOFTMAX_ACCURATE")


def _torch(c: Ctx) -> Candidate:
    """``aten::_softmax_backward_data(dy, y, dim, input_dtype)`` (``_log_softmax_backward_data``), on
    the (outer, axis) view when inner is 1 (the last dim, PyTorch's row kernel) as the forward
    candidate, y the forward's output computed in the set-up."""
    cfg, torch = c.cfg, c.torch
    outer, axis, inner = cfg.shape
    shape, dim = ((outer, axis), -1) if inner == 1 else (cfg.shape, 1)
    x, dy = c.randn(shape), c.randn(shape)
    if cfg.log:
        y = torch.log_softmax(x, dim)
        op, name = torch.ops.aten._log_softmax_backward_data, "_log_softmax_backward_data"
    else:
        y = torch.softmax(x, dim)
        op, name = torch.ops.aten._softmax_backward_data, "_softmax_backward_data"
    return Candidate(f"torch:aten::{name}", algo_label(c), lambda: op(dy, y, dim, c.dtype), numel(cfg.shape))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=SoftmaxBwdConfig(shape=(1176, 49, 1), log=False),
    name="SoftmaxBwd", config=SoftmaxBwdConfig, template="softmax_backward.cpp.j2", case=_case,
    min_bytes=io_bytes, torch=_torch, backward_of={"Softmax": softmax_backward},
    nhwc=False, image=False)
