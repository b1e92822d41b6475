"""Gemm layers. Gemm / MatMul: ``Y[b] = A[b] @ B[b] (+ C)``, row-major; cublasGemmEx (batched: strided).

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, numel, stored_as
from benanza.kinds.cpp import Case, CppValue, cpp_num, job_init
from benanza.kinds.framework import Candidate, Ctx, functional
from benanza.kinds.elementwise import swiglu_parts
from benanza.kinds.onnx_map import Unsupported, need
from benanza.kinds.patterns import Graph, Node, Pattern


@dataclass(frozen=True)
class GemmConfig(LayerConfig):
    """Gemm / MatMul: ``Y[b] = A[b] @ B[b] (+ C)``, row-major; cublasGemmEx (batched: strided).

    m, n, k: the product's sizes; batch_count: number of independent products (1 for Gemm; stored as
    ``batch`` in the canonical parameters, so keys stay those of earlier databases; not the model's
    batch, which a GEMM folds into m);
    trans_a/trans_b: ONNX transA/transB; bias: Gemm's C input, "none", "c" (a length-n vector,
    C of shape (n,) or (1, n): the bias of a fully connected layer) or "c_full" (any other C that
    broadcasts to (m, n)). Timed as beta = 1 onto an output that holds C (cublasGemmEx and
    cublasLtMatmul) and, for "c", also as cuBLASLt's CUBLASLT_EPILOGUE_BIAS.
    FLOPs: 2*batch_count*m*n*k (+ batch_count*m*n for the bias).
    """

    kind: ClassVar[str] = "Gemm"
    tensor_cores: ClassVar[bool] = True
    m: int
    n: int
    k: int
    batch_count: int = field(default=1, metadata=stored_as("batch"))
    trans_a: bool = False
    trans_b: bool = False
    bias: str = "none"

    def input_shapes(self):
        a = (self.k, self.m) if self.trans_a else (self.m, self.k)
        b = (self.n, self.k) if self.trans_b else (self.k, self.n)
        if self.batch_count > 1:
            return [(self.batch_count,) + a, (self.batch_count,) + b]
        return [a, b]

    def output_shape(self):
        return ((self.batch_count,) if self.batch_count > 1 else ()) + (self.m, self.n)

    def flops(self):
        return 2 * self.batch_count * self.m * self.n * self.k + (
            self.batch_count * self.m * self.n if self.bias != "none" else 0)

    def describe(self):
        t = ("T" if self.trans_a else "N") + ("T" if self.trans_b else "N")
        b = f"{self.batch_count}x" if self.batch_count > 1 else ""
        c = {"none": "", "c": " +C", "c_full": " +C(full)"}.get(self.bias, f" +{self.bias}")
        return f"Gemm({b}m{self.m} n{self.n} k{self.k} {t}{c})"


def _map_gemm(node, ctx, attrs):
    a = need(ctx.shape(node.input[0]), "input A")
    b = need(ctx.shape(node.input[1]), "input B")
    if len(a) != 2 or len(b) != 2:
        raise Unsupported("Gemm operands must be 2-D")
    ta, tb = bool(attrs.get("transA", 0)), bool(attrs.get("transB", 0))
    m, k = (a[1], a[0]) if ta else (a[0], a[1])
    k2, n = (b[1], b[0]) if tb else (b[0], b[1])
    if k != k2:
        raise Unsupported(f"inner dimensions differ ({k} vs {k2})")
    has_c = len(node.input) > 2 and bool(node.input[2]) and float(attrs.get("beta", 1.0)) != 0.0
    bias = "none"
    if has_c:
        c = ctx.shape(node.input[2])
        # a per-output-feature vector (the bias of a fully connected layer) or any other C
        bias = "c" if c is None or tuple(c) in ((n,), (1, n)) else "c_full"
    return GemmConfig(m=m, n=n, k=k, batch_count=1, trans_a=ta, trans_b=tb, bias=bias)


def _map_matmul(node, ctx, attrs):
    a = list(need(ctx.shape(node.input[0]), "input A"))
    b = list(need(ctx.shape(node.input[1]), "input B"))
    if not a or not b:
        raise Unsupported("MatMul of a scalar")
    if len(a) == 1:
        a = [1] + a
    if len(b) == 1:
        b = b + [1]
    m, k = a[-2], a[-1]
    k2, n = b[-2], b[-1]
    if k != k2:
        raise Unsupported(f"inner dimensions differ ({k} vs {k2})")
    ba, bb = a[:-2], b[:-2]
    if math.prod(bb) == 1:
        # B shared by every row block: one GEMM with M = prod(A's leading dims)
        return GemmConfig(m=m * math.prod(ba), n=n, k=k)
    r = max(len(ba), len(bb))
    ba = [1] * (r - len(ba)) + ba
    bb = [1] * (r - len(bb)) + bb
    if ba == bb:
        return GemmConfig(m=m, n=n, k=k, batch_count=math.prod(ba))
    raise Unsupported(f"batched MatMul with partially broadcast batch dims {ba} x {bb}")


@dataclass(frozen=True)
class GemmCase(Case):
    """One row of ``templates/gemm.cpp.j2``'s case table: the fields of its C++ ``GemmCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    m: CppValue
    n: CppValue
    k: CppValue
    batch: CppValue
    trans_a: CppValue
    trans_b: CppValue
    bias: CppValue


