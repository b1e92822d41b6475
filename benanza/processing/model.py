"""Model processor: ONNX graph -> layer graph of typed layer configs.

Steps (one function each): :func:`load_graph` reads the graph without weights;
:func:`bind_batch` fixes the batch dimension; :func:`infer_and_fold` runs ONNX shape inference and
folds the shape-computing subgraphs (Shape/Gather/Concat/... on constants) until every compute layer
has concrete shapes; :func:`process` maps the remaining nodes to :class:`Layer` objects with typed
configs (:mod:`benanza.kinds`), finds the fusion candidates by running the kinds' own patterns
(:func:`fusion_candidates`, :mod:`benanza.kinds.patterns`) and returns a :class:`ModelLayers`.

A model file is untrusted input: node and tensor names are kept as data and never interpreted.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import gc
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from google.protobuf.message import DecodeError

from benanza import kinds as L
from benanza.kinds.dropout import dropout_training, train_config as dropout_train_config
from benanza.kinds.onnx_map import FLOAT_TYPES, Unsupported, need, node_attrs
from benanza.kinds.patterns import Graph, passes
from benanza.errors import ModelError, UsageError, missing_file_reason
from benanza.processing.graph import (NONDETERMINISTIC_OPS, contrib_of, elem_types, eval_node, first_line,  # noqa: F401
                                      folded_values, has_data, infer_and_fold, infer_and_fold_shapes, infer_shapes,
                                      inferred_shapes, opset_of)
from benanza.processing.rebind import input_batch_axis
from benanza.processing.routing import balanced_twins, state_routing, with_routing
from benanza.lazy import LazyModule
onnx = LazyModule("onnx")  # imported where a model is read, not where cached layers are

#: ops that move no data in inference: they cost nothing and are reported as zero-cost layers
ZERO_COST_OPS = {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"}

@dataclass
class Layer:
    """One ONNX node that remains after folding.

    status: "benchmark" (has a config), "zero_cost" (moves no data) or "unsupported" (reason says
    why; its time is unknown and makes the lower bound incomplete). ``name`` is the ONNX node name,
    untrusted text. ``signature`` identifies equal layers for the unique counts.
    """

    index: int
    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    input_shapes: tuple[tuple[int, ...] | None, ...]
    output_shapes: tuple[tuple[int, ...] | None, ...]
    status: str
    config: L.LayerConfig | None = None
    reason: str = ""
    fusion: int | None = None  # index into ModelLayers.fusions when part of a fusion candidate
    static_inputs: tuple[str, ...] = ()  # inputs that are weights or constants
    #: the config of the layer's training-mode call where its inference call is free (a Dropout the
    #: model runs in inference draws its mask in training: :func:`benanza.kinds.dropout.train_config`)
    train_config: L.LayerConfig | None = None

    @property
    def key(self) -> str | None:
        return self.config.key if self.config is not None else None

    @functools.cached_property
    def signature(self) -> str:
        if self.config is not None:
            return self.config.key
        blob = json.dumps([self.op_type, self.input_shapes, self.output_shapes, self.reason])
        return f"{self.op_type.lower()}-{hashlib.sha256(blob.encode()).hexdigest()[:16]}"

    def to_dict(self) -> dict:
        return {
            "index": self.index, "name": self.name, "op": self.op_type, "status": self.status,
            "kind": self.config.kind if self.config else None, "key": self.key,
            "description": self.config.describe() if self.config else None,
            "input_shapes": [list(s) if s is not None else None for s in self.input_shapes],
            "output_shapes": [list(s) if s is not None else None for s in self.output_shapes],
            "flops": self.config.flops() if self.config else 0,
            "reason": self.reason or None, "fusion": self.fusion,
        }


@dataclass
class Fusion:
    """A fusion candidate: layers one library call can run together, found by a kind's pattern
    (:mod:`benanza.kinds.patterns`; the patterns and their order: :data:`benanza.kinds.PATTERNS`).
    ``layers`` are layer indices in graph order, the last one the pattern's output (for SwiGLU's gate
    and up pair: the up projection); ``config`` the fused call's config."""

    layers: tuple[int, ...]
    config: L.LayerConfig


