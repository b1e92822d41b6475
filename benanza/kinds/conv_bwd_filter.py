"""ConvBwdFilter layers: the filter (and bias) gradient of a convolution in a training step;
cudnnConvolutionBackwardFilter (+ the bias gradient: cudnnConvolutionBackwardBias, in bf16, which it does not
support, benanza's reduction kernel) and the cuDNN graph API's ``conv_wgrad``.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its
PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`). It maps no
ONNX op: its configs come from :attr:`benanza.kinds.conv.KIND`'s ``backward`` (and ConvBiasAct's).
The config class (:class:`benanza.kinds.conv.ConvBwdFilterConfig`) lives with the forward convolution's, whose
``backward`` builds it (a module of its own would import conv.py while conv.py imports it).
"""
from __future__ import annotations

from benanza.kinds.base import Kind, numel
from benanza.kinds.conv import ConvBwdFilterConfig, ConvConfig, conv_backward_candidate, conv_case


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
