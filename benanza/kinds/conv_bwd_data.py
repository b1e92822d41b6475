"""ConvBwdData layers: the data gradient of a convolution (dx = conv_transpose(dy, w)) in a training
step; cudnnConvolutionBackwardData and the cuDNN graph API's ``conv_dgrad``.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its
PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`). It maps no
ONNX op: its configs come from :attr:`benanza.kinds.conv.KIND`'s ``backward`` (and ConvBiasAct's).
The config class (:class:`benanza.kinds.conv.ConvBwdDataConfig`) lives with the forward convolution's, whose
``backward`` builds it (a module of its own would import conv.py while conv.py imports it).
"""
from __future__ import annotations

from benanza.kinds.base import Kind, numel
from benanza.kinds.conv import ConvBwdDataConfig, ConvConfig, conv_backward_candidate, conv_case


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
