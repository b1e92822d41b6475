"""ConvBwdFilter layers: the filter (and bias) gradient of a convolution in a training step;
cudnnConvolutionBackwardFilter (+ cudnnConvolutionBackwardBias) and the cuDNN graph API's ``conv_wgrad``.

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
class ConvBwdFilterConfig(LayerConfig):
    """The weight gradient of the convolution ``conv``: dw (shape ``conv.w``) from x and dy, as
    cudnnConvolutionBackwardFilter computes it, and with ``conv.bias`` also the bias gradient
    db[k] = sum over n and out positions of dy[n, k, ...] (cudnnConvolutionBackwardBias; NVIDIA cuDNN
    API reference, cudnn_cnn.h); PyTorch: ``aten::convolution_backward`` with output_mask
    (False, True, bias).

    Inputs: x (N, C, *spatial), dy (N, K, *out); output: dw (K, C/group, *kernel) (and db (K,)).
    FLOPs: 2 * N * K * prod(out) * C/group * prod(kernel), the forward's multiply-adds x 2 (every
    term of the forward sum is one term dy * x of dw), + N * K * prod(out) adds for db: the forward
    convolution's count (:meth:`ConvConfig.flops`).
    """

    kind: ClassVar[str] = "ConvBwdFilter"
    tensor_cores: ClassVar[bool] = True
    conv: ConvConfig

    def input_shapes(self):
        return [self.conv.x, self.conv.output_shape()]

    def output_shape(self):
        return self.conv.w

    def flops(self):
        return self.conv.flops()

    def describe(self):
        return self.conv.describe().replace("Conv(", "ConvBwdFilter(", 1)


def _case(cfg: ConvBwdFilterConfig, job):
    """The forward convolution's case (``templates/conv_bwd_filter.cpp.j2``'s ``ConvBwdFilterCase``
    has the fields of ``ConvCase``; ``bias``: the bias gradient is computed too)."""
    return conv_case(cfg.conv, job)


def _torch(c):
    return conv_backward_candidate(c, c.cfg.conv, data=False)


def _min_bytes(cfg: ConvBwdFilterConfig, ib: int, ob: int) -> int:
    """x and dy read once, dw (and db) written once (bytes): ``ib * (|x| + |dy|) + ob * (|w| [+ K])``."""
    conv = cfg.conv
    out = numel(conv.w) + (conv.w[0] if conv.bias else 0)
    return ib * (numel(conv.x) + numel(conv.output_shape())) + ob * out


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`); the example: the weight and bias
#: gradient of the Conv kind's example (a squeeze-and-excitation 1x1 convolution with a bias)
KIND = Kind(
    example=ConvBwdFilterConfig(conv=ConvConfig(x=(1, 32, 1, 1), w=(8, 32, 1, 1), pads=(0, 0, 0, 0),
                                                strides=(1, 1), dilations=(1, 1), group=1, bias=True)),
    name="ConvBwdFilter", config=ConvBwdFilterConfig, template="conv_bwd_filter.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, onnx={}, typed_ops=(), fused_from=(),
    aten={"Conv": ("aten::convolution_backward",)},
    nhwc=True, image=False)
