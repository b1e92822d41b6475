"""Gather layers. ONNX Gather (ONNX operator spec): ``y = take(data, indices, axis)``; embedding lookups and

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import math
import numpy as np
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, job_init
from benanza.kinds.framework import Candidate, Ctx, functional
from benanza.kinds.onnx_map import Unsupported, need


#: constant index tensors longer than this are not kept in a Gather config (timed as random indices)
GATHER_MAX_CONSTANT_INDICES = 1024


@dataclass(frozen=True)
class GatherConfig(LayerConfig):
    """ONNX Gather (ONNX operator spec): ``y = take(data, indices, axis)``; embedding lookups and
    index selection (a class token, one of Q/K/V). Costed as the memory traffic it is, not zero.

    data: the data shape; indices: the index tensor's shape; axis >= 0. The call sees data as
    (outer, axis_dim, inner) and y as (outer, n, inner) with n = numel(indices). values: the
    constant index values (normalised to >= 0) when the model fixes them; () when they come from
    data (an embedding lookup: timed with uniform random indices in [0, axis_dim)) or when there are
    more than :data:`GATHER_MAX_CONSTANT_INDICES` of them.
    Timed: a benanza gather kernel with that index pattern (one thread per output element; int64
    indices in device memory); for constant indices also one cudaMemcpy2DAsync per index (rows =
    outer, a row = inner elements), what a framework's copy of a strided view does. FLOPs: 0.
    """

    kind: ClassVar[str] = "Gather"
    data: Shape
    indices: Shape
    axis: int
    values: tuple[int, ...] = ()

    @property
    def batch(self) -> int:
        y = self.output_shape()
        return y[0] if y else 1

    @property
    def outer(self) -> int:
        return numel(self.data[:self.axis])

    @property
    def inner(self) -> int:
        return numel(self.data[self.axis + 1:])

    def input_shapes(self):
        return [self.data, self.indices]

    def output_shape(self):
        return self.data[:self.axis] + self.indices + self.data[self.axis + 1:]

    def flops(self):
        return 0

    def describe(self):
        idx = (f"[{','.join(map(str, self.values[:4]))}{',...' if len(self.values) > 4 else ''}]"
               if self.values else "x".join(map(str, self.indices)) or "scalar")
        return f"Gather({'x'.join(map(str, self.data))} axis {self.axis} idx {idx})"


def _map_gather(node, ctx, attrs):
    data = tuple(need(ctx.shape(node.input[0]), "data"))
    idx = tuple(need(ctx.shape(node.input[1]), "indices"))
    r = len(data)
    if r == 0:
        raise Unsupported("Gather from a scalar")
    axis = int(attrs.get("axis", 0))
    axis = axis + r if axis < 0 else axis
    if not 0 <= axis < r:
        raise Unsupported(f"axis {attrs.get('axis')} out of range for rank {r}")
    values: tuple[int, ...] = ()
    v = ctx.value(node.input[1])
    if v is not None:
        flat = [int(i) for i in np.asarray(v).reshape(-1)]
        norm = [i + data[axis] if i < 0 else i for i in flat]
        bad = [i for i, n in zip(flat, norm) if not 0 <= n < data[axis]]
        if bad:
            raise Unsupported(f"index {bad[0]} out of range for axis {axis} of size {data[axis]}")
        if len(norm) <= GATHER_MAX_CONSTANT_INDICES:
            values = tuple(norm)
    return GatherConfig(data=data, indices=idx, axis=axis, values=values)


def _map_gathernd(node, ctx, attrs):
    """ONNX GatherND (batch_dims 0): a Gather along the first k dims of the data flattened into one
    (k = the index tuples' length), at the tuples' row-major positions when the indices are
    constant, else at random positions as an embedding lookup is (indices computed in the graph:
    torch.export's ``aten.index.Tensor`` of a decoder's attention mask, [B, L] -> [B, 1, 1, L])."""
    data = tuple(need(ctx.shape(node.input[0]), "data"))
    if int(attrs.get("batch_dims", 0)) != 0:
        raise Unsupported("GatherND with batch_dims > 0")
    v = ctx.value(node.input[1])
    if v is None:
        shape = tuple(need(ctx.shape(node.input[1]), "indices"))
        k = shape[-1] if shape else 0
        if not 1 <= k <= len(data):
            raise Unsupported(f"GatherND index tuples of length {k} for data of rank {len(data)}")
        return GatherConfig(data=(math.prod(data[:k]),) + data[k:], indices=shape[:-1], axis=0)
    idx = np.asarray(v).astype(np.int64)
    k = idx.shape[-1] if idx.ndim else 0
    if idx.ndim == 0 or not 1 <= k <= len(data):
        raise Unsupported(f"GatherND index tuples of length {k} for data of rank {len(data)}")
    lead = data[:k]
    tuples = idx.reshape(-1, k) % np.asarray(lead, dtype=np.int64)  # negative indices count from the end
    flat = np.ravel_multi_index(tuple(tuples.T), lead) if tuples.size else np.zeros(0, dtype=np.int64)
    values = tuple(int(i) for i in flat) if flat.size <= GATHER_MAX_CONSTANT_INDICES else ()
    return GatherConfig(data=(math.prod(lead),) + data[k:], indices=tuple(idx.shape[:-1]), axis=0, values=values)


#: constant-index Gathers with at most this many indices are also timed as one cudaMemcpy2DAsync per index
GATHER_MEMCPY_MAX = 64


@dataclass(frozen=True)
class GatherCase(Case):
    """One row of ``templates/gather.cpp.j2``'s case table: the fields of its C++ ``GatherCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    outer: CppValue
    axis_dim: CppValue
    n: CppValue
    inner: CppValue
    values: CppValue
    memcpy: CppValue


def _gather_case(cfg: GatherConfig, job: Job) -> GatherCase:
    n = numel(cfg.indices)
    return GatherCase(job=job_init(job), outer=cfg.outer, axis_dim=cfg.data[cfg.axis], n=n, inner=cfg.inner, values="{" + ", ".join(str(v) for v in cfg.values) + "}", memcpy=cpp_num(bool(cfg.values) and n <= GATHER_MEMCPY_MAX))


def _gather(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, functional(c), c.torch
    data = c.randn(cfg.data)
    n_idx = numel(cfg.indices)
    if cfg.values and len(cfg.values) == n_idx:
        idx = torch.tensor(cfg.values, device=c.device, dtype=torch.int64).reshape(cfg.indices)
    else:
        idx = torch.randint(0, cfg.data[cfg.axis], cfg.indices, device=c.device, dtype=torch.int64)
    y = numel(cfg.output_shape())
    if cfg.indices == ():  # a constant scalar index: a select, made contiguous when it is not
        i = int(idx)
        return Candidate("torch:aten::select+clone", "default", lambda: data.select(cfg.axis, i).contiguous(), y,
                         "a view in PyTorch; its copy is counted only when the view is not contiguous")
    if cfg.axis == 0 and len(cfg.data) == 2:
        return Candidate("torch:aten::embedding", "default", lambda: F.embedding(idx, data), y)
    flat = idx.reshape(-1)
    out = cfg.output_shape()
    return Candidate("torch:aten::index_select", "default",
                     lambda: torch.index_select(data, cfg.axis, flat).view(out), y)


def _min_bytes(cfg: GatherConfig, ib: int, ob: int) -> int:
    """The gathered rows read once, the int64 indices once, the output written once (bytes)."""
    y = numel(cfg.output_shape())
    return ib * y + 8 * numel(cfg.indices) + ob * y


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=GatherConfig(data=(1, 197, 768), indices=(), axis=1, values=(0,)),
    name="Gather", config=GatherConfig, template="gather.cpp.j2", case=_gather_case, min_bytes=_min_bytes,
    torch=_gather, onnx={"Gather": _map_gather, "GatherND": _map_gathernd},
    typed_ops=(), fused_from=(),
    aten={"Gather": ('aten::embedding', 'aten::gather', 'aten::index', 'aten::index_select', 'aten::select'), "GatherND": ('aten::index',)},
    nhwc=False, image=False)
