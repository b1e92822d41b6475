"""Rotary position embedding (RoPE; Su et al., "RoFormer: Enhanced Transformer with Rotary Position
Embedding", 2021). ONNX RotaryEmbedding (opset 23; ONNX operator spec and its reference implementation
``onnx/reference/ops/op_rotary_embedding.py``), and the decomposed Mul/Slice/Neg/Concat/Mul/Add chain
torch.export and TorchScript write for transformers' ``apply_rotary_pos_emb`` (a fusion candidate,
:func:`find_rotary`).

The whole slice of the kind: its config, the ONNX op it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from benanza.kinds.base import Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx, algo_label
from benanza.kinds.copy import CopyConfig
from benanza.kinds.onnx_map import MS_DOMAIN, ContribOp, Unsupported, contrib_doc, need
from benanza.kinds.patterns import Graph, Node, Pattern
from benanza.kinds.unary import UnaryConfig

#: the layouts of x: (batch, heads, seq, head_dim), or (batch, seq, heads, head_dim) (a 3-D
#: (batch, seq, heads * head_dim) input is this layout too)
ROTARY_LAYOUTS = ("bhsd", "bshd")


@dataclass(frozen=True)
class RotaryConfig(LayerConfig):
    """Rotary embedding of x over the first ``rotary_dim`` elements of each head (ONNX RotaryEmbedding):
    with x1, x2 the pair of an element (the two halves of the rotary part, transformers' ``rotate_half``,
    or even and odd elements when ``interleaved``) and c, s the cos and sin of its position,
    ``y1 = x1 * c - x2 * s``, ``y2 = x2 * c + x1 * s``; the head's other ``head_dim - rotary_dim`` elements
    pass through.

    x: the input shape, (b, h, s, d) for ``layout`` "bhsd", (b, s, h, d) or (b, s, h * d) for "bshd";
    num_heads: h (the number of heads of a 3-D x). cos/sin: (rotary_dim / 2) values per position in x's
    type, ``cache_batch`` (1 or b) rows of ``seq`` positions when ``positions`` is 0, else a cache of
    ``positions`` rows gathered by int64 position ids of shape (b, s).
    Timed: a benanza CUDA kernel (one thread per pair, float32 math), so the layer always has a valid
    measurement; and the cuDNN graph API's rope (cudnn-frontend ``Graph::rope``, cuDNN 9.24+), which
    takes angles [S, 1, 1, D] float32 shared by the batch, rotates the halves and the last ``rope_dim``
    elements: timed where that is this layer (not interleaved, full rotation, positions shared by the
    batch), recorded as skipped with the reason otherwise.
    FLOPs: 6 per pair (4 multiplies, 1 subtract, 1 add; ONNX's formula), 3 per rotated element.
    Raises ValueError for a config that is no rotary embedding (odd rotary dim, heads not dividing x).
    """

    kind: ClassVar[str] = "RotaryEmbedding"
    x: Shape
    num_heads: int
    rotary_dim: int
    interleaved: bool = False
    layout: str = "bhsd"
    cache_batch: int = 1
    positions: int = 0

    def __post_init__(self):
        if self.layout not in ROTARY_LAYOUTS or len(self.x) not in (3, 4) or (len(self.x) == 3 and self.layout != "bshd"):
            raise ValueError(f"RotaryEmbedding of x {list(self.x)} in layout {self.layout!r}")
        h = self.heads_dim()
        if h is None:
            raise ValueError(f"RotaryEmbedding: {self.num_heads} heads do not divide x {list(self.x)}")
        d = h[1]
        if self.rotary_dim <= 0 or self.rotary_dim % 2 or self.rotary_dim > d:
            raise ValueError(f"RotaryEmbedding rotary_dim {self.rotary_dim} is not even in (0, {d}]")
        if self.cache_batch not in (1, self.x[0]) or self.positions < 0:
            raise ValueError(f"RotaryEmbedding cache of {self.cache_batch} rows for batch {self.x[0]}")

    def heads_dim(self) -> tuple[int, int] | None:
        """(heads, head_dim), or None when the heads do not divide a 3-D x."""
        if len(self.x) == 4:
            h = self.x[1] if self.layout == "bhsd" else self.x[2]
            return (h, self.x[3]) if h == self.num_heads or self.num_heads == 0 else None
        if self.num_heads <= 0 or self.x[2] % self.num_heads:
            return None
        return self.num_heads, self.x[2] // self.num_heads

    @property
    def batch(self) -> int:
        return self.x[0]

    @property
    def seq(self) -> int:
        return self.x[2] if self.layout == "bhsd" else self.x[1]

    @property
    def heads(self) -> int:
        return self.heads_dim()[0]

    @property
    def head_dim(self) -> int:
        return self.heads_dim()[1]

    def cache_shape(self) -> Shape:
        """cos's (and sin's) shape: (cache_batch, seq, rotary_dim / 2), or (positions, rotary_dim / 2)."""
        half = self.rotary_dim // 2
        return (self.positions, half) if self.positions else (self.cache_batch, self.seq, half)

    def input_shapes(self):
        shapes = [self.x, self.cache_shape(), self.cache_shape()]
        return shapes + [(self.batch, self.seq)] if self.positions else shapes

    def output_shape(self):
        return self.x

    def flops(self):
        return 3 * self.batch * self.heads * self.seq * self.rotary_dim

    def describe(self):
        extra = (" interleaved" if self.interleaved else "") + (f" ids<{self.positions}" if self.positions else "")
        return (f"RotaryEmbedding({'x'.join(map(str, self.x))} {self.layout} h{self.heads} "
                f"rot {self.rotary_dim}/{self.head_dim}{extra})")


def _map_rotary(node, ctx, attrs):
    """ONNX RotaryEmbedding (opset 23): X, cos_cache, sin_cache[, position_ids] -> Y; attributes
    interleaved (default 0), num_heads (needed for a 3-D X), rotary_embedding_dim (default 0: the head
    size). Without position_ids the caches are (batch, seq, rotary_dim / 2) (a batch of 1 broadcast is
    taken too); with them (max_position + 1, rotary_dim / 2)."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    if len(x) not in (3, 4):
        raise Unsupported(f"an input of rank {len(x)} (3 or 4: (batch, seq, hidden) or (batch, heads, seq, head_size))")
    if len(node.input) < 3 or not node.input[1] or not node.input[2]:
        raise Unsupported("RotaryEmbedding without its cos_cache and sin_cache inputs")
    heads = int(attrs.get("num_heads", 0))
    if len(x) == 3 and (heads <= 0 or x[2] % heads):
        raise Unsupported(f"a 3-D input of hidden size {x[2]} with num_heads {heads} (must divide it)")
    if len(x) == 4 and heads not in (0, x[1]):
        raise Unsupported(f"num_heads {heads} for an input of {x[1]} heads")
    d = x[3] if len(x) == 4 else x[2] // heads
    rot = int(attrs.get("rotary_embedding_dim", 0)) or d
    if rot % 2 or not 0 < rot <= d:
        raise Unsupported(f"rotary_embedding_dim {rot} (even, at most the head size {d})")
    seq = x[2] if len(x) == 4 else x[1]
    cos = tuple(need(ctx.shape(node.input[1]), "cos_cache"))
    sin = ctx.shape(node.input[2])
    if sin is not None and tuple(sin) != cos:
        raise Unsupported(f"sin_cache {list(sin)} unlike cos_cache {list(cos)}")
    ids = node.input[3] if len(node.input) > 3 and node.input[3] else ""
    positions, cache_batch = 0, 1
    if ids:
        p = ctx.shape(ids)
        if len(cos) != 2 or cos[1] != rot // 2 or cos[0] < 1 or (p is not None and tuple(p) != (x[0], seq)):
            raise Unsupported(f"position_ids {list(p or ())} with a cos_cache {list(cos)} (expected (max_position + 1, "
                              f"{rot // 2}) and ids ({x[0]}, {seq}))")
        positions = cos[0]
    else:
        if len(cos) != 3 or cos[0] not in (1, x[0]) or cos[1] != seq or cos[2] != rot // 2:
            raise Unsupported(f"a cos_cache of shape {list(cos)} (expected ({x[0]}, {seq}, {rot // 2}) without position_ids)")
        cache_batch = cos[0]
    return RotaryConfig(x=x, num_heads=heads if len(x) == 3 else x[1], rotary_dim=rot,
                        interleaved=bool(int(attrs.get("interleaved", 0))), layout="bhsd" if len(x) == 4 else "bshd",
                        cache_batch=cache_batch, positions=positions)


