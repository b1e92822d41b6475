"""GroupedGemm layers: the experts' matrix products of a mixture-of-experts layer, one GEMM per expert
over the tokens routed to it, ``Y[rows_e] = X[rows_e] @ W[e]`` with the rows sorted by expert.

transformers 5 runs a mixture of experts this way by default (``grouped_mm_experts_forward``,
``transformers/integrations/moe.py``: sort the (token, expert) pairs by expert, count them per expert,
``torch.nn.functional.grouped_mm`` or its per-expert ``torch.mm`` loop
``transformers::grouped_mm_fallback``). ONNX has no such operator: benanza's export writes it as one
``GroupedMatMul`` node of the ``benanza`` domain (:data:`GROUPED_MATMUL_SPEC`,
``benanza.processing.modules``), inputs ``x [S, K]`` (rows sorted by expert), ``w [E, K, N]`` and
``offs [E]`` (the cumulative row counts, int32), output ``y [S, N]``.

The rows per expert are the router's choice at run time, not the graph's: a config states the routing
it is timed under (:attr:`GroupedGemmConfig.routing`; ``balanced``: ``S`` rows spread as evenly as they
go over ``min(E, S)`` experts, what a load-balanced router gives and what a decode token's ``top_k``
distinct experts are; ``measured``: the per-expert counts the router gave on the run's own inputs,
recorded by ``benanza torch``'s export, :mod:`benanza.processing.routing`, carried as
:attr:`GroupedGemmConfig.counts`).

Timed: cuBLAS's ``cublasGemmGroupedBatchedEx`` (one group per row count), the per-expert
``cublasGemmEx`` loop (transformers' fallback, a framework without a grouped kernel), and where every
active expert has the same rows ``cublasGemmStridedBatchedEx`` and cuBLASLt's strided-batched
matmul (its heuristic's configs, FP8 included). The framework side: PyTorch's
``torch.nn.functional.grouped_mm`` (bf16, the call transformers makes on a GPU) and its ``torch.mm`` loop.

In a training step (docs/training.md) its gradients are grouped GEMMs too, as autograd runs them
(PyTorch's tools/autograd/derivatives.yaml, ``_grouped_mm``: ``self: _grouped_mm_mat1_backward(grad,
mat2, ..., offs)``, ``mat2: _grouped_mm_mat2_backward(grad, self, ..., offs)``, which call ``_grouped_mm``
again, torch/csrc/autograd/FunctionsManual.cpp): the data gradient ``dX[r_e] = dY[r_e] @ op(W[e])^T``
(the same rows and routing, n and k swapped) and the weight gradient ``dW[e] = X[r_e]^T @ dY[r_e]``
(:attr:`GroupedGemmConfig.weight_grad`: one product per expert whose reduction is the expert's rows),
:func:`grouped_gemm_backward`.

The whole slice of the kind: its config, the ONNX op it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import OPTIONAL, Job, Kind, LayerConfig
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, cpp_string, job_init
from benanza.kinds.framework import Candidate, Ctx
from benanza.kinds.onnx_map import MS_DOMAIN, ContribOp, Unsupported, contrib_doc, need
from benanza.kinds.patterns import Graph, Node, Pattern, is_kind

#: the domain of the operators benanza's export writes where ONNX has none
BENANZA_DOMAIN = "benanza"
#: where the operator's semantics come from: PyTorch's grouped matmul, as transformers calls it
GROUPED_MATMUL_SPEC = "https://docs.pytorch.org/docs/stable/generated/torch.nn.functional.grouped_mm.html"
#: the routings a config can be timed under (:meth:`GroupedGemmConfig.counts`): ``balanced``
#: (:func:`balanced_counts`) and ``measured`` (the counts the profiled run's router gave, explicit)
ROUTINGS = ("balanced", "measured")


def balanced_counts(rows: int, experts: int) -> tuple[int, ...]:
    """Rows per expert of the ``balanced`` routing, ``experts`` entries in expert order: ``active =
    min(E, S)`` experts get ``S // active`` rows and the first ``S % active`` of them one more; the
    others none (the C++ case computes the same rule, ``templates/grouped_gemm.cpp.j2``; transformers'
    eager experts loop takes it too, :mod:`benanza.processing.routing`)."""
    active = min(experts, rows)
    if active < 1:
        return (0,) * experts
    base, rem = divmod(rows, active)
    return tuple(base + (1 if e < rem else 0) for e in range(active)) + (0,) * (experts - active)


@dataclass(frozen=True)
class GroupedGemmConfig(LayerConfig):
    """A grouped GEMM over the experts of a mixture-of-experts layer: for each expert ``e``,
    ``Y[r_e] = X[r_e] @ W[e]`` (``W[e]^T`` when ``trans_b``), rows ``r_e`` contiguous and in expert
    order.

    rows: S, the (token, expert) pairs (tokens x top-k); k: the input features (K); n: the output
    features (N); experts: E, the weight's leading dim; trans_b: W stored ``[E, N, K]`` (an
    ``nn.Linear``-style expert) rather than ``[E, K, N]``; routing: how the rows fall on the experts
    (:meth:`counts`): ``balanced`` (computed) or ``measured`` with ``rows_per_expert`` the rows of each expert
    (E entries in expert order, summing to ``rows``; empty for ``balanced``, and then left out of the
    key, so balanced configs keep the keys they were stored under). FLOPs: ``2 * rows * n * k``
    (every row is multiplied once, whatever the routing). Raises ValueError for non-positive sizes,
    an unknown routing, or counts that do not fit (``measured`` without E non-negative counts summing
    to ``rows``; counts with ``balanced``).

    weight_grad: the weight gradient of a grouped GEMM instead (a training step's, PyTorch's
    ``_grouped_mm`` of a 2-D ``[k, rows]`` by a 2-D ``[rows, n]`` with ``offs`` splitting the rows):
    ``out[e] = A[r_e]^T @ B[r_e]`` with ``A [rows, k]``, ``B [rows, n]``, ``out [experts, k, n]``, the
    reduction over each expert's rows ``r_e`` under the routing. An expert without rows gets zeros
    (PyTorch's ``_grouped_mm`` writes them, its ``dW`` is ``[E, K, N]`` whole: seen on PyTorch 2.13 on a
    CPU, and on Hopper GPUs per pytorch/pytorch#172439, which reports Blackwell's kernel leaving them wrong). ``trans_b`` is False
    (the caller orders A and B: :func:`grouped_gemm_backward`). FLOPs: ``2 * rows * n * k`` too.
    """

    kind: ClassVar[str] = "GroupedGemm"
    tensor_cores: ClassVar[bool] = True
    rows: int
    n: int
    k: int
    experts: int
    trans_b: bool = False
    routing: str = "balanced"
    weight_grad: bool = dataclasses.field(default=False, metadata=OPTIONAL)
    rows_per_expert: tuple[int, ...] = dataclasses.field(default=(), metadata=OPTIONAL)

    def __post_init__(self):
        if min(self.rows, self.n, self.k, self.experts) < 1:
            raise ValueError(f"GroupedGemmConfig: sizes must be positive ({self.rows}, {self.n}, {self.k}, "
                             f"{self.experts})")
        if self.routing not in ROUTINGS:
            raise ValueError(f"GroupedGemmConfig: routing {self.routing!r} is not one of {', '.join(ROUTINGS)}")
        if self.weight_grad and self.trans_b:
            raise ValueError("GroupedGemmConfig: a weight gradient is out[e] = A[r_e]^T B[r_e], no trans_b")
        object.__setattr__(self, "rows_per_expert", tuple(int(c) for c in self.rows_per_expert))
        if self.routing == "balanced" and self.rows_per_expert:
            raise ValueError("GroupedGemmConfig: balanced routing computes its counts; none may be given")
        if self.routing == "measured":
            c = self.rows_per_expert
            if len(c) != self.experts or min(c, default=0) < 0 or sum(c) != self.rows:
                raise ValueError(f"GroupedGemmConfig: measured routing needs {self.experts} non-negative counts "
                                 f"summing to {self.rows} rows, got {len(c)} summing to {sum(c)}")

    def counts(self) -> tuple[int, ...]:
        """Rows per expert, ``experts`` entries in expert order: the measured ``rows_per_expert``, else
        :func:`balanced_counts`."""
        return self.rows_per_expert if self.routing == "measured" else balanced_counts(self.rows, self.experts)

    def balanced(self) -> "GroupedGemmConfig":
        """The same GEMMs under ``balanced`` routing: a measured config's what-if (itself when balanced)."""
        return self if self.routing == "balanced" else dataclasses.replace(self, routing="balanced",
                                                                           rows_per_expert=())

    @property
    def active(self) -> int:
        """Experts with at least one row under the routing."""
        return sum(1 for c in self.counts() if c)

    def input_shapes(self):
        if self.weight_grad:
            return [(self.rows, self.k), (self.rows, self.n)]
        w = (self.experts, self.n, self.k) if self.trans_b else (self.experts, self.k, self.n)
        return [(self.rows, self.k), w]

    def output_shape(self):
        return (self.experts, self.k, self.n) if self.weight_grad else (self.rows, self.n)

    def flops(self):
        return 2 * self.rows * self.n * self.k

    def describe(self):
        t = "T" if self.trans_b else "N"
        if self.weight_grad:
            return (f"GroupedGemm(weight gradient, {self.experts} experts, {self.active} active, rows {self.rows} "
                    f"k{self.k} n{self.n}, {self.routing})")
        return (f"GroupedGemm({self.experts} experts, {self.active} active, rows {self.rows} n{self.n} k{self.k} "
                f"N{t}, {self.routing})")


def _map_grouped_matmul(node, ctx, attrs):
    """``benanza.GroupedMatMul(x [S, K], w [E, K, N], offs [E]) -> y [S, N]`` (benanza's export of
    ``torch.nn.functional.grouped_mm`` / ``transformers::grouped_mm_fallback``); attribute
    ``trans_b`` (default 0): w is ``[E, N, K]``. Unsupported for other ranks or mismatched K."""
    if len(node.input) < 3:
        raise Unsupported("GroupedMatMul needs x, w and offs")
    x = tuple(need(ctx.shape(node.input[0]), "input x"))
    w = tuple(need(ctx.shape(node.input[1]), "input w"))
    if len(x) != 2 or len(w) != 3:
        raise Unsupported(f"GroupedMatMul of x {list(x)} and w {list(w)} (x [S, K], w [E, K, N])")
    tb = bool(int(attrs.get("trans_b", 0)))
    e, k, n = (w[0], w[2], w[1]) if tb else w
    if x[1] != k:
        raise Unsupported(f"GroupedMatMul inner dimensions differ ({x[1]} vs {k})")
    if x[0] < 1:
        raise Unsupported("GroupedMatMul of no rows")
    return GroupedGemmConfig(rows=x[0], n=n, k=k, experts=e, trans_b=tb)


def _grouped_matmul_shapes(node, ctx, attrs):
    """y [S, N] of x [S, K] and w [E, K, N] (``[E, N, K]`` with trans_b), x's element type."""
    x, w = ctx.shape(node.input[0]), ctx.shape(node.input[1])
    tb = bool(int(attrs.get("trans_b", 0)))
    shape = None
    if x is not None and w is not None and len(x) == 2 and len(w) == 3:
        shape = (x[0], w[1] if tb else w[2])
    return [(shape, ctx.types.get(node.input[0]))]


#: ONNX Runtime's MoE activation_type -> the config of the activation between fc1 and fc2 (shape, ...)
_ORT_ACTIVATIONS = ("relu", "gelu", "silu", "identity", "swiglu")


def _map_ort_moe(node, ctx, attrs):
    """ONNX Runtime's ``com.microsoft`` ``MoE`` (:func:`benanza.kinds.onnx_map.contrib_doc`): input
    ``[rows, hidden]`` (or ``[b, s, hidden]``), router_probs ``[rows, E]``, fc1/fc2/fc3 experts' weights
    ``[E, out, in]`` (ONNX Runtime 1.22+) or ``[E, in, out]`` (earlier; told apart by which dim is the
    input's width), attributes ``k``, ``activation_type`` and ``swiglu_fusion`` (fc1 computes gate and up
    together: its output is 2 x the intermediate). As the calls its CUDA kernel makes, in order (each a
    :class:`~benanza.kinds.onnx_map.Part`): the router's softmax and top-k over router_probs, the
    permutation of the S = rows x k (token, expert) rows (a Gather), fc1 as a grouped GEMM, the activation
    (SwiGLU as ``silu(gate) * up``; with fc3, fc3's grouped GEMM and the product), fc2 as a grouped GEMM,
    and the un-permutation with the top-k weighted sum (a ReduceSum over the k rows of each token).
    Unsupported: no static fc1/fc2 weights, another activation, mismatched widths."""
    from benanza.kinds.activation import ActivationConfig
    from benanza.kinds.elementwise import ElementwiseConfig
    from benanza.kinds.gather import GatherConfig
    from benanza.kinds.onnx_map import Part
    from benanza.kinds.reduce import ReduceConfig
    from benanza.kinds.softmax import SoftmaxConfig
    from benanza.kinds.topk import TopKConfig
    from benanza.kinds.unary import UnaryConfig

    ins = list(node.input) + [""] * (8 - len(node.input))
    x = tuple(need(ctx.shape(ins[0]), "input"))
    probs = tuple(need(ctx.shape(ins[1]), "router_probs"))
    if len(x) not in (2, 3) or len(probs) != 2:
        raise Unsupported(f"MoE input {list(x)} / router_probs {list(probs)} (input [rows, hidden] or [b, s, "
                          f"hidden], router_probs [rows, E])")
    hidden, rows = x[-1], probs[0]
    experts, k = probs[1], int(attrs.get("k", 1))
    act = str(attrs.get("activation_type", "relu"))
    if isinstance(act, bytes):
        act = act.decode()
    if act not in _ORT_ACTIVATIONS:
        raise Unsupported(f"MoE activation_type {act!r} (benchmarked: {', '.join(_ORT_ACTIVATIONS)})")
    if not 1 <= k <= experts:
        raise Unsupported(f"MoE k={k} of {experts} experts")

    def fc(name: str, width: int, what: str) -> tuple[int, bool]:
        w = need(ctx.shape(name), what) if name else None
        if w is None or len(w) != 3 or w[0] != experts:
            raise Unsupported(f"MoE {what} of shape {w} (the experts' weights [E, out, in] or [E, in, out])")
        if w[2] == width:
            return w[1], True  # [E, out, in]: the nn.Linear layout
        if w[1] == width:
            return w[2], False
        raise Unsupported(f"MoE {what} {list(w)} does not take the width {width}")

    s = rows * k
    fc1_out, t1 = fc(ins[2], hidden, "fc1_experts_weights")
    swiglu = act == "swiglu" and not ins[6]
    inter = fc1_out // 2 if swiglu else fc1_out
    parts = [Part(SoftmaxConfig(shape=(rows, experts, 1))),
             Part(TopKConfig(x=(rows, experts), axis=1, k=k, largest=True, sorted=True)),
             Part(GatherConfig(data=(rows, hidden), indices=(s,), axis=0)),
             Part(GroupedGemmConfig(rows=s, n=fc1_out, k=hidden, experts=experts, trans_b=t1))]
    if swiglu:
        parts.append(Part(ElementwiseConfig(op="swiglu", a=(s, inter), b=(s, inter))))
    elif ins[6]:  # fc3: the gate's own grouped GEMM, then silu(gate) * up
        fc3_out, t3 = fc(ins[6], hidden, "fc3_experts_weights")
        parts += [Part(GroupedGemmConfig(rows=s, n=fc3_out, k=hidden, experts=experts, trans_b=t3)),
                  Part(ElementwiseConfig(op="swiglu", a=(s, inter), b=(s, inter)))]
    elif act == "relu":
        parts.append(Part(ActivationConfig(shape=(s, inter), mode="relu")))
    elif act in ("gelu", "silu"):
        parts.append(Part(UnaryConfig(shape=(s, inter), op="gelu" if act == "gelu" else "swish")))
    n2, t2 = fc(ins[4], inter, "fc2_experts_weights")
    if n2 != hidden:
        raise Unsupported(f"MoE fc2 writes {n2} features, the input has {hidden}")
    parts += [Part(GroupedGemmConfig(rows=s, n=hidden, k=inter, experts=experts, trans_b=t2)),
              Part(ReduceConfig(op="sum", x=(rows, k, hidden), y=(rows, 1, hidden)), outputs=(0,))]
    return tuple(parts)


def _ort_moe_shapes(node, ctx, attrs):
    """The output is the input's shape and type."""
    return [(ctx.shape(node.input[0]), ctx.types.get(node.input[0]))]


def _expert_slice(pat: Graph, mm: Node) -> tuple[str, bool, list[Node]] | None:
    """(the experts' weight, whether it is ``[E, N, K]``, the slice's layers) when ``mm`` is a MatMul of one
    expert's rows by one expert's weight: ``B`` a Gather along axis 0 of a static 3-D weight by a scalar
    index that is data (the expert the loop is at), or its Transpose; None otherwise. ``mm`` may have no
    rows (an expert the routing gives none: a zero-cost layer)."""
    if mm.op_type != "MatMul" or len(mm.inputs) != 2 or not (
            is_kind(mm, "Gemm") and mm.config.batch_count == 1
            or mm.status == "zero_cost" and mm.output_shapes[0] is not None and len(mm.output_shapes[0]) == 2):
        return None
    b = pat.made_by(mm.inputs[1])
    t = b if b is not None and b.op_type == "Transpose" and is_kind(b, "Copy") else None
    g = pat.made_by(t.inputs[0]) if t is not None else b
    if g is None or g.op_type != "Gather" or not is_kind(g, "Gather") or g.config.axis != 0 \
            or len(g.static_inputs) != 1 or len(g.inputs) != 1 or len(g.config.data) != 3 or g.config.indices != ():
        return None
    return g.static_inputs[0], t is not None, [ly for ly in (g, t, mm) if ly is not None]


def find_eager_experts(pat: Graph, mm: Node):
    """transformers' eager experts (a loop over the experts the routing hit, each expert's rows by its own
    weight slice; :mod:`benanza.processing.routing` binds the rows) as the grouped GEMM serving engines run
    instead: every MatMul of the graph by a slice of one experts' weight (:func:`_expert_slice`), with the
    slices' Gathers and Transposes (a grouped GEMM reads the experts' weights in place), is one
    :class:`GroupedGemmConfig` over the traced experts the routing gives rows (``experts`` = the loop's
    bodies that run, ``rows`` = their rows; under balanced routing the rows fall on them as the bodies' own
    rows do; a body without rows has a zero-cost weight slice and is left out). Anchored at the first such
    MatMul; every layer free."""
    first = _expert_slice(pat, mm)
    if first is None or not pat.free(mm):
        return None
    group = [got for ly in pat.layers if ly.index >= mm.index and (got := _expert_slice(pat, ly)) is not None
             and got[0] == first[0]]
    if group[0][2][-1] is not mm or any(t != first[1] for _, t, _ in group):
        return None
    layers = [ly for _, _, part in group for ly in part]
    if not all(pat.free(ly) for ly in layers):
        return None
    mms = [part[-1] for _, _, part in group]
    rows = sum(ly.output_shapes[0][0] for ly in mms)
    w = pat.ctx.shape(first[0])
    n, k = (w[1], w[2]) if first[1] else (w[2], w[1])
    if rows < 1 or any(ly.output_shapes[0][1] != n for ly in mms):
        return None
    chain = [ly.index for ly in layers if ly.status == "benchmark"]
    return chain, GroupedGemmConfig(rows=rows, n=n, k=k, experts=len(mms), trans_b=first[1])


def grouped_gemm_backward(cfg: GroupedGemmConfig) -> tuple | None:
    """``Kind.backward`` of GroupedGemm: the data gradient, ``dX[r_e] = dY[r_e] @ op(W[e])^T`` (rows ``S``,
    n = K, k = N, the weight read the other way: ``trans_b`` flipped), and the weight gradient of the
    weights as stored, ``dW[e] = X[r_e]^T @ dY[r_e]`` (``[E, K, N]``) or, with ``trans_b``,
    ``dW[e] = dY[r_e]^T @ X[r_e]`` (``[E, N, K]``), each under the forward's routing: the two
    ``_grouped_mm`` calls of PyTorch's ``GroupedMmBackward0`` (derivatives.yaml's ``_grouped_mm`` entry;
    seen under a TorchDispatchMode on PyTorch 2.13: ``_grouped_mm(dY, W^T, offs)`` and
    ``_grouped_mm(X^T, dY, offs)`` giving ``[E, K, N]``, zeros for an expert without rows). None for a
    weight-gradient config (no forward layer is one)."""
    if cfg.weight_grad:
        return None
    route = {"routing": cfg.routing, "rows_per_expert": cfg.rows_per_expert}
    data = GroupedGemmConfig(rows=cfg.rows, n=cfg.k, k=cfg.n, experts=cfg.experts, trans_b=not cfg.trans_b, **route)
    a, b = (cfg.n, cfg.k) if cfg.trans_b else (cfg.k, cfg.n)
    weight = GroupedGemmConfig(rows=cfg.rows, n=b, k=a, experts=cfg.experts, weight_grad=True, **route)
    return (("backward_data", data), ("backward_weight", weight))


@dataclass(frozen=True)
class GroupedGemmCase(Case):
    """One row of ``templates/grouped_gemm.cpp.j2``'s case table: the fields of its C++
    ``GroupedGemmCase`` in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order)."""

    rows: int
    n: int
    k: int
    experts: int
    trans_b: CppValue
    weight_grad: CppValue
    label: CppValue
    counts: CppValue


def _grouped_case(cfg: GroupedGemmConfig, job: Job) -> GroupedGemmCase:
    """The case of ``cfg``: its rows per expert as data (``counts``, E ints: a measured routing's; empty
    for ``balanced``, which the template computes by the same rule as :func:`balanced_counts`)."""
    return GroupedGemmCase(job=job_init(job), rows=cfg.rows, n=cfg.n, k=cfg.k, experts=cfg.experts,
                           trans_b=cpp_num(cfg.trans_b), weight_grad=cpp_num(cfg.weight_grad),
                           label=cpp_string(cfg.routing + (", weight gradient" if cfg.weight_grad else "")),
                           counts=c_array(cfg.rows_per_expert))


def _grouped(c: Ctx) -> Candidate:
    """``torch.nn.functional.grouped_mm(x, w, offs=offs)`` (``torch._grouped_mm`` on an older PyTorch),
    what transformers calls on a GPU, with ``offs`` the cumulative counts of :meth:`GroupedGemmConfig.counts`;
    where PyTorch has no grouped kernel for the dtype (it takes bf16), the per-expert ``torch.mm`` loop
    of transformers' fallback alone. The loop is always timed too (a variant)."""
    cfg, torch = c.cfg, c.torch
    if cfg.weight_grad:
        return _grouped_weight_grad(c)
    x = c.randn((cfg.rows, cfg.k))
    w = c.randn((cfg.experts, cfg.n, cfg.k)).transpose(-2, -1) if cfg.trans_b else c.randn((cfg.experts, cfg.k, cfg.n))
    ends, offs = _offsets(c)
    out = torch.empty((cfg.rows, cfg.n), device=c.device, dtype=x.dtype)

    def loop():
        start = 0
        for e, end in enumerate(ends):
            if end > start:
                torch.mm(x[start:end], w[e], out=out[start:end])
            start = end
        return out

    looped = Candidate("torch:aten::mm", "per-expert loop", loop, cfg.rows * cfg.n,
                       note=f"{cfg.active} torch.mm calls (transformers::grouped_mm_fallback)")
    fn = getattr(torch.nn.functional, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)
    if fn is None or x.dtype != torch.bfloat16:
        return looped
    return Candidate("torch:aten::_grouped_mm", "grouped_mm", lambda: fn(x, w, offs=offs), cfg.rows * cfg.n,
                     variants=[looped])


def _offsets(c: Ctx):
    """The routing's cumulative row counts (``offs`` of ``grouped_mm``), int32 on the device."""
    ends, acc = [], 0
    for cnt in c.cfg.counts():
        acc += cnt
        ends.append(acc)
    return ends, c.torch.tensor(ends, device=c.device, dtype=c.torch.int32)


def _grouped_weight_grad(c: Ctx) -> Candidate:
    """A weight gradient as autograd computes it: ``grouped_mm(A.t(), B, offs=offs)`` (PyTorch's
    ``_grouped_mm`` of a 2-D by a 2-D with offs splitting the rows, bf16), else the per-expert loop of
    ``torch.mm(A[r_e].t(), B[r_e])`` into a zeroed ``[E, k, n]`` (an expert without rows keeps zeros)."""
    cfg, torch = c.cfg, c.torch
    a, b = c.randn((cfg.rows, cfg.k)), c.randn((cfg.rows, cfg.n))
    ends, offs = _offsets(c)
    out = torch.empty((cfg.experts, cfg.k, cfg.n), device=c.device, dtype=a.dtype)

    def loop():
        out.zero_()
        start = 0
        for e, end in enumerate(ends):
            if end > start:
                torch.mm(a[start:end].t(), b[start:end], out=out[e])
            start = end
        return out

    n = cfg.experts * cfg.k * cfg.n
    looped = Candidate("torch:aten::mm", "per-expert loop", loop, n,
                       note=f"zero fill and {cfg.active} torch.mm calls")
    fn = getattr(torch.nn.functional, "grouped_mm", None) or getattr(torch, "_grouped_mm", None)
    if fn is None or a.dtype != torch.bfloat16:
        return looped
    at = a.t()
    return Candidate("torch:aten::_grouped_mm", "grouped_mm weight gradient", lambda: fn(at, b, offs=offs), n,
                     variants=[looped])


def _min_bytes(cfg: GroupedGemmConfig, ib: int, ob: int) -> int:
    """X read once, the active experts' weights read once, Y written once (bytes): the compulsory
    traffic (Williams et al., "Roofline", CACM 2009); an inactive expert's weights are not read. A
    weight gradient: A and B read once and every expert's ``[k, n]`` written once, zeros for an expert
    without rows included (the whole ``dW`` is the gradient autograd hands the optimizer)."""
    if cfg.weight_grad:
        return ib * cfg.rows * (cfg.k + cfg.n) + ob * cfg.experts * cfg.k * cfg.n
    return ib * (cfg.rows * cfg.k + cfg.active * cfg.k * cfg.n) + ob * cfg.rows * cfg.n


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=GroupedGemmConfig(rows=32, n=1536, k=2048, experts=128),  # Qwen3-30B-A3B, decode b4 top-8
    name="GroupedGemm", config=GroupedGemmConfig, template="grouped_gemm.cpp.j2", case=_grouped_case,
    min_bytes=_min_bytes, torch=_grouped, onnx={}, typed_ops=(), fused_from=(), backward=grouped_gemm_backward,
    aten={"GroupedMatMul": ("aten::_grouped_mm", "aten::grouped_mm", "aten::mm", "transformers::grouped_mm_fallback")},
    nhwc=False, image=False,
    patterns=(Pattern("transformers' eager experts: one expert's rows by its weight slice, every expert", (65, 0),
                      find_eager_experts),),
    contrib={(BENANZA_DOMAIN, "GroupedMatMul"): ContribOp(
        _map_grouped_matmul, _grouped_matmul_shapes, GROUPED_MATMUL_SPEC,
        ("aten::_grouped_mm", "aten::grouped_mm", "aten::mm", "transformers::grouped_mm_fallback")),
             (MS_DOMAIN, "MoE"): ContribOp(_map_ort_moe, _ort_moe_shapes, contrib_doc("MoE"),
                                           ("aten::_grouped_mm", "aten::topk", "aten::softmax", "aten::mm"))})
