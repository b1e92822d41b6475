"""ONNX graph helpers shared by the model processor and the batch rebinding: shape inference
(onnx.shape_inference, strict mode, data propagation), constant folding of the shape-computing
subgraphs with ONNX's reference evaluator, and the graph facts both read (opset, element types,
whether an initializer carries its data).

A model file is untrusted input: node and tensor names are kept as data and never interpreted.
"""
from __future__ import annotations

import collections
import functools
import math

import numpy as np
from benanza.errors import ModelError
from benanza.lazy import LazyModule

onnx = LazyModule("onnx")
numpy_helper = LazyModule("onnx.numpy_helper")
shape_inference = LazyModule("onnx.shape_inference")

#: ops whose value depends only on constants and shapes are folded; these never are (random)
NONDETERMINISTIC_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                     "Multinomial", "Bernoulli"}


#: folding evaluates a node only if its output stays this small (elements)
FOLD_MAX_ELEMENTS = 1 << 20


def first_line(e: BaseException) -> str:
    """An exception's message as one line (ONNX's checker writes its node across lines: ``input 'b'
    of node:\\nname: n1 OpType: Add\\n is not output...``; the lines are joined, not cut), at most
    400 characters; the exception's type when it has no message."""
    s = " ".join(str(e).split())
    return (s[:397] + "...") if len(s) > 400 else (s or type(e).__name__)


def has_data(t: onnx.TensorProto) -> bool:
    if t.data_location == onnx.TensorProto.EXTERNAL:
        return False
    return bool(t.raw_data or t.float_data or t.int32_data or t.int64_data or t.double_data
                or t.uint64_data or t.string_data or math.prod(t.dims) == 0)


def inferred_shapes(model: onnx.ModelProto) -> dict[str, tuple[int, ...] | None]:
    """Every typed tensor's shape after inference: a tuple of ints, or None when a dim is symbolic
    or unknown (or the tensor has no shape); initializers by their dims."""
    out: dict[str, tuple[int, ...] | None] = {}
    g = model.graph
    for part in (g.input, g.value_info, g.output):
        for vi in part:
            tt = vi.type.tensor_type
            if not tt.HasField("shape"):
                out.setdefault(vi.name, None)
                continue
            dims = []
            for d in tt.shape.dim:
                if d.HasField("dim_value") and d.dim_value >= 0:
                    dims.append(int(d.dim_value))
                else:
                    dims = None
                    break
            out[vi.name] = tuple(dims) if dims is not None else None
    for t in g.initializer:
        out[t.name] = tuple(int(d) for d in t.dims)
    return out


def elem_types(model: onnx.ModelProto) -> dict[str, int]:
    g = model.graph
    out = {}
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        out[vi.name] = vi.type.tensor_type.elem_type
    for t in g.initializer:
        out[t.name] = t.data_type
    return out


def _onnx_infer(model: onnx.ModelProto) -> onnx.ModelProto:
    try:
        return shape_inference.infer_shapes(model, check_type=True, strict_mode=True, data_prop=True)
    except Exception as e:  # onnx raises InferenceError / ValidationError / RuntimeError
        raise ModelError(f"shape inference failed: {first_line(e)}") from None


def infer_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """onnx's shape inference (strict, with data propagation), and the output shapes of the operators
    onnx does not know that a kind maps (``Kind.contrib``: ONNX Runtime's contrib ops), each from its
    inputs by the op's own rule (:class:`benanza.kinds.onnx_map.ContribOp` ``shapes``); inference runs
    again after each round of such shapes, so the layers after those ops get shapes too (one round per
    contrib op on a chain at most). Raises :class:`ModelError` when onnx's inference fails."""
    model = _onnx_infer(model)
    nodes = contrib_nodes(model.graph)
    for _ in range(len(nodes)):
        if not _contrib_shapes(model, nodes):
            break
        model = _onnx_infer(model)
        nodes = contrib_nodes(model.graph)
    return model


@functools.cache
def contrib_ops() -> dict:
    """(domain, op type) -> :class:`benanza.kinds.onnx_map.ContribOp` of every kind in the registry."""
    from benanza.kinds import REGISTRY

    return {key: op for kind in REGISTRY.values() for key, op in kind.contrib.items()}


def contrib_of(node: onnx.NodeProto):
    """The :class:`benanza.kinds.onnx_map.ContribOp` that maps ``node``, or None: an op of another
    domain, or a default-domain op onnx does not define (onnx's own op of that name comes first)."""
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    op = contrib_ops().get((domain, node.op_type))
    return None if op is None or (domain == "" and onnx.defs.has(node.op_type)) else op


def contrib_nodes(g: onnx.GraphProto) -> list[onnx.NodeProto]:
    return [n for n in g.node if contrib_of(n) is not None]


