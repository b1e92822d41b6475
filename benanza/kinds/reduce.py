"""Reduce layers. ReduceMean/Sum/Max/Min: cudnnReduceTensor. y is x with the reduced axes set to 1.

Integer data (int32/int64: transformers' eager experts count each expert's rows as the sum of the
one-hot expert mask, ``mask.sum(dim=(-1, -2))`` of ``[E, top_k, tokens]`` int64) is reduced over its
trailing dims, x viewed as ``(rows, len)``: cuDNN reduces float data only, so CUB's
``cub::DeviceSegmentedReduce`` (Sum / Max / Min, one segment per row; ``benanza::reduce_int_rows``,
``cpp/src/index_kernels.cu``) times it, beside PyTorch's ``sum`` / ``amax`` / ``amin``; an integer mean, or
a reduction over leading dims, is refused with that reason.

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from benanza.kinds.base import OPTIONAL, STORED_TYPES, Job, Kind, LayerConfig, Shape, io_bytes, numel
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, job_init
from benanza.kinds.elementwise import collapse_broadcast, elem_name
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label
from benanza.kinds.onnx_map import Unsupported, need


REDUCE_OPS = ("mean", "sum", "max", "min")
#: the integer element types reduced (over trailing dims, CUB's segmented reduction) and their ops
REDUCE_INTS = ("int32", "int64")
REDUCE_INT_OPS = ("sum", "max", "min")


@dataclass(frozen=True)
class ReduceConfig(LayerConfig):
    """ReduceMean/Sum/Max/Min: cudnnReduceTensor. y is x with the reduced axes set to 1.

    dtype: ``""`` for float data (the precision's float type), else one of :data:`REDUCE_INTS` (the
    ops :data:`REDUCE_INT_OPS` over trailing dims only, :func:`trailing_rows`; ValueError otherwise)."""

    kind: ClassVar[str] = "Reduce"
    op: str
    x: Shape
    y: Shape
    dtype: str = dataclasses.field(default="", metadata=OPTIONAL)

    def __post_init__(self):
        if self.dtype and (self.dtype not in REDUCE_INTS or self.op not in REDUCE_INT_OPS
                           or trailing_rows(self.x, self.y) is None):
            raise ValueError(f"ReduceConfig: {self.op} of {self.dtype} data {list(self.x)} -> {list(self.y)} (integer "
                             f"data: {', '.join(REDUCE_INT_OPS)} of {', '.join(REDUCE_INTS)} over trailing dims)")

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return self.y

    def flops(self):
        return numel(self.x)

    def describe(self):
        if not self.dtype:
            return super().describe()
        return f"Reduce({self.op} {self.dtype} {'x'.join(map(str, self.x))} -> {'x'.join(map(str, self.y))})"


def trailing_rows(x: Shape, y: Shape) -> int | None:
    """The rows of x viewed as ``(rows, len)`` when y keeps x's leading dims and reduces the trailing ones
    (dims of extent 1 aside): numel(y); None otherwise."""
    if len(x) != len(y) or any(b not in (1, a) for a, b in zip(x, y)):
        return None
    kept = [i for i, (a, b) in enumerate(zip(x, y)) if a != 1 and a == b]
    reduced = [i for i, (a, b) in enumerate(zip(x, y)) if a != 1 and b == 1]
    if kept and reduced and max(kept) > min(reduced):
        return None
    return numel(y)


def _int_dtype(node, ctx, op: str) -> str:
    """"" for float data; int32/int64 for the integer ops benanza times; Unsupported otherwise."""
    try:
        dtype = elem_name(ctx, node.input[0], node.op_type)
    except Unsupported:
        dtype = "an unknown type"
    if dtype and (dtype not in REDUCE_INTS or op not in REDUCE_INT_OPS):
        raise Unsupported(f"{node.op_type} of {dtype} data (benanza times float data, and the "
                          f"{'/'.join(REDUCE_INT_OPS)} of {'/'.join(REDUCE_INTS)} data)")
    return dtype


def _map_reduce(node, ctx, attrs):
    """ReduceMean/Sum/Max/Min (axes an attribute or a constant input; keepdims' dims of 1 are free):
    float data, and the sum/max/min of int32/int64 data over trailing dims (Unsupported otherwise)."""
    op = node.op_type[len("Reduce"):].lower()
    dtype = _int_dtype(node, ctx, op)
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
    if dtype and trailing_rows(tuple(x), y) is None:
        raise Unsupported(f"{node.op_type} of {dtype} data over leading dims ({list(x)} -> {list(y)}: integer "
                          "reductions are timed over trailing dims)")
    return ReduceConfig(op=op, x=tuple(x), y=y, dtype=dtype)


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
    stored: CppValue
    i64: CppValue
    rows: int
    length: int
    kop: CppValue


def _reduce_case(cfg: ReduceConfig, job: Job) -> ReduceCase:
    x, y = collapse_broadcast(list(cfg.x), list(cfg.y))
    if len(x) > 8:
        raise ValueError(f"reduction of rank {len(x)}")
    nd = max(4, len(x))
    x, y = x + [1] * (nd - len(x)), y + [1] * (nd - len(y))
    rows = numel(cfg.y)
    return ReduceCase(job=job_init(job), nd=nd, x=c_array(x, 8, 1), y=c_array(y, 8, 1), op=_REDUCE[cfg.op],
                      kop=_REDUCE_KERNEL[cfg.op], stored=cpp_num(bool(cfg.dtype)), i64=cpp_num(cfg.dtype == "int64"),
                      rows=rows, length=numel(cfg.x) // max(rows, 1))


def _reduce(c: Ctx) -> Candidate:
    cfg, torch = c.cfg, c.torch
    dims = tuple(i for i, (a, b) in enumerate(zip(cfg.x, cfg.y)) if b == 1 and a != 1)
    x = c.typed(cfg.x, cfg.dtype)
    if not dims:
        raise NotSupported("a reduction over dims of size 1 is a copy")
    op = {"mean": torch.mean, "sum": torch.sum, "max": torch.amax, "min": torch.amin}[cfg.op]
    name = {"mean": "mean", "sum": "sum", "max": "amax", "min": "amin"}[cfg.op]
    if cfg.op == "sum" and cfg.dtype:  # the sum of int32 keeps int32 (PyTorch promotes integers to int64)
        return Candidate("torch:aten::sum", algo_label(c), lambda: torch.sum(x, dims, keepdim=True, dtype=x.dtype),
                         numel(cfg.y))
    return Candidate(f"torch:aten::{name}", algo_label(c), lambda: op(x, dims, keepdim=True), numel(cfg.y))


def _min_bytes(cfg: ReduceConfig, ib: int, ob: int) -> int:
    """x read once, y written once (bytes; ``STORED_TYPES[dtype]`` per element for integer data)."""
    if cfg.dtype:
        return STORED_TYPES[cfg.dtype] * (numel(cfg.x) + numel(cfg.y))
    return io_bytes(cfg, ib, ob)


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
    name="Reduce", config=ReduceConfig, template="reduce.cpp.j2", case=_reduce_case, min_bytes=_min_bytes,
    torch=_reduce, onnx={"ReduceMax": _map_reduce, "ReduceMean": _map_reduce, "ReduceMin": _map_reduce, "ReduceSum": _map_reduce},
    typed_ops=("ReduceMax", "ReduceMean", "ReduceMin", "ReduceSum"), fused_from=(),
    aten={"ReduceMax": ('aten::amax', 'aten::max'), "ReduceMean": ('aten::adaptive_avg_pool2d', 'aten::mean'), "ReduceMin": ('aten::amin', 'aten::min'), "ReduceSum": ('aten::sum',)},
    nhwc=False, image=False)