def _map_ms_rotary(node, ctx, attrs):
    """ONNX Runtime's ``com.microsoft`` RotaryEmbedding (``contrib_doc("RotaryEmbedding")``; its shape
    checks in ``contrib_ops/cpu/bert/rotary_embedding_helper.h``): input, position_ids, cos_cache,
    sin_cache -> output (the opset 23 operator's inputs in another order, position_ids required).
    input (batch, seq, hidden) or (batch, heads, seq, head_size); cos/sin (max_sequence_length, rot / 2);
    position_ids (batch, seq) gathers rows of the cache, a scalar (or 1-element) one is the offset of
    positions offset .. offset + seq - 1 shared by the batch (read as a (1, seq, rot / 2) cache).
    Attributes: interleaved, num_heads (needed with rotary_embedding_dim and for a 3-D input when the
    cache does not give the head size), rotary_embedding_dim (0: the head size, 2 * cos's last dim),
    scale (1.0; another value is refused: the kernels rotate without scaling), is_packed_batching
    (refused: packed variable-length sequences). Raises Unsupported with the reason."""
    x = tuple(need(ctx.shape(node.input[0]), "input"))
    if len(x) not in (3, 4):
        raise Unsupported(f"an input of rank {len(x)} (3 or 4: (batch, seq, hidden) or (batch, heads, seq, head_size))")
    if len(node.input) < 4 or not all(node.input[:4]):
        raise Unsupported("com.microsoft RotaryEmbedding without its position_ids, cos_cache and sin_cache inputs")
    if int(attrs.get("is_packed_batching", 0)):
        raise Unsupported("is_packed_batching (packed sequences of different lengths) is not benchmarked")
    if float(attrs.get("scale", 1.0)) != 1.0:
        raise Unsupported(f"scale {float(attrs.get('scale'))} (the rotary kernels benchmarked do not scale)")
    cos = tuple(need(ctx.shape(node.input[2]), "cos_cache"))
    sin = ctx.shape(node.input[3])
    if len(cos) != 2 or (sin is not None and tuple(sin) != cos):
        raise Unsupported(f"cos_cache {list(cos)} and sin_cache {list(sin or ())} (two equal 2-D caches)")
    heads, rot = int(attrs.get("num_heads", 0)), int(attrs.get("rotary_embedding_dim", 0))
    if rot > 0 and heads <= 0:
        raise Unsupported("rotary_embedding_dim without num_heads (ONNX Runtime requires it)")
    hidden = x[1] * x[3] if len(x) == 4 else x[2]
    d = hidden // heads if rot > 0 else 2 * cos[1]
    if d <= 0 or hidden % d:
        raise Unsupported(f"a head size of {d} for a hidden size of {hidden}")
    h = heads or hidden // d
    if h * d != hidden:
        raise Unsupported(f"num_heads {h} of head size {d} for a hidden size of {hidden}")
    if len(x) == 4 and (h != x[1] or d != x[3]):
        raise Unsupported(f"num_heads {h} and head size {d} for an input of {x[1]} heads of {x[3]}")
    rot = rot or d
    if rot % 2 or rot > d or cos[1] != rot // 2:
        raise Unsupported(f"rotary_embedding_dim {rot} with a cos_cache of {cos[1]} columns (even, at most the "
                          f"head size {d}, the cache rot / 2 wide)")
    seq = x[2] if len(x) == 4 else x[1]
    p = need(ctx.shape(node.input[1]), "position_ids")
    if len(p) <= 1 and int(np.prod(p, dtype=np.int64)) == 1:
        v = ctx.value(node.input[1])
        if v is not None and int(np.asarray(v).reshape(-1)[0]) + seq > cos[0]:
            raise Unsupported(f"positions {int(np.asarray(v).reshape(-1)[0])} + {seq} beyond the cache's {cos[0]} rows")
        positions = 0
    elif tuple(p) == (x[0], seq):
        positions = cos[0]
    else:
        raise Unsupported(f"position_ids {list(p)} (a scalar offset or ({x[0]}, {seq}))")
    return RotaryConfig(x=x, num_heads=h, rotary_dim=rot, interleaved=bool(int(attrs.get("interleaved", 0))),
                        layout="bhsd" if len(x) == 4 else "bshd", cache_batch=1, positions=positions)


