"""ConvBnAct layers. Fused Conv -> BatchNormalization (inference) [-> Relu]: one cuDNN graph, conv_fprop ->

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.activation import ActivationConfig
from benanza.kinds.base import Job, Kind, LayerConfig, numel
from benanza.kinds.batchnorm import BatchNormConfig
from benanza.kinds.conv import ConvCase, ConvConfig, conv_case, conv_fn
from benanza.kinds.cpp import CppValue, cpp_num
from benanza.kinds.framework import Candidate, Ctx, algo_label, functional
from benanza.kinds.patterns import Graph, Node, Pattern


@dataclass(frozen=True)
class ConvBnActConfig(LayerConfig):
    """Fused Conv -> BatchNormalization (inference) [-> Relu]: one cuDNN graph, conv_fprop ->
    pointwise MUL (the per-channel scale gamma / sqrt(var + eps)) -> pointwise ADD (the shift, the
    conv's own bias folded in) [-> RELU_FWD] (cuDNN developer guide, "Graph API": the ConvBNfprop /
    conv + scale + bias + activation fusion patterns), every engine config of the graph API.

    Covers the two or three ONNX layers of a fusion candidate (Conv, BatchNormalization, Relu), so
    its measurements are only compared with the sum of those layers. activation: "relu" or "none".
    FLOPs: the convolution's + 2 per output element (scale, shift) + 1 for the Relu.
    """

    kind: ClassVar[str] = "ConvBnAct"
    tensor_cores: ClassVar[bool] = True
    conv: ConvConfig
    activation: str  # "relu" or "none"

    def input_shapes(self):
        return self.conv.input_shapes()

    def output_shape(self):
        return self.conv.output_shape()

    def flops(self):
        n = numel(self.output_shape())
        return self.conv.flops() + 2 * n + (n if self.activation == "relu" else 0)

    def describe(self):
        act = "" if self.activation == "none" else f"+{self.activation}"
        return self.conv.describe().replace("Conv(", "ConvBnAct(", 1) + "+bn" + act


@dataclass(frozen=True)
class ConvBnActCase(ConvCase):
    """One row of ``templates/conv_bn_act.cpp.j2``'s case table: the fields of its C++ ``ConvBnActCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    relu: CppValue


def _conv_bn_act_case(cfg: ConvBnActConfig, job: Job) -> ConvBnActCase:
    return ConvBnActCase(**vars(conv_case(cfg.conv, job)), relu=cpp_num(cfg.activation == "relu"))


def _conv_bn_act(c: Ctx) -> Candidate:
    fn, note = conv_fn(c, c.cfg.conv)
    F = functional(c)
    k = c.cfg.conv.w[0]
    mean, var = c.randn((k,)), c.randn((k,), positive=True)
    gamma, beta = c.randn((k,)), c.randn((k,))
    relu = c.cfg.activation == "relu"

    def run():
        y = F.batch_norm(fn(), mean, var, gamma, beta, False, 0.0, 1e-5)
        return F.relu_(y) if relu else y
    return Candidate(f"torch:aten::conv{len(c.cfg.conv.x) - 2}d+batch_norm" + ("+relu_" if relu else ""),
                     algo_label(c, "cudnn.benchmark"), run, numel(c.cfg.output_shape()), note)


def _min_bytes(cfg: ConvBnActConfig, ib: int, ob: int) -> int:
    """x, w and the per-channel parameters read once, y written once (bytes)."""
    conv = cfg.conv
    params = 2 * conv.w[0]  # scale and shift (the conv's bias folded in)
    return ib * (numel(conv.x) + numel(conv.w) + params) + ob * numel(cfg.output_shape())


def find_conv_bn_act(g: Graph, ly: Node):
    """Conv -> BatchNormalization [-> Relu], each the only reader of the one before: conv + per-channel
    scale + shift [+ relu] as one cuDNN graph (the BatchNormalization's inference statistics folded)."""
    cfg = ly.config
    if ly.status != "benchmark" or not isinstance(cfg, ConvConfig) or ly.fusion is not None:
        return None
    bn = g.sole_user(ly)
    if bn is None or not isinstance(bn.config, BatchNormConfig) or bn.fusion is not None:
        return None
    chain = [ly.index, bn.index]
    act = g.sole_user(bn)
    relu = act is not None and isinstance(act.config, ActivationConfig) and act.config.mode == "relu" \
        and act.fusion is None
    if relu:
        chain.append(act.index)
    return chain, ConvBnActConfig(conv=cfg, activation="relu" if relu else "none")


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=ConvBnActConfig(conv=ConvConfig(x=(1, 32, 1, 1), w=(8, 32, 1, 1), pads=(0, 0, 0, 0), strides=(1, 1),
        dilations=(1, 1), group=1, bias=True), activation='relu'),
    name="ConvBnAct", config=ConvBnActConfig, template="conv_bn_act.cpp.j2", case=_conv_bn_act_case, min_bytes=_min_bytes,
    torch=_conv_bn_act, onnx={},
    typed_ops=(), fused_from=('Conv', 'BatchNormalization', 'Relu'),
    aten={},
    patterns=(Pattern("Conv -> BatchNormalization [-> Relu]", (10, 0), find_conv_bn_act),),
    nhwc=True, image=False)
