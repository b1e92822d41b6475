"""IntReduce layers: ONNX ReduceSum/ReduceMax/ReduceMin of int32/int64 data over trailing dims (the
Reduce kind's float ops, :mod:`benanza.kinds.reduce`, run in cuDNN, which reduces float data only).
transformers' eager experts count the rows each expert gets as the sum of the one-hot expert mask
(``mask.sum(dim=(-1, -2))`` of ``[E, top_k, tokens]`` int64, ``transformers/models/*_moe``).

x is viewed as ``(rows, len)``, packed, the reduced dims the trailing ones (after dims of extent 1 are
dropped); a reduction over leading dims is refused with that reason. Timed with CUB's
``cub::DeviceSegmentedReduce`` (Sum / Max / Min, one segment per row; ``benanza::reduce_int_rows``,
``cpp/src/index_kernels.cu``) and PyTorch's ``sum`` / ``amax`` / ``amin``.

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its PyTorch
candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`); the Reduce kind's
mapper gives an integer reduction this config (:func:`int_reduce_config`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import STORED_TYPES, Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx
from benanza.kinds.onnx_map import Unsupported

#: the integer element types reduced (IndexType::I32 / I64 of index_ops.hpp)
INT_REDUCE_TYPES = ("int32", "int64")
#: the ops (ReduceSum, ReduceMax, ReduceMin) and IntReduceOp of index_ops.hpp
INT_REDUCE_OPS = {"sum": "IntReduceOp::Sum", "max": "IntReduceOp::Max", "min": "IntReduceOp::Min"}


@dataclass(frozen=True)
class IntReduceConfig(LayerConfig):
    """ReduceSum/Max/Min of integer data: y is x with the reduced (trailing) dims set to 1.

    op: ``sum``, ``max`` or ``min``; x: the input shape; y: x with its trailing reduced dims 1 (the
    reduced dims must be trailing, after dims of extent 1); dtype: one of :data:`INT_REDUCE_TYPES`.
    FLOPs: one integer operation per element of x. ValueError for anything else.
    """

    kind: ClassVar[str] = "IntReduce"
    op: str
    x: Shape
    y: Shape
    dtype: str = "int64"

    def __post_init__(self):
        if self.op not in INT_REDUCE_OPS:
            raise ValueError(f"IntReduceConfig: op {self.op!r} is not one of {', '.join(INT_REDUCE_OPS)}")
        if self.dtype not in INT_REDUCE_TYPES:
            raise ValueError(f"IntReduceConfig: element type {self.dtype!r} is not one of {', '.join(INT_REDUCE_TYPES)}")
        if len(self.x) != len(self.y) or rows_of(self.x, self.y) is None:
            raise ValueError(f"IntReduceConfig: y {list(self.y)} is not x {list(self.x)} with trailing dims reduced")

    @property
    def rows(self) -> int:
        return numel(self.y)

    @property
    def length(self) -> int:
        """Elements reduced into each output element."""
        return numel(self.x) // max(numel(self.y), 1)

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return self.y

    def flops(self):
        return numel(self.x)

    def describe(self):
        return f"IntReduce({self.op} {self.dtype} {'x'.join(map(str, self.x))} -> {'x'.join(map(str, self.y))})"


def rows_of(x: Shape, y: Shape) -> int | None:
    """The rows of x viewed as (rows, len) when y keeps x's leading dims and reduces the trailing ones
    (dims of extent 1 in x ignored); None otherwise."""
    kept = [i for i, (a, b) in enumerate(zip(x, y)) if a != 1 and a == b]
    reduced = [i for i, (a, b) in enumerate(zip(x, y)) if a != 1 and b == 1]
    if any(b not in (1, a) for a, b in zip(x, y)) or (kept and reduced and max(kept) > min(reduced)):
        return None
    return numel(y)


def int_reduce_config(op: str, x: Shape, y: Shape, dtype: str) -> IntReduceConfig:
    """The config of an integer reduction (the Reduce kind's mapper calls it); Unsupported for another
    op or element type, or reduced dims that are not trailing."""
    if op not in INT_REDUCE_OPS or dtype not in INT_REDUCE_TYPES:
        raise Unsupported(f"Reduce{op.capitalize()} of {dtype} data (benanza times the sum, max and min of "
                          f"{' and '.join(INT_REDUCE_TYPES)} data)")
    if rows_of(x, y) is None:
        raise Unsupported(f"Reduce{op.capitalize()} of {dtype} data over leading dims ({list(x)} -> {list(y)}; "
                          "integer reductions are timed over trailing dims)")
    return IntReduceConfig(op=op, x=tuple(x), y=tuple(y), dtype=dtype)


@dataclass(frozen=True)
class IntReduceCase(Case):
    """One row of ``templates/int_reduce.cpp.j2``'s case table: the fields of its C++ ``IntReduceCase``
    in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    rows: int
    length: int
    i64: CppValue
    op: CppValue
    label: CppValue


def _int_reduce_case(cfg: IntReduceConfig, job: Job) -> IntReduceCase:
    return IntReduceCase(job=job_init(job), rows=cfg.rows, length=cfg.length, i64="true" if cfg.dtype == "int64" else "false",
                         op=INT_REDUCE_OPS[cfg.op], label=cpp_string(f"{cfg.op} {cfg.dtype}"))


def _int_reduce(c: Ctx) -> Candidate:
    """``torch.sum`` / ``amax`` / ``amin`` over the reduced dims, keepdim (``sum`` keeps the dtype)."""
    cfg, torch = c.cfg, c.torch
    x = c.typed(cfg.x, cfg.dtype)
    dims = tuple(i for i, (a, b) in enumerate(zip(cfg.x, cfg.y)) if b == 1 and a != 1) or (len(cfg.x) - 1,)
    name = {"sum": "sum", "max": "amax", "min": "amin"}[cfg.op]
    if cfg.op == "sum":
        fn = lambda: torch.sum(x, dims, keepdim=True, dtype=x.dtype)  # noqa: E731
    else:
        fn = lambda: getattr(torch, name)(x, dims, keepdim=True)  # noqa: E731
    return Candidate(f"torch:aten::{name}", "contiguous", fn, numel(cfg.y))


def _min_bytes(cfg: IntReduceConfig, ib: int, ob: int) -> int:
    """x read once and y written once, ``STORED_TYPES[dtype]`` bytes per element (bytes): the
    compulsory traffic (Williams, Waterman and Patterson, "Roofline", CACM 2009)."""
    return STORED_TYPES[cfg.dtype] * (numel(cfg.x) + numel(cfg.y))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    # Qwen3-30B-A3B's eager experts, prefill of 2,048 tokens: the rows of each of 128 experts, the sum of
    # its [top-8, 2,048 tokens] one-hot mask
    example=IntReduceConfig(op="sum", x=(128, 8, 2048), y=(128, 1, 1)),
    name="IntReduce", config=IntReduceConfig, template="int_reduce.cpp.j2", case=_int_reduce_case,
    min_bytes=_min_bytes, torch=_int_reduce, onnx={}, typed_ops=(), fused_from=(),
    aten={"ReduceSum": ("aten::sum",), "ReduceMax": ("aten::amax", "aten::max"), "ReduceMin": ("aten::amin", "aten::min")},
    nhwc=False, image=False)
