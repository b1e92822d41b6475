"""Rebinding a fixed-batch export to another batch size (docs/commands.md, "Models").

Exporters that trace a model at one batch ``B0`` (torch.onnx's TorchScript exporter with fixed
shapes, torch.export-based ``dynamo=True`` without dynamic shapes) write that batch into constants:
Reshape targets (``[1, 768, 196]``; merged into other dims, ``[197, 12, 64]`` where 12 = batch 1 x
12 heads, or ``[197, 768]`` where 197 = 197 tokens x batch 1), Expand/Tile/ConstantOfShape shapes,
Slice starts/ends, Split sizes, Resize sizes, weights that hold an expanded value (ViT's class
token folded to a ``[1, 1, 768]`` initializer) and index tensors (transformers' attention mask,
a GatherND whose indices name batch row 0). Binding only the graph input then makes the graph
inconsistent.

Method (:func:`plan`): shape inference at the exported batch, where the graph is consistent; then
a forward pass over the nodes in graph order that records, per tensor, which dim carries the batch
and with what outer factor (a :class:`BatchAxis`: ``dim = outer x batch x inner``) through every
op: broadcasting, Conv/Pool/Norm (dim 0), MatMul/Gemm rows, Transpose, Reshape (matching the
flattened position of the batch, ``outer x prod(dims before)``, against the target's prefix
products), Squeeze/Unsqueeze, Concat/Split/Slice/Gather on other axes, reductions, RNNs... Where a
Reshape target admits several batch positions (at ``B0 = 1`` every dim of size 1 does), the
candidates are ranked (a dim equal to the batch first, outermost first; then the batch outermost
in a merged dim) and searched depth-first: a choice that later puts the batch into a reduced
dimension, onto two axes of one tensor, or misaligns two operands is undone. Consistency
constraints (a Concat or broadcast partner of a batch-carrying tensor that has the batch's extent)
mark static tensors that must carry the batch too; their producers (Expand, Tile, ConstantOfShape,
Slice, Gather of indices, weights and constants) are rewritten. Every constant operand that holds
``B0`` is then cloned per consumer with ``B`` in its place (:meth:`Rebinding.apply`), and after the
usual binding, inference and folding, :meth:`Rebinding.verify` checks every tensor's shape against
the prediction. Anything that cannot be done safely (a slice or reduction over the batch, a
constant that differs between batch rows, a search that finds no consistent assignment) is a
one-line :class:`ModelError` that names the node and says to export with a dynamic batch axis.

Two heuristics, said here because a fixed graph cannot tell: at ``B0 = 1`` a static operand of
extent 1 broadcasts against the batch (a positional embedding ``[1, 197, 768]``) unless it is an
Expand/Tile/ConstantOfShape output that fixes that dim, the first rows of a larger constant (a Slice
with ends = batch), or an embedding lookup of ids built by a GatherElements (transformers' token-type
ids, whose ``expand(batch, seq)`` torch.export drops at batch 1; position ids, a constant, broadcast); a
GatherND whose indices address the batch dim of its data gets indices ``0..B-1`` on their
outermost extent-1 axis.

Dynamic-batch exports (a symbolic dim on any data input) and ``batch == B0`` are left untouched.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import numpy as np
from benanza.errors import ModelError
from benanza.processing.graph import eval_node, has_data, infer_and_fold, infer_shapes, inferred_shapes, opset_of
from benanza.lazy import LazyModule

onnx = LazyModule("onnx")
helper = LazyModule("onnx.helper")
numpy_helper = LazyModule("onnx.numpy_helper")

#: hint appended to every rebinding error
HINT = "export the model with a dynamic batch axis (torch.onnx.export dynamic_axes= or dynamic_shapes=)"

#: a tensor whose batch position the pass cannot follow (unknown op, shape computed at run time)
OPAQUE = "opaque"

#: node evaluations the depth-first search may spend before it gives up
_SEARCH_LIMIT = 400_000

_UNARY = {
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Cast", "CastLike", "Ceil", "Celu",
    "Clip", "Cos", "Cosh", "Dropout", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish",
    "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg", "Not", "Reciprocal", "Relu", "Round",
    "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh",
    "ThresholdedRelu", "Trilu", "QuantizeLinear", "DequantizeLinear",
}
_ELEMENTWISE = {
    "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Div", "Equal", "Greater",
    "GreaterOrEqual", "Less", "LessOrEqual", "Max", "Mean", "Min", "Mod", "Mul", "Or", "Pow", "PRelu",
    "Sub", "Sum", "Where", "Xor",
}
#: ops whose batch is dim 0 of input 0 and of every output (N of NCHW)
_DIM0 = {
    "AveragePool", "BatchNormalization", "Conv", "ConvInteger", "ConvTranspose", "DepthToSpace",
    "GlobalAveragePool", "GlobalLpPool", "GlobalMaxPool", "GroupNormalization", "InstanceNormalization",
    "LRN", "LpNormalization", "LpPool", "MaxPool", "MaxRoiPool", "MaxUnpool", "QLinearConv", "SpaceToDepth",
}
_REDUCE = {"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin",
           "ReduceProd", "ReduceSum", "ReduceSumSquare", "ArgMax", "ArgMin"}
_AXIS_OPS = {"Softmax", "LogSoftmax", "Hardmax", "CumSum", "LayerNormalization", "RMSNormalization", "TopK", "Split",
             "Concat",
             "Gather", "GatherElements", "ReverseSequence"}


@dataclass(frozen=True)
class BatchAxis:
    """Where a tensor carries the batch: its dim ``axis`` has extent ``outer x batch x inner``
    (``outer`` elements of the flattened dim lie outside the batch, as in ``[197 x B, 768]``)."""

    axis: int
    outer: int = 1


@dataclass(frozen=True)
class ShapeValue:
    """A shape-valued tensor (computed from ``Shape`` at run time, so recomputed at the new batch):
    ``elems[k]`` is the batch's outer factor where element k is the batch's extent, else None;
    ``scalar`` for a 0-D value (``Gather(Shape(x), 0)``)."""

    elems: tuple
    scalar: bool = False

    def batch_positions(self) -> list[int]:
        return [k for k, e in enumerate(self.elems) if e is not None]


class _Conflict(Exception):
    """This assignment of batch axes is inconsistent at this node (the search backtracks)."""


class _Unsafe(Exception):
    """The rebinding cannot be done safely at this node (no search helps)."""


# ------------------------------------------------------------------------------- facts at B0

@dataclass
class _Facts:
    """Read-only facts of the graph at the exported batch ``b0``."""

    nodes: list
    shapes: dict            # tensor -> tuple at b0, or None
    consts: dict            # tensor -> np.ndarray (initializers with data, Constant outputs, folded)
    weights: set            # initializer names without data (graph inputs now)
    static: set             # tensors computed from weights and constants only
    producer: dict          # tensor -> node index
    opset: int
    b0: int
    batch: int
    at_b0: dict = field(default_factory=dict)  # values benanza's folding computes at b0 (shapes too)

    def leaf(self, name: str) -> bool:
        """A weight, an initializer or a Constant output: rewritten by cloning, not through a producer
        (a constant folded from other nodes is rewritten through the node that computes it)."""
        if name not in self.consts and name not in self.weights:
            return False
        return name not in self.producer or self.nodes[self.producer[name]].op_type == "Constant"

    def dim(self, name: str, ax: BatchAxis) -> tuple[int, int]:
        """(extent at b0, inner factor) of ``name``'s batch dim."""
        d = self.shapes[name][ax.axis]
        return d, d // (ax.outer * self.b0)

    def rebound(self, name: str, ax: BatchAxis) -> int:
        """The extent of ``name``'s batch dim at the new batch."""
        return ax.outer * self.batch * self.dim(name, ax)[1]


