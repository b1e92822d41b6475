"""Copy layers. Layers that only move data: Concat, Transpose, Slice, Pad (constant), Expand, Split,
Tile, costed as the memory traffic they are; and their gradients in a training step (docs/training.md), copies: a
Split (Concat's), the inverse Transpose, a SliceBackward (Slice's) and a Slice (Pad's), configs of
this kind (:func:`copy_backward`), a Concat (Split's), and a ReduceSum (Expand's and Tile's, a config of
the Reduce kind).

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses

import numpy as np
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import OPTIONAL, STORED_TYPES, Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import ELEM_ENUM, Case, CppValue, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, NotSupported, algo_label, functional
from benanza.kinds.elementwise import elem_name
from benanza.kinds.onnx_map import Unsupported, broadcast_shapes, need
from benanza.kinds.reduce import ReduceConfig


@dataclass(frozen=True)
class Transfer:
    """One strided copy ``dst[dst_offset + i.dst_strides] = src[src_offset + i.src_strides]``.

    dims, strides and offsets are in elements; src_index says which input tensor is read.
    """

    dims: tuple[int, ...]
    src_strides: tuple[int, ...]
    dst_strides: tuple[int, ...]
    src_offset: int = 0
    dst_offset: int = 0
    src_index: int = 0


def packed_strides(shape: Shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


@dataclass(frozen=True)
class CopyConfig(LayerConfig):
    """Layers that only move data: Concat, Transpose, Slice, Pad (constant), Expand, costed as the memory
    traffic they are: cudnnTransformTensor per strided transfer (plus cudaMemsetAsync of the output
    for Pad), not as zero.

    op: ONNX op; inputs: input shapes; y: output shape; attrs: op parameters as sorted pairs
    (Concat: axis; Transpose: perm; Slice: starts/ends/axes/steps normalised; Pad: pads; Expand:
    none, ``()``; Tile: repeats).

    ``Expand`` (ONNX Expand, numpy broadcasting of x to y): one strided copy over y's dims whose
    source stride is 0 on every broadcast dim (x padded with leading 1s to y's rank): each element
    of x is read once from memory and written once per copy of it in y.

    ``Tile`` (ONNX Tile, ``y[i] = x[i mod x.shape]``): one strided copy over y's dims each split in
    (repeat, x's extent), source strides (0, x's stride), destination strides (x's extent times y's
    stride, y's stride); at most 8 dims once size-1 dims are dropped and neighbours merged.

    ``Split``: ONNX Split (every output), and the gradient of a Concat in a training step; ``inputs``
    = (the split tensor's shape,), ``y`` the same shape (the parts packed one after another in one
    buffer: the same bytes as the separate tensors), attrs ``axis`` and ``sizes`` (each non-empty
    part's extent along the axis); each part is one strided copy out of the input.

    One op no ONNX node maps to, a gradient of a training step (:func:`copy_backward`):

    - ``SliceBackward``: the gradient of a Slice (PyTorch's ``aten::slice_backward``): ``inputs`` =
      (the slice's shape,), ``y`` the sliced tensor's shape, attrs ``starts`` and ``steps`` as the
      Slice's; ``y`` is zero-filled, then the gradient is copied into the slice.
    """

    kind: ClassVar[str] = "Copy"
    op: str
    inputs: tuple[Shape, ...]
    y: Shape
    attrs: tuple[tuple[str, tuple[int, ...]], ...]
    dtype: str = dataclasses.field(default="", metadata=OPTIONAL)

    def __post_init__(self):
        if self.dtype and self.dtype not in STORED_TYPES:
            raise ValueError(f"CopyConfig: element type {self.dtype!r} is not one of {', '.join(STORED_TYPES)}")

    def input_shapes(self):
        return list(self.inputs)

    def output_shape(self):
        return self.y

    def flops(self):
        return 0

    def attr(self, name: str) -> tuple[int, ...]:
        return dict(self.attrs)[name]

    def is_identity(self) -> bool:
        """True when the op returns its one input unchanged: a Slice of every element (starts 0,
        steps 1, the input's shape), a Pad of zeros, a Transpose by the identity permutation, a
        Concat of one input, an Expand that broadcasts nothing (y has x's elements: at most new leading
        1s). Such a layer moves no data in any implementation (zero-cost)."""
        if self.op in ("Expand", "Tile"):
            return numel(self.inputs[0]) == numel(self.y)
        if len(self.inputs) != 1 or tuple(self.inputs[0]) != tuple(self.y):
            return False
        if self.op == "Slice":
            return not any(self.attr("starts")) and all(s == 1 for s in self.attr("steps"))
        if self.op == "Pad":
            return not any(self.attr("pads"))
        if self.op == "Transpose":
            return tuple(self.attr("perm")) == tuple(range(len(self.y)))
        if self.op == "SliceBackward":
            return not any(self.attr("starts")) and all(s == 1 for s in self.attr("steps"))
        if self.op == "Split":
            return len(self.attr("sizes")) == 1
        return self.op == "Concat"

    def fills_output(self) -> bool:
        """True when the output is first set to the pad value (Pad) or to zero (SliceBackward)."""
        return self.op in ("Pad", "SliceBackward")

    def transfers(self) -> list[Transfer]:
        """The strided copies that implement the op (in elements)."""
        y_strides = packed_strides(self.y)
        if self.op == "Concat":
            axis = self.attr("axis")[0]
            out, offset = [], 0
            for i, s in enumerate(self.inputs):
                out.append(Transfer(s, packed_strides(s), y_strides, 0, offset * y_strides[axis], i))
                offset += s[axis]
            return out
        x = self.inputs[0]
        x_strides = packed_strides(x)
        if self.op == "Split":
            axis = self.attr("axis")[0]
            out, offset, dst = [], 0, 0
            for size in self.attr("sizes"):
                part = x[:axis] + (size,) + x[axis + 1:]
                out.append(Transfer(part, x_strides, packed_strides(part), offset * x_strides[axis], dst, 0))
                offset += size
                dst += numel(part)
            return out
        if self.op == "SliceBackward":
            starts, steps = self.attr("starts"), self.attr("steps")
            off = sum(st * ys for st, ys in zip(starts, y_strides))
            return [Transfer(x, x_strides, tuple(ys * sp for ys, sp in zip(y_strides, steps)), 0, off)]
        if self.op == "Transpose":
            perm = self.attr("perm")
            return [Transfer(self.y, tuple(x_strides[p] for p in perm), y_strides)]
        if self.op == "Slice":
            starts, steps = self.attr("starts"), self.attr("steps")
            off = sum(st * xs for st, xs in zip(starts, x_strides))
            return [Transfer(self.y, tuple(xs * sp for xs, sp in zip(x_strides, steps)), y_strides, off, 0)]
        if self.op == "Pad":
            pads = self.attr("pads")
            r = len(x)
            off = sum(pads[i] * y_strides[i] for i in range(r))
            return [Transfer(x, x_strides, y_strides, 0, off)]
        if self.op == "Expand":
            xp = (1,) * (len(self.y) - len(x)) + tuple(x)
            src = tuple(0 if d == 1 and n != 1 else s for d, n, s in zip(xp, self.y, packed_strides(xp)))
            return [Transfer(self.y, src, y_strides)]
        if self.op == "Tile":
            dims, src, dst = [], [], []
            for r, d, xs, ys in zip(self.attr("repeats"), x, x_strides, y_strides):
                dims += [r, d]
                src += [0, xs]
                dst += [d * ys, ys]
            return [Transfer(tuple(dims), tuple(src), tuple(dst))]
        raise ValueError(f"CopyConfig: unknown op {self.op}")

    def describe(self):
        ins = ",".join("x".join(map(str, s)) for s in self.inputs)
        t = f" {self.dtype}" if self.dtype else ""
        if self.op == "Split":
            return f"Copy(Split{t} {ins} axis {self.attr('axis')[0]} into {len(self.attr('sizes'))})"
        return f"Copy({self.op}{t} {ins} -> {'x'.join(map(str, self.y))})"


def copy_backward(cfg: CopyConfig) -> tuple | None:
    """``Kind.backward`` of the Copy kind: the data gradient of each op, itself a copy, as PyTorch's
    autograd computes it (``tools/autograd/derivatives.yaml``):

    - Transpose (``permute: self: permute_backwards(grad, dims)``, FunctionsManual.cpp): the gradient
      permuted by the inverse permutation: a Transpose of dy (the forward's output shape) by
      ``argsort(perm)``, counted as the copy that makes it packed, as the forward Transpose is (a
      framework may hand the strided view on instead, where the next gradient call accepts one).
    - Concat (``cat: tensors: cat_tensors_backward(grad, sizes, dtypes, dim)``): each input's gradient
      is ``grad.narrow(dim, offset, size)``, made contiguous where it is consumed: one Split of dy,
      a strided copy per input.
    - Slice (``slice.Tensor: self: slice_backward_wrapper(grad, self.sym_sizes(), dim, start, end,
      step)``, ``aten::slice_backward``): zeros of the input's shape, dy copied into the slice: a
      SliceBackward.
    - Pad (``constant_pad_nd: self: constant_pad_nd_backward(grad, pad)``, a narrow of the gradient
      made contiguous): a Slice of dy at the pads' begin offsets.
    - Expand (``expand: self: at::sum_to(grad, self.sym_sizes())``): dy (y's shape) summed over the
      broadcast dims to x's shape (padded with leading 1s to y's rank): a ReduceSum of the Reduce
      kind, as an Elementwise layer's broadcast operand gets (:mod:`benanza.kinds.elementwise_backward`).
      Its phase is ``backward_data``: an Expand of a parameter alone (an initializer and a shape
      known once the batch is bound) is constant-folded, no layer.

    - Split (``split_with_sizes: self: split_with_sizes_backward(grads, split_sizes, dim, ...)``, a
      cat of the parts' gradients, zeros for a part no one reads): a Concat of the parts along the
      axis.

    - Tile (``repeat: self: repeat_backward(grad, repeats, self.sym_sizes())``, FunctionsManual.cpp:
      dy viewed as (r0, x0, r1, x1, ...) summed over the repeat dims): a ReduceSum of that view
      (a dim repeated once keeps one dim) to (1, x0, ...).

    Each is one ``backward_data`` call; SliceBackward has none (it is no layer of a model). An
    identity layer never asks (it is zero-cost). A copy of bool or integer data (``cfg.dtype``, e.g.
    an attention mask's Expand) carries no gradient (autograd differentiates floating-point tensors
    only): ``()``, no call."""
    if cfg.dtype:
        return ()
    x, y = tuple(cfg.inputs[0]), tuple(cfg.y)
    if cfg.op == "Transpose":
        perm = tuple(cfg.attr("perm"))
        inv = tuple(sorted(range(len(perm)), key=lambda i: perm[i]))
        return (("backward_data", CopyConfig(op="Transpose", inputs=(y,), y=x, attrs=(("perm", inv),))),)
    if cfg.op == "Concat":
        axis = cfg.attr("axis")[0]
        sizes = tuple(s[axis] for s in cfg.inputs)
        return (("backward_data", CopyConfig(op="Split", inputs=(y,), y=y,
                                             attrs=(("axis", (axis,)), ("sizes", sizes)))),)
    if cfg.op == "Slice":
        return (("backward_data", CopyConfig(op="SliceBackward", inputs=(y,), y=x,
                                             attrs=(("starts", tuple(cfg.attr("starts"))),
                                                    ("steps", tuple(cfg.attr("steps")))))),)
    if cfg.op == "Pad":
        r = len(x)
        return (("backward_data", CopyConfig(op="Slice", inputs=(y,), y=x,
                                             attrs=(("starts", tuple(cfg.attr("pads")[:r])), ("steps", (1,) * r)))),)
    if cfg.op == "Split":
        axis = cfg.attr("axis")[0]
        parts = tuple(x[:axis] + (size,) + x[axis + 1:] for size in cfg.attr("sizes"))
        return (("backward_data", CopyConfig(op="Concat", inputs=parts, y=x, attrs=(("axis", (axis,)),))),)
    if cfg.op == "Tile":
        xv, yv = [], []
        for r, d in zip(cfg.attr("repeats"), x):
            xv += [r, d] if r > 1 else [d]
            yv += [1, d] if r > 1 else [d]
        if len(xv) > 8:
            raise ValueError(f"Tile gradient of rank {len(xv)} > 8")
        return (("backward_data", ReduceConfig(op="sum", x=tuple(xv), y=tuple(yv))),)
    if cfg.op == "Expand":
        return (("backward_data", ReduceConfig(op="sum", x=y, y=(1,) * (len(y) - len(x)) + x)),)
    return None


def _dtype(node, ctx) -> str:
    """The element type a Copy layer moves: ``""`` for the run's float type, else the stored type's
    name (:data:`benanza.kinds.STORED_TYPES`); Unsupported for other types (strings, complex)."""
    return elem_name(ctx, node.input[0], node.op_type)


def _map_concat(node, ctx, attrs):
    ins = tuple(tuple(need(ctx.shape(i), "input")) for i in node.input if i)
    y = tuple(need(ctx.shape(node.output[0]), "output"))
    axis = int(attrs["axis"])
    axis = axis + len(y) if axis < 0 else axis
    ins = tuple(s for s in ins if s[axis] > 0)
    return CopyConfig(op="Concat", inputs=ins, y=y, attrs=(("axis", (axis,)),), dtype=_dtype(node, ctx))


def _map_transpose(node, ctx, attrs):
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    perm = tuple(int(p) for p in attrs.get("perm", list(reversed(range(len(x))))))
    y = tuple(x[p] for p in perm)
    if len(x) > 8:
        raise Unsupported(f"rank {len(x)} > 8")
    return CopyConfig(op="Transpose", inputs=(x,), y=y, attrs=(("perm", perm),), dtype=_dtype(node, ctx))


def _map_slice(node, ctx, attrs):
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    y = tuple(need(ctx.shape(node.output[0]), "output"))
    r = len(x)
    if ctx.opset >= 10:
        vals = []
        for i in range(1, 5):
            if len(node.input) > i and node.input[i]:
                v = ctx.value(node.input[i])
                if v is None:
                    raise Unsupported(f"Slice input {i} is not a constant")
                vals.append([int(t) for t in np.asarray(v).reshape(-1)])
            else:
                vals.append(None)
        starts, ends, axes, steps = vals
    else:
        starts, ends, axes, steps = attrs["starts"], attrs["ends"], attrs.get("axes"), None
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    full_start, full_step = [0] * r, [1] * r
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = a + r if a < 0 else a
        if st <= 0:
            raise Unsupported("Slice with a non-positive step")
        d = x[a]
        s = s + d if s < 0 else s
        full_start[a] = max(0, min(d, s))
        full_step[a] = st
    if r > 8:
        raise Unsupported(f"rank {r} > 8")
    return CopyConfig(op="Slice", inputs=(x,), y=y,
                      attrs=(("starts", tuple(full_start)), ("steps", tuple(full_step))), dtype=_dtype(node, ctx))


def _map_pad(node, ctx, attrs):
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    y = tuple(need(ctx.shape(node.output[0]), "output"))
    mode = attrs.get("mode", "constant")
    if mode != "constant":
        raise Unsupported(f"Pad mode {mode!r} (only constant)")
    if ctx.opset >= 11:
        v = ctx.value(node.input[1]) if len(node.input) > 1 else None
        if v is None:
            raise Unsupported("pads input is not a constant")
        pads = [int(t) for t in np.asarray(v).reshape(-1)]
        if len(node.input) > 3 and node.input[3]:
            av = ctx.value(node.input[3])
            if av is None:
                raise Unsupported("axes input is not a constant")
            axes = [int(a) + len(x) if int(a) < 0 else int(a) for a in np.asarray(av).reshape(-1)]
            full = [0] * (2 * len(x))
            for j, a in enumerate(axes):
                full[a], full[len(x) + a] = pads[j], pads[len(axes) + j]
            pads = full
    else:
        pads = [int(p) for p in attrs["pads"]]
    if any(p < 0 for p in pads):
        raise Unsupported("negative pads (cropping)")
    if len(x) > 8:
        raise Unsupported(f"rank {len(x)} > 8")
    return CopyConfig(op="Pad", inputs=(x,), y=y, attrs=(("pads", tuple(pads)),), dtype=_dtype(node, ctx))


def _map_expand(node, ctx, attrs):
    """ONNX Expand (opset 8+): x broadcast to the inferred output shape (numpy's rules; the shape
    input need not be a constant once shape inference has the output's)."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    y = tuple(need(ctx.shape(node.output[0]), "output"))
    if broadcast_shapes(x, y)[2] != y:
        raise Unsupported(f"Expand of {list(x)} to {list(y)} is no broadcast of its input")
    if len(y) > 8:
        raise Unsupported(f"rank {len(y)} > 8")
    return CopyConfig(op="Expand", inputs=(x,), y=y, attrs=(), dtype=_dtype(node, ctx))


def _map_split(node, ctx, attrs):
    """ONNX Split, all its outputs: the sizes from the ``split`` input (opset 13+) or attribute
    (opset < 13), else ``num_outputs`` (opset 18: parts of ceil(d / num_outputs), the last one
    smaller), else equal parts; a ``split`` input that is no constant: the inferred output shapes.
    Every output's inferred extent along the axis must agree (Unsupported otherwise)."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    r = len(x)
    axis = int(attrs.get("axis", 0))
    axis = axis + r if axis < 0 else axis
    if not 0 <= axis < r:
        raise Unsupported(f"Split axis {attrs.get('axis', 0)} of a rank-{r} input")
    n, d = len(node.output), x[axis]
    inferred = [need(ctx.shape(o), "output")[axis] for o in node.output]
    sizes = None
    if ctx.opset >= 13 and len(node.input) > 1 and node.input[1]:
        v = ctx.value(node.input[1])
        sizes = [int(t) for t in np.asarray(v).reshape(-1)] if v is not None else inferred
    elif ctx.opset < 13 and "split" in attrs:
        sizes = [int(t) for t in attrs["split"]]
    elif "num_outputs" in attrs:
        chunk = -(-d // int(attrs["num_outputs"]))
        sizes = [min(chunk, max(0, d - i * chunk)) for i in range(n)]
    else:
        sizes = [d // n] * n
    if len(sizes) != n or sum(sizes) != d or any(s < 0 for s in sizes) or sizes != inferred:
        raise Unsupported(f"Split sizes {sizes} of extent {d} into {n} outputs (inferred {inferred})")
    if r > 8:
        raise Unsupported(f"rank {r} > 8")
    return CopyConfig(op="Split", inputs=(x,), y=x,
                      attrs=(("axis", (axis,)), ("sizes", tuple(s for s in sizes if s > 0))), dtype=_dtype(node, ctx))


def _map_tile(node, ctx, attrs):
    """ONNX Tile (opset 6+): the repeats from the inferred output shape (y = x * repeats per dim; the
    repeats input need not be a constant once shape inference has the output's)."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    y = tuple(need(ctx.shape(node.output[0]), "output"))
    if len(x) != len(y) or any(d == 0 or n % d for d, n in zip(x, y)):
        raise Unsupported(f"Tile of {list(x)} to {list(y)} repeats no whole copies")
    cfg = CopyConfig(op="Tile", inputs=(x,), y=y, attrs=(("repeats", tuple(n // d for d, n in zip(x, y))),),
                     dtype=_dtype(node, ctx))
    if len(collapse_transfer(cfg.transfers()[0])[0]) > 8:
        raise Unsupported("Tile over more than 8 dims once merged")
    return cfg


def collapse_transfer(t: Transfer) -> tuple[list[int], list[int], list[int]]:
    """Drop size-1 dims and merge adjacent dims that are contiguous in both source and destination."""
    dims, ss, ds = [], [], []
    for d, s, o in zip(t.dims, t.src_strides, t.dst_strides):
        if d == 1:
            continue
        if dims and ss[-1] == s * d and ds[-1] == o * d:
            dims[-1] *= d
            ss[-1], ds[-1] = s, o
        else:
            dims.append(d)
            ss.append(s)
            ds.append(o)
    return dims or [1], ss or [1], ds or [1]


def memcpy2d_shape(dims: list[int], ss: list[int], ds: list[int]) -> tuple[int, int, int, int] | None:
    """(rows, cols, src pitch, dst pitch) in elements when a collapsed transfer is a 2-D copy with
    contiguous rows (what cudaMemcpy2DAsync does), else None."""
    if len(dims) == 1 and ss[0] == 1 and ds[0] == 1:
        return 1, dims[0], dims[0], dims[0]
    if len(dims) == 2 and ss[1] == 1 and ds[1] == 1:
        return dims[0], dims[1], ss[0], ds[0]
    return None


@dataclass(frozen=True)
class TransferRow:
    """One ``Transfer`` of ``templates/copy.cpp.j2`` (its C++ struct's fields in order, C++ literals)."""

    nd: int
    dims: str
    src_strides: str
    dst_strides: str
    src_offset: int
    dst_offset: int
    src_index: int
    rows: int
    cols: int
    src_pitch: int
    dst_pitch: int


@dataclass(frozen=True)
class CopyCase(Case):
    """One row of ``templates/copy.cpp.j2``'s case table: the fields of its C++ ``CopyCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    inputs: list[int]
    out: CppValue
    fill: CppValue
    transfers: tuple[TransferRow, ...]
    memcpy: CppValue
    stored: CppValue
    et: CppValue
    label: CppValue


def _copy_case(cfg: CopyConfig, job: Job) -> CopyCase:
    transfers = []
    memcpy_ok = True
    for t in cfg.transfers():
        dims, ss, ds = collapse_transfer(t)
        if len(dims) > 8:
            raise ValueError(f"copy of rank {len(dims)}")
        m2 = memcpy2d_shape(dims, ss, ds)
        memcpy_ok = memcpy_ok and m2 is not None
        rows, cols, sp, dp = m2 or (0, 0, 0, 0)
        transfers.append(TransferRow(nd=max(4, len(dims)), dims=c_array(dims, 8, 1), src_strides=c_array(ss, 8, 1),
                                     dst_strides=c_array(ds, 8, 1), src_offset=t.src_offset,
                                     dst_offset=t.dst_offset, src_index=t.src_index, rows=rows, cols=cols,
                                     src_pitch=sp, dst_pitch=dp))
    return CopyCase(job=job_init(job), inputs=[numel(s) for s in cfg.inputs], out=numel(cfg.y),
                    fill=cpp_num(cfg.fills_output()), transfers=tuple(transfers), memcpy=cpp_num(memcpy_ok),
                    stored=cpp_num(bool(cfg.dtype)), et=ELEM_ENUM[cfg.dtype] if cfg.dtype else "ElemType::F32",
                    label=cpp_string(cfg.op + (f" {cfg.dtype}" if cfg.dtype else "")))


def _copy(c: Ctx) -> Candidate:
    cfg, F, torch = c.cfg, functional(c), c.torch
    ins = [c.typed(s, cfg.dtype) for s in cfg.inputs]  # the precision's float type, or the stored type
    y = numel(cfg.y)
    if cfg.op == "Concat":
        axis = cfg.attr("axis")[0]
        return Candidate("torch:aten::cat", algo_label(c), lambda: torch.cat(ins, axis), y)
    x = ins[0]
    if cfg.op == "Split":  # split's views (cat's backward: narrow views of dy), each made contiguous where read
        axis, sizes = cfg.attr("axis")[0], list(cfg.attr("sizes"))
        packed = torch.empty(y, dtype=x.dtype, device=x.device)

        def split_copies():  # one copy_ kernel per view, into one packed buffer (the harness's output)
            off = 0
            for t in torch.split(x, sizes, axis):
                packed[off:off + t.numel()].view(t.shape).copy_(t)
                off += t.numel()
            return packed
        return Candidate("torch:aten::split_with_sizes+copy_", algo_label(c), split_copies, y,
                         "torch.split's views (cat_tensors_backward's narrow views), each copied to a packed tensor")
    if cfg.op == "SliceBackward":
        starts, steps = cfg.attr("starts"), cfg.attr("steps")
        sliced = [d for d, (st, sp, n, m) in enumerate(zip(starts, steps, cfg.inputs[0], cfg.y)) if (st, sp, n) != (0, 1, m)]
        if len(sliced) <= 1:
            d = sliced[0] if sliced else 0
            st, sp = starts[d], steps[d]
            end = st + sp * (cfg.inputs[0][d] - 1) + 1
            return Candidate("torch:aten::slice_backward", algo_label(c),
                             lambda: torch.ops.aten.slice_backward(x, list(cfg.y), d, st, end, sp), y)
        idx = tuple(slice(st, st + sp * (n - 1) + 1, sp) for st, sp, n in zip(starts, steps, cfg.inputs[0]))

        def zero_and_copy():
            g = x.new_zeros(cfg.y)
            g[idx] = x
            return g
        return Candidate("torch:aten::zeros+copy_", algo_label(c), zero_and_copy, y,
                         "a slice over several dims: autograd's chain of slice_backward calls, written as one")
    if cfg.op == "Transpose":
        perm = tuple(cfg.attr("perm"))
        return Candidate("torch:aten::permute+clone", algo_label(c), lambda: x.permute(perm).contiguous(), y)
    if cfg.op == "Slice":
        idx = tuple(slice(st, st + sp * (n - 1) + 1, sp) for st, sp, n in zip(cfg.attr("starts"), cfg.attr("steps"),
                                                                                cfg.y))
        return Candidate("torch:aten::slice+clone", algo_label(c), lambda: x[idx].clone(), y)
    if cfg.op == "Pad":
        pads, r = cfg.attr("pads"), len(cfg.inputs[0])
        tp = []
        for i in reversed(range(r)):
            tp += [pads[i], pads[r + i]]
        return Candidate("torch:aten::constant_pad_nd", algo_label(c), lambda: F.pad(x, tp), y)
    if cfg.op == "Expand":  # a view made contiguous: one copy kernel reading x once per output element
        return Candidate("torch:aten::expand+clone", algo_label(c), lambda: x.expand(cfg.y).contiguous(), y)
    if cfg.op == "Tile":
        reps = list(cfg.attr("repeats"))
        return Candidate("torch:aten::repeat", algo_label(c), lambda: x.repeat(reps), y)
    raise NotSupported(f"copy op {cfg.op}")


def _min_bytes(cfg: CopyConfig, ib: int, ob: int) -> int:
    """A Slice reads only what it keeps; the other copies (an Expand too: each element of x is read
    from memory once, its copies come from cache) read their inputs once; y written once (bytes;
    ``STORED_TYPES[cfg.dtype]`` bytes per element in and out for bool or integer data)."""
    if cfg.dtype:
        ib = ob = STORED_TYPES[cfg.dtype]
    y = numel(cfg.output_shape())
    if cfg.op == "Slice":
        return ib * y + ob * y
    return ib * sum(numel(s) for s in cfg.inputs) + ob * y


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=CopyConfig(op='Transpose', inputs=((1, 768, 196),), y=(1, 196, 768), attrs=(('perm', (0, 2, 1)),)),
    name="Copy", config=CopyConfig, template="copy.cpp.j2", case=_copy_case, min_bytes=_min_bytes,
    torch=_copy, backward=copy_backward, onnx={"Concat": _map_concat, "Expand": _map_expand, "Pad": _map_pad, "Slice": _map_slice, "Split": _map_split, "Tile": _map_tile, "Transpose": _map_transpose},
    typed_ops=('Concat', 'Expand', 'Pad', 'Slice', 'Split', 'Tile', 'Transpose'), fused_from=(),
    aten={"Concat": ('aten::_cat', 'aten::cat', 'aten::concat'), "Expand": ('aten::expand', 'aten::expand_as'), "Pad": ('aten::constant_pad_nd', 'aten::pad'), "Slice": ('aten::narrow', 'aten::slice'), "Tile": ('aten::repeat', 'aten::tile'), "Split": ('aten::chunk', 'aten::split', 'aten::split_with_sizes', 'aten::tensor_split', 'aten::unsafe_split'), "Transpose": ('aten::permute', 'aten::t', 'aten::transpose')},
    nhwc=False, image=True)