def gemm_case(cfg: GemmConfig, job: Job) -> GemmCase:
    return GemmCase(job=job_init(job), m=cfg.m, n=cfg.n, k=cfg.k, batch=cfg.batch_count, trans_a=cpp_num(cfg.trans_a), trans_b=cpp_num(cfg.trans_b), bias={"none": 0, "c": 1}.get(cfg.bias, 2))


def gemm_fn(c: Ctx, g: GemmConfig):
    """(fn, call) of a GEMM as PyTorch runs it: F.linear (weights (n, k), bias epilogue) for one
    product, torch.matmul / baddbmm for a batch of them."""
    F, torch = functional(c), c.torch
    a_shape, b_shape = g.input_shapes()
    a = c.randn(a_shape)
    a_eff = a.transpose(-1, -2) if g.trans_a else a
    if g.batch_count == 1:
        w = c.randn((g.n, g.k))  # nn.Linear's weight layout (a weight's layout is free)
        if g.bias == "c_full":
            cmat = c.randn((g.m, g.n))
            return (lambda: torch.addmm(cmat, a_eff, w.t())), "torch:aten::addmm"
        bias = c.randn((g.n,)) if g.bias == "c" else None
        return (lambda: F.linear(a_eff, w, bias)), "torch:aten::linear"
    b = c.randn(b_shape)
    b_eff = b.transpose(-1, -2) if g.trans_b else b
    if g.bias != "none":
        cmat = c.randn((g.n,) if g.bias == "c" else (g.batch_count, g.m, g.n))
        cb = cmat.expand(g.batch_count, g.m, g.n)
        return (lambda: torch.baddbmm(cb, a_eff, b_eff)), "torch:aten::baddbmm"
    return (lambda: torch.matmul(a_eff, b_eff)), "torch:aten::bmm"


def _gemm(c: Ctx) -> Candidate:
    fn, call = gemm_fn(c, c.cfg)
    return Candidate(call, "default", fn, numel(c.cfg.output_shape()))


