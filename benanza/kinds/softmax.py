"""Softmax layers. Softmax / LogSoftmax over one axis: cudnnSoftmaxForward (ACCURATE, CHANNEL mode).

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, c_array, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label, functional
from benanza.kinds.onnx_map import Unsupported, need


@dataclass(frozen=True)
class SoftmaxConfig(LayerConfig):
    """Softmax / LogSoftmax over one axis: cudnnSoftmaxForward (ACCURATE, CHANNEL mode).

    shape: the tensor viewed as (outer, axis, inner): the reduction runs over dim 1.
    """

    kind: ClassVar[str] = "Softmax"
    shape: Shape
    log: bool = False

    def input_shapes(self):
        return [self.shape]

    def output_shape(self):
        return self.shape

    def flops(self):
        return 5 * numel(self.shape)


def _map_softmax(node, ctx, attrs):
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    r = len(x)
    if r == 0:
        raise Unsupported("softmax of a scalar")
    if ctx.opset >= 13:
        axis = int(attrs.get("axis", -1))
        axis = axis + r if axis < 0 else axis
        shape = (math.prod(x[:axis]), x[axis], math.prod(x[axis + 1:]))
    else:
        axis = int(attrs.get("axis", 1))
        axis = axis + r if axis < 0 else axis
        shape = (math.prod(x[:axis]), math.prod(x[axis:]), 1)
    return SoftmaxConfig(shape=shape, log=node.op_type == "LogSoftmax")


@dataclass(frozen=True)
class SoftmaxCase(Case):
    """One row of ``templates/softmax.cpp.j2``'s case table: the fields of its C++ ``SoftmaxCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    dims: CppValue
    algo: CppValue


def _softmax_case(cfg: SoftmaxConfig, job: Job) -> SoftmaxCase:
    return SoftmaxCase(job=job_init(job), dims=c_array(list(cfg.shape) + [1], 4), algo="CUDNN_SOFTMAX_LOG" if cfg.log else "CUDNN_SOFTMAX_ACCURATE")


def _softmax(c: Ctx) -> Candidate:
    cfg, F = c.cfg, functional(c)
    outer, axis, inner = cfg.shape
    op = F.log_softmax if cfg.log else F.softmax
    if inner == 1:  # the last dim: PyTorch's row kernel
        x = c.randn((outer, axis))
        fn = (lambda: op(x, dim=-1))
    else:
        x = c.randn(cfg.shape)
        fn = (lambda: op(x, dim=1))
    return Candidate(f"torch:aten::{'_log_softmax' if cfg.log else '_softmax'}", algo_label(c), fn, numel(cfg.shape))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=SoftmaxConfig(shape=(1176, 49, 1), log=False),
    name="Softmax", config=SoftmaxConfig, template="softmax.cpp.j2", case=_softmax_case, min_bytes=io_bytes,
    torch=_softmax, onnx={"LogSoftmax": _map_softmax, "Softmax": _map_softmax},
    typed_ops=(), fused_from=(),
    aten={"LogSoftmax": ('aten::_log_softmax', 'aten::log_softmax'), "Softmax": ('aten::_softmax', 'aten::softmax', 'aten::special_softmax')},
    nhwc=False, image=False)
