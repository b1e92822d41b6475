"""Model processor: ONNX graph -> layer graph of typed layer configs.

Steps (one function each): :func:`load_graph` reads the graph without weights;
:func:`bind_batch` fixes the batch dimension; :func:`infer_and_fold` runs ONNX shape inference and
folds the shape-computing subgraphs (Shape/Gather/Concat/... on constants) until every compute layer
has concrete shapes; :func:`process` maps the remaining nodes to :class:`Layer` objects with typed
configs (:mod:`benanza.kinds`) and returns a :class:`ModelLayers`.

A model file is untrusted input: node and tensor names are kept as data and never interpreted.
"""
from __future__ import annotations

import collections
import dataclasses
import errno
import functools
import gc
import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from benanza import kinds as L
from benanza.kinds.dropout import dropout_training, train_config as dropout_train_config
from benanza.kinds.onnx_map import FLOAT_TYPES, Unsupported, need, node_attrs
from benanza.kinds.sdpa import causal_mask_tensor
from benanza.processing import views as V
from benanza.errors import ModelError, UsageError
from benanza.processing.graph import (NONDETERMINISTIC_OPS, contrib_of, elem_types, eval_node, first_line,  # noqa: F401
                                      folded_values, has_data,
                                      infer_and_fold, infer_and_fold_shapes, infer_shapes, inferred_shapes, opset_of)
from benanza.processing.rebind import input_batch_axis

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
    """A fusion candidate: layers one library call can run together. Conv (+ bias) -> Relu
    (cudnnConvolutionBiasActivationForward, ConvBiasActConfig); attention MatMul -> [scale] ->
    [mask] -> Softmax -> MatMul (cuDNN SDPA, SdpaConfig); a decomposed LayerNorm (LayerNormConfig);
    a decomposed RMSNorm (RMSNormConfig); a decomposed rotary embedding (RotaryConfig);
    an erf-GELU of Div/Erf/Add/Mul/Mul (UnaryConfig gelu); Gemm/MatMul (+ bias Add) -> Relu / Gelu /
    erf-GELU (GemmActConfig: cuDNN graph matmul -> add -> act, cuBLASLt bias + activation
    epilogues); SwiGLU's gating Sigmoid/Mul/Mul (ElementwiseConfig swiglu) and its gate and up
    MatMuls of one input (one GemmConfig of n = 2 * intermediate). ``layers`` are layer indices in graph
    order, the last one the pattern's output (for the gate and up pair: the up projection); ``config``
    the fused config."""

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
        """Unique layer configs (benchmarked layers and fusion candidates), by key, in graph order."""
        out: dict[str, L.LayerConfig] = {}
        for ly in self.benchmarked():
            out.setdefault(ly.config.key, ly.config)
        for f in self.fusions:
            out.setdefault(f.config.key, f.config)
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
        """JSON-ready summary: counts by type, unsupported ops, coverage, fusion candidates, notices."""
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
                _fusion_label(f.config) for f in self.fusions).items())),
            "coverage": self.coverage(),
            "complete": not self.unsupported(),
            "notices": list(self.notices),
        }


def _fusion_label(cfg: L.LayerConfig) -> str:
    """How ``layers`` counts a fusion candidate: its config kind, Gelu for an erf-GELU chain, SiLU
    for a Sigmoid -> Mul, Add+LayerNorm / Add+RMSNorm for a residual Add and the norm after it."""
    if getattr(cfg, "residual", False):
        return f"Add+{cfg.kind}"
    if isinstance(cfg, L.UnaryConfig):
        return "Gelu"
    if isinstance(cfg, L.ActivationConfig) and cfg.mode == "swish":
        return "SiLU"
    if isinstance(cfg, L.ElementwiseConfig) and cfg.op == "swiglu":
        return "SwiGLU"
    return cfg.kind


# --------------------------------------------------------------------------------------- loading

def load_graph(path: str | os.PathLike) -> tuple[onnx.ModelProto, str]:
    """Read an ONNX model's graph without external weights.

    Returns (model, sha256 of the file). Raises :class:`ModelError` for a missing, unreadable,
    non-ONNX or truncated file, or a model without a graph.
    """
    p = Path(path)
    if not p.exists():
        if p.is_symlink():
            try:
                p.resolve(strict=True)
            except (RuntimeError, OSError) as e:  # ELOOP (RuntimeError before Python 3.13)
                if isinstance(e, RuntimeError) or getattr(e, "errno", None) == errno.ELOOP:
                    raise ModelError(f"{path}: a symbolic link loop, not a file") from None
            raise ModelError(f"{path}: a symbolic link to {os.readlink(p)}, which does not exist") from None
        raise ModelError(f"{path}: no such file")
    if not p.is_file():
        raise ModelError(f"{path}: not a file")
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


def bind_batch(model: onnx.ModelProto, batch: int, weights: set[str],
               dims: dict[str, int] | None = None, batch_dim: int | None = None) -> list[str]:
    """Set the batch dimension of every graph input (in place); return notices for the user.

    The batch is the first symbolic dimension (``N``, ``batch_size``...). Where an input has no
    symbolic dimension, its batch dimension is ``batch_dim`` if given, else the first dimension of
    size 1 (dim 0 if none), and a fixed size other than ``batch`` is overridden with a notice.
    ``dims`` binds other symbolic dimensions by name; a dimension named by arithmetic of bound ones
    (``past + 1``) gets its value (:func:`dim_expression`). Raises :class:`UsageError` for batch <= 0 and
    :class:`ModelError` for a symbolic dimension left unbound.
    """
    if batch <= 0:
        raise UsageError(f"batch size must be positive, got {batch}")
    dims = dict(dims or {})
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


# ------------------------------------------------- fixed-batch exports at another batch (issue 14)

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


# ------------------------------------------------------------------- shape inference and folding

# ---------------------------------------------------------------------------------------- mapping

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

    def shape(self, name: str) -> tuple[int, ...] | None:
        return self.shapes.get(name)

    def value(self, name: str) -> np.ndarray | None:
        t = self.const.get(name)
        if t is None or not has_data(t):
            return None
        return numpy_helper.to_array(t)

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
            if contrib is not None:  # a contrib op's shape rule gives none to a node its mapper refuses: say why
                mapper(node, ctx, attrs)
            raise Unsupported("output shape unknown after shape inference")
        if float_in and float_in[0] not in FLOAT_TYPES and op not in _TYPED_OPS | {"Gather", "GatherND"}:
            raise Unsupported(f"input element type {onnx.TensorProto.DataType.Name(float_in[0])} is not float")
        got = mapper(node, ctx, attrs)
        cfg = got[-1].config if isinstance(got, tuple) else got  # the last part writes the first output
        # a Split's config writes its outputs packed in one buffer (CopyConfig)
        if math.prod(cfg.output_shape()) != (sum(map(math.prod, out_shapes)) if op == "Split" else math.prod(out_shapes[0])):
            raise Unsupported(f"config output {list(cfg.output_shape())} does not match the inferred "
                              f"{list(out_shapes[0])}")
        if 0 in cfg.output_shape():
            return "zero_cost", None, "empty output"
        if isinstance(cfg, L.CopyConfig) and cfg.is_identity():
            return "zero_cost", None, f"{op} of the whole tensor is an identity"
        return "benchmark", got, ""
    except Unsupported as e:
        return "unsupported", None, str(e)
    except (KeyError, IndexError, TypeError, ValueError) as e:
        return "unsupported", None, f"malformed {op} node: {type(e).__name__}: {first_line(e)}"


