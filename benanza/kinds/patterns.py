"""Fusion patterns: what a kind declares to find its fusion candidates in a layer graph.

A fused kind (cuDNN's Conv -> bias -> Relu, fused attention, a decomposed LayerNorm, ...) names its
pattern in its own module, next to its config: a :class:`Pattern` in its ``Kind.patterns``
(:class:`benanza.kinds.base.Kind`). Processing (``benanza.processing.model``) builds the layer graph,
wraps it in a :class:`Graph` and runs every registered pattern (:data:`benanza.kinds.PATTERNS`) in the
order of :attr:`Pattern.order`; it names no fused kind itself.

A pattern sees the layer graph only through :class:`Graph` (producers, consumers, graph outputs,
constants, shapes) and its layers only through :class:`Node` (op type, status, config, tensors,
shapes, and the fusion group a layer already belongs to).

The order (``Pattern.order`` = (pass, place)) is part of the result: a layer is in at most one
candidate, so a pattern run earlier takes the layers a later one would have wanted, and candidates are
numbered in the order they are found. The passes run in increasing order; one pass walks the layers in
graph order and offers each layer to its patterns by place, the first that finds a group of free
layers taking it. Today's order:

====== ==================================================================================
(10,0) ConvBnAct: Conv -> BatchNormalization [-> Relu] (:mod:`benanza.kinds.conv_bn_act`)
(10,1) ConvBiasAct: Conv [-> Add per-channel bias] -> Relu (:mod:`benanza.kinds.conv_bias_act`)
(20,0) SDPA: decomposed attention with its data movement (:mod:`benanza.kinds.sdpa`)
(30,0) SDPA GQA: ONNX Attention after repeated K/V heads (:mod:`benanza.kinds.sdpa`)
(40,0) LayerNorm: decomposed ReduceMean/Sub/Pow/.../Div (:mod:`benanza.kinds.layernorm`)
(50,0) RMSNorm: decomposed Pow/ReduceMean/Add/Sqrt/... (:mod:`benanza.kinds.rmsnorm`)
(60,0) RotaryEmbedding: rotate_half's Slice/Neg/Concat/Mul/Add (:mod:`benanza.kinds.rotary`)
(65,0) GroupedGemm: transformers' eager experts, per-expert MatMuls by weight slices (:mod:`benanza.kinds.grouped_gemm`)
(70,0) GemmAct: Gemm/MatMul [-> bias Add] -> Relu/GELU, or -> bias Add (:mod:`benanza.kinds.gemm_act`)
(80,0) Unary gelu: the erf-GELU chain (:mod:`benanza.kinds.unary`)
(90,0) Unary gelu_tanh: GELU's tanh approximation (:mod:`benanza.kinds.unary`)
(100,0) Elementwise swiglu: SwiGLU's Sigmoid/Mul/Mul gate (:mod:`benanza.kinds.elementwise`)
(110,0) Gemm gate_up: SwiGLU's gate and up MatMuls as one GEMM (:mod:`benanza.kinds.gemm`)
(120,0) Activation swish: Sigmoid -> Mul, SiLU (:mod:`benanza.kinds.activation`)
(130,0) Add+LayerNorm: residual Add -> LayerNorm (:mod:`benanza.kinds.layernorm`)
(130,1) Add+RMSNorm: residual Add -> RMSNorm (:mod:`benanza.kinds.rmsnorm`)
====== ==================================================================================

After the passes, each candidate is offered to the patterns' ``extend`` (in order): a decomposed
norm's group takes in the residual Add before it. A pattern's functions never raise for an odd graph:
processing treats ``KeyError``, ``IndexError``, ``TypeError``, ``ValueError``, ``AttributeError`` and
``ZeroDivisionError`` from them as no candidate (a model file is untrusted input).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

Shape = tuple[int, ...]


class Node(Protocol):
    """One layer of the graph as a pattern sees it (``benanza.processing.model.Layer``): ``index`` its
    position in graph (topological) order; ``status`` "benchmark" (``config`` is its typed config),
    "zero_cost" or "unsupported" (``config`` None); ``inputs`` its data inputs, ``static_inputs`` its
    weights and constants; ``fusion`` the index of the candidate it belongs to, None while free."""

    index: int
    name: str
    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    input_shapes: tuple[Shape | None, ...]
    output_shapes: tuple[Shape | None, ...]
    status: str
    config: Any
    static_inputs: tuple[str, ...]
    fusion: int | None


#: what a pattern's ``find`` returns: (the layer indices of the group, the fused config), or None
Found = tuple[Sequence[int], Any] | None


@dataclass(frozen=True)
class Pattern:
    """A fusion pattern of a kind (``Kind.patterns``).

    - ``name``: what it finds, for messages and the order's documentation.
    - ``order``: (pass, place): see the module's documentation; two patterns never share one.
    - ``find``: ``(Graph, Node) -> (layer indices, config) | None``: the candidate that starts (or is
      anchored) at the layer, its layers free when found; the config is the fused call's.
    - ``extend``: ``(Graph, layer indices, config) -> (Node, config) | None``: a layer a candidate
      found by any pattern takes in after every pass (a residual Add before a decomposed norm), with
      the group's new config; None (the field) for a pattern that extends nothing.
    """

    name: str
    order: tuple[int, int]
    find: Callable[["Graph", Node], Found]
    extend: Callable[["Graph", tuple[int, ...], Any], tuple[Node, Any] | None] | None = None


def passes(patterns: Sequence[Pattern]) -> list[tuple[Pattern, ...]]:
    """``patterns`` in their order, grouped by pass (one tuple per pass, by place). Raises ValueError
    when two patterns share an order."""
    ordered = sorted(patterns, key=lambda p: p.order)
    for a, b in zip(ordered, ordered[1:]):
        if a.order == b.order:
            raise ValueError(f"fusion patterns {a.name!r} and {b.name!r} share the order {a.order}")
    out: list[tuple[Pattern, ...]] = []
    for p in ordered:
        if out and out[-1][0].order[0] == p.order[0]:
            out[-1] += (p,)
        else:
            out.append((p,))
    return out


class Graph:
    """Read-only views of the layer graph for the patterns: producers, consumers, constants.

    ``layers`` in graph order (``layers[i].index == i``); ``consumers``: tensor -> indices of the layers
    reading it; ``graph_outputs``: the names of the graph's outputs; ``ctx``: the mapping context
    (:class:`benanza.kinds.onnx_map.MapContext`: ``shape``, ``value``, ``static``, ``static_value``,
    ``producer``)."""

    def __init__(self, layers: Sequence[Node], consumers: Mapping[str, list[int]], graph_outputs: set[str], ctx):
        self.layers, self.consumers, self.graph_outputs, self.ctx = layers, consumers, graph_outputs, ctx
        self.producer = {o: ly.index for ly in layers for o in ly.outputs}

    def free(self, ly: Node | None) -> bool:
        return ly is not None and ly.fusion is None

    def users(self, tensor: str) -> list[Node]:
        return [self.layers[i] for i in self.consumers.get(tensor, [])]

    def sole_user(self, ly: Node) -> Node | None:
        """The one layer reading ``ly``'s output, when no other layer (and no graph output) reads it."""
        out = ly.outputs[0] if ly.outputs else None
        users = self.users(out) if out else []
        if len(users) != 1 or out in self.graph_outputs:
            return None
        return users[0]

    def made_by(self, tensor: str) -> Node | None:
        i = self.producer.get(tensor)
        return self.layers[i] if i is not None else None

    def scalar(self, ly: Node) -> float | None:
        """The value of ``ly``'s one constant scalar operand, if it has exactly one."""
        if len(ly.static_inputs) != 1 or len(ly.inputs) != 1:
            return None
        v = self.ctx.value(ly.static_inputs[0])
        if v is None or np.asarray(v).size != 1:
            return None
        return float(np.asarray(v).reshape(-1)[0])

    def elementwise(self, ly: Node | None, op: str) -> bool:
        """``ly`` is a benchmarked binary elementwise layer (:class:`benanza.kinds.elementwise.ElementwiseConfig`)
        of ``op``."""
        return is_kind(ly, "Elementwise") and ly.config.op == op

    def scale_of(self, ly: Node | None) -> float | None:
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


def is_kind(ly: Node | None, kind: str) -> bool:
    """``ly`` is a benchmarked layer whose config is of layer kind ``kind`` (``LayerConfig.kind``, one
    config class per kind): for a pattern whose module cannot import that kind's module (it imports
    this one's)."""
    return ly is not None and ly.status == "benchmark" and getattr(ly.config, "kind", None) == kind


def is_cast(ly: Node | None) -> bool:
    """A Cast layer: a real one (a Unary cast) or an identity (zero-cost, to the same type)."""
    return ly is not None and ly.op_type == "Cast" and ly.status in ("benchmark", "zero_cost")
