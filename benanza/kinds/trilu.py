"""Trilu layers. ONNX Trilu (opset 14): the upper (``upper=1``) or lower triangle of each matrix of
the last two dims of x, from the k-th diagonal on, the other elements zero (numpy's ``triu(x, k)`` /
``tril(x, k)``; PyTorch's ``torch.triu`` / ``torch.tril``). Causal masks of decoder exports are built
with it (usually constant-folded; a layer where its input depends on the batch or sequence).

cuDNN and cuBLAS have no triangular-mask call (cuBLAS's triangular routines multiply or solve), so the
library side is benanza's own kernel (``benanza::trilu_kernel``, ``cpp/src/trilu_kernels.cu``) and
the framework side PyTorch's triu/tril.

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
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


@dataclass(frozen=True)
class TriluConfig(LayerConfig):
    """ONNX Trilu: ``y[..., i, j] = x[..., i, j]`` where kept, else 0; kept: ``j - i >= k`` (upper)
    or ``j - i <= k`` (lower), the ONNX operator spec's definition (numpy's triu / tril).

    x: the input shape (rank >= 2; y has the same shape); upper: the upper triangle; k: the
    diagonal offset (elements; 0 the main diagonal, > 0 above it); dtype: the element type when not
    float (``""``: the precision's float type; else a key of :data:`benanza.kinds.STORED_TYPES`).
    FLOPs: 0 (a select that moves data).
    """

    kind: ClassVar[str] = "Trilu"
    x: Shape
    upper: bool
    k: int
    dtype: str = dataclasses.field(default="", metadata=OPTIONAL)

    def __post_init__(self):
        if len(self.x) < 2:
            raise ValueError(f"TriluConfig: input of rank {len(self.x)} (at least 2)")
        if self.dtype and self.dtype not in STORED_TYPES:
            raise ValueError(f"TriluConfig: element type {self.dtype!r} is not one of {', '.join(STORED_TYPES)}")

    def input_shapes(self):
        return [self.x]

    def output_shape(self):
        return self.x

    def flops(self):
        return 0

    @property
    def matrices(self) -> int:
        """The number of (rows x cols) matrices: the product of the leading dims."""
        return numel(self.x[:-2])

    def kept(self) -> int:
        """Elements of one matrix that are kept (the rest are zeroed): per row i of ``rows``, the
        columns j in [0, cols) with ``j >= i + k`` (upper) or ``j <= i + k`` (lower)."""
        rows, cols = self.x[-2], self.x[-1]
        i = np.arange(rows, dtype=np.int64)
        per_row = cols - np.clip(i + self.k, 0, cols) if self.upper else np.clip(i + self.k + 1, 0, cols)
        return int(per_row.sum())

    def describe(self):
        t = f" {self.dtype}" if self.dtype else ""
        return f"Trilu({'upper' if self.upper else 'lower'} k={self.k}{t} {'x'.join(map(str, self.x))})"


def _map_trilu(node, ctx, attrs):
    """ONNX Trilu (opset 14+): x, an optional int64 scalar k (a constant: Unsupported otherwise),
    attribute ``upper`` (default 1)."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    if len(x) < 2:
        raise Unsupported(f"Trilu of a rank-{len(x)} input (at least 2)")
    k = 0
    if len(node.input) > 1 and node.input[1]:
        v = ctx.value(node.input[1])
        if v is None:
            raise Unsupported("Trilu k is not a constant")
        k = int(np.asarray(v).reshape(-1)[0])
    return TriluConfig(x=x, upper=bool(int(attrs.get("upper", 1))), k=k, dtype=elem_name(ctx, node.input[0], "Trilu"))


def trilu_backward(cfg: TriluConfig) -> tuple:
    """``Kind.backward`` of Trilu: PyTorch's ``triu: self: grad.triu(diagonal)`` and ``tril: self:
    grad.tril(diagonal)`` (``tools/autograd/derivatives.yaml``): the same mask on dy, one Trilu call
    of the data gradient. Bool or integer data carries no gradient: ``()``."""
    if cfg.dtype:
        return ()
    return (("backward_data", cfg),)


@dataclass(frozen=True)
class TriluCase(Case):
    """One row of ``templates/trilu.cpp.j2``'s case table: the fields of its C++ ``TriluCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    batch: int
    rows: int
    cols: int
    k: int
    upper: CppValue
    stored: CppValue
    et: CppValue
    label: CppValue


def _trilu_case(cfg: TriluConfig, job: Job) -> TriluCase:
    return TriluCase(job=job_init(job), batch=cfg.matrices, rows=cfg.x[-2], cols=cfg.x[-1], k=cfg.k,
                     upper=cpp_num(cfg.upper), stored=cpp_num(bool(cfg.dtype)),
                     et=ELEM_ENUM[cfg.dtype] if cfg.dtype else "ElemType::F32",
                     label=cpp_string(("triu" if cfg.upper else "tril") + (f" {cfg.dtype}" if cfg.dtype else "")))


def _trilu(c: Ctx) -> Candidate:
    cfg, torch = c.cfg, c.torch
    x = c.typed(cfg.x, cfg.dtype)
    fn = torch.triu if cfg.upper else torch.tril
    return Candidate(f"torch:aten::{'triu' if cfg.upper else 'tril'}", "contiguous", lambda: fn(x, cfg.k),
                     numel(cfg.x))


def _min_bytes(cfg: TriluConfig, ib: int, ob: int) -> int:
    """The kept elements read once, y written once (bytes; ``STORED_TYPES[dtype]`` per element for
    bool or integer data): a zeroed element needs no read (Williams et al., "Roofline", CACM 2009:
    compulsory traffic)."""
    if cfg.dtype:
        ib = ob = STORED_TYPES[cfg.dtype]
    return ib * cfg.matrices * cfg.kept() + ob * numel(cfg.x)


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=TriluConfig(x=(1, 1, 128, 128), upper=True, k=1),
    name="Trilu", config=TriluConfig, template="trilu.cpp.j2", case=_trilu_case, min_bytes=_min_bytes,
    torch=_trilu, backward=trilu_backward, onnx={"Trilu": _map_trilu}, typed_ops=("Trilu",), fused_from=(),
    aten={"Trilu": ("aten::triu", "aten::tril", "aten::triu_", "aten::tril_")},
    nhwc=False, image=False)