def _find_fusions(layers: list[Layer], consumers: dict[str, list[int]], graph_outputs: set[str],
                  ctx: _Ctx) -> list[Fusion]:
    """Conv(+bias) -> Relu, and Conv -> Add(per-channel constant) -> Relu: the patterns that
    cudnnConvolutionBiasActivationForward computes in one call; Conv -> BatchNormalization [->
    Relu]: conv + scale + shift [+ relu] as one cuDNN graph (ConvBnActConfig)."""
    fusions: list[Fusion] = []

    def only_consumer(ly: Layer) -> Layer | None:
        out = ly.outputs[0]
        users = consumers.get(out, [])
        if len(users) != 1 or out in graph_outputs:
            return None
        return layers[users[0]]

    for ly in layers:
        cfg = ly.config
        if ly.status != "benchmark" or not isinstance(cfg, L.ConvConfig) or ly.fusion is not None:
            continue
        nxt = only_consumer(ly)
        chain = [ly.index]
        conv = cfg
        if nxt is not None and isinstance(nxt.config, L.BatchNormConfig) and nxt.fusion is None:
            # Conv -> BatchNormalization [-> Relu]: conv + per-channel scale + shift [+ relu]
            chain.append(nxt.index)
            act = only_consumer(nxt)
            relu = act is not None and isinstance(act.config, L.ActivationConfig) and act.config.mode == "relu" \
                and act.fusion is None
            if relu:
                chain.append(act.index)
            f = Fusion(layers=tuple(chain), config=L.ConvBnActConfig(conv=cfg, activation="relu" if relu else "none"))
            for i in chain:
                layers[i].fusion = len(fusions)
            fusions.append(f)
            continue
        if nxt is not None and not cfg.bias and isinstance(nxt.config, L.ElementwiseConfig) \
                and nxt.config.op == "add":
            other = [i for i in nxt.inputs if i != ly.outputs[0]]
            consts = list(nxt.static_inputs)
            y = cfg.output_shape()
            bshape = ctx.shape(consts[0]) if len(consts) == 1 and not other else None
            if bshape is not None and consts[0] in ctx.static and len(bshape) <= len(y):
                padded = (1,) * (len(y) - len(bshape)) + tuple(bshape)
                per_channel = padded[1] == cfg.w[0] and math.prod(padded) == cfg.w[0]
            else:
                per_channel = False
            if not per_channel:
                continue
            conv = L.ConvConfig(cfg.x, cfg.w, cfg.pads, cfg.strides, cfg.dilations, cfg.group, True)
            chain.append(nxt.index)
            nxt = only_consumer(nxt)
        if not conv.bias or nxt is None or not isinstance(nxt.config, L.ActivationConfig) \
                or nxt.config.mode != "relu":
            continue
        chain.append(nxt.index)
        f = Fusion(layers=tuple(chain), config=L.ConvBiasActConfig(conv=conv, activation="relu"))
        for i in chain:
            layers[i].fusion = len(fusions)
        fusions.append(f)
    return fusions


# ------------------------------------------------------------ transformer fusion candidates (issue 4)

class _Pattern:
    """Read-only views of the layer graph for the pattern finders: producers, consumers, constants."""

    def __init__(self, layers: list[Layer], consumers: dict[str, list[int]], graph_outputs: set[str], ctx: _Ctx):
        self.layers, self.consumers, self.graph_outputs, self.ctx = layers, consumers, graph_outputs, ctx
        self.producer = {o: ly.index for ly in layers for o in ly.outputs}

    def free(self, ly: Layer | None) -> bool:
        return ly is not None and ly.fusion is None

    def users(self, tensor: str) -> list[Layer]:
        return [self.layers[i] for i in self.consumers.get(tensor, [])]

    def sole_user(self, ly: Layer) -> Layer | None:
        """The one layer reading ``ly``'s output, when no other layer (and no graph output) reads it."""
        out = ly.outputs[0] if ly.outputs else None
        users = self.users(out) if out else []
        if len(users) != 1 or out in self.graph_outputs:
            return None
        return users[0]

    def made_by(self, tensor: str) -> Layer | None:
        i = self.producer.get(tensor)
        return self.layers[i] if i is not None else None

    def scalar(self, ly: Layer) -> float | None:
        """The value of ``ly``'s one constant scalar operand, if it has exactly one."""
        if len(ly.static_inputs) != 1 or len(ly.inputs) != 1:
            return None
        v = self.ctx.value(ly.static_inputs[0])
        if v is None or np.asarray(v).size != 1:
            return None
        return float(np.asarray(v).reshape(-1)[0])

    def elementwise(self, ly: Layer | None, op: str) -> bool:
        return ly is not None and ly.status == "benchmark" and isinstance(ly.config, L.ElementwiseConfig) \
            and ly.config.op == op

    def scale_of(self, ly: Layer | None) -> float | None:
        """The factor of a Mul by a constant scalar or a Div by one (x / c), else None."""
        if not (self.elementwise(ly, "mul") or self.elementwise(ly, "div")):
            return None
        c = self.scalar(ly)
        if c is None or c == 0.0 or not math.isfinite(c):
            return None
        if ly.config.op == "div":
            # x / c only: the constant is the divisor (B), the data the dividend (A)
            cfg = ly.config
            if math.prod(cfg.b) != 1 or cfg.a != cfg.output_shape():
                return None
            return 1.0 / c
        return c


def _find_transformer_fusions(layers: list[Layer], consumers: dict[str, list[int]], graph_outputs: set[str],
                              ctx: _Ctx, start: int) -> list[Fusion]:
    """Attention (SDPA), decomposed LayerNorm, GEMM (+ bias) -> Relu/GELU and erf-GELU fusion
    candidates, numbered from ``start`` (after the Conv ones). A layer is in at most one candidate:
    a decomposed erf-GELU after a GEMM joins the GemmAct candidate rather than being a GELU one."""
    pat = _Pattern(layers, consumers, graph_outputs, ctx)
    found: list[Fusion] = []
    for finder in (_find_attention, _find_gqa_attention, _find_layernorms, _find_rmsnorms, _find_rotaries,
                   _find_gemm_acts, _find_gelus, _find_gelu_tanhs, _find_swiglus, _find_gate_up_gemms,
                   _find_silus, _find_residual_norms):
        for ly in layers:
            try:
                hit = finder(pat, ly)
            except (KeyError, IndexError, TypeError, ValueError, AttributeError, ZeroDivisionError):
                hit = None  # an odd graph is no candidate; processing an untrusted model never fails here
            if hit is None:
                continue
            chain, cfg = hit
            chain = tuple(sorted(set(chain)))
            if any(layers[i].fusion is not None for i in chain):
                continue
            for i in chain:
                layers[i].fusion = start + len(found)
            found.append(Fusion(layers=chain, config=cfg))
    for j, f in enumerate(found):  # a decomposed norm's group takes in the residual Add before it
        try:
            hit = _residual_of_group(pat, f)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            hit = None
        if hit is not None:
            add, cfg = hit
            add.fusion = start + j
            found[j] = Fusion(layers=tuple(sorted((add.index,) + tuple(f.layers))), config=cfg)
    return found


def _gemm_operands(ly: Layer) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(A, B) shapes of a MatMul layer whose two operands are both data (not weights)."""
    if ly.op_type != "MatMul" or ly.status != "benchmark" or ly.static_inputs or len(ly.inputs) != 2:
        return None
    a, b = ly.input_shapes
    if a is None or b is None or len(a) < 2 or len(a) != len(b):
        return None
    return tuple(a), tuple(b)


def _attention_bias(mask: tuple[int, ...], scores: tuple[int, ...]) -> tuple[int, ...] | None:
    """The additive mask's shape in cuDNN's (b, h, s_q, s_kv) form (with the leading dims of the
    scores mapped as in :class:`benanza.kinds.SdpaConfig`), or None when it cannot be one."""
    r = len(scores)
    if len(mask) > r:
        return None
    m = (1,) * (r - len(mask)) + tuple(mask)
    if any(d not in (1, full) for d, full in zip(m, scores)):
        return None
    lead_m, lead_s = m[:-2], scores[:-2]
    if len(lead_s) == 0:
        return (1, 1) + m[-2:]
    if len(lead_s) == 1:
        return (lead_m[0], 1) + m[-2:]
    outer_m, outer_s = lead_m[:-1], lead_s[:-1]
    if any(d != 1 for d in outer_m) and outer_m != outer_s:
        return None  # partly broadcast outer dims do not fold into one b
    return (math.prod(outer_m), lead_m[-1]) + m[-2:]


def _causal(values: np.ndarray) -> bool:
    """A constant additive mask that is 0 on and below the diagonal and very negative above it."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim < 2 or v.shape[-1] != v.shape[-2] or v.shape[-1] < 2:
        return False
    v = v.reshape(-1, v.shape[-2], v.shape[-1])
    upper = np.triu(np.ones(v.shape[-2:], dtype=bool), 1)
    return bool(np.all(v[:, ~upper] == 0) and np.all(v[:, upper] <= -1e4))


