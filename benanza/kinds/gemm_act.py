"""GemmAct layers. Fused Gemm/MatMul (+ bias) -> activation: ``Y = act(A @ B (+ C))``, the MLP block of a

The whole slice of the kind: its config, the ONNX ops it maps, the case its template renders, its
minimum bytes, its PyTorch candidate and the ATen ops of the profile join (:class:`benanza.kinds.base.Kind`).
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.cpp import CppValue
from benanza.kinds.base import Job, Kind, LayerConfig, io_bytes, numel
from benanza.kinds.framework import Candidate, Ctx, NotSupported, functional
from benanza.kinds.gemm import GemmCase, GemmConfig, gemm_case, gemm_fn
from benanza.kinds.gemm_act_backward import gemm_act_backward
from benanza.kinds.activation import ActivationConfig
from benanza.kinds.patterns import Graph, Node, Pattern
from benanza.kinds.unary import UNARY_OPS, UnaryConfig, find_gelu


#: activations a GemmAct fusion candidate applies after the matmul (+ bias)
GEMM_ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


@dataclass(frozen=True)
class GemmActConfig(LayerConfig):
    """Fused Gemm/MatMul (+ bias) -> activation: ``Y = act(A @ B (+ C))``, the MLP block of a
    transformer (Linear -> GELU) or a fully connected layer -> Relu.

    gemm: the product (its ``bias`` is "c" when a Gemm's C or the per-output-feature bias Add after
    a MatMul is part of the candidate); activation: "relu", "gelu" (erf form: ONNX Gelu
    approximate='none', or the decomposed Div/Erf/Add/Mul/Mul) or "gelu_tanh".
    Timed as one cuDNN graph, matmul -> pointwise ADD (bias) -> RELU_FWD / GELU_FWD /
    GELU_APPROX_TANH_FWD, every engine config; and as cublasLtMatmul with the epilogue
    CUBLASLT_EPILOGUE_RELU_BIAS / GELU_BIAS (RELU / GELU without a bias; cuBLASLt's GELU is the
    tanh approximation, so for an erf GELU it is a same-work stand-in and says so).
    Covers the two or three ONNX layers of the candidate (or the GEMM, bias Add and the five of a
    decomposed GELU), so its measurements are only compared with their sum.
    FLOPs: the GEMM's (bias included) + per output element 1 (relu) or the GELU's count of
    :data:`UNARY_OPS`.
    """

    kind: ClassVar[str] = "GemmAct"
    tensor_cores: ClassVar[bool] = True
    gemm: GemmConfig
    activation: str  # a member of GEMM_ACTIVATIONS

    def input_shapes(self):
        return self.gemm.input_shapes()

    def output_shape(self):
        return self.gemm.output_shape()

    def flops(self):
        per = 1 if self.activation == "relu" else UNARY_OPS[self.activation][1]
        return self.gemm.flops() + per * numel(self.output_shape())

    def describe(self):
        return self.gemm.describe().replace("Gemm(", "GemmAct(", 1)[:-1] + f" +{self.activation})"


_GEMM_ACT = {"relu": ("MatmulAct::RELU", 1), "gelu": ("MatmulAct::GELU", 3), "gelu_tanh": ("MatmulAct::GELU_TANH", 2)}


@dataclass(frozen=True)
class GemmActCase(GemmCase):
    """One row of ``templates/gemm_act.cpp.j2``'s case table: the fields of its C++ ``GemmActCase`` in order,
    as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    act: CppValue
    lt_activation: CppValue


def _gemm_act_case(cfg: GemmActConfig, job: Job) -> GemmActCase:
    act, lt_activation = _GEMM_ACT[cfg.activation]
    return GemmActCase(**vars(gemm_case(cfg.gemm, job)), act=act, lt_activation=lt_activation)


def _gemm_act(c: Ctx) -> Candidate:
    fn, call = gemm_fn(c, c.cfg.gemm)
    F = functional(c)
    act = c.cfg.activation
    post = {"relu": ("relu", lambda y: F.relu(y)), "gelu": ("gelu", lambda y: F.gelu(y)),
            "gelu_tanh": ("gelu", lambda y: F.gelu(y, approximate="tanh"))}
    if act not in post:
        raise NotSupported(f"activation {act}")
    name, f = post[act]
    return Candidate(f"{call}+{name}", "default", lambda: f(fn()), numel(c.cfg.output_shape()))


# ------------------------------------------------------------------------ fusion patterns

def _bias_vector_add(pat: Graph, ly: Node | None, tensor: str, n: int) -> bool:
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


def find_gemm_act(pat: Graph, mm: Node):
    """Gemm/MatMul [-> Add(bias vector)] -> Relu | Gelu | decomposed erf-GELU: the product, its bias
    and the activation as one call (cuDNN graph matmul -> add -> act; cuBLASLt bias+act epilogue);
    and MatMul -> Add(bias vector) without an activation as one GEMM with a bias (GemmConfig with
    bias "c": cublasGemmEx onto C, cuBLASLt's BIAS epilogue)."""
    if mm.op_type not in ("Gemm", "MatMul") or mm.status != "benchmark" or not pat.free(mm) \
            or not isinstance(mm.config, GemmConfig) or mm.config.batch_count != 1:
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
        if isinstance(cfg, ActivationConfig) and cfg.mode == "relu" and math.prod(cfg.shape) == numel:
            return chain + [nxt.index], GemmActConfig(gemm=gemm, activation="relu")
        if isinstance(cfg, UnaryConfig) and cfg.op in ("gelu", "gelu_tanh") and math.prod(cfg.shape) == numel:
            return chain + [nxt.index], GemmActConfig(gemm=gemm, activation=cfg.op)
    # a decomposed erf-GELU reads the output twice (x / sqrt 2 and x * 0.5 or x * (1 + erf)); a graph
    # output has no GELU after it, but a bias Add that writes it is still one GEMM with a bias (a language
    # model's output Linear, exported as MatMul -> Add on 3-D inputs: torch's addmm with a bias epilogue)
    if out in pat.graph_outputs:
        return (chain, gemm) if len(chain) > 1 else None
    for u in pat.users(out):
        erf = pat.sole_user(u) if pat.free(u) else None
        hit = find_gelu(pat, erf) if erf is not None else None
        if hit is None:
            continue
        gchain, _ = hit
        head = pat.layers[gchain[0]]
        readers = {ly.index for ly in pat.users(out)}
        if head.inputs[0] != out or not readers <= set(gchain) or math.prod(pat.layers[gchain[0]].output_shapes[0]) != numel:
            continue
        return chain + list(gchain), GemmActConfig(gemm=gemm, activation="gelu")
    # a MatMul and the Add of its bias vector: one GEMM with a bias epilogue (torch's Linear)
    return (chain, gemm) if len(chain) > 1 else None


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=GemmActConfig(gemm=GemmConfig(m=1, n=4096, k=4096, batch_count=1, trans_a=False, trans_b=True, bias='c'),
        activation='relu'),
    name="GemmAct", config=GemmActConfig, template="gemm_act.cpp.j2", case=_gemm_act_case, min_bytes=io_bytes,
    torch=_gemm_act, onnx={},
    typed_ops=(), fused_from=('MatMul', 'Add', 'Gelu'),
    aten={},
    patterns=(Pattern("Gemm/MatMul [-> bias Add] -> Relu/GELU, or -> bias Add", (70, 0), find_gemm_act),),
    nhwc=False, image=False, backward=gemm_act_backward)
