"""CumSum layers. ONNX CumSum (opset 11, 14): the running sum of x along ``axis``; ``exclusive=1``
leaves the element itself out (y starts with 0), ``reverse=1`` sums from the end of the axis back
(numpy's ``cumsum`` of the flipped axis, flipped back). Hugging Face's decoders compute position ids
as ``cumsum(attention_mask, -1)`` on int64 data at run time, a layer exporters never fold.

cuDNN and cuBLAS have no scan; CUB (the CUDA toolkit's) has: ``cub::DeviceScan::InclusiveSumByKey`` /
``ExclusiveSumByKey`` with one key per row where the axis is innermost, and where it is not benanza's
column kernel (one thread per column, coalesced across the inner dims), both behind
``benanza::cumsum_kernel`` (``cpp/src/cumsum_kernels.cu``). The framework side is PyTorch's
``torch.cumsum``.

The whole slice of the kind: its config, the ONNX op it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from benanza.kinds.base import OPTIONAL, STORED_TYPES, Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import ELEM_ENUM, Case, CppValue, cpp_num, cpp_string, job_init
from benanza.kinds.elementwise import elem_name
from benanza.kinds.framework import Candidate, Ctx
from benanza.kinds.onnx_map import Unsupported, need

#: the integer element types CumSum is timed on (ONNX's CumSum also takes uint32/uint64: two's
#: complement addition gives the same bits, so they scan as int32/int64)
SCAN_INTS = ("int32", "int64", "uint32", "uint64")


@dataclass(frozen=True)
class CumSumConfig(LayerConfig):
    """ONNX CumSum: ``y[..., j, ...] = sum of x[..., m, ...]`` along ``axis`` over ``m <= j`` (``m < j``
    when exclusive; ``m >= j`` / ``m > j`` when reverse), the ONNX operator spec's definition.

    x: the input shape (rank >= 1; y has the same shape); axis: the scanned dim (non-negative, < rank);
    exclusive, reverse: ONNX's attributes; dtype: ``""`` for float data (the precision's float type),
    else one of :data:`SCAN_INTS`. FLOPs: ``outer * inner * (len - 1)`` additions (a scan of len
    elements adds len - 1 times; an exclusive scan's last addition is dropped, its first is of 0).
    """

    kind: ClassVar[str] = "CumSum"
    x: Shape
    axis: int
    exclusive: bool = False
    reverse: bool = False
    dtype: str = dataclasses.field(default="", metadata=OPTIONAL)

    def __post_init__(self):
        if not self.x:
            raise ValueError("CumSumConfig: a scalar input (rank at least 1)")
        if not 0 <= self.axis < len(self.x):
            raise ValueError(f"CumSumConfig: axis {self.axis} of a rank-{len(self.x)} input")
        if self.dtype and self.dtype not in SCAN_INTS:
            raise ValueError(f"CumSumConfig: element type {self.dtype!r} is not one of {', '.join(SCAN_INTS)}")

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return self.x

    @property
    def outer(self) -> int:
        """The product of the dims before the axis."""
        return numel(self.x[:self.axis])

    @property
    def length(self) -> int:
        """The axis's extent (elements one scan runs over)."""
        return self.x[self.axis]

    @property
    def inner(self) -> int:
        """The product of the dims after the axis (the stride of the axis, in elements)."""
        return numel(self.x[self.axis + 1:])

    def flops(self):
        return self.outer * self.inner * max(self.length - 1, 0)

    def describe(self):
        flags = "".join(f" {f}" for f, on in (("exclusive", self.exclusive), ("reverse", self.reverse)) if on)
        t = f" {self.dtype}" if self.dtype else ""
        return f"CumSum(axis={self.axis}{flags}{t} {'x'.join(map(str, self.x))})"


def _map_cumsum(node, ctx, attrs):
    """ONNX CumSum (opset 11+): x, a constant int32/int64 scalar (or 1-element) ``axis`` in
    [-rank, rank) (Unsupported otherwise), attributes ``exclusive`` and ``reverse`` (default 0)."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    if not x:
        raise Unsupported("CumSum of a scalar (the input must have rank at least 1)")
    if len(node.input) < 2 or not node.input[1]:
        raise Unsupported("CumSum without its axis input")
    v = ctx.value(node.input[1])
    if v is None:
        raise Unsupported("CumSum axis is not a constant")
    v = np.asarray(v).reshape(-1)
    if v.size != 1:
        raise Unsupported(f"CumSum axis has {v.size} elements (a scalar)")
    axis = int(v[0])
    if not -len(x) <= axis < len(x):
        raise Unsupported(f"CumSum axis {axis} of a rank-{len(x)} input")
    dtype = elem_name(ctx, node.input[0], "CumSum")
    if dtype and dtype not in SCAN_INTS:
        raise Unsupported(f"CumSum of {dtype} data (ONNX defines it on float, int32/64 and uint32/64)")
    return CumSumConfig(x=x, axis=axis % len(x), exclusive=bool(int(attrs.get("exclusive", 0))),
                        reverse=bool(int(attrs.get("reverse", 0))), dtype=dtype)


def cumsum_backward(cfg: CumSumConfig) -> tuple:
    """``Kind.backward`` of CumSum: PyTorch's ``cumsum: self: cumsum_backward(grad, dim)``
    (``tools/autograd/derivatives.yaml``; ``cumsum_backward`` in ``FunctionsManual.cpp`` is the reverse
    cumsum of grad). y = S x with S lower triangular (inclusive, forward); dx = Sᵀ dy, the same scan
    in the other direction: ``reverse`` flipped, ``exclusive`` kept (a strictly triangular S stays
    strict). One CumSum call of the data gradient; integer data carries no gradient: ``()``."""
    if cfg.dtype:
        return ()
    return (("backward_data", dataclasses.replace(cfg, reverse=not cfg.reverse)),)


@dataclass(frozen=True)
class CumSumCase(Case):
    """One row of ``templates/cumsum.cpp.j2``'s case table: the fields of its C++ ``CumSumCase`` in
    order, as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    outer: int
    length: int
    inner: int
    exclusive: CppValue
    reverse: CppValue
    stored: CppValue
    et: CppValue
    label: CppValue


def _cumsum_case(cfg: CumSumConfig, job: Job) -> CumSumCase:
    flags = "".join(f" {f}" for f, on in (("exclusive", cfg.exclusive), ("reverse", cfg.reverse)) if on)
    return CumSumCase(job=job_init(job), outer=cfg.outer, length=cfg.length, inner=cfg.inner,
                      exclusive=cpp_num(cfg.exclusive), reverse=cpp_num(cfg.reverse), stored=cpp_num(bool(cfg.dtype)),
                      et=ELEM_ENUM[cfg.dtype] if cfg.dtype else "ElemType::F32",
                      label=cpp_string(f"cumsum{flags}" + (f" {cfg.dtype}" if cfg.dtype else "")))


def _cumsum(c: Ctx) -> Candidate:
    """``torch.cumsum(x, axis, dtype=x.dtype)`` (the dtype keeps int32 data int32: PyTorch promotes
    integers to int64 otherwise); ``reverse`` as ``flip`` before and after, ``exclusive`` as the
    inclusive sum minus x: what a PyTorch program writes, PyTorch having no such arguments."""
    cfg, torch = c.cfg, c.torch
    x = c.typed(cfg.x, cfg.dtype)
    d = cfg.axis
    ops = (["aten::flip"] if cfg.reverse else []) + ["aten::cumsum"] + (["aten::sub"] if cfg.exclusive else [])
    ops += ["aten::flip"] if cfg.reverse else []

    def fn():
        v = x.flip(d) if cfg.reverse else x
        y = torch.cumsum(v, d, dtype=v.dtype)
        if cfg.exclusive:
            y = y - v
        return y.flip(d) if cfg.reverse else y

    return Candidate("torch:" + "+".join(ops), "contiguous", fn, numel(cfg.x))


def _min_bytes(cfg: CumSumConfig, ib: int, ob: int) -> int:
    """x read once, y written once (bytes; ``STORED_TYPES[dtype]`` per element for integer data): a
    scan's compulsory traffic (Williams et al., "Roofline", CACM 2009); CUB's decoupled look-back scan
    (Merrill and Garland, NVIDIA NVR-2016-002) moves about that."""
    if cfg.dtype:
        ib = ob = STORED_TYPES[cfg.dtype]
    return (ib + ob) * numel(cfg.x)


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=CumSumConfig(x=(1, 128), axis=1, dtype="int64"),
    name="CumSum", config=CumSumConfig, template="cumsum.cpp.j2", case=_cumsum_case, min_bytes=_min_bytes,
    torch=_cumsum, backward=cumsum_backward, onnx={"CumSum": _map_cumsum}, typed_ops=("CumSum",), fused_from=(),
    aten={"CumSum": ("aten::cumsum", "aten::cumsum_", "aten::flip")},
    nhwc=False, image=False)