#: zero-cost ops that only relabel a packed tensor's shape (a reshape of the same memory)
_RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")


def _view_step(ly: Layer, v: V.View) -> V.View | None:
    """The view ``ly``'s output is of the memory ``v`` views, when ``ly`` moves data in a way a
    strided reader absorbs (Transpose, the zero-cost reshapes, Dropout in inference, constant
    scalar Gather, constant Slice), else None."""
    out = ly.output_shapes[0] if ly.output_shapes else None
    if out is None:
        return None
    if ly.status == "zero_cost" and ly.op_type in _RESHAPES + ("Dropout",):
        return V.reshape(v, tuple(out))
    if ly.status == "zero_cost" and ly.op_type in ("Slice", "Pad", "Transpose", "Concat", "Cast"):
        return v if v.shape == tuple(out) else None  # an identity (CopyConfig.is_identity)
    cfg = ly.config
    if ly.status != "benchmark":
        return None
    if isinstance(cfg, L.CopyConfig) and cfg.op == "Transpose":
        return V.permute(v, tuple(cfg.attr("perm")))
    if isinstance(cfg, L.CopyConfig) and cfg.op == "Slice":
        return V.slice_view(v, tuple(cfg.attr("starts")), tuple(cfg.attr("steps")), tuple(out))
    if isinstance(cfg, L.GatherConfig) and len(cfg.values) == 1 and len(cfg.indices) <= 1:
        w = V.select(v, cfg.axis, cfg.values[0])
        return V.unsqueeze(w, (cfg.axis,)) if w is not None and len(cfg.indices) == 1 else w
    return None


def _inverse_view_step(ly: Layer, v: V.View) -> V.View | None:
    """The view of ``ly``'s input over the memory of its output ``v`` (Transpose, reshapes)."""
    src = ly.input_shapes[0] if ly.input_shapes else None
    if src is None:
        return None
    if ly.status == "zero_cost" and ly.op_type in _RESHAPES + ("Dropout",):
        return V.reshape(v, tuple(src))
    if ly.status == "benchmark" and isinstance(ly.config, L.CopyConfig) and ly.config.op == "Transpose":
        return V.permute(v, V.inverse_permutation(tuple(ly.config.attr("perm"))))
    return None


def _bhsd(v: V.View) -> tuple[int, int, int, int] | None:
    """The strides over (b, h, s, d) of an attention operand view of shape (lead..., s, d), with
    the lead dims mapped as :class:`benanza.kinds.SdpaConfig` maps them (one lead dim: b; more:
    b = all but the last, h = the last); a dim of size 1 takes its packed stride. None when b, h
    or s has no single stride or d is not contiguous (stride 1), which fused attention needs."""
    if len(v.dims) < 2:
        return None
    lead = list(v.dims[:-2])
    h = lead.pop() if len(lead) >= 2 else ()
    groups = (tuple(m for dim in lead for m in dim), h, v.dims[-2], v.dims[-1])
    sizes = [math.prod(sz for sz, _ in g) for g in groups]
    packed = V.packed_strides(tuple(sizes))
    out = []
    for modes, size, pk in zip(groups, sizes, packed):
        c = V.coalesce(modes)
        if len(c) > 1:
            return None
        out.append(c[0][1] if c and size > 1 else pk)
    if out[3] != 1:
        return None
    return tuple(out)


def _operand_chain(pat: _Pattern, tensor: str, group: set[int]) -> tuple[list[Layer], str]:
    """Walking back from an attention operand: the movement and constant-scale layers that only
    feed it (nearest first) and the tensor they start from."""
    chain: list[Layer] = []
    t = pat.made_by(tensor)
    while t is not None and pat.free(t) and t.index not in group and t.inputs and pat.sole_user(t) is not None:
        movement = _view_step(t, V.View.packed(tuple(t.input_shapes[0]))) is not None \
            if t.input_shapes and t.input_shapes[0] is not None else False
        if not movement and pat.scale_of(t) is None:
            break
        chain.append(t)
        tensor = t.inputs[0]
        t = pat.made_by(tensor)
    return chain, tensor


def _absorb_operand(pat: _Pattern, chain: list[Layer], want_t: bool) -> tuple[list[Layer], float, tuple | None]:
    """The longest part of ``chain`` (nearest the attention first) that a strided read absorbs:
    (absorbed layers, their constant scale, (b, h, s, d) strides or None when packed).
    ``want_t``: the operand is K^T, whose last two dims the strides swap back to K's."""
    fwd = list(reversed(chain))  # from the source towards the attention
    for i in range(len(fwd) + 1):
        part = fwd[i:]
        src = part[0].input_shapes[0] if part else None
        if part and src is None:
            continue
        v = V.View.packed(tuple(src)) if part else None
        for ly in part:
            v = v if pat.scale_of(ly) is not None else _view_step(ly, v)
            if v is None:
                break
        if part and v is None:
            continue
        scale = math.prod(pat.scale_of(ly) or 1.0 for ly in part)
        if not part:
            return [], 1.0, None
        if want_t:
            r = len(v.shape)
            v = V.permute(v, tuple(range(r - 2)) + (r - 1, r - 2))
        st = _bhsd(v)
        if st is None:
            continue
        return part, scale, st
    return [], 1.0, None


def _absorb_output(pat: _Pattern, mm2: Layer) -> tuple[list[Layer], tuple | None]:
    """The Transposes and reshapes after the attention output that only move it, as far as the
    output can be written straight into their final tensor: (layers, O strides or None)."""
    fwd: list[Layer] = []
    t = mm2
    while True:
        u = pat.sole_user(t)
        if u is None or not pat.free(u) or _inverse_view_step(u, V.View.packed(tuple(u.output_shapes[0] or ()))) is None:
            break
        fwd.append(u)
        t = u
    for k in range(len(fwd), 0, -1):
        v = V.View.packed(tuple(fwd[k - 1].output_shapes[0]))
        for ly in reversed(fwd[:k]):
            v = _inverse_view_step(ly, v)
            if v is None:
                break
        st = _bhsd(v) if v is not None else None
        if st is not None:
            return fwd[:k], st
    return [], None