@dataclass
class ModelLayers:
    """The layer graph of one model at one batch size.

    ``layers`` in topological order; ``edges`` maps a layer index to the indices of the layers it
    consumes (the DAG used for the critical path); ``folded`` counts the folded nodes by op type.
    """

    model: str
    path: str
    sha256: str
    batch: int
    dtype: str
    opset: int
    layers: list[Layer]
    edges: dict[int, list[int]]
    folded: dict[str, int]
    fusions: list[Fusion] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    def benchmarked(self) -> list[Layer]:
        return [ly for ly in self.layers if ly.status == "benchmark"]

    def unique_configs(self) -> dict[str, L.LayerConfig]:
        """Unique layer configs (benchmarked layers, fusion candidates, :func:`balanced_twins`), by key, in graph order."""
        out: dict[str, L.LayerConfig] = {}
        for ly in self.benchmarked():
            out.setdefault(ly.config.key, ly.config)
        for cfg in [f.config for f in self.fusions] + balanced_twins(self.benchmarked()):
            out.setdefault(cfg.key, cfg)
        return out

    def by_type(self) -> dict[str, dict[str, int]]:
        """``{op: {"count": layers, "unique": unique layers}}`` over all layers (not folded nodes)."""
        count: dict[str, int] = collections.Counter()
        sigs: dict[str, set] = collections.defaultdict(set)
        for ly in self.layers:
            count[ly.op_type] += 1
            sigs[ly.op_type].add(ly.signature)
        return {op: {"count": count[op], "unique": len(sigs[op])} for op in sorted(count)}

    def unsupported(self) -> dict[str, int]:
        """``{op: n}`` of layers that cannot be benchmarked."""
        c = collections.Counter(ly.op_type for ly in self.layers if ly.status == "unsupported")
        return dict(sorted(c.items()))

    def coverage(self) -> dict:
        """How many compute layers (every layer but the zero-cost ones) get a benchmark:
        ``{"compute_layers", "benchmarked", "unsupported", "percent"}`` (100.0 when there are none)."""
        bench = len(self.benchmarked())
        unsup = sum(1 for ly in self.layers if ly.status == "unsupported")
        total = bench + unsup
        return {"compute_layers": total, "benchmarked": bench, "unsupported": unsup,
                "percent": round(100.0 * bench / total, 1) if total else 100.0}

    def summary(self) -> dict:
        """JSON-ready summary: counts by type, unsupported ops, coverage, fusion candidates (by
        :meth:`benanza.kinds.base.LayerConfig.fusion_label`), notices."""
        sigs = {ly.signature for ly in self.layers}
        return {
            "model": self.model, "sha256": self.sha256, "batch": self.batch, "dtype": self.dtype,
            "opset": self.opset,
            "layers": len(self.layers), "unique_layers": len(sigs),
            "benchmarked_layers": len(self.benchmarked()),
            "unique_benchmarked": len({ly.key for ly in self.benchmarked()}),
            "zero_cost_layers": sum(1 for ly in self.layers if ly.status == "zero_cost"),
            "by_type": self.by_type(), "unsupported": self.unsupported(),
            "folded": dict(sorted(self.folded.items())),
            "fusion_candidates": len(self.fusions),
            "fusions_by_kind": dict(sorted(collections.Counter(
                f.config.fusion_label() for f in self.fusions).items())),
            "coverage": self.coverage(),
            "complete": not self.unsupported(),
            "notices": list(self.notices),
        }


# --------------------------------------------------------------------------------------- loading

def load_graph(path: str | os.PathLike) -> tuple[onnx.ModelProto, str]:
    """Read an ONNX model's graph without external weights.

    Returns (model, sha256 of the file). Raises :class:`ModelError` for a missing, unreadable,
    non-ONNX or truncated file, or a model without a graph.
    """
    p = Path(path)
    reason = missing_file_reason(p)
    if reason:
        raise ModelError(f"{path}: {reason}")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise ModelError(f"{path}: cannot read: {e.strerror}") from None
    if not data:
        raise ModelError(f"{path}: empty file, not an ONNX model")
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        raise ModelError(f"{path}: not an ONNX model or truncated ({first_line(e)})") from None
    if model.ir_version <= 0 or not model.graph.node:
        raise ModelError(f"{path}: not an ONNX model or truncated (no ir_version or no graph nodes)")
    return model, hashlib.sha256(data).hexdigest()


def _weights_as_inputs(model: onnx.ModelProto) -> set[str]:
    """Replace initializers whose data is absent (external, not loaded) by typed graph inputs.

    Returns the names of all initializers (weights). Shapes stay known; the checker and shape
    inference then run without the weight file.
    """
    g = model.graph
    names = {t.name for t in g.initializer}
    keep, moved = [], []
    for t in g.initializer:
        (keep if has_data(t) else moved).append(t)
    if moved:
        input_names = {i.name for i in g.input}
        del g.initializer[:]
        g.initializer.extend(keep)
        for t in moved:
            if t.name not in input_names:
                g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    return names


# ---------------------------------------------------------------------------------- batch binding

