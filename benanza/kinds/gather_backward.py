"""Gather backward layers: the gradient of a :class:`~benanza.kinds.gather.GatherConfig`'s data in a
training step (docs/training.md). An embedding lookup's gradient is the table's dense gradient
(``aten::embedding_dense_backward``), a select's or an index_select's the input's
(``aten::select_backward``, ``index_select_backward``): the same computation, zeros of the data's
shape and the output gradient's rows added at the indices (PyTorch's tools/autograd/derivatives.yaml:
``embedding: weight: embedding_backward_symint(grad, indices, weight.sym_size(0), padding_idx,
scale_grad_by_freq, sparse)``; ``select.int: self: select_backward_symint(grad, self.sym_sizes(), dim,
index)``; ``index_select: self: index_select_backward_symint(grad, self.sym_sizes(), dim, index)``,
which is ``zeros(self_sizes).index_add_(dim, index, grad)``, aten/src/ATen/native/TensorShape.cpp).

The integer indices carry no gradient. Whether the call is a data gradient (the Gather reads an
activation: ViT's class-token select ``x[:, 0]``) or a weight gradient (it reads a trainable table:
an embedding) depends on where the data comes from, which the config does not say: the training
plan decides (:func:`benanza.processing.training.training_plan`).

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its
PyTorch candidate and its place as the Gather kind's backward call (:class:`benanza.kinds.base.Kind`).
It maps no ONNX op.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, cpp_num, job_init
from benanza.kinds.framework import Candidate, Ctx
from benanza.kinds.gather import GATHER_MEMCPY_MAX, GatherConfig


@dataclass(frozen=True)
class GatherBwdConfig(LayerConfig):
    """The gradient of ``y = take(data, indices, axis)`` with respect to data: dx of shape ``data``
    (zeros) with dy's rows added at the indices, ``dx[o][idx[j]][i] += dy[o][j][i]`` for data viewed
    as (outer, axis_dim, inner) and dy (the forward's output shape) as (outer, n, inner),
    n = numel(indices). ``values``: the forward's constant indices (normalised to >= 0) or () when
    they come from data (an embedding's token ids: timed with uniform random indices, which may
    repeat). Inputs: dy and the int64 indices; output: dx.

    Timed: benanza's kernel (``cpp/src/grad_kernels.cu``: cudaMemsetAsync of dx, then one thread per
    element of dy; atomicAdd when indices may repeat, whose order of additions -- and so the
    rounding -- is not deterministic, as PyTorch's CUDA index_add_; plain stores for distinct
    constant indices, where the scatter is a copy); for a few distinct constant indices also
    cudaMemsetAsync + one cudaMemcpy2DAsync per index. PyTorch's own embedding_dense_backward on
    CUDA sorts the indices and sums each row's gradients in a fixed order (deterministic, slower):
    it is timed as the framework candidate. FLOPs: one addition per element of dy when indices may
    repeat, else 0 (a copy)."""

    kind: ClassVar[str] = "GatherBwd"
    data: Shape
    indices: Shape
    axis: int
    values: tuple[int, ...] = ()

    @classmethod
    def of(cls, fwd: GatherConfig) -> "GatherBwdConfig":
        """The data gradient of the forward Gather ``fwd``."""
        return cls(data=tuple(fwd.data), indices=tuple(fwd.indices), axis=fwd.axis, values=tuple(fwd.values))

    @property
    def batch(self) -> int:
        y = self.dy_shape
        return y[0] if y else 1

    @property
    def dy_shape(self) -> Shape:
        """The forward's output shape: data with the axis replaced by the indices' shape."""
        return self.data[:self.axis] + self.indices + self.data[self.axis + 1:]

    @property
    def outer(self) -> int:
        return numel(self.data[:self.axis])

    @property
    def inner(self) -> int:
        return numel(self.data[self.axis + 1:])

    @property
    def distinct(self) -> bool:
        """The indices are constant and distinct: every element of dx receives at most one value."""
        return bool(self.values) and len(set(self.values)) == len(self.values)

    def input_shapes(self):
        return [self.dy_shape, self.indices]

    def output_shape(self):
        return self.data

    def flops(self):
        return 0 if self.distinct else numel(self.dy_shape)

    def describe(self):
        idx = (f"[{','.join(map(str, self.values[:4]))}{',...' if len(self.values) > 4 else ''}]"
               if self.values else "x".join(map(str, self.indices)) or "scalar")
        return f"GatherBwd({'x'.join(map(str, self.data))} axis {self.axis} idx {idx})"


def gather_backward(cfg: GatherConfig) -> tuple:
    """``Kind.backward`` of the Gather kind: the gradient of its data, phase ``backward_data`` (the
    training plan makes it ``backward_weight`` when the data is a trainable table); none for the
    integer indices."""
    return (("backward_data", GatherBwdConfig.of(cfg)),)


@dataclass(frozen=True)
class GatherBwdCase(Case):
    """One row of ``templates/gather_backward.cpp.j2``'s case table: the fields of its C++
    ``GatherBwdCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order
    against the template)."""

    outer: CppValue
    axis_dim: CppValue
    n: CppValue
    inner: CppValue
    values: CppValue
    accumulate: CppValue
    memcpy: CppValue


def _case(cfg: GatherBwdConfig, job: Job) -> GatherBwdCase:
    n = numel(cfg.indices)
    return GatherBwdCase(job=job_init(job), outer=cfg.outer, axis_dim=cfg.data[cfg.axis], n=n, inner=cfg.inner,
                         values="{" + ", ".join(str(v) for v in cfg.values) + "}",
                         accumulate=cpp_num(not cfg.distinct), memcpy=cpp_num(cfg.distinct and n <= GATHER_MEMCPY_MAX))


def _torch(c: Ctx) -> Candidate:
    """The ATen op autograd runs: ``embedding_dense_backward(grad, indices, num_weights, padding_idx=-1,
    scale_grad_by_freq=False)`` for a lookup of data-dependent indices in a 2-D table along axis 0;
    ``select_backward(grad, sizes, dim, index)`` for one constant scalar index; else
    index_select_backward's body, ``zeros(sizes).index_add_(dim, index, grad)``."""
    cfg, torch = c.cfg, c.torch
    dy = c.randn(cfg.dy_shape)
    out = numel(cfg.data)
    if cfg.values and len(cfg.values) == numel(cfg.indices):
        idx = torch.tensor(cfg.values, device=c.device, dtype=torch.int64).reshape(cfg.indices)
    else:
        idx = torch.randint(0, cfg.data[cfg.axis], cfg.indices, device=c.device, dtype=torch.int64)
    if cfg.indices == () and cfg.values:
        i, sizes = int(cfg.values[0]), list(cfg.data)
        return Candidate("torch:aten::select_backward", "default",
                         lambda: torch.ops.aten.select_backward(dy, sizes, cfg.axis, i), out)
    if cfg.axis == 0 and len(cfg.data) == 2 and not cfg.values:
        rows = cfg.data[0]
        return Candidate("torch:aten::embedding_dense_backward", "default",
                         lambda: torch.ops.aten.embedding_dense_backward(dy, idx, rows, -1, False), out)
    flat = idx.reshape(-1)
    view = cfg.data[:cfg.axis] + (numel(cfg.indices),) + cfg.data[cfg.axis + 1:]
    g = dy.reshape(view)
    return Candidate("torch:aten::index_add_", "default",
                     lambda: g.new_zeros(cfg.data).index_add_(cfg.axis, flat, g), out,
                     "index_select_backward: zeros of the input's shape, index_add_ of the gradient")


def _min_bytes(cfg: GatherBwdConfig, ib: int, ob: int) -> int:
    """dy read once, the int64 indices once, dx written once (bytes)."""
    return ib * numel(cfg.dy_shape) + 8 * numel(cfg.indices) + ob * numel(cfg.data)


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=GatherBwdConfig(data=(32000, 1024), indices=(35, 8), axis=0),
    name="GatherBwd", config=GatherBwdConfig, template="gather_backward.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, backward_of={"Gather": gather_backward},
    nhwc=False, image=False)