def _find_attention(pat: _Pattern, mm1: Layer):
    """MatMul(Q, K^T) -> [Mul/Div by constants] -> [Add mask] -> Softmax(last) -> MatMul(., V), with
    the data movement around it that a strided fused kernel reads through: the head-split Reshapes,
    Transposes, Squeezes and constant-index Gathers that make Q, K^T and V out of a projection's
    output (shared by Q, K and V when only they read it), the constant scaling of Q and K^T (torch's
    SDPA export scales both by sqrt(scale)), and the Transposes and Reshapes that merge the heads of
    the output. The absorbed movement becomes the strides of :class:`benanza.kinds.SdpaConfig`."""
    ops = _gemm_operands(mm1)
    if ops is None or not pat.free(mm1):
        return None
    q_shape, kt_shape = ops
    chain = [mm1.index]
    scale = 1.0
    nxt = pat.sole_user(mm1)
    f = pat.scale_of(nxt) if pat.free(nxt) else None
    if f is not None:
        scale *= f
        chain.append(nxt.index)
        nxt = pat.sole_user(nxt)
    scores = tuple(mm1.output_shapes[0] or ())
    got = _attention_mask(pat, nxt, chain, scores)
    if got is None:
        return None
    mask, bias, nxt = got
    if not pat.free(nxt) or nxt.status != "benchmark" or not isinstance(nxt.config, L.SoftmaxConfig) \
            or nxt.config.log or nxt.config.shape[2] != 1:
        return None
    chain.append(nxt.index)
    mm2 = pat.sole_user(nxt) or _nan_guard(pat, nxt, chain)
    while mm2 is not None and mm2.status == "zero_cost" and mm2.op_type in ("Dropout", "Identity") and pat.free(mm2):
        chain.append(mm2.index)
        mm2 = pat.sole_user(mm2)
    ops2 = _gemm_operands(mm2) if mm2 is not None else None
    if ops2 is None or not pat.free(mm2) or mm2.inputs[0] != pat.layers[chain[-1]].outputs[0]:
        return None
    p_shape, v_shape = ops2
    lead = q_shape[:-2]
    if kt_shape[:-2] != lead or v_shape[:-2] != lead or kt_shape[-2] != q_shape[-1] or v_shape[-2] != kt_shape[-1]:
        return None
    chain.append(mm2.index)
    strides, absorbed = _absorb_operands(pat, (mm1.inputs[0], mm1.inputs[1], mm2.inputs[1]), set(chain))
    for part, f, _ in absorbed:
        scale *= f
        chain += [ly.index for ly in part]
    strides, h_kv = _gqa_operands(pat, absorbed, strides, chain, lead, kt_shape[-1])
    out_part, o_st = _absorb_output(pat, mm2)
    chain += [ly.index for ly in out_part]
    if len(lead) == 0:
        b, h = 1, 1
    elif len(lead) == 1:
        b, h = lead[0], 1
    else:
        b, h = math.prod(lead[:-1]), lead[-1]
    cfg = L.SdpaConfig(b=b, h=h, s_q=q_shape[-2], s_kv=kt_shape[-1], d=q_shape[-1], d_v=v_shape[-1],
                       scale=_canonical_scale(scale), mask=mask, bias=bias, h_kv=h_kv)
    given = list(strides) + [o_st]
    packed = cfg.strides()
    fields = ("q_strides", "k_strides", "v_strides", "o_strides")
    cfg = dataclasses.replace(cfg, **{name: tuple(st) for name, st, pk in zip(fields, given, packed)
                                      if st is not None and tuple(st) != tuple(pk)})
    return chain, cfg


def _repeat_kv(pat: _Pattern, tensor: str) -> tuple[list[Layer], int] | None:
    """GQA's repeat of K or V heads (transformers' ``repeat_kv``): ``tensor`` (b, h, s, d) made by a
    Reshape of Expand((b, h_kv, 1, s, d) -> (b, h_kv, h / h_kv, s, d)), the Expand's input an Unsqueeze
    of (b, h_kv, s, d) or not, each read only by the next. Returns ([Reshape, Expand, (Unsqueeze)],
    h_kv), or None: a fused attention reads the h_kv heads itself (cuDNN's h_k < h_q)."""
    r = pat.made_by(tensor)
    if r is None or not pat.free(r) or r.op_type != "Reshape" or r.status != "zero_cost" or not r.inputs:
        return None
    e = pat.made_by(r.inputs[0])
    if e is None or not pat.free(e) or e.op_type != "Expand" or pat.sole_user(e) is not r or not e.inputs:
        return None
    src, big, out = e.input_shapes[0], e.output_shapes[0], r.output_shapes[0]
    if src is None or big is None or out is None or len(big) != 5 or len(src) != 5 or len(out) != 4:
        return None
    b, h_kv, n, s, d = big
    if tuple(src) != (b, h_kv, 1, s, d) or tuple(out) != (b, h_kv * n, s, d):
        return None
    layers = [r, e]
    u = pat.made_by(e.inputs[0])
    if u is not None and pat.free(u) and u.op_type == "Unsqueeze" and pat.sole_user(u) is e:
        layers.append(u)
    return layers, h_kv


def _gqa_operands(pat: _Pattern, absorbed: list, strides: tuple, chain: list[int], lead: tuple, s_kv: int):
    """GQA in a decomposed attention: when K's and V's absorbed movement starts at the Reshape of a
    repeat of fewer heads (:func:`_repeat_kv`, the same h_kv for both) and reads the repeat packed,
    the Expands and Unsqueezes join ``chain`` and K and V are read packed with h_kv heads. Returns
    ((q, k, v) strides, h_kv; 0 without GQA)."""
    if len(lead) < 2:
        return strides, 0
    h = lead[-1]
    reps = []
    for i in (1, 2):
        part = absorbed[i][0]
        rep = _repeat_kv(pat, part[0].outputs[0]) if part else None
        if rep is None:
            return strides, 0
        d = part[0].output_shapes[0][-1]
        packed = V.packed_strides((math.prod(lead[:-1]), h, s_kv, d))
        if strides[i] is not None and tuple(strides[i]) != tuple(packed):
            return strides, 0
        reps.append(rep)
    h_kv = reps[0][1]
    if reps[1][1] != h_kv or h % h_kv or h_kv == h:
        return strides, 0
    chain += [ly.index for layers, _ in reps for ly in layers[1:]]
    return (strides[0], None, None), h_kv


def _find_gqa_attention(pat: _Pattern, att: Layer):
    """ONNX ``Attention`` (an SDPA layer of its own) whose K and V are the repeat of fewer heads
    (:func:`_repeat_kv`): the group of the repeats and the attention as one SDPA call with h_kv K/V
    heads (packed, as the repeats' inputs are)."""
    cfg = att.config
    if att.op_type != "Attention" or att.status != "benchmark" or not isinstance(cfg, L.SdpaConfig) \
            or cfg.kv_heads != cfg.h or cfg.k_strides or cfg.v_strides or len(att.inputs) < 3:
        return None
    reps = [_repeat_kv(pat, t) for t in att.inputs[1:3]]
    if any(r is None for r in reps) or reps[0][1] != reps[1][1] or att.inputs[1] == att.inputs[2]:
        return None
    chain = [ly.index for layers, _ in reps for ly in layers] + [att.index]
    return chain, dataclasses.replace(cfg, h_kv=reps[0][1])


def _nan_guard(pat: _Pattern, softmax: Layer, chain: list[int]) -> Layer | None:
    """torch.export's SDPA decomposition zeroes the rows a mask left empty: Softmax -> IsNaN ->
    Where(isnan, 0, softmax). When that guard is all that reads the Softmax, append its two layers
    to ``chain`` and return the layer after it (a fused attention returns those rows as zeros too)."""
    users = pat.users(softmax.outputs[0])
    if len(users) != 2 or softmax.outputs[0] in pat.graph_outputs:
        return None
    isnan = next((u for u in users if u.op_type == "IsNaN"), None)
    where = next((u for u in users if u.op_type == "Where"), None)
    if isnan is None or where is None or not pat.free(isnan) or not pat.free(where) \
            or pat.sole_user(isnan) is not where or list(where.inputs) != [isnan.outputs[0], softmax.outputs[0]]:
        return None
    chain += [isnan.index, where.index]
    return pat.sole_user(where)


