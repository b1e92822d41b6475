"""Conv layers. ONNX Conv: ``y = conv(x, w) (+ bias)``; cudnnConvolutionForward (+ cudnnAddTensor for bias).

Also the configs of the convolution's two backward calls in a training step (:func:`conv_backward`):
:class:`ConvBwdDataConfig` and :class:`ConvBwdFilterConfig`, whose kinds' slices are
``benanza/kinds/conv_bwd_data.py`` and ``conv_bwd_filter.py``.

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label, functional
from benanza.kinds.onnx_map import MapContext, Unsupported, need, spatial_pads


def _conv_out(size: int, k: int, pad_begin: int, pad_end: int, stride: int, dilation: int) -> int:
    return (size + pad_begin + pad_end - dilation * (k - 1) - 1) // stride + 1


@dataclass(frozen=True)
class ConvConfig(LayerConfig):
    """ONNX Conv: ``y = conv(x, w) (+ bias)``; cudnnConvolutionForward (+ cudnnAddTensor for bias).

    x: (N, C, *spatial); w: (K, C/group, *kernel); pads: (begin..., end...) per spatial dim.
    FLOPs: 2 * N * K * prod(out spatial) * C/group * prod(kernel) (+ N*K*prod(out) for bias).
    """

    kind: ClassVar[str] = "Conv"
    tensor_cores: ClassVar[bool] = True
    x: Shape
    w: Shape
    pads: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    group: int
    bias: bool

    def input_shapes(self):
        return [self.x, self.w]

    def output_shape(self):
        nsp = len(self.x) - 2
        spatial = tuple(
            _conv_out(self.x[2 + i], self.w[2 + i], self.pads[i], self.pads[nsp + i],
                      self.strides[i], self.dilations[i]) for i in range(nsp))
        return (self.x[0], self.w[0]) + spatial

    @property
    def symmetric_pads(self) -> bool:
        nsp = len(self.x) - 2
        return tuple(self.pads[:nsp]) == tuple(self.pads[nsp:])

    def flops(self):
        y = self.output_shape()
        macs = numel(y) * self.w[1] * numel(self.w[2:])
        return 2 * macs + (numel(y) if self.bias else 0)

    def describe(self):
        nsp = len(self.x) - 2
        k = "x".join(map(str, self.w[2:]))
        parts = [f"{'x'.join(map(str, self.x))} k{self.w[0]} {k}",
                 f"s{','.join(map(str, self.strides))}"]
        if any(self.pads):
            parts.append(f"p{','.join(map(str, self.pads[:nsp] if self.symmetric_pads else self.pads))}")
        if any(d != 1 for d in self.dilations):
            parts.append(f"d{','.join(map(str, self.dilations))}")
        if self.group != 1:
            parts.append(f"g{self.group}")
        if self.bias:
            parts.append("bias")
        return f"Conv({' '.join(parts)})"


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


def _map_conv(node, ctx: MapContext, attrs):
    x = need(ctx.shape(node.input[0]), "input")
    w = need(ctx.shape(node.input[1]), "weight")
    if len(x) < 3 or len(x) > 5:
        raise Unsupported(f"Conv on a rank-{len(x)} tensor (cuDNN supports 1-3 spatial dims)")
    nsp = len(x) - 2
    kernel = tuple(attrs.get("kernel_shape", w[2:]))
    strides = tuple(attrs.get("strides", [1] * nsp))
    dil = tuple(attrs.get("dilations", [1] * nsp))
    group = int(attrs.get("group", 1))
    if tuple(w[2:]) != kernel:
        raise Unsupported(f"kernel_shape {kernel} differs from weight shape {w}")
    if 0 in x or 0 in w:
        raise Unsupported(f"Conv on an empty tensor (input {list(x)}, weight {list(w)}): no library call computes it")
    if group <= 0 or x[1] % group or w[0] % group or w[1] * group != x[1]:
        raise Unsupported(f"group {group} does not fit input channels {x[1]} and weight {w}")
    pads = spatial_pads(attrs, x, kernel, strides, dil)
    bias = len(node.input) > 2 and bool(node.input[2])
    return ConvConfig(x=tuple(x), w=tuple(w), pads=pads, strides=strides, dilations=dil,
                        group=group, bias=bias)


@dataclass(frozen=True)
class ConvCase(Case):
    """One row of ``templates/conv.cpp.j2``'s case table: the fields of its C++ ``ConvCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    nsp: CppValue
    x: CppValue
    w: CppValue
    pad: CppValue
    stride: CppValue
    dilation: CppValue
    group: CppValue
    bias: CppValue
    note: CppValue