def _attrs(node) -> dict:
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _facts(model: onnx.ModelProto, weights: set, b0: int, batch: int) -> _Facts:
    """Shapes at b0 (onnx inference, completed by benanza's inference-and-folding where onnx alone
    leaves a shape unknown), constant values, static tensors and producers."""

    try:
        inferred = infer_shapes(copy.deepcopy(model))
        folded_model = infer_and_fold(copy.deepcopy(model), set(weights))[0]
    except ModelError as e:
        raise ModelError(f"{e} (at the exported batch {b0})") from None
    g = inferred.graph
    shapes = inferred_shapes(inferred)
    shapes.update({k: v for k, v in inferred_shapes(folded_model).items() if v is not None and shapes.get(k) is None})
    at_b0 = {t.name: numpy_helper.to_array(t) for t in folded_model.graph.initializer if has_data(t)}
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer if has_data(t)}
    opset = opset_of(inferred)
    static = set(weights) | set(consts)
    producer = {}
    for idx, node in enumerate(g.node):
        ins = [i for i in node.input if i]
        for o in node.output:
            producer[o] = idx
        if node.op_type == "Constant":
            consts[node.output[0]] = np.asarray(eval_node(node, [], opset)[0])
        elif ins and all(i in consts for i in ins) and node.op_type not in ("Shape", "Size") and all(
                shapes.get(o) is not None and math.prod(shapes[o]) <= (1 << 16) for o in node.output if o):
            try:
                for o, v in zip(node.output, eval_node(node, [consts[i] for i in ins], opset)):
                    consts[o] = np.asarray(v)
            except Exception:  # a node the reference evaluator cannot run stays a computed tensor
                pass
        if ins and all(i in static for i in ins) and node.op_type not in ("Shape", "Size"):
            static.update(o for o in node.output if o)
        elif not ins:
            static.update(o for o in node.output if o)
    return _Facts(nodes=list(g.node), shapes=shapes, consts=consts, weights=set(weights), static=static,
                  producer=producer, opset=opset, b0=b0, batch=batch, at_b0=at_b0)


# ------------------------------------------------------------------------------ search state

@dataclass(frozen=True)
class _Rewrite:
    """Give input ``slot`` of node ``node`` a new value (kind "const": an array; "weight": a
    weight of these dims) or set attribute ``attr`` (kind "attr")."""

    node: int
    slot: int
    kind: str
    value: object
    attr: str = ""
    tiled: bool = False  # a constant or weight resized over the batch (not a shape operand)


@dataclass
class _Out:
    """One possible outcome of a node: its outputs' batch axes, rewrites, and static tensors that
    must carry the batch (their producers are rewritten in the next pass)."""

    infos: dict
    rewrites: list = field(default_factory=list)
    needs: dict = field(default_factory=dict)

    def add(self, other: "_Out") -> "_Out":
        self.rewrites += other.rewrites
        self.needs.update(other.needs)
        return self


@dataclass
class _State:
    info: dict
    rewrites: list
    needs: dict

    def copy(self) -> "_State":
        return _State(dict(self.info), list(self.rewrites), dict(self.needs))


class _Node:
    """What a rule reads about one node: facts at b0, the batch axes found so far, the wants."""

    def __init__(self, f: _Facts, st: _State, idx: int, seeds: dict):
        self.f, self.st, self.idx = f, st, idx
        self.node = f.nodes[idx]
        self.op = self.node.op_type
        self.ins = list(self.node.input)
        self.outs = [o for o in self.node.output if o]
        self.attrs = _attrs(self.node)
        self.want = {o: seeds[o] for o in self.outs if o in seeds}

    def info(self, name: str):
        return self.st.info.get(name) if name else None

    def shape(self, name: str):
        return self.f.shapes.get(name) if name else None

    def rank(self, name: str) -> int | None:
        s = self.shape(name)
        return len(s) if s is not None else None

    def const(self, slot: int):
        """The value of input ``slot`` if it is a known constant or computed without the batch
        (its value at b0 then holds at any batch), else None."""
        if slot >= len(self.ins) or not self.ins[slot]:
            return None
        name = self.ins[slot]
        if name in self.f.consts:
            return self.f.consts[name]
        v = self.info(name)
        if v is None or (isinstance(v, ShapeValue) and not v.batch_positions()):
            return self.f.at_b0.get(name)  # computed at run time, but not from the batch: as at b0
        return None

    def axes_operand(self, slot: int, attr: str = "axes"):
        """Axes from an attribute (older opsets) or a constant input; None if computed at run time."""
        if attr in self.attrs:
            return [int(a) for a in self.attrs[attr]]
        if slot < len(self.ins) and self.ins[slot]:
            v = self.const(slot)
            return None if v is None else [int(a) for a in np.asarray(v).reshape(-1)]
        return []

    def uniform(self, ax) -> _Out:
        """Every output carries ``ax`` (or OPAQUE / None)."""
        return _Out({o: ax for o in self.outs})

    def fail(self, why: str):
        raise _Conflict(f"node {self.node.name!r} ({self.op}): {why}")

    def carry(self, name: str, ax: BatchAxis) -> _Out:
        """Make the static input ``name`` carry the batch at ``ax``: a weight or constant is cloned
        for this node with the batch's extent; a computed one is a need (its producer is rewritten)."""
        cur = self.info(name)
        if cur == ax or cur == OPAQUE or isinstance(cur, ShapeValue):
            return _Out({})
        if cur is not None:
            self.fail(f"input {name!r} carries the batch on dim {cur.axis}, needed on dim {ax.axis}")
        if name not in self.f.static:
            return _Out({})  # a value computed from shapes at run time: recomputed at the new batch
        if not self.f.leaf(name):
            return _Out({}, needs={name: ax})
        s = self.shape(name)
        if s is None or ax.axis >= len(s) or s[ax.axis] % (ax.outer * self.f.b0):
            self.fail(f"input {name!r} {list(s) if s else '?'} cannot carry the batch on dim {ax.axis}")
        slots = [k for k, i in enumerate(self.ins) if i == name]
        if name in self.f.consts:
            v = _tile(self.f.consts[name], ax, self.f.b0, self.f.batch, f"{name!r} of node {self.node.name!r}")
            return _Out({}, [_Rewrite(self.idx, k, "const", v, tiled=True) for k in slots])
        dims = list(s)
        dims[ax.axis] = self.f.rebound(name, ax)
        return _Out({}, [_Rewrite(self.idx, k, "weight", tuple(dims), tiled=True) for k in slots])


def _tile(v: np.ndarray, ax: BatchAxis, b0: int, batch: int, what: str) -> np.ndarray:
    """``v`` with its batch dim (outer x b0 x inner) resized to outer x batch x inner: every batch row
    must be equal (an expanded value); raises :class:`_Unsafe` otherwise."""
    s = v.shape
    a, o = ax.axis, ax.outer
    i = s[a] // (o * b0)
    w = v.reshape(s[:a] + (o, b0, i) + s[a + 1:])
    first = np.take(w, [0], axis=a + 1)
    if not np.array_equal(w, np.broadcast_to(first, w.shape)):
        raise _Unsafe(f"constant {what} differs between batch rows, it cannot be resized to batch {batch}")
    return np.ascontiguousarray(np.repeat(first, batch, axis=a + 1).reshape(s[:a] + (o * batch * i,) + s[a + 1:]))