def _attention_mask(pat: _Pattern, nxt: Layer | None, chain: list[int], scores: tuple[int, ...]):
    """The additive masks between the scores and the Softmax: (mask kind, bias shape, the layer
    after them), appending their layers to ``chain``; None when an Add there cannot be a mask.
    One Add of a constant triangular mask is cuDNN's causal mask; one Add of a broadcastable
    tensor a bias of its shape; several Adds, or Reshapes between them (Swin's relative position
    bias, then its shifted-window mask added per window), one bias of the scores' full shape (the
    constants summed and broadcast once: data-independent, as a compiler would precompute them)."""
    adds, reshapes = [], []
    while pat.free(nxt) and nxt.status in ("benchmark", "zero_cost"):
        if pat.elementwise(nxt, "add") and math.prod(nxt.config.output_shape()) == math.prod(scores):
            adds.append(nxt)
        elif nxt.status == "zero_cost" and nxt.op_type in ("Reshape", "Identity") and nxt.output_shapes \
                and nxt.output_shapes[0] is not None and math.prod(nxt.output_shapes[0]) == math.prod(scores):
            reshapes.append(nxt)
        else:
            break
        chain.append(nxt.index)
        nxt = pat.sole_user(nxt)
    final = pat.layers[chain[-1]].output_shapes[0] if chain else None
    if final is None or tuple(final[-2:]) != tuple(scores[-2:]):
        return None
    if not adds:
        return "none", (), nxt
    others = []
    for a in adds:
        prev = pat.layers[chain[chain.index(a.index) - 1]].outputs[0]
        other = [i for i in a.inputs if i != prev] + list(a.static_inputs)
        if len(other) != 1 or pat.ctx.shape(other[0]) is None:
            return None
        others.append(other[0])
    if len(adds) == 1 and not reshapes:
        value = pat.ctx.static_value(others[0]) if others[0] in pat.ctx.static else None
        if value is not None and _causal(value):
            return "causal", (), nxt
        mshape = pat.ctx.shape(others[0])
        if value is None and tuple(mshape[-2:]) == tuple(scores[-2:]) and scores[-2] > 1 \
                and causal_mask_tensor(pat.ctx, others[0], scores[-2], scores[-1] - scores[-2]):
            # a causal mask built from the positions (Where/And of a folded triangle): cuDNN's causal
            # masking, aligned bottom-right where the keys outnumber the queries (a KV cache)
            return ("causal" if scores[-1] == scores[-2] else "causal_bottom_right"), (), nxt
        b4 = _attention_bias(tuple(pat.ctx.shape(others[0])), scores)
        return (None if b4 is None else ("bias", b4, nxt))
    full = _attention_bias(scores, scores)
    return (None if full is None else ("bias", full, nxt))


def _absorb_operands(pat: _Pattern, operands: tuple[str, str, str], group: set[int]):
    """Q, K^T and V's movement chains (:func:`_operand_chain`), extended back through the movement
    layers they share when only they read them (a packed QKV projection split into three), and
    what each absorbs (:func:`_absorb_operand`). Returns ((q, k, v) strides, absorbed parts)."""
    chains, sources = [], []
    for t in operands:
        c, src = _operand_chain(pat, t, group)
        chains.append(c)
        sources.append(src)
    shared: list[Layer] = []
    members = group | {ly.index for c in chains for ly in c}
    src = sources[0] if len(set(sources)) == 1 else None
    while src is not None:
        t = pat.made_by(src)
        users = pat.users(src)
        if t is None or not pat.free(t) or not t.inputs or src in pat.graph_outputs or not users \
                or any(u.index not in members for u in users) or t.input_shapes[0] is None \
                or _view_step(t, V.View.packed(tuple(t.input_shapes[0]))) is None:
            break
        shared.append(t)
        members.add(t.index)
        src = t.inputs[0]
    absorbed = [_absorb_operand(pat, c + shared, want_t=(i == 1)) for i, c in enumerate(chains)]
    if shared and any(not set(s.index for s in shared) <= {ly.index for ly in part} for part, _, _ in absorbed):
        absorbed = [_absorb_operand(pat, c, want_t=(i == 1)) for i, c in enumerate(chains)]
    return tuple(a[2] for a in absorbed), absorbed


def _canonical_scale(scale: float) -> float:
    """The attention scale to 6 significant digits: sqrt(s) * sqrt(s) in float32 (torch's SDPA export)
    and 1 / sqrt(d) give the same config key."""
    return float(f"{float(np.float32(scale)):.6g}")


def _trailing_axis(cfg: L.ReduceConfig) -> int | None:
    """The LayerNorm axis of a reduction over trailing dims (y = x[:k] + (1,)*...), else None."""
    x, y = cfg.x, cfg.y
    k = len(y)
    while k > 0 and y[k - 1] == 1:
        k -= 1
    if k == len(y) or tuple(y[:k]) != tuple(x[:k]):
        return None
    return k


def _find_layernorms(pat: _Pattern, r1: Layer):
    """ReduceMean -> Sub -> Pow 2 (or Mul d*d) -> ReduceMean -> Add eps -> Sqrt -> Div [-> Mul scale]
    [-> Add bias]: LayerNormalization as exporters before opset 17 write it."""
    if not pat.free(r1) or r1.status != "benchmark" or not isinstance(r1.config, L.ReduceConfig) \
            or r1.config.op != "mean" or len(r1.inputs) != 1:
        return None
    axis = _trailing_axis(r1.config)
    if axis is None:
        return None
    x = r1.inputs[0]
    sub = pat.sole_user(r1)
    if not pat.free(sub) or not pat.elementwise(sub, "sub") or sub.inputs != (x, r1.outputs[0]):
        return None
    d = sub.outputs[0]
    users = pat.users(d)
    if len(users) != 2 or d in pat.graph_outputs:
        return None
    sq = next((u for u in users if (u.status == "benchmark" and isinstance(u.config, L.UnaryConfig)
                                    and u.config.op == "pow" and u.config.exponent == 2.0)
               or (pat.elementwise(u, "mul") and u.inputs == (d, d))), None)
    div = next((u for u in users if u is not sq), None)
    if sq is None or not pat.free(sq) or not pat.free(div) or not pat.elementwise(div, "div"):
        return None
    r2 = pat.sole_user(sq)
    if not pat.free(r2) or r2.status != "benchmark" or not isinstance(r2.config, L.ReduceConfig) \
            or r2.config.op != "mean" or r2.config.x != r1.config.x or r2.config.y != r1.config.y:
        return None
    add = pat.sole_user(r2)
    eps = pat.scalar(add) if pat.free(add) and pat.elementwise(add, "add") else None
    if eps is None or eps < 0:
        return None
    root = pat.sole_user(add)
    if not pat.free(root) or root.status != "benchmark" or not isinstance(root.config, L.UnaryConfig) \
            or root.config.op != "sqrt" or pat.sole_user(root) is not div or div.inputs != (d, root.outputs[0]):
        return None
    chain = [r1.index, sub.index, sq.index, r2.index, add.index, root.index, div.index]
    norm = tuple(r1.config.x[axis:])
    last = div
    nxt = pat.sole_user(div)
    for op in ("mul", "add"):  # the optional scale, then the optional bias (constants of the normalised shape)
        if pat.free(nxt) and pat.elementwise(nxt, op) and len(nxt.static_inputs) == 1 and len(nxt.inputs) == 1:
            w = pat.ctx.shape(nxt.static_inputs[0])
            if w is not None and math.prod(w) == math.prod(norm) and nxt.config.output_shape() == tuple(r1.config.x):
                chain.append(nxt.index)
                last = nxt
                nxt = pat.sole_user(nxt)
    has_bias = pat.elementwise(last, "add") and last is not div
    cfg = L.LayerNormConfig(x=tuple(r1.config.x), axis=axis, epsilon=float(np.float32(eps)), bias=has_bias)
    return chain, cfg


def _find_residual_norms(pat: _Pattern, norm: Layer):
    """Add(a, b) -> LayerNormalization / RMSNormalization (a layer of the ONNX op, or of ONNX Runtime's
    SimplifiedLayerNormalization / SkipSimplifiedLayerNormalization), a and b activations of the
    norm's input shape: a transformer block's residual add and the norm after it, which fusing
    compilers run as one kernel (TorchInductor's ``fused_add_native_layer_norm``, ONNX Runtime's
    SkipLayerNormalization); the config is the norm's with ``residual`` (and ``keep_sum`` where other
    layers, or the graph's outputs, read the sum: the next residual add). The decomposed norms' groups
    take their residual Add in after every finder ran (:func:`_residual_of_group`)."""
    cfg = norm.config
    if not pat.free(norm) or norm.status != "benchmark" or not isinstance(cfg, (L.LayerNormConfig, L.RMSNormConfig)) \
            or cfg.residual or not norm.inputs:
        return None
    hit = _residual_add(pat, norm.inputs[0], tuple(cfg.x), {norm.index})
    if hit is None:
        return None
    add, keep = hit
    return [add.index, norm.index], dataclasses.replace(cfg, residual=True, keep_sum=keep)


