"""SDPA backward layers: the gradients of a fused scaled-dot-product attention
(:class:`~benanza.kinds.sdpa.SdpaConfig`) in a training step (docs/training.md). The SDPA kind's backward is
two calls:

- phase ``forward``: the layer's training-mode forward, the same SDPA config with ``stats`` (cuDNN's
  sdpa with ``set_generate_stats(true)``; PyTorch's SDPA on inputs that require grad): it also writes
  the softmax statistics (the logsumexp of every row) the backward reads, so in a training step it
  replaces the inference call;
- phase ``backward_data``: :class:`SdpaBwdConfig`, one call that gives dQ, dK and dV (cuDNN's
  sdpa_backward node outputs the three; PyTorch's fused attention backward ops too). Attention has no
  weights: no ``backward_weight`` call (the projections around it are GEMMs with their own backward).

The whole slice of the kind: its config, the case its template renders, its minimum bytes, its PyTorch
candidate and its place as the forward kind's backward (:class:`benanza.kinds.base.Kind`). It maps no
ONNX op: processing makes its configs from the forward layers (``Kind.backward`` of SDPA).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from benanza.kinds.base import OPTIONAL, Job, Kind, LayerConfig, Shape, numel
from benanza.kinds.cpp import Case, CppValue, c_array, cpp_num, job_init
from benanza.kinds.framework import Candidate, Ctx, functional
from benanza.kinds.sdpa import (SDPA_MASK_CPP, SDPA_MASKS, SdpaConfig, backend_variants, describe_attention,
                                torch_mask, view_strides, with_autograd)

#: matrix products of the backward per (batch, head), in units of 2*s_q*s_kv*d (FLOPs): the scores
#: S = Q K^T recomputed, dQ = dS K and dK = dS^T Q (three of d), dP = dO V^T and dV = P^T dO (two of
#: d_v): FlashAttention-2 (Dao 2023, Algorithm 2), whose backward is 2.5x the forward's 2 products
#: when d = d_v (its Section 4.1: "the backward pass ... 2.5 x" the forward FLOPs)
MATMULS_D, MATMULS_DV = 3, 2
#: elementwise operations per score element: P = exp(scale * S (+ mask) - L) recomputed (scale,
#: mask, subtract, exp: 4), dS = P * (dP - D) * scale (3); the forward counts 7 likewise
ELEMENTWISE_PER_SCORE = 7


@dataclass(frozen=True)
class SdpaBwdConfig(LayerConfig):
    """The backward of fused attention ``O = softmax(scale * Q K^T (+ mask)) V`` (the forward config's
    fields, see :class:`~benanza.kinds.sdpa.SdpaConfig`).

    Inputs: Q (b, h, s_q, d), K (b, h_kv, s_kv, d), V (b, h_kv, s_kv, d_v), O and dO (b, h, s_q, d_v),
    the forward's softmax statistics (b, h, s_q, 1) float32 (and the additive bias of mask "bias", a
    constant: no dBias). Outputs: dQ (Q's shape; :meth:`output_shape`), dK and dV (K's and V's shapes)
    beside it. GQA (h_kv < h, h a multiple of h_kv): dK and dV sum the gradients of the h / h_kv query
    heads that share each K/V head. Layouts: Q, K, V, O read with the forward's element strides; dQ,
    dK, dV and dO have the strides of Q, K, V and O (PyTorch allocates a gradient like its input).
    mask: "none", "causal" (top-left aligned, as the forward), "causal_bottom_right" (key j visible
    to query i when j <= i + s_kv - s_q, as the forward), "bias".

    Timed: cudnn-frontend ``Graph::sdpa_backward`` (cuDNN developer guide, "Scaled Dot Product
    Attention Backward"), every engine config of heuristics modes A, B and the fallback list; cuDNN's
    engines take FP16/BF16 data only, so fp32/tf32 jobs record cuDNN's answer (not_supported) and
    PyTorch's backward is the layer's measurement there. The statistics are computed from Q and K before
    timing (``benanza::sdpa_stats_kernel``), as the training forward saves them.
    FLOPs: ``2*b*h*s_q*s_kv*(3*d + 2*d_v) + 7*b*h*s_q*s_kv + 2*b*h*s_q*d_v`` (:data:`MATMULS_D`,
    :data:`MATMULS_DV`, :data:`ELEMENTWISE_PER_SCORE`, and D = rowsum(dO * O)); a causal mask is
    counted in full, as the forward counts it.
    """

    kind: ClassVar[str] = "SdpaBwd"
    tensor_cores: ClassVar[bool] = True
    b: int
    h: int
    h_kv: int
    s_q: int
    s_kv: int
    d: int
    d_v: int
    scale: float
    mask: str = "none"
    bias: Shape = ()
    #: element strides of Q, K, V and O over (b, h, s, d) (the forward's views); () = packed
    q_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    k_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    v_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)
    o_strides: Shape = dataclasses.field(default=(), metadata=OPTIONAL)

    def __post_init__(self):
        if self.mask not in SDPA_MASKS:
            raise ValueError(f"SDPA backward: mask {self.mask!r} is not one of {', '.join(SDPA_MASKS)}")
        if self.h_kv <= 0 or self.h % self.h_kv:
            raise ValueError(f"SDPA backward: h {self.h} is not a multiple of the K/V heads h_kv {self.h_kv}")

    @classmethod
    def of(cls, fwd: SdpaConfig) -> "SdpaBwdConfig":
        """The backward call of the forward SDPA ``fwd`` (its heads, GQA, mask and layouts kept)."""
        return cls(b=fwd.b, h=fwd.h, h_kv=fwd.kv_heads, s_q=fwd.s_q, s_kv=fwd.s_kv, d=fwd.d, d_v=fwd.d_v,
                   scale=fwd.scale, mask=fwd.mask, bias=tuple(fwd.bias), q_strides=tuple(fwd.q_strides),
                   k_strides=tuple(fwd.k_strides), v_strides=tuple(fwd.v_strides), o_strides=tuple(fwd.o_strides))

    def shapes(self) -> tuple[Shape, Shape, Shape, Shape]:
        """Q, K, V, O shapes over (b, heads, s, d)."""
        return ((self.b, self.h, self.s_q, self.d), (self.b, self.h_kv, self.s_kv, self.d),
                (self.b, self.h_kv, self.s_kv, self.d_v), (self.b, self.h, self.s_q, self.d_v))

    def strides(self) -> tuple[Shape, Shape, Shape, Shape]:
        """(Q, K, V, O) element strides over (b, h, s, d): the given ones or packed."""
        return view_strides(self, self.shapes())

    def stats_shape(self) -> Shape:
        return (self.b, self.h, self.s_q, 1)

    def input_shapes(self):
        q, k, v, o = self.shapes()
        return [q, k, v, o, o, self.stats_shape()]  # Q, K, V, O, dO, Stats

    def output_shape(self):
        return self.shapes()[0]  # dQ (dK and dV beside it)

    def flops(self):
        s = self.b * self.h * self.s_q * self.s_kv
        return (2 * s * (MATMULS_D * self.d + MATMULS_DV * self.d_v) + ELEMENTWISE_PER_SCORE * s
                + 2 * self.b * self.h * self.s_q * self.d_v)

    def describe(self):
        return describe_attention("SdpaBwd", self)


def sdpa_backward(cfg: SdpaConfig) -> tuple:
    """``Kind.backward`` of the SDPA kind: the training-mode forward (the config with ``stats``: it saves
    the softmax statistics) and one ``backward_data`` call for dQ, dK and dV. Raises
    NotImplementedError for a sliding window, an attention sink or a logit soft-cap (no backward config
    carries them yet): the group's layers then take their own backward calls, never a backward without
    the term."""
    if cfg.window or cfg.sink or cfg.softcap:
        raise NotImplementedError("SDPA backward with a sliding window, an attention sink or a logit soft-cap is "
                                  "not benchmarked")
    return (("forward", dataclasses.replace(cfg, stats=True)), ("backward_data", SdpaBwdConfig.of(cfg)))


def _min_bytes(cfg: SdpaBwdConfig, ib: int, ob: int) -> int:
    """Q, K, V, O and dO read once (``ib`` bytes per element), the statistics (float32) and, for mask
    "bias", the bias read once, dQ, dK and dV written once (``ob``) (bytes): the compulsory traffic
    (Williams et al., "Roofline", CACM 2009)."""
    q, k, v, o = (numel(s) for s in cfg.shapes())
    bias = numel(cfg.bias) if cfg.mask == "bias" else 0
    return ib * (q + k + v + 2 * o + bias) + 4 * numel(cfg.stats_shape()) + ob * (q + k + v)


@dataclass(frozen=True)
class SdpaBwdCase(Case):
    """One row of ``templates/sdpa_backward.cpp.j2``'s case table: the fields of its C++ ``SdpaBwdCase``
    in order, as C++ literals (``tests/test_kinds_registry.py`` checks the order against the template)."""

    b: CppValue
    h: CppValue
    h_kv: CppValue
    s_q: CppValue
    s_kv: CppValue
    d: CppValue
    d_v: CppValue
    scale: CppValue
    mask: CppValue
    bias: CppValue
    strides: CppValue


def _case(cfg: SdpaBwdConfig, job: Job) -> SdpaBwdCase:
    bias = list(cfg.bias) if cfg.mask == "bias" else [1, 1, 1, 1]
    strides = [s for st in cfg.strides() for s in st]
    return SdpaBwdCase(job=job_init(job), b=cfg.b, h=cfg.h, h_kv=cfg.h_kv, s_q=cfg.s_q, s_kv=cfg.s_kv, d=cfg.d,
                       d_v=cfg.d_v, scale=cpp_num(float(cfg.scale)), mask=SDPA_MASK_CPP[cfg.mask],
                       bias=c_array(bias, 4, 1), strides=c_array(strides, 16))


def _torch(c: Ctx) -> Candidate:
    """The backward autograd runs for ``F.scaled_dot_product_attention`` (``enable_gqa`` with h_kv < h):
    the forward runs once in the set-up on Q, K, V that require grad (PyTorch picks its backend, flash,
    memory-efficient, cuDNN or math, as in training, and saves what its backward reads), then each call
    is ``torch.autograd.grad(O, (Q, K, V), dO, retain_graph=True)``: only the backward is timed, dQ
    returned. Q, K, V, O and dO have the forward's layouts. Its call names the forward op whose
    backward autograd runs (algorithm ``autograd backward``): the aten backward op is the backend's
    (``_scaled_dot_product_{flash,efficient,cudnn}_attention_backward`` or the math decomposition's).
    Each backend forced (:data:`benanza.kinds.sdpa.SDPA_BACKENDS`) is a variant
    (:attr:`Candidate.variants`, call ``torch:<the backend's forward op>_backward``): its set-up forward
    runs at its first call under ``sdpa_kernel``, so autograd records that backend's backward;
    not_supported with PyTorch's reason where the backend refuses the forward."""
    cfg, torch, F = c.cfg, c.torch, functional(c)
    shapes = cfg.shapes()
    scale = float(cfg.scale)
    gqa = {"enable_gqa": True} if cfg.h_kv != cfg.h else {}

    def view(shape, strides, grad):
        extent = 1 + sum((d - 1) * s for d, s in zip(shape, strides))
        base = c.randn((extent,))
        return (base.requires_grad_() if grad else base).as_strided(shape, strides)

    def setup(mask, causal):
        qs, ks, vs, os_ = cfg.strides()
        q, k, v = (view(s, st, True) for s, st in zip(shapes[:3], (qs, ks, vs)))
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, **gqa)
        return {"qkv": (q, k, v), "o": o, "do": view(shapes[3], os_, False)}
    mask, causal = torch_mask(c, cfg)
    t = with_autograd(torch, setup)(mask, causal)

    def run():
        return torch.autograd.grad(t["o"], t["qkv"], t["do"], retain_graph=True)[0]
    note = ("the backward of F.scaled_dot_product_attention through autograd (dQ, dK, dV); the forward "
            "runs once in the set-up" + (", GQA (enable_gqa)" if gqa else ""))
    cand = Candidate("torch:aten::scaled_dot_product_attention", "autograd backward", with_autograd(torch, run),
                     numel(cfg.output_shape()), note, {"gqa": bool(gqa)})

    def make(mask, causal):
        held = {}

        def forced():  # the set-up forward at the first call, under the backend (under_backend)
            if not held:
                held.update(setup(mask, causal))
            return torch.autograd.grad(held["o"], held["qkv"], held["do"], retain_graph=True)[0]
        return with_autograd(torch, forced)
    cand.variants = backend_variants(c, make, mask, causal, note.replace("in the set-up", "at the first call"),
                                     cand.out_numel, {"gqa": bool(gqa)}, "_backward", "autograd backward")
    return cand


#: this kind's registry entry (:data:`benanza.kinds.REGISTRY`)
KIND = Kind(
    example=SdpaBwdConfig(b=1, h=12, h_kv=12, s_q=197, s_kv=197, d=64, d_v=64, scale=0.125,
                          q_strides=(151296, 64, 2304, 1), k_strides=(151296, 64, 2304, 1),
                          v_strides=(151296, 64, 2304, 1), o_strides=(151296, 64, 768, 1)),
    name="SdpaBwd", config=SdpaBwdConfig, template="sdpa_backward.cpp.j2", case=_case,
    min_bytes=_min_bytes, torch=_torch, backward_of={"SDPA": sdpa_backward},
    nhwc=False, image=False)