def gemm_gradients(cfg: GemmConfig) -> tuple[GemmConfig, GemmConfig]:
    """The data gradients of ``Y = op(A) @ op(B)`` as GEMMs of this kind: ``(dA, dB)``, each of A's and
    B's stored shape (:meth:`GemmConfig.input_shapes`) and each with the forward's FLOPs less the
    bias's (2*batch_count*m*n*k), batch_count kept (the gradients of a batch of products are a
    batch of products). In each the first operand and the second are, in order:

    - dA, trans_a False: ``dA = dY @ op(B)^T`` (m x k; inner n): operands dY (m x n) and B, with
      ``trans_b = not trans_b``; trans_a True: ``dA = op(B) @ dY^T`` (k x m; inner n): operands B
      (``trans_a = trans_b``) and dY (``trans_b = True``).
    - dB, trans_b False: ``dB = op(A)^T @ dY`` (k x n; inner m): operands A (``trans_a = not
      trans_a``) and dY; trans_b True: ``dB = dY^T @ op(A)`` (n x k; inner m): operands dY
      (``trans_a = True``) and A (``trans_b = trans_a``).

    The chain rule of a matrix product (d(op(A)) = dY op(B)^T, d(op(B)) = op(A)^T dY), transposed back
    where op transposes. For a fully connected layer ``Y = X W^T`` (ONNX Gemm transB=1, torch's
    F.linear) this is PyTorch's ``AddmmBackward0``/``MmBackward0`` (tools/autograd/derivatives.yaml,
    ``mm_mat1_backward``/``mm_mat2_backward``): the data gradient ``dX = dY @ W`` in NN and the weight
    gradient ``dW = dY^T @ X`` (``grad.t().mm(input)``), the transposed-A form PyTorch passes to
    cuBLAS. The gradients have no bias term (bias "none")."""
    m, n, k, ta, tb = cfg.m, cfg.n, cfg.k, cfg.trans_a, cfg.trans_b
    if ta:
        da = GemmConfig(m=k, n=m, k=n, batch_count=cfg.batch_count, trans_a=tb, trans_b=True)
    else:
        da = GemmConfig(m=m, n=k, k=n, batch_count=cfg.batch_count, trans_a=False, trans_b=not tb)
    if tb:
        db = GemmConfig(m=n, n=k, k=m, batch_count=cfg.batch_count, trans_a=True, trans_b=ta)
    else:
        db = GemmConfig(m=k, n=n, k=m, batch_count=cfg.batch_count, trans_a=not ta, trans_b=False)
    return da, db


def gradient_operands(cfg: GemmConfig) -> tuple[tuple[str, str], tuple[str, str]]:
    """Which tensors the gradient GEMMs of :func:`gemm_gradients` read, in their operand order: for dA
    and for dB, a pair of ``"A"``, ``"B"`` (the forward's operands, as stored) and ``"dY"`` (the
    gradient of Y, Y's shape)."""
    return (("B", "dY") if cfg.trans_a else ("dY", "B")), (("dY", "A") if cfg.trans_b else ("A", "dY"))


def b_is_weight(cfg: GemmConfig) -> bool:
    """Whether the backward counts B as a weight (its gradient in phase ``backward_weight``) rather than
    an activation (``backward_data``). A config does not know which operand is an initializer (one
    config serves every node with its shapes), so this is the layout ONNX exporters give weights:
    one product (batch_count 1: ONNX Gemm's B, a fully connected layer's weight, or a MatMul whose B
    is shared by every row block, torch.onnx's export of nn.Linear as MatMul(X, W^T)) has B as its
    weight; a batch of products (batch_count > 1: attention's Q K^T and P V, where both operands carry
    the batch) has two activations. A is an activation in both. A MatMul of two activations at
    batch_count 1 (attention at model batch 1 with one head) is then counted in backward_weight: the
    same GEMM, in another phase."""
    return cfg.batch_count == 1


def gemm_backward(cfg: GemmConfig) -> tuple:
    """The backward calls of a Gemm / MatMul layer (``Kind.backward``): the gradient of A
    (``backward_data``), the gradient of B (``backward_weight`` when B is the weight,
    :func:`b_is_weight`, else ``backward_data``), both as GEMMs of this kind (:func:`gemm_gradients`),
    and for a bias vector C ("c") its gradient, dY summed over the m rows (and the batch), as a
    ``ReduceSum`` of the Reduce kind (``backward_weight``): what PyTorch's AddmmBackward0 runs for
    the bias (``grad.sum(0)`` through ``sum_to``). A full C ("c_full") has no call: its shape beyond
    "not a vector" is not in the config, and the gradient of a C of Y's shape is dY itself."""
    da, db = gemm_gradients(cfg)
    calls = [("backward_data", da), ("backward_weight" if b_is_weight(cfg) else "backward_data", db)]
    bias = bias_gradient(cfg)
    if bias is not None:
        calls.append(("backward_weight", bias))
    return tuple(calls)