def _residual_add(pat: _Pattern, x: str, shape: tuple, readers: set[int]):
    """The free Add(a, b) of two activations of ``shape`` that writes ``x``, and whether layers other
    than ``readers`` (or the graph's outputs) read its sum; None when ``x`` comes from no such Add."""
    add = pat.made_by(x)
    if not pat.free(add) or not pat.elementwise(add, "add") or len(add.inputs) != 2 or add.static_inputs \
            or len(add.outputs) != 1:
        return None
    if tuple(add.config.a) != shape or tuple(add.config.b) != shape or tuple(add.config.output_shape()) != shape:
        return None
    out = add.outputs[0]
    return add, out in pat.graph_outputs or any(u.index not in readers for u in pat.users(out))


def _residual_of_group(pat: _Pattern, f: Fusion):
    """A decomposed LayerNorm or RMSNorm group (``_find_layernorms``, ``_find_rmsnorms``) whose one
    data input is written by a residual Add (:func:`_residual_add`): (that Add, the group's config with
    ``residual`` and ``keep_sum``), else None."""
    cfg = f.config
    if not isinstance(cfg, (L.LayerNormConfig, L.RMSNormConfig)) or cfg.residual:
        return None
    inside = set(f.layers)
    made = {o for i in inside for o in pat.layers[i].outputs}
    xs = {t for i in inside for t in pat.layers[i].inputs if t not in made}
    if len(xs) != 1:
        return None
    hit = _residual_add(pat, xs.pop(), tuple(cfg.x), inside)
    if hit is None:
        return None
    add, keep = hit
    return add, dataclasses.replace(cfg, residual=True, keep_sum=keep)


def _is_cast(ly: Layer | None) -> bool:
    """A Cast layer: a real one (a Unary cast) or an identity (zero-cost, to the same type)."""
    return ly is not None and ly.op_type == "Cast" and ly.status in ("benchmark", "zero_cost")


def _find_rmsnorms(pat: _Pattern, sq: Layer):
    """[Cast ->] Pow 2 (or Mul x*x) -> ReduceMean over trailing dims -> Add eps -> Sqrt -> Reciprocal
    (or Div 1/s) -> Mul x [-> Cast] [-> Mul weight], or Sqrt -> Div x/s: RMSNorm as torch.export
    (Reciprocal) and TorchScript (Div) write transformers' ``LlamaRMSNorm``
    (``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``, float32 casts around it)."""
    if not pat.free(sq) or sq.status != "benchmark" or len(sq.inputs) < 1:
        return None
    x = sq.inputs[0]
    if not ((isinstance(sq.config, L.UnaryConfig) and sq.config.op == "pow" and sq.config.exponent == 2.0)
            or (pat.elementwise(sq, "mul") and sq.inputs == (x, x))):
        return None
    r = pat.sole_user(sq)
    if not pat.free(r) or r.status != "benchmark" or not isinstance(r.config, L.ReduceConfig) \
            or r.config.op != "mean" or tuple(r.config.x) != tuple(pat.ctx.shape(x) or ()):
        return None
    axis = _trailing_axis(r.config)
    if axis is None:
        return None
    add = pat.sole_user(r)
    eps = pat.scalar(add) if pat.free(add) and pat.elementwise(add, "add") else None
    if eps is None or eps < 0:
        return None
    root = pat.sole_user(add)
    if not pat.free(root) or root.status != "benchmark" or not isinstance(root.config, L.UnaryConfig) \
            or root.config.op != "sqrt":
        return None
    chain = [sq.index, r.index, add.index, root.index]
    nxt = pat.sole_user(root)
    if not pat.free(nxt):
        return None
    inv = None
    if nxt.status == "benchmark" and isinstance(nxt.config, L.UnaryConfig) and nxt.config.op == "reciprocal":
        inv = nxt
    elif pat.elementwise(nxt, "div") and pat.scalar(nxt) == 1.0 and math.prod(nxt.config.a) == 1:
        inv = nxt  # 1 / sqrt(...)
    if inv is not None:
        chain.append(inv.index)
        mul = pat.sole_user(inv)
        if not pat.free(mul) or not pat.elementwise(mul, "mul") or sorted(mul.inputs) != sorted((x, inv.outputs[0])):
            return None
    else:
        mul = nxt  # x / sqrt(...)
        if not pat.elementwise(mul, "div") or mul.inputs != (x, root.outputs[0]):
            return None
    xshape = tuple(r.config.x)
    if tuple(mul.config.output_shape()) != xshape:
        return None
    chain.append(mul.index)
    head = pat.made_by(x)
    if _is_cast(head) and pat.free(head) and x not in pat.graph_outputs \
            and {u.index for u in pat.users(x)} == {sq.index, mul.index}:
        chain.append(head.index)  # the cast to float32 before the statistics
    last, cols = mul, math.prod(xshape[axis:])
    nxt = pat.sole_user(mul)
    if _is_cast(nxt) and pat.free(nxt):
        chain.append(nxt.index)  # the cast back to the model's type
        last, nxt = nxt, pat.sole_user(nxt)
    scale = False
    if pat.free(nxt) and pat.elementwise(nxt, "mul") and len(nxt.static_inputs) == 1 \
            and nxt.inputs == (last.outputs[0],):
        w = pat.ctx.shape(nxt.static_inputs[0])
        if w is not None and math.prod(w) == cols and tuple(nxt.config.output_shape()) == xshape:
            chain.append(nxt.index)
            scale = True
    return chain, L.RMSNormConfig(x=xshape, axis=axis, epsilon=float(np.float32(eps)), scale=scale)


def _half_slice(pat: _Pattern, ly: Layer | None, x: str, start: int, half: int) -> bool:
    """``ly`` is a free Slice of ``x`` to elements [start, start + half) of its last dim, all of the others."""
    if not pat.free(ly) or ly.status != "benchmark" or not isinstance(ly.config, L.CopyConfig) \
            or ly.config.op != "Slice" or ly.inputs != (x,):
        return False
    attrs, xs = dict(ly.config.attrs), tuple(ly.config.inputs[0])
    starts, steps = tuple(attrs.get("starts", ())), tuple(attrs.get("steps", ()))
    return (tuple(ly.config.y) == xs[:-1] + (half,) and len(starts) == len(xs)
            and starts == (0,) * (len(xs) - 1) + (start,) and set(steps) <= {1})


def _rotary_cache(pat: _Pattern, mul: Layer | None, x: str, xshape: tuple[int, ...]):
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


def _find_rotaries(pat: _Pattern, neg: Layer):
    """x * cos + cat(-x[..., d/2:], x[..., :d/2]) * sin: the Mul, Slice, Slice, Neg, Concat, Mul, Add that
    torch.export and TorchScript write for transformers' ``apply_rotary_pos_emb`` (``rotate_half``), x
    (b, h, s, d) with cos/sin (1 | b, 1, s, d), or x (b, s, h, d) with cos/sin (1 | b, s, 1, d). The fused
    rotation reads (d / 2) cos/sin values per position: transformers builds cos = cat(freqs, freqs); where
    the cache is a folded constant its two halves are checked equal (else no candidate). A partial
    rotation (x[..., :r] sliced off first) is not found here."""
    if not pat.free(neg) or neg.status != "benchmark" or not isinstance(neg.config, L.UnaryConfig) \
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
    if not pat.free(cat) or not isinstance(cat.config, L.CopyConfig) or cat.config.op != "Concat" \
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
    return chain, L.RotaryConfig(x=xshape, num_heads=heads, rotary_dim=d, layout=layout, cache_batch=c[0])


