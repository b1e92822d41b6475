"""NonZero layers: ONNX NonZero (ONNX operator spec, opset 9/13): the coordinates of x's nonzero
elements in row-major order, ``y [rank, count]`` int64 (numpy's ``nonzero``, stacked; torch's
``nonzero`` transposed). transformers' eager experts (``?_experts_implementation=eager``) find the
experts the routing hit and each expert's (top-k slot, token) pairs with it (``torch.where(mask)``).

The count is data: shape inference leaves it unknown. Where processing binds it to a routing scenario
(transformers' eager experts loop: :mod:`benanza.processing.routing`), the config says which
(:attr:`NonZeroConfig.routing`) and is timed on an input with exactly that many nonzero elements,
spread evenly. cuDNN and cuBLAS have no such call: ``benanza::nonzero`` (``cpp/src/index_kernels.cu``)
runs CUB's ``cub::DeviceSelect::If`` over the element indices, then one thread per selected element
writing its coordinates; the framework side is PyTorch's ``torch.nonzero`` (which also copies the
count to the host: a synchronisation the harness does not time).

The whole slice of the kind: its config, the ONNX op it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import OPTIONAL, STORED_TYPES, Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_string, job_init
from benanza.kinds.elementwise import elem_name
from benanza.kinds.framework import Candidate, Ctx
from benanza.kinds.grouped_gemm import ROUTINGS
from benanza.kinds.onnx_map import Unsupported, need

#: the element types NonZero is timed on (what masks are: bool, and integer one-hot masks)
NONZERO_TYPES = ("bool", "uint8", "int8", "int32", "int64")
#: the most dims an input may have (``kNonZeroMaxRank`` of ``cpp/include/benanza/index_ops.hpp``)
NONZERO_MAX_RANK = 8
#: IndexType of index_ops.hpp per element type
_INDEX_TYPE = {"bool": "IndexType::B8", "uint8": "IndexType::B8", "int8": "IndexType::B8",
               "int32": "IndexType::I32", "int64": "IndexType::I64"}


@dataclass(frozen=True)
class NonZeroConfig(LayerConfig):
    """ONNX NonZero: ``y [rank(x), count]`` int64, the coordinates of x's ``count`` nonzero elements.

    x: the input shape (rank 1 to 8); count: the nonzero elements (0 to numel(x)), the run's data;
    dtype: one of :data:`NONZERO_TYPES`; routing: ``""`` when the graph's shapes give the count, else the
    routing scenario that sets it (:data:`benanza.kinds.grouped_gemm.ROUTINGS`: a mixture of experts'
    rows per expert). FLOPs: 0 (comparisons and a scan of flags, no arithmetic on the data).
    """

    kind: ClassVar[str] = "NonZero"
    x: Shape
    count: int
    dtype: str = "bool"
    routing: str = dataclasses.field(default="", metadata=OPTIONAL)

    def __post_init__(self):
        if not self.x or len(self.x) > NONZERO_MAX_RANK:
            raise ValueError(f"NonZeroConfig: input of rank {len(self.x)} (1 to {NONZERO_MAX_RANK})")
        if not 0 <= self.count <= numel(self.x):
            raise ValueError(f"NonZeroConfig: {self.count} nonzero elements of {numel(self.x)}")
        if self.dtype not in NONZERO_TYPES:
            raise ValueError(f"NonZeroConfig: element type {self.dtype!r} is not one of {', '.join(NONZERO_TYPES)}")
        if self.routing and self.routing not in ROUTINGS:
            raise ValueError(f"NonZeroConfig: routing {self.routing!r} is not one of {', '.join(ROUTINGS)}")

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return (len(self.x), self.count)

    def flops(self):
        return 0

    def describe(self):
        r = f", {self.routing} routing" if self.routing else ""
        return f"NonZero({'x'.join(map(str, self.x))} {self.dtype}, {self.count} nonzero{r})"


def _map_nonzero(node, ctx, attrs):
    """ONNX NonZero of a bool or integer x whose output's count is known (inferred, or bound to a
    routing by processing); Unsupported for float data and ranks above 8."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    y = tuple(need(ctx.shape(node.output[0]), "output"))
    if not x or len(x) > NONZERO_MAX_RANK:
        raise Unsupported(f"NonZero of a rank-{len(x)} input (1 to {NONZERO_MAX_RANK})")
    dtype = elem_name(ctx, node.input[0], "NonZero")
    if dtype not in NONZERO_TYPES:
        raise Unsupported(f"NonZero of {dtype or 'float'} data (benanza times masks: {', '.join(NONZERO_TYPES)})")
    if len(y) != 2 or y[0] != len(x) or not 0 <= y[1] <= numel(x):
        raise Unsupported(f"NonZero output {list(y)} for an input {list(x)}")
    return NonZeroConfig(x=x, count=y[1], dtype=dtype)