def dim_expression(text: str, known: dict[str, int]) -> int | None:
    """The value of a symbolic dimension that is arithmetic of other dimensions (torch.export names a
    decode step's mask length ``past + 1`` after the cache's ``past``): integers, names bound in
    ``known``, ``+ - * //`` and parentheses, with a space or a number in it (``seq-len`` stays a
    name); None for anything else, a name not known, or a value below 1. Parsed with :mod:`ast`, never
    evaluated as Python."""
    import ast

    def ev(n):
        if isinstance(n, ast.Expression):
            return ev(n.body)
        if isinstance(n, ast.Constant) and type(n.value) is int:
            return n.value
        if isinstance(n, ast.Name) and n.id in known:
            return int(known[n.id])
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv)):
            a, b = ev(n.left), ev(n.right)
            if isinstance(n.op, ast.FloorDiv):
                if b == 0:
                    raise ValueError("division by zero")
                return a // b
            return a + b if isinstance(n.op, ast.Add) else a - b if isinstance(n.op, ast.Sub) else a * b
        raise ValueError("not a dimension expression")

    if len(text) > 200 or not any(c in text for c in "+-*/"):
        return None
    if not any(c.isspace() or c.isdigit() for c in text):
        return None  # "seq-len" is more likely a name than seq minus len: the user is asked for it
    try:
        v = ev(ast.parse(text, mode="eval"))
    except (SyntaxError, ValueError, RecursionError):
        return None
    return v if v >= 1 else None


def symbolic_dims(model: onnx.ModelProto, weights: set[str]) -> list[str]:
    """The symbolic dimensions of the model's data inputs (graph inputs not in ``weights``), each
    once, in the order the inputs and their axes list them (``?`` for a dynamic axis without a name):
    the first is the batch dimension, the one ``--batch`` binds (:func:`bind_batch`)."""
    out: list[str] = []
    for vi in model.graph.input:
        if vi.name in weights:
            continue
        for d in vi.type.tensor_type.shape.dim:
            if not d.HasField("dim_value") and (d.dim_param or "?") not in out:
                out.append(d.dim_param or "?")
    return out


def check_dims(model: onnx.ModelProto, weights: set[str], dims: dict[str, int] | None, batch: int,
               source: str = "the model") -> None:
    """``--dim NAME=VALUE`` against the model (``source``: its file name, for the message): every
    ``NAME`` must be a symbolic dimension of its data inputs (:func:`symbolic_dims`), and the batch
    dimension, which ``--batch`` binds, may be named only with ``batch`` as its value. The values
    themselves are checked by :func:`benanza.spec.parse_dims`. Raises :class:`UsageError` naming the
    model's symbolic dimensions, or the batch dimension and ``--batch``."""
    names = symbolic_dims(model, weights)
    named = [n for n in names if n != "?"]
    for name, value in (dims or {}).items():
        if name not in named:
            have = (f"its symbolic dimensions: {', '.join(named)}" if named
                    else "its inputs have no symbolic dimension; --batch sets the batch")
            raise UsageError(f"--dim {name}={value}: {source} has no dimension {name!r} ({have})")
    bp = names[0] if names else None
    if bp is not None and bp in (dims or {}) and dims[bp] != batch:
        raise UsageError(f"--dim {bp}={dims[bp]}: {bp} is the batch dimension, which --batch sets ({batch}); "
                         f"give --batch {dims[bp]} (or leave --dim {bp} out)")