def conv_case(cfg: ConvConfig, job: Job) -> ConvCase:
    x, w = list(cfg.x), list(cfg.w)
    nsp = len(x) - 2
    pads_b, pads_e = list(cfg.pads[:nsp]), list(cfg.pads[nsp:])
    strides, dil = list(cfg.strides), list(cfg.dilations)
    note = ""
    if pads_b != pads_e:
        # cuDNN pads symmetrically: time the convolution on an input that already holds the pads
        x = x[:2] + [x[2 + i] + pads_b[i] + pads_e[i] for i in range(nsp)]
        pads_b = [0] * nsp
        note = "asymmetric pads: timed on an input padded beforehand (pad 0), same output and work"
    if nsp == 1:
        x = x[:2] + [1] + x[2:]
        w = w[:2] + [1] + w[2:]
        pads_b, strides, dil = [0] + pads_b, [1] + strides, [1] + dil
        nsp = 2
        note = (note + "; " if note else "") + "1-D convolution timed as 2-D with H=1"
    return ConvCase(job=job_init(job), nsp=nsp, x=c_array(x, 5), w=c_array(w, 5), pad=c_array(pads_b, 3), stride=c_array(strides, 3, 1), dilation=c_array(dil, 3, 1), group=cfg.group, bias=cpp_num(cfg.bias), note=cpp_string(note))


def conv_fn(c: Ctx, conv: ConvConfig):
    """(fn computing conv(x, w) + bias, note): PyTorch's convNd; asymmetric pads by F.pad first."""
    F = functional(c)
    nsp = len(conv.x) - 2
    if nsp not in (1, 2, 3):
        raise NotSupported(f"{nsp}-D convolution")
    op = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[nsp]
    x = c.fmt(c.randn(conv.x))
    w = c.fmt(c.randn(conv.w))
    b = c.randn((conv.w[0],)) if conv.bias else None
    begin, end = conv.pads[:nsp], conv.pads[nsp:]
    if tuple(begin) == tuple(end):
        return (lambda: op(x, w, b, conv.strides, tuple(begin), conv.dilations, conv.group)), ""
    pad = []
    for i in reversed(range(nsp)):
        pad += [begin[i], end[i]]
    return (lambda: op(F.pad(x, pad), w, b, conv.strides, 0, conv.dilations, conv.group)), \
        "asymmetric pads: F.pad, then the convolution"