def _find_gelus(pat: _Pattern, erf: Layer):
    """x / sqrt(2) (or x * 1/sqrt(2)) -> Erf -> Add 1 -> Mul x -> Mul 0.5 (or x * 0.5 first): the
    erf-GELU exporters before opset 20 write."""
    if not pat.free(erf) or erf.status != "benchmark" or not isinstance(erf.config, L.UnaryConfig) \
            or erf.config.op != "erf":
        return None
    pre = pat.made_by(erf.inputs[0]) if erf.inputs else None
    f = pat.scale_of(pre) if pat.free(pre) and pat.sole_user(pre) is erf else None
    if f is None or abs(f - 1 / math.sqrt(2)) > 1e-3:
        return None
    x = pre.inputs[0]
    add = pat.sole_user(erf)
    if not pat.free(add) or not pat.elementwise(add, "add") or pat.scalar(add) != 1.0:
        return None
    mul = pat.sole_user(add)
    if not pat.free(mul) or not pat.elementwise(mul, "mul") or len(mul.inputs) != 2 or add.outputs[0] not in mul.inputs:
        return None
    chain = [pre.index, erf.index, add.index, mul.index]
    half = _gelu_half(pat, x, add, mul)
    if half is None:
        return None
    chain.append(half.index)
    shape = tuple(pre.output_shapes[0] or ())
    if not shape or erf.config.shape != shape:
        return None
    return chain, L.UnaryConfig(shape=shape, op="gelu")


def _gelu_half(pat: _Pattern, x: str, add: Layer, mul: Layer) -> Layer | None:
    """The Mul by 0.5 of a GELU whose ``mul`` multiplies ``add`` (1 + erf or 1 + tanh) by x * 0.5, or
    by x and then by 0.5; None when there is none."""
    other = next(i for i in mul.inputs if i != add.outputs[0]) if mul.inputs.count(add.outputs[0]) == 1 else None
    if other == x:  # (x * (1 + f)) * 0.5
        half = pat.sole_user(mul)
        return half if pat.free(half) and pat.scale_of(half) == 0.5 else None
    half = pat.made_by(other) if other else None  # (x * 0.5) * (1 + f)
    if not pat.free(half) or pat.scale_of(half) != 0.5 or half.inputs[0] != x or pat.sole_user(half) is not mul:
        return None
    return half


#: GELU's tanh approximation, 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (Hendrycks and Gimpel,
#: "Gaussian Error Linear Units", 2016, eq. 2; torch.nn.functional.gelu(approximate="tanh"))
GELU_TANH_K, GELU_TANH_C = math.sqrt(2 / math.pi), 0.044715


def _find_gelu_tanhs(pat: _Pattern, tanh: Layer):
    """Pow x 3 -> Mul 0.044715 -> Add x -> Mul sqrt(2/pi) -> Tanh -> Add 1 -> Mul (x * 0.5) (or Mul x
    -> Mul 0.5): GELU's tanh approximation as GPT-2's ``NewGELUActivation`` is exported (torch.export
    and TorchScript), one GELU (UnaryConfig gelu_tanh) where the chain is eight elementwise passes."""
    if not pat.free(tanh) or tanh.status != "benchmark" or not isinstance(tanh.config, L.ActivationConfig) \
            or tanh.config.mode != "tanh" or len(tanh.inputs) != 1:
        return None
    pre = pat.made_by(tanh.inputs[0])
    k = pat.scale_of(pre) if pat.free(pre) and pat.sole_user(pre) is tanh else None
    if k is None or abs(k - GELU_TANH_K) > 1e-4 * GELU_TANH_K:
        return None
    inner = pat.made_by(pre.inputs[0])
    if not pat.free(inner) or not pat.elementwise(inner, "add") or len(inner.inputs) != 2 \
            or pat.sole_user(inner) is not pre:
        return None
    for x, c_out in (inner.inputs, inner.inputs[::-1]):
        c = pat.made_by(c_out)
        f = pat.scale_of(c) if pat.free(c) and pat.sole_user(c) is inner else None
        if f is None or abs(f - GELU_TANH_C) > 1e-4 * GELU_TANH_C:
            continue
        cube = pat.made_by(c.inputs[0])
        if pat.free(cube) and cube.status == "benchmark" and isinstance(cube.config, L.UnaryConfig) \
                and cube.config.op == "pow" and cube.config.exponent == 3.0 and cube.inputs[0] == x \
                and pat.sole_user(cube) is c:
            break
    else:
        return None
    add = pat.sole_user(tanh)
    if not pat.free(add) or not pat.elementwise(add, "add") or pat.scalar(add) != 1.0:
        return None
    mul = pat.sole_user(add)
    if not pat.free(mul) or not pat.elementwise(mul, "mul") or len(mul.inputs) != 2:
        return None
    half = _gelu_half(pat, x, add, mul)
    shape = tuple(tanh.config.shape)
    if half is None or tuple(mul.config.output_shape()) != shape or tuple(cube.config.shape) != shape:
        return None
    chain = [cube.index, c.index, inner.index, pre.index, tanh.index, add.index, mul.index, half.index]
    return chain, L.UnaryConfig(shape=shape, op="gelu_tanh")


def _find_silus(pat: _Pattern, sig: Layer):
    """Sigmoid -> Mul(x, sigmoid(x)): SiLU (swish) as exporters write torch's ``silu`` (EfficientNet,
    and the SE blocks' activations), one elementwise pass where the pair takes two."""
    if not pat.free(sig) or sig.status != "benchmark" or not isinstance(sig.config, L.ActivationConfig) \
            or sig.config.mode != "sigmoid" or len(sig.inputs) != 1:
        return None
    mul = pat.sole_user(sig)
    if not pat.free(mul) or not pat.elementwise(mul, "mul") \
            or sorted(mul.inputs) != sorted((sig.inputs[0], sig.outputs[0])):
        return None
    cfg = mul.config
    if cfg.a != cfg.b or tuple(cfg.a) != tuple(sig.config.shape):
        return None
    return [sig.index, mul.index], L.ActivationConfig(shape=tuple(sig.config.shape), mode="swish")


def _swiglu_parts(pat: _Pattern, mul: Layer):
    """``(sigmoid, silu mul, gate tensor, up tensor)`` of SwiGLU's gating written as Sigmoid(g) ->
    Mul(g, sigmoid) -> Mul(silu, u) ending at ``mul`` (float data, g and u of one shape), or None."""
    if not pat.free(mul) or not pat.elementwise(mul, "mul") or mul.config.dtype or len(mul.inputs) != 2 \
            or mul.static_inputs or tuple(mul.config.a) != tuple(mul.config.b):
        return None
    for silu_t, up_t in (mul.inputs, mul.inputs[::-1]):
        silu = pat.made_by(silu_t)
        if not pat.free(silu) or not pat.elementwise(silu, "mul") or pat.sole_user(silu) is not mul \
                or len(silu.inputs) != 2 or up_t == silu_t:
            continue
        for gate_t, sig_t in (silu.inputs, silu.inputs[::-1]):
            sig = pat.made_by(sig_t)
            if pat.free(sig) and sig.status == "benchmark" and isinstance(sig.config, L.ActivationConfig) \
                    and sig.config.mode == "sigmoid" and list(sig.inputs) == [gate_t] \
                    and pat.sole_user(sig) is silu and tuple(silu.config.a) == tuple(silu.config.b) \
                    and tuple(sig.config.shape) == tuple(mul.config.a) and gate_t != up_t:
                return sig, silu, gate_t, up_t
    return None


def _find_swiglus(pat: _Pattern, mul: Layer):
    """Sigmoid(g) -> Mul(g, sigmoid) -> Mul(silu, u): SwiGLU's gating ``silu(g) * u`` (Llama's MLP,
    ``act_fn(gate_proj(x)) * up_proj(x)``) as one elementwise pass (ElementwiseConfig swiglu: g and u
    read, one output written) where the chain takes three. Runs before :func:`_find_silus`, which
    would take the Sigmoid -> Mul alone."""
    parts = _swiglu_parts(pat, mul)
    if parts is None:
        return None
    sig, silu, gate_t, up_t = parts
    shape = tuple(mul.config.a)
    split = _gate_up_split(pat, gate_t, up_t, {sig.index, silu.index}, {mul.index})
    return [sig.index, silu.index, mul.index] + ([split.index] if split is not None else []), \
        L.ElementwiseConfig(op="swiglu", a=shape, b=shape)