@dataclass(frozen=True)
class NonZeroCase(Case):
    """One row of ``templates/nonzero.cpp.j2``'s case table: the fields of its C++ ``NonZeroCase`` in
    order, as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    rank: int
    dims: CppValue
    n: int
    count: int
    type: CppValue
    label: CppValue


def _nonzero_case(cfg: NonZeroConfig, job: Job) -> NonZeroCase:
    r = f" {cfg.routing}" if cfg.routing else ""
    return NonZeroCase(job=job_init(job), rank=len(cfg.x), dims=c_array(cfg.x, NONZERO_MAX_RANK, 1), n=numel(cfg.x),
                       count=cfg.count, type=_INDEX_TYPE[cfg.dtype], label=cpp_string(f"NonZero {cfg.dtype}{r}"))


def spread_mask(torch, shape: Shape, count: int, dtype: str, device):
    """A tensor of ``shape`` with ``count`` nonzero elements (ones) spread evenly (flat positions
    ``i * numel // count``), zeros elsewhere: the input the C++ case builds too."""
    n = numel(shape)
    x = torch.zeros(n, device=device, dtype=getattr(torch, dtype))
    if count:
        x.index_fill_(0, torch.tensor([i * n // count for i in range(count)], device=device, dtype=torch.int64), 1)
    return x.reshape(shape)


def _nonzero(c: Ctx) -> Candidate:
    """``torch.nonzero(x)`` of an input with ``count`` nonzero elements spread evenly (its ``[count,
    rank]`` result; ONNX's ``[rank, count]`` is its transposed view)."""
    cfg, torch = c.cfg, c.torch
    x = spread_mask(torch, cfg.x, cfg.count, cfg.dtype, c.device)
    return Candidate("torch:aten::nonzero", "contiguous", lambda: torch.nonzero(x), len(cfg.x) * cfg.count)


def _min_bytes(cfg: NonZeroConfig, ib: int, ob: int) -> int:
    """x read once (``STORED_TYPES[dtype]`` bytes per element) and the int64 coordinates written once
    (bytes): the compulsory traffic (Williams, Waterman and Patterson, "Roofline", CACM 2009)."""
    return STORED_TYPES[cfg.dtype] * numel(cfg.x) + 8 * len(cfg.x) * cfg.count


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    # Qwen3-30B-A3B's eager experts decoding 8 sequences: one expert's (top-k slot, token) pairs of its
    # [top-8, 8 tokens] mask, one pair under balanced routing (64 rows over 128 experts)
    example=NonZeroConfig(x=(8, 8), count=1, routing="balanced"),
    name="NonZero", config=NonZeroConfig, template="nonzero.cpp.j2", case=_nonzero_case, min_bytes=_min_bytes,
    torch=_nonzero, onnx={"NonZero": _map_nonzero}, typed_ops=("NonZero",), fused_from=(),
    aten={"NonZero": ("aten::nonzero", "aten::where", "aten::argwhere")},
    nhwc=False, image=False)
