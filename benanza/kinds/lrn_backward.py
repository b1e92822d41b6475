"""LRN backward layers: the data gradient of an :class:`~benanza.kinds.lrn.LRNConfig` in a training step
(docs/training.md), cudnnLRNCrossChannelBackward with the forward's descriptor (size, alpha, beta, bias) in
CUDNN_LRN_CROSS_CHANNEL_DIM1, as the forward kind times cudnnLRNCrossChannelForward.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its PyTorch
candidate and its place as the forward kind's backward call (:class:`benanza.kinds.base.Kind`). It maps
no ONNX op: processing makes its configs from the forward layers (``Kind.backward`` of the LRN kind).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.framework import Candidate, Ctx, functional
from benanza.kinds.lrn import LRNCase, LRNConfig, lrn_case
from benanza.kinds.sdpa import with_autograd


@dataclass(frozen=True)
class LRNBwdConfig(LayerConfig):
    """The data gradient of an LRN across channels: dx (``shape``, NCHW) from dy and x.

    Fields as :class:`~benanza.kinds.lrn.LRNConfig` (size: the channel window, cuDNN's 1..16; alpha,
    beta, bias as ONNX LRN-13, alpha divided by size in both cuDNN and ONNX). With
    s_i = bias + alpha / size * sum_{window(i)} x_j^2 and y_i = x_i * s_i^-beta (ONNX LRN's formula),
    the gradient is dx_i = dy_i * s_i^-beta - (2 * alpha * beta / size) * x_i *
    sum_{j : i in window(j)} dy_j * y_j / s_j. Inputs: dy and x; output: dx, all of ``shape``.
    cudnnLRNCrossChannelBackward also reads y (the forward's output, alive in the step).

    FLOPs per element, counted from that formula: x^2 (1), its window sum (size), s (2), s^-beta
    (1), y (1), dy * y / s (2), that product's window sum (size), dx (4): 2 * size + 11.
    """

    kind: ClassVar[str] = "LRNBwd"
    shape: Shape
    size: int
    alpha: float
    beta: float
    bias: float

    @classmethod
    def of(cls, fwd: LRNConfig) -> "LRNBwdConfig":
        """The backward call of the forward LRN ``fwd``."""
        return cls(shape=tuple(fwd.shape), size=fwd.size, alpha=fwd.alpha, beta=fwd.beta, bias=fwd.bias)

    @property
    def forward(self) -> LRNConfig:
        """The forward LRN this is the gradient of."""
        return LRNConfig(shape=self.shape, size=self.size, alpha=self.alpha, beta=self.beta, bias=self.bias)

    def input_shapes(self):
        return [self.shape, self.shape]  # dy, x

    def output_shape(self):
        return self.shape

    def flops(self):
        return numel(self.shape) * (2 * self.size + 11)


def lrn_backward(cfg: LRNConfig) -> tuple:
    """``Kind.backward`` of the LRN kind: one data-gradient call (LRN has no weights)."""
    return (("backward_data", LRNBwdConfig.of(cfg)),)


def _min_bytes(cfg: LRNBwdConfig, ib: int, ob: int) -> int:
    """dy and x read once, dx written once (bytes; :func:`benanza.kinds.base.io_bytes`): s and y
    follow from x's channel window, so the least any implementation moves is three tensors (cuDNN's
    call reads y as well, PyTorch's autograd reads the decomposition's saved tensors)."""
    return io_bytes(cfg, ib, ob)


@dataclass(frozen=True)
class LRNBwdCase(LRNCase):
    """One row of ``templates/lrn_backward.cpp.j2``'s case table: the fields of its C++ ``LRNBwdCase``
    in order (those of the forward's ``LRNCase``: the same descriptor), as C++ literals
    (``tests/test_kinds_registry.py`` checks the order against the template)."""


def _case(cfg: LRNBwdConfig, job: Job) -> LRNBwdCase:
    fwd = lrn_case(cfg.forward, job)
    return LRNBwdCase(job=fwd.job, dims=fwd.dims, size=fwd.size, alpha=fwd.alpha, beta=fwd.beta, bias=fwd.bias)


def _torch(c: Ctx) -> Candidate:
    """The backward autograd runs for ``F.local_response_norm`` (the forward candidate of
    :mod:`benanza.kinds.lrn`). PyTorch has no fused LRN backward kernel: ``local_response_norm``
    (torch/nn/functional.py) is a decomposition (mul, constant_pad_nd, avg_pool2d, mul, add, pow,
    div) and its autograd runs the backward of each of those ops. The forward runs once in the set-up
    on an x that requires grad; each call is ``torch.autograd.grad(y, x, dy, retain_graph=True)``:
    only the backward is timed, dx returned."""
    cfg, torch, F = c.cfg, c.torch, functional(c)

    def setup():
        x = c.randn(cfg.shape).requires_grad_()
        return {"x": x, "y": F.local_response_norm(x, cfg.size, cfg.alpha, cfg.beta, cfg.bias),
                "dy": c.randn(cfg.shape)}
    t = with_autograd(torch, setup)()

    def run():
        return torch.autograd.grad(t["y"], t["x"], t["dy"], retain_graph=True)[0]
    return Candidate("torch:aten::local_response_norm", "autograd backward", with_autograd(torch, run),
                     numel(cfg.shape), "the backward of F.local_response_norm through autograd (its "
                     "decomposed ops' backward kernels; PyTorch has no fused LRN backward); the forward runs "
                     "once in the set-up")


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=LRNBwdConfig(shape=(1, 64, 56, 56), size=5, alpha=0.0001, beta=0.75, bias=1.0),
    name="LRNBwd", config=LRNBwdConfig, template="lrn_backward.cpp.j2", case=_case, min_bytes=_min_bytes,
    torch=_torch, backward_of={"LRN": lrn_backward}, nhwc=False, image=True)
