"""Reduce layers. ReduceMean/Sum/Max/Min: cudnnReduceTensor. y is x with the reduced axes set to 1.

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import numpy as np
import onnx
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, c_array, job_init
from benanza.kinds.elementwise import collapse_broadcast
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label
from benanza.kinds.int_reduce import int_reduce_config
from benanza.kinds.onnx_map import FLOAT_TYPES, Unsupported, need


REDUCE_OPS = ("mean", "sum", "max", "min")


@dataclass(frozen=True)
class ReduceConfig(LayerConfig):
    """ReduceMean/Sum/Max/Min: cudnnReduceTensor. y is x with the reduced axes set to 1."""

    kind: ClassVar[str] = "Reduce"
    op: str
    x: Shape
    y: Shape

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return self.y

    def flops(self):
        return numel(self.x)


def _map_reduce(node, ctx, attrs):
    """ReduceMean/Sum/Max/Min (axes as an attribute or a constant input, keepdims): a ReduceConfig of float
    data; int32/int64 data's sum, max or min is the IntReduce kind's
    (:func:`benanza.kinds.int_reduce.int_reduce_config`); Unsupported for other element types."""
    t = ctx.types.get(node.input[0])
    if t not in FLOAT_TYPES and t not in (onnx.TensorProto.INT32, onnx.TensorProto.INT64):
        name = onnx.TensorProto.DataType.Name(t) if t in onnx.TensorProto.DataType.values() else "unknown"
        raise Unsupported(f"input element type {name} is not float")
    x = need(ctx.shape(node.input[0]), "input")
    r = len(x)
    axes = attrs.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1]:
        v = ctx.value(node.input[1])
        if v is None:
            raise Unsupported("axes input is not a constant")
        axes = [int(i) for i in np.asarray(v).reshape(-1)]
    if not axes:
        if int(attrs.get("noop_with_empty_axes", 0)):
            raise Unsupported("reduction with no axes is an identity")
        axes = list(range(r))
    axes = sorted({a + r if a < 0 else a for a in axes})
    if r > 8:
        raise Unsupported(f"rank {r} > 8")
    y = tuple(1 if i in axes else d for i, d in enumerate(x))
    if t not in FLOAT_TYPES:
        return int_reduce_config(node.op_type[len("Reduce"):].lower(), tuple(x), y,
                                 "int64" if t == onnx.TensorProto.INT64 else "int32")
    return ReduceConfig(op=node.op_type[len("Reduce"):].lower(), x=tuple(x), y=y)


_REDUCE = {"mean": "CUDNN_REDUCE_TENSOR_AVG", "sum": "CUDNN_REDUCE_TENSOR_ADD",
           "max": "CUDNN_REDUCE_TENSOR_MAX", "min": "CUDNN_REDUCE_TENSOR_MIN"}


#: the same ops for the harness's reduction kernel (benanza::reduce)
_REDUCE_KERNEL = {"mean": "ReduceOp::Mean", "sum": "ReduceOp::Sum", "max": "ReduceOp::Max", "min": "ReduceOp::Min"}


@dataclass(frozen=True)
class ReduceCase(Case):
    """One row of ``templates/reduce.cpp.j2``'s case table: the fields of its C++ ``ReduceCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    nd: CppValue
    x: CppValue
    y: CppValue
    op: CppValue
    kop: CppValue


def _reduce_case(cfg: ReduceConfig, job: Job) -> ReduceCase:
    x, y = collapse_broadcast(list(cfg.x), list(cfg.y))
    if len(x) > 8:
        raise ValueError(f"reduction of rank {len(x)}")
    nd = max(4, len(x))
    x, y = x + [1] * (nd - len(x)), y + [1] * (nd - len(y))
    return ReduceCase(job=job_init(job), nd=nd, x=c_array(x, 8, 1), y=c_array(y, 8, 1), op=_REDUCE[cfg.op], kop=_REDUCE_KERNEL[cfg.op])


def _reduce(c: Ctx) -> Candidate:
    cfg, torch = c.cfg, c.torch
    dims = tuple(i for i, (a, b) in enumerate(zip(cfg.x, cfg.y)) if b == 1 and a != 1)
    x = c.randn(cfg.x)
    if not dims:
        raise NotSupported("a reduction over dims of size 1 is a copy")
    op = {"mean": torch.mean, "sum": torch.sum, "max": torch.amax, "min": torch.amin}[cfg.op]
    name = {"mean": "mean", "sum": "sum", "max": "amax", "min": "amin"}[cfg.op]
    return Candidate(f"torch:aten::{name}", algo_label(c), lambda: op(x, dims, keepdim=True), numel(cfg.y))


def trailing_axis(cfg: ReduceConfig) -> int | None:
    """The LayerNorm axis of a reduction over trailing dims (y = x[:k] + (1,)*...), else None."""
    x, y = cfg.x, cfg.y
    k = len(y)
    while k > 0 and y[k - 1] == 1:
        k -= 1
    if k == len(y) or tuple(y[:k]) != tuple(x[:k]):
        return None
    return k


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=ReduceConfig(op='mean', x=(1, 1024, 7, 7), y=(1, 1024, 1, 1)),
    name="Reduce", config=ReduceConfig, template="reduce.cpp.j2", case=_reduce_case, min_bytes=io_bytes,
    torch=_reduce, onnx={"ReduceMax": _map_reduce, "ReduceMean": _map_reduce, "ReduceMin": _map_reduce, "ReduceSum": _map_reduce},
    typed_ops=("ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum"), fused_from=(),
    aten={"ReduceMax": ('aten::amax', 'aten::max'), "ReduceMean": ('aten::adaptive_avg_pool2d', 'aten::mean'), "ReduceMin": ('aten::amin', 'aten::min'), "ReduceSum": ('aten::sum',)},
    nhwc=False, image=False)
