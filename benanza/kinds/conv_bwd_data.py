"""ConvBwdData layers: the data gradient of a convolution (dx = conv_transpose(dy, w)) in a training
step; cudnnConvolutionBackwardData and the cuDNN graph API's ``conv_dgrad``.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its
PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`). It maps no
ONNX op: its configs come from :attr:`benanza.kinds.conv.KIND`'s ``backward`` (and ConvBiasAct's).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Kind, LayerConfig, numel
from benanza.kinds.conv import ConvConfig, conv_backward_candidate, conv_case


@dataclass(frozen=True)
class ConvBwdDataConfig(LayerConfig):
    """The data gradient of the convolution ``conv``: dx (shape ``conv.x``) from dy (shape
    ``conv.output_shape()``) and w, as cudnnConvolutionBackwardData computes it (NVIDIA cuDNN API
    reference, cudnn_cnn.h) and PyTorch's ``aten::convolution_backward`` with output_mask
    (True, False, False).

    ``conv``: the forward convolution (its x, w, pads, strides, dilations, group), with ``bias``
    False: the data gradient does not depend on the bias, so convolutions that differ only in it
    share one config (:func:`benanza.kinds.conv.conv_backward` builds it so).

    Inputs: dy (N, K, *out), w (K, C/group, *kernel); output: dx (N, C, *spatial).
    FLOPs: 2 * N * K * prod(out) * C/group * prod(kernel), the forward convolution's multiply-adds
    x 2: every term x[n, c, i*s + j*d - p] * w[k, c, j] of the forward sum is one term
    dy[n, k, i] * w[k, c, j] of dx. (Counting dgrad as a stride-1 transposed convolution over
    zero-upsampled dy, 2 * N * C * prod(spatial) * K/group * prod(kernel), counts the zeros as well:
    s^2 times too many for a stride-s 1x1 convolution.)
    """

    kind: ClassVar[str] = "ConvBwdData"
    tensor_cores: ClassVar[bool] = True
    conv: ConvConfig

    def input_shapes(self):
        return [self.conv.output_shape(), self.conv.w]

    def output_shape(self):
        return self.conv.x

    def flops(self):
        return self.conv.flops() - (numel(self.conv.output_shape()) if self.conv.bias else 0)

    def describe(self):
        return self.conv.describe().replace("Conv(", "ConvBwdData(", 1)


def _case(cfg: ConvBwdDataConfig, job):
    """The forward convolution's case (``templates/conv_bwd_data.cpp.j2``'s ``ConvBwdDataCase`` has
    the fields of ``ConvCase``): the template derives dy's dims from it."""
    return conv_case(cfg.conv, job)


def _torch(c):
    return conv_backward_candidate(c, c.cfg.conv, data=True)


def _min_bytes(cfg: ConvBwdDataConfig, ib: int, ob: int) -> int:
    """dy and w read once, dx written once (bytes): ``ib * (|dy| + |w|) + ob * |x|``."""
    conv = cfg.conv
    return ib * (numel(conv.output_shape()) + numel(conv.w)) + ob * numel(conv.x)


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`); the example: the data gradient of
#: the Conv kind's example (a squeeze-and-excitation 1x1 convolution)
KIND = Kind(
    example=ConvBwdDataConfig(conv=ConvConfig(x=(1, 32, 1, 1), w=(8, 32, 1, 1), pads=(0, 0, 0, 0), strides=(1, 1),
                                              dilations=(1, 1), group=1, bias=False)),
    name="ConvBwdData", config=ConvBwdDataConfig, template="conv_bwd_data.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, onnx={}, typed_ops=(), fused_from=(),
    aten={"Conv": ("aten::convolution_backward",)},
    nhwc=True, image=False)