def bind_batch(model: onnx.ModelProto, batch: int, weights: set[str],
               dims: dict[str, int] | None = None, batch_dim: int | None = None,
               source: str = "the model") -> list[str]:
    """Set the batch dimension of every graph input (in place); return notices for the user.

    The batch is the first symbolic dimension (``N``, ``batch_size``...). Where an input has no
    symbolic dimension, its batch dimension is ``batch_dim`` if given, else the first dimension of
    size 1 (dim 0 if none), and a fixed size other than ``batch`` is overridden with a notice.
    ``dims`` binds other symbolic dimensions by name; a dimension named by arithmetic of bound ones
    (``past + 1``) gets its value (:func:`dim_expression`). Raises :class:`UsageError` for batch <= 0,
    for a name in ``dims`` that is no symbolic dimension of the inputs or the batch dimension at
    another value than ``batch`` (:func:`check_dims`; ``source`` names the model there), and
    :class:`ModelError` for a symbolic dimension left unbound.
    """
    if batch <= 0:
        raise UsageError(f"batch size must be positive, got {batch}")
    dims = dict(dims or {})
    check_dims(model, weights, dims, batch, source)
    notices: list[str] = []
    g = model.graph
    data_inputs = [i for i in g.input if i.name not in weights]
    if not data_inputs:
        raise ModelError("model has no data input (every graph input is a weight)")
    if batch_dim is not None:
        for vi in data_inputs:
            rank = len(vi.type.tensor_type.shape.dim)
            if rank and not 0 <= batch_dim < rank:
                raise UsageError(f"--batch-dim {batch_dim} is out of range for input {vi.name!r} of rank {rank}")
    batch_param = None
    for vi in data_inputs:
        for d in vi.type.tensor_type.shape.dim:
            if not d.HasField("dim_value"):
                batch_param = d.dim_param or "?"
                break
        if batch_param is not None:
            break
    for vi in data_inputs:
        shp = vi.type.tensor_type.shape
        ds = list(shp.dim)
        if not ds:
            continue
        has_sym = any(not d.HasField("dim_value") for d in ds)
        if has_sym:
            for i, d in enumerate(ds):
                if d.HasField("dim_value"):
                    continue
                name = d.dim_param or "?"
                if name == batch_param and name not in dims:
                    d.Clear()
                    d.dim_value = batch
                elif name in dims:
                    d.Clear()
                    d.dim_value = dims[name]
                elif (derived := dim_expression(name, {**({batch_param: batch} if batch_param else {}), **dims})):
                    d.Clear()
                    d.dim_value = derived
                else:
                    raise ModelError(
                        f"input {vi.name!r} has an unbound symbolic dimension {name!r} at dim {i}; "
                        f"bind it with --dim {name}=VALUE")
        else:
            if batch_dim is not None:
                if batch_dim >= len(ds):
                    raise UsageError(f"--batch-dim {batch_dim} is out of range for input {vi.name!r} "
                                     f"of rank {len(ds)}")
                bd = batch_dim
            else:
                bd = input_batch_axis([d.dim_value for d in ds], None)
            old = ds[bd].dim_value
            if old != batch:
                notices.append(f"input {vi.name!r} has a fixed batch of {old} (dim {bd}); "
                               f"binding it to {batch}")
                ds[bd].dim_value = batch
    # inferred shapes of the exported batch are stale now: drop them and the outputs' dims
    del g.value_info[:]
    for o in g.output:
        if o.type.HasField("tensor_type"):
            o.type.tensor_type.ClearField("shape")
    return notices


# ------------------------------------------------- fixed-batch exports at another batch

def rebind_fixed_batch(model: onnx.ModelProto, batch: int, weights: set[str],
                       batch_dim: int | None = None) -> tuple["Rebinding | None", list[str]]:
    """Rewrite the constants of a fixed-batch export that hold its batch (Reshape targets, Expand/
    Tile/ConstantOfShape shapes, Slice bounds, Split sizes, expanded weights, mask indices) to
    ``batch``, in place, before :func:`bind_batch`; see :mod:`benanza.processing.rebind`.

    Returns (the rebinding or None, notices). None, and the model untouched, for a dynamic-batch
    export (a symbolic dim on a data input) or when ``batch`` is the exported batch. Raises a
    one-line :class:`ModelError` naming the node when it cannot be done safely.
    """
    from benanza.processing.rebind import plan

    rebinding = plan(model, batch, weights, batch_dim)
    return rebinding, (rebinding.apply(model, weights) if rebinding is not None else [])


def _infer_and_fold_rebound(model: onnx.ModelProto, weights: set[str], rebinding) -> tuple:
    """:func:`benanza.processing.graph.infer_and_fold_shapes` (model, folded, static names, shapes);
    after a rebinding, a failure says so with the hint to export with a dynamic batch, and every
    tensor's shape is checked against the rebinding's prediction."""
    if rebinding is None:
        return infer_and_fold_shapes(model, weights)
    try:
        out = infer_and_fold_shapes(model, weights)
    except ModelError as e:
        raise rebinding.explain(e) from None
    rebinding.verify(out[0])
    return out


# ------------------------------------------------------------------ shape inference and folding, mapping

#: the largest static tensor :meth:`_Ctx.static_value` evaluates (elements): a boolean attention mask
#: of 4,096 x 4,096 positions (16 MiB; its int64 position operands are vectors)
STATIC_VALUE_MAX_ELEMENTS = 1 << 24


