"""Gemm layers. Gemm / MatMul: ``Y[b] = A[b] @ B[b] (+ C)``, row-major; cublasGemmEx (batched: strided).

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from benanza.kinds.base import Job, Kind, LayerConfig, numel, stored_as
from benanza.kinds.cpp import Case, CppValue, cpp_num, job_init
from benanza.kinds.framework import Candidate, Ctx, functional
from benanza.kinds.onnx_map import Unsupported, need


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


def _min_bytes(cfg: GemmConfig, ib: int, ob: int) -> int:
    """A and B read once, C (the bias: a row vector or a matrix) read once, Y written once (bytes)."""
    c = 0 if cfg.bias == "none" else (cfg.n if cfg.bias == "c" else cfg.m * cfg.n)
    a, b = cfg.input_shapes()
    return ib * (numel(a) + numel(b)) + ob * (numel(cfg.output_shape()) + c)


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=GemmConfig(m=1, n=1000, k=440, batch_count=1, trans_a=False, trans_b=True, bias='c'),
    name="Gemm", config=GemmConfig, template="gemm.cpp.j2", case=gemm_case, min_bytes=_min_bytes,
    torch=_gemm, onnx={"Gemm": _map_gemm, "MatMul": _map_matmul},
    typed_ops=(), fused_from=(),
    aten={"Gemm": ('aten::addmm', 'aten::linear', 'aten::matmul', 'aten::mm'), "MatMul": ('aten::addmm', 'aten::baddbmm', 'aten::bmm', 'aten::einsum', 'aten::linear', 'aten::matmul', 'aten::mm')},
    nhwc=False, image=False)
