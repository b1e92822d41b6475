"""Scatter layers: ONNX ScatterND and ScatterElements (ONNX operator spec, opset 11-18; ``reduction``
none, add, mul (opset 16), max, min (opset 18)). Both copy ``data`` to the output and write each
element of ``updates`` at a place that ``indices`` names: ScatterND index tuples address whole slices
(``output[indices[j]] = updates[j]``), ScatterElements indices replace one coordinate
(``output[..., indices[p], ...] = updates[p]`` along ``axis``). Mixture-of-experts and MLA decoder
exports (transformers 5, torch.onnx dynamo) write a KV-cache window with ScatterND, build an inverse
permutation (``inv_perm[perm] = arange``) with it, and count tokens per expert with a ScatterElements
add (torch's ``histc``).

One kind for both ops: the work is the same (a copy of data, then one thread per update element
writing, or combining by an atomic, at an offset computed from the indices), timed by the same
kernel (``benanza::scatter_kernel``, ``cpp/src/scatter_kernels.cu``) with the same two measurements
and the same minimum bytes; only the index map differs, and that is one branch of
``scatter_offset`` (``cpp/include/benanza/scatter.hpp``). GatherElements, the elements form's read
(no copy, no reduction, the output shaped like the indices), is its own kind
(:mod:`benanza.kinds.gather_elements`), sharing the index map.

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidates and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar


from benanza.kinds.base import OPTIONAL, STORED_TYPES, Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import ELEM_ENUM, Case, CppValue, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.elementwise import elem_name
from benanza.kinds.framework import Candidate, Ctx
from benanza.kinds.onnx_map import TP, Unsupported, need, type_name

#: ONNX's ``reduction`` values (ScatterND / ScatterElements opset 16: none, add, mul; 18: max, min)
SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")
#: the integer data types these kinds time (the float types run as the precision's float type)
SCATTER_INTS = ("int32", "int64")
#: the largest data rank the kernels' index map holds (``kScatterMaxRank`` of scatter.hpp)
SCATTER_MAX_RANK = 8
_OPS = ("ScatterND", "ScatterElements")


def check_elements_form(what: str, data: Shape, indices: Shape, axis: int) -> None:
    """The elements form's shape rules (ScatterElements, GatherElements): indices of the data's rank
    (at most :data:`SCATTER_MAX_RANK`), axis in [0, rank). ValueError naming the rule otherwise."""
    if not data or len(data) > SCATTER_MAX_RANK:
        raise ValueError(f"{what}: data of rank {len(data)} (1 to {SCATTER_MAX_RANK})")
    if len(indices) != len(data):
        raise ValueError(f"{what}: indices of rank {len(indices)} for data of rank {len(data)} (the same rank)")
    if not 0 <= axis < len(data):
        raise ValueError(f"{what}: axis {axis} of a rank-{len(data)} input")


@dataclass(frozen=True)
class ScatterConfig(LayerConfig):
    """ONNX ScatterND / ScatterElements (``op``): ``output = copy(data)``, then each update element
    stored at (reduction ``none``) or combined into (``add``, ``mul``, ``max``, ``min``) its place.

    data: the data shape (rank 1 to 8; the output has it); indices: the index tensor's shape
    (ScatterND: ``[*lead, k]`` with 1 <= k <= rank, int64 tuples; ScatterElements: the data's rank);
    updates: ScatterND ``[*lead, *data[k:]]``, ScatterElements equal to indices (ONNX spec); axis:
    ScatterElements' (non-negative; 0 for ScatterND); reduction: one of :data:`SCATTER_REDUCTIONS`; dtype:
    ``""`` for float data (the precision's float type), else one of :data:`SCATTER_INTS`.
    FLOPs: one per update element for a reduction (the add / multiply / compare), 0 for ``none``.
    ValueError when the shapes break the spec's rules.
    """

    kind: ClassVar[str] = "Scatter"
    op: str
    data: Shape
    indices: Shape
    updates: Shape
    axis: int = 0
    reduction: str = "none"
    dtype: str = dataclasses.field(default="", metadata=OPTIONAL)

    def __post_init__(self):
        if self.op not in _OPS:
            raise ValueError(f"ScatterConfig: op {self.op!r} is not one of {', '.join(_OPS)}")
        if self.reduction not in SCATTER_REDUCTIONS:
            raise ValueError(f"ScatterConfig: reduction {self.reduction!r} is not one of {', '.join(SCATTER_REDUCTIONS)}")
        if self.dtype and self.dtype not in SCATTER_INTS:
            raise ValueError(f"ScatterConfig: element type {self.dtype!r} is not one of {', '.join(SCATTER_INTS)}")
        if self.op == "ScatterElements":
            check_elements_form("ScatterConfig", self.data, self.indices, self.axis)
            if self.updates != self.indices:
                raise ValueError(f"ScatterConfig: updates {list(self.updates)} differ from indices {list(self.indices)}")
            return
        if not self.data or len(self.data) > SCATTER_MAX_RANK:
            raise ValueError(f"ScatterConfig: data of rank {len(self.data)} (1 to {SCATTER_MAX_RANK})")
        if not self.indices or not 1 <= self.indices[-1] <= len(self.data):
            raise ValueError(f"ScatterConfig: index tuples of length {self.indices[-1:] or 'none'} "
                             f"for data of rank {len(self.data)}")
        want = self.indices[:-1] + self.data[self.indices[-1]:]
        if self.updates != want or self.axis != 0:
            raise ValueError(f"ScatterConfig: updates {list(self.updates)} are not indices[:-1] + data[k:] = {list(want)}")

    def input_shapes(self):
        return [self.data, self.indices, self.updates]

    def output_shape(self):
        return self.data

    @property
    def k(self) -> int:
        """ScatterND: the components of one index tuple; ScatterElements: 1 (one index per element)."""
        return self.indices[-1] if self.op == "ScatterND" else 1

    @property
    def slice(self) -> int:
        """Elements one index addresses: ScatterND ``prod(data[k:])``, ScatterElements 1."""
        return numel(self.data[self.k:]) if self.op == "ScatterND" else 1

    @property
    def touched(self) -> int:
        """Data elements the updates can reach at most: min(updates, data) elements."""
        return min(numel(self.updates), numel(self.data))

    def flops(self):
        return 0 if self.reduction == "none" else numel(self.updates)

    def describe(self):
        ax = f" axis={self.axis}" if self.op == "ScatterElements" else ""
        red = f" {self.reduction}" if self.reduction != "none" else ""
        t = f" {self.dtype}" if self.dtype else ""
        sh = " ".join("x".join(map(str, s)) for s in (self.data, self.indices, self.updates))
        return f"{self.op}({sh}{ax}{red}{t})"


def _reduction(node, attrs) -> str:
    red = attrs.get("reduction", "none")
    red = red.decode() if isinstance(red, bytes) else str(red)
    if red not in SCATTER_REDUCTIONS:
        raise Unsupported(f"{node.op_type} reduction {red!r} (ONNX defines {', '.join(SCATTER_REDUCTIONS)})")
    return red


def data_dtype(ctx, node) -> str:
    """The data's element type as a config's ``dtype`` ("" for float); Unsupported for the others."""
    dtype = elem_name(ctx, node.input[0], node.op_type)
    if dtype and dtype not in SCATTER_INTS:
        raise Unsupported(f"{node.op_type} of {dtype} data (benanza times float, int32 and int64 data)")
    return dtype


def int64_indices(ctx, node) -> None:
    """Unsupported unless the indices are int64 (the kernels read int64; ONNX allows int32 for the
    elements form, which exports do not emit)."""
    t = ctx.types.get(node.input[1])
    if t is not None and t != TP.INT64:
        name = type_name(t)
        raise Unsupported(f"{node.op_type} with {name} indices (benanza times int64 indices)")


def _nd_indices(ctx, node, data: Shape, updates) -> Shape:
    """ScatterND's indices shape: inferred, else ``[*updates[:q-1], k]`` (ONNX spec: updates =
    indices[:-1] + data[k:]) with the rank q and tuple length k from the partial dims (an export's
    ``INT64[?, 1]``)."""
    known = ctx.shape(node.input[1])
    if known is not None:
        return tuple(known)
    dims = ctx.dims(node.input[1])
    if not dims or dims[-1] is None:
        raise Unsupported("ScatterND indices' rank or tuple length unknown after shape inference")
    if updates is None:
        raise Unsupported("ScatterND indices and updates shapes unknown after shape inference")
    q, k = len(dims), dims[-1]
    lead = tuple(updates[:q - 1])
    if len(lead) != q - 1 or any(d is not None and d != w for d, w in zip(dims[:-1], lead)):
        raise Unsupported(f"ScatterND updates {list(updates)} do not fit indices of dims {list(dims)}")
    return lead + (k,)


def _map_scatter_nd(node, ctx, attrs):
    """ONNX ScatterND: data, int64 indices, updates; ``reduction`` (default none). A '?' dim of the
    indices is taken from the updates' shape (the spec's rule); Unsupported when neither tells it."""
    data = tuple(need(ctx.shape(node.input[0]), "data"))
    updates = ctx.shape(node.input[2])
    indices = _nd_indices(ctx, node, data, updates)
    k = indices[-1] if indices else 0
    if not 1 <= k <= len(data):
        raise Unsupported(f"ScatterND index tuples of length {k} for data of rank {len(data)}")
    want = indices[:-1] + data[k:]
    if updates is not None and tuple(updates) != want:
        raise Unsupported(f"ScatterND updates {list(updates)} are not indices[:-1] + data[k:] = {list(want)}")
    if len(data) > SCATTER_MAX_RANK:
        raise Unsupported(f"ScatterND of rank-{len(data)} data (at most {SCATTER_MAX_RANK})")
    int64_indices(ctx, node)
    return ScatterConfig(op="ScatterND", data=data, indices=indices, updates=want, reduction=_reduction(node, attrs),
                         dtype=data_dtype(ctx, node))


def elements_shape(ctx, names, what: str) -> Shape:
    """The one shape the ``names`` tensors share (the spec makes ScatterElements' indices and
    updates, GatherElements' indices and output, equal): the first inferred, else their partial
    dims merged dim by dim; Unsupported naming ``what`` when a dim stays unknown."""
    for n in names:
        s = ctx.shape(n)
        if s is not None:
            return tuple(s)
    parts = [d for d in (ctx.dims(n) for n in names) if d is not None]
    if not parts or len({len(d) for d in parts}) != 1:
        raise Unsupported(f"{what} shape unknown after shape inference")
    merged = tuple(next((d[i] for d in parts if d[i] is not None), None) for i in range(len(parts[0])))
    if None in merged:
        raise Unsupported(f"{what} shape unknown after shape inference")
    return merged


def elements_axis(node, attrs, rank: int) -> int:
    axis = int(attrs.get("axis", 0))
    if not -rank <= axis < rank:
        raise Unsupported(f"{node.op_type} axis {axis} of rank-{rank} data")
    return axis % rank


def _map_scatter_elements(node, ctx, attrs):
    """ONNX ScatterElements (and opset 9-10's Scatter): data, int64 indices, updates of the indices'
    shape (either's unknown dims taken from the other), ``axis`` (default 0), ``reduction``."""
    data = tuple(need(ctx.shape(node.input[0]), "data"))
    idx = elements_shape(ctx, (node.input[1], node.input[2]), f"{node.op_type} indices and updates")
    if len(idx) != len(data) or len(data) > SCATTER_MAX_RANK:
        raise Unsupported(f"{node.op_type} indices of rank {len(idx)} for data of rank {len(data)} "
                          f"(the same rank, at most {SCATTER_MAX_RANK})")
    axis = elements_axis(node, attrs, len(data))
    int64_indices(ctx, node)
    return ScatterConfig(op="ScatterElements", data=data, indices=idx, updates=idx, axis=axis,
                         reduction=_reduction(node, attrs), dtype=data_dtype(ctx, node))


def _map_one_hot(node, ctx, attrs):
    """ONNX OneHot (opset 9/11: indices, a constant depth, values ``[off, on]``; ``axis``, default -1) as
    the calls PyTorch's ``one_hot`` makes (``aten/src/ATen/native/Onehot.cpp``: ``zeros(...).scatter_(-1,
    self.unsqueeze(-1), 1)``): a ScatterElements of the on value into data of the output's shape along
    ``axis``, one index per input element (``indices`` with a dim of 1 inserted at ``axis``). The data's
    element type is the values' (float, int32 or int64)."""
    idx = tuple(need(ctx.shape(node.input[0]), "indices"))
    out = tuple(need(ctx.shape(node.output[0]), "output"))
    if len(out) != len(idx) + 1 or len(out) > SCATTER_MAX_RANK:
        raise Unsupported(f"OneHot of indices {list(idx)} to {list(out)} (one more dim, rank at most {SCATTER_MAX_RANK})")
    axis = int(attrs.get("axis", -1))
    if not -len(out) <= axis < len(out):
        raise Unsupported(f"OneHot axis {axis} of a rank-{len(out)} output")
    axis %= len(out)
    if out[:axis] + out[axis + 1:] != idx:
        raise Unsupported(f"OneHot output {list(out)} does not hold indices {list(idx)} at axis {axis}")
    dtype = elem_name(ctx, node.input[2], "OneHot") if len(node.input) > 2 else ""
    if dtype and dtype not in SCATTER_INTS:
        raise Unsupported(f"OneHot of {dtype} values (benanza times float, int32 and int64 data)")
    one = idx[:axis] + (1,) + idx[axis:]
    return ScatterConfig(op="ScatterElements", data=out, indices=one, updates=one, axis=axis, dtype=dtype)


#: ScatterReduction of scatter.hpp per reduction
REDUCTION_ENUM = {r: f"ScatterReduction::{r.capitalize()}" for r in SCATTER_REDUCTIONS}


@dataclass(frozen=True)
class ScatterCase(Case):
    """One row of ``templates/scatter.cpp.j2``'s case table: the fields of its C++ ``ScatterCase`` in
    order, as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    nd: CppValue
    rank: int
    axis: int
    k: int
    slice: int
    data: CppValue
    upd: CppValue
    n_data: int
    n_idx: int
    n_upd: int
    reduction: CppValue
    distinct: CppValue
    stored: CppValue
    et: CppValue
    label: CppValue


def _scatter_case(cfg: ScatterConfig, job: Job) -> ScatterCase:
    nd = cfg.op == "ScatterND"
    red = f" {cfg.reduction}" if cfg.reduction != "none" else ""
    return ScatterCase(job=job_init(job), nd=cpp_num(nd), rank=len(cfg.data), axis=cfg.axis, k=cfg.k, slice=cfg.slice,
                       data=c_array(cfg.data, SCATTER_MAX_RANK), upd=c_array(cfg.updates, SCATTER_MAX_RANK),
                       n_data=numel(cfg.data), n_idx=numel(cfg.indices), n_upd=numel(cfg.updates),
                       reduction=REDUCTION_ENUM[cfg.reduction], distinct=cpp_num(cfg.reduction == "none"),
                       stored=cpp_num(bool(cfg.dtype)), et=ELEM_ENUM[cfg.dtype] if cfg.dtype else "ElemType::F32",
                       label=cpp_string(cfg.op + red + (f" {cfg.dtype}" if cfg.dtype else "")))


def torch_indices(c: Ctx, cfg: ScatterConfig):
    """Valid int64 indices of ``cfg.indices`` on the device: for reduction none distinct places
    where they fit (a random permutation: ScatterND's tuples, ScatterElements' indices along the axis
    of each line), else uniform random (duplicates, a histogram's collisions)."""
    torch, dev = c.torch, c.device
    if cfg.op == "ScatterND":
        total, n = numel(cfg.data[:cfg.k]), numel(cfg.indices[:-1])
        flat = (torch.randperm(total, device=dev)[:n] if cfg.reduction == "none" and n <= total
                else torch.randint(0, total, (n,), device=dev))
        coords = torch.stack(torch.unravel_index(flat, cfg.data[:cfg.k]), dim=-1)
        return coords.reshape(cfg.indices).to(torch.int64)
    dim, along = cfg.data[cfg.axis], cfg.indices[cfg.axis]
    if cfg.reduction == "none" and along <= dim:
        view = [1] * len(cfg.indices)
        view[cfg.axis] = along
        return torch.randperm(dim, device=dev)[:along].reshape(view).expand(cfg.indices).contiguous()
    return torch.randint(0, dim, cfg.indices, device=dev, dtype=torch.int64)


_TORCH_REDUCE = {"mul": "prod", "max": "amax", "min": "amin"}


def _scatter_ops(cfg: ScatterConfig, data, idx, upd):
    """(ATen op, in-place scatter of ``upd`` into a tensor at ``idx``): what PyTorch programs write.
    ScatterND none/add: ``index_put_`` (accumulate for add) with one index tensor per tuple component;
    ScatterND mul/max/min: ``scatter_reduce_`` of data viewed as (tuples, slice); ScatterElements:
    ``scatter_`` (none), ``scatter_add_`` (add), ``scatter_reduce_`` (include_self, the ONNX result)."""
    if cfg.op == "ScatterND":
        if cfg.reduction in ("none", "add"):
            comps = tuple(idx.reshape(-1, cfg.k).unbind(-1))
            vals = upd.reshape((-1,) + cfg.data[cfg.k:])
            return "aten::index_put_", lambda t: t.index_put_(comps, vals, accumulate=cfg.reduction == "add")
        total = numel(cfg.data[:cfg.k])
        strides = [numel(cfg.data[d + 1:cfg.k]) for d in range(cfg.k)]
        flat = sum(idx.reshape(-1, cfg.k)[:, d] * s for d, s in enumerate(strides))
        index = flat[:, None].expand(-1, cfg.slice)
        vals = upd.reshape(-1, cfg.slice)
        return "aten::scatter_reduce_", lambda t: t.view(total, cfg.slice).scatter_reduce_(
            0, index, vals, _TORCH_REDUCE[cfg.reduction], include_self=True)
    if cfg.reduction == "none":
        return "aten::scatter_", lambda t: t.scatter_(cfg.axis, idx, upd)
    if cfg.reduction == "add":
        return "aten::scatter_add_", lambda t: t.scatter_add_(cfg.axis, idx, upd)
    return "aten::scatter_reduce_", lambda t: t.scatter_reduce_(cfg.axis, idx, upd, _TORCH_REDUCE[cfg.reduction],
                                                                 include_self=True)


def _scatter(c: Ctx) -> Candidate:
    """``data.clone()`` then the in-place scatter (ONNX's output is a new tensor), and as a variant
    the in-place scatter into data itself ("in place: data reused"), as :func:`_scatter_ops` picks."""
    cfg = c.cfg
    data, upd, idx = c.typed(cfg.data, cfg.dtype), c.typed(cfg.updates, cfg.dtype), torch_indices(c, cfg)
    op, into = _scatter_ops(cfg, data, idx, upd)
    n = numel(cfg.data)

    def in_place():
        into(data)
        return data

    alone = Candidate("torch:" + op, "in place", in_place, n, "in place: data reused")
    return Candidate(f"torch:aten::clone+{op}", "contiguous", lambda: _cloned(into, data),
                     n, variants=[alone])


def _cloned(into, data):
    out = data.clone()
    into(out)
    return out


def _min_bytes(cfg: ScatterConfig, ib: int, ob: int) -> int:
    """The in-place minimum (bytes): the int64 indices and the updates read once, the touched data
    elements (at most min(updates, data)) written once, and for a reduction also read once: the
    compulsory traffic of the roofline model (Williams, Waterman and Patterson, "Roofline", CACM
    2009). The ONNX output's copy of the untouched data is not compulsory (an in-place scatter, as
    torch's ``index_put_`` runs, skips it). Integer data: ``STORED_TYPES[dtype]`` bytes per element."""
    if cfg.dtype:
        ib = ob = STORED_TYPES[cfg.dtype]
    reads = 8 * numel(cfg.indices) + ib * numel(cfg.updates) + (ib * cfg.touched if cfg.reduction != "none" else 0)
    return reads + ob * cfg.touched


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=ScatterConfig(op="ScatterND", data=(24, 4, 33, 1), indices=(16, 1), updates=(16, 4, 33, 1)),
    name="Scatter", config=ScatterConfig, template="scatter.cpp.j2", case=_scatter_case, min_bytes=_min_bytes,
    torch=_scatter, onnx={"ScatterND": _map_scatter_nd, "ScatterElements": _map_scatter_elements,
                          "Scatter": _map_scatter_elements, "OneHot": _map_one_hot},
    typed_ops=("ScatterND", "ScatterElements", "Scatter", "OneHot"), fused_from=(),
    aten={"ScatterND": ("aten::index_put_", "aten::index_put", "aten::_index_put_impl_", "aten::index_copy_",
                        "aten::index_copy", "aten::scatter_reduce_", "aten::scatter_reduce"),
          "ScatterElements": ("aten::scatter", "aten::scatter_", "aten::scatter_add", "aten::scatter_add_",
                              "aten::scatter_reduce", "aten::scatter_reduce_"),
          "Scatter": ("aten::scatter", "aten::scatter_"),
          "OneHot": ("aten::one_hot", "aten::zeros", "aten::scatter_")},
    nhwc=False, image=False)
