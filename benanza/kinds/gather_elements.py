"""GatherElements layers: ONNX GatherElements (ONNX operator spec, opset 11/13): ``y[..., j, ...] =
data[..., indices[..., j, ...], ...]`` along ``axis``, y shaped like the indices (numpy's
``take_along_axis``; torch's ``gather``). Mixture-of-experts routers pick the top-k experts' weights
with it (``GatherElements(FLOAT[batch, experts], INT64[batch, k], axis=1)``).

A kind of its own beside :mod:`benanza.kinds.scatter` (which holds ScatterElements, the same index
map written instead of read): no copy of data, no reduction, the output the indices' shape. Timed by
``benanza::gather_elements_kernel`` (``cpp/src/scatter_kernels.cu``, one thread per output element,
the index map ``scatter_offset`` of ``cpp/include/benanza/scatter.hpp``) and torch's ``gather``.

The whole slice of the kind: its config, the ONNX op it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import OPTIONAL, STORED_TYPES, Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import ELEM_ENUM, Case, CppValue, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx
from benanza.kinds.onnx_map import Unsupported, need
from benanza.kinds.scatter import (SCATTER_INTS, SCATTER_MAX_RANK, check_elements_form, data_dtype, elements_axis,
                                   elements_shape, int64_indices)


@dataclass(frozen=True)
class GatherElementsConfig(LayerConfig):
    """ONNX GatherElements: y (the indices' shape) read from data at the indices along ``axis``.

    data: the data shape (rank 1 to 8); indices: the index tensor's shape (the data's rank; int64
    values in [-data[axis], data[axis])); axis: non-negative, < rank; dtype: ``""`` for float data
    (the precision's float type), else one of :data:`benanza.kinds.scatter.SCATTER_INTS`. Timed with
    uniform random indices. FLOPs: 0. ValueError when the shapes break the spec's rules.
    """

    kind: ClassVar[str] = "GatherElements"
    data: Shape
    indices: Shape
    axis: int
    dtype: str = dataclasses.field(default="", metadata=OPTIONAL)

    def __post_init__(self):
        check_elements_form("GatherElementsConfig", self.data, self.indices, self.axis)
        if self.dtype and self.dtype not in SCATTER_INTS:
            raise ValueError(f"GatherElementsConfig: element type {self.dtype!r} is not one of {', '.join(SCATTER_INTS)}")

    def input_shapes(self):
        return [self.data, self.indices]

    def output_shape(self):
        return self.indices

    def flops(self):
        return 0

    def describe(self):
        t = f" {self.dtype}" if self.dtype else ""
        return f"GatherElements({'x'.join(map(str, self.data))} idx {'x'.join(map(str, self.indices))} axis {self.axis}{t})"


def _map_gather_elements(node, ctx, attrs):
    """ONNX GatherElements: data, int64 indices (unknown dims taken from the output's shape, which
    the spec makes equal), ``axis`` (default 0)."""
    data = tuple(need(ctx.shape(node.input[0]), "data"))
    idx = elements_shape(ctx, (node.input[1], node.output[0]), "GatherElements indices")
    if len(idx) != len(data) or len(data) > SCATTER_MAX_RANK:
        raise Unsupported(f"GatherElements indices of rank {len(idx)} for data of rank {len(data)} "
                          f"(the same rank, at most {SCATTER_MAX_RANK})")
    axis = elements_axis(node, attrs, len(data))
    int64_indices(ctx, node)
    return GatherElementsConfig(data=data, indices=idx, axis=axis, dtype=data_dtype(ctx, node))


@dataclass(frozen=True)
class GatherElementsCase(Case):
    """One row of ``templates/gather_elements.cpp.j2``'s case table: the fields of its C++
    ``GatherElementsCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order)."""

    rank: int
    axis: int
    data: CppValue
    idx: CppValue
    n_data: int
    n_out: int
    stored: CppValue
    et: CppValue
    label: CppValue


def _gather_elements_case(cfg: GatherElementsConfig, job: Job) -> GatherElementsCase:
    return GatherElementsCase(job=job_init(job), rank=len(cfg.data), axis=cfg.axis,
                              data=c_array(cfg.data, SCATTER_MAX_RANK), idx=c_array(cfg.indices, SCATTER_MAX_RANK),
                              n_data=numel(cfg.data), n_out=numel(cfg.indices), stored=cpp_num(bool(cfg.dtype)),
                              et=ELEM_ENUM[cfg.dtype] if cfg.dtype else "ElemType::F32",
                              label=cpp_string("GatherElements" + (f" {cfg.dtype}" if cfg.dtype else "")))


def _gather_elements(c: Ctx) -> Candidate:
    """``torch.gather(data, axis, indices)`` on uniform random int64 indices."""
    cfg, torch = c.cfg, c.torch
    data = c.typed(cfg.data, cfg.dtype)
    idx = torch.randint(0, cfg.data[cfg.axis], cfg.indices, device=c.device, dtype=torch.int64)
    return Candidate("torch:aten::gather", "contiguous", lambda: torch.gather(data, cfg.axis, idx), numel(cfg.indices))


def _min_bytes(cfg: GatherElementsConfig, ib: int, ob: int) -> int:
    """The int64 indices read once, the output written once, and the data elements they name read
    once, at most min(indices, data) of them (bytes): compulsory traffic (Williams, Waterman and
    Patterson, "Roofline", CACM 2009). Integer data: ``STORED_TYPES[dtype]`` bytes per element."""
    if cfg.dtype:
        ib = ob = STORED_TYPES[cfg.dtype]
    n = numel(cfg.indices)
    return (8 + ob) * n + ib * min(n, numel(cfg.data))


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=GatherElementsConfig(data=(1, 8), indices=(1, 2), axis=1),
    name="GatherElements", config=GatherElementsConfig, template="gather_elements.cpp.j2",
    case=_gather_elements_case, min_bytes=_min_bytes, torch=_gather_elements,
    onnx={"GatherElements": _map_gather_elements}, typed_ops=("GatherElements",), fused_from=(),
    aten={"GatherElements": ("aten::gather",)}, nhwc=False, image=False)
