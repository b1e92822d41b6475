"""Dropout layers. Dropout in training mode: cudnnDropoutForward. (In inference Dropout is an identity.)

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, as4, c_array, cpp_num, job_init
from benanza.kinds.framework import Candidate, Ctx, functional
from benanza.kinds.onnx_map import MapContext, need, scalar_input


@dataclass(frozen=True)
class DropoutConfig(LayerConfig):
    """Dropout in training mode: cudnnDropoutForward. (In inference Dropout is an identity.)"""

    kind: ClassVar[str] = "Dropout"
    shape: Shape
    ratio: float

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape


def dropout_training(node, ctx, attrs) -> tuple[bool, float]:
    if ctx.opset >= 12:
        ratio = scalar_input(ctx, node, 1)
        training = scalar_input(ctx, node, 2)
        return bool(training), 0.5 if ratio is None else ratio
    return (not int(attrs.get("is_test", 1))) if ctx.opset < 7 else False, float(attrs.get("ratio", 0.5))


def train_config(node, ctx: MapContext, attrs) -> DropoutConfig | None:
    """The training-mode call of a Dropout node the model runs in inference (a zero-cost identity
    there): the same node drawing its mask in a training step, cudnnDropoutForward. None when the
    node drops nothing in training either (ratio 0: PyTorch's dropout returns its input, no kernel;
    ratio 1 or more: it is not a dropout to time) or its ratio or input shape is unknown."""
    from benanza.kinds.onnx_map import Unsupported

    try:
        _, ratio = dropout_training(node, ctx, attrs)
    except Unsupported:
        return None
    shape = ctx.shape(node.input[0]) if node.input else None
    if shape is None or not 0.0 < float(ratio) < 1.0:
        return None
    return DropoutConfig(shape=tuple(shape), ratio=float(ratio))


def _map_dropout(node, ctx: MapContext, attrs) -> DropoutConfig:
    """A Dropout node in training mode (the model processor takes one in inference as a zero-cost
    identity before mapping, :func:`dropout_training`)."""
    _, ratio = dropout_training(node, ctx, attrs)
    return DropoutConfig(shape=tuple(need(ctx.shape(node.input[0]), "input")), ratio=float(ratio))


@dataclass(frozen=True)
class DropoutCase(Case):
    """One row of ``templates/dropout.cpp.j2``'s case table: the fields of its C++ ``DropoutCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    dims: CppValue
    ratio: CppValue


def _dropout_case(cfg: DropoutConfig, job: Job) -> DropoutCase:
    return DropoutCase(job=job_init(job), dims=c_array(as4(cfg.shape), 4), ratio=cpp_num(cfg.ratio))


def _dropout(c: Ctx) -> Candidate:
    cfg, F = c.cfg, functional(c)
    x = c.randn(cfg.shape)
    return Candidate("torch:aten::dropout", "training", lambda: F.dropout(x, cfg.ratio, True), numel(cfg.shape))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=DropoutConfig(shape=(1, 64, 56, 56), ratio=0.1),
    name="Dropout", config=DropoutConfig, template="dropout.cpp.j2", case=_dropout_case, min_bytes=io_bytes,
    torch=_dropout, onnx={"Dropout": _map_dropout},
    typed_ops=(), fused_from=(),
    aten={"Dropout": ('aten::dropout', 'aten::feature_dropout', 'aten::native_dropout')},
    nhwc=False, image=True)