class _RuleCtx:
    """What a contrib op's shape rule reads (:class:`benanza.kinds.onnx_map.MapContext`)."""

    def __init__(self, model: onnx.ModelProto):
        self.opset = opset_of(model)
        self.shapes = inferred_shapes(model)
        self.types = elem_types(model)
        self.const = {t.name: t for t in model.graph.initializer if has_data(t)}
        self.static = set(self.const)

    def shape(self, name: str):
        return self.shapes.get(name)

    def value(self, name: str):
        t = self.const.get(name)
        return None if t is None else numpy_helper.to_array(t)


def _contrib_shapes(model: onnx.ModelProto, nodes: list[onnx.NodeProto]) -> int:
    """Give each output of ``nodes`` that has no shape yet the shape of its op's rule; returns how many
    it gave (graph outputs get theirs in place, the others a value_info)."""
    from benanza.kinds.onnx_map import node_attrs

    ctx, g, added = _RuleCtx(model), model.graph, 0
    outputs = {o.name: o for o in g.output}
    for node in nodes:
        if all(ctx.shape(o) is not None for o in node.output if o):
            continue
        try:
            rules = contrib_of(node).shapes(node, ctx, node_attrs(node))
        except (KeyError, IndexError, TypeError, ValueError, ZeroDivisionError):
            continue  # a malformed node: its mapper says why
        for o, (shape, elem) in zip(node.output, rules):
            if not o or shape is None or ctx.shape(o) is not None:
                continue
            elem = elem or ctx.types.get(node.input[0], onnx.TensorProto.FLOAT)
            vi = onnx.helper.make_tensor_value_info(o, elem, [int(d) for d in shape])
            if o in outputs:
                outputs[o].CopyFrom(vi)
            else:
                g.value_info.append(vi)
            ctx.shapes[o], ctx.types[o] = tuple(int(d) for d in shape), elem
            added += 1
    return added


def opset_of(model: onnx.ModelProto) -> int:
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 1


def eval_node(node: onnx.NodeProto, values: list[np.ndarray], opset: int) -> list[np.ndarray]:
    from onnx.reference import ReferenceEvaluator

    ev = ReferenceEvaluator(node, opsets={"": opset})
    feeds = {name: v for name, v in zip(node.input, values) if name}
    return ev.run(None, feeds)


class _LazyConsts(dict):
    """Initializer values converted to numpy on first use: a model with its weights inline would
    otherwise convert every weight on every folding pass."""

    def __init__(self, tensors: dict[str, onnx.TensorProto]):
        super().__init__()
        self._tensors = tensors

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in self._tensors

    def __getitem__(self, name):
        if not dict.__contains__(self, name):
            dict.__setitem__(self, name, numpy_helper.to_array(self._tensors[name]))
        return dict.__getitem__(self, name)

    def names(self) -> set[str]:
        return set(self._tensors) | set(self.keys())


def infer_and_fold(model: onnx.ModelProto, weights: set[str]) -> tuple[onnx.ModelProto, dict[str, int], set[str]]:
    """Run shape inference and fold constant and shape-computing subgraphs until nothing changes.

    A node is folded when all its inputs are constants (initializers, Constant outputs, folded
    values) or weights, or when it is a Shape/Size of a tensor whose shape is known. Folded values
    that the remaining graph reads become initializers. Returns (model, folded op counts, names of
    tensors that are constant or weight-derived). Raises :class:`ModelError` if inference fails.
    """
    model, folded, static, _ = infer_and_fold_shapes(model, weights)
    return model, folded, static


def infer_and_fold_shapes(model: onnx.ModelProto, weights: set[str]) -> tuple:
    """:func:`infer_and_fold`, and the shapes of the returned model (:func:`inferred_shapes`, which
    its last pass computed: a 100k-node graph need not read them twice)."""
    opset = opset_of(model)
    folded: dict[str, int] = collections.Counter()
    for _ in range(64):
        model = infer_shapes(model)
        shapes = inferred_shapes(model)
        evaluated, drop = _fold_pass(model.graph, shapes, weights, opset)
        if not drop:
            break
        _replace_folded(model.graph, evaluated, drop, folded)
    else:
        raise ModelError("constant folding did not converge after 64 passes")
    return model, dict(folded), _static_names(model.graph, weights), shapes


