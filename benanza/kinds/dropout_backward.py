"""DropoutBwd layers: the data gradient of a training-mode Dropout (docs/training.md), dx = dy * mask / (1 -
ratio): cudnnDropoutBackward (reading the reserve space its cudnnDropoutForward wrote) and PyTorch's
``native_dropout_backward`` (aten/src/ATen/native/cuda/Dropout.cu, ``masked_scale``: grad * mask *
scale on a bool mask).

A Dropout has two lives in benanza. Exported for inference (the usual case), its node is a
zero-cost identity; in a training step it draws its mask and scales, so
:func:`benanza.processing.training.training_plan` times it there as its training-mode forward
(``forward``: the Dropout kind's config, cudnnDropoutForward, from ``Layer.train_config``) plus this
kind's backward call. Exported in training mode, the node is a Dropout layer already (its forward
call is the training one) and its ``backward`` is this kind's call alone (:func:`dropout_backward`).

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its
PyTorch candidate and its place as the Dropout kind's backward (:class:`benanza.kinds.base.Kind`). It
maps no ONNX op.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, as4, c_array, cpp_num, job_init
from benanza.kinds.dropout import DropoutConfig
from benanza.kinds.framework import Candidate, Ctx, NotSupported


@dataclass(frozen=True)
class DropoutBwdConfig(LayerConfig):
    """The data gradient of a training-mode Dropout of ``ratio`` (the probability of dropping, in
    (0, 1)) on tensors of ``shape``: dx = dy * mask / (1 - ratio). Inputs: dy of ``shape`` and the
    forward's mask (one byte per element in PyTorch, a bool tensor; cuDNN keeps it in its reserve
    space); output dx of ``shape``. FLOPs: 2 per element (the mask and the scale multiplications,
    PyTorch's masked_scale)."""

    kind: ClassVar[str] = "DropoutBwd"
    shape: Shape
    ratio: float

    def __post_init__(self):
        if not 0.0 < self.ratio < 1.0:
            raise ValueError(f"dropout backward of ratio {self.ratio} (0 < ratio < 1)")

    @classmethod
    def of(cls, fwd: DropoutConfig) -> "DropoutBwdConfig":
        return cls(shape=tuple(fwd.shape), ratio=float(fwd.ratio))

    def input_shapes(self):
        return [self.shape, self.shape]  # dy, the mask

    def output_shape(self):
        return self.shape

    def flops(self):
        return 2 * numel(self.shape)

    def describe(self):
        return f"DropoutBwd({'x'.join(map(str, self.shape))}, p={self.ratio:g})"


def dropout_backward(cfg: DropoutConfig) -> tuple | None:
    """``Kind.backward`` of the Dropout kind (a node exported in training mode, whose forward call is
    already the training one): one data-gradient call. None for a ratio outside (0, 1) (PyTorch
    returns the input for 0, zeros for 1: no dropout kernels), which counts the layer as lacking a
    backward rather than free."""
    if not 0.0 < cfg.ratio < 1.0:
        return None
    return (("backward_data", DropoutBwdConfig.of(cfg)),)


def _min_bytes(cfg: DropoutBwdConfig, ib: int, ob: int) -> int:
    """dy read and dx written once, the mask read once at one byte per element (PyTorch's bool mask;
    Williams et al., "Roofline", CACM 2009: compulsory traffic) (bytes)."""
    n = numel(cfg.shape)
    return ib * n + n + ob * n


@dataclass(frozen=True)
class DropoutBwdCase(Case):
    """One row of ``templates/dropout_backward.cpp.j2``'s case table: the fields of its C++
    ``DropoutBwdCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order)."""

    dims: CppValue
    ratio: CppValue


def _case(cfg: DropoutBwdConfig, job: Job) -> DropoutBwdCase:
    return DropoutBwdCase(job=job_init(job), dims=c_array(as4(cfg.shape), 4), ratio=cpp_num(cfg.ratio))


def _torch(c: Ctx) -> Candidate:
    """``aten::native_dropout_backward(dy, mask, 1 / (1 - ratio))`` on a bool mask drawn with the
    ratio in the set-up (what autograd runs for F.dropout's fused CUDA kernel, NativeDropoutBackward0)."""
    cfg, torch = c.cfg, c.torch
    if not 0.0 < cfg.ratio < 1.0:
        raise NotSupported(f"dropout ratio {cfg.ratio}")
    dy = c.randn(cfg.shape)
    mask = torch.rand(tuple(cfg.shape), device=c.device) >= cfg.ratio
    scale = 1.0 / (1.0 - cfg.ratio)
    return Candidate("torch:aten::native_dropout_backward", "training",
                     lambda: torch.ops.aten.native_dropout_backward(dy, mask, scale), numel(cfg.shape))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`); the example: the backward of the
#: Dropout kind's example
KIND = Kind(
    example=DropoutBwdConfig(shape=(1, 64, 56, 56), ratio=0.1),
    name="DropoutBwd", config=DropoutBwdConfig, template="dropout_backward.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, onnx={}, typed_ops=(), fused_from=(),
    aten={"Dropout": ("aten::native_dropout_backward",)},
    nhwc=False, image=False, backward_of={"Dropout": dropout_backward})
