"""ConvBiasAct layers. Fused Conv -> bias -> activation: cudnnConvolutionBiasActivationForward.

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import math

from benanza.kinds.activation import ActivationConfig
from benanza.kinds.cpp import CppValue
from benanza.kinds.base import Job, Kind, LayerConfig, numel
from benanza.kinds.conv import ConvCase, ConvConfig, conv_backward, conv_case, conv_fn
from benanza.kinds.elementwise import ElementwiseConfig
from benanza.kinds.framework import Candidate, Ctx, algo_label, functional
from benanza.kinds.patterns import Graph, Node, Pattern


@dataclass(frozen=True)
class ConvBiasActConfig(LayerConfig):
    """Fused Conv -> bias -> activation: cudnnConvolutionBiasActivationForward.

    Covers the two ONNX layers of a fusion candidate (a Conv with bias and the Relu after it), so its
    measurements are only compared with the sum of those two layers, never with the Conv alone.
    """

    kind: ClassVar[str] = "ConvBiasAct"
    tensor_cores: ClassVar[bool] = True
    conv: ConvConfig
    activation: str  # "relu"

    def input_shapes(self):
        return self.conv.input_shapes()

    def output_shape(self):
        return self.conv.output_shape()

    def flops(self):
        return self.conv.flops() + numel(self.output_shape())

    def describe(self):
        return self.conv.describe().replace("Conv(", "ConvBiasAct(", 1) + f"+{self.activation}"


@dataclass(frozen=True)
class ConvBiasActCase(ConvCase):
    """One row of ``templates/conv_bias_act.cpp.j2``'s case table: the fields of its C++ ``ConvBiasActCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    activation: CppValue


def _conv_bias_act_case(cfg: ConvBiasActConfig, job: Job) -> ConvBiasActCase:
    return ConvBiasActCase(**vars(conv_case(cfg.conv, job)),
                           activation={"relu": "CUDNN_ACTIVATION_RELU"}[cfg.activation])


def _conv_bias_act(c: Ctx) -> Candidate:
    fn, note = conv_fn(c, c.cfg.conv)
    F = functional(c)
    return Candidate(f"torch:aten::conv{len(c.cfg.conv.x) - 2}d+relu_", algo_label(c, "cudnn.benchmark"),
                     lambda: F.relu_(fn()), numel(c.cfg.output_shape()), note)


def _backward(cfg: ConvBiasActConfig) -> tuple:
    """The convolution's two backward calls (:func:`benanza.kinds.conv.conv_backward` of ``cfg.conv``:
    its data gradient, and its weight and bias gradient). The activation's backward (ReLU's, on the
    fused output) is not among them."""
    return conv_backward(cfg.conv)


def _min_bytes(cfg: ConvBiasActConfig, ib: int, ob: int) -> int:
    """x, w and the per-channel parameters read once, y written once (bytes)."""
    conv = cfg.conv
    params = conv.w[0]  # the bias
    return ib * (numel(conv.x) + numel(conv.w) + params) + ob * numel(cfg.output_shape())


def _per_channel_bias(g: Graph, conv: Node, add: Node) -> bool:
    """``add`` adds one constant of the conv's output channels (broadcast over N and space) to its
    output and reads no other data: the bias a bias-less Conv's exporter wrote as an Add."""
    cfg = conv.config
    other = [i for i in add.inputs if i != conv.outputs[0]]
    consts = list(add.static_inputs)
    y = cfg.output_shape()
    bshape = g.ctx.shape(consts[0]) if len(consts) == 1 and not other else None
    if bshape is None or consts[0] not in g.ctx.static or len(bshape) > len(y):
        return False
    padded = (1,) * (len(y) - len(bshape)) + tuple(bshape)
    return padded[1] == cfg.w[0] and math.prod(padded) == cfg.w[0]


def find_conv_bias_act(g: Graph, ly: Node):
    """Conv(+bias) -> Relu, and a bias-less Conv -> Add(per-channel constant) -> Relu, each the only
    reader of the one before: what cudnnConvolutionBiasActivationForward computes in one call."""
    cfg = ly.config
    if ly.status != "benchmark" or not isinstance(cfg, ConvConfig) or ly.fusion is not None:
        return None
    nxt = g.sole_user(ly)
    chain, conv = [ly.index], cfg
    if nxt is not None and not cfg.bias and isinstance(nxt.config, ElementwiseConfig) and nxt.config.op == "add":
        if not _per_channel_bias(g, ly, nxt):
            return None
        conv = ConvConfig(cfg.x, cfg.w, cfg.pads, cfg.strides, cfg.dilations, cfg.group, True)
        chain.append(nxt.index)
        nxt = g.sole_user(nxt)
    if not conv.bias or nxt is None or not isinstance(nxt.config, ActivationConfig) or nxt.config.mode != "relu":
        return None
    return chain + [nxt.index], ConvBiasActConfig(conv=conv, activation="relu")


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=ConvBiasActConfig(conv=ConvConfig(x=(1, 48, 1, 1), w=(8, 48, 1, 1), pads=(0, 0, 0, 0), strides=(1, 1),
        dilations=(1, 1), group=1, bias=True), activation='relu'),
    name="ConvBiasAct", config=ConvBiasActConfig, template="conv_bias_act.cpp.j2", case=_conv_bias_act_case, min_bytes=_min_bytes,
    torch=_conv_bias_act, onnx={},
    typed_ops=(), fused_from=('Conv', 'Relu'),
    aten={},
    patterns=(Pattern("Conv [-> Add bias] -> Relu", (10, 1), find_conv_bias_act),),
    nhwc=True, image=False, backward=_backward)