class _Ctx:
    """What the op mappers may read: shapes, element types, constant values, the opset."""

    def __init__(self, model: onnx.ModelProto, static: set[str], shapes: dict | None = None):
        self.opset = opset_of(model)
        self.shapes = shapes if shapes is not None else inferred_shapes(model)
        self.types = elem_types(model)
        self.const = {t.name: t for t in model.graph.initializer}
        self.static = static
        #: the node that makes each tensor (a mapper may read how a mask was built: SDPA's Attention)
        self.producer = {o: n for n in model.graph.node for o in n.output if o}
        #: static tensors evaluated on demand (:meth:`static_value`)
        self._evaluated: dict[str, np.ndarray | None] = {}
        self._graph, self._dims = model.graph, None  # the graph's own dims, read on demand (:meth:`dims`)

    def shape(self, name: str) -> tuple[int, ...] | None:
        return self.shapes.get(name)

    def dims(self, name: str) -> tuple[int | None, ...] | None:
        if self.shapes.get(name) is not None:
            return self.shapes[name]
        if self._dims is None:  # read once, on the first tensor a mapper asks about
            g, t = self._graph, lambda vi: vi.type.tensor_type
            self._dims = {vi.name: tuple(d.dim_value if d.HasField("dim_value") else None for d in t(vi).shape.dim)
                          if t(vi).HasField("shape") else None for vi in [*g.input, *g.value_info, *g.output]}
        return self._dims.get(name)

    def value(self, name: str) -> np.ndarray | None:
        t = self.const.get(name)
        if t is None or not has_data(t):
            return None
        return onnx.numpy_helper.to_array(t)

    def static_value(self, name: str, max_elements: int = STATIC_VALUE_MAX_ELEMENTS) -> np.ndarray | None:
        """The value of static tensor ``name``: its constant (:meth:`value`), else evaluated now from
        its producers' static inputs (the ONNX reference evaluator) when every tensor on the way has at
        most ``max_elements`` elements. Folding keeps tensors of at most
        :data:`benanza.processing.graph.FOLD_MAX_ELEMENTS` (1 Mi) elements, so a mask built from
        positions at 2,048 tokens (2,048 x 2,048 = 4 Mi booleans: torch.export's causal triangle) is
        static but has no value; an attention mapper reads it here. None for a tensor that is not
        static, whose producer is nondeterministic, or that is larger; results are kept per tensor."""
        v = self.value(name)
        if v is not None or name not in self.static:
            return v
        if name in self._evaluated:
            return self._evaluated[name]
        self._evaluated[name] = None  # a cycle or a failure below leaves None
        node = self.producer.get(name)
        if node is None or any(self.shapes.get(o) is not None and math.prod(self.shapes[o]) > max_elements
                               for o in node.output if o):
            return None  # not evaluated: its inputs would be evaluated for nothing
        ins = {i: self.static_value(i, max_elements) for i in node.input if i}
        if any(x is None for x in ins.values()):
            return None
        self._evaluated.update(folded_values(node, self.shapes, ins, self.static, self.opset, max_elements) or {})
        return self._evaluated.get(name)


#: ONNX op type -> its kind's mapper, from the kinds' registry
_MAPPERS = {op: mapper for kind in L.REGISTRY.values() for op, mapper in kind.onnx.items()}

#: ops whose mapper checks the element types itself (the others must read a float tensor)
_TYPED_OPS = {op for kind in L.REGISTRY.values() for op in kind.typed_ops}


def _say_why_refused(mapper, node: onnx.NodeProto, ctx: _Ctx, attrs: dict) -> None:
    """Raise the Unsupported ``mapper`` gives a node of unknown output shape (TopK's run-time K), if any."""
    with contextlib.suppress(KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError):
        mapper(node, ctx, attrs)