def _ms_rotary_shapes(node, ctx, attrs):
    """output: input's shape and type (ONNX Runtime's shape inference of the op)."""
    return [(ctx.shape(node.input[0]), None)][:len(node.output)]


@dataclass(frozen=True)
class RotaryCase(Case):
    """One row of ``templates/rotary.cpp.j2``'s case table: the fields of its C++ ``RotaryCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    batch: CppValue
    heads: CppValue
    seq: CppValue
    head_dim: CppValue
    rotary_dim: CppValue
    interleaved: CppValue
    bshd: CppValue
    cache_batch: CppValue
    positions: CppValue
    note: CppValue


def _rotary_case(cfg: RotaryConfig, job: Job) -> RotaryCase:
    return RotaryCase(job=job_init(job), batch=cfg.batch, heads=cfg.heads, seq=cfg.seq, head_dim=cfg.head_dim,
                      rotary_dim=cfg.rotary_dim, interleaved="true" if cfg.interleaved else "false",
                      bshd="true" if cfg.layout == "bshd" else "false", cache_batch=cfg.cache_batch,
                      positions=cfg.positions, note=cpp_string(""))


def _rotary(c: Ctx) -> Candidate:
    """The rotation as transformers' ``apply_rotary_pos_emb`` runs it in PyTorch ops: ``x * cos +
    rotate_half(x) * sin`` with ``rotate_half`` a ``torch.cat`` of the negated second half and the first
    (cos and sin of the full rotary width, their halves equal); interleaved pairs as the ONNX reference
    does (even/odd views, ``torch.stack`` and ``flatten``); a partial rotation slices the rotary part
    and concatenates the rest back. Positions shared by the batch (cos (1, s, 1 | h ...)) unless the
    layer's cache has one row per batch entry or position ids (then gathered once, outside the call)."""
    torch, cfg = c.torch, c.cfg
    h, d = cfg.heads_dim()
    b, s, r = cfg.batch, cfg.seq, cfg.rotary_dim
    x = c.randn(cfg.x)
    x4 = x.view(b, s, h, d).transpose(1, 2) if cfg.layout == "bshd" else x  # (b, h, s, d), a view
    rows = b if (cfg.cache_batch > 1 or cfg.positions) else 1
    width = r // 2 if cfg.interleaved else r
    cos, sin = (c.randn((rows, 1, s, width)) for _ in range(2))

    def fn():
        xr = x4[..., :r] if r < d else x4
        if cfg.interleaved:
            x1, x2 = xr[..., 0::2], xr[..., 1::2]
            y = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).flatten(-2)
        else:
            x1, x2 = xr[..., :r // 2], xr[..., r // 2:]
            y = xr * cos + torch.cat((-x2, x1), dim=-1) * sin
        return torch.cat((y, x4[..., r:]), dim=-1) if r < d else y

    call = "torch:aten::mul+cat+neg+add" if not cfg.interleaved else "torch:aten::mul+sub+add+stack"
    return Candidate(call, algo_label(c, "apply_rotary_pos_emb"), fn, numel(cfg.x))


def _min_bytes(cfg: RotaryConfig, ib: int, ob: int) -> int:
    """x read once, y written once, cos and sin (x's type) read once per distinct row of (rotary_dim / 2)
    values: cache_batch * seq rows, or at most batch * seq of the position-id cache plus the int64 ids
    (bytes)."""
    half = cfg.rotary_dim // 2
    if cfg.positions:
        cache = 2 * ib * min(cfg.positions, cfg.batch * cfg.seq) * half + 8 * cfg.batch * cfg.seq
    else:
        cache = 2 * ib * cfg.cache_batch * cfg.seq * half
    return ib * numel(cfg.x) + cache + ob * numel(cfg.x)


def rotary_backward(cfg: RotaryConfig) -> tuple:
    """``Kind.backward``: the data gradient of a rotation is the rotation by the opposite angle (each pair's
    2x2 rotation matrix is orthogonal, its transpose has -sin; the pass-through elements pass dy on):
    ``dx1 = dy1 * c + dy2 * s``, ``dx2 = dy2 * c - dy1 * s``, the same config with sin negated
    (transformers' rotary embedding has no parameters: cos and sin are buffers, no weight gradient).
    Its cost is the forward's: the kernel runs with a -sin cache, cuDNN's rope with negated angles
    (cuDNN's own rope_backward, 9.25+, computes the same)."""
    return (("backward_data", cfg),)


# ------------------------------------------------------------------------ fusion patterns

def _half_slice(pat: Graph, ly: Node | None, x: str, start: int, half: int) -> bool:
    """``ly`` is a free Slice of ``x`` to elements [start, start + half) of its last dim, all of the others."""
    if not pat.free(ly) or ly.status != "benchmark" or not isinstance(ly.config, CopyConfig) \
            or ly.config.op != "Slice" or ly.inputs != (x,):
        return False
    attrs, xs = dict(ly.config.attrs), tuple(ly.config.inputs[0])
    starts, steps = tuple(attrs.get("starts", ())), tuple(attrs.get("steps", ()))
    return (tuple(ly.config.y) == xs[:-1] + (half,) and len(starts) == len(xs)
            and starts == (0,) * (len(xs) - 1) + (start,) and set(steps) <= {1})


def _rotary_cache(pat: Graph, mul: Node | None, x: str, xshape: tuple[int, ...]):
    """(the cos or sin operand's name, its shape left-padded to x's rank) of a free Mul of ``x`` by it."""
    if not pat.free(mul) or not pat.elementwise(mul, "mul"):
        return None
    others = [n for n in mul.inputs + mul.static_inputs if n != x]
    if len(others) != 1 or x not in mul.inputs or tuple(mul.config.output_shape()) != xshape:
        return None
    c = pat.ctx.shape(others[0])
    if c is None or len(c) > len(xshape):
        return None
    return others[0], (1,) * (len(xshape) - len(c)) + tuple(c)


def find_rotary(pat: Graph, neg: Node):
    """x * cos + cat(-x[..., d/2:], x[..., :d/2]) * sin: the Mul, Slice, Slice, Neg, Concat, Mul, Add that
    torch.export and TorchScript write for transformers' ``apply_rotary_pos_emb`` (``rotate_half``), x
    (b, h, s, d) with cos/sin (1 | b, 1, s, d), or x (b, s, h, d) with cos/sin (1 | b, s, 1, d). The fused
    rotation reads (d / 2) cos/sin values per position: transformers builds cos = cat(freqs, freqs); where
    the cache is a folded constant its two halves are checked equal (else no candidate). A partial
    rotation (x[..., :r] sliced off first) is not found here."""
    if not pat.free(neg) or neg.status != "benchmark" or not isinstance(neg.config, UnaryConfig) \
            or neg.config.op != "neg" or len(neg.inputs) != 1:
        return None
    s2 = pat.made_by(neg.inputs[0])
    if s2 is None or pat.sole_user(s2) is not neg or len(s2.inputs) != 1:
        return None
    x = s2.inputs[0]
    xshape = tuple(pat.ctx.shape(x) or ())
    if len(xshape) != 4 or xshape[-1] % 2:
        return None
    d = xshape[-1]
    half = d // 2
    cat = pat.sole_user(neg)
    if not pat.free(cat) or not isinstance(cat.config, CopyConfig) or cat.config.op != "Concat" \
            or len(cat.inputs) != 2 or cat.inputs[0] != neg.outputs[0] \
            or dict(cat.config.attrs).get("axis") not in ((3,), (-1,)) or tuple(cat.config.y) != xshape:
        return None
    s1 = pat.made_by(cat.inputs[1])
    if not (_half_slice(pat, s1, x, 0, half) and _half_slice(pat, s2, x, half, half)) or pat.sole_user(s1) is not cat:
        return None
    msin = pat.sole_user(cat)
    add = pat.sole_user(msin) if msin is not None else None
    if not pat.free(add) or not pat.elementwise(add, "add") or len(add.inputs) != 2 or msin.outputs[0] not in add.inputs:
        return None
    mcos = pat.made_by(add.inputs[0] if add.inputs[1] == msin.outputs[0] else add.inputs[1])
    if mcos is None or pat.sole_user(mcos) is not add:
        return None
    sin, cos = _rotary_cache(pat, msin, cat.outputs[0], xshape), _rotary_cache(pat, mcos, x, xshape)
    if sin is None or cos is None or sin[1] != cos[1] or tuple(add.config.output_shape()) != xshape:
        return None
    c = cos[1]
    if c[0] not in (1, xshape[0]) or c[3] != d:
        return None
    if c[1] == 1 and c[2] == xshape[2]:
        layout = "bhsd"
    elif c[2] == 1 and c[1] == xshape[1]:
        layout = "bshd"
    else:
        return None
    for name, _ in (cos, sin):
        v = pat.ctx.value(name)
        if v is not None and not np.array_equal(np.asarray(v)[..., :half], np.asarray(v)[..., half:]):
            return None  # not cat(freqs, freqs): no rotation of pairs
    heads = xshape[1] if layout == "bhsd" else xshape[2]
    chain = [s1.index, s2.index, neg.index, cat.index, msin.index, mcos.index, add.index]
    return chain, RotaryConfig(x=xshape, num_heads=heads, rotary_dim=d, layout=layout, cache_batch=c[0])


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=RotaryConfig(x=(1, 4, 128, 32), num_heads=4, rotary_dim=32),
    name="RotaryEmbedding", config=RotaryConfig, template="rotary.cpp.j2", case=_rotary_case, min_bytes=_min_bytes,
    torch=_rotary, onnx={"RotaryEmbedding": _map_rotary},
    typed_ops=(), fused_from=('Mul', 'Slice', 'Neg', 'Concat', 'Add'),
    aten={"RotaryEmbedding": ('aten::neg', 'aten::cat', 'aten::mul', 'aten::add')},
    patterns=(Pattern("rotate_half's Mul/Slice/Neg/Concat/Mul/Add", (60, 0), find_rotary),),
    nhwc=False, image=False, backward=rotary_backward,
    contrib={(MS_DOMAIN, "RotaryEmbedding"): ContribOp(_map_ms_rotary, _ms_rotary_shapes, contrib_doc("RotaryEmbedding"),
                                                       ('aten::neg', 'aten::cat', 'aten::mul', 'aten::add'))})
