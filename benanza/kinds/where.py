"""Where layers. ONNX Where (ONNX operator spec): ``y = cond ? a : b`` with numpy broadcasting; cond is bool

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, c_array, job_init
from benanza.kinds.framework import Candidate, Ctx
from benanza.kinds.onnx_map import FLOAT_TYPES, Unsupported, need


@dataclass(frozen=True)
class WhereConfig(LayerConfig):
    """ONNX Where (ONNX operator spec): ``y = cond ? a : b`` with numpy broadcasting; cond is bool
    (1 byte per element). cond, a, b: shapes padded to the output rank (at most 8).
    Timed: a benanza CUDA kernel (one thread per output element, broadcast by zero strides).
    FLOPs: 0 (a select moves data; no arithmetic).
    """

    kind: ClassVar[str] = "Where"
    cond: Shape
    a: Shape
    b: Shape

    def input_shapes(self):
        return [self.cond, self.a, self.b]

    def output_shape(self):
        return tuple(max(x, y, z) for x, y, z in zip(self.cond, self.a, self.b))

    def flops(self):
        return 0

    def describe(self):
        return "Where(" + ",".join("x".join(map(str, s)) for s in (self.cond, self.a, self.b)) + ")"


def _map_where(node, ctx, attrs):
    shapes = [tuple(need(ctx.shape(node.input[i]), name)) for i, name in enumerate(("condition", "X", "Y"))]
    if ctx.types.get(node.input[1]) not in FLOAT_TYPES:
        raise Unsupported("Where of a non-float tensor")
    r = max(len(s) for s in shapes)
    if r > 8:
        raise Unsupported(f"rank {r} > 8")
    padded = [(1,) * (r - len(s)) + s for s in shapes]
    y = tuple(max(d) for d in zip(*padded))
    for s in padded:
        if any(d not in (1, dy) for d, dy in zip(s, y)):
            raise Unsupported(f"shapes {shapes} do not broadcast")
    c, a, b = padded
    return WhereConfig(cond=c, a=a, b=b)


def collapse_where(c: list[int], a: list[int], b: list[int]) -> tuple[list[int], list[int], list[int]]:
    """Merge adjacent dims where each of the three operands keeps its broadcast pattern; drop dims
    of size 1 in the output (the three-operand form of :func:`collapse_broadcast`)."""
    y = [max(t) for t in zip(c, a, b)]
    rc, ra, rb, prev = [], [], [], None
    for dc, da, db, dy in zip(c, a, b, y):
        if dy == 1:
            continue
        pat = (dc == dy, da == dy, db == dy)
        if rc and pat == prev:
            rc[-1] *= dc
            ra[-1] *= da
            rb[-1] *= db
        else:
            rc.append(dc)
            ra.append(da)
            rb.append(db)
        prev = pat
    return rc or [1], ra or [1], rb or [1]


def _broadcast_strides(shape: list[int], y: list[int]) -> list[int]:
    strides, acc = [], 1
    for d, dy in zip(reversed(shape), reversed(y)):
        strides.append(0 if d == 1 and dy != 1 else acc)
        acc *= d
    return list(reversed(strides))


@dataclass(frozen=True)
class WhereCase(Case):
    """One row of ``templates/where.cpp.j2``'s case table: the fields of its C++ ``WhereCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    nd: CppValue
    dims: CppValue
    cond: CppValue
    a: CppValue
    b: CppValue
    nc: CppValue
    na: CppValue
    nb: CppValue


def _where_case(cfg: WhereConfig, job: Job) -> WhereCase:
    c, a, b = collapse_where(list(cfg.cond), list(cfg.a), list(cfg.b))
    y = [max(t) for t in zip(c, a, b)]
    return WhereCase(job=job_init(job), nd=len(y), dims=c_array(y, 8, 1), cond=c_array(_broadcast_strides(c, y), 8), a=c_array(_broadcast_strides(a, y), 8), b=c_array(_broadcast_strides(b, y), 8), nc=numel(c), na=numel(a), nb=numel(b))


def _where(c: Ctx) -> Candidate:
    cfg, torch = c.cfg, c.torch
    cond = torch.randint(0, 2, cfg.cond, device=c.device).bool()
    a, b = c.randn(cfg.a), c.randn(cfg.b)
    return Candidate("torch:aten::where", "default", lambda: torch.where(cond, a, b), numel(cfg.output_shape()))


def _min_bytes(cfg: WhereConfig, ib: int, ob: int) -> int:
    """The bool condition (1 byte an element), a and b read once, y written once (bytes)."""
    return numel(cfg.cond) + ib * (numel(cfg.a) + numel(cfg.b)) + ob * numel(cfg.output_shape())


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=WhereConfig(cond=(1, 1, 128, 128), a=(1, 1, 1, 1), b=(1, 1, 1, 1)),
    name="Where", config=WhereConfig, template="where.cpp.j2", case=_where_case, min_bytes=_min_bytes,
    torch=_where, onnx={"Where": _map_where},
    typed_ops=('Where',), fused_from=(),
    aten={"Where": ('aten::where',)},
    nhwc=False, image=False)