def _map_node(node: onnx.NodeProto, ctx: _Ctx) -> tuple[str, L.LayerConfig | tuple | None, str]:
    """(status, config, reason) of one node; the config is a tuple of
    :class:`benanza.kinds.onnx_map.Part` for a contrib op that makes several library calls."""
    op = node.op_type
    contrib = contrib_of(node)
    if node.domain not in ("", "ai.onnx") and contrib is None:
        return "unsupported", None, f"operator {node.domain}.{op} is not benchmarked"
    attrs = node_attrs(node)
    shape_of = ctx.shapes.get
    out_shapes = [shape_of(o) for o in node.output if o]
    float_in = [ctx.types.get(i) for i in node.input[:1] if i]
    try:
        if op in ZERO_COST_OPS:
            if op == "Reshape":
                xs, ys = ctx.shape(node.input[0]), ctx.shape(node.output[0])
                if xs is not None and ys is not None and math.prod(xs) != math.prod(ys):
                    raise ModelError(f"node {node.name!r} (Reshape) reshapes {list(xs)} to {list(ys)}: "
                                     f"element counts differ (a target shape fixed to the exported batch?)")
            return "zero_cost", None, f"{op} moves no data"
        if op == "Dropout" and not dropout_training(node, ctx, attrs)[0]:
            return "zero_cost", None, "Dropout in inference is an identity"
        if op in ("Cast", "CastLike"):
            to = attrs.get("to") if op == "Cast" else ctx.types.get(node.input[1])
            if ctx.types.get(node.input[0]) == to:
                return "zero_cost", None, f"{op} to the same type is an identity"
        mapper = contrib.mapper if contrib is not None else _MAPPERS.get(op)
        if mapper is None:
            raise Unsupported(f"no benchmark for {op}")
        if any(s is None for s in out_shapes):
            _say_why_refused(mapper, node, ctx, attrs)  # a node its mapper refuses (a contrib op's rule gives none)
            raise Unsupported("output shape unknown after shape inference")
        if all(math.prod(s) == 0 for s in out_shapes):  # e.g. an expert the routing gives no rows: skipped
            return "zero_cost", None, "empty output"
        if float_in and float_in[0] not in FLOAT_TYPES and op not in _TYPED_OPS | {"Gather", "GatherND"}:
            raise Unsupported(f"input element type {onnx.TensorProto.DataType.Name(float_in[0])} is not float")
        got = mapper(node, ctx, attrs)
        cfg = got[-1].config if isinstance(got, tuple) else got  # the last part writes the first output
        # a Split's config writes its outputs packed in one buffer (CopyConfig)
        if math.prod(cfg.output_shape()) != (sum(map(math.prod, out_shapes)) if op == "Split" else math.prod(out_shapes[0])):
            raise Unsupported(f"config output {list(cfg.output_shape())} does not match the inferred "
                              f"{list(out_shapes[0])}")
        if isinstance(cfg, L.CopyConfig) and cfg.is_identity():
            return "zero_cost", None, f"{op} of the whole tensor is an identity"
        return "benchmark", got, ""
    except Unsupported as e:
        return "unsupported", None, str(e)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        return "unsupported", None, f"malformed {op} node: {type(e).__name__}: {first_line(e)}"


# ------------------------------------------------------------------------------ fusion candidates

#: every kind's fusion patterns (:data:`benanza.kinds.PATTERNS`) grouped into passes, in their order
#: (:mod:`benanza.kinds.patterns` documents it); raises at import when two share an order
PATTERN_PASSES = passes(L.PATTERNS)

#: what a pattern's function may raise on an odd graph: no candidate (an untrusted model never fails here)
_ODD_GRAPH = (KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError)


def _claim(layers: list[Layer], found: list[Fusion], hit) -> bool:
    """Record ``hit`` (layer indices, config) as the next candidate when all its layers are free."""
    chain, cfg = hit
    chain = tuple(sorted(set(chain)))
    if any(layers[i].fusion is not None for i in chain):
        return False
    for i in chain:
        layers[i].fusion = len(found)
    found.append(Fusion(layers=chain, config=cfg))
    return True


def _try(fn, *args):
    try:
        return fn(*args)
    except _ODD_GRAPH:
        return None


def fusion_candidates(layers: list[Layer], consumers: dict[str, list[int]], graph_outputs: set[str],
                      ctx: _Ctx) -> list[Fusion]:
    """The fusion candidates of the layer graph: every kind's pattern (:data:`PATTERN_PASSES`) run in
    its order, each pass walking the layers in graph order and offering each layer to its patterns by
    place until one claims it; a layer is in at most one candidate, numbered in the order found (the
    ``fusion`` of each of its layers). Then each candidate is offered to the patterns' ``extend`` (a
    decomposed norm takes in the residual Add before it). Names no fused kind: the patterns live with
    their kinds (:mod:`benanza.kinds.patterns`)."""
    graph = Graph(layers, consumers, graph_outputs, ctx)
    found: list[Fusion] = []
    for patterns in PATTERN_PASSES:
        for ly in layers:
            for pattern in patterns:
                hit = _try(pattern.find, graph, ly)
                if hit is not None and _claim(layers, found, hit):
                    break
    extends = [p.extend for p in L.PATTERNS if p.extend is not None]
    for j, f in enumerate(found):
        for extend in extends:
            hit = _try(extend, graph, f.layers, f.config)
            if hit is not None:
                add, cfg = hit
                add.fusion = j
                found[j] = Fusion(layers=tuple(sorted((add.index,) + tuple(f.layers))), config=cfg)
                break
    return found


#: the largest tensor dimension the libraries take: cuDNN's tensor descriptors and cuBLAS's m, n, k
#: are C ``int`` (cudnnSetTensorNdDescriptor's ``dimA``, cublasGemmEx), 2^31 - 1
MAX_DIM = 2**31 - 1
#: the most bytes one tensor may take: the largest GPU memory shipping (NVIDIA B300, 288 GB HBM3e,
#: datasheet), counted at 1 byte per element (FP8), so only what no GPU can hold is refused
MAX_TENSOR_BYTES = 288 * 10**9