def _norm(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


# ----------------------------------------------------------------------------- forward rules

def _carrying(c: _Node) -> list[tuple[str, object]]:
    """Inputs that carry the batch (a BatchAxis, or OPAQUE for a shape value or an unknown one)."""
    return [(i, OPAQUE if isinstance(c.info(i), ShapeValue) else c.info(i)) for i in c.ins if i and c.info(i) is not None]


def _rule_unary(c: _Node) -> list[_Out]:
    ax = c.info(c.ins[0])
    r = c.rank(c.ins[0])
    return [_Out({o: ax if c.rank(o) in (r, None) else None for o in c.outs})]


def _rule_elementwise(c: _Node) -> list[_Out]:
    R = c.rank(c.outs[0])
    if R is None:
        return [c.uniform(OPAQUE)]
    found = set()
    for name, ax in _carrying(c):
        if ax != OPAQUE:
            found.add(BatchAxis(ax.axis + R - c.rank(name), ax.outer))
    if not found:
        return [c.uniform(OPAQUE)]
    if len(found) > 1:
        c.fail(f"operands carry the batch on different dims {sorted((a.axis, a.outer) for a in found)}")
    out_ax = found.pop()
    out = _Out({o: out_ax for o in c.outs})
    full = c.shape(c.outs[0])[out_ax.axis]
    for name in dict.fromkeys(i for i in c.ins if i and c.info(i) is None):
        s = c.shape(name)
        if s is None or out_ax.axis - (R - len(s)) < 0:
            continue
        p = out_ax.axis - (R - len(s))
        if s[p] == full and (full > 1 or _batch_shaped(c.f, name, p)):
            out.add(c.carry(name, BatchAxis(p, out_ax.outer)))
        elif s[p] not in (1, full):
            c.fail(f"operand {name!r} has extent {s[p]} on the batch dim of extent {full}")
    return [out]


def _batch_shaped(f: _Facts, name: str, axis: int, depth: int = 0) -> bool:
    """At batch 1: is this static extent-1 dim the batch, written by an Expand/Tile/ConstantOfShape
    or an embedding lookup of static indices (heuristics, module docstring), rather than a broadcast?"""
    if depth > 32 or f.leaf(name) or name not in f.producer:
        return False
    node = f.nodes[f.producer[name]]
    op, ins = node.op_type, [i for i in node.input]
    s = f.shapes.get(name)
    if s is None:
        return False
    if op == "Expand":
        shp = f.consts.get(ins[1])
        return shp is not None and axis - (len(s) - len(shp)) >= 0
    if op in ("Tile", "ConstantOfShape"):
        return True
    if op == "Slice" and f.opset >= 10 and all(f.consts.get(i) is not None for i in ins[1:4] if i):
        axes = [_norm(int(a), len(s)) for a in (f.consts[ins[3]] if len(ins) > 3 and ins[3]
                                                  else range(len(f.consts[ins[1]])))]
        if axis in axes:  # the first rows of a larger buffer, as many as the batch
            k = axes.index(axis)
            return int(f.consts[ins[1]][k]) == 0 and (f.shapes.get(ins[0]) or (0,) * len(s))[axis] > s[axis]
        return _batch_shaped(f, ins[0], axis, depth + 1)
    if op == "Gather" and ins[0] in f.weights and len(f.shapes.get(ins[0]) or ()) == 2 \
            and _attrs(node).get("axis", 0) == 0 and ins[1] in f.static and axis < len(f.shapes.get(ins[1]) or ()):
        # an embedding of static ids: per sample when the ids are built (transformers' token types,
        # a GatherElements of a buffer), shared by the batch when they are a constant (position ids)
        idx = f.nodes[f.producer[ins[1]]] if ins[1] in f.producer else None
        return (idx is not None and idx.op_type == "GatherElements") or _batch_shaped(f, ins[1], axis, depth + 1)
    if op in _UNARY:
        return _batch_shaped(f, ins[0], axis, depth + 1)
    if op in _ELEMENTWISE:
        return any(_batch_shaped(f, i, axis - (len(s) - len(f.shapes.get(i) or ())), depth + 1)
                   for i in ins if i and f.shapes.get(i) is not None and axis - (len(s) - len(f.shapes[i])) >= 0)
    if op == "Transpose":
        perm = _attrs(node).get("perm", list(range(len(s)))[::-1])
        return _batch_shaped(f, ins[0], perm[axis], depth + 1)
    return False


def _rule_dim0(c: _Node) -> list[_Out]:
    ax = c.info(c.ins[0])
    if ax == OPAQUE:
        return [c.uniform(OPAQUE)]
    if ax is None or any(c.info(i) is not None for i in c.ins[1:] if i):
        c.fail("a weight or parameter input carries the batch")
    if ax.axis != 0:
        c.fail(f"the batch is on dim {ax.axis}, this op needs it on dim 0")
    infos = {o: ax for o in c.outs}
    if c.op == "BatchNormalization":
        infos = {o: (ax if k == 0 else None) for k, o in enumerate(c.node.output) if o}
    return [_Out(infos)]


def _rule_matmul(c: _Node) -> list[_Out]:
    a, b = c.ins[0], c.ins[1]
    ra, rb, R = c.rank(a), c.rank(b), c.rank(c.outs[0])
    if None in (ra, rb, R):
        return [c.uniform(OPAQUE)]
    found = set()
    for name, r, is_a in ((a, ra, True), (b, rb, False)):
        ax = c.info(name)
        if ax is None:
            continue
        if ax == OPAQUE:
            return [c.uniform(OPAQUE)]
        k_axis = r - 1 if is_a else (r - 2 if r > 1 else 0)
        if ax.axis == k_axis:
            c.fail(f"the batch would be in the reduced dimension K of input {name!r}")
        if is_a and ax.axis == r - 2:
            found.add(BatchAxis(R - 2 if rb > 1 else R - 1, ax.outer))
        elif not is_a and ax.axis == r - 1:
            found.add(BatchAxis(R - 1, ax.outer))
        else:
            found.add(BatchAxis(ax.axis + R - r, ax.outer))
    if len(found) != 1:
        c.fail(f"the batch would be on two dims {sorted(x.axis for x in found)} of the product")
    out_ax = next(iter(found))
    out = _Out({c.outs[0]: out_ax})
    if out_ax.axis < R - 2:  # a broadcast batch dim: a static partner of the batch's extent carries it
        for name, r in ((a, ra), (b, rb)):
            p = out_ax.axis - (R - r)
            if c.info(name) is None and 0 <= p < r - 2 and c.shape(name)[p] == c.shape(c.outs[0])[out_ax.axis] > 1:
                out.add(c.carry(name, BatchAxis(p, out_ax.outer)))
    return [out]


def _rule_gemm(c: _Node) -> list[_Out]:
    ax_a, ax_b = c.info(c.ins[0]), c.info(c.ins[1])
    if OPAQUE in (ax_a, ax_b):
        return [c.uniform(OPAQUE)]
    if len(c.ins) > 2 and c.info(c.ins[2]) is not None:
        c.fail("the bias C carries the batch")
    if ax_a is not None and ax_b is not None:
        c.fail("both A and B carry the batch")
    if ax_a is not None:
        rows = 1 if c.attrs.get("transA", 0) else 0
        if ax_a.axis != rows:
            c.fail("the batch would be in the reduced dimension K of A")
        return [_Out({c.outs[0]: BatchAxis(0, ax_a.outer)})]
    cols = 0 if c.attrs.get("transB", 0) else 1
    if ax_b.axis != cols:
        c.fail("the batch would be in the reduced dimension K of B")
    return [_Out({c.outs[0]: BatchAxis(1, ax_b.outer)})]


def _reshape_candidates(f: _Facts, src: tuple, ax: BatchAxis, dst: tuple) -> list[BatchAxis]:
    """Dims of ``dst`` that can hold the batch of ``src`` (same flattened position), ranked: a dim
    equal to the batch first (outermost first), then the batch outermost in a merged dim, then the rest."""
    if 0 in src or 0 in dst:
        return []
    d, b0 = src[ax.axis], f.b0
    pre = math.prod(src[:ax.axis]) * ax.outer
    post = (d // (ax.outer * b0)) * math.prod(src[ax.axis + 1:])
    cands = []
    for k in range(len(dst)):
        p = math.prod(dst[:k])
        if pre % p:
            continue
        outer = pre // p
        if dst[k] % (outer * b0):
            continue
        inner = dst[k] // (outer * b0)
        if inner * math.prod(dst[k + 1:]) == post:
            cands.append((0 if outer == inner == 1 else 1 if outer == 1 else 2, k, BatchAxis(k, outer)))
    return [cand for _, _, cand in sorted(cands, key=lambda t: (t[0], t[1]))]


def _rule_reshape(c: _Node) -> list[_Out]:
    x, y = c.ins[0], c.outs[0]
    ax, sx, sy = c.info(x), c.shape(x), c.shape(y)
    if ax == OPAQUE or sx is None or sy is None:
        return [c.uniform(OPAQUE)]
    if c.op == "Flatten":
        k = _norm(c.attrs.get("axis", 1), len(sx))
        outer = math.prod(sx[:ax.axis]) * ax.outer if ax.axis < k else math.prod(sx[k:ax.axis]) * ax.outer
        return [_Out({y: BatchAxis(0 if ax.axis < k else 1, outer)})]
    target = c.const(1)
    outs = []
    for cand in _reshape_candidates(c.f, sx, ax, sy):
        out = _Out({y: cand})
        if target is not None:
            raw = int(target[cand.axis])
            copies = raw == 0 and not c.attrs.get("allowzero", 0) and ax == cand
            if raw != -1 and not copies:
                new = np.array(target, copy=True)
                new[cand.axis] = cand.outer * c.f.batch * (sy[cand.axis] // (cand.outer * c.f.b0))
                out.rewrites.append(_Rewrite(c.idx, 1, "const", new))
        outs.append(out)
    if not outs:
        c.fail(f"no dim of the target shape {list(sy)} can hold the batch of {list(sx)} (dim {ax.axis})")
    return outs


def _rule_transpose(c: _Node) -> list[_Out]:
    ax = c.info(c.ins[0])
    r = c.rank(c.ins[0])
    if ax == OPAQUE or r is None:
        return [c.uniform(OPAQUE)]
    perm = [int(p) for p in c.attrs.get("perm", list(range(r))[::-1])]
    return [_Out({c.outs[0]: BatchAxis(perm.index(ax.axis), ax.outer)})]


def _rule_squeeze(c: _Node) -> list[_Out]:
    ax, s = c.info(c.ins[0]), c.shape(c.ins[0])
    axes = c.axes_operand(1)
    if ax == OPAQUE or s is None or axes is None:
        return [c.uniform(OPAQUE)]
    if c.op == "Unsqueeze":
        r = len(s) + len(axes)
        inserted = {_norm(a, r) for a in axes}
        kept = [k for k in range(r) if k not in inserted]
        return [_Out({c.outs[0]: BatchAxis(kept[ax.axis], ax.outer)})]
    squeezed = {_norm(a, len(s)) for a in axes} if axes else {k for k, d in enumerate(s) if d == 1}
    if ax.axis in squeezed:
        c.fail("squeezes the batch dim (of extent 1 at the exported batch)")
    return [_Out({c.outs[0]: BatchAxis(ax.axis - sum(1 for k in squeezed if k < ax.axis), ax.outer)})]


def _rule_concat(c: _Node) -> list[_Out]:
    R = c.rank(c.outs[0])
    if R is None:
        return [c.uniform(OPAQUE)]
    axis = _norm(c.attrs.get("axis", 0), R)
    found = {ax for _, ax in _carrying(c) if ax != OPAQUE}
    if not found:
        return [c.uniform(OPAQUE)]
    if len(found) > 1:
        c.fail("inputs carry the batch on different dims")
    ax = found.pop()
    if ax.axis == axis:
        c.fail("concatenates along the batch dim")
    out = _Out({c.outs[0]: ax})
    for name in dict.fromkeys(i for i in c.ins if i and c.info(i) is None):
        out.add(c.carry(name, ax))
    return [out]


def _rule_split(c: _Node) -> list[_Out]:
    ax, s = c.info(c.ins[0]), c.shape(c.ins[0])
    if ax == OPAQUE or s is None:
        return [c.uniform(OPAQUE)]
    axis = _norm(c.attrs.get("axis", 0), len(s))
    if axis != ax.axis:
        return [c.uniform(ax)]
    d, inner = c.f.dim(c.ins[0], ax)
    unit = c.f.b0 * inner
    sizes = [c.shape(o)[axis] if c.shape(o) else -1 for o in c.outs]
    if any(z < 0 or z % unit for z in sizes):
        c.fail(f"splits the batch dim (extent {d}) into parts {sizes} that are not whole multiples of the batch")
    out = _Out({o: BatchAxis(axis, z // unit) for o, z in zip(c.outs, sizes)})
    new = np.array([z // unit * c.f.batch * inner for z in sizes], dtype=np.int64)
    if "split" in c.attrs:
        out.rewrites.append(_Rewrite(c.idx, -1, "attr", [int(v) for v in new], attr="split"))
    elif len(c.ins) > 1 and c.ins[1] and c.const(1) is not None:
        out.rewrites.append(_Rewrite(c.idx, 1, "const", new))
    return [out]


def _slice_spec(c: _Node):
    """(starts, ends, axes, steps, slots of starts/ends or None for attributes) or None if computed."""
    if c.f.opset < 10:
        st, en = c.attrs.get("starts"), c.attrs.get("ends")
        axes = c.attrs.get("axes", list(range(len(st))))
        return list(st), list(en), list(axes), [1] * len(st), None
    vals = [c.const(k) for k in (1, 2)]
    if any(v is None for v in vals):
        return None
    n = len(vals[0])
    axes = c.const(3) if len(c.ins) > 3 and c.ins[3] else np.arange(n)
    steps = c.const(4) if len(c.ins) > 4 and c.ins[4] else np.ones(n, dtype=np.int64)
    if axes is None or steps is None:
        return None
    return ([int(v) for v in vals[0]], [int(v) for v in vals[1]], [int(v) for v in axes],
            [int(v) for v in steps], (1, 2))


def _slice_batch(c: _Node, ax: BatchAxis, d: int, start: int, end: int, step: int):
    """The new (start, end) and output BatchAxis of a slice along the batch dim (extent ``d``)."""
    inner = d // (ax.outer * c.f.b0)
    unit, D = c.f.b0 * inner, ax.outer * c.f.batch * inner
    s = max(0, min(d, start + d if start < 0 else start))
    e = max(0, min(d, end + d if end < 0 else end))
    if step != 1 or s % unit or e % unit or e <= s:
        c.fail(f"slices [{start}:{end}:{step}] of the batch dim (extent {d}): a part of the batch")
    ns = s // unit * c.f.batch * inner
    ne = e // unit * c.f.batch * inner
    new_end = end if (e == d and end >= D) else ne
    new_start = -D + ns if start < 0 else ns
    return new_start, new_end, BatchAxis(ax.axis, (e - s) // unit)


def _rule_slice(c: _Node) -> list[_Out]:
    ax, s = c.info(c.ins[0]), c.shape(c.ins[0])
    spec = _slice_spec(c)
    if ax == OPAQUE or s is None or spec is None:
        return [c.uniform(OPAQUE)]
    starts, ends, axes, steps, slots = spec
    out_ax, new_starts, new_ends = ax, list(starts), list(ends)
    for k, a in enumerate(axes):
        if _norm(a, len(s)) != ax.axis:
            continue
        new_starts[k], new_ends[k], out_ax = _slice_batch(c, ax, s[ax.axis], starts[k], ends[k], steps[k])
    out = _Out({c.outs[0]: out_ax})
    out.rewrites += _slice_rewrites(c, slots, (starts, new_starts), (ends, new_ends))
    return [out]


def _slice_rewrites(c: _Node, slots, starts: tuple, ends: tuple) -> list[_Rewrite]:
    rw = []
    for (old, new), slot, attr in ((starts, 1, "starts"), (ends, 2, "ends")):
        if old == new:
            continue
        if slots is None:
            rw.append(_Rewrite(c.idx, -1, "attr", new, attr=attr))
        else:
            rw.append(_Rewrite(c.idx, slot, "const", np.array(new, dtype=c.const(slot).dtype)))
    return rw


def _rule_gather(c: _Node) -> list[_Out]:
    data, idx = c.ins[0], c.ins[1]
    ax_d, ax_i, sd, si = c.info(data), c.info(idx), c.shape(data), c.shape(idx)
    if OPAQUE in (ax_d, ax_i) or sd is None or si is None:
        return [c.uniform(OPAQUE)]
    axis = _norm(c.attrs.get("axis", 0), len(sd))
    if ax_d is not None and ax_i is not None:
        c.fail("both the data and the indices carry the batch")
    if ax_i is not None:
        return [_Out({c.outs[0]: BatchAxis(axis + ax_i.axis, ax_i.outer)})]
    if ax_d.axis == axis:
        c.fail("selects elements of the batch dim")
    pos = ax_d.axis if ax_d.axis < axis else ax_d.axis + len(si) - 1
    return [_Out({c.outs[0]: BatchAxis(pos, ax_d.outer)})]


def _rule_gather_elements(c: _Node) -> list[_Out]:
    data, idx = c.ins[0], c.ins[1]
    ax_d, ax_i, sd = c.info(data), c.info(idx), c.shape(data)
    if OPAQUE in (ax_d, ax_i) or sd is None:
        return [c.uniform(OPAQUE)]
    axis = _norm(c.attrs.get("axis", 0), len(sd))
    ax = ax_i or ax_d
    if ax.axis == axis or (ax_d is not None and ax_i is not None and ax_d != ax_i):
        c.fail("gathers along the batch dim")
    out = _Out({c.outs[0]: ax})
    if ax_i is None:
        out.add(c.carry(idx, ax))
    if ax_d is None and sd[ax.axis] == c.shape(idx)[ax.axis]:
        out.add(c.carry(data, ax))
    return [out]


def _rule_gather_nd(c: _Node) -> list[_Out]:
    """GatherND (batch_dims 0). Data carrying the batch on a dim its indices address (transformers'
    masks at batch 1: indices [..., (row 0, column)]): the indices get rows 0..B-1 on their outermost
    axis of the batch's extent, where their row component equals the axis position."""
    data, idx = c.ins[0], c.ins[1]
    ax_d, ax_i, sd, si = c.info(data), c.info(idx), c.shape(data), c.shape(idx)
    if OPAQUE in (ax_d, ax_i) or sd is None or si is None or c.attrs.get("batch_dims", 0):
        return [c.uniform(OPAQUE)]
    k = si[-1]
    if ax_i is not None:
        if ax_d is not None or ax_i.axis == len(si) - 1:
            c.fail("the indices carry the batch in their index tuples")
        return [_Out({c.outs[0]: ax_i})]
    if ax_d.axis >= k:
        return [_Out({c.outs[0]: BatchAxis(len(si) - 1 + ax_d.axis - k, ax_d.outer)})]
    v = c.const(1)
    if c.f.dim(data, ax_d) != (c.f.b0, 1):
        c.fail("indexes a dim that merges the batch with other dims")
    if v is None and idx in c.f.weights:  # indices stored with the weights: their shape is all there is
        j = next((j for j in range(len(si) - 1) if si[j] == c.f.b0), None)
        if j is None:
            c.fail("its indices (a weight without data) have no dim of the batch's extent")
        dims = list(si)
        dims[j] = c.f.batch
        return [_Out({c.outs[0]: BatchAxis(j, 1)}, [_Rewrite(c.idx, 1, "weight", tuple(dims), tiled=True)])]
    if v is None:
        c.fail("indexes the batch dim with indices computed at run time")
    rows = v[..., ax_d.axis]
    for j in range(len(si) - 1):
        shape = [1] * (len(si) - 1)
        shape[j] = c.f.b0
        if si[j] == c.f.b0 and np.array_equal(rows, np.broadcast_to(np.arange(c.f.b0).reshape(shape), rows.shape)):
            reps = np.take(v, [0], axis=j)
            new = np.repeat(reps, c.f.batch, axis=j)
            shape[j] = c.f.batch
            new[..., ax_d.axis] = np.broadcast_to(np.arange(c.f.batch).reshape(shape), new.shape[:-1])
            return [_Out({c.outs[0]: BatchAxis(j, 1)}, [_Rewrite(c.idx, 1, "const", new, tiled=True)])]
    c.fail("its constant indices do not address the batch rows in order")


def _rule_expand(c: _Node) -> list[_Out]:
    x, y = c.ins[0], c.outs[0]
    ax, sx, sy, shp = c.info(x), c.shape(x), c.shape(y), c.const(1)
    if ax == OPAQUE or sx is None or sy is None:
        return [c.uniform(OPAQUE)]
    out_ax = BatchAxis(ax.axis + len(sy) - len(sx), ax.outer)
    out = _Out({y: out_ax})
    if shp is not None:
        p = out_ax.axis - (len(sy) - len(shp))
        if p >= 0 and shp[p] == sy[out_ax.axis] > 1:
            new = np.array(shp, copy=True)
            new[p] = c.f.rebound(y, out_ax)
            out.rewrites.append(_Rewrite(c.idx, 1, "const", new))
    return [out]


def _rule_tile(c: _Node) -> list[_Out]:
    ax, reps = c.info(c.ins[0]), c.const(1)
    if ax == OPAQUE:
        return [c.uniform(OPAQUE)]
    r = int(reps[ax.axis]) if reps is not None else 1
    return [_Out({c.outs[0]: BatchAxis(ax.axis, ax.outer * r)})]


def _rule_reduce(c: _Node) -> list[_Out]:
    ax, s = c.info(c.ins[0]), c.shape(c.ins[0])
    if ax == OPAQUE or s is None:
        return [c.uniform(OPAQUE)]
    if c.op in ("ArgMax", "ArgMin"):
        axes = [c.attrs.get("axis", 0)]
    else:
        axes = c.axes_operand(1)
        if axes is None:
            return [c.uniform(OPAQUE)]
        if not axes and not c.attrs.get("noop_with_empty_axes", 0):
            axes = list(range(len(s)))
    axes = {_norm(a, len(s)) for a in axes}
    if ax.axis in axes:
        c.fail("reduces over the batch dim")
    keep = c.attrs.get("keepdims", 1)
    pos = ax.axis if keep else ax.axis - sum(1 for a in axes if a < ax.axis)
    return [_Out({c.outs[0]: BatchAxis(pos, ax.outer)})]


def _rule_axis(c: _Node) -> list[_Out]:
    """Softmax-like ops, LayerNormalization, RMSNormalization, TopK, CumSum: the batch must stay off their axis."""
    ax, s = c.info(c.ins[0]), c.shape(c.ins[0])
    if ax == OPAQUE or s is None:
        return [c.uniform(OPAQUE)]
    if any(c.info(i) is not None for i in c.ins[1:] if i):
        c.fail("a parameter input carries the batch")
    if c.op == "CumSum":
        v = c.const(1)
        if v is None:
            return [c.uniform(OPAQUE)]
        axis = _norm(int(np.asarray(v).reshape(-1)[0]), len(s))
    else:
        legacy = c.op in ("Softmax", "LogSoftmax", "Hardmax") and c.f.opset < 13
        axis = _norm(c.attrs.get("axis", 1 if legacy else -1), len(s))
        if legacy or c.op in ("LayerNormalization", "RMSNormalization"):
            if ax.axis >= axis:
                c.fail(f"normalizes over dims {axis}.. which hold the batch (dim {ax.axis})")
            return [c.uniform(ax)]
    if ax.axis == axis:
        c.fail(f"works along the batch dim {axis}")
    return [c.uniform(ax)]


def _rule_pad(c: _Node) -> list[_Out]:
    ax, s = c.info(c.ins[0]), c.shape(c.ins[0])
    pads = c.attrs.get("pads") if "pads" in c.attrs else c.const(1)
    axes = c.axes_operand(3) if len(c.ins) > 3 and c.ins[3] else list(range(len(s or ())))
    if ax == OPAQUE or s is None or pads is None or axes is None:
        return [c.uniform(OPAQUE)]
    pads = [int(p) for p in np.asarray(pads).reshape(-1)]
    n = len(axes)
    for k, a in enumerate(axes):
        if _norm(a, len(s)) == ax.axis and (pads[k] or pads[k + n]):
            c.fail("pads the batch dim")
    return [c.uniform(ax)]


def _rule_resize(c: _Node) -> list[_Out]:
    ax, s, y = c.info(c.ins[0]), c.shape(c.ins[0]), c.outs[0]
    if ax == OPAQUE or s is None or c.shape(y) is None:
        return [c.uniform(OPAQUE)]
    if c.shape(y)[ax.axis] != s[ax.axis]:
        c.fail("resizes the batch dim")
    out = _Out({y: ax})
    slot = 3 if c.op == "Resize" else None
    sizes = c.const(slot) if slot is not None and len(c.ins) > 3 and c.ins[3] else None
    if sizes is not None and len(sizes):
        axes = c.attrs.get("axes", list(range(len(s))))
        for k, a in enumerate(axes):
            if _norm(a, len(s)) == ax.axis:
                new = np.array(sizes, copy=True)
                new[k] = c.f.rebound(y, ax)
                out.rewrites.append(_Rewrite(c.idx, 3, "const", new))
    return [out]


def _rule_rnn(c: _Node) -> list[_Out]:
    """LSTM/GRU/RNN: X is [seq, batch, input] (layout 0) or [batch, seq, input] (layout 1); Y
    [seq, dirs, batch, hidden] or [batch, seq, dirs, hidden]; Y_h/Y_c [dirs, batch, h] or [batch, dirs, h]."""
    ax = c.info(c.ins[0])
    if ax == OPAQUE:
        return [c.uniform(OPAQUE)]
    layout = c.attrs.get("layout", 0)
    if ax is None or ax.axis != (0 if layout else 1):
        c.fail(f"the batch is on dim {ax.axis if ax else '?'} of X, layout {layout} needs it on dim {0 if layout else 1}")
    state_ax = BatchAxis(0 if layout else 1, ax.outer)
    out = _Out({})
    for k, o in enumerate(c.node.output):
        if o:
            out.infos[o] = BatchAxis(0, ax.outer) if layout else (BatchAxis(2, ax.outer) if k == 0 else state_ax)
    for slot in (4, 5, 6):  # sequence_lens [batch], initial_h, initial_c
        if slot < len(c.ins) and c.ins[slot] and c.info(c.ins[slot]) is None:
            out.add(c.carry(c.ins[slot], BatchAxis(0, ax.outer) if slot == 4 else state_ax))
    return [out]


def _rule_generic(c: _Node) -> list[_Out]:
    """An op without a rule: an output shaped like a batch-carrying input carries the batch alike,
    any other is opaque (the final shape check still covers what follows)."""
    carrying = [(i, ax) for i, ax in _carrying(c) if ax != OPAQUE]
    out = _Out({})
    for o in c.outs:
        same = [ax for i, ax in carrying if c.shape(i) is not None and c.shape(i) == c.shape(o)]
        out.infos[o] = same[0] if same else OPAQUE
    return [out]


_RULES = {"MatMul": _rule_matmul, "Gemm": _rule_gemm, "Reshape": _rule_reshape, "Flatten": _rule_reshape,
          "Transpose": _rule_transpose, "Squeeze": _rule_squeeze, "Unsqueeze": _rule_squeeze,
          "Concat": _rule_concat, "Split": _rule_split, "Slice": _rule_slice, "Gather": _rule_gather,
          "GatherElements": _rule_gather_elements, "GatherND": _rule_gather_nd, "Expand": _rule_expand,
          "Tile": _rule_tile, "Pad": _rule_pad, "Resize": _rule_resize, "Upsample": _rule_resize,
          "LSTM": _rule_rnn, "GRU": _rule_rnn, "RNN": _rule_rnn,
          "Softmax": _rule_axis, "LogSoftmax": _rule_axis, "Hardmax": _rule_axis, "CumSum": _rule_axis,
          "LayerNormalization": _rule_axis, "RMSNormalization": _rule_axis, "TopK": _rule_axis}
_RULES.update({op: _rule_unary for op in _UNARY})
_RULES.update({op: _rule_elementwise for op in _ELEMENTWISE})
_RULES.update({op: _rule_dim0 for op in _DIM0})
_RULES.update({op: _rule_reduce for op in _REDUCE})


# ----------------------------------------------------------- static producers made to carry it

def _force(c: _Node) -> _Out:
    """A static node whose output must carry the batch (a need found in an earlier pass): rewrite
    its shape operand, or make its inputs carry the batch in turn."""
    if len(c.want) != 1 or c.outs[0] not in c.want:
        raise _Unsafe(f"node {c.node.name!r} ({c.op}): its outputs would have to carry the batch")
    y, ax = c.outs[0], c.want[c.outs[0]]
    out = _Out({y: ax})
    sy, x = c.shape(y), c.ins[0] if c.ins else ""
    sx = c.shape(x)
    if c.op in _UNARY:
        return out.add(c.carry(x, ax))
    if c.op in _ELEMENTWISE or c.op == "Concat":
        hits = [i for i in dict.fromkeys(c.ins) if i and c.shape(i) is not None
                and ax.axis - (len(sy) - len(c.shape(i))) >= 0
                and c.shape(i)[ax.axis - (len(sy) - len(c.shape(i)))] == sy[ax.axis]]
        for i in hits:
            out.add(c.carry(i, BatchAxis(ax.axis - (len(sy) - len(c.shape(i))), ax.outer)))
        if hits:
            return out
    elif c.op == "Transpose":
        perm = [int(p) for p in c.attrs.get("perm", list(range(len(sy)))[::-1])]
        return out.add(c.carry(x, BatchAxis(perm[ax.axis], ax.outer)))
    elif c.op in ("Unsqueeze", "Squeeze", "Reshape", "Flatten") and sx is not None:
        back = _reshape_candidates(c.f, sy, ax, sx)
        if back:
            if c.op == "Reshape":
                out.rewrites += _rule_reshape_target(c, sy, ax)
            return out.add(c.carry(x, back[0]))
    elif c.op in ("Expand", "Tile", "ConstantOfShape", "Slice") and sy is not None:
        return out.add(_force_shape_op(c, x, sx, y, sy, ax))
    elif c.op in ("Gather", "GatherElements") and sx is not None:
        return out.add(_force_gather(c, x, sx, ax))
    raise _Unsafe(f"node {c.node.name!r} ({c.op}): its output would have to carry the batch on dim {ax.axis}")


def _rule_reshape_target(c: _Node, sy: tuple, ax: BatchAxis) -> list[_Rewrite]:
    target = c.const(1)
    if target is None or int(target[ax.axis]) == -1:
        return []
    new = np.array(target, copy=True)
    new[ax.axis] = c.f.rebound(c.outs[0], ax)
    return [_Rewrite(c.idx, 1, "const", new)]


def _force_shape_op(c: _Node, x: str, sx, y: str, sy: tuple, ax: BatchAxis) -> _Out:
    """Expand / Tile / ConstantOfShape / Slice of static data whose output must carry the batch."""
    full, D = sy[ax.axis], c.f.rebound(y, ax)
    px = ax.axis - (len(sy) - len(sx)) if sx is not None else -1
    if c.op == "Slice":
        spec = _slice_spec(c)
        if spec is None:
            raise _Unsafe(f"node {c.node.name!r} (Slice): its bounds are computed at run time")
        starts, ends, axes, steps, slots = spec
        k = next((k for k, a in enumerate(axes) if _norm(a, len(sx)) == ax.axis), None)
        if k is None:
            return c.carry(x, ax)
        s = starts[k] + sx[ax.axis] if starts[k] < 0 else starts[k]
        if steps[k] != 1 or s + D > sx[ax.axis]:
            raise _Unsafe(f"node {c.node.name!r} (Slice): slices {full} rows of a tensor of {sx[ax.axis]}, "
                          f"{D} are needed at the new batch")
        new_ends = list(ends)
        new_ends[k] = s + D
        return _Out({}, _slice_rewrites(c, slots, (starts, starts), (ends, new_ends)))
    slot = 1 if c.op in ("Expand", "Tile") else 0
    v = c.const(slot)
    if v is None:
        if c.ins[slot] in c.f.static:
            raise _Unsafe(f"node {c.node.name!r} ({c.op}): its shape operand is not a constant")
        return _Out({})  # computed from shapes at run time: recomputed at the new batch
    pos = ax.axis - (len(sy) - len(v)) if c.op == "Expand" else ax.axis
    xd = sx[px] if px >= 0 else 1
    inner = full // (ax.outer * c.f.b0)
    if c.op == "ConstantOfShape":
        return _Out({}, _entry(c, slot, v, pos, D))
    if xd == 1 and pos >= 0:  # the shape operand expands or repeats a single row: give it the batch
        return _Out({}, _entry(c, slot, v, pos, D))
    if c.op == "Tile" and inner % xd == 0:
        return _Out({}, _entry(c, slot, v, pos, D // xd))
    if xd == full:  # the input already has the batch's extent: it carries the batch itself
        out = c.carry(x, BatchAxis(px, ax.outer))
        if c.op == "Expand" and pos >= 0 and int(v[pos]) == full > 1:
            out.rewrites += _entry(c, slot, v, pos, D)
        return out
    raise _Unsafe(f"node {c.node.name!r} ({c.op}): cannot give its output {D} rows on dim {ax.axis}")


def _entry(c: _Node, slot: int, v: np.ndarray, pos: int, value: int) -> list[_Rewrite]:
    new = np.array(v, copy=True)
    new[pos] = value
    return [_Rewrite(c.idx, slot, "const", new)]


def _force_gather(c: _Node, x: str, sx: tuple, ax: BatchAxis) -> _Out:
    idx = c.ins[1]
    si = c.shape(idx) or ()
    axis = _norm(c.attrs.get("axis", 0), len(sx))
    if c.op == "GatherElements":
        out = c.carry(idx, ax)
        if sx[ax.axis] == c.shape(c.outs[0])[ax.axis]:
            out.add(c.carry(x, ax))
        return out
    if axis <= ax.axis < axis + len(si):
        return c.carry(idx, BatchAxis(ax.axis - axis, ax.outer))
    return c.carry(x, BatchAxis(ax.axis if ax.axis < axis else ax.axis - len(si) + 1, ax.outer))


def _rule(c: _Node) -> list[_Out]:
    if not c.outs:
        return [_Out({})]
    if all(c.info(i) is None for i in c.ins if i):
        return [_force(c)] if c.want else [c.uniform(None)]
    if c.op in ("Shape", "Size"):
        return [_rule_shape_of(c)]
    if any(isinstance(c.info(i), ShapeValue) for i in c.ins if i):
        out = _rule_shape_values(c)
        if out is not None:
            return [out]
    rule = _RULES.get(c.op, _rule_generic) if c.node.domain in ("", "ai.onnx") else _rule_generic
    outs = rule(c)
    if c.want:
        outs = [o for o in outs if all(o.infos.get(t) == ax for t, ax in c.want.items())]
        if not outs:
            c.fail("cannot carry the batch where a later node needs it")
    return outs


# ------------------------------------------------------- shapes computed at run time (Shape)

def _rule_shape_of(c: _Node) -> _Out:
    ax, r = c.info(c.ins[0]), c.rank(c.ins[0])
    if ax is None:
        return c.uniform(None)
    if ax == OPAQUE or isinstance(ax, ShapeValue) or r is None or c.op == "Size":
        return c.uniform(OPAQUE)
    elems = [None] * r
    elems[ax.axis] = ax.outer
    start, end = _norm(c.attrs.get("start", 0), r), c.attrs.get("end", r)
    end = min(r, _norm(end, r))
    return _Out({c.outs[0]: ShapeValue(tuple(elems[max(0, start):end]))})


def _rule_shape_values(c: _Node) -> _Out | None:
    """Arithmetic on shape values (Gather/Concat/Slice/Unsqueeze/Cast of ``Shape`` outputs) and the
    ops that take a shape from them (Expand, ConstantOfShape, Reshape, Tile, Range): the batch is where
    the value holds it; anything else is opaque. None: an op on batch-carrying data whose shape
    operands do not depend on the batch (its usual rule applies, with their values at b0)."""
    sv = [c.info(i) if isinstance(c.info(i), ShapeValue) else None for i in c.ins]
    x_ax = c.info(c.ins[0])
    out_sv = _shape_value_op(c, sv)
    if out_sv is not None:
        return c.uniform(out_sv)
    if sv[0] is None and not any(s.batch_positions() for s in sv if s is not None) and x_ax is not None:
        # shape operands that do not depend on the batch: their values at b0 hold at any batch
        return None
    if c.op in ("Expand", "ConstantOfShape", "Tile", "Range", "Reshape") and not isinstance(x_ax, ShapeValue):
        shape_sv = sv[1] if c.op in ("Expand", "Tile", "Reshape", "Range") else sv[0]
        if shape_sv is None or (x_ax is not None and c.op != "Reshape"):
            return c.uniform(OPAQUE)
        pos = shape_sv.batch_positions()
        R = c.rank(c.outs[0])
        if R is None or len(pos) > 1:
            return c.uniform(OPAQUE)
        if c.op == "Reshape":
            if x_ax is None or x_ax == OPAQUE:
                return c.uniform(OPAQUE)
            cands = _reshape_candidates(c.f, c.shape(c.ins[0]), x_ax, c.shape(c.outs[0]))
            fit = [a for a in cands if not pos or a.axis == pos[0]]
            if not fit:
                c.fail("its shape computed at run time puts the batch where the data cannot hold it")
            return _Out({c.outs[0]: fit[0]})
        if not pos:
            return c.uniform(None)
        axis = 0 if c.op == "Range" else pos[0] + R - len(shape_sv.elems)
        return _Out({c.outs[0]: BatchAxis(axis, shape_sv.elems[pos[0]])})
    return c.uniform(OPAQUE)


def _shape_value_op(c: _Node, sv: list) -> ShapeValue | None:
    """The shape value an op computes from shape values and constants, or None."""
    op, a = c.op, sv[0]
    y = c.shape(c.outs[0]) if c.outs else None
    if y is not None and len(y) <= 1 and all(
            (s is not None and not s.batch_positions()) or (s is None and (not i or i in c.f.static))
            for s, i in zip(sv, c.ins)):  # arithmetic on values that do not depend on the batch
        return ShapeValue((None,) * (y[0] if y else 1), scalar=not y)
    if op in ("Cast", "Identity") and a is not None:
        return a
    if op in ("Mul", "Div", "Floor", "Ceil") and a is not None and all(
            s is None and (c.const(k) is not None and np.asarray(c.const(k)).size == 1)
            for k, s in enumerate(sv[1:], 1)):
        return a
    if op == "Gather" and a is not None and c.attrs.get("axis", 0) == 0 and c.const(1) is not None:
        idx = np.asarray(c.const(1))
        picked = tuple(a.elems[int(k)] for k in idx.reshape(-1))
        return ShapeValue(picked, scalar=idx.ndim == 0)
    if op == "Unsqueeze" and a is not None and a.scalar:
        return ShapeValue(a.elems)
    if op in ("Squeeze", "Reshape") and a is not None and len(a.elems) == 1:
        return ShapeValue(a.elems, scalar=c.rank(c.outs[0]) == 0)
    if op == "Concat" and c.attrs.get("axis", 0) in (0, -1):
        elems = []
        for k, s in enumerate(sv):
            if s is not None:
                elems += list(s.elems)
            elif c.const(k) is not None:
                elems += [None] * np.asarray(c.const(k)).size
            else:
                return None
        return ShapeValue(tuple(elems))
    if op == "Slice" and a is not None and not a.scalar:
        spec = _slice_spec(c)
        if spec is None or any(_norm(x, 1) != 0 for x in spec[2]):
            return None
        return ShapeValue(tuple(a.elems[slice(spec[0][0], spec[1][0], spec[3][0])]))
    return None


# ------------------------------------------------------------------------------------ search

def _apply(st: _State, out: _Out) -> None:
    st.info.update(out.infos)
    st.rewrites += out.rewrites
    st.needs.update(out.needs)


def _search(f: _Facts, start: dict, seeds: dict) -> _State:
    """Depth-first over the ranked candidates of ambiguous nodes; the first consistent assignment
    in graph order. Raises :class:`_Unsafe` naming the conflict that got furthest."""
    stack = [(0, _State(dict(start), [], {}), None)]
    budget, deepest = _SEARCH_LIMIT, (-1, "")
    while stack:
        idx, st, pending = stack.pop()
        if pending is not None:
            _apply(st, pending)
            idx += 1
        while idx < len(f.nodes):
            budget -= 1
            if budget < 0:
                raise _Unsafe(f"no consistent batch dims found within {_SEARCH_LIMIT} steps "
                              f"(last conflict: {deepest[1]})")
            try:
                outs = _rule(_Node(f, st, idx, seeds))
            except _Conflict as e:
                deepest = max(deepest, (idx, str(e)), key=lambda t: t[0])
                break
            stack.extend((idx, st.copy(), alt) for alt in reversed(outs[1:]))
            _apply(st, outs[0])
            idx += 1
        else:
            return st
    raise _Unsafe(deepest[1] or "no consistent assignment of batch dims")


def _solve(f: _Facts, start: dict) -> _State:
    """Search, then search again with the static tensors found to need the batch as seeds, until
    no new need appears."""
    seeds: dict = {}
    for _ in range(64):
        st = _search(f, start, seeds)
        new = {t: ax for t, ax in st.needs.items() if seeds.get(t) != ax}
        if not new:
            return st
        for t, ax in new.items():
            if t in seeds:
                raise _Unsafe(f"tensor {t!r} would carry the batch on dims {seeds[t].axis} and {ax.axis}")
        seeds.update(new)
    raise _Unsafe("the batch dims of the static tensors did not settle after 64 passes")


# ---------------------------------------------------------------------------------- the plan

def input_batch_axis(dims: list[int], batch_dim: int | None) -> int:
    """The batch dim of a fixed-shape input: ``batch_dim`` if given, else its first dim of extent 1,
    else dim 0 (the rule :func:`benanza.processing.model.bind_batch` uses)."""
    if batch_dim is not None:
        return batch_dim
    return next((i for i, d in enumerate(dims) if d == 1), 0)


@dataclass
class Rebinding:
    """What rebinding a fixed-batch model from ``b0`` to ``batch`` changes: the batch axis of every
    tensor (``info``: BatchAxis, None for no batch, OPAQUE), its shape at ``b0`` (``shapes``), the
    operand rewrites, and the node names for notices and errors."""

    b0: int
    batch: int
    info: dict
    shapes: dict
    rewrites: list
    order: list = field(default_factory=list)   # (node name, op, outputs) in graph order

    def expected(self, name: str) -> tuple | None:
        """The shape ``name`` must have at the new batch (None: not predicted)."""
        s, ax = self.shapes.get(name), self.info.get(name, OPAQUE)
        if s is None or ax == OPAQUE:
            return None
        if ax is None or isinstance(ax, ShapeValue):
            return tuple(s)
        inner = s[ax.axis] // (ax.outer * self.b0)
        return tuple(s[:ax.axis]) + (ax.outer * self.batch * inner,) + tuple(s[ax.axis + 1:])

    def apply(self, model: onnx.ModelProto, weights: set) -> list[str]:
        """Rewrite ``model`` in place (constants cloned per consumer, weights re-declared, attributes
        set); add new weight names to ``weights``; return the notices."""
        g = model.graph
        made: dict = {}
        taken = {t.name for t in g.initializer} | {i.name for i in g.input} | {o for n in g.node for o in n.output}
        dtypes = {t.name: t.data_type for t in g.initializer} | {i.name: i.type.tensor_type.elem_type for i in g.input}
        touched, tiled = [], []
        for rw in self.rewrites:
            node = g.node[rw.node]
            if rw.kind == "attr":
                for a in node.attribute:
                    if a.name == rw.attr:
                        a.CopyFrom(helper.make_attribute(rw.attr, rw.value))
            else:
                orig = node.input[rw.slot]
                key = (orig, rw.kind, rw.value.tobytes() if rw.kind == "const" else rw.value)
                if key not in made:
                    made[key] = _fresh(f"{orig}.batch{self.batch}", taken)
                    if rw.kind == "const":
                        g.initializer.append(numpy_helper.from_array(rw.value, made[key]))
                    else:
                        g.input.append(helper.make_tensor_value_info(made[key], dtypes.get(orig, 1), list(rw.value)))
                        weights.add(made[key])
                    if rw.tiled:
                        tiled.append(orig)
                node.input[rw.slot] = made[key]
            touched.append(f"{node.name!r} ({node.op_type})")
        if not touched:
            return []  # shapes computed at run time: binding the input is all it takes
        return [self._notice(list(dict.fromkeys(touched)), list(dict.fromkeys(tiled)))]

    def _notice(self, touched: list, tiled: list) -> str:
        def names(xs):
            return ", ".join(xs[:8]) + (f" and {len(xs) - 8} more" if len(xs) > 8 else "")
        text = (f"fixed batch {self.b0} rebound to {self.batch}: the batch constants of "
                f"{len(touched)} nodes rewritten: {names(touched)}")
        if tiled:
            text += f"; resized over the batch: {names([repr(t) for t in tiled])}"
        return text

    def verify(self, model: onnx.ModelProto) -> None:
        """Check every tensor's shape after inference at the new batch against the prediction;
        raise a one-line :class:`ModelError` naming the first node whose output differs."""

        got = inferred_shapes(model)
        for name, op, outs in self.order:
            for o in outs:
                exp = self.expected(o)
                if exp is not None and got.get(o) is not None and tuple(got[o]) != exp:
                    raise ModelError(
                        f"node {name!r} ({op}): output {o!r} is {list(got[o])} at batch {self.batch}, "
                        f"{list(exp)} expected from the exported batch {self.b0} (a constant fixes the "
                        f"exported batch where benanza could not rebind it); {HINT}")

    def explain(self, err: ModelError) -> ModelError:
        """``err`` (inference or folding failed after rebinding) with the rebinding and the hint."""
        return ModelError(f"{err} (after rebinding the fixed batch {self.b0} to {self.batch}); {HINT}")


def _fresh(name: str, taken: set) -> str:
    k, out = 0, name
    while out in taken:
        k += 1
        out = f"{name}.{k}"
    taken.add(out)
    return out


def plan(model: onnx.ModelProto, batch: int, weights: set, batch_dim: int | None = None) -> Rebinding | None:
    """The rebinding of a fixed-batch ``model`` (weights already graph inputs) to ``batch``, or None
    when no rebinding is needed: a data input has a symbolic dim (a dynamic-batch export, left as
    it is) or the exported batch equals ``batch``. Raises :class:`ModelError` (one line, naming
    the node, with the hint to export with a dynamic batch) when it cannot be done safely."""
    data = [vi for vi in model.graph.input if vi.name not in weights]
    start, b0s = {}, set()
    for vi in data:
        ds = list(vi.type.tensor_type.shape.dim)
        if any(not d.HasField("dim_value") for d in ds):
            return None
        if not ds:
            continue
        dims = [d.dim_value for d in ds]
        bd = input_batch_axis(dims, batch_dim)
        if bd >= len(dims):
            return None  # bind_batch reports the bad --batch-dim
        start[vi.name] = BatchAxis(bd)
        b0s.add(dims[bd])
    if not b0s or b0s == {batch} or batch <= 0:
        return None
    if len(b0s) > 1:
        raise ModelError(f"the inputs have different fixed batches {sorted(b0s)}; {HINT}")
    b0 = b0s.pop()
    f = _facts(model, weights, b0, batch)
    try:
        st = _solve(f, start)
    except (_Unsafe, _Conflict) as e:
        raise ModelError(f"cannot rebind the fixed batch {b0} to {batch}: {e}; {HINT}") from None
    order = [(n.name, n.op_type, [o for o in n.output if o]) for n in f.nodes]
    return Rebinding(b0=b0, batch=batch, info=st.info, shapes=f.shapes, rewrites=st.rewrites, order=order)