def bias_gradient(cfg: GemmConfig):
    """The gradient of a bias vector C ("c", length n) as a Reduce: ``ReduceSum`` of dY (Y's shape)
    over every axis but the last, to (1, ..., n). None for no bias, a full C ("c_full", see
    :func:`gemm_backward`), or when dY has one row (m = 1, batch_count 1: the gradient is dY itself)."""
    from benanza.kinds.reduce import ReduceConfig

    if cfg.bias != "c" or cfg.m * cfg.batch_count == 1:
        return None
    y = cfg.output_shape()
    return ReduceConfig(op="sum", x=y, y=tuple(1 for _ in y[:-1]) + (cfg.n,))


def _min_bytes(cfg: GemmConfig, ib: int, ob: int) -> int:
    """A and B read once, C (the bias: a row vector or a matrix) read once, Y written once (bytes)."""
    c = 0 if cfg.bias == "none" else (cfg.n if cfg.bias == "c" else cfg.m * cfg.n)
    a, b = cfg.input_shapes()
    return ib * (numel(a) + numel(b)) + ob * (numel(cfg.output_shape()) + c)


# ------------------------------------------------------------------------ fusion patterns

class _Gating:
    """``pat`` for :func:`benanza.kinds.elementwise.swiglu_parts` with the gating's own layers (in the fusion candidate
    :func:`benanza.kinds.elementwise.find_swiglu` made of them) counted as free."""

    def __init__(self, pat: Graph, mul: Node):
        self.pat, self.group = pat, mul.fusion

    def free(self, ly):
        return ly is not None and self.group is not None and ly.fusion == self.group

    def __getattr__(self, name):
        return getattr(self.pat, name)


def find_gate_up_gemm(pat: Graph, mul: Node):
    """SwiGLU's gate and up projections (two MatMul / Gemm layers of one config reading the same
    input, each with its own weight, found through the gating :func:`benanza.kinds.elementwise.find_swiglu` took) as one GEMM
    of the concatenated weights: the same m and k, n = 2 * intermediate (the "gate_up_proj" of
    vLLM's MergedColumnParallelLinear and of transformers' Phi-3; the gating then reads the two
    halves of its output). Both products' outputs must be read by the gating only."""
    parts = swiglu_parts(_Gating(pat, mul), mul)
    if parts is None:
        return None
    sig, silu, gate_t, up_t = parts
    gate, up = pat.made_by(gate_t), pat.made_by(up_t)
    for mm, readers in ((gate, {sig.index, silu.index}), (up, {mul.index})):
        if not pat.free(mm) or mm.op_type not in ("MatMul", "Gemm") or mm.status != "benchmark" \
                or not isinstance(mm.config, GemmConfig) or len(mm.inputs) != 1 or len(mm.static_inputs) < 1 \
                or {ly.index for ly in pat.users(mm.outputs[0])} != readers or mm.outputs[0] in pat.graph_outputs:
            return None
    if gate.inputs != up.inputs or gate.config != up.config or gate.static_inputs == up.static_inputs:
        return None
    g = gate.config
    return [gate.index, up.index], dataclasses.replace(g, n=2 * g.n)


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=GemmConfig(m=1, n=1000, k=440, batch_count=1, trans_a=False, trans_b=True, bias='c'),
    name="Gemm", config=GemmConfig, template="gemm.cpp.j2", case=gemm_case, min_bytes=_min_bytes,
    torch=_gemm, onnx={"Gemm": _map_gemm, "MatMul": _map_matmul},  # "Einsum": benanza.kinds.einsum.ONNX
    typed_ops=(), fused_from=(),
    aten={"Gemm": ('aten::addmm', 'aten::linear', 'aten::matmul', 'aten::mm'), "MatMul": ('aten::addmm', 'aten::baddbmm', 'aten::bmm', 'aten::einsum', 'aten::linear', 'aten::matmul', 'aten::mm'), "Einsum": ('aten::einsum', 'aten::outer')},
    patterns=(Pattern("SwiGLU's gate and up MatMuls of one input", (110, 0), find_gate_up_gemm),),
    nhwc=False, image=False, backward=gemm_backward)