def _fold_pass(g: onnx.GraphProto, shapes: dict, weights: set[str],
               opset: int) -> tuple[dict[str, np.ndarray], list[int]]:
    """One folding pass over ``g``'s nodes in order: the values of every output folded
    (:func:`folded_values`) and the indices of the folded nodes. A node that is not folded but
    reads only constants and weights (e.g. an Identity of a weight) makes its outputs static, so
    later nodes that read them fold too."""
    const = _LazyConsts({t.name: t for t in g.initializer if has_data(t)})
    static = set(weights) | const.names()
    evaluated: dict[str, np.ndarray] = {}
    drop: list[int] = []
    for idx, node in enumerate(g.node):
        vals = folded_values(node, shapes, const, static, opset)
        if vals is None:
            if node.op_type not in NONDETERMINISTIC_OPS and all(i in static for i in node.input if i):
                # weight-only preprocessing (e.g. Identity of a weight): folded, kept for its shapes
                static.update(o for o in node.output if o)
            continue
        for o, v in vals.items():
            evaluated[o] = v
            const[o] = v
            static.add(o)
        drop.append(idx)
    return evaluated, drop


def folded_values(node: onnx.NodeProto, shapes: dict, const, static: set[str], opset: int,
                  max_elements: int = FOLD_MAX_ELEMENTS) -> dict[str, np.ndarray] | None:
    """Output name -> value of ``node`` when it folds: a Constant; a Shape/Size of a tensor whose
    shape is known; a deterministic node whose inputs are all constants (``const``: name -> value,
    any mapping) and whose outputs have at most ``max_elements`` elements each (default
    :data:`FOLD_MAX_ELEMENTS`). None otherwise (and when evaluation fails). Raises
    :class:`ModelError` for a Constant that cannot be evaluated."""
    ins = [i for i in node.input if i]
    if node.op_type == "Constant":
        try:
            vals = eval_node(node, [], opset)
        except Exception as e:
            raise ModelError(f"node {node.name!r} (Constant): cannot evaluate: {first_line(e)}") from None
        return {node.output[0]: np.asarray(vals[0])}
    if node.op_type in ("Shape", "Size") and ins and shapes.get(ins[0]) is not None:
        return {node.output[0]: _shape_value(node, shapes[ins[0]])}
    if node.op_type in NONDETERMINISTIC_OPS or not all(i in static for i in ins):
        return None
    if not (ins and all(i in const for i in ins) and all(
            shapes.get(o) is None or math.prod(shapes[o]) <= max_elements for o in node.output)):
        return None
    try:
        vals = eval_node(node, [const[i] for i in node.input if i], opset)
    except Exception:
        return None
    if not all(np.asarray(v).size <= max_elements for v in vals):
        return None
    return {o: np.asarray(v) for o, v in zip(node.output, vals) if o}


def _shape_value(node: onnx.NodeProto, shape) -> np.ndarray:
    """The value of a Shape (its ``start``/``end`` attributes applied, clamped as ONNX specifies)
    or Size node of a tensor of the known ``shape``, as int64."""
    shp = np.array(shape, dtype=np.int64)
    if node.op_type == "Size":
        return np.array(int(np.prod(shp)), dtype=np.int64)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    r = len(shp)
    start = attrs.get("start", 0)
    end = attrs.get("end", r)
    start = max(0, min(r, start + r if start < 0 else start))
    end = max(0, min(r, end + r if end < 0 else end))
    return shp[start:end]


def _replace_folded(g: onnx.GraphProto, evaluated: dict[str, np.ndarray], drop: list[int],
                    folded: collections.Counter) -> None:
    """Remove the nodes ``drop`` from ``g`` (counting them by op type in ``folded``) and add the
    folded values the remaining graph or its outputs read as initializers."""
    dropped = set(drop)
    used = {i for n_i, n in enumerate(g.node) if n_i not in dropped for i in n.input}
    used |= {o.name for o in g.output}
    for idx in drop:
        folded[g.node[idx].op_type] += 1
    keep = [n for i, n in enumerate(g.node) if i not in dropped]
    del g.node[:]
    g.node.extend(keep)
    existing = {t.name for t in g.initializer}
    for name, val in evaluated.items():
        if name in used and name not in existing:
            g.initializer.append(numpy_helper.from_array(np.array(val, copy=True, order="C"), name))
    # value_info of folded outputs would be duplicated by the initializers
    vis = [vi for vi in g.value_info if vi.name not in evaluated]
    del g.value_info[:]
    g.value_info.extend(vis)


def _static_names(g: onnx.GraphProto, weights: set[str]) -> set[str]:
    """The names of the tensors that are constant or weight-derived in the folded graph ``g``:
    initializers, ``weights`` and the outputs of deterministic nodes that read only those."""
    static = set(weights) | {t.name for t in g.initializer}
    for node in g.node:
        ins = [i for i in node.input if i]
        if node.op_type not in NONDETERMINISTIC_OPS and all(i in static for i in ins):
            static.update(o for o in node.output if o)
    return static