def _gate_up_split(pat: _Pattern, gate_t: str, up_t: str, gate_readers: set[int], up_readers: set[int]) -> Layer | None:
    """The Split that cuts one fused gate-and-up product (transformers' Phi-3 ``gate_up_proj``, then
    ``chunk(2, dim=-1)``) into the gating's two operands: two equal halves of the last axis, each read by
    the gating only. PyTorch's ``chunk`` is a view: eager's silu and mul and torch.compile's one fused kernel
    (``triton_poi_fused_mul_silu_split``, phi3 prefill on an H200, 2026-11-28c) read the halves in place,
    so the Split joins the gating's group and costs nothing of its own (the group reads a and b, the two
    halves, as the separate tensors it times: the same bytes, rows of ``intermediate`` contiguous
    elements). None when the operands come from anything else."""
    split = pat.made_by(gate_t)
    if split is None or split is not pat.made_by(up_t) or split.op_type != "Split" or not pat.free(split) \
            or split.status not in ("benchmark", "zero_cost") or len(split.inputs) != 1 \
            or sorted(split.outputs) != sorted((gate_t, up_t)) or len(split.input_shapes) < 1:
        return None
    x, outs = split.input_shapes[0], split.output_shapes
    if x is None or len(outs) != 2 or any(o is None for o in outs) or not x or x[-1] % 2:
        return None
    half = tuple(x[:-1]) + (x[-1] // 2,)
    if any(tuple(o) != half for o in outs) or any(t in pat.graph_outputs for t in (gate_t, up_t)):
        return None
    if {ly.index for ly in pat.users(gate_t)} != gate_readers or {ly.index for ly in pat.users(up_t)} != up_readers:
        return None
    return split


class _Gating:
    """``pat`` for :func:`_swiglu_parts` with the gating's own layers (in the fusion candidate
    :func:`_find_swiglus` made of them) counted as free."""

    def __init__(self, pat: _Pattern, mul: Layer):
        self.pat, self.group = pat, mul.fusion

    def free(self, ly):
        return ly is not None and self.group is not None and ly.fusion == self.group

    def __getattr__(self, name):
        return getattr(self.pat, name)


def _find_gate_up_gemms(pat: _Pattern, mul: Layer):
    """SwiGLU's gate and up projections (two MatMul / Gemm layers of one config reading the same
    input, each with its own weight, found through the gating :func:`_find_swiglus` took) as one GEMM
    of the concatenated weights: the same m and k, n = 2 * intermediate (the "gate_up_proj" of
    vLLM's MergedColumnParallelLinear and of transformers' Phi-3; the gating then reads the two
    halves of its output). Both products' outputs must be read by the gating only."""
    parts = _swiglu_parts(_Gating(pat, mul), mul)
    if parts is None:
        return None
    sig, silu, gate_t, up_t = parts
    gate, up = pat.made_by(gate_t), pat.made_by(up_t)
    for mm, readers in ((gate, {sig.index, silu.index}), (up, {mul.index})):
        if not pat.free(mm) or mm.op_type not in ("MatMul", "Gemm") or mm.status != "benchmark" \
                or not isinstance(mm.config, L.GemmConfig) or len(mm.inputs) != 1 or len(mm.static_inputs) < 1 \
                or {ly.index for ly in pat.users(mm.outputs[0])} != readers or mm.outputs[0] in pat.graph_outputs:
            return None
    if gate.inputs != up.inputs or gate.config != up.config or gate.static_inputs == up.static_inputs:
        return None
    g = gate.config
    return [gate.index, up.index], dataclasses.replace(g, n=2 * g.n)


def _bias_vector_add(pat: _Pattern, ly: Layer | None, tensor: str, n: int) -> bool:
    """``ly`` adds a constant per-output-feature vector (n values, broadcast along every dim but
    the last) to ``tensor``: the bias of a Linear layer that an exporter wrote as MatMul -> Add."""
    if not pat.free(ly) or not pat.elementwise(ly, "add") or list(ly.inputs) != [tensor] \
            or len(ly.static_inputs) != 1:
        return False
    shape = pat.ctx.shape(ly.static_inputs[0])
    if shape is None or not shape or shape[-1] != n or math.prod(shape) != n:
        return False
    data = pat.ctx.shape(tensor)
    # the Add must not broadcast the product itself (its output is the product's size)
    return data is not None and math.prod(ly.config.output_shape()) == math.prod(data)


def _find_gemm_acts(pat: _Pattern, mm: Layer):
    """Gemm/MatMul [-> Add(bias vector)] -> Relu | Gelu | decomposed erf-GELU: the product, its bias
    and the activation as one call (cuDNN graph matmul -> add -> act; cuBLASLt bias+act epilogue);
    and MatMul -> Add(bias vector) without an activation as one GEMM with a bias (GemmConfig with
    bias "c": cublasGemmEx onto C, cuBLASLt's BIAS epilogue)."""
    if mm.op_type not in ("Gemm", "MatMul") or mm.status != "benchmark" or not pat.free(mm) \
            or not isinstance(mm.config, L.GemmConfig) or mm.config.batch_count != 1:
        return None
    gemm = mm.config
    chain = [mm.index]
    out = mm.outputs[0]
    nxt = pat.sole_user(mm)
    if gemm.bias == "none" and _bias_vector_add(pat, nxt, out, gemm.n):
        gemm = dataclasses.replace(gemm, bias="c")
        chain.append(nxt.index)
        out = nxt.outputs[0]
        nxt = pat.sole_user(nxt)
    numel = math.prod(gemm.output_shape())
    if pat.free(nxt) and nxt.status == "benchmark":
        cfg = nxt.config
        if isinstance(cfg, L.ActivationConfig) and cfg.mode == "relu" and math.prod(cfg.shape) == numel:
            return chain + [nxt.index], L.GemmActConfig(gemm=gemm, activation="relu")
        if isinstance(cfg, L.UnaryConfig) and cfg.op in ("gelu", "gelu_tanh") and math.prod(cfg.shape) == numel:
            return chain + [nxt.index], L.GemmActConfig(gemm=gemm, activation=cfg.op)
    # a decomposed erf-GELU reads the output twice (x / sqrt 2 and x * 0.5 or x * (1 + erf)); a graph
    # output has no GELU after it, but a bias Add that writes it is still one GEMM with a bias (a language
    # model's output Linear, exported as MatMul -> Add on 3-D inputs: torch's addmm with a bias epilogue)
    if out in pat.graph_outputs:
        return (chain, gemm) if len(chain) > 1 else None
    for u in pat.users(out):
        erf = pat.sole_user(u) if pat.free(u) else None
        hit = _find_gelus(pat, erf) if erf is not None else None
        if hit is None:
            continue
        gchain, _ = hit
        head = pat.layers[gchain[0]]
        readers = {ly.index for ly in pat.users(out)}
        if head.inputs[0] != out or not readers <= set(gchain) or math.prod(pat.layers[gchain[0]].output_shapes[0]) != numel:
            continue
        return chain + list(gchain), L.GemmActConfig(gemm=gemm, activation="gelu")
    # a MatMul and the Add of its bias vector: one GEMM with a bias epilogue (torch's Linear)
    return (chain, gemm) if len(chain) > 1 else None


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
    rebinding, rebound = rebind_fixed_batch(model, batch, weights, batch_dim)
    notices = bind_batch(model, batch, weights, dims, batch_dim) + rebound
    try:
        model, folded, static, shapes = _infer_and_fold_rebound(model, weights, rebinding)
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
    edges = {ly.index: sorted({producers[i] for i in ly.inputs if i in producers}) for ly in layers}
    fusions = _find_fusions(layers, consumers, {o.name for o in g.output}, ctx)
    fusions += _find_transformer_fusions(layers, consumers, {o.name for o in g.output}, ctx, len(fusions))
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