def conv_backward_candidate(c: Ctx, conv: ConvConfig, data: bool) -> Candidate:
    """PyTorch's backward of ``conv`` as its autograd runs it (``ConvolutionBackward0`` calls
    ``aten::convolution_backward``, aten/src/ATen/native/Convolution.cpp): the data gradient
    (``data``: output_mask (True, False, False), returns dx) or the weight gradient (output_mask
    (False, True, conv.bias), returns dw; the bias gradient is computed in the same call), on
    dy, x and w in the job's memory format (channels-last for NHWC). Asymmetric pads: the forward
    convolution runs on an F.pad-ed input (:func:`conv_fn`), so its backward takes the padded input
    with pad 0; dx is the padded input's gradient, returned as the view of x's region (F.pad's
    backward, a slice, is not timed). Raises NotSupported for other than 1-3 spatial dims."""
    torch = c.torch
    nsp = len(conv.x) - 2
    if nsp not in (1, 2, 3):
        raise NotSupported(f"{nsp}-D convolution")
    begin, end = tuple(conv.pads[:nsp]), tuple(conv.pads[nsp:])
    x_shape, pad, note = list(conv.x), list(begin), ""
    if begin != end:
        x_shape = x_shape[:2] + [conv.x[2 + i] + begin[i] + end[i] for i in range(nsp)]
        pad = [0] * nsp
        note = "asymmetric pads: the gradient of the F.pad-ed input (F.pad's backward, a slice, not timed)"
    x = c.fmt(c.randn(x_shape))
    w = c.fmt(c.randn(conv.w))
    dy = c.fmt(c.randn(conv.output_shape()))
    grad_bias = bool(conv.bias) and not data
    mask = [True, False, False] if data else [False, True, grad_bias]
    op = torch.ops.aten.convolution_backward
    args = ([conv.w[0]] if grad_bias else None, list(conv.strides), pad, list(conv.dilations), False, [0] * nsp,
            conv.group, mask)

    def fn():
        out = op(dy, x, w, *args)
        if not data:
            return out[1]
        dx = out[0]
        for i in range(nsp) if pad != list(begin) else ():
            dx = dx.narrow(2 + i, begin[i], conv.x[2 + i])
        return dx

    what = "data" if data else ("weight and bias" if grad_bias else "weight")
    return Candidate("torch:aten::convolution_backward", algo_label(c, f"cudnn.benchmark, {what} gradient"), fn,
                     numel(conv.x if data else conv.w), note)


def conv_backward(cfg: ConvConfig) -> tuple:
    """The calls of ``cfg``'s backward pass (:attr:`benanza.kinds.base.Kind.backward`):
    ``(("backward_data", ConvBwdDataConfig), ("backward_weight", ConvBwdFilterConfig))``. The data
    gradient's config carries the convolution without its bias (dx does not depend on it); the
    weight gradient's keeps it (it computes the bias gradient too)."""
    return (("backward_data", ConvBwdDataConfig(conv=replace(cfg, bias=False))),
            ("backward_weight", ConvBwdFilterConfig(conv=cfg)))


def _conv(c: Ctx) -> Candidate:
    fn, note = conv_fn(c, c.cfg)
    return Candidate(f"torch:aten::conv{len(c.cfg.x) - 2}d", algo_label(c, "cudnn.benchmark"), fn,
                     numel(c.cfg.output_shape()), note)


def _min_bytes(cfg: ConvConfig, ib: int, ob: int) -> int:
    """x, w and the per-channel parameters read once, y written once (bytes)."""
    conv = cfg
    params = conv.w[0] if conv.bias else 0
    return ib * (numel(conv.x) + numel(conv.w) + params) + ob * numel(cfg.output_shape())


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=ConvConfig(x=(1, 32, 1, 1), w=(8, 32, 1, 1), pads=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1),
        group=1, bias=True),
    name="Conv", config=ConvConfig, template="conv.cpp.j2", case=conv_case, min_bytes=_min_bytes,
    torch=_conv, onnx={"Conv": _map_conv},
    typed_ops=(), fused_from=(),
    aten={"Conv": ('aten::_conv_depthwise2d', 'aten::_convolution', 'aten::_slow_conv2d_forward', 'aten::conv1d', 'aten::conv2d', 'aten::conv3d', 'aten::conv_depthwise3d', 'aten::convolution', 'aten::cudnn_convolution', 'aten::cudnn_convolution_add_relu', 'aten::cudnn_convolution_relu', 'aten::mkldnn_convolution', 'aten::slow_conv_dilated2d', 'aten::thnn_conv2d')},
    nhwc=True, image=True, backward=conv_backward)
