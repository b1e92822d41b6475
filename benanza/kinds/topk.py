"""TopK layers. ONNX TopK (opset 1, 10, 11): the ``k`` largest (``largest=0``: smallest) elements of x
along ``axis`` and their int64 indices, sorted (``sorted=1``) or in any order; ties go to the lower
index (TopK-11). A mixture-of-experts decoder exported by torch.onnx (dynamo; transformers 5) has two:
the router's ``torch.topk(scores [tokens, E], top_k)`` (DeepSeek's group-limited router adds a top-2
within each group of experts, ``[tokens, n_group, E / n_group]``, and the top ``topk_group`` groups), and
the sort of the chosen expert ids before the grouped GEMM, ``torch.sort`` exported as
``TopK(ids [tokens * top_k], k = tokens * top_k, largest=0, sorted=1)`` on int64 data.

cuDNN and cuBLAS have no selection. benanza times CUB's (the CUDA toolkit's) stable sort of each row's
(value, index) pairs with the first k copied out (``cub::DeviceSegmentedSort::StableSortPairs`` /
``StableSortPairsDescending``, one segment per row, one row included), and for rows of at most 1,024 elements and k at most 32 its own
warp kernel (one warp per row, k rounds of a warp-wide arg-max), both behind ``benanza::topk_*_kernel``
(``cpp/src/topk_kernels.cu``; the sort, one translation unit per key type, ``cpp/src/topk_sort_*.cu``). The framework side is PyTorch's ``torch.topk`` (and ``torch.sort`` where
k is the whole axis). Only the innermost axis (after dropping trailing dims of 1) is timed: exporters
write ``axis=-1``; another axis is Unsupported, as it would need a transpose first.

Its gradient in a training step: :func:`benanza.kinds.index_backward.topk_backward`.

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

#: the integer element types TopK is timed on (ONNX's TopK-11 also takes unsigned and 8/16-bit ones,
#: which no exporter writes for a router or a sort of expert ids)
TOPK_INTS = ("int32", "int64")
#: bytes of one index TopK writes (ONNX: int64 indices)
INDEX_BYTES = 8


@dataclass(frozen=True)
class TopKConfig(LayerConfig):
    """ONNX TopK along the innermost axis: x viewed as ``rows`` rows of ``length`` elements, the first k
    of each row in the order ``largest`` (descending; else ascending) gives, ties to the lower index;
    outputs values (x's type) and indices (int64), both of x's shape with ``x[axis] = k``.

    x: the input shape (rank >= 1); axis: the selected dim (non-negative, < rank, every dim after it 1:
    the rows are contiguous); k: 0 <= k <= x[axis]; largest, sorted: ONNX's attributes (default 1;
    ``sorted=0`` lets an implementation return the k in any order; benanza's calls sort them anyway);
    dtype: ``""`` for float data (the precision's float type), else one of :data:`TOPK_INTS`.
    FLOPs: 0. A selection does no arithmetic; its comparisons depend on the algorithm (a radix sort makes
    none, the warp kernel ``k * length`` per row), so no count of them is the layer's (Gather and Copy
    count 0 as well). ValueError for a config outside these bounds.
    """

    kind: ClassVar[str] = "TopK"
    x: Shape
    axis: int
    k: int
    largest: bool = True
    sorted: bool = True
    dtype: str = dataclasses.field(default="", metadata=OPTIONAL)

    def __post_init__(self):
        if not self.x:
            raise ValueError("TopKConfig: a scalar input (rank at least 1)")
        if not 0 <= self.axis < len(self.x):
            raise ValueError(f"TopKConfig: axis {self.axis} of a rank-{len(self.x)} input")
        if numel(self.x[self.axis + 1:]) != 1:
            raise ValueError(f"TopKConfig: axis {self.axis} of {list(self.x)} is not innermost")
        if not 0 <= self.k <= self.x[self.axis]:
            raise ValueError(f"TopKConfig: k {self.k} of an axis of {self.x[self.axis]}")
        if self.dtype and self.dtype not in TOPK_INTS:
            raise ValueError(f"TopKConfig: element type {self.dtype!r} is not one of {', '.join(TOPK_INTS)}")

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        """The shape of each output (values and indices)."""
        return self.x[:self.axis] + (self.k,) + self.x[self.axis + 1:]

    @property
    def rows(self) -> int:
        """The product of the dims before the axis (independent selections)."""
        return numel(self.x[:self.axis])

    @property
    def length(self) -> int:
        """The axis's extent (elements one selection runs over)."""
        return self.x[self.axis]

    @property
    def is_sort(self) -> bool:
        """k is the whole axis: a sort (``torch.sort`` exports as this TopK)."""
        return self.k == self.length

    def flops(self):
        return 0

    def describe(self):
        order = "largest" if self.largest else "smallest"
        what = f"sort {'descending' if self.largest else 'ascending'}" if self.is_sort else f"k={self.k} {order}"
        flags = "" if self.sorted or self.is_sort else " unsorted"
        t = f" {self.dtype}" if self.dtype else ""
        return f"TopK({what}{flags}{t} {self.rows} rows x {self.length})"


def _k_of(node, ctx, attrs) -> int:
    """k: TopK-1's attribute, or the constant 1-element input K of TopK-10/11 (a folded static value
    counts: a sort's K is the size of its input, computed by Shape nodes until the batch is bound)."""
    if ctx.opset < 10:
        if "k" not in attrs:
            raise Unsupported("TopK-1 without its k attribute")
        return int(attrs["k"])
    if len(node.input) < 2 or not node.input[1]:
        raise Unsupported("TopK without its K input")
    v = ctx.value(node.input[1])
    if v is None:
        v = ctx.static_value(node.input[1])
    if v is None:
        raise Unsupported(f"TopK's K (input {node.input[1]!r}) is not a constant: the number of elements "
                          f"selected is only known at run time")
    v = np.asarray(v).reshape(-1)
    if v.size != 1:
        raise Unsupported(f"TopK's K has {v.size} elements (a 1-element tensor)")
    return int(v[0])


def _map_topk(node, ctx, attrs):
    """ONNX TopK: x, k (:func:`_k_of`), attributes ``axis`` (default -1) in [-rank, rank), ``largest``
    and ``sorted`` (TopK-11; default 1). Unsupported for an unknown shape, a k outside [0, x[axis]],
    an axis with a dim above 1 after it (not the innermost), or data other than float, int32, int64."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    if not x:
        raise Unsupported("TopK of a scalar (the input must have rank at least 1)")
    axis = int(attrs.get("axis", -1))
    if not -len(x) <= axis < len(x):
        raise Unsupported(f"TopK axis {axis} of a rank-{len(x)} input")
    axis %= len(x)
    k = _k_of(node, ctx, attrs)
    if not 0 <= k <= x[axis]:
        raise Unsupported(f"TopK's k {k} is outside [0, {x[axis]}] (the axis's extent)")
    if numel(x[axis + 1:]) != 1:
        raise Unsupported(f"TopK over axis {axis} of {list(x)}: benanza times the top-k of contiguous rows "
                          f"(the innermost axis); another axis needs a transpose first")
    dtype = elem_name(ctx, node.input[0], "TopK")
    if dtype and dtype not in TOPK_INTS:
        raise Unsupported(f"TopK of {dtype} data (benanza times float, int32 and int64 keys)")
    return TopKConfig(x=x, axis=axis, k=k, largest=bool(int(attrs.get("largest", 1))),
                      sorted=bool(int(attrs.get("sorted", 1))), dtype=dtype)


@dataclass(frozen=True)
class TopKCase(Case):
    """One row of ``templates/topk.cpp.j2``'s case table: the fields of its C++ ``TopKCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    rows: int
    length: int
    k: int
    largest: CppValue
    stored: CppValue
    et: CppValue
    label: CppValue


def _label(cfg: TopKConfig) -> str:
    what = ("sort " + ("descending" if cfg.largest else "ascending")) if cfg.is_sort else \
        f"top-{cfg.k} {'largest' if cfg.largest else 'smallest'}"
    return what + ("" if cfg.sorted or cfg.is_sort else " unsorted") + (f" {cfg.dtype}" if cfg.dtype else "")


def _topk_case(cfg: TopKConfig, job: Job) -> TopKCase:
    return TopKCase(job=job_init(job), rows=cfg.rows, length=cfg.length, k=cfg.k, largest=cpp_num(cfg.largest),
                    stored=cpp_num(bool(cfg.dtype)), et=ELEM_ENUM[cfg.dtype] if cfg.dtype else "ElemType::F32",
                    label=cpp_string(_label(cfg)))


def _topk(c: Ctx) -> Candidate:
    """``torch.topk(x, k, dim, largest, sorted)`` (its values; the indices are computed with them); where k
    is the whole axis also ``torch.sort(x, dim, descending=largest, stable=True)``, what the exported
    program called (a variant)."""
    cfg, torch = c.cfg, c.torch
    x = c.typed(cfg.x, cfg.dtype)
    d, n = cfg.axis, numel(cfg.output_shape())
    cand = Candidate("torch:aten::topk", "contiguous", lambda: torch.topk(x, cfg.k, d, cfg.largest, cfg.sorted)[0], n)
    if cfg.is_sort:
        cand.variants.append(Candidate("torch:aten::sort", "contiguous, stable",
                                       lambda: torch.sort(x, dim=d, descending=cfg.largest, stable=True)[0], n))
    return cand


def _min_bytes(cfg: TopKConfig, ib: int, ob: int) -> int:
    """x read once, values and int64 indices written once (bytes; ``STORED_TYPES[dtype]`` per element of
    x and values for integer data): the compulsory traffic (Williams et al., "Roofline", CACM 2009). A
    sort's passes over its keys are the algorithm's, not the layer's."""
    if cfg.dtype:
        ib = ob = STORED_TYPES[cfg.dtype]
    return ib * numel(cfg.x) + (ob + INDEX_BYTES) * numel(cfg.output_shape())


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    # Qwen3-30B-A3B decoding 8 sequences: the sort of 8 tokens x top-8 expert ids (transformers' grouped_mm path)
    example=TopKConfig(x=(64,), axis=0, k=64, largest=False, dtype="int64"),
    name="TopK", config=TopKConfig, template="topk.cpp.j2", case=_topk_case, min_bytes=_min_bytes,
    torch=_topk, onnx={"TopK": _map_topk}, typed_ops=("TopK",), fused_from=(),
    aten={"TopK": ("aten::topk", "aten::sort")},
    nhwc=False, image=False)
