"""Strided views: what ONNX's data-movement ops are when a consumer can read its operand in place.

An ONNX Transpose, Reshape, Squeeze, Unsqueeze, constant-index Gather or constant Slice produces a new
packed tensor, and benanza costs a Transpose, Gather or Slice as the copy it is. A framework often
runs none of those copies: PyTorch's ``permute``, ``view``, ``select`` and slicing return views
(a shape, element strides and an offset over the same memory), and a kernel that takes strides
(cuBLAS batch strides, cuDNN's fused attention, PyTorch's SDPA) reads the operand where it lies.
This module computes those views so a fusion finder can hand strides to the fused call instead of
counting the copies (:func:`benanza.kinds.sdpa.find_attention`).

A :class:`View` is ``(shape, strides, offset)`` in elements over a packed base tensor. Every
function returns the new view, or ``None`` when the op cannot be a view of that memory (a Reshape
that would need a copy, as ``torch.Tensor.view`` refuses it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

Shape = tuple[int, ...]


def packed_strides(shape: Shape) -> Shape:
    """Row-major (C order) element strides of a packed tensor of ``shape``."""
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= max(int(d), 1)
    return tuple(reversed(out))


Mode = tuple[int, int]  # (size, stride) in elements


def coalesce(modes: tuple[Mode, ...]) -> tuple[Mode, ...]:
    """Modes (outer to inner) with size-1 modes dropped and neighbours laid out one inside the
    other (outer stride = inner stride x inner size) merged into one."""
    out: list[Mode] = []
    for size, stride in modes:
        if size == 1:
            continue
        if out and out[-1][1] == stride * size:
            out[-1] = (out[-1][0] * size, stride)
        else:
            out.append((size, stride))
    return tuple(out)


@dataclass(frozen=True)
class View:
    """A view over a packed base tensor. Each dim is a tuple of modes (size, stride), outer to
    inner, as in CUTLASS's CuTe layouts: a dim that merged dims of different strides keeps them
    apart, so a later split of it is still a view (PyTorch would have to copy at the merge, a
    kernel reading the final operand through strides need not). Element ``i`` (a multi-index)
    lives at ``offset`` + the sum over dims of ``i[k]``'s mixed-radix digits times their strides."""

    dims: tuple[tuple[Mode, ...], ...]
    offset: int = 0

    @classmethod
    def packed(cls, shape: Shape) -> "View":
        return cls(tuple(((int(d), s),) for d, s in zip(shape, packed_strides(tuple(shape)))), 0)

    @property
    def shape(self) -> Shape:
        return tuple(math.prod(sz for sz, _ in modes) for modes in self.dims)

    @property
    def strides(self) -> Shape | None:
        """One stride per dim, or None when a dim's modes do not coalesce into one."""
        out = []
        for modes in self.dims:
            c = coalesce(modes)
            if len(c) > 1:
                return None
            out.append(c[0][1] if c else 0)
        return tuple(out)

    def extent(self) -> int:
        """Elements of base memory the view spans (1 + the largest offset it reaches)."""
        if any(d == 0 for d in self.shape):
            return 0
        return self.offset + 1 + sum((sz - 1) * st for modes in self.dims for sz, st in modes)


def permute(v: View, perm: tuple[int, ...]) -> View | None:
    """``x.permute(perm)``: ONNX Transpose."""
    if sorted(perm) != list(range(len(v.dims))):
        return None
    return View(tuple(v.dims[p] for p in perm), v.offset)


def reshape(v: View, shape: Shape) -> View | None:
    """ONNX Reshape (and Flatten, Squeeze, Unsqueeze: the same element order) of a view: the new
    dims take the modes of the old ones from the innermost, splitting a mode where a new dim ends
    inside it; None when a new dim would need part of a mode that does not divide (then no
    strides describe it)."""
    shape = tuple(int(d) for d in shape)
    if math.prod(shape) != math.prod(v.shape):
        return None
    modes = [m for dim in v.dims for m in dim if m[0] != 1]
    new: list[tuple[Mode, ...]] = []
    for n in reversed(shape):
        taken: list[Mode] = []
        need = n
        while need > 1:
            if not modes:
                return None
            size, stride = modes[-1]
            if size <= need:
                if need % size:
                    return None
                taken.insert(0, modes.pop())
                need //= size
            else:
                if size % need:
                    return None
                modes[-1] = (size // need, stride * need)
                taken.insert(0, (need, stride))
                need = 1
        new.insert(0, tuple(taken) if taken else ((1, 0),))
    if modes:
        return None
    return View(tuple(new), v.offset)


def unsqueeze(v: View, axes: tuple[int, ...]) -> View | None:
    """``x.unsqueeze(...)`` for ONNX's ``axes`` (positions in the output)."""
    r = len(v.dims) + len(axes)
    ax = sorted(a + r if a < 0 else a for a in axes)
    if any(not 0 <= a < r for a in ax) or len(set(ax)) != len(ax):
        return None
    dims = list(v.dims)
    for a in ax:
        dims.insert(a, ((1, 0),))
    return View(tuple(dims), v.offset)


def select(v: View, axis: int, index: int) -> View | None:
    """``x.select(axis, index)``: ONNX Gather with a constant scalar index."""
    r = len(v.dims)
    axis = axis + r if axis < 0 else axis
    if not 0 <= axis < r:
        return None
    n = v.shape[axis]
    index = index + n if index < 0 else index
    if not 0 <= index < n:
        return None
    offset = v.offset
    for size, stride in reversed(v.dims[axis]):
        offset += (index % size) * stride
        index //= size
    return View(tuple(d for i, d in enumerate(v.dims) if i != axis), offset)


def slice_view(v: View, starts: tuple[int, ...], steps: tuple[int, ...], out: Shape) -> View | None:
    """ONNX Slice with constant, normalised starts and positive steps (``out``: the output shape).
    A sliced dim must have one stride."""
    if len(starts) != len(v.dims) or len(steps) != len(v.dims) or len(out) != len(v.dims):
        return None
    if any(s <= 0 for s in steps):
        return None
    dims, offset = [], v.offset
    for modes, st, sp, n, full in zip(v.dims, starts, steps, out, v.shape):
        if n == full and st == 0 and sp == 1:
            dims.append(modes)
            continue
        c = coalesce(modes)
        if len(c) > 1:
            return None
        stride = c[0][1] if c else 0
        offset += st * stride
        dims.append(((n, stride * sp),))
    return View(tuple(dims), offset)


def inverse_permutation(perm: tuple[int, ...]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for i, p in enumerate(perm):
        inv[p] = i
    return tuple(inv)