@functools.lru_cache(maxsize=4096)
def _fits(shape: tuple) -> bool:
    """Every dim of ``shape`` at most :data:`MAX_DIM` and its elements at most :data:`MAX_TENSOR_BYTES`
    (a model has few distinct shapes: asked once each)."""
    n = 1
    for d in shape:
        if not isinstance(d, int) or d > MAX_DIM:
            return False
        n *= d if d > 0 else 1
    return n <= MAX_TENSOR_BYTES


def _check_sizes(path, ly: "Layer") -> None:
    """Refuse a layer whose tensors no library or GPU takes (:data:`MAX_DIM`, :data:`MAX_TENSOR_BYTES`):
    raises :class:`ModelError` naming the node."""
    for s in (*ly.input_shapes, *ly.output_shapes):
        if not s or _fits(s):
            continue
        big = [d for d in s if isinstance(d, int) and d > MAX_DIM]
        if big:
            raise ModelError(f"{path}: node {ly.name!r} ({ly.op_type}): dimension {big[0]} of shape "
                             f"{list(s)} is above 2^31 - 1, the largest cuDNN and cuBLAS take")
        n = 1
        for d in s:
            n *= d if isinstance(d, int) and d > 0 else 1
        if n > MAX_TENSOR_BYTES:
            raise ModelError(f"{path}: node {ly.name!r} ({ly.op_type}): a tensor of shape {list(s)} has {n:.3g} "
                             f"elements, more than any GPU holds ({MAX_TENSOR_BYTES / 1e9:.0f} GB at 1 byte each)")


#: the tag in the name of the tensor one part of a node of several calls writes for the next
#: (:func:`_part_layers`; the profile join follows it, ``benanza.profiles.join``)
PART_TENSOR = "::benanza-part"


def _part_layers(node: onnx.NodeProto, parts: tuple, data_ins: tuple[str, ...], start: int,
                 ins: list[str], static: set[str], shape_of) -> list[Layer]:
    """The layers of a node that makes several library calls (:class:`benanza.kinds.onnx_map.Part`), in order: the first reads
    the node's data inputs, each later one the tensor the one before wrote (named after the node's first
    output and the part, kept as data; it runs after the first part, so after every data input); each writes the node outputs its part
    names, the last the node's first output and every output no part names."""
    named = {i for p in parts for i in p.outputs}
    out, prev = [], ()
    for j, part in enumerate(parts):
        last = j == len(parts) - 1
        idx = sorted(set(part.outputs) | ({0} | set(range(len(node.output))) - named if last else set()))
        outs = tuple(node.output[i] for i in idx if i < len(node.output) and node.output[i])
        if not outs:
            outs = (f"{node.output[0]}{PART_TENSOR}{j}",)
        cfg = part.config
        inputs = prev if j else data_ins
        out.append(Layer(index=start + j, name=node.name, op_type=node.op_type, inputs=inputs, outputs=outs,
                         input_shapes=tuple(map(tuple, cfg.input_shapes())),
                         output_shapes=tuple(shape_of(o) or tuple(cfg.output_shape()) for o in outs),
                         status="benchmark", config=cfg,
                         static_inputs=tuple(i for i in ins if i in static)))
        prev = outs[:1]
    return out


def process(path: str | os.PathLike, batch: int, dims: dict[str, int] | None = None,
            batch_dim: int | None = None) -> ModelLayers:
    """Process one ONNX model at one batch size into its layer graph.

    Raises :class:`ModelError` for an unreadable or inconsistent model and :class:`UsageError` for
    a batch size <= 0. Unsupported ops never raise: they are layers with status "unsupported".
    Python's cyclic garbage collector waits meanwhile: processing makes a few objects per node and
    no reference cycles, and its passes over them took 10-20 % of a 100k-node graph's time.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _process(path, batch, dims, batch_dim)
    finally:
        if enabled:
            gc.enable()


#: the domain the checker sees a default-domain op onnx does not define under (:func:`_check_model`)
_UNCHECKED_DOMAIN = "benanza.unchecked"


def _check_model(model: onnx.ModelProto) -> None:
    """``onnx.checker.check_model``, which refuses a default-domain op it has no schema for: the ones a
    kind maps (ONNX Runtime registers ``SimplifiedLayerNormalization`` in the default domain) are
    checked meanwhile as ops of a domain the checker does not know, which it passes over; the model is
    left as it was. Raises what the checker raises."""
    moved = [n for n in model.graph.node if n.domain in ("", "ai.onnx") and contrib_of(n) is not None]
    if not moved:
        onnx.checker.check_model(model)
        return
    domains = [n.domain for n in moved]
    model.opset_import.append(onnx.helper.make_opsetid(_UNCHECKED_DOMAIN, 1))
    try:
        for n in moved:
            n.domain = _UNCHECKED_DOMAIN
        onnx.checker.check_model(model)
    finally:
        for n, d in zip(moved, domains):
            n.domain = d
        del model.opset_import[-1]


def _process(path, batch: int, dims: dict[str, int] | None, batch_dim: int | None) -> ModelLayers:
    model, digest = load_graph(path)
    newest = onnx.defs.onnx_opset_version()
    if opset_of(model) > newest:
        raise ModelError(f"{path}: opset {opset_of(model)} is newer than onnx {onnx.__version__} knows "
                         f"(opset {newest} at most): its operators' meaning is unknown here")
    weights = _weights_as_inputs(model)
    try:
        _check_model(model)
    except Exception as e:
        raise ModelError(f"{path}: invalid ONNX model: {first_line(e)}") from None
    check_dims(model, weights, dims, batch, Path(path).name)  # before any work on the graph
    rebinding, rebound = rebind_fixed_batch(model, batch, weights, batch_dim)
    notices = bind_batch(model, batch, weights, dims, batch_dim, Path(path).name) + rebound
    try:
        model, folded, static, shapes, plan = with_routing(_infer_and_fold_rebound(model, weights, rebinding), weights, notices)
    except ModelError as e:  # inference and folding name the node, not the file: say where
        raise ModelError(str(e) if str(e).startswith(f"{path}:") else f"{path}: {e}") from None
    ctx = _Ctx(model, static, shapes)
    g = model.graph
    producers: dict[str, int] = {}
    consumers: dict[str, list[int]] = collections.defaultdict(list)
    layers: list[Layer] = []
    dtype = None
    for vi in g.input:
        if vi.name not in weights:
            dtype = FLOAT_TYPES.get(vi.type.tensor_type.elem_type, dtype)
    shape_of = ctx.shapes.get
    for node in g.node:
        ins = [i for i in node.input if i]
        if node.op_type not in NONDETERMINISTIC_OPS and all(i in static for i in ins):
            folded[node.op_type] = folded.get(node.op_type, 0) + 1
            continue
        status, cfg, reason = _map_node(node, ctx)
        data_ins = tuple(i for i in ins if i not in static)
        if isinstance(cfg, tuple):  # a contrib op of several calls: one layer each
            for ly in _part_layers(node, cfg, data_ins, len(layers), ins, static, shape_of):
                _check_sizes(path, ly)
                for i in ly.inputs:
                    consumers[i].append(ly.index)
                for o in ly.outputs:
                    producers[o] = ly.index
                layers.append(ly)
            dtype = dtype or "float32"
            continue
        outs = tuple(o for o in node.output if o)
        ly = Layer(index=len(layers), name=node.name, op_type=node.op_type, inputs=data_ins, outputs=outs,
                   input_shapes=tuple(map(shape_of, ins)), output_shapes=tuple(map(shape_of, outs)),
                   status=status, config=cfg, reason=reason,
                   static_inputs=tuple(i for i in ins if i in static) if len(data_ins) < len(ins) else ())
        if status == "zero_cost" and node.op_type == "Dropout":
            ly.train_config = dropout_train_config(node, ctx, node_attrs(node))
        if cfg is not None and dtype is None:
            dtype = "float32"
        _check_sizes(path, ly)
        for i in data_ins:
            consumers[i].append(ly.index)
        for o in ly.outputs:
            producers[o] = ly.index
        layers.append(ly)
    if not layers:
        raise ModelError(f"{path}: the graph has no layers after constant folding")
    state_routing(layers, plan, batch, path, notices)
    edges = {ly.index: sorted({producers[i] for i in ly.inputs if i in producers}) for ly in layers}
    fusions = fusion_candidates(layers, consumers, {o.name for o in g.output}, ctx)
    return ModelLayers(model=Path(path).stem, path=str(path), sha256=digest, batch=batch,
                       dtype=dtype or "float32", opset=ctx.opset, layers=layers, edges=edges,
                       folded=dict(folded), fusions=fusions, notices=notices)


def parse_batches(text: str) -> list[int]:
    """Parse ``"1,32"`` into ``[1, 32]``. Raises :class:`UsageError` on a value <= 0 or not an int."""
    out = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        try:
            b = int(part)
        except ValueError:
            raise UsageError(f"batch size {part!r} is not an integer") from None
        if b <= 0:
            raise UsageError(f"batch size must be positive, got {b}")
        if b > MAX_DIM:
            raise UsageError(f"batch size {b} is above 2^31 - 1, the largest dimension cuDNN and cuBLAS take")
        if b not in out:
            out.append(b)
    if not out:
        raise UsageError("no batch size given")
    return out
